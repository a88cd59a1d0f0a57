/*
 * tools/stress.h - what the parts of `shmlease stress` share.
 *
 * A campaign is one controller process (chaos, checker, reporting) and N
 * forked workers. They share one anonymous MAP_SHARED region, created before
 * the first fork and separate from the lease table, that holds:
 *
 *  - per lease, an append-only evidence log: a ring of records written only
 *    inside shl_guard()'s callback, i.e. under the lease's lock after the
 *    owner/token/expiry check passed. Log order is therefore lock order.
 *    A record is filled, sealed with a checksum word, and only then made
 *    visible by one release store of the lease's append count `n`. A worker
 *    killed half-way leaves `n` unchanged: the next writer overwrites the
 *    partial record, and no reader ever sees it.
 *  - per worker (slot), counters and the acknowledgement bitmap: bit `seq` is
 *    set after shl_guard() returned SHL_OK for the write numbered `seq`. It
 *    survives the worker's death, so the checker can prove that every
 *    acknowledged write is in the log.
 *
 * Only the controller consumes logs (advancing `consumed`); a writer that
 * finds its lease's ring full records an overflow instead of overwriting.
 *
 * Readers also take shared leases and read under shl_guard_shared(): each
 * guarded read logs (reader token, gen, the token of the lease's newest
 * logged write) into the reader's own ring, from inside the callback, so
 * atomically with the check. While a reader is valid no exclusive holder can
 * acquire, so every read of one hold must see the same write, by a token
 * not newer than the reader's gen; the checker verifies both.
 *
 * Besides, every holder logs the interval in which it surely held its lease
 * (struct st_ivlog below), checked for two holders at once without any
 * write, and the controller stops workers inside a lease's slot lock
 * (struct st_secmark), after which an accepted call is checked against the
 * time the stopped worker let go (stress_interval.c, stress_section.c).
 *
 * On an etcd table there is no lock to log under (shl_guard() is refused
 * there: no callback can be atomic with a remote check). The evidence log is
 * then etcd's own: every accepted write puts the lease's value record in one
 * transaction, so the value records' history (read by a watch from the
 * campaign's first revision, stress_etcd.c) is the writes in commit order,
 * and the same checker consumes it. A write is acknowledged after
 * shl_write() (or shl_update(), the renewer, a bound lease) returned SHL_OK.
 * Readers' shared holds have no guarded read there either (shl_guard_shared()
 * is refused): a reader logs the shl_read()s it made while holding shared
 * only when a renew after them succeeded, which proves that the hold lasted
 * through them (stress_reader.c says why), and the checker applies the same
 * two checks to those records.
 * What has no meaning on etcd is left out and said in the summary: repair
 * and live check of segment internals, deaths inside the lock (there is no
 * lock: kills land while a transaction is in flight instead), and the
 * late-accept test against the worker's clock (etcd's lease clock is the
 * leader's; a lease lives until the leader's lessor revokes it, and a new
 * leader extends every lease by its ttl).
 */
#ifndef SHL_TOOLS_STRESS_H
#define SHL_TOOLS_STRESS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "shmlease.h"

struct etcd_cluster;

#define ST_LOG_CAP  (UINT64_C(1) << 16) /* records per lease ring */
#define ST_SEQ_BITS (UINT64_C(1) << 27) /* writes per worker slot, at most */
/* The lease value: as large as the table allows, up to 4 KiB
 * (SHL_UPDATE_MAX; a table the campaign makes has that), so that copying it
 * takes long enough for a reader to land in the middle of a write that is
 * not double-buffered; at least 64 bytes. */
#define ST_VALUE_WORDS     (SHL_UPDATE_MAX / 8)
#define ST_VALUE_MIN_WORDS 8
#define ST_LEASE_NAME      32
#define ST_WORKERS_MAX     256
#define ST_LAG_NS          UINT64_C(10000000)
#define ST_LEASES_MAX      1024
#define ST_GONE_RING       4 /* deleted holder records remembered per lease */

