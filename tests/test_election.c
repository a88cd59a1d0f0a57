/*
 * tests/test_election.c - leader election on a shared-memory table, with
 * real candidate processes: one leader at a time (by the intervals the
 * candidates record, tests/election.h), the next leader within the reclaim
 * delay of a leader's kill -9, a stopped leader's term taken and its
 * proclaim refused when it resumes, observers in token order, and a
 * campaign of kills and pauses under eight candidates.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "election.h"

#define EL "leader"

/* A table that reclaims a dead holder's lease after delay_ms. */
static shl_table *make_table(char *name, size_t cap, const char *tag, uint32_t delay_ms)
{
    t_name(name, cap, tag);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.value_size = 64;
    o.reclaim_delay_ms = delay_ms;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    return t;
}

/* A table for the forked candidates (name in name[128]) and their record. */
static struct el_shared *el_setup(char *name, const char *tag, uint32_t delay_ms, uint64_t ttl_ns,
                                  uint64_t work_ns, shl_table **t)
{
    t_guard(120);
    *t = make_table(name, 128, tag, delay_ms);
    struct el_shared *sh = el_shared_new(name, EL);
    sh->ttl_ns = ttl_ns;
    sh->work_ns = work_ns;
    return sh;
}

Test(election, arguments)
{
    char name[128];
    shl_table *t = make_table(name, sizeof name, "el-args", 100);
    shl_election *e = NULL, *other = NULL;
    char big[65] = {0};
    uint64_t tok = 0;
    shl_leader l;

    cr_expect_eq(shl_election_open(NULL, EL, "a", &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, NULL, "a", &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, EL, NULL, &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, EL, "a", NULL), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, "has space", "a", &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, "", "a", &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, EL, "", &e), SHL_EINVAL);
    cr_expect_eq(shl_election_open(t, EL, "tab\there", &e), SHL_EINVAL);
    memset(big, 'x', 64);
    cr_expect_eq(shl_election_open(t, big, "a", &e), SHL_EINVAL, "a 64-byte election name");
    cr_expect_eq(shl_election_open(t, EL, big, &e), SHL_EINVAL, "a 64-byte id");
    cr_expect_null(e);
    cr_assert_eq(shl_election_open(t, EL, "a b", &e), SHL_OK, "an id may hold a space");
    cr_assert_eq(shl_election_open(t, EL, "other", &other), SHL_OK);

    /* Not leading. */
    cr_expect_eq(shl_election_resign(e), SHL_EINVAL);
    cr_expect_eq(shl_election_proclaim(e, "v", 1), SHL_EINVAL);
    cr_expect_eq(shl_election_check(e), SHL_ELOST);
    cr_expect_eq(shl_election_token(e), 0);
    cr_expect_eq(shl_election_fd(e), -1);
    cr_expect_eq(shl_election_lost(e), 0);

    /* Refused before waiting: nothing is held afterwards. */
    cr_expect_eq(shl_election_campaign(NULL, SEC, 0, "v", 1, NULL, &tok), SHL_EINVAL);
    cr_expect_eq(shl_election_campaign(e, SEC, 0, "v", 1, NULL, NULL), SHL_EINVAL);
    cr_expect_eq(shl_election_campaign(e, SEC, 0, NULL, 1, NULL, &tok), SHL_EINVAL);
    cr_expect_eq(shl_election_campaign(e, 0, 0, "v", 1, NULL, &tok), SHL_EINVAL);
    cr_expect_eq(shl_election_campaign(e, SHL_RENEWER_TTL_MIN - 1, 0, "v", 1, NULL, &tok),
                 SHL_EINVAL);
    cr_expect_eq(shl_election_campaign(e, SEC, 0, big, 65, NULL, &tok), SHL_E2BIG);
    shl_renewer_options bad;
    shl_renewer_options_init(&bad);
    bad.margin_ns = 2 * SEC; /* margin >= ttl: the renewer refuses it */
    cr_expect_eq(shl_election_campaign(e, SEC, 0, "v", 1, &bad, &tok), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(t, EL, &l, NULL, 0), SHL_ENOENT,
                 "a refused campaign holds nothing");

    /* Leading: a second campaign of the same handle, and another's try. */
    cr_assert_eq(shl_election_campaign(e, SEC, 0, big, 64, NULL, &tok), SHL_OK, "64 bytes fit");
    cr_expect_eq(shl_election_campaign(e, SEC, 0, "v", 1, NULL, &tok), SHL_EBUSY);
    uint64_t tok2 = 0;
    cr_expect_eq(shl_election_campaign(other, SEC, 0, "v", 1, NULL, &tok2), SHL_ETIMEDOUT);
    cr_expect_eq(shl_election_proclaim(e, big, 65), SHL_E2BIG);
    cr_expect_eq(shl_election_proclaim(e, NULL, 1), SHL_EINVAL);
    cr_expect_eq(shl_election_proclaim(e, NULL, 0), SHL_OK, "an empty value");
    cr_expect_geq(shl_election_fd(e), 0);
    cr_expect_eq(shl_election_token(e), tok);

    /* The readers' arguments. */
    char v[8];
    cr_expect_eq(shl_election_leader(NULL, EL, &l, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(t, NULL, &l, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(t, EL, NULL, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(t, EL, &l, NULL, 4), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(t, "bad name", &l, v, sizeof v), SHL_EINVAL);
    cr_expect_eq(shl_election_observe(NULL, EL, 0, 0, &l, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_observe(t, NULL, 0, 0, &l, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_observe(t, "bad name", 0, SEC, &l, NULL, 0), SHL_EINVAL,
                 "a bad name is refused, not waited on");
    cr_expect_eq(shl_election_observe(t, EL, 0, 0, NULL, NULL, 0), SHL_EINVAL);
    cr_expect_eq(shl_election_observe(t, EL, 0, 0, &l, NULL, 4), SHL_EINVAL);
    cr_expect_eq(shl_election_observe(t, "never", 0, 0, &l, NULL, 0), SHL_ETIMEDOUT,
                 "an election never led is waited for");

    cr_expect_eq(shl_election_resign(e), SHL_OK);
    cr_expect_eq(shl_election_resign(e), SHL_EINVAL, "resign when no longer leading");
    cr_expect_eq(shl_election_check(e), SHL_ELOST);
    shl_election_close(e);
    shl_election_close(other);
    shl_election_close(NULL);
    cr_expect_eq(shl_election_fd(NULL), -1);
    cr_expect_eq(shl_election_lost(NULL), 0);
    cr_expect_eq(shl_election_token(NULL), 0);
    cr_expect_eq(shl_election_check(NULL), SHL_EINVAL);
    cr_expect_eq(shl_election_resign(NULL), SHL_EINVAL);
    cr_expect_eq(shl_election_proclaim(NULL, "v", 1), SHL_EINVAL);
    shl_close(t);

    /* A manual clock: no renewer can keep a leader there. */
    char mname[128];
    shl_table *m = t_create(t_name(mname, sizeof mname, "el-manual"), 4, 64, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_election_open(m, EL, "a", &e), SHL_OK);
    cr_expect_eq(shl_election_campaign(e, SEC, 0, "v", 1, NULL, &tok), SHL_EINVAL);
    cr_expect_eq(shl_election_leader(m, EL, &l, NULL, 0), SHL_ENOENT);
    shl_election_close(e);
    shl_close(m);
}

static int leader_with_child_handle(void *arg)
{
    shl_table *t = arg;
    shl_election *e = NULL;
    if (shl_election_open(t, EL, "c", &e) != SHL_EFORK)
        return 1;
    shl_leader l;
    return shl_election_leader(t, EL, &l, NULL, 0) == SHL_EFORK ? 0 : 2;
}

/* What shl_election_leader() reports in each state of the lease. */
Test(election, leader_snapshot)
{
    char name[128];
    shl_table *t = make_table(name, sizeof name, "el-leader", 100);
    shl_leader l;
    char v[16];
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "never used");

    /* A holder that took the lease without proclaiming. */
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, EL, "plain", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_OK);
    cr_expect_str_eq(l.id, "plain");
    cr_expect_eq(l.token, tok);
    cr_expect_eq(l.proclaimed, 0);
    cr_expect_eq(l.value_len, 0);
    cr_expect_eq(l.state, SHL_STATE_HELD);
    cr_expect_eq(l.pid, getpid());
    cr_expect_gt(l.remaining_ns, 0);
    cr_expect_eq(shl_election_observe(t, EL, 0, 0, &l, v, sizeof v), SHL_ETIMEDOUT,
                 "observe reports proclaimed terms only");
    cr_assert_eq(shl_write(t, EL, "plain", tok, "old", 3), SHL_OK);
    cr_assert_eq(shl_release(t, EL, "plain", tok), SHL_OK);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "released");

    /* A campaign: proclaimed with its token, value read back. */
    shl_election *e;
    cr_assert_eq(shl_election_open(t, EL, "me", &e), SHL_OK);
    cr_assert_eq(shl_election_campaign(e, SEC, 0, "hello", 5, NULL, &tok), SHL_OK);
    memset(v, 0, sizeof v);
    cr_assert_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_OK);
    cr_expect_str_eq(l.id, "me");
    cr_expect_eq(l.token, tok);
    cr_expect_eq(l.proclaimed, 1);
    cr_expect_eq(l.value_len, 5);
    cr_expect_str_eq(v, "hello");
    cr_expect_eq(shl_election_leader(t, EL, &l, v, 2), SHL_E2BIG);
    cr_expect_eq(l.token, tok, "filled on SHL_E2BIG");
    cr_expect_eq(l.value_len, 5);
    cr_assert_eq(shl_election_proclaim(e, "again", 5), SHL_OK);
    cr_assert_eq(shl_election_leader(t, EL, &l, NULL, 0), SHL_OK);
    cr_expect_eq(l.proclaimed, 1, "without a buffer too");

    pid_t kid = t_fork(leader_with_child_handle, t);
    cr_expect_eq(t_wait(kid), 0, "a forked child's calls are SHL_EFORK");

    /* Revoked: no leader; the leader's next proclaim is refused by the table. */
    cr_assert_eq(shl_revoke(t, EL), SHL_OK);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "revoked");
    cr_expect_eq(shl_election_proclaim(e, "x", 1), SHL_ELOST);
    cr_expect_eq(shl_election_token(e), 0, "the loss was declared");
    cr_expect_neq(shl_election_lost(e), 0);
    cr_expect_eq(shl_election_resign(e), SHL_ELOST, "nothing to release");

    /* Expired: a lease whose time is up is no leader. */
    cr_assert_eq(shl_acquire(t, EL, "brief", 20 * MS, &tok), SHL_OK);
    t_sleep_ns(40 * MS);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT, "expired");

    /* A lost term's handle may campaign again. */
    uint64_t tok2;
    cr_assert_eq(shl_election_campaign(e, SEC, 0, "back", 4, NULL, &tok2), SHL_OK);
    cr_expect_gt(tok2, tok);
    shl_election_close(e);
    cr_expect_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_ENOENT,
                 "close resigns: nobody leads");
    shl_close(t);
}

