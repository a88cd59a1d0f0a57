/*
 * lib/kind_etcd/etcd_table.c - etcd tables: open, close, unlink, and the records'
 * formats (see etcd_kind.h for the layout).
 */
#include "kind.h"
#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "etcd_kind.h"
#include "mutation.h"

size_t shl__etcd_key(const struct shl__etcd *e, char kind, const char *lease, char *buf)
{
    size_t n = e->plen;
    memcpy(buf, e->prefix, n);
    buf[n++] = kind;
    buf[n++] = '/';
    size_t l = strlen(lease);
    memcpy(buf + n, lease, l + 1);
    return n + l;
}

size_t shl__etcd_sub_range(const struct shl__etcd *e, char kind, const char *lease, char *key,
                           char *end)
{
    size_t kl = shl__etcd_key(e, kind, lease, key);
    key[kl++] = ' ';
    memcpy(end, key, kl);
    end[kl - 1] = ' ' + 1;
    return kl;
}

size_t shl__etcd_kind_range(const struct shl__etcd *e, char kind, char *key, char *end)
{
    size_t kl = shl__etcd_key(e, kind, "", key);
    memcpy(end, key, kl);
    end[kl - 1] = '/' + 1;
    return kl;
}

int shl__etcd_code(int rc)
{
    switch (rc) {
    case ETC_OK:
        return SHL_OK;
    case ETC_ECORRUPT:
    case ETC_ECOMPACTED:
        return SHL_ECORRUPT;
    case ETC_EPERM:
        return SHL_EPERM;
    case ETC_ENOMEM:
        return SHL_ENOMEM;
    case ETC_EINVAL:
        return SHL_EINVAL;
    case ETC_EREFUSED:
        return SHL_ESYS;
    case ETC_ENOTSUP: /* libcurl could not be loaded: as in a build without etcd */
        return SHL_ENOTSUP;
    default: /* ETC_EUNAVAIL, ETC_EUNKNOWN left unresolved, ETC_ETIMEDOUT */
        return SHL_EUNAVAIL;
    }
}

int shl__etcd_said(const etc_client *c, int etc_rc)
{
    int rc = shl__etcd_code(etc_rc);
    if (rc != SHL_OK && c && etc_errmsg(c)[0])
        shl__fail(rc, "etcd: %s", etc_errmsg(c));
    return rc;
}

uint64_t shl__etcd_num(const char *s, size_t len, size_t *used)
{
    uint64_t n = 0;
    size_t i = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (n > (UINT64_MAX - d) / 10)
            return 0;
        n = n * 10 + d;
    }
    if (i == 0 || (s[0] == '0' && i > 1))
        return 0;
    *used = i;
    return n;
}

int shl__etcd_parse_token(const char *v, size_t len, uint64_t *token)
{
    size_t used = 0;
    *token = shl__etcd_num(v, len, &used);
    return *token && used == len ? 0 : -1;
}

int shl__etcd_parse_holder(const char *v, size_t len, uint64_t *token,
                           char owner[SHL_OWNER_MAX + 1])
{
    size_t used = 0;
    *token = shl__etcd_num(v, len, &used);
    if (!*token || used >= len || v[used] != ' ')
        return -1;
    size_t olen = len - used - 1;
    if (olen == 0 || olen > SHL_OWNER_MAX)
        return -1;
    memcpy(owner, v + used + 1, olen);
    owner[olen] = 0;
    uint32_t check;
    return shl__owner_len(owner, &check) == SHL_OK && check == olen ? 0 : -1;
}

int shl__etcd_parse_value(const char *v, size_t len, uint64_t *token, size_t *at)
{
    size_t used = 0;
    *token = shl__etcd_num(v, len, &used);
    if (!*token || used >= len || v[used] != '\n')
        return -1;
    *at = used + 1;
    return 0;
}

