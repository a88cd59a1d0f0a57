/*
 * tests/test_place.c - tables at a file path: on a tmpfs mounted here, on
 * a disk file system, in directories others may write, behind symlinks,
 * owned by another user; and the facts shl_place_get() reports.
 *
 * Each test runs in a mount namespace of its own (criterion runs each test
 * in its own process), so a tmpfs it mounts vanishes with it even when an
 * assertion ends it early.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common.h"
#include "place_util.h"

static char dir[128];

static void mounted(void)
{
    place_tmpfs(dir, sizeof dir, "16m");
}

static void cleanup(void)
{
    place_cleanup(dir);
}

/* Entries of directory d besides "." and "..". */
static int entries(const char *d)
{
    return t_dir_entries(d, "") - 2;
}

static shl_options small(void)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = 16;
    return o;
}

/* Creates the table `path` with small() options and closes it. */
static void create_closed(const char *path)
{
    shl_options o = small();
    shl_table *t;
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK, "create %s", path);
    shl_close(t);
}

/* A second process opens the path table, sees the first one's lease and
 * value, and is refused the lease. */
static int other_process(void *arg)
{
    const char *path = arg;
    shl_table *t;
    if (shl_open(path, NULL, &t) != SHL_OK)
        return 10;
    uint64_t tok = 0;
    char buf[16];
    size_t len = 0;
    int rc = 0;
    if (shl_acquire(t, "job", "second", SEC, &tok) != SHL_EBUSY)
        rc = 11;
    else if (shl_read(t, "job", buf, sizeof buf, &len, &tok) != SHL_OK || len != 5 ||
             memcmp(buf, "hello", 5) != 0 || tok != 1)
        rc = 12;
    shl_close(t);
    return rc;
}

Test(place, table_on_a_mounted_tmpfs, .init = mounted, .fini = cleanup)
{
    char path[256];
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    shl_options o = small();
    shl_table *t;
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "the table is the file at its path");
    cr_assert(S_ISREG(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert_eq(st.st_uid, geteuid());
    cr_assert_eq(entries(dir), 1, "nothing but the table in its directory");
    cr_assert_eq(access("/dev/shm/jobs.shl", F_OK), -1, "nothing in /dev/shm");

    uint64_t tok = 0;
    cr_assert_eq(shl_acquire(t, "job", "first", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 1);
    cr_assert_eq(shl_write(t, "job", "first", tok, "hello", 5), SHL_OK);
    cr_assert_eq(t_wait(t_fork(other_process, path)), 0);

    shl_place p;
    cr_assert_eq(shl_place_get(path, &p), SHL_OK);
    cr_assert_str_eq(p.path, path);
    cr_assert_eq(p.tmpfs, 1);
    cr_assert_eq(p.dir_safe, 1);
    cr_assert_eq(p.exists, 1);
    cr_assert_eq(p.table, SHL_OK);
    cr_assert_eq(p.uid, geteuid());
    cr_assert_eq(p.mode, 0600);
    cr_assert_eq(p.open, 1, "this process has it open");
    cr_assert(p.fs_size >= 15 * 1024 * 1024 && p.fs_size <= 17 * 1024 * 1024);
    cr_assert(p.fs_free < p.fs_size);
    shl_close(t);
    cr_assert_eq(shl_place_get(path, &p), SHL_OK);
    cr_assert_eq(p.open, 0, "closed by all: nobody has it open");

    /* Opened again by path, the lease and its token are still there. */
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK);
    cr_assert_eq(shl_release(t, "job", "first", 1), SHL_OK);
    cr_assert_eq(shl_acquire(t, "job", "third", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, 2);
    shl_close(t);
    cr_assert_eq(shl_check_name(path, NULL, NULL), SHL_OK, "the inspector reads it by path");
    cr_assert_eq(shl_unlink(path), SHL_OK);
    cr_assert_eq(access(path, F_OK), -1);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_ENOENT);
    cr_assert_eq(shl_place_get(path, &p), SHL_OK);
    cr_assert_eq(p.exists, 0);
    cr_assert_eq(p.table, SHL_ENOENT);
}

Test(place, directory_others_may_write_is_refused, .init = mounted, .fini = cleanup)
{
    char sub[200], path[256];
    snprintf(sub, sizeof sub, "%s/shared", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/jobs.shl", sub);
    shl_options o = small();
    shl_table *t;
    shl_place p;

    /* World- or group-writable without the sticky bit: refused, and nothing
     * is created there. */
    static const mode_t unsafe[] = {0777, 0770, 0730, 0703, 02770};
    for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++) {
        cr_assert_eq(chmod(sub, unsafe[i]), 0);
        cr_assert_eq(shl_open(path, &o, &t), SHL_EPERM, "directory mode %04o", unsafe[i]);
        cr_assert_null(t);
        cr_assert_eq(entries(sub), 0);
        cr_assert_eq(shl_place_get(path, &p), SHL_OK);
        cr_assert_eq(p.dir_safe, 0, "directory mode %04o", unsafe[i]);
    }
    /* With the sticky bit, or writable by its owner alone: accepted. */
    cr_assert_eq(chmod(sub, 01777), 0);
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK);
    shl_close(t);
    cr_assert_eq(chmod(sub, 0755), 0);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_OK);
    shl_close(t);
    /* An existing table is refused too once the directory is opened up. */
    cr_assert_eq(chmod(sub, 0777), 0);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_EPERM);
    cr_assert_eq(chmod(sub, 0700), 0);
    cr_assert_eq(shl_unlink(path), SHL_OK);
}

