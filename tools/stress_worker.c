/*
 * tools/stress_worker.c - one forked worker of `shmlease stress`.
 *
 * The loop: acquire a random lease (retrying while busy, or sleeping in
 * shl_acquire_wait(), or through a bound lease), check the value it finds,
 * present the previous hold's token again when it is the same lease (it must
 * be refused), make several guarded writes (each: an evidence record appended
 * inside shl_guard(), then the same record as the lease's value through
 * shl_write() or shl_update()), renew now and then or let a renewer thread
 * keep the lease, and end the hold by releasing it, by letting it expire and
 * then trying one more write (which must be refused), or by walking away.
 *
 * The worker keeps one owner name for all its holds and knows two bounds of
 * the library's expiry for its hold: `lo`, its clock before the call that
 * granted or renewed it plus the TTL (the library read its clock later), and
 * `deadline`, its clock after that call plus the TTL. Accepted at or after
 * `deadline`: a late accept. Refused before `lo` minus a margin, when it was
 * neither paused nor revoked since: the lease was taken from a live holder.
 *
 * Everything the checker needs lives in the shared region, never only in this
 * process: the controller may SIGKILL it at any instruction.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    uint64_t lo;       /* our clock: the lease is surely still ours before this */
    uint64_t ttl;      /* the ttl of the last acquire or renew of this hold */
    uint32_t pause_mark;
    uint64_t revoke_mark; /* the lease's revoke epoch before the hold began */
    uint64_t mark_at;     /* our clock just after reading it (before the call) */
    int refused;          /* the table refused this hold's (owner, token) */
    shl_lease **bound;    /* per lease, bound to our owner */
    shl_lease *b;         /* this hold's bound lease, NULL: plain calls */
    shl_renewer *rn;      /* this hold's renewer, if any */
    unsigned prev_lease;
    uint64_t prev_token; /* the previous hold's token (0: none) */
    int etcd;            /* an etcd table: no shl_guard(), etcd's history is the log */
    uint64_t cb_sec;     /* the lease's section end, read by the last call's callback */
    pid_t self;          /* getpid() */
    struct st_ivlog *iv; /* our sure intervals (stress_interval.c), NULL on etcd */
    uint32_t gen;        /* our handle's table generation (removals, stress.h) */
    int removed;         /* we saw our table removed: the next step opens it again */
    uint64_t look_at;    /* our last look at the table's name (gate()) */
};

#define LO_MARGIN_NS UINT64_C(1000000)

