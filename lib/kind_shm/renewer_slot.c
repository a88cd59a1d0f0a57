/*
 * lib/kind_shm/renewer_slot.c - what a renewer (lib/renewer.c, a client of
 * the public API) asks of a shared-memory table besides renewals: the slot
 * of its lease, whose wake word it sleeps on (a revoke or a removal always
 * wakes it, so it hears of them at once rather than at its next renewal) and
 * whose heartbeat record it writes; and whether the table was removed.
 */
#include "shm_kind.h"

struct shl__slot *shl__shm_renewer_slot(shl_table *t, const char *lease)
{
    struct shl__key k;
    return shl__key_lease(lease, &k) == SHL_OK ? shl__find(t, &k) : NULL;
}

_Atomic uint32_t *shl__shm_renewer_wake(struct shl__slot *s)
{
    return &s->wake;
}

void shl__shm_renewer_poke(struct shl__slot *s)
{
    shl__poke(s);
}

void shl__shm_renewer_beat(struct shl__slot *s, uint64_t token, uint64_t interval, uint64_t now)
{
    shl__heartbeat_beat(s, token, interval, now);
}

void shl__shm_renewer_end(struct shl__slot *s, uint64_t token)
{
    shl__heartbeat_end(s, token);
}

int shl__shm_renewer_marked(const shl_table *t)
{
    return shl__removed(t);
}

int shl__shm_renewer_removed(const shl_table *t)
{
    return shl__table_removed(t);
}
