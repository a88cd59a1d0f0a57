/*
 * tests/test_args.c - bad arguments to every public function: a clear error
 * code, no crash, and nothing changed.
 *
 * "Nothing changed" is checked on a manual-clock table holding one lease with
 * a value: its state, value, token and the table's count of names are taken
 * before and compared after each refused call.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define VSIZE 16
#define T0    1000 /* manual clock at the start */
#define TTL   100  /* the held lease's ttl */
#define LEASE "L"
#define OWNER "holder"
#define VALUE "value"

struct fixture {
    char name[96];
    shl_table *t;
    uint64_t tok;
};

static void setup(struct fixture *f)
{
    t_name(f->name, sizeof f->name, "args");
    f->t = t_create(f->name, 4, VSIZE, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(f->t, T0), SHL_OK);
    cr_assert_eq(shl_acquire(f->t, LEASE, OWNER, TTL, &f->tok), SHL_OK);
    cr_assert_eq(shl_write(f->t, LEASE, OWNER, f->tok, VALUE, strlen(VALUE)), SHL_OK);
}

static void teardown(struct fixture *f)
{
    shl_close(f->t);
    cr_assert_eq(shl_unlink(f->name), SHL_OK);
}

struct snap {
    shl_lease_info li;
    unsigned char val[VSIZE];
    size_t len;
    uint64_t vtok;
    uint32_t used;
    uint64_t now;
};

static void snap_take(shl_table *t, struct snap *s)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(shl_stat(t, LEASE, &s->li), SHL_OK);
    cr_assert_eq(shl_read(t, LEASE, s->val, sizeof s->val, &s->len, &s->vtok), SHL_OK);
    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(t, &ti), SHL_OK);
    s->used = ti.used;
    cr_assert_eq(shl_now(t, &s->now), SHL_OK);
}

/* Fails unless the lease, its value, the table's names and its clock are as
 * in `a`. */
static void snap_same(shl_table *t, const struct snap *a, const char *what)
{
    struct snap b;
    snap_take(t, &b);
    cr_assert_str_eq(b.li.owner, a->li.owner, "%s: holder changed", what);
    cr_assert_eq(b.li.token, a->li.token, "%s: token changed", what);
    cr_assert_eq(b.li.expiry_ns, a->li.expiry_ns, "%s: expiry changed", what);
    cr_assert_eq(b.li.since_ns, a->li.since_ns, "%s: since changed", what);
    cr_assert_eq(b.li.state, a->li.state, "%s: state changed", what);
    cr_assert_eq(b.li.pid, a->li.pid, "%s: pid changed", what);
    cr_assert_eq(b.len, a->len, "%s: value length changed", what);
    cr_assert_eq(b.vtok, a->vtok, "%s: value token changed", what);
    cr_assert(memcmp(b.val, a->val, a->len) == 0, "%s: value changed", what);
    cr_assert_eq(b.used, a->used, "%s: a name was added", what);
    cr_assert_eq(b.now, a->now, "%s: clock moved", what);
}

static void no_op(void *arg)
{
    *(int *)arg += 1;
}

static int grow(void *value, size_t *len, size_t cap, void *arg)
{
    (void)arg;
    memset(value, 'x', cap);
    *len = cap + 1; /* longer than the buffer: must be refused */
    return 0;
}

static int keep(void *value, size_t *len, size_t cap, void *arg)
{
    (void)value;
    (void)len;
    (void)cap;
    *(int *)arg += 1;
    return 0;
}

/* Every lease operation with `lease` and `owner` (one of them bad) refused
 * with SHL_EINVAL, nothing changed. */
