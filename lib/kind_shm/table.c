/*
 * lib/kind_shm/table.c - a shared-memory table opened, created, closed and
 * removed; its options turned into the segment's geometry and checked
 * against an existing table; its clock. The entry points, the options'
 * checks both kinds share and the etcd kind's handle are in lib/table.c.
 */
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm_kind.h"

/* How many times a creator opens again a segment found marked removed (its
 * name about to go) before it gives up with SHL_EREMOVED: its own removal of
 * the name failed (a name it may not remove: another user's, in a sticky
 * directory; shmlease rm by that user removes it), or the name keeps being
 * given to tables that are marked at once. */
#define REMOVED_RETRIES 1000

/* Groups of `per` records for `want` records (SHL_POOL_DEFAULT: `dflt`,
 * at least SHL_POOL_MIN, but never more than the table can use). */
static uint32_t pool_groups(uint32_t want, uint32_t dflt, uint32_t per, uint32_t per_lease,
                            uint32_t capacity)
{
    uint64_t n = want;
    if (want == SHL_POOL_DEFAULT) {
        n = dflt > SHL_POOL_MIN ? dflt : SHL_POOL_MIN;
        if (n > (uint64_t)capacity * per_lease)
            n = (uint64_t)capacity * per_lease;
    }
    return (uint32_t)((n + per - 1) / per);
}

static uint32_t sh_groups(const shl_options *o)
{
    return pool_groups(o->max_shared, o->capacity / 2, SHL_SHARED_GROUP, SHL_SHARED_MAX,
                       o->capacity);
}

static uint32_t wq_groups(const shl_options *o)
{
    return pool_groups(o->max_waiters, o->capacity, SHL_WAITER_GROUP, SHL_WAIT_QUEUE_LEN,
                       o->capacity);
}

/* Spare value buffers: one a lease at most; by default one for every
 * sixteen leases. */
static uint32_t vb_count(const shl_options *o)
{
    return pool_groups(o->spare_values, o->capacity / 16, 1, 1, o->capacity);
}

/* The delay means nothing without the policy: stored as 0 then, so that
 * tables that do not reclaim match whatever delay their openers carry. */
static uint32_t reclaim_delay(const shl_options *o)
{
    return (o->policy & SHL_POLICY_RECLAIM_ORPHANS) ? o->reclaim_delay_ms : 0;
}

static int matches(const struct shl__hdr *h, const shl_options *o)
{
    return h->capacity == o->capacity && h->value_size == o->value_size && h->mode == o->mode &&
           h->clock == (uint32_t)o->clock && h->policy == o->policy &&
           h->reclaim_delay_ms == reclaim_delay(o) &&
           (h->token_floor != 0) == (o->token_state_path != NULL);
}

/* Opens or creates the segment. With a token state file, an epoch is
 * reserved only when the table does not exist yet: openers of an existing
 * table never touch the file. Losing a creation race after reserving skips
 * an epoch, which is harmless. */
static int open_segment(const char *n, struct shl__seg_params *p, const shl_options *o,
                        struct shl__seg *seg)
{
    int excl = o && (o->flags & SHL_EXCL);
    uint32_t max_mode = o ? (uint32_t)o->mode : 0660;
    if (p && o->token_state_path) {
        int rc = shl__seg_open(n, NULL, 0, max_mode, seg);
        if (rc != SHL__SHM_ENOENT) {
            if (!excl)
                return shl__from_shm(rc);
            if (rc == SHL__SHM_OK)
                shl__seg_close(seg);
            return SHL_EEXIST;
        }
        if ((rc = shl__floor_next(o->token_state_path, &p->token_floor)) != SHL_OK)
            return rc;
    }
    int rc = shl__from_shm(shl__seg_open(n, p, excl, max_mode, seg));
    if (rc == SHL_ENOSPC || rc == SHL_EPERM)
        return shl__explain_open(rc, n, p, max_mode);
    return rc;
}

