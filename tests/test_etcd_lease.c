/*
 * tests/test_etcd_lease.c - what is particular to etcd tables: the
 * refusals, the enforcement point under a paused holder, waiting with a
 * watch in a fair queue whose dead members drop out, the table's keys
 * (a foreign prefix, unlink), an unreachable cluster. Against real etcd
 * members started by tests/etcd_cluster.c.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;
static char url[256];

static void up(int members)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, members, 0), 0, "%s", CL.err);
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
}

static void down(void)
{
    etcd_cluster_stop(&CL);
}

static shl_table *create(const char *name)
{
    shl_options o;
    shl_options_init(&o);
    o.value_size = 64;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    return t;
}

static void put(etc_client *e, const char *k, const char *v)
{
    cr_assert_eq(etc_put(e, k, strlen(k), v, strlen(v), 0, NULL), ETC_OK);
}

static void noop(void *arg)
{
    (void)arg;
}

static void nothing(void *arg, const char *p)
{
    (void)arg, (void)p;
}

/* What cannot be the same is refused with a code, never approximated. */
Test(etcd_table, refusals)
{
    up(1);
    shl_options o;
    shl_options_init(&o);
    o.clock = SHL_CLOCK_MANUAL;
    shl_table *t = (shl_table *)1;
    cr_assert_eq(shl_open(url, &o, &t), SHL_ENOTSUP, "manual clock");
    cr_assert_null(t);
    /* The reclaim policy, shl_options_init()'s default, is accepted below
     * (create()) and reclaims nothing: etcd proves no death. */
    shl_options_init(&o);
    o.token_state_path = "/tmp/x";
    cr_assert_eq(shl_open(url, &o, &t), SHL_ENOTSUP, "token state file");
    cr_assert_eq(shl_open(url, NULL, &t), SHL_ENOENT, "nothing was created");
    t = create(url);
    uint64_t a, now;
    cr_assert_eq(shl_acquire(t, "L", "A", 5 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_guard(t, "L", "A", a, noop, NULL), SHL_ENOTSUP);
    cr_assert_eq(shl_clock_set(t, 1), SHL_ENOTSUP);
    cr_assert_eq(shl_repair(t, 0, nothing, NULL), SHL_ENOTSUP);
    cr_assert_eq(shl_repair(t, SHL_REPAIR_DRY_RUN, nothing, NULL), SHL_ENOTSUP);
    cr_assert_eq(shl_check_name(url, nothing, NULL), SHL_ENOTSUP);
    shl_heartbeat hb;
    cr_assert_eq(shl_heartbeat_get(t, "L", &hb), SHL_ENOTSUP);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect_slot(t, 0, &d), SHL_ENOTSUP);
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_str_eq(d.name, "L");
    cr_assert_eq(d.info.token, a);
    cr_assert_eq(shl_now(t, &now), SHL_OK);
    cr_assert_eq(shl_check(t, nothing, NULL), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    cr_assert_eq(ti.value_size, 64);
    cr_assert_eq(ti.used, 1);
    shl_options_init(&o);
    o.value_size = 8;
    shl_table *t2;
    cr_assert_eq(shl_open(url, &o, &t2), SHL_EMISMATCH);
    shl_options_init(&o);
    o.value_size = 64;
    o.flags = SHL_CREATE | SHL_EXCL;
    cr_assert_eq(shl_open(url, &o, &t2), SHL_EEXIST);
    shl_close(t);
    down();
}

/* TTLs are whole seconds: rounded up, the effective ttl visible. */
Test(etcd_table, ttl_rounded_up_to_whole_seconds)
{
    up(1);
    shl_table *t = create(url);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "L", "A", 2 * SEC + 1, &a), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.remaining_ns % SEC, 0, "whole seconds");
    cr_assert(in.remaining_ns >= 2 * SEC && in.remaining_ns <= 3 * SEC,
              "2 s + 1 ns is 3 s (remaining %llu)", (unsigned long long)in.remaining_ns);
    t_sleep_ns(2200 * MS);
    uint64_t x;
    cr_assert_eq(shl_acquire(t, "L", "B", SEC, &x), SHL_EBUSY, "still held after 2.2 s");
    shl_close(t);
    down();
}

static int fds[2], go[2];

/* The holder: acquires through member 0 only, writes, says so, then (once
 * stopped and resumed) writes again and exits with that write's code. */
