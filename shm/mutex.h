/*
 * shm/mutex.h - robust, process-shared mutexes and the one place that handles
 * a dead owner.
 *
 * Every lock of a segment mutex goes through shl__mutex_lock(). When the
 * previous owner died holding it (EOWNERDEAD), the caller's `repair` runs with
 * the mutex held, before anything else can see the protected data, and only
 * then is the mutex marked consistent. A repair must be idempotent: if the
 * repairer dies too, the next locker gets EOWNERDEAD again and repeats it.
 */
#ifndef SHL_SHM_MUTEX_H
#define SHL_SHM_MUTEX_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef void (*shl__repair_fn)(void *arg);

/* PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST, normal type. 0 or SHL__SHM_ESYS. */
int shl__mutex_init(pthread_mutex_t *m);

/* The single handler of a lock's result (EOWNERDEAD: repair, then mark
 * consistent). Called by shl__mutex_lock() for anything but 0. */
int shl__mutex_settle(pthread_mutex_t *m, int rc, shl__repair_fn repair, void *arg);

/* pthread_mutex_trylock(), except that an unrecoverable mutex is left
 * free, as pthread_mutex_lock() leaves it (see mutex.c). */
int shl__mutex_untangle(pthread_mutex_t *m);
static inline int shl__mutex_trylock(pthread_mutex_t *m)
{
    int rc = pthread_mutex_trylock(m);
    return __builtin_expect(rc == ENOTRECOVERABLE, 0) ? shl__mutex_untangle(m) : rc;
}

/* A lock found held: a bounded spin on the lock word while its holder runs
 * (see mutex.c), then pthread_mutex_lock(). `progress`: a word that the
 * mutex's holders change as they work (NULL: none), so that a holder seen
 * to change it counts as running. Returns what pthread_mutex_lock() or
 * pthread_mutex_trylock() returned: 0, EOWNERDEAD, ENOTRECOVERABLE, ... */
int shl__mutex_lock_busy(pthread_mutex_t *m, const _Atomic uint32_t *progress);

/* The spin's limits: one hold with no sign of work, the wait after which
 * the waiter yields its CPU before each look, the whole spin, and the
 * longest wait between two looks at the lock word. */
#define SHL__SPIN_HOLD_NS  UINT64_C(1000)
#define SHL__SPIN_YIELD_NS UINT64_C(5000)
#define SHL__SPIN_TOTAL_NS UINT64_C(200000)
#define SHL__SPIN_GAP_NS   UINT64_C(2500)

/* The longest wait between two looks in PAUSEs, given what 256 PAUSEs
 * took (ns): SHL__SPIN_GAP_NS worth, within [16, 1024]. A PAUSE lasts from
 * a few to over a hundred cycles depending on the processor, so the
 * library measures it once per process (mutex.c). */
int shl__spin_gap_pauses(uint64_t ns_per_256);

/* When to stop spinning, apart from the clock and the lock word: begin
 * with what the first look saw; over() is 1 once the waiter should sleep
 * instead (mutex.c says when). */
struct shl__spin {
    uint64_t start, since;
    int32_t holder;
    uint32_t gen;
};
void shl__spin_begin(struct shl__spin *sp, int32_t holder, uint32_t gen, uint64_t now);
int shl__spin_over(struct shl__spin *sp, int32_t holder, uint32_t gen, uint64_t now);
/* Whether the waiter, still spinning at `now`, yields its CPU before its
 * next look. */
static inline int shl__spin_yields(const struct shl__spin *sp, uint64_t now)
{
    return now - sp->start >= SHL__SPIN_YIELD_NS;
}

/* 0 once held (repaired if needed); SHL__SHM_EBROKEN when the mutex is
 * ENOTRECOVERABLE; SHL__SHM_ESYS for anything else. Inline so that the common
 * case, a lock that just succeeds, costs the lease operation no extra calls.
 * Every result but EBUSY, of the try as of the wait, goes to the one handler:
 * EOWNERDEAD is met and repaired the same way whichever call reported it.
 * `progress`: as for shl__mutex_lock_busy(). */
static inline int shl__mutex_lock(pthread_mutex_t *m, const _Atomic uint32_t *progress,
                                  shl__repair_fn repair, void *arg)
{
    int rc = shl__mutex_trylock(m);
    if (__builtin_expect(rc == EBUSY, 0))
        rc = shl__mutex_lock_busy(m, progress);
    return rc == 0 ? 0 : shl__mutex_settle(m, rc, repair, arg);
}

static inline void shl__mutex_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
}

/* What a mutex's bytes say without touching it (for the inspector; works on
 * a copy too). Reads glibc's robust-mutex words: the owner's tid in the lock
 * word, FUTEX_OWNER_DIED once the kernel saw it die, and the owner field's
 * NOTRECOVERABLE mark. */
enum shl__mx_state {
    SHL__MX_FREE = 0,
    SHL__MX_HELD,    /* *tid holds it */
    SHL__MX_DEAD,    /* its holder died; the next locker repairs */
    SHL__MX_BROKEN,  /* ENOTRECOVERABLE: every lock fails until reinitialised */
    SHL__MX_BADKIND, /* not a robust process-shared mutex: damaged */
};
int shl__mutex_peek(const pthread_mutex_t *m, int32_t *tid);

/* Reinitialises a mutex that is ENOTRECOVERABLE (nobody can hold or wait on
 * it: every lock attempt fails at once). 0 or SHL__SHM_ESYS. */
int shl__mutex_reinit(pthread_mutex_t *m);

#endif
