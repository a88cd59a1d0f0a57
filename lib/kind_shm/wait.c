/*
 * lib/kind_shm/wait.c - waiting for a lease: a FIFO queue of waiters per lease and a
 * futex to sleep on.
 *
 * A waiter that finds the lease held takes a ticket and an entry in the
 * slot's queue (under the slot mutex), reads the slot's `wake` word, unlocks
 * and sleeps on that word until release or revoke bumps it, the holder's
 * expiry, or its own deadline. When the lease is acquirable, only the queued
 * waiter with the oldest ticket may take it (the releaser, coming back for
 * more, queues behind everyone already waiting): that is the fairness bound
 * documented in shmlease.h. Two ways keep a broken waiter from blocking the
 * line: a head whose handle is proven closed (orphan.c) is dropped by the
 * next waiter that looks, and a head that is alive but does not take
 * its turn within SHL_WAIT_TURN_GRACE_NS (stopped, starved) is passed over
 * and sent to the back of the queue with a new ticket. A waiter therefore
 * knows its entry by index and identity (alive id and nonce), never by
 * ticket.
 *
 * Waiters of both kinds share the queue (an entry's `kind`). A reader's turn
 * needs no head: it comes when the lease has no valid exclusive holder and
 * no writer queued before it (shl__writer_queued()), so the readers ahead of
 * the next writer go in together; a writer's turn is the head's, once no
 * holder of either kind is valid. A plain shl_acquire_shared() asks the same
 * question about every queued writer: readers never pass a queued writer.
 * A waiter whose slot repair retires (the name was in two slots) leaves its
 * queue and queues in the slot that kept the name.
 *
 * Nothing here is on the hot path: shl_release() pays one relaxed load of
 * `waiters` and makes the wake system call only when someone waits.
 *
 * The entry points shl_acquire_wait() and shl_acquire_shared_wait() are in
 * lib/wait.c; a wait on this kind comes here after their checks.
 */
#include <limits.h>

#include "../../shm/futex.h"
#include "shm_kind.h"

/* Manual-clock tables: the holder's expiry is not on CLOCK_MONOTONIC, so a
 * waiter cannot sleep until it; it looks again this often. Also the
 * re-check period of a waiter that found the queue full. */
#define RECHECK_NS (UINT64_C(10) * 1000000)

/* The longest a queued waiter sleeps without looking at the slot's words.
 * Whoever frees the lease (release, revoke, a shared holder's release, a
 * twin's retirement) unlocks and then makes the wake system call: killed in
 * between, or inside its critical section after its store, it leaves the
 * lease free and nobody to wake the waiters. So a waiter wakes up this often
 * on its own; the futex call itself tells whether `wake` moved, one load
 * whether `seq` did (a change begun under the lock, finished or not), and
 * on a table that reclaims orphans one probe whether the holder it waits
 * for died. Only then does it lock and look: nothing is added to release,
 * and a waiter whose releaser died is late by this much at most. */
#define DOZE_NS SHL_WAIT_DOZE_NS

/* Crash points of the queue's critical sections (test build), numbered
 * apart from lib's enum as shm's are. */
#define SHL__CP_WAIT_ENQUEUED 200 /* entry's ticket stored, `waiters` not recounted */
#define SHL__CP_WAIT_DROPPED  201 /* entry freed, `waiters` not recounted */

static int ticket_before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

static void recount(const shl_table *t, struct shl__slot *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < SHL__WAITQ_LEN; i++) {
        const struct shl__waiter *e = shl__twq(t, s, i);
        n += e && e->ticket != 0;
    }
    atomic_store_explicit(&s->waiters, n, memory_order_relaxed);
}

static int entry_dead(const shl_table *t, const struct shl__waiter *e)
{
    return shl__handle_alive(t, e->live) == SHL__DEAD;
}

/* Frees entry i (in a taken group), and gives its group back once it has
 * no ticket left. */
static void drop(const shl_table *t, struct shl__slot *s, int i)
{
    SHL__ST(shl__twq(t, s, (uint32_t)i)->ticket, 0);
    SHL__CRASH(SHL__CP_WAIT_DROPPED);
    recount(t, s);
    shl__pool_give_back(t, s);
}

