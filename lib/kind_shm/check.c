/*
 * lib/kind_shm/check.c - verification of every invariant of a table or a segment
 * image: header and format word, mutex states, intent records, the hash
 * index, each slot (its lock, intent, history and pool refs here; its
 * holder's token and expiry consistency, values and counters through
 * kind_shm/invariants.c, which repair shares), the pools.
 *
 * The same code runs over a live table (slots copied under their seqlocks,
 * never locked) and over a private copy of arbitrary bytes (an image from a
 * file, or a fuzzer's input). Nothing is trusted before it is checked: the
 * geometry is validated against the mapping's size before any slot is
 * addressed, and every field used as an index is bounded first.
 *
 * The shared-memory halves of shl_check(), shl_check_image() and
 * shl_check_name(); their entry points, with the checks of the arguments and
 * the kind test, are in lib/check.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shm_kind.h"

struct ck {
    struct shl__problems p;
    int live;     /* a mapped table: time and liveness can be judged */
    uint64_t now; /* table clock after the slot's copy (live only) */
    uint32_t value_size;
    uint64_t floor; /* the table's token floor */
};

#define problem(c, ...) shl__problem(&(c)->p, __VA_ARGS__)

static void lock_problem(struct ck *c, const char *what, const pthread_mutex_t *m)
{
    int32_t tid;
    switch (shl__mutex_peek(m, &tid)) {
    case SHL__MX_DEAD:
        problem(c,
                "%s: its holder (tid %d) died inside the critical section; the next "
                "operation recovers it (or run shmlease repair)",
                what, (int)tid);
        break;
    case SHL__MX_BROKEN:
        problem(c, "%s: the lock is unrecoverable (ENOTRECOVERABLE); run shmlease repair", what);
        break;
    case SHL__MX_BADKIND:
        problem(c, "%s: the lock is not a robust process-shared mutex (damaged)", what);
        break;
    default:
        break;
    }
}

static void header_problem(void *arg, const char *text)
{
    problem((struct ck *)arg, "%s", text);
}

/* The header; 0 when the rest of the segment may be addressed. */
static int check_header(struct ck *c, const struct shl__hdr *h, size_t size, int *version)
{
    int addressable;
    int rc = shl__seg_check_header(h, size, SHL__UID_ANY, header_problem, c, &addressable);
    if (rc == SHL__SHM_EVERSION)
        *version = 1;
    if (!addressable)
        return -1;
    lock_problem(c, "table lock", &h->table_lock);
    int32_t tid;
    int ts = shl__mutex_peek(&h->table_lock, &tid);
    if (atomic_load_explicit(&h->add_armed, memory_order_acquire)) {
        uint32_t as = SHL__LD(h->add_slot), ab = SHL__LD(h->add_bucket);
        if (as >= h->capacity || ab >= h->index_size)
            problem(c, "header: armed name add names slot %u, bucket %u: out of range", as, ab);
        else if (ts == SHL__MX_FREE)
            problem(c, "header: a name add is armed but nobody is adding");
    }
    if (atomic_load_explicit(&h->index_fix, memory_order_acquire) && ts == SHL__MX_FREE)
        problem(c, "header: a mend of the index is armed but nobody is mending (run shmlease "
                   "repair)");
    return 0;
}

struct ix_ck {
    struct ck *c;
    const shl_table *t;
    uint32_t n0; /* names counted before the index was read */
};

static void index_problem(void *arg, enum shl__ix what, uint32_t a, uint32_t b)
{
    struct ix_ck *x = arg;
    /* On a live table an add stores its bucket just before nslots: a bucket
     * naming a slot added since the check began is not a problem. */
    if (what == SHL__IX_STRAY && x->c->live && b - 1 >= x->n0 && b - 1 <= shl__tnslots(x->t))
        return;
    char buf[256];
    shl__ix_text(x->t, what, a, b, 0, buf, sizeof buf);
    problem(x->c, "%s", buf);
}

/* The index invariants are index.c's (shl__index_mend), judged without
 * changing anything. */
static void check_index(struct ck *c, shl_table *t)
{
    struct ix_ck x = {c, t, shl__tnslots(t)};
    shl__index_mend(t, 0, index_problem, &x);
}

struct who_say {
    struct ck *c;
    const char *who;
};

static void slot_problem(void *arg, const char *m)
{
    struct who_say *w = arg;
    problem(w->c, "%s: %s", w->who, m);
}

