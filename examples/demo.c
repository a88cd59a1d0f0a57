/*
 * examples/demo.c - the main job of shmlease, told in a few lines.
 *
 * Three forked workers take turns on one lease, "ledger", and write through
 * it. One is paused (SIGSTOP) while it holds the lease, past its expiry;
 * another acquires and writes; the paused one resumes, still believing it
 * holds its old token, and its write is refused by the segment (or, on an
 * etcd table, by etcd).
 *
 *   demo [--keep] [--ls TOOL] [--table NAME] [--kill-leader]
 *       --keep      leave the table for inspection and print its name last
 *       --ls TOOL   end by running `TOOL ls TABLE` (make demo passes the
 *                   shmlease tool), then remove the table
 *       --table NAME  the table to create, e.g. etcd://HOST:PORT,.../demo
 *                   (default: a fresh shared-memory table)
 *       --kill-leader  half-way, ask the etcd cluster's launcher to kill
 *                   the leader (make demo-etcd runs the demo under
 *                   shmlease-cluster, which serves SHMLEASE_CLUSTER_FD)
 *
 * Exit status 0 when the story went as shmlease promises, 1 otherwise.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shmlease.h"

#define MS      UINT64_C(1000000)
#define TTL     (800 * MS)
#define WORKERS 3

static char table[1024];
static const char *enforcer = "the segment";
static const char *ttl_said = "800ms";

struct worker {
    pid_t pid;
    int cmd;   /* parent -> worker */
    int reply; /* worker -> parent */
};

