/*
 * tests/test_etcd_behaviour.c - the behaviour suite of the contract (rules
 * 1-5 and 7, busy info, release keeps the token, tokens +1 across expiry,
 * release, revoke, re-opening and a client's crash, bad arguments, update,
 * bound leases, the renewer, shared leases) run on both kinds of table:
 * each body below runs once on a shared-memory table and once on an etcd
 * table of a throwaway one-member cluster. Expiry is real time on both (etcd has no
 * manual clock): a short ttl and a wait until the table says it is over.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "etcd_cluster.h"

struct kind {
    int etcd;
    char name[256];
    shl_table *t;
    uint64_t ttl; /* a short ttl on this kind */
    struct etcd_cluster cl;
};

static struct kind K;

static shl_table *open_again(void)
{
    shl_table *t = NULL;
    cr_assert_eq(shl_open(K.name, NULL, &t), SHL_OK);
    return t;
}

static void start(int etcd)
{
    t_guard(90);
    memset(&K, 0, sizeof K);
    K.etcd = etcd;
    shl_options o;
    shl_options_init(&o);
    o.capacity = 16;
    o.value_size = 32;
    if (etcd) {
        cr_assert_eq(etcd_cluster_start(&K.cl, 1, 0), 0, "%s", K.cl.err);
        etcd_cluster_url(&K.cl, "behaviour", K.name, sizeof K.name);
        K.ttl = SEC; /* rounded up to the cluster's minimum */
    } else {
        t_name(K.name, sizeof K.name, "behaviour");
        K.ttl = 200 * MS;
    }
    cr_assert_eq(shl_open(K.name, &o, &K.t), SHL_OK);
}

static void stop(void)
{
    shl_close(K.t);
    shl_unlink(K.name);
    if (K.etcd)
        etcd_cluster_stop(&K.cl);
}

/* Waits until `lease` is no longer held (its holder's time ran out). */
static void expire(shl_table *t, const char *lease)
{
    uint64_t end = t_now() + 15 * SEC;
    shl_lease_info in;
    do {
        cr_assert_eq(shl_stat(t, lease, &in), SHL_OK);
        if (in.state != SHL_STATE_HELD)
            return;
        t_sleep_ns(20 * MS);
    } while (t_now() < end);
    cr_assert_fail("lease %s still held after 15 s", lease);
}

/* Each behaviour, on each kind. */
#define BOTH(fn)                                                                                   \
    Test(behaviour_shm, fn)                                                                        \
    {                                                                                              \
        start(0);                                                                                  \
        fn();                                                                                      \
        stop();                                                                                    \
    }                                                                                              \
    Test(behaviour_etcd, fn)                                                                       \
    {                                                                                              \
        start(1);                                                                                  \
        fn();                                                                                      \
        stop();                                                                                    \
    }

/* Rule 7: a busy acquire tells who holds the lease and for how long. */
static void busy_acquire_tells_holder(void)
{
    uint64_t a, x = 777;
    cr_assert_eq(shl_acquire(K.t, "L", "holder-A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(a, 1, "tokens start at 1");
    shl_lease_info h;
    memset(&h, 0xff, sizeof h);
    cr_assert_eq(shl_acquire_ex(K.t, "L", "B", K.ttl, &x, &h), SHL_EBUSY);
    cr_assert_eq(x, 777, "no token on refusal");
    cr_assert_str_eq(h.owner, "holder-A");
    cr_assert_eq(h.token, a);
    cr_assert_eq(h.state, SHL_STATE_HELD);
    cr_assert(h.remaining_ns > 0 && h.remaining_ns <= 10 * SEC, "remaining %llu",
              (unsigned long long)h.remaining_ns);
    cr_assert_eq(h.expiry_ns, h.now_ns + h.remaining_ns);
    cr_assert_eq(shl_acquire(K.t, "L", "holder-A", K.ttl, &x), SHL_EBUSY,
                 "the holder itself, unexpired");
}
BOTH(busy_acquire_tells_holder)

/* Rules 2 and 4: release frees the lease and keeps its token. */
static void release_keeps_the_token(void)
{
    uint64_t a, b, o;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(K.t, "other", "A", 10 * SEC, &o), SHL_OK);
    cr_assert_eq(o, 1, "tokens are per lease");
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_OK);
    shl_lease_info in;
    cr_assert_eq(shl_stat(K.t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, a, "release keeps the token");
    cr_assert_eq(in.state, SHL_STATE_FREE);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_ELOST, "released once");
    cr_assert_eq(shl_write(K.t, "L", "A", a, "x", 1), SHL_ELOST);
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &b), SHL_OK, "same owner at once");
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_ELOST, "a delayed release of the old one");
    cr_assert_eq(shl_renew(K.t, "L", "A", a, 10 * SEC), SHL_ELOST);
    cr_assert_eq(shl_stat(K.t, "L", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_HELD, "the old token's release changed nothing");
}
BOTH(release_keeps_the_token)

