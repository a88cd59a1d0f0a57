/*
 * shm/futex.h - sleeping on a word of the shared segment.
 *
 * Waiters in different processes sleep on the same physical word, so these
 * are shared futexes (no FUTEX_PRIVATE_FLAG): the kernel keys them by the
 * page and offset, not by the address in one process. No process-shared
 * condition variable is used anywhere: a waiter that dies while asleep on a
 * futex leaves no kernel or segment state behind.
 */
#ifndef SHL_SHM_FUTEX_H
#define SHL_SHM_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

#define SHL__NO_DEADLINE UINT64_MAX

/*
 * Sleeps while *w == val, until woken or the absolute CLOCK_MONOTONIC time
 * `deadline_ns` (SHL__NO_DEADLINE: no bound). Returns 0 when woken, when *w
 * already differed, or when a signal interrupted the sleep (the caller
 * re-checks its condition and calls again: the deadline is absolute, so a
 * restart does not extend it); SHL__SHM_ETIMEDOUT once the deadline has passed.
 */
int shl__futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t deadline_ns);

/* Wakes up to n sleepers on w (INT32_MAX: all). */
void shl__futex_wake(_Atomic uint32_t *w, int n);

#endif
