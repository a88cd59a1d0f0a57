/*
 * lib/kind_etcd/etcd_kind.h - what the etcd kind's files share (lib/etcd_*.c).
 *
 * Layout of a table TABLE in the cluster (every key under "TABLE/", where
 * each '/' of the table's name is written SHL__ETCD_TABLE_SEP, a byte no
 * table name holds: table "a/b" lives under "a:b/". So a key's first '/'
 * ends its table's part, and no (table, lease) pair spells another table's
 * keys; see set_prefix() in etcd_table.c):
 *
 *   TABLE/meta               "shmlease-etcd 1 <value_size>": made by the
 *                            creating shl_open(); a prefix without it is no
 *                            table (SHL_ENOENT, or SHL_ECORRUPT when it holds
 *                            other keys). Its create revision is the table's
 *                            incarnation: every txn that puts a key compares
 *                            it with the one seen at open (SHL_EREMOVED)
 *   TABLE/h/<lease>          the holder: "<token> <owner>", attached to an
 *                            etcd lease of the ttl granted for this
 *                            acquisition alone, so it disappears at expiry;
 *                            release deletes it in a txn comparing its value
 *                            and etcd lease. An admin may delete it too: a
 *                            renew proves it is still there (etcd_lease.c)
 *   TABLE/t/<lease>          the token: "<n>", the last token issued; only
 *                            ever grows, never deleted (shl_unlink excepted);
 *                            a first one is put only where no v/, g/ or s/
 *                            record carries a token (else SHL_ECORRUPT: one
 *                            deleted by hand must not start tokens over)
 *   TABLE/v/<lease>          the value: "<token>\n" and the bytes, written by
 *                            the holder of that token
 *   TABLE/s/<lease> <token>  a shared holder: "<token> <owner>", attached to
 *                            an etcd lease of its own, like the holder record
 *                            (put by its acquisition, removed with that etcd
 *                            lease or by its release's txn)
 *   TABLE/g/<lease>          "<token>": the token of the last exclusive
 *                            acquisition (a shared holder's gen); put by each
 *                            exclusive acquire, in its txn
 *   TABLE/w/<lease> <id>     a writer waiting in shl_acquire_wait(),
 *                            attached to the waiter's own etcd lease <id>
 *                            (16 hex digits)
 *   TABLE/r/<lease> <id>     a reader waiting in shl_acquire_shared_wait(),
 *                            the same way; waiters of both kinds form one
 *                            queue, in the order of their keys' create
 *                            revisions
 *
 * valid(owner, token) <=> TABLE/h/<lease> exists with the value
 * "<token> <owner>": every guarded change is one txn comparing that value.
 * A lease name never holds a space, so "w/<lease> " is the exact prefix of
 * one lease's queued writers, "r/<lease> " of its queued readers and
 * "s/<lease> " of its shared holders.
 *
 * Shared leases. Every acquisition of either kind puts TABLE/t/<lease> =
 * n + 1 in a txn that compares it equal to n. A shared acquire reads the
 * holder, token, gen, shared and waiter records at one revision, decides
 * (owner not among the shared holders, fewer than SHL_SHARED_MAX of them),
 * then puts its key in a txn comparing: holder absent, token = n (so no
 * acquisition of either kind, hence no shared key and no gen change,
 * happened since that read; keys only leave since, by expiry, release or
 * revoke, which can only make the decision more true) and no key in the
 * lease's writer range w/ (a writer is queued: writers are not starved).
 * An exclusive acquire compares "no key in s/<lease> " over the range
 * (etcd 3.3+ compares over [key, range_end)), so a shared holder's key,
 * alive exactly while its etcd lease is, blocks it; an expired one does
 * not, as etcd removed it with its lease.
 *
 * Queued readers (etcd_wait.c). Writers and readers queue under separate
 * prefixes so that a reader's acquire can compare over the writers alone:
 * a reader whose key was created at revision R may go in when no writer
 * key is older than R. etcd compares a range key by key, and an empty
 * range as one key of create revision 0, so no single compare says "none,
 * or all created after R": the reader reads the writer range with the
 * other records and decides on it, and its txn restates what it saw, "no
 * key in w/<lease> " when it was empty, else "every key in it created
 * after R". A writer key older than R cannot appear after that read (keys
 * only come with newer revisions), so the read decides right; the compare
 * has etcd check the rule itself, and fails only when a writer key went
 * meanwhile (the reader reads again). Its txn also compares its own waiter
 * key's create revision: a reader that lost its place (its etcd lease ran
 * out) does not go in on it.
 * A writer's place is behind every waiter key of either kind created
 * before its own.
 */
