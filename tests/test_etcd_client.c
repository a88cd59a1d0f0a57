/*
 * tests/test_etcd_client.c - the etcd client (etcd/) against a real
 * throwaway member: range, txn compares, put/delete, leases, watch.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster cl;
static etc_client *c;

static void up(void)
{
    t_guard(60);
    cr_assert_eq(etcd_cluster_start(&cl, 1, 0), 0, "%s", cl.err);
    struct etc_config cfg = {.endpoints = cl.endpoints, .timeout_ms = 5000};
    cr_assert_eq(etc_open(&cfg, &c), ETC_OK);
}

static void down(void)
{
    etc_close(c);
    c = NULL;
    etcd_cluster_stop(&cl);
}

TestSuite(etcd_client, .init = up, .fini = down);

#define S(s) (s), strlen(s)

static void put(const char *k, const char *v)
{
    int rc = etc_put(c, S(k), S(v), 0, NULL);
    cr_assert_eq(rc, ETC_OK, "put %s: %s (%s)", k, etc_strerror(rc), etc_errmsg(c));
}

Test(etcd_client, put_get_delete_and_ranges)
{
    int64_t rev1, rev2, n;
    struct etc_range r;
    cr_assert_eq(etc_put(c, S("k/a"), S("one"), 0, &rev1), ETC_OK);
    cr_assert_eq(etc_put(c, S("k/b"), "t\0o", 3, 0, &rev2), ETC_OK);
    cr_assert_gt(rev2, rev1);
    put("k/c", "three");
    put("l", "outside");

    cr_assert_eq(etc_get(c, S("k/b"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.kvs[0].value_len, 3);
    cr_assert_eq(memcmp(r.kvs[0].value, "t\0o", 3), 0, "binary values survive base64");
    cr_assert_eq(r.kvs[0].mod_rev, rev2);
    cr_assert_eq(r.kvs[0].create_rev, rev2);
    cr_assert_eq(r.kvs[0].version, 1);
    cr_assert_geq(r.revision, rev2);
    etc_range_free(&r);

    /* [k/, k0): the prefix, in key order; a limit says there is more. */
    cr_assert_eq(etc_get(c, S("k/"), S("k0"), 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.count, 3);
    cr_assert_str_eq(r.kvs[0].key, "k/a");
    cr_assert_str_eq(r.kvs[2].key, "k/c");
    cr_assert_str_eq(r.kvs[2].value, "three");
    etc_range_free(&r);
    cr_assert_eq(etc_get(c, S("k/"), S("k0"), 2, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.count, 3);
    cr_assert(r.more);
    etc_range_free(&r);

    /* An old revision still has the old value. */
    put("k/a", "uno");
    cr_assert_eq(etc_get(c, S("k/a"), NULL, 0, 0, rev1, &r), ETC_OK);
    cr_assert_eq(r.n, 1);
    cr_assert_str_eq(r.kvs[0].value, "one");
    etc_range_free(&r);

    /* A missing key is an empty answer, not an error. */
    cr_assert_eq(etc_get(c, S("nope"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 0);
    etc_range_free(&r);

    cr_assert_eq(etc_delete(c, S("k/"), S("k0"), &n), ETC_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(etc_delete(c, S("k/a"), NULL, 0, &n), ETC_OK);
    cr_assert_eq(n, 0);
    cr_assert_eq(etc_get(c, S("l"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 1, "a range delete stays in its range");
    etc_range_free(&r);
}

Test(etcd_client, bad_arguments_send_nothing)
{
    struct etc_range r;
    int64_t id;
    cr_assert_eq(etc_get(c, "", 0, NULL, 0, 0, 0, &r), ETC_EINVAL);
    cr_assert_eq(etc_get(c, S("a"), NULL, 0, -1, 0, &r), ETC_EINVAL);
    cr_assert_eq(etc_put(c, "", 0, S("v"), 0, NULL), ETC_EINVAL);
    cr_assert_eq(etc_lease_grant(c, 0, &id, NULL), ETC_EINVAL);
    cr_assert_eq(etc_lease_revoke(c, 0), ETC_EINVAL);
    struct etc_cmp bad = {.key = "a", .klen = 1, .target = (enum etc_target)9};
    struct etc_txn_result t;
    cr_assert_eq(etc_txn(c, &bad, 1, NULL, 0, NULL, 0, &t), ETC_EINVAL);
    etc_client *x;
    struct etc_config cfg = {.endpoints = "127.0.0.1:99999"};
    cr_assert_eq(etc_open(&cfg, &x), ETC_EINVAL);
    cfg.endpoints = "127.0.0.1:2379/v3";
    cr_assert_eq(etc_open(&cfg, &x), ETC_EINVAL);
    cfg.endpoints = "127.0.0.1:2379,";
    cr_assert_eq(etc_open(&cfg, &x), ETC_EINVAL);
    cfg.endpoints = "[::1]:2379,localhost:1";
    cr_assert_eq(etc_open(&cfg, &x), ETC_OK);
    etc_close(x);
}

/* Each target and relation of a compare, both ways. */
Test(etcd_client, txn_compares)
{
    int64_t rev;
    cr_assert_eq(etc_put(c, S("x"), S("v1"), 0, &rev), ETC_OK);
    put("x", "v2"); /* version 2, created at rev, modified later */
    put("r/1", "a");
    put("r/2", "b");
    struct {
        struct etc_cmp cmp;
        int holds;
    } cases[] = {
        {{S("x"), ETC_VALUE, ETC_EQ, S("v2"), 0, NULL, 0}, 1},
        {{S("x"), ETC_VALUE, ETC_EQ, S("v1"), 0, NULL, 0}, 0},
        {{S("x"), ETC_VALUE, ETC_NE, S("v1"), 0, NULL, 0}, 1},
        {{S("x"), ETC_VALUE, ETC_LT, S("v3"), 0, NULL, 0}, 1},
        {{S("x"), ETC_VALUE, ETC_GT, S("v3"), 0, NULL, 0}, 0},
        {{S("x"), ETC_VERSION, ETC_EQ, NULL, 0, 2, NULL, 0}, 1},
        {{S("x"), ETC_VERSION, ETC_GT, NULL, 0, 2, NULL, 0}, 0},
        {{S("x"), ETC_CREATE, ETC_EQ, NULL, 0, rev, NULL, 0}, 1},
        {{S("x"), ETC_MOD, ETC_GT, NULL, 0, rev, NULL, 0}, 1},
        {{S("x"), ETC_MOD, ETC_LT, NULL, 0, rev, NULL, 0}, 0},
        {{S("x"), ETC_LEASE, ETC_EQ, NULL, 0, 0, NULL, 0}, 1},
        /* A key that does not exist has version 0 (the "create if
         * absent" compare). */
        {{S("absent"), ETC_VERSION, ETC_EQ, NULL, 0, 0, NULL, 0}, 1},
        {{S("absent"), ETC_CREATE, ETC_GT, NULL, 0, 0, NULL, 0}, 0},
        /* Over a range [key, end): every key in it; an empty range
         * compares as one missing key, so VERSION EQ 0 is "no key". */
        {{S("r/"), ETC_VERSION, ETC_EQ, NULL, 0, 0, S("r0")}, 0},
        {{S("r/"), ETC_VERSION, ETC_GT, NULL, 0, 0, S("r0")}, 1},
        {{S("r/3"), ETC_VERSION, ETC_EQ, NULL, 0, 0, S("r0")}, 1},
        {{S("q/"), ETC_VERSION, ETC_EQ, NULL, 0, 0, S("q0")}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct etc_txn_result t;
        int rc = etc_txn(c, &cases[i].cmp, 1, NULL, 0, NULL, 0, &t);
        cr_assert_eq(rc, ETC_OK, "case %zu: %s (%s)", i, etc_strerror(rc), etc_errmsg(c));
        cr_assert_eq(t.succeeded, cases[i].holds, "case %zu", i);
        etc_txn_free(&t);
    }
}

/* The branch taken does its ops atomically and reports its ranges and
 * deletes in order; the other branch does nothing. */
Test(etcd_client, txn_branches)
{
    put("a", "1");
    put("d", "gone soon");
    struct etc_cmp cmp = {S("a"), ETC_VALUE, ETC_EQ, S("1"), 0, NULL, 0};
    struct etc_op then[] = {
        {ETC_PUT, S("b"), NULL, 0, S("then"), 0},
        {ETC_RANGE, S("a"), NULL, 0, NULL, 0, 0},
        {ETC_DEL, S("d"), NULL, 0, NULL, 0, 0},
        {ETC_RANGE, S("b"), NULL, 0, NULL, 0, 0},
    };
    struct etc_op els[] = {{ETC_PUT, S("b"), NULL, 0, S("else"), 0}};
    struct etc_txn_result t;
    cr_assert_eq(etc_txn(c, &cmp, 1, then, 4, els, 1, &t), ETC_OK);
    cr_assert_eq(t.succeeded, 1);
    cr_assert_eq(t.nranges, 2);
    cr_assert_eq(t.ranges[0].n, 1);
    cr_assert_str_eq(t.ranges[0].kvs[0].value, "1");
    cr_assert_eq(t.ranges[1].n, 1);
    cr_assert_str_eq(t.ranges[1].kvs[0].value, "then", "a range sees the put before it");
    cr_assert_eq(t.ndeleted, 1);
    cr_assert_eq(t.deleted[0], 1);
    int64_t rev = t.revision;
    etc_txn_free(&t);

    cmp.value = "2";
    cr_assert_eq(etc_txn(c, &cmp, 1, then, 4, els, 1, &t), ETC_OK);
    cr_assert_eq(t.succeeded, 0);
    cr_assert_eq(t.nranges, 0);
    cr_assert_gt(t.revision, rev);
    etc_txn_free(&t);
    struct etc_range r;
    cr_assert_eq(etc_get(c, S("b"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_str_eq(r.kvs[0].value, "else");
    etc_range_free(&r);

    /* A txn etcd refuses (the same key twice) changes nothing. */
    struct etc_op twice[] = {{ETC_PUT, S("b"), NULL, 0, S("x"), 0},
                             {ETC_PUT, S("b"), NULL, 0, S("y"), 0}};
    cr_assert_eq(etc_txn(c, NULL, 0, twice, 2, NULL, 0, &t), ETC_EREFUSED);
    cr_assert(strstr(etc_errmsg(c), "duplicate"), "%s", etc_errmsg(c));
    cr_assert_eq(etc_get(c, S("b"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_str_eq(r.kvs[0].value, "else");
    etc_range_free(&r);
}

Test(etcd_client, leases)
{
    int64_t id, granted, ttl, rem;
    cr_assert_eq(etc_lease_grant(c, 2, &id, &granted), ETC_OK);
    cr_assert_gt(id, 0);
    cr_assert_eq(granted, 2);
    cr_assert_eq(etc_put(c, S("held"), S("v"), id, NULL), ETC_OK);
    struct etc_range r;
    cr_assert_eq(etc_get(c, S("held"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.kvs[0].lease, id);
    etc_range_free(&r);
    cr_assert_eq(etc_lease_ttl(c, id, &rem, &granted), ETC_OK);
    cr_assert(rem >= 1 && rem <= 2, "remaining %lld", (long long)rem);
    cr_assert_eq(granted, 2);

    /* Kept alive past its ttl, it stays. */
    for (int i = 0; i < 6; i++) {
        t_sleep_ns(500 * MS);
        cr_assert_eq(etc_lease_keepalive(c, id, &ttl), ETC_OK);
        cr_assert_eq(ttl, 2);
    }
    cr_assert_eq(etc_get(c, S("held"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 1);
    etc_range_free(&r);

    /* Left alone, it expires and takes its key along. */
    uint64_t t0 = t_now();
    int gone = 0;
    while (!gone && t_now() - t0 < 6 * SEC) {
        cr_assert_eq(etc_get(c, S("held"), NULL, 0, 0, 0, &r), ETC_OK);
        gone = r.n == 0;
        etc_range_free(&r);
        t_sleep_ns(50 * MS);
    }
    cr_assert(gone, "the key outlived its lease");
    cr_assert_geq(t_now() - t0, 1 * SEC, "expired early");
    cr_assert_eq(etc_lease_keepalive(c, id, &ttl), ETC_ENOTFOUND);
    cr_assert_eq(etc_lease_ttl(c, id, &rem, NULL), ETC_ENOTFOUND);
    cr_assert_eq(etc_lease_revoke(c, id), ETC_ENOTFOUND);
    cr_assert_eq(etc_put(c, S("held"), S("v"), id, NULL), ETC_ENOTFOUND);

    /* Revoked: its keys go at once. */
    cr_assert_eq(etc_lease_grant(c, 60, &id, NULL), ETC_OK);
    cr_assert_eq(etc_put(c, S("held"), S("v"), id, NULL), ETC_OK);
    cr_assert_eq(etc_lease_revoke(c, id), ETC_OK);
    cr_assert_eq(etc_get(c, S("held"), NULL, 0, 0, 0, &r), ETC_OK);
    cr_assert_eq(r.n, 0);
    etc_range_free(&r);
    cr_assert_eq(etc_lease_revoke(c, id), ETC_ENOTFOUND);
}

Test(etcd_client, watch_delivers_and_times_out)
{
    etc_watch *w;
    struct etc_event ev;
    cr_assert_eq(etc_watch_open(c, S("w/"), S("w0"), 0, &w), ETC_OK);
    uint64_t t0 = t_now();
    cr_assert_eq(etc_watch_next(w, 300, &ev), ETC_ETIMEDOUT);
    uint64_t waited = t_now() - t0;
    cr_assert(waited >= 290 * MS && waited < 3 * SEC, "waited %llu ms",
              (unsigned long long)(waited / MS));

    int64_t rev;
    cr_assert_eq(etc_put(c, S("w/1"), S("a"), 0, &rev), ETC_OK);
    put("outside", "not seen");
    put("w/2", "b");
    cr_assert_eq(etc_delete(c, S("w/1"), NULL, 0, NULL), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_eq(ev.type, ETC_EV_PUT);
    cr_assert_str_eq(ev.kv.key, "w/1");
    cr_assert_str_eq(ev.kv.value, "a");
    cr_assert_eq(ev.kv.mod_rev, rev);
    etc_event_free(&ev);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_str_eq(ev.kv.key, "w/2");
    etc_event_free(&ev);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_eq(ev.type, ETC_EV_DELETE);
    cr_assert_str_eq(ev.kv.key, "w/1");
    cr_assert_gt(ev.kv.mod_rev, rev);
    etc_event_free(&ev);
    cr_assert_eq(etc_watch_next(w, 100, &ev), ETC_ETIMEDOUT);
    etc_watch_close(w);

    /* From a past revision: the history first. */
    cr_assert_eq(etc_watch_open(c, S("w/1"), NULL, 0, rev, &w), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_eq(ev.type, ETC_EV_PUT);
    cr_assert_eq(ev.kv.mod_rev, rev);
    etc_event_free(&ev);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_eq(ev.type, ETC_EV_DELETE);
    etc_event_free(&ev);
    etc_watch_close(w);
}

Test(etcd_client, compacted_revisions)
{
    int64_t rev, last;
    char args[64];
    struct etc_range r;
    etc_watch *w;
    cr_assert_eq(etc_put(c, S("z"), S("1"), 0, &rev), ETC_OK);
    put("z", "2");
    cr_assert_eq(etc_put(c, S("z"), S("3"), 0, &last), ETC_OK);
    snprintf(args, sizeof args, "compact %lld", (long long)last);
    cr_assert_eq(etcd_cluster_ctl(&cl, args), 0, "%s", cl.err);
    cr_assert_eq(etc_get(c, S("z"), NULL, 0, 0, rev, &r), ETC_ECOMPACTED);
    etc_range_free(&r);
    /* etcd confirms the watch, then cancels it: the first wait says so. */
    struct etc_event ev;
    cr_assert_eq(etc_watch_open(c, S("z"), NULL, 0, rev, &w), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_ECOMPACTED);
    cr_assert_eq(etc_watch_next(w, 10, &ev), ETC_ECOMPACTED, "and stays so");
    etc_watch_close(w);
    cr_assert_eq(etc_get(c, S("z"), NULL, 0, 0, last, &r), ETC_OK);
    cr_assert_str_eq(r.kvs[0].value, "3");
    etc_range_free(&r);
}

Test(etcd_client, status_names_the_leader)
{
    struct etc_status st;
    cr_assert_eq(etc_status(c, NULL, &st), ETC_OK);
    cr_assert_neq(st.member_id, 0);
    cr_assert_eq(st.leader, st.member_id, "one member leads itself");
    cr_assert_str_eq(st.version, "3.4.23");
    cr_assert_eq(etc_status(c, "10.0.0.1:1", &st), ETC_EINVAL, "not one of the endpoints");
}
