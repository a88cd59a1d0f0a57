/*
 * lib/kind_shm/bound.c - bound leases on a shared-memory table: the slot
 * a bound lease keeps, and the calls that need more than the slot
 * operations (kind_shm/lease.c, kind_shm/read.c) to which lib/bound.c goes
 * straight.
 *
 * The name-taking calls validate and hash the lease name, probe the index and
 * validate the owner on every call. A bound lease does that once:
 * shl_lease_open() keeps the slot's address (here) and a validated copy of
 * the owner (lib/bound.c), and the shl_lease_* calls go straight to the
 * slot's critical section. The semantics are exactly those of the
 * name-taking calls: the same code runs under the lock.
 *
 * A slot never moves and a name is never removed while the table is mapped
 * (index.c), so the address stays valid until shl_close(). Only repair can
 * move a name, when it finds it in two slots: the slot that loses it is
 * retired, and every call follows the name to the other, as a by-name call
 * does, and keeps that slot from then on. A call learns of the retirement
 * where it costs nothing on its fast path: acquire and the holder's calls
 * from a refusal (nobody is valid in a retired slot), a read from the mark
 * in the value word it loads anyway (shm/layout.h, SHL__VCUR_RETIRED).
 */
#include "shm_kind.h"

int shl__shm_lease_slot(shl_table *t, const struct shl__key *k, struct shl__slot **s)
{
    return shl__find_or_add(t, k, s);
}

int shl__shm_lease_acquire_moved(shl_lease *l, struct shl__slot *s, uint64_t ttl_ns,
                                 uint64_t *token, shl_lease_info *holder)
{
    int rc = SHL__SLOT_RETIRED;
    while (rc == SHL__SLOT_RETIRED)
        if ((rc = shl__follow(l->t, &l->s, &s, 1)) == SHL_OK)
            rc = shl__shm_acquire_at(l->t, s, l->owner, l->olen, ttl_ns, token, holder);
    return rc;
}
