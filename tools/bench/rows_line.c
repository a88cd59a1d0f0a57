/*
 * tools/bench/rows_line.c - the physical floor of the contention rows: one
 * cache line passed back and forth between two processes.
 *
 * Two processes take turns writing one word of a shared cache line, each
 * waiting (reading, with PAUSE) until the other has written; a round trip
 * is two transfers of the line between cores. Whatever a lease operation
 * does, two processes that take turns on one lease move at least its
 * mutex's line this way, so a row of the contention group can be read
 * against it: it is the price of each change of hands.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define ROUND_TRIPS 20000

struct line {
    _Alignas(64) _Atomic uint32_t turn;
    char pad[60];
};

static struct line *ln;

static const char *line_setup(struct bench_row *r)
{
    (void)r;
    void *p = mmap(NULL, sizeof *ln, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    ln = p;
    return NULL;
}

static void line_teardown(struct bench_row *r)
{
    (void)r;
    if (ln)
        munmap(ln, sizeof *ln);
    ln = NULL;
}

/* Waits until the word is v. */
static void await(uint32_t v)
{
    while (atomic_load_explicit(&ln->turn, memory_order_acquire) != v)
        bench_relax();
}

static int line_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)r;
    (void)iters;
    atomic_store(&ln->turn, 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid < 0)
        return -1;
    if (kid == 0) {
        for (uint32_t i = 0; i < ROUND_TRIPS; i++) {
            await(2 * i + 1);
            atomic_store_explicit(&ln->turn, 2 * i + 2, memory_order_release);
        }
        _exit(0);
    }
    /* The first round trip waits for the child to start: not timed. */
    atomic_store_explicit(&ln->turn, 1, memory_order_release);
    await(2);
    uint64_t t0 = bench_now();
    for (uint32_t i = 1; i < ROUND_TRIPS; i++) {
        atomic_store_explicit(&ln->turn, 2 * i + 1, memory_order_release);
        await(2 * i + 2);
    }
    uint64_t dt = bench_now() - t0;
    int st;
    if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    o->ns_op = (double)dt / (ROUND_TRIPS - 1);
    o->ops_s = 1e9 / o->ns_op;
    o->p50_ns = o->p99_ns = o->ns_op;
    return 0;
}

void rows_line(void)
{
    struct bench_row *r = bench_add("floor", "cache line round trip, 2 processes", line_setup,
                                    line_run, line_teardown);
    r->fixed = 1;
}
