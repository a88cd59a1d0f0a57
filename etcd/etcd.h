/*
 * etcd/etcd.h - a small etcd v3 client: KV, Txn, leases, watch, auth, TLS.
 *
 * It speaks HTTP/1.1 (libcurl, kept-alive connections) to the JSON gateway
 * that every etcd 3.4 member serves beside gRPC: POST http(s)://host:port/v3/...
 * (kv/range, kv/txn, kv/deleterange, lease/grant, lease/keepalive,
 * lease/revoke, lease/timetolive, watch, auth/authenticate,
 * maintenance/status). Keys and values are bytes, base64 in JSON; 64-bit
 * numbers are JSON strings. Built only when libcurl and json-c are found
 * (make ETCD=0 leaves the folder out; lib/ then sees SHL_HAVE_ETCD 0).
 *
 * It knows the etcd API and nothing of what a lease of shmlease means, and
 * includes nothing of lib/. Names: etc_ for what lib/ and the tests use
 * (hidden outside the shared library), etc__ between this folder's files,
 * static for the rest.
 *
 * Every call:
 *  - returns ETC_OK (0) or a negative ETC_E* code; never prints, never
 *    aborts on anything a server sends, never sets errno for the caller;
 *  - is bounded by the client's deadline (etc_config.timeout_ms) from its
 *    start to its return: every endpoint, retry and re-authentication
 *    included. A member that stops answering is left for the next one;
 *  - retries an idempotent request (a read: range, timetolive, status) on
 *    the next endpoint when one does not answer; a request that changes
 *    state (txn with a put or delete, deleterange, grant, keepalive, revoke)
 *    is moved to another endpoint only when it was surely never delivered
 *    (the connection was refused or never established). Once it may have
 *    reached a member and its answer is lost, the call returns ETC_EUNKNOWN:
 *    the caller resolves the outcome by reading back.
 *  - shares its time between endpoints: a read gives each endpoint still to
 *    try its share of the time left (a silent member does not eat it all);
 *    a write sent to a member that stays silent waits at most half the time
 *    left when there are other endpoints (so that the caller can still read
 *    back the outcome), all of it with one endpoint; both at most
 *    etc_silent_cap() when one is set. When no endpoint
 *    answered, it pauses (20 ms, doubling to 400 ms) and tries them again
 *    until the deadline: an election or a restart is waited out;
 *  - after ETC_EUNAVAIL/ETC_EUNKNOWN, the next call starts on the next
 *    endpoint; after a success, where it succeeded.
 *
 * TLS is limited to 1.2: there a refused client certificate fails the
 * handshake, before any request is written, and is reported as ETC_EPERM
 * (with TLS 1.3 the refusal arrives after the request and would look like
 * a lost answer).
 *
 * Threads: an etc_client (and an etc_watch) is used by one thread at a
 * time; different clients may be used by different threads at once
 * (curl_global_init is done once, thread-safely, by etc_open). After
 * fork(), a child must not use its parent's clients (open its own).
 */
#ifndef SHL_ETCD_ETCD_H
#define SHL_ETCD_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define ETC_HIDDEN __attribute__((visibility("hidden")))

/* ---------------------------------------------------------------- codes */

/* X(name, value, message): the codes, etc_strerror and etc_errname. */
#define ETC_ERRORS(X)                                                                              \
    X(ETC_OK, 0, "success")                                                                        \
    X(ETC_EUNAVAIL, -1, "no etcd endpoint answered; nothing was done")                             \
    X(ETC_EUNKNOWN, -2, "the request was sent but its answer lost: it may have been done")         \
    X(ETC_ECORRUPT, -3, "the answer is not a well-formed etcd response")                           \
    X(ETC_EPERM, -4, "refused: TLS handshake, credentials or permission")                          \
    X(ETC_ENOTFOUND, -5, "etcd lease not found or expired")                                        \
    X(ETC_ECOMPACTED, -6, "the revision asked for has been compacted")                             \
    X(ETC_ENOMEM, -7, "out of memory")                                                             \
    X(ETC_EINVAL, -8, "invalid argument")                                                          \
    X(ETC_ETIMEDOUT, -9, "nothing came within the timeout")                                        \
    X(ETC_EREFUSED, -10, "etcd refused the request")                                               \
    X(ETC_ENOTSUP, -11, "libcurl could not be loaded")