static void lease_ops_refused(struct fixture *f, const char *lease, const char *owner,
                              const char *what)
{
    struct snap s;
    snap_take(f->t, &s);
    uint64_t tok = 77;
    int calls = 0;
    shl_lease_info li;
    cr_assert_eq(shl_acquire(f->t, lease, owner, TTL, &tok), SHL_EINVAL, "acquire %s", what);
    cr_assert_eq(tok, 77, "acquire %s wrote the token", what);
    cr_assert_eq(shl_acquire_ex(f->t, lease, owner, TTL, &tok, &li), SHL_EINVAL, "%s", what);
    cr_assert_eq(shl_renew(f->t, lease, owner, f->tok, TTL), SHL_EINVAL, "renew %s", what);
    cr_assert_eq(shl_release(f->t, lease, owner, f->tok), SHL_EINVAL, "release %s", what);
    cr_assert_eq(shl_write(f->t, lease, owner, f->tok, "zz", 2), SHL_EINVAL, "write %s", what);
    cr_assert_eq(shl_guard(f->t, lease, owner, f->tok, no_op, &calls), SHL_EINVAL, "%s", what);
    cr_assert_eq(shl_update(f->t, lease, owner, f->tok, keep, &calls), SHL_EINVAL, "%s", what);
    cr_assert_eq(calls, 0, "%s: a callback ran", what);
    snap_same(f->t, &s, what);
}

/* Operations that take only a lease name. */
static void name_ops_refused(struct fixture *f, const char *lease, const char *what)
{
    unsigned char buf[VSIZE];
    size_t len = 99;
    shl_lease_info li;
    cr_assert_eq(shl_read(f->t, lease, buf, sizeof buf, &len, NULL), SHL_EINVAL, "%s", what);
    cr_assert_eq(len, 99);
    cr_assert_eq(shl_stat(f->t, lease, &li), SHL_EINVAL, "stat %s", what);
}

static char *repeat(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = 0;
    return buf;
}

