/*
 * lib/etcd_inspect.c - inspection and checking of an etcd table.
 *
 * A lease's detail on etcd is its shl_stat() state, a preview of its value
 * and a history read from etcd's revisions of its holder record (see
 * history()); the segment's lock, intent and counters do not exist there
 * (zero). shl_check() reads every key under the table's prefix and
 * reports each one that is not a record of the layout (etcd_kind.h), or
 * whose value does not parse, and each lease whose records disagree.
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>

#include "etcd_kind.h"

/* Store revisions a lease's history looks back over at most. */
#define SHL__ETCD_HISTORY_REVS 4096

struct hist {
    shl_lease_detail *d;
    uint64_t token; /* the hold the next delete ends */
    char owner[17];
};

static void add(struct hist *h, int op, int64_t rev)
{
    shl_lease_detail *d = h->d;
    if (d->nevents == SHL_HISTORY_MAX) {
        memmove(d->events, d->events + 1, sizeof d->events[0] * (SHL_HISTORY_MAX - 1));
        d->nevents--;
    }
    shl_event_info *ev = &d->events[d->nevents++];
    memset(ev, 0, sizeof *ev);
    ev->op = op;
    ev->revision = rev;
    ev->token = h->token;
    memcpy(ev->owner, h->owner, sizeof ev->owner);
    d->events_total++;
}

/* The hold a holder record names (an unparsable one: token 0, no owner). */
static void holding(struct hist *h, const struct etc_kv *kv)
{
    char owner[SHL_OWNER_MAX + 1];
    h->token = 0;
    h->owner[0] = 0;
    if (kv && shl__etcd_parse_holder(kv->value, kv->value_len, &h->token, owner) == 0)
        snprintf(h->owner, sizeof h->owner, "%.16s", owner);
}

/* The oldest revision in (lo, hi] that etcd still keeps, hi being kept:
 * a bisection of reads of `key`. */
static int64_t oldest_kept(struct shl__etcd *e, const char *key, size_t kl, int64_t lo, int64_t hi,
                           int *rc)
{
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        struct etc_range r = {0};
        int x = etc_get(e->c, key, kl, NULL, 0, 1, mid, &r);
        etc_range_free(&r);
        if (x == ETC_OK)
            hi = mid;
        else if (x == ETC_ECOMPACTED)
            lo = mid;
        else {
            *rc = x;
            return 0;
        }
    }
    return hi;
}

/*
 * The lease's history from etcd's revisions of its holder record
 * TABLE/h/<lease>: the puts and deletes of the last SHL__ETCD_HISTORY_REVS
 * store revisions (fewer when compacted), read with one watch from the
 * window's start, which etcd answers with the past events at once. The
 * watch stops at the record's last event at or before the read revision R:
 * the put at its mod revision when it exists; else the first delete after
 * the token record's mod revision (the last acquisition: the holder and
 * token records are put by one txn, and only an acquisition creates the
 * holder record). When that event never comes (records that disagree),
 * the history stops at the deadline, partial. Called with e->mu; an ETC_
 * code.
 */
