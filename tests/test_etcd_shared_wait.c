/*
 * tests/test_etcd_shared_wait.c - shl_acquire_shared_wait() on etcd tables:
 * readers and writers in one queue (the order tests/shared_wait.h asserts
 * on both kinds of table), a writer behind readers not starved by readers
 * that keep coming, a killed queued reader losing its place within its
 * waiter key's ttl, a stopped one queueing again when resumed, timeouts leaving no key behind, and
 * a reader waiting for a shared entry. Against real etcd members started by tests/etcd_cluster.c.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"
#include "shared_wait.h"

static struct etcd_cluster CL;
static char url[256];

static void report(void *arg, const char *problem)
{
    (void)arg;
    cr_log_error("check: %s", problem);
}

static void count_problem(void *arg, const char *problem)
{
    (void)problem;
    ++*(int *)arg;
}

static shl_table *up(void)
{
    return t_etcd_up(&CL, "rw", 32, url, sizeof url);
}

static void down(shl_table *t)
{
    t_etcd_down(&CL, t, 1);
}

/* The keys under "rw/<kind>/" in the cluster right now; the first one's
 * name into first (cap bytes) when first != NULL and there is one. */
static long keys_named(char kind, char *first, size_t cap)
{
    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    c.timeout_ms = 5000;
    etc_client *e = NULL;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    char key[8], end[8];
    snprintf(key, sizeof key, "rw/%c/", kind);
    snprintf(end, sizeof end, "rw/%c0", kind);
    struct etc_range r = {0};
    cr_assert_eq(etc_get(e, key, strlen(key), end, strlen(end), 0, 0, &r), ETC_OK);
    long n = (long)r.n;
    if (first && n) {
        cr_assert_lt(r.kvs[0].key_len, cap);
        memcpy(first, r.kvs[0].key, r.kvs[0].key_len);
        first[r.kvs[0].key_len] = 0;
    }
    etc_range_free(&r);
    etc_close(e);
    return n;
}

static long keys_of(char kind)
{
    return keys_named(kind, NULL, 0);
}

/* The member's answered KV requests (txns and ranges) so far: polling
 * shows there, waiting on a watch does not. */
static long kv_requests(void)
{
    return t_etcd_metric(&CL, "awk '/^grpc_server_handled_total.*grpc_code=\"OK\".*"
                              "grpc_method=\"(Txn|Range)\"/ { n += $2 } END { print n + 0 }'");
}

/* (1) Readers queued behind a writer go in together when it releases;
 * readers that came after a queued writer wait behind it: the order of
 * tests/shared_wait.h, as on a segment (test shared/wait_order_by_tokens). */
Test(etcd_shared_wait, readers_ahead_go_in_together_readers_behind_a_writer_wait)
{
    shl_table *t = up();
    t_shared_wait_order(url, 700 * MS);
    cr_assert_eq(keys_of('r'), 0, "no reader's waiter key left");
    cr_assert_eq(keys_of('w'), 0, "no writer's waiter key left");
    down(t);
}

/* (2) A writer queued behind readers gets the lease when they release or
 * expire, and readers that keep coming meanwhile do not starve it: plain
 * ones are refused, waiting ones queue behind it. */
