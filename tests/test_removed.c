/*
 * tests/test_removed.c - a table removed under its users.
 *
 * shl_unlink() (shmlease rm) marks the segment before unlinking it: every
 * handle's next call, in any process, is SHL_EREMOVED, and sleepers wake at
 * once. A removal by anything else (a plain unlink: rm, RemoveIPC, a tmp
 * cleaner) is noticed by waits, renewers and shmlease run within their
 * check interval. Only tables are removed. With a token state file the
 * table made again under the name gives tokens above the old ones.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define EXIT_LOST 4

static void shm_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/dev/shm/%s", name);
}

/* A plain unlink of the table's file, as rm or systemd-logind would do it. */
static void plain_rm(const char *name)
{
    char path[256];
    shm_path(path, sizeof path, name);
    cr_assert_eq(unlink(path), 0, "unlink %s", path);
}

/* ------------------------------------------------ every handle is told */

struct other {
    const char *name;
    int go[2];   /* parent -> child: removed, try now */
    int done[2]; /* child -> parent: holds the lease */
};

/* A process of its own with its own handle and lease: after the parent's
 * shl_unlink(), each of its calls must say SHL_EREMOVED. Exit status: the
 * number of calls that did not. */
static int other_process(void *p)
{
    struct other *o = p;
    shl_table *t;
    uint64_t tok;
    if (shl_open(o->name, NULL, &t) != SHL_OK || shl_acquire(t, "B", "child", 60 * SEC, &tok))
        return 100;
    char c = 1;
    if (write(o->done[1], &c, 1) != 1 || read(o->go[0], &c, 1) != 1)
        return 101;
    int bad = 0;
    bad += shl_renew(t, "B", "child", tok, 60 * SEC) != SHL_EREMOVED;
    bad += shl_write(t, "B", "child", tok, "x", 1) != SHL_EREMOVED;
    bad += shl_release(t, "B", "child", tok) != SHL_EREMOVED;
    bad += shl_acquire(t, "C", "child", SEC, &tok) != SHL_EREMOVED;
    return bad;
}

