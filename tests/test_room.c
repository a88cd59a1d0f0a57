/*
 * tests/test_room.c - a table takes memory for the leases it has: creation
 * takes the header, the index and the pools, and each new name its slot;
 * a file system with no room left refuses a new name (SHL_ENOSPC, the
 * lease and the space free named), never a SIGBUS, and the leases already
 * there go on working. A file system without fallocate(2) has the whole
 * table taken at creation.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../shm/layout.h"
#include "common.h"
#include "place_util.h"
#include "seccomp_kill.h"

static char dir[128];

static void mounted(void)
{
    place_tmpfs(dir, sizeof dir, "16m");
}

static void cleanup(void)
{
    place_cleanup(dir);
}

/* The header of the segment file at path. */
static struct shl__hdr header_of(const char *path)
{
    struct shl__hdr h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    return h;
}

/* Bytes the file at path has allocated. */
static uint64_t allocated(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
    return (uint64_t)st.st_blocks * 512;
}

Test(room, slots_are_taken_as_names_are_added)
{
    char name[96], path[160];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 20000;
    shl_table *t = t_create_opts(name, sizeof name, "room", &o);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    struct shl__hdr h = header_of(path);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), fresh = allocated(path);
    uint64_t fixed = h.slots_off + (h.seg_size - h.sh_pool_off);
    /* The header, the index and the pools (whole pages), not the slots. */
    cr_assert_geq(fresh, fixed, "a fresh table has %llu bytes, needs %llu",
                  (unsigned long long)fresh, (unsigned long long)fixed);
    cr_assert_leq(fresh, fixed + 2 * page, "a fresh table has %llu bytes, not %llu",
                  (unsigned long long)fresh, (unsigned long long)fixed);
    cr_assert_lt(fresh, h.seg_size / 4);
    /* 100 names: 100 slots' pages, and at most SHL__SLOT_TAKE more taken
     * ahead for the next names. */
    for (int i = 0; i < 100; i++) {
        char lease[32];
        uint64_t tok;
        snprintf(lease, sizeof lease, "lease-%d", i);
        cr_assert_eq(shl_acquire(t, lease, "me", 1000000000, &tok), SHL_OK);
    }
    uint64_t grew = allocated(path) - fresh;
    cr_assert_geq(grew + page, 100 * h.slot_stride, "100 names took %llu bytes (a slot %llu)",
                  (unsigned long long)grew, (unsigned long long)h.slot_stride);
    cr_assert_leq(grew, 100 * h.slot_stride + SHL__SLOT_TAKE + page,
                  "100 names took %llu bytes (a slot %llu)", (unsigned long long)grew,
                  (unsigned long long)h.slot_stride);
    /* Acquiring them again takes nothing more. */
    for (int i = 0; i < 100; i++) {
        char lease[32];
        uint64_t tok;
        snprintf(lease, sizeof lease, "lease-%d", i);
        cr_assert_eq(shl_acquire(t, lease, "other", 1000000000, &tok), SHL_EBUSY);
    }
    cr_assert_eq(allocated(path) - fresh, grew);
    cr_assert_eq(t_info(t).size, h.seg_size, "the size is still the whole table's");
    cr_assert_eq(shl_close(t), SHL_OK);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* Takes all the space left on the file system of `d` with the file
 * d/filler; returns its descriptor. */
static int fill(const char *d)
{
    char p[192];
    snprintf(p, sizeof p, "%s/filler", d);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0, "open %s: %s", p, strerror(errno));
    off_t at = 0;
    for (off_t step = 1 << 20; step >= 4096; step /= 2)
        while (posix_fallocate(fd, at, step) == 0)
            at += step;
    struct statvfs vfs;
    cr_assert_eq(fstatvfs(fd, &vfs), 0);
    cr_assert_eq(vfs.f_bavail, 0, "%llu blocks still free", (unsigned long long)vfs.f_bavail);
    return fd;
}