static int die_leading(void *arg)
{
    const char *name = arg;
    shl_table *t;
    shl_election *e;
    uint64_t tok;
    if (shl_open(name, NULL, &t) != SHL_OK || shl_election_open(t, EL, "doomed", &e) != SHL_OK ||
        shl_election_campaign(e, 30 * SEC, 0, "d", 1, NULL, &tok) != SHL_OK)
        return 1;
    raise(SIGKILL);
    return 2;
}

/* A dead leader is reported as ORPHANED until its lease is reclaimed. */
Test(election, dead_leader_is_orphaned)
{
    char name[128];
    shl_table *t = make_table(name, sizeof name, "el-orphan", 60 * 1000);
    pid_t kid = t_fork(die_leading, name);
    cr_assert_eq(t_wait(kid), 128 + SIGKILL);
    shl_leader l;
    cr_assert_eq(shl_election_leader(t, EL, &l, NULL, 0), SHL_OK);
    cr_expect_str_eq(l.id, "doomed");
    cr_expect_eq(l.state, SHL_STATE_ORPHANED);
    cr_expect_eq(l.proclaimed, 1);
    shl_close(t);
}

static int observe_next(void *arg)
{
    const char *name = ((const char **)arg)[0];
    uint64_t after = (uint64_t)(uintptr_t)((const char **)arg)[1];
    shl_table *t;
    shl_leader l;
    char v[16] = {0};
    if (shl_open(name, NULL, &t) != SHL_OK)
        return 1;
    int rc = shl_election_observe(t, EL, after, 10 * SEC, &l, v, sizeof v);
    if (rc != SHL_OK)
        return 2;
    return l.token > after && strcmp(l.id, "a") == 0 && strcmp(v, "a2") == 0 ? 0 : 3;
}

