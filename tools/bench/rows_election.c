/*
 * tools/bench/rows_election.c - how long an election is without a leader
 * when its leader dies: from the leader's kill -9 to the return of the
 * next candidate's shl_election_campaign() (its first proclaim included).
 *
 * Each run forks a leader, then a candidate that queues behind it, kills
 * the leader and times the candidate's campaign from its own process (the
 * clock read just after the call returned, in shared memory); the candidate
 * then resigns and leaves, so the next run starts on a free election.
 *
 * On a segment the hand-over is the reclaim of a holder proven dead: the
 * waiter notices the death within SHL_WAIT_DOZE_NS (20 ms) of it, then
 * waits the table's reclaim delay (rows with 0 and 10 ms); the ttl (10 s)
 * plays no part. On etcd nothing proves a death: the next leader comes when
 * the dead leader's etcd lease runs out, so the row is bound by its ttl
 * (2 s, the cluster's shortest), less the time since its last keep-alive.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define SHM_TTL   (UINT64_C(10) * 1000000000u)
#define ETCD_TTL  (UINT64_C(2) * 1000000000u)
#define WAIT_MAX  (UINT64_C(30) * 1000000000u) /* a run that takes longer failed */
#define QUEUE_GAP (UINT64_C(500) * 1000000u)    /* etcd: time for the candidate to queue */

struct handover {
    _Atomic uint64_t led_at[2]; /* when each one's campaign returned */
    _Atomic int done;           /* the candidate may resign */
    _Atomic int failed;
};

struct election_row {
    char table[256];
    uint64_t ttl;
    uint32_t delay_ms; /* segment: the reclaim delay */
    int etcd;
    shl_table *t; /* the measuring process's handle */
    struct handover *h;
};

static int open_table(const struct election_row *er, shl_table **t)
{
    shl_options o;
    shl_options_init(&o);
    o.flags = 0;
    return shl_open(er->table, er->etcd ? &o : NULL, t);
}

/* Campaigns as "bench-<i>", notes when it leads, then leads until killed
 * (i = 0) or told to resign (i = 1). */
static int lead(struct election_row *er, int i)
{
    shl_table *t = NULL;
    shl_election *e = NULL;
    char id[16];
    snprintf(id, sizeof id, "bench-%d", i);
    uint64_t tok;
    if (open_table(er, &t) != SHL_OK || shl_election_open(t, "bench", id, &e) != SHL_OK ||
        shl_election_campaign(e, er->ttl, WAIT_MAX, id, strlen(id), NULL, &tok) != SHL_OK) {
        atomic_store(&er->h->failed, 1);
        return 1;
    }
    atomic_store(&er->h->led_at[i], bench_now());
    while (!atomic_load(&er->h->done))
        usleep(1000);
    shl_election_close(e);
    shl_close(t);
    return 0;
}

static pid_t spawn(struct election_row *er, int i)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(lead(er, i));
    return p;
}

/* Waits until *word is set (or the run failed, or WAIT_MAX passed). */
static uint64_t wait_for(struct election_row *er, _Atomic uint64_t *word)
{
    uint64_t end = bench_now() + WAIT_MAX, v;
    while (!(v = atomic_load(word)) && !atomic_load(&er->h->failed) && bench_now() < end)
        usleep(200);
    return v;
}

/* Whether the candidate is queued behind the leader (etcd: after a gap, as
 * the table counts no waiters there). */
static void wait_queued(struct election_row *er)
{
    if (er->etcd) {
        usleep(QUEUE_GAP / 1000);
        return;
    }
    uint64_t end = bench_now() + WAIT_MAX;
    shl_lease_info in;
    while (bench_now() < end && (shl_stat(er->t, "bench", &in) != SHL_OK || in.waiters == 0))
        usleep(200);
}

static int handover_run(struct bench_row *r, uint64_t iters, struct bench_sample *o)
{
    (void)iters;
    struct election_row *er = r->ctx;
    memset(er->h, 0, sizeof *er->h);
    pid_t leader = spawn(er, 0), next = -1;
    int bad = leader < 0 || !wait_for(er, &er->h->led_at[0]);
    if (!bad) {
        next = spawn(er, 1);
        bad = next < 0;
    }
    uint64_t t0 = 0, led = 0;
    if (!bad) {
        wait_queued(er);
        t0 = bench_now();
        kill(leader, SIGKILL);
        led = wait_for(er, &er->h->led_at[1]);
        bad = !led;
    }
    atomic_store(&er->h->done, 1);
    if (leader > 0) {
        kill(leader, SIGKILL);
        waitpid(leader, NULL, 0);
    }
    int st = 0;
    if (next > 0 && (waitpid(next, &st, 0) != next || !WIFEXITED(st) || WEXITSTATUS(st)))
        bad = 1;
    if (bad)
        return -1;
    o->ns_op = (double)(led - t0);
    return 0;
}

static const char *handover_setup(struct bench_row *r)
{
    struct election_row *er = r->ctx;
    void *p = mmap(NULL, sizeof *er->h, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    er->h = p;
    shl_options o;
    shl_options_init(&o);
    o.flags = SHL_CREATE | SHL_EXCL;
    if (er->etcd) {
#ifdef BENCH_HAVE_ETCD
        const char *eps, *no = bench_etcd_start(&eps);
        if (no)
            return no;
        snprintf(er->table, sizeof er->table, "etcd://%s/bench-election", eps);
        o.flags = SHL_CREATE;
#endif
    } else {
        char tag[32];
        snprintf(tag, sizeof tag, "election-%u", er->delay_ms);
        bench_table_name(er->table, sizeof er->table, tag);
        o.capacity = 4;
        o.reclaim_delay_ms = er->delay_ms;
    }
    int rc = shl_open(er->table, &o, &er->t);
    return rc == SHL_OK ? NULL : shl_strerror(rc);
}

static void handover_teardown(struct bench_row *r)
{
    struct election_row *er = r->ctx;
    if (er->t) {
        shl_close(er->t);
        er->t = NULL;
        if (!er->etcd)
            shl_unlink(er->table);
    }
#ifdef BENCH_HAVE_ETCD
    if (er->etcd)
        bench_etcd_stop();
#endif
    if (er->h)
        munmap(er->h, sizeof *er->h);
    er->h = NULL;
}

static struct election_row rows[] = {
    {.ttl = SHM_TTL, .delay_ms = 0},
    {.ttl = SHM_TTL, .delay_ms = 10},
#ifdef BENCH_HAVE_ETCD
    {.ttl = ETCD_TTL, .etcd = 1},
#endif
};

void rows_election(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char name[64];
        if (rows[i].etcd)
            snprintf(name, sizeof name, "kill -9 to next leader, etcd (ttl 2 s)");
        else
            snprintf(name, sizeof name, "kill -9 to next leader, shm (reclaim %u ms)",
                     rows[i].delay_ms);
        struct bench_row *r =
            bench_add("election", name, handover_setup, handover_run, handover_teardown);
        r->ctx = &rows[i];
        r->fixed = 1;
    }
}
