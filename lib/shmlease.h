/*
 * shmlease.h - leases with fencing tokens in POSIX shared memory.
 *
 * A table is a POSIX shared-memory segment holding up to `capacity` named
 * leases. A lease is exclusive ownership of a name until a deadline on the
 * table's clock. Every acquisition gets a new token, strictly greater than
 * every token the lease had before. Every write made through this library is
 * checked under the lease's lock, atomically with the write, against owner,
 * token and expiry: a process paused past its expiry, or holding an old token,
 * cannot change the lease's value.
 *
 * Semantics (t = the table's clock, read inside the lease's critical section):
 *
 *  1. shl_acquire() succeeds iff the lease was never held, was released, was
 *     revoked, or t >= expiry (equality is expired). Then holder = owner,
 *     expiry = t + ttl, token = previous token + 1.
 *  2. A token is per lease, starts at 1 (at floor + 1 on a table with a
 *     persistent token floor), strictly increases, and is never reused or
 *     lowered: not by release, expiry, revoke, crash recovery or repair.
 *     Token 0 is never valid.
 *  3. valid(owner, token) <=> holder == owner && token == current && t < expiry.
 *     shl_renew(), shl_release(), shl_write(), shl_update() and shl_guard()
 *     require it; otherwise they return SHL_ELOST.
 *  4. A rejected operation changes nothing (value, holder, expiry, token).
 *     shl_release() frees the lease but keeps its token.
 *  5. ttl must be > 0 and t + ttl must not overflow: else SHL_EINVAL.
 *  6. A SHL_CLOCK_MANUAL table takes its time from a value in the segment that
 *     only shl_clock_set() moves, forward only (backwards: SHL_ECLOCK).
 *  7. A busy shl_acquire_ex() tells the caller who holds the lease and for how
 *     long.
 *
 * Return values: every function returning int returns SHL_OK (0) or a negative
 * SHL_E* code. No function reports through errno, prints, or aborts on bad
 * input.
 *
 * Thread safety: one shl_table may be used by any number of threads at once.
 * (On an etcd table the handle's calls to the cluster take turns: one
 * connection per handle; open a handle per thread for parallel requests.)
 *
 * Tables in an etcd cluster. A table named
 *     etcd://HOST:PORT[,HOST:PORT...]/TABLE      (etcds:// for TLS)
 * lives under the key prefix "TABLE/" of an etcd v3 cluster, and leases
 * mean the same thing on every host that reaches it. HOST is a DNS name, an
 * IPv4 address or a bracketed IPv6 one; PORT 1..65535; TABLE one or more
 * '/'-separated segments of [A-Za-z0-9._-] (not starting with '.'), at most
 * SHL_TABLE_NAME_MAX bytes. In the key prefix each '/' of TABLE is written
 * ':' (table "a/b" lives under "a:b/"), so a key's first '/' ends its
 * table's part: no table name and lease name spell another table's keys,
 * and shl_unlink("a") leaves table "a/b" alone. Any other form starting with etcd:// or
 * etcds:// is SHL_EINVAL. The client fails over between the endpoints. A
 * library built without etcd support (make ETCD=0) refuses such names with
 * SHL_ENOTSUP. libcurl is not linked: the library loads it (dlopen of
 * libcurl.so.4) at the first open of an etcd table, so that programs using
 * shared-memory tables only never load it; when it cannot be loaded, that
 * open is SHL_ENOTSUP too, as in a build without etcd support.
 * Same calls, same codes, same rules 1-5 and 7, with t = etcd's lease clock:
 * the cluster is the enforcement point. A holder is valid while its holder
 * record exists with its exact (owner, token); that record is attached to
 * an etcd lease granted for that acquisition alone, so it disappears at
 * expiry, and every renew, release, write and update is one etcd
 * transaction comparing it, atomically with the change. No client judges
 * validity from its own clock. Tokens live in etcd: per lease, from 1, +1
 * per acquisition, never reused or lowered across expiry, release, revoke,
 * re-opening, client crashes and leader changes (shl_unlink() removes them
 * with the table). A lease's token record deleted by hand beside its value,
 * gen or shared holder records (which carry tokens) makes its acquisitions
 * SHL_ECORRUPT, never token 1 again (shl_check() reports it too). What
 * differs:
 *  - TTLs are whole seconds: a ttl is rounded up to the next second, and to
 *    the cluster's minimum lease ttl (derived from its election timeout:
 *    2 s with etcd's defaults). shl_stat()/shl_acquire_ex() report the
 *    remaining time etcd gives, in whole seconds (remaining_ns is a multiple
 *    of 10^9), and expiry_ns = now_ns + remaining_ns, where now_ns is this
 *    host's CLOCK_MONOTONIC (shl_now() gives that clock): the expiry is
 *    known to within a second. since_ns and pid are 0; a lease that is not
 *    held is SHL_STATE_FREE whether it was released, expired or revoked,
 *    and its owner is "" (the holder record went with the holder).
 *  - Every call has a deadline, shl_options.timeout_ms (default 5000) for
 *    each request to the cluster. A cluster that does not answer in time is
 *    SHL_EUNAVAIL, never a hang. When a request that changes state was sent
 *    and its answer lost, the outcome is read back (the holder, token or
 *    value record) before returning; only when that fails too is the result
 *    SHL_EUNAVAIL, which then means "may have happened": an acquisition may
 *    hold the lease (it expires by itself), a write may have landed (only
 *    while the holder was valid). Nothing is reported done that etcd did
 *    not confirm.
 *  - SHL_POLICY_RECLAIM_ORPHANS (the default) is accepted and reclaims
 *    nothing: etcd proves no death before the holder's etcd lease ends at
 *    its expiry, and an unproven death never reclaims.
 *  - Refused, never approximated: SHL_CLOCK_MANUAL and a token
 *    state file (shl_open(): SHL_ENOTSUP); shl_guard() and shl_lease_guard()
 *    (no callback can be atomic with a remote check: SHL_ENOTSUP), and so
 *    shl_guard_shared(); shl_clock_set(), shl_repair(), shl_check_name(),
 *    shl_inspect_slot() and shl_heartbeat_get() (segment internals:
 *    SHL_ENOTSUP). shl_check() checks the table's keys instead.
 *  - shl_update() is a transaction that also compares the value's mod
 *    revision; on a conflict (the same holder writing meanwhile) fn runs
 *    again on the newer value, until timeout_ms has passed (SHL_EUNAVAIL).
 *  - shl_acquire_wait() and shl_acquire_shared_wait() wait with etcd
 *    watches, no polling. Waiters of both kinds queue by the create
 *    revision of a waiter key attached to the waiter's own etcd lease (kept
 *    alive while it waits), as etcd's lock recipe does; a waiter that dies
 *    loses its place within 3 s, when that lease runs out. No queue length
 *    bound and no turn grace: the queue is etcd's (the fairness bound on
 *    etcd is stated at shl_acquire_shared_wait()).
 *  - A renewer keeps the lease with keep-alives of the holder's etcd lease
 *    (a renew with an unchanged ttl is a keep-alive, then a read-only txn
 *    proving that the holder record is still there, with its owner and
 *    token, on that etcd lease: two round trips, as etcd has no txn op
 *    that refreshes a lease; SHL_ELOST once an admin deleted or changed
 *    the record, though its etcd lease lives on. Release is a txn deleting
 *    the record under the same compare, SHL_ELOST likewise, then a revoke
 *    of the emptied etcd lease. A changed ttl moves
 *    the holder record to a new etcd lease in one transaction). A revoke is
 *    noticed at the next renewal, not at once. No heartbeat is recorded.
 *  - capacity and mode do not apply (no slots, no file): the cluster's
 *    authentication governs access. shl_table_info_get() reports capacity 0
 *    and used = the lease names ever acquired. An existing table must match
 *    value_size (SHL_EMISMATCH).
 *  - shl_inspect()/shl_foreach(): no lock, intent, counters or pids; the
 *    history comes from etcd's revisions of the holder record (events carry
 *    the revision, not a time), as far as compaction allows (see
 *    shl_inspect()).
 *  - A table removed (shl_unlink(), or its keys deleted by hand) or removed
 *    and made anew under an open handle: every txn that puts a key (acquire,
 *    shared acquire, write, update, a waiter's place) compares the meta
 *    record's create revision with the one seen at open, so the old handle
 *    gets SHL_EREMOVED, as on a segment, and re-creates no key: the name
 *    stays free for shl_open(SHL_CREATE), shl_unlink() and `shmlease rm`.
 *    A queued waiter stops with SHL_EREMOVED.
 *  - A key prefix that holds keys but no table's meta record is
 *    SHL_ECORRUPT, not taken over; shl_unlink() deletes only the table's own
 *    records (meta, h/, t/, v/, s/, g/, w/, r/) and leaves other keys
 *    under the prefix.
 *  - TLS and authentication: shl_options.cacert, cert, key, user and
 *    password, or when NULL the environment's SHMLEASE_ETCD_CACERT,
 *    SHMLEASE_ETCD_CERT, SHMLEASE_ETCD_KEY, SHMLEASE_ETCD_USER and
 *    SHMLEASE_ETCD_PASSWORD (shl_unlink(), which has no options, uses
 *    these). A refused certificate or password is SHL_EPERM.
 *
 * Caveats:
 *  - One host for a shared-memory table. The segment lives in /dev/shm (or
 *    at the path a name starting with '/' gives: see shl_open()); its leases
 *    mean nothing across machines (use an etcd table there).
 *  - Same user, or the same group for a table created with mode 0660. A
 *    segment owned by another user, or with wider permissions than asked, is
 *    refused (SHL_EPERM) rather than trusted.
 *  - Same time namespace: CLOCK_MONOTONIC differs between time namespaces, so
 *    processes share a table only when proven to share that clock: the
 *    creator records its namespace (/proc/self/ns/time) and an opener must
 *    be in the same one, or both on a kernel without time namespaces.
 *    Otherwise shl_open() is SHL_ETIMENS: another namespace, or one that
 *    cannot be read (no /proc, as in a chroot or a container without it;
 *    a clock an hour ahead would take over every lease). A creator that
 *    cannot read its own is refused too. On a host known to have no time
 *    namespaces, SHMLEASE_NO_TIMENS=1 in the environment lets a process
 *    whose namespace cannot be read create and open tables (ignored in
 *    set-id programs; off by default); only two known, different
 *    namespaces are then refused. A table made that way records "unknown",
 *    and every opener without SHMLEASE_NO_TIMENS=1 is refused.
 *  - exec(): a table's descriptors are close-on-exec, so a process that
 *    exec()s without closing its handle leaves its leases orphaned: held
 *    until their expiry (or reclaimed as orphans where the table's policy
 *    says so), renewed by nobody, and the new program image cannot use
 *    them. To hold a lease across exec(), run the program under
 *    `shmlease run TABLE LEASE -- COMMAND...`, which holds and renews the
 *    lease in its own process for as long as the command runs.
 *  - Trust: every process that can open a table must be trusted not to be
 *    malicious. A table created with mode 0600 trusts the owner's processes;
 *    one created with 0660 trusts every member of its group. The segment
 *    holds glibc robust mutexes, and a robust mutex keeps pointers into its
 *    holder's own memory (the robust list) inside the segment, which glibc
 *    and the kernel follow: a process that can write the segment can make
 *    another one crash in pthread_mutex_unlock(), write to an address of the
 *    attacker's choosing, or disclose its private addresses, and it can
 *    truncate the file under everyone (SIGBUS). This is inherent to
 *    process-shared pthread mutexes (LMDB's lock file says the same); no
 *    check made by the library can prevent it. The guarantees are for
 *    processes that go through shmlease, including buggy and crashing ones.
 *    What the library still defends against: other users (a segment owned by
 *    another user, or with a wider mode than asked, is refused with
 *    SHL_EPERM); segments that are not tables or come from another build
 *    (SHL_ECORRUPT, SHL_EVERSION, never a crash); damaged data met through
 *    the API: the geometry is read and validated once at open, so a stray
 *    write into the header cannot move what an operation reads or writes,
 *    lengths and names read from the segment are bounded before use, and
 *    shl_check() / shl_repair() find and mend the rest.
 *  - fork(): a handle belongs to the process that opened it, and so do the
 *    bound leases and renewers made from it. In a child, every call on them
 *    returns SHL_EFORK (shl_close(), shl_lease_close() and shl_renewer_stop()
 *    free the child's copy without touching the segment); open the table
 *    again there.
 *  - Dead holders and waiters: "dead" only on the kernel's proof, per handle.
 *    Each handle holds an OFD lock (fcntl F_OFD_SETLK) on one byte of the
 *    segment's file, at an offset of 2^62 or more, and its records name that
 *    byte; the kernel drops the lock when the last descriptor of that open
 *    file closes (at the latest when the process dies). So a lease still
 *    held by a handle that was closed counts as orphaned, and a child forked
 *    without exec() keeps its parent's handles open: the parent's leases
 *    look alive until the child exits too (late, never early). /proc is not
 *    consulted: other PID namespaces, hidepid and a main thread that exited
 *    make no difference. Where no proof is possible (no OFD locks) nothing
 *    is ever taken for dead. Do not lock those bytes of a segment yourself.
 *  - Do not call shmlease on the same lease from inside an shl_guard() or
 *    shl_update() callback: the lease's mutex is held and is not recursive.
 *    Nor add a new lease name there (a first acquire or shl_lease_open() of
 *    it): adding takes the table lock, which a repair mending the index holds
 *    while it locks leases.
 *  - A process stopped (SIGSTOP) inside a critical section delays that one
 *    lease's writers until it resumes; readers (shl_read, shl_stat) are not
 *    blocked for long and fall back to waiting only if the stop happened in
 *    the middle of a change. The inspection calls (shl_inspect, shl_foreach,
 *    shl_check) never wait for it: they report the lock's holder instead.
 *  - Expiry does not stop a paused process or cancel an effect it already
 *    started elsewhere: for resources outside the segment, pass the token to
 *    the resource and let it refuse stale ones.
 */