/* Observe: the next leader after a given token, in order; a term already
 * replaced when the observer looks is the documented skip. */
Test(election, observe_order_and_skip)
{
    t_guard(60);
    char name[128];
    shl_table *t = make_table(name, sizeof name, "el-observe", 100);
    shl_election *a, *b;
    cr_assert_eq(shl_election_open(t, EL, "a", &a), SHL_OK);
    cr_assert_eq(shl_election_open(t, EL, "b", &b), SHL_OK);
    uint64_t ta, tb, ta2;
    shl_leader l;
    char v[16];

    cr_assert_eq(shl_election_campaign(a, SEC, 0, "a1", 2, NULL, &ta), SHL_OK);
    cr_assert_eq(shl_election_observe(t, EL, 0, 0, &l, v, sizeof v), SHL_OK);
    cr_expect_eq(l.token, ta);
    cr_expect_eq(shl_election_observe(t, EL, ta, 0, &l, v, sizeof v), SHL_ETIMEDOUT,
                 "nothing above the current leader");
    cr_assert_eq(shl_election_resign(a), SHL_OK);
    cr_assert_eq(shl_election_campaign(b, SEC, 0, "b1", 2, NULL, &tb), SHL_OK);
    cr_assert_gt(tb, ta);
    memset(v, 0, sizeof v);
    cr_assert_eq(shl_election_observe(t, EL, 0, 0, &l, v, sizeof v), SHL_OK);
    cr_expect_eq(l.token, tb, "a's term was over when the observer looked: skipped");
    cr_expect_str_eq(v, "b1");

    /* An observer waiting for the leader after b sees the next term. */
    const char *arg[2] = {name, (const char *)(uintptr_t)tb};
    pid_t kid = t_fork(observe_next, arg);
    t_sleep_ns(50 * MS);
    cr_assert_eq(shl_election_resign(b), SHL_OK);
    cr_assert_eq(shl_election_campaign(a, SEC, 0, "a2", 2, NULL, &ta2), SHL_OK);
    cr_expect_eq(t_wait(kid), 0, "the observer reported a's new term, value a2");

    /* A removed table ends the wait. */
    cr_assert_eq(shl_unlink(name), SHL_OK);
    cr_expect_eq(shl_election_observe(t, EL, ta2, SEC, &l, v, sizeof v), SHL_EREMOVED);
    shl_election_close(a);
    shl_election_close(b);
    shl_close(t);
}

