/*
 * tools/bench/rows_wait.c - wake-up latency of a waiting acquire: from the
 * holder's release to the waiter's successful acquire, in another process.
 */
#include "bench.h"

#ifdef BENCH_HAVE_WAIT
#error "the waiting row is written once shl_acquire_wait exists"
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
#endif

void rows_wait(void)
{
    struct bench_row *r = bench_add("waiting", "release -> waiter's acquire", wait_setup, wait_run,
                                    NULL);
    r->fixed = 1;
}
