/*
 * tests/test_tool_detail.c - the tool tells why: a refused table names the
 * owner and mode it found (the library's shl_last_error()), and a script
 * that acquires a lease it already holds is told so, not only "busy".
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"

Test(tool_detail, refused_table_names_owner_and_mode)
{
    t_guard(60);
    char name[96], path[160], *out;
    t_name(name, sizeof name, "tooldetail");
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    cr_assert_eq(chmod(path, 0644), 0);
    int rc = t_tool_run(&out, "dump %s 2>&1", name);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(out, "mode 0644; this process is uid") != NULL, "output: %s", out);
    cr_assert(strstr(out, "accepts at most mode 0660") != NULL, "output: %s", out);
    free(out);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(tool_detail, busy_with_the_same_owner_is_already_held_by_you)
{
    t_guard(60);
    char name[96], *out;
    t_name(name, sizeof name, "toolself");
    cr_assert_eq(t_tool_run(&out, "acquire %s L --ttl 30s --owner script", name), 0);
    cr_assert_str_eq(out, "1\n");
    free(out);
    cr_assert_eq(t_tool_run(&out, "acquire %s L --ttl 30s --owner script -E 75 2>&1", name), 75);
    cr_assert(strstr(out, "lease 'L' is already held by you (owner 'script', token 1") != NULL,
              "output: %s", out);
    cr_assert(strstr(out, "--token 1") != NULL, "output: %s", out);
    free(out);
    /* Another owner is told who holds it, as before. */
    cr_assert_eq(t_tool_run(&out, "acquire %s L --owner other -E 75 2>&1", name), 75);
    cr_assert(strstr(out, "already held by you") == NULL, "output: %s", out);
    cr_assert(strstr(out, "held by 'script'") != NULL, "output: %s", out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "release %s L --token 1", name), 0);
    free(out);
    shl_unlink(name);
}
