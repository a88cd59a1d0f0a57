/*
 * tests/test_spare_values.c - one value buffer a lease and the value pool
 * (shm/layout.h, Values): a written lease keeps a spare, writes alternate
 * between its two buffers, writes over more leases than spares take them
 * back without losing a value or its token, a lease whose lock is held
 * keeps its spare (SHL_EFULL naming the pool when no other can be had),
 * lock-free readers never see a torn value while spares move, a process
 * killed anywhere in a take-back loses nothing, and check and repair know
 * a leaked spare and a value offset that names no buffer.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/name_cache.h"
#include "kind_shm/shm_kind.h"

#define KILLED (128 + SIGKILL)
#define VSIZE  200

static shl_table *values_table(char *name, size_t cap, const char *tag, uint32_t capacity,
                               uint32_t spares)
{
    shl_options o;
    shl_options_init(&o);
    o.capacity = capacity;
    o.value_size = VSIZE;
    o.policy = 0;
    o.spare_values = spares;
    return t_create_opts(name, cap, tag, &o);
}

static struct shl__slot *slot_of(shl_table *t, const char *lease)
{
    struct shl__slot *s = NULL;
    cr_assert_eq(shl__lookup(t, lease, &s), SHL_OK);
    return s;
}

/* The value of lease i at write n by token tk: the numbers, then a byte
 * that n picks repeated to the end, so that a torn copy (bytes of two
 * writes) shows. */
static size_t fill(char *v, unsigned i, uint64_t tk, unsigned n)
{
    int len = snprintf(v, VSIZE, "L%u tok %llu write %u ", i, (unsigned long long)tk, n);
    size_t total = 40 + (n * 37) % (VSIZE - 40);
    memset(v + len, 'a' + (int)(n % 26), total - (size_t)len);
    return total;
}

/* Whether v (len bytes, read with value token vt) is a whole value that
 * fill() made for lease i with token vt. */
static int whole(const char *v, size_t len, unsigned i, uint64_t vt)
{
    unsigned li, n;
    unsigned long long tk;
    char buf[VSIZE + 1];
    memcpy(buf, v, len);
    buf[len] = 0;
    if (sscanf(buf, "L%u tok %llu write %u ", &li, &tk, &n) != 3 || li != i || tk != vt)
        return 0;
    char want[VSIZE];
    return fill(want, i, tk, n) == len && memcmp(want, v, len) == 0;
}

static void write_as(shl_table *t, const char *lease, uint64_t tk, unsigned i, unsigned n)
{
    char v[VSIZE];
    size_t len = fill(v, i, tk, n);
    cr_assert_eq(shl_write(t, lease, "w", tk, v, len), SHL_OK, "write %s: %s", lease,
                 shl_last_error());
}

static void read_back(shl_table *t, const char *lease, unsigned i, uint64_t tk, unsigned n)
{
    char v[VSIZE], want[VSIZE];
    size_t len = 0, wlen = fill(want, i, tk, n);
    uint64_t vt = 0;
    cr_assert_eq(shl_read(t, lease, v, sizeof v, &len, &vt), SHL_OK);
    cr_assert_eq(vt, tk, "%s: value token", lease);
    cr_assert(len == wlen && memcmp(v, want, len) == 0, "%s: the value of write %u", lease, n);
}

/* Leases v0 .. v(n-1) acquired by "w" for ttl, their names in lease[]. */
static void acquire_all(shl_table *t, char (*lease)[16], uint64_t *tk, unsigned n, uint64_t ttl)
{
    for (unsigned i = 0; i < n; i++) {
        snprintf(lease[i], sizeof lease[i], "v%u", i);
        cr_assert_eq(shl_acquire(t, lease[i], "w", ttl, &tk[i]), SHL_OK);
    }
}

/* ----------------------------------------------------------- behaviour */

