/*
 * tests/test_floor.c - tokens that stay comparable across removal and
 * re-creation of a table, through the token state file.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crash.h"             /* c_check, c_repair */
#include "kind_shm/shm_kind.h" /* to age a slot's token to the end of its epoch */

static char dir[64];

static void mkdir_tmp(void)
{
    t_mkdtemp(dir, sizeof dir, "shlfloor");
}

static void rm_tmp(void)
{
    t_rm_rf(dir);
}

static const char *state_path(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/tokens", dir);
    return buf;
}

/* The options every floored table here is made with. */
static void floored_options(shl_options *o, const char *state)
{
    shl_options_init(o);
    o->capacity = 8;
    o->value_size = 16;
    o->token_state_path = state;
}

static shl_table *create_floored(const char *name, const char *state)
{
    shl_options o;
    floored_options(&o, state);
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    int rc = shl_open(name, &o, &t);
    cr_assert_eq(rc, SHL_OK, "create %s: %s", name, shl_strerror(rc));
    return t;
}

static uint64_t floor_of(shl_table *t)
{
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    return ti.token_floor;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static uint64_t acquire_release(shl_table *t, const char *lease)
{
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, lease, "w", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, lease, "w", tok), SHL_OK);
    return tok;
}

TestSuite(floor, .init = mkdir_tmp, .fini = rm_tmp);

Test(floor, recreated_table_tokens_pass_a_file_fence)
{
    char name[96], st[96], fpath[96];
    t_name(name, sizeof name, "floor");
    state_path(st, sizeof st);
    snprintf(fpath, sizeof fpath, "%s/resource", dir);

    /* The resource: a file whose first word is its fence. */
    int fd = open(fpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, 4096), 0);
    shl_fence *fence = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert(fence != MAP_FAILED);

    uint64_t seen_max = 0;
    for (int round = 1; round <= 3; round++) {
        shl_table *t = create_floored(name, st);
        cr_assert_eq(floor_of(t), (uint64_t)round << SHL_TOKEN_EPOCH_BITS);
        for (int i = 0; i < 3; i++) {
            uint64_t tok = acquire_release(t, "res");
            cr_assert_gt(tok, seen_max, "round %d: token %llu not above %llu", round,
                         (unsigned long long)tok, (unsigned long long)seen_max);
            cr_assert_eq(shl_fence_admit(fence, tok), SHL_OK, "new holder admitted");
            if (seen_max)
                cr_assert_eq(shl_fence_admit(fence, seen_max), SHL_ESTALE,
                             "an older table's token stays refused");
            seen_max = tok;
        }
        shl_close(t);
        cr_assert_eq(shl_unlink(name), SHL_OK); /* as `shmlease rm` */
    }
    munmap(fence, 4096);
    close(fd);
    cr_assert_eq(t_dir_entries(dir, "tokens.tmp"), 0, "no temporary file left behind");
}