#define KILL_DELAY_MS 100u
#define KILL_TTL      (10 * SEC) /* far above the delay: the expiry is not what hands over */
#define KILL_MARGIN   (3 * SEC)  /* scheduling on a loaded 2-core host */

/* Three candidates; kill -9 the leader twice: another leads within the
 * reclaim delay (and a margin), the dead leader's token is never reported
 * again, and one leader at a time throughout. */
Test(election, three_candidates_kill9)
{
    char name[128];
    shl_table *t;
    struct el_shared *sh = el_setup(name, "el-kill", KILL_DELAY_MS, KILL_TTL, 2 * MS, &t);
    for (int i = 0; i < 3; i++)
        el_candidate(sh, i);
    pid_t obs = el_observer(sh, 0);

    int cand = -1;
    uint64_t tok = el_wait_leader(t, EL, 0, 10 * SEC, &cand);
    cr_assert(tok, "a first leader");
    for (int round = 0; round < 2; round++) {
        t_sleep_ns(100 * MS); /* let it proclaim a few times */
        uint64_t took = el_kill_leader(sh, t, &cand, &tok, KILL_DELAY_MS * MS + KILL_MARGIN);
        cr_expect_geq(took, KILL_DELAY_MS * MS, "not before the reclaim delay");
    }
    el_expect_reached(sh, 1, tok, 5 * SEC);
    el_stop_all(sh, 3, obs);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_expect_geq(n, 3, "three terms with intervals (%u)", n);
    cr_expect_geq(seen[0], 3, "the observer saw the three leaders (%u)", seen[0]);
    cr_expect_eq(atomic_load(&sh->campaign_errors), 0, "campaign: %s",
                 shl_errname(atomic_load(&sh->last_error)));
    el_shared_free(sh);
    shl_close(t);
}

