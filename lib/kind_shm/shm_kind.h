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

/* lib/kind_shm/pool.c: the reader and waiter pools (shm/layout.h, Pools). */
enum shl__pool { SHL__POOL_SH, SHL__POOL_WQ };
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

static inline unsigned char *shl__tvalue(const shl_table *t, struct shl__slot *s, uint32_t which)
{
    return shl__slot_value(s, t->geom.history, t->value_size, which);
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

/* slot.c: locking a slot with repair, seqlock brackets, history. */
void shl__slot_repair_locked(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;
/* The mutex's EOWNERDEAD handler: shl__slot_repair_locked() on a
 * struct shl__repair_ctx. */
struct shl__repair_ctx {
    const shl_table *t;
    struct shl__slot *s;
};
void shl__slot_repair_cb(void *arg) SHL__HIDDEN;

/* Whether the table was marked removed (shm/layout.h, shl_unlink()): the
 * one load every lease operation pays, at the entry of its critical section
 * (shl__slot_lock_moved()) or of its lock-free read. A mark stored after the
 * load is seen by the next call: the operation in flight is ordered before
 * the removal. Acquire: pairs with the marker's release, so that a waiter
 * that read the bumped `wake` word sees the mark (kind_shm/wait.c). */
static inline int shl__removed(const shl_table *t)
{
    return shl__unlikely(atomic_load_explicit(&t->hdr->removed, memory_order_acquire) != 0);
}

/* table.c: 1 when shl__removed(), or when the table's file has lost its
 * name (shl__seg_gone(): unnamed, or the name now names another file); the
 * latter is then marked as shl_unlink() marks (every handle told, every
 * sleeper woken), since no one can open that segment again. Else 0. Two
 * system calls: not for the hot path (renewers, waits, shl_table_check()).
 * A table of the shared-memory kind only. */
int shl__table_removed(const shl_table *t) SHL__HIDDEN;

/* The slot this thread locked last, and the lock generation it left there:
 * a slot locked again with its generation where this thread left it has
 * seen no other locker in between (shl__slot_lock_moved()). */
struct shl__last_lock {
    const struct shl__slot *s;
    uint32_t gen;
};
extern __thread struct shl__last_lock shl__last_lock SHL__HIDDEN;

/* What every locker of a slot records once it holds the mutex. */
static inline void shl__slot_held(const shl_table *t, struct shl__slot *s, int *moved)
{
    /* For waiters only (shm/mutex.c): a new hold, even by the same process. */
    uint32_t g = atomic_load_explicit(&s->lock_gen, memory_order_relaxed);
    if (moved)
        *moved = shl__last_lock.s != s || shl__last_lock.gen != g;
    atomic_store_explicit(&s->lock_gen, g + 1, memory_order_relaxed);
    atomic_store_explicit(&s->locker, t->self.pid, memory_order_relaxed);
    shl__last_lock.s = s;
    shl__last_lock.gen = g + 1;
}

/*
 * Locks a slot (repairing it if its last locker died). When `moved` is not
 * NULL, *moved says whether another locker (another thread or process) held
 * the slot between this thread's last hold of it and this one. The answer is
 * worked out here, from the generation just read, rather than by the caller
 * from a copy of shl__last_lock taken before the lock: that copy, live across
 * the lock, cost a process that keeps a lease to itself 3-4 ns per
 * acquire+release on some hosts (docs/BENCHMARKS.md).
 */
static inline int shl__slot_lock_moved(const shl_table *t, struct shl__slot *s, int *moved)
{
    if (shl__removed(t) && !SHL__MUTANT(REMOVED_IGNORED))
        return SHL_EREMOVED;
    struct shl__repair_ctx c = {t, s};
    int rc = shl__mutex_lock(&s->lock, &s->lock_gen, shl__slot_repair_cb, &c);
    if (rc != 0)
        return shl__from_shm(rc);
    shl__slot_held(t, s, moved);
    return SHL_OK;
}

/* Inline: every lease operation locks and unlocks once. */
static inline int shl__slot_lock(const shl_table *t, struct shl__slot *s)
{
    return shl__slot_lock_moved(t, s, NULL);
}

/* Locks a slot only if nobody holds it (repairing it if its last locker
 * died): SHL_OK, SHL_EBUSY, or what shl__slot_lock() returns. Never waits:
 * a caller that holds another slot's mutex may use it (lib/kind_shm/pool.c). */
int shl__slot_trylock(const shl_table *t, struct shl__slot *s) SHL__HIDDEN;

/*
 * Asks for the lines an exclusive acquisition writes besides the mutex's
 * (hist_next to the counters of an acquire and a release, past the
 * intent, its bookkeeping and the token words), with the slot locked,
 * when another locker was in the slot since this thread's last hold
 * (shl__slot_lock_moved()). Those lines are then likely in another core's
 * cache, and the stores of the acquisition would fetch them one after the
 * other, the unlock waiting for each; asked for together, they come at
 * once. A thread that keeps a lease to itself
 * does not pay for the hints. Nothing is read or written: the slot's rules
 * (mutex, seqlock, intent) are as before.
 * (bench: "lease attempt in turn, 2 processes", docs/BENCHMARKS.md.)
 */
static inline void shl__slot_prefetch_acquire(const struct shl__slot *s)
{
    const char *b = (const char *)s;
    for (size_t o = offsetof(struct shl__slot, hist_next) & ~(size_t)(SHL__CACHELINE - 1);
         o <= offsetof(struct shl__slot, count[SHL__C_RELEASE]); o += SHL__CACHELINE)
        __builtin_prefetch(b + o, 1);
}

static inline void shl__slot_unlock(struct shl__slot *s)
{
    atomic_store_explicit(&s->locker, 0, memory_order_relaxed);
    shl__mutex_unlock(&s->lock);
}

/* Applies the slot's armed intent (holder, history entry, counters), inside
 * the seq bracket; `cp` is the crash point between the holder's first words
 * and the rest. Idempotent. */
void shl__intent_apply(const shl_table *t, struct shl__slot *s, int cp) SHL__HIDDEN;

/* Writes `next` as the slot's intent, with the history entry (op, time, pid)
 * and up to two counters to bump (SHL__C_COUNT for none), then arms it;
 * `cp` is the crash point before arming. Called with the slot locked. */
void shl__intent_arm(const shl_table *t, struct shl__slot *s, const struct shl__holder *next,
                     uint32_t op, uint64_t now, int32_t pid, enum shl__counter c0,
                     enum shl__counter c1, int cp) SHL__HIDDEN;

/* The general form: `to` says which record the intent replaces (0: cur,
 * i + 1: shared holder i), the shared-holder mask once applied, and (with a
 * shared target) cur's state once applied. shl__intent_arm() is it with
 * target cur, the mask unchanged. */
struct shl__intent_to {
    uint32_t target;
    uint64_t shared;
    uint32_t cur_state;
};
void shl__intent_arm_to(const shl_table *t, struct shl__slot *s, const struct shl__intent_to *to,
                        const struct shl__holder *next, uint32_t op, uint64_t now, int32_t pid,
                        enum shl__counter c0, enum shl__counter c1, int cp) SHL__HIDDEN;

/* Applies and disarms: the second half of a change started by
 * shl__intent_arm(). `cp_mid`, `cp_after`: crash points. */
void shl__intent_commit(const shl_table *t, struct shl__slot *s, int cp_mid,
                        int cp_after) SHL__HIDDEN;

/* shl__intent_arm_to(), then shl__intent_commit(), in one: the crash
 * points cp[0] (before arming), cp[1] (armed, nothing applied), cp[2]
 * (cp_mid) and cp[3] (cp_after). Every store is the same as theirs; it
 * only applies from its own copies of what it just stored instead of
 * reading the intent back (the acquire's hot path). */
void shl__intent_change(const shl_table *t, struct shl__slot *s, const struct shl__intent_to *to,
                        const struct shl__holder *next, uint32_t op, uint64_t now, int32_t pid,
                        enum shl__counter c0, enum shl__counter c1, const int cp[4]) SHL__HIDDEN;

static inline void shl__seq_begin(struct shl__slot *s)
{
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static inline void shl__seq_end(struct shl__slot *s)
{
    uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, q + 1, memory_order_release);
}

static inline void shl__count(struct shl__slot *s, enum shl__counter c)
{
    SHL__ST(s->count[c], s->count[c] + 1);
}

void shl__event(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                uint64_t token, int32_t pid, const char *owner, uint32_t owner_len,
                uint16_t why) SHL__HIDDEN;
void shl__event_holder(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                       int32_t pid) SHL__HIDDEN;
/* The same for shared holder record h (the lock held). */
void shl__event_shared(const shl_table *t, struct shl__slot *s, uint64_t now, enum shl__op op,
                       const struct shl__holder *h, int32_t pid) SHL__HIDDEN;

/* Word-wise relaxed atomic copies between private and shared memory, so that
 * seqlock readers and the writer never race in the C11 sense. `shared` is
 * 8-byte aligned. */
static inline void shl__copy_to_shared(void *shared, const void *src, size_t n)
{
    unsigned char *d = shared;
    const unsigned char *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        __atomic_store_n((uint64_t *)(void *)(d + i), w, __ATOMIC_RELAXED);
    }
    for (; i < n; i++)
        __atomic_store_n(d + i, s[i], __ATOMIC_RELAXED);
}

static inline void shl__copy_from_shared(void *dst, const void *shared, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = shared;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(s + i), __ATOMIC_RELAXED);
        memcpy(d + i, &w, 8);
    }
    for (; i < n; i++)
        d[i] = __atomic_load_n(s + i, __ATOMIC_RELAXED);
}

