/*
 * shmlease/admin.h - administration and inspection: revoke, the history and
 * counters, detail snapshots, check and repair. Part of the public header:
 * <shmlease.h> includes it, inside its extern "C" block and after its
 * attribute macros and the groups before this one. A program includes
 * <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/admin.h>"
#define SHMLEASE_ADMIN_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_ADMIN_H
#define SHMLEASE_ADMIN_H

/** @defgroup admin Administration and inspection
 *
 * Revoking a lease, reading a table's whole state (for `shmlease ls`, `dump`,
 * `watch`), checking its invariants and repairing it. None of these is on a
 * lease operation's hot path. Readers never wait for long on a lease whose
 * lock is held by a stopped process: they report the lock's holder instead.
 */

/* Ends the current holder's validity at once: its renew, release, write,
 * update and guard return SHL_ELOST from now on. The lease becomes
 * SHL_STATE_REVOKED and may be acquired at once; the next acquire gets the
 * next token (the token is never lowered). Waiters are woken (the slot's wake
 * word is bumped).
 * SHL_ENOENT: no such lease, or it is not held now (free, expired, already
 * revoked): nothing changed. SHL_EINVAL, SHL_EBROKEN. */
SHL_API int shl_revoke(shl_table *t, const char *lease);

/* Kinds of history events (shl_event_info.op). */
#define SHL_OP_ACQUIRE  1 /* free, released or revoked lease taken */
#define SHL_OP_TAKEOVER 2 /* expired lease taken by the next holder */
#define SHL_OP_RENEW    3
#define SHL_OP_RELEASE  4
#define SHL_OP_REVOKE   5
#define SHL_OP_RECLAIM  6 /* orphaned lease taken before its expiry */
#define SHL_OP_RECOVER  7 /* a process died inside the lease's lock; repaired */
#define SHL_OP_REJECT   8 /* renew/release/write/guard refused (why: a counter) */
#define SHL_OP_WRITE    9
#define SHL_OP_SHARED   10 /* shared acquisition (a reclaiming one is SHL_OP_RECLAIM) */
#define SHL_OP_END      11 /* etcd tables: the holder record was deleted (see below) */

/* Counters (shl_lease_detail.counters[]). */
#define SHL_COUNTER_ACQUIRE     0 /* successful acquisitions, takeovers included */
#define SHL_COUNTER_RENEW       1
#define SHL_COUNTER_RELEASE     2
#define SHL_COUNTER_EXPIRE      3 /* acquisitions that took over an expired holder */
#define SHL_COUNTER_REVOKE      4
#define SHL_COUNTER_RECLAIM     5
#define SHL_COUNTER_RECOVER     6
#define SHL_COUNTER_WRITE       7
#define SHL_COUNTER_BUSY        8  /* acquire refused: held by another */
#define SHL_COUNTER_REJ_EXPIRED 9  /* rejected: expired, released or revoked */
#define SHL_COUNTER_REJ_STALE   10 /* rejected: right owner, older token */
#define SHL_COUNTER_REJ_OWNER   11 /* rejected: wrong owner */
#define SHL_COUNTER_SHARED      12 /* successful shared acquisitions */
#define SHL_COUNTER_COUNT       13

#define SHL_HISTORY_MAX 8  /* most events kept per lease (shl_options.history) */
#define SHL_PREVIEW_MAX 32 /* value bytes in a detail snapshot */

/* "acquire", "takeover", ...; "?" for an unknown kind. */
SHL_API const char *shl_op_name(int op);
/* "acquire", "rej_stale", ...; "?" for an unknown counter. */
SHL_API const char *shl_counter_name(int counter);
/* "FREE", "HELD", "EXPIRED", "REVOKED", "ORPHANED"; "?" otherwise. */
SHL_API const char *shl_state_name(int state);

typedef struct shl_event_info {
    uint64_t time_ns;              /* table clock */
    uint64_t token;                /* token involved (a rejection: the one presented) */
    int32_t pid;                   /* process that made the event */
    int op;                        /* SHL_OP_* */
    int why;                       /* SHL_OP_REJECT: the SHL_COUNTER_REJ_* reason */
    char owner[SHL_OWNER_MAX + 1]; /* the whole owner (history entries keep it) */
    int64_t revision;              /* etcd tables: the etcd revision of the event; else 0 */
} shl_event_info;

