/*
 * tests/test_stress_interval.c - the campaign's interval exclusion
 * (tools/stress_interval.c), fed hand-made holds: two holders whose sure
 * intervals overlap are a violation even when neither wrote anything, and
 * what legitimately ends a hold early (a release, a revoke, a kill) keeps a
 * clean history clean.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"
#include "stress_fixture.h"

/* Two workers (processes 0 and 1) and one reader (process 2). */
static struct st_config cfg = {
    .workers = 2, .leases = 2, .readers = 1, .ttl_ns = 100 * MS, .seed = 1};

/* Process p held `lease` (kind, token) from `start` and surely until `end`
 * by its clock; `released` (0: none) is its release call. */
static void hold(struct fixture *f, unsigned p, unsigned lease, uint32_t kind, uint64_t token,
                 uint64_t start, uint64_t end, uint64_t released)
{
    struct st_ivlog *l = st_ivlog_at(f->sh, p);
    struct st_iv iv = {start, end, token, lease, kind, 0, start, 0, 0, 0, 0};
    st_iv_begin(l, &iv);
    if (released)
        st_iv_cut(l, released);
    st_iv_end(f->sh, l, UINT64_MAX, 0);
}

/* A writer stopped for its whole hold (it writes nothing: the evidence log is
 * empty) and a reader let in beside it: only the intervals tell. */
Test(stress_interval, reader_beside_a_silent_writer_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    struct st_ivlog *w = st_ivlog_at(f.sh, 0);
    st_iv_begin(w, &(struct st_iv){10 * MS, 110 * MS, 7, 1, ST_IV_EXCL, 0, 10 * MS, 4, 0, 0, 0});
    st_iv_end(f.sh, w, UINT64_MAX, 5); /* stopped once meanwhile */
    hold(&f, 2, 1, ST_IV_SHARED, 8, 50 * MS, 150 * MS, 60 * MS);
    fixture_step(&f);
    cr_assert_eq(f.tot.records, 0, "no write at all");
    cr_assert_eq(f.tot.intervals, 2);
    cr_assert_eq(f.tot.interval_overlap, 1);
    cr_assert_eq(f.tot.interval_stopped, 1);
    cr_assert_eq(f.tot.violations, 1);
    cr_assert(strstr(st_checker_problem(f.ck, 0), "exclusive hold by token 7"), "%s",
              st_checker_problem(f.ck, 0));
    fixture_teardown(&f);
}

Test(stress_interval, two_writers_at_once_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    hold(&f, 0, 0, ST_IV_EXCL, 3, 10 * MS, 110 * MS, 0);
    hold(&f, 1, 0, ST_IV_EXCL, 4, 109 * MS, 209 * MS, 0);
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 1);
    fixture_teardown(&f);
}

/* Back to back (one ends where the next begins), on other leases, readers
 * together, a hold cut by its release call: all clean. */
Test(stress_interval, clean_history_passes)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    hold(&f, 0, 0, ST_IV_EXCL, 1, 10 * MS, 110 * MS, 0);
    hold(&f, 1, 0, ST_IV_EXCL, 2, 110 * MS, 210 * MS, 150 * MS);
    hold(&f, 2, 0, ST_IV_SHARED, 3, 150 * MS, 250 * MS, 0);
    hold(&f, 2, 0, ST_IV_SHARED, 4, 160 * MS, 260 * MS, 0); /* a second reader hold */
    hold(&f, 0, 1, ST_IV_EXCL, 1, 100 * MS, 200 * MS, 0);   /* another lease */
    fixture_step(&f);
    cr_assert_eq(f.tot.intervals, 5);
    cr_assert_eq(f.tot.violations, 0, "%s", st_checker_problem(f.ck, 0));
    fixture_teardown(&f);
}

/* A revoke that may have landed during a hold ends it where the holder last
 * read the revoke epoch; a worker killed while holding, where the controller
 * killed it (or where it killed itself); one that died otherwise, nowhere it
 * can be trusted: the next holder is no violation. */
Test(stress_interval, revoke_and_kill_end_a_hold)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    struct st_ivlog *l0 = st_ivlog_at(f.sh, 0);
    struct st_iv iv = {10 * MS, 110 * MS, 5, 0, ST_IV_EXCL, 0, 20 * MS, 0, 0, 0, 0};
    st_iv_begin(l0, &iv);
    atomic_fetch_add(&f.sh->revoke_epoch[0], 2);
    st_iv_end(f.sh, l0, UINT64_MAX, 0);
    hold(&f, 1, 0, ST_IV_EXCL, 6, 30 * MS, 130 * MS, 0);
    fixture_step(&f);
    cr_assert_eq(f.tot.violations, 0, "revoke: %s", st_checker_problem(f.ck, 0));

    iv = (struct st_iv){200 * MS, 300 * MS, 1, 1, ST_IV_EXCL, 0, 200 * MS, 0, 0, 0, 0};
    st_iv_begin(l0, &iv);
    st_iv_close_dead(f.sh, l0, 220 * MS, 0); /* SIGKILLed by the controller */
    struct st_ivlog *l1 = st_ivlog_at(f.sh, 1);
    iv = (struct st_iv){230 * MS, 330 * MS, 2, 1, ST_IV_EXCL, 0, 230 * MS, 0, 0, 0, 0};
    st_iv_begin(l1, &iv);
    atomic_store(&l1->cut, 240 * MS); /* ordered to die, said when */
    st_iv_close_dead(f.sh, l1, 0, 0);
    st_iv_begin(l0, &(struct st_iv){250 * MS, 350 * MS, 3, 1, ST_IV_EXCL, 0, 250 * MS, 0, 0, 0, 0});
    st_iv_close_dead(f.sh, l0, 0, 0); /* died of something else */
    hold(&f, 2, 1, ST_IV_SHARED, 4, 260 * MS, 360 * MS, 0);
    fixture_step(&f);
    cr_assert_eq(f.tot.violations, 0, "kills: %s", st_checker_problem(f.ck, 0));

    /* The same kill, the next holder in before it: caught. */
    iv = (struct st_iv){400 * MS, 500 * MS, 5, 1, ST_IV_EXCL, 0, 400 * MS, 0, 0, 0, 0};
    st_iv_begin(l0, &iv);
    st_iv_close_dead(f.sh, l0, 450 * MS, 0);
    hold(&f, 1, 1, ST_IV_EXCL, 6, 440 * MS, 540 * MS, 0);
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 1);
    fixture_teardown(&f);
}