/* Rules 1 and 3: after expiry the old holder can do nothing; the next
 * acquisition gets token + 1. */
static void expiry_ends_validity(void)
{
    uint64_t a, b;
    cr_assert_eq(shl_acquire(K.t, "L", "A", K.ttl, &a), SHL_OK);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "a-1", 3), SHL_OK);
    expire(K.t, "L");
    cr_assert_eq(shl_write(K.t, "L", "A", a, "late", 4), SHL_ELOST);
    cr_assert_eq(shl_renew(K.t, "L", "A", a, K.ttl), SHL_ELOST);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_ELOST);
    char v[32];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 3 && memcmp(v, "a-1", 3) == 0 && vt == a, "the value is the holder's");
    cr_assert_eq(shl_acquire(K.t, "L", "B", 10 * SEC, &b), SHL_OK);
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "stale", 5), SHL_ELOST);
    cr_assert_eq(shl_write(K.t, "L", "B", b, "b-1", 3), SHL_OK);
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 3 && memcmp(v, "b-1", 3) == 0 && vt == b);
}
BOTH(expiry_ends_validity)

/* Renewal keeps a lease past its first ttl. */
static void renew_extends(void)
{
    uint64_t a, x;
    uint64_t ttl = K.etcd ? 2 * SEC : 300 * MS;
    cr_assert_eq(shl_acquire(K.t, "L", "A", ttl, &a), SHL_OK);
    for (int i = 0; i < 4; i++) {
        t_sleep_ns(ttl / 2);
        cr_assert_eq(shl_renew(K.t, "L", "A", a, ttl), SHL_OK, "renewal %d", i);
    }
    cr_assert_eq(shl_acquire(K.t, "L", "B", ttl, &x), SHL_EBUSY, "held past 2 ttl");
    cr_assert_eq(shl_renew(K.t, "L", "A", a, 3 * ttl), SHL_OK, "a longer ttl");
    shl_lease_info in;
    cr_assert_eq(shl_stat(K.t, "L", &in), SHL_OK);
    cr_assert_gt(in.remaining_ns, ttl, "the longer ttl holds");
    cr_assert_eq(shl_write(K.t, "L", "A", a, "ok", 2), SHL_OK);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_OK);
}
BOTH(renew_extends)

/* Revoke ends the holder at once and keeps the token. */
static void revoke_keeps_the_token(void)
{
    uint64_t a, b;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_revoke(K.t, "L"), SHL_OK);
    cr_assert_eq(shl_revoke(K.t, "L"), SHL_ENOENT, "not held any more");
    cr_assert_eq(shl_revoke(K.t, "never"), SHL_ENOENT);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "x", 1), SHL_ELOST);
    cr_assert_eq(shl_renew(K.t, "L", "A", a, 10 * SEC), SHL_ELOST);
    cr_assert_eq(shl_acquire(K.t, "L", "B", 10 * SEC, &b), SHL_OK, "acquirable at once");
    cr_assert_eq(b, a + 1);
}
BOTH(revoke_keeps_the_token)

