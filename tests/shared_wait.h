/*
 * tests/shared_wait.h - waiters in threads, each on a handle of its own,
 * and the waiting order of readers and writers: one scenario run on a
 * table of each kind (tests/helper_shared_wait.c), so that both kinds are
 * held to the same contract.
 */
#ifndef SHL_TESTS_SHARED_WAIT_H
#define SHL_TESTS_SHARED_WAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "shmlease.h"

/* A waiting acquire of lease "L" (shl_acquire_shared_wait() when shared,
 * else shl_acquire_wait(), ttl 30 s) in a thread, on its own handle of the
 * table `name`. Set name, owner, shared and timeout_ns (0: 60 s). */
struct t_waiter {
    const char *name, *owner;
    int shared;
    uint64_t timeout_ns;
    shl_table *t;
    pthread_t th;
    int rc;
    uint64_t token, gen;
    uint64_t done_at; /* t_now() when the call returned */
    _Atomic int done;
};

/* Lease "L"'s queued waiters (shl_stat()). */
uint32_t t_queued(shl_table *t);
/* Starts w and returns once `t` shows n waiters queued (w still waiting). */
void t_waiter_start(struct t_waiter *w, shl_table *t, uint32_t n);
/* Whether w's call has returned within ns. */
int t_waiter_done_within(struct t_waiter *w, uint64_t ns);
/* Joins w's thread and closes its handle. */
void t_waiter_finish(struct t_waiter *w);

/* On the existing table `name` (lease "L" never used, a clock of real
 * time): a writer holds; readers R1, R2, a writer W and a reader R3 queue
 * in that order. When the holder releases, R1 and R2 go in together
 * (tokens h+1, h+2, gen h) while W, R3 and plain readers stay out; W goes
 * in (h+3) only once both readers are gone; R3 (h+4, gen h+3) only after
 * W. `settle_ns`: how long "stays out" is watched for. */
void t_shared_wait_order(const char *name, uint64_t settle_ns);

#endif
