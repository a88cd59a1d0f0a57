/*
 * lib/kind_shm/name_cache.c - filling this thread's cache of lease names (see
 * name_cache.h) and numbering handles for it.
 */
#include "name_cache.h"

__thread struct shl__nc_entry shl__nc[SHL__NC_WAYS];

void shl__nc_put(const shl_table *t, const struct shl__key *k, struct shl__slot *s)
{
    const char *src = k->s;
    uint32_t n = k->len; /* 1..SHL__NAME_MAX */
    uint64_t serial = t->serial;
    struct shl__nc_entry *e = &shl__nc[shl__nc_way(src)];
    if (e->serial == serial && e->s == s)
        return; /* the same name at another address of the same way */
    /* The comparison needs the name and its NUL; the bytes around them are
     * never judged (name_cache.h). Words, then the last 8 bytes over them. */
    unsigned char *d = e->buf + 16;
    if (n >= 8) {
        for (uint32_t i = 0; i + 8 < n; i += 8)
            memcpy(d + i, src + i, 8);
        memcpy(d + n - 8, src + n - 8, 8);
    } else {
        for (uint32_t i = 0; i < n; i++)
            d[i] = (unsigned char)src[i];
    }
    d[n] = 0;
    e->len = n;
    e->s = s;
    e->serial = serial;
}

void shl__nc_forget(void)
{
    memset(shl__nc, 0, sizeof shl__nc);
}
