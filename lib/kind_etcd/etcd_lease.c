/*
 * lib/kind_etcd/etcd_lease.c - a holder's operations on an etcd table
 * (renew, release, write, read, revoke), etcd enforcing them; acquiring is in
 * etcd_acquire.c.
 *
 * The cluster is the enforcement point: every guarded change is one txn
 * whose compare holds the holder record's exact "<token> <owner>", so etcd
 * applies it only while that holder's etcd lease lives (the record is
 * attached to it). The client never judges validity from its own clock.
 *
 * A renew with an unchanged ttl is a keep-alive of the holder's etcd
 * lease, then a read-only txn proving that the holder record is still
 * there, with its exact value, on that etcd lease (record_on()). A
 * keep-alive alone proves nothing about the record: an admin's delete of
 * it, or of a prefix over it, leaves the etcd lease alive. etcd has no txn
 * op that refreshes a lease, so this is two round trips, in this order: a
 * record seen on the lease after its refresh lives at least until the
 * refreshed expiry, unless deleted later (which the next renewal sees).
 * Release is one txn deleting the holder record under the same compare,
 * then a revoke of the etcd lease (which holds nothing any more).
 *
 * A state change whose answer was lost (ETC_EUNKNOWN) is resolved by
 * reading the records back before returning; only when that fails too is
 * the result SHL_EUNAVAIL ("may have happened").
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "etcd_kind.h"
#include "mutation.h"

/* ---------------------------------------------------------------- holder */

/* Whether the record at key (a holder's or a shared holder's) is exactly
 * (owner, token) on an etcd lease: that lease in *id. SHL_OK, SHL_ELOST,
 * or the read's failure. */
static int record_is(struct shl__etcd *e, const char *key, size_t kl, const char *owner,
                     uint64_t token, int64_t *id)
{
    char hv[SHL__ETCD_HOLDER_MAX];
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    struct etc_range r;
    int rc = shl__etcd_get_one(e, key, kl, &r);
    if (rc != ETC_OK) {
        etc_range_free(&r);
        return shl__etcd_said(e->c, rc);
    }
    int mine = r.n == 1 && r.kvs[0].value_len == hvl && memcmp(r.kvs[0].value, hv, hvl) == 0;
    *id = mine ? r.kvs[0].lease : 0;
    etc_range_free(&r);
    return mine && *id ? SHL_OK : SHL_ELOST;
}

/* The holder record of `lease` if it is exactly (owner, token): its etcd
 * lease in *id. SHL_OK, SHL_ELOST, or the read's failure. */
static int holder_is(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                     int64_t *id)
{
    char key[SHL__ETCD_KEY_MAX];
    size_t kl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, key);
    return record_is(e, key, kl, owner, token, id);
}

/* The etcd lease of a valid (owner, token) on `lease`: the handle's own
 * record of it when it has one (*cached 1), else read. */
static int holder_lease(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                        int64_t *id, int *cached)
{
    struct shl__etcd_held *h = shl__etcd_held_of(e, lease, 0);
    if (h && h->token == token && h->id && strcmp(h->owner, owner) == 0) {
        *id = h->id;
        *cached = 1;
        return SHL_OK;
    }
    *cached = 0;
    return holder_is(e, lease, owner, token, id);
}

/* The shared holder record of `lease` for (owner, token), if it exists:
 * its key in key and *kl (SHL__ETCD_KEY_MAX) and its etcd lease in *id.
 * SHL_OK, SHL_ELOST, or the read's failure. */
static int shared_is(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                     char *key, size_t *kl, int64_t *id)
{
    char end[SHL__ETCD_KEY_MAX];
    size_t sl = shl__etcd_sub_range(e, SHL__ETCD_SHARED, lease, key, end);
    *kl = sl + (size_t)snprintf(key + sl, 21, "%llu", (unsigned long long)token);
    return record_is(e, key, *kl, owner, token, id);
}

/* ---------------------------------------------------------------- renew */

/* Whether `key` holds exactly hv on etcd lease id, asked of etcd in a
 * read-only txn of two compares (a missing key fails a value compare):
 * SHL_OK, SHL_ELOST, or a code. */
