/*
 * lib/election.c - leader election: a candidate handle over one lease.
 *
 * The election is a client of the public lease calls, the same on both
 * kinds of table: campaign is shl_acquire_wait() (fair order), then a
 * renewer, then the first proclaim (shl_renewer_write(), so a term whose
 * renewer already declared the loss writes nothing); resign is the
 * renewer's stop with release. Who leads, and observing, are in
 * lib/observe.c.
 *
 * The renewer is started before the first proclaim, not after: the write
 * then goes through the renewer's local deadline as well as the table's
 * check, and a term that cannot be kept is given back in one place.
 */
#include <stdlib.h>

#include "internal.h"

struct shl_election {
    shl_table *t;
    shl_renewer *r; /* the current term's renewer (kept after a loss); NULL otherwise */
    uint64_t token; /* the current term's token, 0 when none */
    char name[SHL_NAME_MAX + 1];
    char id[SHL_OWNER_MAX + 1];
};

int shl_election_open(shl_table *t, const char *election, const char *id, shl_election **out)
{
    if (out)
        *out = NULL;
    SHL__CHECK_HANDLE(t);
    struct shl__key k;
    uint32_t olen;
    int rc = shl__key_lease(election, &k);
    if (rc != SHL_OK)
        return rc;
    if (shl__owner_len(id, &olen) != SHL_OK)
        return SHL_EINVAL;
    if (!out)
        return shl__fail(SHL_EINVAL, "out: NULL, there is nowhere to put the handle");
    shl_election *e = calloc(1, sizeof *e);
    if (!e)
        return SHL_ENOMEM;
    e->t = t;
    memcpy(e->name, election, k.len);
    memcpy(e->id, id, olen);
    *out = e;
    return SHL_OK;
}

/* Stops the current term's renewer and gives the lease back. A renewer
 * declares the loss a margin before the expiry (or when its process was
 * stopped past that point), and then releases nothing; the table may still
 * hold the lease for this token, and the next candidate would wait for its
 * expiry. So a lost term is released too, by its token: the table refuses
 * it (SHL_ELOST) when the lease has moved on, and changes nothing. */
static int term_end(shl_election *e)
{
    int rc = shl_renewer_stop(e->r, SHL_RENEWER_RELEASE);
    if (rc == SHL_ELOST) {
        int rel = shl_release(e->t, e->name, e->id, e->token);
        (void)rel; /* lost either way */
    }
    e->r = NULL;
    e->token = 0;
    return rc;
}

int shl_election_resign(shl_election *e)
{
    if (!e || !e->r)
        return SHL_EINVAL;
    return term_end(e);
}

void shl_election_close(shl_election *e)
{
    if (!e)
        return;
    if (e->r) {
        int rc = shl_election_resign(e); /* lost or not, the handle goes */
        (void)rc;
    }
    free(e);
}

/* What campaign can refuse before it waits, so that a candidate never
 * queues for a term it could not keep. */
static int campaign_args(shl_election *e, uint64_t ttl_ns, const void *value, size_t len,
                         const uint64_t *token)
{
    if (!token)
        return shl__fail(SHL_EINVAL, "token: NULL, there is nowhere to put the token");
    if (!value && len > 0)
        return shl__fail(SHL_EINVAL, "value: NULL with a length of %zu", len);
    if (ttl_ns < SHL_RENEWER_TTL_MIN)
        return shl__fail(SHL_EINVAL, "ttl: %llu ns, a leader's renewer keeps at least %llu ns",
                         (unsigned long long)ttl_ns, (unsigned long long)SHL_RENEWER_TTL_MIN);
    /* The handle's own (fixed at open): shl_table_info_get() would also
     * count the pools' taken groups, a walk of all of them. */
    SHL__CHECK_HANDLE(e->t);
    if (e->t->clock == SHL__CLOCK_MANUAL)
        return shl__fail(SHL_EINVAL, "table: a manual clock, which no renewer can keep a lease on");
    if (len > e->t->value_size)
        return shl__fail(SHL_E2BIG, "value: %zu bytes, the table's value size is %u", len,
                         e->t->value_size);
    return SHL_OK;
}

int shl_election_campaign(shl_election *e, uint64_t ttl_ns, uint64_t timeout_ns, const void *value,
                          size_t len, const shl_renewer_options *ro, uint64_t *token)
{
    if (!e)
        return SHL_EINVAL;
    if (e->r) {
        if (!shl_renewer_lost(e->r))
            return SHL_EBUSY;
        int lost = term_end(e); /* SHL_ELOST: that term is over */
        (void)lost;
    }
    int rc = campaign_args(e, ttl_ns, value, len, token);
    if (rc != SHL_OK)
        return rc;
    uint64_t tok;
    rc = shl_acquire_wait(e->t, e->name, e->id, ttl_ns, timeout_ns, &tok);
    if (rc != SHL_OK)
        return rc;
    shl_renewer *r;
    rc = shl_renewer_start(e->t, e->name, e->id, tok, ttl_ns, ro, &r);
    if (rc != SHL_OK) {
        /* Give the lease back so that the next candidate need not wait for
         * its expiry; SHL_ELOST there only means it is gone already. */
        int rel = shl_release(e->t, e->name, e->id, tok);
        (void)rel;
        return rc;
    }
    rc = shl_renewer_write(r, value, len);
    if (rc != SHL_OK) {
        int stop = shl_renewer_stop(r, SHL_RENEWER_RELEASE);
        (void)stop;
        return rc;
    }
    e->r = r;
    e->token = tok;
    *token = tok;
    return SHL_OK;
}

uint64_t shl_election_token(const shl_election *e)
{
    if (!e || !e->r || shl_renewer_lost(e->r) != 0)
        return 0;
    return e->token;
}

int shl_election_fd(const shl_election *e)
{
    return e && e->r ? shl_renewer_fd(e->r) : -1;
}

int shl_election_lost(const shl_election *e)
{
    return e && e->r ? shl_renewer_lost(e->r) : 0;
}

int shl_election_check(shl_election *e)
{
    if (!e)
        return SHL_EINVAL;
    return e->r ? shl_renewer_check(e->r) : SHL_ELOST;
}

int shl_election_proclaim(shl_election *e, const void *value, size_t len)
{
    if (!e || !e->r)
        return SHL_EINVAL;
    if (!value && len > 0)
        return shl__fail(SHL_EINVAL, "value: NULL with a length of %zu", len);
    return shl_renewer_write(e->r, value, len);
}