enum {
#define ETC__ENUM(name, value, msg) name = value,
    ETC_ERRORS(ETC__ENUM)
#undef ETC__ENUM
};
/*
 * ETC_EUNAVAIL  nothing that could have taken effect was sent: no endpoint
 *               answered (refused, unreachable, or silent) within the
 *               deadline. Also: the server said "unavailable" (no leader),
 *               before doing anything.
 * ETC_EUNKNOWN  a request that changes state was sent and its answer lost
 *               (timeout, reset, or a leader change during it): it may or
 *               may not have happened. Never returned by a read.
 * ETC_ECORRUPT  garbage, truncated JSON, a response larger than the bound
 *               (etc_config.max_response), a field of the wrong type: not a
 *               server of etcd's gateway, or a broken one. For a request
 *               that changes state it also means "may have been done" (the
 *               request reached something), as ETC_EUNKNOWN.
 * ETC_EPERM     TLS refused (unknown CA, missing or rejected client
 *               certificate), authentication failed (wrong user or
 *               password), or etcd's auth denied the operation.
 * ETC_ENOTFOUND the etcd lease does not exist (never granted, expired, or
 *               revoked).
 * ETC_ECOMPACTED a range or watch at a revision older than the compaction.
 * ETC_ETIMEDOUT etc_watch_next: no event within its own timeout. The watch
 *               is still good.
 * ETC_EREFUSED  etcd answered with an error this API has no code for (e.g.
 *               a request too large, too many operations in a txn, a
 *               duplicate key in a txn): etc_errmsg says what.
 * ETC_ENOTSUP   etc_open: libcurl (loaded at run time, see curl_api.h)
 *               could not be loaded; etc_curl_error() says why.
 */

/* The message of a code ("unknown etcd client code" for any other int). */
const char *etc_strerror(int rc) ETC_HIDDEN;
/* The name of a code, e.g. "ETC_EUNAVAIL" ("?" for any other int). */
const char *etc_errname(int rc) ETC_HIDDEN;

/* ---------------------------------------------------------------- client */

/* Bound of what one answer may cost when etc_config.max_response is 0:
 * with the process's own, under 256 MiB however hostile the server. */
#define ETC_MAX_RESPONSE_DEFAULT (128u << 20)
/* etc_config.timeout_ms when 0. */
#define ETC_TIMEOUT_DEFAULT_MS 5000u

struct etc_config {
    const char *endpoints; /* "host:port[,host:port...]"; hosts may be [v6] literals */
    int tls;               /* 1: https (the etcds:// scheme), 0: http */
    const char *cacert;    /* PEM file of the CA to trust, or NULL: the system's */
    const char *cert;      /* PEM client certificate, or NULL */
    const char *key;       /* PEM key of `cert`, or NULL */
    const char *user;      /* etcd user (auth enabled), or NULL: none */
    const char *password;  /* its password */
    uint32_t timeout_ms;   /* deadline of every call, everything included; 0: default */
    size_t max_response;   /* bound of what an answer (or a watch message) may cost
                              in memory: its body, and json-c's objects for it
                              (estimated from the text as it comes, high, so an
                              answer is cut off before it is all in).
                              0: ETC_MAX_RESPONSE_DEFAULT, which also bounds
                              a request body */
    const char *proxy;     /* "http://host:port" or "https://...": the proxy to go
                              through, or NULL / "": none (the environment's
                              http_proxy, ALL_PROXY, ... are never used). With
                              a user, only for tls (a tunnel the proxy cannot
                              read): else etc_open is ETC_EINVAL. */
};

typedef struct etc_client etc_client;

/*
 * Makes a client of the cluster at c->endpoints (the strings are copied).
 * With a user, authenticates at once (the token is kept and renewed when
 * etcd says it became invalid); without, contacts nothing.
 * Returns ETC_EINVAL (no endpoint, a malformed one, cert without key, a
 * proxy that is not http(s)://, or one with a user and no tls),
 * ETC_ENOMEM, ETC_ENOTSUP (libcurl could not be loaded), and with a user
 * the codes of a call: ETC_EPERM (wrong credentials, TLS refused),
 * ETC_EUNAVAIL, ETC_ECORRUPT. On error *out is NULL and nothing is left
 * allocated.
 */
