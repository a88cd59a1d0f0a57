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

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef void (*shl__repair_fn)(void *arg);

/* PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST, normal type. 0 or SHM_ESYS. */
int shl__mutex_init(pthread_mutex_t *m);

/* The single handler of a lock's result (EOWNERDEAD: repair, then mark
 * consistent). Called by the functions below for anything but 0. */
int shl__mutex_settle(pthread_mutex_t *m, int rc, shl__repair_fn repair, void *arg);

/* 0 once held (repaired if needed); SHM_EBROKEN when the mutex is
 * ENOTRECOVERABLE; SHM_ESYS for anything else. Inline so that the common
 * case, a lock that just succeeds, costs the lease operation no extra calls. */
static inline int shl__mutex_lock(pthread_mutex_t *m, shl__repair_fn repair, void *arg)
{
    int rc = pthread_mutex_lock(m);
    return rc == 0 ? 0 : shl__mutex_settle(m, rc, repair, arg);
}

/* As above, but gives up with SHM_ETIMEDOUT at the absolute CLOCK_REALTIME
 * `deadline` (NULL: try once, do not wait). */
int shl__mutex_timedlock(pthread_mutex_t *m, const struct timespec *deadline, shl__repair_fn repair,
                         void *arg);

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
 * it: every lock attempt fails at once). 0 or SHM_ESYS. */
int shl__mutex_reinit(pthread_mutex_t *m);

/* Crash points: compiled into the test build only (SHL_TESTING), absent from
 * the installed library. A test arms one by number (SHL_CRASHPOINT=id[:hits]
 * in the environment) and the process raises SIGKILL on itself when it passes
 * there, dying exactly as a killed process would (or SIGSTOP with
 * SHL_CRASHPOINT=id:hits:stop: a creator descheduled there for any time). */
/* shm's own crash points: a creator with its unnamed file made but not yet
 * sized or initialised, and one with its segment initialised but not yet
 * published under the table's name. */
#define SHL__CP_SHM_CREATED 101
#define SHL__CP_SHM_CREATE  100

#ifdef SHL_TESTING
void shl__crashpoint(int id);
/* Forgets the armed crash point so that SHL_CRASHPOINT is read again (a
 * forked child inherits its parent's reading). */
void shl__crashpoint_reset(void);
#define SHL__CRASH(id) shl__crashpoint(id)
#else
#define SHL__CRASH(id) ((void)0)
#endif

#endif
