/*
 * lib/kind_shm/pool.c - the table's pools: groups of reader records and of waiter
 * entries that a lease takes only while it uses them, and the spare value
 * buffers that a written lease keeps (shm/layout.h, Pools and Values).
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
#include <stdio.h>

#include "shm_kind.h"

/* The owner word of group g of pool k. */
static _Atomic uint32_t *owner_of(const shl_table *t, enum shl__pool k, uint32_t g)
{
    if (k == SHL__POOL_VB)
        return &shl__tvb(t, g)->owner;
    return k == SHL__POOL_SH ? &shl__tsh_group(t, g)->owner : &shl__twq_group(t, g)->owner;
}

uint32_t shl__pool_groups(const shl_table *t, enum shl__pool k)
{
    if (k == SHL__POOL_VB)
        return t->geom.vb_count;
    return k == SHL__POOL_SH ? t->geom.sh_groups : t->geom.wq_groups;
}

/* Where pool k lies in the segment, and the bytes of each of its groups. */
static uint64_t pool_base(const shl_table *t, enum shl__pool k, uint64_t *size)
{
    *size = k == SHL__POOL_SH   ? sizeof(struct shl__sh_group)
            : k == SHL__POOL_WQ ? sizeof(struct shl__wq_group)
                                : t->geom.vbuf_size;
    return k == SHL__POOL_SH   ? t->geom.sh_pool_off
           : k == SHL__POOL_WQ ? t->geom.wq_pool_off
                               : t->geom.vb_pool_off;
}

static uint32_t *refs_of(struct shl__slot *s, enum shl__pool k, uint32_t *n)
{
    if (k == SHL__POOL_VB) {
        *n = 1;
        return &s->vref;
    }
    *n = k == SHL__POOL_SH ? SHL__SH_REFS : SHL__WQ_REFS;
    return k == SHL__POOL_SH ? s->sh_ref : s->wq_ref;
}

static _Atomic uint32_t *hint_of(const shl_table *t, enum shl__pool k)
{
    if (k == SHL__POOL_VB)
        return &t->hdr->vb_hint;
    return k == SHL__POOL_SH ? &t->hdr->sh_hint : &t->hdr->wq_hint;
}

static _Atomic uint64_t *taken_back_of(const shl_table *t, enum shl__pool k)
{
    if (k == SHL__POOL_VB)
        return &t->hdr->vb_taken_back;
    return k == SHL__POOL_SH ? &t->hdr->sh_taken_back : &t->hdr->wq_taken_back;
}

uint64_t shl__pool_taken_back(const shl_table *t, enum shl__pool k)
{
    return atomic_load_explicit(taken_back_of(t, k), memory_order_relaxed);
}

const char *shl__pool_name(enum shl__pool k)
{
    static const char *const names[] = {"reader pool", "waiter pool", "value pool"};
    return k < SHL__POOL_COUNT ? names[k] : "pool";
}

const char *shl__pool_item(enum shl__pool k)
{
    return k == SHL__POOL_VB ? "buffer" : "group";
}

