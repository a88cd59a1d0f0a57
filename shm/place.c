/*
 * shm/place.c - where a segment's file lives, and whether that place is safe.
 *
 * A segment name without '/' is a file in /dev/shm. A name starting with
 * '/' is the file at that path (lib/names.c has made sure it is absolute,
 * without empty, "." or ".." components): a tmpfs the processes share, such
 * as /run/lock or a volume mounted into several containers. Both go through
 * the same creation and opening code (segment.c); only the directory
 * differs.
 *
 * The directory is opened once (O_PATH) and checked before anything in it
 * is trusted or created: one that users other than its owner may write
 * (group or other write permission) without the sticky bit lets any of
 * them rename, replace or remove the table's name under its users, so it is
 * refused. /dev/shm and /run/lock are sticky (1777) and pass. Every later
 * step works relative to that descriptor, so the directory checked is the
 * directory used.
 */
#include "place.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "alive.h"

#define SHM_DIR "/dev/shm/"

int shl__seg_path(const char *name, char *buf, size_t cap)
{
    int n =
        name[0] == '/' ? snprintf(buf, cap, "%s", name) : snprintf(buf, cap, SHM_DIR "%s", name);
    return n > 0 && (size_t)n < cap ? 0 : SHL__SHM_EINVAL;
}

int shl__seg_dir_safe(const struct stat *st)
{
    if (!S_ISDIR(st->st_mode))
        return 0;
    return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX);
}

/* Opens (O_PATH) the directory of `path`, a full path, with *base at its
 * last component: the descriptor, or -1 with errno set. */
static int open_parent(const char *path, const char **base)
{
    char dir[SHL__SEG_PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    *base = slash ? slash + 1 : path;
    if (!slash || n >= sizeof dir || !**base) {
        errno = EINVAL;
        return -1;
    }
    memcpy(dir, path, n);
    dir[n] = 0;
    return open(n ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int shl__seg_dir_open(const char *path, int *dirfd, const char **base)
{
    *dirfd = -1;
    int fd = open_parent(path, base);
    if (fd < 0)
        return errno == ENOENT                                         ? SHL__SHM_ENOENT
               : errno == EINVAL                                       ? SHL__SHM_EINVAL
               : errno == EACCES || errno == ENOTDIR || errno == ELOOP ? SHL__SHM_EPERM
                                                                       : SHL__SHM_ESYS;
    struct stat st;
    if (fstat(fd, &st) != 0 || !shl__seg_dir_safe(&st)) {
        close(fd);
        return SHL__SHM_EPERM;
    }
    *dirfd = fd;
    return 0;
}

/* The file's facts, through a descriptor that took no alive id (so that
 * the probe sees every opener's lock). */
static void file_facts(int fd, struct shl__seg_place *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return;
    out->exists = 1;
    out->regular = S_ISREG(st.st_mode);
    out->uid = (uint32_t)st.st_uid;
    out->mode = (uint32_t)(st.st_mode & 07777);
    out->file_size = (uint64_t)st.st_size;
    out->file_allocated = (uint64_t)st.st_blocks * 512;
    if (!out->regular)
        return;
    struct shl__hdr h;
    ssize_t got = pread(fd, &h, sizeof h, 0);
    /* The format only: the owner is reported beside it and judged by the opener. */
    out->header = got == (ssize_t)sizeof h ? shl__seg_check_header(&h, (size_t)st.st_size,
                                                                   SHL__UID_ANY, NULL, NULL, NULL)
                                           : SHL__SHM_ECORRUPT;
    out->openers = shl__alive_any(fd);
}

int shl__seg_place(const char *name, struct shl__seg_place *out)
{
    memset(out, 0, sizeof *out);
    out->header = SHL__SHM_ENOENT;
    out->openers = SHL__UNKNOWN;
    out->dir_safe = -1;
    if (shl__seg_path(name, out->path, sizeof out->path))
        return SHL__SHM_EINVAL;
    const char *base;
    int dfd = open_parent(out->path, &base);
    if (dfd < 0)
        return 0; /* no directory: everything stays unknown */
    struct stat st;
    if (fstat(dfd, &st) == 0)
        out->dir_safe = shl__seg_dir_safe(&st);
    struct statfs fs;
    if (fstatfs(dfd, &fs) == 0) {
        out->have_fs = 1;
        out->fs_type = (int64_t)fs.f_type;
        out->fs_size = (uint64_t)fs.f_blocks * (uint64_t)fs.f_bsize;
        out->fs_free = (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize;
    }
    int fd = openat(dfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        file_facts(fd, out);
        close(fd);
    } else if (errno != ENOENT) {
        out->exists = 1; /* there, but not ours to open (a symlink, no permission) */
        out->header = SHL__SHM_EPERM;
    }
    close(dfd);
    return 0;
}
