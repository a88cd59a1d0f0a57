/*
 * shm/clock.h - the clocks a table can run on.
 */
#ifndef SHL_SHM_CLOCK_H
#define SHL_SHM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: a vDSO call, no system call. */
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
