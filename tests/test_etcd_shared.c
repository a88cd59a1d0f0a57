/*
 * tests/test_etcd_shared.c - shared (reader) leases on etcd tables, etcd
 * enforcing them: readers share, a writer is refused while a reader is
 * valid and a reader while a writer is, one token counter, gen, release of
 * one reader, revoke ends all, SHL_SHARED_MAX, a queued writer is not
 * starved, a killed reader's hold ends at its ttl, a reader paused past its
 * expiry neither blocks a writer nor renews after resuming, shl_inspect()
 * lists the shared holders (the waiting of
 * readers: tests/test_etcd_shared_wait.c). Against real
 * etcd members started by tests/etcd_cluster.c.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;
static char url[256];

static shl_table *up(void)
{
    return t_etcd_up(&CL, "readers", 32, url, sizeof url);
}

static void down(shl_table *t)
{
    t_etcd_down(&CL, t, 1);
}

static int set_v(void *buf, size_t *len, size_t cap, void *arg)
{
    (void)cap;
    (void)arg;
    memcpy(buf, "upd", 3);
    *len = 3;
    return 0;
}

/* S1-S3 and the one counter: readers share, each with its own token from
 * the counter writers use; a writer is refused while any reader is valid
 * and told who; a reader is refused while the writer is valid; gen is the
 * last exclusive acquisition's token; a reader cannot write. */
Test(etcd_shared, readers_share_writers_exclude)
{
    shl_table *t = up();
    uint64_t a, b, g = 99, w, x = 7;
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 10 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(a, 1);
    cr_assert_eq(g, 0, "no exclusive acquisition yet");
    cr_assert_eq(shl_acquire_shared(t, "L", "r-B", 10 * SEC, &b, &g), SHL_OK);
    cr_assert_eq(b, 2, "one counter, +1 per acquisition");
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 10 * SEC, &x, &g), SHL_EBUSY,
                 "owners differ among the shared holders");
    cr_assert_eq(x, 7);
    shl_lease_info h;
    memset(&h, 0xff, sizeof h);
    cr_assert_eq(shl_acquire_ex(t, "L", "W", 10 * SEC, &x, &h), SHL_EBUSY, "readers hold");
    cr_assert_eq(x, 7, "no token on refusal");
    cr_assert_eq(h.shared, 2);
    cr_assert(strcmp(h.owner, "r-A") == 0 || strcmp(h.owner, "r-B") == 0, "owner %s", h.owner);
    cr_assert(h.remaining_ns > 0 && h.remaining_ns <= 10 * SEC);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.shared, 2);
    cr_assert_eq(in.token, 2);

    /* Release of one reader leaves the other, which still blocks. */
    cr_assert_eq(shl_release(t, "L", "r-A", a), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "r-A", a), SHL_ELOST, "released already");
    cr_assert_eq(shl_renew(t, "L", "r-B", b, 10 * SEC), SHL_OK, "the other stays");
    cr_assert_eq(shl_acquire(t, "L", "W", 10 * SEC, &x), SHL_EBUSY, "r-B still holds");
    cr_assert_eq(shl_write(t, "L", "r-B", b, "r", 1), SHL_ELOST, "a reader cannot write");
    cr_assert_eq(shl_update(t, "L", "r-B", b, set_v, NULL), SHL_ELOST);
    cr_assert_eq(shl_read(t, "L", &x, sizeof x, NULL, NULL), SHL_OK);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.value_token, 0, "nothing was written");
    cr_assert_eq(shl_release(t, "L", "r-B", b), SHL_OK);

    cr_assert_eq(shl_acquire(t, "L", "W", 10 * SEC, &w), SHL_OK, "no reader left");
    cr_assert_eq(w, 3);
    memset(&h, 0, sizeof h);
    cr_assert_eq(shl_acquire_shared_ex(t, "L", "r-C", 10 * SEC, &x, &g, &h), SHL_EBUSY,
                 "the writer holds");
    cr_assert_str_eq(h.owner, "W");
    cr_assert_eq(h.token, w);
    cr_assert_eq(h.shared, 0);
    cr_assert_eq(shl_write(t, "L", "W", w, "w3", 2), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "W", w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "r-C", 10 * SEC, &x, &g), SHL_OK);
    cr_assert_eq(x, 4);
    cr_assert_eq(g, w, "gen: the last exclusive acquisition's token");
    cr_assert_eq(shl_write(t, "L", "r-C", x, "no", 2), SHL_ELOST);
    char v[8];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(t, "L", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 2 && memcmp(v, "w3", 2) == 0 && vt == w, "the writer's value stays");
    down(t);
}

