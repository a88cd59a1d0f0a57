/*
 * tests/test_create_race.c - many processes opening or creating one name at
 * the same moment, parameters that do not match, and a creator that dies
 * before publishing.
 *
 * The processes are released together: each blocks reading a pipe whose
 * write end the parent closes once all are forked. Results come back through
 * an anonymous shared mapping. Stalled creators are made with the test
 * build's crash points in their stopping form (SHL_CRASHPOINT=id:1:stop).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define NPROC  16
#define ROUNDS 4

struct result {
    int open_rc;
    int created;
    int32_t creator_pid;
    int32_t pid;
    int acquire_rc;
    uint64_t token;
    uint64_t ino; /* inode under the name while the handle was open */
};

struct race {
    const char *name;
    shl_options opts;
    int gate[2];        /* the release pipe */
    struct result *res; /* NPROC entries, shared */
    int me;
};

static int racer(void *arg)
{
    struct race *r = arg;
    struct result *out = &r->res[r->me];
    char c;
    close(r->gate[1]); /* else this child's own copy keeps the pipe open */
    while (read(r->gate[0], &c, 1) < 0 && errno == EINTR)
        ;
    shl_table *t = NULL;
    out->pid = (int32_t)getpid();
    out->open_rc = shl_open(r->name, &r->opts, &t);
    if (out->open_rc != SHL_OK)
        return 0;
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return 1;
    out->created = ti.created;
    out->creator_pid = ti.creator_pid;
    char path[160];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", r->name);
    out->ino = stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
    char lease[32], owner[32];
    snprintf(lease, sizeof lease, "lease-%d", r->me);
    snprintf(owner, sizeof owner, "proc-%d", r->me);
    out->acquire_rc = shl_acquire(t, lease, owner, 3600 * SEC, &out->token);
    shl_close(t);
    return 0;
}

/* Forks n racers on `name` with options `o`, releases them at once, waits for
 * them all; res must hold n entries of shared memory. */
static void run_race(const char *name, const shl_options *o, int n, struct result *res)
{
    int gate[2];
    cr_assert_eq(pipe(gate), 0);
    memset(res, 0, sizeof *res * (size_t)n);
    pid_t pids[NPROC];
    struct race r = {name, *o, {gate[0], gate[1]}, res, 0};
    for (int i = 0; i < n; i++) {
        r.me = i;
        pids[i] = t_fork(racer, &r);
    }
    close(gate[0]);
    close(gate[1]); /* every reader sees end-of-file now */
    for (int i = 0; i < n; i++)
        cr_assert_eq(t_wait(pids[i]), 0, "racer %d", i);
}

static struct result *shared_results(void)
{
    void *p = mmap(NULL, sizeof(struct result) * NPROC, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    return p;
}

/* Exactly one racer created the table, and every racer's handle is on it. */
static void expect_one_table(const char *name, const struct result *res, int n)
{
    int creators = 0;
    int32_t creator = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(res[i].open_rc, SHL_OK, "racer %d: %s", i, shl_errname(res[i].open_rc));
        cr_assert_eq(res[i].acquire_rc, SHL_OK, "racer %d acquire", i);
        cr_assert_eq(res[i].token, 1);
        if (res[i].created) {
            creators++;
            creator = res[i].pid;
        }
    }
    cr_assert_eq(creators, 1, "%d racers initialised the table", creators);
    char path[160];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    cr_assert_eq(stat(path, &st), 0);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(res[i].creator_pid, creator, "racer %d saw another creator", i);
        cr_assert_eq(res[i].ino, (uint64_t)st.st_ino, "racer %d saw another file", i);
    }

    /* The parent sees all n leases in the one table under the name. */
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    cr_assert_eq(ti.used, (uint32_t)n);
    cr_assert_eq(ti.created, 0);
    cr_assert_eq(ti.creator_pid, creator);
    for (int i = 0; i < n; i++) {
        char lease[32], owner[32];
        snprintf(lease, sizeof lease, "lease-%d", i);
        snprintf(owner, sizeof owner, "proc-%d", i);
        shl_lease_info li;
        cr_assert_eq(shl_stat(t, lease, &li), SHL_OK, "%s missing", lease);
        cr_assert_str_eq(li.owner, owner);
        cr_assert_eq(li.token, 1);
        cr_assert_eq(li.pid, res[i].pid);
        /* The racers closed their handles and exited: the kernel dropped
         * their liveness locks, so every lease is provably orphaned. */
        cr_assert_eq(li.state, SHL_STATE_ORPHANED, "%s: %s", lease, shl_state_name(li.state));
    }
    shl_close(t);
    cr_assert_eq(t_shm_entries(name), 1, "something beside %s was left behind", name);
}