Test(etcd_shared_wait, writer_behind_readers_is_not_starved)
{
    shl_table *t = up();
    uint64_t a, b, x, g;
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 30 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "r-B", 2 * SEC, &b, &g), SHL_OK);
    cr_assert_eq(b, 2);
    struct t_waiter w = {.name = url, .owner = "W", .shared = 0, .timeout_ns = 60 * SEC},
                    r = {.name = url, .owner = "r-late", .shared = 1, .timeout_ns = 60 * SEC};
    t_waiter_start(&w, t, 1);
    t_waiter_start(&r, t, 2);
    /* A stream of readers while the writer waits: none gets in. */
    uint64_t end = t_now() + SEC;
    int n = 0;
    char o[16];
    while (t_now() < end) {
        snprintf(o, sizeof o, "s-%d", n++);
        cr_assert_eq(shl_acquire_shared(t, "L", o, 30 * SEC, &x, &g), SHL_EBUSY, "%s", o);
        cr_assert_eq(shl_acquire_shared_wait(t, "L", o, 30 * SEC, 0, &x, &g), SHL_ETIMEDOUT);
        cr_assert_eq(shl_acquire_shared_wait(t, "L", o, 30 * SEC, 100 * MS, &x, &g), SHL_ETIMEDOUT,
                     "%s queued behind the writer", o);
    }
    cr_assert_eq(shl_release(t, "L", "r-A", a), SHL_OK);
    t_sleep_ns(300 * MS);
    cr_assert(!atomic_load(&w.done), "r-B is still valid");
    /* r-B is not renewed: the writer gets in at its expiry. */
    cr_assert(t_waiter_done_within(&w, 10 * SEC), "the writer got the lease once r-B expired");
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert_eq(w.token, 3, "no reader got in while the writer waited");
    cr_assert_eq(shl_renew(t, "L", "r-B", b, 30 * SEC), SHL_ELOST, "r-B expired");
    t_sleep_ns(500 * MS);
    cr_assert(!atomic_load(&r.done), "the late reader waits while the writer holds");
    cr_assert_eq(shl_release(t, "L", "W", w.token), SHL_OK);
    cr_assert(t_waiter_done_within(&r, 10 * SEC));
    cr_assert_eq(r.rc, SHL_OK);
    cr_assert_eq(r.token, 4);
    cr_assert_eq(r.gen, 3, "it read the writer's state");
    t_waiter_finish(&w);
    t_waiter_finish(&r);
    cr_assert_eq(keys_of('r') + keys_of('w'), 0, "no waiter key left");
    down(t);
}

/* (3) A queued reader SIGKILLed loses its place when its waiter key's etcd
 * lease runs out (3 s): the writer queued behind it waits for that place
 * while it lasts, and no longer. */
static int queued_reader(void *arg)
{
    (void)arg;
    shl_table *t;
    uint64_t tok, g;
    if (shl_open(url, NULL, &t) != SHL_OK)
        return 100;
    int rc = shl_acquire_shared_wait(t, "L", "doomed", 30 * SEC, 60 * SEC, &tok, &g);
    return rc == SHL_OK ? 0 : 200 + rc;
}

Test(etcd_shared_wait, killed_queued_reader_loses_its_place)
{
    shl_table *t = up();
    uint64_t h;
    cr_assert_eq(shl_acquire(t, "L", "holder", 30 * SEC, &h), SHL_OK);
    pid_t p = t_fork(queued_reader, NULL);
    uint64_t end = t_now() + 20 * SEC;
    while (t_queued(t) < 1 && t_now() < end)
        t_sleep_ns(5 * MS);
    cr_assert_eq(t_queued(t), 1, "the reader queued");
    cr_assert_eq(keys_of('r'), 1);
    struct t_waiter w = {.name = url, .owner = "W", .shared = 0, .timeout_ns = 60 * SEC};
    t_waiter_start(&w, t, 2);
    t_sleep_ns(1500 * MS); /* the reader keeps its place alive meanwhile */
    cr_assert_eq(kill(p, SIGKILL), 0);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    uint64_t t0 = t_now();
    cr_assert_eq(shl_release(t, "L", "holder", h), SHL_OK);
    cr_assert(t_waiter_done_within(&w, 15 * SEC), "the writer got past the dead reader");
    uint64_t waited = w.done_at - t0;
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert_eq(w.token, h + 1, "the dead reader never got in");
    cr_assert(waited >= SEC,
              "the writer went in %llu ms after the release: the reader's place "
              "ahead of it did not count",
              (unsigned long long)(waited / MS));
    cr_assert(waited <= 3 * SEC + 2500 * MS, "the dead reader held the queue %llu ms",
              (unsigned long long)(waited / MS));
    cr_assert_eq(keys_of('r'), 0, "its waiter key went with its etcd lease");
    cr_assert_eq(shl_release(t, "L", "W", w.token), SHL_OK);
    t_waiter_finish(&w);
    down(t);
}

