/*
 * shm/segment.c - safe creation, opening and removal of a segment.
 *
 * Creation never exposes a half-made segment under the table's name. The
 * creator makes an unnamed file in the segment's directory (O_TMPFILE: in
 * /dev/shm, or the directory of a path name, see place.c), sets its mode,
 * sizes it (and takes the pages of all but the slots: shl__seg_take_slot()),
 * initialises it, stores the ready word last,
 * and only then gives it the table's name with linkat() of that very
 * descriptor. A name that exists therefore always refers to a complete
 * segment, a creator can only ever publish the file it initialised itself,
 * and a creator that dies or stalls at any step leaves nothing that another
 * process must wait for or clean up: its file has no name and vanishes with
 * its last descriptor. When the link finds the name taken, someone else
 * published first: the creator drops its file and opens theirs.
 *
 * Every path is opened with O_NONBLOCK and O_NOFOLLOW: whatever was planted
 * under a name (a FIFO, a socket, a symlink, a directory) is refused, never
 * waited on.
 *
 * Opening validates before it trusts: fstat (regular file, owner, mode), then
 * the header (shl__seg_check_header). Nothing is written to a segment that
 * failed validation.
 */
#include "segment.h"
#include "place.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "clock.h"
#include "crashpoint.h"
#include "mutex.h"

/* Opening a name that keeps being created and removed under us gives up
 * after this long instead of looping forever. */
#define OPEN_WAIT_NS (UINT64_C(10) * 1000000000)
/* How every existing path is opened (with O_RDONLY or O_RDWR): never wait on
 * a FIFO or a device, never follow a planted symlink. */
#define OPEN_FLAGS (O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)

static uint32_t next_pow2(uint64_t v)
{
    uint64_t p = 2;
    while (p < v)
        p <<= 1;
    return (uint32_t)p;
}

int shl__geom(const struct shl__seg_params *p, struct shl__geom *g)
{
    if (p->capacity < 1 || p->capacity > SHL__CAPACITY_MAX || p->value_size > SHL__VALUE_MAX ||
        p->history > SHL__HIST_LEN || p->sh_groups > p->capacity * (uint64_t)SHL__SH_REFS ||
        p->wq_groups > p->capacity * (uint64_t)SHL__WQ_REFS || p->vb_count > p->capacity)
        return SHL__SHM_EINVAL;
    g->index_size = next_pow2((uint64_t)p->capacity * 2);
    g->sh_groups = p->sh_groups;
    g->wq_groups = p->wq_groups;
    g->history = p->history;
    g->vb_count = p->vb_count;
    g->vbuf_size = shl__vbuf_size(p->value_size);
    g->vbuf_home = shl__vbuf_home(p->history);
    g->index_off = shl__align_up(sizeof(struct shl__hdr), SHL__CACHELINE);
    /* Each stride is a slot, its history, then the slot's value buffer;
     * the pools follow the slots (shm/layout.h). */
    g->slots_off =
        shl__align_up(g->index_off + (uint64_t)g->index_size * sizeof(uint32_t), SHL__CACHELINE);
    g->slot_stride = shl__align_up(g->vbuf_home + g->vbuf_size, SHL__CACHELINE);
    g->sh_pool_off = g->slots_off + (uint64_t)p->capacity * g->slot_stride;
    g->wq_pool_off = g->sh_pool_off + (uint64_t)p->sh_groups * sizeof(struct shl__sh_group);
    g->vb_pool_off = g->wq_pool_off + (uint64_t)p->wq_groups * sizeof(struct shl__wq_group);
    g->seg_size = g->vb_pool_off + (uint64_t)p->vb_count * g->vbuf_size;
    g->vlim = g->seg_size - g->vbuf_size - g->vbuf_home;
    return 0;
}

int shl__geom_of(const struct shl__hdr *h, struct shl__geom *g)
{
    struct shl__seg_params p = {.capacity = h->capacity,
                                .value_size = h->value_size,
                                .sh_groups = h->sh_groups,
                                .wq_groups = h->wq_groups,
                                .vb_count = h->vb_count,
                                .history = h->history};
    return shl__geom(&p, g);
}

__attribute__((format(printf, 3, 4))) static void tell(shl__hdr_say_fn say, void *arg,
                                                       const char *fmt, ...)
{
    if (!say)
        return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    say(arg, buf);
}

