/*
 * tests/helper_fuzz.c - one fuzz input: arbitrary bytes as a segment.
 *
 * Shared by the libFuzzer target (tests/fuzz/fuzz_segment.c, `make fuzz`)
 * and the corpus replay test (tests/test_corpus.c, `make test`).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "shmlease.h"

static void ignore(void *arg, const char *problem)
{
    (void)problem;
    ++*(unsigned *)arg;
}

static int visit(void *arg, const shl_lease_detail *d)
{
    (void)d;
    ++*(unsigned *)arg;
    return 0;
}

int fz_one(const uint8_t *data, size_t size)
{
    unsigned n = 0;
    /* The bytes themselves: validation and every check. */
    int rc = shl_check_image(data, size, ignore, &n);
    if (rc != SHL_OK && rc != SHL_ECORRUPT && rc != SHL_EVERSION)
        return -1;
    if ((rc == SHL_OK) != (n == 0))
        return -1;
    /* The same bytes as a segment in /dev/shm: open validates them; what
     * opens is inspected (never locked: garbage mutexes could block). */
    char name[64], path[96];
    snprintf(name, sizeof name, "shlfuzz-%d", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    fchmod(fd, 0600);
    ssize_t w = size ? write(fd, data, size) : 0;
    close(fd);
    if (w == (ssize_t)size) {
        shl_table *t;
        if (shl_open(name, NULL, &t) == SHL_OK) {
            shl_check(t, ignore, &n);
            shl_foreach(t, visit, &n);
            shl_close(t);
        }
    }
    unlink(path);
    return 0;
}