Test(create, sixteen_at_once)
{
    struct result *res = shared_results();
    for (int round = 0; round < ROUNDS; round++) {
        char name[96];
        t_name(name, sizeof name, "race");
        shl_options o;
        shl_options_init(&o);
        o.capacity = 64;
        o.value_size = 16;
        run_race(name, &o, NPROC, res);
        expect_one_table(name, res, NPROC);
        cr_assert_eq(shl_unlink(name), SHL_OK);
    }
    munmap(res, sizeof *res * NPROC);
}

Test(create, exclusive_race)
{
    struct result *res = shared_results();
    for (int round = 0; round < ROUNDS; round++) {
        char name[96];
        t_name(name, sizeof name, "excl");
        shl_options o;
        shl_options_init(&o);
        o.capacity = 64;
        o.flags = SHL_CREATE | SHL_EXCL;
        run_race(name, &o, NPROC, res);
        int ok = 0;
        for (int i = 0; i < NPROC; i++) {
            if (res[i].open_rc == SHL_OK) {
                ok++;
                cr_assert_eq(res[i].created, 1);
            } else {
                cr_assert_eq(res[i].open_rc, SHL_EEXIST, "racer %d: %s", i,
                             shl_errname(res[i].open_rc));
            }
        }
        cr_assert_eq(ok, 1, "%d exclusive creators succeeded", ok);
        cr_assert_eq(shl_unlink(name), SHL_OK);
    }
    munmap(res, sizeof *res * NPROC);
}