struct st_config {
    const char *table; /* table name (made up when not given) */
    int own_table;     /* created by the campaign, removed afterwards */
    unsigned workers;
    unsigned leases;
    double seconds;
    uint64_t ttl_ns;
    double kill_rate;  /* kills per second, 0 = off */
    double pause_rate; /* pauses per second, 0 = off */
    uint64_t seed;
    int json;
    unsigned readers;        /* processes checking values while writes happen */
    uint32_t max_shared;     /* the table's reader pool (SHL_POOL_DEFAULT: its default) */
    uint32_t max_waiters;    /* the table's waiter pool (SHL_POOL_DEFAULT: its default) */
    uint32_t spare_values;   /* the table's value pool (SHL_POOL_DEFAULT: its default) */
    double revoke_rate;      /* revokes per second, 0 = off */
    double repair_rate;      /* shl_repair() + shl_check() per second, 0 = off */
    const char *token_state; /* create the table with this token floor file */
    int fail_fast;           /* end the campaign at the first violation */
    /* An etcd table (etcd:// or etcds://): see "On an etcd table" above. */
    int etcd;
    unsigned etcd_cluster;        /* members of a throwaway cluster the tool starts, or 0 */
    int member_chaos;             /* kill, stop and restart members (needs etcd_cluster) */
    int admin_chaos;              /* etcd: delete holder records under their holders */
    struct etcd_cluster *cluster; /* the throwaway cluster, or NULL */
    /* --remove-rate: the table's name removed during the campaign (see
     * "Removals" below); the options everyone opens it again with (SHL_CREATE,
     * the token state file), and the file a plain unlink(2) removes. */
    double remove_rate; /* removals per second, 0 = off */
    shl_options reopen;
    char path[SHL_TABLE_NAME_MAX + 16];
};

/* One evidence record (40 bytes). `seal` is written last. */
struct st_rec {
    uint64_t token;
    uint64_t seq;
    uint32_t lease;
    uint32_t worker;
    uint32_t incarnation;
    uint32_t gen; /* the table generation it was written on */
    uint64_t seal;
};

/* One guarded read by a shared holder (48 bytes). `seal` is written last. */
struct st_rrec {
    uint64_t token; /* the reader's shared token */
    uint64_t gen;   /* the last exclusive token before its acquisition */
    uint64_t seen;  /* token of the lease's newest logged write, at the read */
    uint64_t hold;  /* the reader's hold number (tells two holds apart) */
    uint32_t lease;
    uint32_t reader;
    uint64_t seal;
};

#define ST_RLOG_CAP (UINT64_C(1) << 15) /* guarded reads per reader ring */

struct st_rlog {
    _Atomic uint64_t n;        /* records published (by the reader) */
    _Atomic uint64_t consumed; /* records the checker has read */
    _Atomic uint64_t overflow; /* reads that found the ring full */
    uint64_t pad_[5];
    struct st_rrec rec[ST_RLOG_CAP];
};

struct st_log {
    _Atomic uint64_t n;        /* records published; under the lease's lock */
    _Atomic uint64_t consumed; /* records the checker has read */
    _Atomic uint64_t overflow; /* writes that found the ring full */
    uint64_t pad_[5];
    struct st_rec rec[ST_LOG_CAP];
};

/*
 * Interval exclusion (stress_interval.c). Each holder logs the interval in
 * which it surely held its lease, by its own CLOCK_MONOTONIC reads around
 * the calls: from the return of the acquire to (its clock just before the
 * acquire call) + ttl, extended by each successful renew to (its clock just
 * before that renew) + ttl, and ended at the release call. A revoke that may
 * have landed ends it where the holder last read the lease's revoke epoch,
 * a death where the controller sent the kill (or the worker its own). The
 * library's expiry is never before that end, so two exclusive intervals of
 * one lease that overlap, or an exclusive and a shared one, had two holders
 * at once, whether or not either wrote anything.
 */
enum st_iv_kind { ST_IV_EXCL = 1, ST_IV_SHARED = 2 };

struct st_iv {
    uint64_t start, end; /* st_now_ns(); empty when end <= start */
    uint64_t token;
    uint32_t lease, kind; /* enum st_iv_kind */
    uint64_t rmark;       /* the lease's revoke epoch the holder last read ... */
    uint64_t rmark_at;    /* ... at this time (before the call it preceded) */
    uint32_t pauses;      /* the holder's pause count (st_worker.pauses) at the start */
    uint32_t stopped;     /* set at the end: the holder was stopped during the hold */
    uint32_t gen;         /* the table generation it was held on */
    uint32_t pad_;
};

#define ST_IV_CAP (UINT64_C(1) << 12) /* intervals per process ring */

/* One process's intervals: written by that process, or by the controller
 * after reaping it (closing the hold it died in). */
struct st_ivlog {
    _Atomic uint64_t n;        /* intervals published */
    _Atomic uint64_t consumed; /* read by the checker */
    _Atomic uint64_t overflow; /* intervals that found the ring full */
    _Atomic uint64_t lb;       /* no interval still to come starts before this (0: unknown) */
    _Atomic uint64_t cut;      /* the worker's own time of death (killed on order), 0 if none */
    _Atomic uint32_t open;     /* `cur` is a hold in progress */
    uint32_t pad_;
    uint64_t pad2_[2];
    struct st_iv cur;
    struct st_iv rec[ST_IV_CAP];
};

