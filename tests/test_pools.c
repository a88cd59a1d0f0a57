/*
 * tests/test_pools.c - the reader and waiter pools (shm/layout.h, Pools):
 * a full pool is SHL_EFULL naming the pool, never a wait; groups go back
 * once unused, but a lease's first, kept until a pool runs short and
 * then taken back (never from under a lease that uses it), and room in a
 * group a lease has is used before another group is taken; a table may
 * keep no history; what a lease costs; a process
 * killed while a group is taken or given back leaks nothing; a planted
 * leak is found by check and mended by repair.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

#define KILLED (128 + SIGKILL)

static shl_table *pool_table(char *name, size_t cap, const char *tag, uint32_t capacity,
                             uint32_t max_shared, uint32_t max_waiters, uint32_t history)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = 32;
    o.policy = 0;
    o.max_shared = max_shared;
    o.max_waiters = max_waiters;
    o.history = history;
    return t_create_opts(name, cap, tag, &o);
}

/* ------------------------------------------------------------ full pools */

Test(pools, a_full_reader_pool_is_efull_naming_it)
{
    t_guard(30);
    char name[96], ow[16];
    shl_table *t = pool_table(name, sizeof name, "plrd", 16, 4, SHL_POOL_DEFAULT, SHL_HISTORY_MAX);
    shl_table_info in = t_info(t);
    cr_assert_eq(in.max_shared, 4u);
    cr_assert_eq(in.shared_taken, 0u);
    uint64_t tok[4], gen, x;
    for (int i = 0; i < 4; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_acquire_shared(t, "A", ow, 60 * SEC, &tok[i], &gen), SHL_OK, "%d", i);
    }
    cr_assert_eq(t_info(t).shared_taken, 4u, "one group of four, taken");
    /* Another lease, and a fifth reader of the same one (its record is in
     * a second group): no group is free. */
    cr_assert_eq(shl_acquire_shared(t, "B", "b", 60 * SEC, &x, &gen), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "reader pool"), "%s", shl_last_error());
    cr_assert_eq(shl_acquire_shared(t, "A", "r4", 60 * SEC, &x, &gen), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "reader pool"), "%s", shl_last_error());
    /* The group is free for another lease once its last reader is gone,
     * not before: A keeps it, and B takes it back. */
    for (int i = 0; i < 3; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_release(t, "A", ow, tok[i]), SHL_OK);
    }
    cr_assert_eq(shl_acquire_shared(t, "B", "b", 60 * SEC, &x, &gen), SHL_EFULL,
                 "three readers released, one left: the group stays");
    cr_assert_eq(shl_release(t, "A", "r3", tok[3]), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 4u, "kept by A for its next reader");
    cr_assert_eq(shl_acquire_shared(t, "B", "b", 60 * SEC, &x, &gen), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 4u);
    cr_assert_eq(shl_acquire_shared(t, "A", "r0", 60 * SEC, &tok[0], &gen), SHL_EFULL,
                 "B took A's group back and uses it");
    /* A table with no reader pool: shared acquisition is refused, the
     * exclusive kind works. */
    c_done(t, name);
    t = pool_table(name, sizeof name, "plrd0", 16, 0, SHL_POOL_DEFAULT, SHL_HISTORY_MAX);
    cr_assert_eq(t_info(t).max_shared, 0u);
    cr_assert_eq(shl_acquire_shared(t, "A", "r", 60 * SEC, &x, &gen), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "reader pool"), "%s", shl_last_error());
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &x), SHL_OK);
    cr_assert_eq(shl_release(t, "A", "w", x), SHL_OK);
    c_done(t, name);
}

/* A waiter that queues on `lease` (held by the parent) and, once it has
 * it, releases it. */
struct wjob {
    const char *table, *lease;
    int i;
};

