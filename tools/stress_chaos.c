/*
 * tools/stress_chaos.c - the controller of `shmlease stress`: forks the
 * workers, kills and respawns them, pauses holders past their TTL, drives the
 * checker and the progress line.
 *
 * Kills come in two kinds, chosen at random: an order to the worker to die
 * inside its next guarded section, half-way through its evidence record (so a
 * death inside the lease's critical section is certain to happen, not left to
 * luck), and an external SIGKILL, aimed when possible at a worker that is
 * inside a guarded write. Pauses SIGSTOP a worker for two to four TTLs, then
 * SIGCONT it: half of them a worker caught inside a lease's slot lock
 * (stress_section.c), the others a worker that holds a lease (half of those
 * aimed at a value write), which carries on with its old token, and whose
 * next write must be refused. An admin process revokes a random lease's hold
 * now and then (its epoch in the shared region tells the holder why it was
 * refused) and, with a repair rate, runs shl_repair() and shl_check() on the
 * live table; whatever the check reports is a violation. It is a process of
 * its own because those calls may wait for a lock that a stopped worker
 * holds, and only the controller resumes it. Reader processes, never killed
 * or paused, read values while they are written. With a remove rate the
 * controller removes the table's name now and then (stress_removed.c), half
 * the time by shl_unlink(), half by a plain unlink(2) of its file. With
 * --admin-chaos on etcd the admin process also deletes holder and token
 * records under their holders, and the table's whole prefix, restoring the
 * table after it (stress_admin_etcd.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_cluster.h"
#include "stress.h"
#include "stress_etcd.h"

#define TICK_NS       UINT64_C(2000000)
#define AIM_NS        UINT64_C(3000000) /* how long an external kill waits for a good moment */
#define STOP_GRACE_NS UINT64_C(5000000000)
#define SEC_NS        UINT64_C(1000000000)
/* --admin-chaos: holder records and token records deleted per second */
#define ADMIN_DELETE_RATE 2.0
#define ADMIN_TOKEN_RATE  1.0
#define TOKEN_GONE_NS     UINT64_C(800000000) /* until a deleted token record is back */

struct ctl {
    pid_t pid;
    int paused;
    uint64_t resume_at;
    uint64_t stopped_at; /* when we sent the SIGSTOP of the pause in progress */
    unsigned section;    /* lease + 1 when stopped inside its slot lock */
    int self_stop;       /* will stop itself inside a lock: spawned so, or ordered */
    uint64_t killed_at;  /* when we sent it SIGKILL (0: we did not) */
};

struct run {
    const struct st_config *c;
    struct st_shared *sh;
    struct st_checker *ck;
    struct st_chaos_totals *tot;
    struct ctl ctl[ST_WORKERS_MAX];
    uint64_t rng;
    struct st_section *sec; /* pauses inside the critical section, NULL on etcd */
    uint64_t start, end;
    int stopping;
    unsigned others; /* readers and the admin process still running */
    /* --member-chaos: the member disturbed now (-1: none), how, until when;
     * when the next disturbance comes. */
    int victim, victim_killed;
    uint64_t victim_until, next_member;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* fork() for the campaign's children: in the child (0 returned) the
 * controller's death kills it, so a killed controller leaves nothing running.
 * Each child is a process group of its own, which the running controller
 * ties to the session: the controller's group holds no stopped process, so
 * the exit of whatever started the campaign (a shell that ran it in the
 * background, nohup, a CI step) never orphans a group with a paused worker
 * in it, which would make the kernel send SIGHUP and SIGCONT to every
 * member (tests/test_stress_orphan.c). A terminal's ^C reaches the
 * controller only; it ends the campaign, which ends its children. */
static pid_t fork_tied(void)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t p = fork();
    if (p == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
    } else if (p > 0) {
        setpgid(p, p); /* either call may come first */
    }
    return p;
}

static void spawn(struct run *r, unsigned w, int respawn)
{
    struct st_worker *me = &r->sh->w[w];
    if (respawn)
        atomic_fetch_add(&me->incarnation, 1);
    atomic_store(&me->phase, ST_PH_IDLE);
    atomic_store(&me->holding, 0);
    atomic_store(&me->die_in_guard, 0);
    atomic_store(&me->stop_in_guard, 0);
    char env[32];
    int self_stop = r->c->pause_rate > 0 && st_rand(&r->rng) % 2 &&
                    st_section_arm(r->sec, &r->rng, env, sizeof env);
    pid_t p = fork_tied();
    if (p == 0) {
        if (self_stop)
            setenv("SHL_CRASHPOINT", env, 1);
        st_worker_main(r->c, r->sh, w);
    }
    if (p < 0) {
        r->ctl[w].pid = 0; /* tried again on a later tick */
        return;
    }
    r->ctl[w] = (struct ctl){.pid = p, .self_stop = self_stop};
    atomic_store(&me->pid, p);
}

