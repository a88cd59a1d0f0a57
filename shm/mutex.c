/*
 * shm/mutex.c - robust process-shared mutexes.
 */
#include "mutex.h"

#include <errno.h>

#include "segment.h"

int shl__mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    int rc = pthread_mutexattr_init(&a);
    if (rc != 0)
        return SHL__SHM_ESYS;
    rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0 ? 0 : SHL__SHM_ESYS;
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
            return SHL__SHM_ESYS;
        }
        return 0;
    case ENOTRECOVERABLE:
        return SHL__SHM_EBROKEN;
    default:
        return SHL__SHM_ESYS;
    }
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