/*
 * Removals (--remove-rate). The controller removes the table's name now and
 * then, by shl_unlink() (which marks it) or by a plain unlink(2) of its file
 * (as systemd RemoveIPC or rm would). Table generation g is the table that
 * the name named between removals g - 1 and g; each process knows the
 * generation of its handle (it opened with `removing` clear and `gen`
 * unchanged around the open), and the processes that noticed the removal
 * open the name again, creating the next table with the campaign's token
 * state file.
 *
 * The evidence rings are shared by the generations, which do not share a
 * lock: a process appends only while its handle's generation is current,
 * with its `logging` flag raised, and the controller removes only after it
 * raised `removing` and saw no flag raised (each side stores its word then
 * loads the other's, sequentially consistent): so no two generations append
 * to a ring at once, and a ring holds the generations in order.
 */
struct st_gen {
    _Atomic uint64_t rm_start; /* st_now_ns() before its removal, 0 while it stands */
    _Atomic uint64_t rm_end;   /* after the removal returned (0: not yet) */
    _Atomic uint32_t plain;    /* removed by unlink(2), not by shl_unlink() */
    uint32_t pad_;
};

/* Per generation and lease: the lowest and highest token granted on it. */
struct st_gentok {
    _Atomic uint64_t lo, hi;
};

/* A removal of the plain kind is noticed within the renew interval (ttl / 3,
 * the renewer's default); an accepted call that started this much after
 * that is a violation (a margin: the workers' own look makes the bound
 * exact, see stress_worker.c). */
#define ST_RM_SLACK_NS UINT64_C(2000000)

/* --admin-chaos on etcd: table prefixes deleted (and the table restored)
 * per second, and how many the campaign remembers. */
#define ST_WIPE_RATE   0.25
#define ST_WIPES_MAX   256
#define ST_WIPE_LEASES 100                 /* a restore is one txn: etcd takes 128 ops */
#define ST_WIPE_GAP_NS UINT64_C(300000000) /* from the delete to the restore */

/* Whether the table may be removed under the campaign: --remove-rate, or
 * --admin-chaos on etcd (its prefix deleted). */
#define st_removals(c) ((c)->remove_rate > 0 || ((c)->etcd && (c)->admin_chaos))

/* How long a waiter's place lasts on etcd when its keep-alives stop
 * (shmlease(3): a dead waiter's place is gone within 3 s). */
#define ST_WAITER_TTL_NS UINT64_C(3000000000)

/* What a worker is doing, for the chaos controller. */
enum st_phase {
    ST_PH_IDLE = 0,
    ST_PH_ACQUIRING,
    ST_PH_HOLDING, /* holds a lease, between operations */
    ST_PH_GUARD,   /* inside the guarded callback (the lease's lock held) */
    ST_PH_WRITE,   /* inside shl_write() */
    ST_PH_OTHER,   /* inside renew/release/read */
    ST_PH_DONE
};

/* Counters a worker keeps in shared memory (they survive its death). */
enum st_wc {
    ST_C_OPS = 0, /* library calls */
    ST_C_ACQUIRED,
    ST_C_BUSY, /* acquire refused: held by another */
    ST_C_RENEWED,
    ST_C_RELEASED,
    ST_C_EXPIRED,        /* holds that ended by expiry (let expire, or lost) */
    ST_C_ACKED,          /* guarded writes acknowledged */
    ST_C_VALUES,         /* value writes accepted */
    ST_C_STALE,          /* guarded/value writes refused with SHL_ELOST */
    ST_C_STALE_PAUSED,   /* ... by a holder that had been paused */
    ST_C_WAITS,          /* acquisitions through shl_acquire_wait() */
    ST_C_RENEWERS,       /* holds kept by a renewer thread */
    ST_C_BOUND,          /* holds through a bound lease (shl_lease_*) */
    ST_C_UPDATES,        /* values written by shl_update() */
    ST_C_STALE_RETRY,    /* the previous token presented again, and refused */
    ST_C_REVOKED,        /* refusals explained by a revoke */
    ST_C_LATE_ACCEPT,    /* violation: accepted after the holder's expiry */
    ST_C_BAD_VALUE,      /* violation: value torn or from a newer token */
    ST_C_STALE_ACCEPT,   /* violation: the previous token was accepted */
    ST_C_LOST_EXCL,      /* violation: refused while surely still the holder */
    ST_C_TOKEN_REUSE,    /* violation: a token granted twice, or below the start */
    ST_C_ERRORS,         /* unexpected return codes */
    ST_C_UNAVAIL,        /* etcd: SHL_EUNAVAIL (no answer in time; may have happened) */
    ST_C_UNAVAIL_W,      /* ... of which writes (may be in the log, unacknowledged) */
    ST_C_EARLY_REVOKE,   /* etcd: refused early, a stopped leader having just resumed */
    ST_C_LATE_LOCKED,    /* violation: accepted, judged after a stopped locker let go, on a lease
                            that had surely expired by then (stress_section.c) */
    ST_C_ASLEEP,         /* violation: a waiter slept on a lease freed while it waited */
    ST_C_REMOVED_SEEN,   /* removals noticed: SHL_EREMOVED, a renewer's loss, shl_table_check */
    ST_C_REOPENS,        /* the table opened again after a removal */
    ST_C_REMOVED_ACCEPT, /* violation: accepted on a removed table, started after the
                            removal (a plain unlink: after it and one renew interval) */
    ST_C_TTL_RENEWED,    /* etcd: renewals that changed the ttl (a new etcd lease) */
    ST_C_GONE_ACCEPT,    /* violation: accepted, started after --admin-chaos deleted the
                            holder record of that token (st_gone_late()) */
    ST_C_CORRUPT_SEEN,   /* SHL_ECORRUPT while the admin had the token record deleted */
    ST_C_COUNT
};

