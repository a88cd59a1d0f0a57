/*
 * lib/place.c - where a table lives, for the tools that tell users about it
 * (shmlease create's size warning, the not-tmpfs warning, shmlease doctor).
 */
#include <linux/magic.h>

#include "internal.h"
#include "../shm/alive.h"
#include "../shm/place.h"

int shl_place_get(const char *name, shl_place *p)
{
    char n[SHL_TABLE_NAME_MAX + 1];
    if (!p)
        return SHL_EINVAL;
    memset(p, 0, sizeof *p);
    if (shl__is_etcd_name(name))
        return SHL_ENOTSUP;
    int rc = shl__table_name(name, n);
    if (rc != SHL_OK)
        return rc;
    struct shl__seg_place sp;
    if ((rc = shl__seg_place(n, &sp)) != 0)
        return shl__from_shm(rc);
    static_assert(sizeof p->path >= sizeof sp.path, "shl_place.path holds every segment path");
    memcpy(p->path, sp.path, sizeof sp.path);
    p->dir_safe = sp.dir_safe;
    p->tmpfs = !sp.have_fs ? -1 : sp.fs_type == TMPFS_MAGIC || sp.fs_type == RAMFS_MAGIC;
    p->fs_type = sp.fs_type;
    p->fs_size = sp.fs_size;
    p->fs_free = sp.fs_free;
    p->exists = sp.exists;
    p->table = sp.exists && !sp.regular ? SHL_EPERM : shl__from_shm(sp.header);
    p->uid = (uid_t)sp.uid;
    p->mode = (mode_t)sp.mode;
    p->file_size = sp.file_size;
    p->file_allocated = sp.file_allocated;
    p->open = sp.openers == SHL__ALIVE ? 1 : sp.openers == SHL__DEAD ? 0 : -1;
    return SHL_OK;
}
