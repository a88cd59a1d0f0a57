/*
 * etcd/lease.c - etcd leases: grant, keep-alive, revoke, time-to-live.
 *
 * The gateway serves keep-alive as a stream; one request in the body gives
 * one answer and the stream ends, which is all a refresh needs.
 */
#include <string.h>

#include "internal.h"

/* POSTs {"<field>":"<v>"[,...]} to path and parses a lease answer. */
static int lease_call(etc_client *c, const char *path, const char *field, int64_t v, int keys_false,
                      enum etc__idem idem, int64_t *id, int64_t *ttl, int64_t *granted)
{
    struct etc__buf b;
    json_object *o;
    etc__buf_init(&b, 128);
    int rc = etc__buf_str(&b, "{");
    if (!rc)
        rc = etc__buf_field_i64(&b, 0, field, v);
    if (!rc && keys_false)
        rc = etc__buf_str(&b, ",\"keys\":false");
    if (!rc)
        rc = etc__buf_str(&b, "}");
    if (!rc)
        rc = etc__call(c, path, &b, idem, SIZE_MAX, &o);
    etc__buf_free(&b);
    if (rc)
        return rc;
    rc = etc__obj_lease(o, id, ttl, granted);
    json_object_put(o);
    return rc;
}

int etc_lease_grant(etc_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s)
{
    int64_t lid, ttl, g;
    *id = 0;
    if (granted_ttl_s)
        *granted_ttl_s = 0;
    if (ttl_s <= 0)
        return ETC_EINVAL;
    int rc = lease_call(c, "lease/grant", "TTL", ttl_s, 0, ETC__WRITE, &lid, &ttl, &g);
    if (rc)
        return rc;
    if (lid <= 0 || ttl <= 0)
        return ETC_ECORRUPT;
    *id = lid;
    if (granted_ttl_s)
        *granted_ttl_s = ttl;
    return ETC_OK;
}

int etc_lease_keepalive(etc_client *c, int64_t id, int64_t *ttl_s)
{
    int64_t lid, ttl, g;
    if (ttl_s)
        *ttl_s = 0;
    if (id <= 0)
        return ETC_EINVAL;
    int rc = lease_call(c, "lease/keepalive", "ID", id, 0, ETC__WRITE, &lid, &ttl, &g);
    if (rc)
        return rc;
    if (lid != id)
        return ETC_ECORRUPT;
    /* etcd answers a lease it does not know with no TTL. */
    if (ttl <= 0)
        return ETC_ENOTFOUND;
    if (ttl_s)
        *ttl_s = ttl;
    return ETC_OK;
}

int etc_lease_revoke(etc_client *c, int64_t id)
{
    int64_t lid, ttl, g;
    if (id <= 0)
        return ETC_EINVAL;
    return lease_call(c, "lease/revoke", "ID", id, 0, ETC__WRITE, &lid, &ttl, &g);
}

int etc_lease_ttl(etc_client *c, int64_t id, int64_t *remaining_s, int64_t *granted_s)
{
    int64_t lid, ttl, g;
    if (remaining_s)
        *remaining_s = 0;
    if (granted_s)
        *granted_s = 0;
    if (id <= 0)
        return ETC_EINVAL;
    int rc = lease_call(c, "lease/timetolive", "ID", id, 1, ETC__READ, &lid, &ttl, &g);
    if (rc)
        return rc;
    if (lid != id)
        return ETC_ECORRUPT;
    /* etcd answers a lease it does not know with TTL -1. */
    if (ttl < 0)
        return ETC_ENOTFOUND;
    if (remaining_s)
        *remaining_s = ttl;
    if (granted_s)
        *granted_s = g;
    return ETC_OK;
}