static int history(struct shl__etcd *e, const char *lease, shl_lease_detail *d)
{
    char hkey[SHL__ETCD_KEY_MAX], tkey[SHL__ETCD_KEY_MAX];
    size_t hl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, hkey);
    size_t tl = shl__etcd_key(e, SHL__ETCD_TOKEN, lease, tkey);
    struct etc_range h = {0}, tk = {0}, before = {0};
    struct hist st = {d, 0, ""};
    int x = etc_get(e->c, hkey, hl, NULL, 0, 0, 0, &h);
    int64_t R = h.revision;
    if (x == ETC_OK)
        x = etc_get(e->c, tkey, tl, NULL, 0, 0, R, &tk);
    if (x != ETC_OK || tk.n == 0)
        goto out;                              /* never acquired: no history */
    int64_t last = h.n ? h.kvs[0].mod_rev : 0; /* the put that ends the walk */
    int64_t acq = tk.kvs[0].mod_rev;           /* else the delete after this */
    int64_t S = R - SHL__ETCD_HISTORY_REVS + 1;
    if (S < 1)
        S = 1;
    /* The state before the window: the hold a first delete ends (at
     * revision 1, etcd's first, there is none). Compacted: the window
     * starts at the oldest revision kept, whose state stands for before. */
    int64_t at = S > 1 ? S - 1 : 1;
    x = etc_get(e->c, hkey, hl, NULL, 0, 0, at, &before);
    if (x == ETC_ECOMPACTED) {
        x = ETC_OK;
        S = oldest_kept(e, hkey, hl, at, R, &x);
        etc_range_free(&before);
        if (x == ETC_OK)
            x = etc_get(e->c, hkey, hl, NULL, 0, 0, S, &before);
    }
    if (x != ETC_OK)
        goto out;
    d->history_partial = S > tk.kvs[0].create_rev;
    holding(&st, before.n ? &before.kvs[0] : NULL);
    if (h.n ? last < S : acq < S && before.n == 0)
        goto out; /* no event of the record in the window */
    etc_watch *w = NULL;
    x = etc_watch_open(e->c, hkey, hl, NULL, 0, S, &w);
    uint64_t deadline = shl__mono_ns() + (uint64_t)e->timeout_ms * 1000000u;
    while (x == ETC_OK) {
        uint64_t now = shl__mono_ns();
        if (now >= deadline) {
            /* etcd sends the past at once: the event awaited is not there
             * (records that disagree, which shl_check() reports). */
            d->history_partial = 1;
            break;
        }
        struct etc_event ev;
        uint64_t ms = (deadline - now) / 1000000u + 1;
        x = etc_watch_next(w, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms, &ev);
        if (x == ETC_ETIMEDOUT) {
            x = ETC_OK;
            continue;
        }
        if (x != ETC_OK)
            break;
        int64_t rev = ev.kv.mod_rev;
        int end = rev > R;
        if (!end && ev.type == ETC_EV_PUT) {
            holding(&st, &ev.kv);
            add(&st, ev.kv.version == 1 ? SHL_OP_ACQUIRE : SHL_OP_RENEW, rev);
            end = h.n && rev >= last;
        } else if (!end) {
            add(&st, SHL_OP_END, rev);
            end = !h.n && rev > acq;
        }
        etc_event_free(&ev);
        if (end)
            break;
    }
    etc_watch_close(w);
    if (x == ETC_ECOMPACTED) { /* compacted meanwhile: what came is kept */
        d->history_partial = 1;
        x = ETC_OK;
    }
out:
    etc_range_free(&h);
    etc_range_free(&tk);
    etc_range_free(&before);
    return x;
}

int shl__etcd_inspect(shl_table *t, const char *lease, shl_lease_detail *d)
{
    memset(d, 0, sizeof *d);
    int rc = shl_stat(t, lease, &d->info);
    if (rc != SHL_OK)
        return rc;
    strcpy(d->name, lease);
    d->stable = 1;
    unsigned char buf[SHL_PREVIEW_MAX];
    size_t len = 0;
    /* A preview: the value's first bytes (E2BIG only says it is longer). */
    struct shl__etcd *e = t->etcd;
    char vkey[SHL__ETCD_KEY_MAX];
    size_t vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, vkey);
    struct etc_range r = {0};
    pthread_mutex_lock(&e->mu);
    int x = etc_get(e->c, vkey, vl, NULL, 0, 0, 0, &r);
    if (x == ETC_OK)
        x = history(e, lease, d);
    pthread_mutex_unlock(&e->mu);
    uint64_t vt;
    size_t at;
    if (x == ETC_OK && r.n &&
        shl__etcd_parse_value(r.kvs[0].value, r.kvs[0].value_len, &vt, &at) == 0) {
        len = r.kvs[0].value_len - at;
        if (len > SHL_PREVIEW_MAX)
            len = SHL_PREVIEW_MAX;
        memcpy(buf, r.kvs[0].value + at, len);
    }
    etc_range_free(&r);
    memcpy(d->preview, buf, len);
    d->preview_len = (uint32_t)len;
    return x == ETC_OK ? SHL_OK : shl__etcd_code(x);
}