Test(values, a_written_lease_keeps_a_spare_and_its_writes_alternate)
{
    t_guard(30);
    char name[96];
    shl_table *t = values_table(name, sizeof name, "svkeep", 8, 4);
    cr_assert_eq(t_info(t).spare_values, 4u);
    cr_assert_eq(t_info(t).spare_values_taken, 0u, "nothing taken before a write");
    uint64_t tk;
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &tk), SHL_OK);
    cr_assert_eq(t_info(t).spare_values_taken, 0u, "an acquisition takes no spare");
    struct shl__slot *s = slot_of(t, "A");
    uint64_t at[4];
    for (unsigned n = 0; n < 4; n++) {
        write_as(t, "A", tk, 0, n);
        read_back(t, "A", 0, tk, n);
        at[n] = atomic_load(&s->vcur);
        cr_assert_eq(t_info(t).spare_values_taken, 1u, "one spare, kept");
    }
    cr_assert_neq(at[0], 0u, "the first write goes into the spare");
    cr_assert_eq(at[1], 0u, "the second into the lease's own buffer");
    cr_assert_eq(at[2], at[0], "the third into the same spare again");
    cr_assert_eq(shl_release(t, "A", "w", tk), SHL_OK);
    cr_assert_eq(t_info(t).spare_values_taken, 1u, "kept after the release");
    cr_assert_eq(t_info(t).spare_values_taken_back, 0u, "a lease's own spare is not taken back");
    c_done(t, name);
}

Test(values, writes_over_more_leases_than_spares_take_them_back_and_keep_every_value)
{
    t_guard(30);
    char name[96];
    enum { N = 7 };
    shl_table *t = values_table(name, sizeof name, "svround", 8, 2);
    uint64_t tk[N];
    char lease[N][16];
    acquire_all(t, lease, tk, N, 60 * SEC);
    for (unsigned n = 0; n < 6; n++)
        for (unsigned i = 0; i < N; i++) {
            write_as(t, lease[i], tk[i], i, n);
            /* Every lease's last value, whichever buffer it is in now. */
            for (unsigned j = 0; j < N; j++)
                if (j <= i || n > 0)
                    read_back(t, lease[j], j, tk[j], j <= i ? n : n - 1);
            cr_assert_leq(t_info(t).spare_values_taken, 2u);
        }
    cr_assert_eq(t_info(t).spare_values_taken, 2u);
    /* The first two writes found free spares; every other write took one
     * back from one of the two leases written before it. */
    cr_assert_eq(t_info(t).spare_values_taken_back, (uint64_t)N * 6 - 2);
    c_done(t, name);
}

Test(values, a_taken_back_spare_leaves_the_value_and_its_token_at_home)
{
    t_guard(30);
    char name[96];
    shl_table *t = values_table(name, sizeof name, "svhome", 4, 1);
    uint64_t a, b;
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(t, "B", "w", 60 * SEC, &b), SHL_OK);
    write_as(t, "A", a, 0, 1);
    struct shl__slot *sa = slot_of(t, "A"), *sb = slot_of(t, "B");
    cr_assert_neq(atomic_load(&sa->vcur), 0u, "A's value in the one spare");
    uint32_t seq = atomic_load(&sa->seq);
    write_as(t, "B", b, 1, 2);
    cr_assert_eq(t_info(t).spare_values_taken_back, 1u);
    cr_assert_eq(atomic_load(&sa->vcur), 0u, "A's value moved home");
    cr_assert_eq(sa->vref, 0u, "A no longer names the spare");
    cr_assert_neq(sb->vref, 0u, "B does");
    cr_assert_neq(atomic_load(&sa->seq), seq, "A's readers see the move");
    read_back(t, "A", 0, a, 1);
    read_back(t, "B", 1, b, 2);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "A", &in), SHL_OK);
    cr_assert_eq(in.value_token, a);
    /* A written again takes the spare back from B, whose value is in it. */
    write_as(t, "A", a, 0, 3);
    read_back(t, "A", 0, a, 3);
    read_back(t, "B", 1, b, 2);
    cr_assert_eq(sb->vref, 0u);
    cr_assert_eq(t_info(t).spare_values_taken_back, 2u);
    c_done(t, name);
}

/* Holds A's lock (a guard whose callback sleeps) until killed. */
static void sleep_in_guard(void *arg)
{
    (void)arg;
    for (;;)
        pause();
}