#ifndef SHMLEASE_H
#define SHMLEASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SHL_API __attribute__((visibility("default")))
#else
#define SHL_API
#endif

/** @defgroup version Version */
/* On the calls whose result decides what the caller may do next (whether
 * it holds the lease, whether its write landed): the compiler warns when the
 * result is dropped. gcc warns even through a (void) cast: test it, or keep
 * it in a variable that says why it does not matter. */
#if defined(__GNUC__) || defined(__clang__)
#define SHL_NODISCARD __attribute__((warn_unused_result))
#else
#define SHL_NODISCARD
#endif

#define SHLEASE_VERSION_MAJOR  0
#define SHLEASE_VERSION_MINOR  3
#define SHLEASE_VERSION_PATCH  0
#define SHLEASE_VERSION_STRING "0.3.0"

/* The library's version at run time ("0.3.0"), for comparison with the
 * SHLEASE_VERSION_* macros a program was compiled with. */
SHL_API const char *shl_version(void);

/** @defgroup limits Limits */
/** @defgroup durations Durations: every ttl, wait and interval is in ns.
 * SHL_SEC(5), SHL_MS(250), SHL_US(100) give uint64_t nanoseconds, e.g.
 * shl_acquire(t, "job", "me", SHL_SEC(30), &token). */
#define SHL_SEC(x) ((uint64_t)(x)*UINT64_C(1000000000))
#define SHL_MS(x)  ((uint64_t)(x)*UINT64_C(1000000))
#define SHL_US(x)  ((uint64_t)(x)*UINT64_C(1000))

#define SHL_NAME_MAX       63  /* lease name bytes: printable ASCII, no space */
#define SHL_OWNER_MAX      63  /* owner bytes: printable ASCII, space allowed */
#define SHL_TABLE_NAME_MAX 200 /* table name without the leading '/'; a path table's path */
#define SHL_CAPACITY_MAX   (1u << 24)
#define SHL_VALUE_MAX      (1u << 20)
/* What one answer of an etcd cluster may cost in memory (its body and its
 * parsed form), and the most shl_options.max_response may ask for. */
#define SHL_ETCD_RESPONSE_MAX (128u << 20)

/** @defgroup errors Return codes
 * One table makes the enum, shl_strerror() and shl_errname(). */
#define SHL_ERRNO_MAP(XX)                                                                          \
    XX(OK, 0, "success")                                                                           \
    XX(EBUSY, -1, "lease is held by another owner and has not expired")                            \
    XX(ELOST, -2, "not the holder: lease expired, revoked, released, or stale token or owner")     \
    XX(EINVAL, -3, "invalid argument")                                                             \
    XX(ECLOCK, -4, "manual clock cannot move backwards")                                           \
    XX(ENOENT, -5, "no such table or lease")                                                       \
    XX(EFULL, -6, "table is full")                                                                 \
    XX(ECORRUPT, -7, "segment is corrupt or not a shmlease table")                                 \
    XX(EVERSION, -8, "segment was made by an incompatible build")                                  \
    XX(EPERM, -9,                                                                                  \
       "another user's segment, or it or its directory is too widely accessible; for an etcd "     \
       "table: refused by the cluster (TLS certificates, or user and password)")                   \
    XX(EEXIST, -10, "table already exists")                                                        \
    XX(E2BIG, -11, "value too large for the table or the buffer")                                  \
    XX(ENOSPC, -12, "no space left for the segment")                                               \
    XX(ENOMEM, -13, "out of memory")                                                               \
    XX(ESYS, -14, "unexpected system error")                                                       \
    XX(ETIMENS, -15, "time namespace differs or cannot be read (/proc/self/ns/time)")              \
    XX(EBROKEN, -16, "a lock in the segment is unrecoverable: run shmlease repair")                \
    XX(EFORK, -17, "handle used after fork(): open the table again in the child")                  \
    XX(ETIMEDOUT, -18, "timed out")                                                                \
    XX(EMISMATCH, -19, "table exists with another capacity, value size, mode or clock")            \
    XX(ECANCELED, -20, "callback declined: nothing changed")                                       \
    XX(ESTALE, -21, "token is older than one the fence has already admitted")                      \
    XX(ETOKENS, -22, "the lease has used every token of this table's epoch: re-create it")         \
    XX(ENOTSUP, -23, "not supported on this kind of table")                                        \
    XX(EUNAVAIL, -24, "the cluster did not answer in time; a change may have happened")            \
    XX(EREMOVED, -25, "the table was removed: open it again (a new table under its name)")

enum shl_errno {
#define SHL__ERR_ENUM(name, code, msg) SHL_##name = (code),
    SHL_ERRNO_MAP(SHL__ERR_ENUM)
#undef SHL__ERR_ENUM
};

/* A fixed English message for `rc`; "unknown error" for any other value. */
SHL_API const char *shl_strerror(int rc);
/* The code's name, "SHL_EBUSY"; "SHL_UNKNOWN" for any other value. */
SHL_API const char *shl_errname(int rc);

/*
 * shl_last_error() - why this thread's last refused call was refused, in one
 * sentence that names the argument and the rule, or what was found:
 *   "owner: 300 bytes, the limit is 63"
 *   "lease: contains a space at byte 3"
 *   "mode: 0644 is not 0600 or 0660"
 *   "/dev/shm/jobs: needs 2.1 MiB, /dev/shm has 1.0 MiB free"
 *   "/dev/shm/jobs: owner uid 1001, mode 0644; this process is uid 1000 and
 *    accepts at most mode 0600"
 *   "etcd: connection refused by every member (127.0.0.1:2379)"
 * Read it as errno is read: right after a call that returned an error, in
 * the same thread. A call that succeeds leaves it as it was (no cost on the
 * fast path), and a refusal with nothing more to say than its code (a busy
 * lease, a lost one) leaves it too, so a caller that shows it calls
 * shl_clear_error() first, or after showing it. Never NULL; "" when nothing
 * was recorded; at most SHL_DETAIL_MAX - 1 bytes, cut if longer. Valid until
 * this thread's next call into the library.
 */
#define SHL_DETAIL_MAX 256
SHL_API const char *shl_last_error(void);
/* Empties this thread's shl_last_error(). */
SHL_API void shl_clear_error(void);

