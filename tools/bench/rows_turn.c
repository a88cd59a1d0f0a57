/*
 * tools/bench/rows_turn.c - the floor of a contended attempt: two processes
 * that take turns on one lease.
 *
 * Each process has its own handle and bound lease (owner "turn-<i>") on one
 * lease name. They take strict turns through a word in shared memory; in
 * its turn a process makes one attempt (acquire, then release: the lease is
 * always free then), timed, and passes the turn on. Nobody ever waits for
 * the mutex, yet every attempt finds the slot's lines (its mutex, holder,
 * history, counters) in the other process's cache: the row is what an
 * attempt costs when the lease changed hands just before it. The row shows
 * the p50 as ns/op, and the p99.
 *
 * Read it against the contention rows: an attempt that had to wait for the
 * other process costs this much on top of the wait, and a lease that changes
 * hands after every attempt is limited to one attempt per this time.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TURNS (2 * 20000)
#define TTL   (UINT64_C(10) * 1000000000u)

struct turn {
    _Alignas(64) _Atomic uint32_t turn;
    _Alignas(64) struct bench_hist hist[2];
};

static struct turn *tu;
static char table[96];

static const char *turn_setup(struct bench_row *r)
{
    (void)r;
    void *p = mmap(NULL, sizeof *tu, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    tu = p;
    const char *why = bench_create_table(table, "turn", 64, 64);
    if (why) {
        munmap(tu, sizeof *tu);
        tu = NULL;
    }
    return why;
}

static void turn_teardown(struct bench_row *r)
{
    (void)r;
    if (tu) {
        shl_unlink(table);
        munmap(tu, sizeof *tu);
    }
    tu = NULL;
}

#define GAVE_UP (TURNS + 1) /* the turn word once a process failed */

/* Process i (0 or 1) makes the attempts of turns i, i + 2, ...; the first
 * two turns only bring both processes' handles in and are not timed. */
static int take_turns(int i)
{
    shl_table *t = NULL;
    shl_lease *l = NULL;
    char owner[32];
    snprintf(owner, sizeof owner, "turn-%d", i);
    int bad =
        shl_open(table, NULL, &t) != SHL_OK || shl_lease_open(t, "in-turn", owner, &l) != SHL_OK;
    struct bench_hist *h = &tu->hist[i];
    for (uint32_t k = (uint32_t)i; !bad && k < TURNS; k += 2) {
        uint32_t v;
        while ((v = atomic_load_explicit(&tu->turn, memory_order_acquire)) != k && v != GAVE_UP)
            bench_relax();
        if (v == GAVE_UP) {
            bad = 1;
            break;
        }
        uint64_t t0 = bench_now(), token;
        bad = shl_lease_acquire(l, TTL, &token, NULL) != SHL_OK ||
              shl_lease_release(l, token) != SHL_OK;
        uint64_t dt = bench_now() - t0;
        if (k >= 2)
            bench_hist_add(h, dt);
        atomic_store_explicit(&tu->turn, bad ? GAVE_UP : k + 1, memory_order_release);
    }
    if (bad) /* the other process must not wait for a turn that never comes (again) */
        atomic_store_explicit(&tu->turn, GAVE_UP, memory_order_release);
    if (l)
        shl_lease_close(l);
    if (t)
        shl_close(t);
    return bad;
}

static int turn_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)r;
    (void)iters;
    memset(tu->hist, 0, sizeof tu->hist);
    atomic_store(&tu->turn, 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid < 0)
        return -1;
    if (kid == 0)
        _exit(take_turns(1));
    int bad = take_turns(0), st;
    if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || bad)
        return -1;
    bench_hist_merge(&tu->hist[0], &tu->hist[1]);
    o->p50_ns = bench_hist_pct(&tu->hist[0], 50);
    o->p99_ns = bench_hist_pct(&tu->hist[0], 99);
    o->ns_op = o->p50_ns;
    o->ops_s = 1e9 / o->ns_op;
    return 0;
}

void rows_turn(void)
{
    struct bench_row *r = bench_add("floor", "lease attempt in turn, 2 processes", turn_setup,
                                    turn_run, turn_teardown);
    r->fixed = 1;
}