/* Each test is made once, here, for the opener and for the checker: the
 * opener wants the verdict, the checker the words. */
int shl__seg_check_header(const void *base, size_t size, uint32_t uid, shl__hdr_say_fn say,
                          void *arg, int *addressable)
{
    const struct shl__hdr *h = base;
    struct shl__geom g;
    if (addressable)
        *addressable = 0;
    if (size < sizeof *h) {
        tell(say, arg, "header: segment is %zu bytes, smaller than a header (%zu)", size,
             sizeof *h);
        return SHL__SHM_ECORRUPT;
    }
    if (h->magic != SHL__MAGIC) {
        tell(say, arg,
             "header: bad magic 0x%016llx: not a shmlease segment (or another byte order)",
             (unsigned long long)h->magic);
        return SHL__SHM_ECORRUPT;
    }
    if (h->format != shl__format_word()) {
        tell(say, arg,
             "header: format word 0x%016llx, this build's is 0x%016llx: made by an "
             "incompatible build",
             (unsigned long long)h->format, (unsigned long long)shl__format_word());
        return SHL__SHM_EVERSION;
    }
    uint32_t ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    if (ready != SHL__READY) {
        tell(say, arg, "header: ready word 0x%08x: the segment was never published", ready);
        return SHL__SHM_ECORRUPT;
    }
    if (shl__geom_of(h, &g) != 0) {
        tell(say, arg,
             "header: capacity %u, value size %u, pools (%u reader, %u waiter groups, %u "
             "value buffers) or history %u out of range",
             h->capacity, h->value_size, h->sh_groups, h->wq_groups, h->vb_count, h->history);
        return SHL__SHM_ECORRUPT;
    }
    if (h->seg_size != size || g.seg_size != size || h->index_off != g.index_off ||
        h->slots_off != g.slots_off || h->slot_stride != g.slot_stride ||
        h->index_size != g.index_size || h->sh_pool_off != g.sh_pool_off ||
        h->wq_pool_off != g.wq_pool_off || h->vb_pool_off != g.vb_pool_off) {
        tell(say, arg,
             "header: geometry (size %llu, index at %llu x %u, slots at %llu x %llu, pools at "
             "%llu, %llu and %llu) does not match capacity %u, value size %u, pools (%u, %u "
             "groups, %u buffers), history %u and the segment's %zu bytes",
             (unsigned long long)h->seg_size, (unsigned long long)h->index_off, h->index_size,
             (unsigned long long)h->slots_off, (unsigned long long)h->slot_stride,
             (unsigned long long)h->sh_pool_off, (unsigned long long)h->wq_pool_off,
             (unsigned long long)h->vb_pool_off, h->capacity, h->value_size, h->sh_groups,
             h->wq_groups, h->vb_count, h->history, size);
        return SHL__SHM_ECORRUPT;
    }
    if (addressable)
        *addressable = 1;
    int rc = 0;
    if (uid != SHL__UID_ANY && h->uid != uid) {
        tell(say, arg, "header: creator uid %u is not the file's owner %u", h->uid, uid);
        rc = SHL__SHM_ECORRUPT;
    }
    if (h->clock != SHL__CLOCK_MONOTONIC && h->clock != SHL__CLOCK_MANUAL) {
        tell(say, arg, "header: unknown clock kind %u", h->clock);
        rc = SHL__SHM_ECORRUPT;
    }
    if (h->mode != 0600 && h->mode != 0660) {
        tell(say, arg, "header: mode %04o is neither 0600 nor 0660", h->mode);
        rc = SHL__SHM_ECORRUPT;
    }
    if (h->policy & ~SHL__POL_RECLAIM_ORPHANS) {
        tell(say, arg, "header: unknown policy bits 0x%x", h->policy);
        rc = SHL__SHM_ECORRUPT;
    }
    uint32_t n = atomic_load_explicit(&h->nslots, memory_order_relaxed);
    if (n > h->capacity) {
        tell(say, arg, "header: %u leases used, more than the capacity %u", n, h->capacity);
        rc = SHL__SHM_ECORRUPT;
    }
    return rc;
}

#define PROC_MAGIC 0x9fa0 /* PROC_SUPER_MAGIC, <linux/magic.h> */

