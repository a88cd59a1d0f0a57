/*
 * tests/test_liveness.c - "dead only on proof": live holders and waiters
 * that /proc cannot see, or sees as zombies, are never reclaimed or dropped,
 * and a killed one still is.
 *
 * Each scenario runs a subject process that holds lease L and waits in the
 * queue of lease Q, and a checker (on a RECLAIM_ORPHANS table without
 * reclaim delay) that tries everything that would take L or Q's queue place
 * from a dead process: stat, acquire, repair, a second waiter. At the end
 * the subject writes with its token, which must still be valid.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "kind_shm/shm_kind.h"

#define SKIP_CODE 77   /* a child could not set up the scenario: machine limit */
#define GROUP     4242 /* group of the shared table in the hidepid scenario */
#define UID_SUBJ  65534
#define UID_CHECK 65533

struct scen {
    char table[96];
    _Atomic pid_t pid;               /* the subject, as the test's PID namespace sees it */
    _Atomic int q_held;              /* the checker holds Q: the subject may start */
    _Atomic int holding;             /* the subject holds L and goes to wait on Q */
    _Atomic uint64_t q_token;        /* what the subject got for Q */
    _Atomic int go;                  /* the checker is done: the subject writes L */
    int (*precond)(struct scen *sc); /* the scenario really is what it says */
};

static struct scen *new_scen(const char *tag)
{
    struct scen *sc =
        mmap(NULL, sizeof *sc, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sc != MAP_FAILED);
    memset(sc, 0, sizeof *sc);
    t_name(sc->table, sizeof sc->table, tag);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.mode = 0660;
    o.policy = SHL_POLICY_RECLAIM_ORPHANS;
    o.reclaim_delay_ms = 0;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(sc->table, &o, &t), SHL_OK);
    shl_close(t);
    return sc;
}

static int wait_flag(_Atomic int *f, uint64_t timeout)
{
    uint64_t end = t_now() + timeout;
    while (!atomic_load(f))
        if (t_now() > end)
            return 0;
        else
            t_sleep_ns(MS);
    return 1;
}

/* Holds L, waits for Q (its turn comes when the checker releases it), then
 * writes L once the checker is done. 0 when that write succeeded. */
static int subject(struct scen *sc)
{
    shl_table *t;
    if (shl_open(sc->table, NULL, &t) != SHL_OK)
        return 3;
    if (!wait_flag(&sc->q_held, 20 * SEC))
        return 4;
    uint64_t tok, qt;
    if (shl_acquire(t, "L", "holder", 120 * SEC, &tok) != SHL_OK)
        return 5;
    atomic_store(&sc->holding, 1);
    if (shl_acquire_wait(t, "Q", "subject", 120 * SEC, 60 * SEC, &qt) != SHL_OK)
        return 6;
    atomic_store(&sc->q_token, qt);
    if (shl_release(t, "Q", "subject", qt) != SHL_OK)
        return 7;
    if (!wait_flag(&sc->go, 60 * SEC))
        return 8;
    return shl_write(t, "L", "holder", tok, "x", 1) == SHL_OK ? 0 : 9;
}

/* Queued waiters of `lease` as the queue itself counts them (no liveness). */
static uint32_t raw_waiters(shl_table *t, const char *lease)
{
    struct shl__slot *s;
    if (shl__lookup(t, lease, &s) != SHL_OK)
        return 0;
    return atomic_load(&s->waiters);
}

static int second_waiter(void *arg)
{
    struct scen *sc = arg;
    shl_table *t;
    uint64_t qt;
    if (shl_open(sc->table, NULL, &t) != SHL_OK)
        return 3;
    if (shl_acquire_wait(t, "Q", "second", 120 * SEC, 60 * SEC, &qt) != SHL_OK)
        return 4;
    if (shl_release(t, "Q", "second", qt) != SHL_OK)
        return 6;
    return qt == 3 ? 0 : 5; /* after the subject's token 2 */
}

static const char *const check_step[] = {
    [20] = "open",
    [21] = "acquire Q",
    [22] = "the subject did not hold L and queue on Q",
    [23] = "the scenario's precondition does not hold",
    [24] = "shl_stat: L is not HELD (ORPHANED: a live holder taken for dead)",
    [25] = "shl_stat: Q's waiter is not counted",
    [26] = "acquire took L from its live holder",
    [27] = "a busy acquire reported the live holder ORPHANED",
    [28] = "repair failed",
    [29] = "repair ended L",
    [30] = "a second waiter dropped the live waiter's queue entry",
    [31] = "release Q",
    [32] = "the second waiter got Q first or failed",
    [33] = "the subject did not get Q first"};