/* Every lease name that has a token record, in key order. */
int shl__etcd_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d), void *arg)
{
    struct shl__etcd *e = t->etcd;
    char key[SHL__ETCD_KEY_MAX], end[SHL__ETCD_KEY_MAX];
    size_t kl = shl__etcd_kind_range(e, SHL__ETCD_TOKEN, key, end);
    struct etc_range r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_get(e->c, key, kl, end, kl, 0, 0, &r);
    pthread_mutex_unlock(&e->mu);
    rc = shl__etcd_code(rc);
    shl_lease_detail d;
    for (size_t i = 0; rc == SHL_OK && i < r.n; i++) {
        char name[SHL_NAME_MAX + 1];
        size_t n = r.kvs[i].key_len - kl;
        if (n > SHL_NAME_MAX)
            continue;
        memcpy(name, r.kvs[i].key + kl, n);
        name[n] = 0;
        int x = shl__etcd_inspect(t, name, &d);
        if (x == SHL_EINVAL || x == SHL_ENOENT)
            continue; /* not a lease name (shl_check says so), or gone */
        if (x != SHL_OK)
            rc = x;
        else if ((x = fn(arg, &d)) != 0)
            rc = x;
    }
    etc_range_free(&r);
    return rc;
}

/* The record of kind `k` for the lease named by `name` in r, or NULL. */
static const struct etc_kv *find(const struct etc_range *r, const struct shl__etcd *e, char k,
                                 const char *name)
{
    char key[SHL__ETCD_KEY_MAX];
    size_t kl = shl__etcd_key(e, k, name, key);
    for (size_t i = 0; i < r->n; i++)
        if (r->kvs[i].key_len == kl && memcmp(r->kvs[i].key, key, kl) == 0)
            return &r->kvs[i];
    return NULL;
}

/* The key, printable, for a report line. */
static const char *shown(const struct etc_kv *kv, char *buf, size_t cap)
{
    size_t n = kv->key_len < cap - 1 ? kv->key_len : cap - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = kv->key[i] >= ' ' && kv->key[i] <= '~' ? kv->key[i] : '?';
    buf[n] = 0;
    return buf;
}

