/*
 * tests/test_fork.c - real processes against one monotonic-clock table: a
 * holder paused past its expiry, and a holder killed inside its critical
 * section.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/kind_shm/shm_kind.h"
#include "common.h"

#define TTL (300 * MS)

struct ctx {
    const char *name;
    int fd; /* write end of a pipe to the parent */
};

/* Exit codes of the paused child: 0 = its late write was refused. */
enum { LATE_REFUSED = 0, LATE_ACCEPTED = 10, SETUP_FAILED = 11, WRONG_ERROR = 12 };

static int paused_holder(void *arg)
{
    struct ctx *c = arg;
    shl_table *t;
    uint64_t tok;
    if (shl_open(c->name, NULL, &t) != SHL_OK || shl_acquire(t, "res", "old", TTL, &tok) != 0 ||
        shl_write(t, "res", "old", tok, "old-1", 5) != SHL_OK)
        return SETUP_FAILED;
    /* The client-side check passes: the lease is ours and time remains. */
    shl_lease_info in;
    if (shl_stat(t, "res", &in) != SHL_OK || in.state != SHL_STATE_HELD || in.token != tok)
        return SETUP_FAILED;
    if (write(c->fd, &tok, sizeof tok) != sizeof tok)
        return SETUP_FAILED;
    /* ... and the process is paused right after checking. */
    raise(SIGSTOP);
    int rc = shl_write(t, "res", "old", tok, "stale", 5);
    if (rc == SHL_OK)
        return LATE_ACCEPTED;
    return rc == SHL_ELOST ? LATE_REFUSED : WRONG_ERROR;
}

static int expired(void *arg)
{
    shl_lease_info in;
    return shl_stat(arg, "res", &in) == SHL_OK && in.state == SHL_STATE_EXPIRED;
}

Test(fork, paused_holder_is_refused_at_the_segment)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "pause"), 8, 64, SHL_CLOCK_MONOTONIC);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct ctx c = {name, p[1]};
    pid_t kid = t_fork(paused_holder, &c);
    uint64_t old_tok;
    cr_assert_eq(read(p[0], &old_tok, sizeof old_tok), (ssize_t)sizeof old_tok);
    cr_assert_eq(t_wait_stopped(kid), 0, "the holder did not stop");

    /* While it sleeps, its lease runs out and another process takes over. */
    cr_assert(t_until(expired, t, 10 * SEC), "the paused holder's lease never expired");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "res", "new", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(tok, old_tok + 1);
    cr_assert_eq(shl_write(t, "res", "new", tok, "newer", 5), SHL_OK);

    kill(kid, SIGCONT);
    cr_assert_eq(t_wait(kid), LATE_REFUSED, "the resumed holder's stale write was not refused");

    char buf[16];
    size_t len;
    uint64_t vtok;
    cr_assert_eq(shl_read(t, "res", buf, sizeof buf, &len, &vtok), SHL_OK);
    cr_assert_eq(len, 5);
    cr_assert(memcmp(buf, "newer", 5) == 0, "the value is not the newer holder's");
    cr_assert_eq(vtok, tok);
    struct shl__slot *s = shl__slot_at(t->hdr, 0);
    cr_assert_eq(s->count[SHL__C_REJ_OWNER], 1, "the refusal was not recorded as wrong owner");
    shl_close(t);
    shl_unlink(name);
}

static void block_inside(void *arg)
{
    struct ctx *c = arg;
    char b = 'g';
    (void)!write(c->fd, &b, 1);
    for (;;)
        pause(); /* killed here, holding the lease's mutex */
}

static int guard_holder(void *arg)
{
    struct ctx *c = arg;
    shl_table *t;
    uint64_t tok;
    if (shl_open(c->name, NULL, &t) != SHL_OK || shl_acquire(t, "res", "dies", TTL, &tok) != 0 ||
        shl_write(t, "res", "dies", tok, "before", 6) != SHL_OK)
        return SETUP_FAILED;
    t_any(shl_guard(t, "res", "dies", tok, block_inside, c)); /* dies inside */
    return SETUP_FAILED;
}