/* The ticket of entry i, 0 when it is free or its group not taken. */
static uint32_t ticket_of(const shl_table *t, const struct shl__slot *s, int i)
{
    const struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
    return e ? e->ticket : 0;
}

/* The entry with the oldest ticket, or -1 when the queue is empty. */
static int head(const shl_table *t, const struct shl__slot *s)
{
    int h = -1;
    uint32_t hk = 0;
    for (int i = 0; i < SHL__WAITQ_LEN; i++) {
        uint32_t k = ticket_of(t, s, i);
        if (k && (h < 0 || ticket_before(k, hk))) {
            h = i;
            hk = k;
        }
    }
    return h;
}

/* The head, after dropping heads whose process is proven dead. */
static int live_head(const shl_table *t, struct shl__slot *s)
{
    int h;
    while ((h = head(t, s)) >= 0 && entry_dead(t, shl__twq(t, s, (uint32_t)h)))
        drop(t, s, h);
    return h;
}

static uint32_t next_ticket(struct shl__slot *s)
{
    uint32_t k = s->wq_tail + 1;
    if (k == 0)
        k = 1;
    SHL__ST(s->wq_tail, k);
    return k;
}

/* The entry a new waiter takes: a free one in a group the slot has taken,
 * else one in a group it takes now; -1 in *idx when all 32 are taken by
 * live waiters (the waiter looks again later, unqueued). SHL_EFULL, the
 * pool named in the detail, when it needs a group and the waiter pool has
 * none free. Dead entries are dropped first, so a killed waiter's place is
 * reused. */
static int enqueue(const shl_table *t, struct shl__slot *s, uint32_t nonce, uint32_t kind, int *idx)
{
    int fr = -1, spare = -1;
    *idx = -1;
    for (int i = 0; i < SHL__WAITQ_LEN; i++) {
        struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
        if (e && e->ticket && entry_dead(t, e))
            drop(t, s, i);
    }
    for (int i = 0; i < SHL__WAITQ_LEN && fr < 0; i++) {
        struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
        if (e && !e->ticket)
            fr = i;
        else if (!e && spare < 0)
            spare = i;
    }
    if (fr < 0 && spare < 0)
        return SHL_OK;
    if (fr < 0) {
        shl__seq_begin(s);
        int rc = shl__pool_take(t, s, SHL__POOL_WQ, (uint32_t)spare / SHL__WQ_GROUP);
        shl__seq_end(s);
        if (rc != SHL_OK)
            return rc;
        fr = spare;
    }
    struct shl__waiter *e = shl__twq(t, s, (uint32_t)fr);
    SHL__ST(e->live, t->self.live);
    SHL__ST(e->nonce, nonce);
    SHL__ST(e->pid, t->self.pid);
    SHL__ST(e->kind, kind);
    SHL__ST(e->ticket, next_ticket(s)); /* last: the entry counts from here */
    SHL__CRASH(SHL__CP_WAIT_ENQUEUED);
    recount(t, s);
    *idx = fr;
    return SHL_OK;
}

/* A waiter that took the lease ahead of older tickets (their grace ran
 * out) sends them to the back, in their order, so that a stopped waiter
 * costs each handoff at most one grace period. */
static void demote_older(const shl_table *t, struct shl__slot *s, uint32_t mine, int writers_only)
{
    for (;;) {
        int h = -1;
        uint32_t hk = 0;
        for (int i = 0; i < SHL__WAITQ_LEN; i++) {
            const struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
            if (!e || (writers_only && e->kind != SHL__WK_EXCL))
                continue;
            uint32_t k = e->ticket;
            if (k && ticket_before(k, mine) && (h < 0 || ticket_before(k, hk))) {
                h = i;
                hk = k;
            }
        }
        if (h < 0)
            return;
        SHL__ST(shl__twq(t, s, (uint32_t)h)->ticket, next_ticket(s));
    }
}

/* When holder i (-1: the exclusive one) stopped or stops keeping an
 * acquire out: its expiry, or sooner the end of a dead holder's reclaim delay
 * on a table that reclaims orphans (only a valid holder is asked about). */
