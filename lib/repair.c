/*
 * lib/repair.c - bringing a table back to a consistent state.
 *
 * Every fix is one the library itself would make, in the same way: a dead
 * locker's slot is recovered by locking it (the EOWNERDEAD handler); an
 * unrecoverable lock is reinitialised only after its lease's intent was
 * finished, while every lock attempt on it fails at once so nobody is
 * inside; a damaged index is rebuilt from the slots' names under the table
 * lock. Nothing ever lowers a token: the only token change is raising one that
 * is below its own value's token. Each step is idempotent, so a repairer that
 * dies is simply run again.
 *
 * A dry run performs the same fixes on private copies of the slots, so that
 * it reports exactly what a real run would do.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

struct rp {
    shl_table *t;
    int dry;
    void (*report)(void *arg, const char *action);
    void *arg;
    unsigned actions, refused;
};

__attribute__((format(printf, 3, 4))) static void say(struct rp *r, int refused, const char *fmt,
                                                      ...)
{
    char buf[320];
    int n = snprintf(buf, sizeof buf, "%s%s", refused ? "cannot repair: " : "",
                     r->dry && !refused ? "would: " : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (refused)
        r->refused++;
    else
        r->actions++;
    if (r->report)
        r->report(r->arg, buf);
}

/* ------------------------------------------------------------ table lock */

static void repair_table_lock(struct rp *r)
{
    struct shl__hdr *h = r->t->hdr;
    int32_t tid;
    int st = shl__mutex_peek(&h->table_lock, &tid);
    int armed = atomic_load_explicit(&h->add_armed, memory_order_acquire) != 0;
    if (st == SHL__MX_BADKIND) {
        say(r, 1, "table lock is damaged (not a robust process-shared mutex)");
        return;
    }
    if (st == SHL__MX_BROKEN) {
        say(r, 0, "table lock is unrecoverable: finish the pending name add, reinitialise it");
        if (!r->dry) {
            shl__index_repair(h);
            if (shl__mutex_reinit(&h->table_lock) != 0)
                say(r, 1, "table lock could not be reinitialised");
        }
        return;
    }
    if (st == SHL__MX_DEAD || (st == SHL__MX_FREE && armed)) {
        say(r, 0, "table lock: %s; roll the name add forward",
            st == SHL__MX_DEAD ? "its holder died" : "a name add is armed with nobody adding");
        if (!r->dry && shl__mutex_lock(&h->table_lock, shl__index_repair, h) == 0) {
            shl__index_repair(h);
            shl__mutex_unlock(&h->table_lock);
        }
    }
}

/* ----------------------------------------------------------------- index */

static int slot_key(const struct shl__slot *s, char *buf, struct shl__key *k)
{
    uint32_t n = SHL__LD(s->name_len);
    if (n == 0 || n > SHL__NAME_MAX)
        return -1;
    shl__copy_from_shared(buf, s->name, n);
    buf[n] = '\0';
    return shl__key_lease(buf, k) == SHL_OK && k->len == n ? 0 : -1;
}

static int index_damaged(const struct shl__hdr *h, uint32_t n)
{
    _Atomic uint32_t *idx = shl__index(h);
    uint32_t used = 0;
    for (uint32_t b = 0; b < h->index_size; b++) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v && (v - 1 >= n || ++used > n))
            return 1;
    }
    char nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    for (uint32_t i = 0; i < n; i++) {
        if (slot_key(shl__slot_at(h, i), nm, &k) != 0)
            continue; /* reported by the rebuild */
        uint32_t mask = h->index_size - 1, b = (uint32_t)k.hash & mask, found = 0;
        for (uint32_t p = 0; p < h->index_size && !found; p++, b = (b + 1) & mask) {
            uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
            if (v == 0)
                break;
            found = v == i + 1;
        }
        if (!found)
            return 1;
    }
    return used != n;
}

/* Rebuilds every bucket from the slots' names. Called with the table lock. */
static void rebuild_index(struct rp *r, struct shl__hdr *h, uint32_t n)
{
    _Atomic uint32_t *idx = shl__index(h);
    for (uint32_t b = 0; b < h->index_size; b++)
        atomic_store_explicit(&idx[b], 0, memory_order_relaxed);
    SHL__CRASH(SHL__CP_REPAIR_INDEX);
    char nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    for (uint32_t i = 0; i < n; i++) {
        if (slot_key(shl__slot_at(h, i), nm, &k) != 0) {
            say(r, 1, "slot %u has a damaged name; it stays out of the index", i);
            continue;
        }
        uint32_t mask = h->index_size - 1, b = (uint32_t)k.hash & mask, p = 0;
        int dup = 0;
        for (; p < h->index_size; p++, b = (b + 1) & mask) {
            uint32_t v = atomic_load_explicit(&idx[b], memory_order_relaxed);
            if (v == 0)
                break;
            const struct shl__slot *o = shl__slot_at(h, v - 1);
            if (o->name_len == k.len && memcmp(o->name, nm, k.len) == 0)
                dup = 1;
        }
        if (dup)
            say(r, 1, "slot %u repeats the name %s of another slot; it stays out of the index", i,
                nm);
        else if (p < h->index_size)
            atomic_store_explicit(&idx[b], i + 1, memory_order_release);
    }
}

