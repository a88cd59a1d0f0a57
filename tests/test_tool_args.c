/*
 * tests/test_tool_args.c - the shmlease tool's arguments: durations as in
 * timeout(1), decimal numbers, "--" ending the options, names checked with
 * their rule, every option checked before anything is acquired or created,
 * one exit code per kind of error in every subcommand, and usage errors
 * naming the argument at fault.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE   2
#define EXIT_TABLE   3

/* shmlease ARGS exits with `want` and says each of the NULL-ended words. */
static void expect(int want, const char *args, ...)
{
    char *out;
    int st = t_tool_say(&out, "%s", args);
    cr_assert_eq(st, want, "shmlease %s: exit %d, want %d; said: %s", args, st, want, out);
    va_list ap;
    va_start(ap, args);
    for (const char *w; (w = va_arg(ap, const char *));)
        cr_assert(strstr(out, w), "shmlease %s: said '%s', not '%s'", args, out, w);
    va_end(ap);
    free(out);
}

/* shmlease FMT(table) is a usage error and says `says`. */
struct usage_case {
    const char *fmt, *says;
};

static void usage_cases(const char *table, const struct usage_case *c, size_t n)
{
    char args[512];
    for (size_t i = 0; i < n; i++) {
        snprintf(args, sizeof args, c[i].fmt, table);
        expect(EXIT_USAGE, args, c[i].says, NULL);
    }
}

static int table_exists(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    return lstat(path, &st) == 0;
}

/* Was `lease` ever acquired in t? */
static int ever_acquired(shl_table *t, const char *lease)
{
    shl_lease_info in;
    return shl_stat(t, lease, &in) == SHL_OK && in.token != 0;
}

static const char *const bad_durations[] = {
    "nan",     "inf",  "-inf",          "-5",       "+5",
    "0",       "0s",   "0.0000000001s", "1e3",      "0x10",
    "5x",      "",     "1.5.5",         "s",        "99999999999999999999",
    "106752d", "292y", "NaNs",          "infinity",
};

Test(cli, bad_durations_are_refused_naming_the_option_and_the_rule)
{
    t_guard(120);
    char name[96], args[512];
    shl_table *t = t_create(t_name(name, sizeof name, "dur"), 4, 16, SHL_CLOCK_MONOTONIC);
    static const char *const run_opts[] = {"--ttl", "--wait", "--margin", "--grace", "--max-hold"};
    for (size_t i = 0; i < sizeof bad_durations / sizeof bad_durations[0]; i++) {
        const char *d = bad_durations[i];
        for (size_t o = 0; o < sizeof run_opts / sizeof run_opts[0]; o++) {
            /* --wait also takes 0 (do not wait) and inf (no bound), as flock -w */
            if (strcmp(run_opts[o], "--wait") == 0 &&
                (strcmp(d, "0") == 0 || strcmp(d, "inf") == 0 || strcmp(d, "infinity") == 0))
                continue;
            snprintf(args, sizeof args, "run %s L %s '%s' -- true", name, run_opts[o], d);
            expect(EXIT_USAGE, args, run_opts[o], "a duration is", NULL);
        }
        /* watch would hang or spin on these: it must refuse them up front. */
        snprintf(args, sizeof args, "watch %s --count 1 --interval '%s'", name, d);
        expect(EXIT_USAGE, args, "--interval", "a duration is", NULL);
        char other[128];
        snprintf(args, sizeof args, "create %s-%zu --reclaim-orphans --reclaim-delay '%s'",
                 t_name(other, sizeof other, "dur"), i, d);
        expect(EXIT_USAGE, args, "--reclaim-delay", "a duration is", NULL);
    }
    cr_assert(!ever_acquired(t, "L"), "a refused duration acquired the lease");
    shl_close(t);
    shl_unlink(name);
}

