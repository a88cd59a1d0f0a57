/*
 * lib/kind_shm/slot.h - a slot's lock (robust, repaired on EOWNERDEAD), the
 * table's removed mark, the seqlock brackets, the intent that makes every
 * change of several fields crash-safe, counters, history events, and the
 * word-wise copies between private and shared memory. Part of shm_kind.h,
 * which includes it where what it needs is declared: include shm_kind.h.
 */
#ifndef SHL_LIB_KIND_SHM_SLOT_H
#define SHL_LIB_KIND_SHM_SLOT_H

#ifndef SHL_LIB_SHM_KIND_H
#error "include shm_kind.h, which includes this file"
#endif

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

/* removed.c: 1 when shl__removed(), or when the table's file has lost its
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

#endif
