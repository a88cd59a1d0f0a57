/*
 * tests/test_geometry.c - the geometry a handle read at open is the only one
 * it uses: a stray write into the segment's header (offsets, stride, sizes,
 * capacity, index size, the number of slots in use), made after open
 * through a second mapping of /dev/shm/NAME, must not make an operation
 * read or write outside the table, nor make shl_foreach() run past the
 * capacity.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../shm/layout.h"
#include "common.h"

#define CAP   8
#define VSIZE 64

/* A second, raw mapping of the segment's header, as any process that can
 * write the file has. */
static struct shl__hdr *raw_header(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "open %s", path);
    void *p = mmap(NULL, sizeof(struct shl__hdr), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    cr_assert_neq(p, MAP_FAILED);
    return p;
}

/* Plain data only: criterion hands parameters to a re-executed test
 * process, where pointers into this one mean nothing. */
struct poke {
    char field[32];
    size_t off, width; /* width 4 or 8 */
    uint64_t value;
    /* Whether the name-taking calls (which look the name up in the index)
     * are run too; the index's own use of the geometry is lib/kind_shm/index.c's. */
    int by_name;
};

#define POKE(f, v, n)                                                                              \
    {                                                                                              \
#f "=" #v, offsetof(struct shl__hdr, f), sizeof(((struct shl__hdr *)0)->f), v, n           \
    }

static const struct poke pokes[] = {
    POKE(nslots, UINT32_C(0xffffffff), 1),     POKE(nslots, 0, 0),
    POKE(value_size, UINT32_C(0xffffffff), 1), POKE(value_size, 0, 1),
    POKE(capacity, UINT32_C(0xffffffff), 0),   POKE(capacity, 0, 0),
    POKE(slots_off, UINT64_C(1) << 40, 0),     POKE(slots_off, 0, 0),
    POKE(slot_stride, UINT64_C(1) << 40, 0),   POKE(slot_stride, 0, 0),
    POKE(index_off, UINT64_C(1) << 40, 0),     POKE(index_size, 0, 0),
    POKE(index_size, UINT32_C(0x80000000), 0), POKE(seg_size, UINT64_C(1) << 50, 1),
};

static uint64_t field_get(const struct shl__hdr *h, const struct poke *p)
{
    const char *a = (const char *)h + p->off;
    if (p->width == 4)
        return __atomic_load_n((const uint32_t *)(const void *)a, __ATOMIC_RELAXED);
    return __atomic_load_n((const uint64_t *)(const void *)a, __ATOMIC_RELAXED);
}

static void field_set(struct shl__hdr *h, const struct poke *p, uint64_t v)
{
    char *a = (char *)h + p->off;
    if (p->width == 4)
        __atomic_store_n((uint32_t *)(void *)a, (uint32_t)v, __ATOMIC_RELAXED);
    else
        __atomic_store_n((uint64_t *)(void *)a, v, __ATOMIC_RELAXED);
}

struct seen {
    unsigned n;
    int bad_slot, found_a, found_b;
    uint64_t tok;
};

/* Slot 0 is lease "a" (held with tok), slot 1 lease "b". */
static int count_entry(void *arg, const shl_lease_detail *d)
{
    struct seen *s = arg;
    s->n++;
    if (d->slot >= CAP)
        s->bad_slot = 1;
    if (d->slot == 0 && strcmp(d->name, "a") == 0 && d->info.token == s->tok)
        s->found_a = 1;
    if (d->slot == 1 && strcmp(d->name, "b") == 0)
        s->found_b = 1;
    return 0;
}

static int append_x(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    if (*len + 1 > cap)
        return 1;
    ((char *)value)[(*len)++] = 'x';
    return 0;
}

static void check_value(shl_table *t, const char *want, const char *what)
{
    char buf[VSIZE];
    size_t len = 0;
    cr_assert_eq(shl_read(t, "a", buf, sizeof buf, &len, NULL), SHL_OK, "%s: read", what);
    cr_assert(len == strlen(want) && memcmp(buf, want, len) == 0, "%s: value %.*s, not %s", what,
              (int)len, buf, want);
}

/* Pokes one field after open, runs every operation that can do without the
 * index (and, when p->by_name, the name-taking ones), then restores the field
 * and checks that everything landed where it belongs. */
