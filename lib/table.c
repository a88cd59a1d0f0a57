/*
 * lib/table.c - tables opened, created, closed and removed, whatever their
 * kind; the options and their checks, which both kinds share; the table's
 * clock. A name that starts with etcd:// or etcds:// is an etcd table
 * (lib/kind_etcd/etcd_table.c), any other a shared-memory one
 * (lib/kind_shm/table.c).
 */
#include <stdlib.h>
#include <unistd.h>

#include "../shm/clock.h"
#include "internal.h"

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
    o->spare_values = SHL_POOL_DEFAULT;
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
    if (o->spare_values != SHL_POOL_DEFAULT && o->spare_values > o->capacity)
        return shl__fail(SHL_EINVAL,
                         "spare_values: %u, more than a table of capacity %u can use (one per "
                         "lease)",
                         o->spare_values, o->capacity);
    if (o->history > SHL_HISTORY_MAX)
        return shl__fail(SHL_EINVAL, "history: %u events per lease, the limit is %u", o->history,
                         SHL_HISTORY_MAX);
    return SHL_OK;
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
    return shl__shm_open(n, o, out);
}

int shl_close(shl_table *t)
{
    if (!t)
        return SHL_OK;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        shl__etcd_close(t);
    else
        shl__shm_close(t);
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
    return shl__shm_unlink(n);
}

int shl_table_check(shl_table *t)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_OK;
    return shl__shm_table_check(t);
}

int shl_table_info_get(shl_table *t, shl_table_info *info)
{
    SHL__CHECK_HANDLE(t);
    if (!info)
        return SHL_EINVAL;
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_info(t, info);
    return shl__shm_info(t, info);
}

int shl_now(shl_table *t, uint64_t *now_ns)
{
    SHL__CHECK_HANDLE(t);
    if (!now_ns)
        return SHL_EINVAL;
    /* An etcd table's times (shl_stat) are on this host's CLOCK_MONOTONIC. */
    *now_ns = shl__unlikely(t->kind != SHL__KIND_SHM) ? shl__mono_ns() : shl__shm_now(t);
    return SHL_OK;
}

int shl_clock_set(shl_table *t, uint64_t now_ns)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return SHL_ENOTSUP;
    return shl__shm_clock_set(t, now_ns);
}
