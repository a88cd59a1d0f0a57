/*
 * shm/futex.c - shared futex wait with an absolute monotonic deadline.
 *
 * FUTEX_WAIT_BITSET takes an absolute timeout on CLOCK_MONOTONIC (plain
 * FUTEX_WAIT takes a relative one, which a restart after EINTR would have to
 * recompute and could stretch).
 */
#include "futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "segment.h"

int shl__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t deadline_ns)
{
    struct timespec ts, *tp = NULL;
    if (deadline_ns != SHL__NO_DEADLINE) {
        if (shl__mono_ns() >= deadline_ns)
            return SHL__SHM_ETIMEDOUT;
        ts = shl__ns_to_ts(deadline_ns);
        tp = &ts;
    }
    long r =
        syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_BITSET, val, tp, NULL, FUTEX_BITSET_MATCH_ANY);
    if (r == 0)
        return 0;
    if (errno == ETIMEDOUT)
        return SHL__SHM_ETIMEDOUT;
    /* EAGAIN: the word changed before we slept; EINTR: a signal. Both mean
     * "look again". */
    return 0;
}

void shl__futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, n, NULL, NULL, 0);
}
