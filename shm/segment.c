/*
 * shm/segment.c - safe creation, opening and removal of a segment.
 *
 * Creation never exposes a half-made segment under the table's name. The
 * creator makes "<name>.init" with O_CREAT|O_EXCL (so exactly one process
 * initialises at a time), sizes it with posix_fallocate, initialises it,
 * stores the ready word last, and then link()s it to "<name>": a name that
 * exists always refers to a complete segment. While initialising, the creator
 * holds flock(LOCK_EX) on the .init file; a creator that died leaves an
 * unlocked .init file, which a later creator removes (after checking that the
 * name still refers to the same inode) once it is older than STALE_INIT_S.
 *
 * Opening validates before it trusts: fstat (regular file, owner, mode), then
 * the header (shl__seg_check_header). Nothing is written to a segment that
 * failed validation.
 */
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mutex.h"

#define SHM_DIR      "/dev/shm/"
#define INIT_SUFFIX  ".init"
#define STALE_INIT_S 2
#define OPEN_WAIT_NS (UINT64_C(10) * 1000000000) /* give up on a stuck creator */

static uint32_t next_pow2(uint64_t v)
{
    uint64_t p = 2;
    while (p < v)
        p <<= 1;
    return (uint32_t)p;
}

int shl__geom(uint32_t capacity, uint32_t value_size, struct shl__geom *g)
{
    if (capacity < 1 || capacity > SHL__CAPACITY_MAX || value_size > SHL__VALUE_MAX)
        return SHM_EINVAL;
    g->index_size = next_pow2((uint64_t)capacity * 2);
    g->index_off = shl__align_up(sizeof(struct shl__hdr), SHL__CACHELINE);
    g->slots_off =
        shl__align_up(g->index_off + (uint64_t)g->index_size * sizeof(uint32_t), SHL__CACHELINE);
    g->slot_stride =
        shl__align_up(sizeof(struct shl__slot) + 2 * shl__align_up(value_size, 8), SHL__CACHELINE);
    g->seg_size = g->slots_off + (uint64_t)capacity * g->slot_stride;
    return 0;
}

int shl__seg_check_header(const void *base, size_t size, uint32_t uid)
{
    const struct shl__hdr *h = base;
    struct shl__geom g;
    if (size < sizeof *h)
        return SHM_ECORRUPT;
    if (h->magic != SHL__MAGIC)
        return SHM_ECORRUPT;
    if (h->format != shl__format_word())
        return SHM_EVERSION;
    if (atomic_load_explicit(&h->ready, memory_order_acquire) != SHL__READY)
        return SHM_ECORRUPT;
    if (shl__geom(h->capacity, h->value_size, &g) != 0)
        return SHM_ECORRUPT;
    if (h->seg_size != size || g.seg_size != size || h->index_off != g.index_off ||
        h->slots_off != g.slots_off || h->slot_stride != g.slot_stride ||
        h->index_size != g.index_size)
        return SHM_ECORRUPT;
    if (h->uid != uid || (h->clock != SHL__CLOCK_MONOTONIC && h->clock != SHL__CLOCK_MANUAL))
        return SHM_ECORRUPT;
    if ((h->mode != 0600 && h->mode != 0660) || (h->policy & ~SHL__POL_RECLAIM_ORPHANS))
        return SHM_ECORRUPT;
    if (atomic_load_explicit(&h->nslots, memory_order_relaxed) > h->capacity)
        return SHM_ECORRUPT;
    return 0;
}

uint64_t shl__timens_id(void)
{
    struct stat st;
    if (stat("/proc/self/ns/time", &st) != 0)
        return 0;
    return (uint64_t)st.st_ino;
}

static int sys_err(int e)
{
    switch (e) {
    case ENOENT:
        return SHM_ENOENT;
    case EEXIST:
        return SHM_EEXIST;
    case EACCES:
    case EPERM:
    case ELOOP:  /* O_NOFOLLOW met a symlink: not ours to trust */
    case EISDIR: /* not a regular file */
        return SHM_EPERM;
    case ENOSPC:
    case EFBIG:
        return SHM_ENOSPC;
    case ENOMEM:
        return SHM_ENOMEM;
    default:
        return SHM_ESYS;
    }
}

static int make_path(char *buf, size_t cap, const char *name, const char *suffix)
{
    int n = snprintf(buf, cap, SHM_DIR "%s%s", name, suffix);
    return n > 0 && (size_t)n < cap ? 0 : SHM_EINVAL;
}

