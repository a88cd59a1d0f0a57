/*
 * tools/cli_place.c - what the tool says about where a table lives: sizes
 * in words people read, the file system's name, a table kept on a disk,
 * and why a table's directory was refused.
 */
#include <linux/magic.h>
#include <stdio.h>

#include "cli.h"

const char *cli_fmt_bytes(uint64_t b, char *buf, unsigned cap)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (b < 1024) {
        snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
        return buf;
    }
    double v = (double)b / 1024;
    unsigned i = 0;
    for (; v >= 1024 && i + 1 < sizeof unit / sizeof unit[0]; i++)
        v /= 1024;
    snprintf(buf, cap, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[i]);
    return buf;
}

const char *cli_fmt_count(uint64_t n, char *buf, unsigned cap)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n), o = 0;
    for (int i = 0; i < len && o + 2 < (int)cap; i++) {
        if (i && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *cli_fs_name(int64_t type)
{
    switch ((unsigned long)type) {
    case TMPFS_MAGIC:
        return "tmpfs";
    case RAMFS_MAGIC:
        return "ramfs";
    case EXT4_SUPER_MAGIC:
        return "ext2/3/4";
    case XFS_SUPER_MAGIC:
        return "xfs";
    case BTRFS_SUPER_MAGIC:
        return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
        return "overlayfs";
    case NFS_SUPER_MAGIC:
        return "nfs";
    default:
        return "a file system that is not tmpfs";
    }
}

void cli_place_warn(const char *cmd, const char *name)
{
    shl_place p;
    if (cli_etcd_name(name) || shl_place_get(name, &p) != SHL_OK || p.tmpfs != 0)
        return;
    cli_err(cmd,
            "warning: table '%s' is on %s, not tmpfs: it works, but every change may be "
            "written back to the disk (slower, and it wears the device); keep tables on "
            "tmpfs (/dev/shm, /run/lock, a tmpfs volume)",
            cli_vis(name), cli_fs_name(p.fs_type));
}

const char *cli_table_strerror(const char *name, int rc)
{
    /* SHL_EPERM's message speaks of segments and files: for an etcd table
     * the refusal is the cluster's, in the TLS handshake or at sign-in. */
    if (rc == SHL_EPERM && cli_etcd_name(name))
        return "the etcd cluster refused us: TLS (the CA, the server's or our "
               "certificate) or the user and password";
    return cli_strerror(rc);
}

void cli_open_failed(const char *cmd, const char *name, int rc)
{
    cli_err(cmd, "cannot open table '%s': %s (%s)", name, cli_table_strerror(name, rc),
            shl_errname(rc));
    cli_place_why(cmd, name, rc);
}

void cli_place_why(const char *cmd, const char *name, int rc)
{
    shl_place p;
    if ((rc != SHL_EPERM && rc != SHL_ENOENT) || cli_etcd_name(name) ||
        shl_place_get(name, &p) != SHL_OK)
        return;
    if (p.dir_safe == 0)
        cli_err(cmd,
                "the directory of '%s' may be written by users other than its owner and has "
                "no sticky bit, so any of them could replace the table: use a directory only "
                "its owner can write, or add the sticky bit (chmod +t)",
                cli_vis(p.path));
    else if (p.dir_safe < 0)
        cli_err(cmd, "the directory of '%s' does not exist", cli_vis(p.path));
}
