/*
 * tests/test_admin.c - revoke, dead holders (ORPHANED, pid reuse, the
 * reclaim policy and its reclaim delay), and unrecoverable locks.
 */
#include <criterion/criterion.h>
#include <sys/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

#define KILLED (128 + SIGKILL)

static shl_table *open_policy(const char *name, int clock, unsigned policy, uint32_t delay_ms)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = C_VALUE_SIZE;
    o.clock = clock;
    o.policy = policy;
    o.reclaim_delay_ms = delay_ms;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    return t;
}

static struct shl__slot *slot_of(shl_table *t, const char *lease)
{
    struct shl__key k;
    cr_assert_eq(shl__key_lease(lease, &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    cr_assert(s);
    return s;
}

static void noop(void *arg)
{
    (void)arg;
}
static int keep(void *v, size_t *len, size_t cap, void *arg)
{
    (void)v, (void)len, (void)cap, (void)arg;
    return 0;
}

/* ---------------------------------------------------------------- revoke */

Test(admin, revoke_ends_validity_at_once)
{
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "rev"), SHL_CLOCK_MONOTONIC, 0, 0);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(c_write_gen(t, "L", "a", tok, 1), SHL_OK);
    uint32_t wake = atomic_load(&slot_of(t, "L")->wake);
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
    cr_assert_gt(atomic_load(&slot_of(t, "L")->wake), wake, "waiters are woken");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED);
    cr_assert_eq(in.token, tok);
    cr_assert_eq(shl_renew(t, "L", "a", tok, SEC), SHL_ELOST);
    cr_assert_eq(c_write_gen(t, "L", "a", tok, 2), SHL_ELOST);
    cr_assert_eq(shl_guard(t, "L", "a", tok, noop, NULL), SHL_ELOST);
    cr_assert_eq(shl_update(t, "L", "a", tok, keep, NULL), SHL_ELOST);
    cr_assert_eq(shl_release(t, "L", "a", tok), SHL_ELOST);
    cr_assert_eq(c_read_gen(t, "L"), 1, "the rejected write changed nothing");
    cr_assert_eq(shl_revoke(t, "L"), SHL_ENOENT, "nothing left to revoke");
    uint64_t tok2;
    cr_assert_eq(shl_acquire(t, "L", "b", SEC, &tok2), SHL_OK);
    cr_assert_eq(tok2, tok + 1);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.counters[SHL_COUNTER_REVOKE], 1u);
    cr_assert_eq(d.counters[SHL_COUNTER_REJ_EXPIRED], 5u);
    int saw = 0;
    for (uint32_t i = 0; i < d.nevents; i++)
        saw |= d.events[i].op == SHL_OP_REVOKE && d.events[i].token == tok;
    cr_assert(saw, "the revoke is in the history");
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

Test(admin, revoke_refuses_what_is_not_held)
{
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "rev2"), SHL_CLOCK_MANUAL, 0, 0);
    cr_assert_eq(shl_revoke(t, "nope"), SHL_ENOENT);
    cr_assert_eq(shl_revoke(t, "bad name"), SHL_EINVAL);
    cr_assert_eq(shl_revoke(NULL, "x"), SHL_EINVAL);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_clock_set(t, SEC), SHL_OK); /* now == expiry: expired */
    cr_assert_eq(shl_revoke(t, "L"), SHL_ENOENT);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_EXPIRED);
    shl_close(t);
    shl_unlink(name);
}

/* --------------------------------------------------------------- orphans */

static int hold_and_pause(void *arg)
{
    shl_table *t;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 3;
    uint64_t tok;
    if (shl_acquire(t, "L", "holder", 60 * SEC, &tok) != SHL_OK)
        return 4;
    for (;;)
        pause();
}

static int held_by_other(void *arg)
{
    shl_table *t = arg;
    shl_lease_info in;
    return shl_stat(t, "L", &in) == SHL_OK && in.state == SHL_STATE_HELD;
}

static int hold_and_exit(void *arg)
{
    shl_table *t;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 3;
    uint64_t tok;
    t_sleep_ns(30 * MS); /* let the start time differ from a successor's */
    return shl_acquire(t, "L", "holder", 60 * SEC, &tok) == SHL_OK ? 0 : 4;
}

Test(admin, killed_holder_is_orphaned)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "orph"), SHL_CLOCK_MONOTONIC, 0, 0);
    pid_t p = t_fork(hold_and_pause, name);
    cr_assert(t_until(held_by_other, t, 10 * SEC), "child holds the lease");
    kill(p, SIGSTOP);
    cr_assert_eq(t_wait_stopped(p), 0);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "a stopped holder is alive");
    kill(p, SIGKILL);
    cr_assert_eq(t_wait(p), KILLED);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED);
    cr_assert_eq(in.pid, p);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_EBUSY,
                 "without the policy an orphan waits for its expiry");
    struct c_problems pr;
    cr_assert_eq(c_repair(t, 0, &pr), SHL_OK);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED, "repair leaves it when the policy is off");
    shl_close(t);
    shl_unlink(name);
}

