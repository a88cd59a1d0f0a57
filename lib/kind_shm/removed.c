/*
 * lib/kind_shm/removed.c - whether a table was removed by any means: marked
 * by shl_unlink(), or its file unnamed or its name given to another file by
 * anything else (rm, systemd's RemoveIPC, a new table of the same name). A
 * table found so is marked then, as shl_unlink() marks (shm/removed.c).
 */
#include "shm_kind.h"

int shl__table_removed(const shl_table *t)
{
    if (shl__removed(t))
        return 1;
    if (!shl__seg_gone(t->name, t->fd))
        return 0;
    /* Nobody can open this segment again: tell every handle of it at its
     * next call, and wake its sleepers, as shl_unlink() would have. */
    shl__seg_mark(t->hdr, &t->geom, shl__tnslots(t));
    return 1;
}
