/*
 * lib/kind_shm/floor.c - the token state file: a durable epoch that makes the tokens
 * of a re-created table higher than every token of the tables before it.
 *
 * The file is a few lines of text, so that an administrator can read it:
 *
 *     shmlease-token-state 1
 *     epoch 42
 *
 * Reserving an epoch happens once per table creation, before the segment
 * exists, so that a crash at any point leaves either the old epoch (no table
 * was created with the new one) or the new one (which perhaps no table used:
 * an epoch is skipped, never reused). Order: flock "<path>.lock", read,
 * write a new "<path>.tmp.XXXXXX", fsync it, rename it over <path>, fsync
 * the directory, unlock. Only then is the floor handed to the segment's
 * creator. (A creator killed before the rename leaves its temporary file.)
 *
 * Whatever else is found under these names is refused or ignored, never
 * waited on: existing paths are opened with O_NONBLOCK and O_NOFOLLOW and
 * must be regular files (a FIFO would block the open, and the creator with
 * the lock held, forever); temporaries are new files (O_EXCL) under unique
 * names. Files are made 0600 whatever the umask, and the lock is opened
 * read-only (flock needs no more), so a lock file made under umask 0400 does
 * not lock out every later creator.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm_kind.h"

#define STATE_MAGIC "shmlease-token-state 1\n"
#define STATE_MAX   128 /* a valid file is far shorter */
/* The last epoch's tokens must still end at or below UINT64_MAX. */
#define EPOCH_MAX    ((UINT64_C(1) << (64 - SHL_TOKEN_EPOCH_BITS)) - 2)
#define SUFFIX_MAX   16                          /* ".lock.XXXXXX", ".tmp.XXXXXX" */
#define LOCK_WAIT_NS (UINT64_C(10) * 1000000000) /* as for a stuck segment creator */
#define LOCK_POLL_NS 1000000
#define LOCK_TRIES   8 /* to make the lock file while others remove it */
/* How every existing path is opened (with O_RDONLY). */
#define OPEN_FLAGS (O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)

uint64_t shl__token_limit(uint64_t floor)
{
    /* The next epoch's tokens start at floor + SPAN + 1, so this epoch may
     * issue up to floor + SPAN and still stay below all of them. */
    return floor ? floor + SHL_TOKEN_EPOCH_SPAN : UINT64_MAX;
}

int shl__floor_valid(uint64_t floor)
{
    return floor % SHL_TOKEN_EPOCH_SPAN == 0 && floor / SHL_TOKEN_EPOCH_SPAN <= EPOCH_MAX;
}

static int sys_err(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return SHL_ENOENT;
    case EACCES:
    case EPERM:
    case EROFS:
    case ELOOP:  /* O_NOFOLLOW met a symlink */
    case EISDIR: /* not a regular file */
    case ENXIO:  /* a socket, or a device without its driver */
        return SHL_EPERM;
    case ENOSPC:
    case EDQUOT:
        return SHL_ENOSPC;
    case ENOMEM:
        return SHL_ENOMEM;
    default:
        return SHL_ESYS;
    }
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? sys_err(errno) : SHL_ESYS;
        buf += n;
        len -= (size_t)n;
    }
    return SHL_OK;
}

/* SHL_OK when fd is a regular file; SHL_EPERM for anything else planted
 * under the name (a FIFO, a device, a socket, a directory). */
static int regular(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return SHL_ESYS;
    return S_ISREG(st.st_mode) ? SHL_OK : SHL_EPERM;
}

/* Makes a new file "<path><suffix>.XXXXXX" (its name in `tmp`, PATH_MAX
 * bytes), open read-write as *fd, mode 0600 whatever the umask. O_EXCL: it
 * is never a file that was there before. */
static int make_temp(const char *path, const char *suffix, char *tmp, int *fd)
{
    snprintf(tmp, PATH_MAX, "%s%s.XXXXXX", path, suffix);
    *fd = mkostemp(tmp, O_CLOEXEC);
    if (*fd < 0)
        return sys_err(errno);
    if (fchmod(*fd, 0600) != 0) {
        int rc = sys_err(errno);
        close(*fd);
        unlink(tmp);
        return rc;
    }
    return SHL_OK;
}

/* Parses the state file's text; SHL_ECORRUPT unless it is exactly ours. */
static int parse(const char *text, uint64_t *epoch)
{
    size_t m = sizeof STATE_MAGIC - 1;
    if (strncmp(text, STATE_MAGIC, m) != 0 || strncmp(text + m, "epoch ", 6) != 0)
        return SHL_ECORRUPT;
    const char *p = text + m + 6;
    if (*p < '0' || *p > '9')
        return SHL_ECORRUPT;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end[0] != '\n' || end[1] != '\0' || v > EPOCH_MAX)
        return SHL_ECORRUPT;
    *epoch = v;
    return SHL_OK;
}