/* Where a worker told to stop inside a guarded section stops: before or
 * after its callback reads the lease's last pause (stress_worker.c). */
enum { ST_STOP_NONE, ST_STOP_AFTER_READ, ST_STOP_BEFORE_READ };

struct st_worker {
    _Atomic int32_t pid; /* 0 when no process runs in the slot */
    _Atomic uint32_t incarnation;
    _Atomic uint32_t phase;         /* enum st_phase */
    _Atomic uint32_t holding;       /* lease index + 1, 0 when none */
    _Atomic uint32_t pauses;        /* bumped by the controller before SIGSTOP */
    _Atomic uint32_t die_in_guard;  /* controller's order: die inside the lock */
    _Atomic uint32_t stop_in_guard; /* controller's order: SIGSTOP itself inside the lock
                                       (ST_STOP_*) */
    _Atomic int32_t last_error;
    _Atomic uint32_t waiting; /* inside shl_acquire_wait() (queued on etcd): lease + 1 */
    uint32_t pad_;
    _Atomic uint64_t next_seq; /* next write number, across incarnations */
    _Atomic uint64_t acked_hi; /* all acknowledged seqs are below this */
    _Atomic uint64_t count[ST_C_COUNT];
};

/* A worker stopped inside a lease's slot lock (stress_section.c) held it
 * from `begin` to `end` (st_now_ns, both seen by the controller, `end` just
 * before its SIGCONT); `gen` is odd from the stop until `end` is stored. */
struct st_secmark {
    _Atomic uint64_t gen;
    _Atomic uint64_t begin;
    _Atomic uint64_t end;
    _Atomic uint32_t table; /* the table generation of that lock (removals) */
    _Atomic int32_t pid;    /* the worker stopped in there */
};

