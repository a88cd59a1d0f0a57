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
 *  2. A token is per lease, starts at 1, strictly increases, and is never
 *     reused or lowered: not by release, expiry, revoke, crash recovery or
 *     repair. Token 0 is never valid.
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
 *
 * Caveats:
 *  - One host. The segment lives in /dev/shm; leases mean nothing across
 *    machines.
 *  - Same user, or the same group for a table created with mode 0660. A
 *    segment owned by another user, or with wider permissions than asked, is
 *    refused (SHL_EPERM) rather than trusted.
 *  - Same time namespace: CLOCK_MONOTONIC differs between time namespaces, so
 *    a process in another one is refused (SHL_ETIMENS).
 *  - Advisory for code that bypasses the library: anyone who can map the
 *    segment can write it. The guarantee is for writes made through shmlease.
 *  - fork(): a handle belongs to the process that opened it. In a child, every
 *    call but shl_close() returns SHL_EFORK; open the table again there.
 *  - Do not call shmlease on the same lease from inside an shl_guard() or
 *    shl_update() callback: the lease's mutex is held and is not recursive.
 *  - A process stopped (SIGSTOP) inside a critical section delays that one
 *    lease's writers until it resumes; readers (shl_read, shl_stat) are not
 *    blocked for long and fall back to waiting only if the stop happened in
 *    the middle of a change.
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
#define SHLEASE_VERSION_MAJOR 0
#define SHLEASE_VERSION_MINOR 1
#define SHLEASE_VERSION_PATCH 0
#define SHLEASE_VERSION_STRING "0.1.0"

/* The library's version at run time ("0.1.0"), for comparison with the
 * SHLEASE_VERSION_* macros a program was compiled with. */
SHL_API const char *shl_version(void);

/** @defgroup limits Limits */
#define SHL_NAME_MAX 63        /* lease name bytes: printable ASCII, no space */
#define SHL_OWNER_MAX 63       /* owner bytes: printable ASCII, space allowed */
#define SHL_TABLE_NAME_MAX 200 /* table (segment) name, without the leading '/' */
#define SHL_CAPACITY_MAX (1u << 24)
#define SHL_VALUE_MAX (1u << 20)

/** @defgroup errors Return codes
 * One table makes the enum, shl_strerror() and shl_errname(). */
#define SHL_ERRNO_MAP(XX)                                                                    \
    XX(OK, 0, "success")                                                                     \
    XX(EBUSY, -1, "lease is held by another owner and has not expired")                      \
    XX(ELOST, -2, "not the holder: lease expired, revoked, released, or stale token or owner") \
    XX(EINVAL, -3, "invalid argument")                                                       \
    XX(ECLOCK, -4, "manual clock cannot move backwards")                                     \
    XX(ENOENT, -5, "no such table or lease")                                                 \
    XX(EFULL, -6, "table is full")                                                           \
    XX(ECORRUPT, -7, "segment is corrupt or not a shmlease table")                           \
    XX(EVERSION, -8, "segment was made by an incompatible build")                            \
    XX(EPERM, -9, "segment belongs to another user or is more widely accessible than asked")  \
    XX(EEXIST, -10, "table already exists")                                                  \
    XX(E2BIG, -11, "value too large for the table or the buffer")                            \
    XX(ENOSPC, -12, "no space left for the segment")                                         \
    XX(ENOMEM, -13, "out of memory")                                                         \
    XX(ESYS, -14, "unexpected system error")                                                 \
    XX(ETIMENS, -15, "segment belongs to another time namespace")                            \
    XX(EBROKEN, -16, "a lock in the segment is unrecoverable: run shmlease repair")          \
    XX(EFORK, -17, "handle used after fork(): open the table again in the child")            \
    XX(ETIMEDOUT, -18, "timed out")                                                          \
    XX(EMISMATCH, -19, "table exists with another capacity, value size, mode or clock")      \
    XX(ECANCELED, -20, "callback declined: nothing changed")

enum shl_errno {
#define SHL__ERR_ENUM(name, code, msg) SHL_##name = (code),
    SHL_ERRNO_MAP(SHL__ERR_ENUM)
#undef SHL__ERR_ENUM
};

/* A fixed English message for `rc`; "unknown error" for any other value. */
SHL_API const char *shl_strerror(int rc);
/* The code's name, "SHL_EBUSY"; "SHL_UNKNOWN" for any other value. */
SHL_API const char *shl_errname(int rc);

/** @defgroup options Table options */
#define SHL_CLOCK_MONOTONIC 0 /* CLOCK_MONOTONIC, read inside each operation */
#define SHL_CLOCK_MANUAL 1    /* a value in the segment moved by shl_clock_set() */

#define SHL_CREATE 1u /* create the table if it does not exist */
#define SHL_EXCL 2u   /* with SHL_CREATE: fail with SHL_EEXIST if it exists */

#define SHL_POLICY_RECLAIM_ORPHANS 1u /* a lease whose holder is proven dead may be
                                         acquired before its expiry */

typedef struct shl_table shl_table; /* opaque: one process's mapping of a table */

