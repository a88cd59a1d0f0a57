/*
 * tests/threads_renewer.c - the renewer's thread against the caller's:
 * keeping a lease for many ttls, and reporting a loss exactly once through
 * each of the callback, the descriptor and the flag. Plain C, no criterion,
 * so that make check also runs these under ThreadSanitizer.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "threads_cases.h"

#define MS (UINT64_C(1000000))

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 * MS + (uint64_t)ts.tv_nsec;
}

static void nap(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / (1000 * MS)), (long)(ns % (1000 * MS))};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static shl_table *create(char *name, size_t cap, const char *tag)
{
    static _Atomic unsigned n;
    snprintf(name, cap, "shltest-%d-r%u-%s%s", (int)getpid(), atomic_fetch_add(&n, 1), t_run_mark(),
             tag);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 16;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    return shl_open(name, &o, &t) == SHL_OK ? t : NULL;
}

static const char *done(shl_table *t, const char *name, const char *err)
{
    shl_close(t);
    shl_unlink(name);
    return err;
}

struct loss_count {
    _Atomic int calls;
    _Atomic int reason;
};

static void on_loss(void *arg, int reason)
{
    struct loss_count *c = arg;
    atomic_fetch_add(&c->calls, 1);
    atomic_store(&c->reason, reason);
}

/* Waits for the descriptor to become readable, up to 10 s. */
static int fd_fires(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    while ((r = poll(&p, 1, 10000)) < 0 && errno == EINTR)
        ;
    return r == 1;
}

/* The descriptor says 1, once. */
static int fd_said_once(int fd)
{
    uint64_t v = 0;
    if (read(fd, &v, sizeof v) != (ssize_t)sizeof v || v != 1)
        return 0;
    return read(fd, &v, sizeof v) < 0 && errno == EAGAIN;
}

#define TTL (300 * MS)

/* A table with "L" acquired by `owner` and a renewer counting losses in c. */
static shl_table *start_counted(char *name, size_t cap, const char *tag, const char *owner,
                                shl_renewer_options *o, struct loss_count *c, shl_renewer **r,
                                const char **err)
{
    shl_table *t = create(name, cap, tag);
    uint64_t tok;
    *err = NULL;
    if (!t)
        *err = "create";
    else if (shl_acquire(t, "L", owner, TTL, &tok) != SHL_OK)
        *err = "acquire";
    else {
        o->on_loss = on_loss;
        o->arg = c;
        if (shl_renewer_start(t, "L", owner, tok, TTL, o, r) != SHL_OK)
            *err = "renewer start";
    }
    if (*err && t) {
        shl_close(t);
        shl_unlink(name);
    }
    return *err ? NULL : t;
}

const char *tc_renewer_keeps_lease_10x_ttl(void)
{
    char name[96];
    struct loss_count c = {0, 0};
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    shl_renewer *r;
    const char *err;
    shl_table *t = start_counted(name, sizeof name, "keep", "keeper", &o, &c, &r, &err);
    if (!t)
        return err;
    uint64_t tok = shl_renewer_token(r), other;
    uint64_t end = mono() + 11 * TTL;
    while (!err && mono() < end) {
        shl_lease_info in;
        if (shl_stat(t, "L", &in) != SHL_OK || in.state != SHL_STATE_HELD || in.token != tok)
            err = "the lease was not kept";
        else if (shl_acquire(t, "L", "intruder", TTL, &other) != SHL_EBUSY)
            err = "another owner could take the kept lease";
        else if (shl_renewer_lost(r) || shl_renewer_check(r) != SHL_OK)
            err = "loss declared while renewing";
        else if (shl_renewer_write(r, "x", 1) != SHL_OK)
            err = "guarded write refused";
        nap(20 * MS);
    }
    shl_heartbeat hb;
    if (!err && (shl_heartbeat_get(t, "L", &hb) != SHL_OK || hb.token != tok || hb.stalled ||
                 hb.interval_ns != TTL / 3))
        err = "heartbeat not recorded";
    int rc = shl_renewer_stop(r, SHL_RENEWER_RELEASE);
    if (!err && rc != SHL_OK)
        err = "stop and release failed";
    shl_lease_info in;
    if (!err && (shl_stat(t, "L", &in) != SHL_OK || in.state != SHL_STATE_FREE))
        err = "not released by stop";
    if (!err && (shl_heartbeat_get(t, "L", &hb) != SHL_OK || hb.token != 0))
        err = "heartbeat left behind by stop";
    if (!err && atomic_load(&c.calls) != 0)
        err = "callback called without a loss";
    return done(t, name, err);
}