static int pool_full(const shl_table *t, enum shl__pool k)
{
    uint32_t n = shl__pool_groups(t, k);
    if (k == SHL__POOL_VB && n == 0)
        return shl__fail(SHL_EFULL, "value pool: the table has no spare value buffers (created "
                                    "with spare_values 0), so no lease can be written");
    if (k == SHL__POOL_VB)
        return shl__fail(SHL_EFULL,
                         "value pool: all %u spare value buffers are taken, by leases whose "
                         "locks are held now; create the table with a larger spare_values "
                         "(shmlease create --spare-values)",
                         n);
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

/* A group just taken keeps nothing of the lease that had it before that
 * this one could take for its own: a reader's token (shl__shared_find()
 * looks at records not in use too), a death record (its token would date
 * a reclaim delay), a waiter's ticket, a value's token (check holds a
 * spare's token to the lease's). The rest of a record counts only once it
 * is in use, and is written whole before. */
static void clear_group(const shl_table *t, enum shl__pool k, uint32_t g)
{
    if (k == SHL__POOL_VB) {
        struct shl__vhdr *h = shl__tvb(t, g);
        SHL__ST(h->token, 0);
        SHL__ST(h->len, 0);
    } else if (k == SHL__POOL_SH) {
        struct shl__sh_group *p = shl__tsh_group(t, g);
        for (uint32_t i = 0; i < SHL__SH_GROUP; i++) {
            SHL__ST(p->dead_token[i], 0);
            SHL__ST(p->sh[i].token, 0);
        }
    } else {
        struct shl__wq_group *p = shl__twq_group(t, g);
        for (uint32_t i = 0; i < SHL__WQ_GROUP; i++)
            SHL__ST(p->wq[i].ticket, 0);
    }
}

static int take_back(const shl_table *t, enum shl__pool k, uint32_t g, uint32_t owner);

/* Group g, just taken by slot s (its mutex held, inside its seq bracket),
 * named in its ref *ref. */
static void taken(const shl_table *t, enum shl__pool k, uint32_t g, uint32_t *ref)
{
    atomic_store_explicit(hint_of(t, k), g + 1, memory_order_relaxed);
    clear_group(t, k, g);
    SHL__CRASH(SHL__CP_POOL_TAKEN);
    SHL__ST(*ref, g + 1);
}

int shl__pool_take(const shl_table *t, struct shl__slot *s, enum shl__pool k, uint32_t r)
{
    uint32_t n = shl__pool_groups(t, k), nrefs;
    uint32_t *refs = refs_of(s, k, &nrefs);
    if (r >= nrefs || shl__is_image(t, s))
        return SHL_EINVAL;
    if (refs[r])
        return SHL_OK;
    uint32_t me = shl__tslot_no(t, s) + 1;
    uint32_t start = n ? atomic_load_explicit(hint_of(t, k), memory_order_relaxed) % n : 0;
    /* One sweep from where the last take stopped: a free group, or one
     * that its lease keeps unused (taken back: a kept group is a cache). */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = start + i < n ? start + i : start + i - n;
        _Atomic uint32_t *o = owner_of(t, k, g);
        uint32_t free_ = 0, was = atomic_load_explicit(o, memory_order_relaxed);
        if (was != 0 && (was == me || !take_back(t, k, g, was)))
            continue;
        if (!atomic_compare_exchange_strong_explicit(o, &free_, me, memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        taken(t, k, g, &refs[r]);
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
    if (shl__is_image(t, s)) /* a private copy (a dry run): nothing is shared */
        return;
    SHL__CRASH(SHL__CP_POOL_PUT);
    if (k == SHL__POOL_SH && SHL__MUTANT(POOL_LEAK))
        return; /* the ref cleared, the group left owned: leaked */
    /* Only a group this slot owns goes back: a ref to another slot's group
     * (damage) is dropped without freeing what is not ours. */
    uint32_t me = shl__tslot_no(t, s) + 1;
    if (g < shl__pool_groups(t, k))
        atomic_compare_exchange_strong_explicit(owner_of(t, k, g), &me, 0, memory_order_release,
                                                memory_order_relaxed);
}

/* Whether slot s names group g of pool k (read without its lock by
 * check: one word each). */
int shl__pool_names(const struct shl__slot *s, enum shl__pool k, uint32_t g)
{
    uint32_t nrefs;
    const uint32_t *refs = refs_of((struct shl__slot *)(uintptr_t)s, k, &nrefs);
    for (uint32_t r = 0; r < nrefs; r++)
        if (__atomic_load_n(&refs[r], __ATOMIC_RELAXED) == g + 1)
            return 1;
    return 0;
}

uint32_t shl__pool_owner(const shl_table *t, enum shl__pool k, uint32_t g)
{
    return atomic_load_explicit(owner_of(t, k, g), memory_order_acquire);
}

/* Whether any record of group r (a ref index) of slot s is in use; a
 * spare value buffer, whether `vcur` names a buffer other than the slot's
 * own. */
static int group_used(const shl_table *t, struct shl__slot *s, enum shl__pool k, uint32_t r)
{
    if (k == SHL__POOL_VB)
        return (atomic_load_explicit(&s->vcur, memory_order_relaxed) & ~SHL__VCUR_FLAGS) != 0;
    if (k == SHL__POOL_SH) {
        uint64_t m = atomic_load_explicit(&s->shared, memory_order_relaxed);
        return ((m >> (r * SHL__SH_GROUP)) & ((UINT64_C(1) << SHL__SH_GROUP) - 1)) != 0;
    }
    for (uint32_t i = r * SHL__WQ_GROUP; i < (r + 1) * SHL__WQ_GROUP; i++) {
        const struct shl__waiter *e = shl__twq(t, s, i);
        if (e && e->ticket)
            return 1;
    }
    return 0;
}

/* The ref of slot s that names group g of pool k, or the number of refs. */
static uint32_t ref_naming(const struct shl__slot *s, enum shl__pool k, uint32_t g)
{
    uint32_t nrefs, r = 0;
    const uint32_t *refs = refs_of((struct shl__slot *)(uintptr_t)s, k, &nrefs);
    while (r < nrefs && __atomic_load_n(&refs[r], __ATOMIC_RELAXED) != g + 1)
        r++;
    return r;
}

/* Slot v's value, committed in its spare b (v locked), copied into the
 * slot's own buffer and committed there, so that the spare can go: the
 * value and its token stay. Whether it is home (a `vcur` that names
 * neither buffer is left to check and repair). A lock-free reader still
 * copying the spare sees `seq` move; the release fence orders the copy
 * after the last commit's `seq` stores for a reader of the own buffer,
 * as a write's (kind_shm/lease.c, spare_for_writing()). */
static int value_home(const shl_table *t, struct shl__slot *v, uint32_t b)
{
    uint64_t m = atomic_load_explicit(&v->vcur, memory_order_relaxed);
    if (!(m & ~SHL__VCUR_FLAGS))
        return 1;
    if ((m & ~SHL__VCUR_FLAGS) != shl__tvb_rel(t, v, b))
        return 0;
    struct shl__vhdr *from = shl__tvb(t, b), *home = shl__tvhome(t, v);
    uint32_t len = SHL__LD(from->len);
    if (len > t->value_size)
        return 0;
    atomic_thread_fence(memory_order_release);
    if (!SHL__MUTANT(VALUE_HOME_STALE))
        shl__copy_to_shared(shl__vdata(home), shl__vdata(from), len);
    SHL__ST(home->token, SHL__LD(from->token));
    SHL__ST(home->len, len);
    SHL__CRASH(SHL__CP_VALUE_HOME);
    shl__seq_begin(v);
    atomic_store_explicit(&v->vcur, m & SHL__VCUR_FLAGS, memory_order_relaxed);
    shl__seq_end(v);
    return 1;
}

/* Takes group g of pool k back from slot `owner` - 1, under its mutex (a
 * try: the caller holds its own slot's, so a slot whose mutex is held is
 * passed over): if that slot names the group and keeps it unused, as the
 * lease would give it back itself (a spare value buffer in use, once its
 * value is home); if it does not name it, the group is a stray (its mutex
 * held here, no take or put of that slot is half done), given back. Whether
 * the group is free now. */
static int take_back(const shl_table *t, enum shl__pool k, uint32_t g, uint32_t owner)
{
    uint32_t nrefs;
    if (owner > shl__tnslots(t))
        return 0;
    struct shl__slot *v = shl__tslot(t, owner - 1);
    refs_of(v, k, &nrefs);
    if (shl__slot_trylock(t, v) != SHL_OK)
        return 0;
    /* Locking may have recovered the slot, and given its strays back. */
    uint32_t r = ref_naming(v, k, g);
    if (shl__pool_owner(t, k, g) == owner) {
        if (r == nrefs) {
            shl__pool_release_group(t, k, g, owner);
        } else if (k == SHL__POOL_VB ? value_home(t, v, g) : !group_used(t, v, k, r)) {
            shl__seq_begin(v);
            shl__pool_put(t, v, k, r);
            shl__seq_end(v);
            atomic_fetch_add_explicit(taken_back_of(t, k), 1, memory_order_relaxed);
        }
    }
    shl__slot_unlock(v);
    return shl__pool_owner(t, k, g) == 0;
}

/* Gives back the unused groups (put 1), or says whether there is one;
 * from the second of each pool on when `keep` (the first is kept). Of the
 * reader and waiter pools: a spare value buffer is kept until taken back. */
static int trim(const shl_table *t, struct shl__slot *s, int put, int keep)
{
    int any = 0;
    for (int k = 0; k < SHL__POOL_VB; k++) {
        uint32_t nrefs;
        uint32_t *refs = refs_of(s, (enum shl__pool)k, &nrefs);
        for (uint32_t r = keep ? 1 : 0; r < nrefs; r++) {
            if (!refs[r] || group_used(t, s, (enum shl__pool)k, r))
                continue;
            if (!put)
                return 1;
            shl__pool_put(t, s, (enum shl__pool)k, r);
            any++;
        }
    }
    return any;
}

void shl__pool_put_unused(const shl_table *t, struct shl__slot *s, enum shl__pool k, uint32_t r)
{
    uint32_t nrefs;
    uint32_t *refs = refs_of(s, k, &nrefs);
    if (r > 0 && r < nrefs && refs[r] && !group_used(t, s, k, r))
        shl__pool_put(t, s, k, r);
}

uint32_t shl__pool_trim(const shl_table *t, struct shl__slot *s)
{
    return (uint32_t)trim(t, s, 1, 1);
}

static void give_back(const shl_table *t, struct shl__slot *s, int keep)
{
    if (!trim(t, s, 0, keep))
        return;
    shl__seq_begin(s);
    trim(t, s, 1, keep);
    shl__seq_end(s);
}

void shl__pool_give_back(const shl_table *t, struct shl__slot *s)
{
    give_back(t, s, 1);
}

void shl__pool_give_back_all(const shl_table *t, struct shl__slot *s)
{
    give_back(t, s, 0);
}

uint32_t shl__pool_recover(const shl_table *t, struct shl__slot *s)
{
    if (shl__is_image(t, s))
        return 0;
    return shl__pool_strays(t, shl__tslot_no(t, s), s, 1);
}

/* Only the groups whose owner word (a group's first, on a page with it)
 * lies where the table has written: a page never written holds only
 * zeros, and loading from it would clear it and make it resident (some
 * 100 MB of a fresh 1,000,000-lease table's pools, which `create`, `dump`
 * and `check` ask about). */
uint32_t shl__pool_next_taken(const shl_table *t, enum shl__pool k, struct shl__pool_cursor *c,
                              uint32_t *owner)
{
    uint32_t n = shl__pool_groups(t, k);
    uint64_t size, base = pool_base(t, k, &size);
    while (c->g < n) {
        uint64_t at = base + (uint64_t)c->g * size, from;
        if (at >= c->to) { /* past the written range known: find the next */
            if (!shl__seg_next_data(t->fd, at, base + n * size, &from, &c->to))
                break;
            uint64_t first = (from - base + size - 1) / size;
            c->g = first > c->g ? (uint32_t)(first < n ? first : n) : c->g;
            continue;
        }
        uint32_t g = c->g++;
        if ((*owner = shl__pool_owner(t, k, g)) != 0)
            return g;
    }
    c->g = n;
    return n;
}

uint32_t shl__pool_taken(const shl_table *t, enum shl__pool k)
{
    uint32_t n = shl__pool_groups(t, k), taken = 0, owner;
    struct shl__pool_cursor c = {0, 0};
    while (shl__pool_next_taken(t, k, &c, &owner) < n)
        taken++;
    return taken;
}

/* What can be wrong with a slot's ref to a group. */
enum bad_ref { REF_OK, REF_RANGE, REF_TWICE, REF_OTHERS, REF_FREE };

/* What is wrong with ref r of pool k of slot s (number no), if anything:
 * out of range, named twice, or a group this slot does not own (*owner:
 * its owner word). */
static enum bad_ref bad_ref(const shl_table *t, const struct shl__slot *s, uint32_t no,
                            enum shl__pool k, uint32_t r, uint32_t *owner)
{
    uint32_t nrefs;
    const uint32_t *refs = refs_of((struct shl__slot *)(uintptr_t)s, k, &nrefs);
    uint32_t v = refs[r];
    *owner = 0;
    if (!v)
        return REF_OK;
    if (v > shl__pool_groups(t, k))
        return REF_RANGE;
    for (uint32_t q = 0; q < r; q++)
        if (refs[q] == v)
            return REF_TWICE;
    *owner = shl__pool_owner(t, k, v - 1);
    if (*owner == no + 1)
        return REF_OK;
    return *owner ? REF_OTHERS : REF_FREE;
}

void shl__pool_slot_refs(const shl_table *t, struct shl__slot *s, uint32_t no, int fix,
                         shl__inv_say_fn say, void *arg)
{
    static const char *const text[] = {"", "past the end of the pool", "a second time",
                                       "which another slot has taken", "which is free"};
    static const char *const what[] = {"reader group", "waiter group", "spare value buffer"};
    for (int k = 0; k < SHL__POOL_COUNT; k++) {
        uint32_t nrefs, owner;
        uint32_t *refs = refs_of(s, (enum shl__pool)k, &nrefs);
        for (uint32_t r = 0; r < nrefs; r++) {
            enum bad_ref why = bad_ref(t, s, no, (enum shl__pool)k, r, &owner);
            if (why == REF_OK)
                continue;
            char m[192];
            int n = snprintf(m, sizeof m, "names %s %u %s", what[k], refs[r] - 1, text[why]);
            if (why == REF_OTHERS)
                n += snprintf(m + n, sizeof m - (size_t)n, " (slot %u)", owner - 1);
            if (fix) {
                /* A free group is taken again, so that its readers stay
                 * (a dry run says what a real one would do); any other
                 * such ref is forgotten. */
                uint32_t free_ = 0;
                int again =
                    why == REF_FREE && (shl__is_image(t, s) ||
                                        atomic_compare_exchange_strong_explicit(
                                            owner_of(t, (enum shl__pool)k, refs[r] - 1), &free_,
                                            no + 1, memory_order_acq_rel, memory_order_relaxed));
                if (!again)
                    SHL__ST(refs[r], 0);
                snprintf(m + n, sizeof m - (size_t)n, "%s",
                         again ? ": take it again" : ": forget it (its records with it)");
            }
            say(arg, m);
        }
    }
}

uint32_t shl__pool_strays(const shl_table *t, uint32_t no, const struct shl__slot *named_by,
                          int free_them)
{
    uint32_t n = 0;
    for (int k = 0; k < SHL__POOL_COUNT; k++) {
        uint32_t groups = shl__pool_groups(t, (enum shl__pool)k);
        for (uint32_t g = 0; g < groups; g++) {
            _Atomic uint32_t *o = owner_of(t, (enum shl__pool)k, g);
            if (atomic_load_explicit(o, memory_order_relaxed) != no + 1 ||
                shl__pool_names(named_by, (enum shl__pool)k, g))
                continue;
            n++;
            if (free_them)
                atomic_store_explicit(o, 0, memory_order_release);
        }
    }
    return n;
}

void shl__pool_release_group(const shl_table *t, enum shl__pool k, uint32_t g, uint32_t owner)
{
    atomic_compare_exchange_strong_explicit(owner_of(t, k, g), &owner, 0, memory_order_release,
                                            memory_order_relaxed);
}
