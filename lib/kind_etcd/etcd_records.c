/*
 * lib/kind_etcd/etcd_records.c - what the lease operations of an etcd table
 * share (etcd_acquire.c, etcd_lease.c): lease names and holder values, the
 * keys of one lease, the handle's cache of its own acquisitions, and the
 * etcd leases the holder records live on (grant, drop).
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "etcd_kind.h"

int shl__etcd_lease_name_ok(const char *lease)
{
    struct shl__key k;
    return shl__key_lease(lease, &k) == SHL_OK;
}

size_t shl__etcd_holder_value(uint64_t token, const char *owner, char *buf)
{
    return (size_t)snprintf(buf, SHL__ETCD_HOLDER_MAX, "%llu %s", (unsigned long long)token, owner);
}

/* The handle's record of an acquisition of `lease` (creating an entry when
 * `add`), or NULL. With e->mu. */
struct shl__etcd_held *shl__etcd_held_of(struct shl__etcd *e, const char *lease, int add)
{
    for (unsigned i = 0; i < SHL__ETCD_CACHE; i++)
        if (strcmp(e->cache[i].lease, lease) == 0)
            return &e->cache[i];
    if (!add)
        return NULL;
    struct shl__etcd_held *h = &e->cache[e->cache_next++ % SHL__ETCD_CACHE];
    memset(h, 0, sizeof *h);
    strcpy(h->lease, lease);
    return h;
}

/* Whether the deadline of a call that started at `start` has passed. */
int shl__etcd_late(const struct shl__etcd *e, uint64_t start)
{
    return shl__mono_ns() - start >= (uint64_t)e->timeout_ms * 1000000u;
}

/* Reads one key into *kv (found: 1) — a read, retried by the client. */
int shl__etcd_get_one(struct shl__etcd *e, const char *key, size_t kl, struct etc_range *r)
{
    memset(r, 0, sizeof *r);
    return etc_get(e->c, key, kl, NULL, 0, 0, 0, r);
}

/* Grants an etcd lease of ttl_s; *got (may be NULL) the ttl etcd gave.
 * Learns the cluster's minimum. */
int shl__etcd_grant(struct shl__etcd *e, int64_t ttl_s, int64_t *id, int64_t *got)
{
    int64_t g = 0;
    int rc = etc_lease_grant(e->c, ttl_s, id, &g);
    if (rc == ETC_OK && g > ttl_s && g > e->min_ttl_s)
        e->min_ttl_s = g;
    if (got)
        *got = g > ttl_s ? g : ttl_s;
    return rc;
}

/* Revokes an etcd lease we no longer need; its end by expiry is as good. */
void shl__etcd_drop(struct shl__etcd *e, int64_t id)
{
    if (id)
        (void)etc_lease_revoke(e->c, id);
}

void shl__etcd_acq_keys(struct shl__etcd *e, const char *lease, struct shl__etcd_acq *a)
{
    a->hl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, a->hkey);
    a->tl = shl__etcd_key(e, SHL__ETCD_TOKEN, lease, a->tkey);
    a->vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, a->vkey);
    a->gl = shl__etcd_key(e, SHL__ETCD_GEN, lease, a->gkey);
    a->sl = shl__etcd_sub_range(e, SHL__ETCD_SHARED, lease, a->skey, a->send);
    a->wl = shl__etcd_sub_range(e, SHL__ETCD_WAITER, lease, a->wkey, a->wend);
    a->rl = shl__etcd_sub_range(e, SHL__ETCD_READER, lease, a->rkey, a->rend);
}
#endif
