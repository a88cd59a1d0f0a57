/*
 * lib/table.c - opening and closing tables, their options and their clock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "kind_shm/shm_kind.h"

/* How many times a creator opens again a segment found marked removed (its
 * name about to go) before it gives up with SHL_EREMOVED: its own removal of
 * the name failed (a name it may not remove: another user's, in a sticky
 * directory; shmlease rm by that user removes it), or the name keeps being
 * given to tables that are marked at once. */
#define REMOVED_RETRIES 1000

void shl_options_init(shl_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->capacity = 1024;
    o->value_size = 256;
    o->mode = 0600;
    o->clock = SHL_CLOCK_MONOTONIC;
    o->flags = SHL_CREATE;
    o->policy = SHL_POLICY_RECLAIM_ORPHANS;
    o->reclaim_delay_ms = SHL_RECLAIM_DELAY_DEFAULT_MS;
    o->timeout_ms = SHL__ETCD_TIMEOUT_MS;
    o->max_shared = SHL_POOL_DEFAULT;
    o->max_waiters = SHL_POOL_DEFAULT;
    o->history = SHL_HISTORY_MAX;
}

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

/* The delay means nothing without the policy: stored as 0 then, so that
 * tables that do not reclaim match whatever delay their openers carry. */
static uint32_t reclaim_delay(const shl_options *o)
{
    return (o->policy & SHL_POLICY_RECLAIM_ORPHANS) ? o->reclaim_delay_ms : 0;
}

