/*
 * shm/layout.h - the shared-memory format of a shmlease segment.
 *
 * Everything in this file lives in memory shared by every process that has the
 * table open. Nothing per-process (pointers, fds) is ever stored here: only
 * offsets and plain values.
 *
 *   +------------------+  offset 0
 *   | shl__hdr         |  fixed header, then the table mutex on its own line
 *   +------------------+  hdr->index_off
 *   | index            |  index_size uint32 buckets (0 = empty, else slot + 1,
 *   |                  |  or SHL__BUCKET_DEAD)
 *   +------------------+  hdr->slots_off
 *   | slot 0           |  slot_stride bytes each: shl__slot, hdr->history
 *   | slot 1           |  events, then the lease's value buffer (a
 *   | ...              |  struct shl__vhdr, then value_size bytes)
 *   +------------------+  hdr->sh_pool_off
 *   | reader pool      |  sh_groups struct shl__sh_group: shared holders
 *   +------------------+  hdr->wq_pool_off
 *   | waiter pool      |  wq_groups struct shl__wq_group: queued waiters
 *   +------------------+  hdr->vb_pool_off
 *   | value pool       |  vb_count spare value buffers, laid out as a
 *   |                  |  slot's (shl__vbuf_size() bytes each)
 *   +------------------+  hdr->seg_size
 *
 * The memory behind the file: creation takes the pages of all but the slots
 * (fallocate(2)); the adder of a name takes those of its slot, and of the
 * next ones up to a boundary of SHL__SLOT_TAKE bytes, before it writes the
 * slot (shl__seg_take_slot(), under the table mutex). Slots are added in
 * order, so every slot below `nslots` has its pages, and no store into a
 * slot can meet a full file system (a SIGBUS).
 *
 * Who writes what, under which lock:
 *
 * - The header's plain fields are written once by the creator before the
 *   segment is published (see shm/segment.c) and never change afterwards;
 *   readers need no lock. `manual_now` moves only forward, by CAS.
 * - `removed` is written by shl_unlink() alone, no lock: one release store
 *   of SHL__REMOVED before the name is unlinked, then a bump and a wake of
 *   every slot's `wake` word, so that sleepers look again. Never cleared.
 * - The table mutex serialises adding a name: slot allocation (`nslots`), the
 *   slot's name and mutex initialisation, and the bucket that publishes it.
 *   Lookups never take it: a bucket goes from 0 to slot + 1 exactly once, with
 *   a release store after the slot's name is complete, so an acquire load of a
 *   non-zero bucket sees the whole name. Repair (lib/kind_shm/index.c, under the table
 *   lock) only ever fills an empty bucket the same way, turns a bucket no
 *   lookup can use into SHL__BUCKET_DEAD, or points a retired twin's bucket
 *   at the slot that kept its name; it never clears one, so a lock-free
 *   probe never stops early. `index_fix` arms a repair of the index:
 *   set under the table lock before the first change and cleared after the
 *   last, so that a repairer's death leaves the lock EOWNERDEAD with the fix
 *   armed, and the next locker finishes it.
 * - A slot's mutex serialises every change of that slot's lease state and
 *   value. Each change is bracketed by the slot's `seq` (odd while changing) so
 *   that readers take consistent snapshots without locking (a seqlock).
 * - Waiting (lib/kind_shm/wait.c): `wake` is a futex word, bumped under the slot mutex
 *   by release and revoke (and, without it, by a renewer being stopped, to
 *   end its own sleep, and by the remover after storing `removed`); a waiter
 *   reads it under the mutex before sleeping, so no wake-up is lost (and
 *   loads `removed` after it, so no removal either). The wake system call
 *   comes after the unlock: a waker that dies before it leaves `wake` moved
 *   (or `seq`, dying inside the section), which a sleeping waiter checks
 *   without the lock every SHL_WAIT_DOZE_NS (lib/kind_shm/wait.c). The waiter queue
 *   (the entries of the slot's waiter groups), `wq_tail`, `freed_at` and `waiters` (the number of
 *   occupied queue entries) change only under the slot mutex. Each entry is claimed by
 *   storing its ticket last and freed by one store of ticket 0, and `waiters`
 *   is recounted from the entries after every change, so a waiter dying at
 *   any point leaves at worst a stale entry, which the next waiter drops once
 *   the kernel proves its handle closed (see Liveness).
 * - Liveness: every opener takes an id from `alive_next` (one atomic add, no
 *   lock; 0 in a fresh segment) and holds an OFD lock on that id's byte of
 *   the file (shm/alive.h). Holder records (`live`, written with the rest
 *   of the holder under the slot mutex) and waiter entries carry the id;
 *   "dead" is only ever concluded from the kernel's answer about that
 *   lock, and a record whose id is 0 is never concluded dead.
 * - Pools: a group is taken by a compare-and-swap of its `owner` from 0
 *   to the slot's number + 1, by a process that holds that slot's mutex,
 *   and only then named in the slot's sh_ref/wq_ref (inside a seq
 *   bracket); it is given back in the reverse order: the slot's ref cleared,
 *   then one store of `owner` 0. No pool lock: every step is one word. A
 *   death between the two steps leaves a group owned by a slot that does
 *   not name it, which the slot's next recoverer (EOWNERDEAD), shl_check()
 *   and shl_repair() see and free; a named group is never owned by another
 *   slot. A group is given back once none of its records is in use (no bit
 *   of `shared` in it, no queued ticket), by whoever clears the last one;
 *   one named but unused when its locker died (taken for a record never
 *   written) is given back by the slot's recoverer. Except a lease's first
 *   group of each pool (sh_ref[0], wq_ref[0]): kept while unused, for the
 *   lease's next reader or waiter, until the lease is retired or a take
 *   finds no free group. Such a take takes back an unused group from the
 *   lease that names it, under that lease's mutex (a try: never a wait,
 *   so two slots' locks cannot deadlock), as the lease itself would give
 *   it back, then takes it as a free one.
 * - Values: a lease's own value buffer lies after its history; a lease
 *   that is written takes a spare buffer from the value pool at its first
 *   write (the pool's rules above, the buffer's `owner` word in its header,
 *   named by the slot's `vref`) and keeps it, so that every write goes
 *   into the buffer readers do not use. `vcur` names the committed buffer
 *   by its byte offset from the lease's own buffer: 0 (its own) or the
 *   spare's (always the one `vref` names). A lease that needs a spare when
 *   none is free takes one back from the lease that keeps it, under that
 *   lease's mutex (a try), as the pools' groups are taken back; when that
 *   lease's value is in the spare, it first copies the value (and its
 *   header) into the lease's own buffer and commits that by one store of
 *   `vcur` inside the lease's seq bracket, so its value and token stay.
 * - Heartbeat: `heartbeat`, `hb_token` and `hb_interval` are written by the
 *   holder's renewer with relaxed stores, no lock: they are advisory (shown
 *   by the inspector to spot a stalled renewer) and never decide validity.
 *
 * Crash consistency (a process may die at any instruction):
 *
 * - A change that touches one aligned word (renew's expiry, release's state,
 *   the value commit) is atomic by itself.
 * - A change of several holder fields (acquire, revoke, reclaim) is first
 *   written whole into `intent` and `meta` (the history entry and the
 *   counters' target values), then armed with a release store of
 *   `intent_armed`, applied, and disarmed. The recoverer (the next locker, on
 *   EOWNERDEAD) applies an armed intent again: roll forward, which is
 *   idempotent because every store writes an absolute value. An intent that
 *   was never armed is ignored: roll back.
 * - Renew, release and a value commit are one word each; their counter and
 *   history entry follow the commit, so a death right after it leaves the
 *   change made and its history entry missing (the recovery entry shows why).
 * - A value is written into the buffer not referenced by `vcur`, with its own
 *   header (token, length), and committed by one store of `vcur`. A crash
 *   before the commit leaves the previous value whole. A spare taken back
 *   is emptied in the same order: its value copied home, `vcur` stored,
 *   then `vref` cleared and the buffer's owner.
 * - Tokens only ever come from max(`cur.token`, `tok_last`) + 1 at acquire,
 *   of either kind; no path lowers either.
 */
