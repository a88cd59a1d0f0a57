/*
 * lib/kind_shm/shared.c - shared (reader) leases: any number of shared holders, up to
 * SHL__SHARED_MAX, or one exclusive holder.
 *
 * A shared holder is reader record i of its lease (in a group of the
 * table's reader pool that the slot names, shm/layout.h), in use while bit
 * i of the slot's `shared` word is set. A group is taken for the first
 * record used in it and given back when its last one is released or swept
 * (a full pool is SHL_EFULL, never a wait). It is valid while unexpired, exactly
 * like the exclusive holder in `cur`. Taking one is an intent (the record,
 * the new mask and the lease's token counter in one armed change, rolled
 * forward after a crash); renewing it is one store of its expiry, releasing
 * it one store of the mask. The exclusive acquire pays one load of the mask
 * when there are no shared holders, and only when there are does it look at
 * them (shl__shared_blocking()).
 *
 * The entry points shl_acquire_shared() and shl_acquire_shared_ex() are in
 * lib/shared.c; a shared acquire by name comes here after their checks.
 */
#include "shm_kind.h"

int shl__sh_valid(const shl_table *t, const struct shl__slot *s, uint32_t i, uint64_t now)
{
    uint64_t m = atomic_load_explicit(&s->shared, memory_order_relaxed);
    if (!((m >> i) & 1))
        return 0;
    const struct shl__holder *h = shl__tsh(t, s, i);
    return h && h->state == SHL__ST_HELD && now < h->expiry;
}

uint32_t shl__shared_blocking(const shl_table *t, struct shl__slot *s, uint64_t now, int *one,
                              int *dead_one)
{
    uint32_t n = 0;
    *one = -1;
    *dead_one = 0;
    for (uint32_t i = 0; i < SHL__SHARED_MAX; i++) {
        if (!shl__sh_valid(t, s, i, now))
            continue;
        int dead;
        if (shl__orphan_due_shared(t, s, i, now, &dead))
            continue; /* reclaimed by the table's policy */
        if (*one < 0 || (!dead && *dead_one)) {
            *one = (int)i;
            *dead_one = dead;
        }
        n++;
    }
    return n;
}

/* The entries of m (the `shared` mask, not 0) whose holder is valid at
 * now, as a mask (`first`: only the first one found): only the entries m
 * names, one look-up per group with a bit set. With `owner`, a valid
 * holder of that owner ends the look (its entry in *mine), so that a
 * shared acquire reads each holder once. */
static uint64_t valid_bits_of(const shl_table *t, uint64_t m, const struct shl__slot *s,
                              uint64_t now, int first, const char *owner, uint32_t olen, int *mine)
{
    uint64_t v = 0;
    const uint64_t group = (UINT64_C(1) << SHL__SH_GROUP) - 1;
    for (uint32_t r = 0; r < SHL__SH_REFS && m >> (r * SHL__SH_GROUP); r++) {
        uint64_t bits = (m >> (r * SHL__SH_GROUP)) & group;
        const struct shl__holder *h = bits ? shl__tsh(t, s, r * SHL__SH_GROUP) : NULL;
        if (!h)
            continue;
#pragma GCC unroll 8
        for (unsigned j = 0; j < SHL__SH_GROUP; j++) {
            if (!((bits >> j) & 1) || h[j].state != SHL__ST_HELD || now >= h[j].expiry)
                continue;
            v |= UINT64_C(1) << (r * SHL__SH_GROUP + j);
            if (first)
                return v;
            if (owner && h[j].owner_len == olen && memcmp(h[j].owner, owner, olen) == 0) {
                *mine = (int)(r * SHL__SH_GROUP + j);
                return v;
            }
        }
    }
    return v;
}

/* No reader, the usual case, costs no call. */
static inline uint64_t valid_bits(const shl_table *t, const struct shl__slot *s, uint64_t now,
                                  int first, const char *owner, uint32_t olen, int *mine)
{
    uint64_t m = atomic_load_explicit(&s->shared, memory_order_relaxed);
    return m ? valid_bits_of(t, m, s, now, first, owner, olen, mine) : 0;
}

static uint64_t valid_mask(const shl_table *t, const struct shl__slot *s, uint64_t now)
{
    return valid_bits(t, s, now, 0, NULL, 0, NULL);
}

uint32_t shl__shared_count(const shl_table *t, const struct shl__slot *s, uint64_t now)
{
    return (uint32_t)__builtin_popcountll(valid_mask(t, s, now));
}

