/*
 * tests/test_spin.c - when a locker that finds a slot's mutex held stops
 * spinning and sleeps (shm/mutex.c): the rules on their own, and the lock
 * generation every slot locker bumps; and how an acquisition tells that
 * another locker came in since this thread's last hold (shl__slot_lock_moved()).
 * (A waiter watching the generation behind a stopped holder:
 * tests/test_fork.c.)
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/kind_shm/shm_kind.h"
#include "common.h"

Test(spin, one_hold_without_work_ends_the_spin)
{
    struct shl__spin sp;
    shl__spin_begin(&sp, 100, 7, 5000);
    cr_assert_eq(shl__spin_over(&sp, 100, 7, 5000 + SHL__SPIN_HOLD_NS - 1), 0);
    cr_assert_eq(shl__spin_over(&sp, 100, 7, 5000 + SHL__SPIN_HOLD_NS), 1,
                 "a holder seen doing nothing for the hold limit is not spun for");
}

Test(spin, a_new_holder_starts_the_count_again)
{
    struct shl__spin sp;
    shl__spin_begin(&sp, 100, 0, 0);
    uint64_t t = SHL__SPIN_HOLD_NS - 1;
    cr_assert_eq(shl__spin_over(&sp, 200, 0, t), 0, "another TID in the word");
    cr_assert_eq(shl__spin_over(&sp, 200, 0, t + SHL__SPIN_HOLD_NS - 1), 0);
    cr_assert_eq(shl__spin_over(&sp, 200, 0, t + SHL__SPIN_HOLD_NS), 1);
}

/* The same TID all along, as when one process unlocks and locks again
 * between two looks: only the progress word shows the new holds. */
Test(spin, a_moving_progress_word_keeps_the_spin_going_up_to_the_total)
{
    struct shl__spin sp;
    shl__spin_begin(&sp, 100, 0, 0);
    uint64_t step = SHL__SPIN_HOLD_NS - 1;
    uint32_t gen = 0;
    uint64_t t = step;
    for (; t < SHL__SPIN_TOTAL_NS; t += step)
        cr_assert_eq(shl__spin_over(&sp, 100, ++gen, t), 0, "at %llu ns", (unsigned long long)t);
    cr_assert_eq(shl__spin_over(&sp, 100, ++gen, t), 1,
                 "the spin as a whole is bounded even while the holder works");
    /* Without the word moving, the same pattern is one long hold. */
    shl__spin_begin(&sp, 100, 0, 0);
    cr_assert_eq(shl__spin_over(&sp, 100, 0, step), 0);
    cr_assert_eq(shl__spin_over(&sp, 100, 0, 2 * step), 1);
}

/* A waiter yields its CPU before each look once it has waited the yield
 * limit, not before. */
Test(spin, a_long_wait_yields_the_cpu_before_each_look)
{
    struct shl__spin sp;
    shl__spin_begin(&sp, 100, 0, 7000);
    cr_assert_eq(shl__spin_yields(&sp, 7000), 0);
    cr_assert_eq(shl__spin_yields(&sp, 7000 + SHL__SPIN_YIELD_NS - 1), 0);
    cr_assert_eq(shl__spin_yields(&sp, 7000 + SHL__SPIN_YIELD_NS), 1);
    cr_assert_lt(SHL__SPIN_YIELD_NS, SHL__SPIN_TOTAL_NS, "it yields before it gives up");
    cr_assert_gt(SHL__SPIN_YIELD_NS, SHL__SPIN_HOLD_NS,
                 "a short wait behind a working holder is spent spinning");
}

/* The gap between looks is a time, whatever a PAUSE costs: 2.5 µs on a
 * processor whose PAUSE takes 19.5 ns (128 of them), as many PAUSEs as
 * fit on others, within [16, 1024]. */
Test(spin, the_longest_gap_is_a_time_not_a_count)
{
    cr_assert_eq(shl__spin_gap_pauses(256 * 19.5), 128);
    cr_assert_eq(shl__spin_gap_pauses(256 * 39), 64, "a PAUSE twice as long: half as many");
    cr_assert_eq(shl__spin_gap_pauses(256 * 5), 500);
    cr_assert_eq(shl__spin_gap_pauses(256 * 1000), 16, "never fewer than 16");
    cr_assert_eq(shl__spin_gap_pauses(256), 1024, "never more than 1024");
    cr_assert_eq(shl__spin_gap_pauses(0), 1024);
}