/* Tokens live in the table, not in the handle. */
static void tokens_survive_reopening(void)
{
    uint64_t a, b;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_OK);
    shl_close(K.t);
    K.t = open_again();
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &b), SHL_OK);
    cr_assert_eq(b, a + 1);
    shl_table *t2 = open_again();
    uint64_t x;
    cr_assert_eq(shl_acquire(t2, "L", "B", K.ttl, &x), SHL_EBUSY, "another handle sees it");
    cr_assert_eq(shl_write(t2, "L", "A", b, "via-t2", 6), SHL_OK,
                 "validity is (owner, token), not the handle");
    shl_close(t2);
}
BOTH(tokens_survive_reopening)

static int fd_report[2];

/* A client that acquires, reports its token and dies without releasing. */
static int crash_holder(void *arg)
{
    (void)arg;
    shl_table *t;
    uint64_t tok;
    if (shl_open(K.name, NULL, &t) != SHL_OK ||
        shl_acquire(t, "L", "crasher", K.ttl, &tok) != SHL_OK)
        return 1;
    if (write(fd_report[1], &tok, sizeof tok) != (ssize_t)sizeof tok)
        return 1;
    raise(SIGKILL);
    return 2;
}

static void tokens_survive_a_client_crash(void)
{
    uint64_t a, b, c;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_release(K.t, "L", "A", a), SHL_OK);
    cr_assert_eq(pipe(fd_report), 0);
    pid_t p = t_fork(crash_holder, NULL);
    cr_assert_eq(read(fd_report[0], &b, sizeof b), (ssize_t)sizeof b);
    cr_assert_eq(t_wait(p), 128 + SIGKILL);
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_acquire_wait(K.t, "L", "A", 10 * SEC, 20 * SEC, &c), SHL_OK,
                 "the dead client's lease ends at its expiry");
    cr_assert_eq(c, b + 1, "a crash never lowers the token");
    close(fd_report[0]);
    close(fd_report[1]);
}
BOTH(tokens_survive_a_client_crash)

/* Rule 4: a rejected operation changes nothing. */
static void rejected_operation_changes_nothing(void)
{
    uint64_t a, x;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "kept", 4), SHL_OK);
    shl_lease_info s0, s1;
    cr_assert_eq(shl_stat(K.t, "L", &s0), SHL_OK);
    const struct {
        const char *owner;
        uint64_t token;
    } bad[] = {{"B", a}, {"A", a + 1}, {"a", a}, {"A ", a}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(shl_write(K.t, "L", bad[i].owner, bad[i].token, "gone", 4), SHL_ELOST);
        cr_assert_eq(shl_renew(K.t, "L", bad[i].owner, bad[i].token, 100 * SEC), SHL_ELOST);
        cr_assert_eq(shl_release(K.t, "L", bad[i].owner, bad[i].token), SHL_ELOST);
    }
    cr_assert_eq(shl_acquire(K.t, "L", "B", K.ttl, &x), SHL_EBUSY);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "toolong-toolong-toolong-toolong-x", 33), SHL_E2BIG);
    cr_assert_eq(shl_write(K.t, "never", "A", 1, "x", 1), SHL_ELOST, "a lease never acquired");
    cr_assert_eq(shl_stat(K.t, "L", &s1), SHL_OK);
    cr_assert_str_eq(s1.owner, s0.owner);
    cr_assert_eq(s1.token, s0.token);
    cr_assert_eq(s1.state, SHL_STATE_HELD);
    cr_assert_leq(s1.remaining_ns, s0.remaining_ns, "the renewals did not extend it");
    char v[32];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 4 && memcmp(v, "kept", 4) == 0 && vt == a);
}
BOTH(rejected_operation_changes_nothing)

