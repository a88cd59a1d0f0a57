/*
 * tests/test_shared.c - shared leases at their enforcement points: writes
 * refused to readers, revoke, the fence's reader admission, writers not
 * starved, readers let in together, paused holders (SIGSTOP), dead shared
 * holders, and processes killed inside the shared operations.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"
#include "shared_wait.h"

#define KILLED (128 + SIGKILL)

static void noop(void *arg)
{
    ++*(int *)arg;
}

Test(shared, readers_cannot_write_update_or_guard)
{
    t_guard(20);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shw"), 4, 32, SHL_CLOCK_MANUAL);
    uint64_t w, r, gen;
    cr_assert_eq(shl_acquire(t, "L", "w", 100, &w), SHL_OK);
    cr_assert_eq(shl_write(t, "L", "w", w, "old", 3), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "r", 100, &r, &gen), SHL_EBUSY, "a writer holds it");
    cr_assert_eq(shl_release(t, "L", "w", w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "r", 100, &r, &gen), SHL_OK);
    cr_assert_eq(r, 2u);
    cr_assert_eq(gen, 1u, "gen: the last exclusive acquisition's token");
    cr_assert_eq(shl_acquire_shared(t, "L", "r", 100, &w, &gen), SHL_EBUSY, "owners differ");
    cr_assert_eq(shl_write(t, "L", "r", r, "new", 3), SHL_ELOST);
    int ran = 0;
    cr_assert_eq(shl_guard(t, "L", "r", r, noop, &ran), SHL_ELOST);
    cr_assert_eq(ran, 0);
    cr_assert_eq(shl_guard_shared(t, "L", "r", r, noop, &ran), SHL_OK);
    cr_assert_eq(ran, 1);
    char buf[8];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, &vt), SHL_OK);
    cr_assert(len == 3 && memcmp(buf, "old", 3) == 0 && vt == 1, "nothing changed");
    shl_lease_info in;
    cr_assert_eq(shl_acquire_ex(t, "L", "w", 100, &w, &in), SHL_EBUSY, "a reader holds it");
    cr_assert_eq(in.shared, 1u);
    cr_assert_str_eq(in.owner, "r");
    cr_assert_eq(in.token, r);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);
}

Test(shared, revoke_ends_every_holder)
{
    t_guard(20);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shrv"), 4, 32, SHL_CLOCK_MANUAL);
    uint64_t a, b, gen, w;
    cr_assert_eq(shl_revoke(t, "L"), SHL_ENOENT);
    cr_assert_eq(shl_acquire_shared(t, "L", "a", 100, &a, &gen), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "b", 100, &b, &gen), SHL_OK);
    cr_assert_eq(gen, 0u, "no exclusive acquisition yet");
    cr_assert_eq(shl_revoke(t, "L"), SHL_OK);
    int ran = 0;
    cr_assert_eq(shl_guard_shared(t, "L", "a", a, noop, &ran), SHL_ELOST);
    cr_assert_eq(shl_renew(t, "L", "b", b, 100), SHL_ELOST);
    cr_assert_eq(ran, 0);
    cr_assert_eq(shl_revoke(t, "L"), SHL_ENOENT, "nothing left to end");
    cr_assert_eq(shl_acquire(t, "L", "w", 100, &w), SHL_OK);
    cr_assert_eq(w, 3u, "one counter for both kinds");
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);
}

Test(shared, fence_admits_readers_not_older_than_its_writers)
{
    shl_fence f = {0};
    cr_assert_eq(shl_fence_admit_read(&f, 0), SHL_OK, "a fresh fence admits everything");
    cr_assert_eq(shl_fence_admit(&f, 5), SHL_OK);
    cr_assert_eq(shl_fence_admit_read(&f, 5), SHL_OK, "the reader of writer 5's state");
    cr_assert_eq(shl_fence_admit_read(&f, 7), SHL_OK);
    cr_assert_eq(shl_fence_admit_read(&f, 4), SHL_ESTALE, "began before writer 5");
    cr_assert_eq(shl_fence_admit_read(&f, 0), SHL_ESTALE);
    uint64_t v;
    cr_assert_eq(shl_fence_load(&f, &v), SHL_OK);
    cr_assert_eq(v, 5u, "a reader never moves the fence");
    cr_assert_eq(shl_fence_admit_read(NULL, 1), SHL_EINVAL);
    cr_assert_eq(shl_fence_admit_read((shl_fence *)((char *)&f + 1), 1), SHL_EINVAL);
}

/* ------------------------------------------------------------- waiting */

