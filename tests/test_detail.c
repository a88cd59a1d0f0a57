/*
 * tests/test_detail.c - shl_last_error(): every refused argument check names
 * the argument and the rule; SHL_ENOSPC says what was needed and what is
 * free (tests/test_segment.c, no_space); SHL_EPERM names the owner and the mode found; the detail
 * belongs to the thread that was refused.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* rc must be `code` and the detail must hold `want`. */
#define expect_detail(rc, code, want)                                                              \
    do {                                                                                           \
        shl_clear_error();                                                                         \
        int rc_ = (rc);                                                                            \
        cr_assert_eq(rc_, (code), "%s: %s", #rc, shl_errname(rc_));                                \
        cr_assert(strstr(shl_last_error(), (want)) != NULL, "%s: detail \"%s\", wanted \"%s\"",    \
                  #rc, shl_last_error(), (want));                                                  \
    } while (0)

struct fixture {
    char name[96];
    shl_table *t;
};

static void setup(struct fixture *f)
{
    t_name(f->name, sizeof f->name, "detail");
    f->t = t_create(f->name, 4, 16, SHL_CLOCK_MONOTONIC);
}

static void teardown(struct fixture *f)
{
    shl_close(f->t);
    cr_assert_eq(shl_unlink(f->name), SHL_OK);
}

Test(detail, owner_and_lease_names)
{
    struct fixture f;
    setup(&f);
    uint64_t tok;
    char owner[300];
    memset(owner, 'o', sizeof owner - 1);
    owner[sizeof owner - 1] = 0;
    expect_detail(shl_acquire(f.t, "L", owner, SEC, &tok), SHL_EINVAL,
                  "owner: 299 bytes, the limit is 63");
    expect_detail(shl_acquire(f.t, "L", "", SEC, &tok), SHL_EINVAL, "owner: empty");
    expect_detail(shl_acquire(f.t, "L", NULL, SEC, &tok), SHL_EINVAL, "owner: NULL");
    expect_detail(shl_acquire(f.t, "L", "a\tb", SEC, &tok), SHL_EINVAL,
                  "owner: byte 0x09 at 1 is not printable ASCII");
    expect_detail(shl_acquire(f.t, "job 1", "me", SEC, &tok), SHL_EINVAL,
                  "lease: contains a space at byte 3");
    expect_detail(shl_acquire(f.t, owner, "me", SEC, &tok), SHL_EINVAL,
                  "lease: 299 bytes, the limit is 63");
    expect_detail(shl_renew(f.t, "L", owner, 1, SEC), SHL_EINVAL, "owner: 299 bytes");
    expect_detail(shl_release(f.t, "L", "me", 0), SHL_EINVAL, "token: 0");
    uint64_t gen;
    expect_detail(shl_acquire_shared(f.t, "L", "bad\x7f", SEC, &tok, &gen), SHL_EINVAL,
                  "owner: byte 0x7f at 3");
    teardown(&f);
}

Test(detail, ttl_and_token_pointer)
{
    struct fixture f;
    setup(&f);
    uint64_t tok;
    expect_detail(shl_acquire(f.t, "L", "me", 0, &tok), SHL_EINVAL, "ttl: 0 ns, it must be > 0");
    expect_detail(shl_acquire(f.t, "L", "me", UINT64_MAX, &tok), SHL_EINVAL,
                  "overflows the table's clock");
    expect_detail(shl_acquire(f.t, "L", "me", SEC, NULL), SHL_EINVAL, "token: NULL");
    cr_assert_eq(shl_acquire(f.t, "L", "me", SEC, &tok), SHL_OK);
    expect_detail(shl_renew(f.t, "L", "me", tok, 0), SHL_EINVAL, "ttl: 0 ns");
    expect_detail(shl_renew(f.t, "L", "me", tok, UINT64_MAX), SHL_EINVAL, "overflows");
    cr_assert_eq(shl_release(f.t, "L", "me", tok), SHL_OK);
    teardown(&f);
}

/* One option out of range at a time, each on its own defaults. */
static const struct {
    const char *field;
    unsigned value;
    const char *want;
} bad_options[] = {
    {"mode", 0644, "mode: 0644 is not 0600 or 0660"},
    {"capacity", 0, "capacity: 0, it must be 1 to 16777216"},
    {"value_size", SHL_VALUE_MAX + 1, "value_size: 1048577 bytes, the limit is 1048576"},
    {"clock", 7, "clock: 7 is not"},
    {"flags", SHL_EXCL, "flags: SHL_EXCL without SHL_CREATE"},
    {"flags", 0x80, "flags: 0x80"},
    {"policy", 0x40, "policy: 0x40"},
};

static void set_option(shl_options *o, const char *field, unsigned v)
{
    shl_options_init(o);
    if (!strcmp(field, "mode"))
        o->mode = v;
    else if (!strcmp(field, "capacity"))
        o->capacity = v;
    else if (!strcmp(field, "value_size"))
        o->value_size = v;
    else if (!strcmp(field, "clock"))
        o->clock = (int)v;
    else if (!strcmp(field, "flags"))
        o->flags = v;
    else
        o->policy = v;
}

Test(detail, options_and_table_names)
{
    shl_options o;
    shl_table *t;
    char name[96];
    t_name(name, sizeof name, "detailopt");
    for (size_t i = 0; i < sizeof bad_options / sizeof bad_options[0]; i++) {
        set_option(&o, bad_options[i].field, bad_options[i].value);
        expect_detail(shl_open(name, &o, &t), SHL_EINVAL, bad_options[i].want);
    }
    shl_options_init(&o);
    expect_detail(shl_open("my table", &o, &t), SHL_EINVAL, "table: contains a space at byte 2");
    expect_detail(shl_open("", &o, &t), SHL_EINVAL, "table: empty");
    expect_detail(shl_open("a:b", &o, &t), SHL_EINVAL, "table: byte ':' (0x3a) at 1");
    cr_assert_eq(t_shm_entries(name), 0);
}

Test(detail, bound_lease_fence_and_state_file)
{
    struct fixture f;
    setup(&f);
    shl_lease *l;
    uint64_t tok;
    expect_detail(shl_lease_open(f.t, "L", "x\x01", &l), SHL_EINVAL, "owner: byte 0x01 at 1");
    cr_assert_eq(shl_lease_open(f.t, "L", "me", &l), SHL_OK);
    expect_detail(shl_lease_acquire(l, 0, &tok, NULL), SHL_EINVAL, "ttl: 0 ns");
    expect_detail(shl_lease_renew(l, 0, SEC), SHL_EINVAL, "token: 0 is never");
    expect_detail(shl_lease_write(l, 1, NULL, 3), SHL_EINVAL, "buf: NULL with len 3");
    shl_lease_close(l);
    shl_fence fence;
    cr_assert_eq(shl_fence_init(&fence, 0), SHL_OK);
    expect_detail(shl_fence_admit(&fence, 0), SHL_EINVAL, "token: 0 is never");
    shl_options o;
    shl_table *t;
    shl_options_init(&o);
    o.token_state_path = "/tmp/";
    expect_detail(shl_open("detailstate", &o, &t), SHL_EINVAL,
                  "token_state_path: \"/tmp/\" ends with '/'");
    teardown(&f);
}

/* A renewer of a ttl shorter than SHL_RENEWER_TTL_MIN would report losses
 * that only a late wake-up caused: refused, with the limit. */
Test(detail, renewer_ttl_minimum)
{
    struct fixture f;
    setup(&f);
    uint64_t tok;
    shl_renewer *r = NULL;
    cr_assert_eq(SHL_RENEWER_TTL_MIN, SHL_MS(10));
    cr_assert_eq(SHL_SEC(2), SHL_MS(2000));
    cr_assert_eq(SHL_MS(3), SHL_US(3000));
    cr_assert_eq(SHL_US(7), UINT64_C(7000));
    cr_assert_eq(shl_acquire(f.t, "L", "me", SHL_SEC(5), &tok), SHL_OK);
    expect_detail(shl_renewer_start(f.t, "L", "me", tok, SHL_MS(9), NULL, &r), SHL_EINVAL,
                  "ttl: 9000000 ns, a renewer's must be at least 10000000 ns");
    cr_assert_null(r);
    cr_assert_eq(shl_renewer_start(f.t, "L", "me", tok, SHL_RENEWER_TTL_MIN, NULL, &r), SHL_OK);
    cr_assert_eq(shl_renewer_stop(r, SHL_RENEWER_RELEASE), SHL_OK);
    teardown(&f);
}

/* etcd names are checked before any connection: no cluster is needed. */
Test(detail, etcd_names)
{
    shl_table *t;
    expect_detail(shl_open("etcd://127.0.0.1:1/my table", NULL, &t), SHL_EINVAL,
                  "table: \"my table\" is not 1 to 200 bytes");
    expect_detail(shl_open("etcd://127.0.0.1:1", NULL, &t), SHL_EINVAL,
                  "where '/' or ',' should follow HOST:PORT");
    expect_detail(shl_open("etcd://,x/t", NULL, &t), SHL_EINVAL, "an empty or malformed endpoint");
}

/* Success leaves the detail as it was (no work on the fast path); clearing
 * empties it. */
Test(detail, success_keeps_clear_empties)
{
    struct fixture f;
    setup(&f);
    uint64_t tok;
    cr_assert_eq(shl_acquire(f.t, "L", "", SEC, &tok), SHL_EINVAL);
    cr_assert_eq(shl_acquire(f.t, "L", "me", SEC, &tok), SHL_OK);
    cr_assert_str_eq(shl_last_error(), "owner: empty");
    shl_clear_error();
    cr_assert_str_eq(shl_last_error(), "");
    cr_assert_eq(shl_release(f.t, "L", "me", tok), SHL_OK);
    teardown(&f);
}

static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)(strcmp(shl_last_error(), "") == 0 ? "empty" : "seen");
}

