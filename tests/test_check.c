/*
 * tests/test_check.c - shl_check and shl_check_image find damage in the
 * header, the index, the slots and the history; shl_repair fixes what is
 * fixable and refuses the rest with a message.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

/* Three leases with some history on a manual clock. */
static shl_table *populated(char *name, size_t cap)
{
    t_name(name, cap, "chk");
    shl_table *t = t_create(name, 4, C_VALUE_SIZE, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_clock_set(t, 100 * SEC), SHL_OK);
    cr_assert_eq(shl_acquire(t, "alpha", "a", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(c_write_gen(t, "alpha", "a", tok, 1), SHL_OK);
    cr_assert_eq(shl_renew(t, "alpha", "a", tok, 20 * SEC), SHL_OK);
    cr_assert_eq(shl_acquire(t, "beta", "b", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "beta", "b", tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "beta", "b", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_renew(t, "beta", "x", tok, SEC), SHL_ELOST);
    cr_assert_eq(shl_acquire(t, "gamma", "c", 10 * SEC, &tok), SHL_OK);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    return t;
}

static struct shl__slot *slot(shl_table *t, uint32_t i)
{
    return shl__slot_at(t->hdr, i);
}

static void done(shl_table *t, const char *name)
{
    shl_close(t);
    shl_unlink(name);
}

/* The damage is found on the live table and in a copy of its bytes. */
static void expect_found(shl_table *t, const char *needle)
{
    struct c_problems p;
    cr_assert_neq(c_check(t, &p), SHL_OK, "live check missed: %s", needle);
    cr_assert(c_has(&p, needle), "live check did not say '%s' (said: %s)", needle, p.line[0]);
    size_t n = c_segment_size(t);
    cr_assert_neq(c_check_image(c_segment(t, NULL), n, &p), SHL_OK, "image check missed");
    cr_assert(c_has(&p, needle), "image check did not say '%s' (said: %s)", needle, p.line[0]);
}

static void expect_repaired(shl_table *t)
{
    struct c_problems p;
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT, "dry run sees work");
    cr_assert(p.n > 0 && strncmp(p.line[0], "would: ", 7) == 0, "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(c_check(t, &p), SHL_OK, "after repair: %s", p.line[0]);
}

Test(check, clean_table_and_image)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    struct c_problems p;
    cr_assert_eq(c_check_image(c_segment(t, NULL), c_segment_size(t), &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_OK, "nothing to do: %s", p.line[0]);
    /* Odd alignment and a truncated image must not crash either. */
    size_t n = c_segment_size(t);
    unsigned char *buf = malloc(n + 1);
    memcpy(buf + 1, c_segment(t, NULL), n);
    cr_assert_eq(c_check_image(buf + 1, n, &p), SHL_OK);
    cr_assert_eq(c_check_image(buf + 1, n - 8, &p), SHL_ECORRUPT);
    cr_assert_eq(c_check_image(buf + 1, 10, &p), SHL_ECORRUPT);
    cr_assert_eq(c_check_image(buf, 0, &p), SHL_ECORRUPT);
    free(buf);
    done(t, name);
}

Test(check, header_magic_refused_by_repair)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    t->hdr->magic ^= 0x40;
    expect_found(t, "bad magic");
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "cannot repair"), "%s", p.line[0]);
    t->hdr->magic ^= 0x40;
    done(t, name);
}

Test(check, header_fields)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    struct shl__hdr *h = t->hdr;
    h->format ^= 1;
    struct c_problems p;
    cr_assert_eq(c_check_image(h, c_segment_size(t), &p), SHL_EVERSION);
    expect_found(t, "format word");
    h->format ^= 1;
    h->capacity ^= 0x100;
    expect_found(t, "geometry");
    h->capacity ^= 0x100;
    h->mode ^= 0004;
    expect_found(t, "mode");
    h->mode ^= 0004;
    atomic_store(&h->nslots, 9);
    expect_found(t, "more than the capacity");
    atomic_store(&h->nslots, 3);
    h->ready ^= 1;
    expect_found(t, "never published");
    h->ready ^= 1;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    done(t, name);
}

static uint32_t bucket_of(shl_table *t, const char *lease)
{
    struct shl__key k;
    shl__key_lease(lease, &k);
    _Atomic uint32_t *idx = shl__index(t->hdr);
    uint32_t mask = t->hdr->index_size - 1, b = (uint32_t)k.hash & mask;
    while (atomic_load(&idx[b]) == 0 || strcmp(slot(t, atomic_load(&idx[b]) - 1)->name, lease))
        b = (b + 1) & mask;
    return b;
}