struct waiter_arg {
    shl_table *t;
    const char *owner;
    int shared;
    uint64_t token;
    _Atomic int done;
    int rc;
    _Atomic int *order; /* global arrival of acquisitions */
    int my_order;
};

static void *wait_thread(void *p)
{
    struct waiter_arg *a = p;
    uint64_t gen;
    if (a->shared)
        a->rc = shl_acquire_shared_wait(a->t, "L", a->owner, 10 * SEC, 20 * SEC, &a->token, &gen);
    else
        a->rc = shl_acquire_wait(a->t, "L", a->owner, 10 * SEC, 20 * SEC, &a->token);
    a->my_order = atomic_fetch_add(a->order, 1);
    atomic_store(&a->done, 1);
    return NULL;
}

static uint32_t queued(shl_table *t)
{
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    return in.waiters;
}

static void start(pthread_t *th, struct waiter_arg *a, shl_table *t, uint32_t expect_queued)
{
    cr_assert_eq(pthread_create(th, NULL, wait_thread, a), 0);
    uint64_t end = t_now() + 5 * SEC;
    while (queued(t) < expect_queued && t_now() < end)
        t_sleep_ns(MS);
    cr_assert_eq(queued(t), expect_queued, "%s did not queue", a->owner);
}

static int done_within(struct waiter_arg *a, uint64_t ns)
{
    uint64_t end = t_now() + ns;
    while (!atomic_load(&a->done) && t_now() < end)
        t_sleep_ns(MS);
    return atomic_load(&a->done);
}

/* Queue: R1 R2 W R3 behind a writer. When it releases, R1 and R2 go in
 * together; R3 and new plain readers wait behind W; W goes in when the
 * readers are gone; then R3. */
Test(shared, readers_ahead_of_a_writer_go_in_together_and_the_writer_is_not_starved)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shwait"), 4, 32, SHL_CLOCK_MONOTONIC);
    uint64_t h, tok, gen;
    cr_assert_eq(shl_acquire(t, "L", "holder", 30 * SEC, &h), SHL_OK);
    _Atomic int order = 0;
    struct waiter_arg r1 = {t, "r1", 1, 0, 0, 0, &order, 0}, r2 = {t, "r2", 1, 0, 0, 0, &order, 0};
    struct waiter_arg w = {t, "w", 0, 0, 0, 0, &order, 0}, r3 = {t, "r3", 1, 0, 0, 0, &order, 0};
    pthread_t t1, t2, tw, t3;
    start(&t1, &r1, t, 1);
    start(&t2, &r2, t, 2);
    start(&tw, &w, t, 3);
    start(&t3, &r3, t, 4);
    cr_assert_eq(shl_release(t, "L", "holder", h), SHL_OK);
    cr_assert(done_within(&r1, 5 * SEC) && done_within(&r2, 5 * SEC), "readers ahead go in");
    cr_assert_eq(r1.rc, SHL_OK);
    cr_assert_eq(r2.rc, SHL_OK);
    t_sleep_ns(200 * MS);
    cr_assert(!atomic_load(&r3.done), "a reader behind a queued writer waits");
    cr_assert(!atomic_load(&w.done), "the writer waits for the readers");
    cr_assert_eq(shl_acquire_shared(t, "L", "plain", SEC, &tok, &gen), SHL_EBUSY,
                 "a plain reader does not pass a queued writer");
    cr_assert_eq(shl_release(t, "L", "r1", r1.token), SHL_OK);
    t_sleep_ns(100 * MS);
    cr_assert(!atomic_load(&w.done), "one reader is still in");
    cr_assert_eq(shl_release(t, "L", "r2", r2.token), SHL_OK);
    cr_assert(done_within(&w, 5 * SEC), "the writer goes in once the readers are gone");
    cr_assert_eq(w.rc, SHL_OK);
    cr_assert(!atomic_load(&r3.done));
    cr_assert_eq(shl_release(t, "L", "w", w.token), SHL_OK);
    cr_assert(done_within(&r3, 5 * SEC));
    cr_assert_eq(r3.rc, SHL_OK);
    cr_assert_eq(r3.my_order, 3, "r3 came last");
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(tw, NULL);
    pthread_join(t3, NULL);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);
}