#define STOP_TTL (300 * MS)

/* A leader stopped past its ttl: another leads; when it resumes, its
 * proclaim is refused (by the renewer's deadline and by the table),
 * shl_election_check() says lost, its token is 0. */
Test(election, stopped_leader_loses)
{
    char name[128];
    shl_table *t;
    struct el_shared *sh = el_setup(name, "el-stop", KILL_DELAY_MS, STOP_TTL, 20 * MS, &t);
    el_candidate(sh, 0);
    int cand = -1;
    uint64_t tok = el_wait_leader(t, EL, 0, 10 * SEC, &cand);
    cr_assert_eq(cand, 0, "c0 leads first");
    el_candidate(sh, 1);
    el_candidate(sh, 2);
    t_sleep_ns(100 * MS); /* the others queue */

    /* Resumed well past its expiry, while the new term goes on. */
    el_stop_leader(sh, t, tok, STOP_TTL + KILL_MARGIN, STOP_TTL);
    shl_leader l;
    char v[16] = {0};
    cr_assert_eq(shl_election_leader(t, EL, &l, v, sizeof v), SHL_OK);
    cr_expect_gt(l.token, tok);
    cr_expect_str_neq(v, "c0", "the stale write did not land");
    el_stop_all(sh, 3, 0);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_expect_geq(n, 2, "terms with intervals: %u", n);
    el_shared_free(sh);
    shl_close(t);
}

/* Candidates take turns (each resigns after 20-60 ms); an observer reports
 * their terms in token order and reaches the one that finally stays. */
Test(election, observers_see_leaders_in_order)
{
    char name[128];
    shl_table *t;
    struct el_shared *sh = el_setup(name, "el-order", KILL_DELAY_MS, SEC, 5 * MS, &t);
    sh->hold_min_ns = 20 * MS;
    sh->hold_max_ns = 60 * MS;
    pid_t obs[2] = {el_observer(sh, 0), el_observer(sh, 1)};
    for (int i = 0; i < 3; i++)
        el_candidate(sh, i);
    t_sleep_ns(2 * SEC);
    atomic_store(&sh->keep, 1);
    t_sleep_ns(200 * MS);
    int cand;
    uint64_t tok = el_wait_leader(t, EL, 0, 5 * SEC, &cand);
    cr_assert(tok);
    el_expect_reached(sh, 2, tok, 5 * SEC);
    shl_leader l;
    cr_assert_eq(shl_election_leader(t, EL, &l, NULL, 0), SHL_OK);
    cr_expect_eq(l.token, tok, "the leader stayed");
    el_stop_all(sh, 3, obs[0]);
    t_wait(obs[1]);
    uint32_t seen[EL_OBS], n = el_check(sh, seen);
    cr_log_info("%u terms; the observers reported %u and %u", n, seen[0], seen[1]);
    cr_expect_geq(n, 10, "the candidates took turns (%u terms)", n);
    /* How many an observer misses depends on its scheduling (a term lasts
     * 20-60 ms, it looks every 5 ms): only order and arrival are checked. */
    cr_expect_geq(seen[0], 3);
    cr_expect_geq(seen[1], 3);
    el_shared_free(sh);
    shl_close(t);
}

