/*
 * tools/bench/rows_wait.c - wake-up latency of a waiting acquire: from the
 * holder's release to the return of the waiter's shl_acquire_wait(), in
 * another process. The holder releases only once the waiter is queued and
 * has had a millisecond to fall asleep on the futex, so what is measured is
 * a real wake-up: release, futex wake, scheduling, the waiter's acquire.
 * One run is a series of hand-overs; the row reports the run's p50 (the
 * min/median/max columns) and p99.
 */
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#ifdef BENCH_HAVE_WAIT
#define TTL (UINT64_C(60) * 1000000000u)

struct wait_shared {
    _Atomic uint32_t phase;
    _Atomic uint64_t t_release, t_acquired;
    struct bench_hist hist;
};

static struct wait_shared *ws;
static char wtable[96];

static const char *wait_setup(struct bench_row *r)
{
    (void)r;
    void *p = mmap(NULL, sizeof *ws, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    ws = p;
    return bench_create_table(wtable, "wait", 8, 16);
}

static void wait_teardown(struct bench_row *r)
{
    (void)r;
    shl_unlink(wtable);
    if (ws)
        munmap(ws, sizeof *ws);
    ws = NULL;
}

static int waiter(int rounds)
{
    shl_table *t;
    if (shl_open(wtable, NULL, &t) != SHL_OK)
        return 1;
    for (int i = 0; i < rounds; i++) {
        uint64_t tk;
        if (shl_acquire_wait(t, "handover", "waiter", TTL, UINT64_C(10) * 1000000000u, &tk) !=
            SHL_OK)
            return 2;
        atomic_store(&ws->t_acquired, bench_now());
        if (shl_release(t, "handover", "waiter", tk) != SHL_OK)
            return 3;
        atomic_store(&ws->phase, 2u * (uint32_t)i + 1);
        while (atomic_load(&ws->phase) != 2u * (uint32_t)i + 2)
            usleep(50);
    }
    shl_close(t);
    return 0;
}

/* Polls until the waiter is queued (its count shows in shl_stat). */
static int until_waiting(shl_table *t)
{
    for (int i = 0; i < 20000; i++) {
        shl_lease_info in;
        if (shl_stat(t, "handover", &in) == SHL_OK && in.waiters > 0)
            return 0;
        usleep(50);
    }
    return -1;
}

static int wait_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)r;
    (void)iters;
    int rounds = bench_quick ? 20 : 100;
    shl_table *t;
    uint64_t tk;
    if (shl_open(wtable, NULL, &t) != SHL_OK)
        return -1;
    if (shl_acquire(t, "handover", "holder", TTL, &tk) != SHL_OK) {
        shl_close(t);
        return -1;
    }
    memset(&ws->hist, 0, sizeof ws->hist);
    atomic_store(&ws->phase, 0);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(waiter(rounds));
    int bad = 0;
    for (int i = 0; i < rounds && !bad; i++) {
        if (until_waiting(t) != 0) {
            bad = 1;
            break;
        }
        usleep(1000);
        atomic_store(&ws->t_release, bench_now());
        bad |= shl_release(t, "handover", "holder", tk) != SHL_OK;
        while (!bad && atomic_load(&ws->phase) != 2u * (uint32_t)i + 1)
            usleep(20);
        bench_hist_add(&ws->hist, atomic_load(&ws->t_acquired) - atomic_load(&ws->t_release));
        bad |= shl_acquire(t, "handover", "holder", TTL, &tk) != SHL_OK;
        atomic_store(&ws->phase, 2u * (uint32_t)i + 2);
    }
    if (bad)
        kill(p, SIGKILL);
    int st;
    bad |= waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    bad |= shl_release(t, "handover", "holder", tk) != SHL_OK;
    shl_close(t);
    o->p50_ns = bench_hist_pct(&ws->hist, 50);
    o->p99_ns = bench_hist_pct(&ws->hist, 99);
    o->ns_op = o->p50_ns;
    return bad ? -1 : 0;
}