static int waiter(void *arg)
{
    struct wjob *j = arg;
    shl_table *t;
    char ow[16];
    if (shl_open(j->table, NULL, &t) != SHL_OK)
        return 3;
    snprintf(ow, sizeof ow, "w%d", j->i);
    uint64_t tok;
    int rc = shl_acquire_wait(t, j->lease, ow, 60 * SEC, 50 * SEC, &tok);
    if (rc == SHL_OK)
        rc = shl_release(t, j->lease, ow, tok);
    shl_close(t);
    return rc == SHL_OK ? 0 : 4;
}

/* Polls (no bound asserted but the guard's) until the lease has n waiters
 * queued and the waiter pool n entries in taken groups. */
static void wait_queued(shl_table *t, const char *lease, uint32_t n, uint32_t taken)
{
    for (;;) {
        shl_lease_info li;
        cr_assert_eq(shl_stat(t, lease, &li), SHL_OK);
        if (li.waiters == n && t_info(t).waiters_taken == taken)
            return;
        t_sleep_ns(SEC / 100);
    }
}

Test(pools, a_full_waiter_pool_is_efull_never_a_wait)
{
    t_guard(120);
    char name[96];
    shl_table *t = pool_table(name, sizeof name, "plwq", 16, SHL_POOL_DEFAULT, 8, SHL_HISTORY_MAX);
    cr_assert_eq(t_info(t).max_waiters, 8u);
    uint64_t a, b, x;
    cr_assert_eq(shl_acquire(t, "A", "h", 100 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(t, "B", "h", 100 * SEC, &b), SHL_OK);
    struct wjob j[8];
    pid_t pid[8];
    for (int i = 0; i < 8; i++) {
        j[i] = (struct wjob){name, "A", i};
        pid[i] = t_fork(waiter, &j[i]);
    }
    wait_queued(t, "A", 8, 8);
    /* A wait on another lease needs a group, and none is free: refused at
     * once (a wait would end only by its timeout, after the guard). */
    cr_assert_eq(shl_acquire_wait(t, "B", "c", 60 * SEC, 100 * SEC, &x), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "waiter pool"), "%s", shl_last_error());
    cr_assert_eq(shl_acquire_shared_wait(t, "B", "c", 60 * SEC, 100 * SEC, &x, NULL), SHL_EFULL);
    /* A wait on a free lease needs no entry. */
    cr_assert_eq(shl_acquire_wait(t, "C", "c", 60 * SEC, 100 * SEC, &x), SHL_OK);
    cr_assert_eq(shl_release(t, "C", "c", x), SHL_OK);
    /* Each waiter gets the lease in turn; A keeps the group, unused,
     * after the last one, and B's waiter takes it back. */
    cr_assert_eq(shl_release(t, "A", "h", a), SHL_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(t_wait(pid[i]), 0, "waiter %d", i);
    cr_assert_eq(t_info(t).waiters_taken, 8u, "kept by A");
    cr_assert_eq(t_info(t).waiters_taken_back, 0u);
    cr_assert_eq(shl_acquire_wait(t, "B", "c", 60 * SEC, SEC / 100, &x), SHL_ETIMEDOUT,
                 "A's unused group taken back: a wait");
    cr_assert_eq(t_info(t).waiters_taken, 8u, "kept by B now");
    cr_assert_eq(t_info(t).waiters_taken_back, 1u);
    cr_assert_eq(shl_acquire(t, "A", "h", 100 * SEC, &a), SHL_OK);
    j[0] = (struct wjob){name, "A", 0};
    pid[0] = t_fork(waiter, &j[0]);
    wait_queued(t, "A", 1, 8);
    cr_assert_eq(shl_release(t, "A", "h", a), SHL_OK);
    cr_assert_eq(t_wait(pid[0]), 0, "a waiter of A, in the group taken back from B");
    cr_assert_eq(shl_release(t, "B", "h", b), SHL_OK);
    c_done(t, name);
}

Test(pools, no_waiter_pool_refuses_a_wait_on_a_held_lease)
{
    t_guard(30);
    char name[96];
    shl_table *t = pool_table(name, sizeof name, "plwq0", 16, SHL_POOL_DEFAULT, 0, SHL_HISTORY_MAX);
    cr_assert_eq(t_info(t).max_waiters, 0u);
    uint64_t a, x;
    cr_assert_eq(shl_acquire_wait(t, "A", "w", 60 * SEC, SEC, &a), SHL_OK, "free: no queue needed");
    cr_assert_eq(shl_acquire_wait(t, "A", "v", 60 * SEC, 100 * SEC, &x), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "waiter pool"), "%s", shl_last_error());
    cr_assert_eq(shl_release(t, "A", "w", a), SHL_OK);
    c_done(t, name);
}

