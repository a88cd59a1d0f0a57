/*
 * lib/kind_shm/lease.c - acquire, renew, release and the guarded operations
 * on a shared-memory table. The entry points, with the checks both kinds
 * make, are lib/lease.c (by name) and lib/bound.c (bound leases).
 *
 * Each operation: the entry point validates the arguments (no lock); here,
 * find the slot (no lock; a bound lease has it already), lock the slot, read
 * the clock, check, change or refuse, unlock. The clock is read after the
 * lock is held, so a caller that waited for the lock is judged at the time
 * it got it. No allocation, no formatting, no system call but the futex
 * inside the mutex and the vDSO clock.
 */
#include "shm_kind.h"

/* Why (owner, token) is not valid now, as a SHL__C_REJ_* counter, or -1 when
 * it is valid. */
static int invalid_why(const struct shl__holder *c, const char *owner, uint32_t olen,
                       uint64_t token, uint64_t now)
{
    if (c->owner_len != olen || !shl__same_bytes(c->owner, owner, olen))
        return SHL__C_REJ_OWNER;
    if (c->token != token && !SHL__MUTANT(NO_TOKEN))
        return SHL__C_REJ_STALE;
    if (c->state != SHL__ST_HELD || (now >= c->expiry && !SHL__MUTANT(EXPIRED_WRITE)))
        return SHL__C_REJ_EXPIRED;
    return -1;
}

/* Records a refusal (counter and history) and returns SHL_ELOST. */
static int reject(const shl_table *t, struct shl__slot *s, int why, uint64_t token, uint64_t now,
                  const char *owner, uint32_t olen)
{
    shl__seq_begin(s);
    shl__count(s, (enum shl__counter)why);
    SHL__CRASH(SHL__CP_REJECT);
    shl__event(t, s, now, SHL__OP_REJECT, token, t->self.pid, owner, olen, (uint16_t)why);
    shl__seq_end(s);
    return SHL_ELOST;
}

/* Which holder (owner, token) names, judged at `now`: the exclusive one
 * (*idx = -1) or shared holder *idx. Why it is not valid, or -1 (as
 * invalid_why()). The exclusive holder is looked at first: with no shared
 * holder this is one comparison more than invalid_why(). */
static int holder_why(const shl_table *t, const struct shl__slot *s, const char *owner,
                      uint32_t olen, uint64_t token, uint64_t now, int *idx)
{
    *idx = -1;
    if (shl__unlikely(s->cur.token != token)) {
        int in_use;
        int i = shl__shared_find(t, s, token, &in_use);
        if (i >= 0) {
            *idx = i;
            int why = invalid_why(shl__tsh(t, s, (uint32_t)i), owner, olen, token, now);
            return why < 0 && !in_use ? SHL__C_REJ_EXPIRED : why;
        }
    }
    return invalid_why(&s->cur, owner, olen, token, now);
}

/* enter_holder(): in, but in the slot that kept the name of the one it was
 * given (retired): moved_to() says which. */
#define SLOT_MOVED 3

/* Common prologue of the operations that require validity, once the slot is
 * known: lock, clock, check. `kinds`: the holders that may do it (HOLD_*).
 * On SHL_OK the slot is locked, *now is the time and *idx says which holder
 * it is (-1: exclusive, else shared holder *idx). A slot that repair
 * retired is followed to the one that kept its name, where the operation
 * is judged, as by name, and which is then locked: SLOT_MOVED, see
 * ENTERED(). Found from a refusal (nobody is valid in a retired slot), so
 * a holder pays nothing. */
#define HOLD_EXCL   1
#define HOLD_SHARED 2
static int enter_moved(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                       uint64_t token, int kinds, uint64_t *now, int *idx);
static int enter_holder(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                        uint64_t token, int kinds, uint64_t *now, int *idx)
{
    uint64_t early = SHL__MUTANT(CLOCK_BEFORE_LOCK) ? shl__now(t) : 0;
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    *now = SHL__MUTANT(CLOCK_BEFORE_LOCK) ? early : shl__now(t);
    int why;
    if (kinds == HOLD_EXCL) {
        *idx = -1;
        why = invalid_why(&s->cur, owner, olen, token, *now);
    } else {
        why = holder_why(t, s, owner, olen, token, *now, idx);
        if (why < 0 && !(kinds & (*idx < 0 ? HOLD_EXCL : HOLD_SHARED)))
            why = SHL__C_REJ_STALE; /* the right token, of the other kind */
    }
    if (why >= 0) {
        if (shl__unlikely(s->cur.state == SHL__ST_RETIRED))
            return enter_moved(t, s, owner, olen, token, kinds, now, idx);
        rc = reject(t, s, why, token, *now, owner, olen);
        shl__slot_unlock(s);
        return rc;
    }
    return SHL_OK;
}

