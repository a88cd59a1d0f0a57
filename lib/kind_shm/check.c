/*
 * lib/kind_shm/check.c - verification of every invariant of a table or a segment
 * image: header and format word, mutex states, intent records, token and
 * expiry consistency, the hash index, history sanity.
 *
 * The same code runs over a live table (slots copied under their seqlocks,
 * never locked) and over a private copy of arbitrary bytes (an image from a
 * file, or a fuzzer's input). Nothing is trusted before it is checked: the
 * geometry is validated against the mapping's size before any slot is
 * addressed, and every field used as an index is bounded first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shm_kind.h"

#define PID_LIMIT 4194304 /* the kernel's largest pid_max */

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

/* ------------------------------------------------------ slot invariants */

/*
 * The invariants of a slot's holder, values and counters, listed once: check
 * reports a broken one (`bad` writes the problem), and repair, with the slot
 * locked and its change bracket open, mends it (`fix` writes the action) when
 * it can (fix NULL: check only; repair leaves it). In fix order: an entry is
 * judged after the fixes of the entries before it (raising a token comes
 * before the acquisition counter that follows it).
 */
struct inv {
    int (*bad)(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m, size_t n);
    void (*fix)(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n);
    int i; /* value buffer, for the entries about one */
};

/* `vcur`: the committed buffer, 0 or 1, with SHL__VCUR_RETIRED exactly in
 * a retired slot (bound reads learn of the retirement from it). */
static int retired_slot(const struct shl__slot *s)
{
    return s->cur.state == SHL__ST_RETIRED;
}

static int bad_vcur(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    (void)x, (void)i;
    uint32_t mark = retired_slot(s) ? SHL__VCUR_RETIRED : 0;
    if ((s->vcur & ~UINT32_C(1)) == mark)
        return 0;
    if (s->vcur > (SHL__VCUR_RETIRED | 1) || !retired_slot(s))
        return snprintf(m, n, "value buffer index %u is neither 0 nor 1", s->vcur) > 0;
    return snprintf(m, n,
                    "retired, but its value is not marked so (a bound read would not "
                    "follow the name)") > 0;
}

static void fix_vcur(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x, (void)i;
    /* A retired slot's mark missing: its buffer is known. Else the newer. */
    uint32_t keep = retired_slot(s) && s->vcur <= 1   ? s->vcur
                    : s->vh[1].token > s->vh[0].token ? 1
                                                      : 0;
    snprintf(m, n, "keep buffer %u%s", keep, retired_slot(s) ? ", marked retired" : "");
    atomic_store_explicit(&s->vcur, keep | (retired_slot(s) ? SHL__VCUR_RETIRED : 0),
                          memory_order_relaxed);
}

static int bad_vlen(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    return s->vh[i].len > x->value_size &&
           snprintf(m, n, "value buffer %d length %u out of range", i, s->vh[i].len);
}

static void fix_vlen(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x;
    snprintf(m, n, "empty it");
    SHL__ST(s->vh[i].len, 0);
}

/* A token below one already used cannot be lowered further: it is raised,
 * and a holder of the old one ends (its token is no longer current). */
static void raise_token(struct shl__slot *s, uint64_t to)
{
    SHL__ST(s->cur.token, to);
    if (s->cur.state == SHL__ST_HELD)
        SHL__ST(s->cur.state, SHL__ST_REVOKED);
}

static int bad_vtoken(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                      size_t n)
{
    (void)x;
    return s->vh[i].token > s->cur.token &&
           snprintf(m, n, "value buffer %d written by token %llu, above the lease's token %llu", i,
                    (unsigned long long)s->vh[i].token, (unsigned long long)s->cur.token);
}

static void fix_vtoken(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x;
    snprintf(m, n, "raise the token to %llu, the token of its value",
             (unsigned long long)s->vh[i].token);
    raise_token(s, s->vh[i].token);
}

/* A table with a floor issues tokens above it only. */
static int bad_floor(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                     size_t n)
{
    (void)i;
    return s->cur.token != 0 && s->cur.token <= x->floor &&
           snprintf(m, n, "token %llu is not above the table's token floor %llu",
                    (unsigned long long)s->cur.token, (unsigned long long)x->floor);
}