int64_t shl__etcd_ttl_s(const struct shl__etcd *e, uint64_t ttl_ns)
{
    uint64_t s = ttl_ns / 1000000000u + (ttl_ns % 1000000000u != 0);
    if (s > (uint64_t)SHL__ETCD_TTL_MAX_S)
        return shl__fail(0, "ttl: %llu s, the limit of an etcd table is %lld s",
                         (unsigned long long)s, (long long)SHL__ETCD_TTL_MAX_S);
    return (int64_t)s < e->min_ttl_s ? e->min_ttl_s : (int64_t)s;
}

int64_t shl__etcd_remaining(struct shl__etcd *e, int64_t id, int *rc)
{
    int64_t left = 0;
    int r = etc_lease_ttl(e->c, id, &left, NULL);
    *rc = SHL_OK;
    if (r == ETC_ENOTFOUND || (r == ETC_OK && left < 0))
        return -1;
    if (r != ETC_OK)
        *rc = shl__etcd_code(r);
    return left;
}

void shl__etcd_fill(const struct etc_kv *holder, int64_t remaining_s, const struct etc_kv *tok,
                    const struct etc_kv *val, shl_lease_info *in)
{
    memset(in, 0, sizeof *in);
    in->now_ns = shl__mono_ns();
    in->state = SHL_STATE_FREE;
    uint64_t t;
    if (tok && shl__etcd_parse_token(tok->value, tok->value_len, &t) == 0)
        in->token = t;
    if (holder && remaining_s >= 0 &&
        shl__etcd_parse_holder(holder->value, holder->value_len, &t, in->owner) == 0) {
        in->token = t > in->token ? t : in->token;
        in->state = SHL_STATE_HELD;
        /* etcd gives whole seconds left: the expiry is known to a second. */
        in->remaining_ns = (uint64_t)remaining_s * 1000000000u;
        in->expiry_ns = in->now_ns + in->remaining_ns;
    }
    size_t at;
    if (val && shl__etcd_parse_value(val->value, val->value_len, &t, &at) == 0) {
        in->value_token = t;
        in->value_len = (uint32_t)(val->value_len - at);
    }
}

/* ---------------------------------------------------------------- open */

_Static_assert(SHL_ETCD_RESPONSE_MAX == ETC_MAX_RESPONSE_DEFAULT,
               "the public bound is the client's default");

/* The key prefix of table `table`: the name with each '/' written as
 * SHL__ETCD_TABLE_SEP, then '/'. A prefix holds no '/' but its last, so a
 * key splits at its first '/' into exactly one table and the rest: no table
 * name and lease name spell another table's keys, and the ranges of one
 * table's records never cover another table's. */
static void set_prefix(struct shl__etcd *e, const char *table)
{
    size_t n = strlen(table);
    for (size_t i = 0; i < n; i++)
        e->prefix[i] = table[i] == '/' ? SHL__ETCD_TABLE_SEP : table[i];
    e->prefix[n] = '/';
    e->plen = n + 1;
    memcpy(e->meta, e->prefix, e->plen);
    memcpy(e->meta + e->plen, "meta", 5);
    e->mlen = e->plen + 4;
}

struct etc_cmp shl__etcd_same_table(const struct shl__etcd *e)
{
    if (SHL__MUTANT(ETCD_INCARNATION_IGNORED)) /* a compare that always holds */
        return (struct etc_cmp){e->meta, e->mlen, ETC_CREATE, ETC_LT, NULL, 0, INT64_MAX, NULL, 0};
    return (struct etc_cmp){e->meta, e->mlen, ETC_CREATE, ETC_EQ, NULL, 0, e->incarnation, NULL, 0};
}

struct etc_op shl__etcd_meta_read(const struct shl__etcd *e)
{
    return (struct etc_op){ETC_RANGE, e->meta, e->mlen, NULL, 0, NULL, 0, 0};
}

int shl__etcd_removed(const struct shl__etcd *e, const struct etc_range *r)
{
    return r->n == 1 && r->kvs[0].create_rev == e->incarnation ? SHL_OK : SHL_EREMOVED;
}

static const char *opt_or_env(const char *v, const char *env)
{
    return v ? v : getenv(env);
}

