/*
 * lib/kind_shm/renewer_slot.c - what a renewer (lib/renewer.c, a client of
 * the public API) asks of a shared-memory table besides renewals: the slot
 * of its lease, whose wake word it sleeps on (a revoke or a removal always
 * wakes it, so it hears of them at once rather than at its next renewal),
 * and whether the table was removed. Its heartbeat record is written by
 * shl__shm_renewer_beat() and _end() (heartbeat.c).
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

int shl__shm_renewer_marked(const shl_table *t)
{
    return shl__removed(t);
}

int shl__shm_renewer_removed(const shl_table *t)
{
    return shl__table_removed(t);
}
