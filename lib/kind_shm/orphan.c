/*
 * lib/kind_shm/orphan.c - whether a holder or a waiter is gone, and when its lease
 * may be reclaimed.
 *
 * "Dead" is only ever the kernel's answer: the record's alive id names an
 * OFD lock that the record's handle holds on the segment's file for as long
 * as it is open (shm/alive.h). Liveness is therefore per handle: a lease
 * held through a handle that its process closed looks dead, exactly like
 * one whose process died, and a handle inherited by a forked child keeps
 * its parent's records alive while the child lives. No /proc is read, so a
 * holder in another PID namespace, behind hidepid, or whose main thread
 * exited is seen alive; and when no proof is possible (no id, an error) the
 * answer is UNKNOWN, which never reclaims.
 */
#include "shm_kind.h"

int shl__handle_alive(const shl_table *t, uint64_t live)
{
    if (!t || live == 0)
        return SHL__UNKNOWN;
    /* Our own lock never conflicts with our own file: the kernel would say
     * "no lock" about it. This handle is open, by definition. */
    if (live == t->self.live)
        return SHL__ALIVE;
    return shl__alive_probe(t->fd, live);
}

static uint64_t delay_ns(const shl_table *t)
{
    return (uint64_t)t->hdr->reclaim_delay_ms * UINT64_C(1000000);
}

/* A refused acquire on a reclaiming table asks the kernel whether the
 * holder lives: one fcntl, ten times the cost of the refusal itself, paid
 * by every try of a polling loop. So a handle remembers the last holder it
 * proved alive for ALIVE_MEMO_NS and takes it as alive meanwhile. The memo
 * only ever says "alive", the answer that reclaims nothing; it makes the
 * first sighting of a death (which starts the delay) late by at most that
 * much, so it is used only where that is small beside the reclaim delay.
 * Threads of one handle may interleave the two words: a live id then
 * carries another recent probe's time, late by a scheduling delay at most. */
#define ALIVE_MEMO_NS    UINT64_C(10000000)
#define ALIVE_MEMO_DELAY (100 * ALIVE_MEMO_NS) /* the shortest delay that uses it */

static int holder_alive(const shl_table *t, uint64_t live, uint64_t delay)
{
    shl_table *m = (shl_table *)t; /* the memo is the handle's own, not the table's */
    if (delay < ALIVE_MEMO_DELAY || live == 0)
        return shl__handle_alive(t, live);
    uint64_t mono = shl__mono_ns();
    if (atomic_load_explicit(&m->alive_memo_live, memory_order_acquire) == live &&
        mono - atomic_load_explicit(&m->alive_memo_at, memory_order_relaxed) < ALIVE_MEMO_NS)
        return SHL__ALIVE;
    int a = shl__handle_alive(t, live);
    if (a == SHL__ALIVE) {
        atomic_store_explicit(&m->alive_memo_at, mono, memory_order_relaxed);
        atomic_store_explicit(&m->alive_memo_live, live, memory_order_release);
    }
    return a;
}

/* The reclaim delay of holder h, whose first seen death is recorded in
 * (*dtok, *dseen). */
static int due(const shl_table *t, const struct shl__holder *h, uint64_t *dtok, uint64_t *dseen,
               uint64_t now, int *dead)
{
    *dead = 0;
    if (!(t->hdr->policy & SHL__POL_RECLAIM_ORPHANS))
        return 0;
    uint64_t delay = delay_ns(t);
    if (holder_alive(t, h->live, delay) != SHL__DEAD)
        return 0;
    *dead = 1;
    if (delay == 0)
        return 1;
    if (SHL__LD(*dtok) != h->token) {
        /* the time first: the token is the one word that commits it. */
        SHL__ST(*dseen, now);
        SHL__ST(*dtok, h->token);
        SHL__CRASH(SHL__CP_RECLAIM_SEEN);
        return 0;
    }
    return now - *dseen >= delay;
}

int shl__orphan_due(const shl_table *t, struct shl__slot *s, uint64_t now, int *dead)
{
    return due(t, &s->cur, &s->dead_token, &s->dead_seen, now, dead);
}

int shl__orphan_due_shared(const shl_table *t, struct shl__slot *s, uint32_t i, uint64_t now,
                           int *dead)
{
    uint64_t *dtok, *dseen;
    const struct shl__holder *h = shl__tsh(t, s, i);
    shl__tsh_dead(t, s, i, &dtok, &dseen);
    *dead = 0;
    return h && dtok ? due(t, h, dtok, dseen, now, dead) : 0; /* no record: nobody to reclaim */
}

uint64_t shl__orphan_end(const shl_table *t, struct shl__slot *s, int i, uint64_t now)
{
    const struct shl__holder *h = &s->cur;
    uint64_t *dtok = &s->dead_token, *dseen = &s->dead_seen;
    if (i >= 0) {
        h = shl__tsh(t, s, (uint32_t)i);
        shl__tsh_dead(t, s, (uint32_t)i, &dtok, &dseen);
        if (!h || !dtok)
            return now; /* no record (damage): nobody in the way */
    }
    int dead;
    if (!due(t, h, dtok, dseen, now, &dead) && !dead)
        return h->expiry;
    uint64_t delay = delay_ns(t);
    if (delay == 0)
        return now; /* due at once: no death time recorded */
    /* Dead, so due() recorded the death (now, if it was the first to see
     * it): the reclaim is due when the reclaim delay from there ends. */
    uint64_t at = *dseen > UINT64_MAX - delay ? UINT64_MAX : *dseen + delay;
    return at < h->expiry ? at : h->expiry;
}
