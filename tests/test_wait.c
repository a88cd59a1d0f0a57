/*
 * tests/test_wait.c - shl_acquire_wait: wake-up on release, timeout, expiry,
 * a waiter killed while waiting, signals, and fairness among 8 waiters.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "crash.h"

#define LONG_TTL (60 * SEC)

/* Memory shared with forked children. */
static void *shared(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    memset(p, 0, n);
    return p;
}

struct waiter_arg {
    const char *table;
    const char *owner;
    uint64_t timeout;
    _Atomic int released; /* set by the parent just before it releases */
    _Atomic int rc;
    _Atomic int early; /* the waiter returned before the release */
    _Atomic uint64_t token;
    int linger;       /* stay alive, handle open, once done ... */
    _Atomic int done; /* (set once the wait returned and L was released) */
    _Atomic int quit; /* ... until the parent sets this */
};

static int waiter_child(void *p)
{
    struct waiter_arg *a = p;
    shl_table *t;
    if (shl_open(a->table, NULL, &t) != SHL_OK)
        return 10;
    uint64_t tok = 0;
    int rc = shl_acquire_wait(t, "L", a->owner, LONG_TTL, a->timeout, &tok);
    atomic_store(&a->early, !atomic_load(&a->released));
    atomic_store(&a->token, tok);
    atomic_store(&a->rc, rc);
    if (rc == SHL_OK && shl_release(t, "L", a->owner, tok) != SHL_OK)
        atomic_store(&a->rc, SHL_ELOST); /* held, then not: the test says so */
    atomic_store(&a->done, 1);
    for (uint64_t end = t_now() + 30 * SEC; a->linger && !atomic_load(&a->quit) && t_now() < end;)
        t_sleep_ns(MS);
    shl_close(t);
    return 0;
}

struct waiters_cond {
    shl_table *t;
    uint32_t n;
};

static int has_waiters(void *p)
{
    struct waiters_cond *c = p;
    shl_lease_info in;
    return shl_stat(c->t, "L", &in) == SHL_OK && in.waiters == c->n;
}

static void wait_for_waiters(shl_table *t, uint32_t n)
{
    struct waiters_cond c = {t, n};
    cr_assert(t_until(has_waiters, &c, 10 * SEC), "expected %u waiters", n);
}

/* The WAITERS column of lease L in `shmlease ls`, or -1. */
static int ls_waiters(const char *table)
{
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "%s ls %s", t_tool(), table);
    if (t_run(cmd, &out) != 0) {
        free(out);
        return -1;
    }
    int n = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "L ", 2) != 0)
            continue;
        char *last = strrchr(line, ' '); /* WAITERS is the last column here */
        n = last ? atoi(last + 1) : -1;
    }
    free(out);
    return n;
}

/* The shared record of a waiter for "L" (30 s timeout). */
static struct waiter_arg *waiter_arg_new(const char *table, const char *owner)
{
    struct waiter_arg *a = shared(sizeof *a);
    a->table = table;
    a->owner = owner;
    a->timeout = 30 * SEC;
    a->rc = 99;
    return a;
}

/* Forks a waiter for "L" (30 s timeout) that records what it got in the
 * returned shared memory; returns once it waits in the queue. */
static struct waiter_arg *start_waiter(shl_table *t, const char *name, pid_t *pid)
{
    struct waiter_arg *a = waiter_arg_new(name, "waiter");
    *pid = t_fork(waiter_child, a);
    wait_for_waiters(t, 1);
    return a;
}

Test(wait, acquires_after_release)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wrel"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    pid_t p;
    struct waiter_arg *a = start_waiter(t, name, &p);
    cr_assert_eq(ls_waiters(name), 1, "shmlease ls does not show the waiter");
    atomic_store(&a->released, 1);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(p), 0);
    cr_assert_eq(a->rc, SHL_OK);
    cr_assert_eq(a->early, 0, "the waiter got the lease while it was held");
    cr_assert_eq(a->token, tok + 1);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0);
    cr_assert_str_eq(in.owner, "waiter");
    shl_close(t);
    shl_unlink(name);
}

