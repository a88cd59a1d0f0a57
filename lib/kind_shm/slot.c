/*
 * lib/kind_shm/slot.c - a lease slot's lock, its repair after a crash, and its
 * history.
 */
#include "shm_kind.h"

__thread struct shl__last_lock shl__last_lock;

/* Stores the words of a 64-byte owner field up to and including the one
 * with the owner's terminating NUL (`src`'s bytes after the NUL in that
 * word are zero): every reader goes by owner_len, or stops at the NUL; the
 * bytes after it are left as they were. Copying the whole 64-byte field
 * cost an acquire twelve more stores (intent and cur) for a typical short
 * owner, and its history entry eight. */
SHL__ALWAYS_INLINE void owner_store(char dst[SHL__OWNER_MAX + 1],
                                    const char src[SHL__OWNER_MAX + 1], uint32_t olen)
{
    size_t n = shl__align_up((uint64_t)olen + 1, 8);
    n = n < SHL__OWNER_MAX + 1 ? n : SHL__OWNER_MAX + 1;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, src + i, 8);
        SHL__ST_NEW(*(uint64_t *)(void *)(dst + i), w);
    }
}

/* Every field of a holder record but token and expiry (see apply()). */
SHL__ALWAYS_INLINE void holder_store_rest(struct shl__holder *d, const struct shl__holder *s)
{
    SHL__ST(d->since, s->since);
    SHL__ST_NEW(d->live, s->live);
    SHL__ST_NEW(d->pid, s->pid);
    SHL__ST_NEW(d->state, s->state);
    SHL__ST_NEW(d->op, s->op);
    SHL__ST_NEW(d->owner_len, s->owner_len);
    owner_store(d->owner, s->owner, s->owner_len);
}

void shl__holder_store(struct shl__holder *d, const struct shl__holder *s)
{
    SHL__ST(d->token, s->token);
    SHL__ST(d->expiry, s->expiry);
    holder_store_rest(d, s);
}

void shl__holder_load(struct shl__holder *d, const struct shl__holder *s)
{
    d->token = SHL__LD(s->token);
    d->expiry = SHL__LD(s->expiry);
    d->since = SHL__LD(s->since);
    d->live = SHL__LD(s->live);
    d->pid = SHL__LD(s->pid);
    d->state = SHL__LD(s->state);
    d->op = SHL__LD(s->op);
    d->owner_len = SHL__LD(s->owner_len);
    shl__copy_from_shared(d->owner, s->owner, sizeof d->owner);
}

/* Writes history entry `i` (an absolute position in the ring) with the
 * owner in a holder-style 64-byte field: owner_len bytes (at most
 * SHL__OWNER_MAX), then zeroes to the end of the NUL's word. */
SHL__ALWAYS_INLINE void event_at(const shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now,
                                 enum shl__op op, uint64_t token, int32_t pid,
                                 const char owner[SHL__OWNER_MAX + 1], uint32_t olen, uint16_t why)
{
    uint32_t n = t->geom.history;
    if (!n) /* a table that keeps no history: hist_next still counts */
        return;
    struct shl__event *e = &shl__slot_hist(s)[i % n];
    SHL__ST(e->time, now);
    SHL__ST(e->token, token);
    SHL__ST_NEW(e->pid, pid);
    SHL__ST_NEW(e->op, (uint16_t)op);
    SHL__ST_NEW(e->why, why);
    owner_store(e->owner, owner, olen);
}

void shl__event(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                uint64_t token, int32_t pid, const char *owner, uint32_t owner_len, uint16_t why)
{
    char o[SHL__OWNER_MAX + 1] = {0}; /* any owner string: copy only its bytes */
    uint32_t n = owner_len < SHL__OWNER_MAX ? owner_len : SHL__OWNER_MAX;
    memcpy(o, owner, n);
    event_at(t, s, s->hist_next, now, op, token, pid, o, n, why);
    SHL__ST(s->hist_next, s->hist_next + 1);
}

/* As shl__event() for an operation by holder h of the slot (its record:
 * the owner is there already, padded as owner_store() leaves it). */
SHL__ALWAYS_INLINE void event_of(const shl_table *t, struct shl__slot *s, uint64_t now,
                                 enum shl__op op, const struct shl__holder *h, int32_t pid)
{
    uint32_t olen = h->owner_len < SHL__OWNER_MAX ? h->owner_len : SHL__OWNER_MAX;
    event_at(t, s, s->hist_next, now, op, h->token, pid, h->owner, olen, 0);
    SHL__ST(s->hist_next, s->hist_next + 1);
}

void shl__event_holder(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                       int32_t pid)
{
    event_of(t, s, now, op, &s->cur, pid);
}

void shl__event_shared(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                       const struct shl__holder *h, int32_t pid)
{
    event_of(t, s, now, op, h, pid);
}