static int record_on(struct shl__etcd *e, const char *key, size_t kl, const char *hv, size_t hvl,
                     int64_t id)
{
    struct etc_cmp cmp[2] = {{key, kl, ETC_VALUE, ETC_EQ, hv, hvl, 0, NULL, 0},
                             {key, kl, ETC_LEASE, ETC_EQ, NULL, 0, id, NULL, 0}};
    struct etc_txn_result r = {0};
    int rc = etc_txn(e->c, cmp, 2, NULL, 0, NULL, 0, &r);
    int there = rc == ETC_OK && r.succeeded;
    etc_txn_free(&r);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    return there ? SHL_OK : SHL_ELOST;
}

/* A same-ttl renew of the record `key` = hv on etcd lease id: the
 * keep-alive, then the proof that the record is still on the lease (see
 * the top of the file for the order). SHL_OK, SHL_ELOST, or a code. */
static int keep_proved(struct shl__etcd *e, const char *key, size_t kl, const char *hv, size_t hvl,
                       int64_t id)
{
    int64_t left = 0;
    int rc = etc_lease_keepalive(e->c, id, &left);
    if (rc == ETC_EUNKNOWN) /* a second refresh is harmless */
        rc = etc_lease_keepalive(e->c, id, &left);
    if (rc == ETC_ENOTFOUND || (rc == ETC_OK && left <= 0))
        return SHL_ELOST;
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    if (SHL__MUTANT(ETCD_RENEW_BLIND))
        return SHL_OK;
    return record_on(e, key, kl, hv, hvl, id);
}

/* Ends the record `key` = hv on etcd lease id: one txn deletes it if it
 * is still exactly that (SHL_ELOST otherwise), then the etcd lease, which
 * holds nothing more, is revoked (its end by expiry is as good). After a
 * lost answer the record read back says whether it is gone; still there,
 * the txn is sent again, and then a record found gone or changed is the
 * first request landing late (it was in flight when the read-back came),
 * done as asked, as a read-back that finds it gone says. */
static int end_record(struct shl__etcd *e, const char *key, size_t kl, const char *hv, size_t hvl,
                      int64_t id)
{
    struct etc_cmp cmp[2] = {{key, kl, ETC_VALUE, ETC_EQ, hv, hvl, 0, NULL, 0},
                             {key, kl, ETC_LEASE, ETC_EQ, NULL, 0, id, NULL, 0}};
    struct etc_op del = {ETC_DEL, key, kl, NULL, 0, NULL, 0, 0};
    for (int attempt = 0; attempt < 2; attempt++) {
        struct etc_txn_result r = {0};
        int rc = etc_txn(e->c, cmp, 2, &del, 1, NULL, 0, &r);
        int done = rc == ETC_OK && (r.succeeded || attempt > 0);
        etc_txn_free(&r);
        if (rc == ETC_OK && !done)
            return SHL_ELOST;
        if (rc == ETC_EUNKNOWN) {
            int x = record_on(e, key, kl, hv, hvl, id);
            if (x == SHL_OK)
                continue; /* still there: not done, try again */
            if (x != SHL_ELOST)
                return SHL_EUNAVAIL;
            done = 1; /* gone, as asked */
        } else if (rc != ETC_OK) {
            return shl__etcd_said(e->c, rc);
        }
        shl__etcd_drop(e, id);
        return SHL_OK;
    }
    return SHL_EUNAVAIL;
}

/* A ttl-changing renew: the holder moves to a new etcd lease of the new
 * ttl, in one txn comparing (owner, token) and the old etcd lease; the old
 * one is then revoked before success is reported. */
