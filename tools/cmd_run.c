/*
 * tools/cmd_run.c - shmlease run: run a command while holding a lease.
 *
 * Like flock(1), with a lease instead of a file lock: acquire (waiting if
 * asked), keep the lease alive with a renewer while the command runs, hand the
 * token to the command in its environment so that it can fence its own
 * writes, and stop the command at once if the lease is lost.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
            EXIT_LOST, CLI_EXEC_FAILED);
}

static int parse(int argc, char **argv, struct run_args *a)
{
    memset(a, 0, sizeof *a);
    a->grace = CLI_GRACE_NS;
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
    if (cli_child_command("run", a->cmd))
        return EXIT_USAGE;
    if (cli_take_check("run", &a->k) || cli_child_timing("run", a->k.ttl, a->margin, a->max_hold))
        return EXIT_USAGE;
    return 0;
}

/* The lease's variables for the command's environment, into buf. */
static size_t run_vars(const struct run_args *a, uint64_t token, char *buf, size_t cap)
{
    int w = snprintf(buf, cap,
                     "SHMLEASE_TOKEN=%" PRIu64 "%cSHMLEASE_LEASE=%s%cSHMLEASE_TABLE=%s%c"
                     "SHMLEASE_OWNER=%s%cSHMLEASE_GEN=%" PRIu64 "%cSHMLEASE_SHARED=%d",
                     token, 0, a->k.lease, 0, a->k.table, 0, a->k.owner, 0, a->gen, 0, a->k.shared);
    return w < 0 || (size_t)w >= cap ? 0 : (size_t)w;
}

static int renewer_lost(void *k)
{
    return shl_renewer_lost(k);
}

static int renewer_end(void *k, int release)
{
    return shl_renewer_stop(k, release ? SHL_RENEWER_RELEASE : 0);
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
    struct cli_child c = {.cmd = "run", .what = "lease", .lease = a.k.lease, .grace = a.grace};
    int sig = cli_child_signals(&c);
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.margin_ns = a.margin;
    ro.max_hold_ns = a.max_hold;
    shl_renewer *r = NULL;
    int rc = shl_renewer_start(t, a.k.lease, a.k.owner, token, a.k.ttl, &ro, &r);
    char vars[4096];
    size_t n = rc == SHL_OK ? run_vars(&a, token, vars, sizeof vars) : 0;
    char **env = n ? cli_child_env(vars, n) : NULL;
    if (rc != SHL_OK || sig != 0 || !env || cli_child_start(&c, a.cmd, env) != 0) {
        if (rc != SHL_OK)
            cli_err("run", "cannot keep '%s' alive: %s (%s)", a.k.lease, cli_strerror(rc),
                    shl_errname(rc));
        shl_renewer_stop(r, SHL_RENEWER_RELEASE);
        if (!r && shl_release(t, a.k.lease, a.k.owner, token) != SHL_OK)
            cli_err("run", "'%s' could not be released: it stays held until its ttl ends",
                    a.k.lease);
        ex = rc != SHL_OK ? cli_exit_of(rc) : EXIT_SYSTEM;
    } else {
        struct cli_keeper k = {shl_renewer_fd(r), renewer_lost, renewer_end, r};
        ex = cli_child_supervise(&c, &k);
    }
    free(env);
    cli_child_close(&c);
out_close:
    shl_close(t);
    return ex;
}
