/*
 * etcd/watch.c - a watch: one long POST /v3/watch on a connection of its
 * own, driven by a curl multi handle so that waiting for the next event
 * has a timeout. The gateway writes one JSON message per line.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MS_NS UINT64_C(1000000)

struct etc_watch {
    etc_client *c;
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers; /* its own copy: the client may re-authenticate */
    struct etc__buf body;       /* the create request */
    size_t body_pos;
    struct etc__buf in; /* what came, not yet parsed from `scan` on */
    size_t scan;
    int token_expired;   /* etcd refused the auth token: sign in, try again */
    int done;            /* the transfer ended ... */
    CURLcode result;     /* ... so */
    int failed;          /* a code every later call returns */
    size_t host;         /* the endpoint it streams from */
    struct etc_event *q; /* events parsed, not yet handed out: q[qi..qn) */
    size_t qi, qn;
    char curl_err[CURL_ERROR_SIZE];
};

static size_t on_read(char *dst, size_t size, size_t nmemb, void *arg)
{
    struct etc_watch *w = arg;
    size_t n = w->body.len - w->body_pos;
    if (n > size * nmemb)
        n = size * nmemb;
    memcpy(dst, w->body.p + w->body_pos, n);
    w->body_pos += n;
    return n;
}

static size_t on_write(char *src, size_t size, size_t nmemb, void *arg)
{
    struct etc_watch *w = arg;
    /* Drop what was parsed before growing. */
    if (w->scan && w->scan == w->in.len) {
        w->in.len = w->scan = 0;
    } else if (w->scan > w->in.len / 2) {
        memmove(w->in.p, w->in.p + w->scan, w->in.len - w->scan);
        w->in.len -= w->scan;
        w->scan = 0;
    }
    return etc__buf_add_json(&w->in, src, size * nmemb) ? 0 : size * nmemb;
}

static void drop_queue(struct etc_watch *w)
{
    for (size_t i = w->qi; i < w->qn; i++)
        etc_event_free(&w->q[i]);
    free(w->q);
    w->q = NULL;
    w->qi = w->qn = 0;
}

/* Ends the transfer (if any) and frees its handles. */
static void drop_transfer(struct etc_watch *w)
{
    if (w->easy) {
        etc_curl.multi_remove_handle(w->multi, w->easy);
        etc_curl.easy_cleanup(w->easy);
        w->easy = NULL;
    }
    if (w->multi) {
        etc_curl.multi_cleanup(w->multi);
        w->multi = NULL;
    }
    etc_curl.slist_free_all(w->headers);
    w->headers = NULL;
    etc__buf_free(&w->in);
    w->scan = w->body_pos = 0;
    w->done = 0;
}

static int start_transfer(struct etc_watch *w, size_t host)
{
    char url[ETC__HOST_MAX + 64];
    etc_client *c = w->c;
    struct curl_slist *h;
    if (etc__url(c, host, "watch", url, sizeof url))
        return ETC_EINVAL;
    etc__buf_init_json(&w->in, c->max_response, ETC__JSON_LINES);
    w->multi = etc_curl.multi_init();
    w->easy = etc_curl.easy_init();
    if (!w->multi || !w->easy)
        return ETC_ENOMEM;
    for (h = c->headers; h; h = h->next) {
        struct curl_slist *n = etc_curl.slist_append(w->headers, h->data);
        if (!n)
            return ETC_ENOMEM;
        w->headers = n;
    }
    CURL *e = w->easy;
    w->curl_err[0] = '\0';
    etc__curl_base(e, w->curl_err);
    etc_curl.easy_setopt(e, CURLOPT_URL, url);
    etc_curl.easy_setopt(e, CURLOPT_HTTPHEADER, w->headers);
    etc_curl.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)w->body.len);
    etc_curl.easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    etc_curl.easy_setopt(e, CURLOPT_READDATA, w);
    etc_curl.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    etc_curl.easy_setopt(e, CURLOPT_WRITEDATA, w);
    etc__curl_tls(c, e);
    etc__curl_proxy(c, e);
    return etc_curl.multi_add_handle(w->multi, e) == CURLM_OK ? ETC_OK : ETC_ENOMEM;
}

/* The next complete line (a message), or NULL. */
static char *next_line(struct etc_watch *w, size_t *len)
{
    if (w->scan >= w->in.len)
        return NULL;
    char *s = w->in.p + w->scan;
    char *nl = memchr(s, '\n', w->in.len - w->scan);
    if (!nl) {
        /* A last message may end without its newline. */
        if (!w->done || w->result != CURLE_OK)
            return NULL;
        nl = w->in.p + w->in.len;
    }
    *len = (size_t)(nl - s);
    w->scan += *len + (nl < w->in.p + w->in.len);
    return s;
}

