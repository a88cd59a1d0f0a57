/*
 * shm/mutex.c - robust process-shared mutexes.
 */
#include "mutex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "segment.h"

/* glibc's robust mutex: the lock word holds the owner's TID and the
 * kernel's FUTEX_OWNER_DIED; __owner is NOTRECOVERABLE once given up. */
#define FUTEX_TID_MASK_       0x3fffffff
#define FUTEX_OWNER_DIED_     0x40000000
#define FUTEX_WAITERS_        ((int)0x80000000u)
#define GLIBC_NOTRECOVERABLE_ 0x7ffffffe /* INT_MAX - 1 in glibc's nptl */
#define GLIBC_KIND_ROBUST_    16
#define GLIBC_KIND_PSHARED_   128

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

/*
 * Contended locks. glibc does not spin for robust mutexes: its adaptive
 * spinning belongs to a type of its own, PTHREAD_MUTEX_ADAPTIVE_NP (up to
 * glibc.pthread.mutex_spin_count trylocks, 100 by default), and the robust
 * kinds, adaptive or not, take __pthread_mutex_lock_full, which goes straight
 * to the futex. A contended lock then costs a futex wait and a futex wake,
 * two system calls of about a microsecond each on a virtual machine and a
 * sleep of several, for critical sections of tens of nanoseconds. So a
 * locker that finds the mutex held first watches the lock word, read only,
 * and tries again when it sees it free.
 *
 * Between looks it waits 1, 2, 4 ... PAUSEs, up to SHL__SPIN_GAP_NS
 * (shl__spin_gap_pauses(): 128 PAUSEs of 19.5 ns on a 2-vCPU EPYC VM). The long
 * gaps matter as much as the spinning: every look pulls the lock's cache
 * line away from the holder, and a holder that works through one lease
 * operation after another (lock, unlock, lock ...) pays for that line again
 * after every look. With short gaps, two processes on one hot lease spend
 * their time passing cache lines back and forth, each pass a few hundred
 * nanoseconds between cores; with long ones the holder finishes runs of
 * operations alone, and the waiter gets in when it next finds the mutex
 * free.
 *
 * It gives up and sleeps in pthread_mutex_lock() (shl__spin_over()):
 *   - when one hold lasts SHL__SPIN_HOLD_NS with no sign of work: a holder
 *     that runs leaves within a few hundred nanoseconds, one that does not
 *     is probably not running (preempted, stopped), and spinning would only
 *     keep its CPU from it. A new hold starts the count again: another TID
 *     in the word, or the caller's `progress` word moved (a slot's lock
 *     generation, which every locker of the slot bumps). The TID alone
 *     cannot tell one long hold from a holder that unlocks and locks again
 *     between two looks, which is what a busy holder does;
 *   - and in any case after SHL__SPIN_TOTAL_NS in all.
 * Once it has waited SHL__SPIN_YIELD_NS it also yields its CPU
 * (sched_yield()) before each look. With more processes than cores the
 * holder is often a process that was preempted while it held the lease or
 * the lock, and what the waiters wait for is that it runs again; a waiter
 * that yields lets it. (With 8 processes on 2 vCPUs hammering one lease:
 * 0.20-0.22 x one worker without the yields, 0.34-0.35 with them.) When
 * no other process wants the CPU, the yield returns at once.
 * Robustness is untouched: the word is only read; every acquisition is
 * pthread_mutex_trylock() or pthread_mutex_lock(), and whatever they report
 * (EOWNERDEAD included: a dead holder leaves no TID in the word, and the try
 * reports it) goes to shl__mutex_settle() as before.
 */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

static inline int holder_tid(const int *word)
{
    return __atomic_load_n(word, __ATOMIC_RELAXED) & FUTEX_TID_MASK_;
}

void shl__spin_begin(struct shl__spin *sp, int32_t holder, uint32_t gen, uint64_t now)
{
    sp->start = now;
    sp->since = now;
    sp->holder = holder;
    sp->gen = gen;
}

int shl__spin_over(struct shl__spin *sp, int32_t holder, uint32_t gen, uint64_t now)
{
    if (holder != sp->holder || gen != sp->gen) {
        sp->holder = holder;
        sp->gen = gen;
        sp->since = now;
    }
    return now - sp->since >= SHL__SPIN_HOLD_NS || now - sp->start >= SHL__SPIN_TOTAL_NS;
}

static inline uint32_t gen_of(const _Atomic uint32_t *progress)
{
    return progress ? atomic_load_explicit(progress, memory_order_relaxed) : 0;
}

int shl__spin_gap_pauses(uint64_t ns_per_256)
{
    uint64_t n = ns_per_256 ? SHL__SPIN_GAP_NS * 256 / ns_per_256 : 1024;
    return n < 16 ? 16 : n > 1024 ? 1024 : (int)n;
}

/* Measured on the first contended lock of the process, as the fastest of
 * four runs of 64 PAUSEs, so that a preemption in one does not count
 * (benign race: two threads measure alike). */
static _Atomic int gap_max;

static int gap_pauses(void)
{
    int g = atomic_load_explicit(&gap_max, memory_order_relaxed);
    if (__builtin_expect(g != 0, 1))
        return g;
    uint64_t best = UINT64_MAX;
    for (int run = 0; run < 4; run++) {
        uint64_t t0 = shl__mono_ns();
        for (int k = 0; k < 64; k++)
            cpu_relax();
        uint64_t dt = shl__mono_ns() - t0;
        best = dt < best ? dt : best;
    }
    g = shl__spin_gap_pauses(4 * best);
    atomic_store_explicit(&gap_max, g, memory_order_relaxed);
    return g;
}

int shl__mutex_lock_busy(pthread_mutex_t *m, const _Atomic uint32_t *progress)
{
    const int *word = &m->__data.__lock;
    struct shl__spin sp;
    shl__spin_begin(&sp, holder_tid(word), gen_of(progress), shl__mono_ns());
    int max = gap_pauses();
    for (int gap = 1;; gap = gap < max ? 2 * gap : max) {
        for (int k = 0; k < gap; k++)
            cpu_relax();
        int tid = holder_tid(word);
        if (tid == 0) { /* free, or its holder died: the try says which */
            int rc = shl__mutex_trylock(m);
            if (rc != EBUSY)
                return rc;
            tid = holder_tid(word);
        }
        uint64_t now = shl__mono_ns();
        if (shl__spin_over(&sp, tid, gen_of(progress), now))
            break;
        if (shl__spin_yields(&sp, now))
            sched_yield();
    }
    return pthread_mutex_lock(m);
}

/*
 * glibc's pthread_mutex_trylock() on a robust mutex that is not recoverable
 * takes the lock word (its compare-and-swap succeeds), sees the mark, and
 * returns ENOTRECOVERABLE without giving the word back: it tests the old
 * value of the swap (0) against its TID before unlocking, where
 * pthread_mutex_lock() unlocks unconditionally. The caller's next lock would
 * then wait for itself forever. So when the word carries this thread's TID,
 * give it back the way pthread_mutex_lock() does: store 0, wake a sleeper.
 * Error path only (gettid is a system call).
 */
int shl__mutex_untangle(pthread_mutex_t *m)
{
    int *word = &m->__data.__lock;
    int w = __atomic_load_n(word, __ATOMIC_RELAXED);
    if ((w & FUTEX_TID_MASK_) == (int)syscall(SYS_gettid)) {
        w = __atomic_exchange_n(word, 0, __ATOMIC_RELEASE);
        if (w & FUTEX_WAITERS_)
            syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
    return ENOTRECOVERABLE;
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