/* Every lock of a slot bumps its generation: a refused acquire as much as
 * one that changes the lease. A locker that forgot it would look, to its
 * waiters, like a holder that stopped. */
Test(spin, every_slot_lock_moves_the_lock_generation)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "lockgen"), 8, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok, tok2;
    cr_assert_eq(shl_acquire(t, "res", "a", 10 * SEC, &tok), SHL_OK);
    struct shl__slot *s;
    cr_assert_eq(shl__lookup(t, "res", &s), SHL_OK);
    uint32_t g0 = atomic_load(&s->lock_gen);
    cr_assert_eq(shl_acquire(t, "res", "b", 10 * SEC, &tok2), SHL_EBUSY);
    cr_assert_eq(atomic_load(&s->lock_gen), g0 + 1, "a refused acquire");
    cr_assert_eq(shl_renew(t, "res", "a", tok, 10 * SEC), SHL_OK);
    cr_assert_eq(shl_release(t, "res", "a", tok), SHL_OK);
    cr_assert_eq(atomic_load(&s->lock_gen), g0 + 3, "a renew and a release");
    shl_close(t);
    shl_unlink(name);
}

/* What shl__slot_lock_moved() says of the next lock of s by this thread. */
static int moved_on_next_lock(shl_table *t, struct shl__slot *s)
{
    int moved = -1;
    cr_assert_eq(shl__slot_lock_moved(t, s, &moved), SHL_OK);
    shl__slot_unlock(s);
    cr_assert(moved == 0 || moved == 1);
    return moved;
}

static void *renew_in_a_thread(void *arg)
{
    void **a = arg;
    uint64_t tok = *(uint64_t *)a[1];
    return (void *)(intptr_t)shl_renew(a[0], "res", "a", tok, 10 * SEC);
}

/* An acquisition asks for the slot's lines ahead (shl__slot_prefetch_acquire())
 * only when another locker came in since this thread's last hold: the test
 * that decides it must see every other locker, thread or process, and a
 * change of slot, and must not fire for a thread that keeps a slot to itself. */
Test(spin, slot_moved_sees_every_other_locker_and_only_them)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "moved"), 8, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok, other;
    cr_assert_eq(shl_acquire(t, "res", "a", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "other", "a", 10 * SEC, &other), SHL_OK);
    struct shl__slot *s, *o;
    cr_assert_eq(shl__lookup(t, "res", &s), SHL_OK);
    cr_assert_eq(shl__lookup(t, "other", &o), SHL_OK);

    cr_assert_eq(moved_on_next_lock(t, s), 1, "this thread last locked another slot");
    cr_assert_eq(moved_on_next_lock(t, s), 0, "nobody in between");
    cr_assert_eq(shl_renew(t, "res", "a", tok, 10 * SEC), SHL_OK);
    cr_assert_eq(moved_on_next_lock(t, s), 0, "only this thread's own operations in between");

    pthread_t th;
    void *args[2] = {t, &tok}, *rc;
    cr_assert_eq(pthread_create(&th, NULL, renew_in_a_thread, args), 0);
    cr_assert_eq(pthread_join(th, &rc), 0);
    cr_assert_eq((int)(intptr_t)rc, SHL_OK);
    cr_assert_eq(moved_on_next_lock(t, s), 1, "another thread locked it in between");
    cr_assert_eq(moved_on_next_lock(t, s), 0);

    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        shl_table *k;
        uint64_t busy;
        _exit(shl_open(name, NULL, &k) == SHL_OK &&
                      shl_acquire(k, "res", "b", 10 * SEC, &busy) == SHL_EBUSY
                  ? 0
                  : 1);
    }
    int st;
    cr_assert_eq(waitpid(kid, &st, 0), kid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other process's refused acquire");
    cr_assert_eq(moved_on_next_lock(t, s), 1, "another process locked it in between");

    cr_assert_eq(moved_on_next_lock(t, o), 1, "a change of slot");
    cr_assert_eq(moved_on_next_lock(t, s), 1, "and back");
    shl_close(t);
    shl_unlink(name);
}