static uint64_t holder_end(const shl_table *t, struct shl__slot *s, int i, uint64_t now)
{
    const struct shl__holder *h = i < 0 ? &s->cur : shl__tsh(t, s, (uint32_t)i);
    if (!h)
        return now;
    return now < h->expiry ? shl__orphan_end(t, s, i, now) : h->expiry;
}

/* The table time since which the lease has had no holder of either kind in
 * an acquire's way (the slot has none at the time of asking: each has
 * expired or is a dead one whose reclaim is due). */
static uint64_t free_since(const shl_table *t, struct shl__slot *s, uint64_t now)
{
    uint64_t since = s->freed_at, end;
    if (s->cur.state == SHL__ST_HELD && (end = holder_end(t, s, -1, now)) > since)
        since = end;
    uint64_t m = atomic_load_explicit(&s->shared, memory_order_relaxed);
    for (int i = 0; i < SHL__SHARED_MAX; i++)
        if (((m >> i) & 1) && shl__tsh(t, s, (uint32_t)i) &&
            shl__tsh(t, s, (uint32_t)i)->state == SHL__ST_HELD &&
            (end = holder_end(t, s, i, now)) > since)
            since = end;
    return since;
}

/* Whether a holder keeps a waiter of `kind` out at `now`: a valid exclusive
 * holder, and for a writer a valid shared one too, unless it is proven dead
 * and the table's policy lets it be reclaimed now (then the acquire after
 * this look reclaims it). *end: the table time at which the first holder in
 * the way stops being so, by expiry or by the end of its reclaim delay. */
static int in_way_who(const shl_table *t, struct shl__slot *s, uint32_t kind, uint64_t now,
                      uint64_t *end, uint64_t *who)
{
    int n = 0;
    *end = UINT64_MAX;
    *who = 0;
    for (int i = -1; i < (kind == SHL__WK_EXCL ? SHL__SHARED_MAX : 0); i++) {
        int valid = i < 0 ? s->cur.state == SHL__ST_HELD && now < s->cur.expiry
                          : shl__sh_valid(t, s, (uint32_t)i, now);
        uint64_t e = valid ? shl__orphan_end(t, s, i, now) : now;
        if (e > now) {
            n++;
            if (e < *end) {
                *end = e;
                *who = (i < 0 ? &s->cur : shl__tsh(t, s, (uint32_t)i))->live;
            }
        }
    }
    return n != 0;
}

static int in_way(const shl_table *t, struct shl__slot *s, uint32_t kind, uint64_t now,
                  uint64_t *end)
{
    uint64_t who;
    return in_way_who(t, s, kind, now, end, &who);
}

int shl__writer_queued(const shl_table *t, struct shl__slot *s, uint64_t now, uint32_t ticket)
{
    if (atomic_load_explicit(&s->waiters, memory_order_relaxed) == 0)
        return 0;
    int any = 0;
    for (int i = 0; i < SHL__WAITQ_LEN && !any; i++) {
        const struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
        any = e && e->ticket && e->kind == SHL__WK_EXCL &&
              (ticket == 0 || ticket_before(e->ticket, ticket)) && !entry_dead(t, e);
    }
    if (!any)
        return 0;
    /* A writer that lets a free lease lie for a whole turn grace (stopped,
     * starved) keeps nobody out: the bound of shl_acquire_wait(). Free: no
     * holder in a writer's way (a dead one whose reclaim is due is not). */
    uint64_t end;
    if (!in_way(t, s, SHL__WK_EXCL, now, &end)) {
        uint64_t since = free_since(t, s, now);
        if (now >= since && now - since >= SHL_WAIT_TURN_GRACE_NS)
            return 0;
    }
    return 1;
}

void shl__wake_waiters(struct shl__slot *s, int always)
{
    if (SHL__MUTANT(WAKE_LOST))
        return;
    if (always || atomic_load_explicit(&s->waiters, memory_order_relaxed) != 0) {
        SHL__CRASH(SHL__CP_WAKE);
        shl__futex_wake(&s->wake, INT_MAX);
    }
}

