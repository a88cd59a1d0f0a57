/*
 * lib/kind_shm/shm_kind.h - the shared-memory kind's internals: the handle's
 * view of its segment, the pools, the index, slot locking and the intent,
 * the lease operations on a slot, shared holders, waiters, orphans, the
 * heartbeat, inspection and checking of slots. Not installed; only this
 * folder and the entry points' shared-memory halves include it.
 */
#ifndef SHL_LIB_SHM_KIND_H
#define SHL_LIB_SHM_KIND_H

#include <stdatomic.h>
#include <string.h>

#include "../../shm/alive.h"
#include "../../shm/clock.h"
#include "../../shm/layout.h"
#include "../../shm/mutex.h"
#include "../../shm/segment.h"
#include "crashpoint.h"
#include "internal.h"

/* lib/kind_shm/pool.c: the reader, waiter and value pools (shm/layout.h,
 * Pools and Values). A value pool's "group" is one spare buffer, named by
 * the slot's one ref `vref`; "used" while `vcur` names it. */
enum shl__pool { SHL__POOL_SH, SHL__POOL_WQ, SHL__POOL_VB, SHL__POOL_COUNT };
/* Takes a free group of pool k for slot s and names it in the slot's ref r
 * (sh_ref[r] or wq_ref[r]), if r names none yet: SHL_OK, or SHL_EFULL with
 * the pool named in the detail. The slot's mutex held, inside a seq
 * bracket. */
int shl__pool_take(const shl_table *t, struct shl__slot *s, enum shl__pool k,
                   uint32_t r) SHL__HIDDEN;
/* Gives back the group named by the slot's ref r (none: nothing), which
 * the caller has found unused. Same conditions. */
void shl__pool_put(const shl_table *t, struct shl__slot *s, enum shl__pool k,
                   uint32_t r) SHL__HIDDEN;
/* Recovery of slot s (its mutex held): the groups it owns but does not
 * name are given back; how many. */