Test(args, null_pointers)
{
    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    shl_options o;
    shl_options_init(&o);
    shl_options_init(NULL); /* no crash */
    shl_table *t = f.t;
    cr_assert_eq(shl_open(NULL, &o, &t), SHL_EINVAL);
    cr_assert_null(t);
    cr_assert_eq(shl_open(NULL, NULL, &t), SHL_EINVAL);
    cr_assert_eq(shl_open(f.name, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_open(f.name, &o, NULL), SHL_EINVAL);
    cr_assert_eq(shl_close(NULL), SHL_OK);
    cr_assert_eq(shl_unlink(NULL), SHL_EINVAL);

    shl_table_info ti;
    cr_assert_eq(shl_table_info_get(NULL, &ti), SHL_EINVAL);
    cr_assert_eq(shl_table_info_get(f.t, NULL), SHL_EINVAL);
    cr_assert_eq(shl_table_check(NULL), SHL_EINVAL);
    cr_assert_eq(shl_table_check(f.t), SHL_OK);
    uint64_t now;
    cr_assert_eq(shl_now(NULL, &now), SHL_EINVAL);
    cr_assert_eq(shl_now(f.t, NULL), SHL_EINVAL);
    cr_assert_eq(shl_clock_set(NULL, T0 + 5), SHL_EINVAL);

    /* NULL table, lease and owner to every lease operation. */
    uint64_t tok;
    int calls = 0;
    unsigned char buf[VSIZE];
    shl_lease_info li;
    cr_assert_eq(shl_acquire(NULL, "other", "x", TTL, &tok), SHL_EINVAL);
    cr_assert_eq(shl_renew(NULL, LEASE, OWNER, f.tok, TTL), SHL_EINVAL);
    cr_assert_eq(shl_release(NULL, LEASE, OWNER, f.tok), SHL_EINVAL);
    cr_assert_eq(shl_write(NULL, LEASE, OWNER, f.tok, "zz", 2), SHL_EINVAL);
    cr_assert_eq(shl_read(NULL, LEASE, buf, sizeof buf, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_stat(NULL, LEASE, &li), SHL_EINVAL);
    cr_assert_eq(shl_guard(NULL, LEASE, OWNER, f.tok, no_op, &calls), SHL_EINVAL);
    cr_assert_eq(shl_update(NULL, LEASE, OWNER, f.tok, keep, &calls), SHL_EINVAL);
    lease_ops_refused(&f, NULL, OWNER, "NULL lease");
    lease_ops_refused(&f, LEASE, NULL, "NULL owner");
    lease_ops_refused(&f, "other", NULL, "NULL owner, new name");
    name_ops_refused(&f, NULL, "NULL lease");

    /* NULL out-pointers, buffers and callbacks. */
    cr_assert_eq(shl_acquire(f.t, "other", "x", TTL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_stat(f.t, "other", &li), SHL_ENOENT, "a refused acquire added the name");
    cr_assert_eq(shl_acquire_ex(f.t, "other", "x", TTL, NULL, &li), SHL_EINVAL);
    cr_assert_eq(shl_write(f.t, LEASE, OWNER, f.tok, NULL, 3), SHL_EINVAL);
    cr_assert_eq(shl_read(f.t, LEASE, NULL, sizeof buf, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_stat(f.t, LEASE, NULL), SHL_EINVAL);
    cr_assert_eq(shl_guard(f.t, LEASE, OWNER, f.tok, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(shl_update(f.t, LEASE, OWNER, f.tok, NULL, NULL), SHL_EINVAL);
    cr_assert_eq(calls, 0);
    snap_same(f.t, &s, "NULL arguments");

    /* A NULL buffer of capacity 0 asks for the length only. */
    size_t len = 0;
    cr_assert_eq(shl_read(f.t, LEASE, NULL, 0, &len, &tok), SHL_E2BIG);
    cr_assert_eq(len, strlen(VALUE));
    teardown(&f);
}

Test(args, lease_and_owner_names)
{
    struct fixture f;
    setup(&f);
    char longest[SHL_NAME_MAX + 2], olongest[SHL_OWNER_MAX + 2];
    uint64_t tok;

    /* Exactly the maximum is accepted ... */
    repeat(longest, 'n', SHL_NAME_MAX);
    repeat(olongest, 'o', SHL_OWNER_MAX);
    cr_assert_eq(shl_acquire(f.t, longest, olongest, TTL, &tok), SHL_OK);
    shl_lease_info li;
    cr_assert_eq(shl_stat(f.t, longest, &li), SHL_OK);
    cr_assert_str_eq(li.owner, olongest);
    cr_assert_eq(shl_release(f.t, longest, olongest, tok), SHL_OK);
    /* ... one more byte is not. */
    repeat(longest, 'm', SHL_NAME_MAX + 1);
    repeat(olongest, 'p', SHL_OWNER_MAX + 1);
    lease_ops_refused(&f, longest, OWNER, "lease name too long");
    name_ops_refused(&f, longest, "lease name too long");
    lease_ops_refused(&f, LEASE, olongest, "owner too long");
    lease_ops_refused(&f, "other", olongest, "owner too long, new name");

    static const char *bad_lease[] = {
        "", " ", "a b", "tab\t", "nl\n", "del\x7f", "\xc3\xa9t\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_lease / sizeof bad_lease[0]; i++) {
        lease_ops_refused(&f, bad_lease[i], OWNER, "bad lease name");
        name_ops_refused(&f, bad_lease[i], "bad lease name");
    }
    static const char *bad_owner[] = {"", "tab\t", "nl\n", "del\x7f", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_owner / sizeof bad_owner[0]; i++)
        lease_ops_refused(&f, LEASE, bad_owner[i], "bad owner");

    /* Spaces are allowed in owners (not in lease names). */
    cr_assert_eq(shl_acquire(f.t, "spaced", "web worker 1", TTL, &tok), SHL_OK);
    cr_assert_eq(shl_release(f.t, "spaced", "web worker 1", tok), SHL_OK);
    teardown(&f);
}

static int path_exists(const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    return lstat(path, &st) == 0;
}

Test(args, table_names)
{
    char name[SHL_TABLE_NAME_MAX + 3], base[96];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 2;
    o.value_size = 0;
    shl_table *t;

    /* SHL_TABLE_NAME_MAX bytes, with and without the leading '/'. */
    t_name(base, sizeof base, "long");
    memset(name, 'z', sizeof name);
    memcpy(name, base, strlen(base));
    name[SHL_TABLE_NAME_MAX] = 0;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    shl_close(t);
    cr_assert(path_exists(name));
    char slashed[SHL_TABLE_NAME_MAX + 2];
    slashed[0] = '/';
    memcpy(slashed + 1, name, SHL_TABLE_NAME_MAX + 1);
    cr_assert_eq(shl_open(slashed, NULL, &t), SHL_OK);
    shl_close(t);
    cr_assert_eq(shl_unlink(slashed), SHL_OK);
    cr_assert(!path_exists(name));

    /* One more byte is refused, and nothing is created. */
    memset(name + SHL_TABLE_NAME_MAX, 'z', 1);
    name[SHL_TABLE_NAME_MAX + 1] = 0;
    t = (shl_table *)&o;
    cr_assert_eq(shl_open(name, &o, &t), SHL_EINVAL);
    cr_assert_null(t);
    cr_assert_eq(shl_unlink(name), SHL_EINVAL);
    cr_assert(!path_exists(name));

    static const char *bad[] = {"",       "/",         "//x",   "a/b", ".hidden",
                                "sp ace", "t\xc3\xa9", "tab\t", "q?",  "star*"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(shl_open(bad[i], &o, &t), SHL_EINVAL, "name '%s'", bad[i]);
        cr_assert_eq(shl_open(bad[i], NULL, &t), SHL_EINVAL, "name '%s'", bad[i]);
        cr_assert_eq(shl_unlink(bad[i]), SHL_EINVAL, "name '%s'", bad[i]);
    }
    cr_assert(!path_exists("sp ace"));
}

Test(args, ttl_zero_and_overflow)
{
    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    uint64_t tok = 0;
    shl_lease_info li;
    cr_assert_eq(shl_acquire(f.t, "other", "x", 0, &tok), SHL_EINVAL);
    cr_assert_eq(shl_acquire(f.t, LEASE, OWNER, 0, &tok), SHL_EINVAL);
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, f.tok, 0), SHL_EINVAL);
    cr_assert_eq(shl_stat(f.t, "other", &li), SHL_ENOENT);
    snap_same(f.t, &s, "ttl 0");

    /* Held lease, clock near the end of time: renewing past it overflows. */
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, f.tok, UINT64_MAX - T0 - 10), SHL_OK);
    cr_assert_eq(shl_clock_set(f.t, UINT64_MAX - 20), SHL_OK);
    snap_take(f.t, &s);
    cr_assert_eq(s.li.state, SHL_STATE_HELD);
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, f.tok, 21), SHL_EINVAL);
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, f.tok, UINT64_MAX), SHL_EINVAL);
    snap_same(f.t, &s, "renew overflow");

    /* Expired lease: a new holder whose expiry would overflow is refused. */
    cr_assert_eq(shl_clock_set(f.t, UINT64_MAX - 5), SHL_OK);
    snap_take(f.t, &s);
    cr_assert_eq(s.li.state, SHL_STATE_EXPIRED);
    cr_assert_eq(shl_acquire(f.t, LEASE, "next", 6, &tok), SHL_EINVAL);
    cr_assert_eq(shl_acquire(f.t, LEASE, "next", UINT64_MAX, &tok), SHL_EINVAL);
    /* A new name is not added by an acquire refused for overflow. */
    cr_assert_eq(shl_acquire(f.t, "fresh", "next", 6, &tok), SHL_EINVAL);
    cr_assert_eq(shl_stat(f.t, "fresh", &li), SHL_ENOENT);
    snap_same(f.t, &s, "acquire overflow");

    /* The last representable expiry is fine. */
    cr_assert_eq(shl_acquire(f.t, LEASE, "next", 5, &tok), SHL_OK);
    cr_assert_eq(tok, f.tok + 1);
    cr_assert_eq(shl_stat(f.t, LEASE, &li), SHL_OK);
    cr_assert_eq(li.expiry_ns, UINT64_MAX);
    teardown(&f);
}