void shl__poke(struct shl__slot *s)
{
    atomic_fetch_add_explicit(&s->wake, 1, memory_order_seq_cst);
    shl__futex_wake(&s->wake, INT_MAX);
}

uint32_t shl__waiters_count(const shl_table *t, const struct shl__slot *s)
{
    uint32_t n = 0;
    for (int i = 0; i < SHL__WAITQ_LEN; i++) {
        const struct shl__waiter *e = shl__twq(t, s, (uint32_t)i);
        if (e && SHL__LD(e->ticket))
            n += shl__handle_alive(t, SHL__LD(e->live)) != SHL__DEAD;
    }
    return n;
}

struct waiter {
    int idx;           /* queue entry, -1 when not queued */
    uint32_t kind;     /* SHL__WK_* */
    uint32_t ticket;   /* its ticket as last seen; demote_older() changes it */
    uint32_t nonce;    /* with the handle's alive id and pid: which entry is ours */
    uint64_t deadline; /* CLOCK_MONOTONIC */
    uint64_t check_at; /* CLOCK_MONOTONIC: the next look at the table's name */
};

/* The alive id of the queue's head when it is another waiter than w, or 0. */
static uint64_t turn_holder(const shl_table *t, const struct shl__slot *s, const struct waiter *w)
{
    int h = head(t, s);
    return h >= 0 && h != w->idx ? shl__twq(t, s, (uint32_t)h)->live : 0;
}

/* Whether entry w->idx (>= 0) is still ours. It keeps its index for as long
 * as we are queued, but not its ticket. */
static int ours(const shl_table *t, const struct shl__slot *s, const struct waiter *w)
{
    const struct shl__waiter *e = shl__twq(t, s, (uint32_t)w->idx);
    return e && e->ticket != 0 && e->live == t->self.live && e->pid == t->self.pid &&
           e->nonce == w->nonce;
}

/* Whether this waiter may take the acquirable lease now. `since`: the table
 * time at which it became acquirable. */
static int my_turn(const shl_table *t, struct shl__slot *s, const struct waiter *w, uint64_t now,
                   uint64_t since)
{
    int h = head(t, s);
    if (h < 0 || h == w->idx)
        return 1;
    if (now >= since && now - since >= SHL_WAIT_TURN_GRACE_NS)
        return 1;
    h = live_head(t, s);
    return h < 0 || h == w->idx;
}

/* When to wake up at the latest (CLOCK_MONOTONIC), with the slot locked.
 * held: a holder is in the way until table time `end` (in_way()). */
static uint64_t sleep_until(const shl_table *t, struct shl__slot *s, const struct waiter *w,
                            int held, uint64_t end, uint64_t now)
{
    uint64_t until = w->deadline;
    uint64_t mono = shl__mono_ns();
    uint64_t mine;
    if (t->clock == SHL__CLOCK_MANUAL || w->idx < 0)
        mine = mono + RECHECK_NS;
    else if (held)
        mine = end; /* the first holder's expiry, or a dead one's reclaim */
    else {
        /* Acquirable but another's turn: until that turn's grace ends. */
        uint64_t since = free_since(t, s, now);
        mine = since + SHL_WAIT_TURN_GRACE_NS;
        if (mine < now)
            mine = mono + RECHECK_NS;
    }
    return mine < until ? mine : until;
}

static void leave(const shl_table *t, struct shl__slot *s, struct waiter *w)
{
    if (w->idx >= 0 && ours(t, s, w))
        drop(t, s, w->idx);
    w->idx = -1;
}

/* What a sleeping waiter saw under the lock: `wake`, `seq`, and the alive
 * id of the holder worth watching (0: none). */
struct doze {
    uint32_t word;
    uint32_t seq;
    uint64_t who;
};

/* Sleeps on `wake` until woken or `until` (CLOCK_MONOTONIC), and no more
 * than DOZE_NS past a change that nobody woke us for. */
static void doze(const shl_table *t, struct shl__slot *s, const struct doze *d, uint64_t until)
{
    for (;;) {
        uint64_t slice = shl__mono_ns() + DOZE_NS;
        if (slice >= until || SHL__MUTANT(WAKE_LOST)) {
            shl__futex_wait(&s->wake, d->word, until);
            return;
        }
        if (shl__futex_wait(&s->wake, d->word, slice) == 0)
            return; /* woken, `wake` moved, or a signal */
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != d->seq)
            return;
        if (d->who && shl__handle_alive(t, d->who) == SHL__DEAD)
            return;
    }
}