/* In a child that is not a worker: a crash point armed for the campaign
 * (SHL_CRASHPOINT, test build) kills workers only; the readers and the
 * admin are never killed, and their death would be a failure. */
static void spare_from_crash_points(void)
{
    unsetenv("SHL_CRASHPOINT");
}

/* A process of the campaign ended otherwise than expected: counted, and
 * said on stderr with what the kernel reported, so that a failed campaign
 * tells which and how. */
static void failure(struct run *r, const char *who, pid_t pid, int status)
{
    r->tot->worker_failures++;
    if (WIFSIGNALED(status))
        fprintf(stderr, "shmlease stress: %s (pid %d) killed by signal %d\n", who, (int)pid,
                WTERMSIG(status));
    else if (WIFEXITED(status))
        fprintf(stderr, "shmlease stress: %s (pid %d) exited with %d\n", who, (int)pid,
                WEXITSTATUS(status));
    else
        fprintf(stderr, "shmlease stress: %s (pid %d) failed (status %#x)\n", who, (int)pid,
                (unsigned)status);
}

static void spawn_reader(struct run *r, unsigned i)
{
    pid_t p = fork_tied();
    if (p == 0) {
        spare_from_crash_points();
        st_reader_main(r->c, r->sh, i);
    }
    if (p < 0)
        r->tot->worker_failures++;
    else
        r->others++;
}

static int find(const struct run *r, pid_t p)
{
    for (unsigned w = 0; w < r->sh->workers; w++)
        if (r->ctl[w].pid == p)
            return (int)w;
    return -1;
}

static unsigned running(const struct run *r);

/* Collects dead workers, counts the kills, respawns unless stopping. With
 * `options` 0, blocks until every worker, reader and the admin are gone
 * (not an etcd member of the tool's: those are stopped by their owner). */
static void reap(struct run *r, int options)
{
    int st;
    pid_t p;
    while ((options & WNOHANG || running(r) || r->others) && (p = waitpid(-1, &st, options)) > 0) {
#if SHL_HAVE_ETCD
        if (r->c->cluster && etcd_cluster_reaped(r->c->cluster, p))
            continue; /* a member that died by itself: restarted by member_chaos() */
#endif
        int w = find(r, p);
        if (w < 0) {
            if (r->others)
                r->others--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                failure(r, "a reader or the admin", p, st);
            continue;
        }
        struct st_worker *me = &r->sh->w[w];
        atomic_fetch_add(&r->sh->deaths, 1);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
            r->tot->kills++;
            uint32_t ph = atomic_load(&me->phase);
            if (ph == ST_PH_GUARD || ph == ST_PH_WRITE)
                r->tot->kills_in_section++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failure(r, "a worker", p, st);
        }
        r->ctl[w].pid = 0;
        atomic_store(&me->pid, 0);
        atomic_store(&r->sh->logging[w], 0); /* it may have died appending */
        if (!r->c->etcd)                     /* the hold it died in ends at our kill */
            st_iv_close_dead(r->sh, st_ivlog_at(r->sh, (unsigned)w), r->ctl[w].killed_at,
                             atomic_load(&me->pauses));
        if (!r->stopping) {
            r->tot->respawns++;
            spawn(r, (unsigned)w, 1);
        }
    }
}

/* A random running, unpaused worker (holding a lease if asked); -1 if none. */
static int pick(struct run *r, int holder)
{
    for (int tries = 0; tries < 32; tries++) {
        unsigned w = (unsigned)(st_rand(&r->rng) % r->sh->workers);
        if (r->ctl[w].pid > 0 && !r->ctl[w].paused &&
            (!holder || atomic_load(&r->sh->w[w].holding) != 0))
            return (int)w;
    }
    return -1;
}

static void do_kill(struct run *r)
{
    int w = pick(r, 0);
    if (w < 0)
        return;
    struct st_worker *me = &r->sh->w[w];
    /* On etcd there is no guarded section to die in: external kills only,
     * aimed at a write in flight. */
    if (!r->c->etcd && st_rand(&r->rng) % 2) {
        atomic_store(&me->die_in_guard, 1);
        return;
    }
    uint64_t until = st_now_ns() + AIM_NS;
    while (st_now_ns() < until) {
        uint32_t ph = atomic_load(&me->phase);
        if (ph == ST_PH_GUARD || ph == ST_PH_WRITE)
            break;
    }
    r->ctl[w].killed_at = st_now_ns();
    kill(r->ctl[w].pid, SIGKILL);
}

