/*
 * tools/stress_admin_etcd.c - `shmlease stress --admin-chaos` on an etcd
 * table: an administrator deleting holder records under their holders, with
 * the etcd client (etcd/), not through the library under test.
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
 */
#include "stress_etcd.h"

#include <stdio.h>
#include <stdlib.h>

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
#endif
