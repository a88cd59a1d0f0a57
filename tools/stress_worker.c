/*
 * tools/stress_worker.c - one forked worker of `shmlease stress`.
 *
 * The loop: acquire a random lease (retrying while busy), check the value it
 * finds, make several guarded writes (each: an evidence record appended inside
 * shl_guard(), then the same record as the lease's value through shl_write()),
 * renew now and then, and end the hold by releasing it, by letting it expire
 * and then trying one more write (which must be refused), or by walking away.
 *
 * Everything the checker needs lives in the shared region, never only in this
 * process: the controller may SIGKILL it at any instruction.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "stress.h"

struct wk {
    const struct st_config *c;
    struct st_shared *sh;
    struct st_worker *me;
    shl_table *t;
    unsigned w;
    uint32_t inc;
    uint64_t rng;
    char owner[32];
    char (*names)[ST_LEASE_NAME];
    /* the current hold */
    unsigned lease;
    uint64_t token;
    uint64_t deadline; /* our clock: the lease has surely expired from here on */
    uint32_t pause_mark;
};

struct gctx {
    struct st_worker *me;
    struct st_log *log;
    struct st_rec rec;
    int die;
    int logged;
};

static void bump(struct wk *k, enum st_wc c)
{
    atomic_fetch_add_explicit(&k->me->count[c], 1, memory_order_relaxed);
}

static void phase(struct wk *k, enum st_phase p)
{
    atomic_store_explicit(&k->me->phase, p, memory_order_relaxed);
}

static void error(struct wk *k, int rc)
{
    bump(k, ST_C_ERRORS);
    atomic_store_explicit(&k->me->last_error, rc, memory_order_relaxed);
}

/*
 * Runs under the lease's lock, after the library's check passed. Kept tiny:
 * fill the record, seal it, publish it with one store. Ordered to die, it
 * stops half-way through the record, exactly where a SIGKILL could land.
 */
static void guard_cb(void *arg)
{
    struct gctx *g = arg;
    atomic_store_explicit(&g->me->phase, ST_PH_GUARD, memory_order_relaxed);
    uint64_t n = atomic_load_explicit(&g->log->n, memory_order_relaxed);
    uint64_t done = atomic_load_explicit(&g->log->consumed, memory_order_acquire);
    if (n - done >= ST_LOG_CAP) {
        atomic_fetch_add_explicit(&g->log->overflow, 1, memory_order_relaxed);
        return;
    }
    struct st_rec *r = &g->log->rec[n % ST_LOG_CAP];
    r->token = g->rec.token;
    r->seq = g->rec.seq;
    if (g->die)
        raise(SIGKILL);
    r->lease = g->rec.lease;
    r->worker = g->rec.worker;
    r->incarnation = g->rec.incarnation;
    r->seal = st_rec_seal(&g->rec);
    atomic_store_explicit(&g->log->n, n + 1, memory_order_release);
    g->logged = 1;
}

static void refused(struct wk *k)
{
    bump(k, ST_C_STALE);
    if (atomic_load_explicit(&k->me->pauses, memory_order_relaxed) != k->pause_mark)
        bump(k, ST_C_STALE_PAUSED);
}

/* Books the result of a fenced call that started at our time t0: 0 when it
 * was accepted, 1 when refused. Accepted although t0 was past the deadline
 * (the lease had surely expired by the time the library checked) is a
 * violation. */
static int outcome(struct wk *k, int rc, uint64_t t0)
{
    phase(k, ST_PH_HOLDING);
    if (rc == SHL_ELOST) {
        refused(k);
        return 1;
    }
    if (rc != SHL_OK) {
        error(k, rc);
        return 1;
    }
    if (t0 >= k->deadline)
        bump(k, ST_C_LATE_ACCEPT);
    return 0;
}

/* Marks write `seq` acknowledged: the bit first, then the frontier. */
static void ack(struct wk *k, uint64_t seq)
{
    _Atomic uint64_t *bits = st_acked_bits(k->sh, k->w);
    atomic_fetch_or_explicit(&bits[seq / 64], UINT64_C(1) << (seq % 64), memory_order_release);
    atomic_store_explicit(&k->me->acked_hi, seq + 1, memory_order_release);
    bump(k, ST_C_ACKED);
}

