/*
 * tests/test_tool_basic.c - the shmlease tool's version, create and rm: exit
 * codes (tools/cli.h: 0 ok, 1 refused, 2 usage, 3 table) and messages on the
 * error paths.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define EXIT_USAGE 2
#define EXIT_TABLE 3

/* The tool exits with `want` and says `says` (when not NULL). */
static void expect(int want, const char *says, const char *args)
{
    char *out;
    int st = t_tool_run(&out, "%s 2>&1", args);
    cr_assert_eq(st, want, "shmlease %s: exit %d, want %d; said: %s", args, st, want, out);
    if (says)
        cr_assert(strstr(out, says), "shmlease %s: said '%s', not '%s'", args, out, says);
    free(out);
}

static int exists(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    return lstat(path, &st) == 0;
}

Test(tool, version_and_dispatch)
{
    expect(0, SHLEASE_VERSION_STRING, "version");
    expect(0, SHLEASE_VERSION_STRING, "--version");
    expect(0, "usage", "--help");
    expect(0, "usage", "help");
    expect(EXIT_USAGE, "usage", "");
    expect(EXIT_USAGE, "unknown command", "no-such-command");
}

Test(tool, create_usage_errors)
{
    char name[96], args[256];
    t_name(name, sizeof name, "tool");
    static const char *bad[] = {
        "--capacity 0",
        "--capacity -1",
        "--capacity 16777217",
        "--capacity x",
        "--capacity",
        "--value-size 1048577",
        "--value-size 1e3",
        "--mode 0644",
        "--mode 0666",
        "--bogus",
        "extra-name",
        "--no-reclaim --reclaim-delay 5ms",
        "--no-reclaim --reclaim-orphans",
        "--reclaim-orphans --reclaim-delay soon",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "create %s %s", name, bad[i]);
        expect(EXIT_USAGE, "shmlease create", args);
        cr_assert(!exists(name), "'%s' created the table", args);
    }
    expect(EXIT_USAGE, "missing NAME; see 'shmlease create --help'", "create");
    expect(0, "usage", "create --help");
    /* A bad table name is the caller's mistake too. */
    expect(EXIT_USAGE, "a table name is", "create a/b");
    expect(EXIT_USAGE, "not starting with", "create .hidden");
}

Test(tool, create_and_rm)
{
    char name[96], args[256];
    t_name(name, sizeof name, "tool");
    snprintf(args, sizeof args, "create %s --capacity 16 --value-size 64 --manual-clock", name);
    expect(0, "capacity 16, value size 64", args);
    cr_assert(exists(name));
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    cr_assert_eq(ti.capacity, 16);
    cr_assert_eq(ti.value_size, 64);
    cr_assert_eq(ti.clock, SHL_CLOCK_MANUAL);
    shl_close(t);

    /* create never opens an existing table. */
    snprintf(args, sizeof args, "create %s", name);
    expect(EXIT_TABLE, "SHL_EEXIST", args);

    snprintf(args, sizeof args, "rm %s", name);
    expect(0, NULL, args);
    cr_assert(!exists(name));
    expect(EXIT_TABLE, "SHL_ENOENT", args);
}

Test(tool, rm_errors)
{
    expect(EXIT_USAGE, "see 'shmlease rm --help'", "rm");
    expect(EXIT_USAGE, "see 'shmlease rm --help'", "rm a b");
    expect(0, "usage", "rm --help");
    expect(EXIT_USAGE, "a table name is", "rm a/b");
    expect(EXIT_USAGE, "a table name is", "rm ''");

    /* Not a table: a directory under the name is left alone. */
    char name[96], path[160], args[256];
    t_name(name, sizeof name, "tooldir");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(args, sizeof args, "rm %s", name);
    expect(EXIT_TABLE, "SHL_EPERM", args);
    snprintf(args, sizeof args, "create %s", name);
    expect(EXIT_TABLE, "SHL_EPERM", args);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(rmdir(path), 0);
}