Test(wait, times_out)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wto"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok, tok2 = 0;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    cr_assert_eq(shl_acquire_wait(t, "L", "w", SEC, 0, &tok2), SHL_ETIMEDOUT);
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_wait(t, "L", "w", SEC, 200 * MS, &tok2), SHL_ETIMEDOUT);
    cr_assert_geq(t_now() - t0, 200 * MS, "returned before its deadline");
    cr_assert_eq(tok2, 0);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0, "a timed-out waiter must leave the queue");
    cr_assert_str_eq(in.owner, "holder");
    cr_assert_eq(in.token, tok);
    cr_assert_eq(shl_acquire_wait(t, "L", "w", 0, SEC, &tok2), SHL_EINVAL);
    cr_assert_eq(shl_acquire_wait(t, "L", "w", SEC, SEC, NULL), SHL_EINVAL);
    shl_close(t);
    shl_unlink(name);
}

Test(wait, wakes_at_holder_expiry)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wexp"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok, tok2;
    cr_assert_eq(shl_acquire(t, "L", "holder", 300 * MS, &tok), SHL_OK);
    shl_lease_info before;
    cr_assert_eq(shl_stat(t, "L", &before), SHL_OK);
    cr_assert_eq(shl_acquire_wait(t, "L", "w", SEC, 30 * SEC, &tok2), SHL_OK);
    uint64_t now;
    shl_now(t, &now);
    cr_assert_geq(now, before.expiry_ns, "acquired before the holder expired");
    cr_assert_eq(tok2, tok + 1);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_ELOST);
    shl_close(t);
    shl_unlink(name);
}

Test(wait, killed_waiter_leaves_nothing)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wkill"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    struct waiter_arg *a = shared(2 * sizeof *a);
    for (int i = 0; i < 2; i++) {
        a[i].table = name;
        a[i].timeout = 30 * SEC;
        a[i].rc = 99;
    }
    a[0].owner = "victim";
    a[1].owner = "second";
    pid_t victim = t_fork(waiter_child, &a[0]);
    wait_for_waiters(t, 1); /* the victim is first in line */
    pid_t second = t_fork(waiter_child, &a[1]);
    wait_for_waiters(t, 2);
    cr_assert_eq(ls_waiters(name), 2);
    kill(victim, SIGKILL);
    cr_assert_eq(t_wait(victim), 128 + SIGKILL);
    wait_for_waiters(t, 1); /* shl_stat does not count the dead */
    cr_assert_eq(ls_waiters(name), 1, "shmlease ls counts a dead waiter");
    atomic_store(&a[1].released, 1);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(second), 0);
    cr_assert_eq(a[1].rc, SHL_OK, "the dead head of the queue blocked the next waiter");
    cr_assert_eq(a[1].token, tok + 1);
    /* Its queue entry is gone too: a new waiter alone is first in line. */
    uint64_t tok3;
    cr_assert_eq(shl_acquire_wait(t, "L", "third", SEC, 10 * SEC, &tok3), SHL_OK);
    cr_assert_eq(tok3, tok + 2);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0);
    shl_close(t);
    shl_unlink(name);
}

/* A waiter whose queue entry is left by a process killed with nobody else
 * waiting: the next waiter reuses the place and is not held up. */
Test(wait, killed_lone_waiter_then_new_waiter)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wlone"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok, tok2;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    struct waiter_arg *a = shared(sizeof *a);
    a->table = name;
    a->owner = "victim";
    a->timeout = 30 * SEC;
    pid_t victim = t_fork(waiter_child, a);
    wait_for_waiters(t, 1);
    kill(victim, SIGKILL);
    t_wait(victim);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_wait(t, "L", "next", SEC, 30 * SEC, &tok2), SHL_OK);
    cr_assert_lt(t_now() - t0, SHL_WAIT_TURN_GRACE_NS,
                 "waited for the dead waiter's turn instead of seeing it dead");
    cr_assert_eq(tok2, tok + 1);
    shl_close(t);
    shl_unlink(name);
}

static void on_usr1(int sig)
{
    (void)sig;
}

static int signalled_child(void *p)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: the futex wait sees EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    return waiter_child(p);
}

Test(wait, signals_do_not_end_the_wait)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wsig"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    struct waiter_arg *a = waiter_arg_new(name, "waiter");
    pid_t p = t_fork(signalled_child, a);
    wait_for_waiters(t, 1);
    for (int i = 0; i < 20; i++) {
        kill(p, SIGUSR1);
        t_sleep_ns(5 * MS);
    }
    cr_assert_eq(a->rc, 99, "a signal ended the wait: rc %d", a->rc);
    atomic_store(&a->released, 1);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(p), 0);
    cr_assert_eq(a->rc, SHL_OK);
    cr_assert_eq(a->early, 0);
    shl_close(t);
    shl_unlink(name);
}