/* The physical floor of a hand-over: the same series, with a bare futex
 * word in shared memory instead of a lease. The waiter sleeps in
 * FUTEX_WAIT; the other process, a millisecond after the waiter said it
 * was going to sleep, notes the time, changes the word and calls
 * FUTEX_WAKE; the waiter notes the time it runs again. */
struct futex_shared {
    _Atomic uint32_t word;
    _Atomic uint32_t phase;
    _Atomic uint64_t t_wake, t_woken;
    struct bench_hist hist;
};

static struct futex_shared *fs;

static const char *futex_setup(struct bench_row *r)
{
    (void)r;
    void *p = mmap(NULL, sizeof *fs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    fs = p;
    return NULL;
}

static void futex_teardown(struct bench_row *r)
{
    (void)r;
    if (fs)
        munmap(fs, sizeof *fs);
    fs = NULL;
}

static int futex_sleeper(int rounds)
{
    for (int i = 0; i < rounds; i++) {
        uint32_t v = atomic_load(&fs->word);
        atomic_store(&fs->phase, 2u * (uint32_t)i + 1); /* about to sleep */
        /* The calls a waiting acquire makes: an absolute CLOCK_MONOTONIC
         * deadline (10 s, never reached), and a wake of every sleeper. */
        uint64_t until = bench_now() + UINT64_C(10) * 1000000000u;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        while (atomic_load(&fs->word) == v)
            syscall(SYS_futex, (uint32_t *)&fs->word, FUTEX_WAIT_BITSET, v, &ts, NULL,
                    FUTEX_BITSET_MATCH_ANY);
        atomic_store(&fs->t_woken, bench_now());
        atomic_store(&fs->phase, 2u * (uint32_t)i + 2);
    }
    return 0;
}

static int futex_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)r;
    (void)iters;
    int rounds = bench_quick ? 20 : 100;
    memset(&fs->hist, 0, sizeof fs->hist);
    atomic_store(&fs->phase, 0);
    atomic_store(&fs->word, 0);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(futex_sleeper(rounds));
    int bad = 0;
    for (int i = 0; i < rounds; i++) {
        uint64_t give_up = bench_now() + UINT64_C(10) * 1000000000u;
        /* >=: the sleeper moves on to the next round by itself */
        while (atomic_load(&fs->phase) < 2u * (uint32_t)i + 1 && !bad)
            if (bench_now() > give_up)
                bad = 1;
            else
                usleep(50);
        if (bad)
            break;
        usleep(1000); /* as the hand-over row: time to fall asleep */
        atomic_store(&fs->t_wake, bench_now());
        atomic_fetch_add(&fs->word, 1);
        syscall(SYS_futex, (uint32_t *)&fs->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        while (atomic_load(&fs->phase) < 2u * (uint32_t)i + 2 && !bad)
            if (bench_now() > give_up)
                bad = 1;
            else
                usleep(20);
        bench_hist_add(&fs->hist, atomic_load(&fs->t_woken) - atomic_load(&fs->t_wake));
    }
    if (bad)
        kill(p, SIGKILL);
    int st;
    bad |= waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    o->p50_ns = bench_hist_pct(&fs->hist, 50);
    o->p99_ns = bench_hist_pct(&fs->hist, 99);
    o->ns_op = o->p50_ns;
    return bad ? -1 : 0;
}
#else
static const char *wait_setup(struct bench_row *r)
{
    (void)r;
    return "pending: this build has no shl_acquire_wait";
}
static int wait_run(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    (void)n;
    (void)o;
    return -1;
}
#define wait_teardown NULL
#define futex_setup wait_setup
#define futex_run wait_run
#define futex_teardown NULL
#endif

void rows_wait(void)
{
    struct bench_row *f = bench_add("waiting", "futex wake -> sleeper runs (p50), floor",
                                    futex_setup, futex_run, futex_teardown);
    f->fixed = 1;
    struct bench_row *r = bench_add("waiting", "release -> waiter's acquire (p50)", wait_setup,
                                    wait_run, wait_teardown);
    r->fixed = 1;
}