Test(removed, unlink_tells_every_handle_bound_and_by_name)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rmall"), 8, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok, btok;
    cr_assert_eq(shl_acquire(t, "A", "me", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "A", "me", tok, "v", 1), SHL_OK);
    shl_lease *l;
    cr_assert_eq(shl_lease_open(t, "L", "me", &l), SHL_OK);
    cr_assert_eq(shl_lease_acquire(l, 60 * SEC, &btok, NULL), SHL_OK);

    struct other o = {name, {-1, -1}, {-1, -1}};
    cr_assert_eq(pipe(o.go), 0);
    cr_assert_eq(pipe(o.done), 0);
    pid_t child = t_fork(other_process, &o);
    char c;
    cr_assert_eq(read(o.done[0], &c, 1), 1, "child did not acquire");

    cr_assert_eq(shl_unlink(name), SHL_OK);
    cr_assert_eq(write(o.go[1], &c, 1), 1);

    /* By name. */
    char buf[16];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_renew(t, "A", "me", tok, 60 * SEC), SHL_EREMOVED);
    cr_assert_eq(shl_write(t, "A", "me", tok, "w", 1), SHL_EREMOVED);
    cr_assert_eq(shl_read(t, "A", buf, sizeof buf, &len, &vt), SHL_EREMOVED);
    cr_assert_eq(shl_release(t, "A", "me", tok), SHL_EREMOVED);
    cr_assert_eq(shl_acquire(t, "A", "me", SEC, &tok), SHL_EREMOVED);
    cr_assert_eq(shl_acquire(t, "new-name", "me", SEC, &tok), SHL_EREMOVED,
                 "no name is added to a removed table");
    cr_assert_eq(shl_read(t, "never-used", buf, sizeof buf, &len, &vt), SHL_EREMOVED);
    cr_assert_eq(shl_acquire_wait(t, "A", "me", SEC, SEC, &tok), SHL_EREMOVED);
    /* Bound. */
    cr_assert_eq(shl_lease_renew(l, btok, 60 * SEC), SHL_EREMOVED);
    cr_assert_eq(shl_lease_write(l, btok, "w", 1), SHL_EREMOVED);
    cr_assert_eq(shl_lease_read(l, buf, sizeof buf, &len, &vt), SHL_EREMOVED);
    cr_assert_eq(shl_lease_release(l, btok), SHL_EREMOVED);
    cr_assert_eq(shl_lease_acquire(l, SEC, &btok, NULL), SHL_EREMOVED);
    cr_assert_eq(shl_table_check(t), SHL_EREMOVED);
    cr_assert_eq(shl_repair(t, 0, NULL, NULL), SHL_EREMOVED, "repair says why, not ECORRUPT");
    cr_assert_eq(shl_repair(t, SHL_REPAIR_DRY_RUN, NULL, NULL), SHL_EREMOVED);
    cr_assert_eq(t_wait(child), 0, "the other process's calls did not all say SHL_EREMOVED");

    /* The name is free: a new table, whose first token starts over. */
    shl_table *n = t_create(name, 8, 16, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_table_check(n), SHL_OK);
    cr_assert_eq(shl_acquire(n, "A", "me", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 1);
    shl_lease_close(l);
    shl_close(n);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------------------ waiters */

struct waiter_arg {
    const char *name;
    int out[2]; /* child -> parent: when it began to wait; its result, and when */
};

/* Waits for lease A (held by the parent for two minutes); writes the
 * CLOCK_MONOTONIC time just before the wait, then the wait's result and
 * the time at which it returned. */
static int waiting_child(void *p)
{
    struct waiter_arg *w = p;
    shl_table *t;
    if (shl_open(w->name, NULL, &t) != SHL_OK)
        return 100;
    uint64_t tok;
    int64_t start = (int64_t)t_now(), res[2];
    if (write(w->out[1], &start, sizeof start) != (ssize_t)sizeof start)
        return 101;
    res[0] = shl_acquire_wait(t, "A", "waiter", SEC, 120 * SEC, &tok);
    res[1] = (int64_t)t_now();
    return write(w->out[1], res, sizeof res) == (ssize_t)sizeof res ? 0 : 102;
}

static int one_waiter(void *p)
{
    shl_lease_info in;
    return shl_stat(p, "A", &in) == SHL_OK && in.waiters == 1;
}

/* One waiter asleep on A, held by t; remove the table by `how` (0:
 * shl_unlink, 1: a plain unlink); the waiter's result and its latency. */
static uint64_t waiter_after_removal(int how, int *result)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rmwait"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "A", "holder", 120 * SEC, &tok), SHL_OK);
    struct waiter_arg w = {name, {-1, -1}};
    cr_assert_eq(pipe(w.out), 0);
    pid_t child = t_fork(waiting_child, &w);
    int64_t start;
    cr_assert_eq(read(w.out[0], &start, sizeof start), (ssize_t)sizeof start);
    cr_assert(t_until(one_waiter, t, 10 * SEC), "the waiter never queued");
    /* Halfway between the waiter's first two looks at the name (at 1 and
     * about 2 check intervals after it began): one that is not woken sees
     * the removal only half an interval later. */
    uint64_t at = (uint64_t)start + 3 * SHL_REMOVED_CHECK_NS / 2;
    if (t_now() < at)
        t_sleep_ns(at - t_now());
    uint64_t t0 = t_now();
    if (how == 0)
        cr_assert_eq(shl_unlink(name), SHL_OK);
    else
        plain_rm(name);
    int64_t res[2];
    cr_assert_eq(read(w.out[0], res, sizeof res), (ssize_t)sizeof res);
    cr_assert_eq(t_wait(child), 0);
    close(w.out[0]);
    close(w.out[1]);
    shl_close(t);
    *result = (int)res[0];
    return (uint64_t)res[1] > t0 ? (uint64_t)res[1] - t0 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* shl_unlink() wakes the waiter: it does not wait for the holder's expiry
 * (two minutes) nor for its own next look at the name, half a check
 * interval (125 ms) after the removal. Latency as a median of 5 against a
 * fifth of the interval (50 ms): a loaded machine may delay one wake-up,
 * not most of them. */
Test(removed, unlink_wakes_a_waiter_at_once)
{
    t_guard(120);
    uint64_t lat[5];
    for (int i = 0; i < 5; i++) {
        int rc;
        lat[i] = waiter_after_removal(0, &rc);
        cr_assert_eq(rc, SHL_EREMOVED, "wait returned %s", shl_errname(rc));
        cr_assert_lt(lat[i], 10 * SEC, "the waiter slept on after the removal");
    }
    qsort(lat, 5, sizeof lat[0], cmp_u64);
    cr_assert_lt(lat[2], SHL_REMOVED_CHECK_NS / 5, "median wake latency %llu ns: not woken",
                 (unsigned long long)lat[2]);
}

/* A plain unlink bumps no word: the waiter sees it at its next look at the
 * name, within SHL_REMOVED_CHECK_NS (bound given 20 times that: a loaded
 * machine), not at the holder's expiry two minutes away. */
Test(removed, plain_unlink_ends_a_wait)
{
    t_guard(120);
    int rc;
    uint64_t lat = waiter_after_removal(1, &rc);
    cr_assert_eq(rc, SHL_EREMOVED, "wait returned %s", shl_errname(rc));
    cr_assert_lt(lat, 20 * SHL_REMOVED_CHECK_NS, "took %llu ns", (unsigned long long)lat);
}

/* ------------------------------------------------------------ renewers */

static int lost_removed(void *p)
{
    return shl_renewer_lost(p) == SHL_LOSS_REMOVED;
}

/* A new table `tag` (name into name[96]) with lease A held by "me" for
 * ttl and a renewer keeping it, with its default interval (ttl / 3). */
static shl_renewer *kept_lease(char *name, const char *tag, uint64_t ttl, shl_table **t,
                               uint64_t *tok)
{
    *t = t_create(t_name(name, 96, tag), 4, 16, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_acquire(*t, "A", "me", ttl, tok), SHL_OK);
    shl_renewer *r;
    cr_assert_eq(shl_renewer_start(*t, "A", "me", *tok, ttl, NULL, &r), SHL_OK);
    return r;
}

Test(removed, renewer_reports_a_plain_unlink)
{
    t_guard(60);
    char name[96];
    shl_table *t;
    uint64_t tok;
    shl_renewer *r = kept_lease(name, "rmren", 6 * SEC, &t, &tok);
    plain_rm(name);
    /* Within one interval (2 s); the bound leaves room for a loaded
     * machine, and stays below the local deadline (5.4 s), which is not the
     * reason expected (every renewal succeeds on the old segment). */
    cr_assert(t_until(lost_removed, r, 5 * SEC), "lost: %d", shl_renewer_lost(r));
    cr_assert_eq(shl_renewer_check(r), SHL_ELOST);
    /* The segment was marked by the renewer's look: every handle is told. */
    cr_assert_eq(shl_renew(t, "A", "me", tok, SEC), SHL_EREMOVED);
    cr_assert_eq(shl_renewer_stop(r, SHL_RENEWER_RELEASE), SHL_ELOST);
    shl_close(t);
}

Test(removed, renewer_is_woken_by_unlink)
{
    t_guard(60);
    char name[96];
    shl_table *t;
    uint64_t tok;
    shl_renewer *r = kept_lease(name, "rmrenw", 60 * SEC, &t, &tok);
    t_sleep_ns(100 * MS); /* its thread asleep until the next renewal */
    cr_assert_eq(shl_unlink(name), SHL_OK);
    /* Its next renewal is 20 s away: only the wake can tell it this soon. */
    cr_assert(t_until(lost_removed, r, 5 * SEC), "lost: %d", shl_renewer_lost(r));
    cr_assert_eq(shl_renewer_write(r, "x", 1), SHL_ELOST);
    shl_renewer_stop(r, 0);
    shl_close(t);
}

/* A name that now names another file (removed and made again, a hard link
 * moved over it) is a removal too. */
Test(removed, name_given_to_another_file_is_a_removal)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rmre"), 4, 16, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_table_check(t), SHL_OK);
    plain_rm(name);
    shl_table *n = t_create(name, 4, 16, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_table_check(n), SHL_OK);
    cr_assert_eq(shl_table_check(t), SHL_EREMOVED);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "A", "me", SEC, &tok), SHL_EREMOVED, "marked when seen");
    cr_assert_eq(shl_acquire(n, "A", "me", SEC, &tok), SHL_OK, "the new table is not");
    shl_close(n);
    shl_close(t);
    shl_unlink(name);
}

