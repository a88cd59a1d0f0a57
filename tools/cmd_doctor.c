/*
 * tools/cmd_doctor.c - shmlease doctor: what on this host breaks tables.
 *
 * One finding per line, "ok: ...", "note: ..." or "problem: ...; fix: ...".
 * The exit status is 0 when no finding is a problem, 1 otherwise. The host's
 * configuration files (logind.conf and its drop-ins, systemd's run
 * directory, the linger list) are read under --root (default /), so that
 * a test can give it a host of its own; /proc and the tables are this
 * host's.
 */
#include <errno.h>
#include <dirent.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "doctor.h"

/* RemoveIPC spares root and system users: uids up to systemd's SYSTEM_UID_MAX. */
#define SYSTEM_UID_MAX 999
/* A table of the default capacity, value size and pools takes about 1.8 MiB. */
#define DEFAULT_TABLE_ROOM (UINT64_C(2) << 20)
/* Docker's default /dev/shm. */
#define SMALL_SHM     (UINT64_C(64) << 20)
#define ORPHANS_SHOWN 20

enum level { OK, NOTE, PROBLEM };

static int problems;

__attribute__((format(printf, 2, 3))) static void say(enum level l, const char *fmt, ...)
{
    static const char *const word[] = {"ok", "note", "problem"};
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", word[l]);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    problems += l == PROBLEM;
}

static void doctor_usage(FILE *f)
{
    fputs("usage: shmlease doctor [TABLE] [--root DIR]\n"
          "Checks what on this host breaks shared-memory tables, one finding per line\n"
          "(ok, note, or problem with its fix): systemd-logind's RemoveIPC for this user,\n"
          "the size and free space of /dev/shm (or TABLE's file system) against the table,\n"
          "the time namespace and /proc, TABLE's owner, mode and directory, and tables\n"
          "that nobody has open. Exit status 0 when no finding is a problem, 1 otherwise.\n"
          "  --root DIR   read the host's configuration (/etc/systemd/logind.conf and its\n"
          "               drop-ins, /run/systemd, /var/lib/systemd/linger) under DIR\n",
          f);
}

static const char *user_name(uid_t uid)
{
    struct passwd *pw = getpwuid(uid);
    return pw ? pw->pw_name : "(unknown)";
}

static int exists_under(const char *root, const char *path)
{
    char full[4096];
    snprintf(full, sizeof full, "%s%s", root, path);
    return access(full, F_OK) == 0;
}

static void check_removeipc(const char *root, const char *table, const shl_place *p)
{
    struct doctor_removeipc r;
    doctor_removeipc(root, &r);
    uid_t uid = geteuid();
    const char *user = user_name(uid);
    char linger[300];
    snprintf(linger, sizeof linger, "/var/lib/systemd/linger/%s", user);
    if (r.bad[0])
        say(NOTE, "%s: not a boolean, logind ignores it", cli_vis(r.bad));
    if (!r.value)
        say(OK, "RemoveIPC=no (%s): logind leaves the files in /dev/shm alone", cli_vis(r.where));
    else if (uid <= SYSTEM_UID_MAX)
        say(OK,
            "RemoveIPC=yes (%s) does not apply to uid %u (%s): root and system users "
            "(uid < %u) are spared",
            cli_vis(r.where), (unsigned)uid, user, SYSTEM_UID_MAX + 1);
    else if (table && strncmp(p->path, "/dev/shm/", 9) != 0)
        say(OK, "RemoveIPC=yes (%s) does not reach %s: it removes files in /dev/shm only",
            cli_vis(r.where), cli_vis(p->path));
    else if (exists_under(root, linger))
        say(NOTE,
            "RemoveIPC=yes (%s), but %s lingers (loginctl enable-linger): its tables stay "
            "as long as it does",
            cli_vis(r.where), user);
    else if (!exists_under(root, "/run/systemd/system"))
        say(NOTE,
            "RemoveIPC=yes (%s), but systemd is not running here (no /run/systemd/system): "
            "nothing removes tables at logout",
            cli_vis(r.where));
    else
        say(PROBLEM,
            "RemoveIPC=yes (%s): systemd-logind removes uid %u's (%s) files in /dev/shm, "
            "tables included, when its last session ends, and the next user of a table gets a "
            "new one with tokens from 1; fix: RemoveIPC=no in "
            "/etc/systemd/logind.conf.d/shmlease.conf then systemctl restart systemd-logind, "
            "or loginctl enable-linger %s, or a table at a path out of its reach "
            "(/run/lock/NAME, a RuntimeDirectory=)",
            cli_vis(r.where), (unsigned)uid, user, user);
}