/* (3b) A queued reader stopped (SIGSTOP) for longer than its waiter key's
 * etcd lease (3 s) loses its place, and when resumed queues again, at the
 * back, under a new key: it does not go in while the writer holds, and
 * gets the lease shared (gen: the writer's token) when the writer
 * releases. At no point are a writer and a reader holders together. */
static int stopped_reader(void *arg)
{
    int fd = *(int *)arg;
    shl_table *t;
    if (shl_open(url, NULL, &t) != SHL_OK)
        return 100;
    uint64_t res[3] = {0};
    int rc = shl_acquire_shared_wait(t, "L", "sleeper", 30 * SEC, 20 * SEC, &res[1], &res[2]);
    res[0] = (uint64_t)(int64_t)rc;
    ssize_t n = write(fd, res, sizeof res);
    shl_close(t);
    return n == (ssize_t)sizeof res ? 0 : 101;
}

/* Lease "L" now (*in, read at one revision): never an exclusive holder
 * (HELD on etcd means its holder record exists) and shared holders at once. */
static void one_kind(shl_table *t, shl_lease_info *in)
{
    cr_assert_eq(shl_stat(t, "L", in), SHL_OK);
    cr_assert(!(in->state == SHL_STATE_HELD && in->shared > 0),
              "%s holds L exclusively with %u shared holders", in->owner, in->shared);
}

/* The writer W holds L with token h, and no reader does. */
static void writer_alone(shl_table *t, uint64_t h)
{
    shl_lease_info in;
    one_kind(t, &in);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_str_eq(in.owner, "W");
    cr_assert_eq(in.token, h);
    cr_assert_eq(in.shared, 0, "a reader got in while the writer holds");
}

Test(etcd_shared_wait, stopped_queued_reader_queues_again_when_resumed)
{
    shl_table *t = up();
    uint64_t h;
    cr_assert_eq(shl_acquire(t, "L", "W", 60 * SEC, &h), SHL_OK);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t p = t_fork(stopped_reader, &fds[1]);
    close(fds[1]);

    char k1[256] = "", k2[256] = "";
    uint64_t end = t_now() + 20 * SEC;
    while (keys_named('r', k1, sizeof k1) < 1 && t_now() < end) {
        writer_alone(t, h);
        t_sleep_ns(5 * MS);
    }
    cr_assert_eq(keys_of('r'), 1, "the reader queued");
    cr_assert_eq(t_queued(t), 1);

    cr_assert_eq(kill(p, SIGSTOP), 0);
    cr_assert_eq(t_wait_stopped(p), 0);
    uint64_t t0 = t_now();
    end = t0 + 15 * SEC;
    while (keys_of('r') > 0 && t_now() < end) {
        writer_alone(t, h);
        t_sleep_ns(20 * MS);
    }
    cr_assert_eq(keys_of('r'), 0, "the stopped reader's key outlived its etcd lease");
    cr_assert_eq(t_queued(t), 0, "the stopped reader lost its place");
    cr_assert_geq(t_now() - t0, 1500 * MS, "its key went %llu ms after it stopped",
                  (unsigned long long)((t_now() - t0) / MS));

    cr_assert_eq(kill(p, SIGCONT), 0);
    end = t_now() + 15 * SEC;
    while (keys_named('r', k2, sizeof k2) < 1 && t_now() < end) {
        writer_alone(t, h);
        t_sleep_ns(5 * MS);
    }
    cr_assert_eq(keys_of('r'), 1, "the resumed reader queued again");
    cr_assert_str_neq(k2, k1, "under a new key (a new etcd lease): a new place");
    cr_assert_eq(t_queued(t), 1);
    /* Queued again, it stays out while the writer holds. */
    end = t_now() + 700 * MS;
    while (t_now() < end) {
        writer_alone(t, h);
        cr_assert_eq(waitpid(p, NULL, WNOHANG), 0, "the reader returned while the writer holds");
        t_sleep_ns(20 * MS);
    }

    cr_assert_eq(shl_release(t, "L", "W", h), SHL_OK);
    uint64_t res[3];
    cr_assert_eq(read(fds[0], res, sizeof res), (ssize_t)sizeof res, "the reader's answer");
    close(fds[0]);
    cr_assert_eq(t_wait(p), 0);
    cr_assert_eq((int)(int64_t)res[0], SHL_OK, "the resumed reader: %s",
                 shl_strerror((int)(int64_t)res[0]));
    cr_assert_eq(res[1], h + 1, "its own token, the next one");
    cr_assert_eq(res[2], h, "its gen is the writer's token");
    shl_lease_info in;
    one_kind(t, &in);
    cr_assert_eq(in.shared, 1, "the reader holds L shared");
    cr_assert_eq(in.state, SHL_STATE_FREE, "and nobody exclusively");
    cr_assert_eq(keys_of('r'), 0, "the reader left the queue");
    cr_assert_eq(shl_release(t, "L", "sleeper", res[1]), SHL_OK);
    down(t);
}

