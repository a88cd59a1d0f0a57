/*
 * tests/test_crash.c - a process killed at every crash point inside every
 * critical section: the change happened whole or not at all, no token went
 * down, the value is the old or the new one and never torn, and the table
 * checks clean after the next operation.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

#define KILLED (128 + SIGKILL)
#define T0     (1000 * SEC)

enum op {
    OP_ACQ,
    OP_TAKEOVER,
    OP_RENEW,
    OP_RELEASE,
    OP_WRITE,
    OP_UPDATE,
    OP_GUARD,
    OP_REJECT,
    OP_REVOKE,
    OP_RECLAIM,
    OP_ADD
};

struct ccase {
    int cp;
    enum op op;
    int done; /* 1: recovery must roll the change forward; 0: back */
};

static int do_acquire(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "L", "b", 10 * SEC, &tok);
}
static int do_renew(shl_table *t, void *arg)
{
    (void)arg;
    return shl_renew(t, "L", "b", 2, 20 * SEC);
}
static int do_release(shl_table *t, void *arg)
{
    (void)arg;
    return shl_release(t, "L", "b", 2);
}
static int do_write(shl_table *t, void *arg)
{
    (void)arg;
    return c_write_gen(t, "L", "b", 2, 2);
}
static int upd(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    (void)cap;
    c_fill(value, c_gen_len(3), 3);
    *len = c_gen_len(3);
    return 0;
}
static int do_update(shl_table *t, void *arg)
{
    (void)arg;
    return shl_update(t, "L", "b", 2, upd, NULL);
}
static void guarded(void *arg)
{
    *(int *)arg = 1;
}
static int do_guard(shl_table *t, void *arg)
{
    (void)arg;
    int ran = 0;
    return shl_guard(t, "L", "b", 2, guarded, &ran);
}
static int do_reject(shl_table *t, void *arg)
{
    (void)arg;
    return shl_renew(t, "L", "b", 1, SEC) == SHL_ELOST ? 0 : 1;
}
static int do_revoke(shl_table *t, void *arg)
{
    (void)arg;
    return shl_revoke(t, "L");
}
static int do_add(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "N2", "b", 10 * SEC, &tok);
}
static int do_hold_and_exit(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "L", "dead", 10 * SEC, &tok) == SHL_OK && tok == 2 ? 0 : 1;
}

static int (*const ops[])(shl_table *, void *) = {
    [OP_ACQ] = do_acquire,     [OP_TAKEOVER] = do_acquire, [OP_RENEW] = do_renew,
    [OP_RELEASE] = do_release, [OP_WRITE] = do_write,      [OP_UPDATE] = do_update,
    [OP_GUARD] = do_guard,     [OP_REJECT] = do_reject,    [OP_REVOKE] = do_revoke,
    [OP_RECLAIM] = do_acquire, [OP_ADD] = do_add,
};

/* A table where lease L has token 1 and value generation 1, then the state
 * the operation under test starts from. */
static shl_table *setup(const char *name, enum op op)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = C_VALUE_SIZE;
    o.clock = SHL_CLOCK_MANUAL;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.policy = op == OP_RECLAIM ? SHL_POLICY_RECLAIM_ORPHANS : 0;
    o.reclaim_delay_ms = 0; /* reclaimed at the first look */
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    cr_assert_eq(shl_clock_set(t, T0), SHL_OK);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(c_write_gen(t, "L", "a", 1, 1), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "a", 1), SHL_OK);
    switch (op) {
    case OP_ACQ:
    case OP_ADD:
        break;
    case OP_TAKEOVER:
        cr_assert_eq(shl_acquire(t, "L", "a", SEC, &tok), SHL_OK);
        cr_assert_eq(shl_clock_set(t, T0 + 2 * SEC), SHL_OK);
        break;
    case OP_RECLAIM:
        cr_assert_eq(c_die_at(name, 0, 1, do_hold_and_exit, NULL), 0);
        break;
    default:
        cr_assert_eq(shl_acquire(t, "L", "b", 10 * SEC, &tok), SHL_OK);
        cr_assert_eq(tok, 2);
    }
    return t;
}