Test(create, exclusive_existing)
{
    char name[96];
    t_name(name, sizeof name, "excl1");
    shl_table *t = t_create(name, 8, 8, SHL_CLOCK_MONOTONIC);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = 8;
    o.policy = 0; /* as t_create() makes it */
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *u = t;
    cr_assert_eq(shl_open(name, &o, &u), SHL_EEXIST);
    cr_assert_null(u);
    o.flags = SHL_CREATE;
    cr_assert_eq(shl_open(name, &o, &u), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(u, &ti), SHL_OK);
    cr_assert_eq(ti.created, 0);
    shl_close(u);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(create, mismatch)
{
    char name[96];
    t_name(name, sizeof name, "mismatch");
    shl_table *t = t_create(name, 8, 32, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "a", "me", 3600 * SEC, &tok), SHL_OK);
    shl_options base;
    shl_options_init(&base);
    base.capacity = 8;
    base.value_size = 32;
    base.policy = 0; /* as t_create() makes it */
    for (int k = 0; k < 6; k++) {
        shl_options o = base;
        switch (k) {
        case 0:
            o.capacity = 9;
            break;
        case 1:
            o.value_size = 31;
            break;
        case 2:
            o.clock = SHL_CLOCK_MANUAL;
            break;
        case 3:
            o.mode = 0660;
            break;
        case 4:
            o.policy = SHL_POLICY_RECLAIM_ORPHANS; /* with the default delay */
            break;
        default:
            o.policy = SHL_POLICY_RECLAIM_ORPHANS;
            o.reclaim_delay_ms = 5;
            break;
        }
        shl_table *u = t;
        cr_assert_eq(shl_open(name, &o, &u), SHL_EMISMATCH, "case %d", k);
        cr_assert_null(u);
    }
    /* The table is unharmed and the matching parameters still open it; a
     * reclaim delay means nothing without the policy, so any delay does. */
    shl_table *u;
    base.reclaim_delay_ms = 7;
    cr_assert_eq(shl_open(name, &base, &u), SHL_OK);
    shl_lease_info li;
    cr_assert_eq(shl_stat(u, "a", &li), SHL_OK);
    cr_assert_eq(li.token, tok);
    cr_assert_eq(li.state, SHL_STATE_HELD);
    shl_close(u);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

struct die_arg {
    const char *name;
    const char *crashpoint; /* SHL_CRASHPOINT's value */
};

static int die_creating(void *arg)
{
    const struct die_arg *d = arg;
    setenv("SHL_CRASHPOINT", d->crashpoint, 1);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 64;
    shl_table *t;
    int rc = shl_open(d->name, &o, &t);
    return rc == SHL_OK ? 1 : 2; /* not reached when the crash point fires */
}

/* A creator killed before publishing (with its file not yet initialised, or
 * initialised) leaves nothing at all in /dev/shm: nothing that a plain opener
 * sees, nothing that a later creator must wait for, age out or remove (which
 * it could not, in the sticky /dev/shm, had another user of a group table
 * left it). */
Test(create, creator_killed_before_publish)
{
    static const char *points[] = {"101", "100"}; /* SHL__CP_SHM_CREATED, _CREATE */
    for (int i = 0; i < 2; i++) {
        char name[96];
        t_name(name, sizeof name, "crash");
        /* Forked before this process passes any crash point: the child reads
         * SHL_CRASHPOINT itself. */
        struct die_arg d = {name, points[i]};
        cr_assert_eq(t_wait(t_fork(die_creating, &d)), 128 + SIGKILL, "point %s", points[i]);
        cr_assert_eq(t_shm_entries(name), 0, "point %s: a dead creator left a file", points[i]);

        shl_table *t;
        cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);

        /* Several creators at once after the crash: all succeed, one of
         * them initialises. */
        struct result *res = shared_results();
        shl_options o;
        shl_options_init(&o);
        o.capacity = 64;
        o.value_size = 16;
        run_race(name, &o, 4, res);
        expect_one_table(name, res, 4);
        munmap(res, sizeof *res * NPROC);
        cr_assert_eq(shl_unlink(name), SHL_OK);
    }
}

/* A crash point is armed in a forked child even when the parent has passed
 * crash points before (and so had read an unarmed environment). */