#ifndef SHL_SHM_LAYOUT_H
#define SHL_SHM_LAYOUT_H

#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHL__CACHELINE 64

/* "SHLEASE\0" read as a little-endian word; a big-endian reader sees it byte
 * swapped, so a foreign byte order is refused as a bad magic. */
#define SHL__MAGIC   UINT64_C(0x00455341454c4853)
#define SHL__READY   UINT32_C(0x52454459) /* "READ" once published */
#define SHL__REMOVED UINT32_C(1)          /* hdr->removed once marked */

/* Bumped whenever a field moves: the format word folds in the sizes of the
 * header and the slot, not the offsets of their fields. (2: the unused
 * created_ns went; 3: liveness ids replaced pid start times; 4: retired
 * slots and dead buckets, which an older build would not skip; 5: the name
 * hash is wyhash, which places names elsewhere in the index; 6: shared
 * holders, the lease's token counter and waiter kinds; 7: the slot's lock
 * generation in the mutex's cache line, `waiters` out of it; 8: the removed
 * mark, which an older build would not look at; 9: the waiter queue and
 * the shared holders out of the slot, into its annex before it, so that
 * an exclusive acquire and release touch fewer lines and one page less;
 * the history at the slot's end, with whole owners where it kept 16
 * bytes; 10: the reader records and the waiter queue in per-table pools
 * (the annex went), the history's length chosen per table, after the
 * slot; 11: one value buffer a lease, its header in it, and a spare from
 * the value pool; `vcur` a byte offset.) */