static void check_holder(struct ck *c, const shl_table *t, const char *who,
                         const struct shl__slot *s)
{
    struct shl__inv_ctx x = {t, c->value_size, c->floor, c->live, c->now};
    struct who_say w = {c, who};
    /* fix 0 only reads the slot */
    shl__slot_invariants(&x, (struct shl__slot *)(uintptr_t)s, 0, slot_problem, &w);
}

static void check_history(struct ck *c, const shl_table *t, const char *who,
                          const struct shl__slot *s)
{
    uint32_t len = t->geom.history;
    uint32_t n = s->hist_next < len ? s->hist_next : len;
    uint64_t last_time = 0, last_token = 0;
    int any_shared = s->count[SHL__C_SHARED] != 0; /* the window may start after it */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = (s->hist_next - n + i) % len;
        const struct shl__event *e = &shl__slot_hist(s)[at];
        if (e->op == SHL__OP_NONE || e->op >= SHL__OP_COUNT) {
            problem(c, "%s: history entry %u has unknown kind %u", who, at, e->op);
            continue;
        }
        if (e->op == SHL__OP_REJECT ? (e->why < SHL__C_REJ_EXPIRED || e->why >= SHL__C_COUNT)
                                    : e->why != 0)
            problem(c, "%s: history entry %u (%s) has reason %u", who, at, shl_op_name(e->op),
                    e->why);
        if (e->pid <= 0 || e->pid > SHL__PID_LIMIT)
            problem(c, "%s: history entry %u has pid %d", who, at, (int)e->pid);
        if (e->time < last_time)
            problem(c, "%s: history entry %u goes back in time (%llu after %llu)", who, at,
                    (unsigned long long)e->time, (unsigned long long)last_time);
        last_time = e->time;
        if (c->live && e->time > c->now)
            problem(c, "%s: history entry %u is in the future", who, at);
        if (e->op == SHL__OP_REJECT)
            continue;
        /* Acquisitions of either kind take increasing tokens; the other
         * events name the token of a holder (a shared holder's renew may
         * follow a newer one's acquisition) or the exclusive one. With no
         * shared acquisition in the window, every event's token is at least
         * the last one's. */
        if (e->op == SHL__OP_SHARED)
            any_shared = 1;
        int acq = e->op == SHL__OP_ACQUIRE || e->op == SHL__OP_TAKEOVER ||
                  e->op == SHL__OP_RECLAIM || e->op == SHL__OP_SHARED;
        if (((acq || !any_shared) && e->token < last_token) || e->token > shl__top_token(s))
            problem(c, "%s: history entry %u (%s) has token %llu out of order (lease token %llu)",
                    who, at, shl_op_name(e->op), (unsigned long long)e->token,
                    (unsigned long long)shl__top_token(s));
        if (acq || !any_shared)
            last_token = e->token;
    }
}

int shl__history_ok(const shl_table *t, const struct shl__slot *s)
{
    struct ck c = {{NULL, NULL, 0}, 0, 0, 0, 0};
    check_history(&c, t, "", s);
    return c.p.count == 0;
}

/* On a live slot: whether a change is marked in flight (seq odd or intent
 * armed) while nobody holds the lock, seen three times 1 ms apart. A writer
 * holds the lock whenever it has either mark set, so seeing the mark, then a
 * free lock, then the same seq, means nobody is going to clear it. */
static int left_open(const struct shl__slot *s)
{
    for (int n = 0; n < 3; n++) {
        if (n) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        uint32_t a1 = atomic_load_explicit(&s->intent_armed, memory_order_acquire);
        uint32_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        int32_t tid;
        int st = shl__mutex_peek(&s->lock, &tid);
        uint32_t q2 = atomic_load_explicit(&s->seq, memory_order_acquire);
        uint32_t a2 = atomic_load_explicit(&s->intent_armed, memory_order_acquire);
        if (st != SHL__MX_FREE || q1 != q2 || !((q1 & 1) || (a1 && a2)))
            return 0;
    }
    return 1;
}

struct ref_say {
    unsigned n;
    char line[SHL__SH_REFS + SHL__WQ_REFS][192];
};

static void ref_collect(void *arg, const char *m)
{
    struct ref_say *r = arg;
    if (r->n < sizeof r->line / sizeof r->line[0])
        snprintf(r->line[r->n++], sizeof r->line[0], "%s", m);
}

