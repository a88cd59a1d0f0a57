/*
 * tools/bench/rows_etcd.c - the etcd floor: what one round trip to etcd
 * costs through the library's etcd client (etcd/), on a kept-alive
 * connection to a throwaway single member started for the run
 * (tools/etcd_cluster.c; --unsafe-no-fsync, so a write costs raft and the
 * store but no disk flush: said in the rows' names). Other etcd rows
 * compare with these.
 *
 * Built only with etcd support (make ETCD=0 leaves the file out).
 */
#include <stdio.h>
#include <string.h>

#include "../../etcd/etcd.h"
#include "bench.h"
#include "etcd_cluster.h"

static struct etcd_cluster cluster;
static int users; /* rows set up on the cluster */
static etc_client *client;
static char why[sizeof cluster.err + 32];

const char *bench_etcd_start(const char **endpoints)
{
    if (users++ == 0) {
        if (etcd_cluster_start(&cluster, 1, 0) != 0) {
            snprintf(why, sizeof why, "no etcd member: %s", cluster.err);
            users = 0;
            return why;
        }
    }
    *endpoints = cluster.endpoints;
    return NULL;
}

void bench_etcd_stop(void)
{
    if (users > 0 && --users == 0)
        etcd_cluster_stop(&cluster);
}

static const char *floor_setup(struct bench_row *r)
{
    const char *eps;
    (void)r;
    const char *no = bench_etcd_start(&eps);
    if (no)
        return no;
    struct etc_config cfg = {.endpoints = eps, .timeout_ms = 5000};
    if (!client && etc_open(&cfg, &client) != ETC_OK)
        return "cannot open an etcd client";
    if (etc_put(client, "bench/floor", 11, "0", 1, 0, NULL) != ETC_OK)
        return "the first put failed";
    return NULL;
}

static void floor_teardown(struct bench_row *r)
{
    (void)r;
    etc_close(client);
    client = NULL;
    bench_etcd_stop();
}

/* One txn: if the key exists (version > 0), put 8 bytes into it - the
 * shape of a guarded write, one compare and one put, one round trip. */
static int run_txn(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    struct etc_cmp cmp = {.key = "bench/floor", .klen = 11, .target = ETC_VERSION,
                          .rel = ETC_GT, .num = 0};
    struct etc_op put = {.kind = ETC_PUT, .key = "bench/floor", .klen = 11, .value = "12345678",
                         .vlen = 8};
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        struct etc_txn_result t;
        int rc = etc_txn(client, &cmp, 1, &put, 1, NULL, 0, &t);
        int ok = rc == ETC_OK && t.succeeded;
        etc_txn_free(&t);
        if (!ok)
            return -1;
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

/* One linearizable read of one key. */
static int run_get(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        struct etc_range g;
        int rc = etc_get(client, "bench/floor", 11, NULL, 0, 0, 0, &g);
        int ok = rc == ETC_OK && g.n == 1;
        etc_range_free(&g);
        if (!ok)
            return -1;
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

void rows_etcd(void)
{
    bench_add("etcd", "etcd txn cmp+put [no-fsync]", floor_setup, run_txn, floor_teardown);
    bench_add("etcd", "etcd get 1 key [no-fsync]", floor_setup, run_get, floor_teardown);
}
