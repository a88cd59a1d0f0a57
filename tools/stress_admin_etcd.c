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
 *
 * And it deletes the table's whole prefix (etcdctl del --prefix TABLE/),
 * then restores the table as an admin would from a backup taken by that
 * very delete: one txn reads the meta and token records and deletes every
 * key; a second one, ST_WIPE_GAP_NS later and only while no key is under
 * the prefix, puts them back.
 * The meta record so made anew has a new create revision: to the library a
 * new table, and every handle opened before must get SHL_EREMOVED (stale
 * workers reopen, as after a removal of a segment: stress_removed.c), never
 * re-create a key or issue a token on the deleted one; no holder whose
 * record went with the prefix may be told OK from then on (as after the
 * delete of its record alone). The tokens go on
 * from where they were, so the campaign's token checks stay whole: a token
 * issued at or below one issued before is a token granted twice, an
 * acquisition by a stale handle after the restore is an acceptance on a
 * removed table, and a key found under the prefix before the restore is a
 * key a stale handle put on a deleted table (wipe_strays).
 */
#include "stress_etcd.h"

#include <limits.h>
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

/* "TABLE/" and the end of every key under it, "TABLE0"; their length. */
static size_t prefix_range(const char *table, char *key, char *end, size_t cap)
{
    size_t n = (size_t)snprintf(key, cap, "%s/", table);
    memcpy(end, key, n + 1);
    end[n - 1] = '/' + 1;
    return n;
}

/* What the delete read: the meta and token records (keys and values), the
 * holder records it deleted, and whether it deleted value records. */
struct backup {
    struct etc_range meta, tokens, holders;
    int values;
};

/* The first revision at which `key` is gone, after `from` (when it was
 * there) and by `to` (when it was not): read back in etcd's history. */
static int64_t gone_at(etc_client *c, const char *key, size_t kl, int64_t from, int64_t to)
{
    while (to - from > 1) {
        int64_t mid = from + (to - from) / 2;
        struct etc_range r = {0};
        int rc = etc_get(c, key, kl, NULL, 0, 1, mid, &r);
        int there = r.n > 0;
        etc_range_free(&r);
        if (rc != ETC_OK)
            return -1;
        if (there)
            from = mid;
        else
            to = mid;
    }
    return to;
}

/* Deletes every key of the table, reading its meta and token records in
 * the same txn (or, after a lost answer, in the history just before the
 * delete) into *b; the delete's revision into *rev (-1: not known). 1
 * done, 0 not (no table), -1 no answer (and not done). */