int etc_open(const struct etc_config *c, etc_client **out) ETC_HIDDEN;
/* Frees the client and its connections. NULL is fine. */
void etc_close(etc_client *c) ETC_HIDDEN;

/*
 * Sets an absolute deadline (CLOCK_MONOTONIC, ns) that every call on c
 * meets until it is cleared (0): a call ends at the earlier of it and its
 * own timeout_ms. So a caller that makes several calls for one operation
 * (a write, then a read-back) bounds them all together. A call that starts
 * at or past it returns ETC_EUNAVAIL at once, sending nothing.
 */
void etc_deadline(etc_client *c, uint64_t abs_ns) ETC_HIDDEN;

/*
 * Caps what one attempt of a call (or of a watch's opening) gives a member
 * that does not answer, when another endpoint could be asked: ns (0: no
 * cap, the shares above). A member that stops (SIGSTOP, a hung disk) then
 * costs a call at most ns, after which the call goes on elsewhere (a read,
 * or a watch's opening, round the endpoints until the deadline) or returns
 * ETC_EUNKNOWN (a write, as for any lost answer), and the next call starts
 * on another endpoint. A member merely slower than ns is left the same
 * way: a write to it is ETC_EUNKNOWN, which the caller reads back. For a
 * caller that must be heard within a budget: a keep-alive before its
 * lease's ttl runs out. No effect with one endpoint or on a call pinned to
 * one. Returns the cap it replaces.
 */
uint64_t etc_silent_cap(etc_client *c, uint64_t ns) ETC_HIDDEN;

/* The endpoint the next call starts with ("host:port"), valid until the
 * next call on c: the one that answered last. */
const char *etc_endpoint(const etc_client *c) ETC_HIDDEN;
/* A line about the last failure of a call on c (the server's message, the
 * transport error), "" after a success. Valid until the next call. */
const char *etc_errmsg(const etc_client *c) ETC_HIDDEN;

/* ---------------------------------------------------------------- KV */

struct etc_kv {
    char *key; /* key_len bytes, then a NUL (not counted) */
    size_t key_len;
    char *value; /* value_len bytes, then a NUL (not counted) */
    size_t value_len;
    int64_t create_rev, mod_rev, version, lease; /* lease 0: none */
};

struct etc_range {
    struct etc_kv *kvs; /* n of them, in key order */
    size_t n;
    int64_t count;    /* keys in the range (more than n when limited) */
    int more;         /* 1: the limit cut the answer */
    int64_t revision; /* the store's revision when read */
};

/*
 * Reads the key (end == NULL) or the range [key, end) (end "\0" with
 * elen 1: every key >= key), at most `limit` keys (0: all), at revision
 * `rev` (0: the latest). A missing key is not an error: n == 0.
 * Linearizable (a quorum read). Retried on another endpoint within the
 * deadline. *out must be freed with etc_range_free, also on error (it is
 * left empty then).
 * Returns ETC_EUNAVAIL, ETC_ECOMPACTED, ETC_ECORRUPT, ETC_EPERM, ETC_ENOMEM,
 * ETC_EINVAL (klen 0, limit < 0).
 */
int etc_get(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
            int64_t limit, int64_t rev, struct etc_range *out) ETC_HIDDEN;
/* Frees what a range holds and empties it. NULL is fine. */
void etc_range_free(struct etc_range *r) ETC_HIDDEN;

enum etc_target { ETC_VALUE, ETC_VERSION, ETC_CREATE, ETC_MOD, ETC_LEASE };
enum etc_rel { ETC_EQ, ETC_NE, ETC_LT, ETC_GT };

/* One compare of a txn: target(key) rel (value or num). A missing key has
 * version, create and mod revisions 0, lease 0, and no value (a VALUE
 * compare of a missing key is false). */
struct etc_cmp {
    const void *key;
    size_t klen;
    enum etc_target target;
    enum etc_rel rel;
    const void *value; /* ETC_VALUE: the bytes compared */
    size_t vlen;
    int64_t num; /* the other targets: the number compared */
    /* When end != NULL the compare holds iff it holds for every key of
     * [key, end) (etcd 3.3+); an empty range compares as one missing key,
     * so VERSION EQ 0 over a range means "no key in it". */
    const void *end;
    size_t elen;
};

enum etc_opkind { ETC_PUT, ETC_DEL, ETC_RANGE };

