/*
 * tests/test_segment.c - bad segments are refused, never trusted.
 *
 * Every case puts something that is not a good table under a table's name in
 * /dev/shm (garbage, a damaged header, a wrong mode or owner, a symlink, a
 * directory, a table of another time namespace) and checks that shl_open()
 * refuses it with its documented code, leaves *out NULL, and writes nothing:
 * the file's bytes are compared before and after.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../shm/layout.h"
#include "common.h"

#define SHM "/dev/shm/"

static char *shm_path(char *buf, size_t cap, const char *name, const char *suffix)
{
    snprintf(buf, cap, SHM "%s%s", name, suffix);
    return buf;
}

struct image {
    unsigned char *bytes;
    size_t len;
    mode_t mode;
    uid_t uid;
};

/* The whole file at `path` (not following a symlink at the last step is the
 * caller's business: this follows, to read the target). */
static void image_take(const char *path, struct image *im)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    im->len = (size_t)st.st_size;
    im->mode = st.st_mode;
    im->uid = st.st_uid;
    im->bytes = malloc(im->len ? im->len : 1);
    cr_assert(im->bytes);
    size_t got = 0;
    while (got < im->len) {
        ssize_t n = pread(fd, im->bytes + got, im->len - got, (off_t)got);
        cr_assert(n > 0, "read %s", path);
        got += (size_t)n;
    }
    close(fd);
}

/* Fails the test unless the file at `path` is byte for byte `before`. */
static void image_same(const char *path, struct image *before)
{
    struct image now;
    image_take(path, &now);
    cr_assert_eq(now.len, before->len, "%s changed size", path);
    cr_assert_eq(now.mode, before->mode, "%s changed mode", path);
    cr_assert_eq(now.uid, before->uid, "%s changed owner", path);
    cr_assert(memcmp(now.bytes, before->bytes, now.len) == 0, "%s was written to", path);
    free(now.bytes);
    free(before->bytes);
}

/* shl_open(name, o) must fail with `want`, leave *out NULL and leave the file
 * at `path` untouched. */
static void expect_refused(const char *name, const char *path, const shl_options *o, int want)
{
    struct image before;
    image_take(path, &before);
    shl_table *t = (shl_table *)&before; /* not NULL: shl_open must clear it */
    int rc = shl_open(name, o, &t);
    cr_assert_eq(rc, want, "open %s: want %s, got %s", name, shl_errname(want), shl_errname(rc));
    cr_assert_null(t);
    image_same(path, &before);
}

/* The options make_table() creates with (open-or-create). */
static void table_opts(shl_options *o)
{
    shl_options_init(o);
    o->capacity = 8;
    o->value_size = 32;
    o->clock = SHL_CLOCK_MANUAL;
}

/* A valid, closed table under `name`; *size receives its byte size. */
static void make_table(const char *name, size_t *size)
{
    shl_table *t = t_create(name, 8, 32, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "a", "me", 10, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "a", "me", tok, "hello", 5), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    *size = (size_t)ti.size;
    shl_close(t);
}

static void poke(const char *path, size_t off, const void *bytes, size_t len)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, bytes, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static void poke_u64(const char *path, size_t off, uint64_t v)
{
    poke(path, off, &v, sizeof v);
}
static void poke_u32(const char *path, size_t off, uint32_t v)
{
    poke(path, off, &v, sizeof v);
}

/* A table with one header field replaced is refused with `want`, both when
 * opening and when open-or-creating. */