/** @defgroup options Table options */
#define SHL_CLOCK_MONOTONIC 0 /* CLOCK_MONOTONIC, read inside each operation */
#define SHL_CLOCK_MANUAL    1 /* a value in the segment moved by shl_clock_set() */

#define SHL_CREATE 1u /* create the table if it does not exist */
#define SHL_EXCL   2u /* with SHL_CREATE: fail with SHL_EEXIST if it exists */

/* A lease whose holder is proven dead may be acquired before its expiry
 * (on by default: shl_options_init()). */
#define SHL_POLICY_RECLAIM_ORPHANS 1u
/* The default reclaim delay: a proven dead holder's lease is taken over
 * this long after its death was first seen. The proof is the kernel's (see
 * Caveats), so the delay guards nothing inside the table; it lets what the
 * dead holder set going outside it (a command still leaving an
 * uninterruptible write, data still in a socket's send buffer, queued I/O)
 * land before the next holder starts. shmlease(7), "Dead holders". */
#define SHL_RECLAIM_DELAY_DEFAULT_MS 1000u

typedef struct shl_table shl_table; /* opaque: one process's mapping of a table */

typedef struct shl_options {
    uint32_t capacity;            /* lease slots (default 1024; 1 .. SHL_CAPACITY_MAX) */
    uint32_t value_size;          /* bytes of co-located value per lease (default 256) */
    mode_t mode;                  /* 0600 (default) or 0660 for group sharing */
    int clock;                    /* SHL_CLOCK_MONOTONIC (default) or SHL_CLOCK_MANUAL */
    unsigned flags;               /* SHL_CREATE, SHL_EXCL */
    unsigned policy;              /* SHL_POLICY_* (default SHL_POLICY_RECLAIM_ORPHANS;
                                     0 keeps a dead holder's lease to its expiry),
                                     fixed at creation */
    uint32_t reclaim_delay_ms;    /* with RECLAIM_ORPHANS: wait this long after the
                                     holder's death is first seen (default
                                     SHL_RECLAIM_DELAY_DEFAULT_MS; ignored and
                                     stored as 0 without the policy) */
    const char *token_state_path; /* NULL (default): tokens start at 1. Else a
                                     token state file, in a directory that only
                                     its owner can write: see "Persistent token
                                     floor" below. Read only at creation. */
    /* etcd tables only (see "Tables in an etcd cluster"); appended here, so
     * a program built against an older header must be rebuilt. */
    uint32_t timeout_ms;  /* deadline of each call to the cluster (default
                             5000; 0 also means the default) */
    const char *cacert;   /* PEM CA bundle for etcds:// (NULL: the environment's
                             SHMLEASE_ETCD_CACERT, else the system's) */
    const char *cert;     /* PEM client certificate (NULL: SHMLEASE_ETCD_CERT) */
    const char *key;      /* PEM client key (NULL: SHMLEASE_ETCD_KEY) */
    const char *user;     /* etcd user (NULL: SHMLEASE_ETCD_USER) */
    const char *password; /* its password (NULL: SHMLEASE_ETCD_PASSWORD) */
    const char *proxy;    /* "http://host:port" or "https://...": the proxy to
                             reach the cluster through (NULL: SHMLEASE_ETCD_PROXY;
                             none when that is unset or ""). The environment's
                             http_proxy, https_proxy, ALL_PROXY are never used.
                             With a user, only for etcds:// (else SHL_EINVAL):
                             the password never goes to a proxy in clear. */
    size_t max_response;  /* bytes one answer of the cluster may cost in memory,
                             body and parsed form (0: SHL_ETCD_RESPONSE_MAX; more
                             is SHL_EINVAL). Larger answers are SHL_ECORRUPT. */
    /* Shared-memory tables: what a lease takes only when it uses it, in
     * pools sized here at creation (read only at creation: an existing
     * table keeps its own, which shl_table_info_get() reports). A lease
     * takes reader records in groups of SHL_SHARED_GROUP and waiter entries
     * in groups of SHL_WAITER_GROUP, and gives a group back once none of its
     * records is in use; but its first of each pool, which it keeps for its
     * next reader or waiter until a lease that needs a group finds none
     * free and takes it back. When a pool has no free or kept unused group,
     * the call that needs one fails with SHL_EFULL, the pool named in
     * shl_last_error(): never a wait. Etcd tables ignore these. */
    uint32_t max_shared;  /* reader records of the whole table (shared holders at
                             once, SHL_SHARED_MAX per lease at most; rounded up to
                             whole groups). SHL_POOL_DEFAULT (default): capacity / 2,
                             at least SHL_POOL_MIN. 0: no shared acquisition. */
    uint32_t max_waiters; /* queued waiter entries of the whole table (shl_acquire_wait
                             and its kin; SHL_WAIT_QUEUE_LEN per lease at most; rounded
                             up to whole groups). SHL_POOL_DEFAULT (default):
                             capacity, at least SHL_POOL_MIN. 0: no queue, so a
                             wait that finds the lease held fails with SHL_EFULL. */
    uint32_t history;     /* events kept per lease for shl_history() and dump
                             (default and most SHL_HISTORY_MAX; 0: none kept) */
} shl_options;

/* shl_options.max_shared, .max_waiters: the default, from the capacity. */
#define SHL_POOL_DEFAULT UINT32_MAX
/* The least a default pool holds: two leases' worth at full use. */
#define SHL_POOL_MIN 64u
/* Records per group of the reader pool, and of the waiter pool. */
#define SHL_SHARED_GROUP 4u
#define SHL_WAITER_GROUP 8u

/* Fills the defaults: capacity 1024, value size 256, mode 0600, monotonic
 * clock, flags SHL_CREATE, policy SHL_POLICY_RECLAIM_ORPHANS with a reclaim
 * delay of SHL_RECLAIM_DELAY_DEFAULT_MS (a holder proven dead frees its lease
 * about a second after its death, as a dead flock(2) holder frees its lock;
 * set policy to 0 to keep such a lease until its expiry), timeout 5000 ms,
 * no TLS files or user (the environment's are used), default pools
 * (SHL_POOL_DEFAULT) and SHL_HISTORY_MAX events per lease. */
SHL_API void shl_options_init(shl_options *o);

/*
 * Opens the table `name`: "name" or "/name" (at most SHL_TABLE_NAME_MAX
 * bytes of [A-Za-z0-9._-], not starting with '.') is the file /dev/shm/name.
 * A name starting with '/' and holding another '/' is a table at that file
 * path, e.g. "/run/lock/jobs.shl" or a file on a tmpfs volume that several
 * containers mount: at most SHL_TABLE_NAME_MAX bytes in all, components of
 * [A-Za-z0-9._-], none empty, "." or "..", the file's own name not starting
 * with '.'. Such a table is out of reach of systemd's RemoveIPC and behaves
 * as one in /dev/shm: same calls, same owner and mode checks, same safe
 * creation (an unnamed file in the directory, named only once complete;
 * the final component is never followed if it is a symlink). Its directory
 * must exist and must not be writable by group or others unless it has the
 * sticky bit (as /dev/shm, /run/lock and /tmp have): else SHL_EPERM, since
 * any of those users could rename or replace the table under its users. A
 * file system other than tmpfs works, but every change is written back to
 * the disk: shl_place_get() tells, so that a tool can warn.
 *
 * o == NULL opens an existing table, accepting mode 0600 or 0660. With
 * o->flags & SHL_CREATE, a missing table is created with o's parameters; any
 * number of processes may do this at the same moment: exactly one creates,
 * all get the same table. A creator that stalls or dies midway holds up
 * nobody: its table gets its name only once complete, and a creator that
 * finds the name taken by then drops its own and opens that one. An existing
 * table must match o's capacity, value
 * size, mode, clock and policy, and the reclaim delay when the policy
 * reclaims (else SHL_EMISMATCH): a table made by an older build's defaults
 * (no policy) is opened with o == NULL, or with o->policy = 0. o->mode is also the
 * widest mode accepted from an existing segment: a 0660 table opened with
 * mode 0600 is SHL_EPERM, before any comparison.
 *
 * Errors: SHL_EINVAL (bad name or options), SHL_ENOENT (no such table),
 * SHL_EEXIST (SHL_EXCL and it exists), SHL_EPERM (another owner, a wider mode
 * than accepted, not a regular file, or a path table's directory is writable
 * by others without the sticky bit), SHL_ENOENT (also: a path table's
 * directory does not exist), SHL_ECORRUPT (not a shmlease segment,
 * truncated, or inconsistent header), SHL_EVERSION (made by an incompatible
 * build), SHL_ETIMENS (made in another time namespace, or this process's or
 * the creator's cannot be read: see Caveats), SHL_ENOSPC (no room in
 * /dev/shm or the path's file system), SHL_ENOMEM, SHL_ETIMEDOUT (the name
 * was removed again each time it was found taken, for 10 s), SHL_EREMOVED
 * (the name still names a table marked removed by shl_unlink(), whose remover
 * did not finish: a creator removes such a name itself and creates the table
 * again, so SHL_EREMOVED comes to a plain opener, or to a creator that may not
 * remove the name), SHL_ESYS.
 * With o->token_state_path, when this call creates the table, also those of
 * the state file: SHL_ECORRUPT (not a token state file), SHL_EPERM (owned by
 * another user, not writable, or it or its lock is not a regular file),
 * SHL_ENOENT (its directory does not exist), SHL_ENOSPC, SHL_ETOKENS (its
 * epochs are used up), SHL_ETIMEDOUT (another creator held the file's lock
 * for over 10 s), SHL_ESYS (I/O error); and SHL_EMISMATCH when an existing
 * table was created without a floor (or with one while o has none).
 * An etcd table (see "Tables in an etcd cluster" above): SHL_EINVAL for a
 * malformed name, SHL_ENOTSUP (a manual clock or a token state
 * file; or no etcd support in this build, or libcurl.so.4 not loadable), SHL_EUNAVAIL (no endpoint
 * answered within timeout_ms), SHL_EPERM (TLS or credentials refused),
 * SHL_ECORRUPT (the prefix holds keys but no table, or an unreadable meta
 * record), SHL_ENOENT, SHL_EEXIST, SHL_EMISMATCH (value_size).
 * On error *out is NULL and nothing was written to any existing segment.
 */
