/*
 * lib/etcd_name.c - parsing etcd table names, strictly.
 *
 *   etcd://HOST:PORT[,HOST:PORT...]/TABLE     etcds://... for TLS
 *
 * HOST is a DNS name or IPv4 address ([A-Za-z0-9.-], not starting with '-'
 * or '.') or an IPv6 address in brackets; PORT is 1..65535 in decimal
 * without leading zeros; TABLE is one or more segments of [A-Za-z0-9._-]
 * (not starting with '.') joined by '/'. Anything else is SHL_EINVAL, so a
 * typo never reaches a cluster as some other table. Built with or without
 * etcd support: without it a well-formed name is SHL_ENOTSUP at open.
 */
#include <string.h>

#include "internal.h"

#define ETCD_SCHEME  "etcd://"
#define ETCDS_SCHEME "etcds://"

int shl__is_etcd_name(const char *name)
{
    return name && (strncmp(name, ETCD_SCHEME, sizeof ETCD_SCHEME - 1) == 0 ||
                    strncmp(name, ETCDS_SCHEME, sizeof ETCDS_SCHEME - 1) == 0);
}

static int host_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-';
}

static int v6_char(unsigned char c)
{
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
           c == '.';
}

static int table_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* One "HOST:PORT" at s; its length, or 0 when it is not well formed. */
static size_t endpoint_len(const char *s)
{
    size_t i = 0;
    if (s[0] == '[') {
        for (i = 1; v6_char((unsigned char)s[i]); i++)
            ;
        if (i == 1 || s[i] != ']')
            return 0;
        i++;
    } else {
        for (; host_char((unsigned char)s[i]); i++)
            ;
        if (i == 0 || s[0] == '-' || s[0] == '.')
            return 0;
    }
    if (s[i++] != ':')
        return 0;
    size_t p0 = i;
    unsigned long port = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        port = port * 10 + (unsigned long)(s[i] - '0');
        if (port > 65535)
            return 0;
    }
    if (i == p0 || port == 0 || (s[p0] == '0'))
        return 0;
    return i;
}

static int table_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SHL_TABLE_NAME_MAX)
        return 0;
    int seg_start = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '/') {
            if (seg_start) /* an empty segment, or a leading '/' */
                return 0;
            seg_start = 1;
            continue;
        }
        if (!table_char(c) || (seg_start && c == '.'))
            return 0;
        seg_start = 0;
    }
    return !seg_start; /* no trailing '/' */
}

int shl__etcd_parse(const char *name, struct shl__etcd_name *out)
{
    if (!shl__is_etcd_name(name))
        return SHL_EINVAL;
    memset(out, 0, sizeof *out);
    out->tls = name[4] == 's';
    const char *s = name + (out->tls ? sizeof ETCDS_SCHEME : sizeof ETCD_SCHEME) - 1;
    size_t at = 0;
    for (;;) {
        size_t n = endpoint_len(s);
        if (n == 0 || at + n + 1 >= sizeof out->endpoints)
            return shl__fail(SHL_EINVAL,
                             n ? "table: the endpoints are more than %zu bytes"
                               : "table: an empty or malformed endpoint at byte %zu of the name",
                             n ? sizeof out->endpoints - 1 : (size_t)(s - name));
        memcpy(out->endpoints + at, s, n);
        at += n;
        s += n;
        if (*s != ',')
            break;
        out->endpoints[at++] = ',';
        s++;
    }
    if (*s != '/')
        return shl__fail(SHL_EINVAL,
                         "table: '%c' at byte %zu, where '/' or ',' should follow "
                         "HOST:PORT",
                         *s ? *s : '?', (size_t)(s - name));
    if (!table_ok(s + 1))
        return shl__fail(SHL_EINVAL,
                         "table: \"%s\" is not 1 to %d bytes of components of [A-Za-z0-9._-] "
                         "joined by '/', none empty or starting with '.'",
                         s + 1, SHL_TABLE_NAME_MAX);
    strcpy(out->table, s + 1);
    return SHL_OK;
}
