/*
 * lib/kind_shm/open_detail.c - what shl_open() found when it refused a table for want
 * of space or of permission: the size needed and the space free, or the
 * owner and mode of the file (or directory) it would not trust; and what
 * an add found when the file system had no room for a new lease's slot.
 *
 * Only on the refusal path: it looks again (stat, statvfs), after the fact,
 * so what it reports is what is there now; the code itself came from the
 * checks in shm/.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../shm/place.h"
#include "shm_kind.h"

/* "1.5 MiB": n bytes in binary units, one decimal. */
static void human(char *buf, size_t cap, uint64_t n)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    unsigned u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu bytes", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, unit[u]);
}

/* The directory of path into dir ("/" when none). */
static void dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n == 0 || n >= cap)
        n = 0;
    memcpy(dir, path, n);
    if (n == 0)
        memcpy(dir, "/", 2);
    else
        dir[n] = 0;
}

/* The space free in dir, in words ("an unknown amount" when it cannot be
 * told). */
static void free_in(const char *dir, char have[32])
{
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0)
        human(have, 32, (uint64_t)vfs.f_bavail * vfs.f_frsize);
    else
        snprintf(have, 32, "an unknown amount");
}

static int no_space(const char *path, const char *dir, const struct shl__seg_params *p)
{
    struct shl__geom g;
    char need[32] = "more", have[32];
    uint32_t capacity = p ? p->capacity : 0, value_size = p ? p->value_size : 0;
    if (p && shl__geom(p, &g) == 0)
        human(need, sizeof need, g.seg_size);
    free_in(dir, have);
    return shl__fail(SHL_ENOSPC, "%s: needs %s (capacity %u, value size %u), %s has %s free", path,
                     need, capacity, value_size, dir, have);
}

static int no_permission(const char *path, const char *dir, uint32_t max_mode)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return shl__fail(SHL_EPERM, "%s: its directory %s cannot be searched", path, dir);
    if (!S_ISDIR(st.st_mode))
        return shl__fail(SHL_EPERM, "%s: %s is not a directory", path, dir);
    if (!shl__seg_dir_safe(&st))
        return shl__fail(SHL_EPERM,
                         "%s: directory %s (owner uid %u, mode 0%o) may be written by others "
                         "and has no sticky bit",
                         path, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    if (lstat(path, &st) != 0)
        return shl__fail(SHL_EPERM, "%s: this process (uid %u) may not create or open it", path,
                         (unsigned)geteuid());
    if (!S_ISREG(st.st_mode))
        return shl__fail(SHL_EPERM, "%s: not a regular file (owner uid %u, mode 0%o)", path,
                         (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return shl__fail(SHL_EPERM,
                     "%s: owner uid %u, group %u, mode 0%o; this process is uid %u and accepts "
                     "at most mode 0%o",
                     path, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777),
                     (unsigned)geteuid(), (unsigned)max_mode);
}

int shl__explain_open(int rc, const char *name, const struct shl__seg_params *p, uint32_t max_mode)
{
    char path[SHL__SEG_PATH_MAX], dir[SHL__SEG_PATH_MAX];
    if (shl__seg_path(name, path, sizeof path) != 0)
        return rc;
    dir_of(path, dir, sizeof dir);
    return rc == SHL_ENOSPC ? no_space(path, dir, p) : no_permission(path, dir, max_mode);
}

int shl__explain_add(int rc, const shl_table *t, const char *lease, uint64_t bytes)
{
    char path[SHL__SEG_PATH_MAX], dir[SHL__SEG_PATH_MAX], need[32], have[32];
    if (rc != SHL_ENOSPC || shl__seg_path(t->name, path, sizeof path) != 0)
        return shl__fail(rc, "table %s: lease \"%s\" could not be added", t->name, lease);
    dir_of(path, dir, sizeof dir);
    human(need, sizeof need, bytes);
    free_in(dir, have);
    return shl__fail(SHL_ENOSPC,
                     "%s: no room for lease \"%s\" (a lease takes %s when its name is first "
                     "used), %s has %s free",
                     path, lease, need, dir, have);
}
