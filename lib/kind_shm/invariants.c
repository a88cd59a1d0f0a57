/*
 * lib/kind_shm/invariants.c - the invariants of one slot's holder, values
 * and counters, listed once for check and repair (shl__slot_invariants()).
 *
 * Check (kind_shm/check.c) says each broken one as a problem of the slot,
 * over a copy or an image; repair (kind_shm/repair.c) mends those it can on
 * the locked slot, in the same order. The table-wide checks (header, index,
 * pools) and the slot's lock, intent and history are check.c's.
 */
#include <stdio.h>

#include "shm_kind.h"

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

/* `vcur`: the committed buffer, the slot's own (offset 0) or the spare
 * its `vref` names, with SHL__VCUR_RETIRED exactly in a retired slot
 * (bound reads learn of the retirement from it) and no other flag. */
static int retired_slot(const struct shl__slot *s)
{
    return s->cur.state == SHL__ST_RETIRED;
}

static const char *const vbuf_name[] = {"its own value buffer", "its spare value buffer"};

static int bad_vcur(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    (void)i;
    uint64_t v = s->vcur, mark = retired_slot(s) ? SHL__VCUR_RETIRED : 0;
    if (shl__tvcur_which(x->t, s) < 0)
        return snprintf(m, n, "value offset %llu names neither of its value buffers",
                        (unsigned long long)(v & ~SHL__VCUR_FLAGS)) > 0;
    if ((v & SHL__VCUR_FLAGS) == mark)
        return 0;
    if ((v & SHL__VCUR_FLAGS & ~SHL__VCUR_RETIRED) || !retired_slot(s))
        return snprintf(m, n, "value offset flags %llu are not %llu",
                        (unsigned long long)(v & SHL__VCUR_FLAGS), (unsigned long long)mark) > 0;
    return snprintf(m, n,
                    "retired, but its value is not marked so (a bound read would not "
                    "follow the name)") > 0;
}

static void fix_vcur(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    (void)i;
    /* The buffer it names, if any; else its own. */
    int w = shl__tvcur_which(x->t, s);
    uint64_t rel = w > 0 ? s->vcur & ~SHL__VCUR_FLAGS : 0;
    snprintf(m, n, "keep %s%s", vbuf_name[w > 0], retired_slot(s) ? ", marked retired" : "");
    atomic_store_explicit(&s->vcur, rel | (retired_slot(s) ? SHL__VCUR_RETIRED : 0),
                          memory_order_relaxed);
}

static int bad_vlen(const struct shl__inv_ctx *x, const struct shl__slot *s, int i, char *m,
                    size_t n)
{
    const struct shl__vhdr *h = shl__tvh(x->t, s, (uint32_t)i);
    return h && h->len > x->value_size &&
           snprintf(m, n, "%s: length %u out of range", vbuf_name[i], h->len);
}

static void fix_vlen(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    snprintf(m, n, "empty it");
    SHL__ST(shl__tvh(x->t, s, (uint32_t)i)->len, 0);
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
    const struct shl__vhdr *h = shl__tvh(x->t, s, (uint32_t)i);
    return h && h->token > s->cur.token &&
           snprintf(m, n, "%s written by token %llu, above the lease's token %llu", vbuf_name[i],
                    (unsigned long long)h->token, (unsigned long long)s->cur.token);
}

static void fix_vtoken(const struct shl__inv_ctx *x, struct shl__slot *s, int i, char *m, size_t n)
{
    uint64_t tok = shl__tvh(x->t, s, (uint32_t)i)->token;
    snprintf(m, n, "raise the token to %llu, the token of its value", (unsigned long long)tok);
    raise_token(s, tok);
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
        (h->owner_len == 0 || h->since > h->expiry || h->pid <= 0 || h->pid > SHL__PID_LIMIT))
        return snprintf(m, n,
                        "holder of token %llu is inconsistent (owner length %u, since %llu, "
                        "expiry %llu, pid %d)",
                        (unsigned long long)h->token, h->owner_len, (unsigned long long)h->since,
                        (unsigned long long)h->expiry, (int)h->pid) > 0;
    return x->live && h->token != 0 && h->since > x->now &&
           snprintf(m, n, "acquired at %llu, after the table's now %llu",
                    (unsigned long long)h->since, (unsigned long long)x->now);
}

/* Every acquisition, of either kind, issues the next token, from just above
 * the table's floor (0 without one), so a lease's last token is the floor
 * plus its acquisitions. */
static uint64_t acquisitions(const struct shl__inv_ctx *x, const struct shl__slot *s)
{
    return shl__top_token(s) > x->floor ? shl__top_token(s) - x->floor : 0;
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
                    (unsigned long long)s->count[SHL__C_SHARED],
                    (unsigned long long)shl__top_token(s), (unsigned long long)x->floor);
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
        h->since > h->expiry || h->pid <= 0 || h->pid > SHL__PID_LIMIT)
        return snprintf(m, n,
                        "shared holder %d (token %llu) is inconsistent (state %u, owner length "
                        "%u, since %llu, expiry %llu, pid %d)",
                        i, (unsigned long long)h->token, h->state, h->owner_len,
                        (unsigned long long)h->since, (unsigned long long)h->expiry,
                        (int)h->pid) > 0;
    if (h->token <= s->cur.token || h->token > shl__top_token(s))
        return snprintf(m, n,
                        "shared holder %d has token %llu, not between the exclusive token %llu "
                        "and the lease's last token %llu",
                        i, (unsigned long long)h->token, (unsigned long long)s->cur.token,
                        (unsigned long long)shl__top_token(s)) > 0;
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
    return s->dead_token > shl__top_token(s) &&
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
