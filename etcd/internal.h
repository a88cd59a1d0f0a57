/*
 * etcd/internal.h - what the client's files share. Not installed.
 *
 * Names: etc_ the interface (etcd.h), etc__ between these files, static
 * for the rest.
 */
#ifndef SHL_ETCD_INTERNAL_H
#define SHL_ETCD_INTERNAL_H

#include <json-c/json.h>
#include <stdint.h>
#include <time.h>

#include "curl_api.h"
#include "etcd.h"

#define ETC__HOST_MAX   256 /* "host:port" of one endpoint */
#define ETC__ERRMSG_MAX 256
#define ETC__JSON_DEPTH 16 /* the deepest etcd response nests 7 levels */

/* ---------------------------------------------------------------- buffer */

/* A growable byte buffer, NUL-terminated (the NUL not counted), refusing to
 * grow past `max`. An answer's buffer (etc__buf_init_json) also bounds
 * what parsing it will cost: its capacity plus json-c's objects for the
 * text in it (estimated from its braces, brackets, commas, colons and
 * string bytes, on the high side) stay within max. */
struct etc__buf {
    char *p;
    size_t len, cap, max;
    int over;        /* a write would have passed max (the buffer kept what fit) */
    int json;        /* ETC__JSON_*: an answer's buffer */
    int in_str, esc; /* the scan is inside a string, after a backslash */
    uint64_t tree;   /* json-c's estimated cost of the text (since the last
                        newline for ETC__JSON_LINES) */
};
#define ETC__JSON_NONE  0
#define ETC__JSON_WHOLE 1 /* one JSON text (an answer) */
#define ETC__JSON_LINES 2 /* one JSON text per line (a watch stream) */
void etc__buf_init(struct etc__buf *b, size_t max) ETC_HIDDEN;
void etc__buf_init_json(struct etc__buf *b, size_t max, int json) ETC_HIDDEN;
/* etc__buf_add for an answer's buffer: ETC_ENOMEM and b->over when the
 * bytes and what parsing them would cost pass max. */
int etc__buf_add_json(struct etc__buf *b, const void *p, size_t n) ETC_HIDDEN;
void etc__buf_free(struct etc__buf *b) ETC_HIDDEN;
/* 0, or ETC_ENOMEM (allocation failed, or past max: b->over). */
int etc__buf_add(struct etc__buf *b, const void *p, size_t n) ETC_HIDDEN;
int etc__buf_str(struct etc__buf *b, const char *s) ETC_HIDDEN;
int etc__buf_b64(struct etc__buf *b, const void *p, size_t n) ETC_HIDDEN;
int etc__buf_i64(struct etc__buf *b, int64_t v) ETC_HIDDEN;
/* s as a JSON string literal, quotes included. */
int etc__buf_json_str(struct etc__buf *b, const char *s) ETC_HIDDEN;
/* `"name":"<base64 of p>"` with a leading comma when `comma`. */
int etc__buf_field_b64(struct etc__buf *b, int comma, const char *name, const void *p,
                       size_t n) ETC_HIDDEN;
/* `"name":"<decimal v>"` with a leading comma when `comma`. */
int etc__buf_field_i64(struct etc__buf *b, int comma, const char *name, int64_t v) ETC_HIDDEN;

/* ---------------------------------------------------------------- JSON */

/* Parses body (exactly len bytes, one JSON object and nothing after it but
 * white space) into *out. ETC_OK, ETC_ECORRUPT or ETC_ENOMEM. */
int etc__json_parse(const char *body, size_t len, json_object **out) ETC_HIDDEN;
/* The same, giving up at `deadline` (CLOCK_MONOTONIC ns; the text is parsed
 * a slice at a time): then ETC_ETIMEDOUT. */
int etc__json_parse_by(const char *body, size_t len, uint64_t deadline,
                       json_object **out) ETC_HIDDEN;
