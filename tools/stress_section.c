/*
 * tools/stress_section.c - pauses inside the critical section.
 *
 * The controller watches each lease's slot lock through the public
 * inspection call (shl_inspect(): lock-free, it never waits for the lock),
 * whose `lock_pid` is the slot's `locker` word (shm/layout.h): the pid inside
 * the critical section. When a running worker is in there, it is SIGSTOPped,
 * and the stop counts only once the kernel reports the worker stopped and
 * the lock still held by it (read twice, a millisecond apart); otherwise the
 * worker is let go at once and the watch goes on. Most attempts look for a
 * worker that is not the lease's holder (a refused acquirer, say): then the
 * holder itself is left running, and its next call on the lease waits for
 * the lock while its lease expires. Nothing in the library is changed for
 * this: it works against any build.
 *
 * Caught that way, a worker is rarely still inside: a section lasts a
 * microsecond or so, about what a signal takes to land. So the test build
 * (whose crash points can stop a process instead of killing it, shm/
 * crashpoint.h) also gives half of the workers it spawns a stop of their
 * own: SHL_CRASHPOINT set to the busy acquire's crash point (SHL__CP_BUSY,
 * a refused acquire with the slot still locked) on its Nth pass, N random.
 * The controller sees the stop (waitid), finds the lock the worker is in, and
 * from there on it is a pause inside the section like the others. In the
 * installed library that environment does nothing, and the watch above is
 * what there is.
 *
 * The worker stays stopped two to four ttls, like any pause. Its lease's
 * `section` mark (stress.h) says from when to when it held the lock: `begin`
 * once the stop is seen, `end` just before its SIGCONT, when the lock is
 * seen still held by it. A fenced call whose section came after the stopped
 * one was judged after `end` by a library that reads its clock inside the
 * lock; the caller knows its section came after when its callback, under the
 * lock, read that `end`, or when the call began after `begin`. If the
 * caller's lease had surely expired by `end` (its upper bound of the expiry
 * is not later) and the call was accepted, the library judged it with a
 * clock read before the lock (the worker counts ST_C_LATE_LOCKED). A call
 * that began before the stop and has no callback tells nothing this way, and
 * the mark's `pid` keeps a worker from taking its own pause for another's.
 *
 * Only the controller resumes a stopped worker: the workers lead process
 * groups of their own (stress_chaos.c), so no orphaned-group SIGCONT from the
 * kernel lets one go behind the controller's back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "stress.h"

/* SHL__CP_BUSY in lib/kind_shm/crashpoint.h (crash point numbers never change). */
#define CP_BUSY    90
#define AIM_NS     UINT64_C(30000000) /* how long one attempt watches the locks */
#define STOP_WAIT  UINT64_C(50000000) /* how long the kernel may take to stop it */
#define RECHECK_NS UINT64_C(1000000)
#define SEEN_NS    UINT64_C(20000)

struct st_section {
    struct st_shared *sh;
    const struct st_config *c;
    shl_table *t;  /* inspection only; NULL after a removal, until opened again */
    uint32_t tgen; /* its table generation (removals, stress.h) */
    char (*names)[ST_LEASE_NAME];
};

/* The inspection handle, on the table the name names now: opened again
 * after a removal (NULL while nobody has created the next table). Never
 * waits: the controller is the one remover, so no removal is under way. */
static shl_table *table(struct st_section *sp)
{
    if (!sp->t) {
        uint32_t g = atomic_load(&sp->sh->gen);
        if (shl_open(sp->c->table, NULL, &sp->t) != SHL_OK)
            sp->t = NULL;
        else
            sp->tgen = g;
    }
    return sp->t;
}

void st_section_removed(struct st_section *sp)
{
    if (!sp)
        return;
    shl_close(sp->t);
    sp->t = NULL;
    atomic_fetch_add(&sp->sh->reopens_other, 1);
}

struct st_section *st_section_new(const struct st_config *c, struct st_shared *sh)
{
    if (c->etcd)
        return NULL; /* no lock to be inside */
    struct st_section *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->sh = sh;
    sp->c = c;
    sp->names = calloc(sh->leases, sizeof *sp->names);
    if (!sp->names || shl_open(c->table, NULL, &sp->t) != SHL_OK) {
        free(sp->names);
        free(sp);
        return NULL;
    }
    for (unsigned l = 0; l < sh->leases; l++)
        st_lease_name(l, sp->names[l]);
    return sp;
}

void st_section_free(struct st_section *sp)
{
    if (!sp)
        return;
    shl_close(sp->t);
    free(sp->names);
    free(sp);
}

/* Whether `pid` holds lease l's slot lock now. */
static int in_lock(struct st_section *sp, unsigned l, pid_t pid)
{
    static shl_lease_detail d; /* large; the controller is one thread */
    return table(sp) && shl_inspect(sp->t, sp->names[l], &d) == SHL_OK && d.lock == SHL_LOCK_HELD &&
           d.lock_pid == pid;
}