/* Registers worker w's stop inside lease l's lock as a pause. */
static void section_paused(struct run *r, unsigned w, unsigned lease, uint64_t now)
{
    uint64_t ttl = r->sh->ttl_ns;
    st_section_begin(r->sec, lease, r->ctl[w].pid);
    r->ctl[w].paused = 1;
    r->ctl[w].section = lease + 1;
    r->ctl[w].resume_at = now + 2 * ttl + st_rand(&r->rng) % (2 * ttl + 1);
    r->tot->pauses++;
    r->tot->pauses_in_section++;
}

/* Workers that were to stop themselves inside a lock and have: paused
 * there. */
static void self_stops(struct run *r, uint64_t now)
{
    for (unsigned w = 0; w < r->sh->workers; w++) {
        struct ctl *k = &r->ctl[w];
        unsigned lease;
        if (k->pid <= 0 || k->paused || !k->self_stop)
            continue;
        int st = st_section_self_stopped(r->sec, k->pid, &lease);
        if (st == 0)
            continue;
        k->self_stop = 0;
        if (st > 0) {
            atomic_fetch_add(&r->sh->w[w].pauses, 1);
            section_paused(r, w, lease, now);
        } else {
            kill(k->pid, SIGCONT); /* stopped, but in no lock: not ours */
        }
    }
}

/* A pause inside a lease's slot lock (stress_section.c): a worker caught
 * there, or (`order`, or none caught) a holder told to stop itself in its
 * next guarded section. 0 when neither could be done. */
static int section_pause(struct run *r, uint64_t now, int order)
{
    if (order) {
        int w = pick(r, 1);
        if (w < 0 || r->ctl[w].self_stop)
            return 0;
        atomic_store(&r->sh->w[w].stop_in_guard,
                     st_rand(&r->rng) % 2 ? ST_STOP_BEFORE_READ : ST_STOP_AFTER_READ);
        r->ctl[w].self_stop = 1; /* seen by self_stops() */
        return 1;
    }
    pid_t cands[ST_WORKERS_MAX];
    for (unsigned w = 0; w < r->sh->workers; w++)
        cands[w] = r->ctl[w].paused ? 0 : r->ctl[w].pid;
    unsigned lease;
    pid_t p = st_section_stop(r->sec, cands, r->sh->workers, &lease, &r->rng);
    int w = p ? find(r, p) : -1;
    if (w < 0)
        return section_pause(r, now, 1);
    section_paused(r, (unsigned)w, lease, now);
    return 1;
}

/* Whether the campaign is past half-way: from then on, a fault that has
 * not had its effect yet is made to happen. */
static int past_half(const struct run *r, uint64_t now)
{
    return now - r->start > (r->end - r->start) / 2;
}

/* From half-way on, until a paused holder's call has been refused: whether
 * to pause one now. One at a time, and a TTL after the last resumed, so
 * that the resumed worker makes the call that is refused before it or
 * another is stopped again. */
static int holder_pause_missing(const struct run *r, uint64_t now)
{
    if (r->c->pause_rate <= 0 || !past_half(r, now) || st_worker_count(r->sh, ST_C_STALE_PAUSED))
        return 0;
    for (unsigned w = 0; w < r->sh->workers; w++) {
        const struct ctl *k = &r->ctl[w];
        if (k->pid > 0 && (k->paused || (k->resume_at && now < k->resume_at + r->sh->ttl_ns)))
            return 0;
    }
    return 1;
}

