/*
 * etcd/kv.c - the key-value calls: range, txn, put, delete.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A request body is at most the keys and values in base64 and some JSON
 * around each: bounded as an answer is by default (a bound lowered for the
 * answers does not limit what we send). */
static void body_init(const etc_client *c, struct etc__buf *b)
{
    (void)c;
    etc__buf_init(b, ETC_MAX_RESPONSE_DEFAULT);
}

/* "key":..[,"range_end":..] */
static int add_range(struct etc__buf *b, const void *key, size_t klen, const void *end, size_t elen)
{
    int rc = etc__buf_field_b64(b, 0, "key", key, klen);
    if (!rc && end)
        rc = etc__buf_field_b64(b, 1, "range_end", end, elen);
    return rc;
}

void etc_range_free(struct etc_range *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        etc__kv_free(&r->kvs[i]);
    free(r->kvs);
    memset(r, 0, sizeof *r);
}

void etc_txn_free(struct etc_txn_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nranges; i++)
        etc_range_free(&r->ranges[i]);
    free(r->ranges);
    free(r->deleted);
    memset(r, 0, sizeof *r);
}

int etc_get(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
            int64_t limit, int64_t rev, struct etc_range *out)
{
    struct etc__buf b;
    json_object *o;
    memset(out, 0, sizeof *out);
    if (!key || !klen || (end && !elen) || limit < 0 || rev < 0)
        return ETC_EINVAL;
    body_init(c, &b);
    int rc = etc__buf_str(&b, "{");
    if (!rc)
        rc = add_range(&b, key, klen, end, elen);
    if (!rc && limit)
        rc = etc__buf_field_i64(&b, 1, "limit", limit);
    if (!rc && rev)
        rc = etc__buf_field_i64(&b, 1, "revision", rev);
    if (!rc)
        rc = etc__buf_str(&b, "}");
    if (!rc)
        rc = etc__call(c, "kv/range", &b, ETC__READ, SIZE_MAX, &o);
    etc__buf_free(&b);
    if (!rc) {
        rc = etc__obj_range(o, out);
        json_object_put(o);
        if (rc)
            etc_range_free(out);
    }
    return rc;
}

static const char *const target_name[] = {
    [ETC_VALUE] = "VALUE", [ETC_VERSION] = "VERSION", [ETC_CREATE] = "CREATE",
    [ETC_MOD] = "MOD",     [ETC_LEASE] = "LEASE",
};
static const char *const target_field[] = {
    [ETC_VALUE] = "value",      [ETC_VERSION] = "version", [ETC_CREATE] = "create_revision",
    [ETC_MOD] = "mod_revision", [ETC_LEASE] = "lease",
};
static const char *const rel_name[] = {
    [ETC_EQ] = "EQUAL", [ETC_NE] = "NOT_EQUAL", [ETC_LT] = "LESS", [ETC_GT] = "GREATER"};

static int add_cmp(struct etc__buf *b, const struct etc_cmp *k)
{
    if (!k->key || !k->klen || (unsigned)k->target > ETC_LEASE || (unsigned)k->rel > ETC_GT ||
        (k->target == ETC_VALUE && k->vlen && !k->value))
        return ETC_EINVAL;
    int rc = etc__buf_str(b, "{");
    if (!rc)
        rc = etc__buf_field_b64(b, 0, "key", k->key, k->klen);
    if (!rc)
        rc = etc__buf_str(b, ",\"target\":\"");
    if (!rc)
        rc = etc__buf_str(b, target_name[k->target]);
    if (!rc)
        rc = etc__buf_str(b, "\",\"result\":\"");
    if (!rc)
        rc = etc__buf_str(b, rel_name[k->rel]);
    if (!rc)
        rc = etc__buf_str(b, "\"");
    if (!rc && k->end && k->elen)
        rc = etc__buf_field_b64(b, 1, "range_end", k->end, k->elen);
    if (!rc && k->target == ETC_VALUE)
        rc = etc__buf_field_b64(b, 1, "value", k->value, k->vlen);
    else if (!rc)
        rc = etc__buf_field_i64(b, 1, target_field[k->target], k->num);
    if (!rc)
        rc = etc__buf_str(b, "}");
    return rc;
}

static int add_op(struct etc__buf *b, const struct etc_op *op)
{
    if (!op->key || !op->klen || (op->end && !op->elen) || (op->vlen && !op->value) ||
        op->lease < 0)
        return ETC_EINVAL;
    int rc;
    switch (op->kind) {
    case ETC_PUT:
        if (op->end)
            return ETC_EINVAL;
        rc = etc__buf_str(b, "{\"request_put\":{");
        if (!rc)
            rc = etc__buf_field_b64(b, 0, "key", op->key, op->klen);
        if (!rc)
            rc = etc__buf_field_b64(b, 1, "value", op->value, op->vlen);
        if (!rc && op->lease)
            rc = etc__buf_field_i64(b, 1, "lease", op->lease);
        break;
    case ETC_DEL:
        rc = etc__buf_str(b, "{\"request_delete_range\":{");
        if (!rc)
            rc = add_range(b, op->key, op->klen, op->end, op->elen);
        break;
    case ETC_RANGE:
        rc = etc__buf_str(b, "{\"request_range\":{");
        if (!rc)
            rc = add_range(b, op->key, op->klen, op->end, op->elen);
        break;
    default:
        return ETC_EINVAL;
    }
    return rc ? rc : etc__buf_str(b, "}}");
}