static void run_poke(const struct poke *p)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "geom"), CAP, VSIZE, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "a", "o", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "a", "o", tok, "before", 6), SHL_OK);
    uint64_t btok;
    cr_assert_eq(shl_acquire(t, "b", "o", 10 * SEC, &btok), SHL_OK);
    shl_lease *l;
    cr_assert_eq(shl_lease_open(t, "a", "o", &l), SHL_OK);
    shl_table_info before;
    cr_assert_eq(shl_table_info_get(t, &before), SHL_OK);

    struct shl__hdr *h = raw_header(name);
    uint64_t saved = field_get(h, p);
    field_set(h, p, p->value);

    /* A bound lease goes straight to its slot. */
    cr_assert_eq(shl_lease_renew(l, tok, 10 * SEC), SHL_OK, "%s: renew", p->field);
    cr_assert_eq(shl_lease_write(l, tok, "during", 6), SHL_OK, "%s: write", p->field);
    char buf[VSIZE];
    size_t len = 0;
    cr_assert_eq(shl_lease_read(l, buf, sizeof buf, &len, NULL), SHL_OK, "%s: read", p->field);
    cr_assert(len == 6 && memcmp(buf, "during", 6) == 0, "%s: read back", p->field);
    cr_assert_eq(shl_lease_write(l, tok, "during2", 7), SHL_OK, "%s: 2nd write", p->field);
    cr_assert_eq(shl_lease_write(l, tok, buf, VSIZE + 1), SHL_E2BIG, "%s", p->field);
    cr_assert_eq(shl_lease_release(l, tok), SHL_OK, "%s: release", p->field);
    cr_assert_eq(shl_lease_acquire(l, 10 * SEC, &tok, NULL), SHL_OK, "%s: acquire", p->field);

    /* Inspection: at most the capacity read at open, the right slots. */
    struct seen s = {0, 0, 0, 0, tok};
    cr_assert_eq(shl_foreach(t, count_entry, &s), SHL_OK, "%s: foreach", p->field);
    cr_assert_leq(s.n, CAP, "%s: foreach gave %u entries", p->field, s.n);
    cr_assert(!s.bad_slot, "%s: foreach went past the capacity", p->field);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect_slot(t, CAP, &d), SHL_ENOENT, "%s", p->field);
    cr_assert_eq(shl_inspect_slot(t, UINT32_MAX, &d), SHL_ENOENT, "%s", p->field);
    int r0 = shl_inspect_slot(t, 0, &d);
    if (strcmp(p->field, "nslots=0") != 0) { /* no slot in use: nothing to show */
        cr_assert(s.found_a, "%s: foreach lost slot 0", p->field);
        cr_assert(s.found_b, "%s: foreach lost slot 1", p->field);
        cr_assert_eq(r0, SHL_OK, "%s: inspect slot 0", p->field);
        cr_assert_str_eq(d.name, "a", "%s", p->field);
        cr_assert(d.preview_len == 7 && memcmp(d.preview, "during2", 7) == 0, "%s: preview",
                  p->field);
    }
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    cr_assert_eq(ti.capacity, CAP, "%s: info capacity", p->field);
    cr_assert_eq(ti.value_size, VSIZE, "%s: info value size", p->field);
    cr_assert_eq(ti.size, before.size, "%s: info size", p->field);
    cr_assert_leq(ti.used, CAP, "%s: info used", p->field);

    const char *last = "during2";
    if (p->by_name) {
        shl_lease_info in;
        cr_assert_eq(shl_stat(t, "a", &in), SHL_OK, "%s: stat", p->field);
        cr_assert_eq(in.token, tok, "%s: stat token", p->field);
        check_value(t, "during2", p->field);
        cr_assert_eq(shl_write(t, "a", "o", tok, "named", 5), SHL_OK, "%s: write", p->field);
        cr_assert_eq(shl_update(t, "a", "o", tok, append_x, NULL), SHL_OK, "%s", p->field);
        check_value(t, "namedx", p->field);
        cr_assert_eq(shl_inspect(t, "a", &d), SHL_OK, "%s: inspect", p->field);
        cr_assert_eq(d.slot, 0, "%s: inspect slot", p->field);
        last = "namedx";
    }

    /* Put the field back: the table is whole, every change in its place. */
    field_set(h, p, saved);
    munmap(h, sizeof *h);
    shl_lease_close(l);
    /* A second handle sees it all; the first stays open, since liveness is
     * per handle and a lease whose handle is closed shows as orphaned. */
    shl_table *t1 = t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK, "%s: reopen", p->field);
    check_value(t, last, p->field);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "a", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "%s", p->field);
    cr_assert_eq(in.token, tok, "%s", p->field);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK, "%s: check after", p->field);
    shl_close(t);
    shl_close(t1);
    shl_unlink(name);
}

ParameterizedTestParameters(geometry, header_poke_after_open)
{
    return cr_make_param_array(struct poke, (struct poke *)pokes, sizeof pokes / sizeof pokes[0]);
}

ParameterizedTest(const struct poke *p, geometry, header_poke_after_open)
{
    t_guard(30);
    run_poke(p);
}

/* nslots poked to its largest value: foreach must not walk 2^32 slots (it
 * took 20 s before it was bounded by the capacity read at open). The timeout
 * is a guard against that spin, far above what a bounded loop needs. */
Test(geometry, foreach_is_bounded_by_the_capacity)
{
    t_guard(10);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "spin"), CAP, VSIZE, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    for (int i = 0; i < 3; i++) {
        char lease[16];
        snprintf(lease, sizeof lease, "l%d", i);
        cr_assert_eq(shl_acquire(t, lease, "o", 10 * SEC, &tok), SHL_OK);
    }
    struct shl__hdr *h = raw_header(name);
    atomic_store(&h->nslots, UINT32_MAX);
    for (int round = 0; round < 3; round++) {
        struct seen s = {0, 0, 0, 0, 0};
        cr_assert_eq(shl_foreach(t, count_entry, &s), SHL_OK);
        cr_assert_leq(s.n, CAP);
        cr_assert(!s.bad_slot);
    }
    atomic_store(&h->nslots, 3);
    munmap(h, sizeof *h);
    shl_close(t);
    shl_unlink(name);
}