Test(floor, without_state_file_recreation_starts_over)
{
    /* Why the floor exists: a fence that saw the old table's tokens refuses
     * the new table's first holder. */
    char name[96];
    t_name(name, sizeof name, "nofloor");
    shl_fence fence = {0};
    shl_table *t = t_create(name, 4, 8, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(floor_of(t), 0);
    acquire_release(t, "res");
    uint64_t old = acquire_release(t, "res");
    cr_assert_eq(old, 2);
    cr_assert_eq(shl_fence_admit(&fence, old), SHL_OK);
    shl_close(t);
    shl_unlink(name);
    t = t_create(name, 4, 8, SHL_CLOCK_MONOTONIC);
    uint64_t fresh = acquire_release(t, "res");
    cr_assert_eq(fresh, 1);
    cr_assert_eq(shl_fence_admit(&fence, fresh), SHL_ESTALE);
    shl_close(t);
    shl_unlink(name);
}

Test(floor, epoch_limit_refuses_acquire_and_changes_nothing)
{
    char name[96], st[96];
    t_name(name, sizeof name, "limit");
    shl_table *t = create_floored(name, state_path(st, sizeof st));
    uint64_t floor = floor_of(t), tok;
    cr_assert_eq(acquire_release(t, "x"), floor + 1);
    /* Age the lease to one token before the end of its epoch. */
    struct shl__key k;
    cr_assert_eq(shl__key_lease("x", &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    cr_assert(s);
    s->cur.token = floor + SHL_TOKEN_EPOCH_SPAN - 1;
    cr_assert_eq(acquire_release(t, "x"), floor + SHL_TOKEN_EPOCH_SPAN, "the last token");
    cr_assert_eq(shl_acquire(t, "x", "w", SEC, &tok), SHL_ETOKENS);
    shl_lease_info li;
    cr_assert_eq(shl_stat(t, "x", &li), SHL_OK);
    cr_assert_eq(li.token, floor + SHL_TOKEN_EPOCH_SPAN, "refusal changed nothing");
    cr_assert_eq(li.state, SHL_STATE_FREE);
    /* Another lease of the same table is unaffected. */
    cr_assert_eq(acquire_release(t, "y"), floor + 1);
    shl_close(t);
    shl_unlink(name);
    /* A new creation gets a new epoch, above every token of the old one. */
    t = create_floored(name, st);
    cr_assert_eq(acquire_release(t, "x"), floor + SHL_TOKEN_EPOCH_SPAN + 1);
    shl_close(t);
    shl_unlink(name);
}

Test(floor, bad_state_files_are_refused_and_create_nothing)
{
    char name[96], st[96], bad[128];
    t_name(name, sizeof name, "bad");
    state_path(st, sizeof st);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.token_state_path = st;
    shl_table *t = (shl_table *)1;
    const char *texts[] = {"",
                           "garbage\n",
                           "shmlease-token-state 1\nepoch x\n",
                           "shmlease-token-state 1\nepoch 5\nmore\n",
                           "shmlease-token-state 2\nepoch 5\n",
                           "shmlease-token-state 1\nepoch 99999999999999\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        write_file(st, texts[i]);
        cr_assert_eq(shl_open(name, &o, &t), SHL_ECORRUPT, "text %zu", i);
        cr_assert_null(t);
        cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT, "no table was created");
    }
    /* The last epoch that still leaves room for a full span of tokens. */
    snprintf(bad, sizeof bad, "shmlease-token-state 1\nepoch %llu\n",
             (unsigned long long)((UINT64_C(1) << (64 - SHL_TOKEN_EPOCH_BITS)) - 2));
    write_file(st, bad);
    cr_assert_eq(shl_open(name, &o, &t), SHL_ETOKENS);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);

    snprintf(bad, sizeof bad, "%s/no/such/dir/tokens", dir);
    o.token_state_path = bad;
    cr_assert_eq(shl_open(name, &o, &t), SHL_ENOENT);
    o.token_state_path = "";
    cr_assert_eq(shl_open(name, &o, &t), SHL_EINVAL);
    snprintf(bad, sizeof bad, "%s/", dir);
    o.token_state_path = bad;
    cr_assert_eq(shl_open(name, &o, &t), SHL_EINVAL);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
}

Test(floor, opening_an_existing_table_does_not_touch_the_file)
{
    char name[96], st[96], *before = NULL, *after = NULL, cmd[160];
    t_name(name, sizeof name, "reopen");
    state_path(st, sizeof st);
    shl_table *t = create_floored(name, st), *t2 = NULL;
    snprintf(cmd, sizeof cmd, "cat '%s'", st);
    cr_assert_eq(t_run(cmd, &before), 0);
    shl_options o;
    floored_options(&o, st);
    cr_assert_eq(shl_open(name, &o, &t2), SHL_OK);
    cr_assert_eq(floor_of(t2), floor_of(t));
    shl_close(t2);
    cr_assert_eq(t_run(cmd, &after), 0);
    cr_assert_str_eq(before, after, "no epoch reserved by an opener");
    /* Options must match: a floored table is not what a caller without a
     * state file asked for, and the reverse. */
    o.token_state_path = NULL;
    cr_assert_eq(shl_open(name, &o, &t2), SHL_EMISMATCH);
    o.flags = SHL_CREATE | SHL_EXCL;
    o.token_state_path = st;
    cr_assert_eq(shl_open(name, &o, &t2), SHL_EEXIST);
    free(before);
    free(after);
    shl_close(t);
    shl_unlink(name);

    t = t_create(name, 8, 16, SHL_CLOCK_MONOTONIC);
    o.flags = SHL_CREATE;
    cr_assert_eq(shl_open(name, &o, &t2), SHL_EMISMATCH);
    shl_close(t);
    shl_unlink(name);
}

static const char *race_name, *race_state;

static int racing_creator(void *arg)
{
    (void)arg;
    shl_options o;
    floored_options(&o, race_state);
    shl_table *t;
    if (shl_open(race_name, &o, &t) != SHL_OK)
        return 1;
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    shl_close(t);
    return (int)(ti.token_floor >> SHL_TOKEN_EPOCH_BITS); /* the epoch, as exit status */
}

Test(floor, racing_creators_share_one_table_and_floor)
{
    char name[96], st[96];
    race_name = t_name(name, sizeof name, "race");
    race_state = state_path(st, sizeof st);
    enum { N = 6 };
    pid_t p[N];
    for (int i = 0; i < N; i++)
        p[i] = t_fork(racing_creator, NULL);
    int epoch = -1;
    for (int i = 0; i < N; i++) {
        int e = t_wait(p[i]);
        cr_assert(e >= 1 && e <= N, "child %d: %d", i, e);
        if (epoch < 0)
            epoch = e;
        cr_assert_eq(e, epoch, "every process got the same table");
    }
    shl_unlink(name);
}

Test(floor, tool_create_token_state)
{
    char name[96], st[96], cmd[400], *out = NULL;
    t_name(name, sizeof name, "tool");
    state_path(st, sizeof st);
    for (int round = 1; round <= 2; round++) {
        snprintf(cmd, sizeof cmd, "%s create %s --capacity 4 --token-state '%s'", t_tool(), name,
                 st);
        cr_assert_eq(t_run(cmd, &out), 0);
        char want[64];
        snprintf(want, sizeof want, "(epoch %d)", round);
        cr_assert(strstr(out, want), "output: %s", out);
        free(out);
        snprintf(cmd, sizeof cmd, "%s rm %s", t_tool(), name);
        cr_assert_eq(t_run(cmd, NULL), 0);
    }
    snprintf(cmd, sizeof cmd, "%s create %s --token-state 2>/dev/null", t_tool(), name);
    cr_assert_eq(t_run(cmd, NULL), 2, "missing value is a usage error");
    write_file(st, "not a state file\n");
    snprintf(cmd, sizeof cmd, "%s create %s --token-state '%s' 2>&1", t_tool(), name, st);
    cr_assert_eq(t_run(cmd, &out), 3);
    cr_assert(strstr(out, "SHL_ECORRUPT") && strstr(out, st), "output: %s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT, "nothing was created");
}

/* A creator killed at each step of reserving an epoch: no table appears, the
 * file holds the old epoch or the new one (never garbage, never lower), the
 * lock it held does not block the next creator, and the next table's tokens
 * are above every earlier table's. Crash points are armed once per process,
 * at the first one passed, so every table operation here runs in a child. */
static const char *crash_name, *crash_state;
static uint64_t *crash_out; /* shared with the children: token, floor */

static int open_floored(void)
{
    shl_options o;
    floored_options(&o, crash_state);
    shl_table *t;
    int rc = shl_open(crash_name, &o, &t);
    if (rc != SHL_OK)
        return 1;
    uint64_t tok;
    shl_table_info ti;
    shl_table_info_get(t, &ti);
    rc = shl_acquire(t, "x", "w", SEC, &tok);
    crash_out[0] = rc == SHL_OK ? tok : 0;
    crash_out[1] = ti.token_floor;
    shl_close(t);
    shl_unlink(crash_name);
    return rc == SHL_OK ? 0 : 1;
}

static int crashing_creator(void *arg)
{
    if (arg)
        setenv("SHL_CRASHPOINT", (const char *)arg, 1);
    return open_floored();
}

static uint64_t file_epoch(const char *st)
{
    char cmd[160], *out = NULL;
    snprintf(cmd, sizeof cmd, "sed -n 's/^epoch //p' '%s'", st);
    cr_assert_eq(t_run(cmd, &out), 0);
    uint64_t e = strtoull(out, NULL, 10);
    free(out);
    return e;
}

Test(floor, crash_while_reserving_an_epoch)
{
    char name[96], st[96], cp[16];
    crash_name = t_name(name, sizeof name, "crash");
    crash_state = state_path(st, sizeof st);
    crash_out = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(crash_out != MAP_FAILED);
    cr_assert_eq(t_wait(t_fork(crashing_creator, NULL)), 0);
    uint64_t last = crash_out[0];
    cr_assert_eq(last, (UINT64_C(1) << SHL_TOKEN_EPOCH_BITS) + 1);
    const int points[] = {SHL__CP_FLOOR_TMP, SHL__CP_FLOOR_RENAMED};
    for (int i = 0; i < 2; i++) {
        uint64_t before = file_epoch(st);
        shl_table *t;
        snprintf(cp, sizeof cp, "%d", points[i]);
        cr_assert_eq(t_wait(t_fork(crashing_creator, cp)), 128 + SIGKILL, "crash point %s", cp);
        cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT, "no table from a dead creator");
        uint64_t after = file_epoch(st);
        cr_assert_eq(after, before + (points[i] == SHL__CP_FLOOR_RENAMED), "point %s", cp);
        /* The next creator is not blocked by the dead one's lock. */
        cr_assert_eq(t_wait(t_fork(crashing_creator, NULL)), 0);
        cr_assert_gt(crash_out[0], last, "point %s: %llu after %llu", cp,
                     (unsigned long long)crash_out[0], (unsigned long long)last);
        cr_assert_eq(crash_out[1], (after + 1) << SHL_TOKEN_EPOCH_BITS);
        last = crash_out[0];
    }
    munmap(crash_out, 4096);
}

static int stopped_lock_holder(void *arg)
{
    int fd = open((const char *)arg, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        return 1;
    raise(SIGSTOP);
    return 0;
}

Test(floor, stopped_lock_holder_times_out_instead_of_blocking)
{
    char name[96], st[96], lock[128];
    t_name(name, sizeof name, "stopped");
    state_path(st, sizeof st);
    snprintf(lock, sizeof lock, "%s.lock", st);
    pid_t p = t_fork(stopped_lock_holder, lock);
    cr_assert_eq(t_wait_stopped(p), 0);
    shl_options o;
    shl_options_init(&o);
    o.token_state_path = st;
    shl_table *t;
    uint64_t t0 = t_now();
    cr_assert_eq(shl_open(name, &o, &t), SHL_ETIMEDOUT);
    cr_assert_geq(t_now() - t0, 9 * SEC, "waited for the bound, not less");
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
    kill(p, SIGKILL);
    t_wait(p);
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK, "free once the holder is gone");
    shl_close(t);
    shl_unlink(name);
}

/* A header whose floor is not one an epoch can give (garbage written into
 * the segment) is refused instead of turned into a wrong token limit. */
Test(floor, damaged_floor_in_header_is_refused)
{
    char name[96], st[96], path[160];
    t_name(name, sizeof name, "damaged");
    shl_table *t = create_floored(name, state_path(st, sizeof st)), *t2 = NULL;
    uint64_t good = floor_of(t);
    shl_close(t);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    const uint64_t bad[] = {good + 1, UINT64_MAX & ~(SHL_TOKEN_EPOCH_SPAN - 1)};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pwrite(fd, &bad[i], 8, offsetof(struct shl__hdr, token_floor)), 8);
        cr_assert_eq(shl_open(name, NULL, &t2), SHL_ECORRUPT, "floor %llx",
                     (unsigned long long)bad[i]);
        cr_assert_null(t2);
    }
    cr_assert_eq(pwrite(fd, &good, 8, offsetof(struct shl__hdr, token_floor)), 8);
    close(fd);
    cr_assert_eq(shl_open(name, NULL, &t2), SHL_OK);
    shl_close(t2);
    shl_unlink(name);
}

