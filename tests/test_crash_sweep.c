/*
 * tests/test_crash_sweep.c - the crash sweep (tests/crash_sweep.c, built
 * beside the test tool): every API operation killed at each of its system
 * calls in turn, the table checked and a waiter and a new acquirer made to
 * go through after each kill. Its figures go to the test's log.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

Test(crash_sweep, every_operation_at_every_system_call)
{
    t_guard(600);
    const char *tool = getenv("SHL_TEST_TOOL");
    char dir[1024], cmd[1200];
    snprintf(dir, sizeof dir, "%s", tool ? tool : "build/test/shmlease");
    snprintf(cmd, sizeof cmd, "'%s/crash-sweep' 2>&1", dirname(dir));
    char *out = NULL;
    int rc = t_run(cmd, &out);
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "crash sweep failed (exit %d):\n%s", rc, out);
    cr_assert(strstr(out, " 0 invariant failures, 0 stuck waiters"), "%s", out);
    free(out);
}