/* The exclusive acquire's txn itself compares the lease's shared range: a
 * shared holder record put without moving the counter (so that this
 * handle's guess of the token is right and no other compare fails) still
 * refuses it. */
Test(etcd_shared, exclusive_txn_compares_the_shared_range)
{
    shl_table *t = up();
    uint64_t w, x;
    cr_assert_eq(shl_acquire(t, "L", "W", 30 * SEC, &w), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "W", w), SHL_OK);
    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    etc_client *e = NULL;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    int64_t id, got;
    cr_assert_eq(etc_lease_grant(e, 30, &id, &got), ETC_OK);
    const char *k = "readers/s/L 1", *v = "1 planted";
    cr_assert_eq(etc_put(e, k, strlen(k), v, strlen(v), id, NULL), ETC_OK);
    shl_lease_info h;
    cr_assert_eq(shl_acquire_ex(t, "L", "W", 30 * SEC, &x, &h), SHL_EBUSY);
    cr_assert_eq(h.shared, 1);
    cr_assert_str_eq(h.owner, "planted");
    cr_assert_eq(etc_lease_revoke(e, id), ETC_OK);
    etc_close(e);
    cr_assert_eq(shl_acquire(t, "L", "W", 30 * SEC, &x), SHL_OK, "gone with its etcd lease");
    cr_assert_eq(x, w + 1);
    down(t);
}

/* Renew by (owner, token): the same ttl (a keep-alive) and a new one (the
 * record moves to a new etcd lease); a wrong owner or token is refused. */
Test(etcd_shared, renew_by_owner_and_token)
{
    shl_table *t = up();
    uint64_t a, g, x;
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 2 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(shl_renew(t, "L", "r-B", a, 2 * SEC), SHL_ELOST, "another owner");
    cr_assert_eq(shl_renew(t, "L", "r-A", a + 1, 2 * SEC), SHL_ELOST, "another token");
    cr_assert_eq(shl_renew(t, "L", "r-A", a, 2 * SEC), SHL_OK);
    cr_assert_eq(shl_renew(t, "L", "r-A", a, 30 * SEC), SHL_OK, "a new ttl");
    shl_lease_info h;
    cr_assert_eq(shl_acquire_ex(t, "L", "W", SEC, &x, &h), SHL_EBUSY);
    cr_assert(h.remaining_ns > 10 * SEC, "the new ttl holds (remaining %llu)",
              (unsigned long long)h.remaining_ns);
    t_sleep_ns(3 * SEC);
    cr_assert_eq(shl_acquire(t, "L", "W", SEC, &x), SHL_EBUSY, "past the old ttl, still held");
    cr_assert_eq(shl_renew(t, "L", "r-A", a, 30 * SEC), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "r-A", a), SHL_OK);
    cr_assert_eq(shl_renew(t, "L", "r-A", a, 30 * SEC), SHL_ELOST, "released");
    down(t);
}

/* S4: revoke ends every holder; the counter goes on. */
Test(etcd_shared, revoke_ends_every_reader)
{
    shl_table *t = up();
    uint64_t tok[3], g, x;
    const char *who[3] = {"r-0", "r-1", "r-2"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shl_acquire_shared(t, "L", who[i], 30 * SEC, &tok[i], &g), SHL_OK);
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shl_renew(t, "L", who[i], tok[i], 30 * SEC), SHL_ELOST, "%s ended", who[i]);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.shared, 0);
    cr_assert_eq(shl_acquire(t, "L", "W", 30 * SEC, &x), SHL_OK);
    cr_assert_eq(x, 4);
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK, "the writer too");
    cr_assert_eq(shl_revoke(t, "L"), SHL_ENOENT, "no holder left");
    cr_assert_eq(shl_acquire_shared(t, "L", "r-0", 30 * SEC, &x, &g), SHL_OK);
    cr_assert_eq(x, 5);
    cr_assert_eq(g, 4);
    down(t);
}

/* SHL_SHARED_MAX shared holders per lease; beyond, SHL_EBUSY until one goes. */
Test(etcd_shared, at_most_shared_max)
{
    shl_table *t = up();
    uint64_t tok[SHL_SHARED_MAX], g, x;
    char o[16];
    for (int i = 0; i < SHL_SHARED_MAX; i++) {
        snprintf(o, sizeof o, "r-%d", i);
        cr_assert_eq(shl_acquire_shared(t, "L", o, 30 * SEC, &tok[i], &g), SHL_OK, "%s", o);
    }
    shl_lease_info h;
    cr_assert_eq(shl_acquire_shared_ex(t, "L", "one-more", 30 * SEC, &x, &g, &h), SHL_EBUSY);
    cr_assert_eq(h.shared, SHL_SHARED_MAX);
    cr_assert_eq(shl_release(t, "L", "r-5", tok[5]), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "one-more", 30 * SEC, &x, &g), SHL_OK);
    cr_assert_eq(x, SHL_SHARED_MAX + 1);
    down(t);
}