#ifndef SHL_LIB_ETCD_KIND_H
#define SHL_LIB_ETCD_KIND_H

#include <pthread.h>

#include "../../etcd/etcd.h"
#include "../../shm/clock.h"
#include "internal.h"

#define SHL__ETCD_FORMAT       "shmlease-etcd 1"
#define SHL__ETCD_KEY_MAX      (SHL_TABLE_NAME_MAX + 1 + 2 + SHL_NAME_MAX + 1 + 20 + 1) /* + NUL */
#define SHL__ETCD_TABLE_SEP    ':' /* a table name's '/' in its key prefix */
#define SHL__ETCD_HOLDER_MAX   (20 + 1 + SHL_OWNER_MAX + 1)
#define SHL__ETCD_CACHE        32 /* acquisitions remembered per handle */
#define SHL__ETCD_WAITER_TTL_S 3  /* a dead waiter's place lasts at most this */
/*
 * Timing budget: any one member of three may stall (SIGSTOP, a hung disk)
 * at any moment and for any time without a holder or a waiter losing
 * anything. A stall costs a handle one attempt: a request sent to the
 * silent member is given up after the client's cap (etc_silent_cap) and
 * the handle then stays on a member that answers. What lives on an etcd
 * lease of ttl T is refreshed in time when
 *     refresh interval + cap + a round trip elsewhere < T,
 * and one more given-up attempt should fit besides (an election: the
 * other members answer "no leader" and a round comes back to the silent
 * one). Hence one rule, cap and keep-alive interval at most T/4:
 *   waiter keys  T = SHL__ETCD_WAITER_TTL_S, kept alive every T/4, every
 *                call of a handle capped at T/4 (SHL__ETCD_SILENT_NS):
 *                T/4 + 2 T/4 + rtt < T;
 *   holders      T = the lease's ttl; a renew is capped at the smaller of
 *                T/4 and SHL__ETCD_SILENT_NS; shl_renewer renews every
 *                T/3 by default (on both kinds of table) and gives up at
 *                T - T/10: T/3 + T/4 + rtt, and T/3 + 2 T/4 + rtt, stay
 *                under 0.9 T.
 * The per-call deadline (shl_options.timeout_ms) still bounds the whole
 * call; the cap only stops one silent member from eating it. With one
 * endpoint there is nowhere to go and no cap.
 */
#define SHL__ETCD_BUDGET_DIV  4 /* cap and keep-alive interval: ttl / this */
#define SHL__ETCD_SILENT_NS   (SHL__ETCD_WAITER_TTL_S * UINT64_C(1000000000) / SHL__ETCD_BUDGET_DIV)
#define SHL__ETCD_WAITER_BEAT SHL__ETCD_SILENT_NS /* a waiter's keep-alive interval */
/* A waiter reads what it watches through another member this often: a
 * stalled watch member costs at most this (and a read) of a release. */
#define SHL__ETCD_RECHECK_NS UINT64_C(1000000000)
#define SHL__ETCD_TTL_MAX_S  INT64_C(9000000000) /* etcd's largest lease ttl */

/* An acquisition made (or renewed) through this handle: its etcd lease, so
 * that renew with the same ttl is one keep-alive and release one revoke. */
struct shl__etcd_held {
    char lease[SHL_NAME_MAX + 1];  /* "" : unused entry */
    uint64_t token;                /* the last token seen for the lease */
    char owner[SHL_OWNER_MAX + 1]; /* its holder (with id != 0) */
    int64_t id;                    /* the holder's etcd lease; 0: not held */
    int64_t ttl_s;                 /* the ttl asked for (seconds, rounded up) */
};

