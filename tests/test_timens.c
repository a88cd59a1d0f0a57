/*
 * tests/test_timens.c - two processes share a table only when they are
 * proven to share CLOCK_MONOTONIC: both can read their time namespace and
 * it is the same one (or both prove their kernel has none). A process that
 * cannot read it (no /proc: a chroot, a container) is refused, as opener or
 * creator, unless SHMLEASE_NO_TIMENS=1 says the host has no time namespaces.
 *
 * The children really lose /proc: a mount namespace of their own, mounts
 * made private, /proc detached. That needs root (CAP_SYS_ADMIN); without it
 * the tests say they cannot run here.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"
#include "../shm/segment.h"

#define CANNOT 99 /* a child's status: this machine does not let it drop /proc */

/* In a mount namespace of its own, mounts private: changes stay in it. */
static int own_mounts(void)
{
    if (unshare(CLONE_NEWNS) != 0)
        return -1;
    return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

/* This process without /proc, as in a chroot or a container without it. */
static int drop_proc(void)
{
    struct stat st;
    if (own_mounts() != 0 || umount2("/proc", MNT_DETACH) != 0)
        return -1;
    return stat("/proc/self/ns/time", &st) == 0 ? -1 : 0;
}

/* This process with /proc, but a /proc/self/ns without "time", as on a
 * kernel without time namespaces (before Linux 5.6): another procfs
 * directory mounted over it. */
static int hide_time_ns(void)
{
    char ns[64], tns[80], other[64];
    snprintf(ns, sizeof ns, "/proc/%d/ns", (int)getpid());
    snprintf(tns, sizeof tns, "/proc/%d/task/%d/ns", (int)getpid(), (int)syscall(SYS_gettid));
    snprintf(other, sizeof other, "/proc/%d/fdinfo", (int)getpid());
    /* Both the process's and the thread's ns/ (/proc/self, /proc/thread-self). */
    if (own_mounts() != 0 || mount(other, ns, NULL, MS_BIND, NULL) != 0 ||
        mount(other, tns, NULL, MS_BIND, NULL) != 0)
        return -1;
    struct stat st;
    if (stat("/proc/self/ns/time", &st) == 0 || errno != ENOENT)
        return -1;
    return stat("/proc/thread-self/ns/time", &st) == 0 || errno != ENOENT ? -1 : 0;
}

static void opt_in(int on)
{
    if (on)
        setenv("SHMLEASE_NO_TIMENS", "1", 1);
    else
        unsetenv("SHMLEASE_NO_TIMENS");
}

static shl_table *create_opts(const char *name, int *rc)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 8;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    *rc = shl_open(name, &o, &t);
    return t;
}

static const char *table; /* what the children open */

/* A new table named after `tag`, made here (this process can read its time
 * namespace): the one the children try. */
static shl_table *parent_table(char *name, size_t cap, const char *tag)
{
    int rc;
    shl_table *t = create_opts(t_name(name, cap, tag), &rc);
    cr_assert_eq(rc, SHL_OK, "%s", shl_strerror(rc));
    table = name;
    return t;
}

/* Opens `name` and takes a lease in it: 0, or 10 + -rc. */
static int open_and_use(const char *name)
{
    shl_table *t;
    uint64_t tok;
    int rc = shl_open(name, NULL, &t);
    if (rc != SHL_OK)
        return 10 + -rc;
    rc = shl_acquire(t, "x", "child", SEC, &tok);
    if (rc == SHL_OK)
        rc = shl_release(t, "x", "child", tok);
    shl_close(t);
    return rc == SHL_OK ? 0 : 40 + -rc;
}

static void skip_if_cannot(int st)
{
    if (st == CANNOT)
        cr_skip("this machine does not let a child drop /proc (not root, or no mount "
                "namespaces): not run");
}

/* ------------------------------------------------ an opener without /proc */

static int opener_without_proc(void *arg)
{
    (void)arg;
    if (drop_proc() != 0)
        return CANNOT;
    if (shl__timens_id() != 0)
        return 1;
    opt_in(0);
    shl_table *t;
    int rc = shl_open(table, NULL, &t);
    if (rc != SHL_ETIMENS)
        return 10 + -rc;
    if (!strstr(shl_strerror(rc), "/proc"))
        return 2; /* the message says what is missing */
    opt_in(1);
    return open_and_use(table) ? 3 : 0;
}

Test(timens, opener_without_proc_is_refused_unless_opted_in)
{
    char name[96];
    shl_table *t = parent_table(name, sizeof name, "tnsopen");
    int st = t_wait(t_fork(opener_without_proc, NULL));
    shl_close(t);
    shl_unlink(name);
    skip_if_cannot(st);
    cr_assert_eq(st, 0, "opener without /proc: status %d (10 + %d: %s)", st, st - 10,
                 st >= 10 ? shl_strerror(-(st - 10)) : "");
}