static int client_open(const struct shl__etcd_name *n, const shl_options *o, etc_client **c,
                       uint32_t *timeout_ms)
{
    struct etc_config cfg = {0};
    *c = NULL;
    cfg.endpoints = n->endpoints;
    cfg.tls = n->tls;
    cfg.cacert = opt_or_env(o ? o->cacert : NULL, "SHMLEASE_ETCD_CACERT");
    cfg.cert = opt_or_env(o ? o->cert : NULL, "SHMLEASE_ETCD_CERT");
    cfg.key = opt_or_env(o ? o->key : NULL, "SHMLEASE_ETCD_KEY");
    cfg.user = opt_or_env(o ? o->user : NULL, "SHMLEASE_ETCD_USER");
    cfg.password = opt_or_env(o ? o->password : NULL, "SHMLEASE_ETCD_PASSWORD");
    cfg.proxy = opt_or_env(o ? o->proxy : NULL, "SHMLEASE_ETCD_PROXY");
    cfg.max_response = o ? o->max_response : 0;
    if (cfg.max_response > SHL_ETCD_RESPONSE_MAX)
        return shl__fail(SHL_EINVAL, "max_response: %zu bytes, the limit is %u", cfg.max_response,
                         (unsigned)SHL_ETCD_RESPONSE_MAX);
    cfg.timeout_ms = o && o->timeout_ms ? o->timeout_ms : SHL__ETCD_TIMEOUT_MS;
    *timeout_ms = cfg.timeout_ms;
    int rc = etc_open(&cfg, c);
    if (rc == ETC_OK)
        etc_silent_cap(*c, SHL__ETCD_SILENT_NS); /* the timing budget (etcd_kind.h) */
    return shl__etcd_code(rc);
}

static int parse_meta(const struct etc_kv *kv, uint32_t *value_size)
{
    size_t f = sizeof SHL__ETCD_FORMAT - 1, used = 0;
    if (kv->value_len <= f + 1 || memcmp(kv->value, SHL__ETCD_FORMAT " ", f + 1) != 0)
        return -1;
    uint64_t v = shl__etcd_num(kv->value + f + 1, kv->value_len - f - 1, &used);
    if (used != kv->value_len - f - 1 || v > SHL_VALUE_MAX || (v == 0 && used != 1))
        return -1;
    *value_size = (uint32_t)v;
    return 0;
}

/* The meta record (SHL_OK, *found), or SHL_ECORRUPT when the prefix holds
 * keys but no meta record, or an unreadable one. */
static int read_meta(struct shl__etcd *e, int *found, uint32_t *value_size)
{
    struct etc_range r = {0};
    int rc = etc_get(e->c, e->meta, e->mlen, NULL, 0, 0, 0, &r);
    if (rc == ETC_OK && r.n == 1) {
        *found = 1;
        e->incarnation = r.kvs[0].create_rev;
        rc = parse_meta(&r.kvs[0], value_size) == 0 ? SHL_OK : SHL_ECORRUPT;
        etc_range_free(&r);
        return rc;
    }
    etc_range_free(&r);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    *found = 0;
    /* No meta record: keys under the prefix belong to something else. */
    char end[SHL__ETCD_KEY_MAX];
    memcpy(end, e->prefix, e->plen);
    end[e->plen - 1] = '/' + 1;
    rc = etc_get(e->c, e->prefix, e->plen, end, e->plen, 1, 0, &r);
    int other = rc == ETC_OK && r.count > 0;
    etc_range_free(&r);
    if (rc != ETC_OK)
        return shl__etcd_said(e->c, rc);
    return other ? SHL_ECORRUPT : SHL_OK;
}

