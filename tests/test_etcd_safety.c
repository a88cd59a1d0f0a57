/*
 * tests/test_etcd_safety.c - etcd tables keep their promises against what
 * an admin or an odd name does to the keys: table names that never share
 * keys, a holder record deleted under its holder, a token record deleted
 * beside records that carry tokens. Against a real one-member cluster
 * started by tests/etcd_cluster.c; the keys are changed with a raw client,
 * as etcdctl would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;

static void up(void)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, 1, 0), 0, "%s", CL.err);
}

static shl_table *create(const char *table)
{
    char url[256];
    etcd_cluster_url(&CL, table, url, sizeof url);
    shl_options o;
    shl_options_init(&o);
    o.value_size = 16;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK, "%s", url);
    return t;
}

/* Acquires and releases `lease` until its token is n. */
static void raise_token(shl_table *t, const char *lease, uint64_t n)
{
    uint64_t tok = 0;
    while (tok < n) {
        cr_assert_eq(shl_acquire(t, lease, "A", 30 * SEC, &tok), SHL_OK);
        cr_assert_eq(shl_release(t, lease, "A", tok), SHL_OK);
    }
    cr_assert_eq(tok, n);
}

/* Unlinking table P removes P's keys, not those of table P/t, whose
 * name P's token records used to prefix. */
Test(etcd_safety, unlink_removes_exactly_its_table)
{
    up();
    shl_table *p = create("P");
    shl_table *pt = create("P/t");
    raise_token(pt, "L", 3);
    uint64_t tok;
    cr_assert_eq(shl_acquire(p, "L", "A", 30 * SEC, &tok), SHL_OK);
    shl_close(p);
    char url[256];
    etcd_cluster_url(&CL, "P", url, sizeof url);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    cr_assert_eq(shl_acquire(pt, "L", "B", 30 * SEC, &tok), SHL_OK, "table P/t is still there");
    cr_assert_eq(tok, 4, "its tokens too: got %llu", (unsigned long long)tok);
    cr_assert_eq(shl_unlink(url), SHL_ENOENT, "P is gone");
    shl_close(pt);
    etcd_cluster_url(&CL, "P/t", url, sizeof url);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    etcd_cluster_stop(&CL);
}

/* Table Q's lease "y/h/c" and table Q/h/y's lease "c" are two leases: both
 * may be held at once, and one's write never lands through the other. */
Test(etcd_safety, a_table_and_a_lease_name_never_spell_another_key)
{
    up();
    shl_table *q = create("Q");
    shl_table *qhy = create("Q/h/y");
    uint64_t a, b;
    cr_assert_eq(shl_acquire(q, "y/h/c", "A", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(qhy, "c", "B", 30 * SEC, &b), SHL_OK, "another table's lease");
    cr_assert_eq(a, 1);
    cr_assert_eq(b, 1);
    etc_client *e = t_etcd_raw(&CL);
    cr_assert_eq(t_etcd_exists(e, "Q/h/y/h/c"), 1, "Q's holder record");
    cr_assert_eq(t_etcd_exists(e, "Q:h:y/h/c"), 1, "Q/h/y's, under its escaped name");
    etc_close(e);
    cr_assert_eq(shl_write(q, "y/h/c", "A", a, "a", 1), SHL_OK);
    cr_assert_eq(shl_write(qhy, "c", "B", b, "bb", 2), SHL_OK);
    char v[16];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(q, "y/h/c", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert_eq(len, 1, "A's value is A's");
    cr_assert_eq(shl_read(qhy, "c", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert_eq(len, 2, "B's value is B's");
    cr_assert_eq(shl_release(q, "y/h/c", "A", a), SHL_OK);
    cr_assert_eq(shl_renew(qhy, "c", "B", b, 30 * SEC), SHL_OK, "B's hold is untouched");
    cr_assert_eq(shl_release(qhy, "c", "B", b), SHL_OK);
    shl_close(q);
    shl_close(qhy);
    etcd_cluster_stop(&CL);
}
