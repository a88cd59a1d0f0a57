/*
 * tests/test_doctor.c - shmlease doctor on a host configuration of the
 * test's own (--root): RemoveIPC in logind.conf and its drop-ins, for a
 * regular user (setpriv to uid 1000), root and a lingering user; a table's
 * owner, mode, directory, space and openers; a host without /proc.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "place_util.h"

#define USER_UID 1000

static char root[64];

static void make_root(void)
{
    t_mkdtemp(root, sizeof root, "shldoctor");
    cr_assert_eq(chmod(root, 0755), 0);
}

/* A tmpfs a test mounted (place_tmpfs), unmounted after it however it ends. */
static char tmpfs_dir[128];

static void drop_root(void)
{
    place_cleanup(tmpfs_dir);
    if (root[0])
        t_rm_rf(root);
    root[0] = 0;
}

/* Writes root/rel (its directories made, 0755) with `text`. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        *s = '/';
    }
    if (!text) {
        cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        return;
    }
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* A host where systemd runs. */
static void systemd_host(void)
{
    make_root();
    put("run/systemd/system", NULL);
}

/* Runs doctor as uid `uid` (root when 0) with --root and `args`; its output in *out. */
static int doctor_as(unsigned uid, char **out, const char *args)
{
    char cmd[1024];
    if (uid)
        snprintf(cmd, sizeof cmd,
                 "setpriv --reuid %u --regid %u --clear-groups '%s' doctor --root %s %s 2>&1", uid,
                 uid, t_tool(), root, args);
    else
        snprintf(cmd, sizeof cmd, "'%s' doctor --root %s %s 2>&1", t_tool(), root, args);
    return t_run(cmd, out);
}

static void expect(int st, int want_st, char *out, const char *has)
{
    cr_assert_eq(st, want_st, "exit %d, not %d:\n%s", st, want_st, out);
    cr_assert(strstr(out, has), "no \"%s\" in:\n%s", has, out);
    free(out);
}

/* Runs doctor as doctor_as() does and expects exit status want_st, `has`
 * in its output and `lacks` (when not NULL) nowhere in it. */
static void doctor_expect(unsigned uid, const char *args, int want_st, const char *has,
                          const char *lacks)
{
    char *out;
    int st = doctor_as(uid, &out, args);
    cr_assert(!lacks || !strstr(out, lacks), "\"%s\" in:\n%s", lacks, out);
    expect(st, want_st, out, has);
}

Test(doctor, removeipc_yes_is_a_problem_for_a_regular_user, .init = systemd_host, .fini = drop_root)
{
    put("etc/systemd/logind.conf", "[Login]\n#RemoveIPC=no\nRemoveIPC=yes\n");
    doctor_expect(USER_UID, "", 1, "problem: RemoveIPC=yes (/etc/systemd/logind.conf:3)", NULL);
}

Test(doctor, removeipc_no_is_clean, .init = systemd_host, .fini = drop_root)
{
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n [Login] \nRemoveIPC = no \n");
    doctor_expect(USER_UID, "", 0, "ok: RemoveIPC=no (/etc/systemd/logind.conf:4)", "problem:");
}

Test(doctor, removeipc_default_is_yes, .init = systemd_host, .fini = drop_root)
{
    doctor_expect(USER_UID, "", 1, "problem: RemoveIPC=yes (systemd's default)", NULL);
    /* The finding says how to fix it. */
    doctor_expect(USER_UID, "", 1, "fix: RemoveIPC=no in /etc/systemd/logind.conf.d/", NULL);
}

Test(doctor, drop_ins_in_name_order_and_etc_masks_usr_lib, .init = systemd_host, .fini = drop_root)
{
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=no\n");
    put("usr/lib/systemd/logind.conf.d/20-late.conf", "[Login]\nRemoveIPC=yes\n");
    put("run/systemd/logind.conf.d/10-early.conf", "[Login]\nRemoveIPC=no\n");
    /* Outside [Login], or not a .conf: not logind's. */
    put("run/systemd/logind.conf.d/30-other.conf", "[Other]\nRemoveIPC=no\n");
    put("run/systemd/logind.conf.d/40-off.conf.disabled", "[Login]\nRemoveIPC=no\n");
    doctor_expect(USER_UID, "", 1,
                  "problem: RemoveIPC=yes (/usr/lib/systemd/logind.conf.d/20-late.conf:2)", NULL);
    put("etc/systemd/logind.conf.d/20-late.conf", "[Login]\nRemoveIPC=false\n");
    doctor_expect(USER_UID, "", 0, "ok: RemoveIPC=no (/etc/systemd/logind.conf.d/20-late.conf:2)",
                  NULL);
    put("etc/systemd/logind.conf.d/50-bad.conf", "[Login]\nRemoveIPC=perhaps\n");
    doctor_expect(
        USER_UID, "", 0,
        "note: /etc/systemd/logind.conf.d/50-bad.conf:2: RemoveIPC=perhaps: not a boolean", NULL);
}

