/*
 * tests/test_repair.c - shl_repair() on a table in use: it judges and mends
 * the index under the table lock, never clears a bucket lock-free readers
 * walk, resolves a name found in two slots without lowering a token or
 * leaving two holders, and a repairer killed at any step of its mend is
 * finished by the next locker or repairer.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

#define KILLED (128 + SIGKILL)
#define HOUR   (3600 * SEC)

/* ------------------------------------------------ repair while in use */

#define NWORK      4 /* two threads of this process, two forked processes */
#define NEW_PER    9000
#define NOLD       2000
#define CYCLE_EACH 64             /* a worker starts a new cycling lease this often */
#define PACE       (NEW_PER / 24) /* new names per worker per repair, at most */

struct shared {
    _Atomic uint32_t made[NWORK]; /* new names worker w holds: n-w-0 .. n-w-(made-1) */
    _Atomic uint32_t done;
    _Atomic uint32_t violations;
    _Atomic uint32_t repairs;
    char first[256];
};

static struct shared *sh;
static char table_name[96];

__attribute__((format(printf, 1, 2))) static void violation(const char *fmt, ...)
{
    if (atomic_fetch_add(&sh->violations, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->first, sizeof sh->first, fmt, ap);
        va_end(ap);
    }
}

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Acquires new names (and holds them), tries old names and other workers'
 * new names (all held: every success is a second holder), and cycles a
 * lease of its own (its tokens must only rise). */
static void work(shl_table *t, unsigned w)
{
    char owner[16], nm[64];
    snprintf(owner, sizeof owner, "w%u", w);
    uint32_t seed = 0x9e3779b9u * (w + 1);
    uint64_t last = 0, tok;
    for (uint32_t i = 0; i < NEW_PER; i++) {
        int rc;
        /* Names are added across many repairs, not all before the first;
         * meanwhile, old names are tried (acquires during the repair). */
        while (i >= (atomic_load(&sh->repairs) + 1) * PACE) {
            snprintf(nm, sizeof nm, "old-%u", rnd(&seed) % NOLD);
            if ((rc = shl_acquire(t, nm, owner, HOUR, &tok)) != SHL_EBUSY)
                violation("held %s acquired by %s: rc %d, token %llu", nm, owner, rc,
                          (unsigned long long)tok);
        }
        snprintf(nm, sizeof nm, "n-%u-%u", w, i);
        rc = shl_acquire(t, nm, owner, HOUR, &tok);
        if (rc != SHL_OK || tok != 1)
            violation("new name %s: rc %d, token %llu", nm, rc, (unsigned long long)tok);
        atomic_store(&sh->made[w], i + 1);

        snprintf(nm, sizeof nm, "old-%u", rnd(&seed) % NOLD);
        if ((rc = shl_acquire(t, nm, owner, HOUR, &tok)) != SHL_EBUSY)
            violation("held %s acquired by %s: rc %d, token %llu", nm, owner, rc,
                      (unsigned long long)tok);

        unsigned o = rnd(&seed) % NWORK;
        uint32_t made = atomic_load(&sh->made[o]);
        if (o != w && made) {
            /* Mostly recent names: the ones a racing repair would lose. */
            uint32_t back = rnd(&seed) % (made < 512 ? made : 512);
            snprintf(nm, sizeof nm, "n-%u-%u", o, made - 1 - back);
            if ((rc = shl_acquire(t, nm, owner, HOUR, &tok)) != SHL_EBUSY)
                violation("held %s acquired by %s: rc %d, token %llu", nm, owner, rc,
                          (unsigned long long)tok);
        }

        snprintf(nm, sizeof nm, "c-%u-%u", w, i / CYCLE_EACH);
        if (i % CYCLE_EACH == 0)
            last = 0;
        if ((rc = shl_acquire(t, nm, owner, HOUR, &tok)) != SHL_OK || tok <= last)
            violation("%s: rc %d, token %llu after %llu", nm, rc, (unsigned long long)tok,
                      (unsigned long long)last);
        last = tok;
        if ((rc = shl_release(t, nm, owner, tok)) != SHL_OK)
            violation("%s: release of token %llu: rc %d", nm, (unsigned long long)tok, rc);
    }
    atomic_fetch_add(&sh->done, 1);
}