Test(fork, killed_inside_guard_leaves_a_working_table)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "kill"), 8, 64, SHL_CLOCK_MONOTONIC);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct ctx c = {name, p[1]};
    pid_t kid = t_fork(guard_holder, &c);
    char b;
    cr_assert_eq(read(p[0], &b, 1), 1);
    struct shl__slot *s = shl__slot_at(t->hdr, 0);
    cr_assert_eq(atomic_load(&s->locker), kid, "the child is not inside the critical section");
    kill(kid, SIGKILL);
    cr_assert_eq(t_wait(kid), 128 + SIGKILL);

    /* The lease outlives its holder until its expiry: busy, not hung. */
    uint64_t tok;
    shl_lease_info h;
    cr_assert_eq(shl_acquire_ex(t, "res", "next", TTL, &tok, &h), SHL_EBUSY);
    cr_assert_str_eq(h.owner, "dies");
    cr_assert_eq(s->count[SHL__C_RECOVER], 1, "EOWNERDEAD was not handled");
    cr_assert_eq(atomic_load(&s->locker), 0);
    cr_assert_eq(atomic_load(&s->seq) & 1, 0);

    cr_assert(t_until(expired, t, 10 * SEC));
    cr_assert_eq(shl_acquire(t, "res", "next", TTL, &tok), SHL_OK);
    cr_assert_eq(tok, 2);
    char buf[16];
    size_t len;
    cr_assert_eq(shl_read(t, "res", buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert(len == 6 && memcmp(buf, "before", 6) == 0, "the committed value was lost");
    cr_assert_eq(shl_write(t, "res", "next", tok, "after", 5), SHL_OK);
    cr_assert_eq(shl_renew(t, "res", "next", tok, TTL), SHL_OK);
    cr_assert_eq(shl_release(t, "res", "next", tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "other", "next", TTL, &tok), SHL_OK, "adding names still works");
    cr_assert_eq(s->count[SHL__C_RECOVER], 1, "recovered more than once");
    shl_close(t);
    shl_unlink(name);
}

/* Every process gets the same answer from the same segment: a token taken in
 * one is seen, and fenced, in another. */
static int other_process(void *arg)
{
    struct ctx *c = arg;
    shl_table *t;
    uint64_t tok;
    if (shl_open(c->name, NULL, &t) != SHL_OK)
        return SETUP_FAILED;
    if (shl_acquire(t, "res", "child", TTL, &tok) != SHL_EBUSY)
        return 1;
    shl_lease_info in;
    if (shl_stat(t, "res", &in) != SHL_OK || strcmp(in.owner, "parent") != 0 || in.token != 1)
        return 2;
    if (shl_write(t, "res", "parent", 1, "x", 1) != SHL_OK) /* same owner and token: valid */
        return 3;
    return 0;
}

Test(fork, processes_share_one_table)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "share"), 8, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "res", "parent", 10 * SEC, &tok), SHL_OK);
    struct ctx c = {name, -1};
    cr_assert_eq(t_wait(t_fork(other_process, &c)), 0);
    char v;
    cr_assert_eq(shl_read(t, "res", &v, 1, NULL, NULL), SHL_OK);
    cr_assert_eq(v, 'x');
    shl_close(t);
    shl_unlink(name);
}

/* Per-lease locking: a process stopped inside the critical section of one
 * lease holds up nobody working on other leases, nor adding new names, nor
 * reading the stopped one's lease. */
static int stop_inside(void *arg)
{
    struct ctx *c = arg;
    shl_table *t;
    uint64_t tok;
    if (shl_open(c->name, NULL, &t) != SHL_OK || shl_acquire(t, "A", "stopper", TTL, &tok) != 0)
        return SETUP_FAILED;
    t_any(shl_guard(t, "A", "stopper", tok, block_inside, c)); /* stopped inside */
    return SETUP_FAILED;
}

