/*
 * lib/read.c - reading a lease's value (shl_read()) and state (shl_stat()).
 *
 * The entry points: the checks of the arguments both kinds of table share,
 * then the one kind test, and the kind's read as the last call. The reads
 * themselves are the kinds': kind_shm/read.c (lock-free, under each slot's
 * seqlock) and kind_etcd/. shl_read() by name is on the hot path: nothing
 * here but the checks and a tail call.
 */
#include "internal.h"

int shl_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len, uint64_t *token)
{
    SHL__CHECK_HANDLE(t);
    if (!buf && cap > 0)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_read(t, lease, buf, cap, len, token);
    return shl__shm_read(t, lease, buf, cap, len, token);
}

int shl_stat(shl_table *t, const char *lease, shl_lease_info *info)
{
    SHL__CHECK_HANDLE(t);
    if (!info)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_stat(t, lease, info);
    return shl__shm_stat(t, lease, info);
}
