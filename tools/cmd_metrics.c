/*
 * tools/cmd_metrics.c - shmlease metrics: tables' counters, holders and times
 * as Prometheus metrics, printed once, served on /metrics, or written for
 * node_exporter's textfile collector (tools/metrics.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "metrics.h"

#define TABLES_MAX 16

static void metrics_usage(FILE *f)
{
    fprintf(f,
            "usage: shmlease metrics TABLE... [--max-leases N]\n"
            "                        [--listen ADDR:PORT [--listen-any] | --textfile DIR|FILE\n"
            "                        [--interval T]]\n"
            "Prints the tables' metrics in the Prometheus text format (up to %d tables):\n"
            "per table whether it could be read, its capacity, leases, sizes and whether it\n"
            "was removed; per lease its counters (acquisitions by kind, expiries, reclaims,\n"
            "busy refusals, renewals, releases, revokes, recoveries, writes, rejections by\n"
            "reason), state, shared holders, waiters, time left, ttl and token. On an etcd\n"
            "table only what etcd keeps (no counters, capacity or segment size).\n"
            "  --max-leases N    at most N leases per table (default %d); the others are\n"
            "                    left out and shmlease_table_leases_omitted counts them\n"
            "  --listen ADDR:PORT  serve them over HTTP on /metrics, one request at a time,\n"
            "                    each a fresh reading (OpenMetrics when asked for), until\n"
            "                    SIGTERM; ADDR must be a loopback address (\":PORT\" is\n"
            "                    127.0.0.1)\n"
            "  --listen-any      allow any other address (names are user data: mind who\n"
            "                    can connect)\n"
            "  --textfile DIR    write DIR/shmlease.prom for node_exporter's textfile\n"
            "                    collector (a temporary file renamed over it), once;\n"
            "                    a FILE ending in .prom that is not a directory: that file\n"
            "  --interval T      with --textfile: again every T until SIGTERM\n"
            "A table that cannot be opened is shmlease_table_up 0 (exit 3 when printing\n"
            "or writing once).\n",
            TABLES_MAX, METRICS_MAX_LEASES);
}

/* Options that need or exclude others; EXIT_USAGE after a message. */
static int combination(const struct metrics_opts *o, uint64_t interval)
{
    const char *bad = NULL;
    if (o->listen && o->textfile)
        bad = "--listen and --textfile exclude each other";
    else if (o->listen_any && !o->listen)
        bad = "--listen-any goes with --listen";
    else if (interval && !o->textfile)
        bad = "--interval goes with --textfile";
    if (!bad)
        return 0;
    cli_err("metrics", "%s", bad);
    metrics_usage(stderr);
    return EXIT_USAGE;
}

int cmd_metrics(int argc, char **argv)
{
    struct metrics_opts o = {0};
    uint64_t max = METRICS_MAX_LEASES, interval = 0;
    const struct cli_opt opts[] = {
        {"--max-leases", NULL, CLI_NUMBER, &max},
        {"--listen", NULL, CLI_STRING, &o.listen},
        {"--listen-any", NULL, CLI_FLAG, &o.listen_any},
        {"--textfile", NULL, CLI_STRING, &o.textfile},
        {"--interval", NULL, CLI_DURATION, &interval},
        {NULL, NULL, 0, NULL},
    };
    static const char *const names[TABLES_MAX + 1] = {
        "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE",
        "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", "TABLE", NULL};
    struct cli_operands ops;
    int rc = cli_parse(argc, argv, metrics_usage, opts, names, 1, 0, &ops);
    if (rc)
        return rc < 0 ? 0 : rc;
    for (int i = 0; i < ops.n; i++)
        if (cli_table_name("metrics", ops.v[i]))
            return EXIT_USAGE;
    if ((rc = combination(&o, interval)) != 0)
        return rc;
    o.tables = ops.v;
    o.ntables = ops.n;
    o.max_leases = max;
    o.interval_ns = interval;
    if (o.listen)
        return metrics_listen(&o);
    if (o.textfile)
        return metrics_textfile(&o);
    char *text;
    size_t len;
    rc = metrics_render(o.tables, o.ntables, max, NULL, 0, &text, &len);
    if (rc < 0)
        return EXIT_SYSTEM;
    fwrite(text, 1, len, stdout);
    free(text);
    if (fflush(stdout) != 0)
        return EXIT_SYSTEM;
    return rc ? EXIT_TABLE : 0;
}