Test(fork, other_leases_do_not_wait_for_a_stopped_locker)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "perlease"), 8, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "B", "me", 10 * SEC, &tok), SHL_OK);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct ctx c = {name, p[1]};
    pid_t kid = t_fork(stop_inside, &c);
    char b;
    cr_assert_eq(read(p[0], &b, 1), 1);
    kill(kid, SIGSTOP);
    cr_assert_eq(t_wait_stopped(kid), 0);

    /* Each of these would hang if it needed the stopped process's lock. */
    cr_assert_eq(shl_write(t, "B", "me", tok, "b", 1), SHL_OK);
    cr_assert_eq(shl_renew(t, "B", "me", tok, 10 * SEC), SHL_OK);
    cr_assert_eq(shl_release(t, "B", "me", tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "C", "me", 10 * SEC, &tok), SHL_OK, "adding a name");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "A", &in), SHL_OK, "a lock-free read of the locked lease");
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_str_eq(in.owner, "stopper");
    size_t len;
    cr_assert_eq(shl_read(t, "A", NULL, 0, &len, NULL), SHL_OK);

    kill(kid, SIGKILL);
    kill(kid, SIGCONT);
    cr_assert_eq(t_wait(kid), 128 + SIGKILL);
    shl_close(t);
    shl_unlink(name);
}

/* The platform probe: a robust process-shared mutex whose owner died is
 * reported to the next locker, once, and works after being made consistent. */
static int lock_and_die(void *arg)
{
    pthread_mutex_t *m = arg;
    pthread_mutex_lock(m);
    _exit(0);
}

/* A robust process-shared mutex in memory shared with forked children,
 * with a word beside it like a slot's lock generation (shm/mutex.h). */
struct watched {
    pthread_mutex_t m; /* first: the mutex's address is the struct's */
    _Atomic uint32_t gen;
};

static pthread_mutex_t *shared_mutex(void)
{
    struct watched *w =
        mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(w, MAP_FAILED);
    cr_assert_eq(shl__mutex_init(&w->m), 0);
    return &w->m;
}

Test(fork, robust_mutexes_work_here)
{
    pthread_mutex_t *m = shared_mutex();
    cr_assert_eq(t_wait(t_fork(lock_and_die, m)), 0);
    cr_assert_eq(pthread_mutex_lock(m), EOWNERDEAD);
    cr_assert_eq(pthread_mutex_consistent(m), 0);
    cr_assert_eq(pthread_mutex_unlock(m), 0);
    cr_assert_eq(pthread_mutex_lock(m), 0, "consistent again");
    pthread_mutex_unlock(m);
    munmap(m, sizeof *m);
}

/* The contended path (shm/mutex.c): a locker that finds the mutex held
 * watches the word for a bounded time, then sleeps; whichever it is doing
 * when the holder dies, it gets the mutex, repaired once. */
struct holder_ctx {
    pthread_mutex_t *m;
    int fd;
};

static int hold_until_killed(void *arg)
{
    struct holder_ctx *c = arg;
    if (pthread_mutex_lock(c->m) != 0 || write(c->fd, "x", 1) != 1)
        return SETUP_FAILED;
    for (;;)
        pause();
}

static void count_repair(void *arg)
{
    (*(int *)arg)++;
}

/* Exit status: repairs seen (0 or 1), SETUP_FAILED when the lock failed;
 * plus 100 when it used more than 50 ms of CPU time waiting. With `gen`,
 * the waiter watches that word for signs of work, as a slot's lockers do. */
static int report(pthread_mutex_t *m, const _Atomic uint32_t *gen)
{
    struct timespec a, b;
    int repairs = 0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    if (shl__mutex_lock(m, gen, count_repair, &repairs) != 0)
        return SETUP_FAILED;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    pthread_mutex_unlock(m);
    uint64_t cpu =
        (uint64_t)(b.tv_sec - a.tv_sec) * SEC + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec;
    return repairs + (cpu > 50 * MS ? 100 : 0);
}

