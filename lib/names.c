/*
 * lib/names.c - validation of table, lease and owner names.
 *
 * Lease names are hashed in the same pass that validates them, so that the
 * hot path reads each byte once.
 */
#include "internal.h"

/* FNV-1a's step from an offset basis that is not FNV's published one
 * (14695981039346656037 with its last digit lost). Any basis hashes as well,
 * and where a name sits in the shared index depends on this one, so it stays:
 * changing it is a layout change. tests/test_hotpath.c pins it. */
#define FNV_OFFSET UINT64_C(1469598103934665603)
#define FNV_PRIME  UINT64_C(1099511628211)

int shl__key_lease(const char *name, struct shl__key *k)
{
    if (!name)
        return SHL_EINVAL;
    uint64_t h = FNV_OFFSET;
    uint32_t n = 0;
    for (; name[n]; n++) {
        unsigned char c = (unsigned char)name[n];
        if (n == SHL_NAME_MAX || c <= ' ' || c > '~')
            return SHL_EINVAL;
        h = (h ^ c) * FNV_PRIME;
    }
    if (n == 0)
        return SHL_EINVAL;
    k->s = name;
    k->len = n;
    k->hash = h;
    return SHL_OK;
}

int shl__owner_len(const char *owner, uint32_t *len)
{
    if (!owner)
        return SHL_EINVAL;
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