Test(place, final_symlink_is_never_followed, .init = mounted, .fini = cleanup)
{
    char real[256], link[256], dangling[256], target[256];
    snprintf(real, sizeof real, "%s/real.shl", dir);
    snprintf(link, sizeof link, "%s/link.shl", dir);
    snprintf(dangling, sizeof dangling, "%s/dangling.shl", dir);
    snprintf(target, sizeof target, "%s/target.shl", dir);
    create_closed(real);
    shl_options o = small();
    shl_table *t;
    cr_assert_eq(symlink(real, link), 0);
    cr_assert_eq(shl_open(link, NULL, &t), SHL_EPERM);
    cr_assert_eq(shl_open(link, &o, &t), SHL_EPERM);
    /* Creating through a dangling symlink creates nothing at its target. */
    cr_assert_eq(symlink(target, dangling), 0);
    cr_assert_eq(shl_open(dangling, &o, &t), SHL_EPERM);
    cr_assert_eq(access(target, F_OK), -1);
}

Test(place, owner_and_mode_checks_as_in_dev_shm, .init = mounted, .fini = cleanup)
{
    char path[256];
    snprintf(path, sizeof path, "%s/owned.shl", dir);
    create_closed(path);
    shl_options o = small();
    shl_table *t;
    /* Another user's file. */
    cr_assert_eq(chown(path, 4321, (gid_t)-1), 0);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_EPERM);
    cr_assert_eq(chown(path, geteuid(), (gid_t)-1), 0);
    /* A mode wider than asked. */
    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_EPERM);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(shl_open(path, NULL, &t), SHL_OK);
    shl_close(t);
    /* A 0660 table is created 0660 whatever the umask, and a 0600 open
     * refuses it. */
    char group[256];
    snprintf(group, sizeof group, "%s/group.shl", dir);
    o.mode = 0660;
    mode_t old = umask(077);
    cr_assert_eq(shl_open(group, &o, &t), SHL_OK);
    umask(old);
    shl_close(t);
    struct stat st;
    cr_assert_eq(stat(group, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0660);
    o.mode = 0600;
    cr_assert_eq(shl_open(group, &o, &t), SHL_EPERM);
    /* Not a table at all: refused as corrupt, never trusted. */
    char junk[256];
    snprintf(junk, sizeof junk, "%s/junk.shl", dir);
    int fd = open(junk, O_CREAT | O_WRONLY, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "not a table, just some bytes", 28), 28);
    close(fd);
    cr_assert_eq(shl_open(junk, NULL, &t), SHL_ECORRUPT);
    shl_place p;
    cr_assert_eq(shl_place_get(junk, &p), SHL_OK);
    cr_assert_eq(p.table, SHL_ECORRUPT);
}

Test(place, table_on_a_disk_file_system_works_and_says_so)
{
    /* A directory on a file system that is not tmpfs: /var/tmp, else the
     * build directory. */
    const char *bases[] = {"/var/tmp", getenv("SHL_BUILD"), "build"};
    char d[256] = "";
    for (size_t i = 0; i < sizeof bases / sizeof bases[0] && !d[0]; i++) {
        struct statfs fs;
        if (bases[i] && statfs(bases[i], &fs) == 0 && fs.f_type != TMPFS_MAGIC) {
            snprintf(d, sizeof d, "%s/shlplace-XXXXXX", bases[i]);
            cr_assert(mkdtemp(d), "mkdtemp %s", d);
        }
    }
    if (!d[0])
        cr_skip_test("no file system other than tmpfs here");
    char path[300];
    snprintf(path, sizeof path, "%s/disk.shl", d);
    shl_options o = small();
    shl_table *t;
    int rc = shl_open(path, &o, &t);
    shl_place p;
    int prc = shl_place_get(path, &p);
    uint64_t tok = 0;
    int arc = rc == SHL_OK ? shl_acquire(t, "a", "o", SEC, &tok) : rc;
    shl_close(t);
    shl_unlink(path);
    rmdir(d);
    cr_assert_eq(rc, SHL_OK);
    cr_assert_eq(arc, SHL_OK);
    cr_assert_eq(tok, 1);
    cr_assert_eq(prc, SHL_OK);
    cr_assert_eq(p.tmpfs, 0, "the fact that it is not tmpfs is reported");
    cr_assert_neq(p.fs_type, TMPFS_MAGIC);
}

