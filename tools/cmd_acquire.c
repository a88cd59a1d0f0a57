/*
 * tools/cmd_acquire.c - shmlease acquire: a lease for the rest of a shell
 * script, as flock(1)'s file descriptor idiom gives a lock.
 *
 * A lease's holder is alive as long as the table handle it acquired through
 * is open (lib/kind_shm/orphan.c): a tool that acquired and exited would leave a
 * holder proven dead, whose lease the next acquire takes over after the
 * reclaim delay. So the acquire is made by a child, the keeper, which keeps
 * its handle open for as long as the lease is held with that token
 * (released, revoked, expired or taken over: it exits), and tells the
 * parent the outcome through a pipe; the parent prints the token and exits.
 * The keeper neither renews nor releases: the script does, with shmlease
 * renew and release. Killing the keeper lets the lease go, as closing
 * flock's descriptor would.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define KEEP_LOOK_NS   UINT64_C(200000000)  /* how often the keeper looks */
#define KEEP_LOOK_ETCD UINT64_C(1000000000) /* ... on etcd, a request each */

/* What the keeper tells the parent. */
struct outcome {
    int ex; /* the exit code (0: acquired) */
    uint64_t token, gen;
};

static void acquire_usage(FILE *f)
{
    fprintf(f, "usage: shmlease acquire NAME LEASE [--ttl T] [-w|--wait T|inf] [-n] [-E CODE]\n"
               "                        [-s|--shared] [--owner O]\n"
               "Acquires LEASE in table NAME (created with defaults if missing) and prints its\n"
               "token, for a script that holds the lease across several commands:\n"
               "  tok=$(shmlease acquire jobs nightly --ttl 10m) || exit 1\n"
               "  ...; shmlease renew jobs nightly --token \"$tok\" --ttl 10m; ...\n"
               "  shmlease release jobs nightly --token \"$tok\"\n"
               "A keeper process holds the table open for as long as the lease is held with\n"
               "that token (it exits when the lease is released, revoked, expired or taken);\n"
               "it does not renew: renew within the ttl, or the lease expires.\n"
               "  --ttl T       lease time to live (default 10s)\n"
               "  -w, --wait T  wait up to T for the lease; inf or forever: no bound; 0: do not\n"
               "                wait (the default: fail at once if held)\n"
               "  -n, --nonblock  fail at once if the lease is held (the default)\n"
               "  -E, --conflict-exit-code CODE  exit with CODE (0-255, default 1) when the\n"
               "                lease is held or the wait ended\n"
               "  -s, --shared  take the lease shared, beside other shared holders (readers)\n"
               "  --owner O     owner name (default sh-PPID: the calling process)\n"
               "Exit status: 0 with the token on stdout; 1 (or -E CODE) if the lease is held\n"
               "(or --wait timed out); 2 usage error; 3 table problem; 5 system error.\n");
}

static int parse(int argc, char **argv, struct cli_take *k)
{
    memset(k, 0, sizeof *k);
    struct cli_opt opts[CLI_TAKE_OPTS + 1] = {{NULL, NULL, 0, NULL}};
    cli_take_opts(k, opts);
    static const char *const names[] = {"NAME", "LEASE", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, acquire_usage, opts, names, 2, 0, &ops);
    if (ex)
        return ex;
    k->table = ops.v[0];
    k->lease = ops.v[1];
    return cli_take_check("acquire", k);
}

/* Whether the lease is still held with our token (exclusive or shared). */
static int still_held(shl_table *t, const struct cli_take *a, uint64_t token)
{
    if (!a->shared) {
        shl_lease_info in;
        return shl_stat(t, a->lease, &in) == SHL_OK && in.token == token &&
               in.state == SHL_STATE_HELD;
    }
    shl_lease_detail *d = malloc(sizeof *d);
    int held = 0;
    if (d && shl_inspect(t, a->lease, d) == SHL_OK)
        for (uint32_t i = 0; i < d->nshared && i < SHL_SHARED_MAX; i++)
            held |= d->shared[i].token == token && d->shared[i].state == SHL_STATE_HELD;
    free(d);
    return held;
}

static void nap(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The keeper's life after the acquire: its handle open, nothing else. */
static void keep(shl_table *t, const struct cli_take *a, uint64_t token)
{
    /* Hold no directory of the script's busy (where that fails, the keeper
     * stays where it is, which is harmless). */
    int moved = chdir("/");
    (void)moved;
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) { /* let $(...) see the end of our output */
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
    uint64_t look = cli_etcd_name(a->table) ? KEEP_LOOK_ETCD : KEEP_LOOK_NS;
    while (still_held(t, a, token) && shl_table_check(t) != SHL_EREMOVED)
        nap(look);
    shl_close(t);
}

/* The child: acquires, tells the parent through fd w, then keeps. */
static int keeper(const struct cli_take *a, int w, pid_t parent)
{
    /* Until the parent has the token, its death (Ctrl-C, kill) ends us too. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        return EXIT_SYSTEM;
    /* Nothing of the script's but stdio: a descriptor kept open here would
     * hold what it holds (a flock(1) lock on fd 9) for the keeper's life. */
    if (w > 3)
        close_range(3, (unsigned)w - 1, 0);
    close_range((unsigned)w + 1, ~0U, 0);
    struct outcome o = {0, 0, 0};
    shl_table *t = NULL;
    o.ex = cli_open_or_create("acquire", a->table, &t);
    if (o.ex == 0 && (o.ex = cli_take("acquire", t, a, &o.token, &o.gen)) == 0) {
        prctl(PR_SET_PDEATHSIG, 0);
        setsid(); /* the terminal's signals are the script's, not ours */
    }
    int told = write(w, &o, sizeof o) == (ssize_t)sizeof o;
    close(w);
    if (o.ex == 0 && told)
        keep(t, a, o.token);
    else if (o.ex == 0 && shl_release(t, a->lease, a->owner, o.token) != SHL_OK)
        /* nobody knows the token: let it go, or say how long it stays */
        cli_err("acquire", "'%s' could not be released: it stays held until its ttl ends",
                cli_vis(a->lease));
    if (t && !(o.ex == 0 && told))
        shl_close(t);
    return o.ex;
}

int cmd_acquire(int argc, char **argv)
{
    struct cli_take a;
    int ex = parse(argc, argv, &a);
    if (ex)
        return ex < 0 ? 0 : ex;
    char owner[32];
    if (!a.owner) {
        snprintf(owner, sizeof owner, "sh-%d", (int)getppid());
        a.owner = owner;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        cli_err("acquire", "pipe: %m");
        return EXIT_SYSTEM;
    }
    fflush(NULL);
    pid_t parent = getpid(), child = fork();
    if (child < 0) {
        cli_err("acquire", "fork: %m");
        return EXIT_SYSTEM;
    }
    if (child == 0) {
        close(p[0]);
        _exit(keeper(&a, p[1], parent));
    }
    close(p[1]);
    struct outcome o;
    ssize_t n;
    while ((n = read(p[0], &o, sizeof o)) < 0 && errno == EINTR)
        ;
    close(p[0]);
    if (n != (ssize_t)sizeof o) {
        cli_err("acquire", "the process that acquires died without an answer");
        waitpid(child, NULL, 0);
        return EXIT_SYSTEM;
    }
    if (o.ex != 0) { /* it has said why, and ends */
        waitpid(child, NULL, 0);
        return o.ex;
    }
    printf("%" PRIu64 "\n", o.token);
    return 0;
}
