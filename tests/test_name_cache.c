/*
 * tests/test_name_cache.c - the per-thread cache of lease names
 * (lib/kind_shm/name_cache.h): a hit must be exactly the name it was cached for, on
 * the handle it was cached for, in a slot that still has the name.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../lib/kind_shm/shm_kind.h"
#include "common.h"
#include "crash.h"

#define HOUR (3600ull * 1000000000ull)

static const char long_name[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-";

/* A prefix of a cached name that ends at the last readable byte: the
 * comparison must stop at the block that holds the NUL (reading on would
 * crash the test), and must not take the prefix for the cached name. Every
 * length, so every alignment of the end. */
Test(name_cache, prefix_at_the_page_end_is_another_name)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "ncpage"), 128, 16, SHL_CLOCK_MANUAL);
    long pg = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(mprotect(m + 2 * pg, (size_t)pg, PROT_NONE), 0);
    cr_assert_eq(strlen(long_name), SHL_NAME_MAX);
    uint64_t tok;
    for (size_t n = 1; n < SHL_NAME_MAX; n++) {
        char *s = m + 2 * pg - 1 - n; /* n bytes and the NUL end the page */
        char *q = s - pg;             /* a page lower: the same cache entry */
        cr_assert_eq(shl__nc_way(q), shl__nc_way(s));
        memcpy(q, long_name, sizeof long_name);
        cr_assert_eq(shl_acquire(t, q, "o", HOUR, &tok), SHL_OK, "length %zu", n);
        cr_assert_eq(shl_release(t, q, "o", tok), SHL_OK);
        memcpy(s, long_name, n);
        s[n] = 0;
        cr_assert_eq(shl_read(t, s, NULL, 0, NULL, NULL), SHL_ENOENT,
                     "the %zu-byte prefix found a lease", n);
        cr_assert_eq(shl_renew(t, s, "o", 1, HOUR), SHL_ELOST, "length %zu", n);
        /* The prefix cached, the long name is not it. */
        cr_assert_eq(shl_acquire(t, s, "o", HOUR, &tok), SHL_OK, "length %zu", n);
        cr_assert_eq(tok, 1u, "length %zu: the prefix took the long name's lease", n);
        cr_assert_eq(shl_release(t, s, "o", tok), SHL_OK, "length %zu", n); /* a hit */
        shl_lease_info in;
        cr_assert_eq(shl_stat(t, q, &in), SHL_OK);
        cr_assert_eq(in.token, n, "length %zu: the long name found its prefix's lease", n);
        s[n - 1] = ' '; /* now invalid, still a prefix byte for byte but the last */
        cr_assert_eq(shl_read(t, s, NULL, 0, NULL, NULL), SHL_EINVAL, "length %zu", n);
    }
    munmap(m, (size_t)pg * 3);
    shl_close(t);
    shl_unlink(name);
}

/* Two handles on two tables, one lease name: each call goes to its own
 * table's slot, also after the other handle is closed and a new one opened
 * (perhaps at the same address). */
Test(name_cache, entries_belong_to_their_handle)
{
    char n1[96], n2[96];
    shl_table *t1 = t_create(t_name(n1, sizeof n1, "nc1"), 8, 16, SHL_CLOCK_MANUAL);
    shl_table *t2 = t_create(t_name(n2, sizeof n2, "nc2"), 8, 16, SHL_CLOCK_MANUAL);
    uint64_t tok;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(shl_acquire(t1, "L", "o", HOUR, &tok), SHL_OK);
        cr_assert_eq(shl_release(t1, "L", "o", tok), SHL_OK);
    }
    cr_assert_eq(tok, 3u);
    cr_assert_eq(shl_acquire(t2, "L", "o", HOUR, &tok), SHL_OK);
    cr_assert_eq(tok, 1u, "t2 got t1's lease");
    cr_assert_eq(shl_write(t1, "L", "o", 1, "x", 1), SHL_ELOST, "t1 wrote with t2's holder");
    cr_assert_eq(shl_write(t2, "L", "o", 1, "x", 1), SHL_OK);
    for (int round = 0; round < 4; round++) {
        shl_close(t1);
        shl_options o;
        shl_options_init(&o);
        o.clock = SHL_CLOCK_MANUAL;
        o.capacity = 8;
        o.value_size = 16;
        o.policy = 0; /* as t_create() makes it */
        cr_assert_eq(shl_open(n1, &o, &t1), SHL_OK);
        cr_assert_eq(shl_acquire(t1, "L", "o", HOUR, &tok), SHL_OK);
        cr_assert_eq(tok, 4u + (unsigned)round, "round %d: not t1's own lease", round);
        cr_assert_eq(shl_release(t1, "L", "o", tok), SHL_OK);
        cr_assert_eq(shl_renew(t2, "L", "o", 1, HOUR), SHL_OK, "round %d: t2's holder", round);
    }
    shl_close(t1);
    shl_close(t2);
    shl_unlink(n1);
    shl_unlink(n2);
}

static char nc_table[96];

/* A process that never looked L up: it adds L again (the index lost it)
 * and acquires it three times, so its slot has the higher token. */
static int add_twin(void *arg)
{
    (void)arg;
    shl_table *t;
    if (shl_open(nc_table, NULL, &t) != SHL_OK)
        return 2;
    uint64_t tok = 0;
    for (int i = 0; i < 3; i++)
        if (shl_acquire(t, "L", "b", HOUR, &tok) != SHL_OK || shl_release(t, "L", "b", tok))
            return 3;
    shl_close(t);
    return tok == 3 ? 0 : 4;
}

/* The cache holds a slot that repair then retires (its twin had the higher
 * token): the next calls must reach the twin that kept the name. */
Test(name_cache, retired_slot_is_not_a_hit)
{
    t_guard(30);
    shl_table *t = t_create(t_name(nc_table, sizeof nc_table, "ncret"), 8, 16, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "a", tok), SHL_OK);
    struct shl__slot *a = shl__nc_find(t, "L");
    cr_assert_not_null(a, "L is cached");
    _Atomic uint32_t *idx = shl__tindex(t);
    for (uint32_t b = 0; b < t->geom.index_size; b++)
        if (atomic_load(&idx[b]) == shl__slot_no(t, a) + 1)
            atomic_store(&idx[b], 0);
    cr_assert_eq(t_wait(t_fork(add_twin, NULL)), 0);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert(c_has(&p, "lease L is in two slots"), "%s", p.line[0]);
    cr_assert_eq(a->cur.state, SHL__ST_RETIRED);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 3u, "stat read the retired slot");
    cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_OK);
    cr_assert_eq(tok, 4u, "acquire went to the retired slot");
    cr_assert_eq(shl_write(t, "L", "a", tok, "v", 1), SHL_OK);
    char v[16];
    size_t len;
    cr_assert_eq(shl_read(t, "L", v, sizeof v, &len, &tok), SHL_OK);
    cr_assert(tok == 4 && len == 1 && v[0] == 'v', "read the retired slot");
    shl_close(t);
    shl_unlink(nc_table);
}