static void do_pause(struct run *r, uint64_t now)
{
    /* Half of the pauses land inside a critical section (a quarter caught
     * there, a quarter on order), half stop a holder past its expiry. A
     * short campaign must not pass or fail by luck: from half-way on, a
     * kind of pause that has not had its effect yet (one inside a section;
     * a paused holder's call refused) gets all of them, or half when both
     * have not. */
    int late = past_half(r, now);
    int want_section = late && !r->tot->pauses_in_section;
    int want_holder = late && st_worker_count(r->sh, ST_C_STALE_PAUSED) == 0;
    unsigned how = (unsigned)(st_rand(&r->rng) % 4);
    int in_section = want_holder ? want_section && how < 2 : want_section || how < 2;
    if (r->sec && in_section && section_pause(r, now, how == 1))
        return;
    int w = pick(r, 1);
    if (w < 0)
        return;
    uint64_t ttl = r->sh->ttl_ns;
    /* Marked before the stop, so the worker can tell its refusals came after. */
    atomic_fetch_add(&r->sh->w[w].pauses, 1);
    /* Half of the pauses aim at a value write: one stopped half-way through
     * its copy shows the readers what a reader may meet. */
    uint64_t until = st_rand(&r->rng) % 2 ? st_now_ns() + AIM_NS : 0;
    while (st_now_ns() < until && atomic_load(&r->sh->w[w].phase) != ST_PH_WRITE)
        ;
    r->ctl[w].stopped_at = st_now_ns();
    if (kill(r->ctl[w].pid, SIGSTOP) != 0)
        return;
    /* Stopped at a random moment, the worker may be inside a slot lock: its
     * own call's (a value write, aimed at above, is made under the lock), or
     * its renewer thread's. That is a pause inside the lease's section, and
     * it is marked as the watched ones are: a waiter held up by the lock
     * meanwhile is then not taken for one whose wake-up was lost. */
    unsigned lease;
    if (st_section_caught(r->sec, r->ctl[w].pid, &lease)) {
        section_paused(r, (unsigned)w, lease, now);
        r->tot->pauses_landed_in_lock++;
        return;
    }
    r->ctl[w].paused = 1;
    r->ctl[w].resume_at = now + 2 * ttl + st_rand(&r->rng) % (2 * ttl + 1);
    r->tot->pauses++;
}

/* Where a pause at a random moment really stopped worker w, told before
 * it runs again. The kernel may stop a worker long after its SIGSTOP (a
 * loaded host keeps a preempted worker from it), after st_section_caught()
 * stopped watching: by then the holder may be inside a lease's lock, or
 * have let its lease go and be queued for one, where a stopped waiter holds
 * up the waiters behind it for its turn's grace, as the library means it
 * to. It is stopped now, so where it stands is where it stood since the
 * stop. Marked in held_up[] (the SIGSTOP's time to now) before the SIGCONT:
 * a waiter it held up gets the lease only after, and its check then finds
 * the mark. Not a section pause: when it entered the lock is unknown. */
static void late_stop(struct run *r, unsigned w, uint64_t now)
{
    struct ctl *k = &r->ctl[w];
    uint64_t at = k->stopped_at;
    k->stopped_at = 0;
    if (k->section || !at || !r->sec)
        return;
    unsigned lease;
    uint32_t q = atomic_load(&r->sh->w[w].waiting);
    if (!st_section_holding(r->sec, k->pid, &lease)) {
        if (q == 0 || q > r->sh->leases)
            return;
        lease = q - 1;
    }
    st_mark_pause(&r->sh->held_up[lease], st_section_tgen(r->sec), k->pid, at, now);
    r->tot->pauses_late++;
}

static void resume_due(struct run *r, uint64_t now, int all)
{
    for (unsigned w = 0; w < r->sh->workers; w++) {
        struct ctl *k = &r->ctl[w];
        if (k->pid > 0 && k->paused && (all || now >= k->resume_at)) {
            late_stop(r, w, now);
            if (k->section)
                st_section_resume(r->sec, k->pid, k->section - 1);
            k->section = 0;
            kill(k->pid, SIGCONT);
            k->paused = 0;
        }
    }
}

/* True with probability rate * dt. */
static int chance(struct run *r, double rate, uint64_t dt)
{
    if (rate <= 0)
        return 0;
    double p = rate * (double)dt / 1e9;
    return (double)(st_rand(&r->rng) >> 11) / 9007199254740992.0 < p;
}

/* Removes the table's name: by shl_unlink() or a plain unlink(2), at random,
 * or (`force`, half-way through) the kind not seen yet. Put off when a
 * process is appending to a ring (stress.h), or when nobody has created the
 * table again since the last removal. */
static void do_remove(struct run *r, int force)
{
    struct st_shared *sh = r->sh;
    int plain = (int)(st_rand(&r->rng) % 2);
    if (force)
        plain = atomic_load(&sh->removals_plain) == 0;
    int rc = st_remove(r->c, sh, plain);
    if (rc > 0)
        st_section_removed(r->sec);
    else if (rc < 0) {
        r->tot->worker_failures++;
        fprintf(stderr, "shmlease stress: removing the table (%s) failed: %s\n",
                plain ? "unlink" : "shl_unlink", shl_errname(rc));
    }
}

