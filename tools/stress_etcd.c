/*
 * tools/stress_etcd.c - the evidence of `shmlease stress` on an etcd table:
 * etcd's own history of the leases' value records.
 *
 * Every write the library accepts on an etcd table is one transaction that
 * puts TABLE/v/<lease> ("<token>\n" and the bytes, lib/kind_etcd/etcd_kind.h) only
 * while the holder record is the writer's exact (owner, token). So the
 * value records' revisions are the accepted writes in commit order: this
 * file watches TABLE/v/ from the campaign's first revision, with the etcd
 * client (etcd/), not through the library under test, and hands each value,
 * parsed, to the checker as a log record. A stale write that landed shows as
 * an older token after a newer one, two holders as one token written by two
 * workers, a lost write as an acknowledgement without its revision.
 *
 * A value record deleted is a violation, unless --admin-chaos deleted the
 * table's whole prefix at that revision (stress_admin_etcd.c): the values
 * written after its restore go on with higher tokens.
 *
 * To know that it has seen every write acknowledged so far, a step reads
 * the value records (their newest mod revision) after the checker read the
 * acknowledgements, and drains the watch up to that revision.
 */
#include "stress_etcd.h"

#if SHL_HAVE_ETCD
#include <stdio.h>
#include <stdlib.h>

#include "../etcd/etcd.h"

#define SYNC_EVERY_NS UINT64_C(200000000) /* a step looks at most this often */
#define SYNC_MS       3000u               /* a step's bound; the last one gets more */
#define FINAL_MS      30000u

struct st_etcd_feed {
    etc_client *c;
    etc_watch *w;
    char key[SHL_TABLE_NAME_MAX + 8], end[SHL_TABLE_NAME_MAX + 8]; /* [TABLE/v/, TABLE/v0) */
    size_t kl;
    int64_t next_rev; /* the watch has delivered every revision below this */
    uint64_t pos;     /* records handed over */
    uint64_t last_ns;
    unsigned words;
    struct st_shared *sh;
    uint64_t wiped; /* value records deleted with the table's prefix */
    int dead;       /* the history is gone (compacted): nothing more can be checked */
};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* "etcd[s]://EPS/TABLE": the endpoints into eps, the table into table. */
static int split(const char *name, int *tls, char *eps, size_t ecap, char *table, size_t tcap)
{
    *tls = strncmp(name, "etcds://", 8) == 0;
    const char *p = name + (*tls ? 8 : 7);
    const char *slash = strchr(p, '/');
    if (!slash || (size_t)(slash - p) >= ecap || strlen(slash + 1) >= tcap)
        return -1;
    memcpy(eps, p, (size_t)(slash - p));
    eps[slash - p] = 0;
    strcpy(table, slash + 1);
    return 0;
}

static int watch_from(struct st_etcd_feed *f)
{
    etc_watch_close(f->w);
    f->w = NULL;
    return etc_watch_open(f->c, f->key, f->kl, f->end, f->kl, f->next_rev, &f->w);
}

etc_client *st_etcd_client(const char *name, char *table, size_t tcap, unsigned ms,
                           const char **why)
{
    char eps[1024];
    int tls;
    etc_client *c = NULL;
    if (split(name, &tls, eps, sizeof eps, table, tcap) != 0) {
        *why = "not an etcd table name";
        return NULL;
    }
    struct etc_config cfg = {.endpoints = eps,
                             .tls = tls,
                             .cacert = env("SHMLEASE_ETCD_CACERT"),
                             .cert = env("SHMLEASE_ETCD_CERT"),
                             .key = env("SHMLEASE_ETCD_KEY"),
                             .user = env("SHMLEASE_ETCD_USER"),
                             .password = env("SHMLEASE_ETCD_PASSWORD"),
                             .proxy = env("SHMLEASE_ETCD_PROXY"),
                             .timeout_ms = ms};
    int rc = etc_open(&cfg, &c);
    if (rc != ETC_OK) {
        *why = etc_strerror(rc);
        return NULL;
    }
    return c;
}

struct st_etcd_feed *st_etcd_feed_new(const char *name, unsigned words, struct st_shared *sh,
                                      const char **why)
{
    struct st_etcd_feed *f = calloc(1, sizeof *f);
    char table[SHL_TABLE_NAME_MAX + 1];
    *why = "out of memory";
    if (!f)
        return NULL;
    f->words = words;
    f->sh = sh;
    f->c = st_etcd_client(name, table, sizeof table, SYNC_MS, why);
    if (!f->c) {
        free(f);
        return NULL;
    }
    f->kl = (size_t)snprintf(f->key, sizeof f->key, "%s/v/", table);
    memcpy(f->end, f->key, f->kl);
    f->end[f->kl - 1] = '/' + 1;
    struct etc_range r = {0};
    int rc = etc_get(f->c, f->key, f->kl, f->end, f->kl, 1, 0, &r);
    /* The campaign's writes all come after this revision. */
    f->next_rev = r.revision + 1;
    etc_range_free(&r);
    if (rc == ETC_OK)
        rc = watch_from(f);
    if (rc != ETC_OK) {
        *why = etc_strerror(rc);
        st_etcd_feed_free(f);
        return NULL;
    }
    return f;
}

