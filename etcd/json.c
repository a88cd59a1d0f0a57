/*
 * etcd/json.c - reading etcd's JSON answers: strict field accessors (an
 * answer of the wrong shape is ETC_ECORRUPT, never a guess), keys and
 * values, and etcd's error objects with what each means for the client.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* gRPC status codes (google.golang.org/grpc/codes) that etcd answers with. */
#define GRPC_INVALID_ARGUMENT    3
#define GRPC_NOT_FOUND           5
#define GRPC_PERMISSION_DENIED   7
#define GRPC_RESOURCE_EXHAUSTED  8
#define GRPC_FAILED_PRECONDITION 9
#define GRPC_OUT_OF_RANGE        11
#define GRPC_UNAUTHENTICATED     16

/* How much text json-c parses between two looks at the clock: a slice
 * costs at most a few ms even at json-c's slowest (an object per 3 bytes). */
#define PARSE_SLICE 16384

int etc__json_parse(const char *body, size_t len, json_object **out)
{
    return etc__json_parse_by(body, len, UINT64_MAX, out);
}

int etc__json_parse_by(const char *body, size_t len, uint64_t deadline, json_object **out)
{
    *out = NULL;
    if (!body || len == 0 || len > INT32_MAX)
        return ETC_ECORRUPT;
    json_tokener *tok = json_tokener_new_ex(ETC__JSON_DEPTH);
    if (!tok)
        return ETC_ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    json_object *o = NULL;
    enum json_tokener_error err = json_tokener_continue;
    size_t at = 0, end = len;
    while (at < len && err == json_tokener_continue) {
        /* The first slice always: a short answer that came in time is read. */
        if (at && deadline != UINT64_MAX && etc__now_ns() >= deadline) {
            json_tokener_free(tok);
            return ETC_ETIMEDOUT;
        }
        size_t n = len - at < PARSE_SLICE ? len - at : PARSE_SLICE;
        o = json_tokener_parse_ex(tok, body + at, (int)n);
        err = json_tokener_get_error(tok);
        end = at + json_tokener_get_parse_end(tok);
        at += n;
    }
    json_tokener_free(tok);
    if (!o || err != json_tokener_success) {
        json_object_put(o);
        return ETC_ECORRUPT;
    }
    /* Only white space may follow the object. */
    for (size_t i = end; i < len; i++) {
        if (!strchr(" \t\r\n", body[i]) || body[i] == '\0') {
            json_object_put(o);
            return ETC_ECORRUPT;
        }
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return ETC_ECORRUPT;
    }
    *out = o;
    return ETC_OK;
}

/* A decimal integer, all of s, in [min, max]: etcd's int64 and uint64 are
 * JSON strings. */
static int parse_dec(const char *s, size_t n, int neg_ok, uint64_t max, uint64_t *mag, int *neg)
{
    size_t i = 0;
    *neg = 0;
    if (n && s[0] == '-') {
        if (!neg_ok)
            return ETC_ECORRUPT;
        *neg = 1;
        i = 1;
    }
    if (i == n || n - i > 20)
        return ETC_ECORRUPT;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return ETC_ECORRUPT;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return ETC_ECORRUPT;
        v = v * 10 + d;
    }
    *mag = v;
    return ETC_OK;
}

static int get_number(json_object *o, const char *name, int neg_ok, uint64_t max, uint64_t *mag,
                      int *neg)
{
    json_object *v;
    *mag = 0;
    *neg = 0;
    if (!json_object_object_get_ex(o, name, &v) || !v)
        return ETC_OK;
    if (json_object_is_type(v, json_type_string))
        return parse_dec(json_object_get_string(v), (size_t)json_object_get_string_len(v), neg_ok,
                         max, mag, neg);
    if (json_object_is_type(v, json_type_int)) {
        /* json-c keeps the text's sign: a uint64 past INT64_MAX is unsigned. */
        errno = 0;
        int64_t i = json_object_get_int64(v);
        if (i < 0) {
            if (!neg_ok || i == INT64_MIN)
                return ETC_ECORRUPT;
            *neg = 1;
            *mag = (uint64_t)-i;
        } else if (i == INT64_MAX) {
            *mag = json_object_get_uint64(v);
        } else {
            *mag = (uint64_t)i;
        }
        return *mag > max ? ETC_ECORRUPT : ETC_OK;
    }
    return ETC_ECORRUPT;
}