/* ------------------------------------------------------ groups go back */

Test(pools, groups_go_back_after_releases_expiries_and_revokes)
{
    t_guard(30);
    char name[96], ow[16];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.clock = SHL_CLOCK_MANUAL;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.policy = 0;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(t_name(name, sizeof name, "plback"), &o, &t), SHL_OK);
    cr_assert_eq(shl_clock_set(t, 1000), SHL_OK);
    uint64_t tok, gen, x, nx;
    /* X: five readers (two groups), left to expire; a new reader sweeps
     * them and keeps one group. */
    for (int i = 0; i < 5; i++) {
        snprintf(ow, sizeof ow, "x%d", i);
        cr_assert_eq(shl_acquire_shared(t, "X", ow, 100, &tok, &gen), SHL_OK);
    }
    /* Y: five readers, left to expire; an exclusive acquire ends them. */
    for (int i = 0; i < 5; i++) {
        snprintf(ow, sizeof ow, "y%d", i);
        cr_assert_eq(shl_acquire_shared(t, "Y", ow, 100, &x, &gen), SHL_OK);
    }
    /* Z: five readers, revoked. */
    for (int i = 0; i < 5; i++) {
        snprintf(ow, sizeof ow, "z%d", i);
        cr_assert_eq(shl_acquire_shared(t, "Z", ow, 1000, &x, &gen), SHL_OK);
    }
    cr_assert_eq(t_info(t).shared_taken, 6 * SHL_SHARED_GROUP);
    cr_assert_eq(shl_clock_set(t, 1200), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "X", "new", 100, &nx, &gen), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 5 * SHL_SHARED_GROUP, "X's second group went back");
    cr_assert_eq(shl_acquire(t, "Y", "w", 100, &x), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 4 * SHL_SHARED_GROUP, "Y's second group went back");
    cr_assert_eq(shl_revoke(t, "Z"), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 3 * SHL_SHARED_GROUP, "Z's second group went back");
    cr_assert_eq(shl_release(t, "X", "new", nx), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 3 * SHL_SHARED_GROUP,
                 "each lease keeps its first group, unused");
    /* Kept groups are no problem to check, and nothing to repair. */
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(p.n, 0u, "%s", p.line[0]);
    c_done(t, name);
}

/* ------------------------------------------- kept groups are taken back */

/* Two leases keep a reader group each, unused; a third lease's reader
 * finds the pool (two groups) full and takes one of them back. A lease
 * whose mutex another holds is passed over, never waited for. */
