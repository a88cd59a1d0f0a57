/*
 * examples/counter.c - a co-located counter: many processes increment one
 * value through guarded writes while some of them are killed.
 *
 * The value lives in the segment, next to the lease, and every increment is
 * a shl_update(): a read-modify-write under the owner/token/expiry check, so
 * no increment is lost to a race and none is applied by a process that lost
 * the lease. Workers are SIGKILLed at random moments, possibly inside the
 * lease's critical section; the next locker repairs the slot and the
 * committed count survives.
 *
 * Exactness: each worker counts, in memory the parent keeps, the increments
 * it saw acknowledged. A worker killed after its update committed but before
 * it recorded the acknowledgement would make the count one short, so the
 * value also records, per worker, the sequence number of its last applied
 * increment (an idempotency key): that settles the one in doubt.
 *
 *   usage: counter [TABLE [WORKERS [INCREMENTS [KILLS]]]]
 *   exit status 0 when the total is exactly what was applied
 */
#define _GNU_SOURCE /* fork, kill, nanosleep: POSIX beyond C11 */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmlease.h>

#define MS          UINT64_C(1000000)
#define TTL         (100 * MS)
#define BATCH       16 /* increments per acquisition */
#define WORKERS_MAX 16

struct counter { /* the lease's value */
    uint64_t total;
    uint64_t applied[WORKERS_MAX]; /* per worker: sequence of its last increment */
};

struct acks { /* outside the table: what each worker saw acknowledged */
    _Atomic uint64_t acked[WORKERS_MAX];
};

static struct acks *acks;

struct incr {
    int worker;
    uint64_t seq;
};

static int increment(void *value, size_t *len, size_t cap, void *arg)
{
    const struct incr *in = arg;
    struct counter c;
    if (cap < sizeof c)
        return 1;
    if (*len == sizeof c)
        memcpy(&c, value, sizeof c);
    else
        memset(&c, 0, sizeof c); /* never written yet */
    c.total++;
    c.applied[in->worker] = in->seq;
    memcpy(value, &c, sizeof c);
    *len = sizeof c;
    return 0;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int worker(const char *table, int id, uint64_t n)
{
    char me[24];
    snprintf(me, sizeof me, "worker-%d", id);
    shl_table *t;
    if (shl_open(table, NULL, &t) != SHL_OK)
        return 1;
    uint64_t done = 0;
    while (done < n) {
        uint64_t token;
        int rc = shl_acquire(t, "counter", me, TTL, &token);
        if (rc == SHL_EBUSY) {
            sleep_us(200);
            continue;
        }
        if (rc != SHL_OK)
            return 1;
        for (int k = 0; k < BATCH && done < n; k++) {
            struct incr in = {id, done + 1};
            rc = shl_update(t, "counter", me, token, increment, &in);
            if (rc == SHL_ELOST)
                break; /* too slow: the lease expired; nothing was applied */
            if (rc != SHL_OK)
                return 1;
            done = in.seq;
            atomic_store(&acks->acked[id], done);
        }
        rc = shl_release(t, "counter", me, token);
        if (rc != SHL_OK && rc != SHL_ELOST) /* SHL_ELOST: it expired, which is fine */
            return 1;
        sleep_us(50); /* let the others in */
    }
    shl_close(t);
    return 0;
}

int main(int argc, char **argv)
{
    char def[64];
    snprintf(def, sizeof def, "example-counter-%d", (int)getpid());
    const char *table = argc > 1 ? argv[1] : def;
    int n = argc > 2 ? atoi(argv[2]) : 6;
    uint64_t per = argc > 3 ? strtoull(argv[3], NULL, 10) : 2000;
    int kills = argc > 4 ? atoi(argv[4]) : 2;
    if (n < 1 || n > WORKERS_MAX || per < 1 || kills < 0 || kills > n) {
        fprintf(stderr, "usage: counter [TABLE [WORKERS 1..%d [INCREMENTS [KILLS]]]]\n",
                WORKERS_MAX);
        return 2;
    }
    acks = mmap(NULL, sizeof *acks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (acks == MAP_FAILED)
        return 1;
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = sizeof(struct counter);
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(table, &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "counter: create %s: %s\n", table, shl_strerror(rc));
        return 1;
    }
    fflush(stdout);
    pid_t pids[WORKERS_MAX];
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(worker(table, i, i < kills ? UINT64_MAX : per)); /* victims never finish */
        if (pids[i] < 0) {
            perror("counter: fork");
            for (int j = 0; j < i; j++) {
                kill(pids[j], SIGKILL);
                waitpid(pids[j], NULL, 0);
            }
            failed = 1;
            goto out;
        }
    }
    srand((unsigned)getpid());
    /* The first `kills` workers, each once it is well under way, at a random
     * moment: inside or outside the critical section. */
    for (int i = 0; i < kills; i++) {
        for (int w = 0; w < 100000 && atomic_load(&acks->acked[i]) < per / 4 + 1; w++)
            sleep_us(100);
        sleep_us((unsigned)(rand() % 2000));
        kill(pids[i], SIGKILL);
    }
    int killed = 0, was_killed[WORKERS_MAX] = {0};
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
            killed += was_killed[i] = 1;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }

    struct counter c;
    size_t len;
    rc = shl_read(t, "counter", &c, sizeof c, &len, NULL);
    if (rc != SHL_OK || len != sizeof c) {
        fprintf(stderr, "counter: read: %s\n", shl_strerror(rc));
        failed = 1;
        goto out;
    }
    uint64_t expected = 0;
    for (int i = 0; i < n; i++) {
        uint64_t a = atomic_load(&acks->acked[i]);
        /* Applied but killed before the acknowledgement was recorded. */
        uint64_t in_doubt = c.applied[i] == a + 1;
        if (c.applied[i] != a && !in_doubt)
            failed = 1;
        printf("worker-%-2d %-7s acknowledged %6" PRIu64 "%s\n", i,
               was_killed[i] ? "killed" : "done", a,
               in_doubt ? " (+1 applied, acknowledgement lost)" : "");
        expected += a + in_doubt;
    }
    if (c.total != expected || killed != kills)
        failed = 1;
    printf("%s: total %" PRIu64 ", expected %" PRIu64 ", %d worker(s) killed\n",
           failed ? "FAIL" : "ok", c.total, expected, killed);
out: /* every way out after the creation: the table is ours to remove */
    shl_close(t);
    shl_unlink(table);
    return failed;
}