void shl__intent_arm(const shl_table *t, struct shl__slot *s, const struct shl__holder *next,
                     uint32_t op, uint64_t now, int32_t pid, enum shl__counter c0,
                     enum shl__counter c1, int cp)
{
    struct shl__intent_to to = {0, atomic_load_explicit(&s->shared, memory_order_relaxed),
                                next->state};
    shl__intent_arm_to(t, s, &to, next, op, now, pid, c0, c1, cp);
}

/* The bookkeeping of an intent, as arm() stores it. */
SHL__ALWAYS_INLINE void meta_make(const struct shl__slot *s, const struct shl__intent_to *to,
                                  const struct shl__holder *next, uint32_t op, uint64_t now,
                                  int32_t pid, enum shl__counter c0, enum shl__counter c1,
                                  struct shl__intent_meta *m)
{
    m->time = now;
    m->cnt[0] = c0 < SHL__C_COUNT ? s->count[c0] + 1 : 0;
    m->cnt[1] = c1 < SHL__C_COUNT ? s->count[c1] + 1 : 0;
    m->cnt_id[0] = (uint32_t)c0;
    m->cnt_id[1] = (uint32_t)c1;
    m->hist_next = s->hist_next + 1;
    m->pid = pid;
    m->op = op;
    m->target = to->target;
    m->shared = to->shared;
    m->cur_state = to->cur_state;
    /* The lease's last token is max(cur.token, tok_last): a holder that
     * goes to cur carries its token there, so only a shared one raises
     * tok_last (and an acquisition stores two words less). */
    m->tok_last = to->target && next->token > s->tok_last ? next->token : s->tok_last;
}

/* Writes the intent (`next`, and the bookkeeping `m`) and arms it; `cp` is
 * the crash point before arming. */
SHL__ALWAYS_INLINE void arm(struct shl__slot *s, const struct shl__holder *next,
                            const struct shl__intent_meta *m, int cp)
{
    /* Stored field by field (the inspector copies them unlocked); those
     * that one acquisition of a lease usually shares with the one before
     * only when they differ (SHL__ST_NEW). */
    struct shl__intent_meta *d = &s->meta;
    SHL__ST(d->time, m->time);
    SHL__ST(d->cnt[0], m->cnt[0]);
    SHL__ST_NEW(d->cnt[1], m->cnt[1]);
    SHL__ST_NEW(d->cnt_id[0], m->cnt_id[0]);
    SHL__ST_NEW(d->cnt_id[1], m->cnt_id[1]);
    SHL__ST(d->hist_next, m->hist_next);
    SHL__ST_NEW(d->pid, m->pid);
    SHL__ST_NEW(d->op, m->op);
    SHL__ST_NEW(d->target, m->target);
    SHL__ST_NEW(d->shared, m->shared);
    SHL__ST_NEW(d->cur_state, m->cur_state);
    SHL__ST_NEW(d->tok_last, m->tok_last);
    shl__holder_store(&s->intent, next);
    SHL__CRASH(cp);
    (void)cp;
    atomic_store_explicit(&s->intent_armed, 1, memory_order_release);
}

void shl__intent_arm_to(const shl_table *t, struct shl__slot *s, const struct shl__intent_to *to,
                        const struct shl__holder *next, uint32_t op, uint64_t now, int32_t pid,
                        enum shl__counter c0, enum shl__counter c1, int cp)
{
    struct shl__intent_meta m;
    (void)t; /* the record it names is written when applied */
    meta_make(s, to, next, op, now, pid, c0, c1, &m);
    arm(s, next, &m, cp);
}

/* Applies intent `in` with bookkeeping `m`: the slot's own (recovery, and
 * the changes made in two steps), or the private copies of what was just
 * stored there (shl__intent_change(): the same values, not read back from
 * the slot). Inlined into each, so that the second keeps them in
 * registers. Idempotent: every store writes an absolute value. */
SHL__ALWAYS_INLINE void apply(const shl_table *t, struct shl__slot *s, const struct shl__holder *in,
                              const struct shl__intent_meta *m, int cp)
{
    /* A damaged target is taken for cur: the token is then only raised. A
     * shared target's group is taken before the intent is armed; were it
     * missing (damage), no record is written, and check reports the mask. */
    uint32_t tg = m->target <= SHL__SHARED_MAX ? m->target : 0;
    struct shl__holder *c = tg ? shl__tsh(t, s, tg - 1) : &s->cur;
    if (c) {
        SHL__ST(c->token, in->token);
        SHL__ST(c->expiry, in->expiry);
    }
    SHL__CRASH(cp);
    (void)cp;
    if (c)
        holder_store_rest(c, in);
    if (tg)
        SHL__ST(s->cur.state, m->cur_state);
    if (atomic_load_explicit(&s->shared, memory_order_relaxed) != m->shared)
        atomic_store_explicit(&s->shared, m->shared, memory_order_relaxed);
    if (s->tok_last < m->tok_last)
        SHL__ST(s->tok_last, m->tok_last);
    for (int k = 0; k < 2; k++)
        if (m->cnt_id[k] < SHL__C_COUNT && s->count[m->cnt_id[k]] < m->cnt[k])
            SHL__ST(s->count[m->cnt_id[k]], m->cnt[k]);
    if (m->hist_next != 0 && (uint32_t)(m->hist_next - s->hist_next) <= 1) {
        uint32_t olen = in->owner_len < SHL__OWNER_MAX ? in->owner_len : SHL__OWNER_MAX;
        event_at(t, s, m->hist_next - 1, m->time, (enum shl__op)m->op, in->token, m->pid, in->owner,
                 olen, 0);
        SHL__ST(s->hist_next, m->hist_next);
    }
}

