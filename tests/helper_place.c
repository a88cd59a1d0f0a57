/*
 * tests/helper_place.c - a tmpfs of the test's own (place_util.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "place_util.h"

void place_tmpfs(char *dir, size_t cap, const char *size)
{
    dir[0] = 0;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        cr_skip_test("cannot make a mount namespace: %s", strerror(errno));
    snprintf(dir, cap, "/tmp/shlplace-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0700", size);
    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
        int e = errno;
        rmdir(dir);
        dir[0] = 0;
        cr_skip_test("cannot mount a tmpfs: %s", strerror(e));
    }
}

void place_cleanup(char *dir)
{
    if (!dir[0])
        return;
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    dir[0] = 0;
}
