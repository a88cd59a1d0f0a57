/*
 * tests/test_etcd_election.c - leader election on an etcd table, with real
 * candidate processes and a real throwaway cluster: one leader at a time
 * (the intervals of tests/election.h), the next leader within the ttl of a
 * leader's kill -9, a stopped leader's term taken and its proclaim refused
 * by the cluster when it resumes, and observers in token order across a
 * kill of the cluster's raft leader; and six candidates under kills and
 * pauses, across a member's loss.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "election.h"
#include "etcd_cluster.h"

#define EL     "leader"
#define TTL    (2 * SEC) /* the cluster's shortest lease */
#define MARGIN (4 * SEC) /* etcd's expiry sweep, the watch, a loaded 2-core host */

static struct etcd_cluster cl;
static char url[256];

static struct el_shared *setup(uint64_t work_ns, shl_table **t)
{
    *t = t_etcd_up(&cl, "el", 64, url, sizeof url);
    struct el_shared *sh = el_shared_new(url, EL);
    sh->ttl_ns = TTL;
    sh->work_ns = work_ns;
    sh->timeout_ms = 2000;
    return sh;
}

/* A three-member cluster; candidates that resign after 100 ms to hold_max_ns. */
static struct el_shared *setup3(uint64_t hold_max_ns, shl_table **t)
{
    cr_assert_eq(etcd_cluster_start(&cl, 3, 0), 0, "%s", cl.err);
    etcd_cluster_url(&cl, "el", url, sizeof url);
    shl_options o;
    shl_options_init(&o);
    o.value_size = 64;
    cr_assert_eq(shl_open(url, &o, t), SHL_OK);
    struct el_shared *sh = el_shared_new(url, EL);
    sh->ttl_ns = TTL;
    sh->work_ns = 20 * MS;
    sh->hold_min_ns = 100 * MS;
    sh->hold_max_ns = hold_max_ns;
    sh->timeout_ms = 2000;
    return sh;
}

/* What shl_election_leader() and the handle say on etcd, in one process. */
Test(etcd_election, leader_snapshot_and_arguments)
{
    shl_table *t = t_etcd_up(&cl, "el", 16, url, sizeof url);
    shl_leader l;
    char v[32] = {0}, big[17];
    memset(big, 'x', sizeof big);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "never used");
    shl_election *e;
    uint64_t tok, tok2;
    cr_assert_eq(shl_election_open(t, EL, "me", &e), SHL_OK);
    cr_expect_eq(shl_election_campaign(e, TTL, 0, big, 17, NULL, &tok), SHL_E2BIG,
                 "the table's value size is 16");
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT);
    cr_assert_eq(shl_election_campaign(e, TTL, 0, "hello", 5, NULL, &tok), SHL_OK);
    cr_expect_eq(shl_election_campaign(e, TTL, 0, "hello", 5, NULL, &tok2), SHL_EBUSY);
    cr_assert_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_OK);
    cr_expect_str_eq(l.id, "me");
    cr_expect_eq(l.token, tok);
    cr_expect_eq(l.proclaimed, 1);
    cr_expect_str_eq(v, "hello");
    cr_expect_eq(l.pid, 0, "etcd keeps no pid");
    cr_expect_eq(l.state, SHL_STATE_HELD);
    cr_expect_eq(shl_election_observe(t, EL, 0, 0, &l, v, sizeof v), SHL_OK);
    cr_expect_eq(l.token, tok);
    cr_expect_eq(shl_election_observe(t, EL, tok, 300 * MS, &l, v, sizeof v), SHL_ETIMEDOUT);
    cr_assert_eq(shl_election_proclaim(e, "there", 5), SHL_OK);
    cr_assert_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_OK);
    cr_expect_str_eq(v, "there");

    /* Another candidate waits its turn; resign hands over at once. */
    shl_election *f;
    cr_assert_eq(shl_election_open(t, EL, "next", &f), SHL_OK);
    cr_expect_eq(shl_election_campaign(f, TTL, 0, "n", 1, NULL, &tok2), SHL_ETIMEDOUT);
    cr_assert_eq(shl_election_resign(e), SHL_OK);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "resigned");
    cr_assert_eq(shl_election_campaign(f, TTL, 0, "n", 1, NULL, &tok2), SHL_OK);
    cr_expect_gt(tok2, tok);

    /* Revoked: no leader, and the cluster refuses the old leader's proclaim. */
    cr_assert_eq(shl_revoke(t, EL), SHL_OK);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "revoked");
    cr_expect_eq(shl_election_proclaim(f, "x", 1), SHL_ELOST);
    cr_expect_eq(shl_election_token(f), 0);
    cr_expect_eq(shl_election_resign(f), SHL_ELOST);

    /* A removed table: campaigns are refused (their transaction compares
     * the table's incarnation), reads find no leader, and observe waits,
     * as documented (etcd reads do not compare the incarnation). */
    cr_assert_eq(shl_election_campaign(f, TTL, 0, "n", 1, NULL, &tok2), SHL_OK);
    cr_assert_eq(shl_unlink(url), SHL_OK);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT);
    cr_expect_eq(shl_election_observe(t, EL, 0, 300 * MS, &l, v, sizeof v), SHL_ETIMEDOUT);
    cr_expect_eq(shl_election_resign(f), SHL_ELOST);
    cr_expect_eq(shl_election_campaign(e, TTL, 0, "m", 1, NULL, &tok2), SHL_EREMOVED);
    shl_election_close(e);
    shl_election_close(f);
    t_etcd_down(&cl, t, 0);
}