void st_etcd_feed_free(struct st_etcd_feed *f)
{
    if (!f)
        return;
    etc_watch_close(f->w);
    etc_close(f->c);
    free(f);
}

/* "stress-<i>" at the end of a value record's key: i, or -1. */
static long lease_of(const struct st_etcd_feed *f, const struct etc_kv *kv)
{
    static const char pre[] = "stress-";
    if (kv->key_len <= f->kl + sizeof pre - 1 || memcmp(kv->key, f->key, f->kl) != 0 ||
        memcmp(kv->key + f->kl, pre, sizeof pre - 1) != 0)
        return -1;
    char *end;
    const char *d = kv->key + f->kl + sizeof pre - 1;
    long i = strtol(d, &end, 10);
    return end == kv->key + kv->key_len && i >= 0 && i < ST_LEASES_MAX ? i : -1;
}

/* One value record put at one revision: a log record for the checker. A
 * value that is not one whole write of the campaign's (its seal, its
 * lease, the token in its header) is handed over unsealed: a violation. */
static void hand_over(struct st_etcd_feed *f, struct st_checker *ck, const struct etc_kv *kv)
{
    struct st_rec r = {0};
    long lease = lease_of(f, kv);
    size_t used = 0;
    uint64_t tok = 0;
    while (used < kv->value_len && kv->value[used] >= '0' && kv->value[used] <= '9' && used < 20)
        tok = tok * 10 + (uint64_t)(kv->value[used++] - '0');
    size_t at = used + 1;
    uint64_t v[ST_VALUE_WORDS];
    int whole = lease >= 0 && used > 0 && used < kv->value_len && kv->value[used] == '\n' &&
                kv->value_len - at == (size_t)f->words * 8;
    if (whole) {
        memcpy(v, kv->value + at, (size_t)f->words * 8);
        whole = st_value_parse(v, f->words, &r) == 0 && r.token == tok && r.lease == lease;
    }
    if (!whole)
        r.seal = 0; /* st_checker_record: half-written or foreign */
    st_checker_record(ck, lease < 0 ? ST_LEASES_MAX : (unsigned)lease, f->pos++, &r);
}

/* The newest mod revision among the value records, or -1. Values that a
 * prefix delete took (--admin-chaos) are not there to say it: their
 * delete's revision stands for them, and while one is under way the answer
 * waits. */
static int64_t newest(struct st_etcd_feed *f)
{
    struct etc_range r = {0};
    int rc = etc_get(f->c, f->key, f->kl, f->end, f->kl, 0, 0, &r);
    int64_t m = 0;
    for (size_t i = 0; rc == ETC_OK && i < r.n; i++)
        if (r.kvs[i].mod_rev > m)
            m = r.kvs[i].mod_rev;
    etc_range_free(&r);
    if (atomic_load(&f->sh->removing))
        return -1;
    int64_t w = atomic_load(&f->sh->wipe_vrev);
    return rc == ETC_OK ? (w > m ? w : m) : -1;
}

int st_etcd_feed(void *arg, struct st_checker *ck, int force)
{
    struct st_etcd_feed *f = arg;
    uint64_t now = st_now_ns();
    if (f->dead)
        return -1;
    if (!force && now - f->last_ns < SYNC_EVERY_NS)
        return 1;
    f->last_ns = now;
    uint64_t until = now + (uint64_t)(force ? FINAL_MS : SYNC_MS) * 1000000u;
    int64_t upto;
    while ((upto = newest(f)) < 0) {
        if (st_now_ns() >= until)
            goto fail;
        st_sleep_ns(50000000);
    }
    while (f->next_rev <= upto) {
        if (st_now_ns() >= until)
            goto fail;
        struct etc_event ev;
        int rc = f->w ? etc_watch_next(f->w, 100, &ev) : ETC_EUNAVAIL;
        if (rc == ETC_OK) {
            if (ev.kv.mod_rev >= f->next_rev) {
                if (ev.type == ETC_EV_PUT)
                    hand_over(f, ck, &ev.kv);
                else if (atomic_load(&f->sh->removing) || st_wiped_at(f->sh, ev.kv.mod_rev))
                    f->wiped++; /* with the whole prefix (--admin-chaos) */
                else            /* nothing else in a campaign deletes a value record */
                    st_checker_record(ck, ST_LEASES_MAX, f->pos++, &(struct st_rec){0});
                f->next_rev = ev.kv.mod_rev + 1;
            }
            etc_event_free(&ev);
        } else if (rc == ETC_ECOMPACTED) {
            f->dead = 1;
            st_checker_incomplete(ck, "etcd compacted the value records' history");
            return -1;
        } else if (rc != ETC_ETIMEDOUT) {
            /* The stream broke (a member went away): on from the next revision. */
            if (watch_from(f) != ETC_OK)
                st_sleep_ns(50000000);
        }
    }
    return 0;
fail:
    if (force)
        st_checker_incomplete(ck, "etcd's history could not be read to the end");
    return -1;
}
#endif