typedef struct shl_options {
    uint32_t capacity;   /* lease slots (default 1024; 1 .. SHL_CAPACITY_MAX) */
    uint32_t value_size; /* bytes of co-located value per lease (default 256) */
    mode_t mode;         /* 0600 (default) or 0660 for group sharing */
    int clock;           /* SHL_CLOCK_MONOTONIC (default) or SHL_CLOCK_MANUAL */
    unsigned flags;      /* SHL_CREATE, SHL_EXCL */
    unsigned policy;     /* SHL_POLICY_* (default 0), fixed at creation */
    uint32_t reclaim_delay_ms; /* with RECLAIM_ORPHANS: wait this long after the
                                  holder's death is first seen (default 0) */
} shl_options;

/* Fills the defaults: capacity 1024, value size 256, mode 0600, monotonic
 * clock, flags SHL_CREATE, no policy. */
SHL_API void shl_options_init(shl_options *o);

/*
 * Opens the table `name` ("name" or "/name": at most SHL_TABLE_NAME_MAX bytes
 * of [A-Za-z0-9._-], not starting with '.').
 *
 * o == NULL opens an existing table, accepting mode 0600 or 0660. With
 * o->flags & SHL_CREATE, a missing table is created with o's parameters; any
 * number of processes may do this at the same moment: exactly one creates,
 * all get the same table. An existing table must match o's capacity, value
 * size, mode and clock (else SHL_EMISMATCH). Without SHL_CREATE, o->mode is
 * the widest mode accepted.
 *
 * Errors: SHL_EINVAL (bad name or options), SHL_ENOENT (no such table),
 * SHL_EEXIST (SHL_EXCL and it exists), SHL_EPERM (another owner, a wider mode
 * than accepted, or not a regular file), SHL_ECORRUPT (not a shmlease segment,
 * truncated, or inconsistent header), SHL_EVERSION (made by an incompatible
 * build), SHL_ETIMENS (made in another time namespace), SHL_ENOSPC (no room in
 * /dev/shm), SHL_ENOMEM, SHL_ETIMEDOUT (a creator took over 10 s), SHL_ESYS.
 * On error *out is NULL and nothing was written to any existing segment.
 */
SHL_API int shl_open(const char *name, const shl_options *o, shl_table **out);

/* Unmaps and frees the handle (NULL is accepted). Leases stay as they are:
 * close does not release them. Always SHL_OK, also in a child after fork. */
SHL_API int shl_close(shl_table *t);

/* Removes the table's name; processes that have it open keep using it until
 * they close it. SHL_ENOENT, SHL_EPERM (another owner), SHL_EINVAL. */
SHL_API int shl_unlink(const char *name);

typedef struct shl_table_info {
    uint32_t capacity;
    uint32_t value_size;
    uint32_t used;  /* lease names in the table */
    int clock;      /* SHL_CLOCK_* */
    mode_t mode;
    unsigned policy;
    uint32_t reclaim_delay_ms;
    int created;    /* this handle's shl_open() created the table */
    uint64_t size;  /* segment bytes */
    int32_t creator_pid;
} shl_table_info;

SHL_API int shl_table_info_get(shl_table *t, shl_table_info *info);

/** @defgroup leases Leases */

/* Acquires `lease` for `owner` for ttl_ns nanoseconds; *token receives the
 * new token. The lease's name is added to the table on first use.
 * SHL_EBUSY: held by another (or the same) owner and unexpired.
 * SHL_EINVAL: bad name or owner, ttl 0, now + ttl overflows, NULL token.
 * SHL_EFULL: the name is new and the table has no free slot. */
SHL_API int shl_acquire(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                        uint64_t *token);

/* Renews a valid lease: expiry = now + ttl_ns. SHL_ELOST when not valid. */
SHL_API int shl_renew(shl_table *t, const char *lease, const char *owner, uint64_t token,
                      uint64_t ttl_ns);

/* Releases a valid lease; the token is kept, the next acquire gets token + 1.
 * SHL_ELOST when not valid. */
SHL_API int shl_release(shl_table *t, const char *lease, const char *owner, uint64_t token);

/* Replaces the lease's value with len bytes of buf, if and only if the lease
 * is valid for (owner, token) at the moment of the write. All or nothing: a
 * crash leaves the previous value or the new one, never a mix.
 * SHL_ELOST (nothing written), SHL_E2BIG (len > value size), SHL_EINVAL. */
SHL_API int shl_write(shl_table *t, const char *lease, const char *owner, uint64_t token,
                      const void *buf, size_t len);

/* Reads the value without taking the lease's lock (a consistent snapshot).
 * *len receives the value's length and *token the token that wrote it (0 if
 * never written); either may be NULL. SHL_E2BIG when cap < length (*len is
 * set, buf untouched). SHL_ENOENT when the lease was never used. */
SHL_API int shl_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
                     uint64_t *token);

typedef void (*shl_guard_fn)(void *arg);

