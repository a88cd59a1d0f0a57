/*
 * tests/test_renewer.c - a renewer whose process is stopped (SIGSTOP):
 * flagged as stalled while its lease is still valid, and, stopped past
 * expiry, reporting the loss after it resumes, with its writes refused both
 * locally and by the segment.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

struct stall {
    const char *table;
    uint64_t ttl, interval, margin;
    _Atomic int ready;
    _Atomic uint64_t token;
    _Atomic int callbacks;
    _Atomic int step; /* how far the child got: for the failure message */
};

static _Atomic int callbacks;

static void count_loss(void *arg, int reason)
{
    (void)arg;
    (void)reason;
    atomic_fetch_add(&callbacks, 1);
}

/* Holds the lease with a renewer and writes through it every few ms until
 * a write is refused; then checks how the loss was reported. Exit 0 when all
 * is as it must be, else the number of the failed check. */
static int stalled_child(void *p)
{
    struct stall *a = p;
    shl_table *t;
    if (shl_open(a->table, NULL, &t) != SHL_OK)
        return 1;
    uint64_t tok;
    if (shl_acquire(t, "L", "stalled", a->ttl, &tok) != SHL_OK)
        return 2;
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    o.interval_ns = a->interval;
    o.margin_ns = a->margin;
    o.on_loss = count_loss;
    shl_renewer *r;
    if (shl_renewer_start(t, "L", "stalled", tok, a->ttl, &o, &r) != SHL_OK)
        return 3;
    atomic_store(&a->token, tok);
    atomic_store(&a->ready, 1);
    if (shl_renewer_write(r, "ok", 2) != SHL_OK)
        return 14;
    /* Notice the stop by the gap in our own clock readings, without touching
     * the segment (a stop inside its lock would hold up the parent). */
    uint64_t last = t_now();
    for (;;) {
        t_sleep_ns(2 * MS);
        uint64_t n = t_now();
        if (n - last > a->ttl)
            break;
        last = n;
    }
    atomic_store(&a->step, 1);
    int rc = shl_renewer_write(r, "ok", 2); /* the first thing after resuming */
    if (rc != SHL_ELOST)
        return 4;
    /* Refused locally: the deadline passed while stopped, so the renewer
     * never got to renew, and the loss is a missed deadline. */
    int why = shl_renewer_lost(r);
    if (why != SHL_LOSS_DEADLINE)
        return 5;
    /* Refused at the segment too: the token is no longer valid there. */
    if (shl_write(t, "L", "stalled", tok, "late", 4) != SHL_ELOST)
        return 6;
    struct pollfd pf = {shl_renewer_fd(r), POLLIN, 0};
    if (poll(&pf, 1, 10000) != 1)
        return 7;
    t_sleep_ns(200 * MS); /* room for a second report, were there one */
    uint64_t v = 0;
    if (read(pf.fd, &v, sizeof v) != (ssize_t)sizeof v || v != 1)
        return 8;
    if (read(pf.fd, &v, sizeof v) >= 0 || errno != EAGAIN)
        return 9;
    if (atomic_load(&callbacks) != 1)
        return 10;
    if (shl_renewer_write(r, "ok", 2) != SHL_ELOST || shl_renewer_lost(r) != why)
        return 11;
    if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_ELOST)
        return 12;
    if (atomic_load(&callbacks) != 1)
        return 13;
    shl_close(t);
    return 0;
}

static struct stall *shared_stall(const char *table)
{
    struct stall *a =
        mmap(NULL, sizeof *a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(a != MAP_FAILED);
    memset(a, 0, sizeof *a);
    a->table = table;
    return a;
}

static int is_ready(void *p)
{
    return atomic_load(&((struct stall *)p)->ready);
}

Test(renewer, stopped_past_expiry_reports_loss_after_resume)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rstall"), 4, 16, SHL_CLOCK_MONOTONIC);
    struct stall *a = shared_stall(name);
    a->ttl = 400 * MS;
    a->interval = 100 * MS;
    a->margin = 100 * MS;
    pid_t p = t_fork(stalled_child, a);
    cr_assert(t_until(is_ready, a, 10 * SEC), "child did not start");
    t_sleep_ns(50 * MS);
    kill(p, SIGSTOP);
    cr_assert_eq(t_wait_stopped(p), 0);
    t_sleep_ns(a->ttl + 500 * MS); /* well past any expiry it secured */
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_EXPIRED, "state %d", in.state);
    /* Another holder takes it while the stalled one sleeps. */
    uint64_t tok2;
    cr_assert_eq(shl_acquire(t, "L", "next", 30 * SEC, &tok2), SHL_OK);
    cr_assert_eq(tok2, a->token + 1);
    kill(p, SIGCONT);
    int st = t_wait(p);
    cr_assert_eq(st, 0, "stalled child failed check %d (got to step %d)", st, a->step);
    /* None of its late writes landed. */
    char buf[8];
    size_t len;
    uint64_t wtok;
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, &wtok), SHL_OK);
    cr_assert_eq(wtok, a->token);
    cr_assert_eq(len, 2);
    cr_assert_eq(memcmp(buf, "ok", 2), 0);
    shl_close(t);
    shl_unlink(name);
}

