/*
 * lib/kind_etcd/etcd_wait.c - shl_acquire_wait() on an etcd table: a fair queue and
 * watches, no polling (etcd's own lock recipe, in C).
 *
 * A waiter puts a key "TABLE/w/<lease> <id>" attached to an etcd lease of
 * its own (<id>, SHL__ETCD_WAITER_TTL_S seconds, kept alive while it
 * waits): its place in the queue is that key's create revision, and a
 * waiter that dies loses its place when its etcd lease runs out. The first
 * in the queue tries to acquire and, while the lease is held, watches the
 * holder record until it goes (release, revoke or expiry all delete it);
 * (or, when only shared holders keep it, their keys until one goes);
 * every other waiter watches the deletion of the waiter just ahead of it,
 * so one release wakes one waiter (no herd). A plain shl_acquire() does not
 * queue, as on a segment.
 *
 * shl_acquire_shared_wait() queues readers in the same order, their keys
 * "TABLE/r/<lease> <id>" (etcd_kind.h: why apart from the writers'). A
 * writer's waiters ahead are those of both kinds. A reader waits only for
 * the exclusive holder and the writers queued before it: it tries its
 * shared acquire (whose txn compares that no writer key is older than its
 * own) and, refused, watches what refused it: the holder record, the
 * writer just ahead, or the shared holders (SHL_SHARED_MAX, or its owner
 * among them). So when a writer releases, every reader ahead of the next
 * writer wakes and goes in; a writer behind them watches the last of
 * their waiter keys, which each deletes once in, then their shared keys.
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <inttypes.h>
#include <stdio.h>

#include "etcd_kind.h"

struct waiter {
    struct shl__etcd *e;
    char kind;   /* SHL__ETCD_WAITER (a writer) or SHL__ETCD_READER */
    int64_t id;  /* the waiter's etcd lease */
    int64_t rev; /* its key's create revision: its place */
    char key[SHL__ETCD_KEY_MAX];
    size_t kl;
    char pre[SHL__ETCD_KEY_MAX], end[SHL__ETCD_KEY_MAX]; /* the lease's waiters of its kind */
    size_t pl;
    uint64_t next_beat; /* CLOCK_MONOTONIC of the next keep-alive */
};

static int enqueue(struct waiter *w, const char *lease)
{
    struct shl__etcd *e = w->e;
    w->pl = shl__etcd_sub_range(e, w->kind, lease, w->pre, w->end);
    w->rev = 0;
    int64_t got;
    int rc = etc_lease_grant(e->c, SHL__ETCD_WAITER_TTL_S, &w->id, &got);
    if (rc != ETC_OK)
        return shl__etcd_code(rc);
    memcpy(w->key, w->pre, w->pl);
    w->kl = w->pl + (size_t)snprintf(w->key + w->pl, 17, "%016" PRIx64, (uint64_t)w->id);
    /* Put only if new, and only while the table is the one opened (a
     * waiter of a removed table re-creates no key): the create revision is
     * then this txn's revision. */
    struct etc_cmp cmp[2] = {{w->key, w->kl, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0},
                             shl__etcd_same_table(e)};
    struct etc_op put = {ETC_PUT, w->key, w->kl, NULL, 0, "", 0, w->id};
    struct etc_op get = shl__etcd_meta_read(e);
    struct etc_txn_result r = {0};
    rc = etc_txn(e->c, cmp, 2, &put, 1, &get, 1, &r);
    int removed = 0;
    if (rc == ETC_OK && r.succeeded)
        w->rev = r.revision;
    else if (rc == ETC_OK)
        removed = r.nranges == 1 && shl__etcd_removed(e, &r.ranges[0]) != SHL_OK;
    etc_txn_free(&r);
    if (rc == ETC_OK && !w->rev && !removed)
        rc = ETC_ECORRUPT;    /* a waiter key of our fresh etcd lease existed */
    if (rc == ETC_EUNKNOWN) { /* read back our place */
        struct etc_range g = {0};
        rc = etc_get(e->c, w->key, w->kl, NULL, 0, 0, 0, &g);
        if (rc == ETC_OK && g.n == 1)
            w->rev = g.kvs[0].create_rev;
        else if (rc == ETC_OK)
            rc = ETC_EUNAVAIL;
        etc_range_free(&g);
    }
    w->next_beat = shl__mono_ns() + SHL__ETCD_WAITER_BEAT;
    if (rc != ETC_OK || removed) {
        (void)etc_lease_revoke(e->c, w->id);
        w->id = 0;
        return removed ? SHL_EREMOVED : shl__etcd_code(rc);
    }
    return SHL_OK;
}

