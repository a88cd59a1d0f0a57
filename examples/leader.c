/*
 * examples/leader.c - leader election among forked workers.
 *
 * Every worker is a candidate in the election "leader". shl_election_campaign()
 * waits its turn (candidates lead in the order they came), proclaims the
 * worker's name with the term's token, and keeps the term alive with a
 * renewer. The leader works, proclaiming its progress (a fenced write: once
 * its term is over the table refuses it), then resigns, and the next
 * candidate leads at once. The parent observes: shl_election_observe()
 * reports each leader, in token order, with what it proclaimed. The term's
 * token is the leader's fencing token: a resource that remembers the
 * highest token it saw tells the current leader's requests from a deposed
 * one's.
 *
 *   usage: leader [TABLE [WORKERS]]     (exit status 0 when every worker led
 *                                        once, with strictly rising tokens)
 */
#define _GNU_SOURCE /* fork, nanosleep, kill: POSIX beyond C11 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmlease.h>

#define MS          UINT64_C(1000000)
#define TTL         (500 * MS) /* generous: a loaded machine must not depose a leader */
#define STEPS       3          /* proclaims of progress per term */
#define WORKERS_MAX 16
#define VALUE_SIZE  64

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* One term: work while the renewer keeps it, proclaiming progress; resign. */
static int lead(shl_election *e, const char *me, uint64_t token)
{
    printf("%-4s leads with token %" PRIu64 "\n", me, token);
    fflush(stdout);
    char v[VALUE_SIZE];
    int rc;
    for (int i = 1; i <= STEPS; i++) {
        sleep_ms(20); /* the leader's work */
        int n = snprintf(v, sizeof v, "%s step %d", me, i);
        if ((rc = shl_election_proclaim(e, v, (size_t)n)) != SHL_OK) {
            fprintf(stderr, "%s: proclaim: %s\n", me, shl_strerror(rc));
            return 1;
        }
    }
    if ((rc = shl_election_resign(e)) != SHL_OK) { /* SHL_ELOST: the term ended before */
        fprintf(stderr, "%s: resign: %s\n", me, shl_strerror(rc));
        return 1;
    }
    printf("%-4s resigns\n", me);
    fflush(stdout);
    return 0;
}

static int worker(const char *table, int id)
{
    char me[16];
    snprintf(me, sizeof me, "w%d", id % 100);
    shl_table *t;
    int rc = shl_open(table, NULL, &t); /* a handle never crosses fork() */
    if (rc != SHL_OK) {
        fprintf(stderr, "%s: open: %s\n", me, shl_strerror(rc));
        return 1;
    }
    shl_election *e;
    uint64_t token;
    if ((rc = shl_election_open(t, "leader", me, &e)) == SHL_OK)
        rc = shl_election_campaign(e, TTL, SHL_WAIT_FOREVER, me, strlen(me), NULL, &token);
    if (rc != SHL_OK) {
        fprintf(stderr, "%s: campaign: %s\n", me, shl_strerror(rc));
        shl_election_close(e);
        shl_close(t);
        return 1;
    }
    rc = lead(e, me, token);
    shl_election_close(e);
    shl_close(t);
    return rc;
}

/* Reaps the workers that ended; how many still run. */
static int reap(pid_t *pids, int n, int *failed, int block)
{
    int running = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (pids[i] <= 0)
            continue;
        if (waitpid(pids[i], &st, block ? 0 : WNOHANG) == pids[i]) {
            *failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            pids[i] = 0;
        } else {
            running++;
        }
    }
    return running;
}

/* Prints each leader as it comes, until every worker has ended; the number
 * of terms seen (a term that began and ended between two looks is not). */
static int observe(shl_table *t, pid_t *pids, int n, int *failed)
{
    uint64_t after = 0;
    int seen = 0;
    char v[VALUE_SIZE + 1];
    while (reap(pids, n, failed, 0) > 0) {
        shl_leader l;
        int rc = shl_election_observe(t, "leader", after, 100 * MS, &l, v, VALUE_SIZE);
        if (rc == SHL_ETIMEDOUT)
            continue;
        if (rc != SHL_OK) {
            fprintf(stderr, "leader: observe: %s\n", shl_strerror(rc));
            *failed = 1;
            break;
        }
        v[l.value_len] = '\0';
        printf("observer sees %s leading (token %" PRIu64 ", proclaimed \"%s\")\n", l.id, l.token,
               v);
        fflush(stdout);
        if (strncmp(v, l.id, strlen(l.id)) != 0) /* each proclaims its own name */
            *failed = 1;
        after = l.token;
        seen++;
    }
    reap(pids, n, failed, 1);
    return seen;
}

int main(int argc, char **argv)
{
    char def[64];
    snprintf(def, sizeof def, "example-leader-%d", (int)getpid());
    const char *table = argc > 1 ? argv[1] : def;
    int n = argc > 2 ? atoi(argv[2]) : 4;
    if (n < 2 || n > WORKERS_MAX) {
        fprintf(stderr, "usage: leader [TABLE [WORKERS 2..%d]]\n", WORKERS_MAX);
        return 2;
    }
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = VALUE_SIZE;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    int rc = shl_open(table, &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "leader: create %s: %s\n", table, shl_strerror(rc));
        return 1;
    }
    fflush(stdout);
    pid_t pids[WORKERS_MAX];
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(worker(table, i));
        if (pids[i] < 0) {
            perror("leader: fork");
            for (int j = 0; j < i; j++) {
                kill(pids[j], SIGKILL);
                waitpid(pids[j], NULL, 0);
            }
            failed = 1;
            goto out;
        }
    }
    int seen = observe(t, pids, n, &failed);
    shl_lease_info li;
    rc = shl_stat(t, "leader", &li);
    /* n terms, one token each: the last one is n, and the last leader
     * resigned. */
    if (rc != SHL_OK || li.token != (uint64_t)n || li.state != SHL_STATE_FREE || seen == 0)
        failed = 1;
    printf("%s: %d terms, last token %" PRIu64 ", %d seen by the observer\n",
           failed ? "FAIL" : "ok", n, li.token, seen);
out: /* every way out after the creation: the table is ours to remove */
    shl_close(t);
    shl_unlink(table);
    return failed;
}