/* One operation of a txn branch. PUT: key <- value, attached to the etcd
 * lease `lease` (0: none). DEL and RANGE: the key, or [key, end) when end. */
struct etc_op {
    enum etc_opkind kind;
    const void *key;
    size_t klen;
    const void *end;
    size_t elen;
    const void *value;
    size_t vlen;
    int64_t lease;
};

struct etc_txn_result {
    int succeeded;            /* 1: the compares held, `then` was done; 0: `els` */
    int64_t revision;         /* the store's revision after the txn */
    struct etc_range *ranges; /* one per ETC_RANGE op of the branch taken, in order */
    size_t nranges;
    int64_t *deleted; /* one per ETC_DEL op of the branch taken: keys deleted */
    size_t ndeleted;
};

/*
 * One atomic transaction: if every compare holds, the `then` ops, else the
 * `els` ops. A txn whose ops are all ETC_RANGE is a read (retried like
 * etc_get); any other may end in ETC_EUNKNOWN. *out must be freed with
 * etc_txn_free, also on error.
 * Returns ETC_EUNAVAIL, ETC_EUNKNOWN, ETC_ENOTFOUND (a put to a lease that
 * does not exist: nothing was done), ETC_EPERM, ETC_ECORRUPT, ETC_EREFUSED
 * (e.g. the same key put twice), ETC_ENOMEM, ETC_EINVAL.
 */
int etc_txn(etc_client *c, const struct etc_cmp *cmp, size_t ncmp, const struct etc_op *then,
            size_t nthen, const struct etc_op *els, size_t nels,
            struct etc_txn_result *out) ETC_HIDDEN;
/* Frees what a txn result holds and empties it. NULL is fine. */
void etc_txn_free(struct etc_txn_result *r) ETC_HIDDEN;

/* Deletes the key (end NULL) or [key, end); *deleted (may be NULL) gets the
 * number of keys deleted. Returns the codes of etc_txn. */
int etc_delete(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
               int64_t *deleted) ETC_HIDDEN;

/* Puts key <- value (lease 0: none); *revision (may be NULL) gets the
 * store's revision after it. Returns the codes of etc_txn. */
int etc_put(etc_client *c, const void *key, size_t klen, const void *value, size_t vlen,
            int64_t lease, int64_t *revision) ETC_HIDDEN;

/* ---------------------------------------------------------------- leases */

/*
 * Grants an etcd lease of ttl_s seconds (etcd raises it to its minimum,
 * and counts from when the leader applies it). *id gets its id,
 * *granted_ttl_s (may be NULL) the ttl etcd gave.
 * Returns ETC_EUNAVAIL, ETC_EUNKNOWN (a lease may have been granted; it
 * expires by itself), ETC_EPERM, ETC_ECORRUPT, ETC_EINVAL (ttl_s <= 0).
 */
int etc_lease_grant(etc_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s) ETC_HIDDEN;
/* Refreshes lease id to its granted ttl; *ttl_s (may be NULL) gets it.
 * Returns ETC_ENOTFOUND (expired or revoked), ETC_EUNKNOWN, ETC_EUNAVAIL,
 * ETC_EPERM, ETC_ECORRUPT. */
int etc_lease_keepalive(etc_client *c, int64_t id, int64_t *ttl_s) ETC_HIDDEN;
/* Revokes lease id: its keys are deleted with it, atomically.
 * Returns ETC_ENOTFOUND (gone already), ETC_EUNKNOWN, ETC_EUNAVAIL,
 * ETC_EPERM, ETC_ECORRUPT. */
int etc_lease_revoke(etc_client *c, int64_t id) ETC_HIDDEN;
/* Reads lease id: *remaining_s (seconds left, rounded) and *granted_s
 * (either may be NULL). A read: retried on another endpoint.
 * Returns ETC_ENOTFOUND, ETC_EUNAVAIL, ETC_EPERM, ETC_ECORRUPT. */
int etc_lease_ttl(etc_client *c, int64_t id, int64_t *remaining_s, int64_t *granted_s) ETC_HIDDEN;

/* ---------------------------------------------------------------- status */

struct etc_status {
    uint64_t member_id; /* the member that answered */
    uint64_t leader;    /* the member id it believes leads (0: none) */
    int64_t raft_term;
    int64_t revision;
    char version[32]; /* etcd's version, e.g. "3.4.23" */
};

