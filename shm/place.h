/*
 * shm/place.h - where a segment's file lives: /dev/shm/NAME, or the path
 * NAME when it starts with '/'; the check of its directory; and the facts
 * about that place that the inspector reports (file system, free space,
 * owner, openers).
 */
#ifndef SHL_SHM_PLACE_H
#define SHL_SHM_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "segment.h"

/* Room for the longest file name of a segment: /dev/shm/ and a name, or a path. */
#define SHL__SEG_PATH_MAX (sizeof "/dev/shm/" + SHL__SEG_NAME_MAX)

/* The file of segment `name` into buf: 0, or SHL__SHM_EINVAL when it does
 * not fit. */
int shl__seg_path(const char *name, char *buf, size_t cap);

/* Whether a directory is safe to keep segments in: a directory, and not
 * writable by group or others unless sticky. */
int shl__seg_dir_safe(const struct stat *st);

/* Opens (O_PATH) and checks the directory of `path`, a full path: 0 with
 * *dirfd open and *base pointing at the last component in `path`;
 * SHL__SHM_EPERM when the directory is not safe (shl__seg_dir_safe) or not
 * searchable, SHL__SHM_ENOENT when it does not exist. */
int shl__seg_dir_open(const char *path, int *dirfd, const char **base);

struct shl__seg_place {
    char path[SHL__SEG_PATH_MAX];
    int dir_safe;     /* 1, 0 (shl__seg_open refuses it), -1: no such directory */
    int have_fs;      /* the file system facts below are known */
    int64_t fs_type;  /* statfs f_type */
    uint64_t fs_size; /* bytes */
    uint64_t fs_free; /* bytes available to unprivileged users */
    int exists;       /* something has the name */
    int regular;      /* ... a regular file */
    uint32_t uid, mode;
    uint64_t file_size;
    uint64_t file_allocated; /* bytes the file has allocated (st_blocks) */
    int header;              /* 0: a segment of this build; SHL__SHM_EVERSION, SHL__SHM_ECORRUPT,
                                SHL__SHM_EPERM (not readable), SHL__SHM_ENOENT (no file) */
    int openers; /* SHL__ALIVE: some handle has it open; SHL__DEAD: none; SHL__UNKNOWN */
};

/* Looks at the place of segment `name` without opening it as a segment
 * (no alive id taken, nothing written): 0, or SHL__SHM_EINVAL for a name
 * too long. What cannot be learnt stays unknown. */
int shl__seg_place(const char *name, struct shl__seg_place *out);

#endif
