/*
 * tests/etcd_fuzz.c - one fuzz input for the etcd client's response parsers:
 * the bytes as the answer of every kind (range, txn, lease, status), and
 * line by line as a watch stream. Shared by the libFuzzer target
 * (tests/fuzz/fuzz_etcd.c, `make fuzz`) and the corpus replay
 * (tests/test_etcd_corpus.c, `make test`).
 */
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "fuzz.h"

/* A code the parsers may give. */
#define FZ_CODE(rc) ((rc) <= 0 && (rc) >= ETC_EREFUSED)

static int kv_ok(const struct etc_kv *kv)
{
    /* Every kv handed out has a key, NUL-terminated buffers, and sane
     * numbers. */
    return kv->key && kv->key_len > 0 && kv->key[kv->key_len] == '\0' && kv->value &&
           kv->value[kv->value_len] == '\0' && kv->create_rev >= 0 && kv->mod_rev >= 0 &&
           kv->version >= 0 && kv->lease >= 0;
}

static int range_ok(const struct etc_range *r)
{
    if (r->n && !r->kvs)
        return 0;
    for (size_t i = 0; i < r->n; i++)
        if (!kv_ok(&r->kvs[i]))
            return 0;
    return r->count >= (int64_t)r->n && r->revision >= 0;
}

int fz_etcd_parse(int kind, const char *p, size_t n, int *code)
{
    int rc, bad = 0;
    switch (kind) {
    case FZ_ETCD_RANGE: {
        struct etc_range r;
        rc = etc_parse_range(p, n, &r);
        bad = rc == ETC_OK && !range_ok(&r);
        etc_range_free(&r);
        break;
    }
    case FZ_ETCD_TXN: {
        struct etc_txn_result t;
        rc = etc_parse_txn(p, n, &t);
        for (size_t i = 0; rc == ETC_OK && i < t.nranges; i++)
            bad |= !range_ok(&t.ranges[i]);
        for (size_t i = 0; rc == ETC_OK && i < t.ndeleted; i++)
            bad |= t.deleted[i] < 0;
        etc_txn_free(&t);
        break;
    }
    case FZ_ETCD_LEASE: {
        int64_t id, ttl, g;
        rc = etc_parse_lease(p, n, &id, &ttl, &g);
        bad = rc != ETC_OK && (id || ttl || g);
        break;
    }
    case FZ_ETCD_STATUS: {
        struct etc_status st;
        rc = etc_parse_status(p, n, &st);
        bad = rc == ETC_OK && (st.member_id == 0 || !memchr(st.version, '\0', sizeof st.version));
        break;
    }
    default: {
        struct etc_event *evs;
        size_t nev;
        int created;
        rc = etc_parse_watch(p, n, &created, &evs, &nev);
        bad = (nev && !evs) || (rc == ETC_OK && created != 0 && created != 1);
        for (size_t i = 0; i < nev; i++) {
            if (rc == ETC_OK)
                bad |= !kv_ok(&evs[i].kv) ||
                       (evs[i].type != ETC_EV_PUT && evs[i].type != ETC_EV_DELETE);
            etc_event_free(&evs[i]);
        }
        free(evs);
        break;
    }
    }
    *code = rc;
    return bad || !FZ_CODE(rc) ? -1 : 0;
}

int fz_etcd_one(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    int rc;
    for (int kind = FZ_ETCD_RANGE; kind < FZ_ETCD_WATCH; kind++)
        if (fz_etcd_parse(kind, p, size, &rc))
            return -1;
    /* As a watch stream: one message a line. */
    for (size_t at = 0; at <= size;) {
        const char *nl = memchr(p + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (p + at)) : size - at;
        if (fz_etcd_parse(FZ_ETCD_WATCH, p + at, len, &rc))
            return -1;
        at += len + 1;
    }
    return 0;
}