static void check_space(const char *table, const shl_place *p)
{
    char size[32], free_[32], tsize[32];
    const char *where = table ? p->path : "/dev/shm";
    if (p->dir_safe < 0 || !p->fs_size) {
        say(PROBLEM, "the directory of %s does not exist; fix: %s", cli_vis(where),
            table ? "create it, or name a table in an existing directory"
                  : "mount a tmpfs on /dev/shm (mount -t tmpfs -o mode=1777 tmpfs /dev/shm)");
        return;
    }
    cli_fmt_bytes(p->fs_size, size, sizeof size);
    cli_fmt_bytes(p->fs_free, free_, sizeof free_);
    if (table && p->table == SHL_OK) {
        /* A table takes its slots as names are added: what it can still
         * take must fit, and a whole table beside it once it is full. */
        uint64_t more = p->file_size > p->file_allocated ? p->file_size - p->file_allocated : 0;
        char more_[32];
        cli_fmt_bytes(p->file_size, tsize, sizeof tsize);
        cli_fmt_bytes(more, more_, sizeof more_);
        if (p->fs_free < more)
            say(PROBLEM,
                "%s: %s free of %s, less than the %s the table can still take as names are "
                "added: new names will be refused (SHL_ENOSPC); fix: a larger file system "
                "(mount -o remount,size=..., docker run --shm-size) or a smaller table",
                cli_vis(where), free_, size, more_);
        else if (p->fs_free - more < p->file_size)
            say(PROBLEM,
                "%s: %s free of %s, less than the table's %s once it is full (it can still take "
                "%s): it cannot be created again (after a removal) while the old one is still "
                "open; fix: a larger file system (mount -o remount,size=..., docker run "
                "--shm-size) or a smaller table",
                cli_vis(where), free_, size, tsize, more_);
        else if (p->file_size > p->fs_size / 4)
            say(NOTE, "%s: the table's %s is over a quarter of the file system's %s (%s free)",
                cli_vis(where), tsize, size, free_);
        else
            say(OK, "%s: the table takes %s once full; %s, %s free", cli_vis(where), tsize, size,
                free_);
    } else if (p->fs_free < DEFAULT_TABLE_ROOM) {
        say(PROBLEM,
            "%s: %s free of %s: not even a table of the default size (about 1.8 MiB) fits; "
            "fix: a larger file system (mount -o remount,size=..., docker run --shm-size)",
            cli_vis(where), free_, size);
    } else {
        say(p->fs_size <= SMALL_SHM ? NOTE : OK, "%s: %s, %s free%s", cli_vis(where), size, free_,
            p->fs_size <= SMALL_SHM ? " (a container's default: --shm-size gives more)" : "");
    }
    if (p->tmpfs == 0)
        say(table ? NOTE : PROBLEM,
            "%s is on %s, not tmpfs: every change may be written back to the disk; fix: keep "
            "tables on tmpfs (/dev/shm, /run/lock, a tmpfs volume)",
            cli_vis(where), cli_fs_name(p->fs_type));
}

static void check_timens(void)
{
    struct stat self, init;
    if (stat("/proc/self", &self) != 0) {
        say(PROBLEM, "/proc is not mounted or not readable: a process cannot tell which time "
                     "namespace it is in, and tables need it (their CLOCK_MONOTONIC); fix: mount "
                     "proc (mount -t proc proc /proc), or give the container its /proc");
        return;
    }
    if (stat("/proc/self/ns/time", &self) != 0) {
        if (errno == ENOENT)
            say(OK, "/proc is readable; this kernel has no time namespaces");
        else
            say(PROBLEM, "/proc/self/ns/time: %s; fix: give this process a readable /proc",
                strerror(errno));
        return;
    }
    if (stat("/proc/1/ns/time", &init) == 0 && init.st_ino != self.st_ino)
        say(NOTE, "this process is in a time namespace other than pid 1's: it shares tables only "
                  "with processes in the same one (others are refused: SHL_ETIMENS)");
    else
        say(OK, "/proc is readable; time namespace %llu", (unsigned long long)self.st_ino);
}