static int holding_child(void *p)
{
    struct stall *a = p;
    shl_table *t;
    uint64_t tok;
    if (shl_open(a->table, NULL, &t) != SHL_OK || shl_acquire(t, "L", "slow", a->ttl, &tok))
        return 1;
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    o.interval_ns = a->interval;
    shl_renewer *r;
    if (shl_renewer_start(t, "L", "slow", tok, a->ttl, &o, &r) != SHL_OK)
        return 2;
    atomic_store(&a->token, tok);
    atomic_store(&a->ready, 1);
    for (;;)
        pause();
}

/* A child holding "L" in `name` with a 20 s ttl renewed every `interval`. */
static pid_t start_holder(const char *name, uint64_t interval, struct stall **out)
{
    struct stall *a = shared_stall(name);
    a->ttl = 20 * SEC;
    a->interval = interval;
    pid_t p = t_fork(holding_child, a);
    cr_assert(t_until(is_ready, a, 10 * SEC), "child did not start");
    *out = a;
    return p;
}

Test(renewer, stopped_renewer_flagged_while_lease_valid)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rbeat"), 4, 16, SHL_CLOCK_MONOTONIC);
    struct stall *a;
    pid_t p = start_holder(name, 100 * MS, &a);
    shl_heartbeat hb;
    cr_assert_eq(shl_heartbeat_get(t, "L", &hb), SHL_OK);
    cr_assert_eq(hb.token, a->token);
    cr_assert_eq(hb.interval_ns, a->interval);
    kill(p, SIGSTOP);
    cr_assert_eq(t_wait_stopped(p), 0);
    t_sleep_ns(5 * a->interval);
    cr_assert_eq(shl_heartbeat_get(t, "L", &hb), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "the lease must still be valid");
    cr_assert(hb.stalled, "a stopped renewer not flagged (age %llu)",
              (unsigned long long)hb.age_ns);
    cr_assert_geq(hb.age_ns, 4 * a->interval);
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "%s ls %s", t_tool(), name);
    cr_assert_eq(t_run(cmd, &out), 0);
    cr_assert(strstr(out, "renewer stalled"), "ls does not flag it:\n%s", out);
    free(out);
    kill(p, SIGCONT);
    kill(p, SIGKILL);
    t_wait(p);
    shl_close(t);
    shl_unlink(name);
}

Test(renewer, running_renewer_not_flagged)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rlive"), 4, 16, SHL_CLOCK_MONOTONIC);
    struct stall *a;
    pid_t p = start_holder(name, 500 * MS, &a);
    shl_heartbeat hb;
    int stalled = 0;
    for (int i = 0; i < 25; i++) {
        cr_assert_eq(shl_heartbeat_get(t, "L", &hb), SHL_OK);
        stalled |= hb.stalled;
        t_sleep_ns(100 * MS);
    }
    /* Beats every 500 ms; stalled means two missed (1 s+ late): only a very
     * overloaded machine could make this fail. */
    cr_assert_eq(stalled, 0);
    cr_assert_eq(hb.token, a->token);
    kill(p, SIGKILL);
    t_wait(p);
    shl_close(t);
    shl_unlink(name);
}

/* A revoke that lands as the renewer's thread starts is seen at once, not
 * at the next renewal (ttl / 3 later): the thread's first sleep compares
 * the lease's wake word as it was before the renewer proved its lease. */
Test(renewer, a_revoke_just_after_the_start_is_seen_at_once)
{
    t_guard(120);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rnwrev"), 4, 16, SHL_CLOCK_MONOTONIC);
    for (int i = 0; i < 10; i++) {
        uint64_t tok;
        cr_assert_eq(shl_acquire(t, "L", "holder", 30 * SEC, &tok), SHL_OK);
        shl_renewer *r;
        cr_assert_eq(shl_renewer_start(t, "L", "holder", tok, 30 * SEC, NULL, &r), SHL_OK);
        cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
        struct pollfd p = {.fd = shl_renewer_fd(r), .events = POLLIN};
        int n = poll(&p, 1, 3000);
        cr_assert_eq(n, 1, "try %d: the revoke was not seen within 3 s (the interval is 10 s)", i);
        cr_assert_eq(shl_renewer_lost(r), SHL_LOSS_REFUSED);
        cr_assert_eq(shl_renewer_stop(r, SHL_RENEWER_RELEASE), SHL_ELOST);
    }
    shl_close(t);
    shl_unlink(name);
}
