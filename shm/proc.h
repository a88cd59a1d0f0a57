/*
 * shm/proc.h - process identity that survives pid reuse.
 *
 * A pid alone does not identify a process: once it exits, the kernel may hand
 * the same number to another. A pid together with its start time (field 22 of
 * /proc/PID/stat, in clock ticks since boot) and the boot id does.
 */
#ifndef SHL_SHM_PROC_H
#define SHL_SHM_PROC_H

#include <stdint.h>
#include <sys/types.h>

struct shl__ident {
    int32_t pid;
    uint64_t start;   /* clock ticks since boot */
    uint64_t boot_id; /* hash of /proc/sys/kernel/random/boot_id */
};

/* Fills `id` for the calling process. 0, or SHM_ESYS when /proc is unreadable
 * (the start time and boot id are then 0 and liveness cannot be proven). */
int shl__ident_self(struct shl__ident *id);

/* Start time of process `pid`: 0 and *start (and *state, the one-letter
 * process state, when non-NULL) filled; SHM_ENOENT when no such process
 * exists, SHM_ESYS when it cannot be told. */
int shl__proc_start(int32_t pid, uint64_t *start, char *state);

/* Hash of the current boot id, 0 if unknown. */
uint64_t shl__boot_id(void);

#define SHL__ALIVE   1
#define SHL__DEAD    0
#define SHL__UNKNOWN (-1)

/* Whether the process recorded as `id` still runs: SHL__DEAD only on proof
 * (no such pid, another start time, or another boot). */
int shl__ident_alive(const struct shl__ident *id);

#endif