/* Makes a process with pid `want`: writes want - 1 to ns_last_pid right
 * before fork(). The child pauses. Returns its pid, or -1 if not possible. */
static pid_t fork_with_pid(pid_t want)
{
    for (int tries = 0; tries < 200; tries++) {
        int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d", (int)want - 1);
        ssize_t w = write(fd, buf, (size_t)n);
        close(fd);
        if (w != n)
            return -1;
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
            if (getpid() != want)
                _exit(0);
            for (;;)
                pause();
        }
        if (p == want)
            return p;
        if (p > 0)
            t_wait(p);
    }
    return -1;
}

Test(admin, reused_pid_is_not_the_holder)
{
    t_guard(60);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "reuse"), SHL_CLOCK_MONOTONIC,
                               SHL_POLICY_RECLAIM_ORPHANS, 0);
    pid_t dead = t_fork(hold_and_exit, name);
    cr_assert_eq(t_wait(dead), 0);
    t_sleep_ns(30 * MS);
    pid_t again = fork_with_pid(dead);
    if (again < 0) {
        /* Not allowed to choose pids here: put a live process's pid (ours)
         * in the holder record with the dead holder's start time, which is
         * exactly what a reused pid looks like. */
        cr_log_warn("ns_last_pid not writable: simulating pid reuse with a live pid");
        struct shl__slot *s = slot_of(t, "L");
        SHL__ST(s->cur.pid, (int32_t)getpid());
        again = 0;
    }
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.pid, again ? again : getpid(), "the pid is in use again");
    cr_assert_eq(in.state, SHL_STATE_ORPHANED, "another start time: still the dead holder");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_OK, "reclaimed");
    cr_assert_eq(tok, 2u);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.counters[SHL_COUNTER_RECLAIM], 1u);
    cr_assert_eq(d.events[d.nevents - 1].op, SHL_OP_RECLAIM);
    if (again > 0) {
        kill(again, SIGKILL);
        t_wait(again);
    }
    shl_close(t);
    shl_unlink(name);
}

Test(admin, reclaim_after_lock_delay)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "delay"), SHL_CLOCK_MONOTONIC,
                               SHL_POLICY_RECLAIM_ORPHANS, 200);
    cr_assert_eq(t_wait(t_fork(hold_and_exit, name)), 0);
    uint64_t tok, first = t_now();
    shl_lease_info h;
    cr_assert_eq(shl_acquire_ex(t, "L", "next", SEC, &tok, &h), SHL_EBUSY,
                 "the first sighting starts the reclaim delay");
    cr_assert_eq(h.state, SHL_STATE_ORPHANED);
    int rc;
    while ((rc = shl_acquire(t, "L", "next", SEC, &tok)) == SHL_EBUSY)
        t_sleep_ns(5 * MS);
    cr_assert_eq(rc, SHL_OK);
    cr_assert_geq(t_now() - first, 200 * MS, "not before the reclaim delay");
    cr_assert_eq(tok, 2u);
    shl_close(t);
    shl_unlink(name);
}

Test(admin, repair_reclaims_orphans_per_policy)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "rorph"), SHL_CLOCK_MANUAL,
                               SHL_POLICY_RECLAIM_ORPHANS, 100);
    cr_assert_eq(t_wait(t_fork(hold_and_exit, name)), 0);
    struct c_problems p;
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT, "something to do");
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "reclaim delay"), "the first sighting only notes the death");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED);
    cr_assert_eq(shl_clock_set(t, 100 * MS), SHL_OK);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "end its lease"), "%s", p.line[0]);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 2u);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* ----------------------------------------------------- unrecoverable locks */

static int do_renew(shl_table *t, void *arg)
{
    (void)arg;
    return shl_renew(t, "L", "b", 1, 20 * SEC);
}

/* After a locker died, take the mutex (EOWNERDEAD) and give it back without
 * marking it consistent: glibc makes it ENOTRECOVERABLE. */
static void break_mutex(pthread_mutex_t *m)
{
    cr_assert_eq(pthread_mutex_lock(m), EOWNERDEAD);
    pthread_mutex_unlock(m);
    cr_assert_eq(pthread_mutex_lock(m), ENOTRECOVERABLE);
}

