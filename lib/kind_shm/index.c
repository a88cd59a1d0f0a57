/*
 * lib/kind_shm/index.c - the name index: open addressing with linear probing.
 *
 * index_size is a power of two of at least twice the capacity, so the load
 * factor stays at or below 1/2 and an expected lookup probes about 1.5
 * buckets. Names are never removed: a bucket goes from 0 to slot + 1 once,
 * with a release store after the slot's name is complete. Lookups take no
 * lock; adding takes the table lock. shl__probe() is the only walk of a
 * probe chain: lookups, adding, check and repair all go through it.
 *
 * Adding is crash-safe: the name and the slot's mutex are initialised in an
 * unpublished slot; then (add_slot, add_bucket) is recorded and armed; then
 * the bucket and nslots are stored; then the intent is disarmed. A dead
 * adder's armed intent is rolled forward by shl__index_repair(); an unarmed
 * one left only an unpublished slot, which the next adder reinitialises.
 *
 * Mending a damaged index (shl__index_mend) runs while lock-free readers
 * probe, so it never clears a bucket: a cleared bucket would end a probe
 * chain early and hide every name after it, and the next acquire of such a
 * name would add it again, a second slot with token 1 next to a holder of
 * the first. Under the table lock, with nslots read fresh, it only
 *   - resolves twins (two slots with one name): the slot that issued the
 *     higher token (exclusive or shared: max(cur.token, tok_last)) keeps the
 *     name; the other is retired (SHL__ST_RETIRED) under both slots' locks,
 *     which ends its holders of both kinds, so nobody keeps a valid hold on
 *     it;
 *     lookups skip a retired slot and acquire refuses it (kind_shm/lease.c); the
 *     keeper then takes the retired slot's bucket (one store: a reader sees
 *     either slot, and skips the retired one);
 *   - fills the empty bucket at the end of a missing name's chain (0 ->
 *     slot + 1, as adding does);
 *   - turns a stray bucket (out of range, or not the first bucket of its
 *     slot's name) into SHL__BUCKET_DEAD, which probes pass over: no probe
 *     ever used it to find its name.
 * The fix is armed in the header (index_fix) before the first change and
 * disarmed after the last; every step is idempotent. A mender that dies
 * leaves the table lock EOWNERDEAD, and its next locker finishes the fix
 * before adding anything (shl__index_repair), so no name is added twice.
 */
#include <stdio.h>

#include "shm_kind.h"

static int name_is(const struct shl__slot *s, const struct shl__key *k)
{
    return s->name_len == k->len && shl__same_bytes(s->name, k->s, k->len);
}

static int retired(const struct shl__slot *s)
{
    return SHL__LD(s->cur.state) == SHL__ST_RETIRED;
}

/* The last token a slot issued, of either kind: its next acquisition's
 * token is one above. */
static uint64_t issued(const struct shl__slot *s)
{
    uint64_t c = SHL__LD(s->cur.token), l = SHL__LD(s->tok_last);
    return c > l ? c : l;
}

struct shl__slot *shl__probe(const shl_table *t, const struct shl__key *k, uint32_t limit,
                             uint32_t *at)
{
    _Atomic uint32_t *idx = shl__tindex(t);
    uint32_t size = t->geom.index_size, mask = size - 1;
    uint32_t b = (uint32_t)k->hash & mask;
    if (limit > t->capacity)
        limit = t->capacity;
    for (uint32_t n = 0; n < size; n++, b = (b + 1) & mask) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v == 0) {
            *at = b;
            return NULL;
        }
        if (v - 1 < limit) {
            struct shl__slot *s = shl__tslot(t, v - 1);
            if (name_is(s, k) && !retired(s)) {
                *at = b;
                return s;
            }
        }
    }
    *at = UINT32_MAX;
    return NULL;
}

/* A name is found once it is counted: nslots is read first, so a bucket
 * stored by an adder that has not stored nslots yet (still adding, or died
 * there) is not a name yet, and an acquire goes through the table lock, which
 * waits for the adder or rolls its add forward. */
struct shl__slot *shl__find(const shl_table *t, const struct shl__key *k)
{
    uint32_t at;
    return shl__probe(t, k, shl__tnslots(t), &at);
}

uint32_t shl__slot_no(const shl_table *t, const struct shl__slot *s)
{
    return (uint32_t)(((const char *)s - (const char *)t->hdr - t->geom.slots_off) /
                      t->geom.slot_stride);
}