/* A healthy table with a floor is clean: its tokens count from the floor,
 * so check's acquisition counter must too, and repair has nothing to fix
 * (it used to rewrite the counter to the token). */
Test(floor, check_and_repair_are_clean_on_a_floored_table)
{
    char name[96], st[96];
    t_name(name, sizeof name, "ckfl");
    shl_table *t = create_floored(name, state_path(st, sizeof st));
    cr_assert_gt(floor_of(t), 0);
    for (int i = 0; i < 3; i++)
        acquire_release(t, "A");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "B", "w", 10 * SEC, &tok), SHL_OK);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(p.n, 0u, "repair did: %s", p.line[0]);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "A", &in), SHL_OK);
    cr_assert_eq(in.token, floor_of(t) + 3);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "A", &d), SHL_OK);
    cr_assert_eq(d.counters[SHL_COUNTER_ACQUIRE], 3u, "the counter still counts acquisitions");

    /* Damage is still found and fixed, relative to the floor. */
    struct shl__key k;
    cr_assert_eq(shl__key_lease("A", &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    s->count[SHL__C_ACQUIRE] = 7;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "acquisitions counted"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(s->count[SHL__C_ACQUIRE], 3u);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(shl_stat(t, "A", &in), SHL_OK);
    cr_assert_eq(in.token, floor_of(t) + 3, "the token was not touched");
    shl_close(t);
    shl_unlink(name);
}

/* The tool: `shmlease check` is clean on a floored table, and a stress
 * campaign on one passes (its final table check included). */
Test(floor, tool_check_and_stress_on_a_floored_table)
{
    t_guard(60);
    char name[96], st[96], *out = NULL;
    t_name(name, sizeof name, "stfl");
    state_path(st, sizeof st);
    cr_assert_eq(
        t_tool_run(NULL, "create %s --capacity 16 --value-size 64 --token-state '%s'", name, st),
        0);
    int rc = t_tool_run(&out,
                        "stress %s --seconds 1 --workers 3 --leases 2 --kill-rate 0 "
                        "--pause-rate 0 --seed 1 2>&1",
                        name);
    cr_assert_eq(rc, 0, "stress on a floored table: %s", out);
    free(out);
    rc = t_tool_run(&out, "check %s 2>&1", name);
    cr_assert_eq(rc, 0, "check on a floored table: %s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* A floored table's tokens start above the floor, its acquisition counter at
 * zero: the checker counts acquisitions from the floor, so a healthy floored
 * table checks clean (it once reported every lease of one as damaged). */
Test(floor, healthy_floored_table_checks_clean)
{
    char state[128], name[64];
    t_name(name, sizeof name, "floorchk");
    shl_table *t = create_floored(name, state_path(state, sizeof state));
    acquire_release(t, "a");
    acquire_release(t, "a");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "b", "w", 10 * SEC, &tok), SHL_OK);
    cr_assert_gt(tok, floor_of(t));
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK, "a healthy floored table checks clean");
    shl_close(t);
    shl_unlink(name);
}