static int renew_moving(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                        int64_t old, int64_t ttl_s, int shared)
{
    char key[SHL__ETCD_KEY_MAX], hv[SHL__ETCD_HOLDER_MAX];
    size_t kl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, key);
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    if (shared) {
        char end[SHL__ETCD_KEY_MAX];
        kl = shl__etcd_sub_range(e, SHL__ETCD_SHARED, lease, key, end);
        kl += (size_t)snprintf(key + kl, 21, "%llu", (unsigned long long)token);
    }
    int64_t id, got;
    int rc = shl__etcd_grant(e, ttl_s, &id, &got);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    struct etc_cmp cmp[2] = {{key, kl, ETC_VALUE, ETC_EQ, hv, hvl, 0, NULL, 0},
                             {key, kl, ETC_LEASE, ETC_EQ, NULL, 0, old, NULL, 0}};
    struct etc_op put = {ETC_PUT, key, kl, NULL, 0, hv, hvl, id};
    struct etc_txn_result r = {0};
    rc = etc_txn(e->c, cmp, SHL__MUTANT(ETCD_TTL_RENEW_BLIND) ? 0 : 2, &put, 1, NULL, 0, &r);
    int moved = rc == ETC_OK && r.succeeded;
    etc_txn_free(&r);
    if (rc == ETC_EUNKNOWN) {
        int64_t now_id = 0;
        char sk[SHL__ETCD_KEY_MAX];
        size_t skl;
        int x = shared ? shared_is(e, lease, owner, token, sk, &skl, &now_id)
                       : holder_is(e, lease, owner, token, &now_id);
        if (x != SHL_OK && x != SHL_ELOST) {
            shl__etcd_drop(e, id);
            return SHL_EUNAVAIL;
        }
        moved = x == SHL_OK && now_id == id;
    } else if (rc != ETC_OK) {
        shl__etcd_drop(e, id);
        return shl__etcd_said(e->c, rc);
    }
    if (!moved) {
        shl__etcd_drop(e, id);
        return SHL_ELOST;
    }
    if (!shared) {
        struct shl__etcd_held *h = shl__etcd_held_of(e, lease, 1);
        h->token = token;
        strcpy(h->owner, owner);
        h->id = id;
        h->ttl_s = got;
    }
    rc = etc_lease_revoke(e->c, old);
    if (rc == ETC_EUNKNOWN)
        rc = etc_lease_revoke(e->c, old);
    return rc == ETC_OK || rc == ETC_ENOTFOUND ? SHL_OK : SHL_EUNAVAIL;
}

/* Renews a shared holder: a keep-alive of its etcd lease and the proof
 * that its key is still on it, or a move to a new one for a new ttl, as
 * for the exclusive holder. */
static int renew_shared(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                        int64_t ttl_s)
{
    char key[SHL__ETCD_KEY_MAX];
    size_t kl;
    int64_t id, granted = 0;
    int rc = shared_is(e, lease, owner, token, key, &kl, &id);
    if (rc != SHL_OK)
        return rc;
    if ((rc = etc_lease_ttl(e->c, id, NULL, &granted)) == ETC_ENOTFOUND)
        return SHL_ELOST;
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    if (granted != ttl_s)
        return renew_moving(e, lease, owner, token, id, ttl_s, 1);
    char hv[SHL__ETCD_HOLDER_MAX];
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    return keep_proved(e, key, kl, hv, hvl, id);
}

static int renew_locked(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                        uint64_t ttl_ns)
{
    int64_t ttl_s = shl__etcd_ttl_s(e, ttl_ns);
    if (ttl_s == 0)
        return SHL_EINVAL;
    char key[SHL__ETCD_KEY_MAX], hv[SHL__ETCD_HOLDER_MAX];
    size_t kl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, key);
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    for (int pass = 0; pass < 2; pass++) {
        int64_t id, granted = 0;
        int cached, rc = holder_lease(e, lease, owner, token, &id, &cached);
        if (rc == SHL_ELOST)
            return renew_shared(e, lease, owner, token, ttl_s);
        if (rc != SHL_OK)
            return rc;
        struct shl__etcd_held *h = shl__etcd_held_of(e, lease, 0);
        if (cached)
            granted = h->ttl_s;
        else if ((rc = etc_lease_ttl(e->c, id, NULL, &granted)) == ETC_ENOTFOUND)
            return SHL_ELOST;
        else if (rc != ETC_OK)
            return shl__etcd_said(e->c, rc);
        /* ttl_s is raised to the cluster's minimum once known, as etcd
         * raises what it grants: equal means the same ttl. */
        if (granted != ttl_s)
            return renew_moving(e, lease, owner, token, id, ttl_s, 0);
        rc = keep_proved(e, key, kl, hv, hvl, id);
        if (rc == SHL_OK) {
            h = shl__etcd_held_of(e, lease, 1);
            h->token = token;
            strcpy(h->owner, owner);
            h->id = id;
            h->ttl_s = granted;
            return SHL_OK;
        }
        if (rc != SHL_ELOST)
            return rc;
        /* Gone: expired, revoked or deleted, unless our record of it was
         * old (the holder moved by another handle's renew): read once
         * more. */
        if (h)
            h->id = 0;
        if (!cached)
            return SHL_ELOST;
    }
    return SHL_ELOST;
}