__attribute__((noinline, cold)) int shl__follow(shl_table *t, struct shl__slot **sp,
                                                struct shl__slot **s, int add)
{
    char nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    struct shl__slot *o;
    /* The name of a published slot never changes, and a lookup skips a
     * retired slot: this settles on the keeper at once. */
    if (shl__slot_key(*s, nm, &k) != 0)
        return SHL_ECORRUPT;
    if (add) {
        int rc = shl__find_or_add(t, &k, &o);
        if (rc != SHL_OK)
            return rc;
    } else if (!(o = shl__find(t, &k)) || o == *s) {
        return SHL_ELOST;
    }
    *s = o;
    __atomic_store_n(sp, o, __ATOMIC_RELAXED);
    return SHL_OK;
}

int shl__slot_key(const struct shl__slot *s, char buf[SHL__NAME_MAX + 1], struct shl__key *k)
{
    uint32_t n = SHL__LD(s->name_len);
    if (n == 0 || n > SHL__NAME_MAX)
        return -1;
    shl__copy_from_shared(buf, s->name, n);
    buf[n] = '\0';
    return shl__key_lease(buf, k) == SHL_OK && k->len == n ? 0 : -1;
}

/* ------------------------------------------------------------ mending */

/* Resolves twins a and b: under both locks (the lower slot first; only one
 * mender runs, under the table lock), the slot that issued the higher token
 * keeps the name (on a tie, `a`) and the other is retired by one armed
 * intent, which ends its exclusive holder and empties its shared holders'
 * mask (so its readers end with it, crash or not). The keeper's counter is
 * the higher one by choice, so no token is lowered, none needs raising, and
 * none given to a holder of either slot is issued again; the retired slot
 * keeps its own. *dropped: the retired slot. SHL_OK or the locking error. */
static int retire(shl_table *t, struct shl__slot *a, struct shl__slot *b,
                  struct shl__slot **dropped)
{
    struct shl__slot *first = a < b ? a : b, *second = a < b ? b : a;
    int rc = shl__slot_lock(t, first);
    if (rc != SHL_OK)
        return rc;
    if ((rc = shl__slot_lock(t, second)) != SHL_OK) {
        shl__slot_unlock(first);
        return rc;
    }
    /* Tokens rise only under these locks: compare here. */
    struct shl__slot *drop = issued(b) > issued(a) ? a : b;
    uint64_t now = shl__now(t);
    const struct shl__holder *c = &drop->cur;
    int held =
        c->state == SHL__ST_HELD || atomic_load_explicit(&drop->shared, memory_order_relaxed) != 0;
    struct shl__holder next = *c;
    next.state = SHL__ST_RETIRED;
    next.op = SHL__OP_REVOKE;
    struct shl__intent_to to = {0, 0, SHL__ST_RETIRED}; /* no shared holder left */
    shl__intent_arm_to(t, drop, &to, &next, SHL__OP_REVOKE, now, t->self.pid,
                       held ? SHL__C_REVOKE : SHL__C_COUNT, SHL__C_COUNT, SHL__CP_INDEX_RETIRING);
    shl__intent_commit(t, drop, 0, 0);
    shl__pool_give_back_all(t, drop); /* its groups, the first ones too */
    shl__slot_freed(drop, now);
    shl__slot_unlock(second);
    shl__slot_unlock(first);
    shl__wake_waiters(drop, 1); /* its waiters look the name up again */
    *dropped = drop;
    return SHL_OK;
}

/* Whether bucket b, holding v (neither 0 nor dead), can be used by no probe:
 * it names no used slot, a retired one, one without a valid name, or one
 * whose name is found first at another bucket. */
static int stray(const shl_table *t, uint32_t b, uint32_t v, uint32_t n)
{
    if (v - 1 >= n)
        return 1;
    const struct shl__slot *s = shl__tslot(t, v - 1);
    char nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    uint32_t at;
    if (retired(s) || shl__slot_key(s, nm, &k) != 0)
        return 1;
    return !shl__probe(t, &k, n, &at) || at != b;
}

