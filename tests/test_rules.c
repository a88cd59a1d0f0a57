/*
 * tests/test_rules.c - one test per rule of the semantics contract
 * (lib/shmlease.h, rules 1-7), on manual-clock tables so that every boundary
 * is exact.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static shl_table *T;
static char name[96];

static void setup(void)
{
    T = t_create(t_name(name, sizeof name, "rules"), 8, 32, SHL_CLOCK_MANUAL);
}

static void teardown(void)
{
    shl_close(T);
    shl_unlink(name);
}

TestSuite(rules, .init = setup, .fini = teardown);

static void at(uint64_t now)
{
    cr_assert_eq(shl_clock_set(T, now), SHL_OK);
}

/* Everything a rejected operation must leave alone. */
struct snap {
    shl_lease_info in;
    char val[32];
    size_t len;
    uint64_t vtok;
};

static void take(const char *lease, struct snap *s)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(shl_stat(T, lease, &s->in), SHL_OK);
    cr_assert_eq(shl_read(T, lease, s->val, sizeof s->val, &s->len, &s->vtok), SHL_OK);
}

static void same(const struct snap *a, const struct snap *b)
{
    cr_assert_str_eq(a->in.owner, b->in.owner, "holder changed");
    cr_assert_eq(a->in.token, b->in.token, "token changed");
    cr_assert_eq(a->in.expiry_ns, b->in.expiry_ns, "expiry changed");
    cr_assert_eq(a->in.state, b->in.state, "state changed");
    cr_assert_eq(a->len, b->len, "value length changed");
    cr_assert_eq(a->vtok, b->vtok, "value token changed");
    cr_assert(memcmp(a->val, b->val, a->len) == 0, "value changed");
}

/* Rule 1: acquire succeeds iff never held, released, or t >= expiry. */
Test(rules, r1_acquire_iff_free_released_or_expired)
{
    uint64_t tok, x;
    at(100);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &tok), SHL_OK, "never held");
    at(109);
    cr_assert_eq(shl_acquire(T, "L", "B", 10, &x), SHL_EBUSY, "one before expiry");
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &x), SHL_EBUSY, "the holder itself, unexpired");
    at(110);
    cr_assert_eq(shl_acquire(T, "L", "B", 10, &tok), SHL_OK, "t == expiry is expired");
    cr_assert_eq(shl_release(T, "L", "B", tok), SHL_OK);
    cr_assert_eq(shl_acquire(T, "L", "C", 10, &tok), SHL_OK, "released at once");
    shl_lease_info in;
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_str_eq(in.owner, "C");
    cr_assert_eq(in.expiry_ns, 120, "expiry = t + ttl");
}

/* Rule 2: per lease, from 1, strictly increasing across release, expiry and
 * re-acquisition by the same owner. */
Test(rules, r2_tokens_per_lease_strictly_increase)
{
    uint64_t t1, t2, t3, t4, o1;
    at(0);
    cr_assert_eq(shl_acquire(T, "L", "A", 5, &t1), SHL_OK);
    cr_assert_eq(shl_acquire(T, "other", "A", 5, &o1), SHL_OK);
    cr_assert_eq(t1, 1);
    cr_assert_eq(o1, 1, "tokens are per lease");
    cr_assert_eq(shl_release(T, "L", "A", t1), SHL_OK);
    cr_assert_eq(shl_acquire(T, "L", "A", 5, &t2), SHL_OK, "same owner after release");
    cr_assert_eq(t2, 2);
    at(5);
    cr_assert_eq(shl_acquire(T, "L", "A", 5, &t3), SHL_OK, "same owner after expiry");
    cr_assert_eq(t3, 3);
    cr_assert_eq(shl_release(T, "L", "A", t2), SHL_ELOST, "the old token is dead");
    cr_assert_eq(shl_release(T, "L", "A", t3), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 3, "release keeps the token");
    cr_assert_eq(in.state, SHL_STATE_FREE);
    cr_assert_eq(shl_acquire(T, "L", "B", 5, &t4), SHL_OK);
    cr_assert_eq(t4, 4);
}