/* Creates the meta record unless one exists; *created says which. */
static int create_meta(struct shl__etcd *e, uint32_t value_size, int *created, uint32_t *found_size)
{
    char val[64];
    int vl = snprintf(val, sizeof val, SHL__ETCD_FORMAT " %u", value_size);
    struct etc_cmp cmp = {e->meta, e->mlen, ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0};
    struct etc_op put = {ETC_PUT, e->meta, e->mlen, NULL, 0, val, (size_t)vl, 0};
    struct etc_op get = shl__etcd_meta_read(e);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct etc_txn_result r = {0};
        int rc = etc_txn(e->c, &cmp, 1, &put, 1, &get, 1, &r);
        if (rc == ETC_OK) {
            *created = r.succeeded;
            *found_size = value_size;
            e->incarnation = r.revision; /* the put's revision: its create revision */
            if (!r.succeeded) {
                rc = r.nranges == 1 && r.ranges[0].n == 1 &&
                             parse_meta(&r.ranges[0].kvs[0], found_size) == 0
                         ? ETC_OK
                         : ETC_ECORRUPT;
                if (rc == ETC_OK)
                    e->incarnation = r.ranges[0].kvs[0].create_rev;
            }
            etc_txn_free(&r);
            return shl__etcd_said(e->c, rc);
        }
        etc_txn_free(&r);
        if (rc != ETC_EUNKNOWN)
            return shl__etcd_said(e->c, rc);
        /* Lost answer: the next attempt's compare tells whether it landed
         * (then it is someone's table, maybe ours: not "created" by us). */
    }
    return SHL_EUNAVAIL;
}

int shl__etcd_open(const struct shl__etcd_name *n, const shl_options *o, shl_table *t)
{
    /* No manual clock or token file on etcd. The reclaim policy (the
     * default) is accepted and reclaims nothing: etcd proves no death before
     * the holder's etcd lease ends, at the lease's expiry. */
    if (o && (o->clock != SHL_CLOCK_MONOTONIC || o->token_state_path))
        return SHL_ENOTSUP;
    struct shl__etcd *e = calloc(1, sizeof *e);
    if (!e)
        return SHL_ENOMEM;
    pthread_mutex_init(&e->mu, NULL);
    set_prefix(e, n->table);
    int rc = client_open(n, o, &e->c, &e->timeout_ms);
    int found = 0;
    uint32_t vs = 0;
    if (rc == SHL_OK)
        rc = read_meta(e, &found, &vs);
    if (rc == SHL_OK && !found) {
        if (!o || !(o->flags & SHL_CREATE))
            rc = SHL_ENOENT;
        else
            rc = create_meta(e, o->value_size, &t->created, &vs);
    }
    if (rc == SHL_OK && o && (o->flags & SHL_EXCL) && !t->created)
        rc = SHL_EEXIST;
    if (rc == SHL_OK && o && (o->flags & SHL_CREATE) && vs != o->value_size)
        rc = SHL_EMISMATCH;
    if (rc != SHL_OK) {
        etc_close(e->c);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return rc;
    }
    t->etcd = e;
    t->value_size = vs;
    t->clock = SHL__CLOCK_MONOTONIC;
    return SHL_OK;
}

int shl__etcd_close(shl_table *t)
{
    struct shl__etcd *e = t->etcd;
    /* In a forked child the connections are the parent's too (a TLS
     * close would write to them): leave them, free nothing shared. */
    if (!shl__forked(t->fork_gen)) {
        etc_close(e->c);
        pthread_mutex_destroy(&e->mu);
        free(e);
    }
    return SHL_OK;
}

int shl__etcd_info(shl_table *t, shl_table_info *info)
{
    struct shl__etcd *e = t->etcd;
    memset(info, 0, sizeof *info);
    info->value_size = t->value_size;
    info->clock = SHL_CLOCK_MONOTONIC;
    info->created = t->created;
    /* No slots: capacity 0; used counts the lease names (token records). */
    char key[SHL__ETCD_KEY_MAX], end[SHL__ETCD_KEY_MAX];
    size_t kl = shl__etcd_kind_range(e, SHL__ETCD_TOKEN, key, end);
    struct etc_range r = {0};
    pthread_mutex_lock(&e->mu);
    int rc = etc_get(e->c, key, kl, end, kl, 1, 0, &r);
    pthread_mutex_unlock(&e->mu);
    if (rc == ETC_OK)
        info->used = r.count > UINT32_MAX ? UINT32_MAX : (uint32_t)r.count;
    etc_range_free(&r);
    return shl__etcd_code(rc);
}

