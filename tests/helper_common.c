/*
 * tests/helper_common.c - shared test utilities.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* Plain names this process made with t_name(), removed from /dev/shm when it
 * exits (criterion ends a failed test with exit()) or when t_guard()'s alarm
 * kills it: a test that stops half-way leaves no segment behind. Only the
 * process that made a name removes it, never a forked child that exits. The
 * names are copied into fixed storage so that the alarm's handler allocates
 * nothing. */
#define AT_EXIT_MAX 128
static char at_exit_names[AT_EXIT_MAX][SHL_TABLE_NAME_MAX + 1];
static pid_t at_exit_pid;
static _Atomic unsigned at_exit_n;

static void unlink_made_names(void)
{
    if (getpid() != at_exit_pid)
        return;
    unsigned n = atomic_load(&at_exit_n);
    for (unsigned i = 0; i < n && i < AT_EXIT_MAX; i++) {
        char path[sizeof "/dev/shm/" + SHL_TABLE_NAME_MAX];
        memcpy(path, "/dev/shm/", 9);
        memcpy(path + 9, at_exit_names[i], sizeof at_exit_names[i]);
        unlink(path); /* a segment file; nothing else carries the name */
    }
}

static void t_remove_at_exit(const char *name)
{
    static atomic_flag registered = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&registered)) {
        at_exit_pid = getpid();
        atexit(unlink_made_names);
    }
    if (getpid() != at_exit_pid || strlen(name) > SHL_TABLE_NAME_MAX)
        return;
    unsigned i = atomic_fetch_add(&at_exit_n, 1);
    if (i < AT_EXIT_MAX)
        memcpy(at_exit_names[i], name, strlen(name) + 1);
}

/* The pid and a counter keep names apart within a run; the clock's low bits
 * keep a reused pid from meeting a table that a failed earlier run left. */
const char *t_name(char *buf, size_t cap, const char *tag)
{
    static _Atomic unsigned n;
    unsigned salt = (unsigned)(t_now() / 1000) & 0xffffffu;
    snprintf(buf, cap, "shltest-%d-%u-%06x-%s%s", (int)getpid(), atomic_fetch_add(&n, 1), salt,
             t_run_mark(), tag);
    t_remove_at_exit(buf);
    return buf;
}

shl_table *t_create(const char *name, uint32_t capacity, uint32_t value_size, int clock)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = value_size;
    o.clock = clock;
    o.flags = SHL_CREATE | SHL_EXCL;
    /* The rules' own tables: a holder whose handle is gone keeps its lease
     * to its expiry, as rule 1 states it. Reclaiming (the default) has its
     * own tests, which make their tables themselves. */
    o.policy = 0;
    shl_table *t = NULL;
    int rc = shl_open(name, &o, &t);
    cr_assert_eq(rc, SHL_OK, "create %s: %s", name, shl_strerror(rc));
    return t;
}

shl_table *t_create_opts(char *buf, size_t cap, const char *tag, shl_options *o)
{
    o->flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    int rc = shl_open(t_name(buf, cap, tag), o, &t);
    cr_assert_eq(rc, SHL_OK, "create %s: %s", buf, shl_last_error());
    return t;
}

shl_table_info t_info(shl_table *t)
{
    shl_table_info in;
    cr_assert_eq(shl_table_info_get(t, &in), SHL_OK);
    return in;
}

int t_tool_say(char **out, const char *fmt, ...)
{
    char args[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int st = t_tool_run(out, "%s 2>&1", args);
    cr_assert_lt(st, 128, "shmlease %s died (%d): %s", args, st, *out);
    return st;
}

pid_t t_spawn_tool(const char *const *argv)
{
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0, "fork: %s", strerror(errno));
    if (p == 0) {
        execv(t_tool(), (char **)argv);
        _exit(126);
    }
    return p;
}

pid_t t_fork(int (*fn)(void *arg), void *arg)
{
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0, "fork: %s", strerror(errno));
    if (p == 0) {
        /* A child never outlives its test, even when an assertion fails
         * before the test could reap it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        _exit(fn(arg));
    }
    return p;
}

int t_wait(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

uint64_t t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

void t_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / SEC), (long)(ns % SEC)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int t_until(int (*cond)(void *arg), void *arg, uint64_t timeout_ns)
{
    uint64_t end = t_now() + timeout_ns;
    int v;
    while (!(v = cond(arg)) && t_now() < end)
        t_sleep_ns(MS);
    return v;
}

char t_proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && n - (size_t)(p - buf) > 2 ? p[2] : 0;
}

int t_wait_stopped(pid_t pid)
{
    uint64_t end = t_now() + 5 * SEC;
    while (t_now() < end) {
        char st = t_proc_state(pid);
        if (st == 'T' || st == 't')
            return 0;
        t_sleep_ns(MS);
    }
    return -1;
}

int t_run(const char *cmdline, char **out)
{
    fflush(NULL);
    FILE *p = popen(cmdline, "r");
    cr_assert(p, "popen %s", cmdline);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

const char *t_tool(void)
{
    const char *t = getenv("SHL_TOOL");
    return t ? t : "build/shmlease";
}

int t_tool_vrun(char **out, const char *fmt, va_list ap)
{
    char args[1024], cmd[1400];
    vsnprintf(args, sizeof args, fmt, ap);
    snprintf(cmd, sizeof cmd, "'%s' %s", t_tool(), args);
    return t_run(cmd, out);
}

int t_tool_run(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = t_tool_vrun(out, fmt, ap);
    va_end(ap);
    return st;
}

void t_mkdtemp(char *buf, size_t cap, const char *tag)
{
    snprintf(buf, cap, "/tmp/%s-XXXXXX", tag);
    cr_assert(mkdtemp(buf), "mkdtemp %s: %s", buf, strerror(errno));
}

char *t_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

void t_rm_rf(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

int t_dir_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    cr_assert(d, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    size_t len = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, prefix, len) == 0;
    closedir(d);
    return n;
}

int t_shm_entries(const char *name)
{
    return t_dir_entries("/dev/shm", name);
}

int t_mapped(const char *lib)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f, "/proc/self/maps: %s", strerror(errno));
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        const char *path = strchr(line, '/');
        found = path && strstr(path, lib) != NULL;
    }
    fclose(f);
    return found;
}

static void on_guard_alarm(int sig)
{
    unlink_made_names();
    signal(sig, SIG_DFL);
    raise(sig);
}

void t_guard(unsigned seconds)
{
    signal(SIGALRM, on_guard_alarm);
    alarm(seconds);
}
