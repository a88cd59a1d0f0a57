/*
 * tests/helper_fuzz.c - one fuzz input: arbitrary bytes as a segment.
 *
 * Shared by the libFuzzer target (tests/fuzz/fuzz_segment.c, `make fuzz`)
 * and the corpus replay test (tests/test_corpus.c, `make test`), so that the
 * replay runs exactly the paths the fuzzer explored.
 *
 * The bytes are checked as an image, then written to a file of this
 * process's own in /dev/shm and opened as a table: whatever opens is read,
 * inspected, acquired, written, released, revoked, checked and repaired (the
 * repair changes only that private copy).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../shm/layout.h"
#include "fuzz.h"
#include "shmlease.h"

#define MS       UINT64_C(1000000)
#define FZ_NAMES 4 /* leases of the input worked on, besides one of our own */

/* A return code the library can give: 0 or one of its SHL_E* codes. */
#define FZ_CODE(rc) ((rc) <= 0 && (rc) >= SHL_ETOKENS)

static void count(void *arg, const char *problem)
{
    (void)problem;
    ++*(unsigned *)arg;
}

struct seen {
    unsigned n;
    char name[FZ_NAMES][SHL_NAME_MAX + 1];
};

static int visit(void *arg, const shl_lease_detail *d)
{
    struct seen *s = arg;
    if (s->n < FZ_NAMES)
        snprintf(s->name[s->n++], sizeof s->name[0], "%s", d->name);
    return 0;
}

static int bump(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    if (*len == 0)
        *len = cap < 4 ? cap : 4;
    if (*len)
        ((unsigned char *)value)[0] ^= 1;
    return 0;
}

/*
 * A lock word naming a live thread (or one that died without the kernel
 * marking it) blocks every locker for good: in a real table that is a holder
 * that does not let go, and the library rightly waits. A fuzzer cannot wait,
 * so every mutex of the copy is made one that never blocks: glibc's robust,
 * process-shared kind, and either free or left by a dead owner (the kernel's
 * FUTEX_OWNER_DIED, which the next locker recovers). Its owner field is
 * kept, so unrecoverable locks stay unrecoverable.
 */
#define FZ_TID_MASK   0x3fffffff
#define FZ_OWNER_DIED 0x40000000

static void tame_mutex(pthread_mutex_t *m, const pthread_mutex_t *model)
{
    int lock = m->__data.__lock & (FZ_TID_MASK | FZ_OWNER_DIED);
    m->__data.__lock = lock ? FZ_OWNER_DIED | (lock & FZ_TID_MASK) : 0;
    m->__data.__kind = model->__data.__kind;
}

/* The copy as this process can open it: its owner and time namespace are
 * those of the machine (the opener compares them with the environment, not
 * with other bytes), and no lock can block. Only what lies in the buffer. */
static void tame(unsigned char *img, size_t size)
{
    if (size < sizeof(struct shl__hdr))
        return;
    struct shl__hdr *h = (struct shl__hdr *)img;
    h->uid = (uint32_t)geteuid();
    h->timens = 0;
    pthread_mutexattr_t a;
    pthread_mutex_t model;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&model, &a);
    pthread_mutexattr_destroy(&a);
    tame_mutex(&h->table_lock, &model);
    uint64_t stride = h->slot_stride, off = h->slots_off;
    if (stride >= sizeof(struct shl__slot) && off >= sizeof *h && off % 8 == 0 && stride % 8 == 0) {
        for (uint32_t i = 0; i < h->capacity && off + stride <= size; i++, off += stride)
            tame_mutex(&((struct shl__slot *)(img + off))->lock, &model);
    }
    pthread_mutex_destroy(&model);
}