/* The scenario the etcd tables run too (tests/shared_wait.h): the same
 * order, asserted through the tokens. */
Test(shared, wait_order_by_tokens_as_on_etcd)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shorder"), 4, 32, SHL_CLOCK_MONOTONIC);
    t_shared_wait_order(name, 200 * MS);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------------ paused holders */

static shl_table *open_name(const char *name)
{
    shl_table *t;
    cr_assert_eq(shl_open(name, NULL, &t), SHL_OK);
    return t;
}

static int paused_reader(void *arg)
{
    shl_table *t = open_name(arg);
    uint64_t tok, gen;
    if (shl_acquire_shared(t, "L", "reader", 300 * MS, &tok, &gen) != SHL_OK)
        return 2;
    raise(SIGSTOP);
    int ran = 0;
    int rc = shl_guard_shared(t, "L", "reader", tok, noop, &ran);
    return rc == SHL_ELOST && ran == 0 ? 0 : 1;
}

Test(shared, a_paused_reader_past_expiry_blocks_no_writer_and_is_refused_after)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shstopr"), 4, 32, SHL_CLOCK_MONOTONIC);
    pid_t p = t_fork(paused_reader, name);
    cr_assert_eq(t_wait_stopped(p), 0);
    uint64_t w;
    cr_assert_eq(shl_acquire(t, "L", "writer", SEC, &w), SHL_EBUSY, "the reader is valid");
    t_sleep_ns(400 * MS);
    cr_assert_eq(shl_acquire(t, "L", "writer", SEC, &w), SHL_OK, "an expired reader blocks no one");
    cr_assert_eq(shl_write(t, "L", "writer", w, "x", 1), SHL_OK);
    kill(p, SIGCONT);
    cr_assert_eq(t_wait(p), 0, "the resumed reader's guarded read was refused");
    shl_close(t);
    shl_unlink(name);
}

static int paused_writer(void *arg)
{
    shl_table *t = open_name(arg);
    uint64_t tok;
    if (shl_acquire(t, "L", "old-writer", 300 * MS, &tok) != SHL_OK)
        return 2;
    raise(SIGSTOP);
    return shl_write(t, "L", "old-writer", tok, "stale", 5) == SHL_ELOST ? 0 : 1;
}

Test(shared, a_paused_writer_is_refused_after_readers_and_a_new_writer)
{
    t_guard(30);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shstopw"), 4, 32, SHL_CLOCK_MONOTONIC);
    pid_t p = t_fork(paused_writer, name);
    cr_assert_eq(t_wait_stopped(p), 0);
    t_sleep_ns(400 * MS);
    uint64_t a, b, gen, w;
    cr_assert_eq(shl_acquire_shared(t, "L", "a", SEC, &a, &gen), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "b", SEC, &b, &gen), SHL_OK);
    cr_assert_eq(gen, 1u, "the readers read the old writer's state");
    cr_assert_eq(shl_release(t, "L", "a", a), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "b", b), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "new-writer", SEC, &w), SHL_OK);
    cr_assert_eq(w, 4u);
    cr_assert_eq(shl_write(t, "L", "new-writer", w, "fresh", 5), SHL_OK);
    kill(p, SIGCONT);
    cr_assert_eq(t_wait(p), 0, "the resumed writer's write was refused");
    char buf[8];
    size_t len;
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, NULL), SHL_OK);
    cr_assert(len == 5 && memcmp(buf, "fresh", 5) == 0);
    shl_close(t);
    shl_unlink(name);
}

