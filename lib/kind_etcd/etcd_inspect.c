/*
 * lib/kind_etcd/etcd_inspect.c - inspection and checking of an etcd table.
 *
 * A lease's detail on etcd is its shl_stat() state, its shared holders
 * (their keys, read with the value), a preview of its value and a history
 * read from etcd's revisions of its holder record (see history()); the
 * segment's lock, intent and counters do not exist there (zero), nor an
 * acquisition time or a pid. shl_check() reads every key under the table's
 * prefix and reports each one that is not a record of the layout
 * (etcd_kind.h), or whose value does not parse, and each lease whose
 * records disagree.
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "etcd_kind.h"

/* Store revisions a lease's history looks back over at most. */
#define SHL__ETCD_HISTORY_REVS 4096

struct hist {
    shl_lease_detail *d;
    uint64_t token; /* the hold the next delete ends */
    char owner[SHL_OWNER_MAX + 1];
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
        snprintf(h->owner, sizeof h->owner, "%s", owner);
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
 * A lease's history from etcd's revisions of its holder record
 * TABLE/h/<lease>: the puts and deletes of the last SHL__ETCD_HISTORY_REVS
 * store revisions (fewer when compacted), read with a watch from the
 * window's start, which etcd answers with the past events. The walk stops
 * at the record's last event at or before the read revision R: the put at
 * its mod revision when it exists; else the first delete after the gen
 * record's mod revision (the last exclusive acquisition: the holder, token
 * and gen records are put by one txn, and only an exclusive acquisition
 * creates the holder record; a shared one moves the token record alone). A
 * lease with neither a holder nor a gen record was never held exclusively:
 * no event is awaited. When the awaited event never comes (records that
 * disagree), the history stops at the deadline, partial.
 *
 * etcd sends a watch that starts in the past its events only at its next
 * sync of such watches (every 100 ms): one watch over every holder record
 * serves all the leases of a shl_foreach() (walk()), each lease taking the
 * events of its own record (apply()).
 */
struct walk {
    struct hist st;
    const char *name; /* the lease (its bytes in holder keys) */
    size_t nlen;
    int64_t R;    /* the revision the lease was read at */
    int64_t S;    /* the window's first revision */
    int64_t last; /* the holder's put that ends the walk (0: none, see acq) */
    int64_t acq;  /* else: the first delete after this revision ends it */
    int done;     /* no event to wait for (any more) */
};

/* Reads what the walk of `lease` starts from into w (d: its detail).
 * Called with e->mu; an ETC_ code. */
static int walk_start(struct shl__etcd *e, const char *lease, shl_lease_detail *d, struct walk *w)
{
    char hkey[SHL__ETCD_KEY_MAX], tkey[SHL__ETCD_KEY_MAX], gkey[SHL__ETCD_KEY_MAX];
    size_t hl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, hkey);
    size_t tl = shl__etcd_key(e, SHL__ETCD_TOKEN, lease, tkey);
    size_t gl = shl__etcd_key(e, SHL__ETCD_GEN, lease, gkey);
    struct etc_range h = {0}, tk = {0}, gen = {0}, before = {0};
    memset(w, 0, sizeof *w);
    w->st.d = d;
    w->name = lease;
    w->nlen = strlen(lease);
    w->done = 1;
    int x = etc_get(e->c, hkey, hl, NULL, 0, 0, 0, &h);
    w->R = h.revision;
    if (x == ETC_OK)
        x = etc_get(e->c, tkey, tl, NULL, 0, 0, w->R, &tk);
    if (x == ETC_OK)
        x = etc_get(e->c, gkey, gl, NULL, 0, 0, w->R, &gen);
    if (x != ETC_OK || tk.n == 0 || (h.n == 0 && gen.n == 0))
        goto out; /* never acquired exclusively: no history */
    w->last = h.n ? h.kvs[0].mod_rev : 0;
    w->acq = gen.n ? gen.kvs[0].mod_rev : tk.kvs[0].mod_rev;
    int64_t S = w->R - SHL__ETCD_HISTORY_REVS + 1;
    if (S < 1)
        S = 1;
    /* The state before the window: the hold a first delete ends (at
     * revision 1, etcd's first, there is none). Compacted: the window
     * starts at the oldest revision kept, whose state stands for before. */
    int64_t at = S > 1 ? S - 1 : 1;
    x = etc_get(e->c, hkey, hl, NULL, 0, 0, at, &before);
    if (x == ETC_ECOMPACTED) {
        x = ETC_OK;
        S = oldest_kept(e, hkey, hl, at, w->R, &x);
        etc_range_free(&before);
        if (x == ETC_OK)
            x = etc_get(e->c, hkey, hl, NULL, 0, 0, S, &before);
    }
    if (x != ETC_OK)
        goto out;
    w->S = S;
    d->history_partial = S > tk.kvs[0].create_rev;
    holding(&w->st, before.n ? &before.kvs[0] : NULL);
    /* An event of the record in the window is awaited. */
    w->done = w->last ? w->last < S : w->acq < S && before.n == 0;