/* Lock states (shl_lease_detail.lock). */
#define SHL_LOCK_FREE   0
#define SHL_LOCK_HELD   1 /* held by lock_pid (a live process, maybe stopped) */
#define SHL_LOCK_DEAD   2 /* its holder died; the next operation repairs the lease */
#define SHL_LOCK_BROKEN 3 /* unrecoverable: every operation fails until repair */

/* A shared holder in a detail snapshot. */
typedef struct shl_shared_holder {
    char owner[SHL_OWNER_MAX + 1];
    uint64_t token;
    uint64_t expiry_ns;
    uint64_t since_ns;
    uint64_t remaining_ns; /* expiry - now when HELD or ORPHANED, else 0 */
    int32_t pid;
    int state; /* SHL_STATE_HELD, _EXPIRED or _ORPHANED */
} shl_shared_holder;

typedef struct shl_lease_detail {
    char name[SHL_NAME_MAX + 1];
    uint32_t slot;       /* slot number, 0 .. used - 1 */
    shl_lease_info info; /* as shl_stat() */
    int stable;          /* 0: a change was in flight and the lock's holder did not
                            finish it in time; fields may mix before and after */
    int lock;            /* SHL_LOCK_* */
    int32_t lock_pid;    /* who holds the lock (or died holding it), 0 if none */
    int intent_armed;    /* a multi-field change is in flight or awaits recovery */
    int intent_op;       /* its SHL_OP_* */
    uint64_t intent_token;
    uint64_t heartbeat_ns; /* table clock of the last auto-renew beat, 0 if none */
    int renewer_stalled;   /* the lease is held and valid, but its renewer has
                              missed two beats (see shl_heartbeat_get()) */
    uint64_t dead_seen_ns; /* table clock at which the holder's death was first
                              seen by an acquire (reclaim delay), 0 if not */
    uint64_t counters[SHL_COUNTER_COUNT];
    uint32_t nevents;                       /* valid entries in events[] */
    uint64_t events_total;                  /* events ever recorded */
    shl_event_info events[SHL_HISTORY_MAX]; /* oldest first */
    uint32_t preview_len;                   /* min(value_len, SHL_PREVIEW_MAX) */
    unsigned char preview[SHL_PREVIEW_MAX];
    uint64_t token_last; /* the lease's token counter: its last token of either kind */
    uint32_t nshared;    /* entries in shared[] */
    /* The shared holders not yet released or ended (state HELD, EXPIRED or
     * ORPHANED), in entry order. info describes the exclusive holder. */
    shl_shared_holder shared[SHL_SHARED_MAX];
    int history_partial; /* etcd tables: 1 when older events may exist that the
                            history could not reach (compaction, the bound) */
} shl_lease_detail;

/* A detailed snapshot of the lease in slot `slot` (0 .. shl_table_info.used -
 * 1), taken without blocking on the lease's lock for more than a few
 * milliseconds. SHL_ENOENT: no such slot. SHL_EINVAL. */
SHL_API int shl_inspect_slot(shl_table *t, uint32_t slot, shl_lease_detail *d);

/* The same, by lease name. SHL_ENOENT when the lease was never used.
 *
 * On an etcd table there is no lock, intent, counter, pid or acquisition
 * time (since_ns) (all 0); shared[] lists the shared holders whose keys
 * exist (HELD, with the time etcd gives their etcd leases, as shl_stat()
 * for the holder), token_last is the token record, and the
 * history is read from etcd's revisions of the lease's holder record, as far
 * back as 4096 store revisions and as compaction
 * allows (an older start is not an error: history_partial is 1). etcd keeps no
 * time per revision: time_ns is 0 and revision holds the event's etcd
 * revision. The ops: a put that creates the holder record is SHL_OP_ACQUIRE
 * (etcd cannot tell a takeover of an expired holder from an acquisition after
 * a release or revoke, so none is SHL_OP_TAKEOVER); a later put of the same
 * record is SHL_OP_RENEW (a renew with another ttl moves the record to a new
 * etcd lease; a renew with the same ttl is a keep-alive, which writes nothing
 * and leaves no event); its deletion is SHL_OP_END, with the token and owner
 * of the hold it ended (release, revoke and expiry all delete the record
 * alike). events_total counts the events read. */
SHL_API int shl_inspect(shl_table *t, const char *lease, shl_lease_detail *d);

