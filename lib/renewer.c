/*
 * lib/renewer.c - a thread that keeps a lease alive and reports its loss.
 *
 * The renewer sleeps on the lease's `wake` futex word, so a revoke (which
 * always wakes that word) is seen at once rather than at the next renewal;
 * otherwise it wakes for the next renewal or for its local deadline. The
 * local deadline is computed from the time a renewal *started*, never from
 * when it returned: the table set expiry = (its clock inside the lock) + ttl,
 * which is no earlier than our start, so start + ttl - margin is on the safe
 * side of the real expiry whatever the delay.
 *
 * On an etcd table there is no slot: the thread sleeps on a word of its
 * own (woken by stop and by a writer's declaration), a renewal with the
 * same ttl is a keep-alive of the holder's etcd lease, a revoke is noticed
 * at the next renewal, and no heartbeat is recorded.
 *
 * A removed table is a loss of its own kind (SHL_LOSS_REMOVED): shl_unlink()
 * marks the segment and wakes the thread; a removal by anything else is seen
 * by the look at the table's name before each renewal (shl__shm_renewer_removed(),
 * which marks it then), so within one renewal interval.
 *
 * Loss is declared by one compare-and-swap on `lost`; whoever wins (the
 * renewer thread, or a writer that found the deadline passed or was refused)
 * signals the eventfd and hands the callback to the renewer thread. Each of
 * the three reports therefore happens exactly once.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../shm/futex.h"
#include "../shm/clock.h"
#include "internal.h"

struct shl_renewer {
    shl_table *t;
    struct shl__slot *s;    /* NULL on an etcd table */
    _Atomic uint32_t *wake; /* the word the thread sleeps on: s->wake or own_wake */
    _Atomic uint32_t own_wake;
    uint32_t word0; /* *wake before the first renewal: the first sleep's */
    uint64_t token, ttl, interval, margin, hold_end; /* hold_end: 0 = none */
    shl_loss_fn on_loss;
    void *arg;
    int efd;
    unsigned fork_gen; /* the table handle's: its thread lives in that process only */
    pthread_t thread;
    _Atomic uint64_t safe_until; /* local deadline, CLOCK_MONOTONIC */
    _Atomic int lost;            /* 0 or SHL_LOSS_* */
    _Atomic int cb_pending;      /* loss declared, callback not yet run */
    _Atomic int stop;
    char lease[SHL_NAME_MAX + 1];
    char owner[SHL_OWNER_MAX + 1];
};

