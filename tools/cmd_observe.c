/*
 * tools/cmd_observe.c - shmlease observe: print an election's leaders.
 *
 * One line per leader, in token order, as shl_election_observe() reports
 * them: a loop that asks each time for a leader newer than the last one
 * printed. A leader whose whole term passed between two looks is not seen
 * (the observer was behind); the current leader always is.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

struct observe_args {
    const char *table, *election;
    uint64_t after, count, timeout;
    int json;
};

static void observe_usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease observe NAME ELECTION [--json] [--after TOKEN] [--count N]\n"
            "                        [--timeout T]\n"
            "Prints the leaders of ELECTION in table NAME as they come, one line each, in\n"
            "token order: the current leader first (if any), then each new one. A line is\n"
            "ID TOKEN VALUE, the value as proclaimed (bytes outside printable ASCII as\n"
            "\\xNN; \"-\" before the leader's first proclaim).\n"
            "  --json        one JSON object per line: {\"election\", \"id\", \"token\",\n"
            "                \"pid\", \"state\", \"remaining_ns\", \"value\"} (pid 0 on an etcd\n"
            "                table; value null before the leader's first proclaim)\n"
            "  --after TOKEN only leaders whose token is above TOKEN (default 0: any)\n"
            "  --count N     exit after N leaders (default: no end)\n"
            "  --timeout T   exit after T without a new leader (default: no bound)\n"
            "A leader whose whole term began and ended between two looks may be skipped;\n"
            "the current one never is.\n"
            "Exit status: 0 after --count leaders or on --timeout (1 if --timeout came\n"
            "before any leader); 2 usage error; 3 table problem (or removed); 5 system\n"
            "error.\n");
}

static int parse(int argc, char **argv, struct observe_args *a)
{
    memset(a, 0, sizeof *a);
    a->timeout = SHL_WAIT_FOREVER;
    struct cli_opt opts[] = {
        {"--json", NULL, CLI_FLAG, &a->json},
        {"--after", NULL, CLI_NUMBER, &a->after},
        {"--count", NULL, CLI_NUMBER, &a->count},
        {"--timeout", NULL, CLI_WAIT, &a->timeout},
        {NULL, NULL, 0, NULL},
    };
    static const char *const names[] = {"NAME", "ELECTION", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, observe_usage, opts, names, 2, 0, &ops);
    if (ex)
        return ex;
    if (ops.n > 2) {
        cli_usage_err("observe", "unexpected argument '%s'", cli_vis(ops.v[2]));
        return EXIT_USAGE;
    }
    a->table = ops.v[0];
    a->election = ops.v[1];
    if (cli_table_name("observe", a->table) || cli_lease_name("observe", a->election))
        return EXIT_USAGE;
    return 0;
}

/* The value, len bytes, on one line: printable ASCII as it is, "\" and
 * every other byte as \xNN. */
static void put_value(FILE *f, const unsigned char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (v[i] < ' ' || v[i] > '~' || v[i] == '\\')
            fprintf(f, "\\x%02x", v[i]);
        else
            fputc(v[i], f);
    }
}

static void print_leader(const struct observe_args *a, const shl_leader *l, const unsigned char *v)
{
    if (!a->json) {
        printf("%s %" PRIu64 " ", cli_vis(l->id), l->token);
        if (l->proclaimed)
            put_value(stdout, v, l->value_len);
        else
            fputc('-', stdout);
        fputc('\n', stdout);
    } else {
        fputs("{\"election\": ", stdout);
        cli_json_str(stdout, a->election);
        fputs(", \"id\": ", stdout);
        cli_json_str(stdout, l->id);
        printf(", \"token\": %" PRIu64
               ", \"pid\": %d, \"state\": \"%s\", \"remaining_ns\": %" PRIu64 ", \"value\": ",
               l->token, (int)l->pid, l->state == SHL_STATE_ORPHANED ? "orphaned" : "held",
               l->remaining_ns);
        if (l->proclaimed)
            cli_json_mem(stdout, v, l->value_len);
        else
            fputs("null", stdout);
        fputs("}\n", stdout);
    }
    fflush(stdout);
}

int cmd_observe(int argc, char **argv)
{
    struct observe_args a;
    int ex = parse(argc, argv, &a);
    if (ex)
        return ex < 0 ? 0 : ex;
    shl_table *t;
    if ((ex = cli_open("observe", a.table, &t)) != 0)
        return ex;
    static unsigned char value[SHL_VALUE_MAX];
    uint64_t after = a.after, seen = 0;
    for (;;) {
        shl_leader l;
        int rc = shl_election_observe(t, a.election, after, a.timeout, &l, value, sizeof value);
        if (rc == SHL_ETIMEDOUT) {
            ex = seen ? 0 : EXIT_REFUSED;
            if (!seen)
                cli_err("observe", "no leader of '%s' came in time", a.election);
            break;
        }
        if (rc != SHL_OK) {
            cli_err("observe", "'%s': %s (%s)", a.election, cli_table_strerror(a.table, rc),
                    shl_errname(rc));
            ex = rc == SHL_EREMOVED ? EXIT_TABLE : cli_exit_of(rc);
            break;
        }
        print_leader(&a, &l, value);
        after = l.token;
        if (++seen == a.count)
            break;
    }
    shl_close(t);
    return ex;
}