/* Calls fn(arg, d) for every lease in slot order; stops when fn returns
 * non-zero and returns that value. SHL_OK after the last lease. Within one
 * call, the kernel's answer about a holder's handle (HELD or ORPHANED) is
 * reused for 10 ms at most: a holder that dies meanwhile is shown HELD for
 * that long. */
SHL_API int shl_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d), void *arg);

/* Verifies every invariant of the table: header and format word, mutex
 * states, intent records, token and expiry consistency, the hash index,
 * history sanity, the pools (a group taken by a lease that does not name
 * it is a leak; a lease naming a group it does not own, or a shared
 * holder without a group). Each problem is passed, as one line of text without a
 * newline, to report(arg, problem) (report may be NULL). Reading only.
 * SHL_OK: clean. SHL_ECORRUPT: at least one problem was reported.
 * SHL_EINVAL, SHL_EFORK. */
SHL_API int shl_check(shl_table *t, void (*report)(void *arg, const char *problem), void *arg);

/* The same checks over a copy of a segment's bytes (size bytes at image, any
 * alignment), for segments that do not open and for fuzzing. Never trusts a
 * field it has not checked; never crashes on garbage. The file-owner check is
 * left out. SHL_OK or SHL_ECORRUPT (SHL_EVERSION when only the format word
 * differs), SHL_ENOMEM, SHL_EINVAL. */
SHL_API int shl_check_image(const void *image, size_t size,
                            void (*report)(void *arg, const char *problem), void *arg);

/* Checks the segment file `name` without opening it as a table: for a table
 * that shl_open() refuses. Reads (never maps) its header, then at most the
 * size that header describes, into private memory, and runs
 * shl_check_image() on that; a file longer than its header describes is
 * reported as such (and never copied whole), and a file truncated while it
 * is read is checked as what was read. SHL_ENOENT, SHL_EPERM (not a regular
 * file: a FIFO there is refused, not waited on), SHL_ENOMEM, SHL_ESYS,
 * SHL_ECORRUPT for a longer file, or shl_check_image()'s result. */
SHL_API int shl_check_name(const char *name, void (*report)(void *arg, const char *problem),
                           void *arg);

#define SHL_REPAIR_DRY_RUN 1u /* report what would be done, change nothing */

/* Brings the table back to a consistent state: finishes armed intents
 * (roll forward), recovers locks whose holder died, reinitialises
 * unrecoverable locks (after finishing their lease's intent, while nobody can
 * enter), mends a damaged index in place from the slots' names, raises a
 * token that is below a value's token, and, when the table's policy reclaims
 * orphans, ends leases whose holder is proven dead (after the reclaim delay).
 * Safe while the table is in use: the index is judged and mended under the
 * table lock, and lock-free lookups never see a bucket cleared. A name found
 * in two slots stays with the slot that issued the higher token (of either
 * kind, exclusive or shared), so no token given to a holder of either slot
 * is issued again; the other slot is retired: its holders of both kinds
 * end (as by shl_revoke()), its token is kept, lookups never find it again,
 * and bound leases on it follow the name. shl_check() reports a retired
 * slot that still has shared holders (left by an earlier version), and
 * repair ends them. A pool group a lease took and does not name (leaked)
 * goes back to its pool under that lease's lock, as does one it names but
 * does not use; a lease's ref to a free group takes it again, one to
 * another lease's group is forgotten with its records. Never lowers a
 * token. A repairer that dies
 * mending the index leaves the mend armed; the table's next locker (or the
 * next repair) finishes it. One repair runs at a time per table (a lock on
 * the segment's file); another waits for it up to 10 s. Each action taken (or,
 * with SHL_REPAIR_DRY_RUN, each that would be taken) is passed to report(arg,
 * action); damage it cannot fix is passed too, prefixed "cannot repair: ".
 * SHL_OK: nothing left to repair (or, dry run: nothing to do). SHL_ECORRUPT:
 * something could not be repaired (or, dry run: something would be done).
 * SHL_EREMOVED: the table was removed (before or while the repair ran).
 * SHL_ETIMEDOUT (another repair ran for over 10 s), SHL_EINVAL, SHL_EFORK,
 * SHL_ESYS. */
SHL_API int shl_repair(shl_table *t, unsigned flags, void (*report)(void *arg, const char *action),
                       void *arg);

#endif
