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
 * The worker stays stopped two to four ttls, like any pause. Just before its
 * SIGCONT the controller checks that it still holds the lock and stores the
 * time in the lease's `section_end`. A guarded callback reads that word under
 * the same lock: its section came after the stopped one, so a library that
 * judged the call there judged it after `section_end`. If the caller's lease
 * had surely expired by then and the call was accepted, the library read its
 * clock before taking the lock (the worker counts ST_C_LATE_LOCKED). Calls
 * without a callback (renew, release, shl_write) tell nothing this way; the
 * interval check (stress_interval.c) covers what they could let through.
 */
#include <stdlib.h>
#include <stdio.h>
#include <sys/wait.h>

#include "stress.h"

#define AIM_NS     UINT64_C(10000000) /* how long one attempt watches the locks */
#define STOP_WAIT  UINT64_C(50000000) /* how long the kernel may take to stop it */
#define RECHECK_NS UINT64_C(1000000)

struct st_section {
    struct st_shared *sh;
    shl_table *t; /* inspection only */
    char (*names)[ST_LEASE_NAME];
};

struct st_section *st_section_new(const struct st_config *c, struct st_shared *sh)
{
    if (c->etcd)
        return NULL; /* no lock to be inside */
    struct st_section *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->sh = sh;
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
    return shl_inspect(sp->t, sp->names[l], &d) == SHL_OK && d.lock == SHL_LOCK_HELD &&
           d.lock_pid == pid;
}

/* The running worker inside lease l's lock, or 0. */
static pid_t locker(struct st_section *sp, unsigned l, const pid_t *cands, unsigned n,
                    int want_other)
{
    static shl_lease_detail d;
    if (shl_inspect(sp->t, sp->names[l], &d) != SHL_OK || d.lock != SHL_LOCK_HELD)
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
    while (st_now_ns() < until) {
        unsigned l = (unsigned)(st_rand(rng) % sh->leases);
        pid_t p = locker(sp, l, cands, n, want_other);
        if (!p)
            continue;
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
            if (getenv("STDBG")) fprintf(stderr, "HIT\n");
            *lease = l;
            return p;
        }
        if (getenv("STDBG")) fprintf(stderr, "miss\n");
        kill(p, SIGCONT); /* it got out before the stop: let it go, look again */
    }
    return 0;
}

void st_section_resume(struct st_section *sp, pid_t pid, unsigned lease)
{
    if (sp && in_lock(sp, lease, pid))
        atomic_store_explicit(&sp->sh->section_end[lease], st_now_ns(), memory_order_release);
}
