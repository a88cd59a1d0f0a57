/*
 * etcd/http.c - one call to the cluster: a POST to the JSON gateway on a
 * kept-alive connection, the deadline, and failover between endpoints.
 *
 * What may be retried elsewhere is decided by what could have reached a
 * member: the body is handed to curl through a read callback, so a request
 * whose callback never ran was never sent (refused, unreachable, TLS
 * handshake failed) and goes to the next endpoint whatever it is. Once the
 * body left, a read may still go elsewhere; a write whose answer is lost is
 * ETC_EUNKNOWN.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MS_NS          UINT64_C(1000000)
#define BACKOFF_MIN_MS 20  /* pause after a round where no endpoint answered */
#define BACKOFF_MAX_MS 400 /* ... doubling up to this */
#define AUTH_RETRIES   2   /* re-authentications within one call */

uint64_t etc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t etc__deadline(const etc_client *c)
{
    uint64_t d = etc__now_ns() + (uint64_t)c->timeout_ms * MS_NS;
    return c->deadline_ns && c->deadline_ns < d ? c->deadline_ns : d;
}

void etc__errmsg(etc_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

void etc__curl_base(CURL *h, char *errbuf)
{
    /* No signals (threads), no redirects, http(s) only, HTTP/1.1. */
    etc_curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    etc_curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    etc_curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    etc_curl.easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    etc_curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    etc_curl.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    etc_curl.easy_setopt(h, CURLOPT_POST, 1L);
    etc_curl.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

void etc__curl_tls(const etc_client *c, CURL *h)
{
    if (!c->tls)
        return;
    if (c->cacert) {
        /* That CA alone: libcurl would also consult its built-in CA
         * directory (/etc/ssl/certs), where any CA the system trusts
         * could vouch for a member. */
        etc_curl.easy_setopt(h, CURLOPT_CAINFO, c->cacert);
        etc_curl.easy_setopt(h, CURLOPT_CAPATH, (char *)NULL);
    }
    if (c->cert)
        etc_curl.easy_setopt(h, CURLOPT_SSLCERT, c->cert);
    if (c->key)
        etc_curl.easy_setopt(h, CURLOPT_SSLKEY, c->key);
    /* TLS 1.2 at most: there the server checks a client certificate
     * inside the handshake, so a refused one fails the connection before
     * any request leaves (ETC_EPERM). With TLS 1.3 the refusal comes after
     * the request was written, as a broken connection, and a write would
     * have to be reported as possibly done. */
    etc_curl.easy_setopt(h, CURLOPT_SSLVERSION,
                         (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2));
    etc_curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    etc_curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
}

void etc__curl_proxy(const etc_client *c, CURL *h)
{
    /* libcurl reads http_proxy, https_proxy, ALL_PROXY (either case but
     * HTTP_PROXY) and NO_PROXY when these are not set: a proxy the
     * environment names would receive the password and every record, even
     * for 127.0.0.1. "" means no proxy; "*" matches every host. */
    if (c->proxy) {
        etc_curl.easy_setopt(h, CURLOPT_PROXY, c->proxy);
        etc_curl.easy_setopt(h, CURLOPT_NOPROXY, "");
    } else {
        etc_curl.easy_setopt(h, CURLOPT_PROXY, "");
        etc_curl.easy_setopt(h, CURLOPT_NOPROXY, "*");
    }
}

int etc__url(const etc_client *c, size_t host, const char *path, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s://%s/v3/%s", c->tls ? "https" : "http", c->hosts[host], path);
    return n > 0 && (size_t)n < cap ? ETC_OK : ETC_EINVAL;
}

int etc__headers(etc_client *c)
{
    struct curl_slist *h = NULL, *n;
    h = etc_curl.slist_append(h, "Content-Type: application/json");
    /* No "Expect: 100-continue" round trip for larger bodies. */
    if (h && (n = etc_curl.slist_append(h, "Expect:")))
        h = n;
    else if (h) {
        etc_curl.slist_free_all(h);
        h = NULL;
    }
    if (h && c->token) {
        size_t len = strlen(c->token) + sizeof "Authorization: ";
        char *line = malloc(len);
        n = NULL;
        if (line) {
            snprintf(line, len, "Authorization: %s", c->token);
            n = etc_curl.slist_append(h, line);
            free(line);
        }
        if (!n) {
            etc_curl.slist_free_all(h);
            h = NULL;
        }
    }
    if (!h)
        return ETC_ENOMEM;
    etc_curl.slist_free_all(c->headers);
    c->headers = h;
    return ETC_OK;
}

/* One attempt's state, seen by curl's callbacks. */
struct attempt {
    const char *body;
    size_t len, pos;
    int sent; /* curl asked for the body: the request may have left */
    struct etc__buf resp;
};

static size_t on_read(char *dst, size_t size, size_t nmemb, void *arg)
{
    struct attempt *a = arg;
    size_t n = a->len - a->pos;
    if (n > size * nmemb)
        n = size * nmemb;
    memcpy(dst, a->body + a->pos, n);
    a->pos += n;
    a->sent = 1;
    return n;
}

/*
 * Rewound only for curl's one retry of a request sent on a kept-alive
 * connection that turned out closed with nothing received: the member had
 * closed it as idle, before the request came (etcd closes a connection
 * only between requests). The `sent` mark stays: if the retry cannot
 * connect, the request still counts as possibly sent.
 */
static int on_seek(void *arg, curl_off_t offset, int origin)
{
    struct attempt *a = arg;
    if (offset != 0 || origin != SEEK_SET)
        return CURL_SEEKFUNC_CANTSEEK;
    a->pos = 0;
    return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *src, size_t size, size_t nmemb, void *arg)
{
    struct attempt *a = arg;
    return etc__buf_add_json(&a->resp, src, size * nmemb) ? 0 : size * nmemb;
}

/* What one attempt came to. */
enum outcome {
    OUT_ANSWER,  /* a parsed answer that is no error */
    OUT_FINAL,   /* a definite code: return it */
    OUT_NOTSENT, /* nothing reached a member: another endpoint may take it */
    OUT_LOST,    /* sent, answer lost or a retryable refusal after sending */
    OUT_UNKNOWN, /* etcd says a write may have been applied */
    OUT_CORRUPT, /* an answer that is not etcd's */
    OUT_AUTH,    /* the token expired */
    OUT_REFUSED, /* the member's host refused the connection: nothing sent */
};

int etc__tls_refused(CURLcode rc, const char *msg)
{
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
        return 1;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        /* The peer's TLS alert (bad certificate, certificate required,
         * unknown CA): with TLS 1.3 the refusal of a client certificate
         * arrives after the handshake, at the first read. */
        return strstr(msg, "alert") != NULL;
    default:
        return 0;
    }
}

int etc__curl_garbage(CURLcode rc)
{
    switch (rc) {
    case CURLE_WRITE_ERROR: /* our bound: see the callers */
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL: /* e.g. "HTTP/0.9": not HTTP at all */
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_TOO_MANY_REDIRECTS:
        return 1;
    default:
        return 0;
    }
}

static enum outcome classify_transport(etc_client *c, CURLcode rc, const struct attempt *a,
                                       int *code)
{
    const char *msg = c->curl_err[0] ? c->curl_err : etc_curl.easy_strerror(rc);
    etc__errmsg(c, "%s", msg);
    if (c->tls && etc__tls_refused(rc, msg)) {
        *code = ETC_EPERM;
        return OUT_FINAL;
    }
    if (etc__curl_garbage(rc)) {
        if (rc == CURLE_WRITE_ERROR || rc == CURLE_FILESIZE_EXCEEDED)
            etc__errmsg(c, "an answer costing more than %zu bytes", c->max_response);
        return OUT_CORRUPT;
    }
    long os_errno = 0;
    switch (rc) {
    case CURLE_OUT_OF_MEMORY:
        *code = ETC_ENOMEM;
        return OUT_FINAL;
    case CURLE_COULDNT_CONNECT:
        etc_curl.easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
        return !a->sent && os_errno == ECONNREFUSED ? OUT_REFUSED : OUT_NOTSENT;
    default:
        return a->sent ? OUT_LOST : OUT_NOTSENT;
    }
}

static enum outcome classify_answer(etc_client *c, long status, struct attempt *a,
                                    uint64_t deadline, json_object **out, int *code)
{
    char msg[ETC__ERRMSG_MAX];
    int grpc;
    json_object *o;
    int rc = etc__json_parse_by(a->resp.p, a->resp.len, deadline, &o);
    if (rc == ETC_ETIMEDOUT) {
        /* The answer came, but not in a state to be read in time. */
        etc__errmsg(c, "HTTP %ld with an answer not parsed by the deadline", status);
        return OUT_LOST;
    }
    if (rc) {
        /* A proxy's page when its upstream is down, or not etcd at all. */
        etc__errmsg(c, "HTTP %ld with %s", status,
                    a->resp.len ? "an answer not etcd's" : "no body");
        return status >= 500 && status <= 504 ? OUT_LOST : OUT_CORRUPT;
    }
    if (!etc__json_error(o, &grpc, msg, sizeof msg)) {
        if (status != 200) {
            json_object_put(o);
            etc__errmsg(c, "HTTP %ld without an etcd error", status);
            return OUT_CORRUPT;
        }
        *out = o;
        return OUT_ANSWER;
    }
    json_object_put(o);
    etc__errmsg(c, "%s", msg);
    switch (etc__classify(grpc, msg, code)) {
    case ETC__ERR_FINAL:
        return OUT_FINAL;
    case ETC__ERR_RETRY:
        return OUT_NOTSENT;
    case ETC__ERR_AUTH:
        return OUT_AUTH;
    default:
        return OUT_UNKNOWN;
    }
}

static enum outcome attempt(etc_client *c, size_t host, const char *path,
                            const struct etc__buf *body, uint64_t budget_ns, uint64_t deadline,
                            json_object **out, int *code)
{
    char url[ETC__HOST_MAX + 64];
    struct attempt a = {.body = body->p, .len = body->len};
    long timeout_ms = (long)(budget_ns / MS_NS);
    if (timeout_ms < 1)
        timeout_ms = 1;
    if (etc__url(c, host, path, url, sizeof url)) {
        *code = ETC_EINVAL;
        return OUT_FINAL;
    }
    etc__buf_init_json(&a.resp, c->max_response, ETC__JSON_WHOLE);
    CURL *h = c->curl;
    c->curl_err[0] = '\0';
    etc_curl.easy_setopt(h, CURLOPT_URL, url);
    etc_curl.easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
    etc_curl.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    etc_curl.easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    etc_curl.easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    etc_curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    etc_curl.easy_setopt(h, CURLOPT_READDATA, &a);
    etc_curl.easy_setopt(h, CURLOPT_SEEKDATA, &a);
    etc_curl.easy_setopt(h, CURLOPT_WRITEDATA, &a);
    etc_curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    etc_curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    CURLcode rc = etc_curl.easy_perform(h);
    enum outcome r;
    if (rc != CURLE_OK) {
        r = a.resp.over ? OUT_CORRUPT : classify_transport(c, rc, &a, code);
        if (a.resp.over)
            etc__errmsg(c, "an answer costing more than %zu bytes", c->max_response);
    } else {
        long status = 0;
        etc_curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        r = classify_answer(c, status, &a, deadline, out, code);
    }
    etc__buf_free(&a.resp);
    if (r != OUT_ANSWER) {
        char why[ETC__ERRMSG_MAX];
        memcpy(why, c->errmsg, sizeof why);
        etc__errmsg(c, "%s: %s", c->hosts[host], why);
    }
    return r;
}

/* Every one of the n members from `start` refused the connection. */
static int all_refused(etc_client *c, size_t start, size_t n)
{
    char list[ETC__ERRMSG_MAX] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         c->hosts[(start + i) % c->nhosts]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    etc__errmsg(c, "connection refused by every member (%s): nothing was sent", list);
    return ETC_EUNAVAIL;
}

int etc__call(etc_client *c, const char *path, const struct etc__buf *body, enum etc__idem idem,
              size_t only, json_object **out)
{
    uint64_t deadline = etc__deadline(c);
    size_t n = only == SIZE_MAX ? c->nhosts : 1;
    size_t start = only == SIZE_MAX ? c->cur : only;
    unsigned backoff_ms = BACKOFF_MIN_MS, auths = 0;
    int corrupt = 0, code = ETC_EUNAVAIL;
    *out = NULL;
    c->errmsg[0] = '\0';
    for (;;) {
        /* One round: each endpoint once, from where the last call ended. */
        size_t refused = 0;
        for (size_t i = 0; i < n; i++) {
            size_t host = (start + i) % c->nhosts;
            uint64_t now = etc__now_ns();
            if (now >= deadline)
                goto timeout;
            /* A read leaves each endpoint still to try its share of the
             * time; a write sent to a silent member keeps half for the
             * caller's read-back when there is another member to ask;
             * neither more than the caller's cap when one is set. */
            uint64_t budget = deadline - now;
            if (idem == ETC__READ)
                budget /= n - i;
            else if (c->nhosts > 1)
                budget /= 2;
            if (n > 1 && c->silent_ns && budget > c->silent_ns)
                budget = c->silent_ns; /* the caller's cap (etc_silent_cap) */
            switch (attempt(c, host, path, body, budget, deadline, out, &code)) {
            case OUT_ANSWER:
                c->cur = host;
                return ETC_OK;
            case OUT_FINAL:
                c->cur = host;
                return code;
            case OUT_AUTH:
                if (!c->user || c->in_auth || auths++ >= AUTH_RETRIES)
                    return ETC_EPERM;
                code = etc__auth(c, deadline);
                if (code)
                    return code;
                i--; /* the same endpoint again: the request was refused */
                continue;
            case OUT_UNKNOWN:
            case OUT_LOST:
                if (idem == ETC__WRITE) {
                    c->cur = (host + 1) % c->nhosts;
                    return ETC_EUNKNOWN;
                }
                break;
            case OUT_CORRUPT:
                if (idem == ETC__WRITE) {
                    c->cur = (host + 1) % c->nhosts;
                    return ETC_ECORRUPT;
                }
                corrupt = 1;
                break;
            case OUT_REFUSED:
                refused++;
                break;
            case OUT_NOTSENT:
                break;
            }
            c->cur = (host + 1) % c->nhosts;
        }
        if (corrupt)
            return ETC_ECORRUPT;
        /* Nothing listens at any member's address: no election or restart
         * in progress is answered by waiting out the deadline, and nothing
         * was sent, so say so at once. */
        if (refused == n)
            return all_refused(c, start, n);
        if (only != SIZE_MAX)
            return ETC_EUNAVAIL;
        /* No endpoint answered: wait a little (an election, a restart). */
        uint64_t now = etc__now_ns();
        if (now >= deadline)
            goto timeout;
        uint64_t pause = (uint64_t)backoff_ms * MS_NS;
        if (pause > deadline - now)
            pause = deadline - now;
        struct timespec ts = {.tv_sec = (time_t)(pause / 1000000000u),
                              .tv_nsec = (long)(pause % 1000000000u)};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
        start = c->cur;
    }
timeout:
    if (!c->errmsg[0])
        etc__errmsg(c, "deadline passed");
    return ETC_EUNAVAIL;
}
