/*
 * shm/clock.h - the clocks a table can run on.
 */
#ifndef SHL_SHM_CLOCK_H
#define SHL_SHM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: a vDSO call, no system call.
 *
 * Why not CLOCK_MONOTONIC_COARSE on the hot path, although it is several
 * times cheaper: it returns the time of the last timekeeping update, a lower
 * bound of CLOCK_MONOTONIC with no bound on how far behind it may be (a
 * descheduled or paused virtual CPU delays the update arbitrarily). A lower
 * bound can prove "expired" (coarse >= expiry implies now >= expiry) but
 * never "valid" (now < expiry needs an upper bound), and every operation on
 * the hot path needs the exact now: renew, release, write and guard must
 * prove validity, a busy acquire must prove now < expiry, and a successful
 * acquire stores now + ttl. The only answers the coarse clock could decide
 * are refusals of already-expired holders, which are rare and not worth a
 * second clock path. */
static inline uint64_t shl__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static inline struct timespec shl__ns_to_ts(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / UINT64_C(1000000000)), (long)(ns % UINT64_C(1000000000))};
    return ts;
}

#endif
