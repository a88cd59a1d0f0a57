/*
 * shm/alive.c - proof of life from the kernel (see alive.h).
 */
#include "alive.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>

/* The locked bytes start here: far beyond any segment's size, so they never
 * overlap a byte anyone else would lock, and within off_t for every id. */
#define LOCK_BASE (UINT64_C(1) << 62)

/* Tries before giving up on a counter that keeps handing out locked ids. */
#define TAKE_TRIES 8

static void range(struct flock *fl, short type, uint64_t id)
{
    memset(fl, 0, sizeof *fl);
    fl->l_type = type;
    fl->l_whence = SEEK_SET;
    fl->l_start = (off_t)(LOCK_BASE + id);
    fl->l_len = 1;
}

uint64_t shl__alive_take(int fd, _Atomic uint64_t *next)
{
    for (int i = 0; i < TAKE_TRIES; i++) {
        uint64_t id = atomic_fetch_add_explicit(next, 1, memory_order_relaxed) + 1;
        if (id == 0 || id > SHL__ALIVE_ID_MAX)
            return 0;
        struct flock fl;
        range(&fl, F_WRLCK, id);
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
            return id;
        if (errno != EAGAIN && errno != EACCES)
            return 0; /* no OFD locks here: no proof, never a false one */
    }
    return 0;
}

int shl__alive_probe(int fd, uint64_t id)
{
    if (fd < 0 || id == 0 || id > SHL__ALIVE_ID_MAX)
        return SHL__UNKNOWN;
    struct flock fl;
    range(&fl, F_WRLCK, id);
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return SHL__UNKNOWN;
    return fl.l_type == F_UNLCK ? SHL__DEAD : SHL__ALIVE;
}

int shl__alive_any(int fd)
{
    struct flock fl;
    range(&fl, F_WRLCK, 1);
    fl.l_len = 0; /* every id's byte, to the end of the file's offsets */
    if (fd < 0 || fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return SHL__UNKNOWN;
    return fl.l_type == F_UNLCK ? SHL__DEAD : SHL__ALIVE;
}