static int paused_holder(void *arg)
{
    (void)arg;
    char name[256];
    snprintf(name, sizeof name, "etcd://%s/jobs", etcd_cluster_endpoint(&CL, 0));
    shl_table *t;
    uint64_t tok;
    if (shl_open(name, NULL, &t) != SHL_OK || shl_acquire(t, "L", "A", 2 * SEC, &tok) != SHL_OK ||
        shl_write(t, "L", "A", tok, "a-1", 3) != SHL_OK)
        return 100;
    if (write(fds[1], &tok, sizeof tok) != (ssize_t)sizeof tok)
        return 101;
    char c;
    if (read(go[0], &c, 1) != 1)
        return 102;
    int rc = shl_write(t, "L", "A", tok, "stale", 5);
    return -rc;
}

/* The enforcement point: a holder paused past its expiry, resumed after
 * another process, through another member, acquired and wrote: etcd
 * refuses its write, and the value is the new holder's. */
Test(etcd_table, paused_holder_is_refused_by_etcd)
{
    up(3);
    shl_table *t0 = create(url);
    shl_close(t0);
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t p = t_fork(paused_holder, NULL);
    uint64_t a;
    cr_assert_eq(read(fds[0], &a, sizeof a), (ssize_t)sizeof a);
    cr_assert_eq(kill(p, SIGSTOP), 0);
    cr_assert_eq(t_wait_stopped(p), 0);

    char other[256];
    snprintf(other, sizeof other, "etcd://%s/jobs", etcd_cluster_endpoint(&CL, 1));
    shl_table *t;
    cr_assert_eq(shl_open(other, NULL, &t), SHL_OK);
    uint64_t b;
    cr_assert_eq(shl_acquire_wait(t, "L", "B", 30 * SEC, 20 * SEC, &b), SHL_OK);
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_write(t, "L", "B", b, "b-1", 3), SHL_OK);

    cr_assert_eq(kill(p, SIGCONT), 0);
    cr_assert_eq(write(go[1], "g", 1), 1);
    cr_assert_eq(t_wait(p), -SHL_ELOST, "the paused holder's write was refused");
    char v[16];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(t, "L", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 3 && memcmp(v, "b-1", 3) == 0, "the value is the new holder's");
    cr_assert_eq(vt, b);
    shl_close(t);
    down();
}

/* A waiter in a child: waits, reports the token and when it got it. */
struct waited {
    uint64_t token, at_ns;
    int rc;
};

static int waiter(void *arg)
{
    const char *owner = arg;
    shl_table *t;
    struct waited w = {0, 0, 0};
    w.rc = shl_open(url, NULL, &t);
    if (w.rc == SHL_OK)
        w.rc = shl_acquire_wait(t, "L", owner, 30 * SEC, 60 * SEC, &w.token);
    w.at_ns = t_now();
    if (write(fds[1], &w, sizeof w) != (ssize_t)sizeof w)
        return 1;
    return 0;
}

static void wait_waiters(shl_table *t, uint32_t n)
{
    shl_lease_info in;
    uint64_t end = t_now() + 10 * SEC;
    do {
        cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
        if (in.waiters == n)
            return;
        t_sleep_ns(20 * MS);
    } while (t_now() < end);
    cr_assert_fail("%u waiters, not %u", in.waiters, n);
}

/* A one-member cluster, "L" held by H (token *a) for 30 s, and two waiters
 * queued in that order. */
static shl_table *two_waiters(uint64_t *a, pid_t *w1, pid_t *w2)
{
    up(1);
    shl_table *t = create(url);
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(shl_acquire(t, "L", "H", 30 * SEC, a), SHL_OK);
    *w1 = t_fork(waiter, "W1");
    wait_waiters(t, 1);
    *w2 = t_fork(waiter, "W2");
    wait_waiters(t, 2);
    return t;
}

/* The waiter gets the lease at the release (a watch wakes it), long before
 * the holder's expiry; waiters are served in arrival order. */
