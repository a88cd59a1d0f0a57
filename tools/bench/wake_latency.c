/*
 * tools/bench/wake_latency.c - how long from shl_release() to the waiter's
 * shl_acquire_wait() returning with the lease.
 *
 *   wake-latency [ROUNDS]      (default 2000)
 *
 * A forked waiter sleeps in shl_acquire_wait() on a lease the parent holds;
 * the parent notes the time and releases; the waiter notes the time it got
 * the lease. Prints one line of nanoseconds, for make bench to collect:
 *
 *   wake-latency rounds=2000 min=... p50=... p90=... p99=... max=...
 *
 * Exit 0, or 1 if something failed (with a message on stderr).
 */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shmlease.h"

#define TTL (UINT64_C(60) * 1000000000)

struct shared {
    _Atomic uint32_t held_round; /* the parent holds the lease for this round */
    _Atomic int failed;
    uint64_t released[1]; /* per round, then acquired[] after it */
};

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void waiter(const char *name, struct shared *sh, uint64_t *acquired, uint32_t rounds)
{
    shl_table *t;
    if (shl_open(name, NULL, &t) != SHL_OK)
        _exit(1);
    for (uint32_t i = 1; i <= rounds; i++) {
        while (atomic_load(&sh->held_round) < i)
            sched_yield();
        uint64_t tok;
        int rc = shl_acquire_wait(t, "L", "waiter", TTL, TTL, &tok);
        acquired[i - 1] = mono();
        if (rc != SHL_OK || shl_release(t, "L", "waiter", tok) != SHL_OK) {
            atomic_store(&sh->failed, 1);
            _exit(1);
        }
    }
    shl_close(t);
    _exit(0);
}

static int parent(shl_table *t, struct shared *sh, uint32_t rounds)
{
    for (uint32_t i = 1; i <= rounds; i++) {
        uint64_t tok;
        while (shl_acquire(t, "L", "holder", TTL, &tok) != SHL_OK) {
            if (atomic_load(&sh->failed))
                return -1;
            sched_yield();
        }
        atomic_store(&sh->held_round, i);
        shl_lease_info in;
        do { /* until the waiter sleeps in the queue */
            if (atomic_load(&sh->failed) || shl_stat(t, "L", &in) != SHL_OK)
                return -1;
            sched_yield();
        } while (in.waiters == 0);
        usleep(200); /* let it fall asleep on the futex */
        sh->released[i - 1] = mono();
        if (shl_release(t, "L", "holder", tok) != SHL_OK)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t rounds = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 2000;
    if (rounds == 0)
        rounds = 1;
    char name[64];
    snprintf(name, sizeof name, "shlbench-wake-%d", (int)getpid());
    size_t sz = sizeof(struct shared) + 2 * rounds * sizeof(uint64_t);
    struct shared *sh = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    uint64_t *acquired = sh->released + rounds;
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(name, &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "wake-latency: %s\n", shl_strerror(rc));
        return 1;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        waiter(name, sh, acquired, rounds);
    int ok = p > 0 && parent(t, sh, rounds) == 0;
    int st = 0;
    if (p > 0) {
        if (!ok)
            kill(p, SIGKILL);
        waitpid(p, &st, 0);
    }
    shl_close(t);
    shl_unlink(name);
    if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "wake-latency: a round failed\n");
        return 1;
    }
    uint64_t *lat = malloc(rounds * sizeof *lat);
    if (!lat)
        return 1;
    for (uint32_t i = 0; i < rounds; i++)
        lat[i] = acquired[i] - sh->released[i];
    qsort(lat, rounds, sizeof *lat, cmp_u64);
    printf("wake-latency rounds=%u min=%llu p50=%llu p90=%llu p99=%llu max=%llu\n", rounds,
           (unsigned long long)lat[0], (unsigned long long)lat[rounds / 2],
           (unsigned long long)lat[rounds * 9 / 10], (unsigned long long)lat[rounds * 99 / 100],
           (unsigned long long)lat[rounds - 1]);
    free(lat);
    return 0;
}
