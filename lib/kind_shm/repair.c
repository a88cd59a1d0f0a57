/*
 * lib/kind_shm/repair.c - bringing a table back to a consistent state.
 *
 * Every fix is one the library itself would make, in the same way: a dead
 * locker's slot is recovered by locking it (the EOWNERDEAD handler); an
 * unrecoverable lock is reinitialised only after its lease's intent was
 * finished, while every lock attempt on it fails at once so nobody is
 * inside (and looked at again right before); a damaged index is mended in
 * place under the table lock (lib/kind_shm/index.c: it never clears a bucket that
 * lock-free readers may be walking, and a mender that dies is finished by the
 * next locker). Nothing ever lowers a token: the only token change is raising
 * one that is below its own value's token. Each step is idempotent, so a
 * repairer that dies is simply run again. One repairer runs at a time.
 *
 * A dry run performs the same fixes on private copies of the slots, so that
 * it reports exactly what a real run would do.
 *
 * The shared-memory half of shl_repair(); its entry point, with the checks
 * of its arguments, is in lib/repair.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>

#include "shm_kind.h"

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
    shl_table *t = r->t;
    struct shl__hdr *h = t->hdr;
    int32_t tid;
    int st = shl__mutex_peek(&h->table_lock, &tid);
    if (st == SHL__MX_BADKIND) {
        say(r, 1, "table lock is damaged (not a robust process-shared mutex)");
        return;
    }
    if (st == SHL__MX_BROKEN) {
        say(r, 0,
            "table lock is unrecoverable: finish a pending name add or index mend, reinitialise "
            "it");
        if (r->dry)
            return;
        /* Every lock attempt fails at once while it is broken, so nobody is
         * inside; other repairers are kept out by the file lock. Look again
         * right before reinitialising: reinitialising a mutex that someone
         * holds would let a second locker in. */
        shl__index_repair(t);
        if (shl__mutex_peek(&h->table_lock, &tid) != SHL__MX_BROKEN ||
            shl__mutex_reinit(&h->table_lock) != 0)
            say(r, 1, "table lock could not be reinitialised");
        return;
    }
    int armed = atomic_load_explicit(&h->add_armed, memory_order_acquire) ||
                atomic_load_explicit(&h->index_fix, memory_order_acquire);
    if (st == SHL__MX_DEAD || (st == SHL__MX_FREE && armed))
        say(r, 0, "table lock: %s; roll the name add or the index mend forward",
            st == SHL__MX_DEAD ? "its holder died" : "a change is armed with nobody making it");
    /* repair_index() takes the lock next, which rolls them forward. */
    if (!r->dry && st == SHL__MX_FREE && armed && shl__table_lock(t) == SHL_OK) {
        shl__index_repair(t);
        shl__mutex_unlock(&h->table_lock);
    }
}

/* ----------------------------------------------------------------- index */

static void index_problem(void *arg, enum shl__ix what, uint32_t a, uint32_t b)
{
    struct rp *r = arg;
    char buf[256];
    shl__ix_text(r->t, what, a, b, 1, buf, sizeof buf);
    say(r, what == SHL__IX_FULL, "%s", buf);
}

/* Decided and mended under the table lock, over the names counted now: a
 * name added while repair runs is either counted (and found) or not yet
 * there, never taken for damage. A dry run looks without the lock when its
 * holder died or it is unrecoverable (taking it would repair, or fail); a
 * damaged lock (reported) is not touched. */
static void repair_index(struct rp *r)
{
    shl_table *t = r->t;
    int32_t tid;
    int st = shl__mutex_peek(&t->hdr->table_lock, &tid);
    if (st == SHL__MX_BADKIND)
        return;
    int locked = !r->dry || (st != SHL__MX_DEAD && st != SHL__MX_BROKEN);
    if (locked && shl__table_lock(t) != SHL_OK) {
        say(r, 1, "the table lock cannot be taken to check the index");
        return;
    }
    shl__index_mend(t, !r->dry, index_problem, r);
    if (locked)
        shl__mutex_unlock(&t->hdr->table_lock);
}

/* ----------------------------------------------------------------- slots */

struct who_say {
    struct rp *r;
    const char *who;
};

static void slot_action(void *arg, const char *text)
{
    struct who_say *w = arg;
    say(w->r, 0, "%s: %s", w->who, text);
}

/* Fixes the damage a locked slot (or a private copy) can have: first a
 * change left open, then the slot invariants (check.c lists them). */
