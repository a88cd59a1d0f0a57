/*
 * lib/names.c - validation of table, lease and owner names, and the name
 * hash.
 *
 * Lease names and owners are checked a block at a time (scan.h). The name
 * is then hashed with wyhash (version 4.1, seed 0, its published secret),
 * which takes sixteen bytes per multiplication instead of FNV-1a's one byte
 * per multiplication.
 */
#include "internal.h"
#include "scan.h"

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
        return shl__bad_lease(name);
    int n = scan(name, '!', SHL_NAME_MAX); /* printable, no space */
    if (n < 0)
        return shl__bad_lease(name);
    k->s = name;
    k->len = (uint32_t)n;
    k->hash = wyhash(name, (size_t)n, 0);
    return SHL_OK;
}

static int table_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* A path name: '/' then components of table characters joined by '/', at
 * most SHL_TABLE_NAME_MAX bytes in all. No empty, "." or ".." component
 * (the path means what it says, and says it once); the file's own name
 * does not start with '.'. */
static int table_path(const char *in, char *out)
{
    size_t n = 1, start = 1;
    for (;; n++) {
        unsigned char c = (unsigned char)in[n];
        if (c == '/' || c == 0) {
            size_t len = n - start;
            if (len == 0 || (in[start] == '.' && (len == 1 || (len == 2 && in[start + 1] == '.'))))
                return SHL_EINVAL;
            if (c == 0)
                break;
            start = n + 1;
        } else if (!table_char(c)) {
            return SHL_EINVAL;
        }
        if (n == SHL_TABLE_NAME_MAX)
            return SHL_EINVAL;
    }
    if (in[start] == '.')
        return SHL_EINVAL;
    memcpy(out, in, n + 1);
    return SHL_OK;
}

/* "name" or "/name" (a table in /dev/shm) into out (SHL_TABLE_NAME_MAX + 1
 * bytes) without '/'; "/dir/.../name" (a table at that path) whole. */
static int table_name(const char *in, char *out)
{
    if (in[0] == '/' && strchr(in + 1, '/'))
        return table_path(in, out);
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

int shl__table_name(const char *in, char *out)
{
    if (!in || table_name(in, out) != SHL_OK)
        return shl__bad_table_name(in);
    return SHL_OK;
}