Test(etcd_table, waiters_get_the_lease_in_order_at_release)
{
    uint64_t a;
    pid_t w1, w2;
    shl_table *t = two_waiters(&a, &w1, &w2);
    t_sleep_ns(500 * MS);
    uint64_t released = t_now();
    cr_assert_eq(shl_release(t, "L", "H", a), SHL_OK);
    struct waited r1;
    cr_assert_eq(read(fds[0], &r1, sizeof r1), (ssize_t)sizeof r1);
    cr_assert_eq(r1.rc, SHL_OK);
    cr_assert_eq(r1.token, a + 1);
    cr_assert_lt(r1.at_ns - released, 2 * SEC, "woken at the release, not the 30 s expiry");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_str_eq(in.owner, "W1", "the first to arrive is served first");
    cr_assert_eq(t_wait(w1), 0);
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
    struct waited r2;
    cr_assert_eq(read(fds[0], &r2, sizeof r2), (ssize_t)sizeof r2);
    cr_assert_eq(r2.rc, SHL_OK);
    cr_assert_eq(r2.token, a + 2);
    cr_assert_eq(t_wait(w2), 0);
    shl_close(t);
    down();
}

/* A waiter killed while waiting loses its place: the next one gets the
 * lease once the dead one's etcd lease has run out. */
Test(etcd_table, a_killed_waiters_place_disappears)
{
    uint64_t a;
    pid_t w1, w2;
    shl_table *t = two_waiters(&a, &w1, &w2);
    cr_assert_eq(kill(w1, SIGKILL), 0);
    cr_assert_eq(t_wait(w1), 128 + SIGKILL);
    wait_waiters(t, 1); /* within the waiter ttl */
    cr_assert_eq(shl_release(t, "L", "H", a), SHL_OK);
    struct waited r2;
    cr_assert_eq(read(fds[0], &r2, sizeof r2), (ssize_t)sizeof r2);
    cr_assert_eq(r2.rc, SHL_OK);
    cr_assert_eq(r2.token, a + 1, "the living waiter, next in line, got it");
    cr_assert_eq(t_wait(w2), 0);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_str_eq(in.owner, "W2");
    cr_assert_eq(in.waiters, 0, "nothing left behind");
    shl_close(t);
    down();
}

static void count(void *arg, const char *p)
{
    (void)p;
    ++*(int *)arg;
}

/* Keys that are not a shmlease table are not taken over. */
Test(etcd_table, a_prefix_of_other_keys_is_corrupt)
{
    up(1);
    etc_client *e = t_etcd_raw(&CL);
    put(e, "jobs/config", "someone else's");
    shl_options o;
    shl_options_init(&o);
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_ECORRUPT, "with SHL_CREATE");
    cr_assert_eq(shl_open(url, NULL, &t), SHL_ECORRUPT, "without");
    cr_assert_eq(shl_unlink(url), SHL_ECORRUPT);
    cr_assert_eq(t_etcd_exists(e, "jobs/config"), 1, "left alone");
    put(e, "jobs/meta", "not a meta record");
    cr_assert_eq(shl_open(url, NULL, &t), SHL_ECORRUPT, "a meta record that does not parse");
    /* A table with a stray key among its records: check reports it. */
    char other[256];
    etcd_cluster_url(&CL, "tbl", other, sizeof other);
    t = create(other);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "L", "A", 5 * SEC, &a), SHL_OK);
    int problems = 0;
    cr_assert_eq(shl_check(t, count, &problems), SHL_OK);
    cr_assert_eq(problems, 0);
    put(e, "tbl/x/y", "stray");
    put(e, "tbl/t/M", "not-a-number");
    cr_assert_eq(shl_check(t, count, &problems), SHL_ECORRUPT);
    cr_assert_eq(problems, 2);
    shl_close(t);
    etc_close(e);
    down();
}

/* shl_unlink deletes the table's own records and nothing else. */
Test(etcd_table, unlink_leaves_foreign_keys_alone)
{
    up(1);
    etc_client *e = t_etcd_raw(&CL);
    shl_table *t = create(url);
    uint64_t a, b;
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_write(t, "L", "A", a, "v", 1), SHL_OK);
    put(e, "jobs/zz", "foreign inside the prefix");
    put(e, "jobsx/h/L", "foreign beside it");
    put(e, "job", "foreign above it");
    cr_assert_eq(shl_unlink(url), SHL_OK);
    cr_assert_eq(t_etcd_exists(e, "jobs/zz"), 1);
    cr_assert_eq(t_etcd_exists(e, "jobsx/h/L"), 1);
    cr_assert_eq(t_etcd_exists(e, "job"), 1);
    cr_assert_eq(t_etcd_exists(e, "jobs/meta"), 0);
    cr_assert_eq(t_etcd_exists(e, "jobs/h/L"), 0);
    cr_assert_eq(t_etcd_exists(e, "jobs/t/L"), 0);
    cr_assert_eq(t_etcd_exists(e, "jobs/v/L"), 0);
    cr_assert_eq(shl_renew(t, "L", "A", a, 30 * SEC), SHL_ELOST,
                 "the holder's etcd lease went with the table");
    shl_close(t);
    cr_assert_eq(shl_unlink(url), SHL_ECORRUPT, "only a foreign key is left");
    etc_delete(e, "jobs/zz", 7, NULL, 0, NULL);
    cr_assert_eq(shl_unlink(url), SHL_ENOENT);
    t = create(url);
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &b), SHL_OK);
    cr_assert_eq(b, 1, "a new table starts over");
    shl_close(t);
    etc_close(e);
    down();
}

