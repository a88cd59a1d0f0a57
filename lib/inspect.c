/*
 * lib/inspect.c - detailed snapshots of leases for the inspector:
 * shl_inspect() by name, shl_inspect_slot() by slot (the shared-memory kind
 * only) and shl_foreach() over a whole table.
 *
 * The entry points: the checks of the arguments both kinds of table share,
 * then the one kind test, and the kind's snapshot as the last call. The
 * snapshots themselves are the kinds': kind_shm/inspect.c (slots copied
 * under their seqlocks) and kind_etcd/etcd_inspect.c. The names of the
 * codes a detail holds are lib/code_names.c's.
 */
#include "internal.h"

int shl_inspect_slot(shl_table *t, uint32_t slot, shl_lease_detail *d)
{
    SHL__CHECK_HANDLE(t);
    if (!d)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_ENOTSUP; /* no slots: shl_inspect() by name, shl_foreach() */
    return shl__shm_inspect_slot(t, slot, d);
}

int shl_inspect(shl_table *t, const char *lease, shl_lease_detail *d)
{
    struct shl__key k;
    SHL__CHECK_HANDLE(t);
    if (shl__key_lease(lease, &k) != SHL_OK || !d)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_inspect(t, lease, d);
    return shl__shm_inspect(t, &k, d);
}

int shl_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d), void *arg)
{
    SHL__CHECK_HANDLE(t);
    if (!fn)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_foreach(t, fn, arg);
    return shl__shm_foreach(t, fn, arg);
}