int shl__shm_open(const char n[SHL_TABLE_NAME_MAX + 1], const shl_options *o, shl_table **out)
{
    int rc;
    int create = o && (o->flags & SHL_CREATE);
    struct shl__seg_params p = {0};
    if (create) {
        p.capacity = o->capacity;
        p.value_size = o->value_size;
        p.mode = (uint32_t)o->mode;
        p.clock = o->clock == SHL_CLOCK_MANUAL ? SHL__CLOCK_MANUAL : SHL__CLOCK_MONOTONIC;
        p.policy = o->policy;
        p.reclaim_delay_ms = reclaim_delay(o);
        p.sh_groups = sh_groups(o);
        p.wq_groups = wq_groups(o);
        p.vb_count = vb_count(o);
        p.history = o->history;
    }
    struct shl__seg seg;
    /* A segment marked removed is one whose name is going (shl_unlink()
     * marks, then unlinks): a creator removes the name itself, since a
     * remover that died or stalled between its mark and its unlink would
     * otherwise keep the name from everyone (the mark is final: the table
     * is dead for all its users), then looks again and finds the name free
     * or a new table; anyone else is told. */
    for (int tries = 0;; tries++) {
        rc = open_segment(n, create ? &p : NULL, o, &seg);
        if (rc != SHL_OK)
            return rc;
        if (!atomic_load_explicit(&seg.hdr->removed, memory_order_acquire))
            break;
        if (create)
            shl__seg_unlink_same(n, seg.fd);
        shl__seg_close(&seg);
        if (!create || tries == REMOVED_RETRIES)
            return SHL_EREMOVED;
        sched_yield();
    }
    if (!shl__floor_valid(seg.hdr->token_floor)) {
        shl__seg_close(&seg);
        return SHL_ECORRUPT;
    }
    if (create && !seg.created && !matches(seg.hdr, o)) {
        shl__seg_close(&seg);
        return SHL_EMISMATCH;
    }
    shl_table *t = calloc(1, sizeof *t);
    if (!t) {
        shl__seg_close(&seg);
        return SHL_ENOMEM;
    }
    t->hdr = seg.hdr;
    t->size = seg.size;
    t->fd = seg.fd;
    t->capacity = seg.hdr->capacity;
    /* The header was validated against this geometry at open; from here on
     * only these private copies are used to find anything in the segment. */
    shl__geom_of(seg.hdr, &t->geom);
    t->clock = seg.hdr->clock;
    t->value_size = seg.hdr->value_size;
    t->created = seg.created;
    t->token_floor = seg.hdr->token_floor;
    t->token_limit = shl__token_limit(t->token_floor);
    shl__handle_stamp(t);
    /* The proof of life of every record this handle writes, for as long as
     * t->fd stays open. Without OFD locks the id is 0: such records are
     * never proven dead, which is the safe answer. */
    t->self.pid = (int32_t)getpid();
    t->self.live = shl__alive_take(t->fd, &t->hdr->alive_next);
    memcpy(t->name, n, sizeof t->name);
    *out = t;
    return SHL_OK;
}

void shl__shm_close(shl_table *t)
{
    struct shl__seg seg = {t->hdr, t->size, t->fd, 0};
    shl__seg_close(&seg);
}

int shl__shm_unlink(const char n[SHL_TABLE_NAME_MAX + 1])
{
    return shl__from_shm(shl__seg_unlink(n));
}

int shl__shm_table_check(shl_table *t)
{
    return shl__table_removed(t) ? SHL_EREMOVED : SHL_OK;
}

int shl__shm_info(shl_table *t, shl_table_info *info)
{
    const struct shl__hdr *h = t->hdr;
    memset(info, 0, sizeof *info);
    /* What this handle uses (read at open), not what the header says now. */
    info->capacity = t->capacity;
    info->value_size = t->value_size;
    info->used = shl__tnslots(t);
    info->size = t->size;
    info->token_floor = t->token_floor;
    info->clock = t->clock == SHL__CLOCK_MANUAL ? SHL_CLOCK_MANUAL : SHL_CLOCK_MONOTONIC;
    info->mode = (mode_t)h->mode;
    info->policy = h->policy;
    info->reclaim_delay_ms = h->reclaim_delay_ms;
    info->created = t->created;
    info->creator_pid = h->creator_pid;
    info->max_shared = t->geom.sh_groups * SHL_SHARED_GROUP;
    info->max_waiters = t->geom.wq_groups * SHL_WAITER_GROUP;
    info->shared_taken = shl__pool_taken(t, SHL__POOL_SH) * SHL_SHARED_GROUP;
    info->waiters_taken = shl__pool_taken(t, SHL__POOL_WQ) * SHL_WAITER_GROUP;
    info->history = t->geom.history;
    info->spare_values = t->geom.vb_count;
    info->spare_values_taken = shl__pool_taken(t, SHL__POOL_VB);
    info->shared_taken_back = shl__pool_taken_back(t, SHL__POOL_SH);
    info->waiters_taken_back = shl__pool_taken_back(t, SHL__POOL_WQ);
    info->spare_values_taken_back = shl__pool_taken_back(t, SHL__POOL_VB);
    struct stat st;
    info->allocated = fstat(t->fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
    return SHL_OK;
}

uint64_t shl__shm_now(const shl_table *t)
{
    return shl__now(t);
}

int shl__shm_clock_set(shl_table *t, uint64_t now_ns)
{
    if (t->clock != SHL__CLOCK_MANUAL)
        return SHL_EINVAL;
    _Atomic uint64_t *c = &t->hdr->manual_now;
    uint64_t cur = atomic_load_explicit(c, memory_order_relaxed);
    do {
        if (now_ns < cur)
            return SHL_ECLOCK;
        if (now_ns == cur)
            return SHL_OK;
    } while (!atomic_compare_exchange_weak_explicit(c, &cur, now_ns, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return SHL_OK;
}
