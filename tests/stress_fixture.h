/*
 * tests/stress_fixture.h - a campaign's shared area and checker, without the
 * campaign: the checker tests feed it hand-made evidence, step it and read
 * its totals.
 */
#ifndef SHL_TESTS_STRESS_FIXTURE_H
#define SHL_TESTS_STRESS_FIXTURE_H

#include <criterion/criterion.h>

#include "../tools/stress.h"

struct fixture {
    struct st_shared *sh;
    struct st_checker *ck;
    struct st_check_totals tot;
};

static inline void fixture_setup(struct fixture *f, const struct st_config *cfg)
{
    f->sh = st_shared_create(cfg);
    cr_assert(f->sh);
    f->ck = st_checker_new(f->sh);
    cr_assert(f->ck);
}

static inline void fixture_teardown(struct fixture *f)
{
    st_checker_free(f->ck);
    st_shared_destroy(f->sh);
}

/* One pass of the checker, then its totals into f->tot. */
static inline void fixture_step(struct fixture *f)
{
    st_checker_step(f->ck);
    st_checker_totals(f->ck, &f->tot);
}

#endif