/* -------------------------------------------------------- dead readers */

static int reader_exits(void *arg)
{
    shl_table *t = open_name(arg);
    uint64_t tok, gen;
    return shl_acquire_shared(t, "L", "doomed", 60 * SEC, &tok, &gen) == SHL_OK ? 0 : 1;
}

static shl_table *open_policy(const char *name, uint32_t policy)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.value_size = 32;
    o.policy = policy;
    o.reclaim_delay_ms = 0; /* with the policy: reclaimed at the first look */
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t;
    cr_assert_eq(shl_open(name, &o, &t), SHL_OK);
    return t;
}

Test(shared, a_dead_reader_is_reclaimed_by_the_table_policy_only)
{
    t_guard(30);
    char name[96], name2[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "shdead"), SHL_POLICY_RECLAIM_ORPHANS);
    cr_assert_eq(t_wait(t_fork(reader_exits, name)), 0);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.nshared, 1u);
    cr_assert_eq(d.shared[0].state, SHL_STATE_ORPHANED, "its handle is proven closed");
    uint64_t w;
    cr_assert_eq(shl_acquire(t, "L", "w", SEC, &w), SHL_OK, "reclaimed");
    cr_assert_eq(w, 2u);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);

    t = open_policy(t_name(name2, sizeof name2, "shalive"), 0);
    cr_assert_eq(t_wait(t_fork(reader_exits, name2)), 0);
    shl_lease_info in;
    cr_assert_eq(shl_acquire_ex(t, "L", "w", SEC, &w, &in), SHL_EBUSY, "no policy: until expiry");
    cr_assert_eq(in.state, SHL_STATE_HELD, "without the policy a refused acquire asks nothing");
    cr_assert_eq(in.shared, 1u);
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    cr_assert_eq(d.shared[0].state, SHL_STATE_ORPHANED, "the inspector still says it");
    shl_close(t);
    shl_unlink(name2);
}

/* ---------------------------------------------------------- crash points */

enum { OP_SHARED, OP_RELEASE_SHARED, OP_EXCL_OVER_EXPIRED, OP_GUARD_SHARED };

static int do_shared(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok, gen;
    return shl_acquire_shared(t, "L", "c", 10 * SEC, &tok, &gen);
}
static int do_release_shared(shl_table *t, void *arg)
{
    (void)arg;
    return shl_release(t, "L", "b", 3);
}
static int do_guard_shared(shl_table *t, void *arg)
{
    (void)arg;
    int ran = 0;
    return shl_guard_shared(t, "L", "a", 2, noop, &ran);
}
static int do_excl(shl_table *t, void *arg)
{
    (void)arg;
    uint64_t tok;
    return shl_acquire(t, "L", "c", 10 * SEC, &tok);
}

/* L: exclusive token 1 (released), shared holders a (2) and b (3). */
static shl_table *crash_setup(const char *name)
{
    shl_table *t = t_create(name, 4, C_VALUE_SIZE, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(t, 1000 * SEC), SHL_OK);
    uint64_t tok, gen;
    cr_assert_eq(shl_acquire(t, "L", "w", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "w", tok), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "a", 10 * SEC, &tok, &gen), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "b", 10 * SEC, &tok, &gen), SHL_OK);
    cr_assert_eq(tok, 3u);
    return t;
}