struct shl__etcd {
    pthread_mutex_t mu; /* one thread at a time on the client and the cache */
    etc_client *c;
    uint32_t timeout_ms;
    int64_t min_ttl_s; /* the cluster's minimum lease ttl, once seen (else 0) */
    size_t plen;
    char prefix[SHL_TABLE_NAME_MAX + 2]; /* "TABLE/" */
    size_t mlen;
    char meta[SHL_TABLE_NAME_MAX + 6]; /* "TABLE/meta" */
    int64_t incarnation;               /* its create revision, seen at open */
    unsigned cache_next;
    struct shl__etcd_held cache[SHL__ETCD_CACHE];
};

/* Record kinds: the letter after the prefix. */
#define SHL__ETCD_HOLDER 'h'
#define SHL__ETCD_TOKEN  't'
#define SHL__ETCD_VALUE  'v'
#define SHL__ETCD_WAITER 'w'
#define SHL__ETCD_SHARED 's'
#define SHL__ETCD_GEN    'g'
#define SHL__ETCD_READER 'r' /* a queued reader's waiter key */

/* A queued reader's place in shl_acquire_shared_wait(), and when its
 * shared acquire is refused, what stands in its way. */
struct shl__etcd_turn {
    const char *key; /* in: its waiter key, */
    size_t kl;
    int64_t rev; /* and that key's create revision */
    int lost;    /* out: the waiter key is gone (place lost: queue again) */
    int64_t at;  /* out: the revision the refusal was read at */
    size_t wkl;  /* out: a key whose deletion after `at` is worth a look: */
    size_t wel;  /* the holder, the writer just ahead, or (wel > 0) the */
    char wkey[SHL__ETCD_KEY_MAX], wend[SHL__ETCD_KEY_MAX]; /* shared range */
};

/* "TABLE/<kind>/<lease>" into buf (SHL__ETCD_KEY_MAX); its length. */
size_t shl__etcd_key(const struct shl__etcd *e, char kind, const char *lease,
                     char *buf) SHL__HIDDEN;
/* "TABLE/<kind>/" into key and the end of the range of every key that
 * starts with it into end (both SHL__ETCD_KEY_MAX); their length. */
size_t shl__etcd_kind_range(const struct shl__etcd *e, char kind, char *key, char *end) SHL__HIDDEN;
/* "TABLE/<kind>/<lease> " into key and the end of the range of every key
 * that starts with it into end (both SHL__ETCD_KEY_MAX): one lease's
 * waiters or shared holders. Their length. */
size_t shl__etcd_sub_range(const struct shl__etcd *e, char kind, const char *lease, char *key,
                           char *end) SHL__HIDDEN;
/* The compare "the table this handle opened is still there": its meta
 * record's create revision is the one seen at open. Every txn that puts a
 * key of the table carries it, so a handle of a table removed (or removed
 * and made anew) meanwhile never re-creates keys under its name. */
struct etc_cmp shl__etcd_same_table(const struct shl__etcd *e) SHL__HIDDEN;
/* The read of the meta record, for such a txn's failure branch. */
struct etc_op shl__etcd_meta_read(const struct shl__etcd *e) SHL__HIDDEN;
/* SHL_EREMOVED when r, the answer to shl__etcd_meta_read(), shows the
 * table removed or made anew since the handle was opened; else SHL_OK. */
int shl__etcd_removed(const struct shl__etcd *e, const struct etc_range *r) SHL__HIDDEN;
/* The SHL_ code of a client code that is not ETC_OK (ETC_EUNKNOWN: the
 * caller has not resolved it: SHL_EUNAVAIL). */
int shl__etcd_code(int etc_rc) SHL__HIDDEN;
/* shl__etcd_code(etc_rc) of a call on c, with what the client said of a
 * failure (etc_errmsg()) as shl_last_error()'s detail. */
int shl__etcd_said(const etc_client *c, int etc_rc) SHL__HIDDEN;
/* A decimal token without sign or leading zeros, at most 20 digits, ending
 * at `end` (or at a '\n' or ' ' when `stop`); 0 when malformed. *used gets
 * the digits' count. */
uint64_t shl__etcd_num(const char *s, size_t len, size_t *used) SHL__HIDDEN;
/* Parses a holder record: token and owner (NUL-terminated, bounded). 0 or -1. */
int shl__etcd_parse_holder(const char *v, size_t len, uint64_t *token,
                           char owner[SHL_OWNER_MAX + 1]) SHL__HIDDEN;