static int check_options(const shl_options *o)
{
    if (o->capacity < 1 || o->capacity > SHL_CAPACITY_MAX)
        return shl__fail(SHL_EINVAL, "capacity: %u, it must be 1 to %u", o->capacity,
                         SHL_CAPACITY_MAX);
    if (o->value_size > SHL_VALUE_MAX)
        return shl__fail(SHL_EINVAL, "value_size: %u bytes, the limit is %u", o->value_size,
                         SHL_VALUE_MAX);
    if (o->mode != 0600 && o->mode != 0660)
        return shl__fail(SHL_EINVAL, "mode: 0%o is not 0600 or 0660", (unsigned)o->mode);
    if (o->clock != SHL_CLOCK_MONOTONIC && o->clock != SHL_CLOCK_MANUAL)
        return shl__fail(SHL_EINVAL,
                         "clock: %d is not SHL_CLOCK_MONOTONIC (0) or SHL_CLOCK_MANUAL (1)",
                         o->clock);
    if (o->flags & ~(SHL_CREATE | SHL_EXCL))
        return shl__fail(SHL_EINVAL, "flags: 0x%x has bits other than SHL_CREATE and SHL_EXCL",
                         o->flags);
    if ((o->flags & SHL_EXCL) && !(o->flags & SHL_CREATE))
        return shl__fail(SHL_EINVAL, "flags: SHL_EXCL without SHL_CREATE");
    if (o->policy & ~SHL_POLICY_RECLAIM_ORPHANS)
        return shl__fail(SHL_EINVAL, "policy: 0x%x has bits other than SHL_POLICY_RECLAIM_ORPHANS",
                         o->policy);
    if (o->max_shared != SHL_POOL_DEFAULT && o->max_shared > (uint64_t)o->capacity * SHL_SHARED_MAX)
        return shl__fail(SHL_EINVAL,
                         "max_shared: %u, more than a table of capacity %u can use (%u per "
                         "lease)",
                         o->max_shared, o->capacity, SHL_SHARED_MAX);
    if (o->max_waiters != SHL_POOL_DEFAULT &&
        o->max_waiters > (uint64_t)o->capacity * SHL_WAIT_QUEUE_LEN)
        return shl__fail(SHL_EINVAL,
                         "max_waiters: %u, more than a table of capacity %u can use (%u per "
                         "lease)",
                         o->max_waiters, o->capacity, SHL_WAIT_QUEUE_LEN);
    if (o->history > SHL_HISTORY_MAX)
        return shl__fail(SHL_EINVAL, "history: %u events per lease, the limit is %u", o->history,
                         SHL_HISTORY_MAX);
    return SHL_OK;
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

/* An etcd table: the handle is made here, its etcd part by the kind. */
static int open_etcd(const char *name, const shl_options *o, shl_table **out)
{
    struct shl__etcd_name en;
    int rc = shl__etcd_parse(name, &en);
    if (rc != SHL_OK)
        return rc;
    if (o && (rc = check_options(o)) != SHL_OK)
        return rc;
    if (!SHL_HAVE_ETCD)
        return SHL_ENOTSUP;
    shl__handle_watch_forks();
    shl_table *t = calloc(1, sizeof *t);
    if (!t)
        return SHL_ENOMEM;
    t->kind = SHL__KIND_ETCD;
    t->fd = -1;
    shl__handle_stamp(t);
    t->self.pid = (int32_t)getpid();
    memcpy(t->name, en.table, sizeof t->name);
    if ((rc = shl__etcd_open(&en, o, t)) != SHL_OK) {
        free(t);
        return rc;
    }
    *out = t;
    return SHL_OK;
}

int shl_open(const char *name, const shl_options *o, shl_table **out)
{
    char n[SHL_TABLE_NAME_MAX + 1];
    if (!out)
        return SHL_EINVAL;
    *out = NULL;
    if (shl__unlikely(shl__is_etcd_name(name)))
        return open_etcd(name, o, out);
    int rc = shl__table_name(name, n);
    if (rc != SHL_OK)
        return rc;
    if (o && (rc = check_options(o)) != SHL_OK)
        return rc;
    shl__handle_watch_forks();

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
    memcpy(t->name, n, sizeof n);
    *out = t;
    return SHL_OK;
}

int shl_close(shl_table *t)
{
    if (!t)
        return SHL_OK;
    if (shl__unlikely(t->kind != SHL__KIND_SHM)) {
        shl__etcd_close(t);
        free(t);
        return SHL_OK;
    }
    struct shl__seg seg = {t->hdr, t->size, t->fd, 0};
    shl__seg_close(&seg);
    free(t);
    return SHL_OK;
}

int shl_unlink(const char *name)
{
    char n[SHL_TABLE_NAME_MAX + 1];
    if (shl__unlikely(shl__is_etcd_name(name))) {
        struct shl__etcd_name en;
        int rc = shl__etcd_parse(name, &en);
        return rc != SHL_OK ? rc : shl__etcd_unlink(&en);
    }
    int rc = shl__table_name(name, n);
    if (rc != SHL_OK)
        return rc;
    return shl__from_shm(shl__seg_unlink(n));
}

int shl__table_removed(const shl_table *t)
{
    if (shl__removed(t))
        return 1;
    if (!shl__seg_gone(t->name, t->fd))
        return 0;
    /* Nobody can open this segment again: tell every handle of it at its
     * next call, and wake its sleepers, as shl_unlink() would have. */
    shl__seg_mark(t->hdr, &t->geom, shl__tnslots(t));
    return 1;
}

int shl_table_check(shl_table *t)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_OK;
    return shl__table_removed(t) ? SHL_EREMOVED : SHL_OK;
}

int shl_table_info_get(shl_table *t, shl_table_info *info)
{
    SHL__CHECK_HANDLE(t);
    if (!info)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_info(t, info);
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
    return SHL_OK;
}

int shl_now(shl_table *t, uint64_t *now_ns)
{
    SHL__CHECK_HANDLE(t);
    if (!now_ns)
        return SHL_EINVAL;
    /* An etcd table's times (shl_stat) are on this host's CLOCK_MONOTONIC. */
    *now_ns = shl__unlikely(t->kind != SHL__KIND_SHM) ? shl__mono_ns() : shl__now(t);
    return SHL_OK;
}

int shl_clock_set(shl_table *t, uint64_t now_ns)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_ENOTSUP;
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
