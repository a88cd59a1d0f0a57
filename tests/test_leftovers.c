/*
 * tests/test_leftovers.c - a test that stops half-way leaves no segment in
 * /dev/shm: the tables named with t_name() are removed when the process that
 * named them ends with exit() (as criterion ends a failed test) or is killed
 * by t_guard()'s alarm, and only by that process.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* A process of its own, as criterion runs each test: names a table, creates
 * it, tells the parent its name, then ends as `how` says. */
enum end { END_EXIT, END_ALARM, END_CHILD_EXIT };

static pid_t named_then(enum end how, int fd)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid)
        return pid;
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "left"), 4, 16, SHL_CLOCK_MONOTONIC);
    shl_close(t);
    if (write(fd, name, sizeof name) != (ssize_t)sizeof name)
        _exit(9);
    switch (how) {
    case END_EXIT:
        exit(1); /* a failed assertion ends a test so */
    case END_ALARM:
        t_guard(1);
        for (;;)
            pause();
    case END_CHILD_EXIT: {
        /* A child of the test process that exits must not remove the
         * test's table: the test goes on using it. */
        pid_t c = fork();
        if (c == 0)
            exit(0);
        int st = t_wait(c);
        _exit(st == 0 && t_shm_entries(name) == 1 ? 0 : 8);
    }
    }
    _exit(7);
}

static void ends_with_nothing_left(enum end how, int want_status, int want_left)
{
    t_guard(30);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = named_then(how, p[1]);
    char name[96];
    cr_assert_eq(read(p[0], name, sizeof name), (ssize_t)sizeof name);
    int st = t_wait(pid);
    cr_assert_eq(st, want_status, "the process ended with %d", st);
    cr_expect_eq(t_shm_entries(name), want_left, "/dev/shm/%s", name);
    shl_unlink(name);
    close(p[0]);
    close(p[1]);
}

Test(leftovers, exit_removes_the_named_tables)
{
    ends_with_nothing_left(END_EXIT, 1, 0);
}

Test(leftovers, guard_alarm_removes_the_named_tables)
{
    ends_with_nothing_left(END_ALARM, 128 + SIGALRM, 0);
}

Test(leftovers, a_child_exiting_removes_nothing)
{
    /* The test process itself ends with _exit: its table stays (and is
     * removed here). */
    ends_with_nothing_left(END_CHILD_EXIT, 0, 1);
}