/* The harm the rule prevents: a process whose CLOCK_MONOTONIC runs an hour
 * ahead (a time namespace of its own) and which has no /proc to tell it.
 * Admitted, it would take over a lease with a minute left. */
static int ahead_without_proc(void *arg)
{
    (void)arg;
    if (drop_proc() != 0)
        return CANNOT;
    opt_in(0);
    shl_table *t;
    int rc = shl_open(table, NULL, &t);
    if (rc == SHL_ETIMENS)
        return 0;
    if (rc != SHL_OK)
        return 10 + -rc;
    uint64_t tok;
    rc = shl_acquire(t, "held", "ahead", SEC, &tok);
    shl_close(t);
    return rc == SHL_OK ? 2 : 1; /* 2: it took the lease over */
}

static int in_time_ns_ahead(void *arg)
{
    if (unshare(CLONE_NEWTIME) != 0)
        return CANNOT;
    FILE *f = fopen("/proc/self/timens_offsets", "w");
    if (!f)
        return CANNOT;
    int ok = fprintf(f, "monotonic 3600 0\n") > 0;
    if (fclose(f) != 0 || !ok)
        return CANNOT;
    return t_wait(t_fork(ahead_without_proc, arg)); /* the child enters it */
}

Test(timens, clock_ahead_without_proc_takes_nothing_over)
{
    char name[96];
    shl_table *t = parent_table(name, sizeof name, "tnsahead");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "held", "here", 60 * SEC, &tok), SHL_OK);
    table = name;
    int st = t_wait(t_fork(in_time_ns_ahead, NULL));
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "held", &in), SHL_OK); /* still the parent's */
    shl_close(t);
    shl_unlink(name);
    skip_if_cannot(st);
    cr_assert_neq(st, 2, "a process an hour ahead took over a lease with 60 s left");
    cr_assert_eq(st, 0, "status %d", st);
    cr_assert_str_eq(in.owner, "here");
}

/* ------------------------------------------------ a creator without /proc */

static int creator_without_proc(void *arg)
{
    (void)arg;
    if (drop_proc() != 0)
        return CANNOT;
    opt_in(0);
    int rc;
    shl_table *t = create_opts(table, &rc);
    if (rc != SHL_ETIMENS)
        return 10 + -rc;
    opt_in(1);
    if (!(t = create_opts(table, &rc)))
        return 40 + -rc;
    shl_close(t);
    return 0;
}

/* A creator that cannot read its time namespace records "unknown": refused
 * without the opt-in; with it, made, and then every opener is refused that
 * has not opted in too, whatever its own namespace. */
Test(timens, creator_without_proc_is_refused_unless_opted_in)
{
    char name[96];
    t_name(name, sizeof name, "tnscreate");
    table = name;
    int st = t_wait(t_fork(creator_without_proc, NULL));
    skip_if_cannot(st);
    cr_assert_eq(st, 0, "creator without /proc: status %d", st);
    shl_table *t;
    opt_in(0);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ETIMENS,
                 "an opener that can read its namespace took one nobody knows");
    opt_in(1);
    cr_assert_eq(open_and_use(name), 0);
    opt_in(0);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* ------------------------------------------------ a kernel without them */

static const char *other_table;

static int without_time_ns(void *arg)
{
    int phase = (int)(intptr_t)arg;
    if (hide_time_ns() != 0)
        return CANNOT;
    if (shl__timens_id() != SHL__TIMENS_NONE)
        return 1;
    opt_in(0);
    if (phase == 0) { /* create one; one made with a namespace is refused */
        int rc;
        shl_table *t = create_opts(other_table, &rc);
        if (!t)
            return 10 + -rc;
        shl_close(t);
        shl_table *o;
        rc = shl_open(table, NULL, &o);
        return rc == SHL_ETIMENS ? 0 : 40 + -rc;
    }
    return open_and_use(other_table); /* another process of that kernel */
}

/* Where the kernel has no time namespaces (/proc there, no ns/time entry)
 * every process shares one CLOCK_MONOTONIC: such processes share tables
 * without the opt-in. One that has a namespace is another kernel's: refused
 * both ways. */
Test(timens, kernel_without_time_namespaces_shares_without_opt_in)
{
    char name[96], other[96];
    shl_table *t = parent_table(name, sizeof name, "tnshas");
    other_table = t_name(other, sizeof other, "tnsnone");
    int st = t_wait(t_fork(without_time_ns, (void *)(intptr_t)0));
    if (st == 0)
        st = t_wait(t_fork(without_time_ns, (void *)(intptr_t)1));
    shl_close(t);
    shl_unlink(name);
    skip_if_cannot(st);
    cr_assert_eq(st, 0, "status %d", st);
    shl_table *o;
    cr_assert_eq(shl_open(other, NULL, &o), SHL_ETIMENS);
    cr_assert_eq(shl_unlink(other), SHL_OK);
}
