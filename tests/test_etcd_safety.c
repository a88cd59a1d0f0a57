/*
 * tests/test_etcd_safety.c - etcd tables keep their promises against what
 * an admin or an odd name does to the keys: table names that never share
 * keys, a holder record deleted under its holder (renew, release, a
 * renewer, `shmlease run`), a token record deleted beside records that
 * carry tokens, a table removed or made anew under an open handle or a
 * queued waiter. Against a real one-member cluster
 * started by tests/etcd_cluster.c; the keys are changed with a raw client,
 * as etcdctl would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static void del(etc_client *e, const char *k)
{
    cr_assert_eq(etc_delete(e, k, strlen(k), NULL, 0, NULL), ETC_OK, "delete %s", k);
}

/* An admin deletes the holder record (etcdctl del jobs/h/L): the holder's
 * etcd lease lives on, but the hold is gone and another process takes the
 * lease. The holder's same-ttl renew must not say OK, nor its release. */
Test(etcd_safety, renew_and_release_see_a_deleted_holder_record)
{
    up();
    shl_table *t = create("jobs");
    shl_table *other = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    uint64_t a, b;
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_renew(t, "L", "A", a, 30 * SEC), SHL_OK, "held");
    del(e, "jobs/h/L");
    cr_assert_eq(shl_acquire(other, "L", "B", 30 * SEC, &b), SHL_OK, "free for another");
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_renew(t, "L", "A", a, 30 * SEC), SHL_ELOST, "the renew sees the loss");
    cr_assert_eq(shl_release(t, "L", "A", a), SHL_ELOST, "so does the release");
    cr_assert_eq(shl_renew(other, "L", "B", b, 30 * SEC), SHL_OK, "B's hold is untouched");

    /* Release alone, the record deleted with nobody else taking it. */
    uint64_t c;
    cr_assert_eq(shl_acquire(t, "M", "A", 30 * SEC, &c), SHL_OK);
    del(e, "jobs/h/M");
    cr_assert_eq(shl_release(t, "M", "A", c), SHL_ELOST, "a release that released nothing");

    /* A prefix delete over every holder record (etcdctl del --prefix). */
    uint64_t p;
    cr_assert_eq(shl_acquire(t, "P", "A", 30 * SEC, &p), SHL_OK);
    cr_assert_eq(etc_delete(e, "jobs/h/", 7, "jobs/h0", 7, NULL), ETC_OK);
    cr_assert_eq(shl_renew(t, "P", "A", p, 30 * SEC), SHL_ELOST, "after a prefix delete");

    /* A shared holder's key, deleted the same way (a shared renew read its
     * key before, too: coverage, not a regression). */
    uint64_t s;
    cr_assert_eq(shl_acquire_shared(t, "S", "R", 30 * SEC, &s, NULL), SHL_OK);
    char key[64];
    snprintf(key, sizeof key, "jobs/s/S %llu", (unsigned long long)s);
    cr_assert_eq(t_etcd_exists(e, key), 1, "%s", key);
    del(e, key);
    cr_assert_eq(shl_renew(t, "S", "R", s, 30 * SEC), SHL_ELOST, "a shared renew too");
    cr_assert_eq(shl_release(t, "S", "R", s), SHL_ELOST, "and its release");
    etc_close(e);
    shl_close(other);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

/* A renewer whose holder record is deleted declares the loss, refused by
 * the table, at its next renewal (every second with a 3 s ttl; a 20 s
 * bound leaves room for a loaded machine). */
Test(etcd_safety, a_renewer_reports_a_deleted_holder_record)
{
    up();
    shl_table *t = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "L", "A", 3 * SEC, &a), SHL_OK);
    shl_renewer *r = NULL;
    cr_assert_eq(shl_renewer_start(t, "L", "A", a, 3 * SEC, NULL, &r), SHL_OK);
    del(e, "jobs/h/L");
    uint64_t t0 = t_now();
    while (shl_renewer_lost(r) == 0 && t_now() - t0 < 20 * SEC)
        usleep(50000);
    cr_assert_eq(shl_renewer_lost(r), SHL_LOSS_REFUSED, "the renewer reports the loss");
    shl_renewer_stop(r, 0);
    etc_close(e);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

