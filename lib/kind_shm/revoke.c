/*
 * lib/kind_shm/revoke.c - administrative revoke on a shared-memory table:
 * the holder's validity ends at once. The entry point is lib/revoke.c.
 *
 * Revoke changes the holder's state and the operation that produced it, two
 * fields, so it goes through the slot's intent like acquire does. The token
 * stays: the next acquire gets token + 1, and the revoked holder's token can
 * never be valid again.
 */
#include "shm_kind.h"

int shl__shm_revoke(shl_table *t, const struct shl__key *k)
{
    struct shl__slot *s = shl__find(t, k);
    if (!s)
        return SHL_ENOENT;
    int rc = shl__slot_lock(t, s);
    if (rc != SHL_OK)
        return rc;
    uint64_t now = shl__now(t);
    struct shl__holder *c = &s->cur;
    int excl = c->state == SHL__ST_HELD && now < c->expiry;
    if (!excl && shl__shared_count(t, s, now) == 0) {
        shl__slot_unlock(s);
        return SHL_ENOENT;
    }
    /* Every holder ends: the exclusive one by its state, the shared ones by
     * an empty mask, in one intent. */
    struct shl__holder next = *c;
    if (excl) {
        next.state = SHL__ST_REVOKED;
        next.op = SHL__OP_REVOKE;
    }
    struct shl__intent_to to = {0, 0, next.state};
    shl__intent_arm_to(t, s, &to, &next, SHL__OP_REVOKE, now, t->self.pid, SHL__C_REVOKE,
                       SHL__C_COUNT, SHL__CP_ACQ_INTENT);
    SHL__CRASH(SHL__CP_REVOKE_ARMED);
    shl__intent_commit(t, s, SHL__CP_REVOKE_APPLY, SHL__CP_REVOKE_APPLIED);
    shl__pool_give_back(t, s); /* the ended readers' groups */
    shl__slot_freed(s, now);
    shl__slot_unlock(s);
    /* Always: the holder's renewer sleeps on this word too, and must hear of
     * the revoke now rather than at its next renewal. */
    shl__wake_waiters(s, 1);
    return SHL_OK;
}
