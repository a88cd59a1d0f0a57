/*
 * tests/test_run.c - shmlease run: the token reaches the command, a second
 * run on a held lease fails or waits as asked, exit statuses pass through,
 * and a lost lease stops the command (SIGTERM, then SIGKILL after the grace).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define EXIT_LOST 4

static char *run_out(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs "shmlease <fmt...>" through the shell; its stdout, malloc'd. */
static char *run_out(int *status, const char *fmt, ...)
{
    char *out;
    va_list ap;
    va_start(ap, fmt);
    *status = t_tool_vrun(&out, fmt, ap);
    va_end(ap);
    return out;
}

Test(run, token_reaches_command_and_lease_is_released)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "runtok"), 4, 16, SHL_CLOCK_MONOTONIC);
    int st;
    char *out = run_out(&st,
                        "run %s job --ttl 2s --owner me -- sh -c "
                        "'echo $SHMLEASE_TOKEN:$SHMLEASE_LEASE:$SHMLEASE_TABLE:$SHMLEASE_OWNER'",
                        name);
    cr_assert_eq(st, 0);
    char want[160];
    snprintf(want, sizeof want, "1:job:%s:me\n", name);
    cr_assert_str_eq(out, want);
    free(out);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "job", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE, "not released when the command ended");
    cr_assert_eq(in.token, 1);
    /* The next run gets the next token. */
    out = run_out(&st, "run %s job -- sh -c 'echo $SHMLEASE_TOKEN'", name);
    cr_assert_str_eq(out, "2\n");
    free(out);
    shl_close(t);
    shl_unlink(name);
}

Test(run, passes_the_command_status_on)
{
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "runst"), 4, 16, SHL_CLOCK_MONOTONIC);
    int st;
    free(run_out(&st, "run %s L -- sh -c 'exit 7'", name));
    cr_assert_eq(st, 7);
    free(run_out(&st, "run %s L -- sh -c 'kill -9 $$'", name));
    cr_assert_eq(st, 128 + SIGKILL);
    free(run_out(&st, "run %s L -- /nonexistent/command 2>/dev/null", name));
    cr_assert_eq(st, 127);
    free(run_out(&st, "run %s L 2>/dev/null", name));
    cr_assert_eq(st, 2, "no command is a usage error");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE);
    shl_close(t);
    shl_unlink(name);
}

struct wait_run {
    const char *table;
    char out[64];
};

static int waiting_run(void *p)
{
    struct wait_run *w = p;
    int st;
    char *out = run_out(&st, "run %s L --wait 30s -- sh -c 'echo ran $SHMLEASE_TOKEN'", w->table);
    printf("%s", out);
    fflush(stdout);
    free(out);
    return st;
}

static int one_waiter(void *p)
{
    shl_lease_info in;
    return shl_stat(p, "L", &in) == SHL_OK && in.waiters == 1;
}

Test(run, second_run_fails_or_waits_as_asked)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "runbusy"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "holder", 60 * SEC, &tok), SHL_OK);
    int st;
    char *out = run_out(&st, "run %s L -- echo ran 2>/dev/null", name);
    cr_assert_eq(st, 1, "a held lease without --wait must fail");
    cr_assert_str_eq(out, "", "the command ran without the lease");
    free(out);
    uint64_t t0 = t_now();
    out = run_out(&st, "run %s L --wait 300ms -- echo ran 2>/dev/null", name);
    cr_assert_eq(st, 1, "--wait must time out while the lease is held");
    cr_assert_geq(t_now() - t0, 300 * MS);
    cr_assert_str_eq(out, "");
    free(out);
    /* A waiting run gets it once the holder lets go. Its output goes to a
     * file: the child is a fork of this test. */
    char path[128];
    snprintf(path, sizeof path, "/tmp/%s.out", name);
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0);
    if (p == 0) {
        if (!freopen(path, "w", stdout))
            _exit(99);
        struct wait_run w = {name, ""};
        _exit(waiting_run(&w));
    }
    cr_assert(t_until(one_waiter, t, 10 * SEC), "the second run is not waiting");
    cr_assert_eq(shl_release(t, "L", "holder", tok), SHL_OK);
    cr_assert_eq(t_wait(p), 0);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[64] = "";
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    char want[64];
    snprintf(want, sizeof want, "ran %llu\n", (unsigned long long)tok + 1);
    cr_assert_str_eq(line, want);
    shl_close(t);
    shl_unlink(name);
}

