/*
 * tests/test_tool_acquire.c - the lease API from the shell: shmlease
 * acquire prints the token and leaves a keeper that holds the table open
 * (so that the lease is not taken for a dead holder's), renew, release,
 * read and write name the acquisition by its token, and shmlease(1)'s
 * script example runs as written, twice at once, one after the other.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static shl_lease_info stat_of(const char *table, const char *lease)
{
    shl_table *t;
    shl_lease_info in;
    cr_assert_eq(shl_open(table, NULL, &t), SHL_OK);
    cr_assert_eq(shl_stat(t, lease, &in), SHL_OK);
    shl_close(t);
    return in;
}

static int process_gone(void *p)
{
    return kill(*(pid_t *)p, 0) != 0;
}

/* The keeper: the lease is still held, not orphaned, well past the reclaim
 * delay, and another acquire is refused; after release the keeper exits. */
Test(acquire, the_keeper_holds_the_lease_until_release)
{
    t_guard(60);
    char name[96], *out;
    t_name(name, sizeof name, "acqkeep"); /* acquire creates it, with the defaults */
    cr_assert_eq(t_tool_run(&out, "acquire %s L --ttl 30s --owner script", name), 0);
    cr_assert_str_eq(out, "1\n");
    free(out);
    shl_lease_info in = stat_of(name, "L");
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_str_eq(in.owner, "script");
    pid_t keeper = in.pid;
    cr_assert_neq(keeper, 0);
    t_sleep_ns(1500 * MS); /* longer than the default reclaim delay */
    cr_assert_eq(t_tool_run(&out, "acquire %s L -E 75 2>/dev/null", name), 75,
                 "a live keeper's lease was taken");
    free(out);
    in = stat_of(name, "L");
    cr_assert_eq(in.state, SHL_STATE_HELD, "the keeper's lease is not held (state %d)", in.state);
    cr_assert_eq(in.token, 1);
    cr_assert_eq(t_tool_run(&out, "release %s L --token 1", name), 0);
    free(out);
    cr_assert(t_until(process_gone, &keeper, 10 * SEC), "the keeper outlived the release");
    cr_assert_eq(stat_of(name, "L").state, SHL_STATE_FREE);
    shl_unlink(name);
}

/* Killing the keeper lets the lease go as a dead holder's: the next waiter
 * gets it about a second later, not at the 30 s expiry. */
Test(acquire, a_killed_keeper_frees_the_lease)
{
    t_guard(60);
    char name[96], *out;
    t_name(name, sizeof name, "acqkill");
    cr_assert_eq(t_tool_run(&out, "acquire %s L --ttl 30s", name), 0);
    free(out);
    pid_t keeper = stat_of(name, "L").pid;
    kill(keeper, SIGKILL);
    uint64_t t0 = t_now();
    cr_assert_eq(t_tool_run(&out, "acquire %s L -w 25s", name), 0);
    cr_assert_str_eq(out, "2\n");
    free(out);
    cr_assert_lt(t_now() - t0, 10 * SEC);
    cr_assert_eq(t_tool_run(&out, "release %s L --token 2", name), 0);
    free(out);
    shl_unlink(name);
}

/* The keeper keeps the table open and nothing else of the script's: a
 * flock(1) lock the script held on fd 9 when it called acquire is free
 * once the script closes fd 9. */
Test(acquire, the_keeper_holds_no_descriptor_of_the_script)
{
    t_guard(60);
    char name[96], dir[96], cmd[1024], *out;
    t_name(name, sizeof name, "acqfd");
    t_mkdtemp(dir, sizeof dir, "acqfd");
    snprintf(cmd, sizeof cmd,
             "exec 9>%s/lock; flock 9; tok=$('%s' acquire %s L) || exit 9; exec 9>&-; "
             "flock -n %s/lock true || exit 8; '%s' release %s L --token $tok",
             dir, t_tool(), name, dir, t_tool(), name);
    int st = t_run(cmd, &out);
    cr_assert_eq(st, 0, "exit %d (8: the keeper holds the script's flock): %s", st, out);
    free(out);
    t_rm_rf(dir);
    shl_unlink(name);
}