#define STRESS_CANDS 8
#define STRESS_TIME  (10 * SEC)
#define STRESS_TTL   (200 * MS)

static void log_problem(void *arg, const char *problem)
{
    (void)arg;
    cr_log_error("check: %s", problem);
}

/* Eight candidates taking turns for 10 s while the test kills (-9, then a
 * new candidate in its place) and stops (10-400 ms, past the ttl half the
 * time) one of them every 30-130 ms, the leader in half of the cases, and
 * now and then stops an observer: never two leaders whose intervals
 * overlap, tokens in order, observers in order. */
Test(election, stress_kills_and_pauses)
{
    char name[128];
    shl_table *t;
    struct el_shared *sh = el_setup(name, "el-stress", 10, STRESS_TTL, 3 * MS, &t);
    sh->hold_min_ns = 0;
    sh->hold_max_ns = 80 * MS;
    struct el_stress st = {.ncand = STRESS_CANDS,
                           .seed = (unsigned)t_now(),
                           .gap_min_ns = 30 * MS,
                           .gap_max_ns = 130 * MS,
                           .stop_min_ns = 10 * MS,
                           .stop_max_ns = 400 * MS};
    el_stress_start(sh, &st);
    /* The run lasts its time and at least five kills: a third of the blows
     * are kills, at random, and on a loaded host (a sanitizer build beside
     * the rest of the suite) fewer blows fit in the time. */
    uint64_t end = t_now() + STRESS_TIME, cap = end + 2 * STRESS_TIME;
    while ((t_now() < end || st.kills < 5) && t_now() < cap)
        el_stress_blow(sh, t, &st);
    uint32_t lost, n = el_stress_end(sh, &st, &lost);
    cr_expect_geq(n, 20, "terms with intervals: %u", n);
    cr_expect_geq(st.kills, 5, "kills: %u, stops: %u", st.kills, st.stops);
    cr_expect_geq(lost, 1, "some stopped leader lost its term");
    cr_expect_eq(shl_check(t, log_problem, NULL), SHL_OK, "the table is consistent");
    el_shared_free(sh);
    shl_close(t);
}

/* A table whose file is removed by something else than shl_unlink() (rm, a
 * tmp cleaner, RemoveIPC) still answers its mapping: an observer finds out
 * by the look at the name that waits make, within SHL_REMOVED_CHECK_NS.
 * (No renewer runs here: a renewer's own look would mark the table removed
 * for every handle.) */
Test(election, observe_ends_when_the_file_is_removed)
{
    t_guard(30);
    char name[128], path[160];
    shl_table *t = make_table(name, sizeof name, "el-rm", 100);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, EL, "a", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, EL, "a", tok, "a", 1), SHL_OK);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    cr_assert_eq(unlink(path), 0);
    shl_leader l;
    uint64_t at = t_now();
    cr_expect_eq(shl_election_observe(t, EL, tok, 10 * SEC, &l, NULL, 0), SHL_EREMOVED);
    cr_log_info("observe ended %.0f ms after the removal", (t_now() - at) / 1e6);
    shl_close(t);
}

struct early {
    char table[128];
    _Atomic int leading, resigned;
    _Atomic int check_rc, resign_rc;
};

/* Leads with a renewer that declares the loss long before the expiry (ttl
 * 5 s, margin 4.9 s), and resigns once it is told it lost. */
static int lead_until_told(void *arg)
{
    struct early *x = arg;
    shl_table *t;
    shl_election *e;
    uint64_t tok;
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.margin_ns = 4900 * MS;
    ro.interval_ns = 30 * MS;
    if (shl_open(x->table, NULL, &t) != SHL_OK || shl_election_open(t, EL, "early", &e) != SHL_OK ||
        shl_election_campaign(e, 5 * SEC, 0, "e", 1, &ro, &tok) != SHL_OK)
        return 1;
    atomic_store(&x->leading, 1);
    int rc;
    while ((rc = shl_election_check(e)) == SHL_OK)
        t_sleep_ns(5 * MS);
    atomic_store(&x->check_rc, rc);
    atomic_store(&x->resign_rc, shl_election_resign(e));
    atomic_store(&x->resigned, 1);
    pause(); /* keeps its handle open: its lease is not orphaned */
    return 0;
}

