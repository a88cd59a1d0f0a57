/*
 * tools/bench/main.c - shmlease's benchmark: rows, interleaved rounds, report.
 *
 *   shmlease-bench [--rounds N] [--ms MS] [--out DIR] [--tool PATH] [--quick]
 *                  [--only GROUP,...]
 *
 * Groups: floor, shmlease, bound, names, alt, contention, shared, scale, waiting
 * (and etcd, etcd-cont with etcd support). With
 * --only, only the named groups run (the floor is needed for the ratios).
 *
 * Each row is calibrated once (so that one run takes about --ms
 * milliseconds, 1 by default: short enough that most runs fit in one
 * scheduler time slice on a busy machine, so a preempted run is an outlier
 * rather than the rule), then every round (21 by default) runs every row
 * once, in an order shuffled anew each round. The table on stdout,
 * DIR/results.csv, DIR/results.json, DIR/contention.dat and, when gnuplot is
 * installed, DIR/contention.png.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "report.h"

char bench_dir[256];
const char *bench_tool = "build/shmlease";
int bench_quick;
const char *bench_only;

static struct bench_row rows[BENCH_MAX_ROWS];
static int nrows;
static struct bench_note notes[64];
static int nnotes;

struct bench_row *bench_add(const char *group, const char *name,
                            const char *(*setup)(struct bench_row *),
                            int (*run)(struct bench_row *, uint64_t, struct bench_sample *),
                            void (*teardown)(struct bench_row *))
{
    if (nrows == BENCH_MAX_ROWS) {
        fprintf(stderr, "bench: too many rows\n");
        exit(2);
    }
    static struct bench_row ignored;
    if (bench_only && !strstr(bench_only, group))
        return &ignored; /* not run: --only names other groups */
    struct bench_row *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    r->group = group;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->setup = setup;
    r->run = run;
    r->teardown = teardown;
    return r;
}

void bench_note(const char *name, double value, const char *unit, const char *text)
{
    if (nnotes == (int)(sizeof notes / sizeof notes[0]))
        return;
    struct bench_note *n = &notes[nnotes++];
    snprintf(n->name, sizeof n->name, "%s", name);
    n->value = value;
    n->unit = unit;
    n->text = text;
}

const char *bench_table_name(char *buf, size_t cap, const char *tag)
{
    snprintf(buf, cap, "shlbench-%d-%s", (int)getpid(), tag);
    return buf;
}

const char *bench_create_table(char *name, const char *tag, uint32_t capacity,
                               uint32_t value_size)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = value_size;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(bench_table_name(name, 96, tag), &o, &t);
    if (rc != SHL_OK)
        return shl_strerror(rc);
    shl_close(t);
    return NULL;
}

/* Grows iters until a run lasts long enough to time, then aims at target_ns. */
static int calibrate(struct bench_row *r, uint64_t target_ns)
{
    struct bench_sample s;
    if (r->fixed) {
        r->iters = 1;
        return r->run(r, 1, &s);
    }
    uint64_t n = 16;
    for (;;) {
        uint64_t t0 = bench_now();
        if (r->run(r, n, &s) != 0)
            return -1;
        uint64_t dt = bench_now() - t0;
        if (dt >= target_ns / 8 || n >= (UINT64_C(1) << 34)) {
            double per = (double)dt / (double)n;
            uint64_t want = (uint64_t)((double)target_ns / (per > 0.1 ? per : 0.1));
            r->iters = want < 16 ? 16 : want;
            return 0;
        }
        n *= dt < target_ns / 64 ? 8 : 2;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: shmlease-bench [--rounds N] [--ms MS] [--out DIR] [--tool PATH] [--quick]\n"
               "                      [--only GROUP,GROUP...]\n");
}

int main(int argc, char **argv)
{
    int rounds = 21;
    int ms = 1;
    const char *out = "build/bench";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc)
            ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--tool") == 0 && i + 1 < argc)
            bench_tool = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            bench_only = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            bench_quick = 1;
        else {
            usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS || ms < 1) {
        usage(stderr);
        return 2;
    }
    if (bench_quick && ms > 5)
        ms = 5;
    snprintf(bench_dir, sizeof bench_dir, "/tmp/shlbench-XXXXXX");
    if (!mkdtemp(bench_dir)) {
        fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    rows_floor();
    rows_line();
    rows_turn();
    rows_shmlease();
    rows_names();
    rows_alt();
    rows_redis();
    rows_pg();
    rows_contention();
    rows_scale();
    rows_wait();
    rows_election();
#ifdef BENCH_HAVE_ETCD
    rows_etcd();
    rows_etcd_lease();
#endif

    printf("setting up %d rows ...\n", nrows);
    for (int i = 0; i < nrows; i++) {
        struct bench_row *r = &rows[i];
        r->skip = r->setup ? r->setup(r) : NULL;
        if (!r->skip && calibrate(r, (uint64_t)ms * 1000000u) != 0)
            r->skip = "failed during calibration";
        if (r->skip)
            printf("  skip %-10s %-34s %s\n", r->group, r->name, r->skip);
    }
    int order[BENCH_MAX_ROWS];
    for (int i = 0; i < nrows; i++)
        order[i] = i;
    uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);
    for (int k = 0; k < rounds; k++) {
        printf("round %d/%d\n", k + 1, rounds);
        /* A new order every round (fixed seed: the same for every run), so
         * that no row always follows the same neighbour: the forked
         * contention rows, for one, leave the caches and the scheduler
         * disturbed for whatever runs next. */
        for (int i = nrows - 1; i > 0; i--) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            int j = (int)(seed % (uint64_t)(i + 1)), tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (int n = 0; n < nrows; n++) {
            struct bench_row *r = &rows[order[n]];
            if (r->skip)
                continue;
            if (r->run(r, r->iters, &r->s[r->nsamples]) != 0) {
                r->skip = "failed during a round";
                continue;
            }
            r->nsamples++;
        }
    }
    for (int i = 0; i < nrows; i++)
        if (rows[i].teardown)
            rows[i].teardown(&rows[i]);

    struct report rep = {rows, nrows, notes, nnotes, rounds, out};
    int rc = report_write(&rep);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", bench_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench: could not remove %s\n", bench_dir);
    return rc;
}