Test(detail, per_thread)
{
    shl_options o;
    shl_table *t;
    shl_options_init(&o);
    o.mode = 0644;
    cr_assert_eq(shl_open("x", &o, &t), SHL_EINVAL);
    pthread_t th;
    void *r;
    cr_assert_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
    cr_assert_eq(pthread_join(th, &r), 0);
    cr_assert_str_eq((const char *)r, "empty", "another thread saw this thread's detail");
    cr_assert(strstr(shl_last_error(), "mode: 0644") != NULL);
}

/* A table with a wider mode, then one of another owner: the detail names
 * what was found and what this process accepts. */
Test(detail, permission)
{
    struct fixture f;
    setup(&f);
    char path[160], want[300];
    snprintf(path, sizeof path, "/dev/shm/%s", f.name);
    shl_table *t;
    cr_assert_eq(chmod(path, 0644), 0);
    snprintf(want, sizeof want, "%s: owner uid %u, group %u, mode 0644; this process is uid %u",
             path, (unsigned)geteuid(), (unsigned)getegid(), (unsigned)geteuid());
    expect_detail(shl_open(f.name, NULL, &t), SHL_EPERM, want);
    cr_assert(strstr(shl_last_error(), "accepts at most mode 0660") != NULL, "%s",
              shl_last_error());
    cr_assert_eq(chmod(path, 0600), 0);
    if (geteuid() == 0) { /* only root can give the file away */
        cr_assert_eq(chown(path, 4321, 4321), 0);
        expect_detail(shl_open(f.name, NULL, &t), SHL_EPERM, "owner uid 4321, group 4321");
        cr_assert_eq(chown(path, 0, 0), 0);
    }
    teardown(&f);
}
