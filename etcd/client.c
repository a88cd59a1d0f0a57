/*
 * etcd/client.c - a client: its endpoints and settings, its curl handle,
 * and the calls that are about the client rather than the data (status).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char *dup_or_null(const char *s, int *fail)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *fail = 1;
    return d;
}

/* "host:port" (a name, a dotted address or a [v6] literal, then a port of
 * 1-65535): nothing else may go into the URL. */
static int valid_host(const char *s, size_t n)
{
    if (n == 0 || n >= ETC__HOST_MAX)
        return 0;
    const char *colon = NULL;
    size_t i = 0;
    if (s[0] == '[') {
        for (i = 1; i < n && s[i] != ']'; i++)
            if (!strchr("0123456789abcdefABCDEF:.", s[i]))
                return 0;
        if (i >= n || i == 1 || i + 1 >= n || s[i + 1] != ':')
            return 0;
        colon = s + i + 1;
    } else {
        for (; i < n && s[i] != ':'; i++)
            if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z') &&
                !(s[i] >= '0' && s[i] <= '9') && s[i] != '-' && s[i] != '.')
                return 0;
        if (i == 0 || i >= n)
            return 0;
        colon = s + i;
    }
    size_t plen = n - (size_t)(colon + 1 - s);
    if (plen == 0 || plen > 5)
        return 0;
    unsigned port = 0;
    for (size_t j = 0; j < plen; j++) {
        char ch = colon[1 + j];
        if (ch < '0' || ch > '9')
            return 0;
        port = port * 10 + (unsigned)(ch - '0');
    }
    return port >= 1 && port <= 65535;
}

static int split_endpoints(etc_client *c, const char *eps)
{
    size_t n = 1;
    for (const char *p = eps; *p; p++)
        n += *p == ',';
    c->hosts = calloc(n, sizeof *c->hosts);
    if (!c->hosts)
        return ETC_ENOMEM;
    const char *p = eps;
    for (size_t i = 0; i < n; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!valid_host(p, len))
            return ETC_EINVAL;
        c->hosts[i] = strndup(p, len);
        if (!c->hosts[i])
            return ETC_ENOMEM;
        c->nhosts = i + 1;
        p = e ? e + 1 : p + len;
    }
    return ETC_OK;
}

static int setup_curl(etc_client *c)
{
    CURL *h = c->curl = etc_curl.easy_init();
    if (!h)
        return ETC_ENOMEM;
    etc__curl_base(h, c->curl_err);
    etc_curl.easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_response);
    etc__curl_tls(c, h);
    etc__curl_proxy(c, h);
    return etc__headers(c);
}

/* A proxy is "http://..." or "https://..."; credentials only go through one
 * inside TLS to the member (a CONNECT tunnel), never readable by it. */
static int valid_proxy(const struct etc_config *cfg)
{
    const char *p = cfg->proxy;
    if (!p || !p[0])
        return 1;
    if (strncmp(p, "http://", 7) && strncmp(p, "https://", 8))
        return 0;
    return cfg->tls || !cfg->user;
}

int etc_open(const struct etc_config *cfg, etc_client **out)
{
    int fail = 0, rc;
    *out = NULL;
    if (!cfg || !cfg->endpoints || !cfg->endpoints[0] || (cfg->cert && !cfg->key) ||
        (!cfg->cert && cfg->key) || (cfg->user && !cfg->password) || !valid_proxy(cfg))
        return ETC_EINVAL;
    if ((rc = etc_curl_load()))
        return rc;
    etc_client *c = calloc(1, sizeof *c);
    if (!c)
        return ETC_ENOMEM;
    c->tls = cfg->tls != 0;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : ETC_TIMEOUT_DEFAULT_MS;
    c->max_response = cfg->max_response ? cfg->max_response : ETC_MAX_RESPONSE_DEFAULT;
    c->cacert = dup_or_null(cfg->cacert, &fail);
    c->cert = dup_or_null(cfg->cert, &fail);
    c->key = dup_or_null(cfg->key, &fail);
    c->user = dup_or_null(cfg->user, &fail);
    c->password = dup_or_null(cfg->password, &fail);
    c->proxy = cfg->proxy && cfg->proxy[0] ? dup_or_null(cfg->proxy, &fail) : NULL;
    rc = fail ? ETC_ENOMEM : split_endpoints(c, cfg->endpoints);
    if (!rc)
        rc = setup_curl(c);
    if (!rc && c->user)
        rc = etc__auth(c, etc__deadline(c));
    if (rc) {
        etc_close(c);
        return rc;
    }
    *out = c;
    return ETC_OK;
}

void etc_close(etc_client *c)
{
    if (!c)
        return;
    if (c->curl)
        etc_curl.easy_cleanup(c->curl);
    etc_curl.slist_free_all(c->headers);
    for (size_t i = 0; i < c->nhosts; i++)
        free(c->hosts[i]);
    free(c->hosts);
    free(c->cacert);
    free(c->cert);
    free(c->key);
    free(c->user);
    free(c->proxy);
    if (c->password)
        memset(c->password, 0, strlen(c->password));
    free(c->password);
    if (c->token)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    free(c);
}

void etc_deadline(etc_client *c, uint64_t abs_ns)
{
    c->deadline_ns = abs_ns;
}

uint64_t etc_silent_cap(etc_client *c, uint64_t ns)
{
    uint64_t was = c->silent_ns;
    c->silent_ns = ns;
    return was;
}

const char *etc_endpoint(const etc_client *c)
{
    return c->hosts[c->cur];
}

const char *etc_errmsg(const etc_client *c)
{
    return c->errmsg;
}

int etc_status(etc_client *c, const char *endpoint, struct etc_status *out)
{
    size_t only = c->cur;
    memset(out, 0, sizeof *out);
    if (endpoint) {
        for (only = 0; only < c->nhosts && strcmp(c->hosts[only], endpoint); only++)
            ;
        if (only == c->nhosts)
            return ETC_EINVAL;
    }
    struct etc__buf body;
    etc__buf_init(&body, 16);
    json_object *o;
    int rc = etc__buf_str(&body, "{}");
    if (!rc)
        rc = etc__call(c, "maintenance/status", &body, ETC__READ, only, &o);
    etc__buf_free(&body);
    if (!rc) {
        rc = etc__obj_status(o, out);
        json_object_put(o);
    }
    return rc;
}
