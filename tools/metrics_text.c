/*
 * tools/metrics_text.c - shmlease metrics in the Prometheus text exposition
 * format (version 0.0.4): each family once, its HELP and TYPE first, then
 * its samples for every table and lease; counters end in _total, times are
 * seconds, label values are escaped. A family no table has a sample of is
 * left out, and so is every sample a table does not keep (an etcd table's
 * counters, capacity, size, removal mark): never a made-up 0.
 *
 * Nothing here opens a table or prints a message: the tests link this file
 * alone to check the escaping.
 */
#include <stdio.h>
#include <string.h>

#include "metrics.h"

#define NS_PER_S UINT64_C(1000000000)

/* The format wants UTF-8 and has no escape for other bytes: a byte outside
 * printable ASCII, which no valid name holds (a damaged segment may), is
 * written as the four characters \xNN (its backslash escaped), so that one
 * bad name cannot make the whole page unreadable. */
void metrics_label(FILE *f, const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '\\')
            fputs("\\\\", f);
        else if (c == '"')
            fputs("\\\"", f);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < ' ' || c > '~')
            fprintf(f, "\\\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* A family being written: its header goes out before its first sample. */
struct fam {
    FILE *f;
    const char *name, *type, *help;
    int started;
    int om; /* OpenMetrics: a counter's family is its name without _total */
};

static void sample_begin(struct fam *m, const struct metrics_table *t, const char *lease)
{
    if (!m->started) {
        int n = (int)strlen(m->name);
        if (m->om && strcmp(m->type, "counter") == 0)
            n -= (int)strlen("_total");
        fprintf(m->f, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, m->name, m->help, n, m->name, m->type);
        m->started = 1;
    }
    fprintf(m->f, "%s{table=\"", m->name);
    metrics_label(m->f, t->name);
    if (lease) {
        fputs("\",lease=\"", m->f);
        metrics_label(m->f, lease);
    }
    fputc('"', m->f);
}

/* One sample: the table's (lease NULL) or a lease's, with one more label
 * when key is not NULL. */
static void sample(struct fam *m, const struct metrics_table *t, const char *lease, const char *key,
                   const char *val, uint64_t v)
{
    sample_begin(m, t, lease);
    if (key)
        fprintf(m->f, ",%s=\"%s\"", key, val);
    fprintf(m->f, "} %llu\n", (unsigned long long)v);
}

/* The same for a time: seconds, exactly, from nanoseconds. */
static void sample_s(struct fam *m, const struct metrics_table *t, const char *lease, uint64_t ns)
{
    sample_begin(m, t, lease);
    fprintf(m->f, "} %llu.%09llu\n", (unsigned long long)(ns / NS_PER_S),
            (unsigned long long)(ns % NS_PER_S));
}

/* ------------------------------------------------------------ per table */

enum tcol { T_UP, T_CAPACITY, T_LEASES, T_VALUE_SIZE, T_SIZE, T_ALLOCATED, T_REMOVED, T_OMITTED };

static const struct {
    enum tcol col;
    const char *name, *help;
} table_fams[] = {
    {T_UP, "shmlease_table_up", "1 when the table opened and was read, else 0."},
    {T_CAPACITY, "shmlease_table_capacity", "Lease slots of a shared-memory table."},
    {T_LEASES, "shmlease_table_leases",
     "Lease names in the table (slots in use; on etcd, names ever acquired)."},
    {T_VALUE_SIZE, "shmlease_table_value_size_bytes", "Bytes of value per lease."},
    {T_SIZE, "shmlease_table_size_bytes", "Size of a shared-memory table's segment."},
    {T_ALLOCATED, "shmlease_table_allocated_bytes",
     "Memory a shared-memory table takes now: its segment's allocated bytes (a slot is taken "
     "when its name is added)."},
    {T_REMOVED, "shmlease_table_removed",
     "1 when a shared-memory table's name was removed (rm, RemoveIPC) under this reading."},
    {T_OMITTED, "shmlease_table_leases_omitted",
     "Leases left out of the per-lease series by the bound (--max-leases)."},
};

/* The value of column c for t; 0 when t does not keep it. */
static int table_value(const struct metrics_table *t, enum tcol c, uint64_t *v)
{
    if (c == T_UP) {
        *v = (uint64_t)t->up;
        return 1;
    }
    if (c == T_REMOVED && !t->etcd && (t->up || t->removed)) {
        *v = (uint64_t)t->removed;
        return 1;
    }
    if (!t->up)
        return 0;
    switch (c) {
    case T_CAPACITY:
        *v = t->info.capacity;
        return !t->etcd;
    case T_LEASES:
        *v = t->info.used;
        return 1;
    case T_VALUE_SIZE:
        *v = t->info.value_size;
        return 1;
    case T_SIZE:
        *v = t->info.size;
        return !t->etcd;
    case T_ALLOCATED:
        *v = t->info.allocated;
        return !t->etcd;
    case T_OMITTED:
        *v = t->omitted;
        return 1;
    default:
        return 0;
    }
}

static void tables(FILE *f, const struct metrics_snapshot *s, int om)
{
    for (size_t k = 0; k < sizeof table_fams / sizeof table_fams[0]; k++) {
        struct fam m = {f, table_fams[k].name, "gauge", table_fams[k].help, 0, om};
        for (int i = 0; i < s->n; i++) {
            uint64_t v;
            if (table_value(&s->tables[i], table_fams[k].col, &v))
                sample(&m, &s->tables[i], NULL, NULL, NULL, v);
        }
    }
}

/* ------------------------------------------------------------ the pools */

/* A shared-memory table's pools, told apart by the label pool: reader,
 * waiter, value (shl_table_info). */
static const struct {
    const char *name, *type, *help;
} pool_fams[] = {
    {"shmlease_table_pool_size", "gauge",
     "A shared-memory table's pools: reader and waiter records, spare value buffers."},
    {"shmlease_table_pool_taken", "gauge",
     "Of those, in the groups (spares) leases have taken now, including those a lease keeps "
     "unused."},
    {"shmlease_table_pool_taken_back_total", "counter",
     "Groups (spares) that a lease kept and another lease took back, since the table was "
     "created; a spare taken back costs that write a copy of the other lease's value."},
};

static uint64_t pool_value(const shl_table_info *in, size_t fam, int pool)
{
    const uint64_t v[3][3] = {
        {in->max_shared, in->max_waiters, in->spare_values},
        {in->shared_taken, in->waiters_taken, in->spare_values_taken},
        {in->shared_taken_back, in->waiters_taken_back, in->spare_values_taken_back}};
    return v[fam][pool];
}

static void pools(FILE *f, const struct metrics_snapshot *s, int om)
{
    static const char *const pool[3] = {"reader", "waiter", "value"};
    for (size_t k = 0; k < sizeof pool_fams / sizeof pool_fams[0]; k++) {
        struct fam m = {f, pool_fams[k].name, pool_fams[k].type, pool_fams[k].help, 0, om};
        for (int i = 0; i < s->n; i++) {
            const struct metrics_table *t = &s->tables[i];
            if (!t->up || t->etcd) /* an etcd table has no pools */
                continue;
            for (int p = 0; p < 3; p++)
                sample(&m, t, NULL, "pool", pool[p], pool_value(&t->info, k, p));
        }
    }
}

/* ---------------------------------------------------- per lease counters */

/* A counter family: up to three segment counters, told apart by one label. */
static const struct {
    const char *name, *help, *key;
    int counter[3];
    const char *val[3];
} counter_fams[] = {
    {"shmlease_lease_acquisitions_total",
     "Successful acquisitions by kind: exclusive (its takeovers and reclaims included) and "
     "shared.",
     "kind",
     {SHL_COUNTER_ACQUIRE, SHL_COUNTER_SHARED, -1},
     {"exclusive", "shared", NULL}},
    {"shmlease_lease_expiries_total",
     "Holders whose time ran out, counted when an exclusive acquisition took the lease over "
     "(takeovers).",
     NULL,
     {SHL_COUNTER_EXPIRE, -1, -1},
     {NULL}},
    {"shmlease_lease_reclaims_total",
     "Acquisitions that took the place of a holder proven dead before its expiry.",
     NULL,
     {SHL_COUNTER_RECLAIM, -1, -1},
     {NULL}},
    {"shmlease_lease_busy_refusals_total",
     "Acquisitions refused because the lease was held by another.",
     NULL,
     {SHL_COUNTER_BUSY, -1, -1},
     {NULL}},
    {"shmlease_lease_renewals_total",
     "Successful renewals.",
     NULL,
     {SHL_COUNTER_RENEW, -1, -1},
     {NULL}},
    {"shmlease_lease_releases_total", "Releases.", NULL, {SHL_COUNTER_RELEASE, -1, -1}, {NULL}},
    {"shmlease_lease_revokes_total",
     "Holders ended by a revoke.",
     NULL,
     {SHL_COUNTER_REVOKE, -1, -1},
     {NULL}},
    {"shmlease_lease_recoveries_total",
     "Deaths inside the lease's lock that the next caller repaired.",
     NULL,
     {SHL_COUNTER_RECOVER, -1, -1},
     {NULL}},
    {"shmlease_lease_writes_total",
     "Fenced writes accepted.",
     NULL,
     {SHL_COUNTER_WRITE, -1, -1},
     {NULL}},
    {"shmlease_lease_rejections_total",
     "Renewals, releases, writes and guarded calls refused, by reason: stale (an older token), "
     "expired (past expiry, released or revoked), owner (another owner).",
     "reason",
     {SHL_COUNTER_REJ_STALE, SHL_COUNTER_REJ_EXPIRED, SHL_COUNTER_REJ_OWNER},
     {"stale", "expired", "owner"}},
};

static void counters(FILE *f, const struct metrics_snapshot *s, int om)
{
    for (size_t k = 0; k < sizeof counter_fams / sizeof counter_fams[0]; k++) {
        struct fam m = {f, counter_fams[k].name, "counter", counter_fams[k].help, 0, om};
        for (int i = 0; i < s->n; i++) {
            const struct metrics_table *t = &s->tables[i];
            if (t->etcd) /* etcd keeps no counters */
                continue;
            for (uint32_t j = 0; j < t->n; j++)
                for (int c = 0; c < 3 && counter_fams[k].counter[c] >= 0; c++)
                    sample(&m, t, t->leases[j].name, counter_fams[k].key, counter_fams[k].val[c],
                           t->leases[j].counters[counter_fams[k].counter[c]]);
        }
    }
}

/* ------------------------------------------------------ per lease gauges */

/* Every state of a segment's lease; an etcd table tells only held or not. */
static const struct {
    int state;
    const char *name;
    int etcd;
} states[] = {
    {SHL_STATE_FREE, "free", 1},         {SHL_STATE_HELD, "held", 1},
    {SHL_STATE_EXPIRED, "expired", 0},   {SHL_STATE_REVOKED, "revoked", 0},
    {SHL_STATE_ORPHANED, "orphaned", 0},
};

static void state_fam(FILE *f, const struct metrics_snapshot *s, int om)
{
    struct fam m = {f,
                    "shmlease_lease_state",
                    "gauge",
                    "1 for the exclusive holder's state (free, held, expired, revoked, orphaned; "
                    "on etcd only free and held), 0 for the others.",
                    0,
                    om};
    for (int i = 0; i < s->n; i++) {
        const struct metrics_table *t = &s->tables[i];
        for (uint32_t j = 0; j < t->n; j++)
            for (size_t k = 0; k < sizeof states / sizeof states[0]; k++)
                if (!t->etcd || states[k].etcd)
                    sample(&m, t, t->leases[j].name, "state", states[k].name,
                           t->leases[j].state == states[k].state);
    }
}

enum lcol { L_SHARED, L_WAITERS, L_REMAINING, L_TTL, L_TOKEN, L_REVISION };

static const struct {
    enum lcol col;
    const char *name, *help;
} lease_fams[] = {
    {L_SHARED, "shmlease_lease_shared_holders", "Valid shared holders of the lease."},
    {L_WAITERS, "shmlease_lease_waiters", "Processes waiting to acquire the lease."},
    {L_REMAINING, "shmlease_lease_remaining_seconds",
     "Time left to the lease's holder (the longest of its shared holders'); 0 when not held."},
    {L_TTL, "shmlease_lease_ttl_seconds",
     "The exclusive holder's ttl (from its acquisition or last renewal, while the table's "
     "history of the lease still shows it)."},
    {L_TOKEN, "shmlease_lease_token", "The last fencing token the lease issued, of either kind."},
    {L_REVISION, "shmlease_lease_last_revision",
     "etcd tables: the etcd revision of the lease's last holder event."},
};

static void lease_gauges(FILE *f, const struct metrics_snapshot *s, int om)
{
    for (size_t k = 0; k < sizeof lease_fams / sizeof lease_fams[0]; k++) {
        struct fam m = {f, lease_fams[k].name, "gauge", lease_fams[k].help, 0, om};
        for (int i = 0; i < s->n; i++) {
            const struct metrics_table *t = &s->tables[i];
            for (uint32_t j = 0; j < t->n; j++) {
                const struct metrics_lease *l = &t->leases[j];
                switch (lease_fams[k].col) {
                case L_SHARED:
                    sample(&m, t, l->name, NULL, NULL, l->shared);
                    break;
                case L_WAITERS:
                    sample(&m, t, l->name, NULL, NULL, l->waiters);
                    break;
                case L_REMAINING:
                    sample_s(&m, t, l->name, l->remaining_ns);
                    break;
                case L_TTL:
                    if (l->have_ttl)
                        sample_s(&m, t, l->name, l->ttl_ns);
                    break;
                case L_TOKEN:
                    sample(&m, t, l->name, NULL, NULL, l->token);
                    break;
                case L_REVISION:
                    if (t->etcd && l->revision > 0)
                        sample(&m, t, l->name, NULL, NULL, (uint64_t)l->revision);
                    break;
                }
            }
        }
    }
}

void metrics_write(FILE *f, const struct metrics_snapshot *s, int om)
{
    tables(f, s, om);
    pools(f, s, om);
    counters(f, s, om);
    state_fam(f, s, om);
    lease_gauges(f, s, om);
    if (om)
        fputs("# EOF\n", f);
}