static void damaged_field(const char *tag, size_t off, size_t width, uint64_t v, int want)
{
    char name[96], path[160];
    size_t size;
    t_name(name, sizeof name, tag);
    shm_path(path, sizeof path, name, "");
    make_table(name, &size);
    if (width == 8)
        poke_u64(path, off, v);
    else
        poke_u32(path, off, (uint32_t)v);
    shl_options o;
    table_opts(&o);
    expect_refused(name, path, NULL, want);
    expect_refused(name, path, &o, want);
    /* Without the table's magic word (in either byte order) the file is not
     * a table: shl_unlink() keeps it. Any other damage is a table's. */
    if (off == offsetof(struct shl__hdr, magic) && v != __builtin_bswap64(SHL__MAGIC)) {
        cr_assert_eq(shl_unlink(name), SHL_ECORRUPT);
        cr_assert_eq(unlink(path), 0, "shl_unlink() removed a file that is not a table");
        return;
    }
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

static void write_file(const char *path, const void *bytes, size_t len, mode_t mode)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
    cr_assert_eq(fchmod(fd, mode), 0);
    if (len)
        cr_assert_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

Test(segment, random_bytes)
{
    static const size_t sizes[] = {0, 7, sizeof(struct shl__hdr) - 1, 4096, 65536};
    srand((unsigned)getpid());
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[96], path[160];
        t_name(name, sizeof name, "random");
        shm_path(path, sizeof path, name, "");
        unsigned char *junk = malloc(sizes[i] + 1);
        for (size_t j = 0; j < sizes[i]; j++)
            junk[j] = (unsigned char)rand();
        write_file(path, junk, sizes[i], 0600);
        free(junk);
        shl_options o;
        shl_options_init(&o);
        expect_refused(name, path, NULL, SHL_ECORRUPT);
        expect_refused(name, path, &o, SHL_ECORRUPT);
        o.flags = 0;
        expect_refused(name, path, &o, SHL_ECORRUPT);
        cr_assert_eq(unlink(path), 0);
    }
}

Test(segment, wrong_magic)
{
    damaged_field("magic", offsetof(struct shl__hdr, magic), 8, SHL__MAGIC ^ 1, SHL_ECORRUPT);
    /* The other byte order reads the magic byte swapped. */
    damaged_field("bswap", offsetof(struct shl__hdr, magic), 8, __builtin_bswap64(SHL__MAGIC),
                  SHL_ECORRUPT);
}

Test(segment, wrong_format_word)
{
    size_t off = offsetof(struct shl__hdr, format);
    damaged_field("fmt-ver", off, 8, shl__format_word() + 1, SHL_EVERSION);
    /* Another mutex size: a build against another libc. */
    damaged_field("fmt-mtx", off, 8, shl__format_word() ^ (UINT64_C(8) << 8), SHL_EVERSION);
}

Test(segment, inconsistent_header)
{
    damaged_field("segsize", offsetof(struct shl__hdr, seg_size), 8, 4096, SHL_ECORRUPT);
    damaged_field("ready", offsetof(struct shl__hdr, ready), 4, 0, SHL_ECORRUPT);
    damaged_field("cap", offsetof(struct shl__hdr, capacity), 4, 9, SHL_ECORRUPT);
    damaged_field("clock", offsetof(struct shl__hdr, clock), 4, 7, SHL_ECORRUPT);
    damaged_field("nslots", offsetof(struct shl__hdr, nslots), 4, 9, SHL_ECORRUPT);
    damaged_field("uid", offsetof(struct shl__hdr, uid), 4, getuid() + 1, SHL_ECORRUPT);
}

Test(segment, truncated)
{
    char name[96], path[160];
    size_t size;
    t_name(name, sizeof name, "trunc");
    shm_path(path, sizeof path, name, "");
    make_table(name, &size);
    size_t to[] = {size - 64, size / 2, sizeof(struct shl__hdr), 100, 0};
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++) {
        cr_assert_eq(truncate(path, (off_t)to[i]), 0);
        expect_refused(name, path, NULL, SHL_ECORRUPT);
    }
    /* Cut to nothing, nothing says it is a table: shl_unlink() keeps it
     * (a table cut short with its magic word is removed: test_removed.c). */
    cr_assert_eq(shl_unlink(name), SHL_ECORRUPT);
    cr_assert_eq(unlink(path), 0);
}