static void fix_floor(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)i;
    uint64_t to = x->floor + (s->count[SHL__C_ACQUIRE] ? s->count[SHL__C_ACQUIRE] : 1);
    snprintf(m, n, "raise it to %llu", (unsigned long long)to);
    raise_token(s, to);
}

static int bad_state(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                     size_t n)
{
    (void)x, (void)i;
    const struct shl__holder *h = &s->cur;
    if (h->state > SHL__ST_RETIRED)
        return snprintf(m, n, "unknown holder state %u", h->state) > 0;
    if (h->op >= SHL__OP_COUNT)
        return snprintf(m, n, "unknown holder op %u", h->op) > 0;
    return h->owner_len > SHL__OWNER_MAX &&
           snprintf(m, n, "owner length %u exceeds %d", h->owner_len, SHL__OWNER_MAX);
}

static void fix_state(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x, (void)i;
    struct shl__holder *c = &s->cur;
    snprintf(m, n, "end it (revoked, token %llu kept)", (unsigned long long)c->token);
    SHL__ST(c->state, c->token ? SHL__ST_REVOKED : SHL__ST_FREE);
    SHL__ST(c->owner_len, c->owner_len > SHL__OWNER_MAX ? SHL__OWNER_MAX : c->owner_len);
    SHL__ST(c->op, c->op >= SHL__OP_COUNT ? SHL__OP_NONE : c->op);
}

static int bad_unused(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                      size_t n)
{
    (void)x, (void)i;
    const struct shl__holder *h = &s->cur;
    return h->token == 0 &&
           ((h->state != SHL__ST_FREE && h->state != SHL__ST_RETIRED) || h->owner_len != 0) &&
           snprintf(m, n, "never acquired (token 0) but state %u, owner length %u", h->state,
                    h->owner_len);
}

static int bad_holder(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                      size_t n)
{
    (void)i;
    const struct shl__holder *h = &s->cur;
    if (h->token != 0 &&
        (h->owner_len == 0 || h->since > h->expiry || h->pid <= 0 || h->pid > PID_LIMIT))
        return snprintf(m, n,
                        "holder of token %llu is inconsistent (owner length %u, since %llu, "
                        "expiry %llu, pid %d)",
                        (unsigned long long)h->token, h->owner_len, (unsigned long long)h->since,
                        (unsigned long long)h->expiry, (int)h->pid) > 0;
    return x->live && h->token != 0 && h->since > x->now &&
           snprintf(m, n, "acquired at %llu, after the table's now %llu",
                    (unsigned long long)h->since, (unsigned long long)x->now);
}

/* The lease's last token of either kind. */
static uint64_t top_token(const struct shl__slot *s)
{
    return s->tok_last > s->cur.token ? s->tok_last : s->cur.token;
}

/* Every acquisition, of either kind, issues the next token, from just above
 * the table's floor (0 without one), so a lease's last token is the floor
 * plus its acquisitions. */
static uint64_t acquisitions(const struct shl__inv_ctx *x, const struct shl__slot *s)
{
    return top_token(s) > x->floor ? top_token(s) - x->floor : 0;
}

static int bad_acquired(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                        size_t n)
{
    (void)i;
    return s->count[SHL__C_ACQUIRE] + s->count[SHL__C_SHARED] != acquisitions(x, s) &&
           snprintf(m, n,
                    "%llu exclusive and %llu shared acquisitions counted for token %llu "
                    "(token floor %llu)",
                    (unsigned long long)s->count[SHL__C_ACQUIRE],
                    (unsigned long long)s->count[SHL__C_SHARED], (unsigned long long)top_token(s),
                    (unsigned long long)x->floor);
}

static void fix_acquired(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m,
                         size_t n)
{
    (void)i;
    uint64_t a = acquisitions(x, s);
    uint64_t sh = s->count[SHL__C_SHARED] < a ? s->count[SHL__C_SHARED] : a;
    snprintf(m, n, "set the counters to %llu exclusive and %llu shared",
             (unsigned long long)(a - sh), (unsigned long long)sh);
    SHL__ST(s->count[SHL__C_ACQUIRE], a - sh);
    SHL__ST(s->count[SHL__C_SHARED], sh);
}