/* A writer waiting in shl_acquire_wait() (a child) is not starved: while
 * it is queued no reader gets in, and it gets the lease when the readers
 * it waits for go. */
static int writer(void *arg)
{
    (void)arg;
    shl_table *t;
    uint64_t w;
    if (shl_open(url, NULL, &t) != SHL_OK)
        return 100;
    int rc = shl_acquire_wait(t, "L", "W", 30 * SEC, 60 * SEC, &w);
    shl_close(t);
    return rc == SHL_OK ? (int)w : 200 - rc;
}

Test(etcd_shared, queued_writer_is_not_starved)
{
    shl_table *t = up();
    uint64_t a, g, x;
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 30 * SEC, &a, &g), SHL_OK);
    pid_t p = t_fork(writer, NULL);
    shl_lease_info in = {0};
    uint64_t end = t_now() + 20 * SEC;
    while (t_now() < end && (shl_stat(t, "L", &in) != SHL_OK || in.waiters == 0))
        t_sleep_ns(20 * MS);
    cr_assert_eq(in.waiters, 1, "the writer queued");
    cr_assert_eq(shl_acquire_shared(t, "L", "r-B", 30 * SEC, &x, &g), SHL_EBUSY,
                 "no reader ahead of a queued writer");
    t_sleep_ns(500 * MS);
    cr_assert_eq(shl_release(t, "L", "r-A", a), SHL_OK);
    cr_assert_eq(t_wait(p), 2, "the writer got the next token");
    down(t);
}

/* A reader in a child: acquires shared, reports its token, waits for a
 * byte, then renews and exits with that renew's code. */
static int fds[2], go[2];

static int reader(void *arg)
{
    (void)arg;
    shl_table *t;
    uint64_t tok, g;
    if (shl_open(url, NULL, &t) != SHL_OK ||
        shl_acquire_shared(t, "L", "reader", 2 * SEC, &tok, &g) != SHL_OK)
        return 100;
    if (write(fds[1], &tok, sizeof tok) != (ssize_t)sizeof tok)
        return 101;
    char c;
    if (read(go[0], &c, 1) != 1)
        return 102;
    return -shl_renew(t, "L", "reader", tok, 2 * SEC);
}

/* A killed reader's hold disappears at its ttl (its etcd lease expires):
 * a writer is refused before, and gets the lease after. */
Test(etcd_shared, killed_reader_ends_at_its_ttl)
{
    shl_table *t = up();
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t p = t_fork(reader, NULL);
    uint64_t r, w;
    cr_assert_eq(read(fds[0], &r, sizeof r), (ssize_t)sizeof r);
    uint64_t t0 = t_now();
    cr_assert_eq(kill(p, SIGKILL), 0);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    cr_assert_eq(shl_acquire(t, "L", "W", 30 * SEC, &w), SHL_EBUSY, "the dead reader's hold");
    uint64_t end = t0 + 15 * SEC;
    int rc;
    while ((rc = shl_acquire(t, "L", "W", 30 * SEC, &w)) == SHL_EBUSY && t_now() < end)
        t_sleep_ns(50 * MS);
    cr_assert_eq(rc, SHL_OK, "the hold ended with its etcd lease");
    cr_assert_eq(w, r + 1);
    cr_assert(t_now() - t0 >= SEC, "not before its ttl");
    down(t);
}

/* The etcd leases the member has granted so far (its own counter). */
static long grants(void)
{
    return t_etcd_metric(&CL, "sed -n 's/^etcd_debugging_lease_granted_total //p'");
}

/* The enforcement point: a reader paused past its expiry does not block a
 * writer (which waits in the queue, watching the readers' keys: no
 * polling, so a handful of etcd leases granted, not one per try), and its
 * renew after resuming is refused by etcd. */