int shl__index_mend(shl_table *t, int fix, shl__ix_report_fn report, void *arg)
{
    struct shl__hdr *h = t->hdr;
    _Atomic uint32_t *idx = shl__tindex(t);
    uint32_t n = shl__tnslots(t);
    int found = 0, left = 0;
    if (fix) {
        atomic_store_explicit(&h->index_fix, 1, memory_order_release);
        SHL__CRASH(SHL__CP_REPAIR_INDEX);
    }
    char nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    for (uint32_t i = 0; i < n; i++) {
        struct shl__slot *s = shl__tslot(t, i), *o;
        uint32_t at;
        if (retired(s) || shl__slot_key(s, nm, &k) != 0)
            continue; /* a damaged name is the slot checks' business */
        while ((o = shl__probe(t, &k, n, &at)) && o != s) {
            struct shl__slot *drop = issued(s) > issued(o) ? o : s;
            found++;
            /* On a tie the slot lookups find now keeps the name, so that the
             * index need not change. */
            if (fix) {
                if (retire(t, o, s, &drop) != SHL_OK) {
                    left = 1;
                    break;
                }
                SHL__CRASH(SHL__CP_INDEX_RETIRED);
                /* The keeper takes the retired twin's bucket in one store,
                 * so a lookup finds the name all along, never a gap. (A
                 * reader that loaded the old value skips the retired slot.) */
                if (drop == o)
                    atomic_store_explicit(&idx[at], shl__slot_no(t, s) + 1, memory_order_release);
            }
            if (report)
                report(arg, SHL__IX_TWIN, shl__slot_no(t, drop == s ? o : s),
                       shl__slot_no(t, drop));
            if (!fix || drop == s)
                break;
        }
        if (o || retired(s))
            continue;
        found++;
        if (report)
            report(arg, at == UINT32_MAX ? SHL__IX_FULL : SHL__IX_MISSING, i, 0);
        if (!fix || at == UINT32_MAX) {
            left |= fix;
            continue;
        }
        atomic_store_explicit(&idx[at], i + 1, memory_order_release);
        SHL__CRASH(SHL__CP_INDEX_INSERTED);
    }
    for (uint32_t b = 0; b < t->geom.index_size; b++) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v == 0 || v == SHL__BUCKET_DEAD || !stray(t, b, v, n))
            continue;
        found++;
        if (report)
            report(arg, SHL__IX_STRAY, b, v);
        if (fix) {
            atomic_store_explicit(&idx[b], SHL__BUCKET_DEAD, memory_order_release);
            SHL__CRASH(SHL__CP_INDEX_DEAD);
        }
    }
    if (fix && !left) {
        SHL__CRASH(SHL__CP_INDEX_MENDED);
        atomic_store_explicit(&h->index_fix, 0, memory_order_release);
    }
    return found;
}

/* ------------------------------------------------------------ the table lock */

void shl__index_repair(void *arg)
{
    shl_table *t = arg;
    struct shl__hdr *h = t->hdr;
    if (atomic_load_explicit(&h->add_armed, memory_order_acquire)) {
        uint32_t slot = SHL__LD(h->add_slot), bucket = SHL__LD(h->add_bucket);
        uint32_t n = shl__tnslots(t);
        _Atomic uint32_t *idx = shl__tindex(t);
        /* Only the add the adder armed: slot n (bucket stored, nslots not)
         * or n - 1 (both stored), into an empty bucket or its own. A
         * damaged record must not overwrite a bucket readers use. */
        if ((slot == n || slot + 1 == n) && slot < t->capacity && bucket < t->geom.index_size) {
            uint32_t v = atomic_load_explicit(&idx[bucket], memory_order_relaxed);
            if (v == 0 || v == slot + 1) {
                atomic_store_explicit(&idx[bucket], slot + 1, memory_order_release);
                atomic_store_explicit(&h->nslots, slot + 1, memory_order_release);
            }
        }
        atomic_store_explicit(&h->add_armed, 0, memory_order_release);
    }
    if (atomic_load_explicit(&h->index_fix, memory_order_acquire))
        shl__index_mend(t, 1, NULL, NULL);
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
    uint32_t b, n = shl__tnslots(t);
    struct shl__slot *s = shl__probe(t, k, n, &b);
    if (s) { /* added by someone else meanwhile */
        *out = s;
        return SHL_OK;
    }
    if (n >= t->capacity || b == UINT32_MAX)
        return SHL_EFULL;
    /* The slot's pages first: no room is this add's error, never a SIGBUS
     * in a later critical section (shm/segment.h). Nothing is written
     * before, so a refused or killed adder leaves no trace but pages. */
    int rc = shl__seg_take_slot(t->fd, &t->geom, n);
    if (rc != 0) {
        char nm[SHL__NAME_MAX + 1];
        memcpy(nm, k->s, k->len);
        nm[k->len] = 0;
        return shl__explain_add(shl__from_shm(rc), t, nm, t->geom.slot_stride);
    }
    s = shl__tslot(t, n);
    init_slot(s, k);
    if (shl__mutex_init(&s->lock) != 0)
        return SHL_ESYS;
    SHL__CRASH(SHL__CP_ADD_NAME);
    SHL__ST(h->add_slot, n); /* the inspector reads them unlocked */
    SHL__ST(h->add_bucket, b);
    atomic_store_explicit(&h->add_armed, 1, memory_order_release);
    SHL__CRASH(SHL__CP_ADD_ARMED);
    atomic_store_explicit(&shl__tindex(t)[b], n + 1, memory_order_release);
    SHL__CRASH(SHL__CP_ADD_PUBLISHED);
    atomic_store_explicit(&h->nslots, n + 1, memory_order_release);
    atomic_store_explicit(&h->add_armed, 0, memory_order_release);
    *out = s;
    return SHL_OK;
}