/* One guarded write and its value. 0: accepted; 1: refused (we lost the
 * lease); -1: the campaign is over for this worker. */
static int guarded_write(struct wk *k)
{
    struct st_log *log = st_log_at(k->sh, k->lease);
    uint64_t seq = atomic_fetch_add_explicit(&k->me->next_seq, 1, memory_order_relaxed);
    if (seq >= ST_SEQ_BITS)
        return -1;
    /* Let the checker keep up rather than overflow the ring. */
    while (atomic_load_explicit(&log->n, memory_order_relaxed) -
               atomic_load_explicit(&log->consumed, memory_order_relaxed) >
           ST_LOG_CAP / 2) {
        if (atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
            return -1;
        st_sleep_ns(200000);
    }
    struct gctx g = {k->me, log, {k->token, seq, k->lease, k->w, k->inc, 0, 0}, 0, 0};
    g.die = (int)atomic_exchange_explicit(&k->me->die_in_guard, 0, memory_order_relaxed);
    bump(k, ST_C_OPS);
    uint64_t t0 = st_now_ns();
    int rc = shl_guard(k->t, k->names[k->lease], k->owner, k->token, guard_cb, &g);
    if (outcome(k, rc, t0) != 0) {
        if (g.die) /* the order stands for the next guarded section */
            atomic_store_explicit(&k->me->die_in_guard, 1, memory_order_relaxed);
        return 1;
    }
    if (g.logged)
        ack(k, seq);
    uint64_t v[ST_VALUE_WORDS];
    st_value_make(v, &g.rec);
    phase(k, ST_PH_WRITE);
    bump(k, ST_C_OPS);
    t0 = st_now_ns();
    rc = shl_write(k->t, k->names[k->lease], k->owner, k->token, v, sizeof v);
    if (outcome(k, rc, t0) != 0)
        return 1;
    bump(k, ST_C_VALUES);
    return 0;
}

/* The value found right after acquiring must be whole, written by the token
 * shl_read() names, and older than ours. */
static void check_value(struct wk *k)
{
    uint64_t v[ST_VALUE_WORDS];
    size_t len = 0;
    uint64_t vtok = 0;
    phase(k, ST_PH_OTHER);
    bump(k, ST_C_OPS);
    int rc = shl_read(k->t, k->names[k->lease], v, sizeof v, &len, &vtok);
    phase(k, ST_PH_HOLDING);
    if (rc != SHL_OK) {
        if (rc != SHL_ENOENT)
            error(k, rc);
        return;
    }
    if (len == 0 && vtok == 0)
        return;
    struct st_rec r;
    if (len != sizeof v || st_value_parse(v, &r) != 0 || r.token != vtok || vtok >= k->token ||
        r.lease != k->lease)
        bump(k, ST_C_BAD_VALUE);
}

/* Acquires a random lease; 0 once held, -1 when the campaign stops. */
static int acquire(struct wk *k)
{
    k->lease = (unsigned)(st_rand(&k->rng) % k->sh->leases);
    phase(k, ST_PH_ACQUIRING);
    for (;;) {
        if (atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
            return -1;
        shl_lease_info info;
        bump(k, ST_C_OPS);
        int rc =
            shl_acquire_ex(k->t, k->names[k->lease], k->owner, k->sh->ttl_ns, &k->token, &info);
        if (rc == SHL_OK)
            break;
        if (rc == SHL_EBUSY) {
            bump(k, ST_C_BUSY);
            uint64_t wait = info.remaining_ns < 2000000 ? info.remaining_ns : 2000000;
            st_sleep_ns(wait / 2 + st_rand(&k->rng) % (wait / 2 + 1000));
            continue;
        }
        error(k, rc);
        st_sleep_ns(1000000);
    }
    k->deadline = st_now_ns() + k->sh->ttl_ns;
    k->pause_mark = atomic_load_explicit(&k->me->pauses, memory_order_relaxed);
    atomic_store_explicit(&k->me->holding, k->lease + 1, memory_order_release);
    phase(k, ST_PH_HOLDING);
    bump(k, ST_C_ACQUIRED);
    return 0;
}

/* 0: renewed; 1: refused. */
static int renew(struct wk *k)
{
    phase(k, ST_PH_OTHER);
    bump(k, ST_C_OPS);
    int rc = shl_renew(k->t, k->names[k->lease], k->owner, k->token, k->sh->ttl_ns);
    uint64_t now = st_now_ns();
    phase(k, ST_PH_HOLDING);
    if (rc == SHL_OK) {
        k->deadline = now + k->sh->ttl_ns;
        bump(k, ST_C_RENEWED);
        return 0;
    }
    if (rc != SHL_ELOST)
        error(k, rc);
    return 1;
}

static void end_hold(struct wk *k, int lost)
{
    if (lost) {
        bump(k, ST_C_EXPIRED);
    } else {
        unsigned r = (unsigned)(st_rand(&k->rng) % 100);
        if (atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
            r = 0; /* the campaign is ending: just release */
        if (r < 90) {
            phase(k, ST_PH_OTHER);
            bump(k, ST_C_OPS);
            int rc = shl_release(k->t, k->names[k->lease], k->owner, k->token);
            phase(k, ST_PH_HOLDING);
            if (rc == SHL_OK)
                bump(k, ST_C_RELEASED);
            else if (rc == SHL_ELOST)
                bump(k, ST_C_EXPIRED);
            else
                error(k, rc);
        } else if (r < 95) {
            /* Let it expire, then try once more: this write must be refused. */
            uint64_t now = st_now_ns();
            if (now < k->deadline + 1000000)
                st_sleep_ns(k->deadline + 1000000 - now);
            bump(k, ST_C_EXPIRED);
            if (!atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
                (void)guarded_write(k);
        } else {
            bump(k, ST_C_EXPIRED); /* walk away; it expires on its own */
        }
    }
    atomic_store_explicit(&k->me->holding, 0, memory_order_release);
    phase(k, ST_PH_IDLE);
}

static void run(struct wk *k)
{
    while (!atomic_load_explicit(&k->sh->stop, memory_order_relaxed)) {
        if (acquire(k) != 0)
            return;
        check_value(k);
        unsigned nw = 1 + (unsigned)(st_rand(&k->rng) % 6);
        int lost = 0;
        for (unsigned i = 0; i < nw && !lost; i++) {
            if (i == nw / 2 && st_rand(&k->rng) % 2 && renew(k) != 0) {
                lost = 1;
                break;
            }
            int rc = guarded_write(k);
            if (rc < 0) {
                end_hold(k, 0);
                return;
            }
            lost = rc;
            /* a little work between writes: yield, or sleep up to 1 ms */
            uint64_t r = st_rand(&k->rng);
            if (r % 4 == 0)
                st_sleep_ns(r % 1000000);
            else
                sched_yield();
        }
        end_hold(k, lost);
    }
}

void st_worker_main(const struct st_config *c, struct st_shared *sh, unsigned w)
{
    struct wk k = {0};
    k.c = c;
    k.sh = sh;
    k.me = &sh->w[w];
    k.w = w;
    k.inc = atomic_load(&k.me->incarnation);
    k.rng = c->seed ^ ((uint64_t)(w + 1) * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)k.inc << 40);
    snprintf(k.owner, sizeof k.owner, "w%u.%u", w, k.inc);
    k.names = calloc(sh->leases, sizeof *k.names);
    int rc = k.names ? shl_open(c->table, NULL, &k.t) : SHL_ENOMEM;
    if (rc != SHL_OK) {
        error(&k, rc);
        _exit(3);
    }
    for (unsigned i = 0; i < sh->leases; i++)
        st_lease_name(i, k.names[i]);
    run(&k);
    shl_close(k.t);
    free(k.names);
    phase(&k, ST_PH_DONE);
    _exit(0);
}
