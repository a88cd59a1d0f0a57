/*
 * lib/kind_etcd/etcd_acquire.c - acquiring a lease of an etcd table, exclusive
 * or shared, etcd enforcing it.
 *
 * An acquisition is one txn: it compares the lease's records (holder, token,
 * shared holders, queued writers) read at one revision and, when the lease
 * is free to this caller, puts the holder record on a fresh etcd lease and
 * the token record one higher. A state change whose answer was lost
 * (ETC_EUNKNOWN) is resolved by reading the records back before returning;
 * only when that fails too is the result SHL_EUNAVAIL ("may have happened").
 * What etcd enforces afterwards, and the holder's own operations, are in
 * etcd_lease.c.
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "etcd_kind.h"
#include "mutation.h"

/* An acquisition's txn that etcd did not answer with a result (rc): our
 * etcd lease ran out meanwhile (a new one is granted into *id, *got) or the
 * answer was lost (ETC_EUNKNOWN: the caller reads back and tries again):
 * SHL_OK, go on; any other failure drops the etcd lease and is returned. */
static int txn_failed(struct shl__etcd *e, int rc, int64_t ttl_s, int64_t *id, int64_t *got)
{
    if (rc == ETC_ENOTFOUND) {
        rc = shl__etcd_grant(e, ttl_s, id, got);
        return rc == ETC_OK ? SHL_OK : shl__etcd_said(e->c, rc);
    }
    if (rc == ETC_EUNKNOWN)
        return SHL_OK;
    shl__etcd_drop(e, *id);
    return shl__etcd_said(e->c, rc);
}

/* After a lost answer: did our acquisition (record `key` = `hv` on etcd
 * lease id) land? 1 yes, 0 no, negative: could not tell. */
static int acquired_back(struct shl__etcd *e, const char *key, size_t kl, const char *hv,
                         size_t hvl, int64_t id)
{
    struct etc_range r;
    int rc = shl__etcd_get_one(e, key, kl, &r);
    int yes = rc == ETC_OK && r.n == 1 && r.kvs[0].lease == id && r.kvs[0].value_len == hvl &&
              memcmp(r.kvs[0].value, hv, hvl) == 0;
    etc_range_free(&r);
    return rc != ETC_OK ? shl__etcd_said(e->c, rc) : yes;
}

/* The refusal's details for shl_acquire_ex(): the holder `h` (the
 * exclusive one, or one shared holder of `shared`), from the records of
 * the refusing answer. */
static void busy_info(struct shl__etcd *e, const struct etc_kv *h, const struct etc_kv *tk,
                      const struct etc_kv *v, uint32_t shared, shl_lease_info *holder)
{
    int rc;
    int64_t left = h ? shl__etcd_remaining(e, h->lease, &rc) : -1;
    if (h && rc != SHL_OK)
        left = 0; /* held (etcd just said so), time unknown */
    shl__etcd_fill(h, left, tk, v, holder);
    holder->shared = shared;
}

static const struct etc_kv *first_kv(const struct etc_txn_result *r, size_t i)
{
    return r->nranges > i && r->ranges[i].n ? &r->ranges[i].kvs[0] : NULL;
}

/* SHL_ECORRUPT when the token record tk is missing beside a record that
 * carries a token (the value v, the gen g, `shared` shared holders): a
 * token record deleted by hand, which must not start the tokens over at
 * 1, below those already issued. SHL_OK otherwise. */
static int token_missing(const struct etc_kv *tk, const struct etc_kv *v, const struct etc_kv *g,
                         size_t shared)
{
    if (SHL__MUTANT(ETCD_TOKEN_MISSING_OK))
        return SHL_OK;
    return !tk && (v || g || shared) ? SHL_ECORRUPT : SHL_OK;
}