struct st_shared {
    _Atomic int stop;
    uint32_t workers;
    uint32_t leases;
    uint64_t ttl_ns;
    uint64_t seed;
    uint64_t log_off;     /* offset of the first struct st_log */
    uint64_t acked_off;   /* offset of the ack bitmaps (ST_SEQ_BITS / 8 each) */
    uint64_t granted_off; /* per lease: bit (token - token_base) set when granted */
    uint64_t rlog_off;    /* offset of the readers' struct st_rlog rings */
    uint32_t readers;
    uint32_t value_words; /* words of a value, ST_VALUE_MIN_WORDS .. ST_VALUE_WORDS */
    uint64_t size;
    /* Bumped by the controller before and after each revoke: odd while one
     * may be landing. A holder whose refusal comes with a changed (or odd)
     * epoch since it acquired was revoked, not robbed. */
    _Atomic uint64_t revoke_epoch[ST_LEASES_MAX];
    uint64_t token_base[ST_LEASES_MAX]; /* each lease's token when the campaign began */
    _Atomic uint64_t reads;             /* values read by the reader processes */
    _Atomic uint64_t torn;              /* violation: a reader saw a torn or older value */
    _Atomic uint64_t reader_errors;
    _Atomic uint64_t shared_holds; /* shared leases the readers took */
    _Atomic uint64_t shared_busy;  /* shared acquires refused (held, or a writer queued) */
    _Atomic uint64_t shared_full;  /* shared acquires refused: the reader pool was full */
    _Atomic uint64_t waiters_full; /* waits refused: the waiter pool was full */
    _Atomic uint64_t values_full;  /* value writes refused: the value pool was full */
    /* The table's reader pool holds a group for every reader on every
     * lease (st_reader_pool_need()): it never runs full, and a reader that
     * finds it full has met a leak, an error. */
    int pool_fits;
    int waiter_pool_fits; /* the waiter pool holds every worker's wait at once */
    int value_pool_fits;  /* the value pool keeps a spare for every lease */
    /* etcd: shared holds whose reads a renew confirmed (and so were logged),
     * and holds a renew found lost (expired or revoked: nothing checked). */
    _Atomic uint64_t shared_checked;
    _Atomic uint64_t shared_lost;
    /* Kept by the admin process (revoke, repair, check), which may block on
     * a lock that a stopped worker holds: the controller never does. */
    _Atomic uint64_t revokes;
    _Atomic uint64_t repairs;
    _Atomic uint64_t checks;
    _Atomic uint64_t check_problems; /* violation: what those checks reported */
    _Atomic uint64_t admin_errors;
    _Atomic uint64_t deaths;  /* workers reaped, for the admin's check */
    _Atomic uint64_t unavail; /* etcd: readers' and admin's calls that got SHL_EUNAVAIL */
    /* etcd, --member-chaos: when (st_now_ns) a SIGSTOPped member was last
     * SIGCONTed. A leader stopped past its leases' ttls revokes them when it
     * resumes, before it learns that it was deposed (etcd 3.4 before 3.4.26,
     * etcd-io/etcd#15247): holders lose their leases early, which takes
     * nothing from exclusion (the holder is refused, nobody else is let in
     * early) but would read as "refused while surely the holder". */
    _Atomic uint64_t member_resumed_ns;
    /* Per lease: the last pause inside its slot lock (stress_section.c). */
    struct st_secmark section[ST_LEASES_MAX];
    /* Per lease: the last pause whose stop the kernel made late, found at
     * its resume inside the lease's lock or queued for the lease
     * (stress_chaos.c). Its begin is when the SIGSTOP was sent, earlier than
     * the stop: it only excuses a waiter that was held up, and never tells
     * when a call got the lock (section[] does). */
    struct st_secmark held_up[ST_LEASES_MAX];
    uint64_t iv_off; /* offset of the interval rings: workers', then readers' */
    /* The controller's last tick that came ST_LAG_NS or more late (st_now_ns,
     * from the tick before to it): the scheduler was holding runnable
     * processes back then, so a waiter's late start is excused. */
    _Atomic uint64_t lag_from, lag_to;
    /* Removals (see "Removals" above). */
    uint64_t renew_ns;                    /* the renew interval: ttl / 3 */
    uint32_t gens_cap;                    /* generations the arrays hold; no removal beyond */
    _Atomic uint32_t gen;                 /* the current generation */
    _Atomic uint32_t removing;            /* the controller is about to remove it */
    uint64_t gens_off;                    /* offset of struct st_gen[gens_cap] */
    uint64_t gentok_off;                  /* offset of struct st_gentok[gens_cap][leases] */
    _Atomic uint64_t removals;            /* by shl_unlink() */
    _Atomic uint64_t removals_plain;      /* by unlink(2) */
    _Atomic uint64_t reopens_other;       /* readers, the admin, the inspection handle */
    _Atomic uint64_t token_below_removed; /* violation: see st_gentok_check() */
    /* etcd, --admin-chaos: per lease, the last ST_GONE_RING holder records
     * the admin deleted, each its token and when the delete was
     * acknowledged (st_now_ns; 0 while the entry is being written). */
    struct st_gone {
        _Atomic uint64_t token;
        _Atomic uint64_t at;
    } gone[ST_LEASES_MAX][ST_GONE_RING];
    _Atomic uint32_t gone_next[ST_LEASES_MAX];
    _Atomic uint64_t admin_deletes; /* holder records deleted */
    /* Per lease: odd while the admin has its token record deleted (from
     * before the delete until its restore was acknowledged). */
    _Atomic uint64_t token_epoch[ST_LEASES_MAX];
    _Atomic uint64_t token_deletes; /* token records deleted (and restored) */
    _Atomic uint64_t corrupt_seen;  /* SHL_ECORRUPT while one was deleted (expected) */
    /* --admin-chaos on etcd: the table's whole prefix deleted and the table
     * restored (stress_admin_etcd.c), a removal in the generations' sense:
     * the revisions of the deletes, for the history's check. */
    _Atomic uint64_t wipes;
    _Atomic uint64_t wipe_strays; /* violation: keys put under a deleted table's prefix */
    _Atomic int64_t wipe_rev[ST_WIPES_MAX];
    _Atomic int64_t wipe_vrev;                    /* the last one that deleted value records */
    _Atomic uint32_t logging[2 * ST_WORKERS_MAX]; /* per process: appending to a ring */
    struct st_worker w[ST_WORKERS_MAX];
};

static inline struct st_gen *st_gen_at(struct st_shared *sh, uint32_t g)
{
    return (struct st_gen *)((char *)sh + sh->gens_off) + g;
}

static inline struct st_gentok *st_gentok_at(struct st_shared *sh, uint32_t g, unsigned lease)
{
    return (struct st_gentok *)((char *)sh + sh->gentok_off) + (uint64_t)g * sh->leases + lease;
}

static inline struct st_log *st_log_at(struct st_shared *sh, unsigned lease)
{
    return (struct st_log *)((char *)sh + sh->log_off) + lease;
}

static inline struct st_rlog *st_rlog_at(struct st_shared *sh, unsigned reader)
{
    return (struct st_rlog *)((char *)sh + sh->rlog_off) + reader;
}