/* The units, through a value the tool stores where it can be read back. */
Test(cli, durations_follow_timeout_units)
{
    static const struct {
        const char *arg;
        uint32_t ms;
    } cases[] = {
        {"2", 2000},     {"1.5", 1500},     {".25", 250},     {"2s", 2000},
        {"250ms", 250},  {"500000us", 500}, {"3000000ns", 3}, {"1.5m", 90000},
        {"1h", 3600000}, {"1d", 86400000},  {"0.001s", 1},    {"010", 10000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[96], args[256];
        t_name(name, sizeof name, "units");
        snprintf(args, sizeof args, "create %s --reclaim-orphans --reclaim-delay %s", name,
                 cases[i].arg);
        expect(0, args, NULL);
        shl_table *t;
        shl_table_info ti;
        cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
        cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
        cr_assert_eq(ti.reclaim_delay_ms, cases[i].ms, "%s: %u ms, want %u", cases[i].arg,
                     ti.reclaim_delay_ms, cases[i].ms);
        shl_close(t);
        shl_unlink(name);
    }
}

/* A bare --ttl is seconds: the lease the command runs under has about 5 s. */
Test(cli, bare_ttl_is_seconds)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "ttl"), 4, 16, SHL_CLOCK_MONOTONIC);
    char *out;
    int st = t_tool_say(&out, "run %s L --ttl 5 -- '%s' dump %s L --json", name, t_tool(), name);
    cr_assert_eq(st, 0, "%s", out);
    const char *p = strstr(out, "\"remaining_ns\": ");
    cr_assert(p, "%s", out);
    unsigned long long left = strtoull(p + 16, NULL, 10);
    cr_assert(left > 3 * SEC && left <= 5 * SEC, "remaining %llu ns under --ttl 5", left);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

/* run checks what the renewer would refuse before it acquires. */
Test(cli, run_validates_everything_before_acquiring)
{
    static const struct usage_case cases[] = {
        {"run %s L --ttl 10s --margin 1s --max-hold 500ms -- true",
         "--max-hold 500.0ms must be longer than the margin 1.000s"},
        /* the default margin is ttl/10 */
        {"run %s L --ttl 10s --max-hold 1s -- true", "must be longer than the margin 1.000s"},
        {"run %s L --ttl 3s --margin 2500ms -- true", "--margin 2.500s is too long"},
        {"run %s L --owner '' -- true", "an owner is"},
    };
    char name[96], args[512];
    shl_table *t = t_create(t_name(name, sizeof name, "pre"), 4, 16, SHL_CLOCK_MONOTONIC);
    usage_cases(name, cases, sizeof cases / sizeof cases[0]);
    cr_assert(!ever_acquired(t, "L"), "the lease was acquired before the options were checked");
    shl_close(t);
    shl_unlink(name);

    /* A manual-clock table cannot have a renewer: refused before acquiring. */
    t = t_create(t_name(name, sizeof name, "prem"), 4, 16, SHL_CLOCK_MANUAL);
    snprintf(args, sizeof args, "run %s L -- true", name);
    expect(EXIT_USAGE, args, "manual clock", NULL);
    cr_assert(!ever_acquired(t, "L"), "acquired on a manual-clock table");
    shl_close(t);
    shl_unlink(name);
}

Test(cli, numbers_are_decimal)
{
    char name[96], args[256];
    t_name(name, sizeof name, "dec");
    snprintf(args, sizeof args, "create %s --capacity 010 --value-size 0010", name);
    expect(0, args, "capacity 10, value size 10", NULL);
    shl_unlink(name);
    static const char *const bad[] = {"0x10", "1e2", "+8", " 8", "8 ", "-0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "create %s --capacity '%s'", name, bad[i]);
        expect(EXIT_USAGE, args, "--capacity", NULL);
        cr_assert(!table_exists(name));
    }
}

/* A lease whose name starts with '-' can be named after "--". */
Test(cli, double_dash_ends_the_options)
{
    char name[96], args[256];
    shl_table *t = t_create(t_name(name, sizeof name, "dash"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "-x", "me", 60 * SEC, &tok), SHL_OK);
    snprintf(args, sizeof args, "dump %s -x", name);
    expect(EXIT_USAGE, args, "unknown option '-x'", "--", NULL);
    snprintf(args, sizeof args, "dump %s -- -x", name);
    expect(0, args, "lease -x (slot", NULL);
    snprintf(args, sizeof args, "dump %s --json -- -x", name);
    expect(0, args, "\"name\": \"-x\"", NULL);
    snprintf(args, sizeof args, "revoke %s -- -x", name);
    expect(0, args, "revoked -x", NULL);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "-x", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED);
    /* After "--" an option is a name, not an option. */
    snprintf(args, sizeof args, "dump %s -- --json", name);
    expect(EXIT_REFUSED, args, "lease '--json'", NULL);
    shl_close(t);
    shl_unlink(name);
}