SHL_API SHL_NODISCARD int shl_open(const char *name, const shl_options *o, shl_table **out);

/* Unmaps and frees the handle (NULL is accepted). Leases stay as they are:
 * close does not release them. Always SHL_OK, also in a child after fork. */
SHL_API int shl_close(shl_table *t);

/* Removes the table's name. First it marks the segment removed (one word in
 * its header) and wakes every process sleeping on one of its leases; then
 * it unlinks the name, if the name still names that file. Every handle's
 * next call on the table (by name or bound, including waits and renewers)
 * is then SHL_EREMOVED, whatever it held: a new open of the name makes a
 * new table, whose tokens start again from 1 (from above the old ones only
 * with a token state file, see shl_options.token_state_path).
 * Only a shmlease table is removed: a file without the table's magic word
 * is refused with SHL_ECORRUPT and kept (shmlease rm --force removes it).
 * A table of another build (SHL_EVERSION at open) or a damaged one with the
 * magic word is removed without the mark. Errors: SHL_ENOENT, SHL_EPERM
 * (another owner, or not a regular file), SHL_ECORRUPT, SHL_EINVAL,
 * SHL_ESYS. An etcd table is removed at once: its holders' etcd leases
 * are revoked and its own records deleted (other keys under its prefix
 * stay; a prefix with no table is SHL_ECORRUPT when it holds other keys);
 * also SHL_EUNAVAIL. */
SHL_API int shl_unlink(const char *name);

/* Whether the table this handle maps is still the one its name names:
 * SHL_OK, or SHL_EREMOVED when it was marked removed (shl_unlink()), when
 * its file has no name left (rm, systemd-logind's RemoveIPC, a tmp cleaner)
 * or when the name now names another file (removed and created again). Two
 * system calls (fstat, lstat), no lock: for tools and loops that must
 * notice a removal by something other than shl_unlink(), which the lease
 * calls do not look for (renewers and waits do, see there). SHL_EINVAL,
 * SHL_EFORK. On an etcd table: SHL_OK (its calls see removal themselves). */
SHL_API int shl_table_check(shl_table *t);

typedef struct shl_table_info {
    uint32_t capacity;
    uint32_t value_size;
    uint32_t used; /* lease names in the table */
    int clock;     /* SHL_CLOCK_* */
    mode_t mode;
    unsigned policy;
    uint32_t reclaim_delay_ms;
    int created;   /* this handle's shl_open() created the table */
    uint64_t size; /* segment bytes */
    int32_t creator_pid;
    uint64_t token_floor; /* every token of this table is above it (0: none) */
    /* Shared-memory tables (0 on etcd): the pools (shl_options.max_shared,
     * .max_waiters: records in all, whole groups) and how many of their
     * records are in groups taken now (a lease keeps its first group of
     * each, unused, until another lease needs it); events kept per
     * lease. */
    uint32_t max_shared;
    uint32_t max_waiters;
    uint32_t shared_taken;
    uint32_t waiters_taken;
    uint32_t history;
} shl_table_info;

SHL_API int shl_table_info_get(shl_table *t, shl_table_info *info);

/* Where a shared-memory table lives, and what the host's file system says
 * about it: for tools that warn users (a table on a disk, one that takes
 * much of the free space, one nobody has open). */
typedef struct shl_place {
    char path[SHL_TABLE_NAME_MAX + 16]; /* the segment's file: /dev/shm/NAME or the path */
    int dir_safe;     /* 1: its directory is usable; 0: writable by group or others
                         without the sticky bit (shl_open() refuses: SHL_EPERM);
                         -1: no such directory */
    int tmpfs;        /* 1: on tmpfs (or ramfs); 0: on another file system (works, but each
                         change is written back to its disk); -1: unknown */
    int64_t fs_type;  /* the file system's statfs(2) f_type */
    uint64_t fs_size; /* its size in bytes (0: unknown) */
    uint64_t fs_free; /* bytes free for unprivileged users */
    int exists;       /* something has the name */
    int table;        /* SHL_OK: a table of this build; SHL_EVERSION: another build's;
                         SHL_ECORRUPT: not a table; SHL_EPERM: not a regular file,
                         or not readable by this user; SHL_ENOENT: nothing */
    uid_t uid;        /* the file's owner, permission bits and size */
    mode_t mode;
    uint64_t file_size;
    int open; /* 1: some handle has the table open; 0: none (an orphaned
                 table: nobody uses it through the library); -1: unknown */
} shl_place;

/* Fills *p about the table `name` (as shl_open() names it) without opening
 * it as a table: nothing is locked, written or created. SHL_OK (what cannot
 * be learnt stays 0 or -1), SHL_EINVAL (bad name, NULL p), SHL_ENOTSUP (an
 * etcd table). */
SHL_API int shl_place_get(const char *name, shl_place *p);

/** @defgroup leases Leases */

/* Acquires `lease` for `owner` for ttl_ns nanoseconds; *token receives the
 * new token. The lease's name is added to the table on first use.
 * On a table created with SHL_POLICY_RECLAIM_ORPHANS, an unexpired lease
 * whose holder is proven dead (see SHL_STATE_ORPHANED) is taken over too,
 * with the next token, once reclaim_delay_ms have passed since the first
 * acquire that saw the death (that acquire gets SHL_EBUSY and starts the
 * delay; a waiter's look in shl_acquire_wait() does the same). Only a
 * refused acquire or a waiter on such a table asks (one fcntl; see
 * Caveats); with a reclaim delay of 1 s or more, a handle asks about the
 * same live holder at most once per 10 ms (a death is then first seen at
 * most 10 ms late), so that a polling loop costs what it does without the
 * policy.
 * SHL_EBUSY: held by another (or the same) owner and unexpired.
 * SHL_EINVAL: bad name or owner, ttl 0, now + ttl overflows, NULL token.
 * SHL_EFULL: the name is new and the table has no free slot.
 * SHL_ETOKENS: the lease has issued its last token (2^40 per lease on a table
 * with a token floor, see below; 2^64 - 1 otherwise). Nothing changed. */
SHL_API SHL_NODISCARD int shl_acquire(shl_table *t, const char *lease, const char *owner,
                                      uint64_t ttl_ns, uint64_t *token);

/* Renews a valid lease: expiry = now + ttl_ns. SHL_ELOST when not valid. */
SHL_API SHL_NODISCARD int shl_renew(shl_table *t, const char *lease, const char *owner,
                                    uint64_t token, uint64_t ttl_ns);

/* Releases a valid lease; the token is kept, the next acquire gets token + 1.
 * SHL_ELOST when not valid. */
SHL_API SHL_NODISCARD int shl_release(shl_table *t, const char *lease, const char *owner,
                                      uint64_t token);

/* Replaces the lease's value with len bytes of buf, if and only if the lease
 * is valid for (owner, token) at the moment of the write. All or nothing: a
 * crash leaves the previous value or the new one, never a mix.
 * SHL_ELOST (nothing written), SHL_E2BIG (len > value size), SHL_EINVAL. */
SHL_API SHL_NODISCARD int shl_write(shl_table *t, const char *lease, const char *owner,
                                    uint64_t token, const void *buf, size_t len);

/* Reads the value without taking the lease's lock (a consistent snapshot).
 * *len receives the value's length and *token the token that wrote it (0 if
 * never written); either may be NULL. SHL_E2BIG when cap < length (*len is
 * set, buf untouched). SHL_ENOENT when the lease was never used. */
SHL_API SHL_NODISCARD int shl_read(shl_table *t, const char *lease, void *buf, size_t cap,
                                   size_t *len, uint64_t *token);

typedef void (*shl_guard_fn)(void *arg);

/* Runs fn(arg) under the lease's lock after the owner/token/expiry check
 * passed, so that its effect is atomic with the check. fn must be short, must
 * not call shmlease on the same lease, and must not block. SHL_ELOST: fn was
 * not called. SHL_ENOTSUP on an etcd table: no callback can be atomic with a
 * remote check (use shl_write() or shl_update()). */
SHL_API SHL_NODISCARD int shl_guard(shl_table *t, const char *lease, const char *owner,
                                    uint64_t token, shl_guard_fn fn, void *arg);

/* Read-modify-write of the value under the check: fn receives a private copy
 * of the current value and its length in *len, with room for cap bytes (the
 * table's value size, at most SHL_UPDATE_MAX), may change both, and returns
 * 0 to commit or non-zero to leave everything unchanged (then SHL_ECANCELED;
 * also when it sets *len > cap). Committed whole or not at all.
 * SHL_ELOST: fn was not called. SHL_E2BIG: the current value is longer than
 * SHL_UPDATE_MAX. */
#define SHL_UPDATE_MAX 4096
typedef int (*shl_update_fn)(void *value, size_t *len, size_t cap, void *arg);
SHL_API SHL_NODISCARD int shl_update(shl_table *t, const char *lease, const char *owner,
                                     uint64_t token, shl_update_fn fn, void *arg);

/** @defgroup state Lease state */
#define SHL_STATE_FREE     0 /* never held, or released */
#define SHL_STATE_HELD     1 /* held and unexpired */
#define SHL_STATE_EXPIRED  2 /* the holder's time has run out; acquirable */
#define SHL_STATE_REVOKED  3 /* ended by an administrator; acquirable */
#define SHL_STATE_ORPHANED 4 /* held and unexpired, but the holder is proven dead (Caveats) */

typedef struct shl_lease_info {
    char owner[SHL_OWNER_MAX + 1]; /* last holder ("" if never held) */
    uint64_t token;                /* the lease's current token (0: never acquired) */
    uint64_t expiry_ns;            /* table clock at which the holder's time ends */
    uint64_t remaining_ns;         /* expiry - now when HELD or ORPHANED, else 0 */
    uint64_t now_ns;               /* table clock when the state was taken */
    uint64_t since_ns;             /* table clock of the acquisition */
    int32_t pid;                   /* holder's pid (0 if never held) */
    int state;                     /* SHL_STATE_* */
    uint32_t waiters;              /* processes waiting to acquire */
    uint32_t value_len;
    uint64_t value_token; /* token that wrote the value (0: never written) */
    uint32_t shared;      /* valid shared holders (see Shared leases); a busy
                             acquire with shared > 0 was refused by them, and
                             owner .. pid describe one of them */
    uint32_t reserved_;
} shl_lease_info;