/* The operation's effect, all there (done) or not at all. */
static void verify(shl_table *t, const struct ccase *c)
{
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    int gen = c_read_gen(t, "L");
    cr_assert(gen >= 1, "value torn or lost (gen %d) at crash point %d", gen, c->cp);
    cr_assert_eq(in.value_token, gen == 1 ? 1u : 2u);
    switch (c->op) {
    case OP_ACQ:
        cr_assert_eq(in.token, c->done ? 2u : 1u);
        /* the new holder is the killed child: proven dead */
        cr_assert_eq(in.state, c->done ? SHL_STATE_ORPHANED : SHL_STATE_FREE);
        cr_assert_str_eq(in.owner, c->done ? "b" : "a");
        break;
    case OP_TAKEOVER:
        cr_assert_eq(in.token, c->done ? 3u : 2u);
        cr_assert_eq(in.state, c->done ? SHL_STATE_ORPHANED : SHL_STATE_EXPIRED);
        break;
    case OP_RECLAIM:
        cr_assert_eq(in.token, c->done ? 3u : 2u);
        cr_assert_str_eq(in.owner, c->done ? "b" : "dead");
        cr_assert_eq(in.state, SHL_STATE_ORPHANED); /* both holders are dead */
        break;
    case OP_RENEW:
        cr_assert_eq(in.token, 2u);
        cr_assert_eq(in.expiry_ns, T0 + (c->done ? 20 : 10) * SEC);
        break;
    case OP_RELEASE:
        cr_assert_eq(in.token, 2u);
        cr_assert_eq(in.state, c->done ? SHL_STATE_FREE : SHL_STATE_HELD);
        break;
    case OP_WRITE:
    case OP_UPDATE:
        cr_assert_eq(gen, c->done ? (c->op == OP_WRITE ? 2 : 3) : 1);
        cr_assert_eq(in.state, SHL_STATE_HELD);
        break;
    case OP_GUARD:
    case OP_REJECT:
        cr_assert_eq(in.token, 2u);
        cr_assert_eq(in.state, SHL_STATE_HELD);
        cr_assert_eq(gen, 1);
        break;
    case OP_REVOKE:
        cr_assert_eq(in.token, 2u);
        cr_assert_eq(in.state, c->done ? SHL_STATE_REVOKED : SHL_STATE_HELD);
        break;
    case OP_ADD: {
        shl_table_info ti;
        cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
        cr_assert_eq(ti.used, 2u, "the name was added once (used %u)", ti.used);
        break;
    }
    }
}

static void run_case(const struct ccase *c)
{
    char name[96];
    t_name(name, sizeof name, "crash");
    shl_table *t = setup(name, c->op);
    shl_lease_info before;
    cr_assert_eq(shl_stat(t, "L", &before), SHL_OK);
    cr_assert_eq(c_die_at(name, c->cp, 1, ops[c->op], NULL), KILLED,
                 "child did not die at crash point %d", c->cp);
    /* The next operation on the lease (or the table) runs the recovery. */
    if (c->op == OP_ADD) {
        uint64_t tok;
        cr_assert_eq(shl_acquire(t, "N2", "c", SEC, &tok), SHL_OK);
        cr_assert_eq(tok, 1u);
    } else {
        cr_assert_eq(shl_renew(t, "L", "nobody", 1, SEC), SHL_ELOST);
    }
    verify(t, c);
    shl_lease_info after;
    cr_assert_eq(shl_stat(t, "L", &after), SHL_OK);
    cr_assert_geq(after.token, before.token, "token went down");
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "check not clean after crash point %d: %s", c->cp,
                 p.line[0]);
    /* And the lease goes on working: the next acquisition gets the next token. */
    if (c->op != OP_ADD) {
        cr_assert_eq(shl_clock_set(t, T0 + 60 * SEC), SHL_OK);
        uint64_t tok;
        cr_assert_eq(shl_acquire(t, "L", "z", SEC, &tok), SHL_OK);
        cr_assert_eq(tok, after.token + 1);
        cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    }
    shl_close(t);
    shl_unlink(name);
}

#define CASE(suite_test, cp_, op_, done_)                                                          \
    Test(crash, suite_test)                                                                        \
    {                                                                                              \
        t_guard(30);                                                                               \
        struct ccase c = {cp_, op_, done_};                                                        \
        run_case(&c);                                                                              \
    }

CASE(acquire_intent, SHL__CP_ACQ_INTENT, OP_ACQ, 0)
CASE(acquire_armed, SHL__CP_ACQ_ARMED, OP_ACQ, 1)
CASE(acquire_apply, SHL__CP_ACQ_APPLY, OP_ACQ, 1)
CASE(acquire_applied, SHL__CP_ACQ_APPLIED, OP_ACQ, 1)
CASE(takeover_intent, SHL__CP_ACQ_INTENT, OP_TAKEOVER, 0)
CASE(takeover_armed, SHL__CP_ACQ_ARMED, OP_TAKEOVER, 1)
CASE(takeover_apply, SHL__CP_ACQ_APPLY, OP_TAKEOVER, 1)
CASE(renew_before, SHL__CP_RENEW, OP_RENEW, 0)
CASE(renew_stored, SHL__CP_RENEW_STORED, OP_RENEW, 1)
CASE(release_before, SHL__CP_RELEASE, OP_RELEASE, 0)
CASE(release_stored, SHL__CP_RELEASE_STORED, OP_RELEASE, 1)
CASE(write_half_copied, SHL__CP_WRITE_COPY, OP_WRITE, 0)
CASE(write_copied, SHL__CP_WRITE_COPIED, OP_WRITE, 0)
CASE(write_committed, SHL__CP_WRITE_COMMITTED, OP_WRITE, 1)
CASE(update_copied, SHL__CP_WRITE_COPIED, OP_UPDATE, 0)
CASE(update_committed, SHL__CP_WRITE_COMMITTED, OP_UPDATE, 1)
CASE(guard, SHL__CP_GUARD, OP_GUARD, 1)
CASE(reject, SHL__CP_REJECT, OP_REJECT, 1)
CASE(revoke_intent, SHL__CP_ACQ_INTENT, OP_REVOKE, 0)
CASE(revoke_armed, SHL__CP_REVOKE_ARMED, OP_REVOKE, 1)
CASE(revoke_apply, SHL__CP_REVOKE_APPLY, OP_REVOKE, 1)
CASE(revoke_applied, SHL__CP_REVOKE_APPLIED, OP_REVOKE, 1)
CASE(reclaim_intent, SHL__CP_ACQ_INTENT, OP_RECLAIM, 0)
CASE(reclaim_armed, SHL__CP_RECLAIM_ARMED, OP_RECLAIM, 1)
CASE(reclaim_apply, SHL__CP_RECLAIM_APPLY, OP_RECLAIM, 1)
CASE(reclaim_applied, SHL__CP_ACQ_APPLIED, OP_RECLAIM, 1)
CASE(add_name, SHL__CP_ADD_NAME, OP_ADD, 0)
CASE(add_armed, SHL__CP_ADD_ARMED, OP_ADD, 1)
CASE(add_published, SHL__CP_ADD_PUBLISHED, OP_ADD, 1)

