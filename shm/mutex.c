/*
 * shm/mutex.c - robust process-shared mutexes.
 */
#include "mutex.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

int shl__mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (rc != 0)
        return SHM_ESYS;
    rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0 ? 0 : SHM_ESYS;
}

/* The single EOWNERDEAD handler. */
int shl__mutex_settle(pthread_mutex_t *m, int rc, shl__repair_fn repair, void *arg)
{
    switch (rc) {
    case 0:
        return 0;
    case EOWNERDEAD:
        if (repair)
            repair(arg);
        /* Only after the repair: a repairer that dies before this point leaves
         * the mutex inconsistent, and the next locker repairs again. */
        if (pthread_mutex_consistent(m) != 0) {
            pthread_mutex_unlock(m);
            return SHM_ESYS;
        }
        return 0;
    case ENOTRECOVERABLE:
        return SHM_EBROKEN;
    case ETIMEDOUT:
    case EBUSY:
        return SHM_ETIMEDOUT;
    default:
        return SHM_ESYS;
    }
}

int shl__mutex_timedlock(pthread_mutex_t *m, const struct timespec *deadline, shl__repair_fn repair,
                         void *arg)
{
    int rc = deadline ? pthread_mutex_timedlock(m, deadline) : pthread_mutex_trylock(m);
    return shl__mutex_settle(m, rc, repair, arg);
}

#define FUTEX_TID_MASK_       0x3fffffff
#define FUTEX_OWNER_DIED_     0x40000000
#define GLIBC_NOTRECOVERABLE_ 0x7ffffffe /* INT_MAX - 1 in glibc's nptl */
#define GLIBC_KIND_ROBUST_    16
#define GLIBC_KIND_PSHARED_   128

int shl__mutex_peek(const pthread_mutex_t *m, int32_t *tid)
{
    int lock = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
    int owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
    int kind = __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);
    *tid = lock & FUTEX_TID_MASK_;
    if ((kind & (GLIBC_KIND_ROBUST_ | GLIBC_KIND_PSHARED_)) !=
        (GLIBC_KIND_ROBUST_ | GLIBC_KIND_PSHARED_))
        return SHL__MX_BADKIND;
    if (owner == GLIBC_NOTRECOVERABLE_)
        return SHL__MX_BROKEN;
    if (*tid != 0)
        return SHL__MX_HELD;
    if (lock & FUTEX_OWNER_DIED_) {
        *tid = owner;
        return SHL__MX_DEAD;
    }
    return SHL__MX_FREE;
}

int shl__mutex_reinit(pthread_mutex_t *m)
{
    return shl__mutex_init(m);
}

#ifdef SHL_TESTING
/* Armed through the environment so that a forked or exec'd child can be told
 * where to die: SHL_CRASHPOINT=<id>[:<hits>] dies on the <hits>-th pass;
 * SHL_CRASHPOINT=<id>:<hits>:stop stops there instead (SIGSTOP), a stall for
 * as long as the test wants, ended by SIGCONT. */
static _Atomic int crash_id = -2;
static _Atomic int crash_left;
static _Atomic int crash_sig = SIGKILL;

/* A child arms its crash point after fork(), when its parent may already have
 * read (and cached) an unarmed environment: read it again in every child. */
static void crash_rearm(void)
{
    atomic_store(&crash_id, -2);
}

void shl__crashpoint_reset(void)
{
    crash_rearm();
}

__attribute__((constructor)) static void crash_at_fork(void)
{
    pthread_atfork(NULL, NULL, crash_rearm);
}

void shl__crashpoint(int id)
{
    int want = atomic_load_explicit(&crash_id, memory_order_relaxed);
    if (want == -2) {
        const char *e = getenv("SHL_CRASHPOINT");
        char *end = NULL;
        want = e ? (int)strtol(e, &end, 10) : -1;
        int hits = 1;
        if (end && *end == ':') {
            hits = (int)strtol(end + 1, &end, 10);
            atomic_store(&crash_sig, strcmp(end, ":stop") == 0 ? SIGSTOP : SIGKILL);
        }
        atomic_store(&crash_left, hits > 0 ? hits : 1);
        atomic_store(&crash_id, want);
    }
    if (want != id)
        return;
    if (atomic_fetch_sub(&crash_left, 1) == 1)
        raise(atomic_load(&crash_sig));
}
#endif