/* A cluster that does not answer: SHL_EUNAVAIL within the deadline. */
Test(etcd_table, an_unreachable_cluster_is_unavailable_in_time)
{
    up(1);
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 500;
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "L", "A", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(etcd_cluster_pause(&CL, 0), 0);
    uint64_t t0 = t_now();
    uint64_t x;
    cr_assert_eq(shl_acquire(t, "M", "A", 30 * SEC, &x), SHL_EUNAVAIL);
    cr_assert_eq(shl_write(t, "L", "A", a, "x", 1), SHL_EUNAVAIL);
    cr_assert_eq(shl_renew(t, "L", "A", a, 30 * SEC), SHL_EUNAVAIL);
    cr_assert_lt(t_now() - t0, 5 * SEC, "three calls, each bounded by 500 ms and a read-back");
    cr_assert_eq(etcd_cluster_resume(&CL, 0), 0);
    cr_assert_eq(etcd_cluster_wait_healthy(&CL, 10000), 0);
    cr_assert_eq(shl_write(t, "L", "A", a, "y", 1), SHL_OK, "back");
    shl_close(t);
    down();
}

struct worker {
    shl_table *t;
    char lease[8];
    int fails;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 10; i++) {
        uint64_t tok, vt;
        char v[8];
        size_t len;
        if (shl_acquire(w->t, w->lease, "T", 10 * SEC, &tok) != SHL_OK ||
            shl_write(w->t, w->lease, "T", tok, w->lease, 2) != SHL_OK ||
            shl_read(w->t, w->lease, v, sizeof v, &len, &vt) != SHL_OK || vt != tok ||
            shl_release(w->t, w->lease, "T", tok) != SHL_OK)
            w->fails++;
    }
    return NULL;
}

/* One handle, several threads at once (the library's promise). */
Test(etcd_table, one_handle_many_threads)
{
    up(1);
    shl_table *t = create(url);
    struct worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){t, {'L', (char)('0' + i), 0}, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].fails, 0, "thread %d", i);
        shl_lease_info in;
        cr_assert_eq(shl_stat(t, w[i].lease, &in), SHL_OK);
        cr_assert_eq(in.token, 10);
    }
    shl_close(t);
    down();
}

/* TLS with client certificates, from the options or the environment: no
 * certificate, or a CA that is not the cluster's, is SHL_EPERM. */
Test(etcd_table, tls_client_certificates_from_options_or_environment)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, 1, ETCD_CLIENT_CERT), 0, "%s", CL.err);
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
    cr_assert(strncmp(url, "etcds://", 8) == 0);
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 3000;
    o.cacert = CL.ca;
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_EPERM, "no client certificate");
    o.cert = CL.other_cert;
    o.key = CL.other_key;
    cr_assert_eq(shl_open(url, &o, &t), SHL_EPERM, "a certificate of another CA");
    o.cert = CL.cert;
    o.key = CL.key;
    o.cacert = CL.other_ca;
    cr_assert_eq(shl_open(url, &o, &t), SHL_EPERM, "the server's certificate is not trusted");
    o.cacert = CL.ca;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "L", "A", 5 * SEC, &a), SHL_OK);
    shl_close(t);
    /* The same from the environment (what shl_unlink and the tool use). */
    setenv("SHMLEASE_ETCD_CACERT", CL.ca, 1);
    setenv("SHMLEASE_ETCD_CERT", CL.cert, 1);
    setenv("SHMLEASE_ETCD_KEY", CL.key, 1);
    cr_assert_eq(shl_open(url, NULL, &t), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, a);
    shl_close(t);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    unsetenv("SHMLEASE_ETCD_CERT");
    unsetenv("SHMLEASE_ETCD_KEY");
    cr_assert_eq(shl_unlink(url), SHL_EPERM, "no certificate: refused, not ENOENT");
    down();
}
