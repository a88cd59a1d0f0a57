/*
 * tests/test_etcd_curl.c - libcurl, loaded on the first use of an etcd
 * table (etcd/curl_api.h): loaded then, and when it cannot be, the open is
 * SHL_ENOTSUP and the tool says that libcurl is what is missing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Port 1 of the loopback: refused at once, nothing of etcd is needed to
 * see the library loaded. */
Test(etcd_curl, loaded_at_the_first_etcd_open)
{
    t_guard(30);
    cr_assert(!t_mapped("libcurl"), "mapped before any etcd use");
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 300;
    shl_table *t;
    cr_assert_eq(shl_open("etcd://127.0.0.1:1/startup", &o, &t), SHL_EUNAVAIL);
    cr_assert(t_mapped("libcurl.so.4"), "libcurl is not mapped after an etcd open");
}

/* A libcurl.so.4 found first on LD_LIBRARY_PATH that has none of curl's
 * functions: what a missing or broken libcurl looks like to the loader. */
Test(etcd_curl, unloadable_libcurl_is_enotsup_with_a_message)
{
    t_guard(60);
    char dir[64], cmd[1024];
    t_mkdtemp(dir, sizeof dir, "shlcurl");
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s/libcurl.so.4' -x c /dev/null 2>&1", dir);
    char *out = NULL;
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    free(out);
    static const char *const cmds[] = {"ls", "create"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH='%s' '%s' %s etcd://127.0.0.1:1/startup 2>&1",
                 dir, t_tool(), cmds[i]);
        cr_assert_eq(t_run(cmd, &out), 3, "%s", out);
        cr_assert(strstr(out, "SHL_ENOTSUP"), "%s: %s", cmds[i], out);
        cr_assert(strstr(out, "libcurl.so.4 could not be loaded"), "%s: %s", cmds[i], out);
        free(out);
    }
    t_rm_rf(dir);
}
