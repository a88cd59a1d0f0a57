/*
 * tests/test_orphan_memo.c - a handle remembers for a few milliseconds that
 * a holder was alive, so that a loop of refused acquires on a reclaiming
 * table does not ask the kernel each time (lib/kind_shm/orphan.c). What must hold
 * whatever the memo says: a holder killed while it is being polled is
 * reclaimed once the reclaim delay has passed since the death was seen,
 * never before, and never later than a little after.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"

struct shared {
    char table[96];
    _Atomic int holding;
};

static int holder(void *p)
{
    struct shared *s = p;
    shl_table *t;
    uint64_t tok;
    if (shl_open(s->table, NULL, &t) != SHL_OK || shl_acquire(t, "L", "doomed", 60 * SEC, &tok))
        return 2;
    atomic_store(&s->holding, 1);
    for (;;)
        pause();
}

static int is_holding(void *p)
{
    return atomic_load(&((struct shared *)p)->holding);
}

Test(orphan_memo, a_holder_killed_while_polled_is_reclaimed_after_the_delay)
{
    t_guard(60);
    struct shared *s =
        mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(s != MAP_FAILED);
    memset(s, 0, sizeof *s);
    t_name(s->table, sizeof s->table, "memo");
    shl_options o;
    shl_options_init(&o); /* the default: reclaim, after SHL_RECLAIM_DELAY_DEFAULT_MS */
    o.capacity = 4;
    shl_table *t;
    cr_assert_eq(shl_open(s->table, &o, &t), SHL_OK);
    pid_t h = t_fork(holder, s);
    cr_assert(t_until(is_holding, s, 10 * SEC));
    uint64_t tok, end = t_now() + 100 * MS;
    while (t_now() < end) /* the memo is filled, and refreshed */
        cr_assert_eq(shl_acquire(t, "L", "poller", SEC, &tok), SHL_EBUSY);
    kill(h, SIGKILL);
    cr_assert_eq(t_wait(h), 128 + SIGKILL);
    /* Polled every millisecond, as a busy script would: refused until the
     * delay from the first sighting has passed, then taken, token 2. */
    uint64_t dead = t_now(), got = 0;
    int rc;
    while ((rc = shl_acquire(t, "L", "poller", SEC, &tok)) == SHL_EBUSY &&
           t_now() - dead < 20 * SEC)
        t_sleep_ns(MS);
    got = t_now();
    cr_assert_eq(rc, SHL_OK, "never reclaimed: %s", shl_errname(rc));
    cr_assert_eq(tok, 2);
    cr_assert_geq(got - dead, (uint64_t)SHL_RECLAIM_DELAY_DEFAULT_MS * MS,
                  "reclaimed %.3f s after the death, before the delay", (double)(got - dead) / 1e9);
    /* Generous: the delay is 1 s and the memo 10 ms; a loaded machine may
     * stall the poller, which only ever makes this later. */
    cr_assert_lt(got - dead, 10 * SEC);
    shl_lease_detail *d = malloc(sizeof *d);
    cr_assert_eq(shl_inspect(t, "L", d), SHL_OK);
    cr_assert_eq(d->events[d->nevents - 1].op, SHL_OP_RECLAIM);
    free(d);
    shl_close(t);
    shl_unlink(s->table);
    munmap(s, sizeof *s);
}