static int guard_calls;
static void count_call(void *arg)
{
    (void)arg;
    guard_calls++;
}

/* Rule 3: valid(owner, token) <=> holder == owner && token == current && t < expiry;
 * renew, release, write and guard each require it. */
Test(rules, r3_every_operation_requires_validity)
{
    uint64_t a, b;
    at(0);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &a), SHL_OK);
    at(10);
    cr_assert_eq(shl_acquire(T, "L", "B", 10, &b), SHL_OK);
    struct {
        const char *owner;
        uint64_t token;
        const char *why;
    } bad[] = {
        {"A", a, "old holder, old token"},    {"A", b, "wrong owner, current token"},
        {"B", a, "right owner, stale token"}, {"B", b + 1, "right owner, future token"},
        {"b", b, "owner compare is exact"},   {"B ", b, "owner compare is exact (length)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        guard_calls = 0;
        cr_assert_eq(shl_renew(T, "L", bad[i].owner, bad[i].token, 5), SHL_ELOST, "%s", bad[i].why);
        cr_assert_eq(shl_write(T, "L", bad[i].owner, bad[i].token, "x", 1), SHL_ELOST, "%s",
                     bad[i].why);
        cr_assert_eq(shl_guard(T, "L", bad[i].owner, bad[i].token, count_call, NULL), SHL_ELOST,
                     "%s", bad[i].why);
        cr_assert_eq(guard_calls, 0, "guard ran its callback: %s", bad[i].why);
        cr_assert_eq(shl_release(T, "L", bad[i].owner, bad[i].token), SHL_ELOST, "%s", bad[i].why);
    }
    at(19);
    cr_assert_eq(shl_guard(T, "L", "B", b, count_call, NULL), SHL_OK, "valid one before expiry");
    cr_assert_eq(guard_calls, 1);
    at(20);
    cr_assert_eq(shl_guard(T, "L", "B", b, count_call, NULL), SHL_ELOST, "expired at equality");
    cr_assert_eq(shl_write(T, "L", "B", b, "x", 1), SHL_ELOST);
    cr_assert_eq(shl_renew(T, "L", "B", b, 5), SHL_ELOST);
    cr_assert_eq(shl_release(T, "L", "B", b), SHL_ELOST);
    cr_assert_eq(guard_calls, 1);
    cr_assert_eq(shl_write(T, "never", "B", 1, "x", 1), SHL_ELOST, "a lease never acquired");
}

/* Rule 4: a rejected operation changes nothing: value, holder, expiry, token. */
Test(rules, r4_rejected_operation_changes_nothing)
{
    uint64_t a, x;
    at(0);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &a), SHL_OK);
    cr_assert_eq(shl_write(T, "L", "A", a, "kept", 4), SHL_OK);
    struct snap s0, s1;
    take("L", &s0);
    at(5);
    cr_assert_eq(shl_acquire(T, "L", "B", 10, &x), SHL_EBUSY);
    cr_assert_eq(shl_renew(T, "L", "B", a, 100), SHL_ELOST);
    cr_assert_eq(shl_release(T, "L", "A", a + 1), SHL_ELOST);
    cr_assert_eq(shl_write(T, "L", "A", a + 1, "gone", 4), SHL_ELOST);
    cr_assert_eq(shl_write(T, "L", "A", a, "toolong-toolong-toolong-toolong-x", 33), SHL_E2BIG);
    cr_assert_eq(shl_renew(T, "L", "A", a, 0), SHL_EINVAL);
    take("L", &s1);
    same(&s0, &s1);
    cr_assert_eq(s1.len, 4);
    cr_assert(memcmp(s1.val, "kept", 4) == 0);
    at(10);
    cr_assert_eq(shl_write(T, "L", "A", a, "late", 4), SHL_ELOST);
    take("L", &s1);
    s0.in.state = SHL_STATE_EXPIRED; /* only time moved */
    same(&s0, &s1);
}

