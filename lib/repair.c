/*
 * lib/repair.c - bringing a table back to a consistent state: shl_repair().
 *
 * The entry point: the checks of its arguments, then the one kind test.
 * Only a shared-memory table has internals to mend (kind_shm/repair.c); an
 * etcd table keeps its own state, and is refused.
 */
#include "internal.h"

int shl_repair(shl_table *t, unsigned flags, void (*report)(void *arg, const char *action),
               void *arg)
{
    SHL__CHECK_HANDLE(t);
    if (flags & ~SHL_REPAIR_DRY_RUN)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_ENOTSUP; /* no segment internals: etcd keeps its own state */
    return shl__shm_repair(t, flags, report, arg);
}
