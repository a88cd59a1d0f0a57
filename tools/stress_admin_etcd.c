/*
 * tools/stress_admin_etcd.c - `shmlease stress --admin-chaos` on an etcd
 * table: an administrator deleting holder and token records under their
 * holders, with the etcd client (etcd/), not through the library under test.
 * The keys are the table name's own (as in stress_etcd.c): the campaign's
 * table names have no '/'.
 *
 * The admin process reads a lease's holder record (TABLE/h/<lease>,
 * "<token> <owner>") and deletes it in a txn that compares its mod
 * revision, so the token deleted is known for sure. The etcd lease of the
 * holder lives on: only the library's compare of the record can tell the
 * holder. From the acknowledgement on, no renew, write or release of that
 * token may be accepted (the record of a token never comes back): each
 * worker looks, after each accepted call, at the last deletions of its
 * lease (st_gone_late()). The deletion is told to the holder the way a
 * revoke is, by the lease's revoke epoch, so that its refusal is not taken
 * for a lost exclusion.
 *
 * It also deletes token records (TABLE/t/<lease>) beside a value record
 * that carries a token, and puts each back a while later as it was (unless
 * something wrote it meanwhile). In between the library must refuse to
 * issue a token (SHL_ECORRUPT), never start the tokens over: a token
 * issued again shows in etcd's history of the values as a token going
 * down. The lease's token epoch is odd from before the delete until the
 * restore is acknowledged, so that the workers' SHL_ECORRUPT is expected.
 */
#include "stress_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_gone_note(struct st_shared *sh, unsigned lease, uint64_t token)
{
    uint32_t i = atomic_fetch_add(&sh->gone_next[lease], 1) % ST_GONE_RING;
    struct st_gone *g = &sh->gone[lease][i];
    atomic_store(&g->at, 0);
    atomic_store(&g->token, token);
    atomic_store(&g->at, st_now_ns());
    atomic_fetch_add(&sh->admin_deletes, 1);
}

int st_gone_late(struct st_shared *sh, unsigned lease, uint64_t token, uint64_t t0)
{
    for (unsigned i = 0; i < ST_GONE_RING; i++) {
        struct st_gone *g = &sh->gone[lease][i];
        uint64_t at = atomic_load(&g->at);
        if (at && at < t0 && atomic_load(&g->token) == token && atomic_load(&g->at) == at)
            return 1;
    }
    return 0;
}

int st_token_gone(struct st_shared *sh, unsigned lease, uint64_t e0)
{
    return (e0 & 1) || atomic_load(&sh->token_epoch[lease]) != e0;
}

#if SHL_HAVE_ETCD
#include "../etcd/etcd.h"

int st_etcd_admin_delete(etc_client *c, const char *table, struct st_shared *sh, unsigned lease)
{
    char key[SHL_TABLE_NAME_MAX + 8 + ST_LEASE_NAME], name[ST_LEASE_NAME];
    st_lease_name(lease, name);
    int kl = snprintf(key, sizeof key, "%s/h/%s", table, name);
    struct etc_range r = {0};
    int rc = etc_get(c, key, (size_t)kl, NULL, 0, 1, 0, &r);
    if (rc != ETC_OK || r.n == 0) {
        etc_range_free(&r);
        return rc == ETC_OK ? 0 : -1;
    }
    uint64_t token = strtoull(r.kvs[0].value, NULL, 10);
    int64_t mod = r.kvs[0].mod_rev;
    etc_range_free(&r);
    struct etc_cmp cmp = {key, (size_t)kl, ETC_MOD, ETC_EQ, NULL, 0, mod, NULL, 0};
    struct etc_op del = {ETC_DEL, key, (size_t)kl, NULL, 0, NULL, 0, 0};
    struct etc_txn_result t = {0};
    atomic_fetch_add(&sh->revoke_epoch[lease], 1);
    rc = etc_txn(c, &cmp, 1, &del, 1, NULL, 0, &t);
    int done = rc == ETC_OK && t.succeeded;
    etc_txn_free(&t);
    if (done)
        st_gone_note(sh, lease, token);
    atomic_fetch_add(&sh->revoke_epoch[lease], 1);
    return rc == ETC_OK ? done : -1;
}

int st_etcd_admin_drop_token(etc_client *c, const char *table, struct st_shared *sh, unsigned lease,
                             struct st_token_drop *d)
{
    char vkey[sizeof d->key], name[ST_LEASE_NAME];
    st_lease_name(lease, name);
    d->kl = (size_t)snprintf(d->key, sizeof d->key, "%s/t/%s", table, name);
    size_t vl = (size_t)snprintf(vkey, sizeof vkey, "%s/v/%s", table, name);
    struct etc_range r = {0};
    int rc = etc_get(c, d->key, d->kl, NULL, 0, 1, 0, &r);
    if (rc != ETC_OK || r.n == 0 || r.kvs[0].value_len >= sizeof d->was) {
        etc_range_free(&r);
        return rc == ETC_OK ? 0 : -1;
    }
    d->wl = r.kvs[0].value_len;
    memcpy(d->was, r.kvs[0].value, d->wl);
    int64_t mod = r.kvs[0].mod_rev;
    etc_range_free(&r);
    struct etc_cmp cmp[2] = {{d->key, d->kl, ETC_MOD, ETC_EQ, NULL, 0, mod, NULL, 0},
                             {vkey, vl, ETC_VERSION, ETC_GT, NULL, 0, 0, NULL, 0}};
    struct etc_op del = {ETC_DEL, d->key, d->kl, NULL, 0, NULL, 0, 0};
    struct etc_txn_result t = {0};
    atomic_fetch_add(&sh->token_epoch[lease], 1);
    rc = etc_txn(c, cmp, 2, &del, 1, NULL, 0, &t);
    int done = rc == ETC_OK && t.succeeded;
    etc_txn_free(&t);
    if (rc == ETC_OK && !done) {
        atomic_fetch_add(&sh->token_epoch[lease], 1);
        return 0;
    }
    if (done)
        atomic_fetch_add(&sh->token_deletes, 1);
    d->lease = lease;
    d->on = 1; /* an unanswered delete may have happened: restored all the same */
    return rc == ETC_OK ? 1 : -1;
}

int st_etcd_admin_restore_token(etc_client *c, struct st_shared *sh, struct st_token_drop *d)
{
    struct etc_cmp missing = {d->key, d->kl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0};
    struct etc_op put = {ETC_PUT, d->key, d->kl, NULL, 0, d->was, d->wl, 0};
    struct etc_txn_result t = {0};
    int rc = etc_txn(c, &missing, 1, &put, 1, NULL, 0, &t);
    etc_txn_free(&t);
    if (rc != ETC_OK)
        return -1; /* tried again later */
    d->on = 0;
    atomic_fetch_add(&sh->token_epoch[d->lease], 1);
    return 0;
}
#endif