/* Asks one member, `endpoint` ("host:port", NULL: the client's current
 * one), for its status; no failover. A read.
 * Returns ETC_EUNAVAIL, ETC_EPERM, ETC_ECORRUPT, ETC_EINVAL. */
int etc_status(etc_client *c, const char *endpoint, struct etc_status *out) ETC_HIDDEN;

/* ---------------------------------------------------------------- watch */

#define ETC_EV_PUT    0
#define ETC_EV_DELETE 1

struct etc_event {
    int type;         /* ETC_EV_PUT or ETC_EV_DELETE */
    struct etc_kv kv; /* the key after the event (a delete: key and mod_rev only) */
};

typedef struct etc_watch etc_watch;

/*
 * Watches the key (end NULL) or [key, end), from revision start_rev (0: from
 * now on), on a connection of its own (a stream that stays open). Returns
 * once etcd confirmed the watch, so nothing after the call is missed.
 * The watch uses the client's endpoints, TLS and credentials; the client
 * stays usable beside it (and must outlive it).
 * A start_rev that is compacted is confirmed, then cancelled by etcd: the
 * first etc_watch_next says ETC_ECOMPACTED.
 * Returns ETC_EUNAVAIL, ETC_EPERM, ETC_ECORRUPT, ETC_ENOMEM, ETC_EINVAL.
 */
int etc_watch_open(etc_client *c, const void *key, size_t klen, const void *end, size_t elen,
                   int64_t start_rev, etc_watch **out) ETC_HIDDEN;
/*
 * The next event, waiting at most timeout_ms for it. Events of a revision
 * come in the order etcd sent them. *ev must be freed with etc_event_free
 * after ETC_OK.
 * Returns ETC_ETIMEDOUT (nothing came; the watch is still good),
 * ETC_EUNAVAIL (the stream ended or broke: close the watch and open another
 * from the last revision seen + 1), ETC_ECOMPACTED (the revisions asked for
 * are gone: read the current state, watch from there), ETC_ECORRUPT,
 * ETC_ENOMEM. After any code but ETC_ETIMEDOUT the watch only returns that
 * code again.
 */
int etc_watch_next(etc_watch *w, uint32_t timeout_ms, struct etc_event *ev) ETC_HIDDEN;
/* Frees what an event holds. NULL is fine. */
void etc_event_free(struct etc_event *ev) ETC_HIDDEN;
/* Makes the client's next call start on another endpoint than the one the
 * watch streams from (when there is another): so that a caller checking
 * what it watches by reading asks another member, and a member that goes
 * silent under the watch does not also hold up those reads. */
void etc_watch_apart(etc_watch *w) ETC_HIDDEN;

/* Closes the stream and frees the watch. NULL is fine. */
void etc_watch_close(etc_watch *w) ETC_HIDDEN;

/* ---------------------------------------------------------------- parsers */

/*
 * The response parsers, on their own so that they can be fuzzed (make fuzz)
 * and tested without a server: any bytes give ETC_OK or a code (never a
 * crash, never a leak); what they fill must be freed as after the call
 * (etc_range_free, etc_txn_free, etc_event_free) on every return.
 * A body that carries etcd's error object ({"error":..., "code":N}) gives
 * the code that error maps to.
 */
int etc_parse_range(const char *body, size_t len, struct etc_range *out) ETC_HIDDEN;
int etc_parse_txn(const char *body, size_t len, struct etc_txn_result *out) ETC_HIDDEN;
/* lease/grant, lease/keepalive, lease/timetolive: id, ttl, granted ttl
 * (absent fields give 0). */
int etc_parse_lease(const char *body, size_t len, int64_t *id, int64_t *ttl,
                    int64_t *granted) ETC_HIDDEN;
int etc_parse_status(const char *body, size_t len, struct etc_status *out) ETC_HIDDEN;
/* One message of a watch stream: *created 1 for the creation notice; *nev
 * events in *evs (on every return the caller frees each with
 * etc_event_free, then *evs with free()). A watch etcd cancelled:
 * ETC_ECOMPACTED, ETC_EPERM (token or permission) or ETC_EUNAVAIL. */
int etc_parse_watch(const char *body, size_t len, int *created, struct etc_event **evs,
                    size_t *nev) ETC_HIDDEN;

#endif
