/*
 * tests/helper_shared_wait.c - waiters in threads and the waiting order of
 * readers and writers (tests/shared_wait.h), asserted through the tokens
 * each acquisition got.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"
#include "shared_wait.h"

static void *waiter_run(void *p)
{
    struct t_waiter *a = p;
    uint64_t timeout = a->timeout_ns ? a->timeout_ns : 60 * SEC;
    a->rc = shl_open(a->name, NULL, &a->t);
    if (a->rc == SHL_OK && a->shared)
        a->rc = shl_acquire_shared_wait(a->t, "L", a->owner, 30 * SEC, timeout, &a->token, &a->gen);
    else if (a->rc == SHL_OK)
        a->rc = shl_acquire_wait(a->t, "L", a->owner, 30 * SEC, timeout, &a->token);
    a->done_at = t_now();
    atomic_store(&a->done, 1);
    return NULL;
}

uint32_t t_queued(shl_table *t)
{
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    return in.waiters;
}

void t_waiter_start(struct t_waiter *w, shl_table *t, uint32_t n)
{
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_run, w), 0);
    uint64_t end = t_now() + 20 * SEC;
    while (t_queued(t) < n && !atomic_load(&w->done) && t_now() < end)
        t_sleep_ns(5 * MS);
    cr_assert(!atomic_load(&w->done), "%s did not wait (rc %d)", w->owner, w->rc);
    cr_assert_eq(t_queued(t), n, "%s did not queue", w->owner);
}

int t_waiter_done_within(struct t_waiter *w, uint64_t ns)
{
    uint64_t end = t_now() + ns;
    while (!atomic_load(&w->done) && t_now() < end)
        t_sleep_ns(5 * MS);
    return atomic_load(&w->done);
}

void t_waiter_finish(struct t_waiter *w)
{
    pthread_join(w->th, NULL);
    shl_close(w->t);
}

void t_shared_wait_order(const char *name, uint64_t settle_ns)
{
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    uint64_t h, x, g;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &h), SHL_OK);
    struct t_waiter r1 = {.name = name, .owner = "r1", .shared = 1},
                    r2 = {.name = name, .owner = "r2", .shared = 1},
                    w = {.name = name, .owner = "w", .shared = 0},
                    r3 = {.name = name, .owner = "r3", .shared = 1};
    t_waiter_start(&r1, t, 1);
    t_waiter_start(&r2, t, 2);
    t_waiter_start(&w, t, 3);
    t_waiter_start(&r3, t, 4);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK, "queued waiters are the table's records");
    cr_assert_eq(shl_acquire_shared(t, "L", "plain", 30 * SEC, &x, &g), SHL_EBUSY);

    cr_assert_eq(shl_release(t, "L", "holder", h), SHL_OK);
    cr_assert(t_waiter_done_within(&r1, 20 * SEC) && t_waiter_done_within(&r2, 20 * SEC),
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
    cr_assert(t_waiter_done_within(&w, 20 * SEC), "the writer goes in once the readers are gone");
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert_eq(w.token, h + 3, "no acquisition between the readers and the writer");
    t_sleep_ns(settle_ns);
    cr_assert(!atomic_load(&r3.done), "the reader behind the writer waits while it holds");

    cr_assert_eq(shl_release(t, "L", "w", w.token), SHL_OK);
    cr_assert(t_waiter_done_within(&r3, 20 * SEC));
    cr_assert_eq(r3.rc, SHL_OK);
    cr_assert_eq(r3.token, h + 4, "the last reader came after the writer");
    cr_assert_eq(r3.gen, w.token, "and read the writer's state");
    cr_assert_eq(t_queued(t), 0, "nobody left queued");
    cr_assert_eq(shl_release(t, "L", "r3", r3.token), SHL_OK);
    struct t_waiter *all[] = {&r1, &r2, &w, &r3};
    for (int i = 0; i < 4; i++)
        t_waiter_finish(all[i]);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
}