/* enter_holder() met a retired slot s, locked: in, in the slot that kept
 * its name. Out of line: the entry's fast path keeps its registers. */
static __attribute__((noinline, cold)) int enter_moved(shl_table *t, struct shl__slot *s,
                                                       const char *owner, uint32_t olen,
                                                       uint64_t token, int kinds, uint64_t *now,
                                                       int *idx)
{
    shl__slot_unlock(s);
    int rc = shl__follow(t, &s, &s, 0);
    if (rc == SHL_OK)
        rc = enter_holder(t, s, owner, olen, token, kinds, now, idx);
    return rc == SHL_OK ? SLOT_MOVED : rc;
}

/* The exclusive holder only: write, update, guard. */
static int enter_valid(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                       uint64_t token, uint64_t *now)
{
    int idx;
    return enter_holder(t, s, owner, olen, token, HOLD_EXCL, now, &idx);
}

/* After enter_holder() answered SLOT_MOVED: the slot it locked (this
 * thread's last), which the caller's *sp (unless sp is NULL) names from now
 * on (a relaxed store: threads sharing a bound lease may store it at once). */
static __attribute__((noinline, cold)) struct shl__slot *moved_to(struct shl__slot **sp)
{
    struct shl__slot *s = (struct shl__slot *)(uintptr_t)shl__last_lock.s;
    if (sp)
        __atomic_store_n(sp, s, __ATOMIC_RELAXED);
    return s;
}

/* Whether enter_holder()'s rc let the operation in, in slot s (moved with
 * it when it answered SLOT_MOVED, and rc made SHL_OK). */
#define ENTERED(rc, s, sp)                                                                         \
    (__builtin_expect((rc) == SHL_OK, 1) ||                                                        \
     ((rc) == SLOT_MOVED && ((s) = moved_to(sp), (rc) = SHL_OK, 1)))

/* The slot of a lease that a valid-only operation names (the arguments
 * checked by the entry point); SHL_ELOST when the name was never used
 * (nobody holds it). */
static int find_held(shl_table *t, const char *lease, struct shl__slot **sp)
{
    int rc = shl__lookup(t, lease, sp);
    return rc == SHL_ENOENT ? SHL_ELOST : rc;
}

