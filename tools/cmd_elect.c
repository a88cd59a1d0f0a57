/*
 * tools/cmd_elect.c - shmlease elect: run a command only while leader.
 *
 * A candidate in an election (one lease of the table, shmlease(7)): it
 * campaigns, waiting in fair order, and once it leads runs the command with
 * the term's token in its environment, while the library's renewer keeps
 * the term. A lost term stops the command as shmlease run does; with
 * --again the candidate then campaigns again. The command ending on its
 * own ends the term (resign) and shmlease elect with the command's status.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"

struct elect_args {
    const char *table, *election, *id, *value;
    uint64_t ttl, wait, margin, grace, conflict;
    int again;
    char **cmd;
};

static void elect_usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease elect NAME ELECTION [--id ID] [--ttl T] [--value V]\n"
            "                      [-w|--wait T|inf] [-E CODE] [--again] [--margin T]\n"
            "                      [--grace T] -- COMMAND [ARGS...]\n"
            "Campaigns in ELECTION of table NAME (created with defaults if missing) and,\n"
            "once leader, proclaims V and runs COMMAND while a renewer keeps the term.\n"
            "Candidates lead in the order they came. COMMAND finds SHMLEASE_TOKEN (the\n"
            "term's fencing token), SHMLEASE_LEASE (ELECTION), SHMLEASE_TABLE and\n"
            "SHMLEASE_OWNER (ID) in its environment.\n"
            "  --id ID       candidate id (default HOST:PID)\n"
            "  --ttl T       term time to live, renewed every T/3 (default 10s)\n"
            "  --value V     the value proclaimed when leading (default empty), shown by\n"
            "                shmlease observe\n"
            "  -w, --wait T  campaign at most T; inf or forever: no bound (the default);\n"
            "                0: one try\n"
            "  -E, --conflict-exit-code CODE  exit with CODE (0-255, default 1) when the\n"
            "                wait ended without leading\n"
            "  --again       after a lost term (COMMAND stopped), campaign again, without\n"
            "                end; COMMAND ending on its own still ends shmlease elect\n"
            "  --margin T    declare the term lost T before its expiry (default ttl/10)\n"
            "  --grace T     after SIGTERM on loss, SIGKILL after T (default 2s)\n"
            "A duration T is seconds, or a number with a unit ns, us, ms, s, m, h or d.\n"
            "While leading, SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to COMMAND;\n"
            "while campaigning they end shmlease elect. COMMAND is killed if shmlease elect\n"
            "is killed.\n"
            "Exit status: COMMAND's own (128+N if killed by signal N), after resigning;\n"
            "%d if the term was lost and COMMAND stopped (without --again); 1 (or -E CODE)\n"
            "if --wait ended first; 2 usage error; 3 table problem; 5 system error; %d if\n"
            "COMMAND could not be started.\n",
            EXIT_LOST, CLI_EXEC_FAILED);
}

static int parse(int argc, char **argv, struct elect_args *a)
{
    memset(a, 0, sizeof *a);
    a->ttl = UINT64_C(10) * 1000000000;
    a->wait = SHL_WAIT_FOREVER;
    a->grace = CLI_GRACE_NS;
    a->conflict = EXIT_REFUSED;
    struct cli_opt opts[] = {
        {"--id", NULL, CLI_STRING, &a->id},
        {"--ttl", NULL, CLI_DURATION, &a->ttl},
        {"--value", NULL, CLI_STRING, &a->value},
        {"--wait", "-w", CLI_WAIT, &a->wait},
        {"--conflict-exit-code", "-E", CLI_CODE, &a->conflict},
        {"--again", NULL, CLI_FLAG, &a->again},
        {"--margin", NULL, CLI_DURATION, &a->margin},
        {"--grace", NULL, CLI_DURATION, &a->grace},
        {NULL, NULL, 0, NULL},
    };
    static const char *const names[] = {"NAME", "ELECTION", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, elect_usage, opts, names, 2, 1, &ops);
    if (ex)
        return ex;
    a->table = ops.v[0];
    a->election = ops.v[1];
    a->cmd = ops.rest;
    if (cli_child_command("elect", a->cmd))
        return EXIT_USAGE;
    if (cli_table_name("elect", a->table) || cli_lease_name("elect", a->election) ||
        (a->id && cli_owner_name("elect", a->id)))
        return EXIT_USAGE;
    if (cli_child_timing("elect", a->ttl, a->margin, 0))
        return EXIT_USAGE;
    return 0;
}

/* The campaign runs on its own thread so that the signals, blocked in every
 * thread (the renewer it starts included), are still heard while it waits. */
struct campaign {
    shl_election *e;
    const struct elect_args *a;
    const shl_renewer_options *ro;
    uint64_t token;
    int rc;
    int done; /* eventfd, written when rc is set */
};