#define SHL__LAYOUT_VERSION 11u

/* Slots' bytes an adder takes the pages of at once (shl__seg_take_slot()). */
#define SHL__SLOT_TAKE (UINT64_C(64) << 10)

#define SHL__NAME_MAX   63                   /* lease name bytes, not counting the NUL */
#define SHL__OWNER_MAX  63                   /* owner bytes, not counting the NUL */
#define SHL__HIST_LEN   8                    /* most events kept per lease (hdr->history) */
#define SHL__HIST_OWNER (SHL__OWNER_MAX + 1) /* the whole owner and its NUL */
#define SHL__WAITQ_LEN  32                   /* queued waiters per lease (see shl_acquire_wait) */
#define SHL__SHARED_MAX 32                   /* shared holders per lease (bits of slot->shared) */
/* The pools' entries are groups of records: a lease takes a group when it
 * first needs one of its records and gives it back when none is in use. */
#define SHL__SH_GROUP 4 /* reader records per group of the reader pool */
#define SHL__WQ_GROUP 8 /* waiter entries per group of the waiter pool */
#define SHL__SH_REFS  (SHL__SHARED_MAX / SHL__SH_GROUP)
#define SHL__WQ_REFS  (SHL__WAITQ_LEN / SHL__WQ_GROUP)

#define SHL__CAPACITY_MAX (UINT32_C(1) << 24)
#define SHL__VALUE_MAX    (UINT32_C(1) << 20)

/* hdr->clock */
#define SHL__CLOCK_MONOTONIC 0u
#define SHL__CLOCK_MANUAL    1u

/* slot holder state */
#define SHL__ST_FREE    0u /* never held, or released */
#define SHL__ST_HELD    1u /* held until cur.expiry */
#define SHL__ST_REVOKED 2u /* ended by an administrator before its expiry */
/* The slot lost its name to a twin (two slots with one name, see lib/kind_shm/index.c):
 * lookups skip it, acquire refuses it, and no holder is ever valid in it. Its
 * token is kept, never lowered. Final. */
#define SHL__ST_RETIRED 3u
/* Set in `vcur` by the retirement (with the state, by its intent): lock-free
 * readers load `vcur` anyway, so one that still has the retired slot (a
 * bound lease) learns from it, for free, to look the name up again. The
 * offset is the rest: buffers are 8-byte aligned, so its low bits are free. */
#define SHL__VCUR_RETIRED 2u
#define SHL__VCUR_FLAGS   UINT64_C(7)

/* intent and history operation kinds */
enum shl__op {
    SHL__OP_NONE = 0,
    SHL__OP_ACQUIRE,  /* free or released lease taken */
    SHL__OP_TAKEOVER, /* expired lease taken by the next holder */
    SHL__OP_RENEW,
    SHL__OP_RELEASE,
    SHL__OP_REVOKE,
    SHL__OP_RECLAIM, /* orphaned lease taken before its expiry */
    SHL__OP_RECOVER, /* EOWNERDEAD repaired */
    SHL__OP_REJECT,  /* refused renew/release/write/guard */
    SHL__OP_WRITE,
    SHL__OP_SHARED, /* shared acquisition (its holder in sh[]) */
    SHL__OP_COUNT
};