/* An etcd int64 field of o ("123" as etcd sends it, or a JSON integer).
 * Absent: *v = 0 and ETC_OK. Present and malformed: ETC_ECORRUPT. */
int etc__json_i64(json_object *o, const char *name, int64_t *v) ETC_HIDDEN;
/* A uint64 field (member ids). */
int etc__json_u64(json_object *o, const char *name, uint64_t *v) ETC_HIDDEN;
/* A bool field: absent is 0, a non-bool is ETC_ECORRUPT. */
int etc__json_bool(json_object *o, const char *name, int *v) ETC_HIDDEN;
/* A base64 field decoded into a fresh NUL-terminated allocation (absent:
 * an empty one). ETC_OK, ETC_ECORRUPT, ETC_ENOMEM. */
int etc__json_b64(json_object *o, const char *name, char **p, size_t *n) ETC_HIDDEN;
/* A field that must be an object (absent: *v NULL, ETC_OK). */
int etc__json_obj(json_object *o, const char *name, json_object **v) ETC_HIDDEN;
/* A field that must be an array (absent: *v NULL, ETC_OK). */
int etc__json_arr(json_object *o, const char *name, json_object **v) ETC_HIDDEN;
/* One kv object of etcd's (mvccpb.KeyValue) into *kv (freed by the caller
 * with etc__kv_free on every return). */
int etc__json_kv(json_object *o, struct etc_kv *kv) ETC_HIDDEN;
void etc__kv_free(struct etc_kv *kv) ETC_HIDDEN;

/*
 * etcd's error in a parsed response, if it is one: the unary form
 * {"error":"..","code":N} or the stream form {"error":{"grpc_code":N,
 * "message":".."}}. Returns 0 when o is no error; else 1 with *grpc the
 * gRPC status code and msg (cap bytes) its message.
 */
int etc__json_error(json_object *o, int *grpc, char *msg, size_t cap) ETC_HIDDEN;

/* What an etcd error means for the client. */
enum etc__errkind {
    ETC__ERR_FINAL,   /* a definite answer: return its code (nothing was done) */
    ETC__ERR_RETRY,   /* nothing was done, another member may do it */
    ETC__ERR_AUTH,    /* the token is no longer valid: authenticate, try again */
    ETC__ERR_UNKNOWN, /* it may have been done (a write timed out in raft) */
};
/* Classifies etcd's error (grpc code and message); *rc gets the code for
 * ETC__ERR_FINAL. */
enum etc__errkind etc__classify(int grpc, const char *msg, int *rc) ETC_HIDDEN;

/* The code an error answer means to a caller that cannot retry (0: o is
 * no error): ETC__ERR_FINAL's code, ETC_EUNAVAIL, ETC_EPERM or
 * ETC_EUNKNOWN. msg (cap bytes) gets etcd's message. */
int etc__json_error_code(json_object *o, char *msg, size_t cap) ETC_HIDDEN;

/* The answers' shapes, from a parsed object that is no error (parse.c).
 * The etc_parse_* functions are these after etc__json_parse and
 * etc__json_error_code. */
int etc__obj_range(json_object *o, struct etc_range *out) ETC_HIDDEN;
int etc__obj_txn(json_object *o, struct etc_txn_result *out) ETC_HIDDEN;
int etc__obj_lease(json_object *o, int64_t *id, int64_t *ttl, int64_t *granted) ETC_HIDDEN;
int etc__obj_status(json_object *o, struct etc_status *out) ETC_HIDDEN;
/* A watch message. When etcd cancelled the watch, why (cap bytes) gets its
 * reason and the code says what it means. */
int etc__obj_watch(json_object *o, int *created, struct etc_event **evs, size_t *nev, char *why,
                   size_t cap) ETC_HIDDEN;

/* Base64 (standard alphabet, padded). Decoding is strict: ETC_ECORRUPT on
 * any other byte or a bad length. out holds at least n / 4 * 3 + 1 bytes. */