/* The time namespace whose ns/ directory of procfs is `dir`, or 0. */
static uint64_t timens_in(const char *dir)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "%s/time", dir);
    if (stat(path, &st) == 0)
        return (uint64_t)st.st_ino;
    /* No entry in a real procfs ns/ directory: the kernel has no time
     * namespaces, so every process shares one CLOCK_MONOTONIC. Anything
     * else (no /proc, a directory that is not procfs'): unknown. */
    struct statfs fs;
    if (errno == ENOENT && statfs(dir, &fs) == 0 && fs.f_type == PROC_MAGIC)
        return SHL__TIMENS_NONE;
    return 0;
}

/* This thread's first: /proc/self names the thread group leader, whose ns/
 * entries are gone once it has exited while other threads go on (a process
 * whose main thread called pthread_exit()). /proc/thread-self (Linux 3.17)
 * names the caller. */
uint64_t shl__timens_id(void)
{
    uint64_t id = timens_in("/proc/thread-self/ns");
    return id ? id : timens_in("/proc/self/ns");
}

/* SHMLEASE_NO_TIMENS=1: the user says this host has no time namespaces, so
 * that a process that cannot read its own (no /proc) may share tables.
 * Ignored in a set-id program. */
static int timens_opted_out(void)
{
    const char *v = secure_getenv("SHMLEASE_NO_TIMENS");
    return v && strcmp(v, "1") == 0;
}

/* Whether a process in time namespace `mine` may share a table whose
 * creator was in `theirs` (shl__timens_id() values): only when both are
 * known and equal, that is, proven to share CLOCK_MONOTONIC. An unknown one
 * (0) is refused unless the user opted out, and then only two known,
 * different ones are. */
static int same_clock(uint64_t theirs, uint64_t mine)
{
    if (theirs && mine)
        return theirs == mine;
    return timens_opted_out();
}

static int sys_err(int e)
{
    switch (e) {
    case ENOENT:
        return SHL__SHM_ENOENT;
    case EEXIST:
        return SHL__SHM_EEXIST;
    case EACCES:
    case EPERM:
    case ELOOP:  /* O_NOFOLLOW met a symlink: not ours to trust */
    case EISDIR: /* not a regular file */
    case ENXIO:  /* a socket, or a device without its driver */
        return SHL__SHM_EPERM;
    case ENOSPC:
    case EFBIG:
        return SHL__SHM_ENOSPC;
    case ENOMEM:
        return SHL__SHM_ENOMEM;
    default:
        return SHL__SHM_ESYS;
    }
}

static int make_path(char *buf, size_t cap, const char *name)
{
    return shl__seg_path(name, buf, cap);
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
        return SHL__SHM_EPERM;
    if (perm & ~max_mode & 07777)
        return SHL__SHM_EPERM;
    if (st->st_uid == geteuid())
        return 0;
    if ((max_mode & 0060) == 0060 && (perm & 0060) == 0060 && in_groups(st->st_gid))
        return 0;
    return SHL__SHM_EPERM;
}

static int attach(int fd, uint32_t max_mode, struct shl__seg *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return SHL__SHM_ESYS;
    int rc = check_file(&st, max_mode);
    if (rc != 0)
        return rc;
    if ((uint64_t)st.st_size < sizeof(struct shl__hdr))
        return SHL__SHM_ECORRUPT;
    /* Read-only first: a bad segment is never mapped writable. */
    void *ro = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (ro == MAP_FAILED)
        return sys_err(errno);
    rc = shl__seg_check_header(ro, (size_t)st.st_size, (uint32_t)st.st_uid, NULL, NULL, NULL);
    uint64_t tns = rc == 0 ? ((const struct shl__hdr *)ro)->timens : 0;
    munmap(ro, (size_t)st.st_size);
    if (rc != 0)
        return rc;
    if (!same_clock(tns, shl__timens_id()))
        return SHL__SHM_ETIMENS;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return sys_err(errno);
    /* The header may have been replaced between the two maps only by someone
     * writing garbage into a segment they own; check again before use. */
    rc = shl__seg_check_header(p, (size_t)st.st_size, (uint32_t)st.st_uid, NULL, NULL, NULL);
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

static void init_header(struct shl__hdr *h, const struct shl__seg_params *p,
                        const struct shl__geom *g)
{
    h->magic = SHL__MAGIC;
    h->format = shl__format_word();
    h->seg_size = g->seg_size;
    h->index_off = g->index_off;
    h->slots_off = g->slots_off;
    h->slot_stride = g->slot_stride;
    h->sh_pool_off = g->sh_pool_off;
    h->wq_pool_off = g->wq_pool_off;
    h->vb_pool_off = g->vb_pool_off;
    h->vb_count = p->vb_count;
    h->sh_groups = p->sh_groups;
    h->wq_groups = p->wq_groups;
    h->history = p->history;
    h->index_size = g->index_size;
    h->timens = shl__timens_id();
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

#define SHL__SHM_EAGAIN 1 /* internal: someone else published first; open theirs */

/* Gives the unnamed file `fd` the name `path`. Through /proc/self/fd first
 * (any user may); without /proc, AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH).
 * Either way it is this descriptor's file that gets the name, never whatever
 * another path names meanwhile. */
static int publish(int fd, int dir, const char *base)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, self, dir, base, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno == ENOENT && linkat(fd, "", dir, base, AT_EMPTY_PATH) == 0)
        return 0;
    return errno == EEXIST ? SHL__SHM_EAGAIN : sys_err(errno);
}