/* memcmp(a, b, n) == 0 for 1 <= n <= 64, inline and a word at a time (names
 * and owners on the hot path): the last word (or half word) overlaps the
 * one before instead of a byte loop; for n < 4 the first, middle and last
 * bytes are all of them. */
static inline int shl__same_bytes(const char *a, const char *b, uint32_t n)
{
    uint64_t x, y;
    if (n >= 8) {
        for (uint32_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x4, y4, u4, v4;
        memcpy(&x4, a, 4);
        memcpy(&y4, b, 4);
        memcpy(&u4, a + n - 4, 4);
        memcpy(&v4, b + n - 4, 4);
        return x4 == y4 && u4 == v4;
    }
    return a[0] == b[0] && a[n >> 1] == b[n >> 1] && a[n - 1] == b[n - 1];
}

/* Holder state copies: into shared memory field by field (atomic), and a
 * seqlock snapshot out of it. */
void shl__holder_store(struct shl__holder *dst, const struct shl__holder *src) SHL__HIDDEN;
void shl__holder_load(struct shl__holder *dst, const struct shl__holder *src) SHL__HIDDEN;

/* The holder record of a new acquisition of either kind at `now` (the slot
 * locked): the lease's next token (above both its counters and the table's
 * floor), expiry, owner, this handle's pid and alive id. SHL_ETOKENS when
 * the lease has issued its last token, SHL_EINVAL when now + ttl overflows;
 * the caller unlocks. Inline: it is on the exclusive acquire's hot path. */
static inline int shl__next_holder(const shl_table *t, const struct shl__slot *s, const char *owner,
                                   uint32_t olen, uint64_t ttl_ns, uint64_t now, uint32_t op,
                                   struct shl__holder *next)
{
    uint64_t base = s->cur.token > s->tok_last ? s->cur.token : s->tok_last;
    if (base < t->token_floor)
        base = t->token_floor;
    if (base >= t->token_limit)
        return SHL_ETOKENS;
    if (ttl_ns > UINT64_MAX - now)
        return SHL_EINVAL;
    /* Only the owner's bytes up to its NUL's word are stored (and the
     * history's first two words): zero those, not the whole record. */
    memset(next->owner, 0, 16);
    memset(next->owner + olen / 8 * 8, 0, 8);
    next->token = base + 1;
    next->expiry = now + ttl_ns;
    next->since = now;
    next->pid = t->self.pid;
    next->live = t->self.live;
    next->state = SHL__ST_HELD;
    next->op = op;
    next->owner_len = olen;
    memcpy(next->owner, owner, olen);
    return SHL_OK;
}

/* shl__acquire_at() on a retired slot (see index.c): look the name up again
 * (shl__follow()). */
#define SHL__SLOT_RETIRED 1
/* A prologue's answer for a table of another kind (kind.h): the caller hands
 * the call to that kind's function. */
#define SHL__OTHER_KIND 2

/* The acquire and the read on a slot already found, for the name-taking
 * API and the bound leases (kind_shm/bound.c); the holder's operations on
 * a slot are shl__shm_*_at() (kind.h). Arguments are validated by the
 * callers; owner is olen bytes. Same results as the public functions of the
 * same name. The read takes sp alone (it reads *sp itself, once; see
 * shl__follow()). */
int shl__acquire_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                    uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder) SHL__HIDDEN;
int shl__read_at(shl_table *t, struct shl__slot **sp, void *buf, size_t cap, size_t *len,
                 uint64_t *token) SHL__HIDDEN;

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
 * shl_acquire_shared_ex(), and SHL__SLOT_RETIRED. */
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
/* heartbeat.c: a renewer's beat at table time `now`, and its end (the
 * record cleared only if it still names `token`). */
void shl__heartbeat_beat(struct shl__slot *s, uint64_t token, uint64_t interval,
                         uint64_t now) SHL__HIDDEN;
void shl__heartbeat_end(struct shl__slot *s, uint64_t token) SHL__HIDDEN;
/* Whether the slot's lease is held and valid at `now` for the token its
 * renewer beats for, and that renewer missed two beats. */
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
