/*
 * tools/cmd_run.c - shmlease run: run a command while holding a lease.
 *
 * Like flock(1), with a lease instead of a file lock: acquire (waiting if
 * asked), keep the lease alive with a renewer while the command runs, hand the
 * token to the command in its environment so that it can fence its own
 * writes, and stop the command at once if the lease is lost.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

#define DEFAULT_GRACE_NS (UINT64_C(2) * 1000000000)
#define EXEC_FAILED      127
#define MIN_TTL_NS       UINT64_C(1000000)

struct run_args {
    struct cli_take k; /* the table, lease, owner, ttl, wait, -E, -s */
    uint64_t margin, grace, max_hold;
    uint64_t gen; /* with --shared: the last exclusive token before ours */
    char **cmd;
};

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease run NAME LEASE [--ttl T] [-w|--wait T|inf] [-n] [-E CODE]\n"
            "                    [--owner O] [--margin T] [--grace T] [--max-hold T]\n"
            "                    [-s|--shared] -- COMMAND [ARGS...]\n"
            "Acquires LEASE in table NAME (created with defaults if missing), runs COMMAND\n"
            "while a renewer keeps the lease alive, and releases it when COMMAND ends.\n"
            "COMMAND finds SHMLEASE_TOKEN, SHMLEASE_LEASE, SHMLEASE_TABLE and SHMLEASE_OWNER\n"
            "in its environment, to fence its own writes; not SHMLEASE_ETCD_PASSWORD or\n"
            "SHMLEASE_ETCD_PROXY, which stay with shmlease.\n"
            "  --ttl T       lease time to live, renewed every T/3 (default 10s)\n"
            "  -w, --wait T  wait up to T for the lease; inf or forever: no bound; 0: do not\n"
            "                wait (the default: fail at once if held)\n"
            "  -n, --nonblock  fail at once if the lease is held (the default)\n"
            "  -E, --conflict-exit-code CODE  exit with CODE (0-255, default 1) when the\n"
            "                lease is held or the wait ended, as flock -E does\n"
            "  --owner O     owner name (default run-PID)\n"
            "  --margin T    declare the lease lost T before its expiry (default ttl/10)\n"
            "  --grace T     after SIGTERM on loss, SIGKILL after T (default 2s)\n"
            "  --max-hold T  hold the lease at most T in total: COMMAND is stopped as on\n"
            "                loss at T minus the margin\n"
            "  -s, --shared  take the lease shared, beside other shared holders (readers);\n"
            "                COMMAND also finds SHMLEASE_GEN, the token of the last\n"
            "                exclusive acquisition before it (0 if none), and SHMLEASE_SHARED=1\n"
            "A duration T is seconds, or a number with a unit ns, us, ms, s, m, h or d.\n"
            "SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to COMMAND. COMMAND is\n"
            "killed if shmlease run is killed; a stopped shmlease run cannot stop it, so\n"
            "let the resource check SHMLEASE_TOKEN.\n"
            "Exit status: COMMAND's own (128+N if killed by signal N); %d if the lease was\n"
            "lost (also when the table is removed: its name gone or naming a new table,\n"
            "seen within T/3) and COMMAND signalled; 1 (or -E CODE) if the lease is held\n"
            "(or --wait timed out);\n"
            "2 usage error; 3 table problem; 5 system error; %d if COMMAND could not be\n"
            "started.\n",
            EXIT_LOST, EXEC_FAILED);
}

static const char *fmt(uint64_t ns, char *buf)
{
    return cli_fmt_ns(ns, buf, 32);
}

/* What the renewer would refuse after the acquire (shl_renewer_start's
 * EINVAL), checked before anything is acquired, with the rule. */
static int check_timing(const struct run_args *a)
{
    char x[32], y[32];
    if (a->k.ttl < MIN_TTL_NS) {
        cli_usage_err("run", "--ttl %s is too short: at least %s", fmt(a->k.ttl, x),
                      fmt(MIN_TTL_NS, y));
        return -1;
    }
    uint64_t margin = a->margin ? a->margin : a->k.ttl / 10, interval = a->k.ttl / 3;
    if (margin >= a->k.ttl - interval) {
        cli_usage_err("run",
                      "--margin %s is too long for --ttl %s: the lease is renewed every ttl/3 and "
                      "the margin must be shorter than the remaining two thirds (under %s)",
                      fmt(margin, x), fmt(a->k.ttl, y), fmt(a->k.ttl - interval, (char[32]){0}));
        return -1;
    }
    if (a->max_hold && a->max_hold <= margin) {
        cli_usage_err("run",
                      "--max-hold %s must be longer than the margin %s: the command is stopped at "
                      "max-hold minus the margin",
                      fmt(a->max_hold, x), fmt(margin, y));
        return -1;
    }
    return 0;
}

