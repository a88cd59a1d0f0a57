/*
 * tests/test_bound.c - bound leases (shl_lease_*): the same semantics as the
 * name-taking calls, on the same slot.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"

#define OWN "owner-a"
#define OTH "owner-b"

static shl_table *manual(char *name, size_t cap, uint32_t capacity)
{
    t_name(name, cap, "bound");
    shl_table *t = t_create(name, capacity, 64, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(t, 1000), SHL_OK);
    return t;
}

static void done(shl_table *t, const char *name, shl_lease *a, shl_lease *b)
{
    shl_lease_close(a);
    shl_lease_close(b);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(bound, same_slot_as_name_api)
{
    char name[96];
    shl_table *t = manual(name, sizeof name, 8);
    shl_lease *a;
    cr_assert_eq(shl_lease_open(t, "job", OWN, &a), SHL_OK);
    /* Binding adds the name but acquires nothing. */
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE);
    cr_assert_eq(in.token, 0);

    uint64_t tk;
    cr_assert_eq(shl_lease_acquire(a, 100, &tk, NULL), SHL_OK);
    cr_assert_eq(tk, 1);
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_str_eq(in.owner, OWN);
    cr_assert_eq(in.expiry_ns, 1100);

    cr_assert_eq(shl_lease_write(a, tk, "hello", 5), SHL_OK);
    char buf[16];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(t, "job", buf, sizeof buf, &len, &vt), SHL_OK);
    cr_assert_eq(len, 5);
    cr_assert_eq(vt, 1);
    cr_assert_eq(memcmp(buf, "hello", 5), 0);

    /* A name-API write is seen by the bound read, and the other way. */
    cr_assert_eq(shl_write(t, "job", OWN, tk, "world!", 6), SHL_OK);
    memset(buf, 0, sizeof buf);
    cr_assert_eq(shl_lease_read(a, buf, sizeof buf, &len, &vt), SHL_OK);
    cr_assert_eq(len, 6);
    cr_assert_eq(memcmp(buf, "world!", 6), 0);

    cr_assert_eq(shl_lease_renew(a, tk, 500), SHL_OK);
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_eq(in.expiry_ns, 1500);
    cr_assert_eq(shl_lease_release(a, tk), SHL_OK);
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE);
    /* Released: the old token is lost, the next acquisition gets 2. */
    cr_assert_eq(shl_lease_write(a, tk, "x", 1), SHL_ELOST);
    cr_assert_eq(shl_acquire(t, "job", OTH, 100, &tk), SHL_OK);
    cr_assert_eq(tk, 2);
    done(t, name, a, NULL);
}

static int guard_calls;
static void count_guard(void *arg)
{
    (void)arg;
    guard_calls++;
}

/* The boundary: valid while now < expiry, expired at now == expiry, for every
 * bound operation, and a rejected one changes nothing. */