Test(cli, invalid_names_state_the_rule)
{
    static const struct usage_case cases[] = {
        {"run %s 'a b' -- true", "invalid lease name 'a b': a lease name is 1 to 63 printable "
                                 "ASCII characters, without spaces"},
        {"revoke %s \"$(printf 'a\\033b')\"", "invalid lease name 'a\\x1bb': a lease name is"},
        {"dump %s 0123456789012345678901234567890123456789012345678901234567890123",
         "a lease name is 1 to 63"},
        {"run %s L --owner \"$(printf 'a\\tb')\" -- true",
         "invalid owner 'a\\x09b': an owner is 1 to 63 printable ASCII characters (spaces "
         "allowed)"},
    };
    char name[96], args[256];
    shl_table *t = t_create(t_name(name, sizeof name, "names"), 4, 16, SHL_CLOCK_MONOTONIC);
    usage_cases(name, cases, sizeof cases / sizeof cases[0]);
    cr_assert(!ever_acquired(t, "L"));
    static const char *const cmds[] = {"ls", "dump", "check", "repair", "watch", "rm", "create"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(args, sizeof args, "%s a/b", cmds[i]);
        expect(EXIT_USAGE, args, "invalid table name 'a/b'", "A-Z a-z 0-9 . _ -", NULL);
    }
    expect(EXIT_USAGE, "revoke a/b L", "invalid table name", NULL);
    expect(EXIT_USAGE, "run .x L -- true", "not starting with '.'", NULL);
    shl_close(t);
    shl_unlink(name);
}

/* Each kind of error has one exit code, whatever the subcommand. */
Test(cli, one_exit_code_per_kind_of_error)
{
    char missing[96], args[256];
    t_name(missing, sizeof missing, "none");
    /* "%s" is the table; an option may be added at the end of each. */
    static const char *const readers[] = {"ls %s",     "dump %s",     "dump %s L", "check %s",
                                          "repair %s", "revoke %s L", "watch %s",  "rm %s"};
    static const char *const all[] = {"ls %s",     "dump %s",     "dump %s L",       "check %s",
                                      "repair %s", "revoke %s L", "watch %s",        "rm %s",
                                      "create %s", "run %s L",    "dump %s L --json"};
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        snprintf(args, sizeof args, readers[i], missing);
        expect(EXIT_TABLE, args, missing, NULL); /* no such table: 3 */
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char fmt[64];
        int run = strncmp(all[i], "run", 3) == 0;
        snprintf(fmt, sizeof fmt, "%s --frobnicate%s", all[i], run ? " -- true" : "");
        snprintf(args, sizeof args, fmt, missing);
        expect(EXIT_USAGE, args, "unknown option '--frobnicate'", NULL); /* bad option: 2 */
        snprintf(fmt, sizeof fmt, "%s%s", all[i], run ? " -- true" : "");
        snprintf(args, sizeof args, fmt, "bad/name");
        expect(EXIT_USAGE, args, "invalid table name", NULL); /* bad name: 2 */
    }
    cr_assert(!table_exists(missing));
}

/* A usage error says which argument is wrong or missing. */
Test(cli, usage_errors_name_the_argument)
{
    static const struct usage_case cases[] = {
        {"ls", "missing NAME"},
        {"revoke %s", "missing LEASE"},
        {"ls %s extra", "unexpected argument 'extra'"},
        {"create %s --capacity", "--capacity needs a value"},
        {"watch %s --interval", "--interval needs a value"},
        {"watch %s --count 0", "--count"},
        {"run %s L", "missing -- COMMAND"},
        {"run %s L --", "missing COMMAND"},
        {"run %s L extra -- true", "unexpected argument 'extra'"},
        {"rm %s --force extra", "unexpected argument 'extra'"},
    };
    char name[96];
    t_name(name, sizeof name, "usage");
    usage_cases(name, cases, sizeof cases / sizeof cases[0]);
    cr_assert(!table_exists(name));
}