/* An acquire after the token record was deleted must not issue a token at
 * or below one already issued: it is refused as SHL_ECORRUPT, or (the other
 * answer the rule allows) issues one above every token recorded. */
static void assert_never_lower(int rc, uint64_t tok, uint64_t issued, const char *what)
{
    cr_assert(rc == SHL_ECORRUPT || (rc == SHL_OK && tok > issued), "%s: %s, token %llu after %llu",
              what, shl_strerror(rc), (unsigned long long)tok, (unsigned long long)issued);
}

Test(etcd_safety, a_deleted_token_record_never_lowers_tokens)
{
    up();
    shl_table *t = create("jobs");
    shl_table *fresh = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    uint64_t tok = 0;
    /* L: its value record says 3; M: only its gen record carries a token. */
    raise_token(t, "L", 2);
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "L", "A", tok, "v", 1), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "A", tok), SHL_OK);
    raise_token(t, "M", 3);
    del(e, "jobs/t/L");
    del(e, "jobs/t/M");
    int rc = shl_acquire(t, "L", "B", 30 * SEC, &tok);
    assert_never_lower(rc, tok, 3, "by the handle that knew token 3");
    rc = shl_acquire(fresh, "L", "C", 30 * SEC, &tok);
    assert_never_lower(rc, tok, 3, "by a handle that knew nothing");
    rc = shl_acquire(fresh, "M", "C", 30 * SEC, &tok);
    assert_never_lower(rc, tok, 3, "beside a gen record alone");
    uint64_t g = 0;
    rc = shl_acquire_shared(fresh, "M", "R", 30 * SEC, &tok, &g);
    assert_never_lower(rc, tok, 3, "a shared acquire");
    /* shl_check sees the contradiction too. */
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_ECORRUPT);
    etc_close(e);
    shl_close(fresh);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

/* How many keys lie under the prefix "<p>/". */
static long keys_under(etc_client *e, const char *p)
{
    char k[64], end[64];
    size_t n = (size_t)snprintf(k, sizeof k, "%s/", p);
    memcpy(end, k, n + 1);
    end[n - 1] = '/' + 1;
    struct etc_range r = {0};
    cr_assert_eq(etc_get(e, k, n, end, n, 1, 0, &r), ETC_OK);
    long c = (long)r.count;
    etc_range_free(&r);
    return c;
}

/* A handle opened before shl_unlink: its acquire and write are
 * SHL_EREMOVED and re-create no key, so the name is not wedged: it can be
 * created, unlinked and removed with `shmlease rm` again. */
Test(etcd_safety, a_stale_handle_neither_recreates_nor_wedges_the_name)
{
    up();
    char url[256];
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
    shl_table *t = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    uint64_t tok;
    raise_token(t, "L", 3);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &tok), SHL_EREMOVED, "no token 1 again");
    cr_assert_eq(shl_acquire_shared(t, "S", "R", 30 * SEC, &tok, NULL), SHL_EREMOVED);
    cr_assert_eq(shl_write(t, "L", "A", 3, "x", 1), SHL_EREMOVED);
    cr_assert_eq(shl_acquire_wait(t, "W", "A", 30 * SEC, 5 * SEC, &tok), SHL_EREMOVED);
    cr_assert_eq(keys_under(e, "jobs"), 0, "no key re-created under the name");
    shl_table *again = create("jobs");
    cr_assert_eq(shl_close(again), SHL_OK);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    again = create("jobs");
    shl_close(again);
    cr_assert_eq(t_tool_run(NULL, "rm '%s'", url), 0, "shmlease rm");
    cr_assert_eq(keys_under(e, "jobs"), 0);
    shl_close(t);
    etc_close(e);
    etcd_cluster_stop(&CL);
}

/* A table removed and made anew under an open handle: the old handle gets
 * SHL_EREMOVED, never the new table's leases. */
