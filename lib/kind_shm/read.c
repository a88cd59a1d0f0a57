/*
 * lib/kind_shm/read.c - lock-free reads of a lease's value and state (seqlock).
 *
 * A reader loads `seq` (acquire), copies what it needs with relaxed atomic
 * loads, issues an acquire fence and loads `seq` again: equal and even means
 * no change overlapped the copy. After SPIN_TRIES failed attempts (a writer
 * that keeps changing the slot, or one that stopped or died with `seq` odd)
 * the reader takes the lock instead, which also repairs a dead writer's slot.
 *
 * The shared-memory halves of shl_read() and shl_stat() (their entry points,
 * with the checks both kinds share, are in lib/read.c), and the read of a
 * slot already found that bound leases make (shl__shm_read_at()).
 */
#include "shm_kind.h"

#define SPIN_TRIES 256

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/*
 * The one seqlock reader: runs copy(s, arg) until it saw no change overlap it
 * (or, after SPIN_TRIES, once under the lock). Static inline with a constant
 * callback, so each caller gets its own loop with the copy inlined.
 */
static inline int snapshot(const shl_table *t, struct shl__slot *s,
                           void (*copy)(struct shl__slot *s, void *arg), void *arg)
{
    if (shl__removed(t))
        return SHL_EREMOVED;
    for (int i = 0; i < SPIN_TRIES; i++) {
        uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q & 1) {
            cpu_relax();
            continue;
        }
        copy(s, arg);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q)
            return SHL_OK;
    }
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    copy(s, arg);
    shl__slot_unlock(s);
    return SHL_OK;
}

struct value_snap {
    const shl_table *t;
    void *buf;
    size_t cap;
    uint64_t token;
    uint32_t len;
    int fits; /* 0 also when the slot is marked retired (SHL__VCUR_RETIRED) */
};

static void value_copy(struct shl__slot *s, void *arg)
{
    struct value_snap *v = arg;
    const shl_table *t = v->t;
    void *buf = v->buf;
    size_t cap = v->cap;
    /* The committed buffer, by its offset from the slot's own: a load and
     * an add, and a bound that keeps a damaged offset inside the segment. */
    uint64_t m = atomic_load_explicit(&s->vcur, memory_order_relaxed);
    struct shl__vhdr *h = shl__tvat(t, s, m & ~SHL__VCUR_FLAGS);
    if (shl__unlikely(!h)) {
        v->token = v->len = 0;
        v->fits = 0;
        return;
    }
    v->token = SHL__LD(h->token);
    v->len = SHL__LD(h->len);
    v->fits = v->len <= cap && v->len <= t->value_size && !(m & SHL__VCUR_RETIRED);
    if (v->fits && v->len)
        shl__copy_from_shared(buf, shl__vdata(h), v->len);
}

static int read_unfit(shl_table *t, struct shl__slot **sp, struct shl__slot *s,
                      const struct value_snap *v, size_t *len, uint64_t *token);

/* The read of slot s, *sp's (read once by the caller: see shl__follow()). */
SHL__ALWAYS_INLINE int read_slot(shl_table *t, struct shl__slot **sp, struct shl__slot *s,
                                 void *buf, size_t cap, size_t *len, uint64_t *token)
{
    struct value_snap v = {t, buf, cap, 0, 0, 0};
    int rc = snapshot(t, s, value_copy, &v);
    if (rc != SHL_OK)
        return rc;
    /* The retired mark came with the value's load, judged with the fit. */
    if (shl__unlikely(!v.fits))
        return read_unfit(t, sp, s, &v, len, token);
    if (len)
        *len = v.len;
    if (token)
        *token = v.token;
    return SHL_OK;
}

int shl__shm_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
                  uint64_t *token)
{
    struct shl__slot *s;
    int rc = shl__lookup(t, lease, &s);
    if (rc != SHL_OK)
        return rc;
    return read_slot(t, &s, s, buf, cap, len, token);
}

int shl__shm_read_at(shl_table *t, struct shl__slot **sp, void *buf, size_t cap, size_t *len,
                     uint64_t *token)
{
    return read_slot(t, sp, shl__slot_in(sp), buf, cap, len, token);
}