static int wipe(etc_client *c, const char *table, struct backup *b, int64_t *rev)
{
    char pre[SHL_TABLE_NAME_MAX + 8], end[SHL_TABLE_NAME_MAX + 8];
    char meta[SHL_TABLE_NAME_MAX + 8], tk[SHL_TABLE_NAME_MAX + 8], te[SHL_TABLE_NAME_MAX + 8];
    size_t pl = prefix_range(table, pre, end, sizeof pre);
    size_t ml = (size_t)snprintf(meta, sizeof meta, "%s/meta", table);
    size_t tl = (size_t)snprintf(tk, sizeof tk, "%s/t/", table);
    memcpy(te, tk, tl + 1);
    te[tl - 1] = '/' + 1;
    struct etc_range m = {0};
    int rc = etc_get(c, meta, ml, NULL, 0, 1, 0, &m);
    int64_t inc = m.n ? m.kvs[0].create_rev : 0, before = m.revision;
    etc_range_free(&m);
    if (rc != ETC_OK || !inc)
        return rc == ETC_OK ? 0 : -1;
    struct etc_cmp same = {meta, ml, ETC_CREATE, ETC_EQ, NULL, 0, inc, NULL, 0};
    char vk[SHL_TABLE_NAME_MAX + 8], ve[SHL_TABLE_NAME_MAX + 8];
    char hk[SHL_TABLE_NAME_MAX + 8], he[SHL_TABLE_NAME_MAX + 8];
    size_t vl = (size_t)snprintf(vk, sizeof vk, "%s/v/", table);
    size_t hl = (size_t)snprintf(hk, sizeof hk, "%s/h/", table);
    memcpy(ve, vk, vl + 1);
    ve[vl - 1] = '/' + 1;
    memcpy(he, hk, hl + 1);
    he[hl - 1] = '/' + 1;
    struct etc_op ops[5] = {{ETC_RANGE, meta, ml, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, tk, tl, te, tl, NULL, 0, 0},
                            {ETC_RANGE, vk, vl, ve, vl, NULL, 0, 0},
                            {ETC_RANGE, hk, hl, he, hl, NULL, 0, 0},
                            {ETC_DEL, pre, pl, end, pl, NULL, 0, 0}};
    struct etc_txn_result t = {0};
    rc = etc_txn(c, &same, 1, ops, 5, NULL, 0, &t);
    int done = rc == ETC_OK && t.succeeded && t.nranges == 4;
    if (done) {
        b->meta = t.ranges[0];
        b->tokens = t.ranges[1];
        b->values = t.ranges[2].n > 0;
        b->holders = t.ranges[3];
        t.ranges[0] = t.ranges[1] = t.ranges[3] = (struct etc_range){0};
        *rev = t.revision;
    }
    etc_txn_free(&t);
    if (rc == ETC_OK)
        return done;
    /* A lost answer: gone means done, at the revision where it went. */
    rc = etc_get(c, meta, ml, NULL, 0, 1, 0, &m);
    int there = m.n && m.kvs[0].create_rev == inc;
    int64_t now = m.revision;
    etc_range_free(&m);
    if (rc != ETC_OK || there)
        return -1;
    *rev = gone_at(c, meta, ml, before, now);
    struct etc_range v = {0};
    if (*rev > 0 && etc_get(c, meta, ml, NULL, 0, 1, *rev - 1, &b->meta) == ETC_OK &&
        etc_get(c, tk, tl, te, tl, 0, *rev - 1, &b->tokens) == ETC_OK && b->meta.n == 1 &&
        etc_get(c, vk, vl, ve, vl, 1, *rev - 1, &v) == ETC_OK &&
        etc_get(c, hk, hl, he, hl, 0, *rev - 1, &b->holders) == ETC_OK) {
        b->values = v.n > 0;
        etc_range_free(&v);
        return 1;
    }
    etc_range_free(&v);
    /* Done, but what it deleted is not known: the meta as read before, and
     * every delete of a value is excused from then on (st_wiped_at). */
    etc_range_free(&b->meta);
    etc_range_free(&b->tokens);
    etc_range_free(&b->holders);
    *rev = -1;
    return etc_get(c, meta, ml, NULL, 0, 1, before, &b->meta) == ETC_OK && b->meta.n == 1 ? 1 : -2;
}

/* Puts the backup back while no key is under the prefix. Keys there before
 * the meta record is back were put by handles of the deleted table: counted
 * (wipe_strays) and deleted before the next try. 0 done, -1 not. */
static int restore(etc_client *c, const char *table, struct st_shared *sh, const struct backup *b)
{
    char pre[SHL_TABLE_NAME_MAX + 8], end[SHL_TABLE_NAME_MAX + 8];
    size_t pl = prefix_range(table, pre, end, sizeof pre);
    struct etc_op puts[ST_WIPE_LEASES + 1];
    size_t n = 0;
    const struct etc_kv *m = &b->meta.kvs[0];
    puts[n++] = (struct etc_op){ETC_PUT, m->key, m->key_len, NULL, 0, m->value, m->value_len, 0};
    for (size_t i = 0; i < b->tokens.n && n < ST_WIPE_LEASES + 1; i++, n++)
        puts[n] = (struct etc_op){ETC_PUT, b->tokens.kvs[i].key,   b->tokens.kvs[i].key_len,   NULL,
                                  0,       b->tokens.kvs[i].value, b->tokens.kvs[i].value_len, 0};
    struct etc_cmp empty = {pre, pl, ETC_VERSION, ETC_EQ, NULL, 0, 0, end, pl};
    struct etc_cmp no_meta = {m->key, m->key_len, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0};
    struct etc_op look = {ETC_RANGE, pre, pl, end, pl, NULL, 0, 0};
    struct etc_op del = {ETC_DEL, pre, pl, end, pl, NULL, 0, 0};
    for (int attempt = 0; attempt < 100; attempt++) {
        struct etc_txn_result t = {0};
        int rc = etc_txn(c, &empty, 1, puts, n, &look, 1, &t);
        int done = rc == ETC_OK && t.succeeded;
        int meta_back = 0;
        for (size_t i = 0; rc == ETC_OK && !done && t.nranges == 1 && i < t.ranges[0].n; i++)
            meta_back |= t.ranges[0].kvs[i].key_len == m->key_len &&
                         memcmp(t.ranges[0].kvs[i].key, m->key, m->key_len) == 0;
        etc_txn_free(&t);
        /* Only we put a meta record (the campaign's processes never
         * create the table): there, it is our restore, landed unanswered. */
        if (done || meta_back)
            return 0;
        if (rc == ETC_OK) {
            struct etc_txn_result d = {0};
            rc = etc_txn(c, &no_meta, 1, &del, 1, NULL, 0, &d);
            if (rc == ETC_OK && d.succeeded && d.ndeleted == 1 && d.deleted[0] > 0)
                atomic_fetch_add(&sh->wipe_strays, (uint64_t)d.deleted[0]);
            etc_txn_free(&d);
            continue;
        }
        st_sleep_ns(100000000);
    }
    return -1;
}

