/*
 * shmlease/lease.h - leases: acquire, renew, release, write, read, guard and
 * update; a lease's state; shared leases; the table's clock; bound leases.
 * Part of the public header: <shmlease.h> includes it, inside its extern "C"
 * block and after its attribute macros and the groups before this one. A
 * program includes <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/lease.h>"
#define SHMLEASE_LEASE_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_LEASE_H
#define SHMLEASE_LEASE_H

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
 * SHL_ENOSPC: the name is new and the table's file system has no room left
 * for its slot (taken when the name is added; the detail names the lease).
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
 * table has no free slot. SHL_ENOSPC: the name is new and its slot finds no
 * room on the file system. SHL_ENOMEM. SHL_EFORK, SHL_EBROKEN, SHL_ESYS as for
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

#endif
