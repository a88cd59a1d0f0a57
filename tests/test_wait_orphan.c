/*
 * tests/test_wait_orphan.c - a waiter on a table that reclaims orphans: a
 * holder proven dead (killed) keeps a waiter out only until its reclaim
 * delay ends, as it keeps out a polling shl_acquire(), not until its
 * expiry; a live holder, even stopped, is never reclaimed by a waiter.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

#define HOLD_TTL (30 * SEC)
#define DELAY_MS 200u

struct holder_arg {
    char table[96];
    int shared;        /* the holder acquires shared instead of exclusive */
    _Atomic int state; /* 0 starting, 1 holding, < 0 failed */
};

static struct holder_arg *new_arg(const char *tag, int shared)
{
    struct holder_arg *a =
        mmap(NULL, sizeof *a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(a != MAP_FAILED);
    memset(a, 0, sizeof *a);
    a->shared = shared;
    t_name(a->table, sizeof a->table, tag);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.policy = SHL_POLICY_RECLAIM_ORPHANS;
    o.reclaim_delay_ms = DELAY_MS;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(a->table, &o, &t), SHL_OK);
    shl_close(t);
    return a;
}

/* Holds L (token 1) for HOLD_TTL, then sleeps until killed. */
static int holder(void *p)
{
    struct holder_arg *a = p;
    shl_table *t;
    uint64_t tok, gen;
    if (shl_open(a->table, NULL, &t) != SHL_OK)
        return 2;
    int rc = a->shared ? shl_acquire_shared(t, "L", "doomed", HOLD_TTL, &tok, &gen)
                       : shl_acquire(t, "L", "doomed", HOLD_TTL, &tok);
    atomic_store(&a->state, rc == SHL_OK && tok == 1 ? 1 : -1);
    for (;;)
        pause();
}

static int holding(void *p)
{
    return atomic_load(&((struct holder_arg *)p)->state) != 0;
}

static pid_t start_holder(struct holder_arg *a)
{
    pid_t p = t_fork(holder, a);
    cr_assert(t_until(holding, a, 10 * SEC), "the holder did not start");
    cr_assert_eq(atomic_load(&a->state), 1, "the holder did not get token 1");
    return p;
}

/* A new table whose holder of L (token 1, shared or not) was killed,
 * opened; its name in a->table. */
static shl_table *orphaned(const char *tag, int shared, struct holder_arg **ap)
{
    struct holder_arg *a = *ap = new_arg(tag, shared);
    pid_t p = start_holder(a);
    kill(p, SIGKILL);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    shl_table *t;
    cr_assert_eq(shl_open(a->table, NULL, &t), SHL_OK);
    return t;
}

/* A wait that returned rc after `took` ns got the lease with token 2, well
 * before the dead holder's expiry. */
static void expect_quick(int rc, uint64_t took, uint64_t tok)
{
    cr_assert_eq(rc, SHL_OK, "%s after %llu ms", shl_errname(rc), (unsigned long long)(took / MS));
    cr_assert_lt(took, 5 * SEC, "waited %llu ms for a dead holder",
                 (unsigned long long)(took / MS));
    cr_assert_eq(tok, 2u);
}

/* The lease's last history event is a reclaim that issued `token`. */
static void expect_reclaim(shl_table *t, uint64_t token)
{
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_gt(d.nevents, 0u);
    cr_assert_eq(d.events[d.nevents - 1].op, SHL_OP_RECLAIM, "last op %s, not a reclaim",
                 shl_op_name(d.events[d.nevents - 1].op));
    cr_assert_eq(d.events[d.nevents - 1].token, token);
    cr_assert_eq(d.counters[SHL_COUNTER_RECLAIM], 1u);
}

Test(wait_orphan, writer_reclaims_when_the_delay_ends)
{
    t_guard(60);
    struct holder_arg *a;
    shl_table *t = orphaned("wodx", 0, &a);
    uint64_t tok = 0, t0 = t_now();
    int rc = shl_acquire_wait(t, "L", "waiter", SEC, 10 * SEC, &tok);
    uint64_t took = t_now() - t0;
    expect_quick(rc, took, tok);
    /* The waiter's own look saw the death first: the delay ran from there. */
    cr_assert_geq(took, (uint64_t)DELAY_MS * MS, "reclaimed before the delay");
    expect_reclaim(t, 2);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_str_eq(in.owner, "waiter");
    cr_assert_eq(in.waiters, 0u);
    shl_close(t);
    shl_unlink(a->table);
}

Test(wait_orphan, reader_reclaims_a_dead_writer)
{
    t_guard(60);
    struct holder_arg *a;
    shl_table *t = orphaned("wods", 0, &a);
    uint64_t tok = 0, gen = 0, t0 = t_now();
    int rc = shl_acquire_shared_wait(t, "L", "reader", SEC, 10 * SEC, &tok, &gen);
    expect_quick(rc, t_now() - t0, tok);
    expect_reclaim(t, 2);
    shl_close(t);
    shl_unlink(a->table);
}

Test(wait_orphan, writer_passes_a_dead_reader)
{
    t_guard(60);
    struct holder_arg *a;
    shl_table *t = orphaned("wodr", 1, &a);
    uint64_t tok = 0, t0 = t_now();
    int rc = shl_acquire_wait(t, "L", "waiter", SEC, 10 * SEC, &tok);
    expect_quick(rc, t_now() - t0, tok);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_str_eq(d.info.owner, "waiter");
    cr_assert_eq(d.nshared, 0u, "the dead reader's entry ended");
    shl_close(t);
    shl_unlink(a->table);
}

/* Control: a stopped holder is alive; the waiter times out, nothing changed. */
Test(wait_orphan, stopped_holder_is_not_reclaimed)
{
    t_guard(60);
    struct holder_arg *a = new_arg("wost", 0);
    pid_t p = start_holder(a);
    kill(p, SIGSTOP);
    cr_assert_eq(t_wait_stopped(p), 0);
    shl_table *t;
    cr_assert_eq(shl_open(a->table, NULL, &t), SHL_OK);
    uint64_t tok = 0, gen = 0;
    cr_assert_eq(shl_acquire_wait(t, "L", "waiter", SEC, 500 * MS, &tok), SHL_ETIMEDOUT);
    cr_assert_eq(shl_acquire_shared_wait(t, "L", "reader", SEC, 500 * MS, &tok, &gen),
                 SHL_ETIMEDOUT);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_str_eq(in.owner, "doomed");
    cr_assert_eq(in.token, 1u);
    cr_assert_eq(in.waiters, 0u);
    kill(p, SIGKILL);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    shl_close(t);
    shl_unlink(a->table);
}
