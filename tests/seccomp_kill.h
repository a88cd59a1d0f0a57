/*
 * tests/seccomp_kill.h - killing a process at a chosen system call, with a
 * seccomp filter: the process dies as a SIGKILL would take it there (its
 * mutexes held or not, its stores so far made, the call never made).
 */
#ifndef SHL_TESTS_SECCOMP_KILL_H
#define SHL_TESTS_SECCOMP_KILL_H

#include <signal.h>

/* The signal a process killed by its filter dies of (SECCOMP_RET_KILL_PROCESS). */
#define SK_SIGNAL SIGSYS

/* Installs, in the calling process, a filter that kills it at its next
 * futex(FUTEX_WAKE) call, private or shared (no other call is touched).
 * 0, or -1 with errno. */
int sk_kill_at_futex_wake(void);

/* Installs, in the calling process, a filter under which every
 * fallocate(2) fails with errno `err` (as on a file system without it:
 * EOPNOTSUPP). 0, or -1 with errno. */
int sk_fail_fallocate(int err);

/* Installs a filter that hands every system call of the calling process
 * but sendmsg(2) to a supervisor, and returns the supervisor's listener fd
 * (SECCOMP_FILTER_FLAG_NEW_LISTENER), or -1 with errno. The caller passes
 * the fd on with sk_send_fd() (sendmsg is let through for that). */
int sk_notify_all(void);

/* Passing an fd over a unix socket (SCM_RIGHTS): 0 or -1. */
int sk_send_fd(int sock, int fd);
int sk_recv_fd(int sock);

/* Supervises the process whose listener is `fd`: lets its system calls
 * through one by one and, at the n-th (n >= 1), kills it with SIGKILL
 * before the call is made. A call of `marker` (a system call number whose
 * first argument is `marker_arg`) ends the count: the supervised operation
 * is over. Returns the number of calls seen before the marker, or -1 when
 * the process was killed at the n-th (or went away). Closes fd. */
long sk_supervise(int fd, pid_t pid, long n, long marker, unsigned long marker_arg);

#endif
