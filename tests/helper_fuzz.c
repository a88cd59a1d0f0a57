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
#include "../shm/segment.h"
#include "fuzz.h"
#include "run_mark.h"
#include "shmlease.h"

#define MS       UINT64_C(1000000)
#define FZ_NAMES 4 /* leases of the input worked on, besides one of our own */

/* A return code the library can give: 0 or one of its SHL_E* codes. */
#define FZ_CODE(rc) ((rc) <= 0 && (rc) >= SHL_ETOKENS)

/* Any result will do: the fuzzer looks for crashes and damage, and its
 * calls on a mangled table may each be refused. */
static void any(int rc)
{
    (void)rc;
}

static void count(void *arg, const char *problem)
{
    (void)problem;
    ++*(unsigned *)arg;
}

struct seen {
    unsigned n;
    char name[FZ_NAMES][SHL_NAME_MAX + 1];
};

/* Whether the header's slot offset and stride can be walked within `size`
 * bytes (trusted no further: each slot is bounded by size on its own). */
static int slots_walkable(const struct shl__hdr *h, size_t size)
{
    uint64_t stride = h->slot_stride, off = h->slots_off;
    return stride >= sizeof(struct shl__slot) && stride % 8 == 0 && stride <= size &&
           off >= sizeof *h && off % 8 == 0 && off <= size;
}

/* The names of the input's first leases, from its bytes: asking the library
 * (shl_foreach) would wait out its bound on every slot left mid-change. */
static void names_of(const unsigned char *img, size_t size, struct seen *s)
{
    const struct shl__hdr *h = (const struct shl__hdr *)img;
    if (size < sizeof *h || !slots_walkable(h, size))
        return;
    uint64_t stride = h->slot_stride, off = h->slots_off;
    for (uint32_t i = 0; i < h->capacity && s->n < FZ_NAMES && off + stride <= size;
         i++, off += stride) {
        const struct shl__slot *sl = (const struct shl__slot *)(img + off);
        if (sl->name_len == 0 || sl->name_len > SHL_NAME_MAX)
            continue;
        memcpy(s->name[s->n], sl->name, sl->name_len);
        s->name[s->n++][sl->name_len] = '\0';
    }
}

static int visit(void *arg, const shl_lease_detail *d)
{
    (void)d;
    ++*(unsigned *)arg;
    return 0;
}

