/*
 * tools/bench/rows_etcd_lease.c - shmlease on an etcd table: the lease
 * operations through the public API, on the throwaway member of the etcd
 * floor rows (rows_etcd.c, --unsafe-no-fsync), to compare with one txn
 * ("etcd txn cmp+put"): a guarded write is one txn, a renew with the same
 * ttl one keep-alive, acquire+release a grant, a txn and a revoke.
 */
#ifdef BENCH_HAVE_ETCD
#include <stdio.h>

#include "bench.h"

static shl_table *table;
static uint64_t token;

#define TTL (UINT64_C(30) * 1000000000u)

static const char *lease_setup(struct bench_row *r)
{
    (void)r;
    const char *eps;
    const char *no = bench_etcd_start(&eps);
    if (no)
        return no;
    if (!table) {
        char name[256];
        snprintf(name, sizeof name, "etcd://%s/bench-leases", eps);
        shl_options o;
        shl_options_init(&o);
        o.value_size = 64;
        if (shl_open(name, &o, &table) != SHL_OK)
            return "cannot open an etcd table";
        if (shl_acquire(table, "held", "bench", TTL, &token) != SHL_OK)
            return "cannot acquire the held lease";
    }
    return NULL;
}

static int lease_rows = 5; /* rows still set up: the last one closes the table */

static void lease_teardown(struct bench_row *r)
{
    (void)r;
    if (--lease_rows == 0 && table) {
        shl_close(table);
        table = NULL;
    }
    bench_etcd_stop();
}

static int run_acquire_release(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t tok;
        if (shl_acquire(table, "ar", "bench", TTL, &tok) != SHL_OK ||
            shl_release(table, "ar", "bench", tok) != SHL_OK)
            return -1;
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

/* The release alone: each acquisition before it is outside the clock. */
static int run_release(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t spent = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t tok;
        if (shl_acquire(table, "rel", "bench", TTL, &tok) != SHL_OK)
            return -1;
        uint64_t t0 = bench_now();
        if (shl_release(table, "rel", "bench", tok) != SHL_OK)
            return -1;
        spent += bench_now() - t0;
    }
    o->ns_op = (double)spent / (double)n;
    return 0;
}

static int run_renew(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++)
        if (shl_renew(table, "held", "bench", token, TTL) != SHL_OK)
            return -1;
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

static int run_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    static const char v[64] = "sixty-four bytes of value, give or take";
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++)
        if (shl_write(table, "held", "bench", token, v, sizeof v) != SHL_OK)
            return -1;
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

static int run_read(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    char v[64];
    size_t len;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++)
        if (shl_read(table, "held", v, sizeof v, &len, NULL) != SHL_OK)
            return -1;
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

void rows_etcd_lease(void)
{
    bench_add("etcd", "shmlease-on-etcd acquire+release", lease_setup, run_acquire_release,
              lease_teardown);
    bench_add("etcd", "shmlease-on-etcd release", lease_setup, run_release, lease_teardown);
    bench_add("etcd", "shmlease-on-etcd renew (same ttl)", lease_setup, run_renew, lease_teardown);
    bench_add("etcd", "shmlease-on-etcd guarded write 64B", lease_setup, run_write, lease_teardown);
    bench_add("etcd", "shmlease-on-etcd read 64B", lease_setup, run_read, lease_teardown);
}
#endif