/* Removals (stress_removed.c): a hold on a removed table ends at the start
 * of a removal by shl_unlink(), at the end of a plain unlink plus one renew
 * interval; holds on two tables are compared when the older was marked,
 * not when it was unlinked plainly (its holders may go on until they look). */
static struct st_config rm_cfg = {.workers = 3,
                                  .leases = 2,
                                  .readers = 1,
                                  .ttl_ns = 90 * MS,
                                  .seed = 1,
                                  .seconds = 1,
                                  .remove_rate = 1};

static void removed(struct st_shared *sh, uint32_t g, uint64_t start, uint64_t end, int plain)
{
    struct st_gen *x = st_gen_at(sh, g);
    atomic_store(&x->plain, (uint32_t)plain);
    atomic_store(&x->rm_start, start);
    atomic_store(&x->rm_end, end);
    atomic_store(&sh->gen, g + 1);
}

static void gen_hold(struct st_shared *sh, unsigned p, uint32_t gen, uint64_t token, uint64_t start,
                     uint64_t end)
{
    struct st_ivlog *l = st_ivlog_at(sh, p);
    struct st_iv iv = {start, end, token, 0, ST_IV_EXCL, 0, start, 0, 0, gen, 0};
    st_iv_begin(l, &iv);
    st_iv_end(sh, l, UINT64_MAX, 0);
}

Test(stress_interval, a_removal_ends_the_holds_on_the_removed_table)
{
    struct fixture f = {st_shared_create(&rm_cfg), NULL, {0}};
    cr_assert(f.sh && f.sh->gens_cap >= 3 && f.sh->renew_ns == 30 * MS);
    f.ck = st_checker_new(f.sh);
    cr_assert(f.ck);
    removed(f.sh, 0, 100 * MS, 101 * MS, 0);
    gen_hold(f.sh, 0, 0, 5, 10 * MS, 110 * MS);  /* ends at 100 ms */
    gen_hold(f.sh, 1, 1, 9, 102 * MS, 202 * MS); /* the next table's */
    fixture_step(&f);
    cr_assert_eq(f.tot.violations, 0, "marked: %s", st_checker_problem(f.ck, 0));
    gen_hold(f.sh, 2, 1, 10, 95 * MS, 96 * MS); /* before the removal: compared */
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 1, "marked: not compared");

    removed(f.sh, 1, 300 * MS, 301 * MS, 1);      /* plain: holds end at 331 ms */
    gen_hold(f.sh, 0, 1, 11, 250 * MS, 350 * MS); /* on table 1, cut at 331 */
    gen_hold(f.sh, 1, 2, 20, 302 * MS, 402 * MS); /* table 2 in the window: allowed */
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 1, "plain: %s", st_checker_problem(f.ck, 1));
    gen_hold(f.sh, 2, 1, 12, 335 * MS, 345 * MS); /* table 1 again, after the cut */
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 1, "plain: %s", st_checker_problem(f.ck, 1));
    gen_hold(f.sh, 2, 1, 13, 320 * MS, 345 * MS); /* table 1, beside token 11 */
    fixture_step(&f);
    cr_assert_eq(f.tot.interval_overlap, 2, "one table: not compared");
    fixture_teardown(&f);
}

/* Accepted after the removal returned (a plain one: and one renew interval
 * and the slack), and tokens of a table at or below an older one's. */
Test(stress_interval, removed_late_accepts_and_tokens_below_a_removed_table)
{
    struct st_shared *sh = st_shared_create(&rm_cfg);
    cr_assert(sh);
    cr_assert_eq(st_removed_late(sh, 0, 500 * MS), 0, "not removed");
    removed(sh, 0, 100 * MS, 101 * MS, 0);
    cr_assert_eq(st_removed_late(sh, 0, 100 * MS), 0);
    cr_assert_eq(st_removed_late(sh, 0, 102 * MS), 1);
    removed(sh, 1, 200 * MS, 201 * MS, 1);
    cr_assert_eq(st_removed_late(sh, 1, 201 * MS + 30 * MS + ST_RM_SLACK_NS), 0);
    cr_assert_eq(st_removed_late(sh, 1, 202 * MS + 30 * MS + ST_RM_SLACK_NS), 1);
    cr_assert_eq(st_gen_cut(sh, 0), 100 * MS);
    cr_assert_eq(st_gen_cut(sh, 1), 231 * MS);
    cr_assert_eq(st_gen_cut(sh, 2), UINT64_MAX);

    st_gentok_note(sh, 0, 0, 5);
    st_gentok_note(sh, 0, 0, 7);
    st_gentok_note(sh, 2, 0, 8); /* table 1 never had lease 0 */
    st_gentok_note(sh, 1, 1, 3);
    cr_assert_eq(st_gentok_check(sh), 0);
    st_gentok_note(sh, 2, 1, 3); /* as high as table 1's: a token given again */
    cr_assert_eq(st_gentok_check(sh), 1);
    cr_assert_eq(atomic_load(&sh->token_below_removed), 1);
    st_shared_destroy(sh);
}