Test(args, token_zero)
{
    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    int calls = 0;
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, 0, TTL), SHL_EINVAL);
    cr_assert_eq(shl_release(f.t, LEASE, OWNER, 0), SHL_EINVAL);
    cr_assert_eq(shl_write(f.t, LEASE, OWNER, 0, "zz", 2), SHL_EINVAL);
    cr_assert_eq(shl_guard(f.t, LEASE, OWNER, 0, no_op, &calls), SHL_EINVAL);
    cr_assert_eq(shl_update(f.t, LEASE, OWNER, 0, keep, &calls), SHL_EINVAL);
    /* Also on a name never acquired, where no token is current. */
    cr_assert_eq(shl_release(f.t, "never", OWNER, 0), SHL_EINVAL);
    cr_assert_eq(calls, 0);
    snap_same(f.t, &s, "token 0");
    teardown(&f);
}

Test(args, value_too_large)
{
    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    char big[VSIZE + 1];
    memset(big, 'B', sizeof big);
    cr_assert_eq(shl_write(f.t, LEASE, OWNER, f.tok, big, VSIZE + 1), SHL_E2BIG);
    cr_assert_eq(shl_write(f.t, LEASE, OWNER, f.tok, big, SIZE_MAX), SHL_E2BIG);
    int calls = 0;
    cr_assert_eq(shl_update(f.t, LEASE, OWNER, f.tok, grow, &calls), SHL_ECANCELED);
    snap_same(f.t, &s, "value too large");

    /* A buffer too small for the value: the length is told, buf untouched. */
    unsigned char small[4];
    memset(small, 0xAA, sizeof small);
    size_t len = 0;
    cr_assert_eq(shl_read(f.t, LEASE, small, sizeof small, &len, NULL), SHL_E2BIG);
    cr_assert_eq(len, strlen(VALUE));
    for (size_t i = 0; i < sizeof small; i++)
        cr_assert_eq(small[i], 0xAA);

    /* Exactly the value size fits. */
    cr_assert_eq(shl_write(f.t, LEASE, OWNER, f.tok, big, VSIZE), SHL_OK);
    unsigned char back[VSIZE];
    cr_assert_eq(shl_read(f.t, LEASE, back, sizeof back, &len, NULL), SHL_OK);
    cr_assert_eq(len, VSIZE);
    cr_assert(memcmp(back, big, VSIZE) == 0);
    teardown(&f);
}

