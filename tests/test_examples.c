/*
 * tests/test_examples.c - the example programs run, and say "ok".
 *
 * They are run as separate programs, from the build directory (make test
 * sets SHL_EXAMPLES, default build/examples), exactly as a user would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *ex_dir(void)
{
    const char *d = getenv("SHL_EXAMPLES");
    return d ? d : "build/examples";
}

/* Runs `prog args`, returns its exit status; *out gets its output. */
static int run_example(const char *prog, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 120 %s/%s %s 2>&1", ex_dir(), prog, args);
    return t_run(cmd, out);
}

Test(examples, leader_election)
{
    char name[96], *out = NULL;
    t_name(name, sizeof name, "exleader");
    int rc = run_example("leader", name, &out);
    cr_assert_eq(rc, 0, "leader failed:\n%s", out);
    cr_assert(strstr(out, "ok: 4 terms, last token 4"), "%s", out);
    cr_assert(strstr(out, "(previous: none)"), "%s", out);
    cr_assert(strstr(out, "sees"), "followers observed a leader:\n%s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT, "the example removed its table");
}

Test(examples, fenced_writer_refuses_late_write_across_recreation)
{
    char name[96], dir[] = "/tmp/shlex-XXXXXX", args[400], *out = NULL;
    cr_assert(mkdtemp(dir));
    t_name(name, sizeof name, "exfence");
    snprintf(args, sizeof args, "%s %s/resource %s/tokens", name, dir, dir);
    for (int run = 0; run < 2; run++) {
        int rc = run_example("fenced_writer", args, &out);
        cr_assert_eq(rc, 0, "run %d failed:\n%s", run, out);
        cr_assert(strstr(out, "late write refused by the fence"), "%s", out);
        cr_assert(strstr(out, "ok: file holds \"B:"), "%s", out);
        free(out);
    }
    /* The same file after a re-creation without the state file: refused. */
    snprintf(args, sizeof args, "%s %s/resource", name, dir);
    cr_assert_eq(run_example("fenced_writer", args, &out), 1, "%s", out);
    cr_assert(strstr(out, "older than one the fence has already admitted"), "%s", out);
    free(out);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    shl_unlink(name);
}

Test(examples, counter_exact_under_kills)
{
    char name[96], args[200], *out = NULL;
    t_name(name, sizeof name, "excounter");
    snprintf(args, sizeof args, "%s 6 2000 2", name);
    int rc = run_example("counter", args, &out);
    cr_assert_eq(rc, 0, "counter failed:\n%s", out);
    cr_assert(strstr(out, "2 worker(s) killed"), "kills happened:\n%s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT);
}
