/*
 * tests/test_etcd_budget.c - the etcd timing budget (lib/kind_etcd/etcd_kind.h): one
 * member of three stopped (SIGSTOP) for longer than every ttl in play costs
 * neither a holder nor a waiter anything.
 *
 * The member stopped is the one the handle under test talks to: a
 * follower, then the leader (an election, after which etcd extends every
 * lease by its ttl; the calls meanwhile meet "no leader" on the others and
 * come round to the stopped one again). The handles under test have a 10 s
 * deadline, a value a user may pick: the budget must not depend on it.
 * Before the budget, a keep-alive sent to the stopped member waited half of
 * that deadline (a read a third) before going elsewhere, longer than the
 * 3 s ttls here, so the holder's lease expired under its renewer and the
 * first waiter's place went to the second.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

#define TTL        (3 * SEC) /* holders'; the waiters' keys have 3 s too */
#define STALL      (5 * SEC) /* longer than both */
#define TIMEOUT_MS 10000u    /* the handles' deadline */

static struct etcd_cluster cl;
static int leader, x, y; /* x: stopped; y: the other follower */
static char xfirst[256]; /* endpoints with x first */
static char yxl[256];    /* y, x, leader: a watch on y, the calls then on x */
static char no_x[256];   /* the leader and y */
static char lfirst[256]; /* the leader first */
static char no_l[256];   /* x and y */
static char ylx[256];    /* y, the leader, x: a watch on y, the calls on the leader */

static void down(void)
{
    for (int i = 0; i < cl.n; i++)
        if (cl.m[i].paused)
            etcd_cluster_resume(&cl, i);
    etcd_cluster_stop(&cl);
}

static void three(void)
{
    t_guard(150);
    cr_assert_eq(etcd_cluster_start(&cl, 3, 0), 0, "%s", cl.err);
    leader = etcd_cluster_leader(&cl, 10000);
    cr_assert_geq(leader, 0, "a leader: %s", cl.err);
    x = (leader + 1) % 3;
    y = (leader + 2) % 3;
    const char *ex = etcd_cluster_endpoint(&cl, x), *ey = etcd_cluster_endpoint(&cl, y);
    const char *el = etcd_cluster_endpoint(&cl, leader);
    snprintf(xfirst, sizeof xfirst, "%s,%s,%s", ex, ey, el);
    snprintf(yxl, sizeof yxl, "%s,%s,%s", ey, ex, el);
    snprintf(no_x, sizeof no_x, "%s,%s", el, ey);
    snprintf(lfirst, sizeof lfirst, "%s,%s,%s", el, ex, ey);
    snprintf(no_l, sizeof no_l, "%s,%s", ex, ey);
    snprintf(ylx, sizeof ylx, "%s,%s,%s", ey, el, ex);
}

/* Opens the table through `endpoints` (also in a child: no assertion). */
static int open_url(const char *endpoints, uint32_t timeout_ms, shl_table **t)
{
    char url[512];
    snprintf(url, sizeof url, "etcd://%s/budget", endpoints);
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = timeout_ms;
    *t = NULL;
    return shl_open(url, &o, t);
}

static shl_table *open_on(const char *endpoints, uint32_t timeout_ms)
{
    shl_table *t;
    int rc = open_url(endpoints, timeout_ms, &t);
    cr_assert_eq(rc, SHL_OK, "open on %s: %s", endpoints, shl_strerror(rc));
    return t;
}

/* A holder whose renewer talks to member v (through `first`, v's endpoint
 * first) keeps its lease while v is stopped for longer than the ttl: no
 * loss reported, nobody (a rival through `others`) gets the lease
 * meanwhile, and its token still writes at the end of the stall. */