/* fallocate(2) of [off, off + len): 0, or -1 with errno set. */
static int take(int fd, uint64_t off, uint64_t len)
{
    int rc;
    do
        rc = fallocate(fd, 0, (off_t)off, (off_t)len);
    while (rc != 0 && errno == EINTR);
    return rc;
}

/* Takes the pages of [off, off + len) (fallocate(2)), so that no later
 * store there can meet a full file system (a SIGBUS). On a file system
 * without fallocate(2), creation took the whole file and this does
 * nothing. 0, SHL__SHM_ENOSPC (or SHL__SHM_ENOMEM, SHL__SHM_ESYS): then
 * nothing of the range need have been taken. */
static int commit(int fd, uint64_t off, uint64_t len)
{
    if (len == 0 || take(fd, off, len) == 0)
        return 0;
    /* A file system without fallocate(2): creation took the whole file. */
    return errno == EOPNOTSUPP ? 0 : sys_err(errno);
}

int shl__seg_take_slot(int fd, const struct shl__geom *g, uint32_t n)
{
    uint64_t at = g->slots_off + (uint64_t)n * g->slot_stride, end = at + g->slot_stride;
    uint64_t to = shl__align_up(end, SHL__SLOT_TAKE);
    if (n > 0 && end <= shl__align_up(at, SHL__SLOT_TAKE))
        return 0; /* taken with slot n - 1 */
    return commit(fd, at, (to < g->sh_pool_off ? to : g->sh_pool_off) - at);
}

/* Takes the pages of a new segment (g) but its slots': the header, the
 * index and the pools. A file system without fallocate(2) takes the whole
 * file instead, by posix_fallocate's writes, which are safe only now,
 * while nobody else can reach the file (it writes a zero where it reads
 * one, and a writer in between would lose its byte). */
static int take_at_creation(int fd, const struct shl__geom *g)
{
    if (take(fd, 0, g->slots_off) != 0) {
        if (errno != EOPNOTSUPP)
            return sys_err(errno);
        int rc = posix_fallocate(fd, 0, (off_t)g->seg_size);
        return rc == 0 ? 0 : sys_err(rc);
    }
    return commit(fd, g->sh_pool_off, g->seg_size - g->sh_pool_off);
}

/* Whether the file system of `fd` has `size` bytes free: a table it could
 * never hold whole is refused at creation, as when creation took all of
 * it. A file system with no limit (tmpfs mounted without one reports no
 * blocks) or that cannot tell passes. */
static int room_for(int fd, uint64_t size)
{
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) != 0 || vfs.f_blocks == 0)
        return 0;
    return (uint64_t)vfs.f_bavail * vfs.f_frsize < size ? SHL__SHM_ENOSPC : 0;
}