/* Interval ring p: worker p, or reader p - workers. */
static inline struct st_ivlog *st_ivlog_at(struct st_shared *sh, unsigned p)
{
    return (struct st_ivlog *)((char *)sh + sh->iv_off) + p;
}

static inline _Atomic uint64_t *st_acked_bits(struct st_shared *sh, unsigned w)
{
    return (_Atomic uint64_t *)((char *)sh + sh->acked_off) + (uint64_t)w * (ST_SEQ_BITS / 64);
}

static inline _Atomic uint64_t *st_granted_bits(struct st_shared *sh, unsigned lease)
{
    return (_Atomic uint64_t *)((char *)sh + sh->granted_off) +
           (uint64_t)lease * (ST_SEQ_BITS / 64);
}

static inline void st_lease_name(unsigned i, char *buf)
{
    /* "stress-<i>" without stdio: workers format nothing in the loop */
    static const char pre[] = "stress-";
    unsigned n = 0;
    for (; pre[n]; n++)
        buf[n] = pre[n];
    char dig[12];
    unsigned d = 0;
    do {
        dig[d++] = (char)('0' + i % 10);
        i /= 10;
    } while (i);
    while (d)
        buf[n++] = dig[--d];
    buf[n] = 0;
}

/* What a worker or reader does when the checker is to read etcd's history:
 * whether table `name` is an etcd one. */
/* Counter c summed over the workers. */
static inline uint64_t st_worker_count(const struct st_shared *sh, enum st_wc c)
{
    uint64_t n = 0;
    for (unsigned w = 0; w < sh->workers; w++)
        n += atomic_load_explicit(&sh->w[w].count[c], memory_order_relaxed);
    return n;
}

static inline int st_is_etcd(const char *name)
{
    return name && (strncmp(name, "etcd://", 7) == 0 || strncmp(name, "etcds://", 8) == 0);
}

/* A small, fast, seedable generator (splitmix64). */
static inline uint64_t st_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t st_now_ns(void);
/* How long the calling thread has spent runnable but not running, in ns
 * (/proc/thread-self/schedstat); 0 where the kernel does not say. */
uint64_t st_runqueue_ns(void);
void st_sleep_ns(uint64_t ns);

/* stress_removed.c: removals (see "Removals" above). */
/* Opens the campaign's table for process p (a worker, readers after them)
 * and sets *gen to its generation; retries while the name is being removed
 * or re-created. With removals, creates it again with c->reopen. */
int st_table_open(const struct st_config *c, struct st_shared *sh, shl_table **t, uint32_t *gen);
/* Process p's append to a ring on generation `gen`: 1 when it may append
 * (then st_log_done() after), 0 when that generation is no longer current. */
int st_log_begin(struct st_shared *sh, unsigned p, uint32_t gen);
void st_log_done(struct st_shared *sh, unsigned p);
/* Records a token granted on generation g. */
void st_gentok_note(struct st_shared *sh, uint32_t g, unsigned lease, uint64_t token);
/* Tokens on a generation at or below one granted on an earlier one: the
 * count, also stored in sh->token_below_removed. */
uint64_t st_gentok_check(struct st_shared *sh);
/* A call on a generation-g handle that began at t0 was accepted: 1 when that
 * is a violation (the removal had returned; a plain one by the renew
 * interval and the slack more). */
int st_removed_late(struct st_shared *sh, uint32_t g, uint64_t t0);
/* --admin-chaos (stress_admin_etcd.c): the holder record of `token` on
 * `lease` was deleted, the delete acknowledged now. */
void st_gone_note(struct st_shared *sh, unsigned lease, uint64_t token);
/* SHL_ECORRUPT from a call on `lease` that began when its token epoch was
 * e0 is explained: the admin had (or was about to have) its token record
 * deleted. */
int st_token_gone(struct st_shared *sh, unsigned lease, uint64_t e0);
/* A call for (lease, token) that began at t0 was accepted: 1 when the
 * holder record of that token had been deleted before t0 (a violation:
 * no token's record comes back). */
int st_gone_late(struct st_shared *sh, unsigned lease, uint64_t token, uint64_t t0);
/* Where a hold on generation g ends at the latest: the removal's start when
 * marked, its end plus the renew interval when plain; UINT64_MAX while it
 * stands. */
uint64_t st_gen_cut(struct st_shared *sh, uint32_t g);
/* The controller's removal of the current generation: 1 done, 0 put off
 * (a process was appending, or nothing to remove), or the negative SHL_E*
 * code of a removal that failed. */
int st_remove(const struct st_config *c, struct st_shared *sh, int plain);

