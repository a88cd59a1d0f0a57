/*
 * tools/bench/rows_contention.c - forked workers on one lease and on
 * distinct leases.
 *
 * Each worker is a separate process with its own table handle and a bound
 * lease (owner "worker-<i>"). It loops on try-acquire, and on success
 * release, for a fixed time. Throughput counts completed acquire+release
 * pairs of all workers; on one lease a refused try (EBUSY) is not a pair.
 * Latency is per attempt (acquire, plus release when it succeeded), timed on
 * one attempt in eight so that the clock reads barely slow the loop. The
 * workers' CPU time per completed pair is kept too: on a machine whose cores
 * are busy with other work, wall-clock throughput cannot grow with workers,
 * but the CPU cost per pair still shows whether the workers slow each other
 * down (shared cache lines, lock hand-offs).
 *
 * Group "shared": the same loop with shared (reader) acquisitions on one
 * lease, every worker a reader, and a mixed row where worker 0 takes the
 * lease exclusive and the others shared (try-acquire: nobody queues, so the
 * writer gets in only between readers' holds; its own pairs are counted in
 * the throughput like the readers').
 *
 * With etcd support the same rows run on an etcd table too (group "etcd-cont",
 * on the throwaway member of rows_etcd.c, 500 ms per measurement): there a
 * refused try costs a grant, a txn and a revoke, so the pairs are few and
 * the CPU column is the workers' client side only (etcd's own is not in it).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAX_WORKERS 8
#define TTL         (UINT64_C(10) * 1000000000u)

struct worker_out {
    uint64_t pairs, busy;
    uint64_t cpu_ns; /* the worker's CPU time inside the timed loop */
    struct bench_hist hist;
};

struct control {
    _Atomic int ready;
    _Atomic int go;
    _Atomic uint64_t stop_ns;
    struct worker_out w[MAX_WORKERS];
};

static struct control *ctl;
static char table[96];
static int table_users;
static const char *run_table; /* the table of the row being run */
#ifdef BENCH_HAVE_ETCD
static char etcd_table[1024];
static int etcd_users;
#endif

static const char *cont_setup(struct bench_row *r)
{
    (void)r;
    if (!ctl) {
        void *p =
            mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return "mmap failed";
        ctl = p;
    }
    if (table_users == 0) {
        const char *why = bench_create_table(table, "contention", 64, 64);
        if (why)
            return why;
    }
    table_users++;
    return NULL;
}

static void cont_teardown(struct bench_row *r)
{
    (void)r;
    if (--table_users == 0) {
        shl_unlink(table);
#ifdef BENCH_HAVE_ETCD
        if (etcd_users == 0)
#endif
        {
            munmap(ctl, sizeof *ctl);
            ctl = NULL;
        }
    }
}

static uint64_t cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How a worker acquires: exclusive, shared, or (worker 0 exclusive) mixed. */
enum mode { EXCL = 0, READERS = 1, MIXED = 2 };

static int worker(int i, int one, enum mode mode)
{
    int shared = mode == READERS || (mode == MIXED && i > 0);
    shl_table *t;
    shl_lease *l;
    char lease[32], owner[32];
    snprintf(lease, sizeof lease, one ? "contended" : "own-%d", i);
    snprintf(owner, sizeof owner, "worker-%d", i);
    if (shl_open(run_table, NULL, &t) != SHL_OK || shl_lease_open(t, lease, owner, &l) != SHL_OK)
        return 1;
    struct worker_out *w = &ctl->w[i];
    memset(w, 0, sizeof *w);
    atomic_fetch_add(&ctl->ready, 1);
    while (!atomic_load(&ctl->go))
        sched_yield();
    uint64_t stop = atomic_load(&ctl->stop_ns);
    uint64_t cpu0 = cpu_now();
    int bad = 0;
    for (uint64_t n = 0;; n++) {
        if ((n & 63) == 0 && bench_now() >= stop)
            break;
        int timed = (n & 7) == 0;
        uint64_t t0 = timed ? bench_now() : 0;
        uint64_t tk, gen;
        int rc = shared ? shl_acquire_shared(t, lease, owner, TTL, &tk, &gen)
                        : shl_lease_acquire(l, TTL, &tk, NULL);
        if (rc == SHL_OK) {
            bad |= (shared ? shl_release(t, lease, owner, tk) : shl_lease_release(l, tk)) != SHL_OK;
            w->pairs++;
        } else if (rc == SHL_EBUSY) {
            w->busy++;
        } else {
            bad = 1;
        }
        if (timed)
            bench_hist_add(&w->hist, bench_now() - t0);
    }
    w->cpu_ns = cpu_now() - cpu0;
    shl_lease_close(l);
    shl_close(t);
    return bad;
}