static void *campaign_main(void *p)
{
    struct campaign *c = p;
    const char *v = c->a->value ? c->a->value : "";
    c->rc = shl_election_campaign(c->e, c->a->ttl, c->a->wait, v, strlen(v), c->ro, &c->token);
    uint64_t one = 1;
    while (write(c->done, &one, sizeof one) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* Ends the process as the signal would have, had it not been blocked. */
static void die_of(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    raise(sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    _exit(128 + sig);
}

/* Campaigns until leading (0, *token set), or returns the exit code after
 * saying why not. A signal received meanwhile ends the process. */
static int campaign(struct cli_child *ch, shl_table *t, shl_election *e, const struct elect_args *a,
                    uint64_t *token)
{
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.margin_ns = a->margin;
    struct campaign c = {e, a, &ro, 0, 0, eventfd(0, EFD_CLOEXEC)};
    pthread_t th;
    if (c.done < 0 || pthread_create(&th, NULL, campaign_main, &c) != 0) {
        cli_err("elect", "cannot start the campaign: %s", strerror(errno));
        if (c.done >= 0)
            close(c.done);
        return EXIT_SYSTEM;
    }
    struct pollfd p[2] = {{c.done, POLLIN, 0}, {ch->sfd, POLLIN, 0}};
    while (!p[0].revents) {
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            cli_err("elect", "poll: %s", strerror(errno));
            die_of(SIGTERM);
        }
        struct signalfd_siginfo si;
        if (p[1].revents && read(ch->sfd, &si, sizeof si) == (ssize_t)sizeof si)
            die_of((int)si.ssi_signo);
    }
    pthread_join(th, NULL);
    close(c.done);
    if (c.rc == SHL_OK) {
        *token = c.token;
        return 0;
    }
    if (c.rc == SHL_ETIMEDOUT) {
        shl_leader l;
        if (shl_election_leader(t, a->election, &l, NULL, 0) == SHL_OK)
            cli_err("elect", "'%s' is led by '%s' (token %" PRIu64 ")", a->election, cli_vis(l.id),
                    l.token);
        else
            cli_err("elect", "did not lead '%s' in time", a->election);
        return (int)a->conflict;
    }
    cli_err("elect", "cannot campaign in '%s': %s (%s)", a->election, cli_strerror(c.rc),
            shl_errname(c.rc));
    return cli_exit_of(c.rc);
}

static int term_lost(void *k)
{
    return shl_election_lost(k);
}

/* Resigning also ends a lost term (SHL_ELOST then): either way the handle
 * no longer leads and may campaign again. */
static int term_end(void *k, int release)
{
    (void)release;
    return shl_election_resign(k);
}

/* Leads once: runs the command for the term of `token`. */
static int lead(struct cli_child *ch, shl_election *e, const struct elect_args *a, uint64_t token)
{
    ch->lost = 0;
    char vars[4096];
    int w = snprintf(vars, sizeof vars,
                     "SHMLEASE_TOKEN=%" PRIu64 "%cSHMLEASE_LEASE=%s%cSHMLEASE_TABLE=%s%c"
                     "SHMLEASE_OWNER=%s",
                     token, 0, a->election, 0, a->table, 0, a->id);
    char **env = w > 0 && (size_t)w < sizeof vars ? cli_child_env(vars, (size_t)w) : NULL;
    if (!env || cli_child_start(ch, a->cmd, env) != 0) {
        if (!env)
            cli_err("elect", "out of memory");
        free(env);
        (void)shl_election_resign(e);
        return EXIT_SYSTEM;
    }
    struct cli_keeper k = {shl_election_fd(e), term_lost, term_end, e};
    int ex = cli_child_supervise(ch, &k);
    free(env);
    return ex;
}

int cmd_elect(int argc, char **argv)
{
    struct elect_args a;
    int ex = parse(argc, argv, &a);
    if (ex)
        return ex < 0 ? 0 : ex;
    char id[SHL_OWNER_MAX + 1];
    if (!a.id) {
        char host[SHL_OWNER_MAX + 1] = "";
        gethostname(host, sizeof host - 1);
        host[strcspn(host, ".")] = '\0';
        snprintf(id, sizeof id, "%.40s:%d", host[0] ? host : "localhost", (int)getpid());
        a.id = id;
    }
    shl_table *t;
    if ((ex = cli_open_or_create("elect", a.table, &t)) != 0)
        return ex;
    shl_election *e = NULL;
    int rc = shl_election_open(t, a.election, a.id, &e);
    if (rc != SHL_OK) {
        cli_err("elect", "cannot open '%s': %s (%s)", a.election, cli_strerror(rc),
                shl_errname(rc));
        shl_close(t);
        return cli_exit_of(rc);
    }
    struct cli_child ch = {
        .cmd = "elect", .what = "leadership of", .lease = a.election, .grace = a.grace};
    if (cli_child_signals(&ch) != 0) {
        ex = EXIT_SYSTEM;
    } else {
        do {
            uint64_t token = 0;
            if ((ex = campaign(&ch, t, e, &a, &token)) != 0)
                break;
            ex = lead(&ch, e, &a, token);
        } while (ch.lost && a.again);
    }
    cli_child_close(&ch);
    shl_election_close(e);
    shl_close(t);
    return ex;
}