/* As shl_acquire(); when the result is SHL_EBUSY and holder != NULL, *holder
 * receives the holder, its token and the remaining time, as seen at the moment
 * of refusal. */
SHL_API SHL_NODISCARD int shl_acquire_ex(shl_table *t, const char *lease, const char *owner,
                                         uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder);

/* A consistent snapshot of the lease's state, without taking its lock.
 * SHL_ENOENT when the lease was never used. ORPHANED is reported only when
 * the kernel proves the holder's handle closed (see Caveats). */
SHL_API int shl_stat(shl_table *t, const char *lease, shl_lease_info *info);

/** @defgroup shared Shared leases: many readers or one writer
 *
 * A lease is held either by one exclusive holder (shl_acquire()) or by up to
 * SHL_SHARED_MAX shared holders at once (shl_acquire_shared()), never by
 * both. Every acquisition of either kind takes the next token of the
 * lease's one counter (rule 2: never reused or lowered), so a shared holder
 * has a token of its own, and also its `gen`: the token of the lease's last
 * exclusive acquisition before it (0 if none; on a table created with a
 * token floor, at least the floor, which is above every token of the
 * earlier tables). With t the table's clock in
 * the lease's critical section:
 *
 *  S1. shl_acquire_shared() succeeds iff there is no valid exclusive holder,
 *      no writer is queued (a waiter in shl_acquire_wait(), not proven
 *      dead, unless the lease has lain free of every holder for a whole
 *      SHL_WAIT_TURN_GRACE_NS: that writer does not take its turn), the
 *      owner is not already a valid shared holder of the lease, and fewer
 *      than SHL_SHARED_MAX shared holders are valid. Then a new shared
 *      holder (owner, token = counter + 1, expiry = t + ttl) is added.
 *  S2. shl_acquire() additionally requires that no shared holder is valid
 *      (t < its expiry; equality is expired).
 *  S3. valid(owner, token) of a shared holder <=> it was acquired with that
 *      (owner, token), was not released or revoked since, and t < expiry.
 *      shl_renew() and shl_release() take (owner, token) of either kind;
 *      releasing one shared holder leaves the others. shl_write(),
 *      shl_update() and shl_guard() need the exclusive holder: a shared
 *      holder's token gets SHL_ELOST and nothing changes (rule 4).
 *  S4. shl_revoke() ends every holder of the lease, of both kinds.
 *  S5. A shared holder's handle proven closed is dead (see
 *      SHL_STATE_ORPHANED); on a table with SHL_POLICY_RECLAIM_ORPHANS its
 *      entry is reclaimed after the reclaim delay, by an exclusive acquire it
 *      blocks, a shared acquire that finds every entry taken, or repair.
 *
 * Each shared acquisition is one intent of the lease (shm/layout.h), rolled
 * forward when its process dies inside it; renew and release are one store.
 * An exclusive acquire on a lease that has no shared holder pays one load
 * more than before.
 *
 * etcd tables: S1-S4 hold there too, etcd enforcing them with t = etcd's
 * lease clock. A shared holder is a key of its own, "s/<lease> <token>",
 * attached to an etcd lease of its own ttl (whole seconds, rounded up as
 * for shl_acquire()): it is valid while that key exists, and disappears
 * with its etcd lease at expiry, release or revoke. A shared acquire is
 * one transaction comparing: no exclusive holder record, the lease's token
 * record equal to the value read with the shared holders and the gen record
 * (so no acquisition of either kind came in between and the owner and
 * SHL_SHARED_MAX checks still hold), and no writer queued (no key under
 * "w/<lease> "); it puts its key and the token + 1. An exclusive acquire
 * also compares "no key in s/<lease> " (a range compare, etcd 3.3 and later) and
 * puts the gen record, the token of the last exclusive acquisition. Renew
 * is a keep-alive of the holder's etcd lease and a compare proving its key
 * is still on it (a new ttl moves the key to a new one), release deletes
 * the key under that compare, revoke revokes the etcd lease; no client's
 * clock decides. An
 * exclusive waiter in shl_acquire_wait() blocked by readers watches their
 * keys. S5 (orphans) does not apply: a dead reader's hold ends at its ttl.
 * shl_acquire_shared_wait() queues a reader under a key of its own,
 * "r/<lease> <id>", on its own etcd lease kept alive while it waits, in
 * one queue with the writers' "w/<lease> <id>" (by create revision); its
 * acquire's transaction compares, instead of "no writer queued", that every
 * writer key was created after its own (or none exists) and that its own
 * key is still there. A writer waits for the waiter keys of both kinds
 * ahead of it, then for the shared holders' keys. Not on etcd tables
 * (SHL_ENOTSUP): shl_guard_shared() (no callback can be atomic with a
 * remote check).
 */
#define SHL_SHARED_MAX 32 /* shared holders per lease */

/* Acquires `lease` shared for `owner` for ttl_ns nanoseconds (S1): *token
 * receives its own new token and *gen (if gen != NULL) the token of the
 * last exclusive acquisition before it, 0 if none (at least the token
 * floor on a table that has one: a fence that admitted the earlier table's
 * writers admits the reader); give gen to
 * shl_fence_admit_read(). The name is added on first use, as by
 * shl_acquire().
 * SHL_EBUSY: a valid exclusive holder, a queued writer, the owner already
 * holds it shared, or SHL_SHARED_MAX valid shared holders. SHL_EFULL: as
 * for shl_acquire(), or the holder needs a group of the table's reader pool
 * (shl_options.max_shared) and none is free ("reader pool" in
 * shl_last_error(); nothing changed). SHL_EINVAL, SHL_ETOKENS as for
 * shl_acquire(); SHL_EUNAVAIL on an etcd table. */
SHL_API SHL_NODISCARD int shl_acquire_shared(shl_table *t, const char *lease, const char *owner,
                                             uint64_t ttl_ns, uint64_t *token, uint64_t *gen);

/* As shl_acquire_shared(); on SHL_EBUSY with holder != NULL, *holder
 * receives what was in the way: the exclusive holder, or (holder->shared >
 * 0) one shared holder (the owner's own entry when that was the reason). */
SHL_API SHL_NODISCARD int shl_acquire_shared_ex(shl_table *t, const char *lease, const char *owner,
                                                uint64_t ttl_ns, uint64_t *token, uint64_t *gen,
                                                shl_lease_info *holder);

/* As shl_acquire_wait() (timeout, signals, manual clocks), for a shared
 * acquisition. Fairness bound, with the exclusive one stated there: waiters
 * of both kinds share one queue in arrival order. When the lease has no
 * exclusive holder, every queued reader that arrived before the oldest
 * queued writer goes in, together (each as soon as it runs); readers that
 * arrive after a queued writer (waiting or not) wait behind it. A writer
 * goes in when it is the longest waiting, and no holder of either kind is
 * valid. So a writer with k waiters ahead of it acquires after at most k
 * other waiting acquisitions (a run of readers ahead of it is let in
 * together, ending when the last of them releases or expires), and a reader
 * with w writers ahead of it acquires after at most those w exclusive
 * acquisitions. The exceptions are those of shl_acquire_wait(): plain
 * acquires (a plain shared acquire also waits behind queued writers), a
 * turn not taken within SHL_WAIT_TURN_GRACE_NS, a full queue, and
 * SHL_SHARED_MAX (a reader that finds every entry valid waits for one to
 * end).
 * On an etcd table the same bound holds with etcd's queue (see Shared
 * leases): arrival order is the create revision of the waiter's key; there
 * is no queue length bound and no turn grace; instead a waiter that dies,
 * or is stopped for longer than 3 s, loses its place when its waiter key's
 * etcd lease runs out (a stopped one queues again, at the back, when it
 * resumes), so it holds the queue up for 3 s at most. A reader that finds
 * no exclusive holder and no writer queued goes in without queueing
 * (queued, it would have had nobody ahead to wait for). Waits use
 * watches, not polling: a reader is woken by the holder's, the writer
 * ahead's or a shared holder's key going.
 * SHL_ETIMEDOUT (nothing left queued), and the codes of
 * shl_acquire_shared(). */
SHL_API SHL_NODISCARD int shl_acquire_shared_wait(shl_table *t, const char *lease,
                                                  const char *owner, uint64_t ttl_ns,
                                                  uint64_t timeout_ns, uint64_t *token,
                                                  uint64_t *gen);

/* Runs fn(arg) under the lease's lock if the shared holder (owner, token)
 * is valid at that moment (S3): a read of something outside the segment that
 * must be atomic with the check (while fn runs, no writer can acquire). The
 * exclusive holder's token is refused here (use shl_guard()). fn as for
 * shl_guard(). SHL_ELOST: fn was not called. SHL_ENOTSUP on an etcd table:
 * no callback can be atomic with a remote check. */
SHL_API SHL_NODISCARD int shl_guard_shared(shl_table *t, const char *lease, const char *owner,
                                           uint64_t token, shl_guard_fn fn, void *arg);

/** @defgroup clock Clock */

/* The table's clock now, in ns (CLOCK_MONOTONIC, or the manual value). */
SHL_API int shl_now(shl_table *t, uint64_t *now_ns);

/* Sets a MANUAL table's clock. Equal is accepted; earlier is SHL_ECLOCK.
 * SHL_EINVAL on a monotonic table. */
SHL_API int shl_clock_set(shl_table *t, uint64_t now_ns);

