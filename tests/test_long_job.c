/*
 * tests/test_long_job.c - examples/long_job.c, run as its own process: it
 * finishes its steps while its lease is renewed for many ttls, and stops
 * working as soon as it is told the lease is lost.
 */
#include <criterion/criterion.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define JOB_LOST 3

/* The built example: $SHL_EXAMPLES/long_job (make test sets it), else next
 * to the tool the tests run. */
static const char *job_path(void)
{
    static char path[1024];
    const char *dir = getenv("SHL_EXAMPLES");
    char tool[1024];
    snprintf(tool, sizeof tool, "%s", t_tool());
    snprintf(path, sizeof path, "%s/long_job", dir ? dir : dirname(tool));
    return path;
}

Test(long_job, long_job_finishes_while_renewed)
{
    char name[96], cmd[1400], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "exdone"), 4, 64, SHL_CLOCK_MONOTONIC);
    /* 12 steps of 100 ms with a 300 ms ttl: four ttls and more. */
    snprintf(cmd, sizeof cmd, "%s %s job --ttl 300 --steps 12 --step-ms 100", job_path(), name);
    cr_assert_eq(t_run(cmd, &out), 0, "output:\n%s", out);
    cr_assert(strstr(out, "done 12 steps with token 1"), "output:\n%s", out);
    free(out);
    char buf[64];
    size_t len;
    uint64_t tok;
    cr_assert_eq(shl_read(t, "job", buf, sizeof buf, &len, &tok), SHL_OK);
    cr_assert_eq(tok, 1);
    cr_assert_eq(len, strlen("step 12"));
    cr_assert_eq(memcmp(buf, "step 12", len), 0);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE, "the job did not release its lease");
    shl_close(t);
    shl_unlink(name);
}

static int job_holds(void *p)
{
    shl_lease_info in;
    char buf[64];
    size_t len;
    return shl_stat(p, "job", &in) == SHL_OK && in.state == SHL_STATE_HELD &&
           shl_read(p, "job", buf, sizeof buf, &len, NULL) == SHL_OK && len > 0;
}

Test(long_job, long_job_stops_when_revoked)
{
    t_guard(60);
    char name[96], outp[160];
    shl_table *t = t_create(t_name(name, sizeof name, "exrev"), 4, 64, SHL_CLOCK_MONOTONIC);
    snprintf(outp, sizeof outp, "/tmp/%s.out", name);
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0);
    if (p == 0) {
        if (!freopen(outp, "w", stdout))
            _exit(99);
        execl(job_path(), "long_job", name, "job", "--ttl", "20000", "--steps", "100000",
              "--step-ms", "20", (char *)NULL);
        _exit(98);
    }
    cr_assert(t_until(job_holds, t, 10 * SEC), "the job did not start working");
    cr_assert_eq(shl_revoke(t, "job"), SHL_OK);
    cr_assert_eq(t_wait(p), JOB_LOST);
    char buf[64] = "";
    size_t len;
    uint64_t tok;
    cr_assert_eq(shl_read(t, "job", buf, sizeof buf - 1, &len, &tok), SHL_OK);
    /* The job said where it stopped; nothing it wrote after that landed. */
    FILE *f = fopen(outp, "r");
    cr_assert(f);
    char line[256], said[256] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "lost job after ", 15) == 0)
            snprintf(said, sizeof said, "%s", line);
    fclose(f);
    unlink(outp);
    unsigned long steps = 0;
    cr_assert_eq(sscanf(said, "lost job after %lu steps (refused by the table)", &steps), 1,
                 "the job did not report the loss: '%s'", said);
    buf[len] = 0;
    char want[32];
    snprintf(want, sizeof want, "step %lu", steps);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(tok, 1);
    shl_close(t);
    shl_unlink(name);
}