static int in_groups(gid_t g)
{
    if (g == getegid())
        return 1;
    gid_t list[256];
    int n = getgroups(256, list);
    for (int i = 0; i < n; i++)
        if (list[i] == g)
            return 1;
    return 0;
}

/* The file itself: a regular file, ours (or our group's when group sharing is
 * accepted), with no permission bits wider than `max_mode`. */
static int check_file(const struct stat *st, uint32_t max_mode)
{
    uint32_t perm = st->st_mode & 07777;
    if (!S_ISREG(st->st_mode))
        return SHM_EPERM;
    if (perm & ~max_mode & 07777)
        return SHM_EPERM;
    if (st->st_uid == geteuid())
        return 0;
    if ((max_mode & 0060) == 0060 && (perm & 0060) == 0060 && in_groups(st->st_gid))
        return 0;
    return SHM_EPERM;
}

static int attach(int fd, uint32_t max_mode, struct shl__seg *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return SHM_ESYS;
    int rc = check_file(&st, max_mode);
    if (rc != 0)
        return rc;
    if ((uint64_t)st.st_size < sizeof(struct shl__hdr))
        return SHM_ECORRUPT;
    /* Read-only first: a bad segment is never mapped writable. */
    void *ro = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (ro == MAP_FAILED)
        return sys_err(errno);
    rc = shl__seg_check_header(ro, (size_t)st.st_size, (uint32_t)st.st_uid);
    uint64_t tns = rc == 0 ? ((const struct shl__hdr *)ro)->timens : 0;
    munmap(ro, (size_t)st.st_size);
    if (rc != 0)
        return rc;
    uint64_t mine = shl__timens_id();
    if (tns && mine && tns != mine)
        return SHM_ETIMENS;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return sys_err(errno);
    /* The header may have been replaced between the two maps only by someone
     * writing garbage into a segment they own; check again before use. */
    rc = shl__seg_check_header(p, (size_t)st.st_size, (uint32_t)st.st_uid);
    if (rc != 0) {
        munmap(p, (size_t)st.st_size);
        return rc;
    }
    out->hdr = p;
    out->size = (size_t)st.st_size;
    out->fd = fd;
    return 0;
}

/* unlink(path) only if it still names the file open as `fd`. */
static void unlink_if_same(const char *path, int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(path);
}

/* An .init file whose creator is gone (unlocked and old) is removed. */
static void clear_stale_init(const char *ipath)
{
    int fd = open(ipath, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    struct timespec now;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
        clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_sec - st.st_ctim.tv_sec > STALE_INIT_S)
        unlink_if_same(ipath, fd);
    close(fd);
}

static void init_header(struct shl__hdr *h, const struct shl__seg_params *p,
                        const struct shl__geom *g)
{
    h->magic = SHL__MAGIC;
    h->format = shl__format_word();
    h->seg_size = g->seg_size;
    h->index_off = g->index_off;
    h->slots_off = g->slots_off;
    h->slot_stride = g->slot_stride;
    h->index_size = g->index_size;
    h->timens = shl__timens_id();
    h->created_ns = shl__mono_ns();
    h->uid = (uint32_t)geteuid();
    h->mode = p->mode;
    h->clock = p->clock;
    h->capacity = p->capacity;
    h->value_size = p->value_size;
    h->policy = p->policy;
    h->reclaim_delay_ms = p->reclaim_delay_ms;
    h->token_floor = p->token_floor;
    h->creator_pid = (int32_t)getpid();
    /* posix_fallocate gave zeroes: the index is empty, nslots is 0. */
}

#define SHM_EAGAIN 1 /* internal: someone else created it; open again */

