/*
 * lib/names.c - validation of table, lease and owner names, and the name
 * hash.
 *
 * Lease names and owners are checked eight bytes at a time: every byte is
 * still held to the documented range (SHL_NAME_MAX / SHL_OWNER_MAX bytes of
 * printable ASCII, no space in a lease name), but one word's bytes are
 * judged together (scan()). The name is then hashed with wyhash (version
 * 4.1, seed 0, its published secret), which takes sixteen bytes per
 * multiplication instead of FNV-1a's one byte per multiplication.
 */
#include "internal.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/*
 * The length of s (1..max) when every byte before its NUL is in [lo, 0x7e],
 * else -1. It reads aligned blocks only (16 bytes with SSE2, else 8), from
 * the one holding s[0] to the one holding the NUL (or the byte at index max
 * when there is none): they never cross a page the string does not touch,
 * as glibc's strlen. The bytes of those blocks outside the string are never
 * judged: those before s[0] are set aside, and the first flagged byte ends
 * the scan. The sanitizers cannot know that bytes past the NUL in the same
 * aligned block are never used, so they do not watch these loads (the rest
 * of the library is checked).
 */
#ifdef __SSE2__
__attribute__((no_sanitize("address", "thread"))) static inline int scan(const char *s, unsigned lo,
                                                                         int max)
{
    uintptr_t a = (uintptr_t)s;
    const __m128i *p = (const __m128i *)(a & ~(uintptr_t)15);
    unsigned off = (unsigned)(a & 15);
    int pos = -(int)off; /* index in s of the block's first byte */
    /* Signed bytes: lo - 1 < c < 0x7f holds for exactly the allowed ones
     * (0x80..0xff are negative, NUL is below lo). */
    const __m128i below = _mm_set1_epi8((char)(lo - 1)), top = _mm_set1_epi8(0x7f);
    __m128i v = _mm_load_si128(p);
    unsigned bad = ~(unsigned)_mm_movemask_epi8(
                       _mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmpgt_epi8(top, v))) &
                   (0xffffu << off) & 0xffffu;
    for (;;) {
        if (bad) {
            unsigned i = (unsigned)__builtin_ctz(bad);
            if (((const unsigned char *)p)[i]) /* not the NUL: a byte out of range */
                return -1;
            pos += (int)i;
            return pos >= 1 && pos <= max ? pos : -1;
        }
        pos += 16;
        if (pos > max) /* the byte at index max is not the NUL */
            return -1;
        v = _mm_load_si128(++p);
        bad = ~(unsigned)_mm_movemask_epi8(
                  _mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmpgt_epi8(top, v))) &
              0xffffu;
    }
}
#else
#define ONES  UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* A string read one aligned word at a time. */
typedef uint64_t __attribute__((may_alias)) shl__word;

/* The bytes of w that are NUL or outside [lo, 0x7e] (1 <= lo <= 0x7e), each
 * flagged by its top bit. Exact per byte: no carry or borrow crosses a byte
 * (the top bit is set aside, so each sum stays below 0x100 and each
 * difference above 0). */
static inline uint64_t out_of_range(uint64_t w, unsigned lo)
{
    uint64_t low7 = w & ~HIGHS;
    uint64_t at_least_lo = ((low7 | HIGHS) - lo * ONES) & HIGHS;
    uint64_t above_7e = (low7 + ONES) & HIGHS; /* low7 + 1 >= 0x80: low7 == 0x7f */
    return (w & HIGHS) | above_7e | (~at_least_lo & HIGHS);
}

__attribute__((no_sanitize("address", "thread"))) static inline int scan(const char *s, unsigned lo,
                                                                         int max)
{
    uintptr_t a = (uintptr_t)s;
    const shl__word *p = (const shl__word *)(a & ~(uintptr_t)7);
    int pos = -(int)(a & 7); /* index in s of the word's first byte */
    uint64_t w = *p;
    if (pos) { /* bytes before s: a valid character, 'A' */
        uint64_t before = ~UINT64_C(0) >> (64 + 8 * pos);
        w = (w & ~before) | (UINT64_C(0x4141414141414141) & before);
    }
    for (;;) {
        uint64_t bad = out_of_range(w, lo);
        if (bad) {
            unsigned i = (unsigned)__builtin_ctzll(bad) / 8;
            pos += (int)i;
            if ((w >> (8 * i)) & 0xff) /* not the NUL: a byte out of range */
                return -1;
            return pos >= 1 && pos <= max ? pos : -1;
        }
        pos += 8;
        if (pos > max) /* the byte at index max is not the NUL */
            return -1;
        w = *++p;
    }
}
#endif

/* ------------------------------------------------------------ wyhash 4.1 */

