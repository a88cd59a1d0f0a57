/*
 * lib/observe.c - who leads an election, and waiting for the next leader.
 *
 * The leader is read with shl_stat() and its value with shl_read(): two
 * snapshots, each consistent on its own. They are tied by tokens, which
 * only grow: the value belongs to the reported term iff the token that
 * wrote it is the holder's token. A read that finds a newer token saw a
 * newer term's proclaim, so the holder is looked at again; that retry ends
 * because each one needs a whole new term (an acquisition and a write)
 * to have happened between two lock-free looks.
 *
 * Observing is a poll of that look (lock-free on a segment, one request
 * to the cluster on etcd), at a fixed interval per kind. Tokens give the
 * order: a term is reported only with a token above `after`, so a loop
 * that passes back the last token reported can never go backwards.
 *
 * A client of the public API (shl_stat(), shl_read(), shl_table_check()),
 * like the renewer: one code for both kinds, which differ only in the poll
 * interval and the look at a segment's name; so it has no half in
 * kind_shm/ or kind_etcd/.
 */
#include <errno.h>
#include <time.h>

#include "internal.h"
#include "../shm/clock.h" /* CLOCK_MONOTONIC in ns */

/* Fills *l from a snapshot; SHL_ENOENT when nobody leads in it. A lease
 * held shared has no exclusive holder, so no leader. */
static int leader_of(const shl_lease_info *in, shl_leader *l)
{
    if ((in->state != SHL_STATE_HELD && in->state != SHL_STATE_ORPHANED) || in->shared > 0 ||
        in->token == 0)
        return SHL_ENOENT;
    memset(l, 0, sizeof *l);
    memcpy(l->id, in->owner, sizeof l->id);
    l->id[SHL_OWNER_MAX] = '\0';
    l->token = in->token;
    l->remaining_ns = in->remaining_ns;
    l->pid = in->pid;
    l->state = in->state;
    l->proclaimed = in->value_token == in->token;
    l->value_len = l->proclaimed ? in->value_len : 0;
    return SHL_OK;
}

int shl_election_leader(shl_table *t, const char *election, shl_leader *l, void *value, size_t cap)
{
    if (!l || (!value && cap > 0))
        return SHL_EINVAL;
    for (;;) {
        shl_lease_info in;
        int rc = shl_stat(t, election, &in);
        if (rc != SHL_OK)
            return rc;
        if ((rc = leader_of(&in, l)) != SHL_OK || !l->proclaimed || !value)
            return rc;
        size_t len = 0;
        uint64_t vt = in.token; /* an etcd read that does not fit leaves it */
        rc = shl_read(t, election, value, cap, &len, &vt);
        if (rc != SHL_OK && rc != SHL_E2BIG)
            return rc;
        if (vt <= in.token) {
            l->value_len = (uint32_t)len;
            return rc;
        }
        /* A newer term proclaimed between the two looks: look again. */
    }
}

static void sleep_until(uint64_t when_ns)
{
    struct timespec ts = shl__ns_to_ts(when_ns);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Whether snapshot *l is a term observe reports after `after`. */
static int newer(const shl_leader *l, uint64_t after)
{
    return l->token > after && l->proclaimed;
}

int shl_election_observe(shl_table *t, const char *election, uint64_t after, uint64_t timeout_ns,
                         shl_leader *l, void *value, size_t cap)
{
    if (!l || (!value && cap > 0))
        return SHL_EINVAL;
    SHL__CHECK_HANDLE(t);
    struct shl__key k;
    int rc = shl__key_lease(election, &k);
    if (rc != SHL_OK)
        return rc;
    int shm = t->kind == SHL__KIND_SHM;
    uint64_t poll = shm ? SHL_ELECTION_POLL_NS : SHL_ELECTION_POLL_ETCD_NS;
    uint64_t now = shl__mono_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
    uint64_t name_check = now + SHL_REMOVED_CHECK_NS;
    for (;;) {
        /* Look without the value, so that the caller's buffer is written
         * only for the term reported; the second look may find a newer term,
         * which is reported as well as the first would have been. */
        shl_leader seen;
        rc = shl_election_leader(t, election, &seen, NULL, 0);
        if (rc == SHL_OK && newer(&seen, after)) {
            rc = shl_election_leader(t, election, &seen, value, cap);
            if ((rc == SHL_OK || rc == SHL_E2BIG) && newer(&seen, after)) {
                *l = seen;
                return rc;
            }
        }
        if (rc != SHL_OK && rc != SHL_ENOENT && rc != SHL_E2BIG)
            return rc;
        now = shl__mono_ns();
        if (now >= deadline)
            return SHL_ETIMEDOUT;
        if (shm && now >= name_check) {
            /* A removal by anything but shl_unlink() leaves the segment
             * readable: look at the name, as waits do. */
            if ((rc = shl_table_check(t)) != SHL_OK)
                return rc;
            name_check = now + SHL_REMOVED_CHECK_NS;
        }
        sleep_until(deadline - now < poll ? deadline : now + poll);
    }
}