static void fix_locked(struct rp *r, struct shl__slot *s, uint32_t no, const char *who)
{
    shl_table *t = r->t;
    if (atomic_load_explicit(&s->intent_armed, memory_order_relaxed)) {
        say(r, 0, "%s: finish the armed %s (token %llu)", who, shl_op_name((int)s->meta.op),
            (unsigned long long)s->intent.token);
        shl__seq_begin(s);
        shl__intent_apply(t, s, 0);
        shl__seq_end(s);
        atomic_store_explicit(&s->intent_armed, 0, memory_order_release);
    }
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) & 1) {
        say(r, 0, "%s: close the change left open (seq %u)", who, s->seq);
        shl__seq_end(s);
    }
    shl__seq_begin(s);
    struct shl__inv_ctx x = {t, t->value_size, t->token_floor, 1, shl__now(t)};
    struct who_say w = {r, who};
    /* The refs first: a record of a group it cannot name is no holder. */
    shl__pool_slot_refs(t, s, no, 1, slot_action, &w);
    shl__slot_invariants(&x, s, 1, slot_action, &w);
    uint32_t unused = shl__pool_trim(t, s);
    if (unused)
        say(r, 0, "%s: %u pool group%s taken but unused: give %s back", who, unused,
            unused == 1 ? "" : "s", unused == 1 ? "it" : "them");
    if (SHL__MUTANT(REPAIR_LOWER)) {
        const struct shl__vhdr *vh = shl__tvcur(t, s);
        uint64_t vt = vh ? vh->token : 0;
        if (vt && vt < s->cur.token) {
            SHL__ST(s->cur.token, vt);
            SHL__ST(s->tok_last, vt);
        }
    }
    if (!shl__history_ok(t, s)) {
        say(r, 0, "%s: history is damaged: clear it", who);
        for (uint32_t i = 0; i < t->geom.history; i++) {
            struct shl__event e = {0};
            shl__copy_to_shared(&shl__slot_hist(s)[i], &e, sizeof e);
        }
        SHL__ST(s->hist_next, 0);
    }
    shl__seq_end(s);
}

/* Ends the shared holders proven dead whose reclaim delay has passed, when the
 * table's policy reclaims orphans: one store of the mask. */
static void reclaim_shared_locked(struct rp *r, struct shl__slot *s, const char *who)
{
    shl_table *t = r->t;
    uint64_t now = shl__now(t);
    uint64_t keep = atomic_load_explicit(&s->shared, memory_order_relaxed);
    for (uint32_t i = 0; keep && i < SHL__SHARED_MAX; i++) {
        int dead;
        if (!shl__sh_valid(t, s, i, now) || !shl__orphan_due_shared(t, s, i, now, &dead))
            continue;
        say(r, 0, "%s: shared holder pid %d (token %llu) is dead: end it", who,
            (int)shl__tsh(t, s, i)->pid, (unsigned long long)shl__tsh(t, s, i)->token);
        keep &= ~(UINT64_C(1) << i);
    }
    if (keep == atomic_load_explicit(&s->shared, memory_order_relaxed) || r->dry)
        return;
    shl__seq_begin(s);
    atomic_store_explicit(&s->shared, keep, memory_order_relaxed);
    shl__pool_trim(t, s); /* the groups of those ended, if unused now */
    shl__seq_end(s);
    if (shl__shared_count(t, s, now) == 0)
        shl__slot_freed(s, now);
    shl__wake_waiters(s, 0);
}

/* Ends an orphaned lease when the table's policy reclaims orphans. */
static void reclaim_locked(struct rp *r, struct shl__slot *s, const char *who)
{
    reclaim_shared_locked(r, s, who);
    shl_table *t = r->t;
    struct shl__holder *c = &s->cur;
    uint64_t now = shl__now(t);
    if (c->state != SHL__ST_HELD || now >= c->expiry)
        return;
    int dead;
    if (!shl__orphan_due(t, s, now, &dead)) {
        if (dead)
            say(r, 0,
                "%s: holder pid %d is dead: note it; it may be reclaimed after the reclaim delay",
                who, (int)c->pid);
        return; /* alive, not provably dead, or left until its expiry by the policy */
    }
    say(r, 0, "%s: holder pid %d is dead: end its lease (the next acquire gets token %llu)", who,
        (int)c->pid, (unsigned long long)c->token + 1);
    struct shl__holder next = *c;
    next.state = SHL__ST_REVOKED;
    next.op = SHL__OP_RECLAIM;
    shl__intent_arm(t, s, &next, SHL__OP_REVOKE, now, t->self.pid, SHL__C_REVOKE, SHL__C_COUNT, 0);
    shl__intent_commit(t, s, 0, 0);
    shl__slot_freed(s, now);
    shl__wake_waiters(s, 1); /* waiters and the (dead) holder's renewer, if any */
}

/* Groups slot i owns but does not name (w: the slot, locked, or a copy):
 * leaked, given back under the slot's lock. */
static void strays(struct rp *r, uint32_t i, struct shl__slot *w, const char *who)
{
    uint32_t n = shl__pool_strays(r->t, i, w, 0);
    if (!n)
        return;
    say(r, 0, "%s: %u pool group%s taken but not named (leaked): give %s back", who, n,
        n == 1 ? "" : "s", n == 1 ? "it" : "them");
    if (!r->dry)
        shl__pool_strays(r->t, i, w, 1);
}