/* Mode rules: wider than accepted is refused, whatever else is right. */
Test(segment, mode_wider_than_asked)
{
    char name[96], path[160];
    t_name(name, sizeof name, "mode");
    shm_path(path, sizeof path, name, "");
    shl_options o;
    shl_options_init(&o);
    o.mode = 0660;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    shl_close(t);

    /* 0660 is accepted by a plain open, refused by one that asks for 0600. */
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_close(t);
    shl_options narrow;
    shl_options_init(&narrow);
    narrow.flags = 0;
    narrow.mode = 0600;
    expect_refused(name, path, &narrow, SHL_EPERM);
    narrow.flags = SHL_CREATE;
    expect_refused(name, path, &narrow, SHL_EPERM);

    /* Anything wider than 0660 is refused always. */
    static const mode_t wide[] = {0666, 0662, 0664, 0670, 0760, 04660, 01660};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        cr_assert_eq(chmod(path, wide[i]), 0);
        expect_refused(name, path, NULL, SHL_EPERM);
        o.flags = SHL_CREATE;
        expect_refused(name, path, &o, SHL_EPERM);
        o.flags = 0;
        expect_refused(name, path, &o, SHL_EPERM);
    }
    cr_assert_eq(chmod(path, 0660), 0);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(segment, other_owner)
{
    if (geteuid() != 0)
        cr_skip("needs root: only root can give a file to another uid");
    char name[96], path[160];
    size_t size;
    t_name(name, sizeof name, "owner");
    shm_path(path, sizeof path, name, "");
    make_table(name, &size);
    shl_options o;
    table_opts(&o);
    /* Another user's table is refused even by root, who could read it. */
    cr_assert_eq(chown(path, 65534, (gid_t)-1), 0);
    expect_refused(name, path, NULL, SHL_EPERM);
    expect_refused(name, path, &o, SHL_EPERM);
    /* ... also when group sharing would otherwise let the group in: the
     * header names the creator, and the file's owner is someone else. */
    cr_assert_eq(chmod(path, 0660), 0);
    expect_refused(name, path, NULL, SHL_ECORRUPT);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(segment, symlink)
{
    char name[96], path[160], target[96], tpath[160];
    size_t size;
    t_name(target, sizeof target, "target");
    shm_path(tpath, sizeof tpath, target, "");
    make_table(target, &size);
    t_name(name, sizeof name, "link");
    shm_path(path, sizeof path, name, "");
    cr_assert_eq(symlink(tpath, path), 0);
    shl_options o;
    table_opts(&o);
    /* The bytes compared are the target's: the link is not followed. */
    expect_refused(name, path, NULL, SHL_EPERM);
    expect_refused(name, path, &o, SHL_EPERM);
    /* A dangling link is not replaced by a new table either. */
    cr_assert_eq(shl_unlink(target), SHL_OK);
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_EPERM);
    cr_assert_null(t);
    struct stat st;
    cr_assert_eq(stat(tpath, &st), -1, "a table was created through the link");
    cr_assert_eq(shl_unlink(name), SHL_EPERM);
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert_eq(unlink(path), 0);
}

Test(segment, directory_and_fifo)
{
    char name[96], path[160];
    t_name(name, sizeof name, "dir");
    shm_path(path, sizeof path, name, "");
    cr_assert_eq(mkdir(path, 0700), 0);
    shl_options o;
    shl_options_init(&o);
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_EPERM);
    cr_assert_null(t);
    cr_assert_eq(shl_open(name, &o, &t), SHL_EPERM);
    cr_assert_null(t);
    /* shl_unlink does not claim to have removed what it cannot. */
    cr_assert_eq(shl_unlink(name), SHL_EPERM);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(rmdir(path), 0, "the directory was written to");

    t_name(name, sizeof name, "fifo");
    shm_path(path, sizeof path, name, "");
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_EPERM);
    cr_assert_null(t);
    cr_assert_eq(shl_open(name, &o, &t), SHL_EPERM);
    cr_assert_eq(unlink(path), 0);
}

/* A slot damaged after the open (anyone who can map the table can write it):
 * the holder's owner length is out of range. Reports stay within bounds. */