Test(admin, unrecoverable_lock_fails_fast_until_repaired)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "broken"), SHL_CLOCK_MANUAL, 0, 0);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "b", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(c_write_gen(t, "L", "b", tok, 1), SHL_OK);
    /* Dies inside the seq bracket: lock-free readers cannot finish either. */
    cr_assert_eq(c_die_at(name, SHL__CP_RENEW, 1, do_renew, NULL), KILLED);
    break_mutex(&slot_of(t, "L")->lock);

    unsigned char buf[C_VALUE_SIZE];
    size_t len;
    shl_lease_info in;
    cr_assert_eq(shl_acquire(t, "L", "c", SEC, &tok), SHL_EBROKEN);
    cr_assert_eq(shl_renew(t, "L", "b", 1, SEC), SHL_EBROKEN);
    cr_assert_eq(shl_release(t, "L", "b", 1), SHL_EBROKEN);
    cr_assert_eq(c_write_gen(t, "L", "b", 1, 2), SHL_EBROKEN);
    cr_assert_eq(shl_update(t, "L", "b", 1, keep, NULL), SHL_EBROKEN);
    cr_assert_eq(shl_guard(t, "L", "b", 1, noop, NULL), SHL_EBROKEN);
    cr_assert_eq(shl_revoke(t, "L"), SHL_EBROKEN);
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, NULL), SHL_EBROKEN);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_EBROKEN);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK, "inspection never locks");
    cr_assert_eq(d.lock, SHL_LOCK_BROKEN);
    cr_assert_eq(d.stable, 0);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "unrecoverable"), "%s", p.line[0]);

    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "would: lease L: the lock is unrecoverable"), "%s", p.line[0]);
    cr_assert_eq(shl_acquire(t, "L", "c", SEC, &tok), SHL_EBROKEN, "dry run changed nothing");
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 1u);
    cr_assert_eq(in.expiry_ns, 10 * SEC, "the renew died before its store");
    cr_assert_eq(shl_renew(t, "L", "b", 1, 30 * SEC), SHL_OK, "the holder goes on");
    cr_assert_eq(c_read_gen(t, "L"), 1);
    shl_close(t);
    shl_unlink(name);
}

static int do_add(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "N2", "b", SEC, &tok);
}

Test(admin, unrecoverable_table_lock)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "tbroken"), SHL_CLOCK_MANUAL, 0, 0);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", SEC, &tok), SHL_OK);
    cr_assert_eq(c_die_at(name, SHL__CP_ADD_ARMED, 1, do_add, NULL), KILLED);
    break_mutex(&t->hdr->table_lock);
    cr_assert_eq(shl_acquire(t, "N3", "a", SEC, &tok), SHL_EBROKEN);
    cr_assert_eq(shl_renew(t, "L", "a", 1, SEC), SHL_OK, "other leases are untouched");
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(shl_acquire(t, "N3", "a", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "N2", "a", SEC, &tok), SHL_OK);
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    cr_assert_eq(ti.used, 3u, "the dead adder's name was added once");
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* A repairer that dies between finishing a broken slot's intent and
 * reinitialising its lock is repaired by the next one. */
static int do_repair(shl_table *t, void *arg)
{
    (void)arg;
    return shl_repair(t, 0, NULL, NULL);
}

static int do_acquire(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "L", "b", 10 * SEC, &tok);
}

Test(admin, repair_dies_and_is_repaired)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "rdie"), SHL_CLOCK_MANUAL, 0, 0);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "a", tok), SHL_OK);
    cr_assert_eq(c_die_at(name, SHL__CP_ACQ_ARMED, 1, do_acquire, NULL), KILLED);
    break_mutex(&slot_of(t, "L")->lock);
    cr_assert_eq(c_die_at(name, SHL__CP_REPAIR_MUTEX, 1, do_repair, NULL), KILLED);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 2u, "the armed acquire was rolled forward once");
    cr_assert_str_eq(in.owner, "b");
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* A repairer that dies with its mend of the index armed leaves the table
 * lock EOWNERDEAD; the table's next locker finishes the mend before it adds
 * a name, so a held lease that had dropped out of the index is found again
 * rather than added a second time (with token 1, next to its holder). */
Test(admin, repair_dies_mending_index_next_locker_finishes)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "ridx"), SHL_CLOCK_MANUAL, 0, 0);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "M", "a", 10 * SEC, &tok), SHL_OK);
    _Atomic uint32_t *idx = shl__tindex(t);
    for (uint32_t b = 0; b < t->geom.index_size; b++)
        if (atomic_load(&idx[b]) == 1)
            atomic_store(&idx[b], 0); /* L is no longer reachable */
    cr_assert_eq(c_die_at(name, SHL__CP_REPAIR_INDEX, 1, do_repair, NULL), KILLED);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "M", &in), SHL_OK, "no bucket was cleared");
    cr_assert_eq(shl_acquire(t, "N", "a", SEC, &tok), SHL_OK, "the table lock works");
    cr_assert_eq(shl_acquire(t, "L", "b", SEC, &tok), SHL_EBUSY, "L was found, not added again");
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 1u);
    cr_assert_str_eq(in.owner, "a");
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    cr_assert_eq(ti.used, 3u);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}