/* What look() found, besides a negative SHL_E* code. */
#define LOOK_SLEPT 0 /* not our turn: slept */
#define LOOK_TURN  1 /* our turn: left queued, the caller acquires */
#define LOOK_MOVED 2 /* the slot was retired: the name lives in its twin's */

/* One look at the slot, locked. */
static int look(shl_table *t, struct shl__slot *s, struct waiter *w)
{
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    if (s->cur.state == SHL__ST_RETIRED) {
        /* Nobody ever acquires here again: queue where the name went, or
         * every look would find this slot free and the acquire by name
         * busy, and spin (lib/kind_shm/index.c). */
        leave(t, s, w);
        shl__slot_unlock(s);
        return LOOK_MOVED;
    }
    uint64_t now = shl__now(t);
    if (w->idx >= 0) {
        if (ours(t, s, w))
            w->ticket = ticket_of(t, s, w->idx); /* passed over: same entry, new ticket */
        else
            w->idx = -1; /* freed by a waiter that proved us dead: a damaged id; queue again */
    }
    uint64_t end, who;
    int held = in_way_who(t, s, w->kind, now, &end, &who);
    if (w->kind == SHL__WK_SHARED) {
        /* Readers go in together, ahead of every writer queued after them. */
        if (!held && !shl__writer_queued(t, s, now, w->idx >= 0 ? w->ticket : 0)) {
            shl__slot_unlock(s);
            return LOOK_TURN;
        }
    } else {
        if (!held && my_turn(t, s, w, now, free_since(t, s, now))) {
            shl__slot_unlock(s);
            return LOOK_TURN;
        }
    }
    if (shl__mono_ns() >= w->deadline) {
        leave(t, s, w);
        shl__slot_unlock(s);
        return SHL_ETIMEDOUT;
    }
    if (w->idx < 0) {
        /* A full waiter pool is an answer, not a reason to wait. */
        if ((rc = enqueue(t, s, w->nonce, w->kind, &w->idx)) != SHL_OK) {
            shl__slot_unlock(s);
            return rc;
        }
        if (w->idx >= 0)
            w->ticket = ticket_of(t, s, w->idx);
    }
    uint64_t until = sleep_until(t, s, w, held, end, now);
    struct doze d = {atomic_load_explicit(&s->wake, memory_order_acquire),
                     atomic_load_explicit(&s->seq, memory_order_relaxed), 0};
    /* After the word: a mark stored before its bump is seen here (the word
     * bumped), or the bump comes after this load and ends the sleep. */
    if (shl__removed(t)) {
        leave(t, s, w);
        shl__slot_unlock(s);
        return SHL_EREMOVED;
    }
    /* A holder alive now whose death would bring its end forward; on a
     * free lease, the waiter whose turn it is, whose death (killed before
     * it took the lease) hands the turn on at once rather than after the
     * turn's grace (live_head() drops it at our next look). */
    if (held && (t->hdr->policy & SHL__POL_RECLAIM_ORPHANS) && who &&
        shl__handle_alive(t, who) == SHL__ALIVE)
        d.who = who;
    else if (!held && (who = turn_holder(t, s, w)) != 0 && shl__handle_alive(t, who) == SHL__ALIVE)
        d.who = who;
    shl__slot_unlock(s);
    /* A removal by anything but shl_unlink() bumps no word: look at the
     * name every SHL_REMOVED_CHECK_NS (wait_for()). */
    if (until > w->check_at)
        until = w->check_at;
    doze(t, s, &d, until);
    return LOOK_SLEPT;
}

/* After acquiring: leave the queue, and pass older tickets' turn on. */
static int dequeue_after(shl_table *t, struct shl__slot *s, struct waiter *w)
{
    if (w->idx < 0)
        return SHL_OK;
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    if (ours(t, s, w))
        w->ticket = ticket_of(t, s, w->idx); /* passed over since our last look */
    uint32_t mine = w->ticket;
    leave(t, s, w);
    /* A reader only ever passes writers (whose turn lapsed); readers ahead
     * of it go in too, with no turn to lose. */
    demote_older(t, s, mine, w->kind == SHL__WK_SHARED);
    shl__slot_unlock(s);
    return SHL_OK;
}