int etc__b64_decode(const char *in, size_t n, char *out, size_t *outlen) ETC_HIDDEN;

/* ---------------------------------------------------------------- client */

/* A request's kind: whether sending it twice, or to another member after a
 * lost answer, is harmless. */
enum etc__idem { ETC__READ, ETC__WRITE };

struct etc_client {
    char **hosts; /* "host:port" of each endpoint */
    size_t nhosts;
    size_t cur; /* where the next call starts */
    int tls;
    char *cacert, *cert, *key, *user, *password, *proxy;
    uint32_t timeout_ms;
    size_t max_response;
    uint64_t deadline_ns; /* etc_deadline, 0: none */
    uint64_t silent_ns;   /* etc_silent_cap, 0: none */
    CURL *curl;           /* one handle: its connection cache keeps the links alive */
    char *token;          /* etcd auth token, or NULL */
    int in_auth;          /* authenticating: an auth error is final */
    struct curl_slist *headers;
    char errmsg[ETC__ERRMSG_MAX];
    char curl_err[CURL_ERROR_SIZE];
};

/* CLOCK_MONOTONIC in ns. */
uint64_t etc__now_ns(void) ETC_HIDDEN;
/* The deadline of a call starting now. */
uint64_t etc__deadline(const etc_client *c) ETC_HIDDEN;
/* Sets c->errmsg (printf-like). */
void etc__errmsg(etc_client *c, const char *fmt, ...) ETC_HIDDEN
    __attribute__((format(printf, 2, 3)));

/* Whether a transfer's end code means the peer answered something that is
 * not HTTP as etcd speaks it (or too much of it): ETC_ECORRUPT. */
int etc__curl_garbage(CURLcode rc) ETC_HIDDEN;
/* Whether a transfer's end (code and curl's message) is the TLS peer
 * refusing us: ETC_EPERM. */
int etc__tls_refused(CURLcode rc, const char *msg) ETC_HIDDEN;
/* Applies the client's TLS settings to a handle. */
void etc__curl_tls(const etc_client *c, CURL *h) ETC_HIDDEN;
/* Applies the client's proxy to a handle: c->proxy, or none at all (never
 * the environment's http_proxy, https_proxy, ALL_PROXY or NO_PROXY). */
void etc__curl_proxy(const etc_client *c, CURL *h) ETC_HIDDEN;
/* What every handle of the client is: no signals (threads), no redirects,
 * http(s) only, HTTP/1.1, TCP no-delay and keep-alive, POST, curl's
 * message into errbuf (CURL_ERROR_SIZE). */
void etc__curl_base(CURL *h, char *errbuf) ETC_HIDDEN;
/* "http(s)://host:port/v3/<path>" into buf. */
int etc__url(const etc_client *c, size_t host, const char *path, char *buf, size_t cap) ETC_HIDDEN;
/* The headers of a request: JSON, and the auth token when there is one
 * (rebuilt by etc__auth). */
int etc__headers(etc_client *c) ETC_HIDDEN;

/*
 * One call: POSTs body to /v3/<path>, failing over between endpoints
 * within the deadline as `idem` allows, re-authenticating when the token
 * expired. On ETC_OK, *out holds the parsed JSON answer (the caller puts it
 * with json_object_put); on a code, *out is NULL and c->errmsg says why.
 * `only` (SIZE_MAX: any) pins the call to one endpoint.
 */
int etc__call(etc_client *c, const char *path, const struct etc__buf *body, enum etc__idem idem,
              size_t only, json_object **out) ETC_HIDDEN;

/* Authenticates with c->user/c->password before `deadline`, keeping the
 * token. ETC_OK, ETC_EPERM, ETC_EUNAVAIL, ETC_ECORRUPT, ETC_ENOMEM. */
int etc__auth(etc_client *c, uint64_t deadline) ETC_HIDDEN;

#endif
