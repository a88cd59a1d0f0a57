/*
 * shmlease/wait.h - waiting for a lease (shl_acquire_wait()), keeping it with
 * a renewer, hearing of its loss, and the renewer's heartbeat. Part of the
 * public header: <shmlease.h> includes it, inside its extern "C" block and
 * after its attribute macros and the groups before this one. A program
 * includes <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/wait.h>"
#define SHMLEASE_WAIT_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_WAIT_H
#define SHMLEASE_WAIT_H

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

#endif
