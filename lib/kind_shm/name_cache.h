/*
 * lib/kind_shm/name_cache.h - the slots of the lease names this thread used last.
 *
 * A by-name call validates the name, hashes it and probes the index before
 * it can even start to lock the slot: a chain of dependent steps (scan ->
 * length -> hash -> bucket -> slot) that the lock waits for. Most programs
 * name the same few leases over and over, so each thread keeps, for the
 * last few names it used, the bytes of the name and the slot they found.
 * A name equal byte for byte (its NUL included) to a cached one is that
 * name: it passed validation when it was cached, and a published name never
 * moves to another slot except by repair's retirement, which the lookup
 * tests (a retired slot is a miss). Entries are keyed by the handle's serial
 * number, unique in the process, so a closed handle's entries never match
 * a later handle, even at the same address.
 *
 * The comparison reads the caller's string in aligned 16-byte blocks and
 * stops at the first block holding its NUL, as the validation scan does
 * (names.c), so it never touches a page the string does not.
 */
#ifndef SHL_NAME_CACHE_H
#define SHL_NAME_CACHE_H

#include "shm_kind.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SHL__NC_WAYS 8

struct shl__nc_entry {
    uint64_t serial; /* the handle's, 0: empty */
    struct shl__slot *s;
    uint32_t len; /* the name's */
    /* The name at byte 16 and its NUL: the comparison loads the 16 bytes
     * lined up with each aligned block of the caller's string, from up to 15
     * bytes before the name to up to 15 after its NUL, and judges only the
     * name's bytes and its NUL. */
    unsigned char buf[16 + SHL__NAME_MAX + 1 + 16];
};

extern __thread struct shl__nc_entry shl__nc[SHL__NC_WAYS] SHL__HIDDEN;

static inline unsigned shl__nc_way(const char *name)
{
    uintptr_t a = (uintptr_t)name;
    return (unsigned)((a >> 4) ^ (a >> 7)) & (SHL__NC_WAYS - 1);
}

static inline int shl__nc_retired(const struct shl__slot *s)
{
    return SHL__LD(s->cur.state) == SHL__ST_RETIRED;
}

#ifdef __SSE2__
/* Whether the string at name equals e's name, its NUL included. Blocks
 * before the one holding the name's end must equal in full: they hold no
 * NUL, so the string goes on into the next block, which may then be read.
 * In the last block, the bytes up to the end (the NUL) must equal. */
__attribute__((no_sanitize("address", "thread"))) static inline int
shl__nc_same(const struct shl__nc_entry *e, const char *name)
{
    uintptr_t a = (uintptr_t)name;
    const __m128i *p = (const __m128i *)(a & ~(uintptr_t)15);
    unsigned off = (unsigned)(a & 15), end = off + e->len; /* the NUL, from *p */
    const unsigned char *c = e->buf + 16 - off;            /* lined up with *p */
    unsigned keep = 0xffffu << off & 0xffffu; /* the first block's bytes of the string */
    for (; end >= 16; end -= 16, keep = 0xffffu) {
        unsigned eq = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_load_si128(p++), _mm_loadu_si128((const __m128i *)(const void *)c)));
        if ((eq & keep) != keep)
            return 0;
        c += 16;
    }
    unsigned need = keep & ((2u << end) - 1);
    unsigned eq = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_load_si128(p), _mm_loadu_si128((const __m128i *)(const void *)c)));
    return (eq & need) == need;
}

/* The cached slot of `name` in t, or NULL. */
static inline struct shl__slot *shl__nc_find(const shl_table *t, const char *name)
{
    const struct shl__nc_entry *e = &shl__nc[shl__nc_way(name)];
    if (e->serial != t->serial || !shl__nc_same(e, name) || shl__nc_retired(e->s))
        return NULL;
    return e->s;
}
#else
static inline struct shl__slot *shl__nc_find(const shl_table *t, const char *name)
{
    (void)t;
    (void)name;
    return NULL; /* without SSE2 every lookup validates, hashes and probes */
}
#endif

/* Remembers that `name` (k, valid) is slot s of t, in this thread. */
void shl__nc_put(const shl_table *t, const struct shl__key *k, struct shl__slot *s) SHL__HIDDEN;

/* Empties this thread's cache: for tests that damage the index by hand and
 * then look names up as a process that never used them would. */
void shl__nc_forget(void) SHL__HIDDEN;

/* shl__lookup() and shl__lookup_or_add() (index.c) through the cache. */
static inline int shl__lookup(shl_table *t, const char *name, struct shl__slot **out)
{
    if (name && (*out = shl__nc_find(t, name)))
        return SHL_OK;
    return shl__index_lookup(t, name, 0, out);
}

static inline int shl__lookup_or_add(shl_table *t, const char *name, struct shl__slot **out)
{
    if (name && (*out = shl__nc_find(t, name)))
        return SHL_OK;
    return shl__index_lookup(t, name, 1, out);
}

#endif