Test(create, crashpoint_armed_after_fork)
{
    char first[96], name[96];
    shl_table *t = t_create(t_name(first, sizeof first, "before"), 4, 8, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    cr_assert_eq(shl_unlink(first), SHL_OK);
    t_name(name, sizeof name, "crash2");
    struct die_arg d = {name, "100"};
    int st_child = t_wait(t_fork(die_creating, &d));
    if (st_child != 128 + SIGKILL)
        shl_unlink(name);
    cr_assert_eq(st_child, 128 + SIGKILL, "the child's crash point did not fire");
    cr_assert_eq(t_shm_entries(name), 0);
}

/* One creator of a pair: opens (creating) the table, stopping at the crash
 * point `stall` on the way when it is set, then acquires lease L. */
struct pair_out {
    int open_rc, created, acquire_rc;
    int32_t creator_pid;
    uint64_t token;
};

struct pair_arg {
    const char *name;
    const char *stall; /* "id:1:stop", or NULL */
    const char *owner;
    struct pair_out *out; /* shared */
};

static int pair_creator(void *arg)
{
    const struct pair_arg *a = arg;
    if (a->stall)
        setenv("SHL_CRASHPOINT", a->stall, 1);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 64;
    shl_table *t;
    a->out->open_rc = shl_open(a->name, &o, &t);
    if (a->out->open_rc != SHL_OK)
        return 0;
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return 1;
    a->out->created = ti.created;
    a->out->creator_pid = ti.creator_pid;
    a->out->acquire_rc = shl_acquire(t, "L", a->owner, 3600 * SEC, &a->out->token);
    shl_close(t);
    return 0;
}

/* A and B created `name` (A first to acquire L): both must be on the one
 * table under the name, so B finds L held by A. */
static void expect_same_table(const char *name, const struct pair_out *a, const struct pair_out *b)
{
    cr_assert_eq(a->open_rc, SHL_OK, "A: %s", shl_errname(a->open_rc));
    cr_assert_eq(b->open_rc, SHL_OK, "B: %s", shl_errname(b->open_rc));
    cr_assert_eq(a->created + b->created, 1, "%d of the two initialised the table",
                 a->created + b->created);
    cr_assert_eq(a->creator_pid, b->creator_pid, "A and B are on different tables");
    cr_assert_eq(a->acquire_rc, SHL_OK);
    cr_assert_eq(a->token, 1);
    cr_assert_eq(b->acquire_rc, SHL_EBUSY, "B got %s, token %llu: two holders of L",
                 shl_errname(b->acquire_rc), (unsigned long long)b->token);
    shl_table *t;
    shl_lease_info li;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    cr_assert_eq(shl_stat(t, "L", &li), SHL_OK);
    cr_assert_str_eq(li.owner, "A", "the table under the name is not the one A used");
    shl_close(t);
    cr_assert_eq(t_shm_entries(name), 1, "something beside %s was left behind", name);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

static struct pair_out *shared_pair(void)
{
    void *p = mmap(NULL, 2 * sizeof(struct pair_out), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    return p;
}

/* Creator A stalls right after making its file, for longer than any
 * age-based "stale creator" rule would wait (it was 2 s); creator B starts
 * and stalls just before publishing; A goes on and finishes, then B. Each
 * may only ever publish the file it initialised itself: both end on A's
 * table. */
Test(create, stalled_creators_share_one_table)
{
    char name[96];
    t_name(name, sizeof name, "stall");
    struct pair_out *out = shared_pair();
    struct pair_arg a = {name, "101:1:stop", "A", &out[0]};
    struct pair_arg b = {name, "100:1:stop", "B", &out[1]};
    pid_t pa = t_fork(pair_creator, &a);
    cr_assert_eq(t_wait_stopped(pa), 0, "A did not stop at its crash point");
    t_sleep_ns(2500 * MS);
    pid_t pb = t_fork(pair_creator, &b);
    cr_assert_eq(t_wait_stopped(pb), 0, "B did not stop at its crash point");
    kill(pa, SIGCONT);
    cr_assert_eq(t_wait(pa), 0);
    kill(pb, SIGCONT);
    cr_assert_eq(t_wait(pb), 0);
    cr_assert_eq(out[0].created, 1, "A published first");
    expect_same_table(name, &out[0], &out[1]);
    munmap(out, 2 * sizeof *out);
}

/* A creator stalled with its table initialised but not published holds up
 * nobody: another creator makes and publishes its own at once; the stalled
 * one, when it goes on, finds the name taken and opens that table. */
Test(create, creator_stalled_before_publish_holds_up_nobody)
{
    char name[96];
    t_name(name, sizeof name, "stall2");
    struct pair_out *out = shared_pair();
    struct pair_arg b = {name, "100:1:stop", "B", &out[1]};
    struct pair_arg a = {name, NULL, "A", &out[0]};
    pid_t pb = t_fork(pair_creator, &b);
    cr_assert_eq(t_wait_stopped(pb), 0, "B did not stop at its crash point");
    cr_assert_eq(t_wait(t_fork(pair_creator, &a)), 0);
    cr_assert_eq(out[0].created, 1, "A created the table while B was stalled");
    kill(pb, SIGCONT);
    cr_assert_eq(t_wait(pb), 0);
    expect_same_table(name, &out[0], &out[1]);
    munmap(out, 2 * sizeof *out);
}