Test(bound, exact_expiry_boundary)
{
    char name[96];
    shl_table *t = manual(name, sizeof name, 8);
    shl_lease *a, *b;
    cr_assert_eq(shl_lease_open(t, "edge", OWN, &a), SHL_OK);
    cr_assert_eq(shl_lease_open(t, "edge", OTH, &b), SHL_OK);
    uint64_t tk, tb;
    cr_assert_eq(shl_lease_acquire(a, 50, &tk, NULL), SHL_OK); /* expiry 1050 */
    cr_assert_eq(shl_lease_write(a, tk, "v1", 2), SHL_OK);

    cr_assert_eq(shl_clock_set(t, 1049), SHL_OK);
    shl_lease_info h;
    cr_assert_eq(shl_lease_acquire(b, 10, &tb, &h), SHL_EBUSY);
    cr_assert_str_eq(h.owner, OWN);
    cr_assert_eq(h.remaining_ns, 1);
    guard_calls = 0;
    cr_assert_eq(shl_lease_guard(a, tk, count_guard, NULL), SHL_OK);
    cr_assert_eq(guard_calls, 1);

    cr_assert_eq(shl_clock_set(t, 1050), SHL_OK);
    cr_assert_eq(shl_lease_write(a, tk, "v2", 2), SHL_ELOST);
    cr_assert_eq(shl_lease_renew(a, tk, 100), SHL_ELOST);
    cr_assert_eq(shl_lease_guard(a, tk, count_guard, NULL), SHL_ELOST);
    cr_assert_eq(guard_calls, 1);
    cr_assert_eq(shl_lease_release(a, tk), SHL_ELOST);
    char buf[8];
    size_t len;
    cr_assert_eq(shl_lease_read(b, buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert_eq(len, 2);
    cr_assert_eq(memcmp(buf, "v1", 2), 0);

    cr_assert_eq(shl_lease_acquire(b, 10, &tb, NULL), SHL_OK);
    cr_assert_eq(tb, tk + 1);
    /* The old holder's token is stale now, also through the name API. */
    cr_assert_eq(shl_write(t, "edge", OWN, tk, "v3", 2), SHL_ELOST);
    cr_assert_eq(shl_lease_write(b, tb, "v4", 2), SHL_OK);
    done(t, name, a, b);
}

Test(bound, bad_arguments)
{
    char name[96];
    shl_table *t = manual(name, sizeof name, 1);
    shl_lease *a = (shl_lease *)&a;
    cr_assert_eq(shl_lease_open(NULL, "x", OWN, &a), SHL_EINVAL);
    cr_assert_null(a);
    cr_assert_eq(shl_lease_open(t, "bad name", OWN, &a), SHL_EINVAL);
    cr_assert_eq(shl_lease_open(t, "", OWN, &a), SHL_EINVAL);
    cr_assert_eq(shl_lease_open(t, "x", "", &a), SHL_EINVAL);
    cr_assert_eq(shl_lease_open(t, "x", NULL, &a), SHL_EINVAL);
    cr_assert_eq(shl_lease_open(t, "x", OWN, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_open(t, "x", OWN, &a), SHL_OK);
    /* Capacity 1: a second name does not fit. */
    shl_lease *b = (shl_lease *)&b;
    cr_assert_eq(shl_lease_open(t, "y", OWN, &b), SHL_EFULL);
    cr_assert_null(b);
    uint64_t tk;
    cr_assert_eq(shl_lease_acquire(NULL, 10, &tk, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_acquire(a, 0, &tk, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_acquire(a, 10, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_acquire(a, UINT64_MAX, &tk, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_acquire(a, 10, &tk, NULL), SHL_OK);
    cr_assert_eq(shl_lease_renew(a, tk, 0), SHL_EINVAL);
    cr_assert_eq(shl_lease_renew(a, 0, 10), SHL_EINVAL);
    cr_assert_eq(shl_lease_renew(a, tk, UINT64_MAX), SHL_EINVAL);
    char big[65] = {0};
    cr_assert_eq(shl_lease_write(a, tk, big, sizeof big), SHL_E2BIG);
    cr_assert_eq(shl_lease_write(a, tk, NULL, 1), SHL_EINVAL);
    cr_assert_eq(shl_lease_write(a, tk, NULL, 0), SHL_OK);
    cr_assert_eq(shl_lease_guard(a, tk, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_lease_read(a, NULL, 4, NULL, NULL), SHL_EINVAL);
    char buf[2];
    size_t len = 99;
    cr_assert_eq(shl_lease_read(a, buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert_eq(len, 0);
    cr_assert_eq(shl_lease_release(a, 0), SHL_EINVAL);
    cr_assert_eq(shl_lease_release(a, tk + 1), SHL_ELOST);
    cr_assert_eq(shl_lease_release(a, tk), SHL_OK);
    shl_lease_close(NULL);
    done(t, name, a, NULL);
}

struct child_arg {
    const char *table;
    shl_lease *inherited;
};

/* In a child: the parent's bound lease is refused; a fresh one works. */
static int child_fork(void *p)
{
    struct child_arg *c = p;
    uint64_t tk;
    if (shl_lease_acquire(c->inherited, 10 * SEC, &tk, NULL) != SHL_EFORK)
        return 1;
    shl_table *t;
    shl_lease *l;
    if (shl_open(c->table, NULL, &t) != SHL_OK || shl_lease_open(t, "forked", OWN, &l) != SHL_OK)
        return 2;
    int rc = shl_lease_acquire(l, 10 * SEC, &tk, NULL);
    if (rc != SHL_EBUSY)
        return 3; /* the parent holds it */
    shl_lease_close(l);
    shl_close(t);
    return 0;
}

Test(bound, fork_and_other_process)
{
    char name[96];
    t_name(name, sizeof name, "bfork");
    shl_table *t = t_create(name, 8, 16, SHL_CLOCK_MONOTONIC);
    shl_lease *a;
    cr_assert_eq(shl_lease_open(t, "forked", OTH, &a), SHL_OK);
    uint64_t tk;
    cr_assert_eq(shl_lease_acquire(a, 60 * SEC, &tk, NULL), SHL_OK);
    struct child_arg c = {name, a};
    cr_assert_eq(t_wait(t_fork(child_fork, &c)), 0);
    cr_assert_eq(shl_lease_release(a, tk), SHL_OK);
    done(t, name, a, NULL);
}