static void crash_case(int op, int cp, int done)
{
    char name[96];
    shl_table *t = crash_setup(t_name(name, sizeof name, "shcrash"));
    if (op == OP_EXCL_OVER_EXPIRED)
        cr_assert_eq(shl_clock_set(t, 1020 * SEC), SHL_OK);
    int (*fn)(shl_table *, void *) = op == OP_SHARED           ? do_shared
                                     : op == OP_RELEASE_SHARED ? do_release_shared
                                     : op == OP_GUARD_SHARED   ? do_guard_shared
                                                               : do_excl;
    cr_assert_eq(c_die_at(name, cp, 1, fn, NULL), KILLED, "did not die at %d", cp);
    /* the next operation recovers */
    cr_assert_eq(shl_renew(t, "L", "nobody", 1, SEC), SHL_ELOST);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "L", &d), SHL_OK);
    switch (op) {
    case OP_SHARED:
        cr_assert_eq(in.shared, done ? 3u : 2u, "cp %d", cp);
        cr_assert_eq(d.token_last, done ? 4u : 3u);
        break;
    case OP_GUARD_SHARED:
        cr_assert_eq(in.shared, 2u, "a read changes nothing");
        cr_assert_eq(d.token_last, 3u);
        break;
    case OP_RELEASE_SHARED:
        cr_assert_eq(in.shared, done ? 1u : 2u, "cp %d", cp);
        cr_assert_eq(d.token_last, 3u);
        break;
    default:
        cr_assert_eq(in.shared, 0u);
        cr_assert_eq(in.token, done ? 4u : 1u, "cp %d", cp);
        cr_assert_eq(d.nshared, done ? 0u : 2u, "the exclusive acquire empties the mask");
    }
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "check after cp %d: %s", cp, p.line[0]);
    /* The counter never went back: the next acquisition takes the next token. */
    cr_assert_eq(shl_clock_set(t, 2000 * SEC), SHL_OK);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "z", SEC, &tok), SHL_OK);
    cr_assert_eq(tok, d.token_last + 1);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

#define CRASH(test, op, cp, done)                                                                  \
    Test(shared_crash, test)                                                                       \
    {                                                                                              \
        t_guard(30);                                                                               \
        crash_case(op, cp, done);                                                                  \
    }

CRASH(acquire_intent, OP_SHARED, SHL__CP_SH_INTENT, 0)
CRASH(acquire_armed, OP_SHARED, SHL__CP_SH_ARMED, 1)
CRASH(acquire_apply, OP_SHARED, SHL__CP_SH_APPLY, 1)
CRASH(acquire_applied, OP_SHARED, SHL__CP_SH_APPLIED, 1)
CRASH(release_before, OP_RELEASE_SHARED, SHL__CP_SH_RELEASE, 0)
CRASH(release_stored, OP_RELEASE_SHARED, SHL__CP_SH_RELEASE_STORED, 1)
CRASH(guard_shared, OP_GUARD_SHARED, SHL__CP_SH_GUARD, 1)
CRASH(exclusive_over_expired_readers_intent, OP_EXCL_OVER_EXPIRED, SHL__CP_ACQ_INTENT, 0)
CRASH(exclusive_over_expired_readers_apply, OP_EXCL_OVER_EXPIRED, SHL__CP_ACQ_APPLY, 1)
CRASH(exclusive_over_expired_readers_applied, OP_EXCL_OVER_EXPIRED, SHL__CP_ACQ_APPLIED, 1)

/* ----------------------------------------------------------------- tool */

Test(shared_tool, ls_dump_and_run_shared)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shtool"), 4, 32, SHL_CLOCK_MONOTONIC);
    uint64_t a, b, gen;
    cr_assert_eq(shl_acquire_shared(t, "L", "reader-a", 60 * SEC, &a, &gen), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "L", "reader-b", 60 * SEC, &b, &gen), SHL_OK);
    char *out;
    cr_assert_eq(t_tool_run(&out, "ls %s", name), 0);
    cr_assert(strstr(out, "SHARED"), "%s", out);
    cr_assert(strstr(out, "(shared)") && strstr(out, "reader-a") && strstr(out, "reader-b"), "%s",
              out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "dump %s L", name), 0);
    cr_assert(strstr(out, "shared    2 valid of 2, last token 2"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "dump %s L --json", name), 0);
    cr_assert(strstr(out, "\"owner\": \"reader-b\", \"pid\": ") && strstr(out, "\"token_last\": 2"),
              "%s", out);
    free(out);
    /* A third reader runs beside them; a writer is refused. */
    cr_assert_eq(t_tool_run(&out,
                            "run %s L --shared --owner c -- sh -c "
                            "'echo $SHMLEASE_TOKEN $SHMLEASE_GEN $SHMLEASE_SHARED'",
                            name),
                 0);
    cr_assert_str_eq(out, "3 0 1\n");
    free(out);
    cr_assert_eq(t_tool_run(&out, "run %s L -- true 2>&1", name), 1, "held shared: refused");
    free(out);
    cr_assert_eq(shl_release(t, "L", "reader-a", a), SHL_OK);
    cr_assert_eq(shl_release(t, "L", "reader-b", b), SHL_OK);
    cr_assert_eq(t_tool_run(&out, "run %s L -- sh -c 'echo $SHMLEASE_TOKEN'", name), 0);
    cr_assert_str_eq(out, "4\n");
    free(out);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------------- check, repair */