static void repair_index(struct rp *r)
{
    struct shl__hdr *h = r->t->hdr;
    uint32_t n = atomic_load_explicit(&h->nslots, memory_order_acquire);
    if (!index_damaged(h, n))
        return;
    say(r, 0, "index is damaged: rebuild it from the %u lease names", n);
    if (r->dry)
        return;
    if (shl__mutex_lock(&h->table_lock, shl__index_repair, h) != 0) {
        say(r, 1, "the table lock cannot be taken to rebuild the index");
        return;
    }
    rebuild_index(r, h, n);
    shl__mutex_unlock(&h->table_lock);
}

/* ----------------------------------------------------------------- slots */

/* Fixes the damage a locked slot (or a private copy) can have. */
static void fix_locked(struct rp *r, struct shl__slot *s, const char *who)
{
    shl_table *t = r->t;
    if (atomic_load_explicit(&s->intent_armed, memory_order_relaxed)) {
        say(r, 0, "%s: finish the armed %s (token %llu)", who, shl_op_name((int)s->meta.op),
            (unsigned long long)s->intent.token);
        shl__seq_begin(s);
        shl__intent_apply(s, 0);
        shl__seq_end(s);
        atomic_store_explicit(&s->intent_armed, 0, memory_order_release);
    }
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) & 1) {
        say(r, 0, "%s: close the change left open (seq %u)", who, s->seq);
        shl__seq_end(s);
    }
    shl__seq_begin(s);
    struct shl__holder *c = &s->cur;
    if (s->vcur > 1) {
        uint32_t keep = s->vh[1].token > s->vh[0].token ? 1 : 0;
        say(r, 0, "%s: value index %u is damaged: keep buffer %u", who, s->vcur, keep);
        atomic_store_explicit(&s->vcur, keep, memory_order_relaxed);
    }
    for (int i = 0; i < 2; i++) {
        if (s->vh[i].len > t->value_size) {
            say(r, 0, "%s: value buffer %d length %u is damaged: empty it", who, i, s->vh[i].len);
            SHL__ST(s->vh[i].len, 0);
        }
        if (s->vh[i].token > c->token) {
            say(r, 0, "%s: raise the token from %llu to %llu, the token of its value", who,
                (unsigned long long)c->token, (unsigned long long)s->vh[i].token);
            SHL__ST(c->token, s->vh[i].token);
            if (c->state == SHL__ST_HELD)
                SHL__ST(c->state, SHL__ST_REVOKED);
        }
    }
    if (c->state > SHL__ST_REVOKED || c->owner_len > SHL__OWNER_MAX || c->op >= SHL__OP_COUNT) {
        say(r, 0, "%s: holder record is damaged: end it (revoked, token %llu kept)", who,
            (unsigned long long)c->token);
        SHL__ST(c->state, c->token ? SHL__ST_REVOKED : SHL__ST_FREE);
        SHL__ST(c->owner_len, c->owner_len > SHL__OWNER_MAX ? SHL__OWNER_MAX : c->owner_len);
        SHL__ST(c->op, c->op >= SHL__OP_COUNT ? SHL__OP_NONE : c->op);
    }
    if (s->count[SHL__C_ACQUIRE] != c->token) {
        say(r, 0, "%s: set the acquisition counter from %llu to the token %llu", who,
            (unsigned long long)s->count[SHL__C_ACQUIRE], (unsigned long long)c->token);
        SHL__ST(s->count[SHL__C_ACQUIRE], c->token);
    }
    if (s->dead_token > c->token)
        SHL__ST(s->dead_token, 0);
    if (!shl__history_ok(s)) {
        say(r, 0, "%s: history is damaged: clear it", who);
        for (int i = 0; i < SHL__HIST_LEN; i++) {
            struct shl__event e = {0};
            shl__copy_to_shared(&s->hist[i], &e, sizeof e);
        }
        SHL__ST(s->hist_next, 0);
    }
    shl__seq_end(s);
}