Test(check, index_damage_rebuilt)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    _Atomic uint32_t *idx = shl__index(t->hdr);
    uint32_t b = bucket_of(t, "beta");
    atomic_store(&idx[b], 0);
    expect_found(t, "not reachable through the index");
    expect_repaired(t);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "beta", &in), SHL_OK);
    cr_assert_eq(in.token, 2u);

    b = bucket_of(t, "gamma");
    atomic_store(&idx[b], 77);
    expect_found(t, "beyond the 3 used");
    expect_repaired(t);
    b = bucket_of(t, "alpha");
    atomic_store(&idx[(b + 3) & (t->hdr->index_size - 1)], atomic_load(&idx[b]));
    expect_found(t, "more than one bucket");
    expect_repaired(t);
    cr_assert_eq(shl_stat(t, "gamma", &in), SHL_OK);
    done(t, name);
}

Test(check, slot_damage_repaired)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    struct shl__slot *a = slot(t, 0), *b = slot(t, 1), *g = slot(t, 2);
    a->cur.state = 7;
    expect_found(t, "unknown holder state");
    expect_repaired(t);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "alpha", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED, "a damaged holder is ended");
    cr_assert_eq(in.token, 1u);

    b->cur.owner_len = 200;
    expect_found(t, "owner length");
    expect_repaired(t);

    shl__tvcur(t, g)->token = 9;
    expect_found(t, "above the lease's token");
    expect_repaired(t);
    cr_assert_eq(shl_stat(t, "gamma", &in), SHL_OK);
    cr_assert_eq(in.token, 9u, "the token is raised, never lowered");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "gamma", "d", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 10u);

    g->count[SHL__C_ACQUIRE] = 3;
    expect_found(t, "acquisitions counted");
    expect_repaired(t);

    atomic_store(&b->seq, atomic_load(&b->seq) | 1);
    expect_found(t, "nobody holds the lock");
    expect_repaired(t);

    atomic_store(&g->intent_armed, 1); /* the last intent, armed again */
    expect_found(t, "is armed but nobody holds the lock");
    expect_repaired(t);
    cr_assert_eq(shl_stat(t, "gamma", &in), SHL_OK);
    cr_assert_eq(in.token, 10u);

    b->name_len = 0;
    expect_found(t, "invalid name");
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_ECORRUPT, "a lost name cannot be recovered");
    cr_assert(c_has(&p, "cannot repair"), "%s", p.line[0]);
    b->name_len = 4;
    done(t, name);
}

Test(check, history_damage_cleared)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    struct shl__slot *a = slot(t, 0), *b = slot(t, 1);
    shl__slot_hist(a)[1].op = 77;
    expect_found(t, "unknown kind");
    expect_repaired(t);
    shl__slot_hist(b)[2].time = 1;
    expect_found(t, "back in time");
    expect_repaired(t);
    shl__slot_hist(slot(t, 2))[0].why = 3;
    expect_found(t, "reason");
    expect_repaired(t);
    /* Cleared history still works: new events are recorded. */
    cr_assert_eq(shl_renew(t, "beta", "b", 2, SEC), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "beta", &d), SHL_OK);
    cr_assert_eq(d.events[d.nevents - 1].op, SHL_OP_RENEW);
    done(t, name);
}

Test(check, damaged_mutex_refused)
{
    char name[96];
    shl_table *t = populated(name, sizeof name);
    struct shl__slot *a = slot(t, 0);
    int kind = a->lock.__data.__kind;
    a->lock.__data.__kind = 0;
    expect_found(t, "not a robust process-shared mutex");
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "cannot repair"), "%s", p.line[0]);
    a->lock.__data.__kind = kind;
    done(t, name);
}

/* Every single-byte flip of a real segment: the checker never crashes, and
 * answers clean, corrupt or version. Flips in the fields it guards are
 * always found. */
Test(check, every_byte_flip)
{
    t_guard(60);
    char name[96];
    shl_table *t = populated(name, sizeof name);
    size_t n = c_segment_size(t);
    unsigned char *img = malloc(n);
    memcpy(img, c_segment(t, NULL), n);
    unsigned found = 0;
    for (size_t i = 0; i < n; i++) {
        img[i] ^= 0x81;
        struct c_problems p;
        int rc = c_check_image(img, n, &p);
        cr_assert(rc == SHL_OK || rc == SHL_ECORRUPT || rc == SHL_EVERSION, "rc %d", rc);
        found += rc != SHL_OK;
        if (i < offsetof(struct shl__hdr, timens))
            cr_assert_neq(rc, SHL_OK, "header byte %zu flipped unnoticed", i);
        img[i] ^= 0x81;
    }
    cr_log_info("%u of %zu flips found", found, n);
    cr_assert_gt(found, 0);
    free(img);
    done(t, name);
}
