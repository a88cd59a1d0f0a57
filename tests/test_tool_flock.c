/*
 * tests/test_tool_flock.c - shmlease for people who know flock(1): -n, -w
 * (with inf and 0), -E, -s, grouped as getopt(3) groups them ("-nE 75",
 * "-w5"); --opt=value in every subcommand; usage errors
 * on one line that says where the help is; a refusal that names the holder;
 * and the shell idiom (acquire, renew, read, write, release) run from
 * shmlease(1)'s own example, with real processes.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define EXIT_USAGE 2

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(flock, n_and_E_tell_busy_from_the_commands_own_status)
{
    t_guard(60);
    char name[96], want[128], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "flockE"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &tok), SHL_OK);
    int st = t_tool_say(&out, "run %s L -n -E 75 -- echo ran", name);
    cr_assert_eq(st, 75, "exit %d: %s", st, out);
    cr_assert(!strstr(out, "ran"), "the command ran: %s", out);
    snprintf(want, sizeof want, "lease 'L' is busy: held by 'holder' (pid %d, token 1), ",
             (int)getpid());
    cr_assert(strstr(out, want), "%s", out);
    cr_assert(strstr(out, "s left"), "%s", out);
    cr_assert_eq(lines(out), 1, "%s", out);
    free(out);
    st = t_tool_say(&out, "run %s L -w 300ms --conflict-exit-code=9 -- echo ran", name);
    cr_assert_eq(st, 9, "exit %d: %s", st, out);
    cr_assert(strstr(out, "timed out waiting for lease 'L': held by 'holder'"), "%s", out);
    free(out);
    /* Without -E a busy lease is 1, as before; the command's own 1 is its own. */
    cr_assert_eq(t_tool_say(&out, "run %s L -- true", name), 1);
    free(out);
    cr_assert_eq(t_tool_say(&out, "run %s M -E 75 -- sh -c 'exit 1'", name), 1);
    free(out);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    /* -w 0 is flock's "do not wait"; -s takes the lease shared. */
    cr_assert_eq(t_tool_say(&out, "run %s L -w 0 -s -- sh -c 'echo shared=$SHMLEASE_SHARED'", name),
                 0);
    cr_assert(strstr(out, "shared=1"), "%s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

static int one_waiter(void *p)
{
    shl_lease_info in;
    return shl_stat(p, "L", &in) == SHL_OK && in.waiters == 1;
}

/* Short options group as getopt(3) groups them, as flock(1) users write
 * them: flags together, and a value glued on or in the next word. */
Test(flock, short_options_group_as_getopt_groups_them)
{
    t_guard(60);
    char name[96], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "flockgrp"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &tok), SHL_OK);
    int st = t_tool_say(&out, "run %s L -nE 75 -- echo ran", name);
    cr_assert_eq(st, 75, "-nE 75: exit %d: %s", st, out);
    free(out);
    st = t_tool_say(&out, "run %s L -E75 -w300ms -- echo ran", name);
    cr_assert_eq(st, 75, "-E75 -w300ms: exit %d: %s", st, out);
    cr_assert(strstr(out, "timed out waiting for lease 'L'"), "%s", out);
    free(out);
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    st = t_tool_say(&out, "run %s L -sw5 -- sh -c 'echo shared=$SHMLEASE_SHARED'", name);
    cr_assert_eq(st, 0, "-sw5: exit %d: %s", st, out);
    cr_assert(strstr(out, "shared=1"), "%s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

Test(flock, wait_forever_waits_without_bound)
{
    t_guard(60);
    char name[96], path[160], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "flockinf"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &tok), SHL_OK);
    snprintf(path, sizeof path, "/tmp/%s.out", name);
    char script[256];
    snprintf(script, sizeof script, "echo ran $SHMLEASE_TOKEN > %s", path);
    const char *argv[] = {"shmlease", "run", name, "L",    "--wait=forever",
                          "--",       "sh",  "-c", script, NULL};
    pid_t run = t_spawn_tool(argv);
    cr_assert(t_until(one_waiter, t, 10 * SEC), "the run is not waiting");
    t_sleep_ns(300 * MS); /* still waiting, whatever the wait's default was */
    cr_assert(one_waiter(t));
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(run), 0);
    FILE *f = fopen(path, "r");
    char line[64] = "";
    cr_assert(f && fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    cr_assert_str_eq(line, "ran 2\n");
    /* "inf" is the same, and needs a lease to wait for: here a free one. */
    cr_assert_eq(t_tool_say(&out, "run %s L -w inf -- true", name), 0);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

/* Every subcommand takes --opt=value as --opt value; a flag takes none. */
Test(flock, opt_equals_value_everywhere)
{
    t_guard(60);
    char name[96], *out;
    t_name(name, sizeof name, "flockeq");
    cr_assert_eq(
        t_tool_say(&out, "create %s --capacity=4 --value-size=32 --reclaim-delay=2s", name), 0);
    cr_assert(strstr(out, "capacity 4, value size 32"), "%s", out);
    free(out);
    cr_assert_eq(
        t_tool_say(&out, "run %s L --ttl=2s --owner=me -- sh -c 'echo $SHMLEASE_OWNER'", name), 0);
    cr_assert_str_eq(out, "me\n");
    free(out);
    cr_assert_eq(t_tool_say(&out, "acquire %s L --ttl=5s --owner=scripted", name), 0);
    uint64_t tok = strtoull(out, NULL, 10);
    free(out);
    cr_assert_eq(tok, 2);
    cr_assert_eq(t_tool_say(&out, "write %s L --token=2 v", name), 0);
    free(out);
    cr_assert_eq(t_tool_say(&out, "renew %s L --token=2 --ttl=20s", name), 0);
    free(out);
    cr_assert_eq(t_tool_say(&out, "read %s L --token=2", name), 0);
    cr_assert_str_eq(out, "v");
    free(out);
    cr_assert_eq(t_tool_say(&out, "watch %s --count=1 --interval=10ms", name), 0);
    cr_assert(strstr(out, "scripted"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_say(&out, "release %s L --token=2", name), 0);
    free(out);
    cr_assert_eq(t_tool_say(&out, "stress --json=1"), EXIT_USAGE);
    cr_assert(strstr(out, "'--json=1'"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_say(&out, "dump %s --json=yes", name), EXIT_USAGE);
    cr_assert(strstr(out, "--json takes no value"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_say(&out, "rm %s --force", name), 0);
    free(out);
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
}

/* A usage error is one line that names the argument and where the help is,
 * not the whole help. */
Test(flock, usage_errors_are_one_line)
{
    static const char *const cmds[] = {
        "create %s --frob",        "ls %s --frob",        "dump %s --frob",
        "check %s --frob",         "repair %s --frob",    "revoke %s --frob",
        "watch %s --frob",         "rm %s --frob",        "doctor --frob",
        "run %s L --frob -- true", "acquire %s L --frob", "renew %s L --frob",
        "release %s L --frob",     "read %s L --frob",    "write %s L --frob",
    };
    char name[96], fmt[160], want[96], *out;
    t_name(name, sizeof name, "flockusage");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(fmt, sizeof fmt, cmds[i], name);
        int st = t_tool_say(&out, "%s", fmt);
        cr_assert_eq(st, EXIT_USAGE, "%s: exit %d: %s", fmt, st, out);
        char cmd[16];
        sscanf(fmt, "%15s", cmd);
        snprintf(want, sizeof want, "unknown option '--frob'");
        cr_assert(strstr(out, want), "%s: %s", fmt, out);
        snprintf(want, sizeof want, "; see 'shmlease %s --help'\n", cmd);
        cr_assert(strstr(out, want), "%s: %s", fmt, out);
        cr_assert_eq(lines(out), 1, "%s: not one line: %s", fmt, out);
        free(out);
    }
    static const struct {
        const char *fmt, *says;
    } more[] = {
        {"run %s L --ttl 5x -- true", "--ttl '5x': a duration is"},
        {"run %s L -n -w 3 -- true", "-n (fail at once) contradicts --wait"},
        {"run %s L -E 256 -- true", "an exit code is a decimal number from 0 to 255"},
        {"run %s L -nq -- true", "unknown option '-q' in '-nq'"},
        {"run %s L -nw -- true", "--wait '--': a duration is"},
        {"run %s L -nw3 -- true", "-n (fail at once) contradicts --wait"},
        {"run %s L -E", "--conflict-exit-code needs a value"},
        {"run %s L --", "missing COMMAND after --"},
        {"renew %s L", "missing --token N"},
        {"write %s L v", "missing --token N"},
        {"acquire %s", "missing LEASE"},
        {"create %s --capacity 0", "--capacity takes 1.."},
        {"watch %s --count 0", "--count takes a positive number"},
        {"ls", "missing NAME"},
        {"bogus", "unknown command 'bogus'; see 'shmlease --help'"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        snprintf(fmt, sizeof fmt, more[i].fmt, name);
        int st = t_tool_say(&out, "%s", fmt);
        cr_assert_eq(st, EXIT_USAGE, "%s: exit %d: %s", fmt, st, out);
        cr_assert(strstr(out, more[i].says), "%s: %s", fmt, out);
        cr_assert(strstr(out, "--help'\n"), "%s: %s", fmt, out);
        cr_assert_eq(lines(out), 1, "%s: not one line: %s", fmt, out);
        free(out);
    }
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT, "a usage error made the table");
}
