/*
 * tests/test_hotpath.c - what the fast paths must keep exactly: name and
 * owner validation and the name hash, lookups by contents (never by the
 * pointer), the owner bytes and history prefix written on acquire, and the
 * wake word.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "../lib/internal.h"
#include "common.h"

/* The straightforward definitions, one byte at a time. */
static int ref_key(const char *name, uint32_t *len, uint64_t *hash)
{
    uint64_t h = UINT64_C(1469598103934665603);
    uint32_t n = 0;
    for (; name[n]; n++) {
        unsigned char c = (unsigned char)name[n];
        if (n == SHL_NAME_MAX || c <= ' ' || c > '~')
            return SHL_EINVAL;
        h = (h ^ c) * UINT64_C(1099511628211);
    }
    if (n == 0)
        return SHL_EINVAL;
    *len = n;
    *hash = h;
    return SHL_OK;
}

static int ref_owner(const char *owner, uint32_t *len)
{
    uint32_t n = 0;
    for (; owner[n]; n++) {
        unsigned char c = (unsigned char)owner[n];
        if (n == SHL_OWNER_MAX || c < ' ' || c > '~')
            return SHL_EINVAL;
    }
    if (n == 0)
        return SHL_EINVAL;
    *len = n;
    return SHL_OK;
}

static void same_as_reference(const char *s)
{
    struct shl__key k;
    uint32_t rl = 0, ol = 0, rol = 0;
    uint64_t rh = 0;
    int a = shl__key_lease(s, &k), b = ref_key(s, &rl, &rh);
    cr_assert_eq(a, b, "lease name validity differs for \"%s\"", s);
    if (a == SHL_OK) {
        cr_assert_eq(k.len, rl);
        cr_assert_eq(k.hash, rh, "hash differs for \"%s\"", s);
    }
    a = shl__owner_len(s, &ol);
    b = ref_owner(s, &rol);
    cr_assert_eq(a, b, "owner validity differs for \"%s\"", s);
    if (a == SHL_OK)
        cr_assert_eq(ol, rol);
}

/* Every byte value at every position of every length around the word
 * boundaries, and the length limits. */
Test(hotpath, validation_matches_bytewise_definition)
{
    static const size_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 62, 63, 64, 65, 70};
    char buf[80];
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        memset(buf, 'a', n);
        buf[n] = 0;
        same_as_reference(buf);
        for (size_t pos = 0; pos < n; pos++) {
            for (int c = 1; c < 256; c++) {
                buf[pos] = (char)c;
                same_as_reference(buf);
            }
            buf[pos] = 'a';
        }
    }
    same_as_reference("");
    struct shl__key k;
    uint32_t ol;
    cr_assert_eq(shl__key_lease(NULL, &k), SHL_EINVAL);
    cr_assert_eq(shl__owner_len(NULL, &ol), SHL_EINVAL);
}

/* The same buffer with other contents must never reach the old slot. */
Test(hotpath, lookup_follows_contents_not_pointer)
{
    char name[96];
    t_name(name, sizeof name, "hint");
    shl_table *t = t_create(name, 8, 16, SHL_CLOCK_MANUAL);
    char buf[80];
    uint64_t tk;
    strcpy(buf, "alpha");
    cr_assert_eq(shl_acquire(t, buf, "o", 100, &tk), SHL_OK);
    cr_assert_eq(tk, 1);
    cr_assert_eq(shl_acquire(t, buf, "o", 100, &tk), SHL_EBUSY);
    strcpy(buf, "alph"); /* a prefix */
    cr_assert_eq(shl_read(t, buf, NULL, 0, NULL, NULL), SHL_ENOENT);
    cr_assert_eq(shl_renew(t, buf, "o", 1, 10), SHL_ELOST);
    strcpy(buf, "alphabet"); /* longer */
    cr_assert_eq(shl_read(t, buf, NULL, 0, NULL, NULL), SHL_ENOENT);
    cr_assert_eq(shl_acquire(t, buf, "o", 100, &tk), SHL_OK);
    cr_assert_eq(tk, 1, "a new lease, not alpha's");
    strcpy(buf, "alpha beta"); /* invalid, in a buffer that held a valid name */
    cr_assert_eq(shl_acquire(t, buf, "o", 100, &tk), SHL_EINVAL);
    cr_assert_eq(shl_read(t, buf, NULL, 0, NULL, NULL), SHL_EINVAL);
    strcpy(buf, "alpha");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, buf, &in), SHL_OK);
    cr_assert_eq(in.token, 1);
    cr_assert_eq(shl_release(t, buf, "o", 1), SHL_OK);
    /* Another pointer with the same contents finds the same lease. */
    cr_assert_eq(shl_acquire(t, "alpha", "o", 100, &tk), SHL_OK);
    cr_assert_eq(tk, 2);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    cr_assert_eq(ti.used, 2);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

