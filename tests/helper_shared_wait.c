/*
 * tests/helper_shared_wait.c - the waiting order of readers and writers
 * (tests/shared_wait.h), asserted through the tokens each acquisition got.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common.h"
#include "shared_wait.h"

struct sw_waiter {
    const char *name; /* the table */
    const char *owner;
    int shared;
    shl_table *t; /* its own handle, closed by the scenario at the end */
    int rc;
    uint64_t token, gen;
    _Atomic int done;
};

static void *sw_run(void *p)
{
    struct sw_waiter *a = p;
    a->rc = shl_open(a->name, NULL, &a->t);
    if (a->rc == SHL_OK && a->shared)
        a->rc =
            shl_acquire_shared_wait(a->t, "L", a->owner, 30 * SEC, 60 * SEC, &a->token, &a->gen);
    else if (a->rc == SHL_OK)
        a->rc = shl_acquire_wait(a->t, "L", a->owner, 30 * SEC, 60 * SEC, &a->token);
    atomic_store(&a->done, 1);
    return NULL;
}

static uint32_t sw_queued(shl_table *t)
{
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    return in.waiters;
}

/* Starts a waiter and returns once it is queued (the n-th). */
static void sw_start(pthread_t *th, struct sw_waiter *a, shl_table *t, uint32_t n)
{
    cr_assert_eq(pthread_create(th, NULL, sw_run, a), 0);
    uint64_t end = t_now() + 20 * SEC;
    while (sw_queued(t) < n && !atomic_load(&a->done) && t_now() < end)
        t_sleep_ns(5 * MS);
    cr_assert(!atomic_load(&a->done), "%s did not wait (rc %d)", a->owner, a->rc);
    cr_assert_eq(sw_queued(t), n, "%s did not queue", a->owner);
}

static int sw_done_within(struct sw_waiter *a, uint64_t ns)
{
    uint64_t end = t_now() + ns;
    while (!atomic_load(&a->done) && t_now() < end)
        t_sleep_ns(5 * MS);
    return atomic_load(&a->done);
}

void t_shared_wait_order(const char *name, uint64_t settle_ns)
{
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    uint64_t h, x, g;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &h), SHL_OK);
    struct sw_waiter r1 = {.name = name, .owner = "r1", .shared = 1},
                     r2 = {.name = name, .owner = "r2", .shared = 1},
                     w = {.name = name, .owner = "w", .shared = 0},
                     r3 = {.name = name, .owner = "r3", .shared = 1};
    pthread_t t1, t2, tw, t3;
    sw_start(&t1, &r1, t, 1);
    sw_start(&t2, &r2, t, 2);
    sw_start(&tw, &w, t, 3);
    sw_start(&t3, &r3, t, 4);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK, "queued waiters are the table's records");
    cr_assert_eq(shl_acquire_shared(t, "L", "plain", 30 * SEC, &x, &g), SHL_EBUSY);

    cr_assert_eq(shl_release(t, "L", "holder", h), SHL_OK);
    cr_assert(sw_done_within(&r1, 20 * SEC) && sw_done_within(&r2, 20 * SEC),
              "the readers ahead of the writer go in");
    cr_assert_eq(r1.rc, SHL_OK);
    cr_assert_eq(r2.rc, SHL_OK);
    cr_assert((r1.token == h + 1 && r2.token == h + 2) || (r1.token == h + 2 && r2.token == h + 1),
              "the two readers took the next two tokens (h %llu: r1 %llu, r2 %llu)",
              (unsigned long long)h, (unsigned long long)r1.token, (unsigned long long)r2.token);
    cr_assert(r1.gen == h && r2.gen == h, "gen: the writer they waited for");
    t_sleep_ns(settle_ns);
    cr_assert(!atomic_load(&w.done), "the writer waits for the readers (rc %d, token %llu)", w.rc,
              (unsigned long long)w.token);
    cr_assert(!atomic_load(&r3.done), "a reader behind a queued writer waits (rc %d, token %llu)",
              r3.rc, (unsigned long long)r3.token);
    cr_assert_eq(shl_acquire_shared(t, "L", "plain", 30 * SEC, &x, &g), SHL_EBUSY,
                 "a plain reader does not pass the queued writer");
    cr_assert_eq(shl_acquire_shared_wait(t, "L", "plain", 30 * SEC, 0, &x, &g), SHL_ETIMEDOUT,
                 "nor does a reader that tries once");

    cr_assert_eq(shl_release(t, "L", "r1", r1.token), SHL_OK);
    t_sleep_ns(settle_ns);
    cr_assert(!atomic_load(&w.done), "one reader is still in");
    cr_assert_eq(shl_release(t, "L", "r2", r2.token), SHL_OK);
    cr_assert(sw_done_within(&w, 20 * SEC), "the writer goes in once the readers are gone");
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert_eq(w.token, h + 3, "no acquisition between the readers and the writer");
    t_sleep_ns(settle_ns);
    cr_assert(!atomic_load(&r3.done), "the reader behind the writer waits while it holds");

    cr_assert_eq(shl_release(t, "L", "w", w.token), SHL_OK);
    cr_assert(sw_done_within(&r3, 20 * SEC));
    cr_assert_eq(r3.rc, SHL_OK);
    cr_assert_eq(r3.token, h + 4, "the last reader came after the writer");
    cr_assert_eq(r3.gen, w.token, "and read the writer's state");
    cr_assert_eq(sw_queued(t), 0, "nobody left queued");
    cr_assert_eq(shl_release(t, "L", "r3", r3.token), SHL_OK);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(tw, NULL);
    pthread_join(t3, NULL);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    struct sw_waiter *all[] = {&r1, &r2, &w, &r3};
    for (int i = 0; i < 4; i++)
        shl_close(all[i]->t);
    shl_close(t);
}