/* Bounded hold: loss at max_hold - margin, reported once each way, then the
 * lease released for others. */
const char *tc_renewer_loss_reported_once_each_way(void)
{
    char name[96];
    struct loss_count c = {0, 0};
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    o.max_hold_ns = 700 * MS;
    o.margin_ns = 50 * MS;
    shl_renewer *r;
    const char *err;
    uint64_t t0 = mono();
    shl_table *t = start_counted(name, sizeof name, "once", "holder", &o, &c, &r, &err);
    if (!t)
        return err;
    if (!fd_fires(shl_renewer_fd(r)))
        err = "descriptor never became readable";
    else if (mono() - t0 < 650 * MS)
        err = "loss declared before the hold bound";
    nap(2 * TTL); /* let any second report happen, if there were one */
    if (!err && shl_renewer_lost(r) != SHL_LOSS_MAX_HOLD)
        err = "flag does not say max hold";
    if (!err && atomic_load(&c.calls) != 1)
        err = "callback not called exactly once";
    if (!err && atomic_load(&c.reason) != SHL_LOSS_MAX_HOLD)
        err = "callback reason";
    if (!err && !fd_said_once(shl_renewer_fd(r)))
        err = "descriptor did not say 1 exactly once";
    if (!err && shl_renewer_write(r, "x", 1) != SHL_ELOST)
        err = "write after loss accepted";
    if (!err && shl_renewer_check(r) != SHL_ELOST)
        err = "check after loss";
    shl_lease_info in;
    if (!err && (shl_stat(t, "L", &in) != SHL_OK || in.state != SHL_STATE_FREE))
        err = "lease not released at the hold bound";
    if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_ELOST && !err)
        err = "stop did not report the loss";
    if (!err && atomic_load(&c.calls) != 1)
        err = "callback called again by stop";
    return done(t, name, err);
}

/* Someone else ended the lease (here: a release with the same owner and
 * token from another thread): the next renewal is refused. */
const char *tc_renewer_refusal_reported(void)
{
    char name[96];
    struct loss_count c = {0, 0};
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    shl_renewer *r;
    const char *err;
    shl_table *t = start_counted(name, sizeof name, "refused", "holder", &o, &c, &r, &err);
    if (!t)
        return err;
    uint64_t tok = shl_renewer_token(r);
    if (shl_release(t, "L", "holder", tok) != SHL_OK)
        err = "release";
    else if (!fd_fires(shl_renewer_fd(r)))
        err = "descriptor never became readable";
    nap(50 * MS);
    if (!err && shl_renewer_lost(r) != SHL_LOSS_REFUSED)
        err = "flag does not say refused";
    if (!err && (atomic_load(&c.calls) != 1 || atomic_load(&c.reason) != SHL_LOSS_REFUSED))
        err = "callback not called once with refused";
    if (!err && !fd_said_once(shl_renewer_fd(r)))
        err = "descriptor did not say 1 exactly once";
    if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_ELOST && !err)
        err = "stop did not report the loss";
    return done(t, name, err);
}

const char *tc_renewer_refuses_bad_arguments(void)
{
    char name[96];
    shl_table *t = create(name, sizeof name, "args");
    if (!t)
        return "create";
    uint64_t tok;
    if (shl_acquire(t, "L", "holder", TTL, &tok) != SHL_OK)
        return done(t, name, "acquire");
    shl_renewer *r = NULL;
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    const char *err = NULL;
    if (shl_renewer_start(t, "L", "holder", tok + 1, TTL, NULL, &r) != SHL_ELOST || r)
        err = "a stale token was accepted";
    o.margin_ns = TTL;
    if (!err && shl_renewer_start(t, "L", "holder", tok, TTL, &o, &r) != SHL_EINVAL)
        err = "margin >= ttl accepted";
    o.margin_ns = 100 * MS;
    o.interval_ns = 200 * MS;
    if (!err && shl_renewer_start(t, "L", "holder", tok, TTL, &o, &r) != SHL_EINVAL)
        err = "interval beyond ttl - margin accepted";
    if (!err && shl_renewer_start(t, "L", "other", tok, TTL, NULL, &r) != SHL_ELOST)
        err = "another owner was accepted";
    if (!err && shl_renewer_start(t, "L", "holder", tok, 0, NULL, &r) != SHL_EINVAL)
        err = "ttl 0 accepted";
    if (!err && (shl_renewer_stop(NULL, 0) != SHL_OK || shl_renewer_check(NULL) != SHL_EINVAL))
        err = "NULL renewer";
    return done(t, name, err);
}
