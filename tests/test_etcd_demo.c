/*
 * tests/test_etcd_demo.c - make demo-etcd: the demo's story on a throwaway
 * three-member etcd cluster (shmlease-cluster), its leader killed half-way.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

Test(etcd_demo, story_goes_on_after_the_leader_dies)
{
    t_guard(120);
    char dir[512], cmd[2048];
    snprintf(dir, sizeof dir, "%s", t_tool());
    const char *bin = dirname(dir); /* the build's folder: demo, shmlease-cluster */
    snprintf(cmd, sizeof cmd,
             "%s/shmlease-cluster 3 -- %s/demo --table etcd://@ENDPOINTS@/demo --kill-leader "
             "--ls %s 2>&1",
             bin, bin, t_tool());
    char *output = NULL;
    int rc = t_run(cmd, &output);
    cr_assert_eq(rc, 0, "demo-etcd failed (%d):\n%s", rc, output);
    /* The leader died before token 3 was granted, and the story went on. */
    char *killed = strstr(output, "killed the leader m");
    cr_assert(killed && strstr(killed, "leads now"), "no leader was killed:\n%s", output);
    cr_assert(strstr(killed, "acquired ledger: token 3"), "%s", output);
    cr_assert(strstr(output, "with token 3: REFUSED by etcd (SHL_ELOST)"), "%s", output);
    cr_assert(strstr(output, "written with token 4: no stale write landed"), "%s", output);
    char *ls = strstr(output, "$ shmlease ls etcd://");
    cr_assert(ls && strstr(ls, "ledger") && strstr(ls, "FREE") && strstr(ls, " 4 "),
              "ls does not show ledger FREE at token 4:\n%s", output);
    cr_assert(strstr(output, "members stopped, directory removed"), "%s", output);
    free(output);
}
