/*
 * lib/lease.c - acquire, renew, release and the guarded operations, by name.
 *
 * The entry points: each checks the arguments as both kinds of table need
 * them, in the order and with the codes and details of the public header,
 * tests the kind once and hands the call on as its last call. The
 * operations themselves are in kind_shm/lease.c (on a slot, under its lock)
 * and in kind_etcd/.
 */
#include "internal.h"

/* The shared-memory kind checks the owner, ttl and token itself, with the
 * same shl__acquire_args(): the hand-off is then six arguments, which is a
 * tail call, where seven (with the owner's length) would keep this frame.
 * Guard does the same. */
static __attribute__((cold, noinline)) int etcd_acquire(shl_table *t, const char *lease,
                                                        const char *owner, uint64_t ttl_ns,
                                                        uint64_t *token, shl_lease_info *holder)
{
    uint32_t olen = 0; /* set when the check passes */
    int rc = shl__acquire_args(owner, ttl_ns, token, &olen);
    return rc != SHL_OK ? rc : shl__etcd_acquire(t, lease, owner, olen, ttl_ns, token, holder);
}

int shl_acquire_ex(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                   uint64_t *token, shl_lease_info *holder)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return etcd_acquire(t, lease, owner, ttl_ns, token, holder);
    return shl__shm_acquire(t, lease, owner, ttl_ns, token, holder);
}

int shl_acquire(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                uint64_t *token)
{
    return shl_acquire_ex(t, lease, owner, ttl_ns, token, NULL);
}

/* The checks of a holder's operation (renew, release, write, update,
 * guard) that both kinds make, after the operation's own: the handle, the
 * owner (its length into olen), the token. Returns from the entry point on
 * a refusal. */
#define HOLDER_CHECKS(t, owner, token, olen)                                                       \
    do {                                                                                           \
        SHL__CHECK_HANDLE(t);                                                                      \
        int holder_rc_ = shl__holder_args(owner, token, &(olen));                                  \
        if (holder_rc_ != SHL_OK)                                                                  \
            return holder_rc_;                                                                     \
    } while (0)

int shl_renew(shl_table *t, const char *lease, const char *owner, uint64_t token, uint64_t ttl_ns)
{
    if (ttl_ns == 0)
        return shl__bad_ttl("ttl", 0);
    uint32_t olen;
    HOLDER_CHECKS(t, owner, token, olen);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_renew(t, lease, owner, olen, token, ttl_ns);
    return shl__shm_renew(t, lease, owner, olen, token, ttl_ns);
}

int shl_release(shl_table *t, const char *lease, const char *owner, uint64_t token)
{
    uint32_t olen;
    HOLDER_CHECKS(t, owner, token, olen);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_release(t, lease, owner, olen, token);
    return shl__shm_release(t, lease, owner, olen, token);
}

int shl_write(shl_table *t, const char *lease, const char *owner, uint64_t token, const void *buf,
              size_t len)
{
    if (t && len > t->value_size)
        return SHL_E2BIG;
    if (!buf && len > 0)
        return SHL_EINVAL;
    uint32_t olen;
    HOLDER_CHECKS(t, owner, token, olen);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_write(t, lease, owner, olen, token, buf, len);
    return shl__shm_write(t, lease, owner, olen, token, buf, len);
}

int shl_update(shl_table *t, const char *lease, const char *owner, uint64_t token, shl_update_fn fn,
               void *arg)
{
    if (!fn)
        return SHL_EINVAL;
    uint32_t olen;
    HOLDER_CHECKS(t, owner, token, olen);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_update(t, lease, owner, olen, token, fn, arg);
    return shl__shm_update(t, lease, owner, olen, token, fn, arg);
}

/* No callback can be atomic with a remote check: SHL_ENOTSUP for good
 * arguments. */
static __attribute__((cold, noinline)) int etcd_guard(const char *owner, uint64_t token)
{
    uint32_t olen;
    int rc = shl__holder_args(owner, token, &olen);
    return rc != SHL_OK ? rc : SHL_ENOTSUP;
}

/* shl_guard() (shared 0) and shl_guard_shared() (1). As in
 * shl_acquire_ex(), the shared-memory kind checks the owner and the token
 * itself (shl__holder_args()), for a six-argument hand-off. */
static int guard_by_name(shl_table *t, const char *lease, const char *owner, uint64_t token,
                         shl_guard_fn fn, void *arg, int shared)
{
    if (!fn)
        return SHL_EINVAL;
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return etcd_guard(owner, token);
    return shared ? shl__shm_guard_shared(t, lease, owner, token, fn, arg)
                  : shl__shm_guard(t, lease, owner, token, fn, arg);
}

int shl_guard(shl_table *t, const char *lease, const char *owner, uint64_t token, shl_guard_fn fn,
              void *arg)
{
    return guard_by_name(t, lease, owner, token, fn, arg, 0);
}

int shl_guard_shared(shl_table *t, const char *lease, const char *owner, uint64_t token,
                     shl_guard_fn fn, void *arg)
{
    return guard_by_name(t, lease, owner, token, fn, arg, 1);
}
