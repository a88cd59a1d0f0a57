/*
 * etcd/parse.c - the shapes of etcd's answers (txn, lease, status, watch;
 * range is in json.c, beside the kv it is made of), and the etc_parse_*
 * entry points that take raw bytes: what `make fuzz` feeds.
 *
 * Every function here fills its output only with what it checked, and
 * leaves it freeable (etc_*_free) on every return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A txn answer's "responses" holds one object per op of the branch taken:
 * {"response_range": {...}}, {"response_put": {...}},
 * {"response_delete_range": {"deleted": "N"}} (or response_txn). */
int etc__obj_txn(json_object *o, struct etc_txn_result *out)
{
    json_object *hdr, *resp;
    memset(out, 0, sizeof *out);
    int rc = etc__json_bool(o, "succeeded", &out->succeeded);
    if (!rc)
        rc = etc__json_obj(o, "header", &hdr);
    if (!rc && hdr)
        rc = etc__json_i64(hdr, "revision", &out->revision);
    if (!rc)
        rc = etc__json_arr(o, "responses", &resp);
    if (rc)
        return rc;
    if (out->revision < 0)
        return ETC_ECORRUPT;
    size_t n = resp ? json_object_array_length(resp) : 0;
    if (n) {
        out->ranges = calloc(n, sizeof *out->ranges);
        out->deleted = calloc(n, sizeof *out->deleted);
        if (!out->ranges || !out->deleted)
            return ETC_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(resp, i), *x;
        if (!json_object_is_type(r, json_type_object))
            return ETC_ECORRUPT;
        if ((rc = etc__json_obj(r, "response_range", &x)))
            return rc;
        if (x) {
            rc = etc__obj_range(x, &out->ranges[out->nranges++]);
            if (rc)
                return rc;
            continue;
        }
        if ((rc = etc__json_obj(r, "response_delete_range", &x)))
            return rc;
        if (x) {
            rc = etc__json_i64(x, "deleted", &out->deleted[out->ndeleted]);
            if (rc || out->deleted[out->ndeleted] < 0)
                return ETC_ECORRUPT;
            out->ndeleted++;
        }
    }
    return ETC_OK;
}

/* A stream's message comes wrapped: {"result": {...}}. */
static json_object *unwrap(json_object *o, int *rc)
{
    json_object *r;
    *rc = etc__json_obj(o, "result", &r);
    return r ? r : o;
}

int etc__obj_lease(json_object *o, int64_t *id, int64_t *ttl, int64_t *granted)
{
    int rc;
    o = unwrap(o, &rc);
    *id = *ttl = *granted = 0;
    if (!rc)
        rc = etc__json_i64(o, "ID", id);
    if (!rc)
        rc = etc__json_i64(o, "TTL", ttl);
    if (!rc)
        rc = etc__json_i64(o, "grantedTTL", granted);
    if (rc)
        *id = *ttl = *granted = 0;
    return rc;
}

int etc__obj_status(json_object *o, struct etc_status *out)
{
    json_object *hdr, *ver;
    memset(out, 0, sizeof *out);
    int rc = etc__json_obj(o, "header", &hdr);
    if (!rc && hdr)
        rc = etc__json_u64(hdr, "member_id", &out->member_id);
    if (!rc && hdr)
        rc = etc__json_i64(hdr, "revision", &out->revision);
    if (!rc)
        rc = etc__json_u64(o, "leader", &out->leader);
    if (!rc)
        rc = etc__json_i64(o, "raftTerm", &out->raft_term);
    if (!rc && json_object_object_get_ex(o, "version", &ver) && ver) {
        if (!json_object_is_type(ver, json_type_string) ||
            (size_t)json_object_get_string_len(ver) >= sizeof out->version)
            rc = ETC_ECORRUPT;
        else
            strcpy(out->version, json_object_get_string(ver));
    }
    if (!rc && (!hdr || out->member_id == 0))
        rc = ETC_ECORRUPT;
    return rc;
}