/* Rule 5 and the argument checks: refused before anything changes. */
static void bad_arguments(void)
{
    uint64_t x, a;
    char v[4];
    size_t len = 0;
    shl_lease_info in;
    char long_name[SHL_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 0, &x), SHL_EINVAL, "ttl 0");
    cr_assert_eq(shl_acquire(K.t, "L", "A", UINT64_MAX, &x), SHL_EINVAL, "ttl overflows");
    cr_assert_eq(shl_acquire(K.t, "L", "A", K.ttl, NULL), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, "", "A", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, "a b", "A", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, long_name, "A", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, NULL, "A", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, "L", "", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, "L", "a\nb", K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire(K.t, "L", NULL, K.ttl, &x), SHL_EINVAL);
    cr_assert_eq(shl_stat(K.t, "L", &in), SHL_ENOENT, "a refused acquire added nothing");
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v, &len, NULL), SHL_ENOENT);
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    cr_assert_eq(a, 1, "no token was spent on a refused acquire");
    cr_assert_eq(shl_renew(K.t, "L", "A", a, 0), SHL_EINVAL);
    cr_assert_eq(shl_renew(K.t, "L", "A", a, UINT64_MAX), SHL_EINVAL);
    cr_assert_eq(shl_renew(K.t, "L", "A", 0, K.ttl), SHL_EINVAL);
    cr_assert_eq(shl_release(K.t, "L", "A", 0), SHL_EINVAL);
    cr_assert_eq(shl_write(K.t, "L", "A", a, NULL, 1), SHL_EINVAL);
    cr_assert_eq(shl_write(K.t, "L", "A", a, "12345", 5), SHL_OK);
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v, &len, NULL), SHL_E2BIG);
    cr_assert_eq(len, 5, "E2BIG tells the length");
    cr_assert_eq(shl_read(K.t, "L", NULL, 1, &len, NULL), SHL_EINVAL);
    cr_assert_eq(shl_stat(K.t, "L", NULL), SHL_EINVAL);
    cr_assert_eq(shl_acquire_wait(K.t, "L", "B", 0, SEC, &x), SHL_EINVAL);
    cr_assert_eq(shl_acquire_wait(K.t, "L", "B", K.ttl, 0, &x), SHL_ETIMEDOUT, "tries once");
    cr_assert_eq(shl_acquire(NULL, "L", "A", K.ttl, &x), SHL_EINVAL);
}
BOTH(bad_arguments)

static int add_one(void *value, size_t *len, size_t cap, void *arg)
{
    (void)cap;
    int *calls = arg;
    (*calls)++;
    unsigned n = 0;
    char old[16] = ""; /* the value has *len bytes, no terminating NUL */
    if (*len && *len < sizeof old) {
        memcpy(old, value, *len);
        sscanf(old, "%u", &n);
    }
    *len = (size_t)sprintf(value, "%u", n + 1);
    return 0;
}

static int decline(void *value, size_t *len, size_t cap, void *arg)
{
    (void)value, (void)len, (void)cap, (void)arg;
    return 1;
}

/* shl_update: read-modify-write under the check. */
static void update_under_the_check(void)
{
    uint64_t a;
    int calls = 0;
    cr_assert_eq(shl_acquire(K.t, "L", "A", 10 * SEC, &a), SHL_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shl_update(K.t, "L", "A", a, add_one, &calls), SHL_OK);
    char v[33];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v - 1, &len, &vt), SHL_OK);
    v[len] = 0;
    cr_assert_str_eq(v, "3");
    cr_assert_eq(vt, a);
    cr_assert_eq(shl_update(K.t, "L", "A", a, decline, NULL), SHL_ECANCELED);
    calls = 0;
    cr_assert_eq(shl_update(K.t, "L", "B", a, add_one, &calls), SHL_ELOST);
    cr_assert_eq(shl_update(K.t, "L", "A", a + 1, add_one, &calls), SHL_ELOST);
    cr_assert_eq(calls, 0, "fn not called when not valid");
    cr_assert_eq(shl_read(K.t, "L", v, sizeof v - 1, &len, &vt), SHL_OK);
    cr_assert(len == 1 && v[0] == '3');
}
BOTH(update_under_the_check)

static void noop(void *arg)
{
    (void)arg;
}