Test(segment, damaged_slot_no_crash)
{
    char name[96], path[160];
    size_t size;
    t_name(name, sizeof name, "slot");
    shm_path(path, sizeof path, name, "");
    make_table(name, &size);
    struct shl__hdr h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0);
    cr_assert_eq(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    poke_u32(path,
             h.slots_off + offsetof(struct shl__slot, cur) +
                 offsetof(struct shl__holder, owner_len),
             UINT32_MAX);
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    shl_lease_info li;
    uint64_t tok;
    cr_assert_eq(shl_acquire_ex(t, "a", "other", 10, &tok, &li), SHL_EBUSY);
    cr_assert_leq(strlen(li.owner), SHL_OWNER_MAX);
    cr_assert_eq(shl_stat(t, "a", &li), SHL_OK);
    cr_assert_leq(strlen(li.owner), SHL_OWNER_MAX);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* The header check alone: a recorded time namespace that is not ours. */
Test(segment, timens_recorded)
{
    damaged_field("timens", offsetof(struct shl__hdr, timens), 8, UINT64_C(0xdead0001),
                  SHL_ETIMENS);
}

struct timens_ctx {
    const char *theirs; /* made by the parent, opened from the new namespace */
    const char *ours;   /* made in the new namespace */
};

static int in_new_timens(void *arg)
{
    struct timens_ctx *c = arg;
    shl_table *t;
    int rc = shl_open(c->theirs, NULL, &t);
    if (rc != SHL_ETIMENS)
        return 10 + (-rc);
    shl_options o;
    table_opts(&o);
    o.flags = SHL_CREATE | SHL_EXCL;
    rc = shl_open(c->ours, &o, &t);
    if (rc != SHL_OK)
        return 40 + (-rc);
    uint64_t tok;
    rc = shl_acquire(t, "a", "inside", SEC, &tok);
    shl_close(t);
    return rc == SHL_OK ? 0 : 70 + (-rc);
}

static int unshare_time(void *arg)
{
    if (unshare(CLONE_NEWTIME) != 0)
        return 99;
    /* Only this process's children enter the new namespace. */
    return t_wait(t_fork(in_new_timens, arg));
}

/* A real second time namespace: both directions are refused. */
Test(segment, timens_real)
{
    char theirs[96], ours[96], tpath[160], opath[160];
    size_t size;
    t_name(theirs, sizeof theirs, "tns-parent");
    t_name(ours, sizeof ours, "tns-child");
    shm_path(tpath, sizeof tpath, theirs, "");
    shm_path(opath, sizeof opath, ours, "");
    make_table(theirs, &size);
    struct image before;
    image_take(tpath, &before);
    struct timens_ctx c = {theirs, ours};
    int st = t_wait(t_fork(unshare_time, &c));
    if (st == 99) {
        shl_unlink(theirs);
        cr_skip("unshare(CLONE_NEWTIME) is not permitted here");
    }
    cr_assert_eq(st, 0, "child in the new time namespace: status %d", st);
    image_same(tpath, &before);
    expect_refused(ours, opath, NULL, SHL_ETIMENS);
    cr_assert_eq(shl_unlink(theirs), SHL_OK);
    cr_assert_eq(shl_unlink(ours), SHL_OK);
}

/* A segment larger than /dev/shm is an error at creation, not a SIGBUS at the
 * first touch of an unbacked page, and leaves nothing behind. */
Test(segment, no_space)
{
    struct statvfs vfs;
    cr_assert_eq(statvfs(SHM, &vfs), 0);
    uint64_t total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    /* Largest table: 2^24 slots of two 1 MiB buffers, some 32 TiB. */
    uint64_t want = (uint64_t)SHL_CAPACITY_MAX * 2 * SHL_VALUE_MAX;
    if (total == 0 || want < 2 * total)
        cr_skip("/dev/shm is unlimited or larger than the largest table");
    char name[96];
    t_name(name, sizeof name, "nospc");
    shl_options o;
    shl_options_init(&o);
    o.capacity = SHL_CAPACITY_MAX;
    o.value_size = SHL_VALUE_MAX;
    shl_table *t;
    shl_clear_error();
    cr_assert_eq(shl_open(name, &o, &t), SHL_ENOSPC);
    cr_assert_null(t);
    /* The detail says what it needed and what the file system has free. */
    const char *d = shl_last_error();
    cr_assert(strstr(d, "needs 17.") && strstr(d, "TiB") && strstr(d, "/dev/shm has ") &&
                  strstr(d, " free"),
              "detail: \"%s\"", d);
    cr_assert_eq(t_shm_entries(name), 0, "a file was left behind");
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
}