int shl__shm_acquire_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                        uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder)
{
    int moved = 0;
    uint64_t before = SHL__MUTANT(CLOCK_BEFORE_LOCK) ? shl__now(t) : 0;
    int rc = shl__slot_lock_moved(t, s, &moved);
    if (rc != SHL_OK)
        return rc;
    if (moved)
        shl__slot_prefetch_acquire(s);
    uint64_t now = SHL__MUTANT(CLOCK_BEFORE_LOCK) ? before : shl__now(t);
    struct shl__holder *c = &s->cur;
    uint32_t op = SHL__OP_ACQUIRE;
    if (c->state == SHL__ST_RETIRED) { /* its name lives in a twin now */
        shl__slot_unlock(s);
        return SHL__SLOT_RETIRED;
    }
    uint64_t early = SHL__MUTANT(EARLY_TAKEOVER) ? UINT64_C(40000000) : 0;
    if (c->state == SHL__ST_HELD && now + early < c->expiry) {
        int dead;
        if (!shl__orphan_due(t, s, now, &dead)) {
            shl__count(s, SHL__C_BUSY);
            if (holder) {
                shl__holder_info(t, s, c, now, holder);
                if (dead)
                    holder->state = SHL_STATE_ORPHANED;
            }
            SHL__CRASH(SHL__CP_BUSY);
            shl__slot_unlock(s);
            return SHL_EBUSY;
        }
        op = SHL__OP_RECLAIM;
    } else if (c->state == SHL__ST_HELD) {
        op = SHL__OP_TAKEOVER;
    }
    /* Shared holders: one load when there are none. */
    uint64_t was_shared = atomic_load_explicit(&s->shared, memory_order_relaxed);
    if (shl__unlikely(was_shared != 0) && !SHL__MUTANT(SHARED_IGNORED)) {
        int one, dead;
        if (shl__shared_blocking(t, s, now, &one, &dead) != 0) {
            shl__count(s, SHL__C_BUSY);
            if (holder) {
                shl__holder_info(t, s, shl__tsh(t, s, (uint32_t)one), now, holder);
                if (dead)
                    holder->state = SHL_STATE_ORPHANED;
            }
            shl__slot_unlock(s);
            return SHL_EBUSY;
        }
    }
    /* The lease's one counter counts acquisitions of both kinds. */
    struct shl__holder next;
    if ((rc = shl__next_holder(t, s, owner, olen, ttl_ns, now, op, &next)) != SHL_OK) {
        shl__slot_unlock(s);
        return rc;
    }
    enum shl__counter c1 = op == SHL__OP_TAKEOVER  ? SHL__C_EXPIRE
                           : op == SHL__OP_RECLAIM ? SHL__C_RECLAIM
                                                   : SHL__C_COUNT;
    /* Every shared holder left is invalid (or reclaimed): the mask empties. */
    struct shl__intent_to to = {0, 0, SHL__ST_HELD};
    if (SHL__MUTANT(SHARED_IGNORED)) /* and leaves them valid beside the new holder */
        to.shared = atomic_load_explicit(&s->shared, memory_order_relaxed);
    static const int cp_acquire[4] = {SHL__CP_ACQ_INTENT, SHL__CP_ACQ_ARMED, SHL__CP_ACQ_APPLY,
                                      SHL__CP_ACQ_APPLIED};
    static const int cp_reclaim[4] = {SHL__CP_ACQ_INTENT, SHL__CP_RECLAIM_ARMED,
                                      SHL__CP_RECLAIM_APPLY, SHL__CP_ACQ_APPLIED};
    shl__intent_change(t, s, &to, &next, op, now, next.pid, SHL__C_ACQUIRE, c1,
                       op == SHL__OP_RECLAIM ? cp_reclaim : cp_acquire);
    if (shl__unlikely(was_shared != 0)) /* the ended readers' groups go back */
        shl__pool_give_back(t, s);
    shl__slot_unlock(s);
    *token = next.token;
    return SHL_OK;
}

int shl__shm_acquire(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                     uint64_t *token, shl_lease_info *holder)
{
    uint32_t olen = 0; /* set when the check passes */
    int rc = shl__acquire_args(owner, ttl_ns, token, &olen);
    if (rc != SHL_OK)
        return rc;
    struct shl__slot *s;
    rc = shl__acquire_slot(t, lease, ttl_ns, &s);
    if (rc != SHL_OK)
        return rc;
    /* A slot found just before repair retired it: the lookup now finds the
     * twin that kept the name (a slot is retired once, under the table lock,
     * so this settles at once). */
    while ((rc = shl__shm_acquire_at(t, s, owner, olen, ttl_ns, token, holder)) ==
           SHL__SLOT_RETIRED)
        if ((rc = shl__lookup_or_add(t, lease, &s)) != SHL_OK)
            return rc;
    return rc;
}

int shl__acquire_slot(shl_table *t, const char *lease, uint64_t ttl_ns, struct shl__slot **s)
{
    int rc = shl__lookup(t, lease, s);
    if (rc != SHL_ENOENT)
        return rc;
    /* A name, once added, keeps its slot: refuse an acquire that must fail
     * before adding it. The clock never goes back, so a ttl that overflows
     * now overflows under the lock as well. */
    if (ttl_ns > UINT64_MAX - shl__now(t))
        return shl__bad_ttl("ttl", ttl_ns);
    return shl__lookup_or_add(t, lease, s);
}

/* The body of shl__shm_renew_at(), inline in the by-name call too: one
 * frame for a lookup and its operation, as before the entry points were
 * apart. */