/* --------------------------------------------------------- shmlease run */

struct run_arg {
    const char *name, *dir;
};

static int holding_run(void *p)
{
    struct run_arg *a = p;
    return t_tool_run(NULL,
                      "run %s job --ttl 3s -- sh -c 'echo $SHMLEASE_TOKEN > %s/a.tok; "
                      "echo $$ > %s/a.pid; exec sleep 60' 2>%s/a.err",
                      a->name, a->dir, a->dir, a->dir);
}

static int file_exists(void *p)
{
    return access(p, F_OK) == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A run holds `job`; the table's file is removed by a plain unlink, and a
 * second run makes a new table under the name and gets token 1 again. The
 * first run must stop its command, say why, and exit 4, within one renewal
 * interval (1 s; bound 5 s for a loaded machine): the two commands
 * overlap at most that long, and the first is told. */
Test(removed, run_stops_its_command_when_the_table_is_removed)
{
    t_guard(90);
    char name[96], dir[64], path[128];
    t_name(name, sizeof name, "rmrun");
    t_mkdtemp(dir, sizeof dir, "rmrun");
    struct run_arg a = {name, dir};
    pid_t first = t_fork(holding_run, &a);
    snprintf(path, sizeof path, "%s/a.pid", dir);
    cr_assert(t_until(file_exists, path, 20 * SEC), "the first run's command never started");
    t_sleep_ns(20 * MS); /* the pid written whole */
    pid_t cmd = (pid_t)atoi(slurp(path));
    cr_assert_gt(cmd, 0);

    plain_rm(name);
    uint64_t t0 = t_now();
    char *out = NULL;
    int st = t_tool_run(&out, "run %s job -- sh -c 'echo $SHMLEASE_TOKEN'", name);
    cr_assert_eq(st, 0);
    cr_assert_str_eq(out, "1\n", "the new table starts over: why the old holder must stop");
    free(out);

    cr_assert_eq(t_wait(first), EXIT_LOST, "the first run did not exit 4");
    cr_assert_lt(t_now() - t0, 5 * SEC);
    cr_assert_neq(kill(cmd, 0), 0, "the first run's command still runs");
    char *err = slurp((snprintf(path, sizeof path, "%s/a.err", dir), path));
    cr_assert(strstr(err, "removed"), "run did not say why: %s", err);
    t_rm_rf(dir);
    shl_unlink(name);
}

/* ------------------------------------------------------- rm: tables only */

Test(removed, rm_refuses_a_file_that_is_not_a_table)
{
    char name[96], path[256];
    t_name(name, sizeof name, "rmnot");
    shm_path(path, sizeof path, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("somebody else's data, not a table\n", f);
    fclose(f);
    cr_assert_eq(shl_unlink(name), SHL_ECORRUPT);
    cr_assert_eq(access(path, F_OK), 0, "shl_unlink removed a file that is not a table");
    char *out = NULL;
    cr_assert_eq(t_tool_run(&out, "rm %s 2>&1", name), 1);
    cr_assert(strstr(out, "not a shmlease table"), "%s", out);
    free(out);
    cr_assert_eq(access(path, F_OK), 0, "rm removed a file that is not a table");
    /* An empty file (no header at all) is not one either. */
    cr_assert_eq(truncate(path, 0), 0);
    cr_assert_eq(shl_unlink(name), SHL_ECORRUPT);
    cr_assert_eq(access(path, F_OK), 0);
    cr_assert_eq(t_tool_run(NULL, "rm --force %s", name), 0);
    cr_assert_neq(access(path, F_OK), 0, "rm --force kept it");
    /* A table is removed as before, and so is a damaged one that still has
     * the magic word (cut short: it does not open). */
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    cr_assert_eq(t_tool_run(NULL, "rm %s", name), 0);
    cr_assert_neq(access(path, F_OK), 0);
    t = t_create(name, 4, 16, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    cr_assert_eq(truncate(path, 100), 0);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ECORRUPT);
    cr_assert_eq(shl_unlink(name), SHL_OK);
    cr_assert_neq(access(path, F_OK), 0);
}

/* A name left naming a marked segment (its remover did not get to the
 * unlink; here a second link to it) opens as SHL_EREMOVED, and the tools
 * say so. */
Test(removed, marked_table_under_another_name_is_refused_and_said)
{
    char name[96], other[96], p1[256], p2[256];
    t_name(name, sizeof name, "rmlink");
    t_name(other, sizeof other, "rmlink-b");
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MONOTONIC);
    shm_path(p1, sizeof p1, name);
    shm_path(p2, sizeof p2, other);
    cr_assert_eq(link(p1, p2), 0);
    cr_assert_eq(shl_unlink(name), SHL_OK);
    shl_table *u;
    cr_assert_eq(shl_open(other, NULL, &u), SHL_EREMOVED);
    static const char *const cmds[] = {"ls", "dump", "check"};
    for (int i = 0; i < 3; i++) {
        char *out = NULL;
        cr_assert_eq(t_tool_run(&out, "%s %s 2>&1", cmds[i], other), 3, "%s", cmds[i]);
        cr_assert(strstr(out, "SHL_EREMOVED"), "%s: %s", cmds[i], out);
        free(out);
    }
    cr_assert_eq(shl_unlink(other), SHL_OK, "a marked table is still a table");
    shl_close(t);
}

Test(removed, tools_say_the_table_was_removed)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rmwatch"), 4, 16, SHL_CLOCK_MONOTONIC);
    char path[256];
    shm_path(path, sizeof path, name);
    /* watch looks every 50 ms; removed under it, it says so and exits 3. */
    char *out = NULL;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "(sleep 0.3; rm -f %s) & '%s' watch %s --interval 50ms 2>&1 >/dev/null", path,
             t_tool(), name);
    cr_assert_eq(t_run(cmd, &out), 3, "%s", out);
    cr_assert(strstr(out, "was removed"), "%s", out);
    free(out);
    shl_close(t);
}