Test(values, a_lease_whose_lock_is_held_keeps_its_spare_and_efull_names_the_pool)
{
    t_guard(30);
    char name[96];
    shl_table *t = values_table(name, sizeof name, "svheld", 4, 1);
    uint64_t a, b;
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(t, "B", "w", 60 * SEC, &b), SHL_OK);
    write_as(t, "A", a, 0, 1);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t p = fork();
    if (p == 0) {
        shl_table *c;
        if (shl_open(name, NULL, &c) != SHL_OK)
            _exit(3);
        if (write(ready[1], "x", 1) != 1)
            _exit(4);
        _exit(shl_guard(c, "A", "w", a, sleep_in_guard, NULL) == SHL_OK ? 0 : 5);
    }
    char x;
    cr_assert_eq(read(ready[0], &x, 1), 1);
    /* The guard's lock is taken just after the byte: wait for it. */
    struct shl__slot *sa = slot_of(t, "A");
    for (int i = 0; i < 2000 && atomic_load(&sa->locker) != p; i++)
        usleep(1000);
    cr_assert_eq(atomic_load(&sa->locker), p, "the child holds A's lock");
    char v[VSIZE];
    size_t len = fill(v, 1, b, 0);
    cr_assert_eq(shl_write(t, "B", "w", b, v, len), SHL_EFULL, "never a wait");
    cr_assert(strstr(shl_last_error(), "value pool"), "%s", shl_last_error());
    cr_assert(strstr(shl_last_error(), "spare_values"), "%s", shl_last_error());
    read_back(t, "A", 0, a, 1);
    kill(p, SIGKILL);
    int st;
    cr_assert_eq(waitpid(p, &st, 0), p);
    /* A's lock, left by a dead process, is recovered by the take-back. */
    write_as(t, "B", b, 1, 0);
    read_back(t, "B", 1, b, 0);
    read_back(t, "A", 0, a, 1);
    c_done(t, name);
}

Test(values, no_spares_means_no_writes_and_too_many_is_einval)
{
    t_guard(30);
    char name[96];
    shl_table *t = values_table(name, sizeof name, "svnone", 4, 0);
    uint64_t a;
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_write(t, "A", "w", a, "x", 1), SHL_EFULL);
    cr_assert(strstr(shl_last_error(), "value pool: the table has no spare value buffers"), "%s",
              shl_last_error());
    size_t len = 9;
    uint64_t vt = 9;
    char v[8];
    cr_assert_eq(shl_read(t, "A", v, sizeof v, &len, &vt), SHL_OK);
    cr_assert_eq(len, 0u);
    cr_assert_eq(vt, 0u, "never written");
    c_done(t, name);
    shl_options o;
    shl_options_init(&o);
    o.capacity = 4;
    o.spare_values = 5;
    cr_assert_eq(shl_open(t_name(name, sizeof name, "svmany"), &o, &t), SHL_EINVAL);
    cr_assert(strstr(shl_last_error(), "spare_values: 5, more than a table of capacity 4"), "%s",
              shl_last_error());
}

/* ------------------------------------------------------- torn reads */

/* A child that reads leases v0..v(n-1) without locks until `stop` ms have
 * passed and exits 0 if every read was a whole value of its token, 1 at
 * the first that was not, 2 if it read nothing written. */
static void reader(const char *name, unsigned n, unsigned ms)
{
    shl_table *t;
    if (shl_open(name, NULL, &t) != SHL_OK)
        _exit(3);
    uint64_t end = t_now() + ms * UINT64_C(1000000);
    unsigned long seen = 0;
    for (unsigned k = 0; t_now() < end; k++) {
        char lease[8], v[VSIZE];
        unsigned i = k % n;
        snprintf(lease, sizeof lease, "v%u", i);
        size_t len;
        uint64_t vt;
        if (shl_read(t, lease, v, sizeof v, &len, &vt) != SHL_OK)
            _exit(4);
        if (!vt)
            continue;
        if (!whole(v, len, i, vt)) {
            fprintf(stderr, "torn: %s token %llu len %zu: %.*s\n", lease, (unsigned long long)vt,
                    len, (int)len, v);
            _exit(1);
        }
        seen++;
    }
    _exit(seen ? 0 : 2);
}

Test(values, readers_never_see_a_torn_value_while_spares_move)
{
    t_guard(60);
    char name[96];
    enum { N = 6 };
    shl_table *t = values_table(name, sizeof name, "svtorn", 8, 2);
    uint64_t tk[N];
    char lease[N][16];
    acquire_all(t, lease, tk, N, 600 * SEC);
    for (unsigned i = 0; i < N; i++)
        write_as(t, lease[i], tk[i], i, 0);
    pid_t r = fork();
    if (r == 0)
        reader(name, N, 1500);
    uint64_t end = t_now() + 1400 * UINT64_C(1000000);
    unsigned n = 1;
    for (; t_now() < end; n++)
        for (unsigned i = 0; i < N; i++)
            write_as(t, lease[i], tk[i], i, n);
    int st;
    cr_assert_eq(waitpid(r, &st, 0), r);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reader: status %d", st);
    cr_assert_gt(n, 100u, "writes that moved spares: %u rounds", n);
    c_done(t, name);
}

