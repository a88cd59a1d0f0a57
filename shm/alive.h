/*
 * shm/alive.h - proof of life from the kernel: one OFD lock per open.
 *
 * Every opener of a segment takes a write lock, with fcntl(F_OFD_SETLK), on
 * one byte of the segment's file far beyond its end, at an offset unique to
 * that opener (an id drawn from the header's counter). The lock belongs to
 * the open file description: the kernel drops it when the last descriptor
 * of it closes, which a process's death does. Whoever else has the file
 * open asks F_OFD_GETLK about that byte: a lock there proves the opener's
 * file is still open somewhere; no lock proves it was closed. Nothing here
 * looks at pids or /proc, so PID namespaces, hidepid and a main thread that
 * exited make no difference.
 *
 * What a live lock proves is "some process still has that open file", not
 * "the process that took it runs": a child forked without exec() shares
 * its parent's open files and keeps the parent's id alive while it lives.
 * That errs on the safe side (a record looks alive longer, never dead
 * early).
 */
#ifndef SHL_SHM_ALIVE_H
#define SHL_SHM_ALIVE_H

#include <stdatomic.h>
#include <stdint.h>

#define SHL__ALIVE   1
#define SHL__DEAD    0
#define SHL__UNKNOWN (-1)

/* Ids are 1 .. SHL__ALIVE_ID_MAX; 0 means "none" (no proof possible). */
#define SHL__ALIVE_ID_MAX ((UINT64_C(1) << 62) - 1)

/* Takes a fresh id from `next` (the header's counter) and locks its byte on
 * `fd` (open read-write). An id whose byte is already locked (a damaged
 * counter handed it out twice) is skipped. The id, or 0 when no lock could
 * be taken: the opener's records then can never be proven dead. */
uint64_t shl__alive_take(int fd, _Atomic uint64_t *next);

/* Whether the opener with `id` still has its file open, asked through `fd`,
 * which must not be that opener's own descriptor (a lock never conflicts
 * with its own open file, so it would answer DEAD): SHL__ALIVE, SHL__DEAD,
 * or SHL__UNKNOWN for id 0, an id out of range, or any error. */
int shl__alive_probe(int fd, uint64_t id);

/* Whether any opener at all still has the file open, asked through `fd`, a
 * descriptor that took no id itself: SHL__ALIVE (some opener's byte is
 * locked), SHL__DEAD (none is: nobody has the table open through the
 * library), SHL__UNKNOWN on error. */
int shl__alive_any(int fd);

#endif