static int acquire_locked(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                          uint64_t *token, shl_lease_info *holder)
{
    struct shl__etcd *e = t->etcd;
    uint64_t start = shl__mono_ns();
    int64_t ttl_s = shl__etcd_ttl_s(e, ttl_ns);
    if (ttl_s == 0)
        return SHL_EINVAL;
    struct shl__etcd_acq a;
    shl__etcd_acq_keys(e, lease, &a);
    struct shl__etcd_held *c = shl__etcd_held_of(e, lease, 0);
    uint64_t n = c ? c->token : 0; /* a guess; the txn checks it */
    int64_t id = 0, got = 0;
    int rc = shl__etcd_grant(e, ttl_s, &id, &got);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc); /* a lease granted unknowingly expires by itself */
    for (;;) {
        char nv[24], hv[SHL__ETCD_HOLDER_MAX], cur[24];
        size_t nvl = (size_t)snprintf(nv, sizeof nv, "%llu", (unsigned long long)(n + 1));
        size_t curl = (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)n);
        size_t hvl = shl__etcd_holder_value(n + 1, owner, hv);
        /* No exclusive holder, no shared holder (no key in the lease's
         * shared range: each lives exactly as long as its etcd lease), and
         * the token as guessed; a first token only where no value or gen
         * record carries one (token_missing()). */
        struct etc_cmp cmp[6] = {
            {a.hkey, a.hl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
            {a.skey, a.sl, ETC_VERSION, ETC_EQ, NULL, 0, 0, a.send, a.sl},
            n ? (struct etc_cmp){a.tkey, a.tl, ETC_VALUE, ETC_EQ, cur, curl, 0, NULL, 0}
              : (struct etc_cmp){a.tkey, a.tl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
            {a.vkey, a.vl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
            {a.gkey, a.gl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
        };
        size_t ncmp = n || SHL__MUTANT(ETCD_TOKEN_MISSING_OK) ? 3 : 5;
        if (SHL__MUTANT(ETCD_TOKEN_GUESS))
            cmp[2] = cmp[--ncmp];
        int see_shared = !SHL__MUTANT(ETCD_SHARED_IGNORED);
        if (!see_shared)
            cmp[1] = cmp[--ncmp];
        cmp[ncmp++] = shl__etcd_same_table(e);
        struct etc_op then[3] = {
            {ETC_PUT, a.hkey, a.hl, NULL, 0, hv, hvl, id},
            {ETC_PUT, a.tkey, a.tl, NULL, 0, nv, nvl, 0},
            {ETC_PUT, a.gkey, a.gl, NULL, 0, nv, nvl, 0},
        };
        struct etc_op els[6] = {
            {ETC_RANGE, a.hkey, a.hl, NULL, 0, NULL, 0, 0},
            {ETC_RANGE, a.tkey, a.tl, NULL, 0, NULL, 0, 0},
            {ETC_RANGE, a.vkey, a.vl, NULL, 0, NULL, 0, 0},
            {ETC_RANGE, a.skey, a.sl, a.send, a.sl, NULL, 0, 0},
            {ETC_RANGE, a.gkey, a.gl, NULL, 0, NULL, 0, 0},
            shl__etcd_meta_read(e),
        };
        struct etc_txn_result r = {0};
        rc = etc_txn(e->c, cmp, ncmp, then, 3, els, 6, &r);
        int won = rc == ETC_OK && r.succeeded;
        if (rc == ETC_EUNKNOWN) {
            int back = acquired_back(e, a.hkey, a.hl, hv, hvl, id);
            if (back < 0) {
                etc_txn_free(&r);
                shl__etcd_drop(e, id);
                return SHL_EUNAVAIL;
            }
            won = back;
        }
        if (won) {
            etc_txn_free(&r);
            struct shl__etcd_held *h = shl__etcd_held_of(e, lease, 1);
            h->token = n + 1;
            strcpy(h->owner, owner);
            h->id = id;
            h->ttl_s = got;
            *token = n + 1;
            return SHL_OK;
        }
        if (rc == ETC_OK && r.nranges == 6 && shl__etcd_removed(e, &r.ranges[5]) != SHL_OK) {
            etc_txn_free(&r);
            shl__etcd_drop(e, id);
            return SHL_EREMOVED;
        }
        if (rc == ETC_OK && r.nranges == 6 && (r.ranges[0].n || (see_shared && r.ranges[3].n))) {
            if (holder) {
                uint32_t ns = (uint32_t)r.ranges[3].n;
                busy_info(e, r.ranges[0].n ? first_kv(&r, 0) : first_kv(&r, 3), first_kv(&r, 1),
                          first_kv(&r, 2), ns, holder);
            }
            etc_txn_free(&r);
            shl__etcd_drop(e, id);
            return SHL_EBUSY;
        }
        if (rc == ETC_OK && r.nranges == 6) {
            /* Free, but the token moved on since our guess: take it from
             * the answer and try again. */
            uint64_t seen = 0;
            int bad = (r.ranges[1].n &&
                       shl__etcd_parse_token(r.ranges[1].kvs[0].value, r.ranges[1].kvs[0].value_len,
                                             &seen) != 0) ||
                      token_missing(first_kv(&r, 1), first_kv(&r, 2), first_kv(&r, 4), 0) != SHL_OK;
            etc_txn_free(&r);
            if (bad || seen == UINT64_MAX) {
                shl__etcd_drop(e, id);
                return bad ? SHL_ECORRUPT : SHL_ETOKENS;
            }
            n = seen;
        } else {
            etc_txn_free(&r);
            if ((rc = txn_failed(e, rc, ttl_s, &id, &got)) != SHL_OK)
                return rc;
        }
        if (shl__etcd_late(e, start)) {
            shl__etcd_drop(e, id);
            return SHL_EUNAVAIL;
        }
    }
}

int shl__etcd_acquire(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                      uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    pthread_mutex_lock(&e->mu);
    int rc = acquire_locked(t, lease, owner, ttl_ns, token, holder);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---------------------------------------------------------------- shared */

/* The ranges a shared acquire decides on, read at one revision: holder,
 * token, value, gen, shared holders, queued writers, and for a queued
 * reader its own waiter key (in this order). */
#define SH_RANGES 7

static size_t shared_reads(const struct shl__etcd *e, const struct shl__etcd_acq *a,
                           const struct shl__etcd_turn *q, struct etc_op *ops)
{
    ops[0] = (struct etc_op){ETC_RANGE, a->hkey, a->hl, NULL, 0, NULL, 0, 0};
    ops[1] = (struct etc_op){ETC_RANGE, a->tkey, a->tl, NULL, 0, NULL, 0, 0};
    ops[2] = (struct etc_op){ETC_RANGE, a->vkey, a->vl, NULL, 0, NULL, 0, 0};
    ops[3] = (struct etc_op){ETC_RANGE, a->gkey, a->gl, NULL, 0, NULL, 0, 0};
    ops[4] = (struct etc_op){ETC_RANGE, a->skey, a->sl, a->send, a->sl, NULL, 0, 0};
    ops[5] = (struct etc_op){ETC_RANGE, a->wkey, a->wl, a->wend, a->wl, NULL, 0, 0};
    ops[6] = shl__etcd_meta_read(e);
    if (!q)
        return SH_RANGES;
    ops[SH_RANGES] = (struct etc_op){ETC_RANGE, q->key, q->kl, NULL, 0, NULL, 0, 0};
    return SH_RANGES + 1;
}

/* For a queued reader: the writer queued just ahead of it (the youngest
 * writer key older than its own), or NULL. */
static const struct etc_kv *writer_ahead(const struct etc_range *w, const struct shl__etcd_turn *q)
{
    const struct etc_kv *best = NULL;
    for (size_t i = 0; i < w->n; i++)
        if (w->kvs[i].create_rev < q->rev && (!best || w->kvs[i].create_rev > best->create_rev))
            best = &w->kvs[i];
    return best;
}

/* What a refused queued reader watches: kv's key (or, kv NULL, the
 * lease's shared range), from the revision the refusal was read at. */
static void turn_block(struct shl__etcd_turn *q, const struct shl__etcd_acq *a,
                       const struct etc_kv *kv, int64_t at)
{
    q->at = at;
    q->wel = 0;
    if (kv && kv->key_len < SHL__ETCD_KEY_MAX) {
        memcpy(q->wkey, kv->key, kv->key_len);
        q->wkl = kv->key_len;
    } else {
        memcpy(q->wkey, a->skey, a->sl);
        memcpy(q->wend, a->send, a->sl);
        q->wkl = q->wel = a->sl;
    }
}

/* Decides a shared acquire on records read at one revision: SHL_OK with
 * the token record's n and the gen, SHL_EBUSY (details in *holder, or for
 * a queued reader q what to watch), or a code for malformed records. */
static int shared_decide(struct shl__etcd *e, const struct shl__etcd_acq *a,
                         const struct etc_txn_result *r, const char *owner,
                         struct shl__etcd_turn *q, uint64_t *n, uint64_t *gen,
                         shl_lease_info *holder)
{
    if (r->nranges != SH_RANGES + (q != NULL))
        return SHL_ECORRUPT;
    if (shl__etcd_removed(e, &r->ranges[6]) != SHL_OK)
        return SHL_EREMOVED;
    const struct etc_kv *h = first_kv(r, 0), *tk = first_kv(r, 1), *g = first_kv(r, 3);
    const struct etc_range *sh = &r->ranges[4];
    uint32_t ns = (uint32_t)sh->n;
    const struct etc_kv *in_way = h;
    if (q && r->ranges[SH_RANGES].n == 0) {
        q->lost = 1; /* our waiter key went with its etcd lease */
        return SHL_EBUSY;
    }
    const struct etc_kv *ahead = q ? writer_ahead(&r->ranges[5], q) : NULL;
    if (q && !in_way && ahead) {
        turn_block(q, a, ahead, r->revision);
        return SHL_EBUSY;
    }
    if (!in_way && !q && r->ranges[5].n)
        in_way = sh->n ? &sh->kvs[0] : NULL; /* a writer queued: nothing to show but readers */
    else if (!in_way) {
        size_t ol = strlen(owner);
        for (size_t i = 0; i < sh->n && !in_way; i++) {
            uint64_t tok;
            char o[SHL_OWNER_MAX + 1];
            if (shl__etcd_parse_holder(sh->kvs[i].value, sh->kvs[i].value_len, &tok, o) != 0)
                return SHL_ECORRUPT;
            if (strlen(o) == ol && memcmp(o, owner, ol) == 0)
                in_way = &sh->kvs[i]; /* the owner holds it shared already */
        }
        if (!in_way && ns >= SHL_SHARED_MAX)
            in_way = &sh->kvs[0];
        if (!in_way) {
            uint64_t seen = 0, gs = 0;
            if (token_missing(tk, first_kv(r, 2), g, ns) != SHL_OK ||
                (tk && shl__etcd_parse_token(tk->value, tk->value_len, &seen) != 0) ||
                (g && shl__etcd_parse_token(g->value, g->value_len, &gs) != 0))
                return SHL_ECORRUPT;
            if (seen == UINT64_MAX)
                return SHL_ETOKENS;
            *n = seen;
            *gen = gs;
            return SHL_OK;
        }
        if (q) { /* a shared holder in the way: one of them going is worth a look */
            turn_block(q, a, NULL, r->revision);
            return SHL_EBUSY;
        }
    }
    if (q)
        turn_block(q, a, in_way, r->revision); /* the exclusive holder */
    else if (holder)
        busy_info(e, in_way, tk, first_kv(r, 2), ns, holder);
    return SHL_EBUSY;
}

/* A shared acquire; q: that of a queued reader (NULL: a plain one). */
static int acquire_shared_locked(struct shl__etcd *e, const char *lease, const char *owner,
                                 uint64_t ttl_ns, uint64_t *token, uint64_t *gen,
                                 shl_lease_info *holder, struct shl__etcd_turn *q)
{
    uint64_t start = shl__mono_ns();
    int64_t ttl_s = shl__etcd_ttl_s(e, ttl_ns);
    if (ttl_s == 0)
        return SHL_EINVAL;
    struct shl__etcd_acq a;
    shl__etcd_acq_keys(e, lease, &a);
    struct etc_op reads[SH_RANGES + 1];
    size_t nreads = shared_reads(e, &a, q, reads);
    struct etc_txn_result r = {0};
    int rc = etc_txn(e->c, NULL, 0, reads, nreads, NULL, 0, &r);
    uint64_t n = 0, g = 0;
    if (rc != ETC_OK) {
        etc_txn_free(&r);
        return shl__etcd_said(e->c, rc);
    }
    rc = shared_decide(e, &a, &r, owner, q, &n, &g, holder);
    size_t writers = r.nranges > 5 ? r.ranges[5].n : 0;
    etc_txn_free(&r);
    if (rc != SHL_OK)
        return rc;
    int64_t id = 0, got = 0;
    if ((rc = shl__etcd_grant(e, ttl_s, &id, &got)) != ETC_OK)
        return shl__etcd_said(e->c, rc);
    for (;;) {
        char nv[24], hv[SHL__ETCD_HOLDER_MAX], cur[24], key[SHL__ETCD_KEY_MAX];
        size_t nvl = (size_t)snprintf(nv, sizeof nv, "%llu", (unsigned long long)(n + 1));
        size_t curl = (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)n);
        size_t hvl = shl__etcd_holder_value(n + 1, owner, hv);
        memcpy(key, a.skey, a.sl);
        size_t kl = a.sl + (size_t)snprintf(key + a.sl, 21, "%llu", (unsigned long long)(n + 1));
        /* Token = n: no acquisition of either kind since the records were
         * read, so the shared holders then are a superset of those now
         * and the gen is unchanged. No writer queued: for a queued reader,
         * none ahead of it (see etcd_kind.h), and its place still held. */
        struct etc_cmp cmp[5] = {
            {a.hkey, a.hl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
            n ? (struct etc_cmp){a.tkey, a.tl, ETC_VALUE, ETC_EQ, cur, curl, 0, NULL, 0}
              : (struct etc_cmp){a.tkey, a.tl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
            q && writers
                ? (struct etc_cmp){a.wkey, a.wl, ETC_CREATE, ETC_GT, NULL, 0, q->rev, a.wend, a.wl}
                : (struct etc_cmp){a.wkey, a.wl, ETC_VERSION, ETC_EQ, NULL, 0, 0, a.wend, a.wl},
            q ? (struct etc_cmp){q->key, q->kl, ETC_CREATE, ETC_EQ, NULL, 0, q->rev, NULL, 0}
              : shl__etcd_same_table(e),
            shl__etcd_same_table(e),
        };
        struct etc_op then[2] = {
            {ETC_PUT, key, kl, NULL, 0, hv, hvl, id},
            {ETC_PUT, a.tkey, a.tl, NULL, 0, nv, nvl, 0},
        };
        r = (struct etc_txn_result){0};
        rc = etc_txn(e->c, cmp, q ? 5 : 4, then, 2, reads, nreads, &r);
        int won = rc == ETC_OK && r.succeeded;
        if (rc == ETC_EUNKNOWN) {
            int back = acquired_back(e, key, kl, hv, hvl, id);
            if (back < 0) {
                etc_txn_free(&r);
                shl__etcd_drop(e, id);
                return SHL_EUNAVAIL;
            }
            won = back;
        }
        if (won) {
            etc_txn_free(&r);
            *token = n + 1;
            if (gen)
                *gen = g;
            return SHL_OK;
        }
        if (rc == ETC_OK) {
            rc = shared_decide(e, &a, &r, owner, q, &n, &g, holder);
            writers = r.nranges > 5 ? r.ranges[5].n : 0;
            etc_txn_free(&r);
            if (rc != SHL_OK) {
                shl__etcd_drop(e, id);
                return rc;
            }
        } else {
            etc_txn_free(&r);
            if ((rc = txn_failed(e, rc, ttl_s, &id, &got)) != SHL_OK)
                return rc;
        }
        if (shl__etcd_late(e, start)) {
            shl__etcd_drop(e, id);
            return SHL_EUNAVAIL;
        }
    }
}

int shl__etcd_acquire_turn(struct shl__etcd *e, const char *lease, const char *owner,
                           uint64_t ttl_ns, uint64_t *token, uint64_t *gen,
                           struct shl__etcd_turn *q)
{
    q->lost = 0;
    return acquire_shared_locked(e, lease, owner, ttl_ns, token, gen, NULL, q);
}

int shl__etcd_acquire_shared(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                             uint64_t ttl_ns, uint64_t *token, uint64_t *gen,
                             shl_lease_info *holder)
{
    (void)olen;
    if (!shl__etcd_lease_name_ok(lease))
        return SHL_EINVAL;
    struct shl__etcd *e = t->etcd;
    pthread_mutex_lock(&e->mu);
    int rc = acquire_shared_locked(e, lease, owner, ttl_ns, token, gen, holder, NULL);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

#endif