/* Bound leases: the same semantics through a resolved (lease, owner). */
static void bound_leases(void)
{
    shl_lease *l, *m;
    uint64_t a, x;
    cr_assert_eq(shl_lease_open(K.t, "L", "A", &l), SHL_OK);
    cr_assert_eq(shl_lease_open(K.t, "L", "B", &m), SHL_OK);
    char v[8];
    size_t len = 9;
    uint64_t vt = 9;
    cr_assert_eq(shl_lease_read(l, v, sizeof v, &len, &vt), SHL_OK, "bound: never ENOENT");
    cr_assert(len == 0 && vt == 0);
    cr_assert_eq(shl_lease_acquire(l, 10 * SEC, &a, NULL), SHL_OK);
    shl_lease_info h;
    cr_assert_eq(shl_lease_acquire(m, K.ttl, &x, &h), SHL_EBUSY);
    cr_assert_str_eq(h.owner, "A");
    cr_assert_eq(shl_lease_write(l, a, "bound", 5), SHL_OK);
    cr_assert_eq(shl_lease_write(m, a, "other", 5), SHL_ELOST);
    cr_assert_eq(shl_lease_renew(l, a, 10 * SEC), SHL_OK);
    cr_assert_eq(shl_lease_read(m, v, sizeof v, &len, &vt), SHL_OK);
    cr_assert(len == 5 && memcmp(v, "bound", 5) == 0 && vt == a);
    cr_assert_eq(shl_lease_guard(l, a, noop, NULL), K.etcd ? SHL_ENOTSUP : SHL_OK);
    cr_assert_eq(shl_lease_release(l, a), SHL_OK);
    cr_assert_eq(shl_lease_release(l, a), SHL_ELOST);
    cr_assert_eq(shl_lease_acquire(m, K.ttl, &x, NULL), SHL_OK);
    cr_assert_eq(x, a + 1);
    shl_lease_close(l);
    shl_lease_close(m);
}
BOTH(bound_leases)

static _Atomic int lost_reason;
static void on_loss(void *arg, int reason)
{
    (void)arg;
    lost_reason = reason;
}

/* The renewer keeps the lease past its ttl, and says so loudly when it is
 * taken away. */
static void renewer_keeps_and_reports_loss(void)
{
    uint64_t a, x;
    uint64_t ttl = K.etcd ? 2 * SEC : 300 * MS;
    cr_assert_eq(shl_acquire(K.t, "L", "A", ttl, &a), SHL_OK);
    shl_renewer_options o;
    shl_renewer_options_init(&o);
    o.on_loss = on_loss;
    lost_reason = 0;
    shl_renewer *r;
    cr_assert_eq(shl_renewer_start(K.t, "L", "A", a, ttl, &o, &r), SHL_OK);
    t_sleep_ns(3 * ttl);
    cr_assert_eq(shl_renewer_lost(r), 0);
    cr_assert_eq(shl_acquire(K.t, "L", "B", ttl, &x), SHL_EBUSY, "kept past 3 ttl");
    cr_assert_eq(shl_renewer_write(r, "rw", 2), SHL_OK);
    cr_assert_eq(shl_revoke(K.t, "L"), SHL_OK);
    uint64_t end = t_now() + 2 * ttl;
    while (!shl_renewer_lost(r) && t_now() < end)
        t_sleep_ns(10 * MS);
    cr_assert_eq(shl_renewer_lost(r), SHL_LOSS_REFUSED, "the loss is declared within a ttl");
    cr_assert_eq(shl_renewer_write(r, "no", 2), SHL_ELOST);
    cr_assert_eq(shl_renewer_stop(r, SHL_RENEWER_RELEASE), SHL_ELOST);
    cr_assert_eq(lost_reason, SHL_LOSS_REFUSED, "the callback ran");
    cr_assert_eq(shl_acquire(K.t, "L", "B", ttl, &x), SHL_OK);
    cr_assert_eq(x, a + 1);
}
BOTH(renewer_keeps_and_reports_loss)

/* Shared leases S1-S3: readers share, each with its own token from the one
 * counter; a writer is refused while a reader is valid (and told about the
 * readers), a reader while the writer is; release of one reader leaves the
 * other; gen is the last exclusive acquisition's token; a reader cannot
 * write. */
