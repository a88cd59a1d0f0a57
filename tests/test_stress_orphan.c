/*
 * tests/test_stress_orphan.c - a campaign started in the background by a
 * shell that then exits.
 *
 * When the last process that ties a process group to the rest of its session
 * exits while a member of the group is stopped, the kernel sends every member
 * SIGHUP, then SIGCONT (POSIX "orphaned process group"). A campaign always
 * has stopped workers (its pauses), so `make stress &` from a shell that
 * exits, `nohup`, a CI step or a cron job used to lose every worker to
 * SIGHUP, and the SIGCONT resumed the paused ones behind the controller's
 * back. The workers now live in process groups of their own, which the
 * running controller keeps tied to the session.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* Whether a child of process `pp` is stopped now. */
static int child_stopped(pid_t pp)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')'); /* the name may hold anything */
        char state;
        int ppid, pgrp;
        if (p && sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && ppid == pp &&
            state == 'T')
            found = 1;
    }
    closedir(d);
    return found;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The parent of the campaign: a session of its own (so that no subreaper of
 * the test's session keeps the group tied), the campaign in a group of its
 * own as a shell's background job, and an exit while a worker is stopped. */
static void parent(const char *tool, const char *out, int report)
{
    if (setsid() < 0)
        _exit(2);
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0)
            _exit(126);
        execl(tool, tool, "stress", "--seconds", "4", "--workers", "6", "--leases", "2", "--ttl-ms",
              "60", "--kill-rate", "0", "--pause-rate", "20", "--revoke-rate", "0", "--repair-rate",
              "0", "--seed", "41", "--json", (char *)NULL);
        _exit(127);
    }
    if (c < 0)
        _exit(3);
    setpgid(c, c);
    if (write(report, &c, sizeof c) != (ssize_t)sizeof c)
        _exit(4);
    for (int i = 0; i < 3000; i++) {
        if (child_stopped(c))
            _exit(0); /* orphans the campaign's group, a worker stopped */
        sleep_ms(1);
    }
    _exit(5);
}

Test(stress, campaign_outlives_its_parent_with_workers_stopped)
{
    t_guard(60);
    const char *tool = getenv("SHL_TEST_TOOL");
    if (!tool)
        tool = "build/test/shmlease";
    char dir[64], out[96], cmd[128];
    t_mkdtemp(dir, sizeof dir, "shl-orphan");
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(cmd, sizeof cmd, "cat %s", out);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) {
        close(pfd[0]);
        parent(tool, out, pfd[1]);
    }
    close(pfd[1]);
    pid_t c = 0;
    cr_assert_eq(read(pfd[0], &c, sizeof c), (ssize_t)sizeof c);
    close(pfd[0]);
    int st;
    cr_assert_eq(waitpid(p, &st, 0), p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the parent never saw a stopped worker (status %#x)", st);
    /* The campaign is some other process's child now: wait for it to end. */
    for (int i = 0; i < 400 && kill(c, 0) == 0; i++)
        sleep_ms(100);
    cr_assert_neq(kill(c, 0), 0, "the campaign did not end");
    char *json = NULL;
    t_run(cmd, &json);
    cr_assert(json && strstr(json, "\"worker_failures\":0,"), "%s", json ? json : "(no output)");
    cr_assert(strstr(json, "\"pass\":true"), "%s", json);
    free(json);
    t_rm_rf(dir);
}