/* The holder records a delete took: from then on no call of theirs may be
 * accepted, as after the delete of one (st_gone_note()). */
static void holders_gone(struct st_shared *sh, const char *table, const struct etc_range *h)
{
    size_t pl = strlen(table) + sizeof "/h/stress-" - 1;
    for (size_t i = 0; i < h->n; i++) {
        const struct etc_kv *kv = &h->kvs[i];
        char *end;
        unsigned long l = kv->key_len > pl ? strtoul(kv->key + pl, &end, 10) : ULONG_MAX;
        uint64_t token = strtoull(kv->value, NULL, 10);
        if (l < sh->leases && token)
            st_gone_note(sh, (unsigned)l, token);
    }
}

int st_etcd_admin_wipe(etc_client *c, const char *table, struct st_shared *sh)
{
    uint32_t g = atomic_load(&sh->gen);
    if (g + 1 >= sh->gens_cap || sh->leases > ST_WIPE_LEASES)
        return 0;
    atomic_store(&sh->removing, 1);
    for (unsigned p = 0; p < sh->workers + sh->readers; p++)
        if (atomic_load(&sh->logging[p])) {
            atomic_store(&sh->removing, 0);
            return 0;
        }
    /* Every holder loses its record, as to a revoke: the epochs say so. */
    for (unsigned l = 0; l < sh->leases; l++)
        atomic_fetch_add(&sh->revoke_epoch[l], 1);
    struct st_gen *x = st_gen_at(sh, g);
    atomic_store(&x->plain, 0);
    atomic_store(&x->rm_start, st_now_ns());
    struct backup b = {0};
    int64_t rev = 0;
    int rc = wipe(c, table, &b, &rev);
    if (rc == 1)
        holders_gone(sh, table, &b.holders);
    if (rc == 1 || rc == -2)
        atomic_store(&sh->wipe_rev[atomic_load(&sh->wipes) % ST_WIPES_MAX], rev);
    if (rc == 1 && b.values && rev > atomic_load(&sh->wipe_vrev))
        atomic_store(&sh->wipe_vrev, rev); /* the history's deletes to wait for */
    if (rc == 1)
        st_sleep_ns(ST_WIPE_GAP_NS); /* the admin takes a moment to restore */
    if (rc == 1 && restore(c, table, sh, &b) != 0)
        rc = -2; /* deleted, not restored: the name stays empty */
    etc_range_free(&b.meta);
    etc_range_free(&b.tokens);
    etc_range_free(&b.holders);
    if (rc == 1 || rc == -2) {
        atomic_store(&x->rm_end, st_now_ns());
        atomic_fetch_add(&sh->wipes, 1);
        atomic_store(&sh->gen, g + 1);
    } else {
        atomic_store(&x->rm_start, 0);
    }
    for (unsigned l = 0; l < sh->leases; l++)
        atomic_fetch_add(&sh->revoke_epoch[l], 1);
    atomic_store(&sh->removing, 0);
    return rc == 1 ? 1 : rc == 0 ? 0 : -1;
}

int st_wiped_at(struct st_shared *sh, int64_t rev)
{
    uint64_t n = atomic_load(&sh->wipes);
    for (uint64_t i = 0; i < n && i < ST_WIPES_MAX; i++)
        if (atomic_load(&sh->wipe_rev[i]) == rev || atomic_load(&sh->wipe_rev[i]) < 0)
            return 1;
    return 0;
}
#endif