/* ---------------------------------------------------------------- unlink */

/* The holders' records of one kind, read before the table goes: their
 * etcd leases are revoked once it is gone (revoke_holders()). */
static int read_holders(struct shl__etcd *e, char kind, struct etc_range *r)
{
    char key[SHL__ETCD_KEY_MAX], end[SHL__ETCD_KEY_MAX];
    size_t kl = shl__etcd_kind_range(e, kind, key, end);
    return shl__etcd_code(etc_get(e->c, key, kl, end, kl, 0, 0, r));
}

/* Revokes the etcd leases of the holders read before the table was
 * removed, so that no keep-alive keeps one alive for nothing. After the
 * removal, not before: revoking first freed each lease for a moment on a
 * table still there, and a queued waiter took it in that moment, only to
 * lose it with the table. A holder that came in between the read and the
 * removal keeps its etcd lease until its ttl (its record went with the
 * table). */
static void revoke_holders(struct shl__etcd *e, const struct etc_range *r, size_t n)
{
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < r[k].n; i++)
            if (r[k].kvs[i].lease)
                (void)etc_lease_revoke(e->c, r[k].kvs[i].lease);
}

int shl__etcd_unlink(const struct shl__etcd_name *n)
{
    struct shl__etcd e = {0};
    set_prefix(&e, n->table);
    int rc = client_open(n, NULL, &e.c, &e.timeout_ms);
    if (rc != SHL_OK)
        return rc;
    int found = 0;
    uint32_t vs;
    struct etc_range held[2] = {{0}, {0}};
    rc = read_meta(&e, &found, &vs);
    if (rc == SHL_OK && !found)
        rc = SHL_ENOENT;
    if (rc == SHL_OK)
        rc = read_holders(&e, SHL__ETCD_HOLDER, &held[0]);
    if (rc == SHL_OK)
        rc = read_holders(&e, SHL__ETCD_SHARED, &held[1]);
    if (rc == SHL_OK) {
        /* Only the table's own records: meta and the seven kinds. A key of
         * anything else under the prefix stays. */
        static const char kinds[] = {SHL__ETCD_HOLDER, SHL__ETCD_TOKEN,  SHL__ETCD_VALUE,
                                     SHL__ETCD_WAITER, SHL__ETCD_SHARED, SHL__ETCD_GEN,
                                     SHL__ETCD_READER};
#define NKINDS (sizeof kinds / sizeof kinds[0])
        char keys[NKINDS][SHL__ETCD_KEY_MAX], ends[NKINDS][SHL__ETCD_KEY_MAX];
        struct etc_op ops[NKINDS + 1];
        for (size_t i = 0; i < NKINDS; i++) {
            size_t kl = shl__etcd_kind_range(&e, kinds[i], keys[i], ends[i]);
            ops[i] = (struct etc_op){ETC_DEL, keys[i], kl, ends[i], kl, NULL, 0, 0};
        }
        ops[NKINDS] = (struct etc_op){ETC_DEL, e.meta, e.mlen, NULL, 0, NULL, 0, 0};
        struct etc_cmp cmp = shl__etcd_same_table(&e); /* the table read above */
        struct etc_txn_result r = {0};
        int x = etc_txn(e.c, &cmp, 1, ops, NKINDS + 1, NULL, 0, &r);
#undef NKINDS
        if (x == ETC_EUNKNOWN) {
            /* Resolved by reading back: the meta record is gone or not. */
            etc_txn_free(&r);
            rc = read_meta(&e, &found, &vs);
            if (rc == SHL_OK)
                rc = found ? SHL_EUNAVAIL : SHL_OK;
        } else {
            rc = x == ETC_OK && !r.succeeded ? SHL_ENOENT : shl__etcd_code(x);
            etc_txn_free(&r);
        }
    }
    if (rc == SHL_OK)
        revoke_holders(&e, held, 2);
    etc_range_free(&held[0]);
    etc_range_free(&held[1]);
    etc_close(e.c);
    return rc;
}
#endif
