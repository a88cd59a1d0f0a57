/*
 * tests/test_run_orphan.c - a SIGKILLed `shmlease run` frees its lease as a
 * dead flock(1) holder does: the table run creates reclaims a holder the
 * kernel proved dead, about a reclaim delay (1 s) after the death, not at
 * the lease's expiry (30 s here). A table created with --no-reclaim keeps
 * the old meaning: the dead holder's lease runs to its expiry.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* Starts "shmlease run TABLE L --ttl 30s --owner first -- sh -c ..." whose
 * command writes "up" to path and then sleeps; returns once it runs. */
static pid_t start_holder(const char *table, const char *path)
{
    char script[256];
    snprintf(script, sizeof script, "echo up > %s; exec sleep 60", path);
    const char *argv[] = {"shmlease", "run", table, "L",  "--ttl", "30s", "--owner",
                          "first",    "--",  "sh",  "-c", script,  NULL};
    return t_spawn_tool(argv);
}

static int file_up(void *p)
{
    char buf[8] = "";
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, sizeof buf, f) && strcmp(buf, "up\n") == 0;
    fclose(f);
    return ok;
}

/* Holds L through a real `shmlease run`, then SIGKILLs that run; returns
 * the time of the kill. */
static uint64_t kill_a_holding_run(const char *table)
{
    char path[160];
    snprintf(path, sizeof path, "/tmp/%s.up", table);
    unlink(path);
    pid_t run = start_holder(table, path);
    int up = t_until(file_up, path, 20 * SEC);
    unlink(path);
    if (!up)
        kill(run, SIGKILL);
    cr_assert(up, "the first run's command did not start");
    shl_table *t;
    shl_lease_info in;
    cr_assert_eq(shl_open(table, NULL, &t), SHL_OK);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD);
    cr_assert_str_eq(in.owner, "first");
    shl_close(t);
    kill(run, SIGKILL);
    uint64_t t0 = t_now();
    cr_assert_eq(t_wait(run), 128 + SIGKILL);
    return t0;
}

Test(run_orphan, a_killed_run_frees_its_lease_within_seconds)
{
    t_guard(60);
    char name[96];
    t_name(name, sizeof name, "orphrun"); /* run creates it, with the defaults */
    uint64_t t0 = kill_a_holding_run(name);
    char *out = NULL;
    int st = t_tool_run(&out, "run %s L --wait 25s -- sh -c 'echo $SHMLEASE_TOKEN'", name);
    uint64_t took = t_now() - t0;
    cr_assert_eq(st, 0, "the next run did not get the lease (exit %d)", st);
    cr_assert_str_eq(out, "2\n", "the next holder's token");
    free(out);
    /* The default delay is 1 s; the bound is generous for a loaded machine,
     * and still far from the 30 s expiry that held the lease before. */
    cr_log_info("next holder %.3f s after the kill of the holding run\n", (double)took / 1e9);
    fprintf(stderr, "run_orphan: next holder %.3f s after the kill\n", (double)took / 1e9);
    cr_assert_lt(took, 10 * SEC, "the next run got the lease %.1f s after the death",
                 (double)took / 1e9);
    shl_unlink(name);
}

/* Without a wait the first look sees the death and starts the delay; the
 * message says the holder is dead and when the lease frees. */
Test(run_orphan, a_run_without_wait_is_told_the_holder_is_dead)
{
    t_guard(60);
    char name[96];
    t_name(name, sizeof name, "orphmsg");
    kill_a_holding_run(name);
    char *out = NULL;
    int st = t_tool_run(&out, "run %s L -- true 2>&1", name);
    cr_assert_eq(st, 1, "exit %d: %s", st, out);
    cr_assert(strstr(out, "ORPHANED: holder pid "), "%s", out);
    cr_assert(strstr(out, " is dead"), "%s", out);
    free(out);
    shl_unlink(name);
}

/* The opt-out: a dead holder keeps its lease until its expiry. */
Test(run_orphan, no_reclaim_keeps_a_dead_holders_lease_to_expiry)
{
    t_guard(60);
    char name[96];
    t_name(name, sizeof name, "orphkeep");
    cr_assert_eq(t_tool_run(NULL, "create %s --no-reclaim >/dev/null", name), 0);
    kill_a_holding_run(name);
    char *out = NULL;
    int st = t_tool_run(&out, "run %s L --wait 3s -- echo ran 2>/dev/null", name);
    cr_assert_eq(st, 1, "the lease was taken from a dead holder (exit %d)", st);
    cr_assert_str_eq(out, "");
    free(out);
    shl_table *t;
    shl_lease_info in;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_ORPHANED);
    cr_assert_eq(in.token, 1);
    shl_close(t);
    shl_unlink(name);
}