static int create(const char *path, const char *ipath, const struct shl__seg_params *p,
                  struct shl__seg *out)
{
    struct shl__geom g;
    int rc = shl__geom(p->capacity, p->value_size, &g);
    if (rc != 0)
        return rc;
    if (p->mode != 0600 && p->mode != 0660)
        return SHM_EINVAL;
    int fd = open(ipath, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno != EEXIST)
            return sys_err(errno);
        clear_stale_init(ipath);
        return SHM_EAGAIN;
    }
    void *m = MAP_FAILED;
    if (flock(fd, LOCK_EX) != 0 || fchmod(fd, p->mode) != 0) {
        rc = sys_err(errno);
        goto fail_file;
    }
    rc = posix_fallocate(fd, 0, (off_t)g.seg_size);
    if (rc != 0) {
        rc = sys_err(rc);
        goto fail_file;
    }
    m = mmap(NULL, g.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = sys_err(errno);
        goto fail_file;
    }
    struct shl__hdr *h = m;
    init_header(h, p, &g);
    if (shl__mutex_init(&h->table_lock) != 0) {
        rc = SHM_ESYS;
        goto fail_map;
    }
    atomic_store_explicit(&h->ready, SHL__READY, memory_order_release);
    SHL__CRASH(SHL__CP_SHM_CREATE);
    if (link(ipath, path) != 0) {
        rc = (errno == EEXIST || errno == ENOENT) ? SHM_EAGAIN : sys_err(errno);
        goto fail_map;
    }
    unlink_if_same(ipath, fd);
    /* The lock marked a creator at work on the .init file; published, the
     * file is the table's, whose flock belongs to its repairer (lib/repair.c). */
    flock(fd, LOCK_UN);
    out->hdr = h;
    out->size = g.seg_size;
    out->fd = fd;
    out->created = 1;
    return 0;

fail_map:
    munmap(m, g.seg_size);
fail_file:
    unlink_if_same(ipath, fd);
    close(fd);
    return rc;
}

int shl__seg_open(const char *name, const struct shl__seg_params *p, int excl, uint32_t max_mode,
                  struct shl__seg *out)
{
    char path[sizeof SHM_DIR + SHL__SEG_NAME_MAX + sizeof INIT_SUFFIX];
    char ipath[sizeof path];
    if (make_path(path, sizeof path, name, "") || make_path(ipath, sizeof ipath, name, INIT_SUFFIX))
        return SHM_EINVAL;
    out->hdr = NULL;
    out->size = 0;
    out->fd = -1;
    out->created = 0;
    uint64_t deadline = shl__mono_ns() + OPEN_WAIT_NS;
    long backoff_ns = 100000; /* doubles to 10 ms: a stale .init takes seconds to clear */
    for (;;) {
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            int rc = excl ? SHM_EEXIST : attach(fd, max_mode, out);
            if (rc != 0)
                close(fd);
            return rc;
        }
        if (errno != ENOENT)
            return sys_err(errno);
        if (!p)
            return SHM_ENOENT;
        int rc = create(path, ipath, p, out);
        if (rc != SHM_EAGAIN)
            return rc;
        if (shl__mono_ns() > deadline)
            return SHM_ETIMEDOUT;
        struct timespec pause = {0, backoff_ns};
        nanosleep(&pause, NULL);
        if (backoff_ns < 10000000)
            backoff_ns *= 2;
    }
}

void shl__seg_close(struct shl__seg *s)
{
    if (s->hdr)
        munmap(s->hdr, s->size);
    if (s->fd >= 0)
        close(s->fd);
    s->hdr = NULL;
    s->size = 0;
    s->fd = -1;
}

/* Opens the table file `name` read-only, without following a link, and
 * fstat()s it: 0 with *fd open, or an error with nothing open. Not a regular
 * file is SHM_EPERM. */
static int open_file(const char *name, char *path, size_t cap, int *fd, struct stat *st)
{
    if (make_path(path, cap, name, ""))
        return SHM_EINVAL;
    *fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return sys_err(errno);
    int rc = 0;
    if (fstat(*fd, st) != 0)
        rc = SHM_ESYS;
    else if (!S_ISREG(st->st_mode)) /* unlink() or mmap() would fail: say so */
        rc = SHM_EPERM;
    if (rc != 0)
        close(*fd);
    return rc;
}

int shl__seg_unlink(const char *name)
{
    char path[sizeof SHM_DIR + SHL__SEG_NAME_MAX + 1];
    struct stat st;
    int fd;
    int rc = open_file(name, path, sizeof path, &fd, &st);
    if (rc != 0)
        return rc;
    if (st.st_uid != geteuid() && geteuid() != 0)
        rc = SHM_EPERM;
    else
        unlink_if_same(path, fd);
    close(fd);
    return rc;
}

int shl__seg_map_raw(const char *name, const void **base, size_t *size)
{
    char path[sizeof SHM_DIR + SHL__SEG_NAME_MAX + 1];
    struct stat st;
    int fd;
    *base = NULL;
    *size = 0;
    int rc = open_file(name, path, sizeof path, &fd, &st);
    if (rc != 0)
        return rc;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = sys_err(errno);
        else {
            *base = p;
            *size = (size_t)st.st_size;
        }
    }
    close(fd);
    return rc;
}

void shl__seg_unmap_raw(const void *base, size_t size)
{
    if (base)
        munmap((void *)base, size);
}