/** @defgroup bound Bound leases: the name and the owner resolved once
 *
 * For a program that works on the same lease as the same owner many times:
 * shl_lease_open() validates the lease name and the owner, looks the name up
 * (adding it, as a first shl_acquire() would) and keeps the result, so that
 * each shl_lease_* call goes straight to the lease's critical section without
 * hashing or probing. Results and semantics are exactly those of the
 * name-taking call of the same name; only the per-call lookup is gone.
 *
 * A bound lease belongs to its table handle: close it before shl_close() of
 * that table, and do not use it after fork() (its calls return SHL_EFORK in a
 * child, like the table's). Any number of threads may use one at once. It
 * keeps the lease's slot, which never moves. When shl_repair() finds a name
 * in two slots and retires one, every shl_lease_* call (acquire, renew,
 * release, write, guard, read) follows the name to the slot that kept it,
 * with the result the name-taking call would give, and keeps that slot.
 * Following costs the calls nothing until it happens.
 *
 * The name-taking calls do part of this on their own: each thread remembers
 * the slots of the last lease names it used (8 entries, about 1 KiB per
 * thread), so a name it used a moment ago, equal byte for byte, skips the
 * hash and the probe; the owner is still checked on every call. A name that
 * is not remembered costs the lookup plus a few nanoseconds to remember it.
 */
typedef struct shl_lease shl_lease; /* opaque: (table, lease, owner) */

/* Binds (t, lease, owner) into *out. The lease's name is added to the table
 * if it was never used (no lease is acquired).
 * SHL_EINVAL: bad name or owner, NULL out. SHL_EFULL: the name is new and the
 * table has no free slot. SHL_ENOMEM. SHL_EFORK, SHL_EBROKEN, SHL_ESYS as for
 * shl_acquire(). On error *out is NULL. */
SHL_API SHL_NODISCARD int shl_lease_open(shl_table *t, const char *lease, const char *owner,
                                         shl_lease **out);

/* Frees a bound lease (NULL is accepted). The lease itself is untouched. */
SHL_API void shl_lease_close(shl_lease *l);

/* shl_acquire_ex() of the bound lease for the bound owner; holder may be NULL. */
SHL_API SHL_NODISCARD int shl_lease_acquire(shl_lease *l, uint64_t ttl_ns, uint64_t *token,
                                            shl_lease_info *holder);
/* shl_renew() of the bound lease. SHL_ELOST when not valid; SHL_EINVAL for a
 * ttl of 0, token 0, or an overflowing expiry. */
SHL_API SHL_NODISCARD int shl_lease_renew(shl_lease *l, uint64_t token, uint64_t ttl_ns);
/* shl_release() of the bound lease. SHL_ELOST when not valid. */
SHL_API SHL_NODISCARD int shl_lease_release(shl_lease *l, uint64_t token);
/* shl_write() of the bound lease: SHL_ELOST (nothing written), SHL_E2BIG,
 * SHL_EINVAL. */
SHL_API SHL_NODISCARD int shl_lease_write(shl_lease *l, uint64_t token, const void *buf,
                                          size_t len);
/* shl_guard() of the bound lease: SHL_ELOST means fn was not called. */
SHL_API SHL_NODISCARD int shl_lease_guard(shl_lease *l, uint64_t token, shl_guard_fn fn, void *arg);
/* shl_read() of the bound lease (lock-free snapshot): SHL_E2BIG, SHL_EINVAL.
 * Never SHL_ENOENT: the name exists once bound. */
SHL_API SHL_NODISCARD int shl_lease_read(shl_lease *l, void *buf, size_t cap, size_t *len,
                                         uint64_t *token);

/** @defgroup waiting Waiting for a lease, keeping it, and hearing of its loss
 *
 * shl_acquire_wait() sleeps (a futex on the lease, no polling, no
 * process-shared condition variable) until the lease can be taken. A renewer
 * (shl_renewer_start()) is a thread owned by the caller that keeps a lease
 * alive and says so, loudly and exactly once, when it could not: through a
 * callback, a pollable file descriptor and a sticky flag that its guarded
 * writes check.
 */

#define SHL_WAIT_FOREVER UINT64_MAX /* timeout for shl_acquire_wait(): no bound */
/* Queued waiters per lease (fairness holds up to this). Their entries come
 * from the table's waiter pool (shl_options.max_waiters), in groups of
 * SHL_WAITER_GROUP: a wait that must queue and finds no free group fails
 * at once with SHL_EFULL, "waiter pool" in shl_last_error(), never waits
 * for one (nor does a table created with max_waiters 0 queue at all). */
#define SHL_WAIT_QUEUE_LEN     32
#define SHL_WAIT_TURN_GRACE_NS UINT64_C(1000000000) /* a waiter's turn to take the lease */
/* A waiter looks at its table's name at least this often: a table removed by
 * something other than shl_unlink() (its name gone, or naming another file)
 * ends the wait with SHL_EREMOVED within this time (shl_table_check()). */
#define SHL_REMOVED_CHECK_NS UINT64_C(250000000)
#define SHL_WAIT_DOZE_NS     UINT64_C(20000000) /* a sleeping waiter looks this often */

/*
 * As shl_acquire(), but when the lease is held, waits until it can be taken
 * or timeout_ns (on CLOCK_MONOTONIC, SHL_WAIT_FOREVER for no bound) has
 * passed. The waiter sleeps on a futex tied to the lease: it is woken by
 * release and revoke, and sleeps no longer than the holder's expiry or its own
 * deadline, whichever comes first. A process that frees the lease and dies
 * before its wake-up (killed between its unlock and the wake system call, or
 * inside the lease's critical section) delays the waiter by at most
 * SHL_WAIT_DOZE_NS: a sleeping waiter looks at the lease's words that often,
 * without locking, and goes in when they changed. On a table with
 * SHL_POLICY_RECLAIM_ORPHANS a holder proven dead keeps the waiter out only
 * as long as it keeps out shl_acquire(): the waiter's look starts the
 * reclaim delay if it is the first to see the death (a holder that dies while
 * the waiter sleeps is seen within SHL_WAIT_DOZE_NS), it sleeps no longer
 * than the end of that delay, and then reclaims the lease as shl_acquire()
 * does (next token, SHL_OP_RECLAIM); a live holder, even a stopped one, is
 * waited for. A queued waiter whose turn came and who died before taking
 * the lease hands the turn on within SHL_WAIT_DOZE_NS of its death (a live
 * one, even stopped, keeps its turn for SHL_WAIT_TURN_GRACE_NS). A table
 * removed while the waiter sleeps ends the wait with
 * SHL_EREMOVED: at once after shl_unlink(), within SHL_REMOVED_CHECK_NS after
 * a removal by anything else. A reader waiting in
 * shl_acquire_shared_wait() treats a dead exclusive holder, and a writer a
 * dead shared holder, the same way. Signals do not end the wait (EINTR is
 * absorbed, the deadline is absolute). On a SHL_CLOCK_MANUAL table the
 * holder's expiry is not on the real clock, so the waiter looks again every
 * 10 ms as well.
 *
 * Fairness bound. Waiters queue in arrival order (up to SHL_WAIT_QUEUE_LEN
 * per lease). When the lease becomes free, by release, revoke, expiry or a
 * dead holder's reclaim coming due, only the longest-waiting queued waiter
 * may take it; a waiter that comes back
 * after releasing queues behind everyone already waiting. So a waiter with k
 * waiters ahead of it acquires after at most k other waiting acquisitions
 * (each lasting as long as that holder keeps the lease): with N waiters
 * competing in a loop, every one acquires at least once in every N
 * consecutive acquisitions. Exceptions, each bounded: a plain shl_acquire()
 * does not queue and may take a free lease before the next waiter does; a
 * queued waiter that does not take its turn within SHL_WAIT_TURN_GRACE_NS
 * (stopped, or not scheduled) is passed over and sent to the back of the
 * queue; beyond SHL_WAIT_QUEUE_LEN waiters the extra ones are not queued, look
 * again every 10 ms, and take a place as one frees up.
 *
 * A waiter killed while waiting leaves nothing behind: its queue entry names
 * its handle, the next waiter to look drops it once the kernel proves that
 * handle closed (see Caveats), and shl_stat() never counts it. A waiter
 * passed over keeps its one entry, with a new place at the back.
 *
 * timeout_ns 0 tries once. Errors: SHL_ETIMEDOUT (not acquired in time;
 * nothing changed), SHL_EFULL (it had to queue and the waiter pool has no
 * free group; see SHL_WAIT_QUEUE_LEN), and those of shl_acquire() except
 * SHL_EBUSY.
 */
SHL_API SHL_NODISCARD int shl_acquire_wait(shl_table *t, const char *lease, const char *owner,
                                           uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token);

/* Why a renewer declared its lease lost (shl_renewer_lost(), the callback). */
/* The table refused a renewal or a write: revoked, expired and taken, or
 * released by someone else. */
#define SHL_LOSS_REFUSED 1
/* No renewal succeeded before expiry minus the safety margin (a stalled or
 * paused process). */
#define SHL_LOSS_DEADLINE 2
/* The bounded total hold time was reached; the renewer then released the
 * lease. */
#define SHL_LOSS_MAX_HOLD 3
/* The table was removed under the lease: by shl_unlink() (seen at once), or
 * by anything else (its name gone or naming another file, seen within one
 * renewal interval; see shl_table_check()). A new table may exist under the
 * name, with tokens that do not continue this one's. */
#define SHL_LOSS_REMOVED 4

typedef struct shl_renewer shl_renewer; /* opaque */

/* The shortest ttl a renewer keeps: it renews every ttl / 3 and declares
 * the loss ttl / 10 before the expiry, and below 10 ms those are shorter
 * than the scheduling delays of a loaded host, so it would report losses
 * that only a late wake-up caused. Shorter is SHL_EINVAL. */
#define SHL_RENEWER_TTL_MIN SHL_MS(10)

/* Called once, on the renewer's thread, when the lease is declared lost. It
 * must not call shl_renewer_stop() on the same renewer. */
typedef void (*shl_loss_fn)(void *arg, int reason);

typedef struct shl_renewer_options {
    uint64_t interval_ns; /* between renewals; 0: ttl / 3 */
    uint64_t margin_ns;   /* loss is declared this long before the expiry that
                             the last successful renewal secured; 0: ttl / 10 */
    uint64_t max_hold_ns; /* total hold time from shl_renewer_start(); 0: none */
    shl_loss_fn on_loss;  /* may be NULL */
    void *arg;            /* passed to on_loss */
} shl_renewer_options;

/* Fills the defaults (all zero: interval ttl/3, margin ttl/10, no bound). */
SHL_API void shl_renewer_options_init(shl_renewer_options *o);