int shl__index_lookup(shl_table *t, const char *name, int add, struct shl__slot **out)
{
    struct shl__key k;
    if (!name || shl__key_lease(name, &k) != SHL_OK)
        return SHL_EINVAL;
    int rc = SHL_OK;
    if (add)
        rc = shl__find_or_add(t, &k, out);
    else if (!(*out = shl__find(t, &k)))
        rc = shl__removed(t) ? SHL_EREMOVED : SHL_ENOENT;
    if (rc == SHL_OK)
        shl__nc_put(t, &k, *out);
    return rc;
}

int shl__table_lock(shl_table *t)
{
    if (shl__removed(t)) /* no name is added to a removed table */
        return SHL_EREMOVED;
    int rc = shl__mutex_lock(&t->hdr->table_lock, NULL, shl__index_repair, t);
    return rc == 0 ? SHL_OK : shl__from_shm(rc);
}

int shl__find_or_add(shl_table *t, const struct shl__key *k, struct shl__slot **out)
{
    struct shl__slot *s = shl__find(t, k);
    if (s) {
        *out = s;
        return SHL_OK;
    }
    int rc = shl__table_lock(t);
    if (rc != SHL_OK)
        return rc;
    rc = add(t, k, out);
    shl__mutex_unlock(&t->hdr->table_lock);
    return rc;
}

void shl__ix_text(const shl_table *t, enum shl__ix what, uint32_t a, uint32_t b, int action,
                  char *buf, size_t cap)
{
    char na[SHL__NAME_MAX + 1] = "?", nb[SHL__NAME_MAX + 1] = "?";
    struct shl__key k;
    if (what != SHL__IX_STRAY && a < t->capacity && shl__slot_key(shl__tslot(t, a), na, &k) != 0)
        strcpy(na, "?");
    uint32_t n = shl__tnslots(t);
    switch (what) {
    case SHL__IX_MISSING:
    case SHL__IX_FULL:
        snprintf(buf, cap, "lease %s (slot %u): not reachable through the index%s", na, a,
                 !action                ? ""
                 : what == SHL__IX_FULL ? "; its probe chain has no empty bucket"
                                        : ": fill the empty bucket that ends its probe chain");
        break;
    case SHL__IX_TWIN:
        snprintf(buf, cap, "lease %s is in two slots, %u and %u (token %llu and %llu)%s", na, a, b,
                 (unsigned long long)issued(shl__tslot(t, a)),
                 (unsigned long long)issued(shl__tslot(t, b)),
                 action ? ": the higher token keeps the name, the other slot is retired (its "
                          "holders ended, its token kept)"
                        : "");
        break;
    case SHL__IX_STRAY:
        if (b - 1 < n && b - 1 < t->capacity && shl__slot_key(shl__tslot(t, b - 1), nb, &k) == 0)
            snprintf(buf, cap,
                     "index: bucket %u names slot %u (%s), more than one bucket or not on its "
                     "probe chain%s",
                     a, b - 1, nb, action ? ": mark the bucket dead" : "");
        else
            snprintf(buf, cap, "index: bucket %u names slot %u, beyond the %u used or unnamed%s", a,
                     b - 1, n, action ? ": mark the bucket dead" : "");
        break;
    }
}