static struct shl__slot *slot_of(shl_table *t, const char *lease)
{
    struct shl__slot *s = NULL;
    cr_assert_eq(shl__lookup(t, lease, &s), SHL_OK);
    return s;
}

/* After acquire, renew and release by owners of every length class: the
 * owner field has the owner and a NUL at owner_len, and the history entry's
 * prefix is exactly the first 16 bytes, NUL-padded, even when a longer owner
 * wrote the same fields before. */
Test(hotpath, owner_bytes_and_history_prefix)
{
    char name[96];
    t_name(name, sizeof name, "owner");
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MANUAL);
    static const size_t lens[] = {63, 1, 17, 7, 16, 8, 15, 9, 62, 2};
    const char *lease = "prefix-test";
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char owner[64];
        for (size_t j = 0; j < lens[i]; j++)
            owner[j] = (char)('A' + (j + i) % 26);
        owner[lens[i]] = 0;
        uint64_t tk;
        cr_assert_eq(shl_acquire(t, lease, owner, 100, &tk), SHL_OK);
        struct shl__slot *s = slot_of(t, lease);
        for (int step = 0; step < 3; step++) {
            if (step == 1)
                cr_assert_eq(shl_renew(t, lease, owner, tk, 100), SHL_OK);
            if (step == 2)
                cr_assert_eq(shl_release(t, lease, owner, tk), SHL_OK);
            cr_assert_eq(s->cur.owner_len, lens[i]);
            cr_assert_eq(memcmp(s->cur.owner, owner, lens[i]), 0);
            cr_assert_eq(s->cur.owner[lens[i]], 0);
            const struct shl__event *e = &s->hist[(s->hist_next - 1) % SHL__HIST_LEN];
            char want[SHL__HIST_OWNER] = {0};
            memcpy(want, owner, lens[i] < sizeof want ? lens[i] : sizeof want);
            cr_assert_eq(memcmp(e->owner, want, sizeof want), 0, "len %zu step %d", lens[i], step);
            cr_assert_eq(e->token, tk);
            cr_assert_eq(e->op, step == 0   ? SHL__OP_ACQUIRE
                                : step == 1 ? SHL__OP_RENEW
                                            : SHL__OP_RELEASE);
        }
        shl_lease_info in;
        cr_assert_eq(shl_stat(t, lease, &in), SHL_OK);
        cr_assert_str_eq(in.owner, owner);
    }
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* Every release moves the wake word by exactly one; a refused one does not. */
Test(hotpath, release_bumps_wake_once)
{
    char name[96];
    t_name(name, sizeof name, "wake");
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MANUAL);
    uint64_t tk;
    cr_assert_eq(shl_acquire(t, "w", "o", 100, &tk), SHL_OK);
    struct shl__slot *s = slot_of(t, "w");
    uint32_t w0 = atomic_load(&s->wake);
    for (uint32_t i = 1; i <= 5; i++) {
        cr_assert_eq(shl_release(t, "w", "o", tk), SHL_OK);
        cr_assert_eq(atomic_load(&s->wake), w0 + i);
        cr_assert_eq(shl_release(t, "w", "o", tk), SHL_ELOST);
        cr_assert_eq(atomic_load(&s->wake), w0 + i);
        cr_assert_eq(shl_acquire(t, "w", "o", 100, &tk), SHL_OK);
    }
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