/* Revokes a random lease, or with `held` one that a worker holds; the epoch
 * is odd while the revoke may land. */
static void do_revoke(struct run *r, shl_table *t, int held)
{
    unsigned l = (unsigned)(st_rand(&r->rng) % r->sh->leases);
    for (unsigned w = 0; held && w < r->sh->workers; w++) {
        uint32_t h = atomic_load(&r->sh->w[w].holding);
        if (h) {
            l = h - 1;
            break;
        }
    }
    char name[ST_LEASE_NAME];
    st_lease_name(l, name);
    atomic_fetch_add(&r->sh->revoke_epoch[l], 1);
    int rc = shl_revoke(t, name);
    atomic_fetch_add(&r->sh->revoke_epoch[l], 1);
    if (rc == SHL_OK)
        atomic_fetch_add(&r->sh->revokes, 1);
    else if (rc == SHL_EREMOVED)
        ; /* the table was removed: the admin opens it again */
    else if (rc == SHL_EUNAVAIL && r->c->etcd)
        atomic_fetch_add(&r->sh->unavail, 1);
    else if (rc != SHL_ENOENT)
        atomic_fetch_add(&r->sh->admin_errors, 1);
}

#if SHL_HAVE_ETCD
/* --admin-chaos: an administrator deletes the holder record (or with d
 * the token record, put back TOKEN_GONE_NS later) of a lease, held when
 * one is (stress_admin_etcd.c). */
static void do_delete(struct run *r, etc_client *ec, const char *table, struct st_token_drop *d)
{
    unsigned l = (unsigned)(st_rand(&r->rng) % r->sh->leases);
    for (unsigned w = 0; w < r->sh->workers; w++) {
        uint32_t h = atomic_load(&r->sh->w[(w + l) % r->sh->workers].holding);
        if (h) {
            l = h - 1;
            break;
        }
    }
    int rc = d ? st_etcd_admin_drop_token(ec, table, r->sh, l, d)
               : st_etcd_admin_delete(ec, table, r->sh, l);
    if (d && d->on)
        d->until = st_now_ns() + TOKEN_GONE_NS;
    if (rc < 0)
        atomic_fetch_add(&r->sh->unavail, 1);
}
#endif

static void count_problem(void *arg, const char *msg)
{
    (void)msg;
    (*(uint64_t *)arg)++;
}

/* A repair's action that gives back pool groups a lease took and does not
 * name: decided under that lease's lock, which a death would have left to
 * be recovered (and recovery gives them back first), so never the trace of
 * a kill: a leak. */
static void count_leak(void *arg, const char *action)
{
    if (strstr(action, "(leaked)"))
        (*(uint64_t *)arg)++;
}

/* Repairs and checks the table while the workers use it. A worker killed
 * inside a lock leaves a recovery that check reports as pending until the
 * next locker comes: repair (run first) is that locker, so what check reports
 * after it is a problem, unless a worker died in the meantime (reaped by the
 * controller within half a second). */
static void do_repair(struct run *r, shl_table *t)
{
    struct st_shared *sh = r->sh;
    uint64_t deaths = atomic_load(&sh->deaths), n = 0;
    uint64_t leaks = 0;
    int rc = shl_repair(t, 0, count_leak, &leaks);
    if (leaks)
        atomic_fetch_add(&sh->check_problems, leaks);
    /* Removed before or under the repair: it says so. The admin opens the
     * next table. Any other failure is an error, removed table or not. */
    if (rc == SHL_EREMOVED)
        return;
    atomic_fetch_add(rc == SHL_OK ? &sh->repairs : &sh->admin_errors, 1);
    rc = shl_check(t, count_problem, &n);
    if ((rc != SHL_OK || n) && shl_table_check(t) == SHL_EREMOVED)
        return;
    atomic_fetch_add(&sh->checks, 1);
    if (!n && rc == SHL_OK)
        return;
    /* Gives the controller (maybe slow on a loaded machine) time to reap a
     * worker that just died. */
    for (int i = 0; i < 250 && atomic_load(&sh->deaths) == deaths; i++)
        st_sleep_ns(TICK_NS);
    if (atomic_load(&sh->deaths) == deaths)
        atomic_fetch_add(&sh->check_problems, n ? n : 1);
}

/* The admin process: revokes and repairs at their rates. From half-way on,
 * an enabled one that has not happened yet is tried at every tick: a short
 * campaign must not pass by luck. */