SHL__ALWAYS_INLINE int renew_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                                uint64_t token, uint64_t ttl_ns, struct shl__slot **sp)
{
    uint64_t now = 0;
    int rc, idx = -1;
    if (SHL__MUTANT(RENEW_ANY)) {
        rc = shl__slot_lock(t, s);
        now = shl__now(t);
    } else {
        rc = enter_holder(t, s, owner, olen, token, HOLD_EXCL | HOLD_SHARED, &now, &idx);
    }
    if (!ENTERED(rc, s, sp))
        return rc;
    if (ttl_ns > UINT64_MAX - now) {
        shl__slot_unlock(s);
        return shl__bad_ttl("ttl", ttl_ns);
    }
    shl__seq_begin(s);
    SHL__CRASH(SHL__CP_RENEW);
    struct shl__holder *h = idx < 0 ? &s->cur : shl__tsh(t, s, (uint32_t)idx);
    SHL__ST(h->expiry, now + ttl_ns);
    SHL__CRASH(SHL__CP_RENEW_STORED);
    shl__count(s, SHL__C_RENEW);
    if (idx < 0)
        shl__event_holder(t, s, now, SHL__OP_RENEW, t->self.pid);
    else
        shl__shared_event(t, s, (uint32_t)idx, now, SHL__OP_RENEW, t->self.pid);
    shl__seq_end(s);
    shl__slot_unlock(s);
    return SHL_OK;
}

int shl__shm_renew_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, uint64_t ttl_ns, struct shl__slot **sp)
{
    return renew_at(t, s, owner, olen, token, ttl_ns, sp);
}

int shl__shm_renew(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                   uint64_t token, uint64_t ttl_ns)
{
    struct shl__slot *s;
    int rc = find_held(t, lease, &s);
    return rc != SHL_OK ? rc : renew_at(t, s, owner, olen, token, ttl_ns, NULL);
}

/* The body of shl__shm_release_at(), inline in the by-name call too: one
 * frame for a lookup and its operation, as before the entry points were
 * apart. */
SHL__ALWAYS_INLINE int release_at(shl_table *t, struct shl__slot *s, const char *owner,
                                  uint32_t olen, uint64_t token, struct shl__slot **sp)
{
    uint64_t now;
    int idx;
    int rc = enter_holder(t, s, owner, olen, token, HOLD_EXCL | HOLD_SHARED, &now, &idx);
    if (!ENTERED(rc, s, sp))
        return rc;
    if (idx >= 0) {
        shl__shared_release_locked(t, s, (uint32_t)idx, now);
        shl__slot_unlock(s);
        shl__wake_waiters(s, 0);
        return SHL_OK;
    }
    shl__seq_begin(s);
    SHL__CRASH(SHL__CP_RELEASE);
    SHL__ST(s->cur.state, SHL__ST_FREE);
    if (SHL__MUTANT(RELEASE_REUSE)) {
        SHL__ST(s->cur.token, s->cur.token - 1);
        SHL__ST(s->tok_last, s->cur.token);
    }
    SHL__CRASH(SHL__CP_RELEASE_STORED);
    shl__count(s, SHL__C_RELEASE);
    shl__event_holder(t, s, now, SHL__OP_RELEASE, t->self.pid);
    shl__seq_end(s);
    shl__slot_freed(s, now);
    shl__slot_unlock(s);
    shl__wake_waiters(s, 0);
    return SHL_OK;
}

int shl__shm_release_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                        uint64_t token, struct shl__slot **sp)
{
    return release_at(t, s, owner, olen, token, sp);
}

int shl__shm_release(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                     uint64_t token)
{
    struct shl__slot *s;
    int rc = find_held(t, lease, &s);
    return rc != SHL_OK ? rc : release_at(t, s, owner, olen, token, NULL);
}

/* The spare value buffer of a lease whose value is in its own: the one it
 * keeps from the value pool, taken at its first write (shm/layout.h,
 * Values). SHL_EFULL when none can be had, SHL_ECORRUPT for a `vref` out
 * of range (check and repair mend it). Out of line: once a lease. */
