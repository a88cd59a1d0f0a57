/*
 * examples/long_job.c - a long job that holds a lease while it works and
 * stops the moment it is told the lease is lost.
 *
 *   long_job [TABLE [LEASE]] [--ttl MS] [--steps N] [--step-ms MS]
 *
 * It waits for the lease (default "job" in table "long-job"), hands it to a
 * renewer (which renews every ttl/3), then works step by step. Between steps
 * it sleeps in poll() on the renewer's descriptor, as an event loop would, so
 * a loss wakes it at once; it records its progress with writes the table
 * fences by token. If the lease is lost (revoked, or this process was paused
 * past its expiry) it stops working, says so, and exits 3. Exit 0 when all
 * steps are done, 1 when the lease could not be had. A table it created it
 * removes at the end.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmlease.h"

#define MS        (UINT64_C(1000000))
#define EXIT_LOST 3

static _Atomic int lost_reason;

/* Runs on the renewer's thread: note it; the main loop does the stopping. */
static void on_loss(void *arg, int reason)
{
    (void)arg;
    atomic_store(&lost_reason, reason);
}

static const char *why(int reason)
{
    return reason == SHL_LOSS_REFUSED    ? "refused by the table"
           : reason == SHL_LOSS_DEADLINE ? "not renewed in time"
                                         : "maximum hold time";
}

int main(int argc, char **argv)
{
    const char *table = "long-job", *lease = "job";
    unsigned long ttl_ms = 1000, steps = 20, step_ms = 100;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') {
            if (pos++ == 0)
                table = argv[i];
            else
                lease = argv[i];
            continue;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "usage: long_job [TABLE [LEASE]] [--ttl MS] [--steps N] "
                            "[--step-ms MS]\n");
            return 2;
        }
        unsigned long v = strtoul(argv[++i], NULL, 10);
        if (strcmp(argv[i - 1], "--ttl") == 0)
            ttl_ms = v;
        else if (strcmp(argv[i - 1], "--steps") == 0)
            steps = v;
        else if (strcmp(argv[i - 1], "--step-ms") == 0)
            step_ms = v;
    }
    char owner[32];
    snprintf(owner, sizeof owner, "long_job-%d", (int)getpid());

    shl_table *t;
    shl_options o;
    shl_options_init(&o);
    int rc = shl_open(table, NULL, &t);
    if (rc == SHL_ENOENT)
        rc = shl_open(table, &o, &t);
    if (rc != SHL_OK) {
        fprintf(stderr, "long_job: open %s: %s\n", table, shl_strerror(rc));
        return 1;
    }
    /* A table this run created is this run's to remove, however it ends. */
    shl_table_info ti;
    int created = shl_table_info_get(t, &ti) == SHL_OK && ti.created;
    int ex = 1;
    uint64_t token;
    rc = shl_acquire_wait(t, lease, owner, ttl_ms * MS, 30000 * MS, &token);
    if (rc != SHL_OK) {
        fprintf(stderr, "long_job: acquire %s: %s\n", lease, shl_strerror(rc));
        goto out;
    }
    shl_renewer_options ro;
    shl_renewer_options_init(&ro);
    ro.on_loss = on_loss;
    shl_renewer *r;
    rc = shl_renewer_start(t, lease, owner, token, ttl_ms * MS, &ro, &r);
    if (rc != SHL_OK) {
        fprintf(stderr, "long_job: renewer: %s\n", shl_strerror(rc));
        if (shl_release(t, lease, owner, token) != SHL_OK)
            fprintf(stderr, "long_job: release: the lease stays held until its ttl ends\n");
        goto out;
    }
    printf("holding %s with token %llu\n", lease, (unsigned long long)token);
    fflush(stdout);

    unsigned long done = 0;
    struct pollfd p = {shl_renewer_fd(r), POLLIN, 0};
    /* The callback's flag suits a loop that cannot poll; this one does both. */
    while (done < steps && !atomic_load(&lost_reason)) {
        /* The "work" of one step; a real job computes here. Told of a loss,
         * poll returns at once. */
        if (poll(&p, 1, (int)step_ms) != 0)
            break;
        char progress[32];
        int n = snprintf(progress, sizeof progress, "step %lu", done + 1);
        /* Checked locally (deadline, flag) and by the table (token). */
        if (shl_renewer_write(r, progress, (size_t)n) != SHL_OK)
            break;
        done++;
    }
    ex = 0;
    if (done < steps) {
        /* The callback may still be on its way: the flag is already set. */
        int reason = shl_renewer_lost(r);
        printf("lost %s after %lu steps (%s): stopping\n", lease, done, why(reason));
        ex = EXIT_LOST;
    } else {
        printf("done %lu steps with token %llu\n", done, (unsigned long long)token);
    }
    if (shl_renewer_stop(r, SHL_RENEWER_RELEASE) != SHL_OK && ex == 0) {
        printf("lost %s at the very end\n", lease);
        ex = EXIT_LOST;
    }
out:
    shl_close(t);
    if (created)
        shl_unlink(table);
    return ex;
}
