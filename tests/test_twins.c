/*
 * tests/test_twins.c - repair finding one name in two slots (twins): which
 * slot keeps the name, what becomes of the other's holders of both kinds,
 * and of bound leases that still point at it.
 *
 * A twin is planted as an old repair left one: the name's bucket emptied,
 * so that the next acquire by a process that never used the name adds it
 * again in a new slot, beside the first.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

#define HOUR (3600 * SEC)

static shl_table *table(char *name, size_t cap, const char *tag)
{
    return t_create(t_name(name, cap, tag), 8, C_VALUE_SIZE, SHL_CLOCK_MONOTONIC);
}

/* Empties the bucket of `lease` (and this thread's name cache): its slot
 * stays, unreachable by name, and the next acquire adds a twin. Returns the
 * slot that is now out of the index. */
static struct shl__slot *unindex(shl_table *t, const char *lease)
{
    struct shl__key k;
    uint32_t at;
    cr_assert_eq(shl__key_lease(lease, &k), SHL_OK);
    struct shl__slot *s = shl__probe(t, &k, shl__tnslots(t), &at);
    cr_assert(s, "%s is not found", lease);
    atomic_store(&shl__tindex(t)[at], 0);
    shl__nc_forget();
    return s;
}

static uint64_t cycle(shl_table *t, const char *lease, const char *owner)
{
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, lease, owner, HOUR, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, lease, owner, tok), SHL_OK);
    return tok;
}

/* The twin that lost its exclusive-token race had handed higher tokens to
 * readers: the keeper must be the slot whose counter is higher, so that no
 * token a reader got is issued again. */
Test(twins, keeper_is_the_slot_that_issued_the_higher_token)
{
    char name[96];
    shl_table *t = table(name, sizeof name, "twiss");
    uint64_t tok, gen, top = cycle(t, "L", "a"); /* exclusive token 1 */
    for (int i = 0; i < 3; i++) {                /* readers: tokens 2, 3, 4 */
        char owner[16];
        snprintf(owner, sizeof owner, "r%d", i);
        cr_assert_eq(shl_acquire_shared(t, "L", owner, HOUR, &tok, &gen), SHL_OK);
        cr_assert_eq(shl_release(t, "L", owner, tok), SHL_OK);
        top = tok;
    }
    cr_assert_eq(top, 4u);
    struct shl__slot *first = unindex(t, "L");
    cycle(t, "L", "b");
    uint64_t twin_top = cycle(t, "L", "b"); /* the twin: exclusive token 2 */
    cr_assert_eq(twin_top, 2u);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert(c_has(&p, "lease L is in two slots"), "%s", p.line[0]);
    cr_assert_neq(first->cur.state, SHL__ST_RETIRED, "the slot that issued token 4 was retired");
    cr_assert_eq(shl_acquire(t, "L", "c", HOUR, &tok), SHL_OK);
    cr_assert_gt(tok, top, "token %llu issued again (a reader had it)", (unsigned long long)tok);
    cr_assert_eq(shl_release(t, "L", "c", tok), SHL_OK);
    uint64_t rtok;
    cr_assert_eq(shl_acquire_shared(t, "L", "d", HOUR, &rtok, &gen), SHL_OK);
    cr_assert(rtok > tok && gen == tok, "reader token %llu, gen %llu after token %llu",
              (unsigned long long)rtok, (unsigned long long)gen, (unsigned long long)tok);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------ readers of a retired twin */

struct reader {
    _Atomic int ready, go, done;
    uint64_t token;
    int renew_rc, lease_renew_rc;
};

static struct reader *rd;
static const char *rd_table;

/* A real shared holder, in a process of its own: holds L shared through a
 * handle and a bound lease, then, told that repair ran, tries to renew both
 * ways. */
static int reader_child(void *arg)
{
    (void)arg;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    shl_table *t;
    shl_lease *bl;
    uint64_t gen;
    if (shl_open(rd_table, NULL, &t) != SHL_OK || shl_lease_open(t, "L", "r", &bl) != SHL_OK ||
        shl_acquire_shared(t, "L", "r", HOUR, &rd->token, &gen) != SHL_OK)
        return 3;
    atomic_store(&rd->ready, 1);
    while (!atomic_load(&rd->go))
        t_sleep_ns(MS);
    rd->lease_renew_rc = shl_lease_renew(bl, rd->token, HOUR);
    rd->renew_rc = shl_renew(t, "L", "r", rd->token, HOUR);
    atomic_store(&rd->done, 1);
    while (atomic_load(&rd->go) != 2) /* keeps its handle open: not dead */
        t_sleep_ns(MS);
    shl_lease_close(bl);
    shl_close(t);
    return 0;
}

static int flag_set(void *arg)
{
    return atomic_load((_Atomic int *)arg) != 0;
}

/* The valid shared holders of a slot, as the inspector sees them. */
static uint32_t valid_readers(shl_table *t, struct shl__slot *s)
{
    static shl_lease_detail d;
    cr_assert_eq(shl_inspect_slot(t, shl__slot_no(t, s), &d), SHL_OK);
    uint32_t n = 0;
    for (uint32_t i = 0; i < d.nshared; i++)
        n += d.shared[i].state == SHL_STATE_HELD;
    return n;
}

/* Retiring a twin ends its readers: none stays valid beside the keeper's
 * writer, whichever way it asks. */
Test(twins, retiring_a_twin_ends_its_readers)
{
    t_guard(60);
    char name[96];
    shl_table *t = table(name, sizeof name, "twrd");
    rd = mmap(NULL, sizeof *rd, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(rd != MAP_FAILED);
    memset(rd, 0, sizeof *rd);
    rd_table = name;
    pid_t kid = t_fork(reader_child, NULL);
    cr_assert(t_until(flag_set, &rd->ready, 10 * SEC), "the reader did not start");
    cr_assert_eq(rd->token, 1u);
    struct shl__slot *first = unindex(t, "L");
    cycle(t, "L", "w");
    cycle(t, "L", "w"); /* the twin issued token 2: it keeps the name */
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(first->cur.state, SHL__ST_RETIRED);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "w", HOUR, &tok), SHL_OK, "the keeper has no reader");
    cr_assert_eq(valid_readers(t, first), 0u, "a reader of the retired twin is still valid");
    cr_assert_eq(atomic_load(&first->shared), 0u);
    atomic_store(&rd->go, 1);
    cr_assert(t_until(flag_set, &rd->done, 10 * SEC), "the reader did not answer");
    cr_assert_eq(rd->lease_renew_rc, SHL_ELOST, "bound renew of the retired reader: %s",
                 shl_strerror(rd->lease_renew_rc));
    cr_assert_eq(rd->renew_rc, SHL_ELOST, "renew of the retired reader: %s",
                 shl_strerror(rd->renew_rc));
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    atomic_store(&rd->go, 2);
    cr_assert_eq(t_wait(kid), 0);
    munmap(rd, sizeof *rd);
    shl_close(t);
    shl_unlink(name);
}