/* Rule 5: ttl > 0 and t + ttl must not overflow; else EINVAL, nothing changed. */
Test(rules, r5_ttl_zero_and_overflow)
{
    uint64_t a, x;
    at(UINT64_MAX - 100);
    cr_assert_eq(shl_acquire(T, "L", "A", 0, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(T, "L", "A", 101, &x), SHL_EINVAL, "t + ttl overflows");
    shl_lease_info in;
    cr_assert_eq(shl_stat(T, "L", &in), SHL_ENOENT, "a refused acquire added the name");
    cr_assert_eq(shl_acquire(T, "L", "A", 50, &a), SHL_OK);
    cr_assert_eq(a, 1, "no token was spent on a refused acquire");
    struct snap s0, s1;
    take("L", &s0);
    cr_assert_eq(shl_renew(T, "L", "A", a, 101), SHL_EINVAL);
    cr_assert_eq(shl_renew(T, "L", "A", a, 0), SHL_EINVAL);
    take("L", &s1);
    same(&s0, &s1);
    cr_assert_eq(shl_renew(T, "L", "A", a, 100), SHL_OK, "t + ttl == UINT64_MAX fits");
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_eq(in.expiry_ns, UINT64_MAX);
}

/* Rule 6: a manual clock moves forward only, equal accepted, shared by every
 * handle; a monotonic table has no settable clock. */
Test(rules, r6_manual_clock_forward_only)
{
    uint64_t now;
    at(50);
    cr_assert_eq(shl_clock_set(T, 50), SHL_OK, "equal is accepted");
    cr_assert_eq(shl_clock_set(T, 49), SHL_ECLOCK);
    cr_assert_eq(shl_now(T, &now), SHL_OK);
    cr_assert_eq(now, 50);
    shl_table *t2;
    cr_assert_eq(shl_open(name, NULL, &t2), SHL_OK);
    cr_assert_eq(shl_clock_set(t2, 70), SHL_OK);
    cr_assert_eq(shl_now(T, &now), SHL_OK);
    cr_assert_eq(now, 70, "one clock per table");
    cr_assert_eq(shl_clock_set(T, 60), SHL_ECLOCK);
    shl_close(t2);

    char mono[96];
    shl_table *m = t_create(t_name(mono, sizeof mono, "mono"), 4, 8, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_clock_set(m, 1), SHL_EINVAL);
    uint64_t n1, n2;
    cr_assert_eq(shl_now(m, &n1), SHL_OK);
    cr_assert_eq(shl_now(m, &n2), SHL_OK);
    cr_assert(n2 >= n1 && n1 > 0);
    shl_close(m);
    shl_unlink(mono);
}

/* Rule 7: a busy acquire tells who holds the lease and for how long. */
Test(rules, r7_busy_acquire_tells_holder)
{
    uint64_t a, x = 12345;
    at(1000);
    cr_assert_eq(shl_acquire(T, "L", "holder-A", 300, &a), SHL_OK);
    at(1100);
    shl_lease_info h;
    memset(&h, 0xff, sizeof h);
    cr_assert_eq(shl_acquire_ex(T, "L", "B", 10, &x, &h), SHL_EBUSY);
    cr_assert_eq(x, 12345, "no token handed out on EBUSY");
    cr_assert_str_eq(h.owner, "holder-A");
    cr_assert_eq(h.token, a);
    cr_assert_eq(h.remaining_ns, 200);
    cr_assert_eq(h.expiry_ns, 1300);
    cr_assert_eq(h.now_ns, 1100);
    cr_assert_eq(h.state, SHL_STATE_HELD);
    cr_assert_eq(h.pid, (int32_t)getpid());
}

/* shl_stat's states over a lease's life. */
Test(rules, stat_states)
{
    uint64_t a;
    shl_lease_info in;
    cr_assert_eq(shl_stat(T, "L", &in), SHL_ENOENT);
    at(10);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &a), SHL_OK);
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_eq(in.remaining_ns, 10);
    at(20);
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_EXPIRED);
    cr_assert_eq(in.remaining_ns, 0);
    at(21);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &a), SHL_OK);
    cr_assert_eq(shl_release(T, "L", "A", a), SHL_OK);
    cr_assert_eq(shl_stat(T, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE);
    cr_assert_eq(in.token, 2);
}