static void say(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *who, const char *fmt, ...)
{
    va_list ap;
    printf("  %-9s ", who);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------ a worker */

struct me {
    shl_table *t;
    char name[24];
    uint64_t token;
    int entries;
};

static int do_acquire(struct me *m)
{
    shl_lease_info h;
    int rc = shl_acquire_ex(m->t, "ledger", m->name, TTL, &m->token, &h);
    if (rc == SHL_EBUSY) {
        say(m->name, "acquire: busy, held by %s with token %" PRIu64 " for %" PRIu64 "ms more",
            h.owner, h.token, h.remaining_ns / MS);
        return 'b';
    }
    if (rc != SHL_OK) {
        say(m->name, "acquire failed: %s", shl_strerror(rc));
        return 'e';
    }
    say(m->name, "acquired ledger: token %" PRIu64 ", ttl %s", m->token, ttl_said);
    return 'k';
}

static int do_write(struct me *m)
{
    char entry[64];
    snprintf(entry, sizeof entry, "entry %d by %s", ++m->entries, m->name);
    int rc = shl_write(m->t, "ledger", m->name, m->token, entry, strlen(entry));
    if (rc == SHL_OK) {
        say(m->name, "wrote \"%s\" with token %" PRIu64 ": accepted", entry, m->token);
        return 'k';
    }
    shl_lease_info now;
    shl_stat(m->t, "ledger", &now);
    say(m->name, "wrote \"%s\" with token %" PRIu64 ": REFUSED by %s (%s)", entry, m->token,
        enforcer, shl_errname(rc));
    say(m->name, "(the lease is held by %s with token %" PRIu64 ")", now.owner, now.token);
    return rc == SHL_ELOST ? 'r' : 'e';
}

static int do_release(struct me *m)
{
    int rc = shl_release(m->t, "ledger", m->name, m->token);
    say(m->name, "released ledger (the next holder gets token %" PRIu64 ")", m->token + 1);
    return rc == SHL_OK ? 'k' : 'e';
}

/* Writes every 200 ms, telling the parent after each accepted write, until a
 * write is refused. The parent pauses it between two of them. */
static int do_keep_writing(struct me *m, int reply)
{
    for (;;) {
        int r = do_write(m);
        if (r != 'k')
            return r;
        char c = 'w';
        if (write(reply, &c, 1) != 1)
            return 'e';
        sleep_ms(200);
    }
}

static int worker_main(int id, int cmd, int reply)
{
    struct me m = {0};
    snprintf(m.name, sizeof m.name, "worker-%d", id);
    if (shl_open(table, NULL, &m.t) != SHL_OK) /* a handle belongs to one process */
        return 1;
    char c;
    while (read(cmd, &c, 1) == 1) {
        char r;
        switch (c) {
        case 'a':
            r = (char)do_acquire(&m);
            break;
        case 'w':
            r = (char)do_write(&m);
            break;
        case 'r':
            r = (char)do_release(&m);
            break;
        case 'l':
            r = (char)do_keep_writing(&m, reply);
            break;
        default:
            shl_close(m.t);
            return 0;
        }
        if (write(reply, &r, 1) != 1)
            return 1;
    }
    shl_close(m.t);
    return 0;
}

/* ------------------------------------------------------------ the story */

static struct worker w[WORKERS + 1];

static char ask(int id, char cmd)
{
    char r = 'e';
    if (write(w[id].cmd, &cmd, 1) != 1 || read(w[id].reply, &r, 1) != 1)
        return 'e';
    return r;
}

/* Starts worker `id`; -1 (after saying why) when it cannot. */
static int spawn(int id)
{
    int c[2], r[2];
    if (pipe(c)) {
        perror("demo: pipe");
        return -1;
    }
    if (pipe(r)) {
        perror("demo: pipe");
        close(c[0]);
        close(c[1]);
        return -1;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        perror("demo: fork");
        close(c[0]);
        close(c[1]);
        close(r[0]);
        close(r[1]);
        return -1;
    }
    if (p == 0) {
        close(c[1]);
        close(r[0]);
        _exit(worker_main(id, c[0], r[1]));
    }
    close(c[0]);
    close(r[1]);
    w[id] = (struct worker){p, c[1], r[0]};
    return 0;
}

/* No longer held: expired in a segment; gone (free) in etcd, whose leader
 * removes an expired holder. */
static int expired(shl_table *t)
{
    shl_lease_info in;
    return shl_stat(t, "ledger", &in) == SHL_OK && in.state != SHL_STATE_HELD;
}

/* Asks the launcher (shmlease-cluster) to kill the etcd leader and says
 * what it did. 1 when it did. */
static int kill_leader(void)
{
    const char *fd = getenv("SHMLEASE_CLUSTER_FD");
    char ans[512];
    ssize_t n = -1;
    if (fd) {
        int s = atoi(fd);
        if (write(s, "kill-leader\n", 12) == 12)
            n = read(s, ans, sizeof ans - 1);
    }
    if (n <= 0) {
        say("demo", "cannot ask for the leader's death: not run by shmlease-cluster");
        return 0;
    }
    ans[n] = '\0';
    ans[strcspn(ans, "\n")] = '\0';
    say("etcd", "%s", ans);
    return strncmp(ans, "killed the leader", 17) == 0;
}

int main(int argc, char **argv)
{
    int keep = 0, kill_lead = 0;
    const char *ls_tool = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--kill-leader") == 0)
            kill_lead = 1;
        else if (strcmp(argv[i], "--ls") == 0 && i + 1 < argc)
            ls_tool = argv[++i];
        else if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
            name = argv[++i];
        else {
            fprintf(stderr, "usage: demo [--keep] [--ls TOOL] [--table NAME] [--kill-leader]\n");
            return 2;
        }
    }
    if (name && strlen(name) >= sizeof table) {
        fprintf(stderr, "demo: table name too long\n");
        return 2;
    }
    if (name)
        snprintf(table, sizeof table, "%s", name);
    else
        snprintf(table, sizeof table, "shmlease-demo-%d", (int)getpid());
    if (strncmp(table, "etcd://", 7) == 0 || strncmp(table, "etcds://", 8) == 0)
        enforcer = "etcd", ttl_said = "800ms (1 s in etcd: whole seconds)";
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.value_size = 64;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(table, &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "demo: cannot create %s: %s\n", table, shl_strerror(rc));
        return 1;
    }
    printf("shmlease demo: table %s, one lease \"ledger\", ttl %s, %d workers\n\n", table, ttl_said,
           WORKERS);
    /* A worker that died makes its pipe refuse writes: an error to report,
     * not a signal that would end the demo before it removes its table. */
    signal(SIGPIPE, SIG_IGN);
    int ok = 1, spawned = 0;
    while (spawned < WORKERS && spawn(spawned + 1) == 0)
        spawned++;
    if (spawned < WORKERS) {
        ok = 0;
        for (int i = 1; i <= spawned; i++) {
            kill(w[i].pid, SIGKILL);
            waitpid(w[i].pid, NULL, 0);
        }
        shl_close(t);
        goto out;
    }

    /* Turns: each worker acquires, writes, releases; tokens go 1, 2. */
    ok &= ask(1, 'a') == 'k' && ask(1, 'w') == 'k' && ask(1, 'r') == 'k';
    ok &= ask(2, 'a') == 'k' && ask(2, 'w') == 'k' && ask(2, 'r') == 'k';

    /* Half-way: the etcd cluster loses its leader. Tokens live in etcd, not
     * in its leader: the story goes on with token 3. */
    if (kill_lead)
        ok &= kill_leader();

    /* worker-3 takes token 3 and keeps writing; it is paused between two
     * writes, holding the lease. */
    ok &= ask(3, 'a') == 'k';
    char c = 'l', r;
    ok &= write(w[3].cmd, &c, 1) == 1 && read(w[3].reply, &r, 1) == 1 && r == 'w';
    kill(w[3].pid, SIGSTOP);
    say("demo", "SIGSTOP worker-3 (pid %d) while it holds token 3", (int)w[3].pid);
    ok &= ask(1, 'a') == 'b';
    for (int waited = 0; !expired(t); waited += 10) {
        if (waited > 100 * (int)(TTL / MS)) { /* worker-3 never held it */
            ok = 0;
            break;
        }
        sleep_ms(10);
    }
    say("demo", "worker-3 sleeps on; its lease expires");
    ok &= ask(1, 'a') == 'k' && ask(1, 'w') == 'k';

    say("demo", "SIGCONT worker-3: it resumes, still believing it holds token 3");
    kill(w[3].pid, SIGCONT);
    while (read(w[3].reply, &r, 1) == 1 && r == 'w')
        ; /* a write it had finished before the stop took hold */
    ok &= r == 'r';

    char value[64];
    size_t len = 0;
    uint64_t vtok = 0;
    ok &= shl_read(t, "ledger", value, sizeof value - 1, &len, &vtok) == SHL_OK;
    value[len] = '\0';
    ok &= ask(1, 'r') == 'k';
    printf("\n");
    say("demo", "final value \"%s\", written with token %" PRIu64 ": %s", value, vtok,
        ok && vtok == 4 ? "no stale write landed" : "UNEXPECTED");
    ok &= vtok == 4;

    for (int i = 1; i <= WORKERS; i++) {
        c = 'q';
        (void)!write(w[i].cmd, &c, 1);
        waitpid(w[i].pid, NULL, 0);
    }
    shl_close(t);
    if (ls_tool) {
        printf("\n$ shmlease ls %s\n", table);
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            execl(ls_tool, "shmlease", "ls", table, (char *)NULL);
            perror("demo: cannot run the tool");
            _exit(127);
        }
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            ok = 0;
    }
out:
    if (keep)
        printf("%s\n", table);
    else
        shl_unlink(table);
    return ok ? 0 : 1;
}