/* A leader whose renewer declared the loss while the table still held its
 * lease (resumed inside the renewer's margin) gives the lease back when it
 * resigns: the next candidate need not wait for the expiry. */
Test(election, resign_after_a_local_loss_frees_the_lease)
{
    t_guard(60);
    struct early *x =
        mmap(NULL, sizeof *x, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(x != MAP_FAILED);
    shl_table *t = make_table(x->table, sizeof x->table, "el-early", 100);
    pid_t kid = t_fork(lead_until_told, x);
    uint64_t until = t_now() + 10 * SEC;
    while (!atomic_load(&x->leading) && t_now() < until)
        t_sleep_ns(MS);
    cr_assert(atomic_load(&x->leading));
    cr_assert_eq(kill(kid, SIGSTOP), 0);
    cr_assert_eq(t_wait_stopped(kid), 0);
    t_sleep_ns(300 * MS); /* past the local deadline (100 ms), far from the expiry (5 s) */
    cr_assert_eq(kill(kid, SIGCONT), 0);
    while (!atomic_load(&x->resigned) && t_now() < until)
        t_sleep_ns(MS);
    cr_assert(atomic_load(&x->resigned));
    cr_expect_eq(atomic_load(&x->check_rc), SHL_ELOST);
    cr_expect_eq(atomic_load(&x->resign_rc), SHL_ELOST, "the term had been lost");
    shl_election *e;
    uint64_t tok;
    cr_assert_eq(shl_election_open(t, EL, "next", &e), SHL_OK);
    cr_expect_eq(shl_election_campaign(e, SEC, 0, "n", 1, NULL, &tok), SHL_OK,
                 "the lost leader's lease was given back at once");
    kill(kid, SIGKILL);
    t_wait(kid);
    shl_election_close(e);
    shl_close(t);
    munmap(x, sizeof *x);
}

static void count_loss(void *arg, int reason)
{
    _Atomic int *seen = arg;
    atomic_fetch_add(&seen[0], 1);
    atomic_store(&seen[1], reason);
}

/* The loss of a term is reported as a renewer reports it: the callback
 * once, the descriptor readable, the sticky reason; then the handle does
 * not lead. */
Test(election, loss_is_reported_three_ways)
{
    t_guard(30);
    char name[128];
    shl_table *t = make_table(name, sizeof name, "el-loss", 100);
    shl_election *e;
    uint64_t tok;
    _Atomic int seen[2] = {0, 0};
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.on_loss = count_loss;
    ro.arg = seen;
    cr_assert_eq(shl_election_open(t, EL, "a", &e), SHL_OK);
    cr_assert_eq(shl_election_campaign(e, 5 * SEC, 0, "a", 1, &ro, &tok), SHL_OK);
    int fd = shl_election_fd(e);
    cr_assert_geq(fd, 0);
    struct pollfd p = {fd, POLLIN, 0};
    cr_expect_eq(poll(&p, 1, 0), 0, "not readable while leading");
    cr_assert_eq(shl_revoke(t, EL), SHL_OK);
    cr_expect_eq(poll(&p, 1, 5000), 1, "readable once the term is lost");
    uint64_t until = t_now() + 5 * SEC;
    while (!atomic_load(&seen[0]) && t_now() < until)
        t_sleep_ns(MS);
    cr_expect_eq(atomic_load(&seen[0]), 1, "the callback ran once");
    cr_expect_eq(atomic_load(&seen[1]), SHL_LOSS_REFUSED);
    cr_expect_eq(shl_election_lost(e), SHL_LOSS_REFUSED);
    cr_expect_eq(shl_election_token(e), 0);
    cr_expect_eq(shl_election_check(e), SHL_ELOST);
    shl_election_close(e);
    cr_expect_eq(atomic_load(&seen[0]), 1, "and only once");
    shl_close(t);
}
