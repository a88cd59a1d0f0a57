/*
 * lib/revoke.c - administrative revoke: the holder's validity ends at once.
 *
 * The entry point: the lease name checked for both kinds, then the kind's
 * revoke (kind_shm/revoke.c, kind_etcd/).
 */
#include "internal.h"

int shl_revoke(shl_table *t, const char *lease)
{
    struct shl__key k;
    SHL__CHECK_HANDLE(t);
    if (shl__key_lease(lease, &k) != SHL_OK)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_revoke(t, lease);
    return shl__shm_revoke(t, &k);
}