/* Creates the segment as `base` in directory `dir`. */
static int create(int dir, const char *base, const struct shl__seg_params *p, struct shl__seg *out)
{
    struct shl__geom g;
    int rc = shl__geom(p, &g);
    if (rc != 0)
        return rc;
    /* A creator that cannot tell its clock would make a table that nobody
     * could be proven to share (its header says "unknown"). */
    if (!shl__timens_id() && !timens_opted_out())
        return SHL__SHM_ETIMENS;
    if (p->mode != 0600 && p->mode != 0660)
        return SHL__SHM_EINVAL;
    int fd = openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) /* EISDIR, EOPNOTSUPP: a kernel or file system without O_TMPFILE */
        return errno == EISDIR || errno == EOPNOTSUPP ? SHL__SHM_ESYS : sys_err(errno);
    SHL__CRASH(SHL__CP_SHM_CREATED);
    void *m = MAP_FAILED;
    if (fchmod(fd, p->mode) != 0) { /* the umask never narrows a 0660 table */
        rc = sys_err(errno);
        goto fail_file;
    }
    /* Room for the whole table is asked for now, but only the header, the
     * index and the pools are taken: a slot's pages are taken when its name
     * is added (shl__seg_take_slot()), so that a table costs memory for the
     * leases it has, not for its capacity. */
    if ((rc = room_for(fd, g.seg_size)) != 0)
        goto fail_file;
    if (ftruncate(fd, (off_t)g.seg_size) != 0) {
        rc = sys_err(errno);
        goto fail_file;
    }
    if ((rc = take_at_creation(fd, &g)) != 0)
        goto fail_file;
    m = mmap(NULL, g.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = sys_err(errno);
        goto fail_file;
    }
    struct shl__hdr *h = m;
    init_header(h, p, &g);
    if (shl__mutex_init(&h->table_lock) != 0) {
        rc = SHL__SHM_ESYS;
        goto fail_map;
    }
    atomic_store_explicit(&h->ready, SHL__READY, memory_order_release);
    SHL__CRASH(SHL__CP_SHM_CREATE);
    if ((rc = publish(fd, dir, base)) != 0)
        goto fail_map;
    out->hdr = h;
    out->size = g.seg_size;
    out->fd = fd;
    out->created = 1;
    return 0;

fail_map:
    munmap(m, g.seg_size);
fail_file:
    close(fd); /* it has no name: this frees it */
    return rc;
}