static void check_key(struct shl__problems *c, const struct shl__etcd *e, const struct etc_range *r,
                      const struct etc_kv *kv, uint32_t value_size)
{
    const char *k = kv->key + e->plen;
    size_t n = kv->key_len - e->plen;
    char sk[160];
    if (n == 4 && memcmp(k, "meta", 4) == 0)
        return;
    char kind = n > 2 && k[1] == '/' ? k[0] : 0;
    size_t nl = n > 2 ? n - 2 : 0;
    if (kind == SHL__ETCD_WAITER || kind == SHL__ETCD_READER) { /* "<name> <16 hex>" */
        nl = nl > 17 && k[n - 17] == ' ' ? nl - 17 : SHL_NAME_MAX + 1;
    }
    uint64_t ktok = 0; /* a shared holder's key: "<name> <token>" */
    if (kind == SHL__ETCD_SHARED) {
        const char *sp = memchr(k + 2, ' ', nl);
        size_t used = 0;
        if (sp)
            ktok = shl__etcd_num(sp + 1, (size_t)(k + n - sp - 1), &used);
        nl = sp && ktok && used == (size_t)(k + n - sp - 1) ? (size_t)(sp - k - 2)
                                                            : SHL_NAME_MAX + 1;
    }
    char name[SHL_NAME_MAX + 1];
    struct shl__key lk;
    if (!kind || !strchr("htvwsgr", kind) || nl == 0 || nl > SHL_NAME_MAX) {
        shl__problem(c, "key %s: not a record of a shmlease table", shown(kv, sk, sizeof sk));
        return;
    }
    memcpy(name, k + 2, nl);
    name[nl] = 0;
    if (shl__key_lease(name, &lk) != SHL_OK || lk.len != nl) {
        shl__problem(c, "key %s: not a lease name", shown(kv, sk, sizeof sk));
        return;
    }
    const struct etc_kv *tk = find(r, e, SHL__ETCD_TOKEN, name);
    uint64_t cur = 0, tok;
    if (tk && shl__etcd_parse_token(tk->value, tk->value_len, &cur) != 0)
        cur = 0;
    char owner[SHL_OWNER_MAX + 1];
    size_t at;
    switch (kind) {
    case SHL__ETCD_HOLDER:
        if (shl__etcd_parse_holder(kv->value, kv->value_len, &tok, owner) != 0)
            shl__problem(c, "lease %s: holder record is not \"<token> <owner>\"", name);
        else if (tok != cur)
            shl__problem(c, "lease %s: holder has token %llu, the token record %llu", name,
                         (unsigned long long)tok, (unsigned long long)cur);
        if (!kv->lease)
            shl__problem(c, "lease %s: holder record is not attached to an etcd lease", name);
        break;
    case SHL__ETCD_SHARED:
        if (shl__etcd_parse_holder(kv->value, kv->value_len, &tok, owner) != 0)
            shl__problem(c, "lease %s: shared holder record is not \"<token> <owner>\"", name);
        else if (tok != ktok)
            shl__problem(c, "lease %s: shared holder key has token %llu, its record %llu", name,
                         (unsigned long long)ktok, (unsigned long long)tok);
        else if (tok > cur)
            shl__problem(c, "lease %s: shared holder has token %llu, above the token record %llu",
                         name, (unsigned long long)tok, (unsigned long long)cur);
        if (!kv->lease)
            shl__problem(c, "lease %s: shared holder record is not attached to an etcd lease",
                         name);
        break;
    case SHL__ETCD_GEN:
        if (shl__etcd_parse_token(kv->value, kv->value_len, &tok) != 0)
            shl__problem(c, "lease %s: gen record is not a token", name);
        else if (tok > cur)
            shl__problem(c, "lease %s: gen record %llu, above the token record %llu", name,
                         (unsigned long long)tok, (unsigned long long)cur);
        break;
    case SHL__ETCD_TOKEN:
        if (shl__etcd_parse_token(kv->value, kv->value_len, &tok) != 0)
            shl__problem(c, "lease %s: token record is not a token", name);
        break;
    case SHL__ETCD_VALUE:
        if (shl__etcd_parse_value(kv->value, kv->value_len, &tok, &at) != 0)
            shl__problem(c, "lease %s: value record does not start with \"<token>\\n\"", name);
        else if (tok > cur)
            shl__problem(c, "lease %s: value written by token %llu, above the token record %llu",
                         name, (unsigned long long)tok, (unsigned long long)cur);
        else if (kv->value_len - at > value_size)
            shl__problem(c, "lease %s: value of %zu bytes, over the table's %u", name,
                         kv->value_len - at, value_size);
        break;
    default:
        if (!kv->lease)
            shl__problem(c, "lease %s: waiter key is not attached to an etcd lease", name);
        break;
    }
}

int shl__etcd_check(shl_table *t, void (*report)(void *arg, const char *problem), void *arg)
{
    struct shl__etcd *e = t->etcd;
    char end[SHL__ETCD_KEY_MAX];
    memcpy(end, e->prefix, e->plen);
    end[e->plen - 1] = '/' + 1;
    struct etc_range r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_get(e->c, e->prefix, e->plen, end, e->plen, 0, 0, &r);
    pthread_mutex_unlock(&e->mu);
    struct shl__problems c = {report, arg, 0};
    if (rc == ETC_OK) {
        int meta = 0;
        for (size_t i = 0; i < r.n; i++) {
            meta |=
                r.kvs[i].key_len == e->plen + 4 && memcmp(r.kvs[i].key + e->plen, "meta", 4) == 0;
            check_key(&c, e, &r, &r.kvs[i], t->value_size);
        }
        if (!meta)
            shl__problem(&c, "no meta record: the table was removed");
    }
    etc_range_free(&r);
    if (rc != ETC_OK)
        return shl__etcd_code(rc);
    return c.count ? SHL_ECORRUPT : SHL_OK;
}
#endif
