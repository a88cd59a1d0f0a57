/*
 * tests/test_stress_check.c - the stress campaign's checker, fed hand-made
 * evidence: each rule it enforces must fire on the breach it names, and stay
 * quiet on clean evidence.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"
#include "stress_fixture.h"

static struct st_config cfg = {.workers = 2, .leases = 2, .ttl_ns = 100 * MS, .seed = 1};

/* Publishes a record as a worker's guarded callback would; `seal` 0 makes it
 * half-written (published without its seal). */
static void put(struct st_shared *sh, unsigned lease, uint64_t token, unsigned w, uint32_t inc,
                uint64_t seq, int seal)
{
    struct st_log *log = st_log_at(sh, lease);
    uint64_t n = atomic_load(&log->n);
    struct st_rec *r = &log->rec[n % ST_LOG_CAP];
    *r = (struct st_rec){token, seq, lease, w, inc, 0, 0};
    r->seal = seal ? st_rec_seal(r) : 0;
    atomic_store(&log->n, n + 1);
}

static void ack(struct st_shared *sh, unsigned w, uint64_t seq)
{
    atomic_fetch_or(&st_acked_bits(sh, w)[seq / 64], UINT64_C(1) << (seq % 64));
    atomic_store(&sh->w[w].acked_hi, seq + 1);
    atomic_store(&sh->w[w].next_seq, seq + 1);
}

Test(stress_check, clean_evidence_passes)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 0, 1, 0, 0, 0, 1);
    ack(f.sh, 0, 0);
    put(f.sh, 0, 1, 0, 0, 1, 1);
    ack(f.sh, 0, 1);
    put(f.sh, 0, 2, 1, 0, 0, 1);
    ack(f.sh, 1, 0);
    put(f.sh, 1, 1, 0, 0, 2, 1);
    ack(f.sh, 0, 2);
    fixture_step(&f);
    cr_assert_eq(f.tot.records, 4);
    cr_assert_eq(f.tot.violations, 0, "%s", st_checker_problem(f.ck, 0));
    fixture_teardown(&f);
}

Test(stress_check, older_token_after_newer_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 0, 5, 0, 0, 0, 1);
    put(f.sh, 0, 4, 1, 0, 0, 1);
    fixture_step(&f);
    cr_assert_eq(f.tot.order, 1);
    cr_assert_eq(f.tot.violations, 1);
    cr_assert(strstr(st_checker_problem(f.ck, 0), "token 4"));
    fixture_teardown(&f);
}

Test(stress_check, one_token_two_writers_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 1, 3, 0, 0, 0, 1);
    put(f.sh, 1, 3, 0, 1, 1, 1); /* same worker slot, another incarnation */
    fixture_step(&f);
    cr_assert_eq(f.tot.shared_token, 1);
    fixture_teardown(&f);
}

Test(stress_check, visible_half_written_record_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 0, 1, 0, 0, 0, 0);
    fixture_step(&f);
    cr_assert_eq(f.tot.bad_seal, 1);
    cr_assert_eq(f.tot.violations, 1);
    fixture_teardown(&f);
}

Test(stress_check, acknowledged_write_missing_from_the_log_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 0, 1, 0, 0, 0, 1);
    ack(f.sh, 0, 0);
    ack(f.sh, 0, 1); /* acknowledged, never logged */
    fixture_step(&f);
    cr_assert_eq(f.tot.lost, 1);
    cr_assert(strstr(st_checker_problem(f.ck, 0), "write 1"));
    fixture_teardown(&f);
}

/* Logged but never acknowledged: allowed once per kill, no more. */
Test(stress_check, unacknowledged_records_are_bounded_by_kills)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    put(f.sh, 0, 1, 0, 0, 0, 1);
    put(f.sh, 0, 1, 0, 0, 1, 1);
    atomic_store(&f.sh->w[0].next_seq, 2);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "stck"), 16, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    char lease[ST_LEASE_NAME];
    st_lease_name(0, lease);
    cr_assert_eq(shl_acquire(t, lease, "w0.0", SEC, &tok), SHL_OK);
    st_checker_final(f.ck, t, 2);
    st_checker_totals(f.ck, &f.tot);
    cr_assert_eq(f.tot.unacked, 2);
    cr_assert_eq(f.tot.violations, 0, "%s", st_checker_problem(f.ck, 0));
    cr_assert_eq(f.tot.table_checked, 1);
    fixture_teardown(&f);

    fixture_setup(&f, &cfg);
    put(f.sh, 0, 1, 0, 0, 0, 1);
    put(f.sh, 0, 1, 0, 0, 1, 1);
    atomic_store(&f.sh->w[0].next_seq, 2);
    st_checker_final(f.ck, t, 1);
    st_checker_totals(f.ck, &f.tot);
    cr_assert_eq(f.tot.violations, 1);
    fixture_teardown(&f);
    shl_close(t);
    shl_unlink(name);
}

/* At the end: the table's token below the newest logged one, and a value
 * that is not one whole logged write, are violations. */
Test(stress_check, table_behind_the_log_or_foreign_value_is_a_violation)
{
    struct fixture f;
    fixture_setup(&f, &cfg);
    char name[96], lease[ST_LEASE_NAME];
    shl_table *t = t_create(t_name(name, sizeof name, "stck2"), 16, 64, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    st_lease_name(0, lease);
    cr_assert_eq(shl_acquire(t, lease, "w0.0", SEC, &tok), SHL_OK);
    uint64_t v[ST_VALUE_WORDS];
    struct st_rec r = {tok, 7, 0, 0, 0, 0, 0}; /* seq 7 was never logged */
    f.sh->value_words = ST_VALUE_MIN_WORDS;    /* the table's 64 bytes */
    st_value_make(v, ST_VALUE_MIN_WORDS, &r);
    v[3] ^= 1; /* and torn */
    cr_assert_eq(shl_write(t, lease, "w0.0", tok, v, 64), SHL_OK);
    put(f.sh, 0, tok + 1, 0, 0, 0, 1); /* a token the table never issued */
    st_checker_final(f.ck, t, 0);
    st_checker_totals(f.ck, &f.tot);
    cr_assert_eq(f.tot.table, 2, "%s / %s", st_checker_problem(f.ck, 0),
                 st_checker_problem(f.ck, 1));
    fixture_teardown(&f);
    shl_close(t);
    shl_unlink(name);
}
