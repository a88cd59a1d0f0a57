/*
 * lib/kind_shm/heartbeat.c - a renewer's heartbeat, recorded in its lease's
 * slot: the token it renews, its interval and its last beat (table clock).
 * It is how dump, shl_inspect() and shl_heartbeat_get() tell a renewer that
 * has stalled (two beats missed while its lease is still valid) from one at
 * work. Only the shared-memory kind keeps it; the renewer (lib/renewer.c)
 * writes it through the two calls below, the inspector reads it, and
 * shl_heartbeat_get() (its entry in lib/heartbeat.c) reads it here.
 */
#include "shm_kind.h"

void shl__shm_renewer_beat(struct shl__slot *s, uint64_t token, uint64_t interval, uint64_t now)
{
    atomic_store_explicit(&s->hb_interval, interval, memory_order_relaxed);
    atomic_store_explicit(&s->heartbeat, now, memory_order_relaxed);
    atomic_store_explicit(&s->hb_token, token, memory_order_relaxed);
}

void shl__shm_renewer_end(struct shl__slot *s, uint64_t token)
{
    atomic_compare_exchange_strong_explicit(&s->hb_token, &token, 0, memory_order_relaxed,
                                            memory_order_relaxed);
}

int shl__heartbeat_stalled(const struct shl__slot *s, uint64_t now)
{
    uint64_t tok = atomic_load_explicit(&s->hb_token, memory_order_relaxed);
    uint64_t beat = atomic_load_explicit(&s->heartbeat, memory_order_relaxed);
    uint64_t iv = atomic_load_explicit(&s->hb_interval, memory_order_relaxed);
    const struct shl__holder *c = &s->cur;
    return tok && tok == SHL__LD(c->token) && SHL__LD(c->state) == SHL__ST_HELD &&
           now < SHL__LD(c->expiry) && now > beat && now - beat > 2 * iv;
}

int shl__shm_heartbeat_get(shl_table *t, const struct shl__key *k, shl_heartbeat *hb)
{
    struct shl__slot *s = shl__find(t, k);
    if (!s)
        return SHL_ENOENT;
    memset(hb, 0, sizeof *hb);
    hb->token = atomic_load_explicit(&s->hb_token, memory_order_relaxed);
    hb->beat_ns = atomic_load_explicit(&s->heartbeat, memory_order_relaxed);
    hb->interval_ns = atomic_load_explicit(&s->hb_interval, memory_order_relaxed);
    if (!hb->token)
        return SHL_OK;
    uint64_t now = shl__now(t);
    hb->age_ns = now > hb->beat_ns ? now - hb->beat_ns : 0;
    hb->stalled = shl__heartbeat_stalled(s, now);
    return SHL_OK;
}