static void repair_slot(struct rp *r, uint32_t i, struct shl__slot_image *copy)
{
    struct shl__slot *s = shl__tslot(r->t, i);
    char who[SHL__NAME_MAX + 32], nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    if (shl__slot_key(s, nm, &k) == 0) {
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
        shl__slot_snapshot(r->t, s, copy, pv, 0);
        w = &copy->slot;
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
        strays(r, i, w, who);
        fix_locked(r, w, i, who);
        reclaim_locked(r, w, who);
        return;
    }
    if (st == SHL__MX_BROKEN) {
        shl__slot_repair_locked(r->t, s);
        SHL__CRASH(SHL__CP_REPAIR_MUTEX);
        /* Still broken right now (see repair_table_lock). */
        if (shl__mutex_peek(&s->lock, &tid) != SHL__MX_BROKEN || shl__mutex_reinit(&s->lock) != 0) {
            say(r, 1, "%s: its lock could not be reinitialised", who);
            return;
        }
    }
    if (shl__slot_lock(r->t, s) != SHL_OK) { /* EOWNERDEAD is repaired in here */
        say(r, 1, "%s: its lock cannot be taken", who);
        return;
    }
    strays(r, i, s, who);
    fix_locked(r, s, i, who);
    reclaim_locked(r, s, who);
    shl__slot_unlock(s);
}

/* Groups taken by a slot that holds no lease: no lock guards them (no slot
 * names them, and a slot added later starts naming none), so they go back
 * at once. Under the table lock, which every addition of a name holds: a
 * lease added while this runs (found by its bucket before `nslots` moves)
 * may take a group at once, which must not look orphaned. */
static void repair_orphan_groups(struct rp *r)
{
    int locked = !r->dry && shl__table_lock(r->t) == SHL_OK;
    if (!r->dry && !locked)
        return; /* the table lock could not be had: the next repair */
    uint32_t nslots = shl__tnslots(r->t);
    for (int k = 0; k < SHL__POOL_COUNT; k++) {
        uint32_t n = shl__pool_groups(r->t, (enum shl__pool)k);
        for (uint32_t g = 0; g < n; g++) {
            uint32_t o = shl__pool_owner(r->t, (enum shl__pool)k, g);
            if (!o || o - 1 < nslots)
                continue;
            say(r, 0, "%s: %s %u is taken by slot %u, which holds no lease: give it back",
                shl__pool_name((enum shl__pool)k), shl__pool_item((enum shl__pool)k), g, o - 1);
            if (!r->dry)
                shl__pool_release_group(r->t, (enum shl__pool)k, g, o);
        }
    }
    if (locked)
        shl__mutex_unlock(&r->t->hdr->table_lock);
}

/* One repairer at a time: an exclusive flock on the segment's file (per open
 * file description, so two handles in one process exclude each other too;
 * the kernel drops it when a repairer dies). Waits up to 10 s for another
 * repairer to finish. */
static int repairer_lock(shl_table *t)
{
    for (int ms = 0;; ms++) {
        if (flock(t->fd, LOCK_EX | LOCK_NB) == 0)
            return SHL_OK;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return SHL_ESYS;
        if (ms >= 10000)
            return SHL_ETIMEDOUT;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void header_problem(void *arg, const char *p)
{
    struct rp *r = arg;
    say(r, 1, "%s", p);
}

int shl__shm_repair(shl_table *t, unsigned flags, void (*report)(void *arg, const char *action),
                    void *arg)
{
    /* A removed table's locks all refuse (SHL_EREMOVED): nothing to mend,
     * and "cannot repair" would send its user looking for damage. */
    if (shl__removed(t))
        return SHL_EREMOVED;
    struct rp r = {t, (flags & SHL_REPAIR_DRY_RUN) != 0, report, arg, 0, 0};
    struct shl__hdr *h = t->hdr;
    /* The header is fixed at creation and holds the geometry: a damaged one
     * cannot be trusted to rebuild anything from. */
    if (shl__seg_check_header(h, t->size, SHL__UID_ANY, NULL, NULL, NULL) != 0) {
        shl__shm_check_image(h, t->size, header_problem, &r);
        if (!r.refused)
            say(&r, 1, "the header is damaged");
        return SHL_ECORRUPT;
    }
    struct shl__slot_image *copy = malloc(sizeof *copy);
    if (!copy)
        return SHL_ENOMEM;
    int rc = r.dry ? SHL_OK : repairer_lock(t);
    if (rc != SHL_OK) {
        free(copy);
        return rc;
    }
    repair_table_lock(&r);
    repair_index(&r);
    uint32_t n = shl__tnslots(t); /* after the index: names added meanwhile are whole */
    for (uint32_t i = 0; i < n; i++)
        repair_slot(&r, i, copy);
    repair_orphan_groups(&r);
    free(copy);
    if (!r.dry && r.actions)
        atomic_fetch_add_explicit(&h->generation, 1, memory_order_relaxed);
    if (!r.dry)
        flock(t->fd, LOCK_UN);
    if (shl__removed(t)) /* while it ran: the locks it could not take say so */
        return SHL_EREMOVED;
    if (r.refused || (r.dry && r.actions))
        return SHL_ECORRUPT;
    return SHL_OK;
}