static void admin_main(struct run *r, uint64_t start, uint64_t end)
{
    const struct st_config *c = r->c;
    shl_table *t;
    uint32_t gen;
    if (st_table_open(c, r->sh, &t, &gen) != SHL_OK) {
        atomic_fetch_add(&r->sh->admin_errors, 1);
        _exit(3);
    }
    r->rng ^= UINT64_C(0x61646d696e);
#if SHL_HAVE_ETCD
    char table[SHL_TABLE_NAME_MAX + 1];
    const char *why;
    etc_client *ec =
        c->admin_chaos ? st_etcd_client(c->table, table, sizeof table, 3000, &why) : NULL;
    struct st_token_drop drop = {0};
    if (c->admin_chaos && !ec) {
        atomic_fetch_add(&r->sh->admin_errors, 1);
        _exit(3);
    }
#endif
    uint64_t last = st_now_ns(), look = last;
    while (!atomic_load(&r->sh->stop)) {
        uint64_t now = st_now_ns(), dt = now - last;
        last = now;
        /* Removals: a look at the name once per renew interval; a removed
         * table is left for the next one. */
        if (c->remove_rate > 0 && now - look >= r->sh->renew_ns) {
            look = now;
            if (shl_table_check(t) == SHL_EREMOVED) {
                shl_close(t);
                if (st_table_open(c, r->sh, &t, &gen) != SHL_OK)
                    _exit(atomic_load(&r->sh->stop) ? 0 : 3);
                atomic_fetch_add(&r->sh->reopens_other, 1);
            }
        }
        int late = now - start > (end - start) / 2;
        int force = late && c->revoke_rate > 0 && !atomic_load(&r->sh->revokes);
        if (chance(r, c->revoke_rate, dt) || force)
            do_revoke(r, t, force);
        if (chance(r, c->repair_rate, dt) ||
            (late && c->repair_rate > 0 && !atomic_load(&r->sh->repairs)))
            do_repair(r, t);
#if SHL_HAVE_ETCD
        if (ec &&
            (chance(r, ADMIN_DELETE_RATE, dt) || (late && !atomic_load(&r->sh->admin_deletes))))
            do_delete(r, ec, table, NULL);
        if (ec && !drop.on &&
            (chance(r, ADMIN_TOKEN_RATE, dt) || (late && !atomic_load(&r->sh->token_deletes))))
            do_delete(r, ec, table, &drop);
        if (drop.on && now >= drop.until)
            (void)st_etcd_admin_restore_token(ec, r->sh, &drop);
        /* Not with a token record away: the restore puts back what it read. */
        if (ec && !drop.on &&
            (chance(r, ST_WIPE_RATE, dt) || (late && !atomic_load(&r->sh->wipes)))) {
            int rc = st_etcd_admin_wipe(ec, table, r->sh);
            if (rc < 0)
                atomic_fetch_add(&r->sh->unavail, 1);
            if (rc != 0 && atomic_load(&r->sh->gen) != gen) { /* ours is gone too */
                shl_close(t);
                if (st_table_open(c, r->sh, &t, &gen) != SHL_OK)
                    _exit(atomic_load(&r->sh->stop) ? 0 : 3);
                atomic_fetch_add(&r->sh->reopens_other, 1);
            }
        }
#endif
        st_sleep_ns(TICK_NS);
    }
#if SHL_HAVE_ETCD
    for (int i = 0; drop.on && i < 100 && st_etcd_admin_restore_token(ec, r->sh, &drop) != 0; i++)
        st_sleep_ns(100000000); /* the final check needs it back */
    etc_close(ec);
#endif
    shl_close(t);
    _exit(0);
}

static void spawn_admin(struct run *r, uint64_t start, uint64_t end)
{
    if (r->c->revoke_rate <= 0 && r->c->repair_rate <= 0 && !r->c->admin_chaos)
        return;
    pid_t p = fork_tied();
    if (p == 0) {
        spare_from_crash_points();
        admin_main(r, start, end);
    }
    if (p < 0)
        r->tot->worker_failures++;
    else
        r->others++;
}

/* The admin's counters, for the progress line and the verdict. */
static void admin_totals(const struct st_shared *sh, struct st_chaos_totals *tot)
{
    tot->revokes = atomic_load(&sh->revokes);
    tot->repairs = atomic_load(&sh->repairs);
    tot->checks = atomic_load(&sh->checks);
    tot->check_problems = atomic_load(&sh->check_problems);
    tot->admin_errors = atomic_load(&sh->admin_errors);
}