static int obj_event(json_object *e, struct etc_event *ev)
{
    json_object *kv, *type;
    memset(ev, 0, sizeof *ev);
    if (!json_object_is_type(e, json_type_object))
        return ETC_ECORRUPT;
    if (json_object_object_get_ex(e, "type", &type) && type) {
        if (!json_object_is_type(type, json_type_string))
            return ETC_ECORRUPT;
        const char *t = json_object_get_string(type);
        if (!strcmp(t, "DELETE"))
            ev->type = ETC_EV_DELETE;
        else if (strcmp(t, "PUT"))
            return ETC_ECORRUPT;
    }
    int rc = etc__json_obj(e, "kv", &kv);
    if (rc || !kv)
        return ETC_ECORRUPT;
    return etc__json_kv(kv, &ev->kv);
}

int etc__obj_watch(json_object *o, int *created, struct etc_event **evs, size_t *nev, char *why,
                   size_t cap)
{
    json_object *events, *reason;
    int canceled, rc;
    int64_t compact;
    *created = 0;
    *evs = NULL;
    *nev = 0;
    o = unwrap(o, &rc);
    if (!rc)
        rc = etc__json_bool(o, "created", created);
    if (!rc)
        rc = etc__json_bool(o, "canceled", &canceled);
    if (!rc)
        rc = etc__json_i64(o, "compact_revision", &compact);
    if (!rc)
        rc = etc__json_arr(o, "events", &events);
    if (rc)
        return rc;
    if (canceled) {
        /* etcd says why in words ("rpc error: code = Unauthenticated desc =
         * etcdserver: invalid auth token"). */
        const char *r = "";
        if (json_object_object_get_ex(o, "cancel_reason", &reason) && reason &&
            json_object_is_type(reason, json_type_string))
            r = json_object_get_string(reason);
        snprintf(why, cap, "%s", r);
        if (compact > 0)
            return ETC_ECOMPACTED;
        int final;
        switch (etc__classify(-1, r, &final)) {
        case ETC__ERR_FINAL:
            return final == ETC_EREFUSED ? ETC_EUNAVAIL : final;
        case ETC__ERR_AUTH:
            return ETC_EPERM;
        default:
            return ETC_EUNAVAIL;
        }
    }
    size_t n = events ? json_object_array_length(events) : 0;
    if (!n)
        return ETC_OK;
    *evs = calloc(n, sizeof **evs);
    if (!*evs)
        return ETC_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        *nev = i + 1;
        rc = obj_event(json_object_array_get_idx(events, i), &(*evs)[i]);
        if (rc)
            return rc;
    }
    return ETC_OK;
}

/* Raw bytes to a checked object that is no error: ETC_OK with *o, or the
 * code. */
static int parse_answer(const char *body, size_t len, json_object **o)
{
    char msg[ETC__ERRMSG_MAX];
    int rc = etc__json_parse(body, len, o);
    if (!rc && (rc = etc__json_error_code(*o, msg, sizeof msg))) {
        json_object_put(*o);
        *o = NULL;
    }
    return rc;
}

int etc_parse_range(const char *body, size_t len, struct etc_range *out)
{
    json_object *o;
    memset(out, 0, sizeof *out);
    int rc = parse_answer(body, len, &o);
    if (!rc)
        rc = etc__obj_range(o, out);
    json_object_put(o);
    return rc;
}

int etc_parse_txn(const char *body, size_t len, struct etc_txn_result *out)
{
    json_object *o;
    memset(out, 0, sizeof *out);
    int rc = parse_answer(body, len, &o);
    if (!rc)
        rc = etc__obj_txn(o, out);
    json_object_put(o);
    return rc;
}

int etc_parse_lease(const char *body, size_t len, int64_t *id, int64_t *ttl, int64_t *granted)
{
    json_object *o;
    *id = *ttl = *granted = 0;
    int rc = parse_answer(body, len, &o);
    if (!rc)
        rc = etc__obj_lease(o, id, ttl, granted);
    json_object_put(o);
    return rc;
}

int etc_parse_status(const char *body, size_t len, struct etc_status *out)
{
    json_object *o;
    memset(out, 0, sizeof *out);
    int rc = parse_answer(body, len, &o);
    if (!rc)
        rc = etc__obj_status(o, out);
    json_object_put(o);
    return rc;
}

int etc_parse_watch(const char *body, size_t len, int *created, struct etc_event **evs, size_t *nev)
{
    json_object *o;
    char why[ETC__ERRMSG_MAX];
    *created = 0;
    *evs = NULL;
    *nev = 0;
    int rc = parse_answer(body, len, &o);
    if (!rc)
        rc = etc__obj_watch(o, created, evs, nev, why, sizeof why);
    json_object_put(o);
    return rc;
}