/* The current epoch: 0 when the file does not exist yet. */
static int read_epoch(const char *path, uint64_t *epoch)
{
    int fd = open(path, O_RDONLY | OPEN_FLAGS);
    if (fd < 0) {
        if (errno != ENOENT)
            return sys_err(errno);
        *epoch = 0;
        return SHL_OK;
    }
    struct stat st;
    char buf[STATE_MAX + 1];
    ssize_t n = -1;
    int rc = SHL_OK;
    if (fstat(fd, &st) != 0)
        rc = SHL_ESYS;
    else if (!S_ISREG(st.st_mode))
        rc = SHL_EPERM;
    else if (st.st_uid != geteuid()) /* another user could lower our floor */
        rc = SHL_EPERM;
    else {
        do
            n = read(fd, buf, STATE_MAX);
        while (n < 0 && errno == EINTR);
        rc = n < 0 ? sys_err(errno) : SHL_OK;
    }
    close(fd);
    if (rc != SHL_OK)
        return rc;
    buf[n] = '\0';
    if (memchr(buf, '\0', (size_t)n))
        return SHL_ECORRUPT;
    return parse(buf, epoch);
}

/* fsync of the directory holding `path`, so that the rename is durable. */
static int sync_dir(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t len = (size_t)(slash - path);
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sys_err(errno);
    int rc = fsync(fd) == 0 ? SHL_OK : sys_err(errno);
    close(fd);
    return rc;
}

static int write_epoch(const char *path, uint64_t epoch)
{
    char text[STATE_MAX], tmp[PATH_MAX];
    int len = snprintf(text, sizeof text, STATE_MAGIC "epoch %" PRIu64 "\n", epoch);
    int fd;
    int rc = make_temp(path, ".tmp", tmp, &fd);
    if (rc != SHL_OK)
        return rc;
    rc = write_all(fd, text, (size_t)len);
    if (rc == SHL_OK && fsync(fd) != 0)
        rc = sys_err(errno);
    if (close(fd) != 0 && rc == SHL_OK)
        rc = sys_err(errno);
    SHL__CRASH(SHL__CP_FLOOR_TMP);
    if (rc == SHL_OK && rename(tmp, path) != 0)
        rc = sys_err(errno);
    if (rc != SHL_OK) {
        unlink(tmp);
        return rc;
    }
    SHL__CRASH(SHL__CP_FLOOR_RENAMED);
    return sync_dir(path);
}

/* flock(LOCK_EX), but a holder that is stopped rather than dead (a dead one
 * releases it) must not block every creator forever. */
static int lock_bounded(int fd)
{
    uint64_t deadline = shl__mono_ns() + LOCK_WAIT_NS;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return SHL_OK;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return sys_err(errno);
        if (shl__mono_ns() > deadline)
            return SHL_ETIMEDOUT;
        struct timespec pause = shl__ns_to_ts(LOCK_POLL_NS);
        nanosleep(&pause, NULL);
    }
}

/* Opens "<path>.lock", making it when missing: as a complete 0600 file under
 * a temporary name, linked into place, so that nobody ever opens it before
 * its mode is set. */
static int open_lock(const char *lock, int *out)
{
    for (int i = 0; i < LOCK_TRIES; i++) {
        int fd = open(lock, O_RDONLY | OPEN_FLAGS);
        if (fd >= 0) {
            int rc = regular(fd);
            if (rc != SHL_OK) {
                close(fd);
                return rc;
            }
            *out = fd;
            return SHL_OK;
        }
        if (errno != ENOENT)
            return sys_err(errno);
        char tmp[PATH_MAX];
        int rc = make_temp(lock, "", tmp, &fd);
        if (rc != SHL_OK)
            return rc;
        int e = link(tmp, lock) == 0 ? 0 : errno;
        unlink(tmp);
        if (e == 0) {
            *out = fd;
            return SHL_OK;
        }
        close(fd);
        if (e != EEXIST) /* EEXIST: another creator made it first; open theirs */
            return sys_err(e);
    }
    return SHL_ESYS; /* made and removed again and again under us */
}

int shl__floor_next(const char *path, uint64_t *floor)
{
    char lock[PATH_MAX];
    size_t plen = path ? strlen(path) : 0;
    if (plen == 0 || plen + SUFFIX_MAX >= PATH_MAX || path[plen - 1] == '/')
        return shl__fail(SHL_EINVAL,
                         plen == 0 ? "token_state_path: empty"
                         : path[plen - 1] == '/'
                             ? "token_state_path: \"%.200s\" ends with '/', it must name a file"
                             : "token_state_path: too long (the limit is PATH_MAX less a suffix)",
                         path ? path : "");
    memcpy(lock, path, plen);
    memcpy(lock + plen, ".lock", sizeof ".lock");

    int lfd = -1;
    int rc = open_lock(lock, &lfd);
    if (rc != SHL_OK)
        return rc;
    rc = lock_bounded(lfd);
    if (rc != SHL_OK)
        goto out;
    uint64_t epoch = 0;
    if ((rc = read_epoch(path, &epoch)) != SHL_OK)
        goto out;
    if (epoch >= EPOCH_MAX) {
        rc = SHL_ETOKENS;
        goto out;
    }
    if ((rc = write_epoch(path, epoch + 1)) != SHL_OK)
        goto out;
    *floor = (epoch + 1) << SHL_TOKEN_EPOCH_BITS;
out:
    close(lfd); /* releases the flock */
    return rc;
}
