/*
 * tools/bench/bench.h - what the benchmark's parts share.
 *
 * A row measures one thing. Every round runs every row once, in the same
 * order, so that whatever else the machine is doing hits all rows alike; the
 * report gives min/median/max over the rounds and computes every ratio from
 * medians of the same run.
 */
#ifndef SHL_BENCH_H
#define SHL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "shmlease.h"

#define BENCH_MAX_ROUNDS 32
#define BENCH_MAX_ROWS 128

/* What one run of a row produced. ns_op is the headline number; rows that
 * measure throughput also fill ops_s and the latency percentiles. */
struct bench_sample {
    double ns_op;
    double ops_s;
    double p50_ns;
    double p99_ns;
};

struct bench_row {
    const char *group; /* "floor", "shmlease", "bound", "alt", "contention", ... */
    char name[64];
    /* Prepares the row; returns NULL when ready, or why the row is skipped. */
    const char *(*setup)(struct bench_row *r);
    /* One measurement of iters operations (or of one fixed-length run). 0 on
     * success. */
    int (*run)(struct bench_row *r, uint64_t iters, struct bench_sample *out);
    void (*teardown)(struct bench_row *r);
    void *ctx;
    int arg;          /* row-specific: worker count, fill percentage, ... */
    int fixed;        /* run() ignores iters: one call is one measurement */
    uint64_t iters;   /* chosen by calibration */
    const char *skip; /* set when setup declined */
    int nsamples;
    struct bench_sample s[BENCH_MAX_ROUNDS];
};

/* Monotonic now in ns. */
static inline uint64_t bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One step of a spin that waits for another process (PAUSE on x86). */
static inline void bench_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Keeps the compiler from dropping or merging the work around it. */
#define BENCH_CLOBBER() __asm__ volatile("" ::: "memory")

/* Adds a row; returns it so the caller can set ctx/arg. */
struct bench_row *bench_add(const char *group, const char *name,
                            const char *(*setup)(struct bench_row *),
                            int (*run)(struct bench_row *, uint64_t, struct bench_sample *),
                            void (*teardown)(struct bench_row *));

/* The run's private directory (made by main, removed at exit) and options. */
extern char bench_dir[];
extern const char *bench_tool; /* path of the shmlease command */
extern int bench_quick;        /* smaller sizes for a smoke run */
extern const char *bench_only; /* NULL, or the groups to run ("floor,alt") */

/* A unique table name for this run: "shlbench-<pid>-<tag>". */
const char *bench_table_name(char *buf, size_t cap, const char *tag);

/* Creates the table bench_table_name(tag) for forked workers to open, and
 * closes it here; NULL, or why not. name has 96 bytes. */
const char *bench_create_table(char *name, const char *tag, uint32_t capacity,
                               uint32_t value_size);

/* The parts register their rows. */
void rows_floor(void);
void rows_shmlease(void);
void rows_names(void);
void rows_alt(void);
void rows_redis(void);
void rows_pg(void);
void rows_contention(void);
void rows_line(void);
void rows_turn(void);
void rows_scale(void);
void rows_wait(void);
/* From a leader's kill -9 to the next leader (both kinds: rows_election.c). */
void rows_election(void);
/* With etcd support (BENCH_HAVE_ETCD): the etcd floor (rows_etcd.c). */
void rows_etcd(void);
/* ... and shmlease's lease operations on an etcd table (rows_etcd_lease.c). */
void rows_etcd_lease(void);
/* One throwaway etcd member shared by the etcd rows, started by the first
 * row's setup (NULL, or why not; *endpoints for etc_config) and stopped
 * after the last row's teardown. */
const char *bench_etcd_start(const char **endpoints);
void bench_etcd_stop(void);

/* One-off measurements that are not repeated per round (creating a 10^6 table,
 * the inspector on it, bytes per lease), printed after the table. */
struct bench_note {
    char name[96];
    double value;
    const char *unit;
    const char *text; /* when the value is missing: why */
};
void bench_note(const char *name, double value, const char *unit, const char *text);

/* Servers started for a row (servers.c). Each returns 0 and fills *pid, or
 * a reason the server cannot run here. */
const char *bench_redis_start(const char *sock, int *pid);
const char *bench_pg_start(const char *dir, int *pid);
void bench_server_stop(int pid, int sig);

/* Latency histogram for the forked rows: 4 ns buckets up to 64 us, then one
 * overflow bucket per power of two. */
#define BENCH_HIST_LIN 16384
#define BENCH_HIST_LOG 32
struct bench_hist {
    uint64_t lin[BENCH_HIST_LIN];
    uint64_t log[BENCH_HIST_LOG];
    uint64_t n;
};
void bench_hist_add(struct bench_hist *h, uint64_t ns);
void bench_hist_merge(struct bench_hist *into, const struct bench_hist *h);
double bench_hist_pct(const struct bench_hist *h, double pct);

#endif
