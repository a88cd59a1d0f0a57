/*
 * tools/stress_removed.c - removals in `shmlease stress` (--remove-rate):
 * the table's name removed under its users, by shl_unlink() or by a plain
 * unlink(2) of its file, and the campaign going on on the table created
 * again under the name (stress.h, "Removals", says how the generations are
 * told apart and kept out of each other's rings).
 *
 * What is checked here: an accepted call on a removed generation that began
 * after the removal returned (a plain one: after it and one renew interval,
 * the window shl_table_check() is given, and a small slack), and a token
 * granted on a generation at or below one granted on an earlier one (the
 * token state file must lift every new table above the old ones).
 *
 * What it can miss: a call in flight when the removal lands is ordered
 * before it (the library loads the mark once, at the entry of its section),
 * so only calls that began after the removal returned are judged; a
 * generation that no process opened before it was removed is never seen;
 * and a lease that no one acquired on some generation gives that check
 * nothing to compare.
 */
#include <errno.h>
#include <unistd.h>

#include "stress.h"

#define OPEN_RETRY_NS UINT64_C(1000000)

int st_table_open(const struct st_config *c, struct st_shared *sh, shl_table **t, uint32_t *gen)
{
    for (;;) {
        if (atomic_load(&sh->removing)) {
            st_sleep_ns(OPEN_RETRY_NS);
            continue;
        }
        uint32_t g = atomic_load(&sh->gen);
        int rc = shl_open(c->table, c->remove_rate > 0 ? &c->reopen : NULL, t);
        /* Between a removal's name going and its mark (or a creator that
         * found the old table still named; on etcd, before its restore):
         * open again. */
        if ((rc == SHL_EREMOVED || rc == SHL_ENOENT) && st_removals(c) && !atomic_load(&sh->stop)) {
            st_sleep_ns(OPEN_RETRY_NS);
            continue;
        }
        if (rc != SHL_OK)
            return rc;
        if (!atomic_load(&sh->removing) && atomic_load(&sh->gen) == g) {
            *gen = g;
            return SHL_OK;
        }
        shl_close(*t); /* maybe the table being removed: take the next one */
    }
}

int st_log_begin(struct st_shared *sh, unsigned p, uint32_t gen)
{
    atomic_store(&sh->logging[p], 1);
    if (!atomic_load(&sh->removing) && atomic_load(&sh->gen) == gen)
        return 1;
    atomic_store(&sh->logging[p], 0);
    return 0;
}

void st_log_done(struct st_shared *sh, unsigned p)
{
    atomic_store_explicit(&sh->logging[p], 0, memory_order_release);
}

void st_gentok_note(struct st_shared *sh, uint32_t g, unsigned lease, uint64_t token)
{
    if (g >= sh->gens_cap)
        return;
    struct st_gentok *x = st_gentok_at(sh, g, lease);
    uint64_t v = atomic_load(&x->lo);
    while ((v == 0 || token < v) && !atomic_compare_exchange_weak(&x->lo, &v, token))
        ;
    v = atomic_load(&x->hi);
    while (token > v && !atomic_compare_exchange_weak(&x->hi, &v, token))
        ;
}

uint64_t st_gentok_check(struct st_shared *sh)
{
    uint32_t top = atomic_load(&sh->gen);
    uint64_t bad = 0;
    if (top >= sh->gens_cap)
        top = sh->gens_cap - 1;
    for (unsigned l = 0; l < sh->leases; l++) {
        uint64_t before = 0; /* the highest token of the generations so far */
        for (uint32_t g = 0; g <= top; g++) {
            struct st_gentok *x = st_gentok_at(sh, g, l);
            uint64_t lo = atomic_load(&x->lo), hi = atomic_load(&x->hi);
            if (lo && lo <= before)
                bad++;
            if (hi > before)
                before = hi;
        }
    }
    atomic_store(&sh->token_below_removed, bad);
    return bad;
}

uint64_t st_gen_cut(struct st_shared *sh, uint32_t g)
{
    if (g >= sh->gens_cap)
        return UINT64_MAX;
    struct st_gen *x = st_gen_at(sh, g);
    uint64_t s = atomic_load(&x->rm_start);
    if (!s)
        return UINT64_MAX;
    if (!atomic_load(&x->plain))
        return s;
    uint64_t e = atomic_load(&x->rm_end);
    return e ? e + sh->renew_ns : UINT64_MAX; /* under way: not before its end */
}

int st_removed_late(struct st_shared *sh, uint32_t g, uint64_t t0)
{
    if (g >= sh->gens_cap)
        return 0;
    struct st_gen *x = st_gen_at(sh, g);
    uint64_t e = atomic_load(&x->rm_end);
    if (!e)
        return 0;
    if (atomic_load(&x->plain))
        e += sh->renew_ns + ST_RM_SLACK_NS;
    return t0 > e;
}

int st_remove(const struct st_config *c, struct st_shared *sh, int plain)
{
    uint32_t g = atomic_load(&sh->gen);
    if (g + 1 >= sh->gens_cap)
        return 0;
    atomic_store(&sh->removing, 1);
    for (unsigned p = 0; p < sh->workers + sh->readers; p++)
        if (atomic_load(&sh->logging[p])) {
            atomic_store(&sh->removing, 0); /* one is appending (or stopped there) */
            return 0;
        }
    struct st_gen *x = st_gen_at(sh, g);
    atomic_store(&x->plain, (uint32_t)plain);
    atomic_store(&x->rm_start, st_now_ns());
    int rc = plain ? (unlink(c->path) == 0 ? SHL_OK
                      : errno == ENOENT    ? SHL_ENOENT
                                           : SHL_ESYS)
                   : shl_unlink(c->table);
    if (rc != SHL_OK) {
        /* SHL_ENOENT: nobody has created this generation's table yet. */
        atomic_store(&x->rm_start, 0);
        atomic_store(&sh->removing, 0);
        return rc == SHL_ENOENT ? 0 : rc;
    }
    atomic_store(&x->rm_end, st_now_ns());
    atomic_fetch_add(plain ? &sh->removals_plain : &sh->removals, 1);
    atomic_store(&sh->gen, g + 1);
    atomic_store(&sh->removing, 0);
    return 1;
}