#define NWAIT  8
#define ROUNDS 12

struct fair_log {
    const char *table;
    _Atomic int start;
    _Atomic uint32_t n;
    _Atomic int fail;
    int who[NWAIT * ROUNDS];
    uint32_t others[NWAIT * ROUNDS];
};

struct fair_arg {
    struct fair_log *log;
    int id;
};

static int fair_child(void *p)
{
    struct fair_arg *a = p;
    struct fair_log *log = a->log;
    shl_table *t;
    char owner[16];
    snprintf(owner, sizeof owner, "w%d", a->id);
    if (shl_open(log->table, NULL, &t) != SHL_OK)
        return 10;
    while (!atomic_load(&log->start))
        t_sleep_ns(MS);
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t tok;
        uint32_t before = atomic_load(&log->n);
        int rc = shl_acquire_wait(t, "L", owner, 30 * SEC, 60 * SEC, &tok);
        if (rc != SHL_OK) {
            atomic_store(&log->fail, rc);
            return 11;
        }
        uint32_t i = atomic_fetch_add(&log->n, 1);
        log->who[i] = a->id;
        log->others[i] = i - before; /* acquisitions by others while we waited */
        t_sleep_ns(10 * MS);         /* long enough for everyone else to be queued */
        if (shl_release(t, "L", owner, tok) != SHL_OK)
            return 12;
    }
    shl_close(t);
    return 0;
}

Test(wait, no_starvation_with_8_waiters)
{
    t_guard(120);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wfair"), 4, 16, SHL_CLOCK_MONOTONIC);
    struct fair_log *log = shared(sizeof *log);
    struct fair_arg *args = shared(NWAIT * sizeof *args);
    log->table = name;
    pid_t p[NWAIT];
    for (int i = 0; i < NWAIT; i++) {
        args[i].log = log;
        args[i].id = i;
        p[i] = t_fork(fair_child, &args[i]);
    }
    atomic_store(&log->start, 1);
    for (int i = 0; i < NWAIT; i++)
        cr_assert_eq(t_wait(p[i]), 0, "waiter %d failed (rc %d)", i, log->fail);
    cr_assert_eq(log->n, NWAIT * ROUNDS);
    /* The documented bound: while one waits, each of the others acquires at
     * most once, so at most NWAIT - 1 acquisitions come between its call
     * and its own. (Counted from just before the call: a waiter preempted
     * for a whole 10 ms hold before it queues would see one more.) */
    int count[NWAIT] = {0};
    for (int k = 0; k < NWAIT * ROUNDS; k++) {
        int w = log->who[k];
        cr_assert_leq(log->others[k], NWAIT - 1, "waiter %d waited through %u acquisitions", w,
                      log->others[k]);
        count[w]++;
    }
    for (int i = 0; i < NWAIT; i++)
        cr_assert_eq(count[i], ROUNDS);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0);
    shl_close(t);
    shl_unlink(name);
}

Test(wait, revoke_wakes_the_waiter)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wrev"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    pid_t p;
    struct waiter_arg *a = start_waiter(t, name, &p); /* 30 s: far below the holder's ttl */
    atomic_store(&a->released, 1);
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
    cr_assert_eq(t_wait(p), 0);
    cr_assert_eq(a->rc, SHL_OK, "the waiter was not woken by the revoke: %d", a->rc);
    cr_assert_eq(a->early, 0);
    cr_assert_eq(a->token, tok + 1);
    cr_assert_eq(shl_renew(t, "L", "holder", tok, SEC), SHL_ELOST);
    shl_close(t);
    shl_unlink(name);
}

static int manual_waiter(void *p)
{
    struct waiter_arg *a = p;
    shl_table *t;
    if (shl_open(a->table, NULL, &t) != SHL_OK)
        return 10;
    uint64_t tok = 0;
    atomic_store(&a->rc, shl_acquire_wait(t, "L", "waiter", 1000, a->timeout, &tok));
    atomic_store(&a->token, tok);
    shl_close(t);
    return 0;
}

/* On a manual clock the holder's expiry is not real time: the waiter must
 * still see the clock pass it. */