Test(args, bad_options)
{
    char name[96];
    t_name(name, sizeof name, "opts");
    for (int k = 0; k < 12; k++) {
        shl_options o;
        shl_options_init(&o);
        o.capacity = 4;
        switch (k) {
        case 0:
            o.capacity = 0;
            break;
        case 1:
            o.capacity = SHL_CAPACITY_MAX + 1;
            break;
        case 2:
            o.value_size = SHL_VALUE_MAX + 1;
            break;
        case 3:
            o.mode = 0644;
            break;
        case 4:
            o.mode = 0666;
            break;
        case 5:
            o.mode = 0700;
            break;
        case 6:
            o.mode = 0;
            break;
        case 7:
            o.clock = 2;
            break;
        case 8:
            o.clock = -1;
            break;
        case 9:
            o.flags = SHL_EXCL;
            break;
        case 10:
            o.flags = SHL_CREATE | 0x80;
            break;
        default:
            o.policy = 0x80;
            break;
        }
        shl_table *t = (shl_table *)&o;
        cr_assert_eq(shl_open(name, &o, &t), SHL_EINVAL, "case %d", k);
        cr_assert_null(t);
        cr_assert(!path_exists(name), "case %d created the table", k);
    }
    /* Bad options are refused before an existing table is looked at. */
    shl_table *t = t_create(name, 4, 8, SHL_CLOCK_MONOTONIC);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 8;
    o.mode = 0666;
    shl_table *u;
    cr_assert_eq(shl_open(name, &o, &u), SHL_EINVAL);
    o.mode = 0600;
    o.flags = SHL_EXCL;
    cr_assert_eq(shl_open(name, &o, &u), SHL_EINVAL);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}