void shl__intent_apply(const shl_table *t, struct shl__slot *s, int cp)
{
    apply(t, s, &s->intent, &s->meta, cp);
    /* A retirement (index.c; never an acquisition's intent_change) marks
     * the value too: a lock-free reader still on this slot sees it. */
    if (shl__unlikely(s->meta.target == 0 && s->intent.state == SHL__ST_RETIRED)) {
        uint64_t v = atomic_load_explicit(&s->vcur, memory_order_relaxed);
        atomic_store_explicit(&s->vcur, v | SHL__VCUR_RETIRED, memory_order_relaxed);
    }
}

void shl__intent_commit(const shl_table *t, struct shl__slot *s, int cp_mid, int cp_after)
{
    shl__seq_begin(s);
    shl__intent_apply(t, s, cp_mid);
    shl__seq_end(s);
    SHL__CRASH(cp_after);
    (void)cp_after;
    atomic_store_explicit(&s->intent_armed, 0, memory_order_release);
}

void shl__intent_change(const shl_table *t, struct shl__slot *s, const struct shl__intent_to *to,
                        const struct shl__holder *next, uint32_t op, uint64_t now, int32_t pid,
                        enum shl__counter c0, enum shl__counter c1, const int cp[4])
{
    struct shl__intent_meta m;
    meta_make(s, to, next, op, now, pid, c0, c1, &m);
    arm(s, next, &m, cp[0]);
    SHL__CRASH(cp[1]);
    shl__seq_begin(s);
    apply(t, s, next, &m, cp[2]);
    shl__seq_end(s);
    SHL__CRASH(cp[3]);
    atomic_store_explicit(&s->intent_armed, 0, memory_order_release);
}

/*
 * Brings a slot whose locker died back to a committed state. Runs with the
 * mutex held (EOWNERDEAD), before pthread_mutex_consistent(), or by repair on
 * a mutex that is ENOTRECOVERABLE (nobody else can get in). Idempotent: it
 * applies an armed intent again (absolute values only) and makes `seq` even,
 * so a recoverer that dies anywhere in here is simply repeated by the next.
 */
void shl__slot_repair_locked(const shl_table *t, struct shl__slot *s)
{
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (!(q & 1))
        shl__seq_begin(s); /* readers must not take the roll forward for committed */
    SHL__CRASH(SHL__CP_RECOVER_BEGIN);
    if (atomic_load_explicit(&s->intent_armed, memory_order_acquire)) {
        shl__intent_apply(t, s, SHL__CP_RECOVER);
        SHL__CRASH(SHL__CP_RECOVER_DONE);
        atomic_store_explicit(&s->intent_armed, 0, memory_order_release);
    }
    /* A group taken or being given back when the locker died (owned, not
     * named), or taken for a record the locker never used (named, unused). */
    shl__pool_recover(t, s);
    shl__pool_trim(t, s);
    if (SHL__MUTANT(RECOVER_LOWER)) {
        SHL__ST(s->cur.token, s->cur.token - 1);
        SHL__ST(s->tok_last, s->cur.token);
    }
    /* The value needs nothing: vcur names a whole buffer at every instant. */
    shl__count(s, SHL__C_RECOVER);
    shl__event(t, s, shl__now(t), SHL__OP_RECOVER, s->cur.token, t->self.pid, "", 0, 0);
    atomic_store_explicit(&s->locker, 0, memory_order_relaxed);
    shl__seq_end(s);
    /* A release that died between its store and its wake-up: waiters must
     * not sleep on a lease that is free. Bumping the word is harmless. */
    atomic_fetch_add_explicit(&s->wake, 1, memory_order_release);
    shl__wake_waiters(s, 0);
}

void shl__slot_repair_cb(void *arg)
{
    struct shl__repair_ctx *c = arg;
    shl__slot_repair_locked(c->t, c->s);
}

int shl__slot_trylock(const shl_table *t, struct shl__slot *s)
{
    int rc = shl__mutex_trylock(&s->lock);
    if (rc == EBUSY)
        return SHL_EBUSY;
    struct shl__repair_ctx c = {t, s};
    if (rc != 0 && (rc = shl__mutex_settle(&s->lock, rc, shl__slot_repair_cb, &c)) != 0)
        return shl__from_shm(rc);
    shl__slot_held(t, s, NULL);
    return SHL_OK;
}
