/*
 * tests/fuzz/mkcorpus.c - makes the fuzz seeds (tests/corpus/) from this build.
 *
 * `make corpus` runs it. Seeds are segment images, so they carry the format
 * word of the build that made them: a seed from another layout is refused at
 * the header, and a fuzzer started from it never reaches the rest. Every
 * layout change is therefore followed by `make corpus` (test_corpus fails
 * until it is run).
 *
 * Each seed is a real table on /dev/shm, brought into a state by the library
 * itself (or, for the crashed ones, by a forked child killed at a crash point
 * of the test build), whose bytes are then copied. The name says what
 * shl_check_image() must answer (tests/test_corpus.c holds it to that):
 * seed-ok-* pass, seed-corrupt-* are SHL_ECORRUPT, seed-version-* are
 * SHL_EVERSION.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/kind_shm/crashpoint.h"
#include "../../shm/layout.h"
#include "shmlease.h"

#define MS UINT64_C(1000000)

/* The result of a call made to be killed inside (or to wait until the
 * parent kills it): there is none to judge. */
static void dies_inside(int rc)
{
    (void)rc;
}

static const char *out_dir;
static unsigned made;

static void die(const char *what, int rc)
{
    fprintf(stderr, "mkcorpus: %s: %s\n", what, rc ? shl_strerror(rc) : strerror(errno));
    exit(1);
}

static void must(int rc, const char *what)
{
    if (rc != SHL_OK)
        die(what, rc);
}

static void table_name(char *buf, size_t cap, const char *tag)
{
    snprintf(buf, cap, "shlcorpus-%d-%s", (int)getpid(), tag);
}

static shl_table *create(const char *name, uint32_t capacity, uint32_t value_size, int clock,
                         unsigned policy, const char *state)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = value_size;
    o.clock = clock;
    o.policy = policy;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.token_state_path = state;
    shl_table *t;
    must(shl_open(name, &o, &t), name);
    return t;
}

/* The bytes of table `name`'s segment (malloc'd). */
static unsigned char *image(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(path, 0);
    unsigned char *buf = malloc((size_t)st.st_size);
    if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
        die(path, 0);
    close(fd);
    *len = (size_t)st.st_size;
    return buf;
}

static void save(const char *seed, const void *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-%s", out_dir, seed);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        die(path, 0);
    made++;
}