static void readers_share_writers_exclude(void)
{
    uint64_t a, b, g = 9, w, x = 7;
    int rc0 = shl_acquire_shared(K.t, "L", "r-A", 10 * SEC, &a, &g);
    cr_assert_eq(rc0, SHL_OK, "first shared acquire: %s", shl_errname(rc0));
    cr_assert_eq(a, 1);
    cr_assert_eq(g, 0, "no exclusive acquisition yet");
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-B", 10 * SEC, &b, &g), SHL_OK);
    cr_assert_eq(b, 2, "one counter");
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-B", 10 * SEC, &x, &g), SHL_EBUSY, "owners differ");
    shl_lease_info h;
    memset(&h, 0, sizeof h);
    cr_assert_eq(shl_acquire_ex(K.t, "L", "W", 10 * SEC, &x, &h), SHL_EBUSY);
    cr_assert_eq(x, 7);
    cr_assert_eq(h.shared, 2);
    cr_assert(h.token == a || h.token == b);
    cr_assert_eq(shl_release(K.t, "L", "r-A", a), SHL_OK);
    cr_assert_eq(shl_renew(K.t, "L", "r-B", b, 10 * SEC), SHL_OK, "the other reader stays");
    shl_lease_info in;
    cr_assert_eq(shl_stat(K.t, "L", &in), SHL_OK);
    cr_assert_eq(in.shared, 1);
    cr_assert_eq(shl_acquire(K.t, "L", "W", 10 * SEC, &x), SHL_EBUSY);
    cr_assert_eq(shl_write(K.t, "L", "r-B", b, "r", 1), SHL_ELOST);
    cr_assert_eq(shl_release(K.t, "L", "r-B", b), SHL_OK);
    cr_assert_eq(shl_acquire(K.t, "L", "W", 10 * SEC, &w), SHL_OK);
    cr_assert_eq(w, 3);
    memset(&h, 0, sizeof h);
    cr_assert_eq(shl_acquire_shared_ex(K.t, "L", "r-C", 10 * SEC, &x, &g, &h), SHL_EBUSY);
    cr_assert_str_eq(h.owner, "W");
    cr_assert_eq(shl_release(K.t, "L", "W", w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-C", 10 * SEC, &x, &g), SHL_OK);
    cr_assert_eq(x, 4);
    cr_assert_eq(g, w, "gen");
}
BOTH(readers_share_writers_exclude)

/* S4: revoke ends every holder; S3: a reader's expiry frees the lease and
 * its renew after it is refused. */
static void readers_end_by_revoke_and_expiry(void)
{
    uint64_t a, b, g, x;
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-A", 30 * SEC, &a, &g), SHL_OK);
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-B", 30 * SEC, &b, &g), SHL_OK);
    cr_assert_eq(shl_revoke(K.t, "L"), SHL_OK);
    cr_assert_eq(shl_renew(K.t, "L", "r-A", a, 30 * SEC), SHL_ELOST);
    cr_assert_eq(shl_renew(K.t, "L", "r-B", b, 30 * SEC), SHL_ELOST);
    cr_assert_eq(shl_acquire_shared(K.t, "L", "r-A", K.ttl, &a, &g), SHL_OK);
    cr_assert_eq(a, 3);
    uint64_t end = t_now() + 15 * SEC;
    shl_lease_info in;
    do {
        cr_assert_eq(shl_stat(K.t, "L", &in), SHL_OK);
        if (in.shared)
            t_sleep_ns(20 * MS);
    } while (in.shared && t_now() < end);
    cr_assert_eq(in.shared, 0, "the reader expired");
    cr_assert_eq(shl_renew(K.t, "L", "r-A", a, 30 * SEC), SHL_ELOST, "after its expiry");
    cr_assert_eq(shl_acquire(K.t, "L", "W", 30 * SEC, &x), SHL_OK);
    cr_assert_eq(x, 4);
}
BOTH(readers_end_by_revoke_and_expiry)
