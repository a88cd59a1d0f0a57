/*
 * tools/cli_child.c - a command run while something is held: the machinery
 * of shmlease run and shmlease elect.
 *
 * The command gets its own environment (ours without our secrets, plus the
 * holder's variables), dies with us (PR_SET_PDEATHSIG), finds the signals we
 * are sent passed on, and is stopped at once (SIGTERM, SIGKILL after a
 * grace) when the keeper says the lease or the term is lost.
 */
#include <errno.h>
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

/* What the command gets from us instead, and our secrets, which it never
 * gets: the etcd password, and the proxy, whose URL may carry the proxy's
 * password. The user's name and the TLS file names stay. */
static const char *const not_passed[] = {
    "SHMLEASE_TOKEN=", "SHMLEASE_LEASE=",  "SHMLEASE_TABLE=",         "SHMLEASE_OWNER=",
    "SHMLEASE_GEN=",   "SHMLEASE_SHARED=", "SHMLEASE_ETCD_PASSWORD=", "SHMLEASE_ETCD_PROXY=",
};

#define MAX_VARS 8

char **cli_child_env(const char *vars, size_t len)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + MAX_VARS + 1, sizeof *env);
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
    size_t added = 0;
    for (const char *p = vars, *end = vars + len; p < end && added < MAX_VARS; added++) {
        env[k++] = (char *)p;
        p += strlen(p) + 1;
    }
    env[k] = NULL;
    return env;
}

int cli_child_signals(struct cli_child *c)
{
    /* Signals for the command arrive on a descriptor; every thread started
     * after this (the renewer's included) has them blocked. */
    sigset_t fwd;
    sigemptyset(&fwd);
    sigaddset(&fwd, SIGINT);
    sigaddset(&fwd, SIGTERM);
    sigaddset(&fwd, SIGHUP);
    sigaddset(&fwd, SIGQUIT);
    sigprocmask(SIG_BLOCK, &fwd, &c->old);
    c->sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
    c->pidfd = -1;
    if (c->sfd < 0) {
        cli_err(c->cmd, "signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void cli_child_close(struct cli_child *c)
{
    if (c->sfd >= 0)
        close(c->sfd);
    c->sfd = -1;
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
static int reap(const struct cli_child *c, uint64_t ns, int *st)
{
    struct pollfd p = {c->pidfd, POLLIN, 0};
    uint64_t ms = ns / 1000000;
    int wait_ms = ns == UINT64_MAX ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
    while (poll(&p, 1, wait_ms) < 0 && errno == EINTR)
        ;
    if (waitpid(c->pid, st, WNOHANG) == c->pid)
        return 1;
    if (ns != UINT64_MAX)
        return 0;
    while (waitpid(c->pid, st, 0) < 0 && errno == EINTR)
        ;
    return 1;
}

const char *cli_loss_text(int reason)
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

/* The child is gone after this; pidfd closed. */
static void finish(struct cli_child *c)
{
    close(c->pidfd);
    c->pidfd = -1;
}

int cli_child_supervise(struct cli_child *c, const struct cli_keeper *k)
{
    struct pollfd p[3] = {{k->fd, POLLIN, 0}, {c->pidfd, POLLIN, 0}, {c->sfd, POLLIN, 0}};
    c->lost = 0;
    for (;;) {
        int st;
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            /* Cannot watch any more: do not keep a command running unwatched. */
            cli_err(c->cmd, "poll: %s: stopping the command", strerror(errno));
            k->end(k->k, 0);
            kill(c->pid, SIGKILL);
            reap(c, UINT64_MAX, &st);
            finish(c);
            c->lost = 1;
            return EXIT_LOST;
        }
        int reason = k->lost(k->k);
        if (reason) {
            kill(c->pid, SIGTERM);
            if (!reap(c, c->grace, &st)) {
                kill(c->pid, SIGKILL);
                reap(c, UINT64_MAX, &st);
            }
            finish(c);
            cli_err(c->cmd, "%s '%s' lost (%s): command stopped", c->what, c->lease,
                    cli_loss_text(reason));
            k->end(k->k, 0);
            c->lost = 1;
            return EXIT_LOST;
        }
        if (p[1].revents) {
            reap(c, UINT64_MAX, &st);
            finish(c);
            if (k->end(k->k, 1) != SHL_OK) {
                cli_err(c->cmd, "%s '%s' was lost as the command ended", c->what, c->lease);
                c->lost = 1;
                return EXIT_LOST;
            }
            return status_of(st);
        }
        if (p[2].revents) {
            struct signalfd_siginfo si;
            if (read(c->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                kill(c->pid, (int)si.ssi_signo);
        }
    }
}

int cli_child_start(struct cli_child *c, char **argv, char **env)
{
    fflush(NULL);
    pid_t parent = getpid();
    c->pid = fork();
    if (c->pid < 0) {
        cli_err(c->cmd, "fork: %s", strerror(errno));
        return -1;
    }
    if (c->pid == 0) {
        /* A SIGKILLed parent takes the command with it. The parent may have
         * died before the request was made: then nobody would send the
         * signal. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(CLI_EXEC_FAILED);
        sigprocmask(SIG_SETMASK, &c->old, NULL);
        execvpe(argv[0], argv, env);
        dprintf(2, "shmlease %s: cannot run '%s': %s\n", c->cmd, argv[0], strerror(errno));
        _exit(CLI_EXEC_FAILED);
    }
    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    if (c->pidfd < 0) {
        cli_err(c->cmd, "pidfd_open: %s", strerror(errno));
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        return -1;
    }
    return 0;
}

static const char *fmt(uint64_t ns, char *buf)
{
    return cli_fmt_ns(ns, buf, 32);
}

int cli_child_timing(const char *cmd, uint64_t ttl, uint64_t margin, uint64_t max_hold)
{
    char x[32], y[32];
    if (ttl < CLI_MIN_TTL_NS) {
        cli_usage_err(cmd, "--ttl %s is too short: at least %s", fmt(ttl, x),
                      fmt(CLI_MIN_TTL_NS, y));
        return -1;
    }
    uint64_t interval = ttl / 3;
    margin = margin ? margin : ttl / 10;
    if (margin >= ttl - interval) {
        cli_usage_err(cmd,
                      "--margin %s is too long for --ttl %s: the lease is renewed every ttl/3 and "
                      "the margin must be shorter than the remaining two thirds (under %s)",
                      fmt(margin, x), fmt(ttl, y), fmt(ttl - interval, (char[32]){0}));
        return -1;
    }
    if (max_hold && max_hold <= margin) {
        cli_usage_err(cmd,
                      "--max-hold %s must be longer than the margin %s: the command is stopped at "
                      "max-hold minus the margin",
                      fmt(max_hold, x), fmt(margin, y));
        return -1;
    }
    return 0;
}

int cli_child_command(const char *cmd, char **rest)
{
    if (rest && rest[0])
        return 0;
    cli_usage_err(cmd, "missing %s", rest ? "COMMAND after --" : "-- COMMAND");
    return EXIT_USAGE;
}