/* The slot's refs to the pools' groups. A copy's refs are judged against
 * owner words read after it: said only when the slot did not change
 * meanwhile (a group is given back after the ref that named it is
 * cleared, inside a change). */
static void check_refs(struct ck *c, const shl_table *t, const char *who, uint32_t i,
                       const struct shl__slot *s)
{
    struct ref_say r = {0};
    shl__pool_slot_refs(t, (struct shl__slot *)(uintptr_t)s, i, 0, ref_collect, &r);
    if (c->live && atomic_load_explicit(&shl__tslot(t, i)->seq, memory_order_acquire) != s->seq)
        return;
    for (unsigned k = 0; k < r.n; k++)
        problem(c, "%s: %s", who, r.line[k]);
}

static void check_slot(struct ck *c, const shl_table *t, uint32_t i, const struct shl__slot *s,
                       int stable)
{
    char who[SHL__NAME_MAX + 32], nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    if (shl__slot_key(s, nm, &k) == 0) {
        snprintf(who, sizeof who, "lease %s (slot %u)", nm, i);
    } else {
        snprintf(who, sizeof who, "slot %u", i);
        problem(c, "%s: invalid name (length %u)", who, s->name_len);
    }
    int32_t tid;
    int ls = shl__mutex_peek(&s->lock, &tid);
    lock_problem(c, who, &s->lock);
    if (ls == SHL__MX_DEAD || ls == SHL__MX_BADKIND)
        return; /* mid-change by design: recovery will settle the rest */
    if (ls == SHL__MX_HELD && (!stable || s->intent_armed))
        return; /* a change in flight by a live process */
    if (ls != SHL__MX_HELD && (!c->live || left_open(shl__tslot(t, i)))) {
        if (s->seq & 1)
            problem(c, "%s: a change is marked in flight (seq %u) but nobody holds the lock", who,
                    s->seq);
        if (s->intent_armed)
            problem(c, "%s: an intent (%s, token %llu) is armed but nobody holds the lock", who,
                    shl_op_name((int)s->meta.op), (unsigned long long)s->intent.token);
    }
    if (s->intent_armed > 1)
        problem(c, "%s: intent flag %u is neither 0 nor 1", who, s->intent_armed);
    check_holder(c, t, who, s);
    check_history(c, t, who, s);
    check_refs(c, t, who, i, s);
}

/* Whether group g of pool k, owned by slot o - 1, is leaked: that slot
 * does not name it. On a live table a group is owned and not yet (or no
 * longer) named for a moment under its slot's lock: a look counts only if
 * the slot's lock was free throughout it and taken by nobody in between
 * (its lock_gen unchanged). A busy slot is looked at again, for a few ms
 * at most (a leak stays; the moment passes); never judged: not leaked. */
static int leaked(const struct ck *c, const shl_table *t, enum shl__pool k, uint32_t g, uint32_t o)
{
    const struct shl__slot *s = shl__tslot(t, o - 1);
    for (int look = 0; look < 100; look++) {
        if (look) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        int32_t tid;
        uint32_t gen = atomic_load_explicit(&s->lock_gen, memory_order_acquire);
        if (c->live && shl__mutex_peek(&s->lock, &tid) != SHL__MX_FREE)
            continue;
        if (shl__pool_owner(t, k, g) != o || shl__pool_names(s, k, g))
            return 0;
        if (!c->live || (shl__mutex_peek(&s->lock, &tid) == SHL__MX_FREE &&
                         atomic_load_explicit(&s->lock_gen, memory_order_acquire) == gen))
            return 1;
    }
    return 0;
}

/* Whether slot o - 1 holds no lease: past the slots handed out, looked at
 * again for a few ms on a live table, since a name is found by its bucket
 * (and its lease may take a group at once) just before `nslots` moves. */
static int past_slots(const struct ck *c, const shl_table *t, uint32_t o, uint32_t *nslots)
{
    for (int look = 0; o - 1 >= *nslots; look++) {
        if (!c->live || look == 100)
            return 1;
        if (look) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        *nslots = shl__tnslots(t);
    }
    return 0;
}

/* Each group taken by a slot that does not name it (a leak: nobody gives
 * it back), or by a slot that holds no lease. */