/* A look that found the lease acquirable but could not take it (a reader
 * finding every shared entry taken): sleep until the lease changes, for a
 * recheck period at most. */
static int nap_on(shl_table *t, struct shl__slot *s, const struct waiter *w)
{
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    uint32_t word = atomic_load_explicit(&s->wake, memory_order_acquire);
    shl__slot_unlock(s);
    uint64_t until = shl__mono_ns() + RECHECK_NS;
    shl__futex_wait(&s->wake, word, until < w->deadline ? until : w->deadline);
    return SHL_OK;
}

/* The waiting loop of both kinds (kind: SHL__WK_*) on the lease of key k,
 * added if new; a shared acquisition's gen goes to *gen (may be NULL). */
static int wait_for(shl_table *t, const struct shl__key *k, const char *owner, uint32_t olen,
                    uint64_t ttl_ns, uint64_t timeout_ns, uint32_t kind, uint64_t *token,
                    uint64_t *gen)
{
    const char *lease = k->s;
    struct shl__slot *s;
    int rc = shl__find_or_add(t, k, &s);
    if (rc != SHL_OK)
        return rc;
    uint64_t start = shl__mono_ns();
    struct waiter w = {-1, kind, 0, 0, SHL__NO_DEADLINE, start + SHL_REMOVED_CHECK_NS};
    w.nonce = atomic_fetch_add_explicit(&t->wait_nonce, 1, memory_order_relaxed) + 1;
    if (timeout_ns < SHL__NO_DEADLINE - start)
        w.deadline = start + timeout_ns;
    /* No shortcut through a plain acquire even when nobody seems queued: a
     * waiter queued a moment ago would be overtaken. look() decides under
     * the lock. */
    for (;;) {
        rc = look(t, s, &w);
        if (rc < 0)
            return rc;
        if (rc == LOOK_MOVED && (rc = shl__lookup_or_add(t, lease, &s)) != SHL_OK)
            return rc;
        if (rc != LOOK_TURN) {
            uint64_t mono = shl__mono_ns();
            if (mono >= w.check_at) {
                w.check_at = mono + SHL_REMOVED_CHECK_NS;
                /* Marks it when its name is gone: the next look says so. */
                shl__table_removed(t);
            }
            continue;
        }
        /* Our turn. Still queued, so no other waiter takes it meanwhile;
         * only a plain acquire can get in first (then: look again). */
        if (kind == SHL__WK_EXCL) {
            rc = shl__shm_acquire(t, lease, owner, ttl_ns, token, NULL);
        } else {
            rc = shl__acquire_shared_at(t, s, owner, olen, ttl_ns, w.idx >= 0 ? w.ticket : 0, token,
                                        gen, NULL);
            if (rc == SHL__SLOT_RETIRED && (rc = shl__lookup_or_add(t, lease, &s)) == SHL_OK)
                continue;
            if (rc == SHL_EBUSY && shl__mono_ns() < w.deadline) {
                if ((rc = nap_on(t, s, &w)) != SHL_OK)
                    return rc;
                continue;
            }
        }
        if (rc == SHL_EBUSY)
            continue;
        /* A failure to relock only leaves our entry until the turn grace
         * passes it over; the acquisition itself stands. */
        dequeue_after(t, s, &w);
        return rc;
    }
}

int shl__shm_wait(shl_table *t, const struct shl__key *k, const char *owner, uint32_t olen,
                  uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token)
{
    return wait_for(t, k, owner, olen, ttl_ns, timeout_ns, SHL__WK_EXCL, token, NULL);
}

int shl__shm_shared_wait(shl_table *t, const struct shl__key *k, const char *owner, uint32_t olen,
                         uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token, uint64_t *gen)
{
    return wait_for(t, k, owner, olen, ttl_ns, timeout_ns, SHL__WK_SHARED, token, gen);
}