/* Three candidates; kill -9 of the leader: another leads within the ttl
 * (and a margin), the dead token is never reported again. */
Test(etcd_election, three_candidates_kill9)
{
    t_guard(120);
    shl_table *t;
    struct el_shared *sh = setup(20 * MS, &t);
    for (int i = 0; i < 3; i++)
        el_candidate(sh, i);
    pid_t obs = el_observer(sh, 0);
    int cand = -1;
    uint64_t tok = el_wait_leader(t, EL, 0, 20 * SEC, &cand);
    cr_assert(tok, "a first leader");
    t_sleep_ns(300 * MS);
    el_kill_leader(sh, t, &cand, &tok, TTL + MARGIN);
    el_expect_reached(sh, 1, tok, 5 * SEC);
    el_stop_all(sh, 3, obs);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_expect_geq(n, 2, "terms with intervals: %u", n);
    cr_expect_geq(seen[0], 2, "the observer saw both leaders (%u)", seen[0]);
    el_shared_free(sh);
    t_etcd_down(&cl, t, 1);
}

/* A leader stopped past its ttl: another leads; resumed, its proclaim and a
 * write with its token are refused, check says lost, its token is 0. */
Test(etcd_election, stopped_leader_loses)
{
    t_guard(120);
    shl_table *t;
    struct el_shared *sh = setup(50 * MS, &t);
    el_candidate(sh, 0);
    int cand = -1;
    uint64_t tok = el_wait_leader(t, EL, 0, 20 * SEC, &cand);
    cr_assert_eq(cand, 0, "c0 leads first");
    el_candidate(sh, 1);
    el_candidate(sh, 2);
    t_sleep_ns(500 * MS); /* the others queue */
    el_stop_leader(sh, t, tok, TTL + MARGIN, 0);
    el_stop_all(sh, 3, 0);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_expect_geq(n, 2, "terms with intervals: %u", n);
    el_shared_free(sh);
    t_etcd_down(&cl, t, 1);
}

/* Three members; candidates take turns (each resigns after 100-400 ms)
 * while two observers report them; the raft leader is killed, the rest go
 * on, it comes back. The observers report in token order throughout and
 * reach the leader that finally stays; one leader at a time. */