Test(args, clock)
{
    char name[96];
    t_name(name, sizeof name, "mono");
    shl_table *m = t_create(name, 2, 0, SHL_CLOCK_MONOTONIC);
    cr_assert_eq(shl_clock_set(m, UINT64_MAX), SHL_EINVAL);
    cr_assert_eq(shl_clock_set(m, 0), SHL_EINVAL);
    shl_close(m);
    cr_assert_eq(shl_unlink(name), SHL_OK);

    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    cr_assert_eq(shl_clock_set(f.t, T0 - 1), SHL_ECLOCK);
    cr_assert_eq(shl_clock_set(f.t, 0), SHL_ECLOCK);
    snap_same(f.t, &s, "clock backwards");
    cr_assert_eq(shl_clock_set(f.t, T0), SHL_OK); /* equal is accepted */
    cr_assert_eq(shl_clock_set(f.t, T0 + 1), SHL_OK);
    uint64_t now;
    cr_assert_eq(shl_now(f.t, &now), SHL_OK);
    cr_assert_eq(now, T0 + 1);
    cr_assert_eq(shl_clock_set(f.t, T0), SHL_ECLOCK);
    cr_assert_eq(shl_now(f.t, &now), SHL_OK);
    cr_assert_eq(now, T0 + 1);
    teardown(&f);
}

Test(args, error_names_and_messages)
{
    struct {
        int code;
        const char *name, *msg;
    } all[] = {
#define ROW(n, c, m) {SHL_##n, "SHL_" #n, m},
        SHL_ERRNO_MAP(ROW)
#undef ROW
    };
    size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n; i++) {
        /* Codes are 0, -1, -2, ... with no gap: every negative value down to
         * the last is a documented code. */
        cr_assert_eq(all[i].code, -(int)i);
        cr_assert_str_eq(shl_errname(all[i].code), all[i].name);
        cr_assert_str_eq(shl_strerror(all[i].code), all[i].msg);
        cr_assert_str_neq(shl_strerror(all[i].code), "unknown error");
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(all[i].msg, all[j].msg, "%s and %s say the same", all[i].name,
                              all[j].name);
    }
    const int unknown[] = {1, 2, -(int)n, -(int)n - 1, -100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        cr_assert_str_eq(shl_strerror(unknown[i]), "unknown error", "%d", unknown[i]);
        cr_assert_str_eq(shl_errname(unknown[i]), "SHL_UNKNOWN", "%d", unknown[i]);
    }
    cr_assert_str_eq(shl_version(), SHLEASE_VERSION_STRING);
}

struct fork_ctx {
    struct fixture *f;
    shl_lease *l; /* bound in the parent, before the fork */
};

static int count_one(void *arg, const shl_lease_detail *d)
{
    (void)d;
    *(int *)arg += 1;
    return 0;
}

/* In the child: every call on the parent's handle is SHL_EFORK; each failed
 * expectation sets one bit of the exit status. */