/* The name hash decides where a name sits in the shared index, so every
 * build that opens a table computes this one: wyhash as published (version
 * 4.1: https://github.com/wangyi-fudan/wyhash, commit 77e50f2), seed 0 and
 * its default secret. tests/test_hotpath.c proves it on the published test
 * vectors. Changing it is a layout change (SHL__LAYOUT_VERSION). */
static const uint64_t wy_secret[4] = {UINT64_C(0xa0761d6478bd642f), UINT64_C(0xe7037ed1a0b428db),
                                      UINT64_C(0x8ebc6af09c88c6e3), UINT64_C(0x589965cc75374cc3)};

static inline void wy_mum(uint64_t *a, uint64_t *b)
{
#ifdef __SIZEOF_INT128__
    unsigned __int128 r = (unsigned __int128)*a * *b;
    *a = (uint64_t)r;
    *b = (uint64_t)(r >> 64);
#else
    uint64_t ha = *a >> 32, hb = *b >> 32, la = (uint32_t)*a, lb = (uint32_t)*b;
    uint64_t rh = ha * hb, rm0 = ha * lb, rm1 = hb * la, rl = la * lb, t = rl + (rm0 << 32);
    uint64_t c = t < rl, lo = t + (rm1 << 32);
    c += lo < t;
    *a = lo;
    *b = rh + (rm0 >> 32) + (rm1 >> 32) + c;
#endif
}

static inline uint64_t wy_mix(uint64_t a, uint64_t b)
{
    wy_mum(&a, &b);
    return a ^ b;
}

static inline uint64_t wy_r8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t wy_r4(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* wyhash(key, len, seed) of the reference, reading only key[0..len). */
__attribute__((always_inline)) static inline uint64_t wyhash(const void *key, size_t len,
                                                             uint64_t seed)
{
    const unsigned char *p = key;
    const uint64_t *s = wy_secret;
    uint64_t a, b;
    seed ^= wy_mix(seed ^ s[0], s[1]);
    if (len <= 16) {
        if (len >= 4) {
            size_t q = (len >> 3) << 2;
            a = (wy_r4(p) << 32) | wy_r4(p + q);
            b = (wy_r4(p + len - 4) << 32) | wy_r4(p + len - 4 - q);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = len;
        if (i > 48) {
            uint64_t see1 = seed, see2 = seed;
            do {
                seed = wy_mix(wy_r8(p) ^ s[1], wy_r8(p + 8) ^ seed);
                see1 = wy_mix(wy_r8(p + 16) ^ s[2], wy_r8(p + 24) ^ see1);
                see2 = wy_mix(wy_r8(p + 32) ^ s[3], wy_r8(p + 40) ^ see2);
                p += 48;
                i -= 48;
            } while (i > 48);
            seed ^= see1 ^ see2;
        }
        while (i > 16) {
            seed = wy_mix(wy_r8(p) ^ s[1], wy_r8(p + 8) ^ seed);
            i -= 16;
            p += 16;
        }
        a = wy_r8(p + i - 16);
        b = wy_r8(p + i - 8);
    }
    a ^= s[1];
    b ^= seed;
    wy_mum(&a, &b);
    return wy_mix(a ^ s[0] ^ len, b ^ s[1]);
}

uint64_t shl__wyhash(const void *key, size_t len, uint64_t seed)
{
    return wyhash(key, len, seed);
}

int shl__key_lease(const char *name, struct shl__key *k)
{
    if (!name)
        return SHL_EINVAL;
    int n = scan(name, '!', SHL_NAME_MAX); /* printable, no space */
    if (n < 0)
        return SHL_EINVAL;
    k->s = name;
    k->len = (uint32_t)n;
    k->hash = wyhash(name, (size_t)n, 0);
    return SHL_OK;
}

int shl__owner_len(const char *owner, uint32_t *len)
{
    if (!owner)
        return SHL_EINVAL;
    int n = scan(owner, ' ', SHL_OWNER_MAX); /* printable, space allowed */
    if (n < 0)
        return SHL_EINVAL;
    *len = (uint32_t)n;
    return SHL_OK;
}

static int table_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* "name" or "/name" into out (SHL_TABLE_NAME_MAX + 1 bytes), without '/'. */
int shl__table_name(const char *in, char *out)
{
    if (!in)
        return SHL_EINVAL;
    if (in[0] == '/')
        in++;
    size_t n = 0;
    for (; in[n]; n++)
        if (n == SHL_TABLE_NAME_MAX || !table_char((unsigned char)in[n]))
            return SHL_EINVAL;
    if (n == 0 || in[0] == '.')
        return SHL_EINVAL;
    memcpy(out, in, n + 1);
    return SHL_OK;
}