/* (4) A timeout is SHL_ETIMEDOUT and leaves no key: the reader's waiter key
 * goes at once (a writer queued behind it does not wait for its ttl), and
 * timeout 0 tries once without queueing. */
Test(etcd_shared_wait, timeout_leaves_no_key)
{
    shl_table *t = up();
    uint64_t h, x, g;
    cr_assert_eq(shl_acquire(t, "L", "holder", 30 * SEC, &h), SHL_OK);
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_shared_wait(t, "L", "r", 30 * SEC, 0, &x, &g), SHL_ETIMEDOUT);
    cr_assert_eq(t_queued(t), 0, "timeout 0 does not queue");
    long k0 = kv_requests();
    cr_assert_eq(shl_acquire_shared_wait(t, "L", "r", 30 * SEC, 1500 * MS, &x, &g), SHL_ETIMEDOUT);
    uint64_t took = t_now() - t0;
    long k1 = kv_requests();
    cr_assert(took >= 1500 * MS && took < 4 * SEC, "waited %llu ms",
              (unsigned long long)(took / MS));
    cr_assert(k1 - k0 <= 10, "%ld requests in a 1.5 s wait: polling, not watching", k1 - k0);
    cr_assert_eq(keys_of('r'), 0, "no waiter key left behind");
    cr_assert_eq(t_queued(t), 0);

    /* A reader that times out ahead of a writer frees its place at once. */
    struct t_waiter r = {.name = url, .owner = "r", .shared = 1, .timeout_ns = 2 * SEC},
                    w = {.name = url, .owner = "W", .shared = 0, .timeout_ns = 60 * SEC};
    t_waiter_start(&r, t, 1);
    t_waiter_start(&w, t, 2);
    cr_assert(t_waiter_done_within(&r, 10 * SEC));
    cr_assert_eq(r.rc, SHL_ETIMEDOUT);
    cr_assert_eq(keys_of('r'), 0, "the timed-out reader's key is gone");
    cr_assert_eq(t_queued(t), 1, "the writer is still queued");
    uint64_t t1 = t_now();
    cr_assert_eq(shl_release(t, "L", "holder", h), SHL_OK);
    cr_assert(t_waiter_done_within(&w, 10 * SEC));
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert(w.done_at - t1 < 1500 * MS, "the writer waited %llu ms for a reader that had left",
              (unsigned long long)((w.done_at - t1) / MS));
    cr_assert_eq(w.token, h + 1);
    cr_assert_eq(shl_release(t, "L", "W", w.token), SHL_OK);
    t_waiter_finish(&r);
    t_waiter_finish(&w);
    cr_assert_eq(keys_of('r') + keys_of('w'), 0);
    down(t);
}

