/*
 * tools/metrics_collect.c - shmlease metrics: what each table keeps, read
 * through the public inspection calls (shl_table_info_get(), shl_foreach()),
 * as tools/metrics_text.c prints it.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "metrics.h"

struct gather {
    struct metrics_table *mt;
    uint64_t max;
    uint32_t cap;
    int more; /* a lease beyond the bound was seen */
    int nomem;
};

/* The exclusive holder's ttl: its expiry minus the time of the event that
 * set it (its acquisition or its last renewal), while the history still
 * holds that event. */
static int holder_ttl(const shl_lease_detail *d, uint64_t *ttl)
{
    const shl_lease_info *in = &d->info;
    if (in->state != SHL_STATE_HELD && in->state != SHL_STATE_ORPHANED)
        return 0;
    for (uint32_t i = d->nevents; i-- > 0;) {
        const shl_event_info *e = &d->events[i];
        if (e->token != in->token)
            continue;
        if (e->op != SHL_OP_ACQUIRE && e->op != SHL_OP_TAKEOVER && e->op != SHL_OP_RECLAIM &&
            e->op != SHL_OP_RENEW)
            continue;
        if (e->time_ns > in->expiry_ns)
            return 0;
        *ttl = in->expiry_ns - e->time_ns;
        return 1;
    }
    return 0;
}

static void take(const shl_lease_detail *d, int etcd, struct metrics_lease *l)
{
    memset(l, 0, sizeof *l);
    memcpy(l->name, d->name, sizeof l->name);
    l->name[SHL_NAME_MAX] = '\0';
    l->state = d->info.state;
    l->shared = d->info.shared;
    l->waiters = d->info.waiters;
    l->remaining_ns = d->info.remaining_ns;
    for (uint32_t i = 0; i < d->nshared; i++) /* a shared holder's, when longer */
        if (d->shared[i].remaining_ns > l->remaining_ns)
            l->remaining_ns = d->shared[i].remaining_ns;
    l->token = d->token_last > d->info.token ? d->token_last : d->info.token;
    if (etcd) {
        for (uint32_t i = 0; i < d->nevents; i++)
            if (d->events[i].revision > l->revision)
                l->revision = d->events[i].revision;
        return;
    }
    l->have_ttl = holder_ttl(d, &l->ttl_ns);
    memcpy(l->counters, d->counters, sizeof l->counters);
}

static int each(void *arg, const shl_lease_detail *d)
{
    struct gather *g = arg;
    struct metrics_table *mt = g->mt;
    if (mt->n == g->max) {
        g->more = 1;
        return 1;
    }
    if (mt->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 64;
        if (cap > g->max)
            cap = (uint32_t)g->max;
        void *p = realloc(mt->leases, cap * sizeof *mt->leases);
        if (!p) {
            g->nomem = 1;
            return 1;
        }
        mt->leases = p;
        g->cap = cap;
    }
    take(d, mt->etcd, &mt->leases[mt->n++]);
    return 0;
}

/* 0: read; 1: not (rc says why); -1: out of memory. */
static int read_table(shl_table *t, uint64_t max, struct metrics_table *mt, int *rc)
{
    if ((*rc = shl_table_info_get(t, &mt->info)) != SHL_OK)
        return 1;
    struct gather g = {mt, max > UINT32_MAX ? UINT32_MAX : max, 0, 0, 0};
    int r = shl_foreach(t, each, &g);
    if (g.nomem)
        return -1;
    if (r < 0) {
        *rc = r;
        return 1;
    }
    /* Leases added meanwhile count too: read the number again. */
    shl_table_info_get(t, &mt->info);
    if (g.more)
        mt->omitted = mt->info.used > mt->n ? mt->info.used - mt->n : 1;
    mt->removed = !mt->etcd && shl_table_check(t) == SHL_EREMOVED;
    mt->up = 1;
    return 0;
}

static int collect_one(const char *name, uint64_t max, int say, struct metrics_table *mt)
{
    memset(mt, 0, sizeof *mt);
    mt->name = name;
    mt->etcd = cli_etcd_name(name);
    shl_table *t;
    int rc = shl_open(name, NULL, &t);
    if (rc != SHL_OK) {
        /* An rm that did not finish: the name still names a table marked removed. */
        mt->removed = !mt->etcd && rc == SHL_EREMOVED;
        if (say) {
            cli_open_failed("metrics", name, rc);
            cli_etcd_unsupported("metrics", name, rc);
        }
        return 1;
    }
    int r = read_table(t, max, mt, &rc);
    shl_close(t);
    if (r < 0) {
        cli_err("metrics", "out of memory");
        return -1;
    }
    if (r > 0 && say)
        cli_err("metrics", "table '%s' could not be read: %s", cli_vis(name),
                cli_table_strerror(name, rc));
    if (r > 0) { /* nothing of a half-read table: it is down */
        free(mt->leases);
        mt->leases = NULL;
        mt->n = 0;
        mt->omitted = 0;
    }
    return r;
}

int metrics_collect(const char *const *names, int n, uint64_t max_leases, int *was_up,
                    struct metrics_snapshot *s)
{
    s->n = 0;
    s->tables = calloc((size_t)n, sizeof *s->tables);
    if (!s->tables) {
        cli_err("metrics", "out of memory");
        return -1;
    }
    int status = 0;
    for (int i = 0; i < n; i++) {
        int r = collect_one(names[i], max_leases, !was_up || was_up[i], &s->tables[i]);
        s->n = i + 1;
        if (r < 0) {
            metrics_free(s);
            return -1;
        }
        if (was_up)
            was_up[i] = s->tables[i].up;
        if (r)
            status = 1;
    }
    return status;
}

void metrics_free(struct metrics_snapshot *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->tables[i].leases);
    free(s->tables);
    s->tables = NULL;
    s->n = 0;
}

int metrics_render(const char *const *names, int n, uint64_t max_leases, int *was_up, int om,
                   char **text, size_t *len)
{
    struct metrics_snapshot s;
    *text = NULL;
    *len = 0;
    int status = metrics_collect(names, n, max_leases, was_up, &s);
    if (status < 0)
        return -1;
    FILE *f = open_memstream(text, len);
    if (!f) {
        metrics_free(&s);
        cli_err("metrics", "out of memory");
        return -1;
    }
    metrics_write(f, &s, om);
    metrics_free(&s);
    if (fclose(f) != 0) {
        free(*text);
        *text = NULL;
        cli_err("metrics", "out of memory");
        return -1;
    }
    return status;
}