Test(room, a_full_file_system_refuses_a_new_name, .init = mounted, .fini = cleanup)
{
    char path[192], filler[192];
    snprintf(path, sizeof path, "%s/t", dir);
    snprintf(filler, sizeof filler, "%s/filler", dir);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.value_size = 131072; /* a slot over SHL__SLOT_TAKE: each name takes pages of its own */
    shl_table *t;
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK);
    uint64_t held, tok;
    static char big[131072];
    memset(big, 'v', sizeof big);
    cr_assert_eq(shl_acquire(t, "held", "me", 60000000000, &held), SHL_OK);
    cr_assert_eq(shl_write(t, "held", "me", held, big, sizeof big), SHL_OK);
    int fd = fill(dir);

    shl_clear_error();
    cr_assert_eq(shl_acquire(t, "new", "me", 60000000000, &tok), SHL_ENOSPC);
    const char *d = shl_last_error();
    cr_assert(strstr(d, "no room for lease \"new\"") && strstr(d, dir) && strstr(d, " free"),
              "detail: \"%s\"", d);
    shl_lease *l;
    cr_assert_eq(shl_lease_open(t, "new", "me", &l), SHL_ENOSPC);
    cr_assert_eq(t_info(t).used, 1u, "the refused name was not added");
    /* The lease already there works on: its pages were taken with its name. */
    cr_assert_eq(shl_renew(t, "held", "me", held, 60000000000), SHL_OK);
    big[0] = 'w';
    cr_assert_eq(shl_write(t, "held", "me", held, big, sizeof big), SHL_OK);
    cr_assert_eq(shl_release(t, "held", "me", held), SHL_OK);
    cr_assert_eq(shl_acquire(t, "held", "you", 60000000000, &tok), SHL_OK);
    cr_assert_gt(tok, held);
    cr_assert_eq(shl_write(t, "held", "you", tok, big, 100), SHL_OK);
    cr_assert_eq(shl_check(t, NULL, NULL), 0, "the table checks clean");

    /* Room again: the same name is added. */
    close(fd);
    cr_assert_eq(unlink(filler), 0);
    cr_assert_eq(shl_acquire(t, "new", "me", 60000000000, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "new", "me", tok, big, sizeof big), SHL_OK);
    cr_assert_eq(t_info(t).used, 2u);
    cr_assert_eq(shl_check(t, NULL, NULL), 0);
    cr_assert_eq(shl_close(t), SHL_OK);
    cr_assert_eq(shl_unlink(path), SHL_OK);
}

/* A table larger than the file system's free space is refused at
 * creation, as when creation took it all, and leaves no file. */
Test(room, a_table_larger_than_the_free_space_is_refused, .init = mounted, .fini = cleanup)
{
    char path[192];
    snprintf(path, sizeof path, "%s/big", dir);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 100000; /* some 180 MB on a 16 MB tmpfs */
    shl_table *t;
    shl_clear_error();
    cr_assert_eq(shl_open(path, &o, &t), SHL_ENOSPC);
    const char *d = shl_last_error();
    cr_assert(strstr(d, "needs ") && strstr(d, "MiB") && strstr(d, " free"), "detail: \"%s\"", d);
    cr_assert_eq(t_dir_entries(dir, ""), 2, "only . and .. are left");
}

#define SKIP 77

/* Under a filter that fails every fallocate(2) as a file system without
 * it does: 0 when creation took the whole file and names were added. */
static int without_fallocate(void *arg)
{
    const char *name = arg;
    if (sk_fail_fallocate(EOPNOTSUPP) != 0)
        return SKIP;
    shl_options o;
    shl_options_init(&o);
    o.capacity = 2000;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    if (shl_open(name, &o, &t) != SHL_OK)
        return 1;
    shl_table_info i;
    if (shl_table_info_get(t, &i) != SHL_OK || i.allocated < i.size)
        return 2;
    for (int n = 0; n < 100; n++) {
        char lease[32];
        uint64_t tok;
        snprintf(lease, sizeof lease, "lease-%d", n);
        if (shl_acquire(t, lease, "me", 1000000000, &tok) != SHL_OK)
            return 3;
    }
    if (shl_check(t, NULL, NULL) != 0)
        return 4;
    return shl_close(t) == SHL_OK ? 0 : 5;
}

Test(room, without_fallocate_creation_takes_the_whole_file)
{
    char name[96];
    t_name(name, sizeof name, "nofalloc");
    int st = t_wait(t_fork(without_fallocate, name));
    if (st == SKIP)
        cr_skip_test("seccomp filters are not permitted here");
    cr_assert_eq(st, 0, "without fallocate(2): step %d failed", st);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
