/*
 * tests/test_startup.c - what a program pays for the library at start: one
 * that uses shared-memory tables only never maps libcurl (the library loads
 * it at the first open of an etcd table, see etcd/curl_api.h), and the
 * shared library does not name it as a dependency.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int count_leases(void *arg, const shl_lease_detail *d)
{
    (void)d;
    ++*(int *)arg;
    return 0;
}

Test(startup, shared_memory_use_does_not_map_libcurl)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "startup"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "me", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "L", "me", tok, "v", 1), SHL_OK);
    char buf[16];
    size_t len;
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, NULL), SHL_OK);
    int n = 0;
    cr_assert_eq(shl_foreach(t, count_leases, &n), SHL_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(shl_release(t, "L", "me", tok), SHL_OK);
    cr_assert(t_mapped("libc.so"), "/proc/self/maps is read right");
    cr_assert(!t_mapped("libcurl"), "libcurl is mapped in a program using shared memory only");
    shl_close(t);
    shl_unlink(name);
}

/* The shared library (next to the tool under test) needs neither libcurl
 * nor anything of its chain: only what `readelf -d` lists as NEEDED. */
Test(startup, shared_library_does_not_need_libcurl)
{
    char dir[512], cmd[1024];
    snprintf(dir, sizeof dir, "%s", t_tool());
    snprintf(cmd, sizeof cmd, "readelf -d '%s/libshmlease.so' | grep NEEDED", dirname(dir));
    char *out = NULL;
    cr_assert_eq(t_run(cmd, &out), 0, "readelf: %s", out);
    cr_assert(strstr(out, "libc.so"), "%s", out);
    cr_assert(!strstr(out, "libcurl"), "libshmlease.so needs libcurl:\n%s", out);
    free(out);
}
