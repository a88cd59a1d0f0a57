/*
 * tests/test_place_tool.c - the tool on tables at a path: end to end on a
 * tmpfs mounted here, the warning for a table on a disk, the refusal of a
 * directory others may write, and create's sizes and space warning.
 */
#include <criterion/criterion.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common.h"
#include "place_util.h"

static char dir[128];

static void mounted(void)
{
    place_tmpfs(dir, sizeof dir, "4m");
}

static void cleanup(void)
{
    place_cleanup(dir);
}

Test(place_tool, path_table_end_to_end, .init = mounted, .fini = cleanup)
{
    char path[256], *out;
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    cr_assert_eq(t_tool_run(&out, "create %s --capacity 4 --value-size 16 2>&1", path), 0, "%s",
                 out);
    cr_assert(strstr(out, "created table"), "%s", out);
    cr_assert_null(strstr(out, "warning"), "a tmpfs table gets no warning: %s", out);
    free(out);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode));

    /* run holds the lease at the path; a second run meanwhile is refused. */
    cr_assert_eq(
        t_tool_run(&out,
                   "run %s nightly -- sh -c 'echo token=$SHMLEASE_TOKEN table=$SHMLEASE_TABLE; "
                   "'\\''%s'\\'' run %s nightly -- true; echo second=$?' 2>&1",
                   path, t_tool(), path),
        0, "%s", out);
    char want[320];
    snprintf(want, sizeof want, "token=1 table=%s", path);
    cr_assert(strstr(out, want), "%s", out);
    cr_assert(strstr(out, "second=1"), "the lease was held at the path: %s", out);
    free(out);
    /* Each subcommand on the path: its exit status and a word its output has. */
    static const struct {
        const char *args, *has;
    } cmds[] = {
        {"run %s nightly -- sh -c 'echo token=$SHMLEASE_TOKEN'", "token=2"},
        {"ls %s", "nightly"},
        {"check %s", ""},
        {"dump %s --json", "nightly"},
        {"watch %s --count 2 --interval 1ms", "nightly"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, cmds[i].args, path);
        cr_assert_eq(t_tool_run(&out, "%s", args), 0, "%s: %s", args, out);
        cr_assert(strstr(out, cmds[i].has), "%s: %s", args, out);
        free(out);
    }
    cr_assert_eq(t_tool_run(NULL, "rm %s", path), 0);
    cr_assert_eq(access(path, F_OK), -1);
    cr_assert_eq(t_tool_run(NULL, "ls %s 2>/dev/null", path), 3);
}

Test(place_tool, directory_others_may_write_is_refused_and_explained, .init = mounted,
     .fini = cleanup)
{
    cr_assert_eq(chmod(dir, 0777), 0);
    char path[256], *out;
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    cr_assert_eq(t_tool_run(&out, "create %s 2>&1", path), 3, "%s", out);
    cr_assert(strstr(out, "SHL_EPERM"), "%s", out);
    cr_assert(strstr(out, "sticky bit"), "the message says why: %s", out);
    free(out);
    cr_assert_eq(access(path, F_OK), -1);
    cr_assert_eq(chmod(dir, 01777), 0);
    cr_assert_eq(t_tool_run(NULL, "create %s --capacity 4 >/dev/null 2>&1", path), 0);
}

/* A directory on a file system that is not tmpfs, or "" when there is none. */
static void disk_dir(char *d, size_t cap)
{
    const char *bases[] = {"/var/tmp", getenv("SHL_BUILD"), "build"};
    d[0] = 0;
    for (size_t i = 0; i < sizeof bases / sizeof bases[0] && !d[0]; i++) {
        struct statfs fs;
        if (bases[i] && statfs(bases[i], &fs) == 0 && fs.f_type != TMPFS_MAGIC) {
            snprintf(d, cap, "%s/shlplace-XXXXXX", bases[i]);
            cr_assert(mkdtemp(d), "mkdtemp %s", d);
        }
    }
}

Test(place_tool, table_on_a_disk_is_warned_about)
{
    char d[256];
    disk_dir(d, sizeof d);
    if (!d[0])
        cr_skip_test("no file system other than tmpfs here");
    char path[300], *cre, *ls, *run;
    snprintf(path, sizeof path, "%s/disk.shl", d);
    int c = t_tool_run(&cre, "create %s --capacity 4 --value-size 0 2>&1", path);
    int l = t_tool_run(&ls, "ls %s 2>&1", path);
    int r = t_tool_run(&run, "run %s L -- true 2>&1", path);
    t_tool_run(NULL, "rm %s", path);
    rmdir(d);
    cr_assert_eq(c, 0, "%s", cre);
    cr_assert_eq(l, 0, "%s", ls);
    cr_assert_eq(r, 0, "%s", run);
    cr_assert(strstr(cre, "warning: table") && strstr(cre, "not tmpfs"), "%s", cre);
    cr_assert(strstr(ls, "warning: table") && strstr(ls, "not tmpfs"), "%s", ls);
    cr_assert(strstr(run, "warning: table") && strstr(run, "not tmpfs"), "%s", run);
    free(cre);
    free(ls);
    free(run);
}