/* Everything that would treat the subject as dead; 0, or the step that
 * failed (check_step). Runs in the test process or in a child. */
static int checker(struct scen *sc)
{
    shl_table *t;
    uint64_t qt, tok;
    if (shl_open(sc->table, NULL, &t) != SHL_OK)
        return 20;
    if (shl_acquire(t, "Q", "checker", 120 * SEC, &qt) != SHL_OK)
        return 21;
    atomic_store(&sc->q_held, 1);
    uint64_t end = t_now() + 20 * SEC;
    while (!atomic_load(&sc->holding) || raw_waiters(t, "Q") != 1)
        if (t_now() > end)
            return 22;
        else
            t_sleep_ns(MS);
    if (sc->precond && sc->precond(sc) != 0)
        return 23;
    shl_lease_info in;
    if (shl_stat(t, "L", &in) != SHL_OK || in.state != SHL_STATE_HELD)
        return 24;
    if (shl_stat(t, "Q", &in) != SHL_OK || in.waiters != 1)
        return 25;
    if (shl_acquire_ex(t, "L", "thief", SEC, &tok, &in) != SHL_EBUSY)
        return 26;
    if (in.state != SHL_STATE_HELD)
        return 27;
    if (shl_repair(t, 0, NULL, NULL) != SHL_OK)
        return 28;
    if (shl_stat(t, "L", &in) != SHL_OK || in.state != SHL_STATE_HELD)
        return 29;
    pid_t w2 = t_fork(second_waiter, sc);
    end = t_now() + 20 * SEC;
    while (raw_waiters(t, "Q") != 2)
        if (t_now() > end) {
            kill(w2, SIGKILL);
            t_wait(w2);
            return 30;
        } else
            t_sleep_ns(MS);
    if (shl_release(t, "Q", "checker", qt) != SHL_OK)
        return 31;
    if (t_wait(w2) != 0)
        return 32;
    if (atomic_load(&sc->q_token) != 2)
        return 33;
    atomic_store(&sc->go, 1);
    shl_close(t);
    return 0;
}

static void expect_checked(int rc)
{
    if (rc == SKIP_CODE)
        cr_skip("the checker's scenario cannot be set up here (needs unshare and mount)");
    cr_assert_eq(rc, 0, "checker step %d: %s", rc,
                 rc > 0 && rc < 34 && check_step[rc] ? check_step[rc] : "?");
}

static void expect_subject(pid_t p, struct scen *sc)
{
    atomic_store(&sc->go, 1); /* in case the checker stopped early */
    int st = t_wait(p);
    if (st == SKIP_CODE)
        cr_skip("the subject's scenario cannot be set up here (needs unshare)");
    cr_assert_eq(st, 0, "the live holder's write failed (status %d: 9 = its lease was taken)", st);
    shl_unlink(sc->table);
}

/* ------------------------------------------------- another PID namespace */

static int recorded_pid_is_not_ours(struct scen *sc)
{
    shl_table *t;
    shl_lease_info in;
    if (shl_open(sc->table, NULL, &t) != SHL_OK)
        return -1;
    int rc = shl_stat(t, "L", &in);
    shl_close(t);
    /* The holder wrote its pid as its own namespace numbers it: 1. */
    return rc == SHL_OK && in.pid == 1 && atomic_load(&sc->pid) != 1 ? 0 : -1;
}

/* The subject as a container's process: pid 1 of its PID namespace, with
 * its own /proc (unshare -p -f --mount-proc). */
static int contained_subject(void *arg)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return SKIP_CODE;
    return subject(arg);
}

/* In a new PID namespace: its first child, pid 1 there, is the subject. */
static int pidns_parent(void *arg)
{
    struct scen *sc = arg;
    if (unshare(CLONE_NEWPID) != 0) {
        atomic_store(&sc->pid, -1);
        return SKIP_CODE;
    }
    pid_t g = t_fork(contained_subject, sc);
    atomic_store(&sc->pid, g);
    return t_wait(g);
}

Test(liveness, holder_in_another_pid_namespace)
{
    t_guard(60);
    if (geteuid() != 0)
        cr_skip("needs root: unshare(CLONE_NEWPID)");
    struct scen *sc = new_scen("pidns");
    sc->precond = recorded_pid_is_not_ours;
    pid_t p = t_fork(pidns_parent, sc);
    uint64_t end = t_now() + 10 * SEC;
    while (!atomic_load(&sc->pid) && t_now() < end)
        t_sleep_ns(MS);
    if (atomic_load(&sc->pid) <= 0)
        expect_subject(p, sc); /* skipped, or failed to start */
    expect_checked(checker(sc));
    expect_subject(p, sc);
}