/*
 * Starts a thread that keeps (lease, owner, token), already acquired with
 * ttl_ns, alive: it renews with ttl_ns every interval and records a heartbeat
 * in the segment (shl_heartbeat_get()). The lease is declared lost at the
 * first of: a renewal refused (SHL_LOSS_REFUSED; a revoke is noticed at once,
 * not at the next renewal, because revoke wakes the renewer); the local
 * deadline, i.e. the time the last successful renewal started plus ttl_ns
 * minus the margin, passing without a newer success (SHL_LOSS_DEADLINE); the
 * hold bound minus the margin (SHL_LOSS_MAX_HOLD, then the lease is
 * released); the table removed (SHL_LOSS_REMOVED: at once after
 * shl_unlink(), which wakes the renewer; within one interval after a
 * removal by anything else, which the renewer looks for before each
 * renewal with the two system calls of shl_table_check()). Loss is reported exactly once each way:
 * on_loss(arg, reason) on the renewer's thread, the descriptor shl_renewer_fd() becoming readable,
 * and the sticky shl_renewer_lost(). After loss the thread renews no more.
 *
 * The renewer holds `t` by pointer: close the table only after
 * shl_renewer_stop(). Monotonic tables only. A renewal, like any operation,
 * waits for the lease's lock: if another process stops inside it, the
 * renewer's thread waits too, and the loss is then declared by the first
 * shl_renewer_check() or shl_renewer_write() past the local deadline (both
 * read only the clock and the flag), the callback once the thread resumes.
 *
 * Errors: SHL_EINVAL (bad arguments, ttl_ns below SHL_RENEWER_TTL_MIN, a
 * manual-clock table, margin >= ttl,
 * interval >= ttl - margin, or max_hold_ns shorter than the margin),
 * SHL_ELOST (the lease is not valid for (owner, token) now), SHL_ENOMEM,
 * SHL_ESYS (no eventfd or thread). On error nothing was started.
 */
SHL_API SHL_NODISCARD int shl_renewer_start(shl_table *t, const char *lease, const char *owner,
                                            uint64_t token, uint64_t ttl_ns,
                                            const shl_renewer_options *o, shl_renewer **out);

/* An eventfd (close-on-exec, non-blocking) that becomes readable, with the
 * count 1, when the lease is declared lost. Owned by the renewer. -1 for
 * NULL; SHL_EFORK in a forked child (the descriptor is the parent's). */
SHL_API int shl_renewer_fd(const shl_renewer *r);

/* 0 while the lease is believed held, else its SHL_LOSS_* reason (sticky).
 * Does not read the clock: see shl_renewer_check(). SHL_EFORK in a forked
 * child: the renewer's thread runs in the parent only. */
SHL_API int shl_renewer_lost(const shl_renewer *r);

/* SHL_OK if the lease is still held as far as this process can tell: not
 * declared lost, the table not marked removed (SHL_LOSS_REMOVED) and the
 * local deadline not passed. Otherwise declares the loss
 * (if not yet done) and returns SHL_ELOST. Use it before an effect outside the
 * segment (and pass the token along so the resource can fence it).
 * SHL_EINVAL for NULL; SHL_EFORK in a forked child (the lease is the
 * parent's). */
SHL_API SHL_NODISCARD int shl_renewer_check(shl_renewer *r);

/* A guarded write through the renewer: shl_renewer_check(), then
 * shl_write(), which the segment checks again. SHL_ELOST (nothing written; a
 * refusal by the segment also declares the loss), and the errors of
 * shl_write(). */
SHL_API SHL_NODISCARD int shl_renewer_write(shl_renewer *r, const void *buf, size_t len);

/* The token the renewer keeps alive (0 for NULL and in a forked child). */
SHL_API uint64_t shl_renewer_token(const shl_renewer *r);

#define SHL_RENEWER_RELEASE 1u /* shl_renewer_stop(): also release the lease */

/* Stops the thread (waits for it, and for a loss callback in progress), then
 * with SHL_RENEWER_RELEASE releases the lease if it was not lost, and frees
 * everything, the descriptor included. SHL_OK, or SHL_ELOST when the lease was
 * lost (declared, or refused by the release). NULL is accepted (SHL_OK).
 * In a forked child: SHL_EFORK, and only the child's copy is freed (its
 * descriptor closed); the parent's thread, heartbeat and lease are
 * untouched. */
SHL_API int shl_renewer_stop(shl_renewer *r, unsigned flags);

typedef struct shl_heartbeat {
    uint64_t token;       /* token of the lease the renewer keeps (0: none) */
    uint64_t beat_ns;     /* table clock of its last successful renewal */
    uint64_t interval_ns; /* its renewal interval */
    uint64_t age_ns;      /* now - beat_ns */
    int stalled;          /* the lease is held and valid with that token, but
                             the renewer has missed two renewals */
} shl_heartbeat;

/* The heartbeat of the lease's renewer, lock-free. SHL_ENOENT when the lease
 * was never used; SHL_EINVAL. hb->token is 0 when no renewer runs for it. */
SHL_API int shl_heartbeat_get(shl_table *t, const char *lease, shl_heartbeat *hb);

/** @defgroup election Leader election
 *
 * An election is one lease of a table, of either kind: its name is the
 * election's (the rules of lease names apply, and no other program should
 * use that lease for anything else), its exclusive holder is the leader, a
 * candidate's id is the owner it holds the lease as, and the leader's token
 * is the lease's token: the fencing token of its term. The proclaimed value
 * (the leader's address, say) is the lease's value, written with the
 * leader's token, so the table refuses it once the term is over. These
 * calls are a client of the lease calls above and mean the same on
 * shared-memory and etcd tables.
 *
 * What an election guarantees, and what it does not:
 *  - One leader at a time *as the table sees it*: at any moment of the
 *    table's clock at most one candidate holds the lease, and every term
 *    has a token above every earlier term's. A leader paused past its ttl
 *    (or cut off from the cluster) may still believe it leads until its
 *    renewer declares the loss (ttl / 10 before the expiry, by default); in
 *    that window it must not act outside the table without its token: pass
 *    the token to the resource it changes and let that refuse older ones
 *    (a fence: shl_fence_admit()). Its proclaim is refused by the table.
 *  - Candidates take turns in the fair order of shl_acquire_wait(); a
 *    leader that resigns hands over at once, one whose lease expires hands
 *    over at the expiry, and one proven dead (shared-memory tables with
 *    SHL_POLICY_RECLAIM_ORPHANS) after the table's reclaim delay.
 *  - The leader keeps its lease with a renewer (shl_renewer_start()); its
 *    loss is reported as the renewer reports it: ro->on_loss, the
 *    descriptor shl_election_fd() and the sticky shl_election_lost().
 *  - Observers (shl_election_observe()) see leaders in increasing token
 *    order and always end on the current one; they may miss a term only as
 *    stated there.
 *
 * A candidate handle is used by one thread at a time. It belongs to its
 * table handle: close it before shl_close(), and not in a forked child
 * (its calls then return SHL_EFORK, as the table's).
 */
typedef struct shl_election shl_election; /* opaque: (table, election, candidate id) */

/* A snapshot of an election's leader. */
typedef struct shl_leader {
    char id[SHL_OWNER_MAX + 1]; /* the leader's candidate id */
    uint64_t token;             /* its token: the fencing token of its term */
    uint64_t remaining_ns;      /* time left on its lease when looked at */
    int32_t pid;                /* its pid (0 when the table does not keep it) */
    int state;                  /* SHL_STATE_HELD, or SHL_STATE_ORPHANED (holder
                                   proven dead, lease not yet reclaimed) */
    int proclaimed;             /* 1 when the value was written in this term (by
                                   this token), 0 before its first proclaim */
    uint32_t value_len;         /* length of that value (0 when not proclaimed) */
} shl_leader;

/* How often shl_election_observe() looks at the election: on a
 * shared-memory table (a lock-free snapshot, no system call) and on an etcd
 * table (a transaction and a look at the holder's etcd lease per look). */
#define SHL_ELECTION_POLL_NS      SHL_MS(5)
#define SHL_ELECTION_POLL_ETCD_NS SHL_MS(100)

/* Opens candidate `id` (an owner: SHL_OWNER_MAX bytes of printable ASCII) in
 * the election `election` of table `t`. Nothing is written. SHL_EINVAL for bad
 * names or NULLs, SHL_ENOMEM, SHL_EFORK. On error *out is NULL. Close with
 * shl_election_close(). */
SHL_API SHL_NODISCARD int shl_election_open(shl_table *t, const char *election, const char *id,
                                            shl_election **out);

/* Resigns if leader (as shl_election_resign()), then frees. NULL is accepted. */
SHL_API void shl_election_close(shl_election *e);

/* Blocks until this candidate leads or timeout_ns passes (UINT64_MAX: no
 * limit; 0: one try), in the fair order of shl_acquire_wait(). On success the
 * candidate leads: `value` (len bytes, may be 0) is proclaimed with its token
 * before the call returns, a renewer keeps the lease with ttl_ns (`ro` as for
 * shl_renewer_start(), NULL for defaults; its on_loss reports the loss), and
 * *token receives the leader's token.
 * A handle whose previous term was lost may campaign again (the lost term's
 * renewer is stopped first).
 * SHL_ETIMEDOUT (nothing changed), SHL_EBUSY when this handle already leads,
 * SHL_E2BIG (value longer than the table's value size; checked before
 * waiting), SHL_EINVAL (NULL token, NULL value with len > 0, ttl_ns below
 * SHL_RENEWER_TTL_MIN, a manual-clock table: checked before waiting), the
 * errors of shl_acquire_wait() and shl_renewer_start(), and SHL_ELOST when
 * the term ended before its first proclaim landed (a pause longer than the
 * ttl right after the acquisition). On every error this handle does not
 * lead and holds nothing (a lease acquired on the way is released). */
SHL_API SHL_NODISCARD int shl_election_campaign(shl_election *e, uint64_t ttl_ns,
                                                uint64_t timeout_ns, const void *value, size_t len,
                                                const shl_renewer_options *ro, uint64_t *token);

/* The token of this handle's current term, 0 when it does not lead (never
 * campaigned, resigned, or the loss was declared). */