/* A reader that finds every shared entry taken (or its owner among them)
 * waits, watching the shared holders' keys, and goes in when one goes. */
Test(etcd_shared_wait, reader_waits_for_a_shared_entry)
{
    shl_table *t = up();
    uint64_t tok[SHL_SHARED_MAX], g;
    char o[16];
    for (int i = 0; i < SHL_SHARED_MAX; i++) {
        snprintf(o, sizeof o, "r-%d", i);
        cr_assert_eq(shl_acquire_shared(t, "L", o, 30 * SEC, &tok[i], &g), SHL_OK, "%s", o);
    }
    struct t_waiter r = {.name = url, .owner = "one-more", .shared = 1, .timeout_ns = 30 * SEC},
                    same = {.name = url, .owner = "r-0", .shared = 1, .timeout_ns = 30 * SEC};
    t_waiter_start(&r, t, 1);
    t_waiter_start(&same, t, 2);
    t_sleep_ns(500 * MS);
    cr_assert(!atomic_load(&r.done) && !atomic_load(&same.done));
    cr_assert_eq(shl_release(t, "L", "r-5", tok[5]), SHL_OK);
    cr_assert(t_waiter_done_within(&r, 10 * SEC), "a freed entry lets the waiting reader in");
    cr_assert_eq(r.rc, SHL_OK);
    cr_assert_eq(r.token, SHL_SHARED_MAX + 1);
    cr_assert(!atomic_load(&same.done), "r-0 still holds it shared");
    cr_assert_eq(shl_release(t, "L", "r-0", tok[0]), SHL_OK);
    cr_assert(t_waiter_done_within(&same, 10 * SEC));
    cr_assert_eq(same.rc, SHL_OK);
    cr_assert_eq(same.token, SHL_SHARED_MAX + 2);
    t_waiter_finish(&r);
    t_waiter_finish(&same);
    down(t);
}

/* shl_check knows a reader's waiter key ("r/<lease> <16 hex>", on an etcd
 * lease) and reports one that is not on a lease or not of that form;
 * shl_unlink removes them with the table's other records. */
Test(etcd_shared_wait, check_and_unlink_know_reader_waiter_keys)
{
    shl_table *t = up();
    uint64_t h;
    cr_assert_eq(shl_acquire(t, "L", "holder", 30 * SEC, &h), SHL_OK);
    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    etc_client *e = NULL;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    int64_t id, got;
    cr_assert_eq(etc_lease_grant(e, 30, &id, &got), ETC_OK);
    const char *ok = "rw/r/L 00000000000000ab", *loose = "rw/r/L 00000000000000cd",
               *odd = "rw/r/L 12";
    cr_assert_eq(etc_put(e, ok, strlen(ok), "", 0, id, NULL), ETC_OK);
    cr_assert_eq(shl_check(t, report, NULL), SHL_OK, "a queued reader's key is a record");
    cr_assert_eq(t_queued(t), 1, "and counts as a waiter");
    cr_assert_eq(etc_put(e, loose, strlen(loose), "", 0, 0, NULL), ETC_OK);
    cr_assert_eq(etc_put(e, odd, strlen(odd), "", 0, id, NULL), ETC_OK);
    int problems = 0;
    cr_assert_eq(shl_check(t, count_problem, &problems), SHL_ECORRUPT);
    cr_assert_eq(problems, 2, "the key on no etcd lease and the malformed one");
    shl_close(t);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    cr_assert_eq(keys_of('r'), 0, "unlink removed the readers' waiter keys");
    etc_close(e);
    etcd_cluster_stop(&CL);
}
