/*
 * tests/test_create_race.c - many processes opening or creating one name at
 * the same moment, parameters that do not match, and a creator that dies
 * before publishing.
 *
 * The processes are released together: each blocks reading a pipe whose
 * write end the parent closes once all are forked. Results come back through
 * an anonymous shared mapping.
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
        /* The racers have exited: held, and provably orphaned. */
        cr_assert(li.state == SHL_STATE_HELD || li.state == SHL_STATE_ORPHANED);
    }
    shl_close(t);
    char ipath[160];
    snprintf(ipath, sizeof ipath, "/dev/shm/%s.init", name);
    cr_assert_eq(lstat(ipath, &st), -1, "%s left behind", ipath);
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
            o.policy = SHL_POLICY_RECLAIM_ORPHANS;
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
    /* The table is unharmed and the matching parameters still open it. */
    shl_table *u;
    cr_assert_eq(shl_open(name, &base, &u), SHL_OK);
    shl_lease_info li;
    cr_assert_eq(shl_stat(u, "a", &li), SHL_OK);
    cr_assert_eq(li.token, tok);
    cr_assert_eq(li.state, SHL_STATE_HELD);
    shl_close(u);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

static int die_creating(void *arg)
{
    const char *name = arg;
    setenv("SHL_CRASHPOINT", "100", 1); /* SHL__CP_SHM_CREATE */
    shl_options o;
    shl_options_init(&o);
    o.capacity = 64;
    shl_table *t;
    int rc = shl_open(name, &o, &t);
    return rc == SHL_OK ? 1 : 2; /* not reached when the crash point fires */
}

/* A creator killed after initialising but before publishing leaves only its
 * private .init file; later creators clear it once it is stale and go on. */
Test(create, creator_killed_before_publish)
{
    char name[96], path[160], ipath[160];
    struct stat st;
    t_name(name, sizeof name, "crash");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    snprintf(ipath, sizeof ipath, "/dev/shm/%s.init", name);
    /* Forked before this process passes any crash point: the child reads
     * SHL_CRASHPOINT itself. */
    cr_assert_eq(t_wait(t_fork(die_creating, name)), 128 + SIGKILL);
    cr_assert_eq(lstat(path, &st), -1, "a half-made table was published");
    cr_assert_eq(lstat(ipath, &st), 0, "the crash point did not fire where expected");

    /* A plain opener is not held up: the name does not exist. */
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);

    /* Several creators at once after the crash: all succeed within the
     * open bound (SHL_ETIMEDOUT otherwise), one of them initialises. */
    struct result *res = shared_results();
    shl_options o;
    shl_options_init(&o);
    o.capacity = 64;
    o.value_size = 16;
    run_race(name, &o, 4, res);
    expect_one_table(name, res, 4);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode));
    munmap(res, sizeof *res * NPROC);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* A crash point is armed in a forked child even when the parent has passed
 * crash points before (and so had read an unarmed environment). */
Test(create, crashpoint_armed_after_fork)
{
    char first[96], name[96], path[160], ipath[160];
    struct stat st;
    shl_table *t = t_create(t_name(first, sizeof first, "before"), 4, 8, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    cr_assert_eq(shl_unlink(first), SHL_OK);
    t_name(name, sizeof name, "crash2");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    snprintf(ipath, sizeof ipath, "/dev/shm/%s.init", name);
    int st_child = t_wait(t_fork(die_creating, name));
    if (st_child != 128 + SIGKILL)
        shl_unlink(name);
    cr_assert_eq(st_child, 128 + SIGKILL, "the child's crash point did not fire");
    cr_assert_eq(lstat(path, &st), -1);
    cr_assert_eq(unlink(ipath), 0);
}