#if SHL_HAVE_ETCD
/* Ends the disturbance of the member: SIGCONT, or started again on its data. */
static void member_back(struct run *r)
{
    struct etcd_cluster *cl = r->c->cluster;
    int v = r->victim;
    r->victim = -1;
    if (r->victim_killed) {
        if (etcd_cluster_respawn(cl, v) == 0)
            r->tot->member_restarts++;
        else
            r->tot->member_errors++;
    } else if (etcd_cluster_resume(cl, v) != 0) {
        r->tot->member_errors++;
    } else {
        atomic_store_explicit(&r->sh->member_resumed_ns, st_now_ns(), memory_order_release);
    }
}

/* Workers queued in shl_acquire_wait() now. */
static unsigned waiters(const struct run *r)
{
    unsigned n = 0;
    for (unsigned w = 0; w < r->sh->workers; w++)
        n += atomic_load(&r->sh->w[w].pid) > 0 && atomic_load(&r->sh->w[w].waiting);
    return n;
}

/*
 * --member-chaos: one member at a time (so that a quorum is left) is
 * SIGKILLed or SIGSTOPped for one to three seconds, then started again on
 * its data directory or SIGCONTed; two times out of three the one that
 * leads. Then two to five seconds of peace, for a restarted member to catch
 * up.
 *
 * The first stop, and one in four after it, is a long one: made while
 * workers wait in shl_acquire_wait() (put off until some do: on a busy
 * lease they are queued), it lasts longer than every
 * ttl in play, the leases' and the waiters' places' (ST_WAITER_TTL_NS), and
 * hits a follower (a stopped leader is an election, after which etcd
 * extends every lease): the timing budget of shmlease(3) says that it costs
 * no holder and no waiter anything, and the campaign's checks must hold.
 */
static void member_chaos(struct run *r, uint64_t now)
{
    struct etcd_cluster *cl = r->c->cluster;
    if (r->victim >= 0) {
        if (now >= r->victim_until)
            member_back(r);
        if (r->victim < 0)
            r->next_member = now + 2 * SEC_NS + st_rand(&r->rng) % (3 * SEC_NS);
        return;
    }
    if (now < r->next_member)
        return;
    int v = -1;
    int kill = r->tot->member_kills == 0    ? 1
               : r->tot->member_pauses == 0 ? 0
                                            : (int)(st_rand(&r->rng) % 2);
    int longer = !kill && (r->tot->member_long == 0 || st_rand(&r->rng) % 4 == 0);
    if (longer && !waiters(r)) {
        r->next_member = now + SEC_NS / 10; /* when some are queued */
        return;
    }
    /* The first disturbance hits the leader, the first two are a kill and a
     * stop: a short campaign has each for sure. A long stop hits a
     * follower. */
    if (longer) {
        int l = etcd_cluster_leader(cl, 200);
        v = (int)(st_rand(&r->rng) % (uint64_t)cl->n);
        if (v == l)
            v = (v + 1) % cl->n;
    } else if (r->tot->leader_hits == 0 || st_rand(&r->rng) % 3 != 0) {
        v = etcd_cluster_leader(cl, 200);
        if (v >= 0)
            r->tot->leader_hits++;
    }
    if (v < 0)
        v = (int)(st_rand(&r->rng) % (uint64_t)cl->n);
    if (cl->m[v].pid <= 0) { /* died by itself: back first */
        r->victim = v;
        r->victim_killed = 1;
        member_back(r);
        r->next_member = now + 2 * SEC_NS;
        return;
    }
    r->victim_killed = kill;
    int rc = r->victim_killed ? etcd_cluster_kill(cl, v) : etcd_cluster_pause(cl, v);
    if (rc != 0) {
        r->tot->member_errors++;
        r->next_member = now + SEC_NS;
        return;
    }
    r->victim = v;
    uint64_t ttl = r->sh->ttl_ns > ST_WAITER_TTL_NS ? r->sh->ttl_ns : ST_WAITER_TTL_NS;
    r->victim_until = st_now_ns() + (longer ? ttl + SEC_NS / 2 : SEC_NS) +
                      st_rand(&r->rng) % (longer ? SEC_NS : 2 * SEC_NS);
    if (r->victim_killed)
        r->tot->member_kills++;
    else
        r->tot->member_pauses++;
    r->tot->member_long += (uint64_t)longer;
}

/* At the end: every member back, and the cluster healthy for the checker. */
static void members_settle(struct run *r)
{
    struct etcd_cluster *cl = r->c->cluster;
    if (r->victim >= 0)
        member_back(r);
    for (int i = 0; i < cl->n; i++)
        if (cl->m[i].pid <= 0 && etcd_cluster_respawn(cl, i) == 0)
            r->tot->member_restarts++;
    if (etcd_cluster_wait_healthy(cl, 30000) != 0)
        r->tot->member_errors++;
}
#endif