void shl_renewer_options_init(shl_renewer_options *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

/* Wakes the renewer's thread. */
static void poke(shl_renewer *r)
{
    if (r->s) {
        shl__shm_renewer_poke(r->s);
        return;
    }
    atomic_fetch_add(&r->own_wake, 1);
    shl__futex_wake(&r->own_wake, INT32_MAX);
}

/* Declares the loss, unless already declared. `on_thread`: called by the
 * renewer's own thread, which runs the callback itself. */
static void declare(shl_renewer *r, int reason, int on_thread)
{
    int zero = 0;
    if (!atomic_compare_exchange_strong(&r->lost, &zero, reason))
        return;
    /* Only the winner of the CAS writes, so the descriptor says 1 exactly
     * once (tests/threads_renewer.c reads it back). */
    uint64_t one = 1;
    (void)!write(r->efd, &one, sizeof one);
    atomic_store(&r->cb_pending, 1);
    if (!on_thread)
        poke(r); /* wake the renewer's thread: it runs the callback */
}

static void run_callback(shl_renewer *r)
{
    if (atomic_exchange(&r->cb_pending, 0) && r->on_loss)
        r->on_loss(r->arg, atomic_load(&r->lost));
}

static void beat(shl_renewer *r, uint64_t now)
{
    if (r->s)
        shl__shm_renewer_beat(r->s, r->token, r->interval, now);
}

/* One renewal attempt at `now`; next renewal time in *next. */
static void renew_once(shl_renewer *r, uint64_t now, uint64_t *next)
{
    uint64_t ttl = r->ttl;
    if (r->hold_end && r->hold_end - now < ttl)
        ttl = r->hold_end - now; /* never extend past the hold bound */
    /* A removal by anything but shl_unlink() leaves the segment working for
     * those that have it open: look at the name before each renewal. */
    int rc = r->s && shl__shm_renewer_removed(r->t)
                 ? SHL_EREMOVED
                 : shl_renew(r->t, r->lease, r->owner, r->token, ttl);
    if (rc == SHL_OK) {
        uint64_t safe = now + ttl - r->margin;
        if (safe > atomic_load(&r->safe_until))
            atomic_store(&r->safe_until, safe);
        beat(r, now);
        *next = now + r->interval;
    } else if (rc == SHL_ELOST) {
        declare(r, SHL_LOSS_REFUSED, 1);
    } else if (rc == SHL_EREMOVED) {
        declare(r, SHL_LOSS_REMOVED, 1);
    } else {
        /* Transient (a broken lock being repaired, ...): try again soon; the
         * local deadline still bounds how long we believe we hold it. */
        *next = now + r->interval / 4 + 1;
    }
}

/* Whether the renewer's token is a shared holder of the lease not released
 * or ended (the inspector's snapshot, on an early wake only). */
static int shared_still(shl_renewer *r)
{
    static _Thread_local shl_lease_detail d; /* large: not on the thread's stack */
    if (shl_inspect(r->t, r->lease, &d) != SHL_OK || !d.stable)
        return 1; /* no proof of a loss: the next renewal decides */
    for (uint32_t i = 0; i < d.nshared; i++)
        if (d.shared[i].token == r->token && d.shared[i].state != SHL_STATE_EXPIRED)
            return 1;
    return 0;
}

/* Woken early: was it a revoke, or did someone else take the lease? */
static void look_at_lease(shl_renewer *r)
{
    shl_lease_info in;
    int rc = shl_stat(r->t, r->lease, &in);
    if (rc == SHL_EREMOVED) /* shl_unlink() woke us */
        declare(r, SHL_LOSS_REMOVED, 1);
    if (rc != SHL_OK)
        return;
    if (in.token == r->token && in.state != SHL_STATE_REVOKED && in.state != SHL_STATE_FREE)
        return;
    if (in.token != r->token && in.shared != 0 && shared_still(r))
        return; /* a shared holder: another reader came or went */
    declare(r, SHL_LOSS_REFUSED, 1);
}

static void *renewer_main(void *arg)
{
    shl_renewer *r = arg;
    uint64_t next = shl__mono_ns() + r->interval;
    int first = 1;
    while (!atomic_load(&r->stop)) {
        /* The first sleep compares the word as it was before the renewal
         * that proved the lease in shl_renewer_start(): a revoke between
         * that renewal and this thread's start has moved it, so the sleep
         * ends at once and the lease is looked at. */
        uint32_t word = first ? r->word0 : atomic_load(r->wake);
        first = 0;
        if (atomic_load(&r->stop))
            break;
        /* After the word: a mark whose wake came before that load is seen. */
        if (r->s && shl__shm_renewer_marked(r->t))
            declare(r, SHL_LOSS_REMOVED, 1);
        run_callback(r);
        uint64_t until = SHL__NO_DEADLINE;
        if (!atomic_load(&r->lost)) {
            uint64_t now = shl__mono_ns();
            uint64_t safe = atomic_load(&r->safe_until);
            if (now >= safe) {
                int held_to_end = r->hold_end && safe == r->hold_end - r->margin;
                declare(r, held_to_end ? SHL_LOSS_MAX_HOLD : SHL_LOSS_DEADLINE, 1);
                if (held_to_end) {
                    /* Refused only when it ended on its own: the loss is
                     * declared either way. */
                    int rc = shl_release(r->t, r->lease, r->owner, r->token);
                    (void)rc;
                }
                continue;
            }
            if (now >= next)
                renew_once(r, now, &next);
            if (atomic_load(&r->lost))
                continue;
            safe = atomic_load(&r->safe_until);
            until = next < safe ? next : safe;
        }
        if (shl__futex_wait(r->wake, word, until) == 0 && !atomic_load(&r->lost) &&
            !atomic_load(&r->stop))
            look_at_lease(r);
    }
    run_callback(r);
    return NULL;
}

static int check_args(shl_table *t, const char *lease, const char *owner, uint64_t token,
                      uint64_t ttl, const shl_renewer_options *o, shl_renewer **out)
{
    SHL__CHECK_HANDLE(t);
    struct shl__key k;
    uint32_t olen;
    if (!out || !o)
        return SHL_EINVAL;
    if (token == 0)
        return shl__bad_token();
    if (t->clock == SHL__CLOCK_MANUAL)
        return shl__fail(SHL_EINVAL, "table: a manual clock; a renewer needs a monotonic one");
    if (ttl < SHL_RENEWER_TTL_MIN)
        return shl__fail(SHL_EINVAL, "ttl: %llu ns, a renewer's must be at least %llu ns (10 ms)",
                         (unsigned long long)ttl, (unsigned long long)SHL_RENEWER_TTL_MIN);
    if (shl__key_lease(lease, &k) != SHL_OK || shl__owner_len(owner, &olen) != SHL_OK)
        return SHL_EINVAL;
    uint64_t margin = o->margin_ns ? o->margin_ns : ttl / 10;
    uint64_t interval = o->interval_ns ? o->interval_ns : ttl / 3;
    if (margin >= ttl)
        return shl__fail(SHL_EINVAL, "margin_ns: %llu, it must be below the ttl (%llu)",
                         (unsigned long long)margin, (unsigned long long)ttl);
    if (interval == 0 || interval >= ttl - margin)
        return shl__fail(SHL_EINVAL,
                         "interval_ns: %llu, it must be above 0 and below ttl - margin "
                         "(%llu)",
                         (unsigned long long)interval, (unsigned long long)(ttl - margin));
    if (o->max_hold_ns && o->max_hold_ns <= margin)
        return shl__fail(SHL_EINVAL, "max_hold_ns: %llu, it must be above the margin (%llu)",
                         (unsigned long long)o->max_hold_ns, (unsigned long long)margin);
    return SHL_OK;
}

int shl_renewer_start(shl_table *t, const char *lease, const char *owner, uint64_t token,
                      uint64_t ttl_ns, const shl_renewer_options *o, shl_renewer **out)
{
    shl_renewer_options defaults;
    shl_renewer_options_init(&defaults);
    if (!o)
        o = &defaults;
    int rc = check_args(t, lease, owner, token, ttl_ns, o, out);
    if (rc != SHL_OK)
        return rc;
    *out = NULL;
    shl_renewer *r = calloc(1, sizeof *r);
    if (!r)
        return SHL_ENOMEM;
    r->t = t;
    r->fork_gen = t->fork_gen;
    r->token = token;
    r->ttl = ttl_ns;
    r->margin = o->margin_ns ? o->margin_ns : ttl_ns / 10;
    r->interval = o->interval_ns ? o->interval_ns : ttl_ns / 3;
    r->on_loss = o->on_loss;
    r->arg = o->arg;
    strcpy(r->lease, lease);
    strcpy(r->owner, owner);
    r->s = t->kind == SHL__KIND_SHM ? shl__shm_renewer_slot(t, lease) : NULL;
    r->wake = r->s ? shl__shm_renewer_wake(r->s) : &r->own_wake;
    r->word0 = atomic_load(r->wake);
    uint64_t now = shl__mono_ns();
    if (o->max_hold_ns)
        r->hold_end = o->max_hold_ns < UINT64_MAX - now ? now + o->max_hold_ns : UINT64_MAX;
    /* The first renewal both proves validity and sets the local deadline. */
    rc = r->s || t->kind != SHL__KIND_SHM
             ? shl_renew(t, lease, owner, token,
                         r->hold_end && r->hold_end - now < ttl_ns ? r->hold_end - now : ttl_ns)
             : SHL_ELOST;
    if (rc != SHL_OK)
        goto fail_renew;
    uint64_t ttl = r->hold_end && r->hold_end - now < ttl_ns ? r->hold_end - now : ttl_ns;
    atomic_store(&r->safe_until, now + ttl - r->margin);
    beat(r, now);
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) {
        rc = SHL_ESYS;
        goto fail_renew;
    }
    /* The thread takes no signals: they stay with the application's threads
     * (shmlease run relies on this for its signalfd). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&r->thread, NULL, renewer_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        rc = e == EAGAIN ? SHL_ENOMEM : SHL_ESYS;
        goto fail_thread;
    }
    *out = r;
    return SHL_OK;

fail_thread:
    close(r->efd);
fail_renew:
    free(r);
    return rc;
}

/* A forked child has a copy of the renewer but not its thread, and shares
 * the eventfd and the lease with the parent: every call refuses there, so
 * that the child neither believes it holds the parent's lease nor consumes
 * the parent's loss notification, nor stops the parent's heartbeat. */

int shl_renewer_fd(const shl_renewer *r)
{
    if (!r)
        return -1;
    return shl__forked(r->fork_gen) ? SHL_EFORK : r->efd;
}

int shl_renewer_lost(const shl_renewer *r)
{
    if (!r)
        return SHL_LOSS_REFUSED;
    return shl__forked(r->fork_gen) ? SHL_EFORK : atomic_load((_Atomic int *)&r->lost);
}

uint64_t shl_renewer_token(const shl_renewer *r)
{
    return r && !shl__forked(r->fork_gen) ? r->token : 0;
}

int shl_renewer_check(shl_renewer *r)
{
    if (!r)
        return SHL_EINVAL;
    if (shl__forked(r->fork_gen))
        return SHL_EFORK;
    if (atomic_load(&r->lost))
        return SHL_ELOST;
    if (r->s && shl__shm_renewer_marked(r->t)) { /* one load: marked by shl_unlink() */
        declare(r, SHL_LOSS_REMOVED, 0);
        return SHL_ELOST;
    }
    if (shl__mono_ns() >= atomic_load(&r->safe_until)) {
        /* Paused past the deadline, or the thread is late: either way we can
         * no longer tell that we hold it. */
        declare(r, SHL_LOSS_DEADLINE, 0);
        return SHL_ELOST;
    }
    return SHL_OK;
}

int shl_renewer_write(shl_renewer *r, const void *buf, size_t len)
{
    int rc = shl_renewer_check(r);
    if (rc != SHL_OK)
        return rc;
    rc = shl_write(r->t, r->lease, r->owner, r->token, buf, len);
    if (rc == SHL_ELOST)
        declare(r, SHL_LOSS_REFUSED, 0);
    else if (rc == SHL_EREMOVED)
        declare(r, SHL_LOSS_REMOVED, 0);
    return rc;
}

int shl_renewer_stop(shl_renewer *r, unsigned flags)
{
    if (!r)
        return SHL_OK;
    if (shl__forked(r->fork_gen)) {
        /* Frees this process's copy only; the thread, the heartbeat and the
         * lease are the parent's. */
        close(r->efd);
        free(r);
        return SHL_EFORK;
    }
    atomic_store(&r->stop, 1);
    poke(r);
    pthread_join(r->thread, NULL);
    if (r->s)
        shl__shm_renewer_end(r->s, r->token);
    int rc = atomic_load(&r->lost) ? SHL_ELOST : SHL_OK;
    if (rc == SHL_OK && (flags & SHL_RENEWER_RELEASE))
        rc = shl_release(r->t, r->lease, r->owner, r->token);
    close(r->efd);
    free(r);
    return rc;
}
