/*
 * tools/metrics.h - shmlease metrics: a snapshot of tables as Prometheus
 * metrics (tools/metrics_collect.c), its text exposition
 * (tools/metrics_text.c), and the ways to serve it: standard output, an HTTP
 * endpoint, a node_exporter textfile (tools/metrics_serve.c).
 *
 * Only what a table keeps is reported: an etcd table has no counters, slots,
 * segment size or removal mark, and those series are left out for it, never
 * given as 0.
 */
#ifndef SHL_TOOLS_METRICS_H
#define SHL_TOOLS_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "shmlease.h"

/* The default bound on lease series per table (--max-leases). */
#define METRICS_MAX_LEASES 1000

/* One lease, as much as its table keeps. */
struct metrics_lease {
    char name[SHL_NAME_MAX + 1];
    int state;             /* SHL_STATE_* of the exclusive holder */
    uint32_t shared;       /* valid shared holders */
    uint32_t waiters;      /* processes waiting to acquire */
    uint64_t remaining_ns; /* time left of the holder (exclusive or shared) */
    uint64_t token;        /* the lease's last token, of either kind */
    uint64_t ttl_ns;       /* the exclusive holder's ttl (its last acquire or
                              renew), when the history still shows it */
    int have_ttl;
    int64_t revision;                     /* etcd: the last event's revision (0: none) */
    uint64_t counters[SHL_COUNTER_COUNT]; /* a segment's counters */
};

/* One table: whether it opened, what it is, and its first leases. */
struct metrics_table {
    const char *name;
    int etcd;    /* an etcd table: no counters, capacity, size or removal mark */
    int up;      /* opened and read */
    int removed; /* a segment whose name was removed (shl_table_check()) */
    shl_table_info info;
    uint64_t omitted; /* leases left out by the bound */
    uint32_t n;       /* entries in leases[] */
    struct metrics_lease *leases;
};

struct metrics_snapshot {
    struct metrics_table *tables;
    int n;
};

/* Opens each table of names[0..n-1] afresh (a table removed and made again
 * is the new one), reads at most max_leases leases of each, and closes it.
 * A table that does not open or cannot be read is up = 0, and why is said on
 * stderr: always when was_up is NULL; else only when was_up[i] was not 0
 * (so that a server says it once, not at every scrape), and was_up[i] is
 * set to up. Returns 0 when every table was read, 1 when one was not, -1
 * (after a message) when memory ran out. */
int metrics_collect(const char *const *names, int n, uint64_t max_leases, int *was_up,
                    struct metrics_snapshot *s);
void metrics_free(struct metrics_snapshot *s);

/* Writes s in the Prometheus text exposition format (version 0.0.4), or
 * with om in OpenMetrics 1.0 (a counter's family named without _total, and
 * "# EOF" at the end), as a scraper that asks for it prefers. */
void metrics_write(FILE *f, const struct metrics_snapshot *s, int om);

/* Writes v as a label value: '\' '"' and newline escaped as the format wants,
 * a byte outside printable ASCII as \xNN (see metrics_text.c). */
void metrics_label(FILE *f, const char *v);

/* Collects and renders once into a malloc'd buffer (*len bytes, NUL after);
 * the status of metrics_collect(), -1 with *text NULL when out of memory. */
int metrics_render(const char *const *names, int n, uint64_t max_leases, int *was_up, int om,
                   char **text, size_t *len);

/* How to serve (tools/metrics_serve.c). */
struct metrics_opts {
    const char *const *tables;
    int ntables;
    uint64_t max_leases;
    const char *listen;   /* ADDR:PORT, or NULL */
    int listen_any;       /* allow an address other than loopback */
    const char *textfile; /* a directory or a FILE.prom, or NULL */
    uint64_t interval_ns; /* textfile: again every interval (0: once) */
};

/* Serves /metrics over HTTP/1.1 on o->listen until SIGTERM or SIGINT; an
 * exit status (tools/cli.h). */
int metrics_listen(const struct metrics_opts *o);
/* Writes DIR/shmlease.prom, or FILE.prom when o->textfile names no
 * directory and ends in .prom (a temporary file beside it renamed over it),
 * once or every o->interval_ns until SIGTERM or SIGINT; an exit status. */
int metrics_textfile(const struct metrics_opts *o);

#endif
