/*
 * etcd/auth.c - etcd's user/password authentication: a token for the
 * requests' Authorization header, fetched at open and again whenever etcd
 * says it is no longer valid (simple tokens expire, a restarted member
 * forgets them).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int set_token(etc_client *c, const char *token)
{
    char *t = NULL;
    if (token && !(t = strdup(token)))
        return ETC_ENOMEM;
    if (c->token)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    c->token = t;
    return etc__headers(c);
}

/* The token goes into a header line: printable ASCII only. */
static int valid_token(const char *t, size_t n)
{
    if (n == 0 || n > 4096)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x21 || t[i] > 0x7e)
            return 0;
    return 1;
}

int etc__auth(etc_client *c, uint64_t deadline)
{
    struct etc__buf body;
    json_object *o, *tok;
    /* Without the stale token: authenticate needs none. */
    int rc = set_token(c, NULL);
    if (rc)
        return rc;
    etc__buf_init(&body, 64 + 2 * (strlen(c->user) + strlen(c->password)));
    rc = etc__buf_str(&body, "{\"name\":");
    if (!rc)
        rc = etc__buf_json_str(&body, c->user);
    if (!rc)
        rc = etc__buf_str(&body, ",\"password\":");
    if (!rc)
        rc = etc__buf_json_str(&body, c->password);
    if (!rc)
        rc = etc__buf_str(&body, "}");
    if (rc) {
        etc__buf_free(&body);
        return rc;
    }
    uint64_t saved = c->deadline_ns;
    c->deadline_ns = deadline;
    c->in_auth = 1;
    rc = etc__call(c, "auth/authenticate", &body, ETC__READ, SIZE_MAX, &o);
    c->in_auth = 0;
    c->deadline_ns = saved;
    memset(body.p, 0, body.len);
    etc__buf_free(&body);
    if (rc == ETC_EREFUSED && strstr(c->errmsg, "authentication is not enabled"))
        return ETC_OK; /* the cluster takes requests without a token */
    if (rc)
        return rc == ETC_EREFUSED ? ETC_EPERM : rc;
    if (json_object_object_get_ex(o, "token", &tok) && tok &&
        json_object_is_type(tok, json_type_string) &&
        valid_token(json_object_get_string(tok), (size_t)json_object_get_string_len(tok)))
        rc = set_token(c, json_object_get_string(tok));
    else
        rc = ETC_ECORRUPT;
    json_object_put(o);
    return rc;
}