static __attribute__((noinline)) int take_spare(const shl_table *t, struct shl__slot *s)
{
    if (s->vref > t->geom.vb_count)
        return SHL_ECORRUPT;
    return shl__pool_take(t, s, SHL__POOL_VB, 0);
}

/*
 * The spare value buffer of slot s (locked), whose `vcur` is m, about to be
 * written: the buffer `vcur` does not name (*rel: its offset for `vcur`). A
 * reader that loaded `vcur` before the last commit may still be copying
 * this buffer; it must then see `seq` moved when it checks again. Its check
 * is an acquire fence followed by a load of `seq`; the release fence here
 * pairs with it: if the reader's copy saw any byte stored below, everything
 * before this fence (that commit's `seq` stores, ordered before us by the
 * slot mutex) is visible to its second load of `seq`, which therefore
 * differs. Without it the relaxed stores below could, in the C11 model,
 * become visible before those `seq` stores, and a torn copy would pass the
 * check.
 */
SHL__ALWAYS_INLINE int spare_for_writing(const shl_table *t, struct shl__slot *s, uint64_t m,
                                         struct shl__vhdr **out, uint64_t *rel)
{
    uint64_t cur = m & ~SHL__VCUR_FLAGS;
    if (shl__unlikely(SHL__MUTANT(IN_PLACE))) {
        struct shl__vhdr *h = shl__tvat(t, s, cur);
        if (!h)
            return SHL_ECORRUPT;
        *out = h;
        *rel = cur;
    } else if (cur) {
        *out = shl__tvhome(t, s);
        *rel = 0;
    } else {
        if (shl__unlikely(!s->vref || s->vref > t->geom.vb_count)) {
            int rc = take_spare(t, s);
            if (rc != SHL_OK)
                return rc;
        }
        *out = shl__tvb(t, s->vref - 1);
        *rel = shl__tvb_rel(t, s, s->vref - 1);
    }
    atomic_thread_fence(memory_order_release);
    return SHL_OK;
}

/* Commits the spare buffer h (offset rel), already filled with len bytes,
 * as the value. */
static void commit_value(struct shl__slot *s, struct shl__vhdr *h, uint64_t rel, uint64_t token,
                         uint32_t len)
{
    SHL__ST(h->token, token);
    SHL__ST(h->len, len);
    SHL__CRASH(SHL__CP_WRITE_COPIED);
    shl__seq_begin(s);
    atomic_store_explicit(&s->vcur, rel, memory_order_relaxed);
    SHL__CRASH(SHL__CP_WRITE_COMMITTED);
    shl__count(s, SHL__C_WRITE);
    shl__seq_end(s);
}

/* len <= the table's value size and buf != NULL unless len == 0: checked by
 * the callers. */
/* The body of shl__shm_write_at(), inline in the by-name call too: one
 * frame for a lookup and its operation, as before the entry points were
 * apart. */
SHL__ALWAYS_INLINE int write_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                                uint64_t token, const void *buf, size_t len, struct shl__slot **sp)
{
    uint64_t now;
    int rc = enter_valid(t, s, owner, olen, token, &now);
    if (!ENTERED(rc, s, sp))
        return rc;
    /* The spare buffer is invisible to readers until the commit; one that
     * started on it before an earlier commit sees `seq` move and retries. */
    struct shl__vhdr *h;
    uint64_t rel;
    rc = spare_for_writing(t, s, atomic_load_explicit(&s->vcur, memory_order_relaxed), &h, &rel);
    if (shl__unlikely(rc != SHL_OK)) {
        shl__slot_unlock(s);
        return rc;
    }
    unsigned char *dst = shl__vdata(h);
    size_t half = len / 2;
    shl__copy_to_shared(dst, buf, half & ~(size_t)7);
    SHL__CRASH(SHL__CP_WRITE_COPY);
    shl__copy_to_shared(dst + (half & ~(size_t)7), (const unsigned char *)buf + (half & ~(size_t)7),
                        len - (half & ~(size_t)7));
    commit_value(s, h, rel, token, (uint32_t)len);
    shl__slot_unlock(s);
    return SHL_OK;
}

int shl__shm_write_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, const void *buf, size_t len, struct shl__slot **sp)
{
    return write_at(t, s, owner, olen, token, buf, len, sp);
}