static int add_one(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    cr_assert_geq(cap, sizeof(uint64_t));
    uint64_t v = 0;
    if (*len == sizeof v)
        memcpy(&v, value, sizeof v);
    v++;
    memcpy(value, &v, sizeof v);
    *len = sizeof v;
    return 0;
}

static int decline(void *value, size_t *len, size_t cap, void *arg)
{
    (void)cap;
    (void)arg;
    memset(value, 0xee, *len); /* scribbles on the spare copy only */
    return 1;
}

/* shl_update: read-modify-write under the check, committed or not at all. */
Test(rules, update_commits_or_changes_nothing)
{
    uint64_t a, v = 0;
    size_t len;
    at(0);
    cr_assert_eq(shl_acquire(T, "L", "A", 10, &a), SHL_OK);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(shl_update(T, "L", "A", a, add_one, NULL), SHL_OK);
    cr_assert_eq(shl_read(T, "L", &v, sizeof v, &len, NULL), SHL_OK);
    cr_assert_eq(v, 5);
    cr_assert_eq(shl_update(T, "L", "A", a, decline, NULL), SHL_ECANCELED);
    cr_assert_eq(shl_read(T, "L", &v, sizeof v, &len, NULL), SHL_OK);
    cr_assert_eq(v, 5, "a declined update changed the value");
    cr_assert_eq(shl_update(T, "L", "A", a + 1, add_one, NULL), SHL_ELOST);
    at(10);
    cr_assert_eq(shl_update(T, "L", "A", a, add_one, NULL), SHL_ELOST);
    cr_assert_eq(shl_read(T, "L", &v, sizeof v, &len, NULL), SHL_OK);
    cr_assert_eq(v, 5);
}

/* The table fills up; existing names keep working. */
Test(rules, table_full)
{
    uint64_t x;
    char lease[16];
    at(0);
    for (int i = 0; i < 8; i++) {
        snprintf(lease, sizeof lease, "l%d", i);
        cr_assert_eq(shl_acquire(T, lease, "A", 10, &x), SHL_OK);
    }
    cr_assert_eq(shl_acquire(T, "ninth", "A", 10, &x), SHL_EFULL);
    cr_assert_eq(shl_stat(T, "ninth", &(shl_lease_info){0}), SHL_ENOENT);
    at(10);
    cr_assert_eq(shl_acquire(T, "l3", "B", 10, &x), SHL_OK);
    cr_assert_eq(x, 2);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(T, &ti), SHL_OK);
    cr_assert_eq(ti.used, 8);
    cr_assert_eq(ti.capacity, 8);
}

/* The name index: a thousand names, every one found again, each its own lease. */
Test(rules, index_finds_every_name)
{
    char big[96];
    shl_table *t = t_create(t_name(big, sizeof big, "index"), 1000, 8, SHL_CLOCK_MANUAL);
    char lease[32];
    uint64_t tok;
    for (int i = 0; i < 1000; i++) {
        snprintf(lease, sizeof lease, "lease-%d", i * 7919);
        cr_assert_eq(shl_acquire(t, lease, "o", 10, &tok), SHL_OK, "%s", lease);
        cr_assert_eq(shl_write(t, lease, "o", tok, &i, sizeof i), SHL_OK);
    }
    cr_assert_eq(shl_acquire(t, "one-too-many", "o", 10, &tok), SHL_EFULL);
    for (int i = 0; i < 1000; i++) {
        int v = -1;
        snprintf(lease, sizeof lease, "lease-%d", i * 7919);
        cr_assert_eq(shl_read(t, lease, &v, sizeof v, NULL, NULL), SHL_OK);
        cr_assert_eq(v, i, "%s holds another lease's value", lease);
    }
    shl_close(t);
    shl_unlink(big);
}