static void guarded(void *arg)
{
    ++*(unsigned *)arg;
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

static int tame_mutex(pthread_mutex_t *m, const pthread_mutex_t *model)
{
    int lock = m->__data.__lock & (FZ_TID_MASK | FZ_OWNER_DIED);
    m->__data.__lock = lock ? FZ_OWNER_DIED | (lock & FZ_TID_MASK) : 0;
    m->__data.__kind = model->__data.__kind;
    return lock != 0;
}

/* A slot's seq is odd only while its lock is held: a writer that died
 * leaves both. An odd seq under a free lock (every other mutated seq) would
 * only make every reader wait out its bound, at the cost of fuzzing speed. */
static void tame_slot(struct shl__slot *s, const pthread_mutex_t *model)
{
    if (!tame_mutex(&s->lock, model))
        atomic_store_explicit(&s->seq, s->seq & ~1u, memory_order_relaxed);
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
    h->timens = shl__timens_id();
    pthread_mutexattr_t a;
    pthread_mutex_t model;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&model, &a);
    pthread_mutexattr_destroy(&a);
    (void)tame_mutex(&h->table_lock, &model);
    uint64_t stride = h->slot_stride, off = h->slots_off;
    if (slots_walkable(h, size)) {
        for (uint32_t i = 0; i < h->capacity && off + stride <= size; i++, off += stride)
            tame_slot((struct shl__slot *)(img + off), &model);
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
    /* After stat and read: they lock a slot left mid-change (recovering it),
     * where inspection would wait out its bound for the change to end. */
    shl_lease_detail d;
    shl_inspect(t, lease, &d);
    shl_heartbeat hb;
    shl_heartbeat_get(t, lease, &hb);
    if (manual && shl_now(t, &now) == SHL_OK)
        shl_clock_set(t, now + 5 * MS);
    const char *holder = info.owner[0] ? info.owner : "fuzz-holder";
    /* As the recorded holder, with its token: the paths that succeed. */
    any(shl_renew(t, lease, holder, info.token, 1000 * MS));
    any(shl_write(t, lease, holder, info.token, "fuzz", 4));
    any(shl_update(t, lease, holder, info.token, bump, NULL));
    unsigned calls = 0;
    any(shl_guard(t, lease, holder, info.token, guarded, &calls));
    any(shl_release(t, lease, holder, info.token));
    /* A newcomer: takes it or is told who holds it; then its token. */
    rc = shl_acquire_ex(t, lease, "fuzz-owner", 1000 * MS, &tk, &info);
    if (!FZ_CODE(rc))
        return -1;
    if (rc == SHL_OK) {
        any(shl_write(t, lease, "fuzz-owner", tk, "0123456789abcdef", 16));
        any(shl_read(t, lease, buf, sizeof buf, &len, NULL));
        any(shl_renew(t, lease, "fuzz-owner", tk - 1, 1000 * MS));
        any(shl_release(t, lease, "fuzz-owner", tk));
    } else if (!manual) {
        rc = shl_acquire_wait(t, lease, "fuzz-waiter", 1000 * MS, MS / 5, &tk);
        if (!FZ_CODE(rc))
            return -1;
    }
    shl_revoke(t, lease);
    return 0;
}

/* An administrator's dry run, then repair; -1 on a broken contract. */
static int repair(shl_table *t)
{
    unsigned n = 0;
    int rc = shl_repair(t, SHL_REPAIR_DRY_RUN, count, &n);
    if (rc != SHL_OK && rc != SHL_ECORRUPT)
        return -1;
    rc = shl_repair(t, 0, count, &n);
    return rc == SHL_OK || rc == SHL_ECORRUPT ? 0 : -1;
}

/* A bound lease's whole life on a name of our own. */
static int work_bound(shl_table *t)
{
    shl_lease *l;
    int rc = shl_lease_open(t, "fuzz-bound", "fuzz-owner", &l);
    if (rc != SHL_OK)
        return FZ_CODE(rc) ? 0 : -1;
    uint64_t tk;
    unsigned calls = 0;
    unsigned char buf[64];
    size_t len;
    shl_lease_info holder;
    rc = shl_lease_acquire(l, 1000 * MS, &tk, &holder);
    if (rc == SHL_OK) {
        any(shl_lease_write(l, tk, "bound", 5));
        any(shl_lease_guard(l, tk, guarded, &calls));
        any(shl_lease_read(l, buf, sizeof buf, &len, NULL));
        any(shl_lease_renew(l, tk, 1000 * MS));
        any(shl_lease_release(l, tk));
    }
    shl_lease_close(l);
    return FZ_CODE(rc) ? 0 : -1;
}

/* What the last byte of an input chooses. */
#define FZ_REPAIR_FIRST 1u /* shl_repair() before the lease operations */
#define FZ_LOOK_FIRST   2u /* shl_check() and shl_foreach() before them too */

/* A live check: -1 when its verdict and its reports disagree. */
static int check(shl_table *t)
{
    unsigned n = 0;
    int rc = shl_check(t, count, &n);
    return (rc == SHL_OK || rc == SHL_ECORRUPT) && (rc == SHL_OK) == (n == 0) ? 0 : -1;
}

/* Inspection of every lease. */
static int look(shl_table *t)
{
    unsigned n = 0;
    return FZ_CODE(shl_foreach(t, visit, &n)) ? 0 : -1;
}

/* Everything a user and an administrator can do to an open table. A lock
 * left by a dead owner is recovered by whoever takes it first: the lease
 * operations' handler, or shl_repair() (FZ_REPAIR_FIRST). Inspection before
 * any lock was taken (FZ_LOOK_FIRST) sees slots left mid-change and waits
 * out its bound for each: slow, so not for every input. */
static int work_table(shl_table *t, const struct seen *s, unsigned how)
{
    shl_table_info ti;
    if (shl_table_info_get(t, &ti) != SHL_OK)
        return -1;
    int manual = ti.clock == SHL_CLOCK_MANUAL;
    if ((how & FZ_LOOK_FIRST) && (check(t) != 0 || look(t) != 0))
        return -1;
    if ((how & FZ_REPAIR_FIRST) && repair(t) != 0)
        return -1;
    for (unsigned i = 0; i < s->n; i++)
        if (work_lease(t, s->name[i], manual) != 0)
            return -1;
    if (work_lease(t, "fuzz-lease", manual) != 0 || work_bound(t) != 0)
        return -1;
    if (repair(t) != 0 || check(t) != 0 || look(t) != 0)
        return -1;
    return 0;
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
    struct seen names = {0};
    names_of(img, size, &names);
    char name[64], path[96];
    snprintf(name, sizeof name, "shlfuzz-%d-%sreplay", (int)getpid(), t_run_mark());
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
    /* The file as the inspector sees a table that may not open. */
    rc = shl_check_name(name, count, &n);
    if (!FZ_CODE(rc)) {
        unlink(path);
        return -1;
    }
    rc = 0;
    shl_table *t;
    if (w == (ssize_t)size && shl_open(name, NULL, &t) == SHL_OK) {
        rc = work_table(t, &names, data[size - 1]);
        shl_close(t);
    }
    unlink(path);
    return rc;
}