Test(place, path_names)
{
    shl_table *t;
    shl_options o = small();
    /* Well-formed paths whose directory does not exist: ENOENT, not EINVAL. */
    static const char *missing[] = {"/no-such-dir-shl/x.shl", "/no-such-dir-shl/.d/x",
                                    "/no-such-dir-shl/a..b/x..y"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        cr_assert_eq(shl_open(missing[i], NULL, &t), SHL_ENOENT, "%s", missing[i]);
        cr_assert_eq(shl_open(missing[i], &o, &t), SHL_ENOENT, "%s", missing[i]);
    }
    static const char *bad[] = {"/tmp/../tmp/x", "/tmp/./x", "/tmp//x", "/tmp/x/", "/tmp/.x",
                                "/tmp/a b",      "/tmp/q?",  "tmp/x",   "/tmp/..", "//tmp/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(shl_open(bad[i], &o, &t), SHL_EINVAL, "%s", bad[i]);
        cr_assert_eq(shl_unlink(bad[i]), SHL_EINVAL, "%s", bad[i]);
        shl_place p;
        cr_assert_eq(shl_place_get(bad[i], &p), SHL_EINVAL, "%s", bad[i]);
    }
    /* SHL_TABLE_NAME_MAX bytes in all, and not one more. */
    char name[SHL_TABLE_NAME_MAX + 2];
    memset(name, 'z', sizeof name);
    memcpy(name, "/no-such-dir-shl/", 17);
    name[SHL_TABLE_NAME_MAX] = 0;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
    name[SHL_TABLE_NAME_MAX] = 'z';
    name[SHL_TABLE_NAME_MAX + 1] = 0;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_EINVAL);
    /* "/name" stays the /dev/shm table "name". */
    char plain[96], slashed[100];
    t_name(plain, sizeof plain, "slash");
    snprintf(slashed, sizeof slashed, "/%s", plain);
    cr_assert_eq(shl_open(plain, &o, &t), SHL_OK);
    shl_close(t);
    shl_place p;
    cr_assert_eq(shl_place_get(slashed, &p), SHL_OK);
    char want[128];
    snprintf(want, sizeof want, "/dev/shm/%s", plain);
    cr_assert_str_eq(p.path, want);
    cr_assert_eq(p.table, SHL_OK);
    cr_assert_eq(shl_place_get("etcd://127.0.0.1:1/x", &p), SHL_ENOTSUP);
}

struct die_arg {
    const char *path;
    const char *crashpoint; /* SHL_CRASHPOINT's value */
};

static int die_creating(void *arg)
{
    const struct die_arg *d = arg;
    setenv("SHL_CRASHPOINT", d->crashpoint, 1);
    shl_options o = small();
    shl_table *t;
    return shl_open(d->path, &o, &t) == SHL_OK ? 1 : 2; /* not reached when it fires */
}

/* The creation keeps its safety at a path: a creator killed before
 * publishing, with its file made or initialised, leaves nothing in the
 * directory, and the next creator is not held up. */
Test(place, creator_killed_before_publish_leaves_nothing, .init = mounted, .fini = cleanup)
{
    static const char *points[] = {"101", "100"}; /* SHL__CP_SHM_CREATED, _CREATE */
    char path[256];
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    for (int i = 0; i < 2; i++) {
        struct die_arg d = {path, points[i]};
        cr_assert_eq(t_wait(t_fork(die_creating, &d)), 128 + SIGKILL, "point %s", points[i]);
        cr_assert_eq(entries(dir), 0, "point %s: a dead creator left a file", points[i]);
        shl_table *t;
        cr_assert_eq(shl_open(path, NULL, &t), SHL_ENOENT);
        create_closed(path);
        cr_assert_eq(shl_unlink(path), SHL_OK);
    }
}