/* --------------------------------------------------------------- crash */

struct wr {
    const char *lease;
    uint64_t tk;
    unsigned i, n;
};

static int write_op(shl_table *t, void *arg)
{
    const struct wr *w = arg;
    char v[VSIZE];
    size_t len = fill(v, w->i, w->tk, w->n);
    return shl_write(t, w->lease, "w", w->tk, v, len);
}

/* A table of one spare, A's value in it: B's write must take it back. */
static shl_table *one_spare_in_use(char *name, size_t cap, const char *tag, uint64_t *a,
                                   uint64_t *b)
{
    shl_table *t = values_table(name, cap, tag, 4, 1);
    cr_assert_eq(shl_acquire(t, "A", "w", 600 * SEC, a), SHL_OK);
    cr_assert_eq(shl_acquire(t, "B", "w", 600 * SEC, b), SHL_OK);
    write_as(t, "A", *a, 0, 1);
    cr_assert_neq(atomic_load(&slot_of(t, "A")->vcur), 0u);
    return t;
}

Test(values, a_death_anywhere_in_a_take_back_loses_no_value)
{
    t_guard(60);
    static const int points[] = {SHL__CP_VALUE_HOME, SHL__CP_POOL_PUT, SHL__CP_POOL_TAKEN,
                                 SHL__CP_WRITE_COPY, SHL__CP_WRITE_COMMITTED};
    for (size_t k = 0; k < sizeof points / sizeof points[0]; k++) {
        char name[96];
        uint64_t a, b;
        shl_table *t = one_spare_in_use(name, sizeof name, "svdie", &a, &b);
        struct wr w = {"B", b, 1, 7};
        cr_assert_eq(c_die_at(name, points[k], 1, write_op, &w), KILLED, "crash point %d",
                     points[k]);
        /* A's value, wherever the death left it, and B's old or new. */
        read_back(t, "A", 0, a, 1);
        shl_lease_info in;
        cr_assert_eq(shl_stat(t, "B", &in), SHL_OK);
        if (points[k] == SHL__CP_WRITE_COMMITTED)
            read_back(t, "B", 1, b, 7);
        else
            cr_assert_eq(in.value_token, 0u, "crash point %d: B never written", points[k]);
        /* The next writers of both recover their slots and go on. */
        write_as(t, "A", a, 0, 2);
        write_as(t, "B", b, 1, 8);
        write_as(t, "A", a, 0, 3);
        read_back(t, "A", 0, a, 3);
        read_back(t, "B", 1, b, 8);
        cr_assert_eq(t_info(t).spare_values_taken, 1u, "crash point %d", points[k]);
        c_done(t, name);
    }
}

/* ------------------------------------------------------- check, repair */

Test(values, check_finds_a_leaked_spare_and_a_bad_offset_and_repair_mends_them)
{
    t_guard(30);
    char name[96];
    uint64_t a, b;
    shl_table *t = one_spare_in_use(name, sizeof name, "svcheck", &a, &b);
    struct shl__slot *sa = slot_of(t, "A");
    /* A forgets its spare (its value moved home by hand first). */
    uint32_t spare = sa->vref - 1;
    memcpy(shl__tvhome(t, sa), shl__tvb(t, spare), t->geom.vbuf_size);
    atomic_store(&shl__tvhome(t, sa)->owner, 0);
    atomic_store(&sa->vcur, 0);
    sa->vref = 0;
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "value pool: buffer 0 is taken by lease A"), "%s", p.line[0]);
    cr_assert(c_has(&p, "which does not name it (leaked)"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(t_info(t).spare_values_taken, 0u, "the leak given back");
    read_back(t, "A", 0, a, 1);
    /* An offset that names no buffer: refused by reads, mended by repair
     * to the lease's own buffer. */
    atomic_store(&sa->vcur, (uint64_t)1 << 40);
    char v[VSIZE];
    size_t len;
    uint64_t vt;
    cr_assert_eq(shl_read(t, "A", v, sizeof v, &len, &vt), SHL_ECORRUPT);
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "names neither of its value buffers"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert(c_has(&p, "keep its own value buffer"), "%s", p.line[0]);
    read_back(t, "A", 0, a, 1);
    /* A spare named past the pool is forgotten. */
    sa->vref = 9;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "names spare value buffer 8 past the end of the pool"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK);
    cr_assert_eq(sa->vref, 0u);
    write_as(t, "A", a, 0, 2);
    read_back(t, "A", 0, a, 2);
    c_done(t, name);
}