Test(etcd_election, observers_across_leader_member_kill)
{
    t_guard(180);
    shl_table *t;
    struct el_shared *sh = setup3(400 * MS, &t);
    pid_t obs[2] = {el_observer(sh, 0), el_observer(sh, 1)};
    for (int i = 0; i < 3; i++)
        el_candidate(sh, i);
    int cand;
    cr_assert(el_wait_leader(t, EL, 0, 20 * SEC, &cand), "a first leader");
    t_sleep_ns(2 * SEC);
    uint64_t before = el_last_seen(sh, 0);
    int member = etcd_cluster_leader(&cl, 5000);
    cr_assert_geq(member, 0, "%s", cl.err);
    cr_assert_eq(etcd_cluster_kill(&cl, member), 0);
    cr_log_info("raft leader member %d killed; observers at token %llu", member,
                (unsigned long long)before);
    t_sleep_ns(4 * SEC);
    cr_assert_eq(etcd_cluster_restart(&cl, member), 0, "%s", cl.err);
    t_sleep_ns(SEC);
    atomic_store(&sh->keep, 1);
    t_sleep_ns(500 * MS);
    uint64_t tok = el_wait_leader(t, EL, 0, 10 * SEC, &cand);
    cr_assert(tok);
    el_expect_reached(sh, 2, tok, 10 * SEC);
    cr_expect_gt(el_last_seen(sh, 0), before, "leaders after the member's kill were reported");
    el_stop_all(sh, 3, obs[0]);
    t_wait(obs[1]);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_log_info("%u terms; observers reported %u and %u; %u campaign errors (last %s)", n, seen[0],
                seen[1], atomic_load(&sh->campaign_errors),
                shl_errname(atomic_load(&sh->last_error)));
    cr_expect_geq(n, 5, "the candidates took turns (%u terms)", n);
    cr_expect_geq(seen[0], 3);
    cr_expect_geq(seen[1], 3);
    el_shared_free(sh);
    shl_close(t);
    etcd_cluster_stop(&cl);
}

#define STRESS_CANDS 6
#define STRESS_TIME  (20 * SEC)

/* Six candidates taking turns (each resigns after 0.1-0.8 s) on a
 * three-member cluster for 20 s while the test kills (-9, then a new
 * candidate in its place) or stops (0.05-2.7 s: past the ttl at times) one
 * of them every 0.1-0.5 s, the leader in half of the cases and in every
 * other blow for sure (killed, or stopped past the ttl, in turn), now and then
 * stops an observer, and kills one etcd member (the raft leader) and brings
 * it back: never two leaders whose intervals overlap, tokens in order,
 * observers in order, and a lost leader's token never reported again. */
Test(etcd_election, stress_kills_and_pauses)
{
    t_guard(120);
    shl_table *t;
    struct el_shared *sh = setup3(800 * MS, &t);
    struct el_stress st = {.ncand = STRESS_CANDS,
                           .seed = (unsigned)t_now(),
                           .gap_min_ns = 100 * MS,
                           .gap_max_ns = 500 * MS,
                           .stop_min_ns = 50 * MS,
                           .stop_max_ns = TTL + 700 * MS};
    el_stress_start(sh, &st);
    int first;
    cr_assert(el_wait_leader(t, EL, 0, 20 * SEC, &first), "a first leader");
    uint64_t start = t_now(), end = start + STRESS_TIME, killed_at = 0;
    int member = -1, restarted = 0;
    for (unsigned blow = 0; t_now() < end; blow++) {
        if (blow % 2 == 1)
            st.force = blow % 4 == 1 ? EL_KILL_LEADER : EL_STOP_LEADER;
        el_stress_blow(sh, t, &st);
        if (member < 0 && t_now() > start + STRESS_TIME / 3) {
            member = etcd_cluster_leader(&cl, 5000);
            cr_assert_geq(member, 0, "%s", cl.err);
            cr_assert_eq(etcd_cluster_kill(&cl, member), 0);
            killed_at = t_now();
            cr_log_info("raft leader member %d killed", member);
        } else if (member >= 0 && !restarted && t_now() > killed_at + 3 * SEC) {
            cr_assert_eq(etcd_cluster_restart(&cl, member), 0, "%s", cl.err);
            restarted = 1;
            cr_log_info("member %d back after %.1f s", member, (t_now() - killed_at) / 1e9);
        }
    }
    cr_assert_geq(member, 0, "a member was killed during the run");
    if (!restarted) /* the last blows outlasted its 3 s away */
        cr_assert_eq(etcd_cluster_restart(&cl, member), 0, "%s", cl.err);
    uint32_t lost, n = el_stress_end(sh, &st, &lost);
    /* Bounds that hold on a loaded host: every other blow costs the table
     * a leader for up to a ttl; the counts are in the log. */
    cr_expect_geq(n, 3, "terms with intervals: %u", n); /* 4 to 17 seen */
    cr_expect_geq(st.kills, 1);
    cr_expect_geq(lost, 1, "some stopped leader lost its term");
    el_shared_free(sh);
    t_etcd_down(&cl, t, 1);
}
