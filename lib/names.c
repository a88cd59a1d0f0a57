/*
 * lib/names.c - validation of table, lease and owner names.
 *
 * Names are measured with strnlen and checked eight bytes at a time; the
 * lease name's hash (FNV-1a, part of the segment format: it places names in
 * the index) is then one multiply per byte.
 */
#include "internal.h"

#define FNV_OFFSET UINT64_C(1469598103934665603)
#define FNV_PRIME UINT64_C(1099511628211)

/* Bytes of a word, broadcast. */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* True iff some byte of w is < lo or > hi (exact: lo <= 128, hi <= 127; see
 * "Bit Twiddling Hacks", hasless/hasmore). Eight characters per step instead
 * of two compares per byte. */
static inline int word_outside(uint64_t w, unsigned lo, unsigned hi)
{
    uint64_t less = (w - ONES * lo) & ~w & HIGHS;
    uint64_t more = ((w + ONES * (127 - hi)) | w) & HIGHS;
    return (less | more) != 0;
}

/* True iff every one of the n bytes of s is within [lo, hi]. From eight
 * bytes on, whole words only: the last one overlaps the one before it. */
static int all_within(const char *s, size_t n, unsigned lo, unsigned hi)
{
    uint64_t w;
    if (n < 8) {
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            bad |= c < lo || c > hi;
        }
        return !bad;
    }
    int bad = 0;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&w, s + i, 8);
        bad |= word_outside(w, lo, hi);
    }
    memcpy(&w, s + n - 8, 8);
    return !(bad | word_outside(w, lo, hi));
}

int shl__key_lease(const char *name, struct shl__key *k)
{
    if (!name)
        return SHL_EINVAL;
    size_t n = strnlen(name, SHL_NAME_MAX + 1);
    if (n == 0 || n > SHL_NAME_MAX || !all_within(name, n, '!', '~'))
        return SHL_EINVAL;
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)name[i]) * FNV_PRIME;
    k->s = name;
    k->len = (uint32_t)n;
    k->hash = h;
    return SHL_OK;
}

int shl__owner_len(const char *owner, uint32_t *len)
{
    if (!owner)
        return SHL_EINVAL;
    size_t n = strnlen(owner, SHL_OWNER_MAX + 1);
    if (n == 0 || n > SHL_OWNER_MAX || !all_within(owner, n, ' ', '~'))
        return SHL_EINVAL;
    *len = (uint32_t)n;
    return SHL_OK;
}

static int table_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* "name" or "/name" into out (SHL_TABLE_NAME_MAX + 1 bytes), without '/'.
 * Names ending in ".init" are the creator's private files: refused. */
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
    if (n >= 5 && memcmp(in + n - 5, ".init", 5) == 0)
        return SHL_EINVAL;
    memcpy(out, in, n + 1);
    return SHL_OK;
}