static int after_fork(void *arg)
{
    struct fixture *f = ((struct fork_ctx *)arg)->f;
    shl_lease *l = ((struct fork_ctx *)arg)->l;
    shl_table *t = f->t;
    int bad = 0, bit = 0, calls = 0;
    uint64_t tok, now;
    unsigned char buf[VSIZE];
    shl_lease_info li;
    shl_table_info ti;
#define EXPECT_EFORK(call) bad |= ((call) != SHL_EFORK) << (bit++ % 7)
    EXPECT_EFORK(shl_acquire(t, "other", "child", TTL, &tok));
    EXPECT_EFORK(shl_acquire_ex(t, LEASE, "child", TTL, &tok, &li));
    EXPECT_EFORK(shl_renew(t, LEASE, OWNER, f->tok, TTL));
    EXPECT_EFORK(shl_release(t, LEASE, OWNER, f->tok));
    EXPECT_EFORK(shl_write(t, LEASE, OWNER, f->tok, "zz", 2));
    EXPECT_EFORK(shl_read(t, LEASE, buf, sizeof buf, NULL, NULL));
    EXPECT_EFORK(shl_stat(t, LEASE, &li));
    EXPECT_EFORK(shl_guard(t, LEASE, OWNER, f->tok, no_op, &calls));
    EXPECT_EFORK(shl_update(t, LEASE, OWNER, f->tok, keep, &calls));
    EXPECT_EFORK(shl_now(t, &now));
    EXPECT_EFORK(shl_clock_set(t, T0 + 50));
    EXPECT_EFORK(shl_table_info_get(t, &ti));
    EXPECT_EFORK(shl_table_check(t));
    EXPECT_EFORK(shl_acquire_wait(t, LEASE, "child", TTL, 0, &tok));
    shl_heartbeat hb;
    EXPECT_EFORK(shl_heartbeat_get(t, LEASE, &hb));
    EXPECT_EFORK(shl_revoke(t, LEASE));
    shl_lease_detail d;
    EXPECT_EFORK(shl_inspect(t, LEASE, &d));
    EXPECT_EFORK(shl_inspect_slot(t, 0, &d));
    EXPECT_EFORK(shl_foreach(t, count_one, &calls));
    EXPECT_EFORK(shl_check(t, NULL, NULL));
    EXPECT_EFORK(shl_repair(t, 0, NULL, NULL));
    shl_renewer *r = NULL;
    EXPECT_EFORK(shl_renewer_start(t, LEASE, OWNER, f->tok, TTL, NULL, &r));
    /* Bound leases belong to the handle they were made from. */
    shl_lease *l2 = NULL;
    EXPECT_EFORK(shl_lease_open(t, LEASE, OWNER, &l2));
    EXPECT_EFORK(shl_lease_acquire(l, TTL, &tok, &li));
    EXPECT_EFORK(shl_lease_renew(l, f->tok, TTL));
    EXPECT_EFORK(shl_lease_release(l, f->tok));
    EXPECT_EFORK(shl_lease_write(l, f->tok, "zz", 2));
    EXPECT_EFORK(shl_lease_guard(l, f->tok, no_op, &calls));
    EXPECT_EFORK(shl_lease_read(l, buf, sizeof buf, NULL, NULL));
#undef EXPECT_EFORK
    if (r || l2)
        bad |= 1 << 7;
    if (calls != 0)
        bad |= 1 << 7;
    if (shl_close(t) != SHL_OK)
        bad |= 1 << 7;
    /* Even after the child freed its copy of the handle (ASan would see a
     * bound lease reach into it). */
    if (shl_lease_renew(l, f->tok, TTL) != SHL_EFORK)
        bad |= 1 << 7;
    shl_lease_close(l);
    /* A handle opened in the child works. */
    shl_table *mine;
    if (shl_open(f->name, NULL, &mine) != SHL_OK)
        return 255;
    if (shl_stat(mine, LEASE, &li) != SHL_OK || li.token != f->tok)
        bad |= 1 << 7;
    shl_close(mine);
    return bad;
}

Test(args, handle_after_fork)
{
    struct fixture f;
    setup(&f);
    struct snap s;
    snap_take(f.t, &s);
    struct fork_ctx c = {&f, NULL};
    cr_assert_eq(shl_lease_open(f.t, LEASE, OWNER, &c.l), SHL_OK);
    cr_assert_eq(t_wait(t_fork(after_fork, &c)), 0);
    snap_same(f.t, &s, "calls in a forked child");
    /* The parent's handle is unaffected. */
    cr_assert_eq(shl_renew(f.t, LEASE, OWNER, f.tok, TTL), SHL_OK);
    cr_assert_eq(shl_lease_renew(c.l, f.tok, TTL), SHL_OK);
    shl_lease_close(c.l);
    teardown(&f);
}
