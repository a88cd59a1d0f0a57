/*
 * lib/detail.c - the per-thread sentence that says why a call was refused.
 *
 * A code says what kind of failure it was; the detail says which argument
 * and which rule ("owner: 300 bytes, the limit is 63"). It is written only
 * on the refusal path: a call that succeeds never touches it, so the hot
 * path pays nothing, and it is read as errno is, right after the failed
 * call. Every writer here is cold and out of line.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char detail[SHL_DETAIL_MAX];

const char *shl_last_error(void)
{
    return detail;
}

void shl_clear_error(void)
{
    detail[0] = 0;
}

int shl__fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return rc;
}

/* Why a string that scan() refused is not a valid `what` of at most `max`
 * bytes whose lowest allowed byte is `lo`: the first broken rule. */
static int bad_string(const char *what, const char *s, unsigned lo, int max)
{
    if (!s)
        return shl__fail(SHL_EINVAL, "%s: NULL", what);
    if (!s[0])
        return shl__fail(SHL_EINVAL, "%s: empty", what);
    for (int i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == max)
            return shl__fail(SHL_EINVAL, "%s: %zu bytes, the limit is %d", what, strlen(s), max);
        if (c == ' ' && lo > ' ')
            return shl__fail(SHL_EINVAL, "%s: contains a space at byte %d", what, i);
        if (c < lo || c > 0x7e)
            return shl__fail(SHL_EINVAL, "%s: byte 0x%02x at %d is not printable ASCII", what, c,
                             i);
    }
    return shl__fail(SHL_EINVAL, "%s: invalid", what);
}

int shl__bad_owner(const char *owner)
{
    return bad_string("owner", owner, ' ', SHL_OWNER_MAX);
}

int shl__bad_lease(const char *name)
{
    return bad_string("lease", name, '!', SHL_NAME_MAX);
}

int shl__bad_ttl(const char *what, uint64_t ttl_ns)
{
    if (ttl_ns == 0)
        return shl__fail(SHL_EINVAL, "%s: 0 ns, it must be > 0", what);
    return shl__fail(SHL_EINVAL, "%s: %llu ns overflows the table's clock", what,
                     (unsigned long long)ttl_ns);
}

int shl__bad_table_name(const char *name)
{
    if (!name)
        return shl__fail(SHL_EINVAL, "table: NULL");
    size_t n = strlen(name);
    if (n == 0 || (name[0] == '/' && n == 1))
        return shl__fail(SHL_EINVAL, "table: empty");
    if (n > SHL_TABLE_NAME_MAX + 1)
        return shl__fail(SHL_EINVAL, "table: %zu bytes, the limit is %d", n, SHL_TABLE_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '/' || c == '.' || c == '_' || c == '-' || (c >= '0' && c <= '9') ||
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        if (c == ' ')
            return shl__fail(SHL_EINVAL, "table: contains a space at byte %zu", i);
        return shl__fail(SHL_EINVAL,
                         "table: byte '%c' (0x%02x) at %zu is not a letter, digit, '.', '_' or '-'",
                         c > ' ' && c < 0x7f ? c : '?', c, i);
    }
    return shl__fail(SHL_EINVAL,
                     "table: \"%s\" has an empty, \".\" or \"..\" component, or starts with '.'",
                     name);
}

/* An acquire's owner, ttl or token pointer was refused: which one. */
int shl__bad_acquire(const char *owner, uint64_t ttl_ns, const uint64_t *token)
{
    uint32_t olen;
    if (shl__owner_len(owner, &olen) != SHL_OK)
        return SHL_EINVAL;
    if (ttl_ns == 0)
        return shl__bad_ttl("ttl", 0);
    if (!token)
        return shl__fail(SHL_EINVAL, "token: NULL, there is nowhere to put the token");
    return shl__fail(SHL_EINVAL, "invalid argument");
}

int shl__bad_token(void)
{
    return shl__fail(SHL_EINVAL, "token: 0 is never a lease's token (they start at 1)");
}
