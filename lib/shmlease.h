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

/* The API, group by group, in the order of its manual; each group's file
 * may use what the ones before it declare. */
#define SHMLEASE_H_INSIDE
#include "shmlease/table.h"
#include "shmlease/lease.h"
#include "shmlease/wait.h"
#include "shmlease/election.h"
#include "shmlease/fence.h"
#include "shmlease/admin.h"
#undef SHMLEASE_H_INSIDE

#ifdef __cplusplus
}
#endif
#endif