int shl__seg_open(const char *name, const struct shl__seg_params *p, int excl, uint32_t max_mode,
                  struct shl__seg *out)
{
    char path[SHL__SEG_PATH_MAX];
    out->hdr = NULL;
    out->size = 0;
    out->fd = -1;
    out->created = 0;
    if (make_path(path, sizeof path, name))
        return SHL__SHM_EINVAL;
    int dir;
    const char *base;
    int rc = shl__seg_dir_open(path, &dir, &base);
    if (rc != 0)
        return rc;
    uint64_t deadline = shl__mono_ns() + OPEN_WAIT_NS;
    for (;;) {
        int fd = openat(dir, base, O_RDWR | OPEN_FLAGS);
        if (fd >= 0) {
            rc = excl ? SHL__SHM_EEXIST : attach(fd, max_mode, out);
            if (rc != 0)
                close(fd);
            break;
        }
        if (errno != ENOENT) {
            rc = sys_err(errno);
            break;
        }
        if (!p) {
            rc = SHL__SHM_ENOENT;
            break;
        }
        rc = create(dir, base, p, out);
        if (rc != SHL__SHM_EAGAIN)
            break;
        /* Published by someone else since our open: theirs is complete, open
         * it (unless it was removed again meanwhile: then create again). */
        if (shl__mono_ns() > deadline) {
            rc = SHL__SHM_ETIMEDOUT;
            break;
        }
    }
    close(dir);
    return rc;
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
 * file is SHL__SHM_EPERM. */
static int open_file(const char *name, char *path, size_t cap, int *fd, struct stat *st, int rw)
{
    if (make_path(path, cap, name))
        return SHL__SHM_EINVAL;
    *fd = open(path, (rw ? O_RDWR : O_RDONLY) | OPEN_FLAGS);
    if (*fd < 0)
        return sys_err(errno);
    int rc = 0;
    if (fstat(*fd, st) != 0)
        rc = SHL__SHM_ESYS;
    else if (!S_ISREG(st->st_mode)) /* unlink() or mmap() would fail: say so */
        rc = SHL__SHM_EPERM;
    if (rc != 0)
        close(*fd);
    return rc;
}

int shl__seg_unlink(const char *name)
{
    char path[SHL__SEG_PATH_MAX];
    struct stat st;
    int fd;
    int rc = open_file(name, path, sizeof path, &fd, &st, 1);
    if (rc != 0)
        return rc;
    if (st.st_uid != geteuid() && geteuid() != 0)
        rc = SHL__SHM_EPERM;
    else if ((rc = shl__seg_mark_removed(fd, &st)) == 0)
        unlink_if_same(path, fd);
    close(fd);
    return rc;
}

int shl__seg_unlink_same(const char *name, int fd)
{
    char path[SHL__SEG_PATH_MAX];
    struct stat a, b;
    if (make_path(path, sizeof path, name))
        return SHL__SHM_EINVAL;
    if (fstat(fd, &a) != 0)
        return sys_err(errno);
    if (lstat(path, &b) != 0)
        return errno == ENOENT ? 0 : sys_err(errno);
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return 0; /* the name went already, and names another file now */
    return unlink(path) == 0 || errno == ENOENT ? 0 : sys_err(errno);
}

int shl__seg_gone(const char *name, int fd)
{
    char path[SHL__SEG_PATH_MAX];
    struct stat a, b;
    if (fstat(fd, &a) != 0 || make_path(path, sizeof path, name))
        return 0;
    if (a.st_nlink == 0)
        return 1;
    if (lstat(path, &b) != 0)
        return errno == ENOENT;
    return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

/* pread() of up to len bytes at off, restarted on EINTR and short reads;
 * fewer bytes only at end of file (or when the file shrank meanwhile). */
static int read_at(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    *got = 0;
    while (*got < len) {
        ssize_t n = pread(fd, (char *)buf + *got, len - *got, (off_t)(off + *got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sys_err(errno);
        if (n == 0)
            break;
        *got += (size_t)n;
    }
    return 0;
}

int shl__seg_next_data(int fd, uint64_t off, uint64_t end, uint64_t *from, uint64_t *to)
{
    *from = off;
    *to = end;
    if (off >= end)
        return 0;
    off_t d = lseek(fd, (off_t)off, SEEK_DATA);
    if (d < 0)
        return errno == ENXIO ? 0 : 1; /* ENXIO: only holes up to the end of the file */
    if ((uint64_t)d >= end)
        return 0;
    off_t h = lseek(fd, d, SEEK_HOLE);
    *from = (uint64_t)d;
    if (h > d && (uint64_t)h < end)
        *to = (uint64_t)h;
    return 1;
}

uint64_t shl__seg_described_size(const struct shl__hdr *h)
{
    struct shl__geom g;
    if (h->magic != SHL__MAGIC || h->format != shl__format_word() || shl__geom_of(h, &g) != 0)
        return 0;
    return g.seg_size;
}

int shl__seg_read_raw(const char *name, void **copy, size_t *len, uint64_t *file_size)
{
    char path[SHL__SEG_PATH_MAX];
    struct stat st;
    int fd;
    *copy = NULL;
    *len = 0;
    *file_size = 0;
    int rc = open_file(name, path, sizeof path, &fd, &st, 0);
    if (rc != 0)
        return rc;
    uint64_t size = (uint64_t)st.st_size;
    uint64_t plan = size < sizeof(struct shl__hdr) ? size : sizeof(struct shl__hdr);
    size_t got = 0;
    char *buf = calloc(1, sizeof(struct shl__hdr));
    if (!buf) {
        rc = SHL__SHM_ENOMEM;
        goto out;
    }
    if ((rc = read_at(fd, buf, (size_t)plan, 0, &got)) != 0)
        goto out;
    if (got == sizeof(struct shl__hdr)) {
        /* What the header describes, at most the file; else the header
         * alone (a check stops there). */
        uint64_t described = shl__seg_described_size((const struct shl__hdr *)buf);
        plan = !described ? got : described < size ? described : size;
        int fits = (uint64_t)(size_t)plan == plan; /* not on a 32-bit build */
        char *all = fits && plan > got ? realloc(buf, (size_t)plan) : buf;
        if (!all || !fits) {
            rc = SHL__SHM_ENOMEM;
            goto out;
        }
        buf = all;
        size_t rest = 0;
        if ((rc = read_at(fd, buf + got, (size_t)plan - got, got, &rest)) != 0)
            goto out;
        got += rest;
    }
    /* A file that shrank while it was read is as long as what was read. */
    *file_size = got < plan ? got : size;
    *copy = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}
