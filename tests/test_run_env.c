/*
 * tests/test_run_env.c - what shmlease run hands to its command: the
 * lease's token and names, and the rest of its environment, but none of
 * our secrets (the etcd password, a proxy URL that may carry a password).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

Test(run_env, secrets_stay_home)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "runenv"), 4, 16, SHL_CLOCK_MONOTONIC);
    setenv("SHMLEASE_ETCD_PASSWORD", "pw-never-passed-on", 1);
    setenv("SHMLEASE_ETCD_PROXY", "https://u:proxy-pw-never-passed-on@127.0.0.1:1", 1);
    setenv("SHMLEASE_ETCD_USER", "bob", 1);
    setenv("SHMLEASE_ETCD_CACERT", "/some/ca.pem", 1);
    char *out;
    int st = t_tool_run(&out, "run %s job --owner me -- env", name);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert_null(strstr(out, "never-passed-on"), "a secret reached the command:\n%s", out);
    cr_assert_null(strstr(out, "SHMLEASE_ETCD_PASSWORD="), "%s", out);
    cr_assert_null(strstr(out, "SHMLEASE_ETCD_PROXY="), "%s", out);
    /* The token, the names and the rest stay. */
    cr_assert_not_null(strstr(out, "SHMLEASE_TOKEN=1\n"), "%s", out);
    cr_assert_not_null(strstr(out, "SHMLEASE_OWNER=me\n"), "%s", out);
    cr_assert_not_null(strstr(out, "SHMLEASE_ETCD_USER=bob\n"), "%s", out);
    cr_assert_not_null(strstr(out, "SHMLEASE_ETCD_CACERT=/some/ca.pem\n"), "%s", out);
    cr_assert_not_null(strstr(out, "PATH="), "%s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}
