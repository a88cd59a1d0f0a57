/*
 * lib/wait.c - waiting for a lease: shl_acquire_wait() and
 * shl_acquire_shared_wait() acquire it, exclusive or shared, as soon as it
 * is their turn, or give up at their timeout.
 *
 * The entry points check what both kinds check, then hand the call to the
 * table's kind: the waiter queue of the shared-memory kind is in
 * kind_shm/wait.c, the etcd kind's waiting in kind_etcd/etcd_wait.c.
 */
#include "internal.h"

/* Both waiting acquires (shared: the shared one): the arguments checked
 * for both kinds, then the one kind test. Inlined into each entry, where
 * `shared` is a constant. */
static inline int wait_entry(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                             uint64_t timeout_ns, uint64_t *token, uint64_t *gen, int shared)
{
    struct shl__key k;
    uint32_t olen;
    SHL__CHECK_HANDLE(t);
    int rc = shl__key_lease(lease, &k);
    if (rc == SHL_OK)
        rc = shl__owner_len(owner, &olen);
    if (rc != SHL_OK || ttl_ns == 0 || !token)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shared ? shl__etcd_shared_wait(t, lease, owner, olen, ttl_ns, timeout_ns, token, gen)
                      : shl__etcd_wait(t, lease, owner, olen, ttl_ns, timeout_ns, token);
    return shared ? shl__shm_shared_wait(t, &k, owner, olen, ttl_ns, timeout_ns, token, gen)
                  : shl__shm_wait(t, &k, owner, olen, ttl_ns, timeout_ns, token);
}

int shl_acquire_wait(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                     uint64_t timeout_ns, uint64_t *token)
{
    return wait_entry(t, lease, owner, ttl_ns, timeout_ns, token, NULL, 0);
}

int shl_acquire_shared_wait(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                            uint64_t timeout_ns, uint64_t *token, uint64_t *gen)
{
    return wait_entry(t, lease, owner, ttl_ns, timeout_ns, token, gen, 1);
}