int etc__json_i64(json_object *o, const char *name, int64_t *v)
{
    uint64_t mag;
    int neg;
    int rc = get_number(o, name, 1, (uint64_t)INT64_MAX, &mag, &neg);
    *v = rc ? 0 : neg ? -(int64_t)mag : (int64_t)mag;
    return rc;
}

int etc__json_u64(json_object *o, const char *name, uint64_t *v)
{
    int neg;
    int rc = get_number(o, name, 0, UINT64_MAX, v, &neg);
    if (rc)
        *v = 0;
    return rc;
}

int etc__json_bool(json_object *o, const char *name, int *v)
{
    json_object *b;
    *v = 0;
    if (!json_object_object_get_ex(o, name, &b) || !b)
        return ETC_OK;
    if (!json_object_is_type(b, json_type_boolean))
        return ETC_ECORRUPT;
    *v = json_object_get_boolean(b) ? 1 : 0;
    return ETC_OK;
}

static int get_typed(json_object *o, const char *name, json_type type, json_object **v)
{
    json_object *x;
    *v = NULL;
    if (!json_object_object_get_ex(o, name, &x) || !x)
        return ETC_OK;
    if (!json_object_is_type(x, type))
        return ETC_ECORRUPT;
    *v = x;
    return ETC_OK;
}

int etc__json_obj(json_object *o, const char *name, json_object **v)
{
    return get_typed(o, name, json_type_object, v);
}

int etc__json_arr(json_object *o, const char *name, json_object **v)
{
    return get_typed(o, name, json_type_array, v);
}

int etc__json_b64(json_object *o, const char *name, char **p, size_t *n)
{
    json_object *s;
    *p = NULL;
    *n = 0;
    int rc = get_typed(o, name, json_type_string, &s);
    if (rc)
        return rc;
    size_t len = s ? (size_t)json_object_get_string_len(s) : 0;
    char *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return ETC_ENOMEM;
    rc = etc__b64_decode(s ? json_object_get_string(s) : "", len, out, n);
    if (rc) {
        free(out);
        *n = 0;
        return rc;
    }
    *p = out;
    return ETC_OK;
}

void etc__kv_free(struct etc_kv *kv)
{
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof *kv);
}

int etc__json_kv(json_object *o, struct etc_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    if (!json_object_is_type(o, json_type_object))
        return ETC_ECORRUPT;
    int rc = etc__json_b64(o, "key", &kv->key, &kv->key_len);
    if (!rc)
        rc = etc__json_b64(o, "value", &kv->value, &kv->value_len);
    if (!rc)
        rc = etc__json_i64(o, "create_revision", &kv->create_rev);
    if (!rc)
        rc = etc__json_i64(o, "mod_revision", &kv->mod_rev);
    if (!rc)
        rc = etc__json_i64(o, "version", &kv->version);
    if (!rc)
        rc = etc__json_i64(o, "lease", &kv->lease);
    /* A key is never empty in etcd; revisions are never negative. */
    if (!rc && (kv->key_len == 0 || kv->create_rev < 0 || kv->mod_rev < 0 || kv->version < 0 ||
                kv->lease < 0))
        rc = ETC_ECORRUPT;
    return rc;
}

int etc__obj_range(json_object *o, struct etc_range *r)
{
    json_object *kvs, *hdr;
    memset(r, 0, sizeof *r);
    int rc = etc__json_arr(o, "kvs", &kvs);
    if (!rc)
        rc = etc__json_i64(o, "count", &r->count);
    if (!rc)
        rc = etc__json_bool(o, "more", &r->more);
    if (!rc)
        rc = etc__json_obj(o, "header", &hdr);
    if (!rc && hdr)
        rc = etc__json_i64(hdr, "revision", &r->revision);
    if (rc)
        return rc;
    size_t n = kvs ? json_object_array_length(kvs) : 0;
    if (n) {
        r->kvs = calloc(n, sizeof *r->kvs);
        if (!r->kvs)
            return ETC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        r->n = i + 1;
        rc = etc__json_kv(json_object_array_get_idx(kvs, i), &r->kvs[i]);
        if (rc)
            return rc;
    }
    if (r->count < (int64_t)r->n || r->revision < 0)
        return ETC_ECORRUPT;
    return ETC_OK;
}