Test(pools, a_short_pool_takes_kept_groups_back)
{
    t_guard(30);
    char name[96];
    shl_table *t = pool_table(name, sizeof name, "plkeep", 16, 8, SHL_POOL_DEFAULT, 8);
    uint64_t a, b, c, gen;
    cr_assert_eq(shl_acquire_shared(t, "A", "r", 60 * SEC, &a, &gen), SHL_OK);
    cr_assert_eq(shl_release(t, "A", "r", a), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "B", "r", 60 * SEC, &b, &gen), SHL_OK);
    cr_assert_eq(shl_release(t, "B", "r", b), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 8u, "both kept");
    cr_assert_eq(t_info(t).shared_taken_back, 0u);
    /* A's mutex held (as by a process inside A's critical section): only
     * B's group can be taken back; then none. */
    struct shl__key k;
    cr_assert_eq(shl__key_lease("A", &k), SHL_OK);
    struct shl__slot *sa = shl__find(t, &k);
    cr_assert(sa);
    cr_assert_eq(shl__slot_lock(t, sa), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "C", "r", 60 * SEC, &c, &gen), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken_back, 1u, "B's group");
    cr_assert_eq(shl_acquire_shared(t, "D", "r", 60 * SEC, &b, &gen), SHL_EFULL,
                 "A's kept group is passed over while its mutex is held");
    cr_assert_eq(t_info(t).shared_taken_back, 1u, "a refusal takes nothing back");
    cr_assert(strstr(shl_last_error(), "reader pool"), "%s", shl_last_error());
    shl__slot_unlock(sa);
    cr_assert_eq(shl_acquire_shared(t, "D", "r", 60 * SEC, &b, &gen), SHL_OK, "A's, taken back");
    cr_assert_eq(t_info(t).shared_taken_back, 2u);
    cr_assert_eq(t_info(t).waiters_taken_back + t_info(t).spare_values_taken_back, 0u);
    cr_assert_eq(shl_acquire_shared(t, "A", "r", 60 * SEC, &a, &gen), SHL_EFULL);
    /* The leases whose groups were taken back work on: their readers'
     * tokens go on from where they were. */
    cr_assert_eq(shl_release(t, "C", "r", c), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "A", "r", 60 * SEC, &a, &gen), SHL_OK);
    cr_assert_eq(a, 2u, "A's second reader");
    cr_assert_eq(shl_release(t, "A", "r", a), SHL_OK);
    cr_assert_eq(shl_release(t, "D", "r", b), SHL_OK);
    c_done(t, name);
}

/* A lease whose first group was taken back, with room in its second: a new
 * reader takes a record there rather than a group (none is free). */
Test(pools, a_reader_takes_room_in_a_group_its_lease_has)
{
    t_guard(30);
    char name[96], ow[16];
    shl_table *t = pool_table(name, sizeof name, "plroom", 16, 8, SHL_POOL_DEFAULT, 8);
    uint64_t tok[5], b, n, gen;
    for (int i = 0; i < 5; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_acquire_shared(t, "A", ow, 60 * SEC, &tok[i], &gen), SHL_OK, "%d", i);
    }
    for (int i = 0; i < 4; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_release(t, "A", ow, tok[i]), SHL_OK, "%d", i);
    }
    cr_assert_eq(t_info(t).shared_taken, 8u, "A keeps its first group, unused, and its second");
    cr_assert_eq(shl_acquire_shared(t, "B", "b", 60 * SEC, &b, &gen), SHL_OK,
                 "B takes A's kept group back");
    cr_assert_eq(shl_acquire_shared(t, "C", "c", 60 * SEC, &n, &gen), SHL_EFULL, "no group left");
    cr_assert_eq(shl_acquire_shared(t, "A", "n", 60 * SEC, &n, &gen), SHL_OK,
                 "a record of A's second group: %s", shl_last_error());
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "A", &in), SHL_OK);
    cr_assert_eq(in.shared, 2u, "r4 and n");
    cr_assert_eq(shl_release(t, "A", "n", n), SHL_OK);
    cr_assert_eq(shl_release(t, "A", "r4", tok[4]), SHL_OK);
    cr_assert_eq(shl_release(t, "B", "b", b), SHL_OK);
    c_done(t, name);
}

/* ---------------------------------------------------------------- history */

