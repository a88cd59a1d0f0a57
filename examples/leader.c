/*
 * examples/leader.c - leader election among forked workers.
 *
 * Every worker campaigns for the lease "leader". The winner publishes its
 * name as the lease's value (a guarded write: only the current leader can
 * change it), renews while it works, then resigns by releasing. The others
 * observe who leads (shl_stat, no lock) and campaign again. Each new leader
 * checks that its token is higher than the one that wrote the previous
 * announcement: that is what lets a resource tell the new leader's requests
 * from a deposed one's.
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
#define TERMS       3          /* renewals per term */
#define WORKERS_MAX 16

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

struct announcement {
    char name[32];
    uint64_t token;
};

/* One term: announce, work while renewing, resign. Returns 0 on success. */
static int lead(shl_table *t, const char *me, uint64_t token)
{
    struct announcement prev = {{0}, 0}, mine = {{0}, token};
    size_t len;
    uint64_t wrote_by = 0;
    int rc = shl_read(t, "leader", &prev, sizeof prev, &len, &wrote_by);
    if (rc == SHL_OK && len == sizeof prev && token <= wrote_by) {
        fprintf(stderr, "%s: token %" PRIu64 " is not above the previous leader's %" PRIu64 "\n",
                me, token, wrote_by);
        return 1;
    }
    snprintf(mine.name, sizeof mine.name, "%s", me);
    if ((rc = shl_write(t, "leader", me, token, &mine, sizeof mine)) != SHL_OK) {
        fprintf(stderr, "%s: announce: %s\n", me, shl_strerror(rc));
        return 1;
    }
    printf("%-4s leads with token %" PRIu64 " (previous: %s)\n", me, token,
           prev.name[0] ? prev.name : "none");
    fflush(stdout);
    for (int i = 0; i < TERMS; i++) {
        sleep_ms(20); /* the leader's work */
        if ((rc = shl_renew(t, "leader", me, token, TTL)) != SHL_OK) {
            fprintf(stderr, "%s: renew: %s\n", me, shl_strerror(rc));
            return 1;
        }
    }
    if ((rc = shl_release(t, "leader", me, token)) != SHL_OK) {
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
    uint64_t last_seen = 0;
    for (int attempt = 0; attempt < 100000; attempt++) {
        uint64_t token;
        shl_lease_info holder;
        rc = shl_acquire_ex(t, "leader", me, TTL, &token, &holder);
        if (rc == SHL_OK) {
            rc = lead(t, me, token);
            shl_close(t);
            return rc;
        }
        if (rc != SHL_EBUSY) {
            fprintf(stderr, "%s: campaign: %s\n", me, shl_strerror(rc));
            break;
        }
        if (holder.token != last_seen) { /* observe each new leader once */
            printf("%-4s sees %s leading (token %" PRIu64 ", %" PRIu64 " ms left)\n", me,
                   holder.owner, holder.token, holder.remaining_ns / MS);
            fflush(stdout);
            last_seen = holder.token;
        }
        sleep_ms(2);
    }
    shl_close(t);
    return 1;
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
    o.value_size = sizeof(struct announcement);
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
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    shl_lease_info li;
    rc = shl_stat(t, "leader", &li);
    /* n terms, one token each: the last one is n. */
    if (rc != SHL_OK || li.token != (uint64_t)n || li.state != SHL_STATE_FREE)
        failed = 1;
    printf("%s: %d terms, last token %" PRIu64 "\n", failed ? "FAIL" : "ok", n, li.token);
out: /* every way out after the creation: the table is ours to remove */
    shl_close(t);
    shl_unlink(table);
    return failed;
}
