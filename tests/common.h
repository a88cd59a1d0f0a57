/*
 * tests/common.h - what the tests share: unique table names, forked children,
 * waiting for them, and a pipe to hear from them.
 */
#ifndef SHL_TESTS_COMMON_H
#define SHL_TESTS_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "run_mark.h"
#include "shmlease.h"

#define MS  (UINT64_C(1000000))
#define SEC (UINT64_C(1000000000))

/* A result the test does not judge (a call in a child killed inside it, a
 * call racing others on purpose): taken, so that SHL_NODISCARD sees it
 * used, where a (void) cast would not do for gcc. */
static inline void t_any(int rc)
{
    (void)rc;
}

/* A table name unique to this process and call:
 * "shltest-<pid>-<n>-<salt>-[<run mark>-]<tag>". The segment of that name is
 * removed when the calling process exits (or t_guard() kills it). */
const char *t_name(char *buf, size_t cap, const char *tag);

/* Opens (creating) a table with the given capacity, value size and clock,
 * without the reclaim policy (a dead holder keeps its lease to expiry);
 * fails the test on error. */
shl_table *t_create(const char *name, uint32_t capacity, uint32_t value_size, int clock);

/* Creates the table t_name(buf, cap, tag) with the options o (its flags set
 * to SHL_CREATE | SHL_EXCL); fails the test on error. */
shl_table *t_create_opts(char *buf, size_t cap, const char *tag, shl_options *o);

/* The table's shl_table_info; fails the test on error. */
shl_table_info t_info(shl_table *t);

/* Forks; the child runs fn(arg) and _exit()s with its return value. */
pid_t t_fork(int (*fn)(void *arg), void *arg);

/* Waits for pid; returns its exit status, or 128 + signal if killed. */
int t_wait(pid_t pid);

/* Monotonic now in ns. */
uint64_t t_now(void);

/* Sleeps ns nanoseconds (restarting on EINTR). */
void t_sleep_ns(uint64_t ns);
/* Kills the calling test process with SIGALRM after `seconds`, so that a
 * hang fails the test instead of the suite. Used in place of criterion's
 * .timeout, whose bookkeeping in the runner leaks under LeakSanitizer. */
void t_guard(unsigned seconds);

/* Polls cond(arg) every millisecond for up to timeout_ns; returns its last value. */
int t_until(int (*cond)(void *arg), void *arg, uint64_t timeout_ns);

/* Process pid's state letter in /proc/<pid>/stat (R, S, T, ...), 0 if unknown. */
char t_proc_state(pid_t pid);
/* Waits until process pid is stopped (state T in /proc), up to 5 s. 0 on success. */
int t_wait_stopped(pid_t pid);

/* Runs a shell command line, returns its exit status; its stdout goes to *out
 * (malloc'd, NUL-terminated) when out != NULL. */
int t_run(const char *cmdline, char **out);

/* Runs "'<tool>' <fmt...>" through the shell (add "2>&1" to fmt to fold
 * stderr in); returns its exit status as t_run() does, and its stdout in *out
 * (malloc'd) when out != NULL. */
int t_tool_run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int t_tool_vrun(char **out, const char *fmt, va_list ap);
/* ... with stderr folded in, and a test failure if the tool died of a
 * signal (exit status 128 or more). */
int t_tool_say(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new private directory "/tmp/<tag>-XXXXXX" into buf (cap >= 64), and its
 * removal with everything in it. */
void t_mkdtemp(char *buf, size_t cap, const char *tag);
void t_rm_rf(const char *dir);
/* The whole file at path, NUL-terminated (free it). */
char *t_slurp(const char *path);

/* How many entries of directory `dir` have a name starting with `prefix`. */
int t_dir_entries(const char *dir, const char *prefix);
/* ... of /dev/shm starting with `name`: the table itself and anything a
 * creator might have left beside it. */
int t_shm_entries(const char *name);

/* Whether this process maps a file whose path contains `lib` (/proc/self/maps). */
int t_mapped(const char *lib);

/* The path of the built tool (the SHL_TOOL environment variable, set by make). */
const char *t_tool(void);
/* Starts the tool with argv (argv[0] is its name) in a child; its pid. */
pid_t t_spawn_tool(const char *const *argv);

#endif