/* A retired slot whose readers were left valid and whose value was not
 * marked (as repair left them before): check says so, and repair ends the
 * readers and marks the value. */
Test(twins, check_reports_a_retired_slot_with_readers)
{
    char name[96];
    shl_table *t = table(name, sizeof name, "twck");
    uint64_t tok, gen;
    cr_assert_eq(shl_acquire_shared(t, "L", "r", HOUR, &tok, &gen), SHL_OK);
    struct shl__slot *s = unindex(t, "L");
    cr_assert_eq(shl_acquire(t, "L", "w", HOUR, &gen), SHL_OK);
    /* The twin of L keeps the name; L's first slot retired, its reader kept,
     * by hand (seqlock bracket and all), as the slot lock's holder would. */
    cr_assert_eq(shl__slot_lock(t, s), SHL_OK);
    shl__seq_begin(s);
    atomic_store(&s->cur.state, SHL__ST_RETIRED);
    shl__seq_end(s);
    shl__slot_unlock(s);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT, "a retired slot with a valid reader passed check");
    cr_assert(c_has(&p, "retired") && c_has(&p, "shared holder"), "%s", p.line[0]);
    cr_assert(c_has(&p, "not marked so"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert(c_has(&p, "retired"), "%s", p.line[0]);
    cr_assert_eq(atomic_load(&s->shared), 0u);
    cr_assert(atomic_load(&s->vcur) & SHL__VCUR_RETIRED, "repair marked the value retired");
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------ bound leases */

/* A bound lease made before repair retired its slot follows the name, as
 * the by-name calls do, for every call: read, renew, write, release. Each
 * call is tried on a bound lease of its own, since one that followed the
 * name keeps the slot it found. */
enum { B_READ, B_RENEW, B_WRITE, B_RELEASE, B_OLD, B_N };

Test(twins, bound_lease_on_a_retired_slot_follows_the_name)
{
    char name[96];
    shl_table *t = table(name, sizeof name, "twbd");
    shl_lease *bl[B_N]; /* owner b, bound to L's first slot */
    for (int i = 0; i < B_N; i++)
        cr_assert_eq(shl_lease_open(t, "L", "b", &bl[i]), SHL_OK);
    uint64_t tok;
    cr_assert_eq(shl_lease_acquire(bl[B_OLD], HOUR, &tok, NULL), SHL_OK);
    cr_assert_eq(shl_lease_write(bl[B_OLD], tok, "old", 3), SHL_OK);
    cr_assert_eq(shl_lease_release(bl[B_OLD], tok), SHL_OK);
    struct shl__slot *first = unindex(t, "L");
    cycle(t, "L", "b");
    cr_assert_eq(shl_acquire(t, "L", "b", HOUR, &tok), SHL_OK); /* the twin issued token 2 */
    cr_assert_eq(shl_write(t, "L", "b", tok, "new", 3), SHL_OK);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(first->cur.state, SHL__ST_RETIRED);

    char buf[16];
    size_t len;
    uint64_t vtok;
    cr_assert_eq(shl_lease_read(bl[B_READ], buf, sizeof buf, &len, &vtok), SHL_OK);
    cr_assert(len == 3 && memcmp(buf, "new", 3) == 0 && vtok == tok,
              "a bound read gave the retired slot's value (%.*s, token %llu)", (int)len, buf,
              (unsigned long long)vtok);
    cr_assert_eq(shl_lease_renew(bl[B_RENEW], tok, HOUR), SHL_OK,
                 "a bound renew of the name's holder");
    cr_assert_eq(shl_lease_write(bl[B_WRITE], tok, "bound", 5), SHL_OK, "a bound write");
    cr_assert_eq(shl_read(t, "L", buf, sizeof buf, &len, &vtok), SHL_OK);
    cr_assert(len == 5 && memcmp(buf, "bound", 5) == 0, "the bound write went elsewhere");
    cr_assert_eq(shl_lease_renew(bl[B_OLD], 1, HOUR), SHL_ELOST, "the retired slot's token");
    cr_assert_eq(shl_lease_release(bl[B_RELEASE], tok), SHL_OK, "a bound release");
    cr_assert_eq(shl_acquire(t, "L", "c", HOUR, &tok), SHL_OK, "the bound release freed L");
    cr_assert_eq(tok, 3u);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    for (int i = 0; i < B_N; i++)
        shl_lease_close(bl[i]);
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------ a repairer killed */

static int do_repair(shl_table *t, void *arg)
{
    (void)arg;
    return shl_repair(t, 0, NULL, NULL);
}

/* A repairer killed while it mends the index, before the twin with a
 * reader is retired, as it writes the retirement, or after it: the mend is
 * finished by the next adder of a name (which retires the twin without
 * looking at its slots) or by the next repair, and the reader ends with its
 * slot either way. */
Test(twins, killed_retiring_a_twin_with_a_reader)
{
    t_guard(60);
    static const int cps[] = {SHL__CP_REPAIR_INDEX, SHL__CP_INDEX_RETIRING, SHL__CP_INDEX_RETIRED};
    for (unsigned c = 0; c < 2 * sizeof cps / sizeof cps[0]; c++) {
        int cp = cps[c / 2], by_repair = c & 1;
        char name[96], how[64];
        snprintf(how, sizeof how, "crash point %d, finished by %s", cp,
                 by_repair ? "repair" : "an adder");
        shl_table *t = table(name, sizeof name, "twkill");
        uint64_t tok, gen;
        cr_assert_eq(shl_acquire_shared(t, "L", "r", HOUR, &tok, &gen), SHL_OK);
        struct shl__slot *first = unindex(t, "L");
        cycle(t, "L", "w");
        cycle(t, "L", "w");
        cr_assert_eq(c_die_at(name, cp, 1, do_repair, NULL), 128 + SIGKILL, "%s", how);
        struct c_problems p;
        if (by_repair)
            cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s: %s", how, p.line[0]);
        else
            cr_assert_eq(shl_acquire(t, "N", "w", HOUR, &gen), SHL_OK, "%s", how);
        cr_assert_eq(first->cur.state, SHL__ST_RETIRED, "%s", how);
        cr_assert_eq(valid_readers(t, first), 0u, "%s: the reader outlived its slot", how);
        cr_assert_eq(shl_acquire(t, "L", "w", HOUR, &gen), SHL_OK, "%s", how);
        cr_assert_eq(gen, 3u, "%s", how);
        cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s: %s", how, p.line[0]);
        cr_assert_eq(c_check(t, &p), SHL_OK, "%s: %s", how, p.line[0]);
        shl_close(t);
        shl_unlink(name);
    }
}
