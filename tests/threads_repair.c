/*
 * tests/threads_repair.c - shl_repair() while threads add names and acquire.
 * Plain C (see tests/threads_cases.c): run by criterion in make test and
 * under ThreadSanitizer in make check, where a race between the index mend
 * (under the table lock) and lock-free lookups is reported.
 *
 * Two threads add names (each held by its adder) and try each other's
 * recent names, which must be refused; the main thread repairs over and
 * over: every repair finds nothing to do on this healthy table.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "threads_cases.h"

#define SEC   (UINT64_C(1000000000))
#define NAMES 1500 /* per thread */

struct shared {
    shl_table *t;
    _Atomic unsigned made[2];
    _Atomic unsigned repairs;
    _Atomic unsigned bad;
};

struct worker {
    struct shared *s;
    unsigned id;
};

static void *adder(void *arg)
{
    struct worker *w = arg;
    struct shared *s = w->s;
    char lease[32], owner[8];
    snprintf(owner, sizeof owner, "a%u", w->id);
    for (unsigned i = 0; i < NAMES; i++) {
        uint64_t tok;
        /* A few names per repair, so that names are added while repairs run. */
        while (i >= (atomic_load(&s->repairs) + 1) * 50)
            sched_yield();
        snprintf(lease, sizeof lease, "n%u-%u", w->id, i);
        if (shl_acquire(s->t, lease, owner, 3600 * SEC, &tok) != SHL_OK || tok != 1)
            atomic_fetch_add(&s->bad, 1);
        atomic_store(&s->made[w->id], i + 1);
        unsigned o = atomic_load(&s->made[!w->id]);
        if (o) {
            snprintf(lease, sizeof lease, "n%u-%u", !w->id, o - 1 - i % (o < 40 ? o : 40));
            if (shl_acquire(s->t, lease, owner, 3600 * SEC, &tok) != SHL_EBUSY)
                atomic_fetch_add(&s->bad, 1);
        }
    }
    return NULL;
}

static void count_action(void *arg, const char *action)
{
    char *first = arg;
    if (!first[0])
        snprintf(first, 200, "%s", action);
}

const char *tc_repair_while_names_are_added(void)
{
    static char msg[256];
    char name[96];
    snprintf(name, sizeof name, "shltest-%d-%sthrep", (int)getpid(), t_run_mark());
    shl_options o;
    shl_options_init(&o);
    o.capacity = 2 * NAMES + 8;
    o.value_size = 8;
    o.flags = SHL_CREATE | SHL_EXCL;
    struct shared s = {NULL, {0, 0}, 0, 0};
    if (shl_open(name, &o, &s.t) != SHL_OK)
        return "cannot create the table";
    pthread_t th[2];
    struct worker w[2] = {{&s, 0}, {&s, 1}};
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, adder, &w[i]);
    char first[200] = "";
    const char *err = NULL;
    while (atomic_load(&s.made[0]) < NAMES || atomic_load(&s.made[1]) < NAMES) {
        if (shl_repair(s.t, 0, count_action, first) != SHL_OK || first[0])
            err = first[0] ? first : "repair failed";
        atomic_fetch_add(&s.repairs, 1);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    if (!err && atomic_load(&s.bad))
        err = "a held lease was acquired again, or a new one not with token 1";
    shl_close(s.t);
    shl_unlink(name);
    if (err) {
        snprintf(msg, sizeof msg, "repair while adding: %s", err);
        return msg;
    }
    return NULL;
}