int shl__shared_find(const shl_table *t, const struct shl__slot *s, uint64_t token, int *in_use)
{
    uint64_t m = atomic_load_explicit(&s->shared, memory_order_relaxed);
    /* A group's records lie together (in the pool, or in a copy): one
     * look-up per group the slot names. */
    for (uint32_t r = 0; r < SHL__SH_REFS; r++) {
        const struct shl__holder *h = shl__tsh(t, s, r * SHL__SH_GROUP);
        if (!h)
            continue;
#pragma GCC unroll 8
        for (uint32_t j = 0; j < SHL__SH_GROUP; j++)
            if (h[j].token == token) {
                uint32_t i = r * SHL__SH_GROUP + j;
                *in_use = (int)((m >> i) & 1);
                return (int)i;
            }
    }
    return -1;
}

void shl__holder_info(const shl_table *t, const struct shl__slot *s, const struct shl__holder *c,
                      uint64_t now, shl_lease_info *in)
{
    memset(in, 0, sizeof *in);
    /* Bounded like shl_stat's: a damaged length must not overrun `in`. */
    memcpy(in->owner, c->owner, c->owner_len <= SHL_OWNER_MAX ? c->owner_len : SHL_OWNER_MAX);
    in->token = c->token;
    in->expiry_ns = c->expiry;
    in->since_ns = c->since;
    in->now_ns = now;
    in->remaining_ns = c->expiry > now ? c->expiry - now : 0;
    in->pid = c->pid;
    in->state = SHL_STATE_HELD;
    in->waiters = atomic_load_explicit(&s->waiters, memory_order_relaxed);
    const struct shl__vhdr *vh = shl__tvcur(t, s);
    in->value_len = vh ? vh->len : 0;
    in->value_token = vh ? vh->token : 0;
    in->shared = shl__shared_count(t, s, now);
}

/* A refused shared acquire: counted, and the holder in the way described. */
static int busy(const shl_table *t, struct shl__slot *s, const struct shl__holder *h, uint64_t now,
                int dead, shl_lease_info *holder)
{
    shl__count(s, SHL__C_BUSY);
    if (holder && h) {
        shl__holder_info(t, s, h, now, holder);
        if (dead)
            holder->state = SHL_STATE_ORPHANED;
    }
    shl__slot_unlock(s);
    return SHL_EBUSY;
}

/* The entry a new shared holder takes: one not in use, or in use by a
 * holder that is no longer valid, in a group the slot has taken already
 * when there is one (else the caller takes the group); or in use by a dead
 * one the policy lets be reclaimed (*reclaim). -2 when `owner` already
 * holds the lease shared (its entry in *mine), -1 when every entry holds a
 * valid holder. *keep: the mask without the entries of holders no longer
 * valid. */
static int pick_entry(const shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t now, uint64_t *keep, int *reclaim, int *mine)
{
    int dead_i = -1;
    *mine = -1;
    *keep = valid_bits(t, s, now, 0, owner, olen, mine);
    if (*mine >= 0)
        return -2;
    uint64_t all = SHL__SHARED_MAX < 64 ? (UINT64_C(1) << SHL__SHARED_MAX) - 1 : ~UINT64_C(0);
    uint64_t open = ~*keep & all;
    if (open) {
        *reclaim = 0;
        /* The first entry not in use, if its group is taken already (the
         * usual case: the slot keeps its first group); else the first in a
         * taken group, else the first (its group is taken by the caller). */
        uint32_t first = (uint32_t)__builtin_ctzll(open);
        if (s->sh_ref[first / SHL__SH_GROUP])
            return (int)first;
        uint64_t taken = 0;
        for (uint32_t r = 0; r < SHL__SH_REFS; r++)
            if (s->sh_ref[r])
                taken |= ((UINT64_C(1) << SHL__SH_GROUP) - 1) << (r * SHL__SH_GROUP);
        return __builtin_ctzll(open & taken ? open & taken : open);
    }
    for (uint32_t i = 0; i < SHL__SHARED_MAX && dead_i < 0; i++) {
        int dead;
        if (shl__orphan_due_shared(t, s, i, now, &dead))
            dead_i = (int)i;
    }
    *reclaim = dead_i >= 0;
    return dead_i;
}

/* The reader group for entry e, taken if the slot has none there yet:
 * SHL_OK, or SHL_EFULL (the reader pool named in the detail). */
static int take_group(const shl_table *t, struct shl__slot *s, int e)
{
    uint32_t r = (uint32_t)e / SHL__SH_GROUP;
    if (s->sh_ref[r])
        return SHL_OK;
    shl__seq_begin(s);
    int rc = shl__pool_take(t, s, SHL__POOL_SH, r);
    shl__seq_end(s);
    return rc;
}

