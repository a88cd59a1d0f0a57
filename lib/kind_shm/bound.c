/*
 * lib/bound.c - bound leases: a lease name and an owner resolved once.
 *
 * The name-taking calls validate and hash the lease name, probe the index and
 * validate the owner on every call. A program that works on the same lease as
 * the same owner over and over (a renewer, a writer in a loop) can do that
 * once: shl_lease_open() keeps the slot's address and a validated copy of the
 * owner, and the shl_lease_* calls go straight to the slot's critical
 * section. The semantics are exactly those of the name-taking calls: the
 * same code runs under the lock (lease.c, read.c).
 *
 * A slot never moves and a name is never removed while the table is mapped
 * (index.c), so the address stays valid until shl_close(). Only repair can
 * move a name, when it finds it in two slots: the slot that loses it is
 * retired, and every call follows the name to the other, as a by-name call
 * does, and keeps that slot from then on. A call learns of the retirement
 * where it costs nothing on its fast path: acquire and the holder's calls
 * from a refusal (nobody is valid in a retired slot), a read from the mark
 * in the value word it loads anyway (shm/layout.h, SHL__VCUR_RETIRED).
 */
#include <stdlib.h>

#include "shm_kind.h"

struct shl_lease {
    shl_table *t;
    /* NULL on an etcd table: the calls go by name. Loaded and stored as
     * shl__follow() does: the threads sharing the lease may follow a
     * retired slot's name at once, each storing the same keeper. */
    struct shl__slot *s;
    unsigned fork_gen; /* the handle's: a child's copy refuses even after shl_close() */
    uint32_t olen;
    char owner[SHL_OWNER_MAX + 1];
    char name[SHL_NAME_MAX + 1];
};

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
    struct shl__slot *s = NULL;
    if (t->kind == SHL__KIND_SHM && (rc = shl__find_or_add(t, &k, &s)) != SHL_OK)
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

#define BOUND_CHECK(l)                                                                             \
    do {                                                                                           \
        if (!(l))                                                                                  \
            return SHL_EINVAL;                                                                     \
        if (shl__forked((l)->fork_gen))                                                            \
            return SHL_EFORK;                                                                      \
    } while (0)

static inline struct shl__slot *slot_of(const shl_lease *l)
{
    return shl__slot_in(&l->s);
}

/* Repair gave the name to a twin slot (index.c): follow it, and acquire
 * there. Out of line: the acquire's fast path keeps a small frame. (The
 * other calls follow it inside, on their refusal's path: lease.c, read.c.) */
static __attribute__((noinline, cold)) int acquire_moved(shl_lease *l, struct shl__slot *s,
                                                         uint64_t ttl_ns, uint64_t *token,
                                                         shl_lease_info *holder)
{
    int rc = SHL__SLOT_RETIRED;
    while (rc == SHL__SLOT_RETIRED)
        if ((rc = shl__follow(l->t, &l->s, &s, 1)) == SHL_OK)
            rc = shl__acquire_at(l->t, s, l->owner, l->olen, ttl_ns, token, holder);
    return rc;
}

int shl_lease_acquire(shl_lease *l, uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder)
{
    BOUND_CHECK(l);
    if (ttl_ns == 0 || !token)
        return ttl_ns == 0 ? shl__bad_ttl("ttl", 0) : shl__fail(SHL_EINVAL, "token: NULL");
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_acquire(l->t, l->name, l->owner, l->olen, ttl_ns, token, holder);
    int rc = shl__acquire_at(l->t, s, l->owner, l->olen, ttl_ns, token, holder);
    return shl__unlikely(rc == SHL__SLOT_RETIRED) ? acquire_moved(l, s, ttl_ns, token, holder) : rc;
}

int shl_lease_renew(shl_lease *l, uint64_t token, uint64_t ttl_ns)
{
    BOUND_CHECK(l);
    if (ttl_ns == 0 || token == 0)
        return ttl_ns == 0 ? shl__bad_ttl("ttl", 0) : shl__bad_token();
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_renew(l->t, l->name, l->owner, l->olen, token, ttl_ns);
    return shl__renew_at(l->t, s, l->owner, l->olen, token, ttl_ns, &l->s);
}

int shl_lease_release(shl_lease *l, uint64_t token)
{
    BOUND_CHECK(l);
    if (token == 0)
        return shl__bad_token();
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return shl__etcd_release(l->t, l->name, l->owner, l->olen, token);
    return shl__release_at(l->t, s, l->owner, l->olen, token, &l->s);
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
    return shl__write_at(l->t, s, l->owner, l->olen, token, buf, len, &l->s);
}

int shl_lease_guard(shl_lease *l, uint64_t token, shl_guard_fn fn, void *arg)
{
    BOUND_CHECK(l);
    if (!fn || token == 0)
        return SHL_EINVAL;
    struct shl__slot *s = slot_of(l);
    if (shl__unlikely(!s))
        return SHL_ENOTSUP;
    return shl__guard_at(l->t, s, l->owner, l->olen, token, fn, arg, &l->s);
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
    return shl__read_at(l->t, &l->s, buf, cap, len, token);
}
