/*
 * tests/test_readme.c - the README's C example compiles, links and runs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* The static library's private requirements (shmlease.pc's Requires.private). */
#if SHL_HAVE_ETCD
#define ETCD_LIBS "$(pkg-config --libs json-c) -ldl"
#else
#define ETCD_LIBS ""
#endif

static const char *root(void)
{
    const char *r = getenv("SHL_ROOT");
    return r ? r : ".";
}

/* The build directory under test (make's B=, build/ by default). */
static const char *build_dir(void)
{
    static char dir[1024];
    const char *b = getenv("SHL_BUILD");
    if (b)
        return b;
    snprintf(dir, sizeof dir, "%s/build", root());
    return dir;
}

Test(readme, c_example_compiles_and_runs)
{
    t_guard(60);
    char path[512], src[64], bin[64];
    snprintf(path, sizeof path, "%s/README.md", root());
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    snprintf(src, sizeof src, "/tmp/shl-readme-%d.c", (int)getpid());
    snprintf(bin, sizeof bin, "/tmp/shl-readme-%d", (int)getpid());
    FILE *out = fopen(src, "w");
    cr_assert(out);
    char line[1024];
    int in = 0, blocks = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (!in && strncmp(line, "```c", 4) == 0 && blocks == 0) {
            in = 1;
            continue;
        }
        if (in && strncmp(line, "```", 3) == 0) {
            in = 0;
            blocks++;
            continue;
        }
        if (in) {
            fputs(line, out);
            lines++;
        }
    }
    fclose(f);
    fclose(out);
    cr_assert_eq(blocks, 1, "no ```c block in the README");
    cr_assert_gt(lines, 10);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror -I%s/lib -o %s %s %s/libshmlease.a "
             "%s -lpthread 2>&1 && %s",
             root(), bin, src, build_dir(), ETCD_LIBS, bin);
    char *output = NULL;
    int rc = t_run(cmd, &output);
    cr_assert_eq(rc, 0, "README example failed (%d):\n%s", rc, output);
    cr_assert(strstr(output, "printing page 1 (token 1)"), "unexpected output:\n%s", output);
    free(output);
    unlink(src);
    unlink(bin);
}

Test(readme, demo_tells_its_story)
{
    t_guard(60);
    char cmd[2560];
    snprintf(cmd, sizeof cmd, "%s/demo --ls %s 2>&1", build_dir(), t_tool());
    char *output = NULL;
    int rc = t_run(cmd, &output);
    cr_assert_eq(rc, 0, "demo failed (%d):\n%s", rc, output);
    cr_assert(strstr(output, "REFUSED by the segment (SHL_ELOST)"), "%s", output);
    cr_assert(strstr(output, "no stale write landed"), "%s", output);
    char *ls = strstr(output, "$ shmlease ls ");
    cr_assert(ls, "the demo did not end with shmlease ls:\n%s", output);
    cr_assert(strstr(ls, "ledger") && strstr(ls, "FREE") && strstr(ls, " 4 "),
              "ls does not show ledger FREE at token 4:\n%s", ls);
    free(output);
}