/* Parses a value record: token, and where its bytes start. 0 or -1. */
int shl__etcd_parse_value(const char *v, size_t len, uint64_t *token, size_t *at) SHL__HIDDEN;
/* Parses a token record. 0 or -1. */
int shl__etcd_parse_token(const char *v, size_t len, uint64_t *token) SHL__HIDDEN;
/* The ttl in whole seconds that ttl_ns asks for: rounded up, at least the
 * cluster's minimum once known. 0 when over etcd's largest. */
int64_t shl__etcd_ttl_s(const struct shl__etcd *e, uint64_t ttl_ns) SHL__HIDDEN;
/* Fills `in` from a holder record, its etcd lease's remaining seconds
 * (-1: unknown/gone), the token and value records (any may be NULL). */
void shl__etcd_fill(const struct etc_kv *holder, int64_t remaining_s, const struct etc_kv *tok,
                    const struct etc_kv *val, shl_lease_info *in) SHL__HIDDEN;
/* A shared acquire for the queued reader at `q` (its waiter key): as
 * shl__etcd_acquire_shared(), except that only writers queued before it
 * keep it out. On SHL_EBUSY, q's out fields say why. Called with e->mu. */
int shl__etcd_acquire_turn(struct shl__etcd *e, const char *lease, const char *owner,
                           uint64_t ttl_ns, uint64_t *token, uint64_t *gen,
                           struct shl__etcd_turn *q) SHL__HIDDEN;
/* The remaining seconds of etcd lease id: >= 0, or -1 when it is gone;
 * a negative SHL_ code on failure (written to *rc). Called with e->mu. */
int64_t shl__etcd_remaining(struct shl__etcd *e, int64_t id, int *rc) SHL__HIDDEN;

/* etcd_records.c: what the lease operations (etcd_acquire.c, etcd_lease.c)
 * share. Whether `lease` is a well-formed lease name. */
int shl__etcd_lease_name_ok(const char *lease) SHL__HIDDEN;
/* A holder record's value, "<token> <owner>", into buf
 * (SHL__ETCD_HOLDER_MAX); its length. */
size_t shl__etcd_holder_value(uint64_t token, const char *owner, char *buf) SHL__HIDDEN;
/* The handle's record of an acquisition of `lease` (creating an entry when
 * `add`), or NULL. With e->mu. */
struct shl__etcd_held *shl__etcd_held_of(struct shl__etcd *e, const char *lease,
                                         int add) SHL__HIDDEN;
/* Whether the deadline of a call that started at `start` has passed. */
int shl__etcd_late(const struct shl__etcd *e, uint64_t start) SHL__HIDDEN;
/* Reads one key into *r: a read, retried by the client. */
int shl__etcd_get_one(struct shl__etcd *e, const char *key, size_t kl,
                      struct etc_range *r) SHL__HIDDEN;
/* Grants an etcd lease of ttl_s; *got (may be NULL) the ttl etcd gave.
 * Learns the cluster's minimum. */
int shl__etcd_grant(struct shl__etcd *e, int64_t ttl_s, int64_t *id, int64_t *got) SHL__HIDDEN;
/* Revokes an etcd lease no longer needed; its end by expiry is as good. */
void shl__etcd_drop(struct shl__etcd *e, int64_t id) SHL__HIDDEN;
/* The keys an acquisition of one lease reads and writes. */
struct shl__etcd_acq {
    char hkey[SHL__ETCD_KEY_MAX], tkey[SHL__ETCD_KEY_MAX], vkey[SHL__ETCD_KEY_MAX];
    char gkey[SHL__ETCD_KEY_MAX], skey[SHL__ETCD_KEY_MAX], send[SHL__ETCD_KEY_MAX];
    char wkey[SHL__ETCD_KEY_MAX], wend[SHL__ETCD_KEY_MAX];
    char rkey[SHL__ETCD_KEY_MAX], rend[SHL__ETCD_KEY_MAX];
    size_t hl, tl, vl, gl, sl, wl, rl;
};
void shl__etcd_acq_keys(struct shl__etcd *e, const char *lease,
                        struct shl__etcd_acq *a) SHL__HIDDEN;

#endif