/* "<x> <unit> (<n> bytes)" in create's line: the human size agrees with n. */
static void human_size_agrees(const char *out)
{
    const char *p = strstr(out, "clock, ");
    cr_assert(p, "%s", out);
    double v;
    char unit[8];
    unsigned long long n;
    cr_assert_eq(sscanf(p, "clock, %lf %7s (%llu bytes)", &v, unit, &n), 3, "%s", out);
    double scale = strcmp(unit, "KiB") == 0 ? 1024.0 : strcmp(unit, "MiB") == 0 ? 1048576.0 : 0;
    cr_assert(scale > 0, "unit %s in %s", unit, out);
    double exact = (double)n / scale;
    cr_assert(v > exact - 0.051 * (exact < 10 ? 1 : 10) &&
                  v < exact + 0.051 * (exact < 10 ? 1 : 10),
              "%.1f %s for %llu bytes", v, unit, n);
}

/* The number at *p written with thousands commas ("6,344"); *p moves past it. */
static unsigned long long count_at(const char **p)
{
    unsigned long long n = 0;
    for (; (**p >= '0' && **p <= '9') || **p == ','; (*p)++)
        if (**p != ',')
            n = n * 10 + (unsigned)(**p - '0');
    return n;
}

/* "N B per lease (M B of values)" in create's line: N is the file's size
 * over the capacity, M `values`. */
static void per_lease_agrees(const char *out, const char *path, unsigned capacity,
                             unsigned long long values_want)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    const char *p = strstr(out, "bytes), ");
    cr_assert(p, "%s", out);
    p += strlen("bytes), ");
    unsigned long long per = count_at(&p);
    cr_assert(strncmp(p, " B per lease (", 14) == 0, "%s", out);
    p += 14;
    unsigned long long values = count_at(&p);
    cr_assert(strncmp(p, " B of values)", 13) == 0, "%s", out);
    unsigned long long want = ((unsigned long long)st.st_size + capacity / 2) / capacity;
    cr_assert_eq(per, want, "%llu B per lease printed, the file has %lld bytes for %u: %s", per,
                 (long long)st.st_size, capacity, out);
    cr_assert_eq(values, values_want, "%s", out);
}

Test(place_tool, create_prints_what_each_lease_costs, .init = mounted, .fini = cleanup)
{
    /* A lease's values: its own buffer (a 16-byte header, the value rounded
     * up to 8 bytes) and its share of the spares (by default a sixteenth of
     * the capacity, at least 64, at most the capacity): 16 + 8 x 16 / 8;
     * 80 + 64 x 80 / 100, rounded; 272 + 64 x 272 / 256; 1016 + 3 x 1016 / 3. */
    static const struct {
        unsigned capacity, value_size;
        unsigned long long values;
    } c[] = {{8, 0, 32}, {100, 64, 131}, {256, 256, 340}, {3, 1000, 2032}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char path[256], *out;
        snprintf(path, sizeof path, "%s/cost%zu.shl", dir, i);
        cr_assert_eq(t_tool_run(&out, "create %s --capacity %u --value-size %u 2>&1", path,
                                c[i].capacity, c[i].value_size),
                     0, "%s", out);
        per_lease_agrees(out, path, c[i].capacity, c[i].values);
        free(out);
        unlink(path);
    }
}

Test(place_tool, create_prints_human_sizes_and_warns_over_a_quarter, .init = mounted,
     .fini = cleanup)
{
    char small[256], big[256], *out;
    snprintf(small, sizeof small, "%s/small.shl", dir);
    snprintf(big, sizeof big, "%s/big.shl", dir);
    /* A few KiB of a 4 MiB tmpfs: no warning. */
    cr_assert_eq(t_tool_run(&out, "create %s --capacity 8 --value-size 0 2>&1", small), 0, "%s",
                 out);
    cr_assert(strstr(out, " KiB ("), "%s", out);
    human_size_agrees(out);
    cr_assert_null(strstr(out, "warning"), "%s", out);
    free(out);
    /* About 1.4 MiB of it: over a quarter, warned. */
    cr_assert_eq(t_tool_run(&out, "create %s --capacity 700 --value-size 256 2>&1", big), 0, "%s",
                 out);
    cr_assert(strstr(out, " MiB ("), "%s", out);
    human_size_agrees(out);
    cr_assert(strstr(out, "warning: table") && strstr(out, "over a quarter"), "%s", out);
    free(out);
}