static int cont_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)iters;
    int nw = r->arg & 0xff, one = (r->arg >> 8) & 1, etcd = (r->arg >> 9) & 1;
    enum mode mode = (enum mode)(r->arg >> 10);
    uint64_t dur =
        (etcd ? (bench_quick ? 200 : 500) : (bench_quick ? 40 : 100)) * UINT64_C(1000000);
    run_table = r->ctx ? r->ctx : table;
    atomic_store(&ctl->ready, 0);
    atomic_store(&ctl->go, 0);
    pid_t pids[MAX_WORKERS];
    fflush(NULL);
    for (int i = 0; i < nw; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(worker(i, one, mode));
    }
    while (atomic_load(&ctl->ready) < nw)
        usleep(200);
    atomic_store(&ctl->stop_ns, bench_now() + dur);
    atomic_store(&ctl->go, 1);
    int bad = 0;
    for (int i = 0; i < nw; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    }
    static struct bench_hist all;
    memset(&all, 0, sizeof all);
    uint64_t pairs = 0;
    double cpu_ns = 0;
    for (int i = 0; i < nw; i++) {
        pairs += ctl->w[i].pairs;
        cpu_ns += (double)ctl->w[i].cpu_ns;
        bench_hist_merge(&all, &ctl->w[i].hist);
    }
    o->ops_s = (double)pairs * 1e9 / (double)dur;
    /* CPU time per completed pair, all workers (the refused tries included):
     * what a pair costs whether or not cores were free. */
    o->ns_op = pairs ? cpu_ns / (double)pairs : 0;
    o->p50_ns = bench_hist_pct(&all, 50);
    o->p99_ns = bench_hist_pct(&all, 99);
    return bad ? -1 : 0;
}

#ifdef BENCH_HAVE_ETCD
static const char *etcd_cont_setup(struct bench_row *r)
{
    const char *eps;
    const char *no = bench_etcd_start(&eps);
    if (no)
        return no;
    if (!ctl) {
        void *p =
            mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return "mmap failed";
        ctl = p;
    }
    if (etcd_users++ == 0) {
        snprintf(etcd_table, sizeof etcd_table, "etcd://%s/bench-contention-%d", eps,
                 (int)getpid());
        shl_options o;
        shl_options_init(&o);
        o.value_size = 64;
        o.flags = SHL_CREATE;
        shl_table *t;
        if (shl_open(etcd_table, &o, &t) != SHL_OK)
            return "cannot create the etcd table";
        shl_close(t);
    }
    r->ctx = etcd_table;
    return NULL;
}

static void etcd_cont_teardown(struct bench_row *r)
{
    (void)r;
    if (--etcd_users == 0)
        shl_unlink(etcd_table);
    if (table_users == 0 && etcd_users == 0 && ctl) {
        munmap(ctl, sizeof *ctl);
        ctl = NULL;
    }
    bench_etcd_stop();
}
#endif

void rows_contention(void)
{
    static const int ws[] = {1, 2, 4, 8};
    for (int one = 1; one >= 0; one--)
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "%s, %d worker%s", one ? "one lease" : "distinct leases",
                     ws[i], ws[i] > 1 ? "s" : "");
            struct bench_row *r =
                bench_add("contention", name, cont_setup, cont_run, cont_teardown);
            r->arg = ws[i] | (one << 8);
            r->fixed = 1;
        }
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "readers on one lease, %d worker%s", ws[i],
                 ws[i] > 1 ? "s" : "");
        struct bench_row *r = bench_add("shared", name, cont_setup, cont_run, cont_teardown);
        r->arg = ws[i] | (1 << 8) | (READERS << 10);
        r->fixed = 1;
    }
    for (size_t i = 1; i < sizeof ws / sizeof ws[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "1 writer + %d reader%s, one lease", ws[i] - 1,
                 ws[i] > 2 ? "s" : "");
        struct bench_row *r = bench_add("shared", name, cont_setup, cont_run, cont_teardown);
        r->arg = ws[i] | (1 << 8) | (MIXED << 10);
        r->fixed = 1;
    }
#ifdef BENCH_HAVE_ETCD
    for (int one = 1; one >= 0; one--)
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "%s, %d worker%s", one ? "one lease" : "distinct leases",
                     ws[i], ws[i] > 1 ? "s" : "");
            struct bench_row *r =
                bench_add("etcd-cont", name, etcd_cont_setup, cont_run, etcd_cont_teardown);
            r->arg = ws[i] | (one << 8) | (1 << 9);
            r->fixed = 1;
        }
#endif
}