/* A read of slot s whose value did not fit, or that is marked retired (the
 * mark is final): then the read of the slot that kept the name. Out of
 * line, with the arguments kept in `v`: the read's frame stays small. */
static __attribute__((noinline, cold)) int read_unfit(shl_table *t, struct shl__slot **sp,
                                                      struct shl__slot *s,
                                                      const struct value_snap *v, size_t *len,
                                                      uint64_t *token)
{
    if ((atomic_load_explicit(&s->vcur, memory_order_relaxed) & SHL__VCUR_RETIRED) &&
        SHL__LD(s->cur.state) == SHL__ST_RETIRED) {
        int rc = shl__follow(t, sp, &s, 0);
        return rc == SHL_OK ? read_slot(t, sp, s, v->buf, v->cap, len, token) : rc;
    }
    if (!shl__tvnow(t, s))
        return shl__fail(SHL_ECORRUPT,
                         "lease's value offset names no value buffer of the table (shmlease "
                         "check; shmlease repair mends it)");
    if (len)
        *len = v->len;
    if (token)
        *token = v->token;
    return SHL_E2BIG;
}

struct state_snap {
    const shl_table *t;
    struct shl__holder h;
    uint32_t waiters, vlen;
    uint64_t vtoken;
    uint64_t shared;                  /* the mask, then entries not held cleared */
    uint64_t sh_exp[SHL__SHARED_MAX]; /* expiries of the shared entries in use */
};

static void state_copy(struct shl__slot *s, void *arg)
{
    struct state_snap *p = arg;
    shl__holder_load(&p->h, &s->cur);
    p->waiters = atomic_load_explicit(&s->waiters, memory_order_relaxed);
    const struct shl__vhdr *vh = shl__tvnow(p->t, s);
    p->vlen = vh ? SHL__LD(vh->len) : 0;
    p->vtoken = vh ? SHL__LD(vh->token) : 0;
    p->shared = atomic_load_explicit(&s->shared, memory_order_relaxed);
    for (uint32_t i = 0; p->shared && i < SHL__SHARED_MAX; i++)
        if ((p->shared >> i) & 1) {
            /* A group the slot names lies in the segment whatever the
             * slot's seq; one given back meanwhile is seen by the seq. */
            const struct shl__holder *h = shl__tsh(p->t, s, i);
            p->sh_exp[i] = h ? SHL__LD(h->expiry) : 0;
            if (!h || SHL__LD(h->state) != SHL__ST_HELD)
                p->shared &= ~(UINT64_C(1) << i);
        }
}

int shl__shm_stat(shl_table *t, const char *lease, shl_lease_info *info)
{
    struct shl__slot *s;
    int rc = shl__lookup(t, lease, &s);
    if (rc != SHL_OK)
        return rc;
    struct state_snap p;
    p.t = t;
    if ((rc = snapshot(t, s, state_copy, &p)) != SHL_OK)
        return rc;
    uint64_t now = shl__now(t);
    memset(info, 0, sizeof *info);
    uint32_t olen = p.h.owner_len <= SHL_OWNER_MAX ? p.h.owner_len : SHL_OWNER_MAX;
    memcpy(info->owner, p.h.owner, olen);
    info->token = p.h.token;
    info->expiry_ns = p.h.expiry;
    info->since_ns = p.h.since;
    info->now_ns = now;
    info->pid = p.h.pid;
    info->waiters = p.waiters ? shl__waiters_count(t, s) : 0; /* not the dead ones */
    info->value_len = p.vlen;
    info->value_token = p.vtoken;
    info->state = shl__state_of(t, &p.h, now);
    if (info->state == SHL_STATE_HELD || info->state == SHL_STATE_ORPHANED)
        info->remaining_ns = p.h.expiry - now;
    for (uint32_t i = 0; p.shared && i < SHL__SHARED_MAX; i++)
        info->shared += ((p.shared >> i) & 1) && now < p.sh_exp[i];
    return SHL_OK;
}