/* Starts "shmlease run TABLE L --owner runner ARGS... -- sh -c SCRIPT". */
static pid_t spawn_run(const char *table, const char *const *opts, const char *script)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = "shmlease";
    argv[n++] = "run";
    argv[n++] = table;
    argv[n++] = "L";
    argv[n++] = "--owner";
    argv[n++] = "runner";
    while (*opts)
        argv[n++] = *opts++;
    argv[n++] = "--";
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n] = NULL;
    return t_spawn_tool(argv);
}

static int runner_holds(void *p)
{
    shl_lease_info in;
    return shl_stat(p, "L", &in) == SHL_OK && in.state == SHL_STATE_HELD &&
           strcmp(in.owner, "runner") == 0;
}

static int file_has(const char *path, const char *want)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, want) != NULL;
}

struct file_want {
    const char *path, *want;
};

static int file_cond(void *p)
{
    struct file_want *w = p;
    return file_has(w->path, w->want);
}

/* Stops `shmlease run` (not its command) past the lease's expiry: on resume
 * it finds the lease lost, stops the command and exits EXIT_LOST. */
static void stall_runner(pid_t run, uint64_t ns)
{
    kill(run, SIGSTOP);
    cr_assert_eq(t_wait_stopped(run), 0);
    t_sleep_ns(ns);
    kill(run, SIGCONT);
}

/* Runs a command that writes "up" to *path once started and "term" when
 * it gets SIGTERM; returns once it runs and the runner holds the lease. */
static pid_t run_trapping(shl_table *t, const char *name, const char *const *opts, char *path,
                          size_t cap)
{
    char script[512];
    snprintf(path, cap, "/tmp/%s.out", name);
    snprintf(script, sizeof script,
             "trap 'echo term >> %s; exit 0' TERM; echo up > %s; while :; do sleep 0.02; done",
             path, path);
    pid_t run = spawn_run(name, opts, script);
    struct file_want up = {path, "up"};
    cr_assert(t_until(file_cond, &up, 10 * SEC), "the command did not start");
    cr_assert(t_until(runner_holds, t, 10 * SEC));
    return run;
}

/* Runs "sh -c 'BEFORE echo $$ > FILE; AFTER'"; returns once the command
 * has told its pid (*cmd_pid) and the runner holds the lease. */
static pid_t run_telling_pid(shl_table *t, const char *name, const char *const *opts,
                             const char *before, const char *after, int *cmd_pid)
{
    char path[128], script[512];
    snprintf(path, sizeof path, "/tmp/%s.pid", name);
    snprintf(script, sizeof script, "%s echo $$ > %s; %s", before, path, after);
    pid_t run = spawn_run(name, opts, script);
    struct file_want up = {path, "\n"};
    cr_assert(t_until(file_cond, &up, 10 * SEC), "the command did not start");
    FILE *f = fopen(path, "r");
    *cmd_pid = 0;
    cr_assert(f && fscanf(f, "%d", cmd_pid) == 1);
    fclose(f);
    unlink(path);
    cr_assert(t_until(runner_holds, t, 10 * SEC));
    return run;
}

Test(run, lost_lease_terminates_the_command)
{
    t_guard(60);
    char name[96], path[128];
    shl_table *t = t_create(t_name(name, sizeof name, "runlost"), 4, 16, SHL_CLOCK_MONOTONIC);
    const char *opts[] = {"--ttl", "400ms", "--margin", "100ms", NULL};
    pid_t run = run_trapping(t, name, opts, path, sizeof path);
    stall_runner(run, SEC);
    cr_assert_eq(t_wait(run), EXIT_LOST);
    cr_assert(file_has(path, "term"), "the command was not sent SIGTERM");
    unlink(path);
    shl_close(t);
    shl_unlink(name);
}