/* Runs fn(arg) under the lease's lock after the owner/token/expiry check
 * passed, so that its effect is atomic with the check. fn must be short, must
 * not call shmlease on the same lease, and must not block. SHL_ELOST: fn was
 * not called. */
SHL_API int shl_guard(shl_table *t, const char *lease, const char *owner, uint64_t token,
                      shl_guard_fn fn, void *arg);

/* Read-modify-write of the value under the check: fn receives a private copy
 * of the current value and its length in *len, with room for cap bytes (the
 * table's value size, at most SHL_UPDATE_MAX), may change both, and returns
 * 0 to commit or non-zero to leave everything unchanged (then SHL_ECANCELED;
 * also when it sets *len > cap). Committed whole or not at all.
 * SHL_ELOST: fn was not called. SHL_E2BIG: the current value is longer than
 * SHL_UPDATE_MAX. */
#define SHL_UPDATE_MAX 4096
typedef int (*shl_update_fn)(void *value, size_t *len, size_t cap, void *arg);
SHL_API int shl_update(shl_table *t, const char *lease, const char *owner, uint64_t token,
                       shl_update_fn fn, void *arg);

/** @defgroup state Lease state */
#define SHL_STATE_FREE 0     /* never held, or released */
#define SHL_STATE_HELD 1     /* held and unexpired */
#define SHL_STATE_EXPIRED 2  /* the holder's time has run out; acquirable */
#define SHL_STATE_REVOKED 3  /* ended by an administrator; acquirable */
#define SHL_STATE_ORPHANED 4 /* held and unexpired, but the holder is proven dead */

typedef struct shl_lease_info {
    char owner[SHL_OWNER_MAX + 1]; /* last holder ("" if never held) */
    uint64_t token;        /* the lease's current token (0: never acquired) */
    uint64_t expiry_ns;    /* table clock at which the holder's time ends */
    uint64_t remaining_ns; /* expiry - now when HELD or ORPHANED, else 0 */
    uint64_t now_ns;       /* table clock when the state was taken */
    uint64_t since_ns;     /* table clock of the acquisition */
    int32_t pid;           /* holder's pid (0 if never held) */
    int state;             /* SHL_STATE_* */
    uint32_t waiters;      /* processes waiting to acquire */
    uint32_t value_len;
    uint64_t value_token;  /* token that wrote the value (0: never written) */
} shl_lease_info;

/* As shl_acquire(); when the result is SHL_EBUSY and holder != NULL, *holder
 * receives the holder, its token and the remaining time, as seen at the moment
 * of refusal. */
SHL_API int shl_acquire_ex(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                           uint64_t *token, shl_lease_info *holder);

/* A consistent snapshot of the lease's state, without taking its lock.
 * SHL_ENOENT when the lease was never used. ORPHANED is reported only after
 * checking, through /proc, that the holder's process is gone. */
SHL_API int shl_stat(shl_table *t, const char *lease, shl_lease_info *info);

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
 * child, like the table's). Any number of threads may use one at once.
 */
typedef struct shl_lease shl_lease; /* opaque: (table, lease, owner) */

/* Binds (t, lease, owner) into *out. The lease's name is added to the table
 * if it was never used (no lease is acquired).
 * SHL_EINVAL: bad name or owner, NULL out. SHL_EFULL: the name is new and the
 * table has no free slot. SHL_ENOMEM. SHL_EFORK, SHL_EBROKEN, SHL_ESYS as for
 * shl_acquire(). On error *out is NULL. */
SHL_API int shl_lease_open(shl_table *t, const char *lease, const char *owner, shl_lease **out);

/* Frees a bound lease (NULL is accepted). The lease itself is untouched. */
SHL_API void shl_lease_close(shl_lease *l);

/* shl_acquire_ex() of the bound lease for the bound owner; holder may be NULL. */
SHL_API int shl_lease_acquire(shl_lease *l, uint64_t ttl_ns, uint64_t *token,
                              shl_lease_info *holder);
/* shl_renew() of the bound lease. SHL_ELOST when not valid; SHL_EINVAL for a
 * ttl of 0, token 0, or an overflowing expiry. */
SHL_API int shl_lease_renew(shl_lease *l, uint64_t token, uint64_t ttl_ns);
/* shl_release() of the bound lease. SHL_ELOST when not valid. */
SHL_API int shl_lease_release(shl_lease *l, uint64_t token);
/* shl_write() of the bound lease: SHL_ELOST (nothing written), SHL_E2BIG,
 * SHL_EINVAL. */
SHL_API int shl_lease_write(shl_lease *l, uint64_t token, const void *buf, size_t len);
/* shl_guard() of the bound lease: SHL_ELOST means fn was not called. */
SHL_API int shl_lease_guard(shl_lease *l, uint64_t token, shl_guard_fn fn, void *arg);
/* shl_read() of the bound lease (lock-free snapshot): SHL_E2BIG, SHL_EINVAL.
 * Never SHL_ENOENT: the name exists once bound. */
SHL_API int shl_lease_read(shl_lease *l, void *buf, size_t cap, size_t *len, uint64_t *token);

#ifdef __cplusplus
}
#endif
#endif
