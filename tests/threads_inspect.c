/*
 * tests/threads_inspect.c - the inspector reads while writers work. Plain C
 * (see tests/threads_cases.c): run by criterion in make test and under
 * ThreadSanitizer in make check.
 *
 * Two threads acquire, write, renew, release and revoke leases (adding names
 * as they go) while the main thread lists them (shl_foreach), reads values
 * and runs shl_check over and over: every check is clean, every value whole.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "threads_cases.h"

#define SEC  (UINT64_C(1000000000))
#define VAL  96
#define GENS 4

/* The writer races the inspector on purpose: whether each call lands does
 * not matter, only what the inspector sees. */
static void any(int rc)
{
    (void)rc;
}

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* Generation g: its own length and bytes, so that a mix matches none. */
static uint32_t gen_len(unsigned g)
{
    return 16u + 16u * g;
}

static void gen_fill(unsigned char *b, unsigned g)
{
    for (uint32_t i = 0; i < gen_len(g); i++)
        b[i] = (unsigned char)(g * 29u + i * 7u);
}

static int whole(const unsigned char *b, size_t len)
{
    for (unsigned g = 1; g <= GENS; g++) {
        unsigned char want[VAL];
        if (len != gen_len(g))
            continue;
        gen_fill(want, g);
        if (memcmp(want, b, len) == 0)
            return 1;
    }
    return 0;
}

struct shared {
    shl_table *t;
    _Atomic int stop;
};

static void *writer(void *arg)
{
    struct shared *s = arg;
    char lease[16];
    unsigned char buf[VAL];
    for (unsigned i = 0; !atomic_load(&s->stop); i++) {
        snprintf(lease, sizeof lease, "w%u", i % 6);
        uint64_t tok;
        if (shl_acquire(s->t, lease, "writer", 10 * SEC, &tok) != SHL_OK)
            continue;
        unsigned g = 1 + i % GENS;
        gen_fill(buf, g);
        any(shl_write(s->t, lease, "writer", tok, buf, gen_len(g)));
        any(shl_renew(s->t, lease, "writer", tok, 10 * SEC));
        any(shl_renew(s->t, lease, "other", tok, SEC)); /* a rejection */
        if (i % 3)
            any(shl_release(s->t, lease, "writer", tok));
        else
            shl_revoke(s->t, lease);
    }
    return NULL;
}

static void count_problem(void *arg, const char *problem)
{
    char *first = arg;
    if (!first[0])
        snprintf(first, 200, "%s", problem);
}

static int look(void *arg, const shl_lease_detail *d)
{
    _Atomic int *bad = arg;
    uint32_t want = d->info.value_len < SHL_PREVIEW_MAX ? d->info.value_len : SHL_PREVIEW_MAX;
    if (d->stable && d->preview_len != want)
        atomic_fetch_add(bad, 1);
    return 0;
}

const char *tc_inspector_reads_while_writers_work(void)
{
    static char msg[256];
    char name[96];
    snprintf(name, sizeof name, "shltest-%d-%sinsp", (int)getpid(), t_run_mark());
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = VAL;
    o.flags = SHL_CREATE | SHL_EXCL;
    struct shared s = {NULL, 0};
    if (shl_open(name, &o, &s.t) != SHL_OK)
        return "cannot create the table";
    pthread_t w[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, writer, &s);
    _Atomic int bad = 0;
    unsigned rounds = 0;
    const char *err = NULL;
    char first[200] = "";
    for (uint64_t end = mono() + SEC; mono() < end && !err; rounds++) {
        if (shl_foreach(s.t, look, &bad) != SHL_OK)
            err = "shl_foreach failed";
        else if (shl_check(s.t, count_problem, first) != SHL_OK)
            err = first;
        unsigned char buf[VAL];
        size_t len;
        if (!err && shl_read(s.t, "w1", buf, sizeof buf, &len, NULL) == SHL_OK && len &&
            !whole(buf, len))
            err = "a value was torn";
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    if (!err && atomic_load(&bad))
        err = "a stable snapshot had a preview of the wrong length";
    if (!err && shl_check(s.t, count_problem, first) != SHL_OK)
        err = first;
    if (!err && rounds == 0)
        err = "no round ran";
    shl_close(s.t);
    shl_unlink(name);
    if (err) {
        snprintf(msg, sizeof msg, "check while writing: %s", err);
        return msg;
    }
    return NULL;
}