/* Saves table `name` as it is now, then removes it. */
static void save_table(const char *seed, const char *name)
{
    size_t len;
    unsigned char *buf = image(name, &len);
    save(seed, buf, len);
    free(buf);
    shl_unlink(name);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int add_one(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    if (*len == 0 || *len > cap)
        return 1;
    ((unsigned char *)value)[0]++;
    return 0;
}

/* ------------------------------------------------------------ healthy */

static void seed_empty(void)
{
    char name[128];
    table_name(name, sizeof name, "empty");
    shl_close(create(name, 4, 16, SHL_CLOCK_MONOTONIC, 0, NULL));
    save_table("ok-empty", name);
}

/* Every holder state and most history kinds on one monotonic table: held
 * with a value, released, expired, revoked, rejections of each kind, an
 * update, a bound lease, shared holders. */
static void leases_table(const char *name)
{
    shl_table *t = create(name, 8, 32, SHL_CLOCK_MONOTONIC, 0, NULL);
    uint64_t tk, old;
    must(shl_acquire(t, "alpha", "worker-1", 60000 * MS, &tk), "alpha");
    must(shl_write(t, "alpha", "worker-1", tk, "alpha's value", 13), "write alpha");
    must(shl_update(t, "alpha", "worker-1", tk, add_one, NULL), "update alpha");
    must(shl_renew(t, "alpha", "worker-1", tk, 60000 * MS), "renew alpha");
    if (shl_write(t, "alpha", "intruder", tk, "x", 1) != SHL_ELOST)
        die("wrong owner written", SHL_EINVAL);
    must(shl_acquire(t, "beta", "worker-2", 60000 * MS, &old), "beta");
    must(shl_write(t, "beta", "worker-2", old, "beta", 4), "write beta");
    must(shl_release(t, "beta", "worker-2", old), "release beta");
    must(shl_acquire(t, "beta", "worker-2", 60000 * MS, &tk), "beta again");
    if (shl_renew(t, "beta", "worker-2", old, 1000 * MS) != SHL_ELOST)
        die("stale token renewed", SHL_EINVAL);
    must(shl_release(t, "beta", "worker-2", tk), "release beta again");
    must(shl_acquire(t, "gamma", "worker-3", 1 * MS, &tk), "gamma");
    sleep_ms(3);
    if (shl_write(t, "gamma", "worker-3", tk, "late", 4) != SHL_ELOST)
        die("expired holder wrote", SHL_EINVAL);
    must(shl_acquire(t, "delta", "worker-4", 60000 * MS, &tk), "delta");
    must(shl_revoke(t, "delta"), "revoke delta");
    shl_lease *l;
    must(shl_lease_open(t, "epsilon", "bound owner", &l), "epsilon");
    must(shl_lease_acquire(l, 60000 * MS, &tk, NULL), "acquire epsilon");
    must(shl_lease_write(l, tk, "bound", 5), "write epsilon");
    shl_lease_close(l);
    /* Readers: two held (their group taken from the reader pool), one
     * gone. */
    for (int i = 0; i < 3; i++) {
        char owner[16];
        snprintf(owner, sizeof owner, "reader-%d", i);
        must(shl_acquire_shared(t, "readers", owner, 60000 * MS, &tk, NULL), "readers");
    }
    must(shl_release(t, "readers", "reader-2", tk), "release readers");
    shl_close(t);
}

static void seed_leases(void)
{
    char name[128];
    table_name(name, sizeof name, "leases");
    leases_table(name);
    save_table("ok-leases", name);
}

/* A manual clock, the orphan policy, takeovers and a history that wrapped. */
static void seed_manual(void)
{
    char name[128];
    table_name(name, sizeof name, "manual");
    shl_table *t = create(name, 2, 8, SHL_CLOCK_MANUAL, SHL_POLICY_RECLAIM_ORPHANS, NULL);
    uint64_t now = 1000 * MS, tk;
    must(shl_clock_set(t, now), "clock");
    for (int i = 0; i < 12; i++) {
        char owner[16];
        snprintf(owner, sizeof owner, "owner-%d", i % 3);
        must(shl_acquire(t, "ticker", owner, 10 * MS, &tk), "ticker");
        must(shl_write(t, "ticker", owner, tk, &i, sizeof i < 8 ? sizeof i : 8), "write ticker");
        now += 11 * MS; /* past the expiry: the next one takes over */
        must(shl_clock_set(t, now), "clock");
    }
    must(shl_acquire(t, "held", "keeper", 500 * MS, &tk), "held");
    shl_close(t);
    save_table("ok-manual", name);
}

/* Values in spare buffers and at home: five leases written in turn on a
 * table of two spare value buffers, so that writes take spares back from
 * one another (the value of the lease that kept one copied home). */
static void seed_values(void)
{
    char name[128];
    table_name(name, sizeof name, "values");
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = 24;
    o.spare_values = 2;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    must(shl_open(name, &o, &t), name);
    static const char *const leases[] = {"v0", "v1", "v2", "v3", "v4"};
    uint64_t tk[5];
    for (int i = 0; i < 5; i++)
        must(shl_acquire(t, leases[i], "writer", 60000 * MS, &tk[i]), leases[i]);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 5; i++) {
            char v[24];
            int n = snprintf(v, sizeof v, "%s round %d", leases[i], round);
            must(shl_write(t, leases[i], "writer", tk[i], v, (size_t)n), "write");
        }
    shl_close(t);
    save_table("ok-values", name);
}