static void *work_thread(void *arg)
{
    work(arg, 0);
    return NULL;
}

static void *work_thread1(void *arg)
{
    work(arg, 1);
    return NULL;
}

static int work_child(void *arg)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    shl_table *t;
    if (shl_open(table_name, NULL, &t) != SHL_OK)
        return 3;
    work(t, (unsigned)(uintptr_t)arg);
    shl_close(t);
    return 0;
}

static void count_report(void *arg, const char *action)
{
    _Atomic unsigned *n = arg;
    if (atomic_fetch_add(n, 1) == 0)
        cr_log_warn("repair on a healthy table in use: %s", action);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(repair, while_in_use_never_two_holders)
{
    t_guard(300);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    t_name(table_name, sizeof table_name, "rlive");
    shl_table *t = t_create(table_name, UINT32_C(1) << 16, 8, SHL_CLOCK_MONOTONIC);
    char nm[64];
    uint64_t tok;
    for (unsigned i = 0; i < NOLD; i++) {
        snprintf(nm, sizeof nm, "old-%u", i);
        cr_assert_eq(shl_acquire(t, nm, "holder", HOUR, &tok), SHL_OK);
    }
    pid_t kid[2] = {t_fork(work_child, (void *)(uintptr_t)2),
                    t_fork(work_child, (void *)(uintptr_t)3)};
    pthread_t th[2];
    cr_assert_eq(pthread_create(&th[0], NULL, work_thread, t), 0);
    cr_assert_eq(pthread_create(&th[1], NULL, work_thread1, t), 0);
    _Atomic unsigned actions = 0;
    unsigned repairs = 0, failed = 0;
    while (atomic_load(&sh->done) < NWORK) {
        failed += shl_repair(t, 0, count_report, (void *)&actions) != SHL_OK;
        atomic_store(&sh->repairs, ++repairs);
    }
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    cr_assert_eq(t_wait(kid[0]), 0);
    cr_assert_eq(t_wait(kid[1]), 0);
    cr_log_info("%u repairs while %u names were added", repairs, NWORK * NEW_PER);
    cr_assert_gt(repairs, 1u);
    cr_assert_eq(atomic_load(&sh->violations), 0, "%u violations, first: %s",
                 atomic_load(&sh->violations), sh->first);

    /* Every name still held by its one holder: nobody else gets it. */
    unsigned twice = 0;
    for (unsigned w = 0; w < NWORK; w++)
        for (unsigned i = 0; i < NEW_PER; i++) {
            snprintf(nm, sizeof nm, "n-%u-%u", w, i);
            twice += shl_acquire(t, nm, "checker", HOUR, &tok) != SHL_EBUSY;
        }
    cr_assert_eq(twice, 0u, "%u held leases were acquired by a second owner", twice);
    cr_assert_eq(actions, 0u, "repair found damage in a healthy table in use");
    cr_assert_eq(failed, 0u, "%u repairs failed", failed);

    /* No name in two slots (none retired either: there was no damage). */
    uint32_t n = shl__tnslots(t);
    char **names = malloc(n * sizeof *names);
    cr_assert(names);
    for (uint32_t i = 0; i < n; i++)
        names[i] = shl__tslot(t, i)->name;
    qsort(names, n, sizeof *names, by_name);
    for (uint32_t i = 1; i < n; i++)
        cr_assert_str_neq(names[i - 1], names[i], "name %s is in two slots", names[i]);
    free(names);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(table_name);
    munmap(sh, sizeof *sh);
}

/* ------------------------------------------------ a repairer killed */

static shl_table *small(char *name, size_t cap, const char *tag)
{
    return t_create(t_name(name, cap, tag), 8, C_VALUE_SIZE, SHL_CLOCK_MANUAL);
}

/* The bucket that publishes slot `i`; fails the test when there is none. */
static uint32_t bucket_of_slot(shl_table *t, uint32_t i)
{
    _Atomic uint32_t *idx = shl__tindex(t);
    for (uint32_t b = 0; b < t->geom.index_size; b++)
        if (atomic_load(&idx[b]) == i + 1)
            return b;
    cr_assert_fail("slot %u is in no bucket", i);
    return 0;
}

static uint32_t slot_no_of(shl_table *t, const char *lease)
{
    struct shl__key k;
    cr_assert_eq(shl__key_lease(lease, &k), SHL_OK);
    struct shl__slot *s = shl__find(t, &k);
    cr_assert(s, "%s is not found", lease);
    return shl__slot_no(t, s);
}

/* The damage every kind of mend step fixes, as the old repair left it: L
 * (held by a, token 3) dropped out of the index and was added again by b
 * (token 1: two holders of one lease); M (held by a) dropped out; a bucket
 * names a slot that was never used. */
static void damage(shl_table *t)
{
    uint64_t tok;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_OK);
        if (i < 2)
            cr_assert_eq(shl_release(t, "L", "a", tok), SHL_OK);
    }
    cr_assert_eq(tok, 3u);
    cr_assert_eq(shl_acquire(t, "M", "a", HOUR, &tok), SHL_OK);
    _Atomic uint32_t *idx = shl__tindex(t);
    uint32_t l = slot_no_of(t, "L"), m = slot_no_of(t, "M");
    atomic_store(&idx[bucket_of_slot(t, l)], 0);
    shl__nc_forget(); /* look L up as a process that never used it */
    cr_assert_eq(shl_acquire(t, "L", "b", HOUR, &tok), SHL_OK, "the twin of L");
    cr_assert_eq(tok, 1u);
    atomic_store(&idx[bucket_of_slot(t, m)], 0);
    for (uint32_t b = 0;; b++)
        if (atomic_load(&idx[b]) == 0) {
            atomic_store(&idx[b], 78); /* slot 77: never used */
            break;
        }
}