static struct shl__slot *slot_of(shl_table *t, const char *lease)
{
    struct shl__key k;
    cr_assert_eq(shl__key_lease(lease, &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    cr_assert(s);
    return s;
}

Test(shared, check_finds_and_repair_ends_broken_shared_holders)
{
    t_guard(20);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shck"), 4, 32, SHL_CLOCK_MANUAL);
    uint64_t a, gen;
    cr_assert_eq(shl_acquire_shared(t, "L", "a", 100, &a, &gen), SHL_OK);
    struct shl__slot *s = slot_of(t, "L");
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    /* An entry in use that was never written. */
    atomic_fetch_or(&s->shared, UINT64_C(1) << 5);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "shared holder 5"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "end 1 such shared holder"), "%s", p.line[0]);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    int ran = 0;
    cr_assert_eq(shl_guard_shared(t, "L", "a", a, noop, &ran), SHL_OK, "the good one stays");
    /* A shared holder older than the exclusive one: the mask was not emptied. */
    cr_assert_eq(shl_release(t, "L", "a", a), SHL_OK);
    uint64_t w;
    cr_assert_eq(shl_acquire(t, "L", "w", 100, &w), SHL_OK);
    /* The lease keeps its first reader group, unused, and has no second:
     * a bit set for a record of the second names a record the lease has
     * no group for. */
    cr_assert(s->sh_ref[0] && !s->sh_ref[1]);
    atomic_fetch_or(&s->shared, UINT64_C(1) << SHL__SH_GROUP);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "names no reader group for it"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "end 1 such shared holder"), "%s", p.line[0]);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    /* The kept group, with the old reader's record in it. */
    struct shl__holder *old = shl__tsh(t, s, 0);
    cr_assert(old);
    *old = (struct shl__holder){.token = a,
                                .expiry = 100,
                                .pid = getpid(),
                                .state = SHL__ST_HELD,
                                .op = SHL__OP_SHARED,
                                .owner_len = 1};
    old->owner[0] = 'a';
    atomic_fetch_or(&s->shared, UINT64_C(1) << 0);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "not between the exclusive token"), "%s", p.line[0]);
    /* The counter: acquisitions of both kinds. */
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    s->count[SHL__C_SHARED] = 0;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "1 exclusive and 0 shared acquisitions counted for token 2"), "%s",
              p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

Test(shared, repair_ends_dead_readers_under_the_policy)
{
    t_guard(30);
    char name[96];
    shl_table *t = open_policy(t_name(name, sizeof name, "shrep"), SHL_POLICY_RECLAIM_ORPHANS);
    uint64_t mine, gen;
    cr_assert_eq(shl_acquire_shared(t, "L", "alive", 60 * SEC, &mine, &gen), SHL_OK);
    cr_assert_eq(t_wait(t_fork(reader_exits, name)), 0);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "(token 2) is dead: end it"), "%s", p.line[0]);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.shared, 1u, "the live reader stays");
    int ran = 0;
    cr_assert_eq(shl_guard_shared(t, "L", "alive", mine, noop, &ran), SHL_OK);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}