uint32_t shl__pool_recover(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;
/* Gives back every group the slot names but does not use (no bit of
 * `shared` among a reader group's records, no ticket among a waiter
 * group's), how many; but the lease's first group of each pool, which it
 * keeps for its next reader or waiter (shm/layout.h, Pools). Same
 * conditions as shl__pool_put(). */
uint32_t shl__pool_trim(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;
/* Gives back group r of pool k if the slot names it and uses none of its
 * records, unless it is the first (kept). Same conditions. */
void shl__pool_put_unused(const shl_table *t, struct shl__slot *s, enum shl__pool k,
                          uint32_t r) SHL__HIDDEN;
/* The same in a seq bracket of its own, opened only when a group goes
 * back (the slot's mutex held, no bracket open). */
void shl__pool_give_back(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;
/* The same for a slot being retired: its first groups go back too. */
void shl__pool_give_back_all(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;
/* Groups of pool k taken now, and in all. */
uint32_t shl__pool_taken(const shl_table *t, enum shl__pool k) SHL__HIDDEN;
/* How many times a group of pool k that a lease kept was taken back for
 * another lease (shl__pool_take()). */
uint64_t shl__pool_taken_back(const shl_table *t, enum shl__pool k) SHL__HIDDEN;
/* The next taken group of pool k (*owner: its owner word), from cursor
 * c ({0, 0} at first), or the number of groups when there is none left;
 * pages of the pool the table never wrote are skipped unread. */
struct shl__pool_cursor {
    uint32_t g;  /* the next group to look at */
    uint64_t to; /* where the written range known ends (segment offset) */
};
uint32_t shl__pool_next_taken(const shl_table *t, enum shl__pool k, struct shl__pool_cursor *c,
                              uint32_t *owner) SHL__HIDDEN;
uint32_t shl__pool_groups(const shl_table *t, enum shl__pool k) SHL__HIDDEN;
const char *shl__pool_name(enum shl__pool k) SHL__HIDDEN;
/* What one entry of pool k is called: "group", or "buffer". */
const char *shl__pool_item(enum shl__pool k) SHL__HIDDEN;

/* Slot i (i < capacity), the index, a value buffer, and the number of slots
 * handed out (bounded by the capacity read at open), from the handle's
 * private geometry. */
static inline struct shl__slot *shl__tslot(const shl_table *t, uint32_t i)
{
    return (struct shl__slot *)((char *)t->hdr + t->geom.slots_off +
                                (uint64_t)i * t->geom.slot_stride);
}

static inline _Atomic uint32_t *shl__tindex(const shl_table *t)
{
    return (_Atomic uint32_t *)((char *)t->hdr + t->geom.index_off);
}

/* The header of slot s's own value buffer (its value follows it). */
static inline struct shl__vhdr *shl__tvhome(const shl_table *t, const struct shl__slot *s)
{
    return (struct shl__vhdr *)(uintptr_t)((const char *)s + t->geom.vbuf_home);
}

/* The header of buffer b of the value pool. */
static inline struct shl__vhdr *shl__tvb(const shl_table *t, uint32_t b)
{
    return (struct shl__vhdr *)(void *)((char *)t->hdr + t->geom.vb_pool_off +
                                        (uint64_t)b * t->geom.vbuf_size);
}

/* `vcur`'s offset of buffer b of the value pool, for slot s. */
static inline uint64_t shl__tvb_rel(const shl_table *t, const struct shl__slot *s, uint32_t b)
{
    return (uint64_t)((const char *)shl__tvb(t, b) - (const char *)shl__tvhome(t, s));
}

/* The header of the buffer at offset `rel` (vcur's, its flags cleared) of
 * slot s (one of t's), or NULL when no whole buffer of the segment lies
 * there: a damaged offset is never followed out of the mapping. */
static inline struct shl__vhdr *shl__tvat(const shl_table *t, const struct shl__slot *s,
                                          uint64_t rel)
{
    uint64_t at = (uint64_t)((const char *)s - (const char *)t->hdr);
    if (shl__unlikely(at + rel > t->geom.vlim || rel > t->geom.vlim))
        return NULL;
    return (struct shl__vhdr *)(uintptr_t)((const char *)shl__tvhome(t, s) + rel);
}

/* The header of the buffer `vcur` names now in slot s (one of t's), or
 * NULL (shl__tvat()). */
static inline struct shl__vhdr *shl__tvnow(const shl_table *t, const struct shl__slot *s)
{
    return shl__tvat(t, s, atomic_load_explicit(&s->vcur, memory_order_relaxed) & ~SHL__VCUR_FLAGS);
}

/* The value bytes of the buffer whose header is h. */
static inline unsigned char *shl__vdata(struct shl__vhdr *h)
{
    return (unsigned char *)(h + 1);
}

/* The slot's number (s must be one of t's slots). */
static inline uint32_t shl__tslot_no(const shl_table *t, const struct shl__slot *s)
{
    return (uint32_t)(((const char *)s - ((const char *)t->hdr + t->geom.slots_off)) /
                      t->geom.slot_stride);
}

static inline struct shl__sh_group *shl__tsh_group(const shl_table *t, uint32_t g)
{
    return (struct shl__sh_group *)((char *)t->hdr + t->geom.sh_pool_off +
                                    (uint64_t)g * sizeof(struct shl__sh_group));
}

static inline struct shl__wq_group *shl__twq_group(const shl_table *t, uint32_t g)
{
    return (struct shl__wq_group *)((char *)t->hdr + t->geom.wq_pool_off +
                                    (uint64_t)g * sizeof(struct shl__wq_group));
}

/* A slot as a snapshot copies it (kind_shm/inspect.c): the slot, its history
 * just after it (as in the segment, so that shl__slot_hist() of the copy's
 * slot is the copy's history; the entries written so far are copied, the
 * others zero), then the records of the groups the slot names, flattened
 * (where it names none, whatever a previous copy left: never read). Code
 * that examines a copy reads it through the same
 * accessors as a live slot (shl__tsh(), shl__twq()): they tell a copy from
 * a slot of the segment by its address. */
struct shl__slot_image {
    struct shl__slot slot;
    struct shl__event hist[SHL__HIST_LEN];
    uint64_t sh_dead_token[SHL__SHARED_MAX];
    uint64_t sh_dead_seen[SHL__SHARED_MAX];
    struct shl__holder sh[SHL__SHARED_MAX];
    struct shl__waiter wq[SHL__WAITQ_LEN];
    /* The headers of the slot's own value buffer and of its spare (when
     * `vref` names one), and the spare's offset for `vcur` (the slot's). */
    struct shl__vhdr vh[2];
    uint64_t vrel_spare;
};
static_assert(offsetof(struct shl__slot_image, hist) == sizeof(struct shl__slot),
              "a slot image lays the history out as the segment does");

/* Whether s is a private copy (struct shl__slot_image's slot) rather than
 * one of t's slots: an address outside t's mapping. */
static inline int shl__is_image(const shl_table *t, const struct shl__slot *s)
{
    const char *p = (const char *)s, *b = (const char *)t->hdr;
    return shl__unlikely(p < b || p >= b + t->size);
}

static inline struct shl__slot_image *shl__image_of(const struct shl__slot *s)
{
    return (struct shl__slot_image *)(uintptr_t)((const char *)s -
                                                 offsetof(struct shl__slot_image, slot));
}

/* The reader group that holds record i of slot s, or NULL when the slot
 * has none there (or names one out of range: damage, treated as none).
 * NULL for a copy too: its records are in the image (shl__tsh()). */
static inline struct shl__sh_group *shl__tsh_group_of(const shl_table *t, const struct shl__slot *s,
                                                      uint32_t i)
{
    uint32_t r = __atomic_load_n(&s->sh_ref[i / SHL__SH_GROUP], __ATOMIC_RELAXED);
    return r && r <= t->geom.sh_groups && !shl__is_image(t, s) ? shl__tsh_group(t, r - 1) : NULL;
}

/* Reader record i of slot s (or of a copy), or NULL when no group is named
 * for it. */
static inline struct shl__holder *shl__tsh(const shl_table *t, const struct shl__slot *s,
                                           uint32_t i)
{
    uint32_t r = __atomic_load_n(&s->sh_ref[i / SHL__SH_GROUP], __ATOMIC_RELAXED);
    if (!r || r > t->geom.sh_groups)
        return NULL;
    if (shl__is_image(t, s))
        return &shl__image_of(s)->sh[i];
    return &shl__tsh_group(t, r - 1)->sh[i % SHL__SH_GROUP];
}

/* The words that record the first sighting of reader i's death (its token,
 * and the time), or NULLs when no group is named for it. */
static inline void shl__tsh_dead(const shl_table *t, const struct shl__slot *s, uint32_t i,
                                 uint64_t **dtok, uint64_t **dseen)
{
    *dtok = *dseen = NULL;
    if (shl__is_image(t, s)) {
        uint32_t r = s->sh_ref[i / SHL__SH_GROUP];
        if (r && r <= t->geom.sh_groups) {
            *dtok = &shl__image_of(s)->sh_dead_token[i];
            *dseen = &shl__image_of(s)->sh_dead_seen[i];
        }
        return;
    }
    struct shl__sh_group *g = shl__tsh_group_of(t, s, i);
    if (g) {
        *dtok = &g->dead_token[i % SHL__SH_GROUP];
        *dseen = &g->dead_seen[i % SHL__SH_GROUP];
    }
}

/* Waiter entry i of slot s (or of a copy), or NULL when its group is not
 * taken. */
static inline struct shl__waiter *shl__twq(const shl_table *t, const struct shl__slot *s,
                                           uint32_t i)
{
    uint32_t r = __atomic_load_n(&s->wq_ref[i / SHL__WQ_GROUP], __ATOMIC_RELAXED);
    if (r > t->geom.wq_groups)
        return NULL;
    if (shl__is_image(t, s))
        return r ? &shl__image_of(s)->wq[i] : NULL;
    return r ? &shl__twq_group(t, r - 1)->wq[i % SHL__WQ_GROUP] : NULL;
}

/* The header of value buffer `which` of slot s (or of a copy): 0 its own,
 * 1 its spare (NULL when `vref` names none in range). */
static inline struct shl__vhdr *shl__tvh(const shl_table *t, const struct shl__slot *s,
                                         uint32_t which)
{
    uint32_t r = __atomic_load_n(&s->vref, __ATOMIC_RELAXED);
    if (which && (!r || r > t->geom.vb_count))
        return NULL;
    if (shl__is_image(t, s))
        return &shl__image_of(s)->vh[which];
    return which ? shl__tvb(t, r - 1) : shl__tvhome(t, s);
}

/* Which buffer `vcur` names (0 own, 1 spare), or -1 when it names neither
 * (damage: check's "value" problems). */
static inline int shl__tvcur_which(const shl_table *t, const struct shl__slot *s)
{
    uint64_t rel = atomic_load_explicit(&s->vcur, memory_order_relaxed) & ~SHL__VCUR_FLAGS;
    uint32_t r = __atomic_load_n(&s->vref, __ATOMIC_RELAXED);
    if (!rel)
        return 0;
    if (!r || r > t->geom.vb_count)
        return -1;
    uint64_t spare = shl__is_image(t, s) ? shl__image_of(s)->vrel_spare : shl__tvb_rel(t, s, r - 1);
    return rel == spare ? 1 : -1;
}

/* The header of the committed value buffer of slot s (or of a copy), or
 * NULL when `vcur` names neither of its buffers. */
static inline struct shl__vhdr *shl__tvcur(const shl_table *t, const struct shl__slot *s)
{
    int w = shl__tvcur_which(t, s);
    return w < 0 ? NULL : shl__tvh(t, s, (uint32_t)w);
}

static inline uint32_t shl__tnslots(const shl_table *t)
{
    uint32_t n = atomic_load_explicit(&t->hdr->nslots, memory_order_acquire);
    return n < t->capacity ? n : t->capacity;
}

/* Relaxed atomic access to fields that lock-free readers load concurrently. */
#define SHL__ST(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define SHL__LD(field)    __atomic_load_n(&(field), __ATOMIC_RELAXED)
/* SHL__ST() unless the field holds the value already (the lock held: it
 * cannot change meanwhile). The memory after is the same either way; a load
 * is cheaper than a store here, every store having to reach the cache before
 * the next locked instruction (the unlock) completes. For the fields of the
 * records an acquisition writes that usually keep their value from one
 * holder to the next (the same owner, pid and operation). */
#define SHL__ST_NEW(field, v)                                                                      \
    do {                                                                                           \
        __typeof__(field) shl__v_ = (v);                                                           \
        if (SHL__LD(field) != shl__v_)                                                             \
            SHL__ST(field, shl__v_);                                                               \
    } while (0)

/* The table clock. Called inside the critical section. */
static inline uint64_t shl__now(const shl_table *t)
{
    if (t->clock == SHL__CLOCK_MANUAL)
        return atomic_load_explicit(&t->hdr->manual_now, memory_order_acquire);
    return shl__mono_ns();
}

/* lib/kind_shm/open_detail.c: rc (SHL_ENOSPC or SHL_EPERM) of opening segment `name`,
 * with what is there now as the detail. */
struct shl__seg_params;
int shl__explain_open(int rc, const char *name, const struct shl__seg_params *p,
                      uint32_t max_mode) SHL__COLD;
/* open_detail.c: rc (from shl__seg_take_slot(), made public) of adding lease
 * `lease` to t, whose slot takes `bytes`, with the space free now as the
 * detail. */
int shl__explain_add(int rc, const shl_table *t, const char *lease, uint64_t bytes) SHL__COLD;
/* floor.c: reserves the next epoch in the token state file at `path`,
 * durably, and gives the floor of a table created in it. SHL_EINVAL (bad
 * path), SHL_ECORRUPT (not a state file), SHL_EPERM, SHL_ENOENT (no such
 * directory), SHL_ENOSPC, SHL_ETOKENS (epochs used up), SHL_ETIMEDOUT (the
 * file's lock was held for over 10 s), SHL_ESYS. */
int shl__floor_next(const char *path, uint64_t *floor) SHL__HIDDEN;
/* The highest token a table with this floor may issue. */
uint64_t shl__token_limit(uint64_t floor) SHL__HIDDEN;
/* Whether a header's floor is one that shl__floor_next() can have made. */
int shl__floor_valid(uint64_t floor) SHL__HIDDEN;

/* index.c: the one walk of a probe chain. The first slot below `limit`
 * (clamped to the capacity read at open) holding `k` and not retired, and
 * its bucket in *at; or NULL, with *at the empty bucket ending the chain
 * (UINT32_MAX when there is none). Lock-free; bounded by the index size. */
struct shl__slot *shl__probe(const shl_table *t, const struct shl__key *k, uint32_t limit,
                             uint32_t *at) SHL__HIDDEN;
/* The slot holding `k` among the names counted in nslots, or NULL. Lock-free. */
struct shl__slot *shl__find(const shl_table *t, const struct shl__key *k) SHL__HIDDEN;
/* The slot holding `k`, added under the table lock if new. SHL_EFULL. */
int shl__find_or_add(shl_table *t, const struct shl__key *k, struct shl__slot **out) SHL__HIDDEN;
/* By name: the slot of `name` (SHL_EINVAL for a bad name, SHL_ENOENT when it
 * was never used), or, for the _or_add form, added if new (SHL_EFULL). */
/* The slot of a lease name (add: adding it if new) by validating, hashing
 * and probing; callers use shl__lookup()/shl__lookup_or_add() (name_cache.h),
 * which ask this thread's cache first. */
int shl__index_lookup(shl_table *t, const char *name, int add, struct shl__slot **out) SHL__HIDDEN;
/* Locks the table lock; on EOWNERDEAD, shl__index_repair() runs first. */
int shl__table_lock(shl_table *t) SHL__HIDDEN;
/* The table lock's EOWNERDEAD handler (arg: the shl_table): rolls an armed
 * add forward and finishes an armed mend of the index. */
void shl__index_repair(void *t) SHL__HIDDEN;
/* The number of slot s; s's name copied into buf and keyed (0), or -1 when
 * the name is not a valid lease name. */
uint32_t shl__slot_no(const shl_table *t, const struct shl__slot *s) SHL__HIDDEN;
/* *s, the slot an operation met, was retired: *s becomes the slot that
 * kept its name, added if `add` and there is none (else SHL_ELOST: nobody
 * holds it there), and is stored into *sp too (the caller's slot: a bound
 * lease's, or a local). SHL_ECORRUPT when *s has no valid name; the errors
 * of shl__find_or_add(). *sp is stored with a relaxed atomic, and read with
 * shl__slot_in(): the threads sharing a bound lease may follow at once, each
 * storing the same slot; each goes on from its own *s, never from a second
 * load of *sp. Out of line and cold. */
int shl__follow(shl_table *t, struct shl__slot **sp, struct shl__slot **s, int add) SHL__HIDDEN;
/* shl__slot_in(): internal.h, beside the bound lease that keeps a slot. */
int shl__slot_key(const struct shl__slot *s, char buf[SHL__NAME_MAX + 1],
                  struct shl__key *k) SHL__HIDDEN;

/* What shl__index_mend() finds; a, b as given to the report. */
enum shl__ix {
    SHL__IX_MISSING, /* slot a's name is not reachable: its bucket is filled */
    SHL__IX_FULL,    /* slot a's name is not reachable and its chain has no empty bucket */
    SHL__IX_TWIN,    /* slots a and b have one name: a keeps it, b is retired */
    SHL__IX_STRAY,   /* bucket a holds b, which no probe uses: marked dead */
};
typedef void (*shl__ix_report_fn)(void *arg, enum shl__ix what, uint32_t a, uint32_t b);
/* The index invariants, checked (fix 0: reads only, lock-free) or mended in
 * place (fix 1: with the table lock held), over the slots counted in nslots
 * now. Reports each problem; returns how many there were. Mending is armed
 * in hdr->index_fix and idempotent (see index.c). */
int shl__index_mend(shl_table *t, int fix, shl__ix_report_fn report, void *arg) SHL__HIDDEN;
/* The words for a problem found by shl__index_mend(), what check reports;
 * with `action`, followed by what repair does about it. */
void shl__ix_text(const shl_table *t, enum shl__ix what, uint32_t a, uint32_t b, int action,
                  char *buf, size_t cap) SHL__HIDDEN;

#include "slot.h"

/* shared.c: shared holders (see shm/layout.h). With the slot locked. */
/* Whether shared holder i is valid at now (its bit set, held, unexpired). */
int shl__sh_valid(const shl_table *t, const struct shl__slot *s, uint32_t i,
                  uint64_t now) SHL__HIDDEN;
/* The valid shared holders at now, how many. */
uint32_t shl__shared_count(const shl_table *t, const struct shl__slot *s, uint64_t now) SHL__HIDDEN;
/* The valid shared holders that keep an exclusive acquire out at now (those
 * the table's policy does not reclaim), how many; *one: one of them (a live
 * one when there is one), *dead_one: whether it is proven dead. */
uint32_t shl__shared_blocking(const shl_table *t, struct shl__slot *s, uint64_t now, int *one,
                              int *dead_one) SHL__HIDDEN;
/* The entry holding `token` (in use or not, *in_use says), or -1. */
int shl__shared_find(const shl_table *t, const struct shl__slot *s, uint64_t token,
                     int *in_use) SHL__HIDDEN;
/* A holder record described for a caller (shl_acquire_ex's holder). */
void shl__holder_info(const shl_table *t, const struct shl__slot *s, const struct shl__holder *c,
                      uint64_t now, shl_lease_info *in) SHL__HIDDEN;
/* A history entry for shared holder i. */
void shl__shared_event(const shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now,
                       enum shl__op op, int32_t pid) SHL__HIDDEN;
/* Releases valid shared holder i (one store of the mask); the caller
 * unlocks and wakes. */
void shl__shared_release_locked(shl_table *t, struct shl__slot *s, uint32_t i,
                                uint64_t now) SHL__HIDDEN;
/* Acquires shared; `ticket`: the caller's waiter ticket (0: not queued),
 * only writers queued before it keep it out. Results of
 * shl_acquire_shared_ex(), and SHL__SLOT_RETIRED (kind.h). */
int shl__acquire_shared_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                           uint64_t ttl_ns, uint32_t ticket, uint64_t *token, uint64_t *gen,
                           shl_lease_info *holder) SHL__HIDDEN;
/* wait.c: whether a writer queued (before `ticket`, or at all when 0) keeps
 * readers out at now: a waiter for an exclusive acquire not proven dead,
 * unless the lease has been free of every holder for a whole turn grace
 * (the writer does not take its turn). */
int shl__writer_queued(const shl_table *t, struct shl__slot *s, uint64_t now,
                       uint32_t ticket) SHL__HIDDEN;

/* kind_shm/lease.c: the slot an acquire of `lease` works on, added if new; a ttl
 * that overflows now is SHL_EINVAL before any name is added. */
int shl__acquire_slot(shl_table *t, const char *lease, uint64_t ttl_ns,
                      struct shl__slot **s) SHL__HIDDEN;

/* wait.c: waking sleepers on a slot's `wake` futex word. */
/* Under the slot lock, when the lease becomes acquirable by release or
 * revoke: records the time (the queue head's turn starts) and bumps `wake`.
 *
 * The bump is a load and a store, not an atomic add: a locked add cost a
 * release about 6 ns, and every other change of `wake` but one is made under
 * the slot mutex too. The one that is not, shl__poke() (a renewer stopped or
 * told of its loss), can fall between the load and the store and see its
 * increment overwritten: `wake` then moves by one where it should have moved
 * by two. Nobody can tell but a thread that loaded the word in between
 * (after the poke's add, before this store) and sleeps on it; a waiter reads
 * it under the mutex, so cannot, and the only lock-free reader, the renewer,
 * checks the flags a poke announces (stop, a callback pending: both set
 * before its add) after loading the word, so it has seen why it was poked.
 */
static inline void shl__slot_freed(struct shl__slot *s, uint64_t now)
{
    SHL__ST(s->freed_at, now);
    uint32_t w = atomic_load_explicit(&s->wake, memory_order_relaxed);
    atomic_store_explicit(&s->wake, w + 1, memory_order_release);
}

/* After unlocking: wakes the slot's sleepers; unless `always`, only when a
 * waiter is queued (release's fast path makes no system call otherwise).
 * Revoke passes always = 1, which also wakes the holder's renewer. */
void shl__wake_waiters(struct shl__slot *s, int always) SHL__HIDDEN;
/* Bumps `wake` and wakes everyone: ends a renewer's sleep. */
void shl__poke(struct shl__slot *s) SHL__HIDDEN;
/* Queued waiters of slot s (or of a copy of it) not proven dead, asked
 * through `t`. Lock-free. */
uint32_t shl__waiters_count(const shl_table *t, const struct shl__slot *s) SHL__HIDDEN;
/* orphan.c: whether the handle with alive id `live` is still open
 * (SHL__ALIVE, SHL__DEAD, SHL__UNKNOWN), asked through `t` (NULL: UNKNOWN).
 * One system call, no /proc: fine under a slot's mutex. */
int shl__handle_alive(const shl_table *t, uint64_t live) SHL__HIDDEN;
/* With `s` locked (or a private copy of it) and its holder unexpired at
 * `now`: whether the table's policy lets that holder be reclaimed now. It
 * must be proven dead, and the table's reclaim delay must have passed since
 * the first look that saw the death (recorded in the slot). *dead: proven
 * dead (also when the reclaim delay still runs). Without the policy nothing
 * is asked: *dead stays 0. */
int shl__orphan_due(const shl_table *t, struct shl__slot *s, uint64_t now, int *dead) SHL__HIDDEN;
/* The same for shared holder i of `s` (its own reclaim delay record). */
int shl__orphan_due_shared(const shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now,
                           int *dead) SHL__HIDDEN;
/* For a waiter, with `s` locked and holder i (-1: the exclusive one, else
 * shared holder i) valid at `now`: the table time from which it no longer
 * keeps an acquire out. Its expiry, or, when the policy lets a proven dead
 * holder be reclaimed, the end of its reclaim delay (at most `now` once due).
 * Asks and records exactly as shl__orphan_due() does, so a waiter's look
 * starts the reclaim delay of a death it is the first to see. */
uint64_t shl__orphan_end(const shl_table *t, struct shl__slot *s, int i, uint64_t now) SHL__HIDDEN;
/* heartbeat.c (a renewer's beat and end: shl__shm_renewer_beat() and
 * shl__shm_renewer_end(), kind.h). Whether the slot's lease is held and valid at `now` for the
 * token its renewer beats for, and that renewer missed two beats. */
int shl__heartbeat_stalled(const struct shl__slot *s, uint64_t now) SHL__HIDDEN;
/* kind_shm/inspect.c: the public state (SHL_STATE_*) of a holder at `now`; an
 * unexpired holder is ORPHANED only when `t` (NULL: no proof) proves its
 * handle closed. */
int shl__state_of(const shl_table *t, const struct shl__holder *h, uint64_t now) SHL__HIDDEN;
/* Copies slot `s` of t, its history and the records of the groups it
 * names into `out` (and up to pcap value bytes, at most t's value size,
 * into preview) under its seqlock, waiting a few ms at most for a change
 * in flight. 1 if the copy is consistent, 0 if a change stayed in flight.
 * Never takes the mutex. */
int shl__slot_snapshot(const shl_table *t, const struct shl__slot *s, struct shl__slot_image *out,
                       unsigned char *preview, uint32_t pcap) SHL__HIDDEN;

/* kind_shm/invariants.c: the invariants of a slot's holder, values and counters, listed
 * once for check and repair. fix 0: each broken one is said as a problem
 * (the slot is only read). fix 1 (repair: slot locked, change bracket
 * open): each one repair can mend is mended and said as "problem: action";
 * the ones it cannot are left to check. */
struct shl__inv_ctx {
    const shl_table *t; /* the records of the slot's groups (shl__tsh()) */
    uint32_t value_size;
    uint64_t floor; /* the table's token floor */
    int live;       /* `now` is meaningful */
    uint64_t now;
};
typedef void (*shl__inv_say_fn)(void *arg, const char *text);
/* The kernel's largest pid_max: a pid above it is damage. */
#define SHL__PID_LIMIT 4194304
/* The lease's last token of either kind. */
static inline uint64_t shl__top_token(const struct shl__slot *s)
{
    return s->tok_last > s->cur.token ? s->tok_last : s->cur.token;
}
void shl__slot_invariants(const struct shl__inv_ctx *x, struct shl__slot *s, int fix,
                          shl__inv_say_fn say, void *arg) SHL__HIDDEN;
/* pool.c, for check and repair. The refs of slot s (its number `no`; s
 * may be a copy) that break the pools' rules: each names a group in range
 * that slot `no` owns, and none twice. fix 0: each said as a problem. fix 1
 * (s locked, a seq bracket open): a free group named is taken again, any
 * other such ref cleared (its records go with it), said as "problem:
 * action". */
void shl__pool_slot_refs(const shl_table *t, struct shl__slot *s, uint32_t no, int fix,
                         shl__inv_say_fn say, void *arg) SHL__HIDDEN;
/* Groups owned by slot `no` that named_by (that slot, or a copy of it)
 * does not name, how many; given back when free_them (the slot locked). */
uint32_t shl__pool_strays(const shl_table *t, uint32_t no, const struct shl__slot *named_by,
                          int free_them) SHL__HIDDEN;
int shl__pool_names(const struct shl__slot *s, enum shl__pool k, uint32_t g) SHL__HIDDEN;
/* Gives group g of pool k back if `owner` still owns it (repair, for an
 * owner that holds no lease). */
void shl__pool_release_group(const shl_table *t, enum shl__pool k, uint32_t g,
                             uint32_t owner) SHL__HIDDEN;
/* The owner word of group g of pool k (slot number + 1, 0: free). */
uint32_t shl__pool_owner(const shl_table *t, enum shl__pool k, uint32_t g) SHL__HIDDEN;
/* kind_shm/check.c: whether a slot's history passes the checks (time-independent
 * ones only). */
int shl__history_ok(const shl_table *t, const struct shl__slot *s) SHL__HIDDEN;

/* The lookups through this thread's name cache (shl__lookup(),
 * shl__lookup_or_add()). */

#include "name_cache.h"

#endif