Test(pools, a_table_may_keep_no_history)
{
    t_guard(30);
    char name[96];
    shl_table *t =
        pool_table(name, sizeof name, "plhist", 16, SHL_POOL_DEFAULT, SHL_POOL_DEFAULT, 0);
    cr_assert_eq(t_info(t).history, 0u);
    uint64_t a, s, gen;
    cr_assert_eq(shl_acquire(t, "L", "o", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_renew(t, "L", "o", a, 60 * SEC), SHL_OK);
    cr_assert_eq(shl_write(t, "L", "o", a, "v", 1), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "o", a), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "r", 60 * SEC, &s, &gen), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "r", s), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "o", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(a, 3u);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.nevents, 0u, "no event kept");
    cr_assert_eq(d.info.token, 3u);
    cr_assert_eq(d.info.state, SHL_STATE_HELD);
    cr_assert_eq(shl_release(t, "L", "o", a), SHL_OK);
    c_done(t, name);
    /* The default keeps SHL_HISTORY_MAX; more is refused. */
    shl_options o;
    shl_options_init(&o);
    cr_assert_eq(o.history, SHL_HISTORY_MAX);
    o.history = SHL_HISTORY_MAX + 1;
    cr_assert_eq(shl_open(t_name(name, sizeof name, "plhist9"), &o, &t), SHL_EINVAL);
}

/* ----------------------------------------------------------------- sizes */

/* Segment bytes per lease of a 1,024-lease table at 256 B values. */
static uint64_t per_lease(uint32_t max_shared, uint32_t history)
{
    char name[96];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 1024;
    o.value_size = 256;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.max_shared = max_shared;
    o.history = history;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(t_name(name, sizeof name, "plsize"), &o, &t), SHL_OK);
    shl_table_info in = t_info(t);
    shl_close(t);
    shl_unlink(name);
    return in.size / in.capacity;
}

Test(pools, a_default_table_costs_at_most_2_kib_a_lease_and_a_lean_one_1_kib)
{
    t_guard(30);
    uint64_t dflt = per_lease(SHL_POOL_DEFAULT, SHL_HISTORY_MAX);
    cr_assert_leq(dflt, 2048u, "default pools, 256 B values: %llu B a lease",
                  (unsigned long long)dflt);
    /* Without the reader pool and the history: the slot, one value
     * buffer and a share of the waiter and value pools. */
    uint64_t lean = per_lease(0, 0);
    cr_assert_lt(lean, dflt - SHL_HISTORY_MAX * 64);
    cr_assert_leq(lean, 1024u, "no readers, no history, 256 B values: %llu B a lease",
                  (unsigned long long)lean);
}

/* ----------------------------------------------------------------- crash */

static int take_reader(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok, gen;
    return shl_acquire_shared(t, "L", "dies", 60 * SEC, &tok, &gen);
}

/* A reader of lease `arg` that comes and goes. */
static int reader_comes_and_goes(shl_table *t, void *arg)
{
    uint64_t tok, gen;
    int rc = shl_acquire_shared(t, arg, "dies", 60 * SEC, &tok, &gen);
    return rc != SHL_OK ? rc : shl_release(t, arg, "dies", tok);
}

static int queue_up(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire_wait(t, "L", "dies", 60 * SEC, 30 * SEC, &tok);
}

/* The next locker of "L" recovers it: an exclusive acquire and release. */
static void next_locker(shl_table *t)
{
    uint64_t x;
    cr_assert_eq(shl_acquire(t, "L", "next", 60 * SEC, &x), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "next", x), SHL_OK);
}