Test(doctor, root_lingering_users_and_hosts_without_systemd_are_spared, .init = systemd_host,
     .fini = drop_root)
{
    char linger[128];
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n");
    doctor_expect(0, "", 0, "does not apply to uid 0", NULL);
    struct passwd *pw = getpwuid(USER_UID);
    cr_assert(pw, "uid %d has a name", USER_UID);
    snprintf(linger, sizeof linger, "var/lib/systemd/linger/%s", pw->pw_name);
    put(linger, "");
    doctor_expect(USER_UID, "", 0, "lingers", NULL);
    drop_root();
    make_root();
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n");
    doctor_expect(USER_UID, "", 0, "systemd is not running here", NULL);
}

Test(doctor, a_table_open_or_orphaned, .init = systemd_host, .fini = drop_root)
{
    char name[96];
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=no\n");
    t_name(name, sizeof name, "doctor");
    shl_table *t = t_create(name, 4, 0, SHL_CLOCK_MONOTONIC);
    doctor_expect(0, name, 0, "is open in some process", NULL);
    shl_close(t);
    doctor_expect(0, name, 0, "note: nobody has table", NULL);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    cr_assert_eq(chmod(path, 0644), 0);
    doctor_expect(0, name, 1, "has mode 0644, wider than 0660", NULL);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(chown(path, 4321, (gid_t)-1), 0);
    doctor_expect(0, name, 1, "belongs to uid 4321", NULL);
    shl_unlink(path + 9);
    doctor_expect(0, name, 0, "does not exist (yet)", NULL);
}

Test(doctor, a_path_table_short_of_space_or_in_an_open_directory, .init = systemd_host,
     .fini = drop_root)
{
    char *dir = tmpfs_dir, path[256];
    place_tmpfs(dir, sizeof tmpfs_dir, "4m");
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n");
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 1300; /* about 2.5 MiB of the 4 */
    shl_table *t;
    cr_assert_eq(shl_open(path, &o, &t), SHL_OK);
    shl_close(t);
    /* It takes little now, but the 4 MiB cannot hold two full ones. */
    doctor_expect(0, path, 1, "cannot be created again", "new names will be refused");
    /* With 2 MiB taken beside it, it cannot even fill up. */
    char filler[300];
    snprintf(filler, sizeof filler, "%s/filler", dir);
    int fd = open(filler, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(posix_fallocate(fd, 0, 2 << 20), 0);
    close(fd);
    doctor_expect(0, path, 1, "new names will be refused (SHL_ENOSPC)", NULL);
    cr_assert_eq(unlink(filler), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    doctor_expect(0, path, 1, "no sticky bit", NULL);
}

#define SKIP_CODE 77

/* In a child of its own (this process keeps its /proc): /proc unmounted in
 * a new mount namespace, then doctor. 0 when doctor found the problem. */
static int doctor_without_proc(void *arg)
{
    (void)arg;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        umount2("/proc", MNT_DETACH) != 0)
        return SKIP_CODE;
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "'%s' doctor --root %s 2>&1", t_tool(), root);
    int st = t_run(cmd, &out);
    int found = strstr(out, "problem: /proc is not mounted") != NULL;
    fprintf(stderr, "%s", found ? "" : out);
    return st == 1 && found ? 0 : 1;
}

Test(doctor, without_proc_is_a_problem, .fini = drop_root)
{
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("a tool built with AddressSanitizer cannot run without /proc");
#endif
    systemd_host();
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=no\n");
    int st = t_wait(t_fork(doctor_without_proc, NULL));
    if (st == SKIP_CODE)
        cr_skip_test("cannot unmount /proc in a mount namespace");
    cr_assert_eq(st, 0, "doctor without /proc: see its output above");
}

Test(doctor, removeipc_does_not_reach_a_path_table, .init = systemd_host, .fini = drop_root)
{
    char *dir = tmpfs_dir, path[256], cmd[512], *out;
    place_tmpfs(dir, sizeof tmpfs_dir, "4m");
    cr_assert_eq(chown(dir, USER_UID, USER_UID), 0);
    put("etc/systemd/logind.conf", "[Login]\nRemoveIPC=yes\n");
    snprintf(path, sizeof path, "%s/jobs.shl", dir);
    snprintf(cmd, sizeof cmd,
             "setpriv --reuid %u --regid %u --clear-groups '%s' create %s --capacity 4 2>&1",
             USER_UID, USER_UID, t_tool(), path);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    free(out);
    doctor_expect(USER_UID, path, 0,
                  "ok: RemoveIPC=yes (/etc/systemd/logind.conf:2) does not reach", "problem:");
    /* The same user's /dev/shm is within its reach. */
    doctor_expect(USER_UID, "", 1, "problem: RemoveIPC=yes", NULL);
}