int etc__json_error(json_object *o, int *grpc, char *msg, size_t cap)
{
    json_object *e, *m = NULL;
    int64_t code = 0;
    if (!json_object_object_get_ex(o, "error", &e) || !e)
        return 0;
    if (json_object_is_type(e, json_type_object)) {
        /* The stream form. */
        if (etc__json_i64(e, "grpc_code", &code))
            code = -1;
        json_object_object_get_ex(e, "message", &m);
    } else {
        if (etc__json_i64(o, "code", &code))
            code = -1;
        if (!json_object_object_get_ex(o, "message", &m) || !m)
            m = e;
    }
    *grpc = code >= 0 && code <= 100 ? (int)code : -1;
    const char *s = m && json_object_is_type(m, json_type_string) ? json_object_get_string(m) : "";
    if (cap) {
        size_t n = strlen(s) < cap - 1 ? strlen(s) : cap - 1;
        memcpy(msg, s, n);
        msg[n] = '\0';
    }
    return 1;
}

enum etc__errkind etc__classify(int grpc, const char *msg, int *rc)
{
    *rc = ETC_EREFUSED;
    /* A token the member does not know (expired, or issued before the auth
     * store changed), or none while the cluster now asks for one (auth was
     * enabled after the client opened): sign in again. Without credentials
     * the caller makes it ETC_EPERM. */
    if (strstr(msg, "invalid auth token") || strstr(msg, "auth store is old") ||
        strstr(msg, "user name is empty"))
        return ETC__ERR_AUTH;
    if (strstr(msg, "authentication failed") || strstr(msg, "permission denied") ||
        strstr(msg, "user name not found") || grpc == GRPC_PERMISSION_DENIED ||
        grpc == GRPC_UNAUTHENTICATED) {
        *rc = ETC_EPERM;
        return ETC__ERR_FINAL;
    }
    if (strstr(msg, "lease not found")) {
        *rc = ETC_ENOTFOUND;
        return ETC__ERR_FINAL;
    }
    if (strstr(msg, "compacted")) {
        *rc = ETC_ECOMPACTED;
        return ETC__ERR_FINAL;
    }
    /* Refused before anything was proposed to raft: another member (or the
     * same one, later) may take it. Not "server stopped": etcd 3.4 also
     * answers it to a write whose proposal it made, when it stops while
     * waiting for the apply (processInternalRaftRequestOnce), so it falls
     * to "may have been done" below. */
    if (strstr(msg, "no leader") || strstr(msg, "proposal dropped") || strstr(msg, "not capable") ||
        strstr(msg, "too many requests") || strstr(msg, "not started"))
        return ETC__ERR_RETRY;
    switch (grpc) {
    case GRPC_INVALID_ARGUMENT:
    case GRPC_NOT_FOUND:
    case GRPC_FAILED_PRECONDITION:
    case GRPC_OUT_OF_RANGE:
    case GRPC_RESOURCE_EXHAUSTED:
        return ETC__ERR_FINAL;
    default:
        /* Timed out in raft, leader changed, internal: a write may have
         * been applied. */
        return ETC__ERR_UNKNOWN;
    }
}

int etc__json_error_code(json_object *o, char *msg, size_t cap)
{
    int grpc, rc;
    if (!etc__json_error(o, &grpc, msg, cap))
        return 0;
    switch (etc__classify(grpc, msg, &rc)) {
    case ETC__ERR_FINAL:
        return rc;
    case ETC__ERR_RETRY:
        return ETC_EUNAVAIL;
    case ETC__ERR_AUTH:
        return ETC_EPERM;
    default:
        return ETC_EUNKNOWN;
    }
}
