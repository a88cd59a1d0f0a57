/*
 * tests/test_planted.c - what someone else left under the names a call
 * opens: a FIFO at a table's name, at the token state file, at its lock and
 * at its old temporary name, and files made under a restrictive umask.
 *
 * A call that opened a FIFO would block forever (and a creator would do so
 * holding the state file's lock), so each call runs in a forked child with a
 * generous alarm: a regression fails the test instead of hanging the suite.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define ALARM_S 20 /* every call here returns at once; this only catches a hang */

static char dir[64];

static void mkdir_tmp(void)
{
    t_mkdtemp(dir, sizeof dir, "shlplant");
}

static void rm_tmp(void)
{
    t_rm_rf(dir);
}

TestSuite(planted, .init = mkdir_tmp, .fini = rm_tmp);

/* One call, run in a child under an alarm; its SHL_* code comes back through
 * shared memory. */
struct call {
    const char *name;  /* the table */
    const char *state; /* token state file, or NULL */
    int (*fn)(const struct call *c);
    int *rc; /* shared */
};

static int in_child(void *arg)
{
    const struct call *c = arg;
    alarm(ALARM_S);
    *c->rc = c->fn(c);
    return 0;
}

/* c->fn(c) in a child: its return code, after failing the test if the call
 * did not return. */
static int run_call(const char *what, const struct call *c)
{
    int st = t_wait(t_fork(in_child, (void *)c));
    cr_assert_neq(st, 128 + SIGALRM, "%s blocked for %d s", what, ALARM_S);
    cr_assert_eq(st, 0, "%s: child status %d", what, st);
    return *c->rc;
}

static int *shared_rc(void)
{
    int *p = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    return p;
}

static int do_open(const struct call *c)
{
    shl_table *t;
    int rc = shl_open(c->name, NULL, &t);
    if (rc == SHL_OK)
        shl_close(t);
    return rc;
}

static int do_create(const struct call *c)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = 8;
    o.token_state_path = c->state;
    shl_table *t;
    int rc = shl_open(c->name, &o, &t);
    if (rc == SHL_OK)
        shl_close(t);
    return rc;
}

static int do_unlink(const struct call *c)
{
    return shl_unlink(c->name);
}

static int do_check_name(const struct call *c)
{
    return shl_check_name(c->name, NULL, NULL);
}

static void plant_fifo(const char *path)
{
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
}

static void expect_fifo(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s is gone", path);
    cr_assert(S_ISFIFO(st.st_mode), "%s was replaced", path);
}

/* A FIFO at /dev/shm/NAME: every call that opens the name refuses it. */
Test(planted, fifo_at_table_name)
{
    char name[96], path[160];
    t_name(name, sizeof name, "fifo");
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    plant_fifo(path);
    struct call c = {name, NULL, NULL, shared_rc()};
    static const struct {
        const char *what;
        int (*fn)(const struct call *c);
    } calls[] = {{"shl_open", do_open},
                 {"shl_open(SHL_CREATE)", do_create},
                 {"shl_unlink", do_unlink},
                 {"shl_check_name", do_check_name}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        c.fn = calls[i].fn;
        int rc = run_call(calls[i].what, &c);
        cr_assert_eq(rc, SHL_EPERM, "%s: %s", calls[i].what, shl_errname(rc));
    }
    /* The tool's rm, under timeout(1) for the same reason. */
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout %d '%s' rm %s 2>&1", ALARM_S, t_tool(), name);
    int st = t_run(cmd, &out);
    cr_assert_neq(st, 124, "shmlease rm blocked for %d s", ALARM_S);
    cr_assert(st != 0 && strstr(out, "SHL_EPERM"), "shmlease rm: status %d: %s", st, out);
    free(out);
    expect_fifo(path);
    cr_assert_eq(unlink(path), 0);
    munmap(c.rc, sizeof(int));
}

static void table_and_state(char *name, size_t cap, char *state, size_t scap, const char *tag)
{
    t_name(name, cap, tag);
    snprintf(state, scap, "%s/tokens", dir);
}

/* Plants a FIFO at "<state><suffix>" and creates a table with that state
 * file: the call returns `want` at once and leaves the FIFO as it was. */