static int parse(int argc, char **argv, struct run_args *a)
{
    memset(a, 0, sizeof *a);
    a->grace = DEFAULT_GRACE_NS;
    struct cli_opt opts[CLI_TAKE_OPTS + 4] = {
        [CLI_TAKE_OPTS] = {"--margin", NULL, CLI_DURATION, &a->margin},
        {"--grace", NULL, CLI_DURATION, &a->grace},
        {"--max-hold", NULL, CLI_DURATION, &a->max_hold},
        {NULL, NULL, 0, NULL},
    };
    cli_take_opts(&a->k, opts);
    static const char *const names[] = {"NAME", "LEASE", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, run_usage, opts, names, 2, 1, &ops);
    if (ex)
        return ex;
    a->k.table = ops.v[0];
    a->k.lease = ops.v[1];
    a->cmd = ops.rest;
    if (!a->cmd || !a->cmd[0]) {
        cli_usage_err("run", "missing %s", a->cmd ? "COMMAND after --" : "-- COMMAND");
        return EXIT_USAGE;
    }
    if (cli_take_check("run", &a->k) || check_timing(a))
        return EXIT_USAGE;
    return 0;
}

/* What the command gets instead, and our secrets, which it never gets: the
 * etcd password, and the proxy, whose URL may carry the proxy's password.
 * The user's name and the TLS file names stay. */
static const char *const not_passed[] = {
    "SHMLEASE_TOKEN=", "SHMLEASE_LEASE=",  "SHMLEASE_TABLE=",         "SHMLEASE_OWNER=",
    "SHMLEASE_GEN=",   "SHMLEASE_SHARED=", "SHMLEASE_ETCD_PASSWORD=", "SHMLEASE_ETCD_PROXY=",
};

/* The command's environment: ours without our secrets and any SHMLEASE_*
 * of the same names, plus the lease's. Built before fork: the child only
 * execs. */
static char **make_env(const struct run_args *a, uint64_t token, char *buf, size_t cap)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 7, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int skip = 0;
        for (size_t j = 0; j < sizeof not_passed / sizeof not_passed[0]; j++)
            skip |= strncmp(environ[i], not_passed[j], strlen(not_passed[j])) == 0;
        if (!skip)
            env[k++] = environ[i];
    }
    int w = snprintf(buf, cap,
                     "SHMLEASE_TOKEN=%" PRIu64 "%cSHMLEASE_LEASE=%s%cSHMLEASE_TABLE=%s%c"
                     "SHMLEASE_OWNER=%s%cSHMLEASE_GEN=%" PRIu64 "%cSHMLEASE_SHARED=%d",
                     token, 0, a->k.lease, 0, a->k.table, 0, a->k.owner, 0, a->gen, 0, a->k.shared);
    if (w < 0 || (size_t)w >= cap) {
        free(env);
        return NULL;
    }
    for (char *p = buf, *end = buf + w; p < end; p += strlen(p) + 1)
        env[k++] = p;
    env[k] = NULL;
    return env;
}

static int status_of(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return EXIT_REFUSED;
}

/* Waits for the child up to ns (or forever, UINT64_MAX); 1 when it ended. */
static int reap(int pidfd, pid_t child, uint64_t ns, int *st)
{
    struct pollfd p = {pidfd, POLLIN, 0};
    uint64_t ms = ns / 1000000;
    int wait_ms = ns == UINT64_MAX ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
    while (poll(&p, 1, wait_ms) < 0 && errno == EINTR)
        ;
    if (waitpid(child, st, WNOHANG) == child)
        return 1;
    if (ns != UINT64_MAX)
        return 0;
    while (waitpid(child, st, 0) < 0 && errno == EINTR)
        ;
    return 1;
}

static const char *loss_text(int reason)
{
    switch (reason) {
    case SHL_LOSS_REFUSED:
        return "refused by the table (revoked, or expired and taken)";
    case SHL_LOSS_DEADLINE:
        return "not renewed in time";
    case SHL_LOSS_MAX_HOLD:
        return "maximum hold time reached";
    case SHL_LOSS_REMOVED:
        return "the table was removed: its name is gone or names a new table";
    }
    return "unknown reason";
}