static int add_ops(struct etc__buf *b, const char *name, const struct etc_op *ops, size_t n)
{
    int rc = etc__buf_str(b, ",\"");
    if (!rc)
        rc = etc__buf_str(b, name);
    if (!rc)
        rc = etc__buf_str(b, "\":[");
    for (size_t i = 0; !rc && i < n; i++) {
        if (i)
            rc = etc__buf_str(b, ",");
        if (!rc)
            rc = add_op(b, &ops[i]);
    }
    return rc ? rc : etc__buf_str(b, "]");
}

static int all_reads(const struct etc_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind != ETC_RANGE)
            return 0;
    return 1;
}

int etc_txn(etc_client *c, const struct etc_cmp *cmp, size_t ncmp, const struct etc_op *then,
            size_t nthen, const struct etc_op *els, size_t nels, struct etc_txn_result *out)
{
    struct etc__buf b;
    json_object *o;
    memset(out, 0, sizeof *out);
    if ((ncmp && !cmp) || (nthen && !then) || (nels && !els))
        return ETC_EINVAL;
    body_init(c, &b);
    int rc = etc__buf_str(&b, "{\"compare\":[");
    for (size_t i = 0; !rc && i < ncmp; i++) {
        if (i)
            rc = etc__buf_str(&b, ",");
        if (!rc)
            rc = add_cmp(&b, &cmp[i]);
    }
    if (!rc)
        rc = etc__buf_str(&b, "]");
    if (!rc)
        rc = add_ops(&b, "success", then, nthen);
    if (!rc)
        rc = add_ops(&b, "failure", els, nels);
    if (!rc)
        rc = etc__buf_str(&b, "}");
    enum etc__idem idem = all_reads(then, nthen) && all_reads(els, nels) ? ETC__READ : ETC__WRITE;
    if (!rc)
        rc = etc__call(c, "kv/txn", &b, idem, SIZE_MAX, &o);
    etc__buf_free(&b);
    if (!rc) {
        rc = etc__obj_txn(o, out);
        json_object_put(o);
        if (rc)
            etc_txn_free(out);
    }
    return rc;
}

int etc_delete(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
               int64_t *deleted)
{
    struct etc__buf b;
    json_object *o;
    int64_t n = 0;
    if (deleted)
        *deleted = 0;
    if (!key || !klen || (end && !elen))
        return ETC_EINVAL;
    body_init(c, &b);
    int rc = etc__buf_str(&b, "{");
    if (!rc)
        rc = add_range(&b, key, klen, end, elen);
    if (!rc)
        rc = etc__buf_str(&b, "}");
    if (!rc)
        rc = etc__call(c, "kv/deleterange", &b, ETC__WRITE, SIZE_MAX, &o);
    etc__buf_free(&b);
    if (!rc) {
        rc = etc__json_i64(o, "deleted", &n);
        json_object_put(o);
        if (!rc && n < 0)
            rc = ETC_ECORRUPT;
    }
    if (!rc && deleted)
        *deleted = n;
    return rc;
}

int etc_put(etc_client *c, const void *key, size_t klen, const void *value, size_t vlen,
            int64_t lease, int64_t *revision)
{
    struct etc__buf b;
    json_object *o, *hdr;
    int64_t rev = 0;
    if (revision)
        *revision = 0;
    if (!key || !klen || (vlen && !value) || lease < 0)
        return ETC_EINVAL;
    body_init(c, &b);
    int rc = etc__buf_str(&b, "{");
    if (!rc)
        rc = etc__buf_field_b64(&b, 0, "key", key, klen);
    if (!rc)
        rc = etc__buf_field_b64(&b, 1, "value", value, vlen);
    if (!rc && lease)
        rc = etc__buf_field_i64(&b, 1, "lease", lease);
    if (!rc)
        rc = etc__buf_str(&b, "}");
    if (!rc)
        rc = etc__call(c, "kv/put", &b, ETC__WRITE, SIZE_MAX, &o);
    etc__buf_free(&b);
    if (!rc) {
        rc = etc__json_obj(o, "header", &hdr);
        if (!rc && hdr)
            rc = etc__json_i64(hdr, "revision", &rev);
        if (!rc && rev <= 0)
            rc = ETC_ECORRUPT;
        json_object_put(o);
    }
    if (!rc && revision)
        *revision = rev;
    return rc;
}
