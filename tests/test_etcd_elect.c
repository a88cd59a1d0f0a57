/*
 * tests/test_etcd_elect.c - shmlease elect and observe on a real etcd
 * table: the two-host example (examples/leader_etcd.sh), two processes
 * standing in for two hosts. Host A's shmlease elect is SIGKILLed while it
 * leads; host B leads once A's term runs out, with a higher token, and the
 * observer printed both leaders in token order with their proclaimed
 * addresses (the script checks all three and says "ok").
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;

Test(etcd_elect, a_killed_leader_hands_over_to_the_other_host)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, 1, 0), 0, "%s", CL.err);
    char url[256], cmd[1024], *out = NULL;
    etcd_cluster_url(&CL, "elect", url, sizeof url);
    const char *root = getenv("SHL_ROOT");
    snprintf(cmd, sizeof cmd, "SHMLEASE='%s' sh '%s/examples/leader_etcd.sh' '%s' '%s' 2>&1",
             t_tool(), root ? root : ".", url, url);
    int rc = t_run(cmd, &out);
    etcd_cluster_stop(&CL);
    cr_assert_eq(rc, 0, "leader_etcd.sh failed (%d):\n%s", rc, out);
    cr_assert(strstr(out, "ok: host-b took over from host-a (token 1, then 2)"), "%s", out);
    cr_assert(strstr(out, "\"id\": \"host-a\", \"token\": 1, ") &&
                  strstr(out, "\"value\": \"host-a:8080\"}"),
              "%s", out);
    cr_assert(strstr(out, "\"id\": \"host-b\", \"token\": 2, ") &&
                  strstr(out, "\"value\": \"host-b:8080\"}"),
              "%s", out);
    free(out);
}