int shl__etcd_renew(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                    uint64_t token, uint64_t ttl_ns)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    pthread_mutex_lock(&e->mu);
    /* The timing budget (etcd_kind.h): a silent member costs this renew at
     * most a quarter of the etcd lease's ttl (whole seconds, as granted). */
    uint64_t ttl_s = (uint64_t)shl__etcd_ttl_s(e, ttl_ns);
    uint64_t cap = ttl_s * UINT64_C(1000000000) / SHL__ETCD_BUDGET_DIV;
    uint64_t was = etc_silent_cap(e->c, 0);
    etc_silent_cap(e->c, was && was < cap ? was : cap);
    int rc = renew_locked(e, lease, owner, token, ttl_ns);
    etc_silent_cap(e->c, was);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---------------------------------------------------------------- release */

/* Ends the holder (owner, token) on etcd lease id (end_record()). */
static int end_holder(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                      int64_t id)
{
    char key[SHL__ETCD_KEY_MAX], hv[SHL__ETCD_HOLDER_MAX];
    size_t kl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, key);
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    return end_record(e, key, kl, hv, hvl, id);
}

/* Ends a shared holder (end_record()); the other shared holders, each on
 * its own, stay. */
static int release_shared(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token)
{
    char key[SHL__ETCD_KEY_MAX], hv[SHL__ETCD_HOLDER_MAX];
    size_t kl;
    int64_t id;
    int rc = shared_is(e, lease, owner, token, key, &kl, &id);
    if (rc != SHL_OK)
        return rc;
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    return end_record(e, key, kl, hv, hvl, id);
}

int shl__etcd_release(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                      uint64_t token)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    pthread_mutex_lock(&e->mu);
    int64_t id;
    int cached;
    int rc = holder_lease(e, lease, owner, token, &id, &cached);
    if (rc == SHL_ELOST)
        rc = release_shared(e, lease, owner, token);
    else if (rc == SHL_OK) {
        rc = end_holder(e, lease, owner, token, id);
        if (rc == SHL_ELOST && cached) { /* our record was old: ask etcd */
            if ((rc = holder_is(e, lease, owner, token, &id)) == SHL_OK)
                rc = end_holder(e, lease, owner, token, id);
        }
    }
    struct shl__etcd_held *h = shl__etcd_held_of(e, lease, 0);
    if (h && h->token == token && rc == SHL_OK)
        h->id = 0;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---------------------------------------------------------------- write */

/* Puts the value record "<token>\n" + bytes under the holder's compare,
 * and, when `mod` >= 0, the value's mod revision (shl_update). 1 done, 0
 * refused (*holder_ok: the holder compare held), negative: a code. */
static int guarded_put(struct shl__etcd *e, const char *lease, const char *owner, uint64_t token,
                       const void *buf, size_t len, int64_t mod, int *holder_ok)
{
    char hkey[SHL__ETCD_KEY_MAX], vkey[SHL__ETCD_KEY_MAX], hv[SHL__ETCD_HOLDER_MAX];
    size_t hl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, hkey);
    size_t vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, vkey);
    size_t hvl = shl__etcd_holder_value(token, owner, hv);
    char *rec = malloc(24 + len);
    if (!rec)
        return SHL_ENOMEM;
    size_t at = (size_t)snprintf(rec, 24, "%llu\n", (unsigned long long)token);
    if (len)
        memcpy(rec + at, buf, len);
    struct etc_cmp cmp[3] = {{hkey, hl, ETC_VALUE, ETC_EQ, hv, hvl, 0, NULL, 0},
                             shl__etcd_same_table(e),
                             {vkey, vl, ETC_MOD, ETC_EQ, NULL, 0, mod, NULL, 0}};
    struct etc_op put = {ETC_PUT, vkey, vl, NULL, 0, rec, at + len, 0};
    struct etc_op els[2] = {{ETC_RANGE, hkey, hl, NULL, 0, NULL, 0, 0}, shl__etcd_meta_read(e)};
    struct etc_txn_result r = {0};
    const struct etc_cmp *cp = cmp;
    size_t ncmp = mod >= 0 ? 3 : 2;
    if (SHL__MUTANT(ETCD_BLIND_WRITE))
        cp++, ncmp--;
    int rc = etc_txn(e->c, cp, ncmp, &put, 1, els, 2, &r);
    if (rc == ETC_OK && !r.succeeded && r.nranges == 2 &&
        shl__etcd_removed(e, &r.ranges[1]) != SHL_OK) {
        etc_txn_free(&r);
        free(rec);
        return SHL_EREMOVED;
    }
    if (rc == ETC_OK) {
        int done = r.succeeded;
        *holder_ok =
            done || (r.nranges == 2 && r.ranges[0].n == 1 && r.ranges[0].kvs[0].value_len == hvl &&
                     memcmp(r.ranges[0].kvs[0].value, hv, hvl) == 0);
        etc_txn_free(&r);
        free(rec);
        return done;
    }
    etc_txn_free(&r);
    if (rc != ETC_EUNKNOWN) {
        free(rec);
        return shl__etcd_said(e->c, rc);
    }
    /* Lost answer: the value record read back is ours, or it is not. */
    struct etc_range g;
    rc = shl__etcd_get_one(e, vkey, vl, &g);
    int ours = rc == ETC_OK && g.n == 1 && g.kvs[0].value_len == at + len &&
               memcmp(g.kvs[0].value, rec, at + len) == 0 && g.kvs[0].mod_rev > mod;
    etc_range_free(&g);
    free(rec);
    if (rc != ETC_OK)
        return SHL_EUNAVAIL;
    if (ours)
        return 1;
    /* Not (yet) there: whether it may still land is unknown. */
    return SHL_EUNAVAIL;
}