/* Runs the command until it ends or the lease is lost. */
static int supervise(const struct run_args *a, shl_renewer *r, pid_t child, int pidfd, int sfd)
{
    struct pollfd p[3] = {{shl_renewer_fd(r), POLLIN, 0}, {pidfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    for (;;) {
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            /* Cannot watch any more: do not keep a command running unwatched. */
            cli_err("run", "poll: %s: stopping the command", strerror(errno));
            shl_renewer_stop(r, 0);
            kill(child, SIGKILL);
            int st;
            reap(pidfd, child, UINT64_MAX, &st);
            return EXIT_LOST;
        }
        int st;
        if (shl_renewer_lost(r)) {
            kill(child, SIGTERM);
            if (!reap(pidfd, child, a->grace, &st)) {
                kill(child, SIGKILL);
                reap(pidfd, child, UINT64_MAX, &st);
            }
            cli_err("run", "lease '%s' lost (%s): command stopped", a->k.lease,
                    loss_text(shl_renewer_lost(r)));
            shl_renewer_stop(r, 0);
            return EXIT_LOST;
        }
        if (p[1].revents) {
            reap(pidfd, child, UINT64_MAX, &st);
            if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_OK) {
                cli_err("run", "lease '%s' was lost as the command ended", a->k.lease);
                return EXIT_LOST;
            }
            return status_of(st);
        }
        if (p[2].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                kill(child, (int)si.ssi_signo);
        }
    }
}

static int start_child(const struct run_args *a, char **env, const sigset_t *old, pid_t *child,
                       int *pidfd)
{
    fflush(NULL);
    pid_t parent = getpid();
    *child = fork();
    if (*child < 0) {
        cli_err("run", "fork: %s", strerror(errno));
        return -1;
    }
    if (*child == 0) {
        /* A SIGKILLed run takes the command with it. The parent may have died
         * before the request was made: then nobody would send the signal. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(EXEC_FAILED);
        sigprocmask(SIG_SETMASK, old, NULL);
        execvpe(a->cmd[0], a->cmd, env);
        dprintf(2, "shmlease run: cannot run '%s': %s\n", a->cmd[0], strerror(errno));
        _exit(EXEC_FAILED);
    }
    *pidfd = (int)syscall(SYS_pidfd_open, *child, 0);
    if (*pidfd < 0) {
        cli_err("run", "pidfd_open: %s", strerror(errno));
        kill(*child, SIGKILL);
        waitpid(*child, NULL, 0);
        return -1;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_args a;
    int ex = parse(argc, argv, &a);
    if (ex)
        return ex < 0 ? 0 : ex;
    char owner[32];
    if (!a.k.owner) {
        snprintf(owner, sizeof owner, "run-%d", (int)getpid());
        a.k.owner = owner;
    }
    shl_table *t;
    if ((ex = cli_open_or_create("run", a.k.table, &t)) != 0)
        return ex;
    uint64_t token;
    if ((ex = cli_take("run", t, &a.k, &token, &a.gen)) != 0)
        goto out_close;
    /* Signals for the command arrive on a descriptor; every thread, the
     * renewer's included, has them blocked. */
    sigset_t fwd, old;
    sigemptyset(&fwd);
    sigaddset(&fwd, SIGINT);
    sigaddset(&fwd, SIGTERM);
    sigaddset(&fwd, SIGHUP);
    sigaddset(&fwd, SIGQUIT);
    sigprocmask(SIG_BLOCK, &fwd, &old);
    int sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.margin_ns = a.margin;
    ro.max_hold_ns = a.max_hold;
    shl_renewer *r = NULL;
    int rc = shl_renewer_start(t, a.k.lease, a.k.owner, token, a.k.ttl, &ro, &r);
    char envbuf[4096];
    char **env = rc == SHL_OK ? make_env(&a, token, envbuf, sizeof envbuf) : NULL;
    pid_t child;
    int pidfd;
    if (rc != SHL_OK || sfd < 0 || !env || start_child(&a, env, &old, &child, &pidfd) != 0) {
        if (rc != SHL_OK)
            cli_err("run", "cannot keep '%s' alive: %s (%s)", a.k.lease, cli_strerror(rc),
                    shl_errname(rc));
        shl_renewer_stop(r, SHL_RENEWER_RELEASE);
        if (!r && shl_release(t, a.k.lease, a.k.owner, token) != SHL_OK)
            cli_err("run", "'%s' could not be released: it stays held until its ttl ends",
                    a.k.lease);
        ex = rc != SHL_OK ? cli_exit_of(rc) : EXIT_SYSTEM;
    } else {
        ex = supervise(&a, r, child, pidfd, sfd);
        close(pidfd);
    }
    free(env);
    if (sfd >= 0)
        close(sfd);
out_close:
    shl_close(t);
    return ex;
}