/* A reader's gen on a re-created table: no exclusive acquisition there yet,
 * so the last ones were the earlier table's, all at or below the floor. A
 * fence that admitted the earlier table's writer must admit the reader, and
 * gen follows the new table's writers from their first acquisition. */
Test(floor, shared_gen_is_at_least_the_floor)
{
    char name[96], st[96];
    t_name(name, sizeof name, "flgen");
    state_path(st, sizeof st);
    shl_fence fence = {0};
    shl_table *t = create_floored(name, st);
    uint64_t old = acquire_release(t, "res");
    cr_assert_eq(shl_fence_admit(&fence, old), SHL_OK);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);

    t = create_floored(name, st);
    uint64_t floor = floor_of(t), tok, gen = 0;
    cr_assert_gt(floor, old);
    cr_assert_eq(shl_acquire_shared(t, "res", "r1", 10 * SEC, &tok, &gen), SHL_OK);
    cr_assert_gt(tok, floor);
    cr_assert_geq(gen, floor, "gen %llu below the floor %llu", (unsigned long long)gen,
                  (unsigned long long)floor);
    cr_assert_eq(shl_fence_admit_read(&fence, gen), SHL_OK,
                 "the earlier table's writer (token %llu) kept the reader out",
                 (unsigned long long)old);
    cr_assert_eq(shl_release(t, "res", "r1", tok), SHL_OK);
    uint64_t w = acquire_release(t, "res");
    cr_assert_eq(shl_fence_admit(&fence, w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "res", "r2", 10 * SEC, &tok, &gen), SHL_OK);
    cr_assert_eq(gen, w, "gen is the new table's last writer once there is one");
    cr_assert_eq(shl_fence_admit_read(&fence, gen), SHL_OK);
    cr_assert_eq(shl_release(t, "res", "r2", tok), SHL_OK);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
