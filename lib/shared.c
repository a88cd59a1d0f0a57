/*
 * lib/shared.c - shared (reader) leases: shl_acquire_shared() and
 * shl_acquire_shared_ex(). Any number of shared holders may hold a lease
 * at once, or one exclusive holder; the token of the last exclusive
 * acquisition comes back as the generation a reader fences on.
 *
 * The entry points check what both kinds check, then hand the call to the
 * table's kind: the shared holders of the shared-memory kind are in
 * kind_shm/shared.c, the etcd kind's in kind_etcd/etcd_acquire.c.
 */
#include "internal.h"

/* As in shl_acquire_ex(), the shared-memory kind checks the owner, ttl
 * and token itself (shl__acquire_args()): without the owner's length the
 * hand-off fits the arguments this call got, a tail call. */
static __attribute__((cold, noinline)) int etcd_acquire_shared(shl_table *t, const char *lease,
                                                               const char *owner, uint64_t ttl_ns,
                                                               uint64_t *token, uint64_t *gen,
                                                               shl_lease_info *holder)
{
    uint32_t olen = 0; /* set when the check passes */
    int rc = shl__acquire_args(owner, ttl_ns, token, &olen);
    return rc != SHL_OK
               ? rc
               : shl__etcd_acquire_shared(t, lease, owner, olen, ttl_ns, token, gen, holder);
}

int shl_acquire_shared_ex(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                          uint64_t *token, uint64_t *gen, shl_lease_info *holder)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return etcd_acquire_shared(t, lease, owner, ttl_ns, token, gen, holder);
    return shl__shm_acquire_shared(t, lease, owner, ttl_ns, token, gen, holder);
}

int shl_acquire_shared(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                       uint64_t *token, uint64_t *gen)
{
    return shl_acquire_shared_ex(t, lease, owner, ttl_ns, token, gen, NULL);
}
