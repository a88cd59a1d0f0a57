/*
 * lib/heartbeat.c - shl_heartbeat_get(): a renewer's last beat on a lease,
 * and whether it has stalled.
 *
 * The heartbeat is a record in the lease's slot, which only the
 * shared-memory kind has (kind_shm/heartbeat.c, where the renewer's beats
 * are written); on an etcd table the call answers SHL_ENOTSUP.
 */
#include "internal.h"

int shl_heartbeat_get(shl_table *t, const char *lease, shl_heartbeat *hb)
{
    SHL__CHECK_HANDLE(t);
    struct shl__key k;
    if (!hb || shl__key_lease(lease, &k) != SHL_OK)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_ENOTSUP; /* the heartbeat is a record in the segment */
    return shl__shm_heartbeat_get(t, &k, hb);
}
