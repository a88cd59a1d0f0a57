/*
 * lib/index.c - the name index: open addressing with linear probing.
 *
 * index_size is a power of two of at least twice the capacity, so the load
 * factor stays at or below 1/2 and an expected lookup probes about 1.5
 * buckets. Names are never removed: a bucket goes from 0 to slot + 1 once,
 * with a release store after the slot's name is complete. Lookups take no
 * lock; adding takes the table lock.
 *
 * Adding is crash-safe: the name and the slot's mutex are initialised in an
 * unpublished slot; then (add_slot, add_bucket) is recorded and armed; then
 * the bucket and nslots are stored; then the intent is disarmed. A dead
 * adder's armed intent is rolled forward by shl__index_repair(); an unarmed
 * one left only an unpublished slot, which the next adder reinitialises.
 */
#include "internal.h"

static int name_is(const struct shl__slot *s, const struct shl__key *k)
{
    return s->name_len == k->len && memcmp(s->name, k->s, k->len) == 0;
}

/* Bucket index where `k` is, or where it would go (empty bucket). Returns
 * the slot (or NULL). Bounded by index_size probes even on a damaged index. */
static struct shl__slot *probe(const struct shl__hdr *h, const struct shl__key *k, uint32_t *at)
{
    _Atomic uint32_t *idx = shl__index(h);
    uint32_t mask = h->index_size - 1;
    uint32_t b = (uint32_t)k->hash & mask;
    for (uint32_t n = 0; n < h->index_size; n++, b = (b + 1) & mask) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v == 0) {
            *at = b;
            return NULL;
        }
        if (v - 1 < h->capacity) {
            struct shl__slot *s = shl__slot_at(h, v - 1);
            if (name_is(s, k)) {
                *at = b;
                return s;
            }
        }
    }
    *at = UINT32_MAX;
    return NULL;
}

/* A name is found once it is counted: a bucket stored by an adder that has
 * not stored nslots yet (still adding, or died there) is not a name yet, so
 * that an acquire goes through the table lock, which waits for the adder or
 * rolls its add forward. */
static struct shl__slot *probe_counted(const struct shl__hdr *h, const struct shl__key *k,
                                       uint32_t *at)
{
    struct shl__slot *s = probe(h, k, at);
    if (s && atomic_load_explicit(&shl__index(h)[*at], memory_order_relaxed) >
                 atomic_load_explicit(&h->nslots, memory_order_acquire))
        return NULL;
    return s;
}

struct shl__slot *shl__find(const shl_table *t, const struct shl__key *k)
{
    uint32_t at;
    return probe_counted(t->hdr, k, &at);
}

void shl__index_repair(void *arg)
{
    struct shl__hdr *h = arg;
    if (!atomic_load_explicit(&h->add_armed, memory_order_acquire))
        return;
    uint32_t slot = h->add_slot, bucket = h->add_bucket;
    if (slot < h->capacity && bucket < h->index_size) {
        atomic_store_explicit(&shl__index(h)[bucket], slot + 1, memory_order_release);
        if (atomic_load_explicit(&h->nslots, memory_order_relaxed) < slot + 1)
            atomic_store_explicit(&h->nslots, slot + 1, memory_order_release);
    }
    atomic_store_explicit(&h->add_armed, 0, memory_order_release);
}

static void init_slot(struct shl__slot *s, const struct shl__key *k)
{
    /* Unpublished: nobody else can see this slot yet. A previous adder may
     * have died here, so everything is written again from scratch. */
    memset(s, 0, sizeof *s);
    memcpy(s->name, k->s, k->len);
    s->name_len = k->len;
}

static int add(shl_table *t, const struct shl__key *k, struct shl__slot **out)
{
    struct shl__hdr *h = t->hdr;
    uint32_t b;
    struct shl__slot *s = probe(h, k, &b);
    if (s) { /* added by someone else meanwhile */
        *out = s;
        return SHL_OK;
    }
    uint32_t n = atomic_load_explicit(&h->nslots, memory_order_relaxed);
    if (n >= h->capacity || b == UINT32_MAX)
        return SHL_EFULL;
    s = shl__slot_at(h, n);
    init_slot(s, k);
    if (shl__mutex_init(&s->lock) != 0)
        return SHL_ESYS;
    SHL__CRASH(SHL__CP_ADD_NAME);
    SHL__ST(h->add_slot, n); /* the inspector reads them unlocked */
    SHL__ST(h->add_bucket, b);
    atomic_store_explicit(&h->add_armed, 1, memory_order_release);
    SHL__CRASH(SHL__CP_ADD_ARMED);
    atomic_store_explicit(&shl__index(h)[b], n + 1, memory_order_release);
    SHL__CRASH(SHL__CP_ADD_PUBLISHED);
    atomic_store_explicit(&h->nslots, n + 1, memory_order_release);
    atomic_store_explicit(&h->add_armed, 0, memory_order_release);
    *out = s;
    return SHL_OK;
}

static int lookup(shl_table *t, const char *name, int add, struct shl__slot **out)
{
    struct shl__key k;
    if (!name || shl__key_lease(name, &k) != SHL_OK)
        return SHL_EINVAL;
    int rc = SHL_OK;
    if (add)
        rc = shl__find_or_add(t, &k, out);
    else if (!(*out = shl__find(t, &k)))
        rc = SHL_ENOENT;
    return rc;
}

int shl__lookup(shl_table *t, const char *name, struct shl__slot **out)
{
    return lookup(t, name, 0, out);
}

int shl__lookup_or_add(shl_table *t, const char *name, struct shl__slot **out)
{
    return lookup(t, name, 1, out);
}

int shl__find_or_add(shl_table *t, const struct shl__key *k, struct shl__slot **out)
{
    uint32_t at;
    struct shl__hdr *h = t->hdr;
    struct shl__slot *s = probe_counted(h, k, &at);
    if (s) {
        *out = s;
        return SHL_OK;
    }
    int rc = shl__mutex_lock(&h->table_lock, shl__index_repair, h);
    if (rc != 0)
        return shl__from_shm(rc);
    rc = add(t, k, out);
    shl__mutex_unlock(&h->table_lock);
    return rc;
}