/* The running worker inside lease l's lock, or 0. */
static pid_t locker(struct st_section *sp, unsigned l, const pid_t *cands, unsigned n,
                    int want_other)
{
    static shl_lease_detail d;
    if (!table(sp) || shl_inspect(sp->t, sp->names[l], &d) != SHL_OK || d.lock != SHL_LOCK_HELD)
        return 0;
    if (want_other && d.info.state == SHL_STATE_HELD && d.info.pid == d.lock_pid)
        return 0; /* the holder itself */
    for (unsigned w = 0; w < n; w++)
        if (cands[w] > 0 && cands[w] == d.lock_pid)
            return cands[w];
    return 0;
}

/* Waits (bounded) until the kernel reports pid stopped; leaves the report. */
static int stopped(pid_t pid)
{
    uint64_t until = st_now_ns() + STOP_WAIT;
    do {
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG | WNOWAIT) != 0)
            return 0;
        if (si.si_pid == pid)
            return 1;
        st_sleep_ns(50000);
    } while (st_now_ns() < until);
    return 0;
}

pid_t st_section_stop(struct st_section *sp, const pid_t *cands, unsigned n, unsigned *lease,
                      uint64_t *rng)
{
    if (!sp)
        return 0;
    struct st_shared *sh = sp->sh;
    int want_other = st_rand(rng) % 3 != 0;
    uint64_t until = st_now_ns() + AIM_NS;
    /* A worker seen in the lock twice, SEEN_NS apart, is most likely
     * descheduled in there: a stop lands before it runs again. One running
     * in its section leaves it before any signal arrives. */
    pid_t seen = 0;
    unsigned seen_l = 0;
    uint64_t seen_at = 0;
    while (st_now_ns() < until) {
        unsigned l = seen ? seen_l : (unsigned)(st_rand(rng) % sh->leases);
        pid_t p = locker(sp, l, cands, n, want_other);
        if (!p || p != seen) {
            seen = p;
            seen_l = l;
            seen_at = st_now_ns();
            continue;
        }
        if (st_now_ns() - seen_at < SEEN_NS)
            continue;
        seen = 0;
        unsigned w = 0;
        while (w < n && cands[w] != p)
            w++;
        /* Marked before the stop, as every pause is. */
        atomic_fetch_add(&sh->w[w].pauses, 1);
        if (kill(p, SIGSTOP) != 0)
            continue;
        int ok = stopped(p) && in_lock(sp, l, p);
        if (ok) {
            st_sleep_ns(RECHECK_NS);
            ok = in_lock(sp, l, p);
        }
        if (ok) {
            *lease = l;
            return p;
        }
        kill(p, SIGCONT); /* it got out before the stop: let it go, look again */
    }
    return 0;
}

int st_section_arm(struct st_section *sp, uint64_t *rng, char *env, size_t cap)
{
    if (!sp || getenv("SHL_CRASHPOINT")) /* a campaign run at a crash point keeps it */
        return 0;
    snprintf(env, cap, "%d:%u:stop", CP_BUSY, 20 + (unsigned)(st_rand(rng) % 400));
    return 1;
}

int st_section_caught(struct st_section *sp, pid_t pid, unsigned *lease)
{
    if (!sp || !stopped(pid))
        return 0;
    for (unsigned l = 0; l < sp->sh->leases; l++)
        if (in_lock(sp, l, pid)) {
            st_sleep_ns(RECHECK_NS);
            if (!in_lock(sp, l, pid))
                return 0;
            *lease = l;
            return 1;
        }
    return 0;
}

int st_section_self_stopped(struct st_section *sp, pid_t pid, unsigned *lease)
{
    siginfo_t si = {0};
    if (!sp || waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG | WNOWAIT) != 0 || si.si_pid != pid)
        return 0;
    for (unsigned l = 0; l < sp->sh->leases; l++)
        if (in_lock(sp, l, pid)) {
            *lease = l;
            return 1;
        }
    return -1;
}

void st_section_begin(struct st_section *sp, unsigned lease, pid_t pid)
{
    struct st_secmark *m = &sp->sh->section[lease];
    atomic_fetch_add(&m->gen, 1);
    atomic_store(&m->table, sp->tgen);
    atomic_store(&m->pid, (int32_t)pid);
    atomic_store(&m->begin, st_now_ns());
}

uint32_t st_section_tgen(const struct st_section *sp)
{
    return sp->tgen;
}

void st_mark_pause(struct st_secmark *m, uint32_t table, pid_t pid, uint64_t begin, uint64_t end)
{
    atomic_fetch_add(&m->gen, 1);
    atomic_store(&m->table, table);
    atomic_store(&m->pid, (int32_t)pid);
    atomic_store(&m->begin, begin);
    atomic_store(&m->end, end);
    atomic_fetch_add(&m->gen, 1);
}

int st_section_holding(struct st_section *sp, pid_t pid, unsigned *lease)
{
    if (!sp)
        return 0;
    for (unsigned l = 0; l < sp->sh->leases; l++)
        if (in_lock(sp, l, pid)) {
            *lease = l;
            return 1;
        }
    return 0;
}

void st_section_resume(struct st_section *sp, pid_t pid, unsigned lease)
{
    if (!sp)
        return;
    struct st_secmark *m = &sp->sh->section[lease];
    uint64_t end = in_lock(sp, lease, pid) ? st_now_ns() : atomic_load(&m->begin);
    atomic_store(&m->end, end);
    atomic_fetch_add(&m->gen, 1);
}