Test(pools, a_death_while_a_group_is_taken_or_given_back_leaks_nothing)
{
    t_guard(60);
    char name[96];
    shl_table *t =
        pool_table(name, sizeof name, "plcrash", 16, SHL_POOL_DEFAULT, SHL_POOL_DEFAULT, 8);
    uint64_t x;
    /* Killed between the group's owner and the slot's ref. */
    cr_assert_eq(c_die_at(name, SHL__CP_POOL_TAKEN, 1, take_reader, NULL), KILLED);
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "owned, not named");
    next_locker(t);
    cr_assert_eq(t_info(t).shared_taken, 0u);
    /* Killed between the ref cleared and the owner given back: a fifth
     * reader, whose record is in a second group. */
    uint64_t four[4], gen;
    char ow[16];
    for (int i = 0; i < 4; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_acquire_shared(t, "L", ow, 60 * SEC, &four[i], &gen), SHL_OK);
    }
    cr_assert_eq(c_die_at(name, SHL__CP_POOL_PUT, 1, reader_comes_and_goes, "L"), KILLED);
    cr_assert_eq(t_info(t).shared_taken, 2 * SHL_SHARED_GROUP, "one in use, one owned");
    for (int i = 0; i < 4; i++) {
        snprintf(ow, sizeof ow, "r%d", i);
        cr_assert_eq(shl_release(t, "L", ow, four[i]), SHL_OK);
    }
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "the first kept, unused");
    /* A waiter killed while taking its group. */
    cr_assert_eq(shl_acquire(t, "L", "h", 60 * SEC, &x), SHL_OK);
    cr_assert_eq(c_die_at(name, SHL__CP_POOL_TAKEN, 1, queue_up, NULL), KILLED);
    cr_assert_eq(t_info(t).waiters_taken, SHL_WAITER_GROUP);
    cr_assert_eq(shl_release(t, "L", "h", x), SHL_OK);
    cr_assert_eq(t_info(t).waiters_taken, 0u);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    /* A reader killed after its record was chosen, before its intent:
     * unused, its group kept. */
    cr_assert_eq(c_die_at(name, SHL__CP_SH_INTENT, 1, take_reader, NULL), KILLED);
    next_locker(t);
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP);
    c_done(t, name);
    /* Killed while taking a kept group back, inside the lease that kept
     * it (both leases' mutexes held): each is recovered by its next
     * locker, and the group is free for whoever comes. */
    t = pool_table(name, sizeof name, "plcrash2", 16, 4, SHL_POOL_DEFAULT, 8);
    cr_assert_eq(reader_comes_and_goes(t, "A"), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "kept by A");
    cr_assert_eq(c_die_at(name, SHL__CP_POOL_PUT, 1, reader_comes_and_goes, "C"), KILLED);
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "owned by A, named by nobody");
    struct c_problems q;
    cr_assert_eq(c_repair(t, 0, &q), SHL_OK);
    cr_assert_eq(t_info(t).shared_taken, 0u, "recovered: free");
    cr_assert_eq(reader_comes_and_goes(t, "C"), SHL_OK);
    cr_assert_eq(reader_comes_and_goes(t, "A"), SHL_OK, "C's kept group, taken back");
    c_done(t, name);
}

/* --------------------------------------------------------------- planted */

Test(pools, a_planted_leak_is_found_and_mended)
{
    t_guard(30);
    char name[96];
    shl_table *t = pool_table(name, sizeof name, "plleak", 16, 16, 16, 8);
    uint64_t a, gen;
    cr_assert_eq(shl_acquire_shared(t, "A", "r", 60 * SEC, &a, &gen), SHL_OK);
    struct shl__key k;
    cr_assert_eq(shl__key_lease("A", &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    cr_assert(s);
    uint32_t no = shl__tslot_no(t, s);
    /* A free reader group and a free waiter group owned by A's slot, which
     * names neither. */
    uint32_t g = s->sh_ref[0] == 1 ? 1 : 0;
    atomic_store(&shl__tsh_group(t, g)->owner, no + 1);
    atomic_store(&shl__twq_group(t, 1)->owner, no + 1);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "reader pool: group"), "%s", p.line[0]);
    cr_assert(c_has(&p, "which does not name it (leaked)"), "%s", p.line[0]);
    cr_assert(c_has(&p, "waiter pool: group 1"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "would: lease A: 2 pool groups taken but not named"), "%s", p.line[0]);
    cr_assert_eq(t_info(t).shared_taken, 2 * SHL_SHARED_GROUP, "a dry run changes nothing");
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "lease A: 2 pool groups taken but not named (leaked): give them back"),
              "%s", p.line[0]);
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "A's own group stays");
    cr_assert_eq(t_info(t).waiters_taken, 0u);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    /* A group owned by a slot that holds no lease. */
    atomic_store(&shl__tsh_group(t, 3)->owner, 9);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "reader pool: group 3 is taken by slot 8, which holds no lease"), "%s",
              p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    /* A ref to a group that is free: taken again, its reader kept; a ref
     * to another slot's group: forgotten. */
    uint32_t mine = s->sh_ref[0] - 1;
    atomic_store(&shl__tsh_group(t, mine)->owner, 0);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "which is free"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "take it again"), "%s", p.line[0]);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(shl_release(t, "A", "r", a), SHL_OK, "the reader was kept");
    cr_assert_eq(t_info(t).shared_taken, SHL_SHARED_GROUP, "and so is its group, unused");
    c_done(t, name);
}

