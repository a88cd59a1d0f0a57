/*
 * tests/threads_cases.c - many threads on one handle. Plain C, no criterion:
 * tests/test_threads.c runs these cases in make test, and tests/tsan_main.c
 * runs them under ThreadSanitizer in make check (criterion's process arena
 * cannot be set up under TSan).
 *
 * 8 threads take turns on 3 leases through one shl_table. Each holder
 * increments the lease's counter (read-modify-write under the check) and
 * writes a pattern value; readers check every snapshot is whole. At the end
 * every counter equals the increments its threads were told succeeded, and
 * every token a thread saw for a lease was higher than the one before.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "threads_cases.h"

#define SEC (UINT64_C(1000000000))

static char *fmt(const char *f, unsigned long long a, unsigned long long b)
{
    static char msg[160];
    snprintf(msg, sizeof msg, f, a, b);
    return msg;
}

shl_table *tc_create(char *name, size_t cap, const char *tag, uint32_t value_size)
{
    static _Atomic unsigned n;
    snprintf(name, cap, "shltest-%d-t%u-%s%s", (int)getpid(), atomic_fetch_add(&n, 1), t_run_mark(),
             tag);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = value_size;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    return shl_open(name, &o, &t) == SHL_OK ? t : NULL;
}

#define THREADS 8
#define LEASES  3
#define ROUNDS  400
#define VAL     48

static shl_table *T;
static const char *lease_names[LEASES] = {"alpha", "beta", "gamma"};

struct worker {
    int id;
    uint64_t acked[LEASES]; /* increments acknowledged to this thread */
    int failures;
    char why[128];
};

static int add_one(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    (void)cap;
    uint64_t v = 0;
    if (*len >= sizeof v) /* bytes 0..7 of the value are the counter */
        memcpy(&v, value, sizeof v);
    v++;
    memcpy(value, &v, sizeof v);
    if (*len < sizeof v)
        *len = sizeof v;
    return 0;
}

static void fail(struct worker *w, const char *msg)
{
    if (!w->failures++)
        snprintf(w->why, sizeof w->why, "%s", msg);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    char owner[16];
    snprintf(owner, sizeof owner, "thread-%d", w->id);
    uint64_t last_seen[LEASES] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int l = (r + w->id) % LEASES;
        const char *lease = lease_names[l];
        uint64_t tok;
        int rc = shl_acquire(T, lease, owner, 5 * SEC, &tok);
        if (rc == SHL_EBUSY) {
            unsigned char buf[VAL];
            size_t len;
            uint64_t vt;
            if (shl_read(T, lease, buf, sizeof buf, &len, &vt) != SHL_OK)
                fail(w, "read failed");
            for (size_t i = sizeof(uint64_t); i < len; i++)
                if (buf[i] != buf[sizeof(uint64_t)])
                    fail(w, "torn value");
            continue;
        }
        if (rc != SHL_OK) {
            fail(w, "acquire failed");
            continue;
        }
        if (tok <= last_seen[l])
            fail(w, "token did not increase");
        last_seen[l] = tok;
        if (shl_update(T, lease, owner, tok, add_one, NULL) == SHL_OK)
            w->acked[l]++;
        else
            fail(w, "update refused while holding");
        if (shl_renew(T, lease, owner, tok, 5 * SEC) != SHL_OK)
            fail(w, "renew refused while holding");
        if (shl_release(T, lease, owner, tok) != SHL_OK)
            fail(w, "release refused while holding");
        if (shl_write(T, lease, owner, tok, "late", 4) != SHL_ELOST)
            fail(w, "write accepted after release");
    }
    return NULL;
}

const char *tc_eight_threads_one_handle(void)
{
    char name[96];
    const char *err = NULL;
    T = tc_create(name, sizeof name, "threads", VAL);
    if (!T)
        return "cannot create the table";
    pthread_t th[THREADS];
    struct worker w[THREADS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        if (pthread_create(&th[i], NULL, run, &w[i]) != 0)
            return "pthread_create";
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t total = 0;
    for (int l = 0; l < LEASES && !err; l++) {
        uint64_t want = 0, got = 0;
        for (int i = 0; i < THREADS; i++)
            want += w[i].acked[l];
        size_t len;
        unsigned char buf[VAL];
        shl_lease_info in;
        if (shl_read(T, lease_names[l], buf, sizeof buf, &len, NULL) != SHL_OK ||
            shl_stat(T, lease_names[l], &in) != SHL_OK)
            err = "cannot read a lease at the end";
        memcpy(&got, buf, sizeof got);
        if (!err && got != want)
            err = fmt("counter %llu, acknowledged increments %llu", got, want);
        if (!err && in.token != want)
            err = fmt("token %llu, successful acquisitions %llu", in.token, want);
        total += want;
    }
    static char why[192];
    for (int i = 0; i < THREADS && !err; i++)
        if (w[i].failures) {
            snprintf(why, sizeof why, "thread %d: %d failures, first: %s", i, w[i].failures,
                     w[i].why);
            err = why;
        }
    if (!err && total == 0)
        err = "no thread ever acquired";
    shl_close(T);
    shl_unlink(name);
    return err;
}

/* Lock-free readers against a writer that keeps changing the value: every
 * snapshot is one whole write. */
static _Atomic int stop_readers;
static _Atomic int torn;
static _Atomic long snapshots;

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_readers)) {
        unsigned char buf[VAL];
        size_t len;
        uint64_t vt;
        if (shl_read(T, "hot", buf, sizeof buf, &len, &vt) != SHL_OK)
            continue;
        for (size_t i = 0; i < len; i++)
            if (buf[i] != (unsigned char)(vt & 0xff))
                atomic_store(&torn, 1);
        atomic_fetch_add(&snapshots, 1);
    }
    return NULL;
}

const char *tc_seqlock_readers_see_whole_values(void)
{
    char name[96];
    const char *err = NULL;
    T = tc_create(name, sizeof name, "seqlock", VAL);
    if (!T)
        return "cannot create the table";
    atomic_store(&stop_readers, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&th[i], NULL, reader, NULL) != 0)
            return "pthread_create";
    unsigned char buf[VAL];
    /* Until the readers have taken enough snapshots to have met writes in
     * flight (bounded, in case they are starved). */
    for (long i = 0; !err && (i < 3000 || (atomic_load(&snapshots) < 20000 && i < 2000000)); i++) {
        uint64_t tok;
        if (shl_acquire(T, "hot", "w", 5 * SEC, &tok) != SHL_OK)
            err = "acquire failed";
        /* Each value is copies of its token's low byte, its length varying. */
        memset(buf, (int)(tok & 0xff), sizeof buf);
        if (!err && shl_write(T, "hot", "w", tok, buf, 8 + (size_t)(i % (VAL - 8))) != SHL_OK)
            err = "write failed";
        if (!err && shl_release(T, "hot", "w", tok) != SHL_OK)
            err = "release failed";
    }
    atomic_store(&stop_readers, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    if (!err && atomic_load(&torn))
        err = "a reader saw a torn value";
    if (!err && atomic_load(&snapshots) == 0)
        err = "the readers took no snapshot";
    shl_close(T);
    shl_unlink(name);
    return err;
}