static int bad_takeovers(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                         size_t n)
{
    (void)x, (void)i;
    return s->count[SHL__C_EXPIRE] + s->count[SHL__C_RECLAIM] >
               s->count[SHL__C_ACQUIRE] + s->count[SHL__C_SHARED] &&
           snprintf(m, n, "more takeovers and reclaims than acquisitions counted");
}

/* A shared holder in use (its bit set): a whole record, taken after the
 * last exclusive acquisition (which empties the mask) and not above the
 * lease's counter, with a token and an owner no other one in use has. */
static int bad_entry(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                     size_t n)
{
    if (!((s->shared >> i) & 1))
        return 0;
    const struct shl__holder *h = shl__tsh(x->t, s, (uint32_t)i);
    if (!h)
        return snprintf(m, n,
                        "shared holder %d is in use but the lease names no reader group for it",
                        i) > 0;
    if (h->state != SHL__ST_HELD || h->owner_len == 0 || h->owner_len > SHL__OWNER_MAX ||
        h->since > h->expiry || h->pid <= 0 || h->pid > PID_LIMIT)
        return snprintf(m, n,
                        "shared holder %d (token %llu) is inconsistent (state %u, owner length "
                        "%u, since %llu, expiry %llu, pid %d)",
                        i, (unsigned long long)h->token, h->state, h->owner_len,
                        (unsigned long long)h->since, (unsigned long long)h->expiry,
                        (int)h->pid) > 0;
    if (h->token <= s->cur.token || h->token > top_token(s))
        return snprintf(m, n,
                        "shared holder %d has token %llu, not between the exclusive token %llu "
                        "and the lease's last token %llu",
                        i, (unsigned long long)h->token, (unsigned long long)s->cur.token,
                        (unsigned long long)top_token(s)) > 0;
    if (x->live && s->cur.state == SHL__ST_HELD && x->now < s->cur.expiry && x->now < h->expiry)
        return snprintf(m, n, "shared holder %d (token %llu) is valid beside an exclusive holder",
                        i, (unsigned long long)h->token) > 0;
    for (int j = 0; j < i; j++) {
        const struct shl__holder *o = shl__tsh(x->t, s, (uint32_t)j);
        if (!((s->shared >> j) & 1) || !o)
            continue;
        if (o->token == h->token)
            return snprintf(m, n, "shared holders %d and %d have one token %llu", j, i,
                            (unsigned long long)h->token) > 0;
        if (x->live && x->now < h->expiry && x->now < o->expiry && o->owner_len == h->owner_len &&
            memcmp(o->owner, h->owner, h->owner_len) == 0)
            return snprintf(m, n, "shared holders %d and %d are valid with one owner", j, i) > 0;
    }
    return 0;
}

/* The first shared holder in use that breaks one of them. */
static int bad_shared(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                      size_t n)
{
    (void)i;
    for (int k = 0; k < SHL__SHARED_MAX; k++)
        if (bad_entry(x, s, k, m, n))
            return 1;
    return 0;
}

/* Ends every shared holder that breaks one (one store of the mask). */
static void fix_shared(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)i;
    char scratch[192];
    uint64_t keep = s->shared;
    int ended = 0;
    for (int k = 0; k < SHL__SHARED_MAX; k++)
        if (bad_entry(x, s, k, scratch, sizeof scratch)) {
            keep &= ~(UINT64_C(1) << k);
            ended++;
        }
    snprintf(m, n, "end %d such shared holder%s (tokens kept)", ended, ended == 1 ? "" : "s");
    atomic_store_explicit(&s->shared, keep, memory_order_relaxed);
}

static int bad_mask(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    (void)x, (void)i;
    uint64_t extra = SHL__SHARED_MAX < 64 ? s->shared >> SHL__SHARED_MAX : 0;
    return extra != 0 && snprintf(m, n, "shared-holder mask %#llx names entries past %d",
                                  (unsigned long long)s->shared, SHL__SHARED_MAX);
}

static void fix_mask(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x, (void)i;
    snprintf(m, n, "clear them");
    atomic_store_explicit(&s->shared, s->shared & ((UINT64_C(1) << SHL__SHARED_MAX) - 1),
                          memory_order_relaxed);
}

/* A retired slot has no holder of either kind (index.c): retirement ends
 * its shared holders with its exclusive one. */