/* A token that is not the holder's is refused, and changes nothing. */
Test(acquire, a_stale_token_is_refused)
{
    t_guard(60);
    char name[96], *out;
    t_name(name, sizeof name, "acqstale");
    cr_assert_eq(t_tool_run(&out, "acquire %s L --ttl 30s", name), 0);
    free(out);
    static const char *const calls[] = {"renew %s L --token 7", "release %s L --token 7",
                                        "write %s L --token 7 x", "read %s L --token 7",
                                        "release %s L --token 1 --owner someone-else"};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char fmt[128];
        snprintf(fmt, sizeof fmt, "%s 2>&1", calls[i]);
        int st = t_tool_run(&out, fmt, name);
        cr_assert_eq(st, 1, "%s: exit %d: %s", calls[i], st, out);
        cr_assert(strstr(out, "is not held with token"), "%s: %s", calls[i], out);
        free(out);
    }
    shl_lease_info in = stat_of(name, "L");
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_eq(in.value_len, 0, "a refused write wrote");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "printf 'from stdin' | '%s' write %s L --token 1", t_tool(), name);
    cr_assert_eq(t_run(cmd, NULL), 0);
    cr_assert_eq(t_tool_run(&out, "read %s L", name), 0);
    cr_assert_str_eq(out, "from stdin");
    free(out);
    cr_assert_eq(t_tool_run(&out, "release %s L --token 1", name), 0);
    free(out);
    shl_unlink(name);
}

/* shmlease(1)'s script example, as printed there, with the table renamed. */
static char *example_script(const char *table)
{
    const char *root = getenv("SHL_ROOT");
    char path[512];
    snprintf(path, sizeof path, "%s/man/shmlease.1", root ? root : ".");
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    static char script[4096];
    size_t n = 0;
    char line[512];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "is run by tests/test_tool_acquire.c")) {
            in = 1;
            continue;
        }
        if (!in)
            continue;
        if (strncmp(line, ".fi", 3) == 0)
            break;
        if (strncmp(line, "table=jobs", 10) == 0)
            snprintf(line, sizeof line, "table=%s\n", table);
        for (const char *c = line; *c && n + 2 < sizeof script; c++)
            if (!(c[0] == '\\' && c[1] == '-')) /* roff's \- is a plain - */
                script[n++] = *c;
    }
    fclose(f);
    script[n] = '\0';
    cr_assert(in && n > 0, "no script example in shmlease(1)");
    return script;
}

Test(acquire, the_manual_script_example_runs)
{
    t_guard(60);
    char name[96], dir[96], path[160], cmd[2048], *out;
    t_name(name, sizeof name, "acqman");
    t_mkdtemp(dir, sizeof dir, "acqman");
    snprintf(path, sizeof path, "%s/example.sh", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(example_script(name), f);
    fclose(f);
    /* Two copies at once: each holds the lease in turn, and both finish. */
    char tool_dir[512];
    snprintf(tool_dir, sizeof tool_dir, "%s", t_tool());
    *strrchr(tool_dir, '/') = '\0';
    snprintf(cmd, sizeof cmd,
             "export PATH='%s':$PATH; sh %s > %s/a.out 2>&1 & sh %s > %s/b.out 2>&1; "
             "b=$?; wait $!; a=$?; cat %s/a.out %s/b.out; exit $((a | b))",
             tool_dir, path, dir, path, dir, dir, dir);
    int st = t_run(cmd, &out);
    cr_assert_eq(st, 0, "the example failed (%d): %s", st, out);
    cr_assert_str_eq(out, "step 1 of 2step 1 of 2", "%s", out);
    free(out);
    shl_lease_info in = stat_of(name, "nightly");
    cr_assert_eq(in.state, SHL_STATE_FREE, "the trap did not release");
    cr_assert_eq(in.token, 2, "not two acquisitions, one after the other");
    t_rm_rf(dir);
    shl_unlink(name);
}