struct gctx {
    struct st_worker *me;
    struct st_log *log;
    struct st_rec rec;
    int die;
    int logged;
    const struct st_secmark *section; /* the lease's, read under its lock into `sec` */
    uint64_t sec;
    pid_t self; /* our pid: a pause of our own tells nothing (section_end()) */
    struct st_ivlog *iv;
    struct st_shared *sh;
    unsigned w;
    int skipped; /* our generation was removed: nothing logged */
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

/* An unexpected code, or on etcd SHL_EUNAVAIL: the cluster did not answer
 * in time (a member killed or stopped, the worker itself stopped in the
 * middle of a call); the call may have happened. Counted, not an error. */
static void noticed(struct wk *k);

static void failed(struct wk *k, int rc)
{
    if (rc == SHL_EREMOVED)
        noticed(k);
    else if (k->etcd && rc == SHL_EUNAVAIL)
        bump(k, ST_C_UNAVAIL);
    else
        error(k, rc);
}

/* The table was removed under us (a call's SHL_EREMOVED, our renewer's
 * loss or our own look): the hold ends, and the next step opens the name
 * again. */
static void noticed(struct wk *k)
{
    if (!k->removed)
        bump(k, ST_C_REMOVED_SEEN);
    k->removed = 1;
}

/*
 * With removals, before each fenced call that begins at t0: a look at the
 * table's name (shl_table_check()) when the last one is a renew interval
 * old, as a renewer looks before each renewal; 1 when the table was removed
 * (the call is not made). A look that passed at look_at saw the name after
 * look_at: every call made before look_at + renew interval began within one
 * renew interval of a removal, if there was one.
 */
static int gate(struct wk *k, uint64_t t0)
{
    if (k->removed)
        return 1;
    if (k->c->remove_rate <= 0 || t0 - k->look_at < k->sh->renew_ns)
        return 0;
    k->look_at = t0;
    if (shl_table_check(k->t) == SHL_EREMOVED)
        noticed(k);
    return k->removed;
}

/* A call on our handle that began at t0 was accepted: a violation when our
 * table had been removed by then (stress_removed.c), or our holder record
 * deleted (--admin-chaos, stress_admin_etcd.c). */
static void removed_late(struct wk *k, uint64_t t0)
{
    if (st_removed_late(k->sh, k->gen, t0))
        bump(k, ST_C_REMOVED_ACCEPT);
    if (k->c->admin_chaos && st_gone_late(k->sh, k->lease, k->token, t0))
        bump(k, ST_C_GONE_ACCEPT);
}

/*
 * The end of the last pause inside lease's lock that is over, read whole from
 * its mark `m` (stress.h), when it was a pause in the lock of table
 * generation `gen`; else 0. Read by a callback under the lease's lock: a
 * pause in that very lock ended before the callback's section began; one in
 * the same lease's lock of another table (removals) did not hold it up, and
 * its end says nothing of when the call was judged. Nor does a pause of the
 * caller itself (`self`), caught in this very section after the library's
 * check.
 */
static uint64_t section_end(const struct st_secmark *m, uint32_t gen, pid_t self)
{
    uint64_t g1 = atomic_load_explicit(&m->gen, memory_order_acquire);
    uint32_t tg = atomic_load_explicit(&m->table, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&m->end, memory_order_acquire);
    int32_t pid = atomic_load_explicit(&m->pid, memory_order_acquire);
    uint64_t g2 = atomic_load_explicit(&m->gen, memory_order_acquire);
    return g1 == g2 && !(g1 & 1) && tg == gen && pid != self ? e : 0;
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
    /* A pause inside the critical section, on order: before or after the
     * reading of the last pause's end, as a worker caught in here may be
     * stopped either side of it; a pause of our own is not taken for
     * another's (section_end()). */
    uint32_t stop = atomic_exchange_explicit(&g->me->stop_in_guard, 0, memory_order_relaxed);
    if (stop == ST_STOP_BEFORE_READ)
        raise(SIGSTOP);
    g->sec = section_end(g->section, g->rec.gen, g->self);
    if (stop == ST_STOP_AFTER_READ)
        raise(SIGSTOP);
    if (!st_log_begin(g->sh, g->w, g->rec.gen)) {
        g->skipped = 1; /* a removed generation: the ring is the next one's */
        return;
    }
    uint64_t n = atomic_load_explicit(&g->log->n, memory_order_relaxed);
    uint64_t done = atomic_load_explicit(&g->log->consumed, memory_order_acquire);
    if (n - done >= ST_LOG_CAP) {
        atomic_fetch_add_explicit(&g->log->overflow, 1, memory_order_relaxed);
        st_log_done(g->sh, g->w);
        return;
    }
    struct st_rec *r = &g->log->rec[n % ST_LOG_CAP];
    r->token = g->rec.token;
    r->seq = g->rec.seq;
    if (g->die) {
        if (g->iv) /* our hold ends here: said before, for the interval check */
            atomic_store_explicit(&g->iv->cut, st_now_ns(), memory_order_release);
        raise(SIGKILL);
    }
    r->lease = g->rec.lease;
    r->worker = g->rec.worker;
    r->incarnation = g->rec.incarnation;
    r->gen = g->rec.gen;
    r->seal = st_rec_seal(&g->rec);
    atomic_store_explicit(&g->log->n, n + 1, memory_order_release);
    st_log_done(g->sh, g->w);
    g->logged = 1;
}

static int paused(const struct wk *k)
{
    return atomic_load_explicit(&k->me->pauses, memory_order_relaxed) != k->pause_mark;
}

static int revoked(const struct wk *k)
{
    uint64_t ep = atomic_load_explicit(&k->sh->revoke_epoch[k->lease], memory_order_acquire);
    return ep != k->revoke_mark || (ep & 1) || (k->revoke_mark & 1);
}

/* On etcd: a stopped member resumed during this hold (or just before it
 * began, its revokes still on their way), so a stale leader's revokes may
 * have ended it early (see st_shared.member_resumed_ns). */
static int leader_resumed(const struct wk *k, uint64_t now)
{
    uint64_t at = atomic_load_explicit(&k->sh->member_resumed_ns, memory_order_acquire);
    uint64_t began = k->lo - k->sh->ttl_ns;
    return k->etcd && at && at + UINT64_C(2000000000) >= began && at <= now;
}

/* Up to `now`, the lease was surely ours: before our lower bound of its
 * expiry, and neither paused nor revoked since we got it. */
static int surely_ours(const struct wk *k, uint64_t now)
{
    return !paused(k) && !revoked(k) && now + LO_MARGIN_NS < k->lo;
}

/* The table refused our (owner, token) at or before `now`. */
static void refused(struct wk *k, uint64_t now)
{
    k->refused = 1;
    bump(k, ST_C_STALE);
    if (paused(k))
        bump(k, ST_C_STALE_PAUSED);
    else if (revoked(k))
        bump(k, ST_C_REVOKED);
    else if (surely_ours(k, now) && leader_resumed(k, now))
        bump(k, ST_C_EARLY_REVOKE);
    else if (surely_ours(k, now))
        bump(k, ST_C_LOST_EXCL);
}

/* Books the result of a fenced call that started at our time t0: 0 when it
 * was accepted, 1 when refused. Accepted although t0 was past the deadline
 * (the lease had surely expired by the time the library checked) is a
 * violation. */
static void late_locked(struct wk *k, uint64_t t0, uint64_t ret, uint64_t sec);

static int outcome(struct wk *k, int rc, uint64_t t0)
{
    uint64_t now = st_now_ns();
    uint64_t sec = k->cb_sec;
    k->cb_sec = 0;
    phase(k, ST_PH_HOLDING);
    if (rc == SHL_ELOST) {
        refused(k, now);
        return 1;
    }
    if (rc != SHL_OK) {
        failed(k, rc);
        return 1;
    }
    if (t0 >= k->deadline && !k->etcd)
        bump(k, ST_C_LATE_ACCEPT);
    late_locked(k, t0, now, sec);
    removed_late(k, t0);
    return 0;
}

/*
 * A fenced call that began at t0 was accepted. If its section in the lease's
 * lock came after another worker, stopped in there (stress_section.c), let go
 * of it, the library judged it after that pause's end: known when the call's
 * callback read that end under the lock (`sec`), or when the call began after
 * the pause began and returned, at `ret`, after it ended. If the lease had
 * surely expired by that end (our upper bound of its expiry, deadline, is not
 * later), the library judged it with a clock read before taking the lock.
 * A pause of our own is never taken as another's: a worker caught in its own
 * section after the library's check reads its own pause's end afterwards.
 * Each case is said on stderr with its times, for the campaign's reader.
 */
static void late_locked(struct wk *k, uint64_t t0, uint64_t ret, uint64_t sec)
{
    if (k->etcd || k->deadline == UINT64_MAX)
        return;
    const struct st_secmark *m = &k->sh->section[k->lease];
    uint64_t g1 = atomic_load_explicit(&m->gen, memory_order_acquire);
    uint64_t b = atomic_load_explicit(&m->begin, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&m->end, memory_order_acquire);
    uint32_t tg = atomic_load_explicit(&m->table, memory_order_acquire);
    int32_t pid = atomic_load_explicit(&m->pid, memory_order_acquire);
    uint64_t g2 = atomic_load_explicit(&m->gen, memory_order_acquire);
    uint64_t after = sec;
    const char *how = "its callback read the pause's end";
    /* A lock of another table (removals) never held us up; a pause of our
     * own began after our call did. */
    if (g1 == g2 && !(g1 & 1) && b && t0 >= b && ret >= e && e > after && tg == k->gen &&
        pid != k->self) {
        after = e;
        how = "it began in the pause and returned after it";
    }
    if (!after || after < k->deadline)
        return;
    bump(k, ST_C_LATE_LOCKED);
    fprintf(stderr,
            "shmlease stress: late_locked: worker pid %d, lease %u, token %llu: accepted after "
            "the pause of pid %d in the lease's lock (%s), which ended %.3f ms after the "
            "lease's expiry at the latest (campaign clock, ms: call %.3f to %.3f, pause %.3f to "
            "%.3f, expiry by %.3f)\n",
            (int)k->self, k->lease, (unsigned long long)k->token, (int)pid, how,
            (double)(after - k->deadline) / 1e6, (double)t0 / 1e6, (double)ret / 1e6,
            (double)b / 1e6, (double)e / 1e6, (double)k->deadline / 1e6);
}

/* Marks write `seq` acknowledged: the bit first, then the frontier. */
static void ack(struct wk *k, uint64_t seq)
{
    _Atomic uint64_t *bits = st_acked_bits(k->sh, k->w);
    atomic_fetch_or_explicit(&bits[seq / 64], UINT64_C(1) << (seq % 64), memory_order_release);
    atomic_store_explicit(&k->me->acked_hi, seq + 1, memory_order_release);
    bump(k, ST_C_ACKED);
}

/* The fenced calls, through the bound lease when this hold uses one. */
static int op_guard(struct wk *k, uint64_t token, shl_guard_fn fn, void *arg)
{
    return k->b ? shl_lease_guard(k->b, token, fn, arg)
                : shl_guard(k->t, k->names[k->lease], k->owner, token, fn, arg);
}

static int op_renew(struct wk *k, uint64_t ttl)
{
    return k->b ? shl_lease_renew(k->b, k->token, ttl)
                : shl_renew(k->t, k->names[k->lease], k->owner, k->token, ttl);
}

static int op_release(struct wk *k)
{
    return k->b ? shl_lease_release(k->b, k->token)
                : shl_release(k->t, k->names[k->lease], k->owner, k->token);
}

struct upd {
    const uint64_t *v;
    size_t size;
    uint64_t token;
    unsigned lease;
    int bad;
    const struct st_secmark *section; /* as in struct gctx */
    uint32_t gen;
    uint64_t sec;
    pid_t self;
};

/* shl_update()'s callback, under the lock: the value it replaces must be
 * whole and older than ours. */
static int update_cb(void *value, size_t *len, size_t cap, void *arg)
{
    struct upd *u = arg;
    u->bad = 0; /* on etcd it may run again (conflict): the last run counts */
    u->sec = section_end(u->section, u->gen, u->self);
    if (*len) {
        uint64_t old[ST_VALUE_WORDS];
        struct st_rec r;
        memcpy(old, value, *len < sizeof old ? *len : sizeof old);
        if (*len != u->size || st_value_parse(old, (unsigned)(u->size / 8), &r) != 0 ||
            r.token > u->token || r.lease != u->lease)
            u->bad = 1;
    }
    if (cap < u->size)
        return -1;
    memcpy(value, u->v, u->size);
    *len = u->size;
    return 0;
}

/* Writes the value of record `r`: by shl_write(), shl_update() or the
 * renewer. 0: accepted, or refused by a value pool too small (counted);
 * 1: refused. */
static int write_value(struct wk *k, const struct st_rec *r)
{
    uint64_t v[ST_VALUE_WORDS];
    size_t size = k->sh->value_words * 8;
    st_value_make(v, k->sh->value_words, r);
    uint64_t t0 = st_now_ns();
    if (gate(k, t0))
        return 1;
    phase(k, ST_PH_WRITE);
    bump(k, ST_C_OPS);
    int rc;
    unsigned how = (unsigned)(st_rand(&k->rng) % 4);
    if (k->rn && how == 0) {
        rc = shl_renewer_write(k->rn, v, size);
        if (rc == SHL_ELOST && shl_renewer_lost(k->rn) == SHL_LOSS_REMOVED) {
            phase(k, ST_PH_HOLDING);
            noticed(k); /* the thread saw the removal */
            return 1;
        }
        if (rc == SHL_ELOST && shl_renewer_lost(k->rn) != SHL_LOSS_REFUSED) {
            /* Declared lost on our own clock (the thread was late): not the
             * table's verdict. */
            phase(k, ST_PH_HOLDING);
            bump(k, ST_C_STALE);
            k->refused = 1;
            return 1;
        }
    } else if (how == 1 && !k->b) {
        struct upd u = {v,      size, k->token, k->lease, 0, &k->sh->section[k->lease],
                        k->gen, 0,    k->self};
        rc = shl_update(k->t, k->names[k->lease], k->owner, k->token, update_cb, &u);
        if (rc == SHL_OK)
            bump(k, ST_C_UPDATES);
        k->cb_sec = u.sec;
        /* On etcd the callback runs before etcd's check: what it saw
         * counts only when the update was accepted. */
        if (u.bad && (rc == SHL_OK || !k->etcd))
            bump(k, ST_C_BAD_VALUE);
    } else {
        rc = k->b ? shl_lease_write(k->b, k->token, v, size)
                  : shl_write(k->t, k->names[k->lease], k->owner, k->token, v, size);
    }
    if (k->etcd && rc == SHL_EUNAVAIL)
        bump(k, ST_C_UNAVAIL_W); /* may be in etcd's history, never acknowledged */
    if (rc == SHL_EFULL && !k->sh->value_pool_fits) {
        /* a value pool too small for every lease, each spare's lease locked
         * by then: an answer; the lease keeps its last value, and the hold
         * goes on */
        phase(k, ST_PH_HOLDING);
        atomic_fetch_add_explicit(&k->sh->values_full, 1, memory_order_relaxed);
        return 0;
    }
    if (outcome(k, rc, t0) != 0)
        return 1;
    bump(k, ST_C_VALUES);
    return 0;
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
    struct gctx g = {.me = k->me,
                     .log = log,
                     .rec = {k->token, seq, k->lease, k->w, k->inc, k->gen, 0},
                     .section = &k->sh->section[k->lease],
                     .self = k->self,
                     .iv = k->iv,
                     .sh = k->sh,
                     .w = k->w};
    if (k->etcd) {
        /* The value write is the evidence: etcd's history logs it. */
        if (write_value(k, &g.rec) != 0)
            return 1;
        ack(k, seq);
        return 0;
    }
    uint64_t t0 = st_now_ns();
    if (gate(k, t0))
        return 1;
    g.die = (int)atomic_exchange_explicit(&k->me->die_in_guard, 0, memory_order_relaxed);
    bump(k, ST_C_OPS);
    int rc = op_guard(k, k->token, guard_cb, &g);
    k->cb_sec = g.sec;
    if (outcome(k, rc, t0) != 0) {
        if (g.die) /* the order stands for the next guarded section */
            atomic_store_explicit(&k->me->die_in_guard, 1, memory_order_relaxed);
        return 1;
    }
    if (g.skipped) /* not logged: its value must not be on the table either */
        return 0;
    if (g.logged)
        ack(k, seq);
    return write_value(k, &g.rec);
}

/* The value found right after acquiring must be whole, written by the token
 * shl_read() names, and older than ours, unless we had already lost the
 * lease (descheduled past the TTL) and a newer holder wrote it. */
static void check_value(struct wk *k)
{
    uint64_t v[ST_VALUE_WORDS];
    size_t len = 0;
    uint64_t vtok = 0;
    phase(k, ST_PH_OTHER);
    bump(k, ST_C_OPS);
    unsigned words = k->sh->value_words;
    int rc = k->b ? shl_lease_read(k->b, v, words * 8, &len, &vtok)
                  : shl_read(k->t, k->names[k->lease], v, words * 8, &len, &vtok);
    phase(k, ST_PH_HOLDING);
    if (rc != SHL_OK) {
        if (rc != SHL_ENOENT)
            failed(k, rc);
        return;
    }
    if (len == 0 && vtok == 0)
        return;
    struct st_rec r;
    if (len != words * 8 || st_value_parse(v, words, &r) != 0 || r.token != vtok ||
        vtok == k->token || r.lease != k->lease)
        bump(k, ST_C_BAD_VALUE);
    else if (vtok > k->token && surely_ours(k, st_now_ns()))
        bump(k, ST_C_BAD_VALUE); /* a newer holder wrote while we surely held it */
}

static void set_flag(void *arg)
{
    *(int *)arg = 1;
}

/* The previous hold's token, presented again by the same owner on the same
 * lease: only the token tells it apart, and it must be refused. */
static void stale_retry(struct wk *k)
{
    if (!k->prev_token || k->prev_lease != k->lease || k->prev_token == k->token)
        return;
    int called = 0;
    if (gate(k, st_now_ns()))
        return;
    bump(k, ST_C_OPS);
    if (k->etcd) {
        /* No guard on etcd: the old token's write itself must be refused
         * (accepted, it is in etcd's history, below a newer token). */
        uint64_t seq = atomic_fetch_add_explicit(&k->me->next_seq, 1, memory_order_relaxed);
        if (seq >= ST_SEQ_BITS)
            return;
        struct st_rec r = {k->prev_token, seq, k->lease, k->w, k->inc, 0, 0};
        uint64_t v[ST_VALUE_WORDS];
        st_value_make(v, k->sh->value_words, &r);
        int rc =
            shl_write(k->t, k->names[k->lease], k->owner, k->prev_token, v, k->sh->value_words * 8);
        if (rc == SHL_OK) {
            ack(k, seq);
            bump(k, ST_C_STALE_ACCEPT);
        } else if (rc == SHL_ELOST) {
            bump(k, ST_C_STALE_RETRY);
        } else {
            if (rc == SHL_EUNAVAIL)
                bump(k, ST_C_UNAVAIL_W);
            failed(k, rc);
        }
        return;
    }
    int rc = op_guard(k, k->prev_token, set_flag, &called);
    if (rc == SHL_OK || called)
        bump(k, ST_C_STALE_ACCEPT);
    else if (rc == SHL_ELOST)
        bump(k, ST_C_STALE_RETRY);
    else
        failed(k, rc);
}

/* Records that the table granted `token`: each token once, none at or below
 * the lease's token when the campaign began. */
static void granted(struct wk *k)
{
    uint64_t base = k->sh->token_base[k->lease];
    st_gentok_note(k->sh, k->gen, k->lease, k->token);
    if (k->token <= base) {
        bump(k, ST_C_TOKEN_REUSE);
        return;
    }
    uint64_t i = k->token - base;
    if (i >= ST_SEQ_BITS)
        return;
    uint64_t m = UINT64_C(1) << (i % 64);
    if (atomic_fetch_or(&st_granted_bits(k->sh, k->lease)[i / 64], m) & m)
        bump(k, ST_C_TOKEN_REUSE);
}

/* A waiter gets a lease freed while it waited at once (within 50 ms,
 * whatever the releaser died of: lib/kind_shm/wait.c). Judged from the lease's
 * history after a wait that began at t0: our acquisition, and just before
 * it the release of the token before ours by a worker (an exclusive holder:
 * no reader could hold the lease with it, so from then on it was free),
 * made while we waited. A waiter asleep until the old holder's expiry
 * because the wake-up was lost takes up to a TTL: the bound is 50 ms, or
 * half the TTL when that is less, but never less than ASLEEP_DOZE_NS. A waiter woken but not run is
 * late too: excused when the controller's ticks were late in the meantime (the scheduler held
 * runnable processes back), or when the waiting thread spent that long runnable but not running
 * during its wait (st_runqueue_ns(): a lost wake-up leaves it asleep, not queued). Chaos pauses a
 * waiter only inside a slot lock (stress_section.c): a pause in the lease's lock meanwhile excuses
 * the delay, since a waiter stopped there with its turn holds the lease free for its turn's grace,
 * and any worker stopped holding the lock (a pause at a random moment can land there too,
 * stress_chaos.c) keeps the waiter out of it: asleep on the mutex, not queued for a core either. So
 * does a stop the kernel made late, found at its resume in the lock or queued for the lease
 * (held_up[], stress.h). */
#define ASLEEP_NS UINT64_C(50000000)
/* The least bound: a releaser preempted between its unlock and its wake
 * system call (a loaded host) leaves the waiter to see the change at its
 * next look, SHL_WAIT_DOZE_NS later at most, as the library promises; then
 * it takes the lock, which others may hold. Lost wake-ups (the wake-lost
 * mutation) sleep until the expiry: a TTL. */
#define ASLEEP_DOZE_NS (SHL_WAIT_DOZE_NS + UINT64_C(20000000))

/* Whether a pause inside lease's lock (its mark `m`, stress.h) was on at
 * some time in [from, to]: a waiter stopped in there while its turn came
 * (stress_section.c catches waiters too) keeps the lease free for its turn's
 * grace, and the waiters behind it wait that long, as the library means
 * them to. One in progress counts from its begin on. */
static int section_paused_between(const struct st_secmark *m, uint64_t from, uint64_t to)
{
    uint64_t g1 = atomic_load_explicit(&m->gen, memory_order_acquire);
    uint64_t b = atomic_load_explicit(&m->begin, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&m->end, memory_order_acquire);
    uint64_t g2 = atomic_load_explicit(&m->gen, memory_order_acquire);
    if (g1 != g2 || !b)
        return g1 != g2; /* moving now: give the benefit of the doubt */
    if (e < b)           /* in progress (or never resumed) */
        e = UINT64_MAX;
    return b <= to && e >= from;
}

static void slept_on_free(struct wk *k, uint64_t t0, uint64_t q0)
{
    uint64_t bound = k->sh->ttl_ns / 2 < ASLEEP_NS ? k->sh->ttl_ns / 2 : ASLEEP_NS;
    if (bound < ASLEEP_DOZE_NS)
        bound = ASLEEP_DOZE_NS;
    shl_lease_detail d;
    if (k->etcd || shl_inspect(k->t, k->names[k->lease], &d) != SHL_OK)
        return;
    for (uint32_t i = d.nevents; i-- > 1;) {
        const shl_event_info *a = &d.events[i], *r = &d.events[i - 1];
        if (a->op != SHL_OP_ACQUIRE || a->token != k->token)
            continue;
        if (r->op != SHL_OP_RELEASE || r->token + 1 != k->token || r->owner[0] != 'w' ||
            r->time_ns < t0 || a->time_ns - r->time_ns <= bound)
            return;
        if (atomic_load(&k->sh->lag_to) >= r->time_ns &&
            atomic_load(&k->sh->lag_from) <= a->time_ns)
            return;
        if (section_paused_between(&k->sh->section[k->lease], r->time_ns, a->time_ns) ||
            section_paused_between(&k->sh->held_up[k->lease], r->time_ns, a->time_ns))
            return;
        uint64_t queued = st_runqueue_ns() - q0;
        if (queued + bound >= a->time_ns - r->time_ns)
            return; /* runnable, not run: the scheduler's delay, not a lost wake-up */
        bump(k, ST_C_ASLEEP);
        fprintf(stderr,
                "shmlease stress: asleep_waiters: worker pid %d, lease %u: token %llu released at "
                "%.3f ms, our acquisition (token %llu) at %.3f ms, %.3f ms later; %.3f ms of it "
                "runnable but not run (campaign clock)\n",
                (int)k->self, k->lease, (unsigned long long)r->token, (double)r->time_ns / 1e6,
                (unsigned long long)a->token, (double)a->time_ns / 1e6,
                (double)(a->time_ns - r->time_ns) / 1e6, (double)queued / 1e6);
        /* What else the lease saw: whoever acted on it meanwhile. */
        for (uint32_t j = 0; j < d.nevents; j++)
            fprintf(stderr,
                    "shmlease stress:   lease %u event %u: %.3f ms %s token %llu pid %d %s\n",
                    k->lease, j, (double)d.events[j].time_ns / 1e6, shl_op_name(d.events[j].op),
                    (unsigned long long)d.events[j].token, (int)d.events[j].pid, d.events[j].owner);
        return;
    }
}

/* One try at the lease, in the way this hold uses. */
static int try_acquire(struct wk *k, unsigned how, shl_lease_info *info)
{
    uint64_t ttl = k->sh->ttl_ns;
    if (how == 0) {
        bump(k, ST_C_WAITS);
        /* For --member-chaos's long stall, and for the controller to tell
         * a pause that landed in the queue (stress_chaos.c). */
        atomic_store(&k->me->waiting, k->lease + 1);
        int rc = shl_acquire_wait(k->t, k->names[k->lease], k->owner, ttl, 2 * ttl, &k->token);
        atomic_store(&k->me->waiting, 0);
        return rc;
    }
    if (k->b)
        return shl_lease_acquire(k->b, ttl, &k->token, info);
    return shl_acquire_ex(k->t, k->names[k->lease], k->owner, ttl, &k->token, info);
}

static void reopen(struct wk *k);

/* Acquires a lease (often the previous one again); 0 once held, -1 when the
 * campaign stops. */
static int acquire(struct wk *k)
{
    uint64_t r = st_rand(&k->rng);
    k->lease = k->prev_token && r % 2 ? k->prev_lease : (unsigned)((r >> 8) % k->sh->leases);
    unsigned how = (unsigned)((r >> 32) % 4); /* 0: wait; 1: bound lease; else plain */
    phase(k, ST_PH_ACQUIRING);
    if (k->iv)
        st_iv_lb(k->iv, st_now_ns()); /* the hold to come starts after this */
    uint64_t t0;
    for (;;) {
        if (atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
            return -1;
        if (k->removed)
            reopen(k);
        k->b = how == 1 ? k->bound[k->lease] : NULL;
        shl_lease_info info = {0};
        k->pause_mark = atomic_load_explicit(&k->me->pauses, memory_order_relaxed);
        k->revoke_mark = atomic_load_explicit(&k->sh->revoke_epoch[k->lease], memory_order_acquire);
        uint64_t te = atomic_load(&k->sh->token_epoch[k->lease]);
        t0 = st_now_ns();
        k->mark_at = t0;
        if (gate(k, t0))
            continue;
        bump(k, ST_C_OPS);
        uint64_t q0 = how == 0 ? st_runqueue_ns() : 0;
        int rc = try_acquire(k, how, &info);
        if (rc == SHL_ECORRUPT && k->c->admin_chaos && st_token_gone(k->sh, k->lease, te)) {
            bump(k, ST_C_CORRUPT_SEEN); /* its token record was deleted: no token */
            st_sleep_ns(50000000);
            continue;
        }
        if (rc == SHL_OK && how == 0)
            slept_on_free(k, t0, q0);
        if (rc == SHL_OK) {
            removed_late(k, t0);
            break;
        }
        if (rc == SHL_EFULL && how == 0 && !k->sh->waiter_pool_fits) {
            /* a waiter pool too small for every wait: an answer */
            atomic_fetch_add_explicit(&k->sh->waiters_full, 1, memory_order_relaxed);
            st_sleep_ns(1000000);
            continue;
        }
        if (rc == SHL_EBUSY || rc == SHL_ETIMEDOUT) {
            bump(k, ST_C_BUSY);
            /* On etcd a refused acquisition costs a grant, a txn and a
             * revoke: come back less often. */
            uint64_t cap = k->etcd ? 20000000 : 2000000;
            uint64_t wait = info.remaining_ns < cap ? info.remaining_ns : cap;
            st_sleep_ns(wait / 2 + st_rand(&k->rng) % (wait / 2 + 1000));
            continue;
        }
        failed(k, rc);
        if (!k->removed)
            st_sleep_ns(k->etcd ? 50000000 : 1000000);
    }
    uint64_t got = st_now_ns();
    k->ttl = k->sh->ttl_ns;
    k->lo = t0 + k->sh->ttl_ns;
    k->deadline = got + k->sh->ttl_ns;
    k->refused = 0;
    if (k->iv) {
        struct st_iv iv = {got, k->lo,         k->token, k->lease, ST_IV_EXCL, k->revoke_mark,
                           t0,  k->pause_mark, 0,        k->gen,   0};
        st_iv_begin(k->iv, &iv);
    }
    atomic_store_explicit(&k->me->holding, k->lease + 1, memory_order_release);
    phase(k, ST_PH_HOLDING);
    bump(k, ST_C_ACQUIRED);
    if (k->b)
        bump(k, ST_C_BOUND);
    granted(k);
    return 0;
}

/* 0: renewed for ttl; 1: refused. A renewal that succeeds after the table
 * refused this (owner, token) is a violation: validity never comes back. */
static int renew_for(struct wk *k, uint64_t ttl)
{
    phase(k, ST_PH_OTHER);
    bump(k, ST_C_OPS);
    uint32_t pm = atomic_load_explicit(&k->me->pauses, memory_order_relaxed);
    uint64_t rm = atomic_load_explicit(&k->sh->revoke_epoch[k->lease], memory_order_acquire);
    uint64_t t0 = st_now_ns();
    if (gate(k, t0)) {
        phase(k, ST_PH_HOLDING);
        return 1;
    }
    int rc = op_renew(k, ttl);
    uint64_t now = st_now_ns();
    phase(k, ST_PH_HOLDING);
    if (rc == SHL_OK) {
        if (k->refused)
            bump(k, ST_C_LOST_EXCL);
        late_locked(k, t0, now, 0);
        removed_late(k, t0);
        if (ttl != k->ttl)
            bump(k, ST_C_TTL_RENEWED);
        k->ttl = ttl;
        k->deadline = now + ttl;
        if (t0 + ttl > k->lo) {
            k->lo = t0 + ttl;
            k->pause_mark = pm;
            k->revoke_mark = rm;
            k->mark_at = t0;
            if (k->iv)
                st_iv_extend(k->iv, k->lo, rm, t0);
        }
        bump(k, ST_C_RENEWED);
        return 0;
    }
    if (rc == SHL_ELOST)
        refused(k, now);
    else
        failed(k, rc);
    return 1;
}

/* A renewal. On etcd half of them change the ttl (one second more, or
 * back): the holder record moves to a new etcd lease, under its compare;
 * the others keep it (a keep-alive). */
static int renew(struct wk *k)
{
    uint64_t ttl = k->ttl;
    if (k->etcd && st_rand(&k->rng) % 2)
        ttl = ttl == k->sh->ttl_ns ? ttl + UINT64_C(1000000000) : k->sh->ttl_ns;
    return renew_for(k, ttl);
}

static void end_hold(struct wk *k, int lost)
{
    uint64_t end = UINT64_MAX; /* the interval ends at the release call, or at lo */
    if (k->rn) {
        end = st_now_ns();
        if (k->iv)
            st_iv_cut(k->iv, end);
        int rc = shl_renewer_stop(k->rn, lost ? 0 : SHL_RENEWER_RELEASE);
        k->rn = NULL;
        bump(k, rc == SHL_OK && !lost ? ST_C_RELEASED : ST_C_EXPIRED);
    } else if (lost) {
        bump(k, ST_C_EXPIRED);
    } else {
        unsigned r = (unsigned)(st_rand(&k->rng) % 100);
        if (atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
            r = 0; /* the campaign is ending: just release */
        uint64_t t0 = st_now_ns();
        if (r < 90 && gate(k, t0)) {
            bump(k, ST_C_EXPIRED); /* removed: nothing to release */
        } else if (r < 90) {
            phase(k, ST_PH_OTHER);
            bump(k, ST_C_OPS);
            end = t0;
            if (k->iv)
                st_iv_cut(k->iv, end);
            int rc = op_release(k);
            phase(k, ST_PH_HOLDING);
            if (rc == SHL_OK) {
                bump(k, ST_C_RELEASED);
                if (t0 >= k->deadline && !k->etcd)
                    bump(k, ST_C_LATE_ACCEPT);
                late_locked(k, t0, st_now_ns(), 0);
                removed_late(k, t0);
            } else if (rc == SHL_ELOST) {
                refused(k, st_now_ns());
                bump(k, ST_C_EXPIRED);
            } else {
                failed(k, rc);
            }
        } else if (r < 95) {
            /* Let it expire, then try once more: this write must be refused. */
            /* On etcd the leader's lessor revokes expired leases every
             * half second: give it that. */
            uint64_t after = k->deadline + (k->etcd ? UINT64_C(700000000) : 1000000);
            uint64_t now = st_now_ns();
            if (now < after)
                st_sleep_ns(after - now);
            bump(k, ST_C_EXPIRED);
            if (!atomic_load_explicit(&k->sh->stop, memory_order_relaxed))
                (void)guarded_write(k);
        } else {
            bump(k, ST_C_EXPIRED); /* walk away; it expires on its own */
        }
    }
    if (k->iv)
        st_iv_end(k->sh, k->iv, end, atomic_load(&k->me->pauses));
    k->prev_lease = k->lease;
    k->prev_token = k->token;
    k->b = NULL;
    atomic_store_explicit(&k->me->holding, 0, memory_order_release);
    phase(k, ST_PH_IDLE);
}

/* A little work between writes: yield, or sleep up to `max` ns. */
static void work(struct wk *k, uint64_t max)
{
    uint64_t r = st_rand(&k->rng);
    if (r % 4 == 0)
        st_sleep_ns(r % max);
    else
        sched_yield();
}

/* While a worker is stopped inside our lease's lock (stress_section.c),
 * half the time a renewal before the next write: it waits for the lock
 * while the lease runs out, and is judged after the stop (late_locked()).
 * Renewals are rare otherwise, and a library that reads its clock before the
 * lock in renew alone would go unseen. 0, or 1 when the renewal was refused. */
static int renew_in_pause(struct wk *k)
{
    if (k->etcd || k->rn || !(atomic_load(&k->sh->section[k->lease].gen) & 1) ||
        st_rand(&k->rng) % 2)
        return 0;
    return renew(k);
}

/* A short hold: a few writes, maybe one renewal. 1 when it was lost, -1
 * when the campaign is over. */
static int short_hold(struct wk *k)
{
    unsigned nw = 1 + (unsigned)(st_rand(&k->rng) % 6);
    for (unsigned i = 0; i < nw; i++) {
        if (i == nw / 2 && st_rand(&k->rng) % 2 && renew(k) != 0)
            return 1;
        if (renew_in_pause(k) != 0)
            return 1;
        int rc = guarded_write(k);
        if (rc != 0)
            return rc;
        work(k, 1000000);
    }
    return 0;
}

/* A long hold: writes spread over most of the TTL, renewed a few times, so
 * that a lease taken early from its holder shows. With a renewer thread on
 * some of them, which keeps it alive instead. */
static int long_hold(struct wk *k)
{
    uint64_t ttl = k->sh->ttl_ns;
    if (!k->b && ttl >= SHL_RENEWER_TTL_MIN && st_rand(&k->rng) % 2) {
        shl_renewer_options o;
        shl_renewer_options_init(&o);
        int rc = shl_renewer_start(k->t, k->names[k->lease], k->owner, k->token, ttl, &o, &k->rn);
        if (rc == SHL_OK) {
            bump(k, ST_C_RENEWERS);
            k->deadline = UINT64_MAX; /* the thread moves it: no late-accept check */
        } else if (rc == SHL_ELOST) {
            refused(k, st_now_ns());
            return 1;
        } else {
            failed(k, rc);
        }
    }
    unsigned rounds = 1 + (unsigned)(st_rand(&k->rng) % 3);
    for (unsigned i = 0; i < rounds; i++) {
        while (st_now_ns() + ttl / 4 < (k->rn ? k->lo + i * ttl : k->lo)) {
            if (renew_in_pause(k) != 0)
                return 1;
            int rc = guarded_write(k);
            if (rc != 0)
                return rc;
            work(k, ttl / 8);
        }
        if (!k->rn && renew(k) != 0)
            return 1;
    }
    return 0;
}

/* Opens the table (stress_removed.c: its generation too) and our bound
 * leases on it. */
static int open_all(struct wk *k)
{
    /* As a look: the open saw no removal begun after this (stress_removed.c). */
    k->look_at = st_now_ns();
    int rc = st_table_open(k->c, k->sh, &k->t, &k->gen);
    for (unsigned i = 0; rc == SHL_OK && i < k->sh->leases; i++)
        rc = shl_lease_open(k->t, k->names[i], k->owner, &k->bound[i]);
    return rc;
}

/* After a removal: the next table under the name, made by whoever comes
 * first with the campaign's options and token state file. */
static void reopen(struct wk *k)
{
    for (unsigned i = 0; i < k->sh->leases; i++) {
        shl_lease_close(k->bound[i]);
        k->bound[i] = NULL;
    }
    shl_close(k->t);
    k->t = NULL;
    int rc = open_all(k);
    if (rc != SHL_OK) {
        if (atomic_load(&k->sh->stop))
            _exit(0); /* the campaign ended while the name was away */
        error(k, rc);
        _exit(3);
    }
    k->removed = 0;
    k->prev_token = 0; /* a token of the old table */
    bump(k, ST_C_REOPENS);
}

static void run(struct wk *k)
{
    while (!atomic_load_explicit(&k->sh->stop, memory_order_relaxed)) {
        if (k->removed)
            reopen(k);
        if (acquire(k) != 0)
            return;
        check_value(k);
        stale_retry(k);
        int rc = st_rand(&k->rng) % 4 == 0 ? long_hold(k) : short_hold(k);
        /* Refused once, so refused for good. With --admin-chaos always
         * tried, half the time as a keep-alive (a deleted holder record's
         * etcd lease lives on, and the keep-alive alone would pass), half
         * with a new ttl (a txn that forgot its compare would put the
         * record back). Only the first renew after the delete trusts the
         * handle's memory of the holder; the next one reads the record. */
        if (rc > 0 && !k->rn && k->c->admin_chaos)
            (void)renew(k);
        else if (rc > 0 && !k->rn && st_rand(&k->rng) % 2)
            (void)renew(k);
        if (rc < 0) {
            end_hold(k, 0);
            return;
        }
        end_hold(k, rc);
    }
}

void st_worker_main(const struct st_config *c, struct st_shared *sh, unsigned w)
{
    struct wk k = {0};
    k.c = c;
    k.sh = sh;
    k.me = &sh->w[w];
    k.self = getpid();
    atomic_store(&k.me->waiting, 0); /* a killed predecessor's */
    k.w = w;
    k.inc = atomic_load(&k.me->incarnation);
    k.etcd = c->etcd;
    k.iv = c->etcd ? NULL : st_ivlog_at(sh, w);
    k.rng = c->seed ^ ((uint64_t)(w + 1) * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)k.inc << 40);
    snprintf(k.owner, sizeof k.owner, "w%u.%u", w, k.inc);
    k.names = calloc(sh->leases, sizeof *k.names);
    k.bound = calloc(sh->leases, sizeof *k.bound);
    for (unsigned i = 0; k.names && i < sh->leases; i++)
        st_lease_name(i, k.names[i]);
    int rc = k.names && k.bound ? open_all(&k) : SHL_ENOMEM;
    if (rc != SHL_OK) {
        error(&k, rc);
        _exit(3);
    }
    run(&k);
    for (unsigned i = 0; i < sh->leases; i++)
        shl_lease_close(k.bound[i]);
    shl_close(k.t);
    free(k.names);
    free(k.bound);
    phase(&k, ST_PH_DONE);
    _exit(0);
}
