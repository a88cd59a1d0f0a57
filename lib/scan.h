/*
 * lib/scan.h - the validation scan of lease names and owners.
 *
 * Lease names and owners are checked sixteen bytes at a time (eight without
 * SSE2): every byte is still held to the documented range (SHL_NAME_MAX /
 * SHL_OWNER_MAX bytes of printable ASCII, no space in a lease name), but one
 * block's bytes are judged together. Inline, so that the by-name calls check
 * their owner without a call.
 */
#ifndef SHL_SCAN_H
#define SHL_SCAN_H

#include <stdint.h>

#include "shmlease.h"

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

/* lib/detail.c: SHL_EINVAL, with the rule an owner broke as the detail. */
int shl__bad_owner(const char *owner) __attribute__((cold, visibility("hidden")));

/* The length of a valid owner (printable, space allowed), SHL_EINVAL (with
 * a detail) if not valid. */
static inline int shl__owner_len(const char *owner, uint32_t *len)
{
    int n = owner ? scan(owner, ' ', SHL_OWNER_MAX) : -1;
    if (n < 0) {
        shl__bad_owner(owner);
        return SHL_EINVAL;
    }
    *len = (uint32_t)n;
    return SHL_OK;
}

#endif