static unsigned running(const struct run *r)
{
    unsigned n = 0;
    for (unsigned w = 0; w < r->sh->workers; w++)
        n += r->ctl[w].pid > 0;
    return n;
}

static void finish(struct run *r)
{
    r->stopping = 1;
    atomic_store(&r->sh->stop, 1);
    for (unsigned w = 0; w < r->sh->workers; w++)
        atomic_store(&r->sh->w[w].stop_in_guard, 0);
    uint64_t until = st_now_ns() + STOP_GRACE_NS;
    while (running(r) && st_now_ns() < until) {
        /* A stop of a worker's own may still come (an order taken just
         * before it was withdrawn, a crash point): let it go at once. */
        self_stops(r, st_now_ns());
        resume_due(r, 0, 1);
        reap(r, WNOHANG);
        st_checker_step(r->ck);
        st_sleep_ns(TICK_NS);
    }
    for (unsigned w = 0; w < r->sh->workers; w++)
        if (r->ctl[w].pid > 0) {
            r->ctl[w].killed_at = st_now_ns();
            kill(r->ctl[w].pid, SIGKILL);
        }
    reap(r, 0); /* blocks until every worker is collected */
}

void st_chaos_run(const struct st_config *c, struct st_shared *sh, struct st_checker *ck,
                  struct st_chaos_totals *tot, st_progress_fn progress, void *parg)
{
    static struct run r; /* large; one campaign per process */
    r = (struct run){.c = c, .sh = sh, .ck = ck, .tot = tot, .victim = -1};
    r.rng = c->seed ^ UINT64_C(0x6368616f73);
    *tot = (struct st_chaos_totals){0};
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    uint64_t start = st_now_ns();
    uint64_t end = start + (uint64_t)(c->seconds * 1e9);
    r.start = start;
    r.end = end;
    r.sec = st_section_new(c, sh);
    if (!c->etcd && !r.sec)
        tot->worker_failures++; /* no pauses inside a lock: said, not skipped */
    uint64_t next_progress = start + SEC_NS;
    for (unsigned i = 0; i < c->readers; i++)
        spawn_reader(&r, i);
    spawn_admin(&r, start, end);
    for (unsigned w = 0; w < sh->workers; w++)
        spawn(&r, w, 0);
    uint64_t last = start;
    for (;;) {
        uint64_t now = st_now_ns();
        if (now >= end || interrupted)
            break;
        uint64_t dt = now - last;
        if (dt >= TICK_NS + ST_LAG_NS) {
            atomic_store(&sh->lag_from, last);
            atomic_store(&sh->lag_to, now);
        }
        last = now;
        reap(&r, WNOHANG);
        for (unsigned w = 0; w < sh->workers; w++)
            if (r.ctl[w].pid == 0)
                spawn(&r, w, 1);
        self_stops(&r, now);
        resume_due(&r, now, 0);
        if (chance(&r, c->kill_rate, dt))
            do_kill(&r);
        if (chance(&r, c->pause_rate, dt) || holder_pause_missing(&r, now))
            do_pause(&r, now);
        /* From half-way on, each kind of removal until one has happened. */
        int missing = now - start > (end - start) / 2 &&
                      (!atomic_load(&sh->removals) || !atomic_load(&sh->removals_plain));
        if (c->remove_rate > 0 && (chance(&r, c->remove_rate, dt) || missing))
            do_remove(&r, missing);
#if SHL_HAVE_ETCD
        if (c->member_chaos && c->cluster) {
            if (!r.next_member)
                r.next_member = now + SEC_NS;
            member_chaos(&r, now);
        }
#endif
        admin_totals(sh, tot);
        st_checker_step(ck);
        if (c->fail_fast && st_violations_now(sh, ck, tot))
            break;
        if (now >= next_progress) {
            tot->elapsed_s = (double)(now - start) / 1e9;
            if (progress)
                progress(parg, tot);
            next_progress += SEC_NS;
        }
        st_sleep_ns(TICK_NS);
    }
#if SHL_HAVE_ETCD
    if (c->member_chaos && c->cluster)
        members_settle(&r); /* first: the workers' last calls need a quorum */
#endif
    finish(&r);
    st_section_free(r.sec);
    r.sec = NULL;
    admin_totals(sh, tot);
    tot->elapsed_s = (double)(st_now_ns() - start) / 1e9;
    tot->interrupted = interrupted != 0;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}