/* What holds once the mend is done: each held lease keeps its holder and
 * token, nobody else gets it, the retired twin's holder is ended, and a
 * second repair finds nothing. */
static void mended(shl_table *t, const char *how)
{
    uint64_t tok;
    shl_lease_info in;
    cr_assert_eq(shl_acquire(t, "L", "c", HOUR, &tok), SHL_EBUSY, "%s: L held", how);
    cr_assert_eq(shl_acquire(t, "M", "c", HOUR, &tok), SHL_EBUSY, "%s: M held", how);
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert(in.token == 3 && strcmp(in.owner, "a") == 0, "%s: L token %llu owner %s", how,
              (unsigned long long)in.token, in.owner);
    cr_assert_eq(shl_stat(t, "M", &in), SHL_OK);
    cr_assert(in.token == 1 && strcmp(in.owner, "a") == 0, "%s: M", how);
    cr_assert_eq(shl_renew(t, "L", "a", 3, HOUR), SHL_OK, "%s", how);
    cr_assert_eq(shl_renew(t, "L", "b", 1, HOUR), SHL_ELOST, "%s: the twin's holder ended", how);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s: %s", how, p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s: %s", how, p.line[0]);
    cr_assert_eq(p.n, 0u, "%s: a second repair did: %s", how, p.line[0]);
    cr_assert_eq(shl_release(t, "L", "a", 3), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "c", HOUR, &tok), SHL_OK);
    cr_assert_eq(tok, 4u, "%s: the token never goes back", how);
}

static int do_repair(shl_table *t, void *arg)
{
    (void)arg;
    return shl_repair(t, 0, NULL, NULL);
}

