/*
 * tests/test_examples.c - the example programs run, and say "ok".
 *
 * They are run as separate programs, from the build directory (make test
 * sets SHL_EXAMPLES, default build/examples), exactly as a user would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const char *ex_dir(void)
{
    const char *d = getenv("SHL_EXAMPLES");
    return d ? d : "build/examples";
}

/* Runs `prog args`, returns its exit status; *out gets its output. */
static int run_example(const char *prog, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 120 %s/%s %s 2>&1", ex_dir(), prog, args);
    return t_run(cmd, out);
}

Test(examples, leader_election)
{
    char name[96], *out = NULL;
    t_name(name, sizeof name, "exleader");
    int rc = run_example("leader", name, &out);
    cr_assert_eq(rc, 0, "leader failed:\n%s", out);
    cr_assert(strstr(out, "ok: 4 terms, last token 4, "), "%s", out);
    cr_assert(strstr(out, "leads with token 1\n"), "%s", out);
    cr_assert(strstr(out, "observer sees w"), "the observer saw no leader:\n%s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT, "the example removed its table");
}

Test(examples, fenced_writer_refuses_late_write_across_recreation)
{
    char name[96], dir[] = "/tmp/shlex-XXXXXX", args[400], *out = NULL;
    cr_assert(mkdtemp(dir));
    t_name(name, sizeof name, "exfence");
    snprintf(args, sizeof args, "%s %s/resource %s/tokens", name, dir, dir);
    for (int run = 0; run < 2; run++) {
        int rc = run_example("fenced_writer", args, &out);
        cr_assert_eq(rc, 0, "run %d failed:\n%s", run, out);
        cr_assert(strstr(out, "late write refused by the fence"), "%s", out);
        cr_assert(strstr(out, "ok: file holds \"B:"), "%s", out);
        free(out);
    }
    /* The same file after a re-creation without the state file: refused. */
    snprintf(args, sizeof args, "%s %s/resource", name, dir);
    cr_assert_eq(run_example("fenced_writer", args, &out), 1, "%s", out);
    cr_assert(strstr(out, "older than one the fence has already admitted"), "%s", out);
    free(out);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT, "the refused run removed its table too");
}

Test(examples, counter_exact_under_kills)
{
    char name[96], args[200], *out = NULL;
    t_name(name, sizeof name, "excounter");
    snprintf(args, sizeof args, "%s 6 2000 2", name);
    int rc = run_example("counter", args, &out);
    cr_assert_eq(rc, 0, "counter failed:\n%s", out);
    cr_assert(strstr(out, "2 worker(s) killed"), "kills happened:\n%s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_ENOENT);
}

/*
 * Every way out removes the example's table, failures included. fork() is
 * made to fail at its Nth call by a preloaded shim (the examples link the C
 * library dynamically); long_job fails on a lease name it cannot use after
 * it has created its table. Then /dev/shm must hold nothing of the run.
 */
static const char fork_shim[] =
    "#define _GNU_SOURCE\n"
    "#include <dlfcn.h>\n#include <errno.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
    "static int calls;\n"
    "pid_t fork(void)\n{\n"
    "    const char *at = getenv(\"SHL_FAIL_FORK_AT\");\n"
    "    if (at && ++calls == atoi(at)) {\n        errno = EAGAIN;\n        return -1;\n    }\n"
    "    return ((pid_t(*)(void))dlsym(RTLD_NEXT, \"fork\"))();\n}\n";

static void build_fork_shim(char *so, size_t cap)
{
    char src[64], cmd[512];
    snprintf(src, sizeof src, "/tmp/shl-forkshim-%d.c", (int)getpid());
    snprintf(so, cap, "/tmp/shl-forkshim-%d.so", (int)getpid());
    FILE *f = fopen(src, "w");
    cr_assert(f);
    fputs(fork_shim, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o %s %s -ldl 2>&1", so, src);
    char *out = NULL;
    cr_assert_eq(t_run(cmd, &out), 0, "shim: %s", out);
    free(out);
    unlink(src);
}

static void assert_no_segment(const char *table, const char *what)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", table);
    cr_assert_eq(access(path, F_OK), -1, "%s left %s behind", what, path);
}

/* Runs `prog args` with fork() failing at call `at`. The table it made (from
 * `table`, or named in its first line when `table` is empty) must be gone,
 * and it must have failed saying why. */
static void run_fork_failing(const char *so, const char *prog, const char *args, const char *table,
                             int at)
{
    char cmd[1024], *out = NULL;
    /* ASan (make check) wants to come first; the shim only wraps fork().
     * timeout(1) forks too: it is run without the shim. */
    snprintf(cmd, sizeof cmd,
             "timeout 60 env ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 "
             "SHL_FAIL_FORK_AT=%d LD_PRELOAD=%s %s %s 2>&1",
             at, so, prog, args);
    int rc = t_run(cmd, &out);
    char named[96] = "";
    if (!table[0]) {
        const char *p = strstr(out, "table ");
        cr_assert(p && sscanf(p, "table %95[^,]", named) == 1, "no table named:\n%s", out);
        table = named;
    }
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", table);
    cr_assert_eq(access(path, F_OK), -1, "%s, fork %d failing, left %s behind:\n%s", prog, at, path,
                 out);
    cr_assert_eq(rc, 1, "%s %s with fork %d failing: status %d, not 1:\n%s", prog, args, at, rc,
                 out);
    cr_assert(strstr(out, ": fork: Resource temporarily unavailable"),
              "%s did not say fork failed:\n%s", prog, out);
    free(out);
}

Test(examples, table_removed_when_fork_fails)
{
    t_guard(120);
    char so[64], name[96], prog[512], args[400], dir[] = "/tmp/shlex-XXXXXX";
    build_fork_shim(so, sizeof so);
    cr_assert(mkdtemp(dir));
    static const struct {
        const char *prog;
        int at;
    } cases[] = {
        {"leader", 1}, {"leader", 3}, {"counter", 1}, {"counter", 4}, {"fenced_writer", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t_name(name, sizeof name, cases[i].prog);
        snprintf(prog, sizeof prog, "%s/%s", ex_dir(), cases[i].prog);
        if (strcmp(cases[i].prog, "fenced_writer") == 0)
            snprintf(args, sizeof args, "%s %s/resource", name, dir);
        else
            snprintf(args, sizeof args, "%s", name);
        run_fork_failing(so, prog, args, name, cases[i].at);
    }
    /* The demo names its table itself. */
    snprintf(prog, sizeof prog, "%s/../demo", ex_dir());
    run_fork_failing(so, prog, "", "", 1);
    run_fork_failing(so, prog, "", "", 3);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    unlink(so);
}

Test(examples, long_job_removes_its_table_when_it_cannot_acquire)
{
    char name[96], args[200], *out = NULL;
    t_name(name, sizeof name, "exjobfail");
    snprintf(args, sizeof args, "%s 'bad name'", name);
    cr_assert_eq(run_example("long_job", args, &out), 1, "%s", out);
    cr_assert(strstr(out, "acquire bad name"), "%s", out);
    free(out);
    assert_no_segment(name, "long_job");
}

/* `make examples` builds them, although a folder of that name exists. */
Test(examples, make_target_builds_them)
{
    const char *root = getenv("SHL_ROOT") ? getenv("SHL_ROOT") : ".";
    char cmd[600], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MAKELEVEL make -C %s -n B=/tmp/shl-noexamples-%d examples 2>&1",
             root, (int)getpid());
    cr_assert_eq(t_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "examples/leader.c") && strstr(out, "examples/demo.c"),
              "make -n examples would not build them:\n%s", out);
    free(out);
}
