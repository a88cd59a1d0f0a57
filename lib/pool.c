/*
 * lib/pool.c - the table's pools: groups of reader records and of waiter
 * entries that a lease takes only while it uses them (shm/layout.h, Pools).
 *
 * A group's `owner` word says which slot took it (slot number + 1; 0:
 * free); the slot names the group in sh_ref/wq_ref. Taking is one
 * compare-and-swap of the owner, then the slot's ref; giving back clears
 * the ref, then the owner. Both run under the slot's mutex and inside the
 * caller's seq bracket, so that a lock-free reader of the slot that
 * followed a ref sees the change in `seq` and looks again. No pool lock:
 * a death between the two steps of either leaves a group owned by a slot
 * that does not name it, which shl__pool_recover() gives back when the
 * slot is recovered, and shl_check()/shl_repair() find at any time.
 */
#include "internal.h"

/* The owner word of group g of pool k. */
static _Atomic uint32_t *owner_of(const shl_table *t, enum shl__pool k, uint32_t g)
{
    return k == SHL__POOL_SH ? &shl__tsh_group(t, g)->owner : &shl__twq_group(t, g)->owner;
}

uint32_t shl__pool_groups(const shl_table *t, enum shl__pool k)
{
    return k == SHL__POOL_SH ? t->geom.sh_groups : t->geom.wq_groups;
}

static uint32_t *refs_of(struct shl__slot *s, enum shl__pool k, uint32_t *n)
{
    *n = k == SHL__POOL_SH ? SHL__SH_REFS : SHL__WQ_REFS;
    return k == SHL__POOL_SH ? s->sh_ref : s->wq_ref;
}

static _Atomic uint32_t *hint_of(const shl_table *t, enum shl__pool k)
{
    return k == SHL__POOL_SH ? &t->hdr->sh_hint : &t->hdr->wq_hint;
}

const char *shl__pool_name(enum shl__pool k)
{
    return k == SHL__POOL_SH ? "reader pool" : "waiter pool";
}

static int pool_full(const shl_table *t, enum shl__pool k)
{
    uint32_t n = shl__pool_groups(t, k);
    if (k == SHL__POOL_SH)
        return shl__fail(SHL_EFULL,
                         "reader pool: all %u records (%u groups of %u) are taken; create the "
                         "table with a larger max_shared (shmlease create --max-shared)",
                         n * SHL__SH_GROUP, n, SHL__SH_GROUP);
    return shl__fail(SHL_EFULL,
                     "waiter pool: all %u entries (%u groups of %u) are taken; create the table "
                     "with a larger max_waiters (shmlease create --max-waiters)",
                     n * SHL__WQ_GROUP, n, SHL__WQ_GROUP);
}

int shl__pool_take(const shl_table *t, struct shl__slot *s, enum shl__pool k, uint32_t r)
{
    uint32_t n = shl__pool_groups(t, k), nrefs;
    uint32_t *refs = refs_of(s, k, &nrefs);
    if (r >= nrefs)
        return SHL_EINVAL;
    if (refs[r])
        return SHL_OK;
    uint32_t me = shl__tslot_no(t, s) + 1;
    uint32_t start = n ? atomic_load_explicit(hint_of(t, k), memory_order_relaxed) % n : 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = start + i < n ? start + i : start + i - n;
        _Atomic uint32_t *o = owner_of(t, k, g);
        uint32_t free_ = 0;
        if (atomic_load_explicit(o, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(o, &free_, me, memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        atomic_store_explicit(hint_of(t, k), g + 1, memory_order_relaxed);
        SHL__CRASH(SHL__CP_POOL_TAKEN);
        SHL__ST(refs[r], g + 1);
        return SHL_OK;
    }
    return pool_full(t, k);
}

void shl__pool_put(const shl_table *t, struct shl__slot *s, enum shl__pool k, uint32_t r)
{
    uint32_t nrefs;
    uint32_t *refs = refs_of(s, k, &nrefs);
    if (r >= nrefs || !refs[r])
        return;
    uint32_t g = refs[r] - 1;
    SHL__ST(refs[r], 0);
    SHL__CRASH(SHL__CP_POOL_PUT);
    /* Only a group this slot owns goes back: a ref to another slot's group
     * (damage) is dropped without freeing what is not ours. */
    uint32_t me = shl__tslot_no(t, s) + 1;
    if (g < shl__pool_groups(t, k))
        atomic_compare_exchange_strong_explicit(owner_of(t, k, g), &me, 0, memory_order_release,
                                                memory_order_relaxed);
}

/* Whether slot s names group g of pool k. */
static int names(struct shl__slot *s, enum shl__pool k, uint32_t g)
{
    uint32_t nrefs;
    const uint32_t *refs = refs_of(s, k, &nrefs);
    for (uint32_t r = 0; r < nrefs; r++)
        if (refs[r] == g + 1)
            return 1;
    return 0;
}

uint32_t shl__pool_recover(const shl_table *t, struct shl__slot *s)
{
    uint32_t me = shl__tslot_no(t, s) + 1, freed = 0;
    for (int k = 0; k < 2; k++) {
        uint32_t n = shl__pool_groups(t, (enum shl__pool)k);
        for (uint32_t g = 0; g < n; g++) {
            _Atomic uint32_t *o = owner_of(t, (enum shl__pool)k, g);
            if (atomic_load_explicit(o, memory_order_relaxed) == me &&
                !names(s, (enum shl__pool)k, g)) {
                atomic_store_explicit(o, 0, memory_order_release);
                freed++;
            }
        }
    }
    return freed;
}

uint32_t shl__pool_taken(const shl_table *t, enum shl__pool k)
{
    uint32_t n = shl__pool_groups(t, k), taken = 0;
    for (uint32_t g = 0; g < n; g++)
        taken += atomic_load_explicit(owner_of(t, k, g), memory_order_relaxed) != 0;
    return taken;
}