static void holder_through_stall(int v, const char *first, const char *others)
{
    shl_table *t = open_on(first, TIMEOUT_MS);
    shl_table *rival = open_on(others, 3000);
    uint64_t tok = 0;
    cr_assert_eq(shl_acquire(t, "L", "holder", TTL, &tok), SHL_OK);
    shl_renewer *r = NULL;
    cr_assert_eq(shl_renewer_start(t, "L", "holder", tok, TTL, NULL, &r), SHL_OK);
    t_sleep_ns(SEC); /* renewing through x */

    cr_assert_eq(etcd_cluster_pause(&cl, v), 0, "%s", cl.err);
    uint64_t t0 = t_now();
    int tries = 0, taken = 0;
    uint64_t rival_tok = 0;
    while (t_now() - t0 < STALL) {
        int rc = shl_acquire(rival, "L", "rival", TTL, &rival_tok);
        tries++;
        if (rc == SHL_OK) {
            taken = 1;
            break;
        }
        /* SHL_EUNAVAIL: no leader yet, when v led. */
        cr_assert(rc == SHL_EBUSY || (rc == SHL_EUNAVAIL && v == leader), "the rival's acquire: %s",
                  shl_strerror(rc));
        t_sleep_ns(250 * MS);
    }
    uint64_t stalled = t_now() - t0;
    cr_log_info("member %d (%s) stopped %.1f s; the rival tried %d times", v,
                v == leader ? "the leader" : "a follower", (double)stalled / 1e9, tries);
    cr_assert_not(taken, "the rival got the lease (token %llu) %.1f s into the stall",
                  (unsigned long long)rival_tok, (double)stalled / 1e9);
    cr_assert_eq(shl_renewer_lost(r), 0, "the renewer reported a loss (%d)", shl_renewer_lost(r));
    int rc = shl_renewer_write(r, "after", 5);
    cr_assert_eq(rc, SHL_OK, "the holder's write after the stall: %s", shl_strerror(rc));
    cr_assert_eq(shl_renewer_stop(r, SHL_RENEWER_RELEASE), SHL_OK);
    /* Resumed last: a resumed leader may revoke what it thinks expired
     * (see waiters_through_stall()). */
    cr_assert_eq(etcd_cluster_resume(&cl, v), 0, "%s", cl.err);
    shl_close(rival);
    shl_close(t);
}

Test(etcd_budget, holder_keeps_its_lease_past_a_stopped_member, .init = three, .fini = down)
{
    holder_through_stall(x, xfirst, no_x);
}

/* The same with the leader stopped: an election, then the new leader
 * extends every lease (etcd's promotion); the holder's renewals go round
 * to it within the budget. */
Test(etcd_budget, holder_keeps_its_lease_past_a_stopped_leader, .init = three, .fini = down)
{
    holder_through_stall(leader, lfirst, no_l);
}

/* The queue of lease L's writers: their keys and create revisions, in
 * queue order, read through the members other than x. */
static size_t queued(etc_client *c, int64_t *revs, size_t cap)
{
    static const char key[] = "budget/w/L ", end[] = "budget/w/L!";
    struct etc_range r = {0};
    int rc = etc_get(c, key, sizeof key - 1, end, sizeof end - 1, 0, 0, &r);
    cr_assert_eq(rc, ETC_OK, "the queue: %s (%s)", etc_strerror(rc), etc_errmsg(c));
    size_t n = 0;
    for (size_t i = 0; i < r.n && n < cap; i++)
        revs[n++] = r.kvs[i].create_rev;
    for (size_t i = 1; i < n; i++) /* insertion sort: queue order */
        for (size_t j = i; j > 0 && revs[j] < revs[j - 1]; j--) {
            int64_t s = revs[j];
            revs[j] = revs[j - 1];
            revs[j - 1] = s;
        }
    etc_range_free(&r);
    return n;
}

static void wait_queued(etc_client *c, size_t n)
{
    int64_t revs[8];
    uint64_t t0 = t_now();
    while (queued(c, revs, 8) < n && t_now() - t0 < 20 * SEC)
        t_sleep_ns(50 * MS);
    cr_assert_eq(queued(c, revs, 8), n, "%zu waiters queued", n);
}

/* A waiter in a child: waits for L, reports its code and token on fd,
 * holds it a moment, releases it. */
static pid_t waiter(const char *endpoints, const char *owner, int fd)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid)
        return pid;
    shl_table *t;
    uint64_t rep[2] = {0, 0};
    int rc = open_url(endpoints, TIMEOUT_MS, &t);
    if (rc == SHL_OK)
        rc = shl_acquire_wait(t, "L", owner, 30 * SEC, 60 * SEC, &rep[1]);
    rep[0] = (uint64_t)(int64_t)rc;
    int ok = write(fd, rep, sizeof rep) == (ssize_t)sizeof rep;
    if (rc == SHL_OK) {
        t_sleep_ns(300 * MS);
        t_any(shl_release(t, "L", owner, rep[1]));
    }
    shl_close(t);
    _exit(ok ? 0 : 1);
}

