/*
 * lib/read.c - lock-free reads of a lease's value and state (seqlock).
 *
 * A reader loads `seq` (acquire), copies what it needs with relaxed atomic
 * loads, issues an acquire fence and loads `seq` again: equal and even means
 * no change overlapped the copy. After SPIN_TRIES failed attempts (a writer
 * that keeps changing the slot, or one that stopped or died with `seq` odd)
 * the reader takes the lock instead, which also repairs a dead writer's slot.
 */
#include "internal.h"

#define SPIN_TRIES 256

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct value_snap {
    uint64_t token;
    uint32_t len;
    int fits;
};

static void value_copy(const shl_table *t, struct shl__slot *s, void *buf, size_t cap,
                       struct value_snap *v)
{
    uint32_t vc = atomic_load_explicit(&s->vcur, memory_order_relaxed) & 1;
    v->token = SHL__LD(s->vh[vc].token);
    v->len = SHL__LD(s->vh[vc].len);
    v->fits = v->len <= cap && v->len <= t->value_size;
    if (v->fits && v->len)
        shl__copy_from_shared(buf, shl__value_buf(t->hdr, s, vc), v->len);
}

int shl_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
             uint64_t *token)
{
    SHL__CHECK_HANDLE(t);
    if (!buf && cap > 0)
        return SHL_EINVAL;
    struct shl__slot *s;
    int rc = shl__lookup(t, lease, &s);
    if (rc != SHL_OK)
        return rc;
    return shl__read_at(t, s, buf, cap, len, token);
}

int shl__read_at(shl_table *t, struct shl__slot *s, void *buf, size_t cap, size_t *len,
                 uint64_t *token)
{
    struct value_snap v;
    int ok = 0;
    for (int i = 0; i < SPIN_TRIES && !ok; i++) {
        uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q & 1) {
            cpu_relax();
            continue;
        }
        value_copy(t, s, buf, cap, &v);
        atomic_thread_fence(memory_order_acquire);
        ok = atomic_load_explicit(&s->seq, memory_order_relaxed) == q;
    }
    if (!ok) {
        int rc = shl__slot_lock(t, s);
        if (rc != SHL_OK)
            return rc;
        value_copy(t, s, buf, cap, &v);
        shl__slot_unlock(s);
    }
    if (len)
        *len = v.len;
    if (token)
        *token = v.token;
    return v.fits ? SHL_OK : SHL_E2BIG;
}

struct state_snap {
    struct shl__holder h;
    uint32_t waiters, vlen;
    uint64_t vtoken;
};

static void state_copy(struct shl__slot *s, struct state_snap *p)
{
    shl__holder_load(&p->h, &s->cur);
    p->waiters = atomic_load_explicit(&s->waiters, memory_order_relaxed);
    uint32_t vc = atomic_load_explicit(&s->vcur, memory_order_relaxed) & 1;
    p->vlen = SHL__LD(s->vh[vc].len);
    p->vtoken = SHL__LD(s->vh[vc].token);
}

int shl_stat(shl_table *t, const char *lease, shl_lease_info *info)
{
    SHL__CHECK_HANDLE(t);
    if (!info)
        return SHL_EINVAL;
    struct shl__slot *s;
    int rc = shl__lookup(t, lease, &s);
    if (rc != SHL_OK)
        return rc;
    struct state_snap p;
    int ok = 0;
    for (int i = 0; i < SPIN_TRIES && !ok; i++) {
        uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (q & 1) {
            cpu_relax();
            continue;
        }
        state_copy(s, &p);
        atomic_thread_fence(memory_order_acquire);
        ok = atomic_load_explicit(&s->seq, memory_order_relaxed) == q;
    }
    if (!ok) {
        rc = shl__slot_lock(t, s);
        if (rc != SHL_OK)
            return rc;
        state_copy(s, &p);
        shl__slot_unlock(s);
    }
    uint64_t now = shl__now(t);
    memset(info, 0, sizeof *info);
    uint32_t olen = p.h.owner_len <= SHL_OWNER_MAX ? p.h.owner_len : SHL_OWNER_MAX;
    memcpy(info->owner, p.h.owner, olen);
    info->token = p.h.token;
    info->expiry_ns = p.h.expiry;
    info->since_ns = p.h.since;
    info->now_ns = now;
    info->pid = p.h.pid;
    info->waiters = p.waiters ? shl__waiters_count(s) : 0; /* not the dead ones */
    info->value_len = p.vlen;
    info->value_token = p.vtoken;
    info->state = shl__state_of(&p.h, now, 1);
    if (info->state == SHL_STATE_HELD || info->state == SHL_STATE_ORPHANED)
        info->remaining_ns = p.h.expiry - now;
    return SHL_OK;
}