/* The key to watch for a writer's turn: the waiter of either kind just
 * ahead (*first 0), or none (*first 1: try to acquire); *rev the revision
 * read at. */
static int ahead(struct waiter *w, const char *lease, char *key, size_t *kl, int *first,
                 int64_t *rev)
{
    char rk[SHL__ETCD_KEY_MAX], re[SHL__ETCD_KEY_MAX];
    size_t rl = shl__etcd_sub_range(w->e, SHL__ETCD_READER, lease, rk, re);
    struct etc_op ops[2] = {{ETC_RANGE, w->pre, w->pl, w->end, w->pl, NULL, 0, 0},
                            {ETC_RANGE, rk, rl, re, rl, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    int rc = etc_txn(w->e->c, NULL, 0, ops, 2, NULL, 0, &r);
    if (rc == ETC_OK && r.nranges != 2)
        rc = ETC_ECORRUPT;
    if (rc != ETC_OK) {
        etc_txn_free(&r);
        return shl__etcd_code(rc);
    }
    const struct etc_kv *best = NULL;
    int present = 0;
    for (size_t k = 0; k < r.nranges; k++)
        for (size_t i = 0; i < r.ranges[k].n; i++) {
            const struct etc_kv *kv = &r.ranges[k].kvs[i];
            if (k == 0 && kv->create_rev == w->rev)
                present = 1;
            else if (kv->create_rev < w->rev && (!best || kv->create_rev > best->create_rev))
                best = kv;
        }
    *first = best == NULL;
    *rev = r.revision;
    if (best && best->key_len < SHL__ETCD_KEY_MAX) {
        memcpy(key, best->key, best->key_len);
        *kl = best->key_len;
    }
    etc_txn_free(&r);
    /* Our key gone means our etcd lease ran out (we were stopped for
     * longer than its ttl): queue again, at the back. */
    return present ? SHL_OK : SHL_ENOENT;
}

/* Keeps the waiter's etcd lease alive when due. */
static int beat(struct waiter *w)
{
    uint64_t now = shl__mono_ns();
    if (now < w->next_beat)
        return SHL_OK;
    int rc = etc_lease_keepalive(w->e->c, w->id, NULL);
    if (rc == ETC_EUNKNOWN)
        rc = etc_lease_keepalive(w->e->c, w->id, NULL);
    w->next_beat = now + SHL__ETCD_WAITER_BEAT;
    return rc == ETC_ENOTFOUND ? SHL_ENOENT : shl__etcd_code(rc);
}

/* Leaves the queue and takes a new place at its back: our key is gone (our
 * etcd lease ran out while we were stopped). With e->mu. */
static int requeue(struct waiter *w, const char *lease)
{
    (void)etc_lease_revoke(w->e->c, w->id);
    w->id = 0;
    return enqueue(w, lease);
}

/* Whether `key` (or [key, end) when end) changed after revision `rev`,
 * read through the client (another member than the watch's): *moved 1 when
 * the key is gone, a key of the range went, or one was written since. With
 * e->mu. */
static int moved_since(struct shl__etcd *e, const char *key, size_t kl, const char *end, size_t el,
                       int64_t rev, int *moved)
{
    struct etc_range now = {0}, then = {0};
    int rc = etc_get(e->c, key, kl, end, el, 0, 0, &now);
    *moved = 0;
    for (size_t i = 0; rc == ETC_OK && i < now.n; i++)
        *moved |= now.kvs[i].mod_rev > rev;
    if (rc == ETC_OK && !end)
        *moved |= now.n == 0; /* it existed at rev */
    else if (rc == ETC_OK && !*moved) {
        /* As many keys now as then, none written since: none went. */
        rc = etc_get(e->c, key, kl, end, el, 0, rev, &then);
        if (rc == ETC_OK)
            *moved = then.count != now.count;
        else if (rc == ETC_ECOMPACTED) {
            *moved = 1; /* look again from a fresh read */
            rc = ETC_OK;
        }
    }
    etc_range_free(&now);
    etc_range_free(&then);
    return rc;
}

/* Waits for `key` (or a key of [key, end) when end) to be deleted after
 * revision `rev`, keeping our place
 * alive meanwhile. SHL_OK (deleted, or the stream ended: look again),
 * SHL_ETIMEDOUT at the deadline, SHL_ENOENT when our place was lost.
 *
 * A watch on a member that stops (SIGSTOP, a hung disk) stays open and
 * silent: nothing ends it. So every SHL__ETCD_RECHECK_NS the waited key is
 * read through another member than the watch's (etc_watch_apart: the
 * keep-alives go there too), and a change the watch did not report means
 * the stream is stale: look again, on a fresh watch. */
static int wait_gone(struct waiter *w, const char *key, size_t kl, const char *end, size_t el,
                     int64_t rev, uint64_t deadline)
{
    struct shl__etcd *e = w->e;
    etc_watch *wa = NULL;
    pthread_mutex_lock(&e->mu);
    int rc = etc_watch_open(e->c, key, kl, end, el, rev + 1, &wa);
    if (rc == ETC_OK)
        etc_watch_apart(wa);
    pthread_mutex_unlock(&e->mu);
    if (rc != ETC_OK)
        return rc == ETC_ECOMPACTED ? SHL_OK : shl__etcd_code(rc);
    uint64_t next_check = shl__mono_ns() + SHL__ETCD_RECHECK_NS;
    for (;;) {
        uint64_t now = shl__mono_ns();
        if (now >= deadline) {
            rc = SHL_ETIMEDOUT;
            break;
        }
        if (now >= next_check) {
            int moved = 0;
            pthread_mutex_lock(&e->mu);
            int x = moved_since(e, key, kl, end, el, rev, &moved);
            pthread_mutex_unlock(&e->mu);
            if (x == ETC_OK && moved) {
                rc = SHL_OK; /* the watch missed it: look again */
                break;
            }
            /* Unanswered: the watch may still be right; the next check. */
            now = shl__mono_ns();
            next_check = now + SHL__ETCD_RECHECK_NS;
        }
        uint64_t until = w->next_beat < deadline ? w->next_beat : deadline;
        if (next_check < until)
            until = next_check;
        uint64_t ms = until > now ? (until - now) / 1000000u + 1 : 1;
        struct etc_event ev;
        int x = etc_watch_next(wa, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms, &ev);
        if (x == ETC_OK) {
            int gone = ev.type == ETC_EV_DELETE;
            etc_event_free(&ev);
            if (gone) {
                rc = SHL_OK;
                break;
            }
        } else if (x != ETC_ETIMEDOUT) {
            rc = SHL_OK; /* the stream broke: look again (a fresh read) */
            break;
        }
        pthread_mutex_lock(&e->mu);
        rc = beat(w);
        pthread_mutex_unlock(&e->mu);
        if (rc != SHL_OK)
            break;
    }
    etc_watch_close(wa);
    return rc;
}

/* What keeps the lease from us, and the revision at which it was seen (0:
 * free): the holder's key (*el 0), or, with shared holders only, the range
 * of their keys [key, end): one of them going is worth a look. */
static int holder_rev(struct shl__etcd *e, const char *lease, char *key, size_t *kl, char *end,
                      size_t *el, int64_t *rev)
{
    char skey[SHL__ETCD_KEY_MAX], send[SHL__ETCD_KEY_MAX];
    *kl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, key);
    size_t sl = shl__etcd_sub_range(e, SHL__ETCD_SHARED, lease, skey, send);
    struct etc_op ops[2] = {{ETC_RANGE, key, *kl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, skey, sl, send, sl, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    int rc = etc_txn(e->c, NULL, 0, ops, 2, NULL, 0, &r);
    if (rc == ETC_OK && r.nranges != 2)
        rc = ETC_ECORRUPT;
    *rev = 0;
    *el = 0;
    if (rc == ETC_OK && r.ranges[0].n) {
        *rev = r.revision;
    } else if (rc == ETC_OK && r.ranges[1].n) {
        *rev = r.revision;
        memcpy(key, skey, sl);
        memcpy(end, send, sl);
        *kl = *el = sl;
    }
    etc_txn_free(&r);
    return shl__etcd_code(rc);
}

/* One waiting acquisition's arguments. */
struct ask {
    shl_table *t;
    const char *lease, *owner;
    uint32_t olen;
    uint64_t ttl_ns;
    uint64_t *token, *gen;
};

/* A writer's look: when first in the queue, its acquire. SHL_OK acquired;
 * SHL_EBUSY: q->wkey (or the range to q->wend when q->wel) is what to see
 * deleted after revision q->at; SHL_ENOENT: our place was lost. */
static int writer_look(struct waiter *w, const struct ask *a, struct shl__etcd_turn *q)
{
    struct shl__etcd *e = w->e;
    for (;;) {
        int first = 0;
        q->wel = 0;
        pthread_mutex_lock(&e->mu);
        int rc = ahead(w, a->lease, q->wkey, &q->wkl, &first, &q->at);
        if (rc == SHL_OK)
            rc = beat(w);
        pthread_mutex_unlock(&e->mu);
        if (rc != SHL_OK || !first)
            return rc == SHL_OK ? SHL_EBUSY : rc;
        rc = shl__etcd_acquire(a->t, a->lease, a->owner, a->olen, a->ttl_ns, a->token, NULL);
        if (rc != SHL_EBUSY)
            return rc;
        pthread_mutex_lock(&e->mu);
        rc = holder_rev(e, a->lease, q->wkey, &q->wkl, q->wend, &q->wel, &q->at);
        pthread_mutex_unlock(&e->mu);
        if (rc != SHL_OK || q->at)
            return rc == SHL_OK ? SHL_EBUSY : rc;
        /* freed meanwhile: look again */
    }
}

/* A reader's look: its shared acquire as a queued reader; results as
 * writer_look()'s. */
static int reader_look(struct waiter *w, const struct ask *a, struct shl__etcd_turn *q)
{
    struct shl__etcd *e = w->e;
    *q = (struct shl__etcd_turn){.key = w->key, .kl = w->kl, .rev = w->rev};
    pthread_mutex_lock(&e->mu);
    int rc = beat(w);
    if (rc == SHL_OK)
        rc = shl__etcd_acquire_turn(e, a->lease, a->owner, a->ttl_ns, a->token, a->gen, q);
    pthread_mutex_unlock(&e->mu);
    return rc == SHL_EBUSY && q->lost ? SHL_ENOENT : rc;
}

/* Queues w (its kind set) and waits for its turn until `deadline`, then
 * leaves the queue, whatever the outcome. */
static int queue_wait(struct waiter *w, const struct ask *a, uint64_t deadline)
{
    struct shl__etcd *e = w->e;
    pthread_mutex_lock(&e->mu);
    int rc = enqueue(w, a->lease);
    pthread_mutex_unlock(&e->mu);
    while (rc == SHL_OK) {
        struct shl__etcd_turn q;
        rc = w->kind == SHL__ETCD_READER ? reader_look(w, a, &q) : writer_look(w, a, &q);
        if (rc == SHL_EBUSY)
            rc = wait_gone(w, q.wkey, q.wkl, q.wel ? q.wend : NULL, q.wel, q.at, deadline);
        else if (rc != SHL_ENOENT)
            break;
        if (rc == SHL_ENOENT) { /* our place was lost: queue again */
            pthread_mutex_lock(&e->mu);
            rc = requeue(w, a->lease);
            pthread_mutex_unlock(&e->mu);
        }
    }
    if (w->id) { /* leave the queue: our key goes with our etcd lease */
        pthread_mutex_lock(&e->mu);
        (void)etc_lease_revoke(e->c, w->id);
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

static uint64_t deadline_of(uint64_t timeout_ns)
{
    uint64_t start = shl__mono_ns();
    return timeout_ns < UINT64_MAX - start ? start + timeout_ns : UINT64_MAX;
}

int shl__etcd_wait(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                   uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token)
{
    struct shl__key k;
    if (shl__key_lease(lease, &k) != SHL_OK)
        return SHL_EINVAL;
    if (timeout_ns == 0) { /* try once */
        int rc = shl__etcd_acquire(t, lease, owner, olen, ttl_ns, token, NULL);
        return rc == SHL_EBUSY ? SHL_ETIMEDOUT : rc;
    }
    uint64_t deadline = deadline_of(timeout_ns);
    struct waiter w = {.e = t->etcd, .kind = SHL__ETCD_WAITER};
    struct ask a = {t, lease, owner, olen, ttl_ns, token, NULL};
    return queue_wait(&w, &a, deadline);
}

int shl__etcd_shared_wait(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                          uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token, uint64_t *gen)
{
    struct shl__key k;
    if (shl__key_lease(lease, &k) != SHL_OK)
        return SHL_EINVAL;
    uint64_t deadline = deadline_of(timeout_ns);
    /* A reader arriving now may go in at once exactly when a plain shared
     * acquire may: no exclusive holder and no writer queued at all (none
     * can be behind it yet). Only a refusal queues it. */
    int rc = shl__etcd_acquire_shared(t, lease, owner, olen, ttl_ns, token, gen, NULL);
    if (rc != SHL_EBUSY || timeout_ns == 0)
        return rc == SHL_EBUSY ? SHL_ETIMEDOUT : rc;
    struct waiter w = {.e = t->etcd, .kind = SHL__ETCD_READER};
    struct ask a = {t, lease, owner, olen, ttl_ns, token, gen};
    return queue_wait(&w, &a, deadline);
}
#endif