static void create_beside_fifo(const char *tag, const char *suffix, int want, char *name,
                               size_t cap, int *rc)
{
    char state[128], fifo[160];
    table_and_state(name, cap, state, sizeof state, tag);
    snprintf(fifo, sizeof fifo, "%s%s", state, suffix);
    plant_fifo(fifo);
    struct call c = {name, state, do_create, rc};
    int got = run_call(fifo, &c);
    cr_assert_eq(got, want, "a FIFO at %s: %s", fifo, shl_errname(got));
    cr_assert_eq(t_shm_entries(name), want == SHL_OK, "tables made: %d", t_shm_entries(name));
    expect_fifo(fifo);
}

/* A FIFO at the state file: refused, and its lock is not left held. */
Test(planted, fifo_at_state_file)
{
    char name[96], state[128];
    int *rc = shared_rc();
    create_beside_fifo("fstate", "", SHL_EPERM, name, sizeof name, rc);
    /* Once the state file is a file, the next creator gets on with it. */
    snprintf(state, sizeof state, "%s/tokens", dir);
    cr_assert_eq(unlink(state), 0);
    struct call c = {name, state, do_create, rc};
    int got = run_call("create after", &c);
    cr_assert_eq(got, SHL_OK, "%s", shl_errname(got));
    cr_assert_eq(shl_unlink(name), SHL_OK);
    munmap(rc, sizeof(int));
}

/* A FIFO at the lock file: refused. */
Test(planted, fifo_at_lock_file)
{
    char name[96];
    int *rc = shared_rc();
    create_beside_fifo("flock", ".lock", SHL_EPERM, name, sizeof name, rc);
    munmap(rc, sizeof(int));
}

/* A FIFO at "<state>.tmp", the temporary file's old fixed name: temporaries
 * are new files under unique names now, so it is simply not used. */
Test(planted, fifo_at_old_temporary_name)
{
    char name[96];
    int *rc = shared_rc();
    create_beside_fifo("ftmp", ".tmp", SHL_OK, name, sizeof name, rc);
    cr_assert_eq(t_dir_entries(dir, "tokens.tmp"), 1, "a temporary file was left behind");
    cr_assert_eq(shl_unlink(name), SHL_OK);
    munmap(rc, sizeof(int));
}

/* A symlink planted at the state file or its lock is not followed. */
Test(planted, symlinks_refused)
{
    char name[96], state[128], lock[160], target[160];
    table_and_state(name, sizeof name, state, sizeof state, "slink");
    snprintf(lock, sizeof lock, "%s.lock", state);
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    struct call c = {name, state, do_create, shared_rc()};
    const char *paths[] = {state, lock};
    for (int i = 0; i < 2; i++) {
        unlink(lock); /* the first creator made it */
        cr_assert_eq(symlink(target, paths[i]), 0);
        int rc = run_call("create with a symlink", &c);
        cr_assert_eq(rc, SHL_EPERM, "%s: %s", paths[i], shl_errname(rc));
        cr_assert_eq(access(target, F_OK), -1, "the link was followed");
        cr_assert_eq(unlink(paths[i]), 0);
    }
    munmap(c.rc, sizeof(int));
}

/* Under umask 0400 (no read permission for the owner) every file made is
 * still usable: a second creation with the same state file works. Root
 * ignores permissions, so as root the creators run as nobody. */
static int two_creations_under_umask(void *arg)
{
    const struct call *c = arg;
    alarm(ALARM_S);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return 90;
    umask(0400);
    char second[128];
    snprintf(second, sizeof second, "%s-2", c->name);
    struct call c2 = *c;
    c2.name = second;
    int rc = do_create(c);
    if (rc == SHL_OK)
        rc = shl_unlink(c->name);
    if (rc == SHL_OK)
        rc = do_create(&c2);
    if (rc == SHL_OK)
        rc = shl_unlink(c2.name);
    *c->rc = rc;
    return 0;
}

Test(planted, restrictive_umask)
{
    char name[96], state[128], lock[160];
    table_and_state(name, sizeof name, state, sizeof state, "umask");
    snprintf(lock, sizeof lock, "%s.lock", state);
    if (geteuid() == 0)
        cr_assert_eq(chown(dir, 65534, 65534), 0);
    struct call c = {name, state, NULL, shared_rc()};
    int st = t_wait(t_fork(two_creations_under_umask, &c));
    cr_assert_eq(st, 0, "child status %d", st);
    cr_assert_eq(*c.rc, SHL_OK, "%s", shl_errname(*c.rc));
    struct stat sb;
    const char *files[] = {state, lock};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(stat(files[i], &sb), 0);
        cr_assert_eq(sb.st_mode & 0777, 0600, "%s: mode %o", files[i], sb.st_mode & 0777);
    }
    munmap(c.rc, sizeof(int));
}