/* A second process dies while recovering the first one's crash; a third
 * recovers both, and the change is applied exactly once. */
static void recover_twice(int cp2)
{
    char name[96];
    t_name(name, sizeof name, "crash2");
    shl_table *t = setup(name, OP_ACQ);
    cr_assert_eq(c_die_at(name, SHL__CP_ACQ_APPLY, 1, do_acquire, NULL), KILLED);
    cr_assert_eq(c_die_at(name, cp2, 1, do_acquire, NULL), KILLED, "recoverer did not die at %d",
                 cp2);
    uint64_t tok;
    shl_lease_info h;
    cr_assert_eq(shl_acquire_ex(t, "L", "c", SEC, &tok, &h), SHL_EBUSY);
    cr_assert_eq(h.token, 2u);
    cr_assert_str_eq(h.owner, "b");
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.counters[SHL_COUNTER_ACQUIRE], 2u, "acquire counted once");
    unsigned acq2 = 0;
    for (uint32_t i = 0; i < d.nevents; i++)
        acq2 += d.events[i].op == SHL_OP_ACQUIRE && d.events[i].token == 2;
    cr_assert_eq(acq2, 1u, "one history entry for the acquisition");
    cr_assert_geq(d.counters[SHL_COUNTER_RECOVER], 1u);
    cr_assert_eq(c_read_gen(t, "L"), 1);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

Test(crash, recover_dies_at_begin)
{
    t_guard(30);
    recover_twice(SHL__CP_RECOVER_BEGIN);
}
Test(crash, recover_dies_mid_apply)
{
    t_guard(30);
    recover_twice(SHL__CP_RECOVER);
}
Test(crash, recover_dies_before_disarm)
{
    t_guard(30);
    recover_twice(SHL__CP_RECOVER_DONE);
}

/* The reclaim delay's first sighting of a death is recorded by one word: a
 * crash right after it keeps the lease with its dead holder. */
static int do_acquire_expect_busy(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "L", "b", 10 * SEC, &tok) == SHL_EBUSY ? 0 : 1;
}

Test(crash, reclaim_delay_seen)
{
    t_guard(30);
    char name[96];
    t_name(name, sizeof name, "crashd");
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = C_VALUE_SIZE;
    o.clock = SHL_CLOCK_MANUAL;
    o.policy = SHL_POLICY_RECLAIM_ORPHANS;
    o.reclaim_delay_ms = 500;
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    cr_assert_eq(shl_clock_set(t, T0), SHL_OK);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "a", tok), SHL_OK);
    cr_assert_eq(c_die_at(name, 0, 1, do_hold_and_exit, NULL), 0);
    cr_assert_eq(c_die_at(name, SHL__CP_RECLAIM_SEEN, 1, do_acquire_expect_busy, NULL), KILLED);
    cr_assert_eq(shl_acquire(t, "L", "b", SEC, &tok), SHL_EBUSY);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.info.state, SHL_STATE_ORPHANED);
    cr_assert_eq(d.dead_seen_ns, T0);
    cr_assert_eq(shl_clock_set(t, T0 + 500 * MS), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "b", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 3u);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* A creator killed after initialising but before publishing leaves no table
 * under the name; the next creator succeeds. */
static int do_create(void *arg)
{
    c_arm(SHL__CP_SHM_CREATE, 1);
    shl_table *t;
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    return shl_open(arg, &o, &t) == SHL_OK ? 0 : 1;
}

Test(crash, create_unpublished)
{
    t_guard(30);
    char name[96];
    t_name(name, sizeof name, "crashc");
    cr_assert_eq(t_wait(t_fork(do_create, name)), KILLED);
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}