/* counters (slot->count[]) */
enum shl__counter {
    SHL__C_ACQUIRE = 0, /* every successful acquire (including takeovers) */
    SHL__C_RENEW,
    SHL__C_RELEASE,
    SHL__C_EXPIRE, /* acquisitions that took over an expired holder */
    SHL__C_REVOKE,
    SHL__C_RECLAIM,
    SHL__C_RECOVER,
    SHL__C_WRITE,
    SHL__C_BUSY,        /* acquire refused: held by another */
    SHL__C_REJ_EXPIRED, /* right owner and token, but past expiry (or revoked) */
    SHL__C_REJ_STALE,   /* right owner, older token */
    SHL__C_REJ_OWNER,   /* wrong owner */
    SHL__C_SHARED,      /* every successful shared acquire */
    SHL__C_COUNT
};

/* Holder state: `cur` (committed) and `intent` (the next one, while armed). */
struct shl__holder {
    uint64_t token;  /* token of the last acquisition; 0 = never acquired */
    uint64_t expiry; /* table clock, ns; valid iff now < expiry */
    uint64_t since;  /* table clock at acquisition */
    uint64_t live;   /* alive id of the holder's handle (shm/alive.h); 0: none */
    int32_t pid;     /* holder's pid (tgid) in its own PID namespace: display only */
    uint32_t state;  /* SHL__ST_* */
    uint32_t op;     /* what produced this state (SHL__OP_*) */
    uint32_t owner_len;
    char owner[SHL__OWNER_MAX + 1];
};

struct shl__event {
    uint64_t time;  /* table clock */
    uint64_t token; /* token involved (for a rejection: the one presented) */
    int32_t pid;
    uint16_t op;  /* SHL__OP_* */
    uint16_t why; /* for SHL__OP_REJECT: the SHL__C_REJ_* counter */
    /* The whole owner, NUL-terminated; the bytes after the NUL's 8-byte
     * word are left from older entries (only the words up to it are
     * written), so readers stop at the NUL. */
    char owner[SHL__HIST_OWNER];
};

/* What an armed intent does besides replacing `cur`: the history entry it
 * writes and the counters it bumps, as absolute target values so that
 * applying it twice changes nothing more than applying it once. */
struct shl__intent_meta {
    uint64_t time;      /* table clock of the change (history entry) */
    uint64_t cnt[2];    /* target values of counters cnt_id[0..1] */
    uint64_t shared;    /* `shared` once applied */
    uint64_t tok_last;  /* `tok_last` once applied (never lowered by applying) */
    uint32_t cnt_id[2]; /* SHL__C_*, or SHL__C_COUNT for none */
    uint32_t hist_next; /* hist_next once applied; entry hist_next - 1 */
    int32_t pid;        /* process making the change */
    uint32_t op;        /* SHL__OP_* for the history entry */
    uint32_t target;    /* the record `intent` replaces: 0 = cur, i + 1 = sh[i] */
    uint32_t cur_state; /* with a shared target: cur.state once applied */
    uint32_t pad_;
};

/* The header at the start of every value buffer, the lease's own and the
 * value pool's. */
struct shl__vhdr {
    uint64_t token; /* token that wrote this value; 0 = never written */
    uint32_t len;
    /* A buffer of the value pool: the number + 1 of the slot that took it,
     * 0 while free (shm/layout.h, Pools and Values). 0 in a slot's own. */
    _Atomic uint32_t owner;
};

/* One place in a lease's waiter queue. Written under the slot's mutex; read
 * without it (relaxed) only to count waiters for display. A waiter whose
 * handle is gone (killed while queued) is recognised by its alive id and
 * its entry dropped by the next waiter that looks (lib/kind_shm/wait.c). A waiter
 * knows its own entry by (live, pid, nonce), never by ticket: a waiter passed
 * over is given a new ticket by another. */
struct shl__waiter {
    uint64_t live;   /* alive id of the waiter's handle (shm/alive.h) */
    uint32_t nonce;  /* tells apart the waits of one handle's threads */
    int32_t pid;     /* with live and nonce: whose entry this is */
    uint32_t ticket; /* arrival order; 0 = free entry */
    uint32_t kind;   /* SHL__WK_*: what it waits to acquire */
};

/* shl__waiter.kind */
#define SHL__WK_EXCL   0u
#define SHL__WK_SHARED 1u