static int lock_and_report(void *arg)
{
    return report(arg, NULL);
}

static int lock_and_report_watching(void *arg)
{
    return report(arg, &((struct watched *)arg)->gen);
}

static pid_t start_holder(pthread_mutex_t *m)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct holder_ctx c = {m, p[1]};
    pid_t kid = t_fork(hold_until_killed, &c);
    char b;
    cr_assert_eq(read(p[0], &b, 1), 1);
    close(p[0]);
    close(p[1]);
    return kid;
}

Test(fork, contended_lock_survives_a_killed_holder)
{
    t_guard(30);
    pthread_mutex_t *m = shared_mutex();
    /* Killed while the waiter sleeps in the kernel. */
    pid_t holder = start_holder(m);
    pid_t waiter = t_fork(lock_and_report, m);
    t_sleep_ns(50 * MS);
    kill(holder, SIGKILL);
    cr_assert_eq(t_wait(holder), 128 + SIGKILL);
    cr_assert_eq(t_wait(waiter), 1, "the waiter did not get the mutex repaired once");
    /* Dead before the contended path looks: no TID in the word, and the
     * try it makes reports the death. */
    cr_assert_eq(t_wait(t_fork(lock_and_die, m)), 0);
    cr_assert_eq(shl__mutex_lock_busy(m, NULL), EOWNERDEAD);
    cr_assert_eq(pthread_mutex_consistent(m), 0);
    pthread_mutex_unlock(m);
    /* Killed at every moment of a waiter's first microseconds: spinning or
     * sleeping, it gets the mutex repaired once. */
    for (int i = 0; i < 20; i++) {
        holder = start_holder(m);
        waiter = t_fork(lock_and_report, m);
        t_sleep_ns((uint64_t)i * 500);
        kill(holder, SIGKILL);
        cr_assert_eq(t_wait(holder), 128 + SIGKILL);
        cr_assert_eq(t_wait(waiter), 1, "round %d", i);
    }
    munmap(m, sizeof *m);
}

/* An unrecoverable mutex (a locker got EOWNERDEAD and unlocked without
 * making it consistent) is an error for every locker, again and again,
 * never a hang: glibc's trylock leaves the lock word taken when it reports
 * ENOTRECOVERABLE, and the lock must give it back. */
static int lock_broken(void *arg)
{
    return shl__mutex_lock(arg, NULL, NULL, NULL) == SHL__SHM_EBROKEN ? 0 : 1;
}

Test(fork, unrecoverable_mutex_is_an_error_every_time)
{
    t_guard(10);
    pthread_mutex_t *m = shared_mutex();
    cr_assert_eq(t_wait(t_fork(lock_and_die, m)), 0);
    cr_assert_eq(pthread_mutex_lock(m), EOWNERDEAD);
    cr_assert_eq(pthread_mutex_unlock(m), 0); /* not consistent: unrecoverable */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shl__mutex_lock(m, NULL, NULL, NULL), SHL__SHM_EBROKEN, "attempt %d", i);
    cr_assert_eq(t_wait(t_fork(lock_broken, m)), 0, "another process");
    cr_assert_eq(pthread_mutex_lock(m), ENOTRECOVERABLE);
    cr_assert_eq(shl__mutex_reinit(m), 0);
    cr_assert_eq(shl__mutex_lock(m, NULL, NULL, NULL), 0, "usable once reinitialised");
    pthread_mutex_unlock(m);
    munmap(m, sizeof *m);
}

/* A holder that is not running is not spun for: a waiter behind a stopped
 * holder sleeps in the kernel instead of burning its CPU, also when it
 * watches a word for signs of work (a stopped holder makes none). */