int shl__acquire_shared_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                           uint64_t ttl_ns, uint32_t ticket, uint64_t *token, uint64_t *gen,
                           shl_lease_info *holder)
{
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    uint64_t now = shl__now(t);
    struct shl__holder *c = &s->cur;
    if (c->state == SHL__ST_RETIRED) {
        shl__slot_unlock(s);
        return SHL__SLOT_RETIRED;
    }
    uint32_t cur_state = c->state;
    uint32_t op = SHL__OP_SHARED;
    if (c->state == SHL__ST_HELD && now < c->expiry && !SHL__MUTANT(SHARED_OVER_WRITER)) {
        int dead;
        if (!shl__orphan_due(t, s, now, &dead))
            return busy(t, s, c, now, dead, holder);
        cur_state = SHL__ST_REVOKED; /* its dead exclusive holder ends */
        op = SHL__OP_RECLAIM;
    }
    /* Writers are not starved: no reader gets in ahead of a queued writer. */
    if (shl__writer_queued(t, s, now, ticket))
        return busy(t, s, c, now, 0, holder);
    uint64_t keep;
    int reclaim = 0, mine = -1;
    int e = pick_entry(t, s, owner, olen, now, &keep, &reclaim, &mine);
    if (e < 0) {
        int one = mine, dead = 0;
        if (one < 0)
            shl__shared_blocking(t, s, now, &one, &dead);
        return busy(t, s, shl__tsh(t, s, one < 0 ? 0 : (uint32_t)one), now, dead, holder);
    }
    struct shl__holder next;
    if ((rc = shl__next_holder(t, s, owner, olen, ttl_ns, now, SHL__OP_SHARED, &next)) != SHL_OK ||
        (rc = take_group(t, s, e)) != SHL_OK) {
        shl__slot_unlock(s);
        return rc;
    }
    if (reclaim)
        op = SHL__OP_RECLAIM;
    struct shl__intent_to to = {(uint32_t)e + 1, keep | (UINT64_C(1) << e), cur_state};
    enum shl__counter c1 = op == SHL__OP_RECLAIM ? SHL__C_RECLAIM : SHL__C_COUNT;
    /* The last exclusive acquisition: this table's, or, before its first,
     * the earlier tables' before a re-creation, all at or below the floor
     * (a fence that admitted them must admit this reader). */
    uint64_t g = c->token > t->token_floor ? c->token : t->token_floor;
    uint64_t was = atomic_load_explicit(&s->shared, memory_order_relaxed);
    static const int cp[4] = {SHL__CP_SH_INTENT, SHL__CP_SH_ARMED, SHL__CP_SH_APPLY,
                              SHL__CP_SH_APPLIED};
    shl__intent_change(t, s, &to, &next, op, now, next.pid, SHL__C_SHARED, c1, cp);
    if (was & ~to.shared) /* expired readers swept: their groups may be unused now */
        shl__pool_give_back(t, s);
    shl__slot_unlock(s);
    *token = next.token;
    if (gen)
        *gen = g;
    return SHL_OK;
}

int shl__shm_acquire_shared(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                            uint64_t *token, uint64_t *gen, shl_lease_info *holder)
{
    uint32_t olen = 0; /* set when the check passes */
    int rc = shl__acquire_args(owner, ttl_ns, token, &olen);
    if (rc != SHL_OK)
        return rc;
    struct shl__slot *s;
    rc = shl__acquire_slot(t, lease, ttl_ns, &s);
    if (rc != SHL_OK)
        return rc;
    while ((rc = shl__acquire_shared_at(t, s, owner, olen, ttl_ns, 0, token, gen, holder)) ==
           SHL__SLOT_RETIRED)
        if ((rc = shl__lookup_or_add(t, lease, &s)) != SHL_OK)
            return rc;
    return rc;
}

void shl__shared_event(const shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now,
                       enum shl__op op, int32_t pid)
{
    const struct shl__holder *h = shl__tsh(t, s, i);
    if (h)
        shl__event_shared(t, s, now, op, h, pid);
}

void shl__shared_release_locked(shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now)
{
    uint64_t left = atomic_load_explicit(&s->shared, memory_order_relaxed) & ~(UINT64_C(1) << i);
    uint32_t r = i / SHL__SH_GROUP;
    shl__seq_begin(s);
    SHL__CRASH(SHL__CP_SH_RELEASE);
    atomic_store_explicit(&s->shared, left, memory_order_relaxed);
    SHL__CRASH(SHL__CP_SH_RELEASE_STORED);
    shl__count(s, SHL__C_RELEASE);
    shl__shared_event(t, s, i, now, SHL__OP_RELEASE, t->self.pid);
    /* The last of its group, not the first group (a lease keeps that one). */
    if (r && !((left >> (r * SHL__SH_GROUP)) & ((UINT64_C(1) << SHL__SH_GROUP) - 1)))
        shl__pool_put_unused(t, s, SHL__POOL_SH, r);
    shl__seq_end(s);
    /* The last valid holder gone: a queued writer's turn starts. */
    int cur_valid = s->cur.state == SHL__ST_HELD && now < s->cur.expiry;
    if (!cur_valid && valid_bits(t, s, now, 1, NULL, 0, NULL) == 0)
        shl__slot_freed(s, now);
    else /* a reader waiting for a free entry may take this one */
        atomic_fetch_add_explicit(&s->wake, 1, memory_order_release);
}