/* stress_log.c: the shared region, records and values. */
struct st_shared *st_shared_create(const struct st_config *c);
void st_shared_destroy(struct st_shared *sh);
uint64_t st_rec_seal(const struct st_rec *r);
uint64_t st_rrec_seal(const struct st_rrec *r);
/* The value a write stores, and its validation (0 when whole). */
void st_value_make(uint64_t *v, unsigned words, const struct st_rec *r);
int st_value_parse(const uint64_t *v, unsigned words, struct st_rec *r);

/* stress_interval.c: the holders' side (no-ops on an etcd table, whose
 * lease clock is the leader's, not the holder's) and the checker's. */
void st_iv_lb(struct st_ivlog *l, uint64_t now);
void st_iv_begin(struct st_ivlog *l, const struct st_iv *iv);
void st_iv_extend(struct st_ivlog *l, uint64_t end, uint64_t rmark, uint64_t rmark_at);
/* Ends the open hold at `at`, before the call that releases it (a death in
 * that call must not leave the hold open past it). */
void st_iv_cut(struct st_ivlog *l, uint64_t at);
/* Ends the open hold at `end` (or earlier, for a revoke) and publishes it. */
void st_iv_end(struct st_shared *sh, struct st_ivlog *l, uint64_t end, uint32_t pauses);
/* After reaping process p: closes the hold it died in at `kill_at` (when the
 * controller sent SIGKILL; 0: unknown, the worker's own `cut` or nothing). */
void st_iv_close_dead(struct st_shared *sh, struct st_ivlog *l, uint64_t kill_at, uint32_t pauses);
struct st_ivcheck;
struct st_ivcheck *st_ivcheck_new(struct st_shared *sh);
void st_ivcheck_free(struct st_ivcheck *ic);
/* `stopped`: the overlap is an exclusive hold whose holder was stopped
 * (SIGSTOP) during it, and a shared one. */
typedef void (*st_iv_report_fn)(void *arg, const char *msg, int stopped);
/* Consumes the published intervals, reports each overlap. Returns the
 * number of intervals checked so far; *overflow: intervals lost to full
 * rings. */
uint64_t st_ivcheck_step(struct st_ivcheck *ic, st_iv_report_fn report, void *arg,
                         uint64_t *overflow);

/* stress_section.c: pauses inside the critical section (see there). */
struct st_section;
struct st_section *st_section_new(const struct st_config *c, struct st_shared *sh);
void st_section_free(struct st_section *sp);
/* Stops a worker found inside a lease's slot lock; its pid, its lease in
 * *lease, or 0 when none was caught within a few milliseconds. `cands`:
 * the pids of running, unpaused workers (0 for others). */
pid_t st_section_stop(struct st_section *sp, const pid_t *cands, unsigned n, unsigned *lease,
                      uint64_t *rng);
/* The test build: 1 and the SHL_CRASHPOINT value (in env) that makes a
 * worker stop itself inside a busy acquire's lock, or 0 (not for this
 * campaign). Then st_section_self_stopped(): 1 when the worker is stopped
 * inside lease *lease's lock, -1 stopped elsewhere, 0 not stopped. */
int st_section_arm(struct st_section *sp, uint64_t *rng, char *env, size_t cap);
int st_section_self_stopped(struct st_section *sp, pid_t pid, unsigned *lease);
/* After a SIGSTOP sent at a random moment: 1 when the worker, once the
 * kernel reports it stopped, holds lease *lease's slot lock (its own
 * section, or its renewer thread's), read twice a millisecond apart; else 0. */
int st_section_caught(struct st_section *sp, pid_t pid, unsigned *lease);
/* After a stop inside lease `lease`'s lock (either way): its begin. */
void st_section_begin(struct st_section *sp, unsigned lease, pid_t pid);
/* Whether stopped worker `pid` is inside a lease's lock now (*lease). */
int st_section_holding(struct st_section *sp, pid_t pid, unsigned *lease);
/* Stores a whole pause of `pid` from `begin` to `end` in mark m. */
void st_mark_pause(struct st_secmark *m, uint32_t table, pid_t pid, uint64_t begin, uint64_t end);
/* The table generation the section marks are for. */
uint32_t st_section_tgen(const struct st_section *sp);
/* Before the SIGCONT of that worker: its end (the begin again, if the worker
 * no longer holds the lock). */
void st_section_resume(struct st_section *sp, pid_t pid, unsigned lease);
/* After a removal: the inspection handle is opened again on the next table. */
void st_section_removed(struct st_section *sp);

/* stress_worker.c: the body of a forked worker; never returns. */
void st_worker_main(const struct st_config *c, struct st_shared *sh, unsigned w)
    __attribute__((noreturn));

/* stress_reader.c: a forked process that reads values lock-free while the
 * workers write them; never returns. */
void st_reader_main(const struct st_config *c, struct st_shared *sh, unsigned r)
    __attribute__((noreturn));

/* stress_check.c: the checker, run by the controller. */
struct st_checker;
struct st_checker *st_checker_new(struct st_shared *sh);
void st_checker_free(struct st_checker *ck);
/* Consumes every published record and verifies the acknowledgements made so
 * far. Cheap enough to call every few milliseconds. */