static void check_pools(struct ck *c, const shl_table *t)
{
    uint32_t nslots = shl__tnslots(t);
    for (int k = 0; k < SHL__POOL_COUNT; k++) {
        uint32_t n = shl__pool_groups(t, (enum shl__pool)k), o, g;
        struct shl__pool_cursor cur = {0, 0};
        while ((g = shl__pool_next_taken(t, (enum shl__pool)k, &cur, &o)) < n) {
            if (past_slots(c, t, o, &nslots)) {
                problem(c, "%s: %s %u is taken by slot %u, which holds no lease",
                        shl__pool_name((enum shl__pool)k), shl__pool_item((enum shl__pool)k), g,
                        o - 1);
                continue;
            }
            if (!leaked(c, t, (enum shl__pool)k, g, o))
                continue;
            char nm[SHL__NAME_MAX + 1];
            struct shl__key key;
            int has_name = shl__slot_key(shl__tslot(t, o - 1), nm, &key) == 0;
            problem(c, "%s: %s %u is taken by %s%s%s(slot %u), which does not name it (leaked)",
                    shl__pool_name((enum shl__pool)k), shl__pool_item((enum shl__pool)k), g,
                    has_name ? "lease " : "", has_name ? nm : "", has_name ? " " : "", o - 1);
        }
    }
}

/* Everything after the header: the index, then each used slot, addressed
 * through the handle's geometry (for an image, the validated header's). */
static void check_body(struct ck *c, shl_table *t)
{
    c->value_size = t->value_size;
    c->floor = t->token_floor;
    check_index(c, t);
    uint32_t n = shl__tnslots(t);
    struct shl__slot_image *copy = c->live ? malloc(sizeof *copy) : NULL;
    if (c->live && !copy) {
        problem(c, "slots: out of memory while checking");
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct shl__slot *s = shl__tslot(t, i);
        int stable = 1;
        if (c->live) {
            unsigned char pv[1];
            stable = shl__slot_snapshot(t, s, copy, pv, 0);
            s = &copy->slot;
            /* After the copy: nothing in it can be later than this. */
            c->now = shl__now(t);
        }
        check_slot(c, t, i, s, stable);
    }
    free(copy);
    check_pools(c, t);
}

static int verdict(const struct ck *c, int version)
{
    if (!c->p.count)
        return SHL_OK;
    return version ? SHL_EVERSION : SHL_ECORRUPT;
}

int shl__shm_check(shl_table *t, void (*report)(void *arg, const char *problem), void *arg)
{
    struct ck c = {{report, arg, 0}, 1, 0, 0, 0};
    int version = 0;
    if (check_header(&c, t->hdr, t->size, &version) == 0)
        check_body(&c, t);
    return verdict(&c, version);
}

int shl__shm_check_image(const void *image, size_t size,
                         void (*report)(void *arg, const char *problem), void *arg)
{
    /* A private, aligned copy: the caller's bytes may be unaligned, and may
     * change under us if they are a live mapping. */
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return SHL_ENOMEM;
    memcpy(copy, image, size);
    struct ck c = {{report, arg, 0}, 0, 0, 0, 0};
    int version = 0;
    if (check_header(&c, copy, size, &version) == 0) {
        /* A handle over the copy, with the geometry its checked header
         * implies, so that the same code reads it as a live table. */
        const struct shl__hdr *h = copy;
        shl_table img = {0};
        img.hdr = copy;
        img.size = size;
        img.fd = -1;
        shl__geom_of(h, &img.geom);
        img.capacity = h->capacity;
        img.clock = h->clock;
        img.value_size = h->value_size;
        img.token_floor = h->token_floor;
        check_body(&c, &img);
    }
    free(copy);
    return verdict(&c, version);
}

int shl__shm_check_name(const char *n, void (*report)(void *arg, const char *problem), void *arg)
{
    void *copy;
    size_t len;
    uint64_t file_size;
    int rc = shl__seg_read_raw(n, &copy, &len, &file_size);
    if (rc != 0)
        return shl__from_shm(rc);
    /* Only the part the header describes was read: a file longer than that
     * is reported here, and that part is checked as the table it claims. */
    int longer = file_size > len && shl__seg_described_size(copy) == len;
    if (longer) {
        struct ck c = {{report, arg, 0}, 0, 0, 0, 0};
        problem(&c,
                "header: the file is %llu bytes, longer than the %zu bytes its header describes",
                (unsigned long long)file_size, len);
    }
    rc = shl__shm_check_image(copy, len, report, arg);
    free(copy);
    return rc == SHL_OK && longer ? SHL_ECORRUPT : rc;
}