int shl__shm_write(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                   uint64_t token, const void *buf, size_t len)
{
    struct shl__slot *s;
    int rc = find_held(t, lease, &s);
    return rc != SHL_OK ? rc : write_at(t, s, owner, olen, token, buf, len, NULL);
}

int shl__shm_update(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                    uint64_t token, shl_update_fn fn, void *arg)
{
    struct shl__slot *s;
    uint64_t now;
    int rc = find_held(t, lease, &s);
    if (rc == SHL_OK)
        rc = enter_valid(t, s, owner, olen, token, &now);
    if (!ENTERED(rc, s, NULL))
        return rc;
    /* The callback works on a private copy: readers may still be copying the
     * spare buffer (they will retry), so it is only ever written with the
     * word-wise atomic copy. */
    unsigned char work[SHL_UPDATE_MAX];
    size_t cap = t->value_size < sizeof work ? t->value_size : sizeof work;
    uint64_t m = atomic_load_explicit(&s->vcur, memory_order_relaxed);
    struct shl__vhdr *cur = shl__tvat(t, s, m & ~SHL__VCUR_FLAGS), *h;
    uint64_t rel;
    size_t len = cur ? cur->len : 0;
    if (!cur || len > cap) {
        shl__slot_unlock(s);
        return cur ? SHL_E2BIG : SHL_ECORRUPT;
    }
    memcpy(work, shl__vdata(cur), len);
    if (fn(work, &len, cap, arg) != 0 || len > cap) {
        shl__slot_unlock(s);
        return SHL_ECANCELED;
    }
    if ((rc = spare_for_writing(t, s, m, &h, &rel)) != SHL_OK) {
        shl__slot_unlock(s);
        return rc;
    }
    shl__copy_to_shared(shl__vdata(h), work, len);
    commit_value(s, h, rel, token, (uint32_t)len);
    shl__slot_unlock(s);
    return SHL_OK;
}

/* fn(arg) under the lock if the holder of kind `kind` (HOLD_EXCL or
 * HOLD_SHARED) named by (owner, token) is valid. */
SHL__ALWAYS_INLINE int guard_kind(shl_table *t, struct shl__slot *s, const char *owner,
                                  uint32_t olen, uint64_t token, int kind, shl_guard_fn fn,
                                  void *arg, struct shl__slot **sp)
{
    uint64_t now;
    int idx;
    int rc = enter_holder(t, s, owner, olen, token, kind, &now, &idx);
    if (!ENTERED(rc, s, sp))
        return rc;
    fn(arg);
    if (kind == HOLD_EXCL)
        SHL__CRASH(SHL__CP_GUARD);
    else
        SHL__CRASH(SHL__CP_SH_GUARD);
    shl__slot_unlock(s);
    return SHL_OK;
}

int shl__shm_guard_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, shl_guard_fn fn, void *arg, struct shl__slot **sp)
{
    return guard_kind(t, s, owner, olen, token, HOLD_EXCL, fn, arg, sp);
}

SHL__ALWAYS_INLINE int guard_by_name(shl_table *t, const char *lease, const char *owner,
                                     uint32_t olen, uint64_t token, int kind, shl_guard_fn fn,
                                     void *arg)
{
    struct shl__slot *s;
    int rc = find_held(t, lease, &s);
    return rc != SHL_OK ? rc : guard_kind(t, s, owner, olen, token, kind, fn, arg, NULL);
}

int shl__shm_guard(shl_table *t, const char *lease, const char *owner, uint64_t token,
                   shl_guard_fn fn, void *arg)
{
    uint32_t olen;
    int rc = shl__holder_args(owner, token, &olen);
    return rc != SHL_OK ? rc : guard_by_name(t, lease, owner, olen, token, HOLD_EXCL, fn, arg);
}

int shl__shm_guard_shared(shl_table *t, const char *lease, const char *owner, uint64_t token,
                          shl_guard_fn fn, void *arg)
{
    uint32_t olen;
    int rc = shl__holder_args(owner, token, &olen);
    return rc != SHL_OK ? rc : guard_by_name(t, lease, owner, olen, token, HOLD_SHARED, fn, arg);
}