/* Ends an orphaned lease when the table's policy reclaims orphans. */
static void reclaim_locked(struct rp *r, struct shl__slot *s, const char *who)
{
    shl_table *t = r->t;
    struct shl__holder *c = &s->cur;
    uint64_t now = shl__now(t);
    if (c->state != SHL__ST_HELD || now >= c->expiry)
        return;
    int dead;
    if (!shl__orphan_due(t, s, now, &dead)) {
        if (dead)
            say(r, 0,
                "%s: holder pid %d is dead: note it; it may be reclaimed after the lock-delay", who,
                (int)c->pid);
        return; /* alive, not provably dead, or left until its expiry by the policy */
    }
    say(r, 0, "%s: holder pid %d is dead: end its lease (the next acquire gets token %llu)", who,
        (int)c->pid, (unsigned long long)c->token + 1);
    struct shl__holder next = *c;
    next.state = SHL__ST_REVOKED;
    next.op = SHL__OP_RECLAIM;
    shl__intent_arm(s, &next, SHL__OP_REVOKE, now, t->self.pid, SHL__C_REVOKE, SHL__C_COUNT, 0);
    shl__intent_commit(s, 0, 0);
    shl__slot_freed(s, now);
    shl__wake_waiters(s, 1); /* waiters and the (dead) holder's renewer, if any */
}

static void repair_slot(struct rp *r, uint32_t i, struct shl__slot *copy)
{
    struct shl__hdr *h = r->t->hdr;
    struct shl__slot *s = shl__slot_at(h, i);
    char who[SHL__NAME_MAX + 32], nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    if (slot_key(s, nm, &k) == 0) {
        snprintf(who, sizeof who, "lease %s", nm);
    } else {
        snprintf(who, sizeof who, "slot %u", i);
        say(r, 1, "%s: its name is damaged and cannot be recovered", who);
    }
    int32_t tid;
    int st = shl__mutex_peek(&s->lock, &tid);
    if (st == SHL__MX_HELD)
        return; /* a live process is inside; it will finish its change */
    if (st == SHL__MX_BADKIND) {
        say(r, 1, "%s: its lock is damaged (not a robust process-shared mutex)", who);
        return;
    }
    struct shl__slot *w = s; /* the slot to work on: the real one or a copy */
    if (r->dry) {
        unsigned char pv[1];
        shl__slot_snapshot(h, s, copy, pv, 0);
        w = copy;
    }
    if (st == SHL__MX_DEAD || st == SHL__MX_BROKEN) {
        int armed = atomic_load_explicit(&w->intent_armed, memory_order_acquire) != 0;
        char what[96] = "nothing to roll forward";
        if (armed)
            snprintf(what, sizeof what, "roll the %s of token %llu forward",
                     shl_op_name((int)w->meta.op), (unsigned long long)w->intent.token);
        say(r, 0, "%s: %s (tid %d); %s%s", who,
            st == SHL__MX_DEAD ? "the lock's holder died" : "the lock is unrecoverable", (int)tid,
            what, st == SHL__MX_BROKEN ? ", reinitialise the lock" : "");
    }
    if (r->dry) {
        if (st == SHL__MX_DEAD || st == SHL__MX_BROKEN)
            shl__slot_repair_locked(r->t, w);
        fix_locked(r, w, who);
        reclaim_locked(r, w, who);
        return;
    }
    if (st == SHL__MX_BROKEN) {
        shl__slot_repair_locked(r->t, s);
        SHL__CRASH(SHL__CP_REPAIR_MUTEX);
        if (shl__mutex_reinit(&s->lock) != 0) {
            say(r, 1, "%s: its lock could not be reinitialised", who);
            return;
        }
    }
    if (shl__slot_lock(r->t, s) != SHL_OK) { /* EOWNERDEAD is repaired in here */
        say(r, 1, "%s: its lock cannot be taken", who);
        return;
    }
    fix_locked(r, s, who);
    reclaim_locked(r, s, who);
    shl__slot_unlock(s);
}

static void header_problem(void *arg, const char *p)
{
    struct rp *r = arg;
    say(r, 1, "%s", p);
}

int shl_repair(shl_table *t, unsigned flags, void (*report)(void *arg, const char *action),
               void *arg)
{
    SHL__CHECK_HANDLE(t);
    if (flags & ~SHL_REPAIR_DRY_RUN)
        return SHL_EINVAL;
    struct rp r = {t, (flags & SHL_REPAIR_DRY_RUN) != 0, report, arg, 0, 0};
    struct shl__hdr *h = t->hdr;
    /* The header is fixed at creation and holds the geometry: a damaged one
     * cannot be trusted to rebuild anything from. */
    if (shl__seg_check_header(h, t->size, SHL__UID_ANY, NULL, NULL, NULL) != 0) {
        shl_check_image(h, t->size, header_problem, &r);
        if (!r.refused)
            say(&r, 1, "the header is damaged");
        return SHL_ECORRUPT;
    }
    struct shl__slot *copy = malloc(sizeof *copy);
    if (!copy)
        return SHL_ENOMEM;
    repair_table_lock(&r);
    repair_index(&r);
    uint32_t n = atomic_load_explicit(&h->nslots, memory_order_acquire);
    for (uint32_t i = 0; i < n && i < h->capacity; i++)
        repair_slot(&r, i, copy);
    free(copy);
    if (!r.dry && r.actions)
        atomic_fetch_add_explicit(&h->generation, 1, memory_order_relaxed);
    if (r.refused || (r.dry && r.actions))
        return SHL_ECORRUPT;
    return SHL_OK;
}
