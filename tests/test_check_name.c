/*
 * tests/test_check_name.c - shl_check_name() on a table file that is not
 * what its header says: grown far beyond it, or truncated while it is read.
 * The check runs in forked children, so that its memory use can be measured
 * alone and a SIGBUS is a failed test rather than a crashed suite.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"

#define GROWN     (UINT64_C(1) << 30) /* 1 GiB, sparse */
#define RSS_LIMIT (64 * 1024)         /* KiB: far below one copy of the file */

struct collected {
    int rc;
    int size_reported; /* a problem named the file's size */
    long rss_growth;   /* KiB of peak resident memory the check added */
    unsigned problems;
};

static void collect(void *arg, const char *problem)
{
    struct collected *c = arg;
    char grown[32];
    snprintf(grown, sizeof grown, "%llu", (unsigned long long)GROWN);
    c->problems++;
    if (strstr(problem, grown))
        c->size_reported = 1;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

static struct collected *shared_collected(void)
{
    struct collected *p =
        mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    memset(p, 0, sizeof *p);
    return p;
}

struct grown_arg {
    const char *name;
    struct collected *out;
};

static int check_in_child(void *arg)
{
    struct grown_arg *g = arg;
    alarm(60);
    struct collected c = {0};
    long before = peak_rss_kib();
    c.rc = shl_check_name(g->name, collect, &c);
    c.rss_growth = peak_rss_kib() - before;
    *g->out = c;
    return 0;
}

/* A table file grown to 1 GiB (sparse) behind its header's back: the check
 * reads the header, then only what the header describes, and reports the
 * size; it never copies the gigabyte. */
Test(check_name, grown_file_not_copied)
{
    char name[96], path[160];
    t_name(name, sizeof name, "grown");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    shl_table *t = t_create(name, 64, 32, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "a", "me", 3600 * SEC, &tok), SHL_OK);
    shl_close(t);
    cr_assert_eq(shl_check_name(name, NULL, NULL), SHL_OK, "healthy before it grows");

    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, (off_t)GROWN), 0);
    close(fd);
    struct grown_arg g = {name, shared_collected()};
    cr_assert_eq(t_wait(t_fork(check_in_child, &g)), 0);
    cr_assert_eq(g.out->rc, SHL_ECORRUPT, "%s", shl_errname(g.out->rc));
    cr_assert(g.out->size_reported, "the file's size was not reported (%u problems)",
              g.out->problems);
    cr_assert_lt(g.out->rss_growth, RSS_LIMIT, "the check grew by %ld KiB", g.out->rss_growth);
    munmap(g.out, sizeof *g.out);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

/* Truncated to nothing and written back, over and over, while another
 * process checks it: every check returns (no SIGBUS), with a verdict. */
struct churn {
    const char *path;
    const void *image;
    size_t size;
    _Atomic int *stop; /* shared */
};

static int truncator(void *arg)
{
    const struct churn *c = arg;
    int fd = open(c->path, O_RDWR);
    if (fd < 0)
        return 1;
    alarm(60);
    while (!atomic_load(c->stop)) {
        if (ftruncate(fd, 0) != 0 || pwrite(fd, c->image, c->size, 0) != (ssize_t)c->size)
            return 2;
    }
    close(fd);
    return 0;
}

static int checker(void *arg)
{
    const char *name = arg;
    alarm(60);
    for (int i = 0; i < 300; i++) {
        int rc = shl_check_name(name, NULL, NULL);
        if (rc != SHL_OK && rc != SHL_ECORRUPT)
            return 10;
    }
    return 0;
}

Test(check_name, truncated_while_checked)
{
    char name[96], path[160];
    t_name(name, sizeof name, "shrink");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    shl_table *t = t_create(name, 4096, 256, SHL_CLOCK_MONOTONIC);
    for (int i = 0; i < 64; i++) {
        char lease[16];
        uint64_t tok;
        snprintf(lease, sizeof lease, "l%d", i);
        cr_assert_eq(shl_acquire(t, lease, "me", 3600 * SEC, &tok), SHL_OK);
    }
    shl_close(t);
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0);
    off_t size = lseek(fd, 0, SEEK_END);
    cr_assert_gt(size, 0);
    void *image = malloc((size_t)size);
    cr_assert_eq(pread(fd, image, (size_t)size, 0), size);
    close(fd);

    _Atomic int *stop =
        mmap(NULL, sizeof *stop, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(stop != MAP_FAILED);
    atomic_store(stop, 0);
    struct churn c = {path, image, (size_t)size, stop};
    pid_t tp = t_fork(truncator, &c);
    int st = t_wait(t_fork(checker, name));
    atomic_store(stop, 1);
    cr_assert_eq(t_wait(tp), 0, "the truncator failed");
    cr_assert_neq(st, 128 + SIGBUS, "the check died of SIGBUS on a shrinking file");
    cr_assert_eq(st, 0, "checker status %d", st);
    munmap(stop, sizeof *stop);
    free(image);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
