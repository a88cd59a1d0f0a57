/*
 * tests/test_hotpath.c - what the fast paths must keep exactly: name and
 * owner validation and the name hash, lookups by contents (never by the
 * pointer), the owner bytes and history prefix written on acquire, and the
 * wake word.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../lib/kind_shm/shm_kind.h"
#include "common.h"

/*
 * The reference is written from the rules as lib/shmlease.h states them, not
 * from lib/names.c: a lease name is 1..SHL_NAME_MAX bytes of printable ASCII
 * without space, an owner 1..SHL_OWNER_MAX bytes of printable ASCII with
 * space. The allowed bytes are spelled out below one by one, so a wrong
 * range in the code cannot be repeated here by copying it.
 */
static const char printable_ascii[] = " !\"#$%&'()*+,-./0123456789:;<=>?"
                                      "@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_"
                                      "`abcdefghijklmnopqrstuvwxyz{|}~";

static bool ref_allowed(const char *s, bool space_ok, size_t max)
{
    size_t n = strlen(s);
    if (n < 1 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' && !space_ok)
            return false;
        if (!strchr(printable_ascii, s[i]))
            return false;
    }
    return true;
}

/*
 * The name hash decides where a name sits in the shared index, so every
 * build that opens a table must compute the same one: wyhash version 4.1
 * with its default secret, seed 0 (lib/names.c). shl__wyhash is proven on
 * the published test vectors (hash_known_answers); a lease name's hash must
 * be shl__wyhash of its bytes.
 */
static uint64_t ref_hash(const char *s)
{
    return shl__wyhash(s, strlen(s), 0);
}

static void same_as_reference(const char *s)
{
    struct shl__key k;
    uint32_t ol = 0;
    bool name_ok = ref_allowed(s, false, SHL_NAME_MAX);
    bool owner_ok = ref_allowed(s, true, SHL_OWNER_MAX);
    int a = shl__key_lease(s, &k);
    cr_assert_eq(a, name_ok ? SHL_OK : SHL_EINVAL, "lease name validity differs for \"%s\"", s);
    if (a == SHL_OK) {
        cr_assert_eq(k.len, strlen(s));
        cr_assert_eq(k.s, s);
        cr_assert_eq(k.hash, ref_hash(s), "hash differs for \"%s\"", s);
    }
    a = shl__owner_len(s, &ol);
    cr_assert_eq(a, owner_ok ? SHL_OK : SHL_EINVAL, "owner validity differs for \"%s\"", s);
    if (a == SHL_OK)
        cr_assert_eq(ol, strlen(s));
}

/* Known answers written by hand: what the documented rules say of each. */
Test(hotpath, validation_known_answers)
{
    static const struct {
        const char *s;
        bool name_ok, owner_ok;
    } v[] = {
        {"a", true, true},
        {"!", true, true},
        {"~", true, true},
        {"jobs/nightly-backup", true, true},
        {"worker 7", false, true},
        {" ", false, true},
        {"a ", false, true},
        {"\x7f", false, false},
        {"tab\there", false, false},
        {"\x1b[31m", false, false},
        {"caf\xc3\xa9", false, false},
        {"\x80", false, false},
        {"\xff", false, false},
        {"", false, false},
        /* 63 bytes: the longest allowed */
        {"123456789012345678901234567890123456789012345678901234567890123", true, true},
        /* 64 bytes */
        {"1234567890123456789012345678901234567890123456789012345678901234", false, false},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct shl__key k;
        uint32_t ol;
        cr_assert_eq(shl__key_lease(v[i].s, &k), v[i].name_ok ? SHL_OK : SHL_EINVAL,
                     "lease name \"%s\"", v[i].s);
        cr_assert_eq(shl__owner_len(v[i].s, &ol), v[i].owner_ok ? SHL_OK : SHL_EINVAL,
                     "owner \"%s\"", v[i].s);
    }
    struct shl__key k;
    uint32_t ol;
    cr_assert_eq(shl__key_lease(NULL, &k), SHL_EINVAL);
    cr_assert_eq(shl__owner_len(NULL, &ol), SHL_EINVAL);
}