void st_checker_step(struct st_checker *ck);
/* After all workers are gone: the table and the final values. */
/* `excused`: how many logged writes may lack an acknowledgement (kills,
 * and on etcd writes that ended in SHL_EUNAVAIL). */
void st_checker_final(struct st_checker *ck, shl_table *t, uint64_t excused);
/* Another source of records than the rings (etcd's history): called by each
 * step after the acknowledgements were read, with `force` at the end. It
 * hands records to st_checker_record() in commit order and returns 0 when
 * everything committed before the call has been handed over (then the
 * acknowledgements are checked), 1 when it did not look this time, -1 when
 * it could not (the check waits for the next step; at the end, an error). */
typedef int (*st_feed_fn)(void *arg, struct st_checker *ck, int force);
void st_checker_set_feed(struct st_checker *ck, st_feed_fn fn, void *arg);
void st_checker_record(struct st_checker *ck, unsigned lease, uint64_t pos, const struct st_rec *r);
/* Evidence that could not be read (etcd's history compacted or unreadable
 * at the end): counted with the overflows, never a pass. */
void st_checker_incomplete(struct st_checker *ck, const char *why);
uint64_t st_checker_violations(const struct st_checker *ck);
/* Every violation found so far: the checker's, the workers' and readers'
 * own (counters in `sh`), and what shl_check() reported during the run. */
struct st_chaos_totals;
uint64_t st_violations_now(struct st_shared *sh, const struct st_checker *ck,
                           const struct st_chaos_totals *tot);
/* Named totals for the summary. */
struct st_check_totals {
    uint64_t records;
    uint64_t violations;
    uint64_t order;            /* a token older than the previous record's */
    uint64_t shared_token;     /* one token, two writers */
    uint64_t bad_seal;         /* a half-written record was visible */
    uint64_t lost;             /* acknowledged but not in the log */
    uint64_t unacked;          /* logged but not acknowledged (the writer died) */
    uint64_t table;            /* problems found in the table at the end */
    uint64_t settled;          /* recoveries still pending at the end (not problems) */
    uint64_t overflow;         /* evidence the rings could not hold */
    uint64_t guarded_reads;    /* guarded reads by shared holders, checked */
    uint64_t shared_newer;     /* a guarded read saw a write newer than its gen */
    uint64_t shared_overlap;   /* a write accepted while a valid reader held */
    uint64_t intervals;        /* holders' sure intervals checked (stress_interval.c) */
    uint64_t interval_overlap; /* two of them overlapped (exclusive with any) */
    uint64_t interval_stopped; /* ... of which a reader beside a stopped writer */
    int table_checked;         /* shl_check() ran */
};
void st_checker_totals(const struct st_checker *ck, struct st_check_totals *out);
/* The first few problems, as text, for the report. */
const char *st_checker_problem(const struct st_checker *ck, unsigned i);

/* stress_chaos.c: the controller's run: spawn, kill, pause, respawn, check,
 * show progress. Returns when the campaign is over and every worker reaped. */
struct st_chaos_totals {
    uint64_t kills;
    uint64_t kills_in_section; /* the victim was inside a guarded write */
    uint64_t pauses;
    uint64_t respawns;
    uint64_t worker_failures; /* workers that exited with an error */
    uint64_t revokes;
    uint64_t pauses_in_section;     /* workers stopped holding a slot lock (stress_section.c) */
    uint64_t pauses_landed_in_lock; /* ... of them, by a pause at a random moment */
    uint64_t pauses_late;           /* stops made late, found in a lock or queued (held_up) */
    uint64_t repairs;               /* shl_repair() runs during the campaign */
    uint64_t checks;                /* shl_check() runs during the campaign */
    uint64_t check_problems;        /* violation: what those reported */
    uint64_t admin_errors;          /* revoke/repair/check failed */
    double elapsed_s;
    int interrupted; /* SIGINT or SIGTERM ended it early */
    /* --member-chaos */
    uint64_t member_kills;    /* SIGKILLed members (then restarted) */
    uint64_t member_pauses;   /* SIGSTOPped members (then SIGCONTed) */
    uint64_t member_long;     /* ... of them stopped past every ttl with waiters queued */
    uint64_t member_restarts; /* members started again on their data */
    uint64_t leader_hits;     /* disturbances aimed at the member that led */
    uint64_t member_errors;   /* a member could not be killed, stopped or restarted */
};
/* Called about once a second with the totals so far. */
typedef void (*st_progress_fn)(void *arg, const struct st_chaos_totals *tot);
void st_chaos_run(const struct st_config *c, struct st_shared *sh, struct st_checker *ck,
                  struct st_chaos_totals *out, st_progress_fn progress, void *arg);

#endif