/* The lease slot: what every lease needs, and what an exclusive acquire,
 * renew, release or write touches, in the order of their cache lines: the
 * mutex and the words read first (line 0), the name, the committed holder,
 * the intent and its bookkeeping, then the words beside them, the
 * counters, the value headers and the history (every operation writes one
 * entry of it: after the slot, just before the value buffers, it measured
 * faster on tables larger than the caches than before the slot; make bench,
 * scale rows). The value buffers follow.
 * What only shared holders and waiters use is in the pools' groups the
 * slot names (sh_ref, wq_ref): an exclusive acquire and release never
 * touch them. */
struct shl__slot {
    pthread_mutex_t lock;
    /* The committed value buffer: its header's byte offset from the
     * slot's own buffer's (0: that one; else the spare `vref` names), and
     * SHL__VCUR_RETIRED once the slot is retired. */
    _Atomic uint64_t vcur;
    _Atomic uint32_t seq;      /* seqlock: odd while a change is in flight */
    _Atomic uint32_t wake;     /* futex word: bumped on release and revoke */
    _Atomic uint32_t lock_gen; /* bumped by every locker: tells a waiter that
                                  the mutex's holder is at work (shm/mutex.c) */
    _Atomic int32_t locker;    /* pid inside the critical section, 0 if none */
    /* Line 1: what an acquire writes beside its intent, and the name. */
    _Atomic uint32_t intent_armed;
    uint32_t name_len;  /* immutable once published */
    uint32_t hist_next; /* next history entry to write */
    /* The spare value buffer the lease keeps (Values above): 0 none, else
     * its number in the value pool + 1. Under the slot mutex. */
    uint32_t vref;
    char name[SHL__NAME_MAX + 1];
    struct shl__holder cur;
    struct shl__holder intent;
    struct shl__intent_meta meta; /* bookkeeping of the armed intent */
    uint64_t freed_at;            /* table clock of the last release or revoke */
    uint32_t wq_tail;             /* last ticket handed out */
    _Atomic uint32_t waiters;     /* processes sleeping in a waiting acquire */
    uint64_t dead_token;          /* holder token whose death was first seen ... */
    uint64_t dead_seen;           /* ... at this table time (reclaim delay); under the lock */
    /* The pool groups this lease has taken (lib/kind_shm/pool.c; Pools above): 0 none, else the
     * group's number + 1. Reader record i is record i % SHL__SH_GROUP of
     * group sh_ref[i / SHL__SH_GROUP]; waiter entry i likewise in wq_ref.
     * Changed only under the slot mutex, inside a seq bracket. */
    uint32_t sh_ref[SHL__SH_REFS];
    uint32_t wq_ref[SHL__WQ_REFS];
    /* Shared holders (lib/kind_shm/shared.c). Bit i of `shared` says that reader
     * record i (sh_ref) is a shared holder (valid while unexpired); a clear bit
     * frees the entry, whatever the record says. `shared` is one word, so
     * releasing a shared holder is one store, and an exclusive acquire with
     * no shared holder pays one load (and no line of a pool). `tok_last`
     * is the highest token issued to a shared holder, and the lease's token
     * counter is max(cur.token, tok_last): cur.token is the token of the
     * last exclusive acquisition (the `gen` a shared holder is given), which
     * therefore leaves tok_last as it was. Both change only under the slot
     * mutex; several-field changes go through the intent (meta.shared,
     * meta.tok_last, meta.target). */
    _Atomic uint64_t shared;
    uint64_t tok_last;
    uint64_t count[SHL__C_COUNT];
    /* After the counters, so that those an acquire and a release bump share
     * the line of `shared` and `tok_last`. */
    _Atomic uint64_t heartbeat;   /* table clock of the renewer's last beat */
    _Atomic uint64_t hb_token;    /* token that renewer holds (0: no renewer) */
    _Atomic uint64_t hb_interval; /* that renewer's renewal interval, ns */
    /* hdr->history events follow (the lease's history: a ring, hist_next the
     * next entry to write; none when 0), then the lease's value buffer: a
     * struct shl__vhdr and hdr->value_size bytes, 8-byte aligned. */
};

/* A group of the reader pool: SHL__SH_GROUP shared holder records, with
 * their dead_token/dead_seen (like the slot's, for shared holder i, under
 * the slot's lock). `owner` is the number + 1 of the slot that took the
 * group, 0 while it is free: taken by one compare-and-swap from 0, given
 * back by one store of 0 (lib/kind_shm/pool.c; Pools above). Same locks and rules as the slot's
 * fields it extends while taken. */