Test(fork, no_spinning_behind_a_stopped_holder)
{
    t_guard(30);
    int (*waiters[])(void *) = {lock_and_report, lock_and_report_watching};
    for (int i = 0; i < 2; i++) {
        pthread_mutex_t *m = shared_mutex();
        pid_t holder = start_holder(m);
        kill(holder, SIGSTOP);
        cr_assert_eq(t_wait_stopped(holder), 0);
        pid_t waiter = t_fork(waiters[i], m);
        t_sleep_ns(300 * MS);
        kill(holder, SIGKILL);
        kill(holder, SIGCONT);
        cr_assert_eq(t_wait(holder), 128 + SIGKILL);
        cr_assert_eq(t_wait(waiter), 1,
                     "waiter %d: more than 50 ms of CPU spent waiting 300 ms (status 101)", i);
        munmap(m, sizeof(struct watched));
    }
}

struct renewer_ctx {
    shl_renewer *r;
};

/* In the child: the parent's renewer refuses every call. Bit i of the exit
 * status: expectation i failed. */
static int renewer_in_child(void *arg)
{
    shl_renewer *r = ((struct renewer_ctx *)arg)->r;
    alarm(10); /* a join of the parent's thread must not hang the child */
    int bad = 0;
    if (shl_renewer_check(r) != SHL_EFORK)
        bad |= 1;
    if (shl_renewer_write(r, "child", 5) != SHL_EFORK)
        bad |= 2;
    if (shl_renewer_fd(r) != SHL_EFORK)
        bad |= 4;
    if (shl_renewer_lost(r) != SHL_EFORK)
        bad |= 8;
    if (shl_renewer_token(r) != 0)
        bad |= 16;
    if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_EFORK)
        bad |= 32;
    return bad;
}

static int beat_after(void *arg)
{
    uint64_t *v = arg; /* {table, first beat} packed by the caller */
    shl_heartbeat hb;
    return shl_heartbeat_get((shl_table *)(uintptr_t)v[0], "res", &hb) == SHL_OK &&
           hb.beat_ns > v[1];
}

Test(fork, renewer_calls_in_a_child_are_refused)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rfork"), 8, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "res", "parent", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "res", "parent", tok, "mine", 4), SHL_OK);
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    o.interval_ns = 20 * MS;
    struct renewer_ctx c;
    cr_assert_eq(shl_renewer_start(t, "res", "parent", tok, 10 * SEC, &o, &c.r), SHL_OK);

    int st = t_wait(t_fork(renewer_in_child, &c));
    cr_assert_eq(st, 0, "renewer calls in the child: status %d (bit i: expectation i failed)", st);

    /* The parent's heartbeat, lease, value and renewer are as before. */
    shl_heartbeat hb;
    cr_assert_eq(shl_heartbeat_get(t, "res", &hb), SHL_OK);
    cr_assert_eq(hb.token, tok, "the child cleared the parent's heartbeat");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "res", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_eq(in.token, tok);
    cr_assert_str_eq(in.owner, "parent");
    char buf[16];
    size_t len;
    cr_assert_eq(shl_read(t, "res", buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert(len == 4 && memcmp(buf, "mine", 4) == 0, "the child wrote the value");
    uint64_t v[2] = {(uint64_t)(uintptr_t)t, hb.beat_ns};
    cr_assert(t_until(beat_after, v, 5 * SEC), "the parent's renewer stopped beating");
    cr_assert_eq(shl_renewer_check(c.r), SHL_OK);
    cr_assert_eq(shl_renewer_lost(c.r), 0);
    cr_assert_eq(shl_renewer_token(c.r), tok);
    cr_assert_geq(shl_renewer_fd(c.r), 0);
    cr_assert_eq(shl_renewer_stop(c.r, SHL_RENEWER_RELEASE), SHL_OK);
    cr_assert_eq(shl_stat(t, "res", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE);
    shl_close(t);
    shl_unlink(name);
}