SHL_API uint64_t shl_election_token(const shl_election *e);

/* As shl_renewer_fd(), shl_renewer_lost() and shl_renewer_check() for the
 * renewer of the current term: -1 / 0 / SHL_ELOST when not leading. A lost
 * term stays the current one (its descriptor readable, its reason sticky)
 * until shl_election_resign(), the next campaign or shl_election_close(). */
SHL_API int shl_election_fd(const shl_election *e);
SHL_API int shl_election_lost(const shl_election *e);
SHL_API SHL_NODISCARD int shl_election_check(shl_election *e);

/* Replaces the proclaimed value, fenced by the leader's token (the table
 * refuses it once the term is over: SHL_ELOST, nothing written; so does
 * the renewer's local deadline, as for shl_renewer_write()). SHL_E2BIG,
 * SHL_EINVAL when not leading (or NULL value with len > 0). */
SHL_API SHL_NODISCARD int shl_election_proclaim(shl_election *e, const void *value, size_t len);

/* Ends the term: stops the renewer and releases the lease, so that the next
 * candidate in line leads at once. SHL_OK; SHL_ELOST when the term had
 * already been lost (a renewer declares the loss a margin before the
 * expiry: if the table still holds the lease for the term's token, it is
 * released all the same); SHL_EINVAL when not leading.
 * Either way the handle no longer leads and may campaign again. */
SHL_API int shl_election_resign(shl_election *e);

/* The current leader of `election` (no candidate handle needed): *l filled
 * and, when value != NULL, up to cap bytes of the proclaimed value copied
 * (SHL_E2BIG when cap is smaller; *l is filled). SHL_ENOENT when there is no
 * leader now (never led, resigned, expired or revoked: a lease whose time
 * is up is never reported). A leader proven dead whose lease is not yet
 * reclaimed is reported with state SHL_STATE_ORPHANED. The value is one
 * that the reported term proclaimed (with its token); a later proclaim of
 * that term may already have replaced it. Lock-free on a shared-memory table;
 * on an etcd table two or three requests. SHL_EINVAL, SHL_EFORK, SHL_EREMOVED
 * and the errors of shl_stat() and shl_read() (on an etcd table that was
 * removed: SHL_ENOENT, as etcd's reads do not compare the table's
 * incarnation). */
SHL_API int shl_election_leader(shl_table *t, const char *election, shl_leader *l, void *value,
                                size_t cap);

/* Waits up to timeout_ns (UINT64_MAX: no limit; 0: one look) for a leader
 * whose token is above `after` (0: any leader), then fills *l (and the
 * value) as shl_election_leader() does. Called in a loop with `after` = the
 * last token seen, it reports leaders in increasing token order, never a
 * token at or below `after`, and always reaches the current leader.
 *
 * It looks at the election every SHL_ELECTION_POLL_NS (shared-memory
 * table) or SHL_ELECTION_POLL_ETCD_NS (etcd table), and reports a term only
 * once its leader has proclaimed (shl_election_campaign() proclaims before
 * it returns, so every term it starts is reported). So a leader is seen at
 * most one interval (plus the observer's scheduling delay) after its first
 * proclaim, and a term is skipped only when all of it, from its first
 * proclaim to its end, fell between two looks of the observer: when the
 * observer looked, a newer leader had already replaced it, or the election
 * had no leader. A term that ended before its first proclaim (its holder
 * died or lost the lease first), or a holder that took the lease without
 * proclaiming (shl_acquire()), is never reported by observe;
 * shl_election_leader() reports it, with proclaimed 0. A later proclaim
 * of a reported term is not reported again (read it with
 * shl_election_leader()).
 *
 * SHL_ETIMEDOUT, SHL_EREMOVED (a shared-memory table was removed: at once
 * after shl_unlink(), within SHL_REMOVED_CHECK_NS after a removal by
 * anything else; an etcd table that was removed looks like an election
 * never led, and is waited on to the timeout), SHL_E2BIG as
 * shl_election_leader(), the errors of shl_stat() (SHL_ENOENT excepted: an
 * election never led yet is waited for). */
SHL_API SHL_NODISCARD int shl_election_observe(shl_table *t, const char *election, uint64_t after,
                                               uint64_t timeout_ns, shl_leader *l, void *value,
                                               size_t cap);

/** @defgroup floor Persistent token floor
 *
 * A table's tokens live in its segment, so `shmlease rm` and a new creation,
 * or a reboot (which empties /dev/shm), start every lease over at token 1. A
 * resource outside the segment that remembers the largest token it saw (a
 * fence) would then refuse every new holder forever. A table created with
 * shl_options.token_state_path avoids that: every token it issues is higher
 * than every token issued by any earlier table created with the same file.
 *
 * How: the file holds an epoch, incremented once per table creation and
 * written durably before the table exists (a new temporary file
 * "<path>.tmp.XXXXXX", fsync, rename, fsync of the directory; concurrent
 * creators are serialised by flock(2) on "<path>.lock", which is left in
 * place). The table's floor is
 * epoch << SHL_TOKEN_EPOCH_BITS, kept in its header; acquire gives
 * max(token, floor) + 1. Nothing of this is on the hot path: an acquire makes
 * no system call more than without a floor.
 *
 * Limits:
 *  - A lease issues at most SHL_TOKEN_EPOCH_SPAN (2^40) tokens per table;
 *    beyond that shl_acquire() refuses with SHL_ETOKENS (re-create the table
 *    to get a new epoch).
 *  - At most 2^24 - 2 creations per state file (then SHL_ETOKENS at open).
 *  - The file must be on persistent storage (not /dev/shm or a tmpfs that a
 *    reboot empties), must not be deleted or restored from a backup, and
 *    must be the same file for every creation of the table: the guarantee is
 *    only as good as the file.
 *  - Only the creation reads the file; opening an existing table never does.
 *  - The file belongs in a directory that only its owner can write (not
 *    /tmp): whoever can write the directory can replace the file, and with
 *    it lower the floor, or hold its lock. What is planted there is refused
 *    rather than waited on: a state file or lock that is not a regular file
 *    (a FIFO, a symlink, a directory) is SHL_EPERM; temporary files are
 *    always new files under unique names. Files are made mode 0600 whatever
 *    the umask.
 */
#define SHL_TOKEN_EPOCH_BITS 40
#define SHL_TOKEN_EPOCH_SPAN (UINT64_C(1) << SHL_TOKEN_EPOCH_BITS)

/** @defgroup fence Fence register for resources outside the segment
 *
 * A lease's guarded writes (shl_write, shl_update, shl_guard) protect the
 * value inside the segment. A resource that lives elsewhere (a file, another
 * shared-memory region, a device) can protect itself with a fence register:
 * one 64-bit word kept in the resource's own memory, holding the largest
 * token it has admitted. The holder passes its token with every request; the
 * resource calls shl_fence_admit() before applying the request and refuses it
 * when the token is older than one already admitted.
 *
 * What a fence cannot do:
 *  - It notices staleness only after a newer token has arrived. A holder
 *    whose lease expired is still admitted for as long as nobody with a newer
 *    token has reached this resource: the fence does not know the lease's
 *    expiry and does not read any clock.
 *  - It makes the check atomic, not the effect. If two requests can be in
 *    flight at once, the resource must serialise "admit, then apply" (a lock
 *    of its own, flock(2) on a file, a single server thread); otherwise an
 *    old request admitted just before a newer one may still apply its effect
 *    after it.
 *  - Tokens are per lease: one fence protects a resource guarded by exactly
 *    one lease of one table. Tokens of a table that was removed and created
 *    again start over at 1, and the fence would refuse every new holder;
 *    create such tables with shl_options.token_state_path.
 *
 * The word needs no initialisation beyond zero (a zero-filled file or region
 * is a fence that admits every token). It must be 8-byte aligned; it is
 * accessed only with lock-free atomic operations, so it may live in memory
 * shared by any number of processes.
 */
typedef struct shl_fence {
    uint64_t word; /* largest admitted token; access only through shl_fence_* */
} shl_fence;

/* Sets the fence to `token` (0: admits everything). For a new resource only:
 * on a fence in use it may lower it and readmit old tokens. SHL_EINVAL when f
 * is NULL or not 8-byte aligned. */
SHL_API int shl_fence_init(shl_fence *f, uint64_t token);

/* Admits `token` iff token >= the fence, and raises the fence to it;
 * lock-free (one compare-and-swap loop), no system call. Equal tokens are
 * admitted again (the same holder's next request).
 * SHL_ESTALE: the fence already admitted a newer token; nothing changed.
 * SHL_EINVAL: f is NULL or misaligned, or token is 0 (never a real token). */
SHL_API SHL_NODISCARD int shl_fence_admit(shl_fence *f, uint64_t token);

/* For a reader of the resource: admits a read by a shared holder whose
 * gen (from shl_acquire_shared()) is `gen` iff gen >= the fence, that is,
 * iff the fence has admitted no writer token newer than the last exclusive
 * acquisition before that reader's. Never raises the fence (a load, no
 * write); gen 0 is accepted (it is admitted only while the fence is 0).
 * SHL_ESTALE: a writer that acquired after the reader's gen has already been
 * admitted here; what the reader would see may be newer than the state its
 * lease was taken against. SHL_EINVAL: f is NULL or misaligned.
 * What it promises: a reader that began before a writer the resource has
 * already let in is refused. What it does not: it says nothing about the
 * reader's own validity (expiry, release, revoke: guard the read with
 * shl_guard_shared() for that); it does not refuse a reader whose gen is
 * current while a writer that acquired after it has not reached the
 * resource yet (that writer cannot hold the lease while the reader is valid,
 * but a reader paused past its expiry is admitted until such a writer
 * arrives); and, as for shl_fence_admit(), "admit, then read" is atomic only
 * if the resource serialises it with its writers' "admit, then apply". */
SHL_API SHL_NODISCARD int shl_fence_admit_read(const shl_fence *f, uint64_t gen);

/* The largest token admitted so far (0: none). SHL_EINVAL as above. */
SHL_API int shl_fence_load(const shl_fence *f, uint64_t *token);

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

#ifdef __cplusplus
}
#endif
#endif