/* ------------------------------------------------ tokens: the durable defence */

Test(removed, token_state_recreated_table_starts_above_the_removed_one)
{
    char name[96], dir[64], st[128];
    t_name(name, sizeof name, "rmfloor");
    t_mkdtemp(dir, sizeof dir, "rmfloor");
    snprintf(st, sizeof st, "%s/tokens", dir);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 8;
    o.token_state_path = st;
    shl_table *old;
    cr_assert_eq(shl_open(name, &o, &old), SHL_OK);
    uint64_t tok = 0, top = 0;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(shl_acquire(old, "res", "a", 60 * SEC, &tok), SHL_OK);
        if (i < 4)
            cr_assert_eq(shl_release(old, "res", "a", tok), SHL_OK);
        top = tok;
    }
    /* Removed under its holder (plain unlink: no mark), made again. */
    plain_rm(name);
    shl_table *fresh;
    cr_assert_eq(shl_open(name, &o, &fresh), SHL_OK);
    uint64_t nt;
    cr_assert_eq(shl_acquire(fresh, "res", "b", SEC, &nt), SHL_OK);
    cr_assert_gt(nt, top, "token %llu of the new table is not above %llu of the removed one",
                 (unsigned long long)nt, (unsigned long long)top);
    /* So an outside fence that admitted the new holder refuses the old one. */
    shl_fence fence = {0};
    cr_assert_eq(shl_fence_admit(&fence, nt), SHL_OK);
    cr_assert_eq(shl_fence_admit(&fence, top), SHL_ESTALE);
    shl_close(fresh);
    shl_close(old);
    shl_unlink(name);
    t_rm_rf(dir);
}