/* What a holder and a stranger can do to one lease. -1 on a broken contract. */
static int work_lease(shl_table *t, const char *lease, int manual)
{
    shl_lease_info info;
    unsigned char buf[256];
    size_t len;
    uint64_t tk = 0, now = 0;
    int rc = shl_stat(t, lease, &info);
    if (!FZ_CODE(rc))
        return -1;
    rc = shl_read(t, lease, buf, sizeof buf, &len, &tk);
    if (!FZ_CODE(rc))
        return -1;
    shl_heartbeat hb;
    shl_heartbeat_get(t, lease, &hb);
    if (manual && shl_now(t, &now) == SHL_OK)
        shl_clock_set(t, now + 5 * MS);
    const char *holder = info.owner[0] ? info.owner : "fuzz-holder";
    /* As the recorded holder, with its token: the paths that succeed. */
    shl_renew(t, lease, holder, info.token, 1000 * MS);
    shl_write(t, lease, holder, info.token, "fuzz", 4);
    shl_update(t, lease, holder, info.token, bump, NULL);
    shl_release(t, lease, holder, info.token);
    /* A newcomer: takes it or is told who holds it; then its token. */
    rc = shl_acquire_ex(t, lease, "fuzz-owner", 1000 * MS, &tk, &info);
    if (!FZ_CODE(rc))
        return -1;
    if (rc == SHL_OK) {
        shl_write(t, lease, "fuzz-owner", tk, "0123456789abcdef", 16);
        shl_read(t, lease, buf, sizeof buf, &len, NULL);
        shl_renew(t, lease, "fuzz-owner", tk - 1, 1000 * MS);
        shl_release(t, lease, "fuzz-owner", tk);
    } else if (!manual) {
        rc = shl_acquire_wait(t, lease, "fuzz-waiter", 1000 * MS, 1 * MS, &tk);
        if (!FZ_CODE(rc))
            return -1;
    }
    shl_revoke(t, lease);
    return 0;
}

/* Everything a user and an administrator can do to an open table. */
static int work_table(shl_table *t)
{
    unsigned n = 0;
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return -1;
    int manual = ti.clock == SHL_CLOCK_MANUAL;
    int rc = shl_check(t, count, &n);
    if ((rc != SHL_OK && rc != SHL_ECORRUPT) || (rc == SHL_OK) != (n == 0))
        return -1;
    struct seen s = {0};
    if (!FZ_CODE(shl_foreach(t, visit, &s)))
        return -1;
    shl_lease_detail d;
    shl_inspect_slot(t, 0, &d);
    for (unsigned i = 0; i < s.n; i++)
        if (work_lease(t, s.name[i], manual) != 0)
            return -1;
    if (work_lease(t, "fuzz-lease", manual) != 0)
        return -1;
    rc = shl_repair(t, SHL_REPAIR_DRY_RUN, count, &n);
    if (rc != SHL_OK && rc != SHL_ECORRUPT)
        return -1;
    rc = shl_repair(t, 0, count, &n);
    if (rc != SHL_OK && rc != SHL_ECORRUPT)
        return -1;
    n = 0;
    rc = shl_check(t, count, &n);
    if ((rc != SHL_OK && rc != SHL_ECORRUPT) || (rc == SHL_OK) != (n == 0))
        return -1;
    return shl_foreach(t, visit, &s) == SHL_OK ? 0 : -1;
}

int fz_one(const uint8_t *data, size_t size)
{
    unsigned n = 0;
    /* The bytes themselves: validation and every check. */
    int rc = shl_check_image(data, size, count, &n);
    if (rc != SHL_OK && rc != SHL_ECORRUPT && rc != SHL_EVERSION)
        return -1;
    if ((rc == SHL_OK) != (n == 0))
        return -1;
    unsigned char *img = malloc(size ? size : 1);
    if (!img)
        return 0;
    memcpy(img, data, size);
    tame(img, size);
    char name[64], path[96];
    snprintf(name, sizeof name, "shlfuzz-%d", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(img);
        return 0;
    }
    fchmod(fd, 0600);
    ssize_t w = size ? write(fd, img, size) : 0;
    close(fd);
    free(img);
    rc = 0;
    shl_table *t;
    if (w == (ssize_t)size && shl_open(name, NULL, &t) == SHL_OK) {
        rc = work_table(t);
        shl_close(t);
    }
    unlink(path);
    return rc;
}