Test(etcd_shared, paused_reader_is_refused_by_etcd)
{
    shl_table *t = up();
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t p = t_fork(reader, NULL);
    uint64_t r, w;
    cr_assert_eq(read(fds[0], &r, sizeof r), (ssize_t)sizeof r);
    cr_assert_eq(kill(p, SIGSTOP), 0);
    cr_assert_eq(t_wait_stopped(p), 0);
    long g0 = grants();
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_wait(t, "L", "W", 30 * SEC, 20 * SEC, &w), SHL_OK);
    cr_assert(t_now() - t0 >= SEC, "the writer waited for the reader's expiry");
    long g1 = grants();
    cr_assert(g1 - g0 <= 6, "%ld etcd leases granted while waiting: polling", g1 - g0);
    cr_assert_eq(w, r + 1);
    cr_assert_eq(kill(p, SIGCONT), 0);
    cr_assert_eq(write(go[1], "g", 1), 1);
    cr_assert_eq(t_wait(p), -SHL_ELOST, "the paused reader's renew was refused");
    cr_assert_eq(shl_write(t, "L", "W", w, "w", 1), SHL_OK, "the writer holds on");
    down(t);
}

/* shl_guard_shared() is not on etcd; shl_acquire_shared_wait() is, and a
 * reader with no writer in its way goes in at once. */
static void noop(void *arg)
{
    (void)arg;
}

Test(etcd_shared, refusals)
{
    shl_table *t = up();
    uint64_t a, g;
    cr_assert_eq(shl_acquire_shared(t, "L", "r-A", 10 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(shl_guard_shared(t, "L", "r-A", a, noop, NULL), SHL_ENOTSUP);
    cr_assert_eq(shl_acquire_shared_wait(t, "L", "r-B", 10 * SEC, SEC, &a, &g), SHL_OK);
    cr_assert_eq(a, 2);
    cr_assert_eq(shl_acquire_shared(t, "bad name", "r-A", SEC, &a, &g), SHL_EINVAL);
    down(t);
}

/* shl_inspect() and shl_foreach() on an etcd table list the shared holders
 * (owner, token, etcd's remaining time), as on a segment, and token_last is
 * the lease's last token of either kind. */
static int find_rd(void *arg, const shl_lease_detail *d)
{
    if (strcmp(d->name, "rd") == 0)
        *(shl_lease_detail *)arg = *d;
    return 0;
}

Test(etcd_shared, inspect_lists_shared_holders)
{
    shl_table *t = up();
    uint64_t a, b, w, g;
    cr_assert_eq(shl_acquire(t, "rd", "W", 30 * SEC, &w), SHL_OK);
    cr_assert_eq(shl_release(t, "rd", "W", w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "rd", "r-A", 30 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "rd", "r-B", 20 * SEC, &b, &g), SHL_OK);
    static shl_lease_detail d, f;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) {
            cr_assert_eq(shl_inspect(t, "rd", &d), SHL_OK);
        } else {
            memset(&d, 0, sizeof d);
            cr_assert_eq(shl_foreach(t, find_rd, &d), SHL_OK);
            cr_assert_str_eq(d.name, "rd");
        }
        cr_assert_eq(d.info.state, SHL_STATE_FREE, "no exclusive holder");
        cr_assert_eq(d.info.shared, 2);
        cr_assert_eq(d.token_last, b, "the last token of either kind");
        cr_assert_eq(d.nshared, 2, "pass %d: both readers listed", pass);
        uint64_t seen = 0;
        for (uint32_t i = 0; i < d.nshared; i++) {
            const shl_shared_holder *h = &d.shared[i];
            int isa = strcmp(h->owner, "r-A") == 0;
            cr_assert(isa || strcmp(h->owner, "r-B") == 0, "owner %s", h->owner);
            seen |= isa ? 1 : 2;
            cr_assert_eq(h->token, isa ? a : b);
            cr_assert_eq(h->state, SHL_STATE_HELD);
            uint64_t ttl = isa ? 30 * SEC : 20 * SEC;
            cr_assert(h->remaining_ns > 0 && h->remaining_ns <= ttl, "%s: %llu ns left", h->owner,
                      (unsigned long long)h->remaining_ns);
            cr_assert_eq(h->expiry_ns, d.info.now_ns + h->remaining_ns);
            cr_assert_eq(h->since_ns, 0, "etcd records no acquisition time");
            cr_assert_eq(h->pid, 0);
        }
        cr_assert_eq(seen, 3);
    }
    cr_assert_eq(shl_release(t, "rd", "r-A", a), SHL_OK);
    cr_assert_eq(shl_inspect(t, "rd", &f), SHL_OK);
    cr_assert_eq(f.nshared, 1, "a released reader is not listed");
    cr_assert_str_eq(f.shared[0].owner, "r-B");
    cr_assert_eq(f.info.shared, 1);
    cr_assert_eq(shl_release(t, "rd", "r-B", b), SHL_OK);
    down(t);
}
