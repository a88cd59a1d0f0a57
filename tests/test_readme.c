/*
 * tests/test_readme.c - the README's examples run as written: the C one
 * compiles, links and runs, the shell one runs with the tool under test (the
 * Python one: python/tests/test_readme.py); and its first block is the two
 * set-up commands.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "doc_blocks.h"

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

Test(readme, shell_example_runs_as_written)
{
    t_guard(60);
    char *page = t_doc_read("README.md");
    t_doc_block b[4];
    int n = t_doc_blocks(page, "### Shell", "sh", b, 4);
    cr_assert_eq(n, 1, "%d ```sh blocks under ### Shell", n);
    char name[128];
    t_name(name, sizeof name, "readme");
    char *code = t_doc_table(b[0].code, name), *out = NULL;
    cr_assert(strstr(code, name), "the example names no table \"jobs\":\n%s", b[0].code);
    int rc = t_doc_sh(code, &out);
    cr_assert_eq(rc, 0, "README.md:%d exits %d:\n%s\noutput:\n%s", b[0].line, rc, code, out);
    cr_assert(strstr(out, "nightly runs with token 1"), "the job did not run:\n%s", out);
    cr_assert(strstr(out, "FREE"), "ls does not show the lease FREE:\n%s", out);
    /* The lease across commands was released: a new acquire gets it. */
    char *again = NULL;
    cr_assert_eq(t_tool_run(&again, "acquire %s report -n --ttl 1s", name), 0, "%s", again);
    free(again);
    free(out);
    free(code);
    t_doc_free(b, n);
    free(page);
}

Test(readme, starts_with_the_two_commands)
{
    char *page = t_doc_read("README.md");
    t_doc_block b[1];
    int n = t_doc_blocks(page, NULL, "sh", b, 1);
    cr_assert_eq(n, 1);
    char *first = strstr(page, "```");
    cr_assert(first && strncmp(first, "```sh\n", 6) == 0, "the first block is not ```sh");
    cr_assert(strncmp(b[0].code, "make demo ", 10) == 0 && strstr(b[0].code, "\nmake test "),
              "the first block is not make demo, make test:\n%s", b[0].code);
    int lines = 0;
    for (const char *p = b[0].code; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 2, "the first block has %d commands, not 2:\n%s", lines, b[0].code);
    t_doc_free(b, n);
    free(page);
}
