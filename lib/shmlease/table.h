/*
 * shmlease/table.h - tables: the limits, the durations, the return codes and
 * shl_last_error(), the table options, and opening, closing, removing and
 * describing a table. Part of the public header: <shmlease.h> includes it,
 * inside its extern "C" block and after its attribute macros and the groups
 * before this one. A program includes <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/table.h>"
#define SHMLEASE_TABLE_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_TABLE_H
#define SHMLEASE_TABLE_H

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
    /* Spare value buffers of the whole table. A lease's value lives in its
     * own buffer or in a spare: a write goes into the one readers do not
     * use and is committed by one store, so that a write cut short leaves
     * the value whole. A lease takes a spare at its first write and keeps
     * it; when none is free, a write takes one back from a lease that
     * keeps one (its value copied into that lease's own buffer first, under
     * that lease's lock: a try, never a wait), so writes spread over more
     * leases than this pay that copy. SHL_POOL_DEFAULT (default): capacity
     * / 16, at least SHL_POOL_MIN, at most the capacity (one per lease at
     * most). 0: no lease can be written (SHL_EFULL). */
    uint32_t spare_values;
} shl_options;

/* shl_options.max_shared, .max_waiters, .spare_values: the default, from
 * the capacity. */
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
    /* Spare value buffers (shl_options.spare_values), and how many leases
     * keep one now. */
    uint32_t spare_values;
    uint32_t spare_values_taken;
    /* Since the table was created: how many times a lease needed a group
     * (a spare) when none was free and took back one that another lease
     * kept unused. A spare taken back costs that lease's write a copy of
     * the other's value: a count that keeps growing says spare_values is
     * smaller than the leases written. */
    uint64_t shared_taken_back;
    uint64_t waiters_taken_back;
    uint64_t spare_values_taken_back;
    /* Shared-memory tables (0 on etcd): the bytes of memory the table
     * takes now (its file's allocated blocks). Creation takes the header,
     * the index and the pools; each new name takes its slot (its history
     * and value buffer with it), so that `size` is what a full table
     * takes. */
    uint64_t allocated;
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
    /* The memory the file takes now (its allocated blocks): a table's
     * grows up to file_size as names are added (shl_table_info.allocated). */
    uint64_t file_allocated;
} shl_place;

/* Fills *p about the table `name` (as shl_open() names it) without opening
 * it as a table: nothing is locked, written or created. SHL_OK (what cannot
 * be learnt stays 0 or -1), SHL_EINVAL (bad name, NULL p), SHL_ENOTSUP (an
 * etcd table). */
SHL_API int shl_place_get(const char *name, shl_place *p);

#endif