struct shl__sh_group {
    alignas(SHL__CACHELINE) _Atomic uint32_t owner;
    uint32_t pad_;
    uint64_t dead_token[SHL__SH_GROUP];
    uint64_t dead_seen[SHL__SH_GROUP];
    struct shl__holder sh[SHL__SH_GROUP];
};

/* A group of the waiter pool: SHL__WQ_GROUP queue entries; `owner` as in
 * a reader group. */
struct shl__wq_group {
    alignas(SHL__CACHELINE) _Atomic uint32_t owner;
    uint32_t pad_;
    struct shl__waiter wq[SHL__WQ_GROUP];
};

struct shl__hdr {
    uint64_t magic;
    uint64_t format; /* shl__format_word(): version and ABI sizes */
    uint64_t seg_size;
    uint64_t index_off;
    uint64_t slots_off;
    uint64_t slot_stride;
    uint64_t timens;      /* the creator's time namespace (shl__timens_id()), 0: unknown */
    uint64_t token_floor; /* every token issued is above it (0: no floor) */
    uint32_t uid;         /* creator's effective uid */
    uint32_t mode;        /* permission bits chosen at creation */
    uint32_t clock;       /* SHL__CLOCK_* */
    uint32_t capacity;    /* lease slots */
    uint32_t value_size;  /* bytes per value buffer */
    uint32_t index_size;  /* buckets, a power of two >= 2 * capacity */
    uint32_t policy;      /* SHL__POL_* flags, fixed at creation */
    uint32_t reclaim_delay_ms;
    int32_t creator_pid;
    _Atomic uint32_t ready;     /* SHL__READY, stored last (release) */
    _Atomic uint32_t nslots;    /* slots handed out (table mutex) */
    _Atomic uint32_t add_armed; /* intent of a name being added */
    uint32_t add_slot;
    uint32_t add_bucket;
    _Atomic uint32_t index_fix; /* a repair of the index in progress (table mutex) */
    /* SHL__REMOVED once the table's name is being removed (shl_unlink),
     * stored with release before the unlink and never cleared; 0 before.
     * Every lease operation loads it once (lib/kind_shm/shm_kind.h), so every handle's
     * next call sees SHL_EREMOVED. In the header's second cache line, which
     * only the rare addition of a name writes (nslots). */
    _Atomic uint32_t removed;
    _Atomic uint64_t manual_now; /* MANUAL clock tables: the time */
    /* Bumped by every repair action (lib/kind_shm/repair.c). Nothing decides on it:
     * it tells someone reading the segment (a debugger, two dumps) that a
     * repair ran in between. */
    _Atomic uint64_t generation;
    _Atomic uint64_t alive_next; /* last alive id handed out (shm/alive.h) */
    /* The pools (written once at creation): sh_groups reader groups at
     * sh_pool_off, wq_groups waiter groups at wq_pool_off, after the slots;
     * `history` events per lease (0 .. SHL__HIST_LEN); vb_count spare
     * value buffers at vb_pool_off. */
    uint64_t sh_pool_off;
    uint64_t wq_pool_off;
    uint64_t vb_pool_off;
    uint32_t sh_groups;
    uint32_t wq_groups;
    uint32_t history;
    uint32_t vb_count;
    alignas(SHL__CACHELINE) pthread_mutex_t table_lock;
    /* Where the next search for a free group starts: hints only, written
     * without a lock, on a line of their own. */
    alignas(SHL__CACHELINE) _Atomic uint32_t sh_hint;
    _Atomic uint32_t wq_hint;
    _Atomic uint32_t vb_hint;
    /* How many times a group (a spare value buffer) that a lease kept was
     * taken back for another lease (lib/kind_shm/pool.c): counts for dump,
     * bumped without a lock. Zero in a table made before they were. */
    _Atomic uint64_t sh_taken_back;
    _Atomic uint64_t wq_taken_back;
    _Atomic uint64_t vb_taken_back;
};

/* A bucket that names no slot but must not stop a probe (a repaired stray
 * bucket): above every slot number, so a probe passes over it. */
#define SHL__BUCKET_DEAD UINT32_MAX

/* hdr->policy */
#define SHL__POL_RECLAIM_ORPHANS 1u