Test(repair, mend_repairs_twins_holes_and_strays)
{
    char name[96];
    shl_table *t = small(name, sizeof name, "rmend");
    damage(t);
    struct c_problems p;
    cr_assert_eq(c_check(t, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "lease L is in two slots"), "%s", p.line[0]);
    cr_assert(c_has(&p, "lease M (slot 1): not reachable"), "%s", p.line[0]);
    cr_assert(c_has(&p, "names slot 77"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "would: lease L is in two slots"), "%s", p.line[0]);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "M", &in), SHL_ENOENT, "a dry run changes nothing");
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    mended(t, "repair");
    shl_close(t);
    shl_unlink(name);
}

/* Every step of the mend, killed there, then finished either by the next
 * table locker (adding a name) or by the next repair. */
Test(repair, killed_at_every_mend_step)
{
    t_guard(60);
    static const int cps[] = {SHL__CP_REPAIR_INDEX,   SHL__CP_INDEX_RETIRING, SHL__CP_INDEX_RETIRED,
                              SHL__CP_INDEX_INSERTED, SHL__CP_INDEX_DEAD,     SHL__CP_INDEX_MENDED};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++)
        for (int by_repair = 0; by_repair < 2; by_repair++) {
            char name[96], how[64];
            snprintf(how, sizeof how, "crash point %d, finished by %s", cps[i],
                     by_repair ? "repair" : "a locker");
            shl_table *t = small(name, sizeof name, "rkill");
            damage(t);
            cr_assert_eq(c_die_at(name, cps[i], 1, do_repair, NULL), KILLED, "%s", how);
            cr_assert(atomic_load(&t->hdr->index_fix), "%s: the mend is armed", how);
            uint64_t tok;
            if (by_repair) {
                struct c_problems p;
                cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s: %s", how, p.line[0]);
            } else {
                cr_assert_eq(shl_acquire(t, "N", "c", HOUR, &tok), SHL_OK, "%s", how);
            }
            cr_assert(!atomic_load(&t->hdr->index_fix), "%s: the mend is finished", how);
            mended(t, how);
            shl_close(t);
            shl_unlink(name);
        }
}

/* A twin whose slot is not in the index but has the higher token keeps the
 * name: the indexed one is retired, lookups move to the other, and a bound
 * lease on the retired slot follows the name. */
Test(repair, twin_with_higher_token_keeps_the_name)
{
    char name[96];
    shl_table *t = small(name, sizeof name, "rtwin");
    uint64_t tok;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_OK);
        cr_assert_eq(shl_release(t, "L", "a", tok), SHL_OK);
    }
    uint32_t l = slot_no_of(t, "L");
    atomic_store(&shl__tindex(t)[bucket_of_slot(t, l)], 0);
    shl__nc_forget(); /* look L up as a process that never used it */
    cr_assert_eq(shl_acquire(t, "L", "b", HOUR, &tok), SHL_OK);
    cr_assert_eq(tok, 1u);
    shl_lease *bl;
    cr_assert_eq(shl_lease_open(t, "L", "d", &bl), SHL_OK); /* binds the twin */
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert(c_has(&p, "lease L is in two slots"), "%s", p.line[0]);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "L", &in), SHL_OK);
    cr_assert_eq(in.token, 5u, "the higher token kept the name");
    cr_assert_eq(in.state, SHL_STATE_FREE);
    cr_assert_eq(shl_release(t, "L", "b", 1), SHL_ELOST, "the twin's holder was ended");
    cr_assert_eq(shl_lease_acquire(bl, HOUR, &tok, NULL), SHL_OK);
    cr_assert_eq(tok, 6u, "the bound lease followed the name; no token went back");
    cr_assert_eq(shl_lease_renew(bl, tok, HOUR), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "e", HOUR, &tok), SHL_EBUSY);
    shl_lease_close(bl);
    cr_assert_eq(c_check(t, &p), SHL_OK, "%s", p.line[0]);
    shl_close(t);
    shl_unlink(name);
}

/* A process that found the twin before it was retired and acquires it after
 * is sent to the slot that kept the name. */