/* ------------------------------------------------------------- counting */

/* Pages of [off, off + len) of t's mapping that are resident in this
 * process (mincore), whole pages only. */
static size_t resident_pages(shl_table *t, uint64_t off, uint64_t len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t a = (off + page - 1) / page * page, b = (off + len) / page * page;
    size_t n = 0;
    unsigned char v[256];
    for (uint64_t at = a; at < b; at += sizeof v * page) {
        uint64_t pages = (b - at) / page < sizeof v ? (b - at) / page : sizeof v;
        cr_assert_eq(mincore((char *)t->hdr + at, pages * page, v), 0);
        for (uint64_t i = 0; i < pages; i++)
            n += v[i] & 1;
    }
    return n;
}

Test(pools, counting_and_checking_groups_read_no_page_never_written)
{
    t_guard(30);
    char name[96];
    shl_table *t = pool_table(name, sizeof name, "count", 4096, 4096, 4096, 0);
    uint64_t sh_len = (uint64_t)t->geom.sh_groups * sizeof(struct shl__sh_group);
    uint64_t wq_len = (uint64_t)t->geom.wq_groups * sizeof(struct shl__wq_group);
    uint64_t vb_len = (uint64_t)t->geom.vb_count * t->geom.vbuf_size;
    cr_assert_eq(t->geom.vb_pool_off, t->geom.wq_pool_off + wq_len, "the value pool follows");
    wq_len += vb_len; /* below, "the pools" are all three */
    /* A fresh table: nothing taken, and its pools (a tenth of a big
     * table, some 100 MB at a million leases) not cleared and mapped for
     * the answer. */
    shl_table_info in = t_info(t);
    cr_assert_eq(in.shared_taken, 0u);
    cr_assert_eq(in.waiters_taken, 0u);
    cr_assert_eq(in.spare_values_taken, 0u);
    cr_assert_eq(resident_pages(t, t->geom.sh_pool_off, sh_len + wq_len), 0u,
                 "the count read the pools' unwritten pages");
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(resident_pages(t, t->geom.sh_pool_off, sh_len + wq_len), 0u,
                 "check read the pools' unwritten pages");
    /* Groups owned at the start, in the middle and at the end of each
     * pool, with unwritten pages between them, are all counted. */
    uint32_t sh[] = {0, t->geom.sh_groups / 2, t->geom.sh_groups - 1};
    uint32_t wq[] = {0, t->geom.wq_groups / 3, t->geom.wq_groups - 2, t->geom.wq_groups - 1};
    uint32_t vb[] = {0, t->geom.vb_count / 2, t->geom.vb_count - 1};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        atomic_store(&shl__tsh_group(t, sh[i])->owner, 1);
    for (size_t i = 0; i < sizeof wq / sizeof wq[0]; i++)
        atomic_store(&shl__twq_group(t, wq[i])->owner, 1);
    for (size_t i = 0; i < sizeof vb / sizeof vb[0]; i++)
        atomic_store(&shl__tvb(t, vb[i])->owner, 1);
    in = t_info(t);
    cr_assert_eq(in.shared_taken, 3 * SHL_SHARED_GROUP);
    cr_assert_eq(in.waiters_taken, 4 * SHL_WAITER_GROUP);
    cr_assert_eq(in.spare_values_taken, 3u);
    cr_assert_lt(resident_pages(t, t->geom.sh_pool_off, sh_len + wq_len), 16u);
    /* check finds each of them (owned by slot 0, which holds no lease). */
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    char want[96];
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        snprintf(want, sizeof want, "reader pool: group %u is taken by slot 0", sh[i]);
        cr_assert(c_has(&p, want), "%s", want);
    }
    for (size_t i = 0; i < sizeof wq / sizeof wq[0]; i++) {
        snprintf(want, sizeof want, "waiter pool: group %u is taken by slot 0", wq[i]);
        cr_assert(c_has(&p, want), "%s", want);
    }
    for (size_t i = 0; i < sizeof vb / sizeof vb[0]; i++) {
        snprintf(want, sizeof want, "value pool: buffer %u is taken by slot 0", vb[i]);
        cr_assert(c_has(&p, want), "%s", want);
        atomic_store(&shl__tvb(t, vb[i])->owner, 0);
    }
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        atomic_store(&shl__tsh_group(t, sh[i])->owner, 0);
    for (size_t i = 0; i < sizeof wq / sizeof wq[0]; i++)
        atomic_store(&shl__twq_group(t, wq[i])->owner, 0);
    cr_assert_eq(t_info(t).shared_taken, 0u);
    c_done(t, name);
}