static void check_file(const char *name, const shl_place *p)
{
    uid_t uid = geteuid();
    if (p->dir_safe == 0)
        say(PROBLEM,
            "the directory of %s may be written by users other than its owner and has no "
            "sticky bit: shl_open refuses it; fix: chmod +t or chmod go-w on it",
            cli_vis(p->path));
    if (p->table != SHL_OK) {
        say(PROBLEM, "%s: %s (%s); fix: shmlease check %s, or remove what is there",
            cli_vis(p->path), shl_strerror(p->table), shl_errname(p->table), cli_vis(name));
        return;
    }
    if (p->uid != uid && (p->mode & 0060) != 0060)
        say(PROBLEM,
            "%s belongs to uid %u, not to you (uid %u), and is not shared with a group: it is "
            "refused; fix: run as uid %u, or remove it and create it again",
            cli_vis(p->path), (unsigned)p->uid, (unsigned)uid, (unsigned)p->uid);
    else if (p->mode & ~0660u)
        say(PROBLEM, "%s has mode %04o, wider than 0660: it is refused; fix: chmod 600 %s",
            cli_vis(p->path), (unsigned)p->mode, cli_vis(p->path));
    else
        say(OK, "%s: owner uid %u, mode %04o", cli_vis(p->path), (unsigned)p->uid,
            (unsigned)p->mode);
    shl_table *t;
    int rc = shl_open(name, NULL, &t);
    shl_close(t);
    if (rc != SHL_OK)
        say(PROBLEM, "%s does not open here: %s (%s)", cli_vis(name), cli_strerror(rc),
            shl_errname(rc));
}

static void note_orphan(const char *name, const shl_place *p)
{
    char size[32];
    say(NOTE,
        "nobody has table %s open (%s): if nothing will use it again, shmlease rm %s frees "
        "the memory",
        cli_vis(name), cli_fmt_bytes(p->file_size, size, sizeof size), cli_vis(name));
}

/* The tables of this user in /dev/shm that no handle has open. */
static void check_orphans(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    unsigned n = 0, shown = 0;
    for (struct dirent *e; (e = readdir(d));) {
        shl_place p;
        if (e->d_name[0] == '.' || shl_place_get(e->d_name, &p) != SHL_OK || p.table != SHL_OK ||
            p.uid != geteuid() || p.open != 0)
            continue;
        if (shown++ < ORPHANS_SHOWN)
            note_orphan(e->d_name, &p);
        n++;
    }
    closedir(d);
    if (n > shown)
        say(NOTE, "... and %u more tables nobody has open", n - shown);
    if (n == 0)
        say(OK, "every table of yours in /dev/shm is open somewhere");
}

int cmd_doctor(int argc, char **argv)
{
    const char *root = "";
    const struct cli_opt opts[] = {{"--root", NULL, CLI_STRING, &root}, {NULL, NULL, 0, NULL}};
    static const char *const names[] = {"TABLE", NULL};
    struct cli_operands ops;
    int ex = cli_parse(argc, argv, doctor_usage, opts, names, 0, 0, &ops);
    if (ex)
        return ex < 0 ? 0 : ex;
    const char *table = ops.n > 0 ? ops.v[0] : NULL;
    if (root[0] == '/' && root[1] == 0)
        root = "";
    if (table && cli_etcd_name(table)) {
        cli_err("doctor", "'%s' is an etcd table: doctor checks shared-memory tables",
                cli_vis(table));
        return EXIT_USAGE;
    }
    if (table && cli_table_name("doctor", table))
        return EXIT_USAGE;
    shl_place p;
    /* Without a table, /dev/shm itself: the place of any plain name. */
    shl_place_get(table ? table : "doctor", &p);
    problems = 0;
    check_removeipc(root, table, &p);
    check_space(table, &p);
    check_timens();
    if (!table) {
        check_orphans();
    } else if (!p.exists) {
        say(NOTE, "table %s does not exist (yet)", cli_vis(table));
    } else {
        check_file(table, &p);
        if (p.open == 0)
            note_orphan(table, &p);
        else if (p.open == 1)
            say(OK, "table %s is open in some process", cli_vis(table));
    }
    return problems ? EXIT_REFUSED : 0;
}