out:
    etc_range_free(&h);
    etc_range_free(&tk);
    etc_range_free(&gen);
    etc_range_free(&before);
    return x;
}

/* An event of the lease's holder record. */
static void apply(struct walk *w, const struct etc_event *ev)
{
    int64_t rev = ev->kv.mod_rev;
    if (w->done || rev < w->S) /* the watch may start before this window */
        return;
    int end = rev > w->R;
    if (!end && ev->type == ETC_EV_PUT) {
        holding(&w->st, &ev->kv);
        add(&w->st, ev->kv.version == 1 ? SHL_OP_ACQUIRE : SHL_OP_RENEW, rev);
        end = w->last && rev >= w->last;
    } else if (!end) {
        add(&w->st, SHL_OP_END, rev);
        end = !w->last && rev > w->acq;
    }
    w->done = end;
}

/* The walk of the holder key ev names among ws (n, in key order), or NULL. */
static struct walk *walk_of(struct walk *ws, size_t n, const struct etc_event *ev, size_t plen)
{
    if (ev->kv.key_len < plen)
        return NULL;
    const char *name = ev->kv.key + plen;
    size_t nl = ev->kv.key_len - plen;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t m = nl < ws[mid].nlen ? nl : ws[mid].nlen;
        int c = memcmp(name, ws[mid].name, m);
        if (c == 0)
            c = nl < ws[mid].nlen ? -1 : nl > ws[mid].nlen;
        if (c == 0)
            return &ws[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The walks ws[0..n) (leases in key order) to their ends, with one watch
 * of [key, end) (end NULL: the one key) from the earliest window's start.
 * Called with e->mu; an ETC_ code. */
static int walk(struct shl__etcd *e, struct walk *ws, size_t n, const char *key, size_t kl,
                const char *end, size_t elen, size_t plen)
{
    int64_t S = 0;
    size_t left = 0;
    for (size_t i = 0; i < n; i++) {
        if (ws[i].done)
            continue;
        if (left++ == 0 || ws[i].S < S)
            S = ws[i].S;
    }
    if (left == 0)
        return ETC_OK;
    etc_watch *w = NULL;
    int x = etc_watch_open(e->c, key, kl, end, elen, S, &w);
    uint64_t deadline = shl__mono_ns() + (uint64_t)e->timeout_ms * 1000000u;
    while (x == ETC_OK && left) {
        uint64_t now = shl__mono_ns();
        if (now >= deadline)
            break; /* etcd sent the past: an event awaited is not there */
        struct etc_event ev;
        uint64_t ms = (deadline - now) / 1000000u + 1;
        x = etc_watch_next(w, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms, &ev);
        if (x == ETC_ETIMEDOUT) {
            x = ETC_OK;
            continue;
        }
        if (x != ETC_OK)
            break;
        struct walk *one = walk_of(ws, n, &ev, plen);
        if (one && !one->done) {
            apply(one, &ev);
            left -= one->done;
        }
        etc_event_free(&ev);
    }
    etc_watch_close(w);
    /* Past the deadline (records that disagree, which shl_check() reports),
     * or compacted meanwhile: what came is kept, partial. */
    if (x == ETC_OK || x == ETC_ECOMPACTED) {
        for (size_t i = 0; i < n; i++)
            if (!ws[i].done)
                ws[i].st.d->history_partial = 1;
        x = ETC_OK;
    }
    return x;
}

/* The shared holders' keys in r (key order, as many as fit): each whose
 * record parses and whose etcd lease still lives, HELD with the time etcd
 * gives it (an expired one is gone with its key). info.shared counts them.
 * With e->mu. */
static int shared_holders(struct shl__etcd *e, const struct etc_range *r, shl_lease_detail *d)
{
    d->info.shared = 0;
    for (size_t i = 0; i < r->n && d->nshared < SHL_SHARED_MAX; i++) {
        shl_shared_holder *o = &d->shared[d->nshared];
        memset(o, 0, sizeof *o);
        int rc = SHL_OK;
        int64_t left = r->kvs[i].lease ? shl__etcd_remaining(e, r->kvs[i].lease, &rc) : -1;
        if (r->kvs[i].lease && rc != SHL_OK)
            return rc;
        if (left < 0 ||
            shl__etcd_parse_holder(r->kvs[i].value, r->kvs[i].value_len, &o->token, o->owner) != 0)
            continue; /* gone since, or not a record (shl_check says so) */
        o->state = SHL_STATE_HELD;
        o->remaining_ns = (uint64_t)left * 1000000000u;
        o->expiry_ns = d->info.now_ns + o->remaining_ns;
        d->nshared++;
        d->info.shared++;
    }
    return SHL_OK;
}

/* The lease's detail but its history: its state, its shared holders and a
 * preview of its value; and the start of its history's walk (see
 * walk_start). */
static int inspect_start(shl_table *t, const char *lease, shl_lease_detail *d, struct walk *w)
{
    memset(d, 0, sizeof *d);
    int rc = shl__etcd_stat(t, lease, &d->info);
    if (rc != SHL_OK)
        return rc;
    strcpy(d->name, lease);
    d->stable = 1;
    d->token_last = d->info.token; /* the token record: either kind's last */
    /* A preview: the value's first bytes (E2BIG only says it is longer). */
    struct shl__etcd *e = t->etcd;
    char vkey[SHL__ETCD_KEY_MAX], skey[SHL__ETCD_KEY_MAX], send[SHL__ETCD_KEY_MAX];
    size_t vl = shl__etcd_key(e, SHL__ETCD_VALUE, lease, vkey);
    size_t sl = shl__etcd_sub_range(e, SHL__ETCD_SHARED, lease, skey, send);
    struct etc_op ops[2] = {{ETC_RANGE, vkey, vl, NULL, 0, NULL, 0, 0},
                            {ETC_RANGE, skey, sl, send, sl, NULL, 0, 0}};
    struct etc_txn_result r = {0};
    pthread_mutex_lock(&e->mu);
    int x = etc_txn(e->c, NULL, 0, ops, 2, NULL, 0, &r);
    if (x == ETC_OK && r.nranges != 2)
        x = ETC_ECORRUPT;
    if (x == ETC_OK && (rc = shared_holders(e, &r.ranges[1], d)) != SHL_OK) {
        pthread_mutex_unlock(&e->mu);
        etc_txn_free(&r);
        return rc;
    }
    if (x == ETC_OK)
        x = walk_start(e, d->name, d, w);
    pthread_mutex_unlock(&e->mu);
    uint64_t vt;
    size_t at;
    const struct etc_range *v = x == ETC_OK ? &r.ranges[0] : NULL;
    if (v && v->n && shl__etcd_parse_value(v->kvs[0].value, v->kvs[0].value_len, &vt, &at) == 0) {
        size_t len = v->kvs[0].value_len - at;
        if (len > SHL_PREVIEW_MAX)
            len = SHL_PREVIEW_MAX;
        memcpy(d->preview, v->kvs[0].value + at, len);
        d->preview_len = (uint32_t)len;
    }
    etc_txn_free(&r);
    return x == ETC_OK ? SHL_OK : shl__etcd_code(x);
}

int shl__etcd_inspect(shl_table *t, const char *lease, shl_lease_detail *d)
{
    struct walk w;
    int rc = inspect_start(t, lease, d, &w);
    if (rc != SHL_OK)
        return rc;
    struct shl__etcd *e = t->etcd;
    char hkey[SHL__ETCD_KEY_MAX];
    size_t hl = shl__etcd_key(e, SHL__ETCD_HOLDER, lease, hkey);
    pthread_mutex_lock(&e->mu);
    int x = walk(e, &w, 1, hkey, hl, NULL, 0, hl - w.nlen);
    pthread_mutex_unlock(&e->mu);
    return shl__etcd_code(x);
}

/* Every lease name that has a token record, in key order; their histories
 * from one watch of every holder record. */
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
    shl_lease_detail *ds = NULL;
    struct walk *ws = NULL;
    if (rc == SHL_OK && r.n) {
        ds = malloc(r.n * sizeof *ds);
        ws = malloc(r.n * sizeof *ws);
        if (!ds || !ws)
            rc = SHL_ENOMEM;
    }
    size_t n = 0; /* leases read, in key order */
    for (size_t i = 0; rc == SHL_OK && i < r.n; i++) {
        char name[SHL_NAME_MAX + 1];
        size_t nl = r.kvs[i].key_len - kl;
        if (nl > SHL_NAME_MAX)
            continue;
        memcpy(name, r.kvs[i].key + kl, nl);
        name[nl] = 0;
        int x = inspect_start(t, name, &ds[n], &ws[n]);
        if (x == SHL_EINVAL || x == SHL_ENOENT)
            continue; /* not a lease name (shl_check says so), or gone */
        if (x != SHL_OK)
            rc = x;
        else
            n++;
    }
    if (rc == SHL_OK && n) {
        char hkey[SHL__ETCD_KEY_MAX], hend[SHL__ETCD_KEY_MAX];
        size_t hl = shl__etcd_kind_range(e, SHL__ETCD_HOLDER, hkey, hend);
        pthread_mutex_lock(&e->mu);
        rc = shl__etcd_code(walk(e, ws, n, hkey, hl, hend, hl, hl));
        pthread_mutex_unlock(&e->mu);
    }
    for (size_t i = 0; rc == SHL_OK && i < n; i++) {
        int x = fn(arg, &ds[i]);
        if (x != 0)
            rc = x;
    }
    free(ds);
    free(ws);
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