/* wyhash 4.1's published test vectors (its test_vector.cpp: input, seed,
 * hash), which cover every length class of the function (0, 1..3, 4..16,
 * 17..48, above 48); then the hash of lease names, whatever their
 * alignment, is that of their bytes. */
Test(hotpath, hash_known_answers)
{
    static const struct {
        const char *s;
        uint64_t seed, hash;
    } v[] = {
        {"", 0, UINT64_C(0x0409638ee2bde459)},
        {"a", 1, UINT64_C(0xa8412d091b5fe0a9)},
        {"abc", 2, UINT64_C(0x32dd92e4b2915153)},
        {"message digest", 3, UINT64_C(0x8619124089a3a16b)},
        {"abcdefghijklmnopqrstuvwxyz", 4, UINT64_C(0x7a43afb61d7f5f40)},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 5,
         UINT64_C(0xff42329b90e50d58)},
        {"1234567890123456789012345678901234567890123456789012345678901234567890123456789"
         "0",
         6, UINT64_C(0xc39cab13b115aad3)},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        cr_assert_eq(shl__wyhash(v[i].s, strlen(v[i].s), v[i].seed), v[i].hash, "wyhash of \"%s\"",
                     v[i].s);
    char buf[96];
    const char *name = "jobs/nightly-backup";
    for (size_t off = 0; off < 16; off++) {
        strcpy(buf + off, name);
        struct shl__key k;
        cr_assert_eq(shl__key_lease(buf + off, &k), SHL_OK);
        cr_assert_eq(k.hash, shl__wyhash(name, strlen(name), 0), "alignment %zu", off);
        cr_assert_eq(k.len, strlen(name));
    }
}

/* Names and owners are read a block at a time: every alignment, and every
 * byte class at each position, must give what the rules say. */
Test(hotpath, validation_every_alignment)
{
    static const unsigned char cls[] = {0x01, 0x1f, ' ', '!', 'a', '~', 0x7f, 0x80, 0xc3, 0xff};
    char buf[112];
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 1; n <= 66; n++) {
            char *s = buf + off;
            memset(buf, 'x', sizeof buf);
            memset(s, 'a', n);
            s[n] = 0;
            same_as_reference(s);
            for (size_t pos = 0; pos < n; pos++) {
                for (size_t c = 0; c < sizeof cls; c++) {
                    s[pos] = (char)cls[c];
                    same_as_reference(s);
                }
                s[pos] = 'a';
            }
        }
}

/* A name or owner that ends at the last byte of a page, followed by a page
 * that cannot be read: the block reads must stop in the string's own page
 * (a read past it would crash the test). Every length, so every alignment
 * of the end. */
Test(hotpath, validation_stops_at_the_page_end)
{
    t_guard(30);
    long pg = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
    for (size_t n = 1; n <= 63; n++) {
        char *s = m + pg - 1 - n;
        memset(s, 'q', n);
        s[n] = 0;
        struct shl__key k;
        uint32_t ol;
        cr_assert_eq(shl__key_lease(s, &k), SHL_OK, "length %zu", n);
        cr_assert_eq(k.len, n);
        cr_assert_eq(k.hash, ref_hash(s));
        cr_assert_eq(shl__owner_len(s, &ol), SHL_OK);
        cr_assert_eq(ol, n);
        s[n - 1] = ' '; /* an owner may end in a space; a name may not */
        cr_assert_eq(shl__key_lease(s, &k), SHL_EINVAL);
        cr_assert_eq(shl__owner_len(s, &ol), SHL_OK);
    }
    munmap(m, (size_t)pg * 2);
}

/* Every byte value at every position of every length around the word
 * boundaries, and the length limits. */
Test(hotpath, validation_matches_documented_rules)
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
            const struct shl__event *e = &shl__slot_hist(s)[(s->hist_next - 1) % t->geom.history];
            /* The whole owner, then its NUL. */
            cr_assert_eq(memcmp(e->owner, owner, lens[i]), 0, "len %zu step %d", lens[i], step);
            cr_assert_eq(e->owner[lens[i]], 0, "len %zu step %d", lens[i], step);
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
