/*
 * tests/test_scenario.c - the reference model's serial scenario, step by step
 * on a manual-clock table.
 *
 * Each step of LeaseStore's script (one manual nondecreasing clock; the
 * coordinator and the resource are the same object) is replayed with the
 * same inputs and must give the same outcome. Time unit: one model tick is
 * one nanosecond of the table clock.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"

static shl_table *T;
static char name[96];

static void setup(void)
{
    T = t_create(t_name(name, sizeof name, "scenario"), 16, 64, SHL_CLOCK_MANUAL);
}

static void teardown(void)
{
    shl_close(T);
    shl_unlink(name);
}

TestSuite(scenario, .init = setup, .fini = teardown);

/* store.observe(now) followed by the operation: the model checks the clock
 * inside every operation; here the clock is set, then the operation runs. */
static void at(uint64_t now)
{
    cr_assert_eq(shl_clock_set(T, now), SHL_OK, "clock to %llu", (unsigned long long)now);
}

static int write_str(const char *owner, uint64_t token, const char *v)
{
    return shl_write(T, "res", owner, token, v, strlen(v));
}

static void expect_value(const char *want)
{
    char buf[64];
    size_t len = 0;
    cr_assert_eq(shl_read(T, "res", buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert_eq(len, strlen(want), "value length %zu, want '%s'", len, want);
    cr_assert(memcmp(buf, want, len) == 0, "value is not '%s'", want);
}

/* rejected(store, owner, token, now): the write fails and the data stays. */
static void rejected(const char *owner, uint64_t token, uint64_t now)
{
    char before[64], after[64];
    size_t bl = 0, al = 0;
    uint64_t bt = 0, atok = 0;
    at(now);
    cr_assert_eq(shl_read(T, "res", before, sizeof before, &bl, &bt), SHL_OK);
    cr_assert_eq(write_str(owner, token, "forbidden"), SHL_ELOST, "invalid write accepted");
    cr_assert_eq(shl_read(T, "res", after, sizeof after, &al, &atok), SHL_OK);
    cr_assert(bl == al && bt == atok && memcmp(before, after, bl) == 0, "data changed");
}

static uint64_t expiry(void)
{
    shl_lease_info in;
    cr_assert_eq(shl_stat(T, "res", &in), SHL_OK);
    return in.expiry_ns;
}

Test(scenario, lease_py_step_by_step)
{
    uint64_t a, b, new_b, c, x;

    at(0); /* a = store.acquire("A", 5, 0); assert a == 1 */
    cr_assert_eq(shl_acquire(T, "res", "A", 5, &a), SHL_OK);
    cr_assert_eq(a, 1);

    at(2); /* store.write("A", a, "a-1", 2) */
    cr_assert_eq(write_str("A", a, "a-1"), SHL_OK);
    expect_value("a-1");

    at(4); /* assert store.renew("A", a, 5, 4) and store.expiry == 9 */
    cr_assert_eq(shl_renew(T, "res", "A", a, 5), SHL_OK);
    cr_assert_eq(expiry(), 9);

    at(8); /* store.write("A", a, "a-2", 8) */
    cr_assert_eq(write_str("A", a, "a-2"), SHL_OK);
    expect_value("a-2");

    rejected("A", a, 9); /* Equality is expired. */

    at(9); /* assert not store.renew("A", a, 5, 9) */
    cr_assert_eq(shl_renew(T, "res", "A", a, 5), SHL_ELOST);
    cr_assert_eq(expiry(), 9, "a refused renew moved the expiry");

    at(10); /* b = store.acquire("B", 5, 10); assert b == 2 */
    cr_assert_eq(shl_acquire(T, "res", "B", 5, &b), SHL_OK);
    cr_assert_eq(b, 2);

    at(11); /* store.write("B", b, "b-1", 11) */
    cr_assert_eq(write_str("B", b, "b-1"), SHL_OK);

    rejected("B", a, 12); /* B with A's token */
    rejected("A", a, 12);

    at(12); /* assert store.acquire("C", 5, 12) is None */
    cr_assert_eq(shl_acquire(T, "res", "C", 5, &x), SHL_EBUSY);

    /* assert not store.release("A", a, 12); assert store.release("B", b, 12) */
    cr_assert_eq(shl_release(T, "res", "A", a), SHL_ELOST);
    cr_assert_eq(shl_release(T, "res", "B", b), SHL_OK);

    at(13); /* new_b = store.acquire("B", 5, 13); assert new_b == 3 */
    cr_assert_eq(shl_acquire(T, "res", "B", 5, &new_b), SHL_OK);
    cr_assert_eq(new_b, 3);
    /* assert not store.release("B", b, 13); assert not store.renew("B", b, 5, 13) */
    cr_assert_eq(shl_release(T, "res", "B", b), SHL_ELOST);
    cr_assert_eq(shl_renew(T, "res", "B", b, 5), SHL_ELOST);

    at(14); /* store.write("B", new_b, "new-b", 14); assert store.release("B", new_b, 14) */
    cr_assert_eq(write_str("B", new_b, "new-b"), SHL_OK);
    cr_assert_eq(shl_release(T, "res", "B", new_b), SHL_OK);

    /* c = store.acquire("C", 5, 14); assert c == 4 */
    cr_assert_eq(shl_acquire(T, "res", "C", 5, &c), SHL_OK);
    cr_assert_eq(c, 4);

    at(15); /* store.write("C", c, "c-1", 15); assert store.data == "c-1" */
    cr_assert_eq(write_str("C", c, "c-1"), SHL_OK);
    expect_value("c-1");

    /* The input guards: TTL 0 (the model's non-positive TTLs), and time
     * moving backwards; each changes nothing. */
    shl_lease_info before, after;
    cr_assert_eq(shl_stat(T, "res", &before), SHL_OK);
    cr_assert_eq(shl_acquire(T, "res", "D", 0, &x), SHL_EINVAL);
    cr_assert_eq(shl_renew(T, "res", "C", c, 0), SHL_EINVAL);
    cr_assert_eq(shl_clock_set(T, 14), SHL_ECLOCK); /* write("C", c, "backwards", 14) */
    uint64_t now;
    cr_assert_eq(shl_now(T, &now), SHL_OK);
    cr_assert_eq(now, 15, "a refused clock step moved the clock");
    expect_value("c-1");
    cr_assert_eq(write_str("C", c, "now-ok"), SHL_OK, "the holder can still write at 15");
    cr_assert_eq(shl_stat(T, "res", &after), SHL_OK);
    cr_assert_eq(after.token, before.token);
    cr_assert_eq(after.expiry_ns, before.expiry_ns);
    cr_assert_str_eq(after.owner, before.owner);
}