static void report(int fd, const char *who, int *rc, uint64_t *tok)
{
    uint64_t rep[2];
    cr_assert_eq(read(fd, rep, sizeof rep), (ssize_t)sizeof rep, "%s's report", who);
    *rc = (int)(int64_t)rep[0];
    *tok = rep[1];
}

/* Two queued writers; the first one's calls go to member v (through
 * `first`: its watch is on y, its calls then on the next endpoint, v); v is
 * stopped for longer than the waiters' ttl. The first keeps its place (its
 * key, same create revision) and gets the lease on release, the second
 * (through `others`, as the holder) after it. All of it while v is still
 * stopped: a leader resumed after a stall may revoke the leases it thinks
 * expired, kept alive meanwhile through its successor (etcd issues 12528
 * and 15247, fixed by etcd pull request 16822; etcd 3.4.23 has it, and
 * one run in eight lost the first waiter's key that way after the resume).
 * No client can keep its etcd lease from that revocation; shmlease(3)
 * says so. */
static void waiters_through_stall(int v, const char *first, const char *others)
{
    shl_table *h = open_on(others, 5000);
    etc_client *raw = NULL;
    struct etc_config rc_cfg = {.endpoints = others, .timeout_ms = 5000};
    cr_assert_eq(etc_open(&rc_cfg, &raw), ETC_OK);
    uint64_t tok = 0;
    cr_assert_eq(shl_acquire(h, "L", "holder", 60 * SEC, &tok), SHL_OK);

    int fa[2], fb[2];
    cr_assert_eq(pipe(fa), 0);
    cr_assert_eq(pipe(fb), 0);
    pid_t a = waiter(first, "first", fa[1]);
    wait_queued(raw, 1);
    pid_t b = waiter(others, "second", fb[1]);
    wait_queued(raw, 2);
    int64_t before[2], after[2] = {0, 0};
    cr_assert_eq(queued(raw, before, 2), 2);
    t_sleep_ns(SEC); /* the first waiter's keep-alives and re-checks go to v */

    cr_assert_eq(etcd_cluster_pause(&cl, v), 0, "%s", cl.err);
    t_sleep_ns(STALL);
    size_t n = queued(raw, after, 2);
    cr_log_info("%s stopped; queue before: %lld %lld; after: %zu keys, %lld %lld",
                v == leader ? "the leader" : "a follower", (long long)before[0],
                (long long)before[1], n, (long long)after[0], (long long)after[1]);
    cr_assert_eq(after[0], before[0], "the first waiter kept its place (revision %lld, now %lld)",
                 (long long)before[0], (long long)after[0]);

    cr_assert_eq(shl_release(h, "L", "holder", tok), SHL_OK);
    int ra, rb;
    uint64_t ta, tb;
    report(fa[0], "the first waiter", &ra, &ta);
    report(fb[0], "the second waiter", &rb, &tb);
    cr_assert_eq(t_wait(a), 0);
    cr_assert_eq(t_wait(b), 0);
    cr_assert_eq(etcd_cluster_resume(&cl, v), 0, "%s", cl.err);
    cr_assert_eq(ra, SHL_OK, "the first waiter: %s", shl_strerror(ra));
    cr_assert_eq(rb, SHL_OK, "the second waiter: %s", shl_strerror(rb));
    cr_log_info("tokens: holder %llu, first waiter %llu, second %llu", (unsigned long long)tok,
                (unsigned long long)ta, (unsigned long long)tb);
    cr_assert_eq(ta, tok + 1, "the first waiter got the lease first");
    cr_assert_eq(tb, tok + 2, "the second waiter got it after the first");
    close(fa[0]);
    close(fa[1]);
    close(fb[0]);
    close(fb[1]);
    etc_close(raw);
    shl_close(h);
}

Test(etcd_budget, waiters_keep_their_order_past_a_stopped_member, .init = three, .fini = down)
{
    waiters_through_stall(x, yxl, no_x);
}

Test(etcd_budget, waiters_keep_their_order_past_a_stopped_leader, .init = three, .fini = down)
{
    waiters_through_stall(leader, ylx, no_l);
}
