/*
 * tools/bench/report.c - min/median/max per row, ratios from medians, the
 * targets, and the files.
 */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum metric { M_NS, M_OPS, M_P50, M_P99 };

struct stat3 {
    double min, med, max;
    int ok;
};

static double metric_of(const struct bench_sample *s, enum metric m)
{
    switch (m) {
    case M_NS:
        return s->ns_op;
    case M_OPS:
        return s->ops_s;
    case M_P50:
        return s->p50_ns;
    default:
        return s->p99_ns;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct stat3 stats(const struct bench_row *r, enum metric m)
{
    struct stat3 st = {0, 0, 0, 0};
    double v[BENCH_MAX_ROUNDS];
    int n = r->nsamples;
    if (n == 0)
        return st;
    for (int i = 0; i < n; i++)
        v[i] = metric_of(&r->s[i], m);
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    st.min = v[0];
    st.max = v[n - 1];
    st.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    st.ok = 1;
    return st;
}

static const struct bench_row *find(const struct report *rep, const char *group, const char *name)
{
    for (int i = 0; i < rep->nrows; i++)
        if (strcmp(rep->rows[i].group, group) == 0 && strcmp(rep->rows[i].name, name) == 0)
            return &rep->rows[i];
    return NULL;
}

double report_median(const struct report *rep, const char *group, const char *name)
{
    const struct bench_row *r = find(rep, group, name);
    if (!r || r->skip)
        return 0;
    struct stat3 s = stats(r, M_NS);
    return s.ok ? s.med : 0;
}

static int is_rate_group(const char *g)
{
    return strcmp(g, "contention") == 0 || strcmp(g, "etcd-cont") == 0 ||
           strcmp(g, "shared") == 0;
}

static void print_table(const struct report *rep)
{
    const struct bench_row *floor_row = find(rep, "floor", "lease-op floor");
    struct stat3 fl = floor_row ? stats(floor_row, M_NS) : (struct stat3){0, 0, 0, 0};
    const char *group = "";
    printf("\n%-11s %-40s %10s %10s %10s  %s\n", "group", "row", "min", "median", "max",
           "median / lease-op floor");
    for (int i = 0; i < rep->nrows; i++) {
        const struct bench_row *r = &rep->rows[i];
        if (strcmp(group, r->group) != 0) {
            group = r->group;
            printf("%s\n", strcmp(group, "contention") == 0
                               ? "-- contention: aggregate acquire+release pairs/s; p50/p99 ns "
                                 "per attempt; CPU ns per pair"
                           : strcmp(group, "shared") == 0
                               ? "-- shared: the same with shared (reader) acquisitions on one "
                                 "lease; mixed: worker 0 exclusive"
                           : strcmp(group, "etcd-cont") == 0
                               ? "-- etcd-cont: the same on an etcd table [no-fsync] (CPU: the "
                                 "workers' side only)"
                               : "----------------------------------------------------------"
                                 "--------------------------- ns/op");
        }
        if (r->skip || r->nsamples == 0) {
            printf("%-11s %-40s %10s  (%s)\n", r->group, r->name, "skipped",
                   r->skip ? r->skip : "no samples");
            continue;
        }
        if (is_rate_group(r->group)) {
            struct stat3 o = stats(r, M_OPS), p50 = stats(r, M_P50), p99 = stats(r, M_P99);
            printf("%-11s %-40s %10.0f %10.0f %10.0f  p50 %.0f  p99 %.0f  cpu/pair %.0f\n",
                   r->group, r->name, o.min, o.med, o.max, p50.med, p99.med, stats(r, M_NS).med);
            continue;
        }
        struct stat3 s = stats(r, M_NS);
        printf("%-11s %-40s %10.1f %10.1f %10.1f", r->group, r->name, s.min, s.med, s.max);
        if (stats(r, M_P99).med > 0) /* a latency row: per-run p50 above, p99 here */
            printf("  p99 %.0f", stats(r, M_P99).med);
        else if (fl.ok && fl.med > 0)
            printf("  %8.2fx", s.med / fl.med);
        printf("\n");
    }
}

struct target {
    const char *label;
    const char *ng, *nr; /* numerator row */
    const char *dg, *dr; /* denominator row; NULL: the bound is a value in ns */
    enum metric m;
    int ge; /* 1: ratio must be >= bound, 0: <= bound; DIFF: the difference
               of the medians in ns, not their ratio, <= bound */
    double bound;
};

#define DIFF 2

static const struct target targets[] = {
    {"bound write 64B / floor", "bound", "write 64B", "floor", "lease-op floor", M_NS, 0, 1.3},
    {"bound renew / floor", "bound", "renew", "floor", "lease-op floor", M_NS, 0, 1.3},
    {"bound read 64B / floor", "bound", "read 64B", "floor", "lease-op floor", M_NS, 0, 1.0},
    {"bound acquire+release / floor", "bound", "acquire+release", "floor", "lease-op floor", M_NS,
     0, 2.6},
    {"by-name write 64B / floor", "shmlease", "write 64B", "floor", "lease-op floor", M_NS, 0,
     1.3},
    {"by-name renew / floor", "shmlease", "renew", "floor", "lease-op floor", M_NS, 0, 1.3},
    {"by-name read 64B / floor", "shmlease", "read 64B", "floor", "lease-op floor", M_NS, 0, 1.0},
    {"by-name acquire+release / floor", "shmlease", "acquire+release", "floor", "lease-op floor",
     M_NS, 0, 2.6},
    {"by name / bound, write, 19+16 B", "names", "write 64B, 19+16 B, by name", "names",
     "write 64B, 19+16 B, bound", M_NS, 0, 1.15},
    {"by name / bound, renew, 19+16 B", "names", "renew, 19+16 B, by name", "names",
     "renew, 19+16 B, bound", M_NS, 0, 1.15},
    {"by name / bound, read, 19+16 B", "names", "read 64B, 19+16 B, by name", "names",
     "read 64B, 19+16 B, bound", M_NS, 0, 1.15},
    {"by name / bound, write, 1 B", "names", "write 64B, 1 B, by name", "names",
     "write 64B, 1 B, bound", M_NS, 0, 1.15},
    {"by name / bound, renew, 1 B", "names", "renew, 1 B, by name", "names", "renew, 1 B, bound",
     M_NS, 0, 1.15},
    {"by name / bound, write, 63 B", "names", "write 64B, 63 B, by name", "names",
     "write 64B, 63 B, bound", M_NS, 0, 1.15},
    {"by name / bound, renew, 63 B", "names", "renew, 63 B, by name", "names",
     "renew, 63 B, bound", M_NS, 0, 1.15},
    {"flock pair / by-name pair", "alt", "flock LOCK_EX+LOCK_UN", "shmlease", "acquire+release",
     M_NS, 1, 20},
    {"redis pair / by-name pair", "alt", "redis SET NX PX + CAD script", "shmlease",
     "acquire+release", M_NS, 1, 500},
    {"postgres pair / by-name pair", "alt", "pg try_advisory_lock+unlock", "shmlease",
     "acquire+release", M_NS, 1, 500},
    {"2 workers distinct / 1 worker", "contention", "distinct leases, 2 workers", "contention",
     "distinct leases, 1 worker", M_OPS, 1, 1.7},
    {"2 workers one lease / 1 worker", "contention", "one lease, 2 workers", "contention",
     "one lease, 1 worker", M_OPS, 1, 0.4},
    /* A p99 is what the machine does to a waiting process as much as what
     * the lock does: it is judged against the same run's p99 of the floor's
     * turn-taking, which pays the same scheduling. */
    {"p99 one lease, 2 workers / turn p99", "contention", "one lease, 2 workers", "floor",
     "lease attempt in turn, 2 processes", M_P99, 0, 4},
    {"hand-over p50 / futex wake p50", "waiting", "release -> waiter's acquire (p50)", "waiting",
     "futex wake -> sleeper runs (p50), floor", M_NS, 0, 1.5},
    {"4 workers one lease / 1 worker", "contention", "one lease, 4 workers", "contention",
     "one lease, 1 worker", M_OPS, 1, 0.25},
    {"8 workers one lease / 1 worker", "contention", "one lease, 8 workers", "contention",
     "one lease, 1 worker", M_OPS, 1, 0.25},
    {"shared pair / exclusive pair", "shmlease", "shared acquire+release", "shmlease",
     "acquire+release", M_NS, 0, 1.2},
    {"90% full / 1% full (by-name pair)", "scale", "acquire+release, 90% full", "scale",
     "acquire+release, 1% full", M_NS, 0, 1.15},
    {"spread, 1% full / floor", "scale", "acquire+release, 1% full, spread", "floor",
     "lease-op floor", M_NS, 0, 4},
    {"spread, 50% full / floor", "scale", "acquire+release, 50% full, spread", "floor",
     "lease-op floor", M_NS, 0, 4},
    {"spread, 90% full / floor", "scale", "acquire+release, 90% full, spread", "floor",
     "lease-op floor", M_NS, 0, 4},
    /* What finding the slot by name costs, in ns over the bound read. */
    {"by-name read - bound read (ns)", "shmlease", "read 64B", "bound", "read 64B", M_NS, DIFF, 4},
    {"by name - bound, read, 19+16 B (ns)", "names", "read 64B, 19+16 B, by name", "names",
     "read 64B, 19+16 B, bound", M_NS, DIFF, 4},
    /* On etcd the unit is a round trip: one txn on a kept-alive connection.
     * A same-ttl renew is two (a keep-alive, then the txn proving the
     * holder record is still on its etcd lease); acquire+release four
     * (grant, txn; the release's txn, revoke). */
    {"etcd guarded write / etcd txn", "etcd", "shmlease-on-etcd guarded write 64B", "etcd",
     "etcd txn cmp+put [no-fsync]", M_NS, 0, 1.2},
    {"etcd renew (same ttl) / etcd txn", "etcd", "shmlease-on-etcd renew (same ttl)", "etcd",
     "etcd txn cmp+put [no-fsync]", M_NS, 0, 2.2},
    {"etcd acquire+release / etcd txn", "etcd", "shmlease-on-etcd acquire+release", "etcd",
     "etcd txn cmp+put [no-fsync]", M_NS, 0, 5.0},
};

#define NTARGETS (sizeof targets / sizeof targets[0])

struct target_result {
    double ratio;     /* of the medians: the one judged */
    double ratio_min; /* of the minima: the least disturbed runs, for a noisy machine */
    int have, met;
};

static struct target_result eval_target(const struct report *rep, const struct target *t)
{
    struct target_result res = {0, 0, 0, 0};
    const struct bench_row *a = find(rep, t->ng, t->nr), *b = t->dg ? find(rep, t->dg, t->dr) : a;
    if (!a || !b || a->skip || b->skip)
        return res;
    struct stat3 x = stats(a, t->m), y = t->dg ? stats(b, t->m) : (struct stat3){1, 1, 1, 1};
    if (!x.ok || !y.ok || y.med == 0)
        return res;
    res.ratio = t->ge == DIFF ? x.med - y.med : x.med / y.med;
    /* For throughput the best run is the maximum. */
    res.ratio_min = t->ge == DIFF       ? x.min - y.min
                    : t->m == M_OPS ? (y.max > 0 ? x.max / y.max : 0)
                                    : (y.min > 0 ? x.min / y.min : 0);
    res.have = 1;
    res.met = t->ge == 1 ? res.ratio >= t->bound : res.ratio <= t->bound;
    return res;
}

static const struct bench_note *find_note(const struct report *rep, const char *prefix)
{
    for (int i = 0; i < rep->nnotes; i++)
        if (strncmp(rep->notes[i].name, prefix, strlen(prefix)) == 0)
            return &rep->notes[i];
    return NULL;
}

/* Targets on the one-off measurements: the note whose name starts with
 * `note`, divided by `scale`, against the bound. */
struct note_target {
    const char *label, *note;
    double scale, bound;
};

static const struct note_target note_targets[] = {
    {"bytes per lease, 256 B values (B)", "bytes per lease (segment / capacity, value size 256)",
     1, 2048},
    {"bytes, max_shared 0, no history (B)", "bytes per lease, value size 256, max_shared 0", 1,
     1024},
    /* A quarter of the 1.40 s measured before the pools (median of 3). */
    {"create 1,000,000-lease table (s)", "create 1000000-lease table", 1e3, 0.35},
    {"ls on it (s)", "shmlease ls on a full 1000000-lease table", 1e3, 1.0},
};

#define NNOTE_TARGETS (sizeof note_targets / sizeof note_targets[0])

static void print_note_targets(const struct report *rep)
{
    for (size_t i = 0; i < NNOTE_TARGETS; i++) {
        const struct note_target *t = &note_targets[i];
        const struct bench_note *n = find_note(rep, t->note);
        if (!n || n->text)
            printf("  %-36s <= %-6g  %8s  n/a (%s)\n", t->label, t->bound, "",
                   n ? n->text : "not measured in this run");
        else
            printf(t->scale == 1 ? "  %-36s <= %-6g  %8.0f  %s\n" : "  %-36s <= %-6g  %8.3f  %s\n",
                   t->label, t->bound, n->value / t->scale,
                   n->value / t->scale <= t->bound ? "met" : "MISSED");
    }
}

static void print_targets(const struct report *rep)
{
    printf("\ntargets (ratios of medians from this run, or a median or a difference of\n"
           "         medians in ns, or a one-off measurement; reported,\n"
           "         not asserted; 'best' is the same from the least disturbed runs:\n"
           "         min ns, max ops/s)\n");
    for (size_t i = 0; i < NTARGETS; i++) {
        const struct target *t = &targets[i];
        struct target_result r = eval_target(rep, t);
        if (!r.have)
            printf("  %-36s %s %-6g  %8s  n/a (row skipped)\n", t->label, t->ge == 1 ? ">=" : "<=",
                   t->bound, "");
        else if (t->ge == DIFF)
            printf("  %-36s %s %-6g  %8.1f  %-6s  (best %.1f)\n", t->label, t->ge == 1 ? ">=" : "<=",
                   t->bound, r.ratio, r.met ? "met" : "MISSED", r.ratio_min);
        else if (!t->dg) /* a value in ns, not a ratio */
            printf("  %-36s %s %-6g  %8.0f  %-6s  (best %.0f)\n", t->label, t->ge == 1 ? ">=" : "<=",
                   t->bound, r.ratio, r.met ? "met" : "MISSED", r.ratio_min);
        else
            printf("  %-36s %s %-6g  %8.2f  %-6s  (best %.2f)\n", t->label, t->ge == 1 ? ">=" : "<=",
                   t->bound, r.ratio, r.met ? "met" : "MISSED", r.ratio_min);
    }
    print_note_targets(rep);
    printf("\none-off measurements\n");
    for (int i = 0; i < rep->nnotes; i++) {
        const struct bench_note *n = &rep->notes[i];
        if (n->text)
            printf("  %-52s %s\n", n->name, n->text);
        else
            printf("  %-52s %12.1f %s\n", n->name, n->value, n->unit);
    }
}

static int write_csv(const struct report *rep, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "group,row,metric,unit,rounds,min,median,max,skipped\n");
    static const char *mname[] = {"ns_op", "ops_s", "p50_ns", "p99_ns"}; /* ns_op: CPU ns per
                                                                           pair for contention */
    static const char *unit[] = {"ns", "1/s", "ns", "ns"};
    for (int i = 0; i < rep->nrows; i++) {
        const struct bench_row *r = &rep->rows[i];
        if (r->skip || !r->nsamples) {
            fprintf(f, "%s,\"%s\",,,0,,,,\"%s\"\n", r->group, r->name,
                    r->skip ? r->skip : "no samples");
            continue;
        }
        int m1 = is_rate_group(r->group) ? M_P99 : M_NS;
        for (int m = M_NS; m <= m1; m++) {
            struct stat3 s = stats(r, (enum metric)m);
            fprintf(f, "%s,\"%s\",%s,%s,%d,%.2f,%.2f,%.2f,\n", r->group, r->name, mname[m],
                    unit[m], r->nsamples, s.min, s.med, s.max);
        }
    }
    for (int i = 0; i < rep->nnotes; i++) {
        const struct bench_note *n = &rep->notes[i];
        if (n->text)
            fprintf(f, "note,\"%s\",,,1,,,,\"%s\"\n", n->name, n->text);
        else
            fprintf(f, "note,\"%s\",value,%s,1,%.2f,%.2f,%.2f,\n", n->name, n->unit, n->value,
                    n->value, n->value);
    }
    return fclose(f) != 0;
}

static int write_json(const struct report *rep, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "{\n  \"rounds\": %d,\n  \"rows\": [\n", rep->rounds);
    for (int i = 0; i < rep->nrows; i++) {
        const struct bench_row *r = &rep->rows[i];
        fprintf(f, "    {\"group\": \"%s\", \"row\": \"%s\"", r->group, r->name);
        if (r->skip || !r->nsamples) {
            fprintf(f, ", \"skipped\": \"%s\"}", r->skip ? r->skip : "no samples");
        } else if (is_rate_group(r->group)) {
            struct stat3 o = stats(r, M_OPS), a = stats(r, M_P50), b = stats(r, M_P99);
            fprintf(f,
                    ", \"ops_s\": {\"min\": %.1f, \"median\": %.1f, \"max\": %.1f}, "
                    "\"p50_ns\": %.1f, \"p99_ns\": %.1f, \"cpu_ns_per_pair\": %.1f}",
                    o.min, o.med, o.max, a.med, b.med, stats(r, M_NS).med);
        } else {
            struct stat3 s = stats(r, M_NS);
            fprintf(f, ", \"ns_op\": {\"min\": %.2f, \"median\": %.2f, \"max\": %.2f}}", s.min,
                    s.med, s.max);
        }
        fprintf(f, "%s\n", i + 1 < rep->nrows ? "," : "");
    }
    fprintf(f, "  ],\n  \"targets\": [\n");
    for (size_t i = 0; i < NTARGETS; i++) {
        struct target_result r = eval_target(rep, &targets[i]);
        fprintf(f, "    {\"target\": \"%s\", \"bound\": \"%s %g\", ", targets[i].label,
                targets[i].ge == 1 ? ">=" : "<=", targets[i].bound);
        if (r.have && (!targets[i].dg || targets[i].ge == DIFF))
            fprintf(f, "\"value_ns\": %.0f, \"value_ns_best\": %.0f, \"met\": %s}", r.ratio,
                    r.ratio_min, r.met ? "true" : "false");
        else if (r.have)
            fprintf(f, "\"ratio\": %.3f, \"ratio_best\": %.3f, \"met\": %s}", r.ratio,
                    r.ratio_min, r.met ? "true" : "false");
        else
            fprintf(f, "\"ratio\": null, \"met\": null}");
        fprintf(f, "%s", i + 1 < NTARGETS ? ",\n" : "");
    }
    for (size_t i = 0; i < NNOTE_TARGETS; i++) {
        const struct note_target *t = &note_targets[i];
        const struct bench_note *n = find_note(rep, t->note);
        fprintf(f, ",\n    {\"target\": \"%s\", \"bound\": \"<= %g\", ", t->label, t->bound);
        if (!n || n->text)
            fprintf(f, "\"value\": null, \"met\": null}");
        else
            fprintf(f, "\"value\": %.3f, \"met\": %s}", n->value / t->scale,
                    n->value / t->scale <= t->bound ? "true" : "false");
    }
    fprintf(f, "\n  ],\n  \"notes\": [\n");
    for (int i = 0; i < rep->nnotes; i++) {
        const struct bench_note *n = &rep->notes[i];
        if (n->text)
            fprintf(f, "    {\"name\": \"%s\", \"missing\": \"%s\"}", n->name, n->text);
        else
            fprintf(f, "    {\"name\": \"%s\", \"value\": %.3f, \"unit\": \"%s\"}", n->name,
                    n->value, n->unit);
        fprintf(f, "%s\n", i + 1 < rep->nnotes ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) != 0;
}

/* workers, one-lease pairs/s, distinct-leases pairs/s (medians). */
static int write_plot(const struct report *rep, const char *dat, const char *png)
{
    FILE *f = fopen(dat, "w");
    if (!f)
        return 1;
    fprintf(f, "# workers one_lease_pairs_s distinct_leases_pairs_s\n");
    static const int ws[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "one lease, %d worker%s", ws[i], ws[i] > 1 ? "s" : "");
        snprintf(b, sizeof b, "distinct leases, %d worker%s", ws[i], ws[i] > 1 ? "s" : "");
        const struct bench_row *x = find(rep, "contention", a), *y = find(rep, "contention", b);
        double vx = x && !x->skip ? stats(x, M_OPS).med : 0;
        double vy = y && !y->skip ? stats(y, M_OPS).med : 0;
        fprintf(f, "%d %.0f %.0f\n", ws[i], vx, vy);
    }
    if (fclose(f) != 0)
        return 1;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("plot: gnuplot is not installed (make bench-deps); data in %s\n", dat);
        return 0;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal pngcairo size 800,500 noenhanced; set output '%s'; "
             "set title 'shmlease: acquire+release pairs/s against forked workers'; "
             "set xlabel 'workers'; set ylabel 'pairs per second (all workers)'; "
             "set logscale x 2; set xrange [0.8:10]; set xtics (1,2,4,8); set yrange [0:*]; "
             "set key top left; "
             "set grid; plot '%s' using 1:3 with linespoints lw 2 title 'distinct leases', "
             "'' using 1:2 with linespoints lw 2 title 'one lease'\" 2>/dev/null || "
             "gnuplot -e \"set terminal png size 800,500; set output '%s'; "
             "set logscale x 2; set yrange [0:*]; plot '%s' using 1:3 with linespoints "
             "title 'distinct leases', '' using 1:2 with linespoints title 'one lease'\"",
             png, dat, png, dat);
    if (system(cmd) != 0) {
        printf("plot: gnuplot failed; data in %s\n", dat);
        return 0;
    }
    printf("plot: %s\n", png);
    return 0;
}

int report_write(const struct report *rep)
{
    print_table(rep);
    print_targets(rep);
    if (rep->before && report_before(rep, rep->before) != 0)
        return 1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", rep->out);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench: cannot make %s\n", rep->out);
        return 1;
    }
    char p1[512], p2[512], p3[512], p4[512];
    snprintf(p1, sizeof p1, "%s/results.csv", rep->out);
    snprintf(p2, sizeof p2, "%s/results.json", rep->out);
    snprintf(p3, sizeof p3, "%s/contention.dat", rep->out);
    snprintf(p4, sizeof p4, "%s/contention.png", rep->out);
    int rc = write_csv(rep, p1) | write_json(rep, p2) | write_plot(rep, p3, p4);
    printf("results: %s, %s\n", p1, p2);
    return rc ? 1 : 0;
}
