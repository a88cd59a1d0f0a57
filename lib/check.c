/*
 * lib/check.c - verification of every invariant of a table (shl_check()),
 * of a segment image (shl_check_image()) and of a table's file by name
 * (shl_check_name()).
 *
 * The entry points: the checks of the arguments, then the one kind test
 * (for a name: whether it names an etcd table, which has no file to read),
 * and the kind's check as the last call. The checks themselves are the
 * kinds': kind_shm/check.c (the table-wide ones, and those of each slot
 * with kind_shm/invariants.c) and kind_etcd/etcd_inspect.c.
 */
#include "internal.h"

int shl_check(shl_table *t, void (*report)(void *arg, const char *problem), void *arg)
{
    SHL__CHECK_HANDLE(t);
    if (shl__unlikely(t->kind != SHL__KIND_SHM))
        return shl__etcd_check(t, report, arg);
    return shl__shm_check(t, report, arg);
}

int shl_check_image(const void *image, size_t size, void (*report)(void *arg, const char *problem),
                    void *arg)
{
    if (!image && size)
        return SHL_EINVAL;
    return shl__shm_check_image(image, size, report, arg);
}

int shl_check_name(const char *name, void (*report)(void *arg, const char *problem), void *arg)
{
    char n[SHL_TABLE_NAME_MAX + 1];
    if (shl__is_etcd_name(name)) {
        struct shl__etcd_name en;
        int rc = shl__etcd_parse(name, &en);
        return rc != SHL_OK ? rc : SHL_ENOTSUP; /* no segment file: open it, shl_check() */
    }
    int rc = shl__table_name(name, n);
    if (rc != SHL_OK)
        return rc;
    return shl__shm_check_name(n, report, arg);
}
