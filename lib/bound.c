/*
 * lib/bound.c - bound leases: a lease name and an owner resolved once.
 *
 * shl_lease_open() checks the name and the owner once and keeps them, and on
 * a shared-memory table the lease's slot too; the shl_lease_* calls then
 * check only their own arguments and go straight to the slot's operation
 * (kind_shm/bound.c, kind_shm/lease.c), or by name to the etcd kind's
 * (kind_etcd/), with the same semantics as the name-taking calls. The
 * handle itself, struct shl_lease, is in internal.h: both halves read it.
 * The kind test is the slot pointer: NULL on an etcd table.
 */
#include <stdlib.h>

#include "internal.h"

int shl_lease_open(shl_table *t, const char *lease, const char *owner, shl_lease **out)
{
    if (!out)
        return SHL_EINVAL;
    *out = NULL;
    SHL__CHECK_HANDLE(t);
    struct shl__key k;
    uint32_t olen;
    int rc = shl__key_lease(lease, &k);
    if (rc == SHL_OK)
        rc = shl__owner_len(owner, &olen);
    if (rc != SHL_OK)
        return SHL_EINVAL;
    /* Not the last call: the handle is made for both kinds alike, after
     * the slot is found. */
    struct shl__slot *s = NULL;
    if (t->kind == SHL__KIND_SHM && (rc = shl__shm_lease_slot(t, &k, &s)) != SHL_OK)
        return rc;
    shl_lease *l = calloc(1, sizeof *l);
    if (!l)
        return SHL_ENOMEM;
    l->t = t;
    l->s = s;
    l->fork_gen = t->fork_gen;
    l->olen = olen;
    memcpy(l->owner, owner, olen);
    memcpy(l->name, k.s, k.len);
    *out = l;
    return SHL_OK;
}

void shl_lease_close(shl_lease *l)
{
    free(l);
}

/* A bound lease carries its handle's fork generation: checked as a handle
 * is (SHL_EINVAL for NULL, SHL_EFORK in a child). */
#define BOUND_CHECK(l) SHL__CHECK_HANDLE(l)

static inline struct shl__slot *slot_of(const shl_lease *l)
{
    return shl__slot_in(&l->s);
}

int shl_lease_acquire(shl_lease *l, uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder)
{
    BOUND_CHECK(l);
    if (ttl_ns == 0 || !token)
        return ttl_ns == 0 ? shl__bad_ttl("ttl", 0) : shl__fail(SHL_EINVAL, "token: NULL");
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_acquire(l->t, l->name, l->owner, l->olen, ttl_ns, token, holder);
    int rc = shl__shm_acquire_at(l->t, s, l->owner, l->olen, ttl_ns, token, holder);
    return shl__unlikely(rc == SHL__SLOT_RETIRED)
               ? shl__shm_lease_acquire_moved(l, s, ttl_ns, token, holder)
               : rc;
}

int shl_lease_renew(shl_lease *l, uint64_t token, uint64_t ttl_ns)
{
    BOUND_CHECK(l);
    if (ttl_ns == 0 || token == 0)
        return ttl_ns == 0 ? shl__bad_ttl("ttl", 0) : shl__bad_token();
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_renew(l->t, l->name, l->owner, l->olen, token, ttl_ns);
    return shl__shm_renew_at(l->t, s, l->owner, l->olen, token, ttl_ns, &l->s);
}

int shl_lease_release(shl_lease *l, uint64_t token)
{
    BOUND_CHECK(l);
    if (token == 0)
        return shl__bad_token();
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_release(l->t, l->name, l->owner, l->olen, token);
    return shl__shm_release_at(l->t, s, l->owner, l->olen, token, &l->s);
}

int shl_lease_write(shl_lease *l, uint64_t token, const void *buf, size_t len)
{
    BOUND_CHECK(l);
    if (len > l->t->value_size)
        return SHL_E2BIG;
    if ((!buf && len > 0) || token == 0)
        return token == 0 ? shl__bad_token() : shl__fail(SHL_EINVAL, "buf: NULL with len %zu", len);
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_write(l->t, l->name, l->owner, l->olen, token, buf, len);
    return shl__shm_write_at(l->t, s, l->owner, l->olen, token, buf, len, &l->s);
}

int shl_lease_guard(shl_lease *l, uint64_t token, shl_guard_fn fn, void *arg)
{
    BOUND_CHECK(l);
    if (!fn || token == 0)
        return SHL_EINVAL;
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return SHL_ENOTSUP; /* no callback can be atomic with a remote check */
    return shl__shm_guard_at(l->t, s, l->owner, l->olen, token, fn, arg, &l->s);
}

int shl_lease_read(shl_lease *l, void *buf, size_t cap, size_t *len, uint64_t *token)
{
    BOUND_CHECK(l);
    if (!buf && cap > 0)
        return SHL_EINVAL;
    if (shl__unlikely(!slot_of(l))) {
        /* A bound name exists: never used yet reads as empty, as in a slot. */
        int rc = shl__etcd_read(l->t, l->name, buf, cap, len, token);
        if (rc == SHL_ENOENT) {
            if (len)
                *len = 0;
            if (token)
                *token = 0;
            rc = SHL_OK;
        }
        return rc;
    }
    return shl__shm_read_at(l->t, &l->s, buf, cap, len, token);
}