/* ------------------------------------------------------------- hidepid=2 */

static int hidden(struct scen *sc)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)atomic_load(&sc->pid));
    return access(path, F_OK) != 0 && errno == ENOENT ? 0 : -1;
}

static int become(uid_t uid)
{
    gid_t g = GROUP;
    if (setgroups(1, &g) != 0 || setgid(GROUP) != 0 || setuid(uid) != 0)
        return -1;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* cleared by the change of credentials */
    return 0;
}

static int other_user_subject(void *arg)
{
    return become(UID_SUBJ) == 0 ? subject(arg) : 3;
}

/* A checker of yet another user, with /proc mounted hidepid=2 in its own
 * mount namespace: the subject's /proc entries are invisible to it. */
static int hidepid_checker(void *arg)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0)
        return SKIP_CODE;
    if (become(UID_CHECK) != 0)
        return 40;
    return checker(arg);
}

Test(liveness, holder_hidden_by_hidepid)
{
    t_guard(60);
    if (geteuid() != 0)
        cr_skip("needs root: setuid, unshare(CLONE_NEWNS) and mount");
    struct scen *sc = new_scen("hidepid");
    char path[160];
    snprintf(path, sizeof path, "/dev/shm/%s", sc->table);
    cr_assert_eq(chown(path, (uid_t)-1, GROUP), 0, "the table's group: %s", strerror(errno));
    sc->precond = hidden;
    pid_t p = t_fork(other_user_subject, sc);
    atomic_store(&sc->pid, p);
    int rc = t_wait(t_fork(hidepid_checker, sc));
    if (rc == SKIP_CODE) {
        kill(p, SIGKILL);
        t_wait(p);
        shl_unlink(sc->table);
    }
    expect_checked(rc);
    expect_subject(p, sc);
}

/* ---------------------------------------------------- main thread exited */

static int leader_is_zombie(struct scen *sc)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)atomic_load(&sc->pid));
    for (int i = 0; i < 5000; i++, t_sleep_ns(MS)) {
        FILE *f = fopen(path, "r");
        if (!f)
            return -1;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *q = strrchr(buf, ')');
        if (q && q[1] == ' ' && q[2] == 'Z')
            return 0;
    }
    return -1;
}

static void *subject_thread(void *arg)
{
    _exit(subject(arg));
}

static int leader_exits(void *arg)
{
    pthread_t th;
    if (pthread_create(&th, NULL, subject_thread, arg) != 0)
        return 3;
    pthread_exit(NULL); /* the process lives on in subject_thread */
}

Test(liveness, holder_whose_main_thread_exited)
{
    t_guard(60);
    struct scen *sc = new_scen("zombie");
    sc->precond = leader_is_zombie;
    pid_t p = t_fork(leader_exits, sc);
    atomic_store(&sc->pid, p);
    expect_checked(checker(sc));
    expect_subject(p, sc);
}

/* ---------------------------------------------------------------- killed */

static int hold_and_queue(void *arg)
{
    subject(arg);
    return 0;
}

Test(liveness, killed_holder_and_waiter_are_dead)
{
    t_guard(60);
    struct scen *sc = new_scen("killed");
    shl_table *t;
    cr_assert_eq(shl_open(sc->table, NULL, &t), SHL_OK);
    uint64_t qt, tok;
    cr_assert_eq(shl_acquire(t, "Q", "checker", 120 * SEC, &qt), SHL_OK);
    atomic_store(&sc->q_held, 1);
    pid_t p = t_fork(hold_and_queue, sc);
    uint64_t end = t_now() + 20 * SEC;
    while (!atomic_load(&sc->holding) || raw_waiters(t, "Q") != 1) {
        cr_assert_lt(t_now(), end, "the subject holds L and waits for Q");
        t_sleep_ns(MS);
    }
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    kill(p, SIGKILL);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED, "a killed holder is proven dead");
    cr_assert_eq(shl_stat(t, "Q", &in), SHL_OK);
    cr_assert_eq(in.waiters, 0u, "a killed waiter does not count");
    cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_OK, "and is reclaimed");
    cr_assert_eq(tok, 2u);
    shl_close(t);
    shl_unlink(sc->table);
}

