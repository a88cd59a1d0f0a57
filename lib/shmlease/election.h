/*
 * shmlease/election.h - leader election: candidates, campaigns, proclaims,
 * and observing who leads. Part of the public header: <shmlease.h> includes
 * it, inside its extern "C" block and after its attribute macros and the
 * groups before this one. A program includes <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/election.h>"
#define SHMLEASE_ELECTION_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_ELECTION_H
#define SHMLEASE_ELECTION_H

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

#endif
