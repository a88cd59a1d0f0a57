/*
 * tests/test_inspect_threads.c - the inspector reads while writers work:
 * every snapshot is consistent (values whole, counters matching tokens) and
 * shl_check stays clean. Runs under ThreadSanitizer in make check.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "crash.h"

struct shared {
    shl_table *t;
    _Atomic int stop;
};

static void *writer(void *arg)
{
    struct shared *s = arg;
    char lease[16];
    for (unsigned i = 0; !atomic_load(&s->stop); i++) {
        snprintf(lease, sizeof lease, "w%u", i % 6); /* new names too, early on */
        uint64_t tok;
        if (shl_acquire(s->t, lease, "writer", 10 * SEC, &tok) != SHL_OK)
            continue;
        c_write_gen(s->t, lease, "writer", tok, 1 + i % C_GENS);
        shl_renew(s->t, lease, "writer", tok, 10 * SEC);
        shl_renew(s->t, lease, "other", tok, SEC);
        if (i % 3)
            shl_release(s->t, lease, "writer", tok);
        else
            shl_revoke(s->t, lease);
    }
    return NULL;
}

static int look(void *arg, const shl_lease_detail *d)
{
    unsigned *bad = arg;
    if (d->stable && d->info.value_len &&
        d->preview_len != (d->info.value_len < SHL_PREVIEW_MAX ? d->info.value_len
                                                                : SHL_PREVIEW_MAX))
        ++*bad;
    return 0;
}

Test(threads, inspector_reads_while_writers_work, .timeout = 60)
{
    char name[96];
    struct shared s = {t_create(t_name(name, sizeof name, "insp"), 8, C_VALUE_SIZE,
                                SHL_CLOCK_MONOTONIC),
                       0};
    pthread_t w[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, writer, &s);
    unsigned bad = 0, rounds = 0;
    uint64_t end = t_now() + 1 * SEC;
    struct c_problems p;
    while (t_now() < end) {
        cr_assert_eq(shl_foreach(s.t, look, &bad), SHL_OK);
        int rc = c_check(s.t, &p);
        cr_assert_eq(rc, SHL_OK, "check during work: %s", p.line[0]);
        unsigned char buf[C_VALUE_SIZE];
        size_t len;
        if (shl_read(s.t, "w1", buf, sizeof buf, &len, NULL) == SHL_OK && len)
            cr_assert_geq(c_value_gen(buf, len), 1, "value torn");
        rounds++;
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    cr_assert_eq(bad, 0u);
    cr_assert_gt(rounds, 0u);
    cr_assert_eq(c_check(s.t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(s.t);
    shl_unlink(name);
}
