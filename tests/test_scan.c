/*
 * tests/test_scan.c - a scan of the whole table (shl_foreach(), what ls,
 * dump and metrics read) gives of every lease exactly what
 * shl_inspect_slot() gives of it alone. The scan fills one detail again and
 * again and copies of a slot only what it holds, so a lease with many
 * events, shared holders and a long value, followed by
 * leases with fewer or none, must not lend them any of its own; and the
 * answers about holders' handles it keeps for a moment keep holders apart.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NLEASES 6

struct seen {
    shl_lease_detail d[NLEASES];
    uint32_t n;
};

static int keep(void *arg, const shl_lease_detail *d)
{
    struct seen *s = arg;
    cr_assert_lt(s->n, NLEASES, "more leases than were made");
    s->d[s->n++] = *d;
    return 0;
}

/* `n` shared holders of lease, owners "r0".."r<n-1>". */
static void readers(shl_table *t, const char *lease, int n)
{
    for (int i = 0; i < n; i++) {
        char owner[16];
        uint64_t tok, gen;
        snprintf(owner, sizeof owner, "r%d", i);
        cr_assert_eq(shl_acquire_shared(t, lease, owner, SEC, &tok, &gen), SHL_OK);
    }
}

/* A lease with a full history, a long value and 6 shared holders (two
 * groups), then leases with less of each, and one never held. */
static void fill(shl_table *t)
{
    uint64_t tok;
    unsigned char v[64];
    memset(v, 0xab, sizeof v);
    cr_assert_eq(shl_acquire(t, "busy", "first-owner-with-a-long-name", SEC, &tok), SHL_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(shl_renew(t, "busy", "first-owner-with-a-long-name", tok, SEC), SHL_OK);
    cr_assert_eq(shl_write(t, "busy", "first-owner-with-a-long-name", tok, v, sizeof v), SHL_OK);
    cr_assert_eq(shl_release(t, "busy", "first-owner-with-a-long-name", tok), SHL_OK);
    readers(t, "busy", 6);

    shl_lease *l;
    cr_assert_eq(shl_lease_open(t, "never", "nobody", &l), SHL_OK); /* a name, no event */
    shl_lease_close(l);

    cr_assert_eq(shl_acquire(t, "short", "b", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "short", "b", tok, "xyz", 3), SHL_OK);

    readers(t, "one-reader", 1);

    /* Readers that came and went: the lease gave its group back. */
    readers(t, "gone", 5);
    for (int i = 0; i < 5; i++) {
        shl_lease_detail d;
        cr_assert_eq(shl_inspect(t, "gone", &d), SHL_OK);
        cr_assert_eq(shl_release(t, "gone", d.shared[0].owner, d.shared[0].token), SHL_OK);
    }

    cr_assert_eq(shl_lease_open(t, "never-too", "nobody", &l), SHL_OK);
    shl_lease_close(l);
}

Test(scan, foreach_gives_each_lease_as_inspect_slot_does)
{
    t_guard(60);
    char name[96];
    t_name(name, sizeof name, "scan");
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.value_size = 64;
    o.max_shared = 64;          /* room for every reader's group */
    o.clock = SHL_CLOCK_MANUAL; /* one now for both reads */
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    cr_assert_eq(shl_clock_set(t, 1000 * SEC), SHL_OK);
    fill(t);

    struct seen *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    cr_assert_eq(shl_foreach(t, keep, s), SHL_OK);
    cr_assert_eq(s->n, NLEASES);
    /* The scan saw what was made (so that the comparison below compares
     * something): the first lease's events, holders and value. */
    cr_assert_eq(s->d[0].nevents, SHL_HISTORY_MAX);
    cr_assert_eq(s->d[0].nshared, 6);
    cr_assert_eq(s->d[0].preview_len, SHL_PREVIEW_MAX < 64 ? SHL_PREVIEW_MAX : 64);
    cr_assert_eq(s->d[0].events[0].op, SHL_OP_RENEW); /* the last 8 of 18 */
    cr_assert_eq(s->d[0].events[1].op, SHL_OP_RELEASE);
    cr_assert_eq(s->d[0].events[7].op, SHL_OP_SHARED);
    cr_assert_str_eq(s->d[0].events[7].owner, "r5");
    cr_assert_eq(s->d[1].nevents, 0);
    cr_assert_eq(s->d[2].nevents, 1);
    cr_assert_str_eq(s->d[2].events[0].owner, "b");
    cr_assert_eq(s->d[2].preview_len, 3);
    cr_assert_eq(s->d[3].nshared, 1);
    cr_assert_eq(s->d[4].nshared, 0);
    for (uint32_t i = 0; i < NLEASES; i++) {
        shl_lease_detail one;
        memset(&one, 0x5a, sizeof one); /* whatever the caller's memory held */
        cr_assert_eq(shl_inspect_slot(t, i, &one), SHL_OK);
        cr_assert_str_eq(s->d[i].name, one.name);
        cr_assert_eq(s->d[i].nevents, one.nevents, "%s", one.name);
        cr_assert_eq(s->d[i].nshared, one.nshared, "%s", one.name);
        cr_assert_eq(s->d[i].preview_len, one.preview_len, "%s", one.name);
        cr_assert(memcmp(&s->d[i], &one, sizeof one) == 0,
                  "%s: the scan's detail differs from shl_inspect_slot()'s", one.name);
    }
    free(s);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

static int keep_state(void *arg, const shl_lease_detail *d)
{
    int *states = arg;
    states[d->slot] = d->info.state;
    return 0;
}

/* A scan asks the kernel once per holder's handle, not once per lease, and
 * still tells each lease's holder apart: leases held in turn through a
 * handle that is open and through one that is closed (its holder gone). */
Test(scan, foreach_tells_each_holder_alive_or_gone)
{
    t_guard(60);
    char name[96];
    t_name(name, sizeof name, "scanlive");
    shl_table *t = t_create(name, 64, 16, SHL_CLOCK_MONOTONIC);
    shl_table *alive, *gone;
    cr_assert_eq(shl_open(name, NULL, &alive), SHL_OK);
    cr_assert_eq(shl_open(name, NULL, &gone), SHL_OK);
    for (int i = 0; i < 40; i++) {
        char lease[16];
        uint64_t tok;
        snprintf(lease, sizeof lease, "L%02d", i);
        /* alive, gone, gone, alive, ...: runs of both */
        shl_table *h = (i % 4 == 1 || i % 4 == 2) ? gone : alive;
        cr_assert_eq(shl_acquire(h, lease, "o", 600 * SEC, &tok), SHL_OK);
    }
    cr_assert_eq(shl_close(gone), SHL_OK);
    int states[64];
    cr_assert_eq(shl_foreach(t, keep_state, states), SHL_OK);
    for (int i = 0; i < 40; i++) {
        int want = (i % 4 == 1 || i % 4 == 2) ? SHL_STATE_ORPHANED : SHL_STATE_HELD;
        shl_lease_detail one;
        cr_assert_eq(shl_inspect_slot(t, (uint32_t)i, &one), SHL_OK);
        cr_assert_eq(one.info.state, want, "L%02d alone", i);
        cr_assert_eq(states[i], want, "L%02d in the scan: %s", i, shl_state_name(states[i]));
    }
    shl_close(alive);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