/* Moves the transfer on until a line is there, it ended, or `deadline`.
 * ETC_OK (a line, or ended: see w->done) or ETC_ETIMEDOUT, or a code. */
static int pump(struct etc_watch *w, uint64_t deadline)
{
    for (;;) {
        int running = 0, left;
        if (etc_curl.multi_perform(w->multi, &running) != CURLM_OK)
            return ETC_ENOMEM;
        CURLMsg *m;
        while ((m = etc_curl.multi_info_read(w->multi, &left)))
            if (m->msg == CURLMSG_DONE) {
                w->done = 1;
                w->result = m->data.result;
                if (m->data.result != CURLE_OK)
                    etc__errmsg(w->c, "watch: %s",
                                w->curl_err[0] ? w->curl_err
                                               : etc_curl.easy_strerror(m->data.result));
            }
        if (w->done || memchr(w->in.p ? w->in.p + w->scan : "", '\n', w->in.len - w->scan))
            return ETC_OK;
        uint64_t now = etc__now_ns();
        if (now >= deadline)
            return ETC_ETIMEDOUT;
        uint64_t ms = (deadline - now + MS_NS - 1) / MS_NS;
        if (etc_curl.multi_poll(w->multi, NULL, 0, ms > 1000 ? 1000 : (int)ms, NULL) != CURLM_OK)
            return ETC_ENOMEM;
    }
}

/* Parses one message: events go to the queue. *created set for the
 * creation notice. */
static int take_message(struct etc_watch *w, const char *line, size_t len, int *created)
{
    char msg[ETC__ERRMSG_MAX];
    json_object *o;
    struct etc_event *evs = NULL;
    size_t nev = 0;
    /* Blank lines carry nothing. */
    size_t i = 0;
    while (i < len && strchr(" \t\r", line[i]) && line[i])
        i++;
    *created = 0;
    if (i == len)
        return ETC_OK;
    long status = 0;
    etc_curl.easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    int rc = etc__json_parse(line, len, &o);
    if (rc) {
        /* A proxy's page when its upstream is down. */
        if (status >= 500 && status <= 504) {
            etc__errmsg(w->c, "watch: HTTP %ld", status);
            return ETC_EUNAVAIL;
        }
        return rc;
    }
    int grpc, final;
    msg[0] = '\0';
    if (etc__json_error(o, &grpc, msg, sizeof msg))
        rc = etc__json_error_code(o, msg, sizeof msg);
    else
        rc = etc__obj_watch(o, created, &evs, &nev, msg, sizeof msg);
    if (rc && msg[0]) {
        w->token_expired = etc__classify(-1, msg, &final) == ETC__ERR_AUTH;
        etc__errmsg(w->c, "watch: %s", msg);
    }
    json_object_put(o);
    if (rc == ETC_EUNKNOWN)
        rc = ETC_EUNAVAIL; /* nothing a watch does changes anything */
    if (rc) {
        for (size_t k = 0; k < nev; k++)
            etc_event_free(&evs[k]);
        free(evs);
        return rc;
    }
    if (nev) {
        drop_queue(w);
        w->q = evs;
        w->qn = nev;
    }
    return ETC_OK;
}

/* What the end of the stream means. */
static int end_code(struct etc_watch *w)
{
    if (w->result == CURLE_OK) {
        if (!w->c->errmsg[0])
            etc__errmsg(w->c, "watch: the stream ended");
        return ETC_EUNAVAIL;
    }
    if (w->in.over) {
        etc__errmsg(w->c, "watch: a message costing more than %zu bytes", w->c->max_response);
        return ETC_ECORRUPT;
    }
    if (w->c->tls && etc__tls_refused(w->result, w->curl_err))
        return ETC_EPERM;
    return etc__curl_garbage(w->result) ? ETC_ECORRUPT : ETC_EUNAVAIL;
}

/* Waits until deadline for a message that says something: the creation
 * notice (*created) or events (queued). ETC_EUNAVAIL when the stream
 * ended. */
static int next_message(struct etc_watch *w, uint64_t deadline, int *created)
{
    for (;;) {
        size_t len;
        char *line = next_line(w, &len);
        if (line) {
            int rc = take_message(w, line, len, created);
            if (rc || *created || w->qi < w->qn)
                return rc;
            continue; /* a progress notice or a blank line */
        }
        if (w->done)
            return end_code(w);
        int rc = pump(w, deadline);
        if (rc)
            return rc;
    }
}