/* A table with a token floor (its tokens start above an epoch's base). */
static void seed_floor(void)
{
    char dir[] = "/tmp/shlcorpus-XXXXXX", state[64], cmd[96], name[128];
    if (!mkdtemp(dir))
        die("mkdtemp", 0);
    snprintf(state, sizeof state, "%s/tokens", dir);
    table_name(name, sizeof name, "floor");
    shl_table *t = create(name, 2, 0, SHL_CLOCK_MONOTONIC, 0, state);
    uint64_t tk;
    must(shl_acquire(t, "floored", "owner", 60000 * MS, &tk), "floored");
    must(shl_release(t, "floored", "owner", tk), "release floored");
    must(shl_acquire(t, "floored", "owner", 60000 * MS, &tk), "floored again");
    shl_close(t);
    save_table("ok-floor", name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        die("rm state dir", 0);
}

/* A renewer beating and a waiter queued, both alive when the image is taken. */
static void seed_live(void)
{
    char name[128];
    table_name(name, sizeof name, "live");
    shl_table *t = create(name, 2, 16, SHL_CLOCK_MONOTONIC, 0, NULL);
    uint64_t tk;
    must(shl_acquire(t, "renewed", "renewing owner", 300 * MS, &tk), "renewed");
    shl_renewer *r;
    must(shl_renewer_start(t, "renewed", "renewing owner", tk, 300 * MS, NULL, &r), "renewer");
    pid_t pid = fork();
    if (pid < 0)
        die("fork", 0);
    if (pid == 0) {
        shl_table *c;
        uint64_t ct;
        if (shl_open(name, NULL, &c) != SHL_OK)
            _exit(3);
        dies_inside(shl_acquire_wait(c, "renewed", "waiting owner", 1000 * MS, 60000 * MS, &ct));
        _exit(0);
    }
    shl_lease_info info;
    for (int i = 0; i < 5000; i++) {
        if (shl_stat(t, "renewed", &info) == SHL_OK && info.waiters > 0)
            break;
        sleep_ms(1);
    }
    if (info.waiters == 0)
        die("the waiter never queued", SHL_ETIMEDOUT);
    sleep_ms(120); /* a heartbeat or two */
    size_t len;
    unsigned char *buf = image(name, &len);
    save("ok-live", buf, len);
    free(buf);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    shl_renewer_stop(r, 0);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------------------ crashed */

/* What a killed child was doing. */
enum crash_op { OP_ACQUIRE, OP_WRITE, OP_RENEW, OP_REVOKE, OP_ADD, OP_RELEASE };

/* Forks a child that opens `name` and dies at crash point `cp` inside `op`
 * on lease "alpha" (held by worker-1 with a value, see leases_table). */
static void crash_child(const char *name, int cp, enum crash_op op)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork", 0);
    if (pid == 0) {
        shl_table *t;
        if (shl_open(name, NULL, &t) != SHL_OK)
            _exit(3);
        shl_lease_info info;
        if (shl_stat(t, "alpha", &info) != SHL_OK)
            _exit(3);
        char cpv[32];
        snprintf(cpv, sizeof cpv, "%d", cp);
        setenv("SHL_CRASHPOINT", cpv, 1);
        shl__crashpoint_reset();
        uint64_t tk;
        switch (op) {
        case OP_ACQUIRE:
            shl_revoke(t, "alpha");
            dies_inside(shl_acquire(t, "alpha", "crasher", 60000 * MS, &tk));
            break;
        case OP_WRITE:
            dies_inside(
                shl_write(t, "alpha", "worker-1", info.token, "a new value, never committed", 28));
            break;
        case OP_RENEW:
            dies_inside(shl_renew(t, "alpha", "worker-1", info.token, 90000 * MS));
            break;
        case OP_REVOKE:
            shl_revoke(t, "alpha");
            break;
        case OP_ADD:
            dies_inside(shl_acquire(t, "zeta", "crasher", 60000 * MS, &tk));
            break;
        case OP_RELEASE:
            dies_inside(shl_release(t, "alpha", "worker-1", info.token));
            break;
        }
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        die("the child did not die at its crash point", SHL_EINVAL);
}

static void seed_crashed(const char *seed, int cp, enum crash_op op)
{
    char name[128];
    table_name(name, sizeof name, seed);
    leases_table(name);
    crash_child(name, cp, op);
    save_table(seed, name);
}

/* A lease lock made unrecoverable the way glibc makes one: its holder died,
 * and the next locker unlocked without marking it consistent. */
static void seed_broken_lock(void)
{
    char name[128], path[256];
    table_name(name, sizeof name, "broken");
    leases_table(name);
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(path, 0);
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        die("mmap", 0);
    close(fd);
    pthread_mutex_t *lock = &shl__slot_at(m, 1)->lock;
    pid_t pid = fork();
    if (pid < 0)
        die("fork", 0);
    if (pid == 0)
        _exit(pthread_mutex_lock(lock) == 0 ? 0 : 3);
    int st2;
    if (waitpid(pid, &st2, 0) != pid || !WIFEXITED(st2) || WEXITSTATUS(st2) != 0 ||
        pthread_mutex_lock(lock) != EOWNERDEAD)
        die("the lock did not outlive its holder", SHL_EINVAL);
    pthread_mutex_unlock(lock);
    munmap(m, (size_t)st.st_size);
    save_table("corrupt-broken-lock", name);
}

/* ------------------------------------------------------------ damaged */

/* The healthy leases image with one thing changed by `edit`. */
static void seed_edited(const char *seed, const unsigned char *img, size_t len,
                        void (*edit)(unsigned char *img, size_t *len))
{
    unsigned char *copy = malloc(len);
    if (!copy)
        die("malloc", 0);
    memcpy(copy, img, len);
    edit(copy, &len);
    save(seed, copy, len);
    free(copy);
}

static struct shl__hdr *hdr_of(unsigned char *img)
{
    return (struct shl__hdr *)img;
}

static struct shl__slot *slot_of(unsigned char *img, uint32_t i)
{
    return shl__slot_at(hdr_of(img), i);
}

static void truncate_half(unsigned char *img, size_t *len)
{
    (void)img;
    *len /= 2;
}

static void header_only(unsigned char *img, size_t *len)
{
    (void)img;
    *len = sizeof(struct shl__hdr);
}

static void tiny(unsigned char *img, size_t *len)
{
    (void)img;
    *len = 16;
}

static void unready(unsigned char *img, size_t *len)
{
    (void)len;
    atomic_store(&hdr_of(img)->ready, 0);
}

static void other_format(unsigned char *img, size_t *len)
{
    (void)len;
    hdr_of(img)->format ^= 0xff;
}

static void bad_geometry(unsigned char *img, size_t *len)
{
    (void)len;
    hdr_of(img)->capacity += 1;
}

static void bad_fields(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__hdr *h = hdr_of(img);
    h->clock = 7;
    h->mode = 0777;
    h->policy = 0x80;
    atomic_store(&h->nslots, h->capacity + 1);
}

static void bad_index(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__hdr *h = hdr_of(img);
    _Atomic uint32_t *idx = shl__index(h);
    for (uint32_t b = 0; b < h->index_size; b++)
        if (atomic_load(&idx[b]) != 0) {
            atomic_store(&idx[b], h->capacity + 5); /* names a slot out of range */
            break;
        }
}

static void lowered_token(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__slot *s = slot_of(img, 0);
    s->cur.token = 0; /* below the token that wrote its value */
}

static void bad_slot(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__slot *s = slot_of(img, 1);
    s->name_len = 200;
    s->cur.owner_len = 999;
    s->cur.state = 9;
    atomic_store(&s->vcur, (uint64_t)1 << 40); /* far past the segment */
    ((struct shl__vhdr *)(void *)((char *)s + shl__vbuf_home(hdr_of(img)->history)))->len = 1u
                                                                                            << 30;
    atomic_store(&s->intent_armed, 1);
    s->intent.op = 77;
    s->hist_next = 1u << 31;
}

static void bad_lock(unsigned char *img, size_t *len)
{
    (void)len;
    memset(&slot_of(img, 2)->lock, 0x5a, sizeof(pthread_mutex_t));
}

static void armed_add(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__hdr *h = hdr_of(img);
    atomic_store(&h->add_armed, 1);
    h->add_slot = atomic_load(&h->nslots);
    h->add_bucket = 0;
}

/* The pools: a free reader group and the last spare value buffer owned
 * by slot 0, which names neither (leaks), a slot naming a waiter group
 * past the pool, and one naming a spare past the value pool. */
static void bad_pools(unsigned char *img, size_t *len)
{
    (void)len;
    struct shl__hdr *h = hdr_of(img);
    atomic_store(&shl__sh_group_at(h, h->sh_groups - 1)->owner, 1);
    slot_of(img, 1)->wq_ref[SHL__WQ_REFS - 1] = h->wq_groups + 7;
    struct shl__vhdr *last =
        (struct shl__vhdr *)(void *)(img + h->vb_pool_off +
                                     (uint64_t)(h->vb_count - 1) * shl__vbuf_size(h->value_size));
    atomic_store(&last->owner, 1);
    slot_of(img, 2)->vref = h->vb_count + 3;
}

/* Bytes flipped across the slots, as a stray writer would. */
static void flipped(unsigned char *img, size_t *len)
{
    struct shl__hdr *h = hdr_of(img);
    for (size_t off = h->slots_off + 40; off < *len; off += 97)
        img[off] ^= 0xa5;
}

static void seeds_damaged(void)
{
    char name[128];
    table_name(name, sizeof name, "damaged");
    leases_table(name);
    size_t len;
    unsigned char *img = image(name, &len);
    shl_unlink(name);
    static const struct {
        const char *seed;
        void (*edit)(unsigned char *img, size_t *len);
    } edits[] = {
        {"corrupt-truncated", truncate_half},
        {"corrupt-header-only", header_only},
        {"corrupt-tiny", tiny},
        {"corrupt-unready", unready},
        {"version-format", other_format},
        {"corrupt-geometry", bad_geometry},
        {"corrupt-fields", bad_fields},
        {"corrupt-index", bad_index},
        {"corrupt-token", lowered_token},
        {"corrupt-slot", bad_slot},
        {"corrupt-lock", bad_lock},
        {"corrupt-armed-add", armed_add},
        {"corrupt-flipped", flipped},
        {"corrupt-pools", bad_pools},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++)
        seed_edited(edits[i].seed, img, len, edits[i].edit);
    free(img);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorpus DIR  (writes DIR/seed-*)\n");
        return 2;
    }
    out_dir = argv[1];
    seed_empty();
    seed_leases();
    seed_manual();
    seed_values();
    seed_floor();
    seed_live();
    seed_crashed("corrupt-crashed-acquire", SHL__CP_ACQ_APPLY, OP_ACQUIRE);
    seed_crashed("corrupt-crashed-write", SHL__CP_WRITE_COPY, OP_WRITE);
    seed_crashed("corrupt-crashed-renew", SHL__CP_RENEW_STORED, OP_RENEW);
    seed_crashed("corrupt-crashed-revoke", SHL__CP_REVOKE_ARMED, OP_REVOKE);
    seed_crashed("corrupt-crashed-release", SHL__CP_RELEASE, OP_RELEASE);
    seed_crashed("corrupt-crashed-add", SHL__CP_ADD_ARMED, OP_ADD);
    seed_broken_lock();
    seeds_damaged();
    printf("mkcorpus: %u seeds in %s\n", made, out_dir);
    return 0;
}
