/*
 * tests/test_etcd_stress.c - `shmlease stress` on an etcd table: a campaign
 * on a named table of a throwaway member passes, with the evidence read from
 * etcd's history and what cannot apply there said; options that have no
 * meaning on etcd (or only there) are refused before anything runs. (The campaign under
 * member chaos, and the deliberate bugs of etcd's enforcement it catches,
 * run in `make stress-selftest`.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "etcd_cluster.h"

static unsigned long long jnum(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    cr_assert(p, "no %s in: %s", key, json);
    return strtoull(p + strlen(pat), NULL, 10);
}

Test(etcd_stress, campaign_on_a_named_table_passes_and_says_what_is_left_out)
{
    t_guard(120);
    struct etcd_cluster cl;
    cr_assert_eq(etcd_cluster_start(&cl, 1, 0), 0, "%s", cl.err);
    char url[256], name[64];
    etcd_cluster_url(&cl, t_name(name, sizeof name, "stress"), url, sizeof url);
    char *out = NULL;
    /* Pauses at 2 a second: the campaign fails unless a paused holder's
     * late write was refused, and at 1 a second a slow (sanitizer) build on
     * a busy machine drew only 3 pauses in 8 s, none of them ending in a
     * late write. */
    int rc = t_tool_run(&out,
                        "stress %s --seconds 8 --workers 3 --leases 2 --readers 1 --kill-rate 1 "
                        "--pause-rate 2 --revoke-rate 1 --admin-chaos --seed 7 --json",
                        url);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "\"pass\":true"), "%s", out);
    cr_assert_eq(jnum(out, "violations"), 0, "%s", out);
    cr_assert_eq(jnum(out, "errors") + jnum(out, "worker_failures"), 0, "%s", out);
    cr_assert(strstr(out, "\"table_checked\":true"), "%s", out);
    /* Renewals moved holders to new etcd leases (a changed ttl), and the
     * admin deleted holder records under their holders: none was told OK
     * after that. */
    cr_assert_gt(jnum(out, "ttl_renewals"), 0, "%s", out);
    cr_assert_gt(jnum(out, "admin_deletes"), 0, "%s", out);
    cr_assert_eq(jnum(out, "gone_accepted"), 0, "%s", out);
    /* Token records deleted beside values that carry tokens: refused
     * (SHL_ECORRUPT) meanwhile, never started over (no violation). */
    cr_assert_gt(jnum(out, "token_deletes"), 0, "%s", out);
    /* The log is etcd's history: every acknowledged write was found in it. */
    cr_assert_gt(jnum(out, "acked"), 0, "%s", out);
    cr_assert_geq(jnum(out, "records"), jnum(out, "acked"), "%s", out);
    cr_assert_eq(jnum(out, "lost"), 0, "%s", out);
    cr_assert_gt(jnum(out, "stale_refused_paused"), 0, "%s", out);
    cr_assert_eq(jnum(out, "repairs"), 0, "%s", out);
    cr_assert(strstr(out, "\"left_out\":[\"repair"), "%s", out);
    free(out);
    /* A named table is kept: the tool still finds it. */
    rc = t_tool_run(&out, "ls %s", url);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "stress-0"), "%s", out);
    free(out);
    etcd_cluster_stop(&cl);
}

Test(etcd_stress, options_without_meaning_on_etcd_are_usage_errors)
{
    t_guard(60);
    static const char *const bad[] = {
        "stress --member-chaos",                        /* no cluster of the tool's */
        "stress --admin-chaos",                         /* no etcd table */
        "stress --etcd-cluster 1 --repair-rate 1",      /* no segment to repair */
        "stress --etcd-cluster 1 --token-state /tmp/x", /* no floor file */
        "stress --etcd-cluster 1 --ttl-ms 500",         /* whole seconds */
        "stress --etcd-cluster 6",                      /* 1-5 members */
        "stress --etcd-cluster 1 etcd://127.0.0.1:1/t", /* its own table */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        int rc = t_tool_run(&out, "%s 2>&1", bad[i]);
        cr_assert_eq(rc, 2, "'%s': exit %d: %s", bad[i], rc, out);
        free(out);
    }
}