Test(run, command_ignoring_sigterm_is_killed_after_grace)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "rungrace"), 4, 16, SHL_CLOCK_MONOTONIC);
    const char *opts[] = {"--ttl", "400ms", "--margin", "100ms", "--grace", "300ms", NULL};
    int cmd_pid;
    pid_t run =
        run_telling_pid(t, name, opts, "trap '' TERM;", "while :; do sleep 0.02; done", &cmd_pid);
    uint64_t t0 = t_now();
    stall_runner(run, SEC);
    cr_assert_eq(t_wait(run), EXIT_LOST);
    cr_assert_geq(t_now() - t0, SEC + 300 * MS, "SIGKILL came before the grace period");
    cr_assert(kill(cmd_pid, 0) != 0 && errno == ESRCH, "the command outlived shmlease run");
    shl_close(t);
    shl_unlink(name);
}

Test(run, revoke_signals_the_command_within_the_margin)
{
    t_guard(60);
    char name[96], path[128], cmd[512];
    shl_table *t = t_create(t_name(name, sizeof name, "runrev"), 4, 16, SHL_CLOCK_MONOTONIC);
    /* Renewals every 10 s: noticing the revoke only at the next renewal
     * would miss the 3 s margin by far. */
    const char *opts[] = {"--ttl", "30s", "--margin", "3s", NULL};
    pid_t run = run_trapping(t, name, opts, path, sizeof path);
    struct file_want term = {path, "term"};
    snprintf(cmd, sizeof cmd, "%s revoke %s L", t_tool(), name);
    uint64_t t0 = t_now();
    cr_assert_eq(t_run(cmd, NULL), 0);
    cr_assert(t_until(file_cond, &term, 3 * SEC), "not signalled within the margin");
    cr_assert_lt(t_now() - t0, 3 * SEC);
    cr_assert_eq(t_wait(run), EXIT_LOST);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED);
    unlink(path);
    shl_close(t);
    shl_unlink(name);
}

Test(run, passes_sigterm_on_and_releases)
{
    t_guard(60);
    char name[96], path[128];
    shl_table *t = t_create(t_name(name, sizeof name, "runfwd"), 4, 16, SHL_CLOCK_MONOTONIC);
    const char *opts[] = {"--ttl", "30s", NULL};
    pid_t run = run_trapping(t, name, opts, path, sizeof path);
    kill(run, SIGTERM);
    cr_assert_eq(t_wait(run), 0, "the command's own status (its trap exits 0)");
    cr_assert(file_has(path, "term"), "SIGTERM was not passed to the command");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE, "not released after the command ended");
    unlink(path);
    shl_close(t);
    shl_unlink(name);
}

/* Gone, or a zombie its new parent has not reaped yet. */
static int process_gone(void *p)
{
    int pid = *(int *)p;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* A SIGKILLed shmlease run takes its command with it: nothing is left
 * running that believes it holds the lease. */
Test(run, killed_run_takes_its_command_with_it)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "runkill"), 4, 16, SHL_CLOCK_MONOTONIC);
    const char *opts[] = {"--ttl", "30", NULL};
    int cmd_pid; /* exec: the pid written is the command's */
    pid_t run = run_telling_pid(t, name, opts, "", "exec sleep 30", &cmd_pid);
    kill(run, SIGKILL);
    cr_assert_eq(t_wait(run), 128 + SIGKILL);
    int gone = t_until(process_gone, &cmd_pid, 5 * SEC);
    if (!gone)
        kill(cmd_pid, SIGKILL);
    cr_assert(gone, "the command outlived the SIGKILLed shmlease run");
    shl_close(t);
    shl_unlink(name);
}