Test(etcd_safety, a_table_made_anew_is_not_the_old_handles)
{
    up();
    char url[256];
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
    shl_table *t = create("jobs");
    uint64_t tok;
    raise_token(t, "L", 3);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    shl_table *fresh = create("jobs");
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &tok), SHL_EREMOVED, "the old handle");
    cr_assert_eq(shl_acquire(fresh, "L", "B", 30 * SEC, &tok), SHL_OK, "the new table's own");
    cr_assert_eq(tok, 1, "a new table starts over");
    cr_assert_eq(shl_write(t, "L", "B", tok, "x", 1), SHL_EREMOVED, "even with its token");
    cr_assert_eq(shl_write(fresh, "L", "B", tok, "x", 1), SHL_OK);
    shl_close(fresh);
    shl_close(t);
    etcd_cluster_stop(&CL);
}

static char waiter_url[256];

/* A queued waiter in a process of its own: its result as the exit status. */
static int wait_child(void *arg)
{
    (void)arg;
    shl_table *t = NULL;
    if (shl_open(waiter_url, NULL, &t) != SHL_OK)
        return 100;
    uint64_t tok;
    int rc = shl_acquire_wait(t, "L", "W", 30 * SEC, 60 * SEC, &tok);
    shl_close(t);
    return -rc;
}

static int waiter_queued(void *arg)
{
    shl_lease_info in;
    return shl_stat(arg, "L", &in) == SHL_OK && in.waiters == 1;
}

/* A waiter queued when its table is removed stops with SHL_EREMOVED and
 * re-creates no key (its place went with the table's keys). */
Test(etcd_safety, a_waiter_of_a_removed_table_stops)
{
    up();
    etcd_cluster_url(&CL, "jobs", waiter_url, sizeof waiter_url);
    shl_table *t = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &tok), SHL_OK);
    pid_t w = t_fork(wait_child, NULL);
    cr_assert(t_until(waiter_queued, t, 20 * SEC), "the waiter queued");
    cr_assert_eq(shl_unlink(waiter_url), SHL_OK);
    int st = t_wait(w);
    cr_assert_eq(st, -SHL_EREMOVED, "the waiter saw the table go (status %d: %s)", st,
                 st > 0 && st < 100 ? shl_errname(-st) : "not a library code");
    cr_assert_eq(keys_under(e, "jobs"), 0, "and left no key behind");
    shl_close(t);
    etc_close(e);
    etcd_cluster_stop(&CL);
}

static char run_url[256], run_mark[256];

/* `shmlease run` of a long command, in a process of its own: its status.
 * The command makes run_mark once it runs (run has acquired and started
 * its renewer by then). */
static int run_child(void *arg)
{
    (void)arg;
    return t_tool_run(NULL, "run '%s' L --ttl 3 -- sh -c 'touch %s; exec sleep 60' >/dev/null 2>&1",
                      run_url, run_mark);
}

static int run_started(void *arg)
{
    (void)arg;
    return access(run_mark, F_OK) == 0;
}

/* `shmlease run` whose holder record an admin deletes stops its command
 * and exits with status 4 (lease lost) at its next renewal, instead of
 * running on beside the next holder (a 30 s bound, the command sleeping
 * 60 s). */
Test(etcd_safety, run_stops_its_command_when_the_holder_record_is_deleted)
{
    up();
    etcd_cluster_url(&CL, "jobs", run_url, sizeof run_url);
    snprintf(run_mark, sizeof run_mark, "/tmp/shl-run-mark-%d", (int)getpid());
    unlink(run_mark);
    shl_table *t = create("jobs");
    etc_client *e = t_etcd_raw(&CL);
    pid_t p = t_fork(run_child, NULL);
    cr_assert(t_until(run_started, NULL, 20 * SEC), "run runs its command");
    uint64_t t0 = t_now();
    del(e, "jobs/h/L");
    int st = t_wait(p);
    cr_assert_eq(st, 4, "run says the lease was lost (status %d)", st);
    cr_assert_lt(t_now() - t0, 30 * SEC, "long before the command's end");
    unlink(run_mark);
    etc_close(e);
    shl_close(t);
    etcd_cluster_stop(&CL);
}