/* ---------------------------------------------------- per handle, fork() */

Test(liveness, closed_handle_holding_a_lease_is_dead)
{
    struct scen *sc = new_scen("closed");
    shl_table *t, *t2;
    uint64_t tok;
    cr_assert_eq(shl_open(sc->table, NULL, &t), SHL_OK);
    cr_assert_eq(shl_open(sc->table, NULL, &t2), SHL_OK);
    cr_assert_eq(shl_acquire(t2, "L", "other", 120 * SEC, &tok), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "another open handle of this process is alive");
    cr_assert_eq(shl_stat(t2, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "and so is the asking handle itself");
    shl_close(t2);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED, "liveness is per handle");
    cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 2u);
    shl_close(t);
    shl_unlink(sc->table);
}

/* In a child: opens the table and acquires L for `owner`; 0 on success.
 * The handle stays open for the rest of the child's life. */
static int open_and_hold(struct scen *sc, const char *owner)
{
    shl_table *t;
    uint64_t tok;
    if (shl_open(sc->table, NULL, &t) != SHL_OK)
        return 3;
    return shl_acquire(t, "L", owner, 120 * SEC, &tok) == SHL_OK ? 0 : 4;
}

static int hold_then_fork(void *arg)
{
    struct scen *sc = arg;
    if (open_and_hold(sc, "parent") != 0)
        return 3;
    pid_t c = fork();
    if (c == 0) {
        sleep(30); /* holds the handle's open file, and so its lock; bounded */
        _exit(0);
    }
    atomic_store(&sc->pid, c);
    for (;;)
        pause();
}

/* A child forked without exec() shares its parent's open files: the
 * parent's leases stay alive while the child lives (late, never early). */
Test(liveness, forked_child_keeps_the_parent_alive)
{
    t_guard(30);
    struct scen *sc = new_scen("forked");
    shl_table *t;
    cr_assert_eq(shl_open(sc->table, NULL, &t), SHL_OK);
    pid_t p = t_fork(hold_then_fork, sc);
    uint64_t end = t_now() + 10 * SEC;
    while (!atomic_load(&sc->pid)) {
        cr_assert_lt(t_now(), end, "the holder forked");
        t_sleep_ns(MS);
    }
    pid_t c = atomic_load(&sc->pid);
    kill(p, SIGKILL);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "the child keeps the handle's file open");
    kill(c, SIGKILL);
    for (end = t_now() + 10 * SEC; in.state == SHL_STATE_HELD && t_now() < end; t_sleep_ns(MS))
        cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED, "gone with the child");
    shl_close(t);
    shl_unlink(sc->table);
}

/* ------------------------------------------------------- no proof at all */

static int hold_and_pause(void *arg)
{
    struct scen *sc = arg;
    if (open_and_hold(sc, "holder") != 0)
        return 3;
    atomic_store(&sc->holding, 1);
    for (;;)
        pause();
}

/* A record whose alive id proves nothing (0: its handle could take no
 * lock; or out of range: damaged) is UNKNOWN, and UNKNOWN never reclaims,
 * even once its process is gone. */
Test(liveness, unknown_is_never_dead)
{
    t_guard(30);
    static const uint64_t ids[] = {0, SHL__ALIVE_ID_MAX + 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        struct scen *sc = new_scen("unknown");
        shl_table *t;
        cr_assert_eq(shl_open(sc->table, NULL, &t), SHL_OK);
        pid_t p = t_fork(hold_and_pause, sc);
        for (uint64_t end = t_now() + 10 * SEC; !atomic_load(&sc->holding); t_sleep_ns(MS))
            cr_assert_lt(t_now(), end, "the child holds L");
        struct shl__slot *s;
        cr_assert_eq(shl__lookup(t, "L", &s), SHL_OK);
        SHL__ST(s->cur.live, ids[i]);
        kill(p, SIGKILL);
        cr_assert_eq(t_wait(p), 128 + SIGKILL);
        shl_lease_info in;
        uint64_t tok;
        cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
        cr_assert_eq(in.state, SHL_STATE_HELD, "id %#llx: no proof, not ORPHANED",
                     (unsigned long long)ids[i]);
        cr_assert_eq(shl_acquire(t, "L", "next", SEC, &tok), SHL_EBUSY);
        cr_assert_eq(shl_repair(t, 0, NULL, NULL), SHL_OK);
        cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
        cr_assert_eq(in.state, SHL_STATE_HELD, "repair leaves it too");
        shl_close(t);
        shl_unlink(sc->table);
    }
}