/* The format word: any change here means a build that cannot share segments
 * with this one, and the opener refuses with SHL_EVERSION. */
static inline uint64_t shl__format_word(void)
{
    return (uint64_t)SHL__LAYOUT_VERSION | ((uint64_t)sizeof(pthread_mutex_t) << 8) |
           ((uint64_t)sizeof(pid_t) << 16) | ((uint64_t)sizeof(struct shl__slot) << 24) |
           ((uint64_t)sizeof(struct shl__hdr) << 40) | ((uint64_t)SHL__NAME_MAX << 52);
}

static_assert(sizeof(struct shl__slot) < (1u << 16), "slot size must fit the format word");
static_assert(sizeof(struct shl__hdr) < (1u << 12), "header size must fit the format word");
static_assert(offsetof(struct shl__slot, lock) == 0, "slot mutex first");
static_assert(offsetof(struct shl__slot, locker) < SHL__CACHELINE &&
                  offsetof(struct shl__slot, vcur) < SHL__CACHELINE,
              "the words every operation touches share the mutex's line");
static_assert(offsetof(struct shl__slot, count[SHL__C_RELEASE]) / SHL__CACHELINE ==
                  offsetof(struct shl__slot, tok_last) / SHL__CACHELINE,
              "an acquire and a release bump counters on the line of the token words");
static_assert(sizeof(struct shl__sh_group) % SHL__CACHELINE == 0 &&
                  sizeof(struct shl__wq_group) % SHL__CACHELINE == 0,
              "pool groups keep to whole cache lines");
static_assert(SHL__SHARED_MAX % SHL__SH_GROUP == 0 && SHL__WAITQ_LEN % SHL__WQ_GROUP == 0,
              "whole groups per lease");
static_assert(sizeof(struct shl__event) % 8 == 0, "value buffers after the history stay aligned");
static_assert(sizeof(struct shl__slot) % 8 == 0, "value buffers must be 8-byte aligned");
static_assert(sizeof(struct shl__vhdr) == 16 && (SHL__VCUR_RETIRED & ~SHL__VCUR_FLAGS) == 0,
              "a value buffer's header keeps its values 8-byte aligned, and vcur its flags");
static_assert(sizeof(uint64_t) == 8 && sizeof(int32_t) == sizeof(pid_t), "sizes");
static_assert(offsetof(struct shl__hdr, removed) / SHL__CACHELINE ==
                  offsetof(struct shl__hdr, nslots) / SHL__CACHELINE,
              "the removed mark shares the read-mostly line of nslots");

static inline uint64_t shl__align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static inline struct shl__slot *shl__slot_at(const struct shl__hdr *h, uint32_t i)
{
    return (struct shl__slot *)((char *)h + h->slots_off + (uint64_t)i * h->slot_stride);
}

/* The lease's history: hdr->history events just after the slot. */
static inline struct shl__event *shl__slot_hist(const struct shl__slot *s)
{
    return (struct shl__event *)(uintptr_t)(s + 1);
}

/* The bytes of a value buffer, its header and value, in a table of this
 * value size: a slot's own and each of the value pool's. */
static inline uint64_t shl__vbuf_size(uint32_t value_size)
{
    return sizeof(struct shl__vhdr) + shl__align_up(value_size, 8);
}

/* Where a slot's own value buffer starts, from the slot, in a table that
 * keeps `history` events per lease. */
static inline uint64_t shl__vbuf_home(uint32_t history)
{
    return sizeof(struct shl__slot) + (uint64_t)history * sizeof(struct shl__event);
}

/* Group g (from 0) of the reader pool, and of the waiter pool. */
static inline struct shl__sh_group *shl__sh_group_at(const struct shl__hdr *h, uint32_t g)
{
    return (struct shl__sh_group *)((char *)h + h->sh_pool_off +
                                    (uint64_t)g * sizeof(struct shl__sh_group));
}

static inline struct shl__wq_group *shl__wq_group_at(const struct shl__hdr *h, uint32_t g)
{
    return (struct shl__wq_group *)((char *)h + h->wq_pool_off +
                                    (uint64_t)g * sizeof(struct shl__wq_group));
}

static inline _Atomic uint32_t *shl__index(const struct shl__hdr *h)
{
    return (_Atomic uint32_t *)((char *)h + h->index_off);
}

#endif