void etc_event_free(struct etc_event *ev)
{
    if (ev)
        etc__kv_free(&ev->kv);
}

void etc_watch_close(etc_watch *w)
{
    if (!w)
        return;
    drop_transfer(w);
    drop_queue(w);
    etc__buf_free(&w->body);
    free(w);
}

/* Opens the stream on one endpoint and waits for etcd's confirmation. */
static int open_on(struct etc_watch *w, size_t host, uint64_t deadline)
{
    int created = 0;
    int rc = start_transfer(w, host);
    while (!rc && !created)
        rc = next_message(w, deadline, &created);
    if (rc == ETC_ETIMEDOUT) {
        etc__errmsg(w->c, "%s: watch not confirmed in time", w->c->hosts[host]);
        rc = ETC_EUNAVAIL;
    }
    /* Events before the confirmation cannot come: etcd confirms first. */
    if (!rc && w->qi < w->qn)
        rc = ETC_ECORRUPT;
    return rc;
}

int etc_watch_open(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
                   int64_t start_rev, etc_watch **out)
{
    *out = NULL;
    if (!key || !klen || (end && !elen) || start_rev < 0)
        return ETC_EINVAL;
    etc_watch *w = calloc(1, sizeof *w);
    if (!w)
        return ETC_ENOMEM;
    w->c = c;
    etc__buf_init(&w->body, ETC_MAX_RESPONSE_DEFAULT); /* our request */
    int rc = etc__buf_str(&w->body, "{\"create_request\":{");
    if (!rc)
        rc = etc__buf_field_b64(&w->body, 0, "key", key, klen);
    if (!rc && end)
        rc = etc__buf_field_b64(&w->body, 1, "range_end", end, elen);
    if (!rc && start_rev)
        rc = etc__buf_field_i64(&w->body, 1, "start_revision", start_rev);
    if (!rc)
        rc = etc__buf_str(&w->body, "}}");
    if (rc) {
        etc_watch_close(w);
        return rc;
    }
    /* Like a read: each endpoint in turn within the deadline; a member
     * that is refused or silent leaves its turn to the next. Under the
     * caller's cap (etc_silent_cap) a round may end before the deadline:
     * then round after round, a short pause between them, until it. */
    uint64_t deadline = etc__deadline(c);
    int signed_in = 0, capped = c->nhosts > 1 && c->silent_ns;
    c->errmsg[0] = '\0';
    rc = ETC_EUNAVAIL;
    for (size_t i = 0; i < c->nhosts || capped; i++) {
        size_t host = (c->cur + i) % c->nhosts;
        if (i >= c->nhosts && host == c->cur) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
        uint64_t now = etc__now_ns();
        if (now >= deadline)
            break;
        uint64_t share = (deadline - now) / (i < c->nhosts ? c->nhosts - i : 1);
        if (capped && share > c->silent_ns)
            share = c->silent_ns;
        rc = open_on(w, host, now + share);
        if (rc == ETC_EPERM && w->token_expired && c->user && !signed_in) {
            /* The token expired: sign in again, the same endpoint again. */
            signed_in = 1;
            drop_transfer(w);
            w->token_expired = 0;
            rc = etc__auth(c, deadline);
            if (rc)
                break;
            i--;
            continue;
        }
        if (rc != ETC_EUNAVAIL) {
            if (!rc)
                c->cur = w->host = host;
            break;
        }
        drop_transfer(w);
    }
    if (rc) {
        etc_watch_close(w);
        return rc;
    }
    *out = w;
    return ETC_OK;
}

int etc_watch_next(etc_watch *w, uint32_t timeout_ms, struct etc_event *ev)
{
    memset(ev, 0, sizeof *ev);
    if (w->qi == w->qn && !w->failed) {
        int created = 0;
        int rc = next_message(w, etc__now_ns() + (uint64_t)timeout_ms * MS_NS, &created);
        if (rc && rc != ETC_ETIMEDOUT)
            w->failed = rc;
        if (rc)
            return rc;
        if (created)
            return w->failed = ETC_ECORRUPT; /* a second confirmation: not etcd */
    }
    if (w->qi == w->qn)
        return w->failed;
    *ev = w->q[w->qi++];
    memset(&w->q[w->qi - 1], 0, sizeof *ev);
    return ETC_OK;
}

void etc_watch_apart(etc_watch *w)
{
    etc_client *c = w->c;
    if (c->nhosts > 1 && c->cur == w->host)
        c->cur = (w->host + 1) % c->nhosts;
}