Test(wait, manual_clock_expiry_ends_the_wait)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wman"), 4, 16, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(t, 1000), SHL_OK);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", 500, &tok), SHL_OK);
    struct waiter_arg *a = shared(sizeof *a);
    a->table = name;
    a->timeout = 30 * SEC;
    a->rc = 99;
    pid_t p = t_fork(manual_waiter, a);
    wait_for_waiters(t, 1);
    t_sleep_ns(50 * MS);
    cr_assert_eq(a->rc, 99, "acquired before the manual clock moved");
    cr_assert_eq(shl_clock_set(t, 1500), SHL_OK); /* equality is expired */
    cr_assert_eq(t_wait(p), 0);
    cr_assert_eq(a->rc, SHL_OK);
    cr_assert_eq(a->token, tok + 1);
    shl_close(t);
    shl_unlink(name);
}

/* Crash points inside the queue's critical sections (see lib/kind_shm/wait.c). */
#define CP_WAIT_ENQUEUED 200
#define CP_WAIT_DROPPED  201

static int wait_briefly(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire_wait(t, "L", "doomed", SEC, 300 * MS, &tok) == SHL_ETIMEDOUT ? 0 : 1;
}

/* A waiter dies inside the slot's lock, half way through joining or leaving
 * the queue: the lock is recovered, its entry (if any) is dropped, and the
 * next waiter is not held up. */
static void die_in_queue(int cp)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wcrash"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok, tok2;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    cr_assert_eq(c_die_at(name, cp, 1, wait_briefly, NULL), 128 + 9,
                 "the waiter did not die at crash point %d", cp);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0, "a dead waiter is counted");
    cr_assert_eq(in.token, tok);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK, "the lock was not recovered");
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_wait(t, "L", "next", SEC, 30 * SEC, &tok2), SHL_OK);
    cr_assert_lt(t_now() - t0, SHL_WAIT_TURN_GRACE_NS, "held up by the dead waiter's entry");
    cr_assert_eq(tok2, tok + 1);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0);
    shl_close(t);
    shl_unlink(name);
}

Test(wait, crash_while_joining_the_queue)
{
    die_in_queue(CP_WAIT_ENQUEUED);
}

Test(wait, crash_while_leaving_the_queue)
{
    die_in_queue(CP_WAIT_DROPPED);
}

static int waiter_done(void *p)
{
    return atomic_load(&((struct waiter_arg *)p)->done);
}

/* A queued waiter that is stopped when its turn comes is passed over by the
 * next after the turn grace and sent to the back with a new ticket; once
 * resumed it must carry on with that same entry, not queue a second time:
 * a second entry would leave the first, of a live process, in the queue for
 * good, counted as a waiter and making every later wait sit out the grace. */
Test(wait, passed_over_waiter_leaves_no_ghost)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "wpass"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", LONG_TTL, &tok), SHL_OK);
    struct waiter_arg *a = waiter_arg_new(name, "passed");
    a->linger = 1;
    pid_t first = t_fork(waiter_child, a);
    wait_for_waiters(t, 1);
    kill(first, SIGSTOP);
    cr_assert_eq(t_wait_stopped(first), 0);
    struct waiter_arg *b = waiter_arg_new(name, "second");
    pid_t second = t_fork(waiter_child, b);
    wait_for_waiters(t, 2);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(second), 0);
    cr_assert_eq(b->rc, SHL_OK, "the second waiter passed the stopped one over");
    kill(first, SIGCONT);
    cr_assert(t_until(waiter_done, a, 10 * SEC), "the resumed waiter finished");
    cr_assert_eq(a->rc, SHL_OK);
    /* The passed-over waiter still lives, with its handle open. */
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0, "a ghost entry of the passed-over waiter is left");
    uint64_t t0 = t_now();
    cr_assert_eq(shl_acquire_wait(t, "L", "lone", SEC, 30 * SEC, &tok), SHL_OK);
    uint64_t took = t_now() - t0;
    cr_assert_lt(took, 100 * MS, "a lone wait on a free lease took %llu ms (turn grace %llu ms)",
                 (unsigned long long)(took / MS),
                 (unsigned long long)(SHL_WAIT_TURN_GRACE_NS / MS));
    atomic_store(&a->quit, 1);
    cr_assert_eq(t_wait(first), 0);
    shl_close(t);
    shl_unlink(name);
}
