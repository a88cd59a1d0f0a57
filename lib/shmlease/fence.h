/*
 * shmlease/fence.h - tokens beyond the segment: the persistent token floor
 * and the fence register for resources outside the segment. Part of the
 * public header: <shmlease.h> includes it, inside its extern "C" block and
 * after its attribute macros and the groups before this one. A program
 * includes <shmlease.h>, never this file.
 */
#ifndef SHMLEASE_H_INSIDE
#error "include <shmlease.h>, not <shmlease/fence.h>"
#define SHMLEASE_FENCE_H /* the rest skipped: one error, not one per declaration */
#endif
#ifndef SHMLEASE_FENCE_H
#define SHMLEASE_FENCE_H

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

#endif