Test(repair, acquire_through_a_retired_slot_finds_the_keeper)
{
    char name[96];
    shl_table *t = small(name, sizeof name, "rret");
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "L", "a", HOUR, &tok), SHL_EBUSY);
    atomic_store(&shl__tindex(t)[bucket_of_slot(t, slot_no_of(t, "L"))], 0);
    shl__nc_forget(); /* look L up as a process that never used it */
    struct shl__slot *twin;
    cr_assert_eq(shl__lookup_or_add(t, "L", &twin), SHL_OK);
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(twin->cur.state, SHL__ST_RETIRED);
    cr_assert_eq(shl__shm_acquire_at(t, twin, "b", 1, HOUR, &tok, NULL), SHL__SLOT_RETIRED);
    cr_assert_eq(shl_acquire(t, "L", "b", HOUR, &tok), SHL_EBUSY, "a still holds L");
    shl_close(t);
    shl_unlink(name);
}

/* ------------------------------------------------ one repairer at a time */

static _Atomic int *released;
static char excl_path[160];

static int hold_repairer_lock(void *arg)
{
    (void)arg;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(excl_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) != 0)
        return 3;
    atomic_store(released, 1); /* held */
    t_sleep_ns(300 * MS);
    atomic_store(released, 2); /* about to let go */
    flock(fd, LOCK_UN);
    return 0;
}

static int lock_held(void *arg)
{
    (void)arg;
    return atomic_load(released) != 0;
}

/* A repair waits for the one in progress (the lock on the segment's file)
 * instead of mending beside it. */
Test(repair, one_repairer_at_a_time)
{
    char name[96];
    shl_table *t = small(name, sizeof name, "rone");
    released =
        mmap(NULL, sizeof *released, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(released != MAP_FAILED);
    atomic_store(released, 0);
    snprintf(excl_path, sizeof excl_path, "/dev/shm/%s", name);
    pid_t kid = t_fork(hold_repairer_lock, NULL);
    cr_assert(t_until(lock_held, NULL, 5 * SEC));
    struct c_problems p;
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert_eq(atomic_load(released), 2, "repair ran while another held the repairer's lock");
    cr_assert_eq(t_wait(kid), 0);
    munmap(released, sizeof *released);
    shl_close(t);
    shl_unlink(name);
}

/* A mend left armed under a table lock that then became unrecoverable (its
 * next locker did not mark it consistent): a dry run says what it would do
 * without failing on the lock, and a repair finishes the mend before it
 * reinitialises the lock. */
Test(repair, armed_mend_under_an_unrecoverable_table_lock)
{
    char name[96];
    shl_table *t = small(name, sizeof name, "rbrk");
    damage(t);
    cr_assert_eq(c_die_at(name, SHL__CP_INDEX_INSERTED, 1, do_repair, NULL), KILLED);
    pthread_mutex_t *m = &t->hdr->table_lock;
    cr_assert_eq(pthread_mutex_lock(m), EOWNERDEAD);
    pthread_mutex_unlock(m); /* not made consistent: unrecoverable */
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "N", "c", HOUR, &tok), SHL_EBROKEN);
    struct c_problems p;
    cr_assert_eq(c_repair(t, SHL_REPAIR_DRY_RUN, &p), SHL_ECORRUPT);
    cr_assert(c_has(&p, "would: table lock is unrecoverable"), "%s", p.line[0]);
    cr_assert(!c_has(&p, "cannot repair"), "%s", p.line[0]);
    cr_assert_eq(c_repair(t, 0, &p), SHL_OK, "%s", p.line[0]);
    cr_assert(!atomic_load(&t->hdr->index_fix), "the mend was finished");
    cr_assert_eq(shl_acquire(t, "N", "c", HOUR, &tok), SHL_OK, "the table lock works");
    mended(t, "repair after an unrecoverable table lock");
    shl_close(t);
    shl_unlink(name);
}