int shl__etcd_write(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                    uint64_t token, const void *buf, size_t len)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    int ok = 0;
    pthread_mutex_lock(&e->mu);
    int rc = guarded_put(e, lease, owner, token, buf, len, -1, &ok);
    pthread_mutex_unlock(&e->mu);
    return rc == 1 ? SHL_OK : rc == 0 ? SHL_ELOST : rc;
}

/* ---------------------------------------------------------------- update */

int shl__etcd_update(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                     uint64_t token, shl_update_fn fn, void *arg)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    char vkey[SHL__ETCD_KEY_MAX];
    size_t vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, vkey);
    unsigned char work[SHL_UPDATE_MAX];
    size_t cap = t->value_size < sizeof work ? t->value_size : sizeof work;
    uint64_t start = shl__mono_ns();
    pthread_mutex_lock(&e->mu);
    int rc;
    for (;;) {
        int64_t id;
        /* The value as it is now, and the holder: fn runs only for a
         * holder that is valid at this moment (the txn checks again). */
        if ((rc = holder_is(e, lease, owner, token, &id)) != SHL_OK)
            break;
        struct etc_range g;
        if ((rc = shl__etcd_get_one(e, vkey, vl, &g)) != ETC_OK) {
            etc_range_free(&g);
            rc = shl__etcd_said(e->c, rc);
            break;
        }
        int64_t mod = g.n ? g.kvs[0].mod_rev : 0;
        size_t len = 0, at = 0;
        uint64_t vt;
        if (g.n && shl__etcd_parse_value(g.kvs[0].value, g.kvs[0].value_len, &vt, &at) != 0) {
            etc_range_free(&g);
            rc = SHL_ECORRUPT;
            break;
        }
        if (g.n) {
            len = g.kvs[0].value_len - at;
            if (len > cap) {
                etc_range_free(&g);
                rc = SHL_E2BIG;
                break;
            }
            memcpy(work, g.kvs[0].value + at, len);
        }
        etc_range_free(&g);
        if (fn(work, &len, cap, arg) != 0 || len > cap) {
            rc = SHL_ECANCELED;
            break;
        }
        int holder_ok = 0;
        rc = guarded_put(e, lease, owner, token, work, len, mod, &holder_ok);
        if (rc == 1) {
            rc = SHL_OK;
            break;
        }
        if (rc < 0)
            break;
        if (!holder_ok) {
            rc = SHL_ELOST;
            break;
        }
        if (shl__etcd_late(e, start)) { /* the value kept changing under us */
            rc = SHL_EUNAVAIL;
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---------------------------------------------------------------- read */

int shl__etcd_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
                   uint64_t *token)
{
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    char vkey[SHL__ETCD_KEY_MAX], tkey[SHL__ETCD_KEY_MAX];
    size_t vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, vkey);
    size_t tl = shl__etcd_key(e, SHL__ETCD_TOKEN, lease, tkey);
    struct etc_op ops[2] = {{ETC_RANGE, vkey, vl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, tkey, tl, NULL, 0, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_txn(e->c, NULL, 0, ops, 2, NULL, 0, &r);
    pthread_mutex_unlock(&e->mu);
    if (rc != ETC_OK || r.nranges != 2) {
        etc_txn_free(&r);
        return rc != ETC_OK ? shl__etcd_said(e->c, rc) : SHL_ECORRUPT;
    }
    size_t n = 0, at = 0;
    uint64_t vt = 0;
    rc = SHL_OK;
    if (r.ranges[0].n) {
        const struct etc_kv *v = &r.ranges[0].kvs[0];
        if (shl__etcd_parse_value(v->value, v->value_len, &vt, &at) != 0 ||
            v->value_len - at > t->value_size)
            rc = SHL_ECORRUPT;
        else if ((n = v->value_len - at) > cap)
            rc = SHL_E2BIG;
        else if (n)
            memcpy(buf, v->value + at, n);
    } else if (!r.ranges[1].n) {
        rc = SHL_ENOENT; /* never used */
    }
    etc_txn_free(&r);
    if (rc == SHL_OK || rc == SHL_E2BIG) {
        if (len)
            *len = n;
        if (token && rc == SHL_OK)
            *token = vt;
    }
    return rc;
}

/* ---------------------------------------------------------------- stat */

int shl__etcd_stat(shl_table *t, const char *lease, shl_lease_info *info)
{
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    struct shl__etcd_acq a;
    shl__etcd_acq_keys(e, lease, &a);
    struct etc_op ops[6] = {{ETC_RANGE, a.hkey, a.hl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, a.tkey, a.tl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, a.vkey, a.vl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, a.wkey, a.wl, a.wend, a.wl, NULL, 0, 0},
                            {ETC_RANGE, a.skey, a.sl, a.send, a.sl, NULL, 0, 0},
                            {ETC_RANGE, a.rkey, a.rl, a.rend, a.rl, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_txn(e->c, NULL, 0, ops, 6, NULL, 0, &r);
    int64_t left = -1;
    if (rc == ETC_OK && r.nranges == 6 && r.ranges[0].n) {
        int x;
        left = shl__etcd_remaining(e, r.ranges[0].kvs[0].lease, &x);
        if (x != SHL_OK)
            rc = ETC_EUNAVAIL;
    }
    pthread_mutex_unlock(&e->mu);
    if (rc == ETC_OK && r.nranges != 6)
        rc = ETC_ECORRUPT;
    if (rc == ETC_OK && !r.ranges[0].n && !r.ranges[1].n && !r.ranges[2].n)
        rc = SHL_ENOENT; /* never used */
    else if (rc == ETC_OK) {
        shl__etcd_fill(r.ranges[0].n ? &r.ranges[0].kvs[0] : NULL, left,
                       r.ranges[1].n ? &r.ranges[1].kvs[0] : NULL,
                       r.ranges[2].n ? &r.ranges[2].kvs[0] : NULL, info);
        info->waiters = (uint32_t)(r.ranges[3].n + r.ranges[5].n); /* writers, readers */
        info->shared = (uint32_t)r.ranges[4].n;
    } else {
        rc = shl__etcd_said(e->c, rc);
    }
    etc_txn_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- revoke */

/* Revokes the etcd lease of every holder of `lease`, the exclusive one and
 * each shared one, read at one revision: their records go with them. A
 * holder that came after that read came after the revoke. */
int shl__etcd_revoke(shl_table *t, const char *lease)
{
    struct shl__etcd *e = t->etcd;
    struct shl__etcd_acq a;
    shl__etcd_acq_keys(e, lease, &a);
    struct etc_op ops[2] = {{ETC_RANGE, a.hkey, a.hl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, a.skey, a.sl, a.send, a.sl, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_txn(e->c, NULL, 0, ops, 2, NULL, 0, &r);
    if (rc == ETC_OK && r.nranges != 2)
        rc = ETC_ECORRUPT;
    int ended = 0, unsure = 0;
    for (size_t k = 0; rc == ETC_OK && k < 2; k++)
        for (size_t i = 0; rc == ETC_OK && i < r.ranges[k].n; i++) {
            const struct etc_kv *kv = &r.ranges[k].kvs[i];
            if (!kv->lease)
                continue;
            int x = etc_lease_revoke(e->c, kv->lease);
            if (x == ETC_EUNKNOWN) { /* read back: is that holder gone? */
                struct etc_range g;
                x = shl__etcd_get_one(e, kv->key, kv->key_len, &g);
                if (x != ETC_OK || (g.n == 1 && g.kvs[0].lease == kv->lease))
                    unsure = 1;
                else
                    ended = 1;
                etc_range_free(&g);
            } else if (x == ETC_OK) {
                ended = 1;
            } else if (x != ETC_ENOTFOUND) {
                rc = x;
            }
        }
    pthread_mutex_unlock(&e->mu);
    etc_txn_free(&r);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    return unsure ? SHL_EUNAVAIL : ended ? SHL_OK : SHL_ENOENT;
}
#endif