/* ------------------------------------------------------------------ tool */

Test(pools, the_tool_sizes_and_shows_the_pools)
{
    t_guard(30);
    char name[96], *out;
    t_name(name, sizeof name, "pltool");
    cr_assert_eq(t_tool_run(&out,
                            "create %s --capacity 32 --max-shared 8 --max-waiters 16 "
                            "--spare-values 6 --history 0 2>&1",
                            name),
                 0, "%s", out);
    cr_assert(strstr(out, "pools: 8 shared holders, 16 queued waiters, 6 spare value buffers; 0 "
                          "history events a lease"),
              "%s", out);
    free(out);
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_table_info in = t_info(t);
    cr_assert_eq(in.max_shared, 8u);
    cr_assert_eq(in.max_waiters, 16u);
    cr_assert_eq(in.spare_values, 6u);
    cr_assert_eq(in.history, 0u);
    uint64_t tok, gen, wtok;
    cr_assert_eq(shl_acquire_shared(t, "L", "r", 60 * SEC, &tok, &gen), SHL_OK);
    cr_assert_eq(shl_acquire(t, "W", "w", 60 * SEC, &wtok), SHL_OK);
    cr_assert_eq(shl_write(t, "W", "w", wtok, "v", 1), SHL_OK); /* W keeps a spare now */
    cr_assert_eq(t_tool_run(&out, "dump %s 2>&1", name), 0, "%s", out);
    cr_assert(strstr(out, "pools     8 reader records (4 in groups taken), 16 waiter entries (0), "
                          "6 spare value buffers (1 taken); 0 history events a lease"),
              "%s", out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "dump --json %s 2>&1", name), 0, "%s", out);
    cr_assert(strstr(out, "\"max_shared\": 8, \"shared_taken\": 4, \"max_waiters\": 16, "
                          "\"waiters_taken\": 0, \"spare_values\": 6, \"spare_values_taken\": 1, "
                          "\"history\": 0"),
              "%s", out);
    free(out);
    cr_assert_eq(shl_release(t, "L", "r", tok), SHL_OK);
    cr_assert_eq(shl_release(t, "W", "w", wtok), SHL_OK);
    shl_close(t);
    shl_unlink(name);
    /* More than the table can use, or more history than kept: refused,
     * the rule named. */
    cr_assert_eq(t_tool_run(&out, "create %s --capacity 2 --max-shared 65 2>&1", name), 2, "%s",
                 out);
    cr_assert(strstr(out, "max_shared: 65, more than a table of capacity 2 can use"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "create %s --capacity 2 --spare-values 3 2>&1", name), 2, "%s",
                 out);
    cr_assert(strstr(out, "--spare-values takes 0..2, one per lease"), "%s", out);
    free(out);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT, "a refused create makes no table");
    cr_assert_eq(t_tool_run(&out, "create %s --history 9 2>&1", name), 2, "%s", out);
    cr_assert(strstr(out, "history: 9 events per lease, the limit is 8"), "%s", out);
    free(out);
}