static int bad_retired(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                       size_t n)
{
    (void)i;
    if (s->cur.state != SHL__ST_RETIRED || !s->shared)
        return 0;
    unsigned used = 0, valid = 0;
    for (int k = 0; k < SHL__SHARED_MAX; k++)
        if ((s->shared >> k) & 1) {
            const struct shl__holder *h = shl__tsh(x->t, s, (uint32_t)k);
            used++;
            valid += h && h->state == SHL__ST_HELD && x->live && x->now < h->expiry;
        }
    return snprintf(m, n,
                    "retired (its name moved to a twin) but %u shared holder%s left in it "
                    "(%u valid)",
                    used, used == 1 ? "" : "s", valid) > 0;
}

static void fix_retired(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x, (void)i;
    snprintf(m, n, "end them (tokens kept)");
    atomic_store_explicit(&s->shared, 0, memory_order_relaxed);
}

static int bad_dead(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    (void)x, (void)i;
    return s->dead_token > top_token(s) &&
           snprintf(m, n, "death seen for token %llu, above the lease's token",
                    (unsigned long long)s->dead_token);
}

static void fix_dead(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)x, (void)i;
    snprintf(m, n, "forget it");
    SHL__ST(s->dead_token, 0);
}

static const struct inv invariants[] = {
    {bad_vcur, fix_vcur, 0},     {bad_vlen, fix_vlen, 0},       {bad_vlen, fix_vlen, 1},
    {bad_vtoken, fix_vtoken, 0}, {bad_vtoken, fix_vtoken, 1},   {bad_floor, fix_floor, 0},
    {bad_state, fix_state, 0},   {bad_state, fix_state, 0},     {bad_state, fix_state, 0},
    {bad_unused, NULL, 0},       {bad_holder, NULL, 0},         {bad_acquired, fix_acquired, 0},
    {bad_takeovers, NULL, 0},    {bad_dead, fix_dead, 0},       {bad_mask, fix_mask, 0},
    {bad_shared, fix_shared, 0}, {bad_retired, fix_retired, 0},
};

void shl__slot_invariants(const struct shl__inv_ctx *x, struct shl__slot *s, int fix,
                          shl__inv_say_fn say, void *arg)
{
    char m[192], a[128];
    for (size_t k = 0; k < sizeof invariants / sizeof invariants[0]; k++) {
        const struct inv *v = &invariants[k];
        if (!v->bad(x, s, v->i, m, sizeof m))
            continue;
        if (!fix) {
            say(arg, m);
        } else if (v->fix) {
            v->fix(x, s, v->i, a, sizeof a);
            size_t l = strlen(m);
            snprintf(m + l, sizeof m - l, ": %s", a);
            say(arg, m);
        }
    }
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
        if (e->pid <= 0 || e->pid > PID_LIMIT)
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
        if (((acq || !any_shared) && e->token < last_token) || e->token > top_token(s))
            problem(c, "%s: history entry %u (%s) has token %llu out of order (lease token %llu)",
                    who, at, shl_op_name(e->op), (unsigned long long)e->token,
                    (unsigned long long)top_token(s));
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

/* Each group taken by a slot that does not name it (a leak: nobody gives
 * it back), or by a slot that holds no lease. */
static void check_pools(struct ck *c, const shl_table *t)
{
    uint32_t nslots = shl__tnslots(t);
    for (int k = 0; k < 2; k++) {
        uint32_t n = shl__pool_groups(t, (enum shl__pool)k), o, g;
        struct shl__pool_cursor cur = {0, 0};
        while ((g = shl__pool_next_taken(t, (enum shl__pool)k, &cur, &o)) < n) {
            if (o - 1 >= nslots) {
                problem(c, "%s: group %u is taken by slot %u, which holds no lease",
                        shl__pool_name((enum shl__pool)k), g, o - 1);
                continue;
            }
            if (!leaked(c, t, (enum shl__pool)k, g, o))
                continue;
            char nm[SHL__NAME_MAX + 1];
            struct shl__key key;
            int has_name = shl__slot_key(shl__tslot(t, o - 1), nm, &key) == 0;
            problem(c, "%s: group %u is taken by %s%s%s(slot %u), which does not name it (leaked)",
                    shl__pool_name((enum shl__pool)k), g, has_name ? "lease " : "",
                    has_name ? nm : "", has_name ? " " : "", o - 1);
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
