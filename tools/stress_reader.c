/*
 * tools/stress_reader.c - a reader process of `shmlease stress`.
 *
 * Reads the leases' values lock-free (shl_read()) while the workers write
 * them, as fast as it can: every value it sees must be one whole write (its
 * seal matches), carry the token shl_read() names, and, per lease, no value
 * may be older than one it saw before. A library that writes a value where a
 * reader can be copying it is caught here, not only after a crash (and a
 * writer stopped half-way through its copy is seen for as long as it stays
 * stopped).
 *
 * Every few reads it takes a lease shared instead and reads under
 * shl_guard_shared() a few times before releasing it (or letting it expire):
 * each guarded read logs what it saw (stress.h), for the checker, and the
 * hold its sure interval (stress_interval.c).
 *
 * On an etcd table shl_guard_shared() is refused (no callback can be atomic
 * with a remote check), so a shared hold is checked after the fact instead:
 * the reader queues for the lease with shl_acquire_shared_wait(), reads the
 * value one to three times with shl_read(), then renews its shared hold, and logs
 * the reads only if the renew succeeded. The argument, from the contract
 * (shmlease.h, Shared leases, etcd tables) and lib/kind_etcd/etcd_lease.c:
 *  - the shared acquire is one transaction at revision A that found no
 *    exclusive holder record, and gen is the token of the last exclusive
 *    acquisition before A; every value at A was written by a holder whose
 *    token is at most gen;
 *  - the holder key "s/<lease> <token>" is put only by that acquire and goes
 *    only with its etcd lease (expiry, release, revoke); nothing puts it
 *    again. A renew that succeeds first read that key, still there on the
 *    same etcd lease, at a revision R after the reads (etcd's reads are
 *    linearizable), so it existed throughout [A, R];
 *  - an exclusive acquire compares "no key under s/<lease>", and every write
 *    compares the exclusive holder record, which did not exist at A: so no
 *    exclusive acquire and no write was committed in (A, R].
 * Hence every read of a confirmed hold saw the value of revision A: its
 * token is at most gen, and all reads of one hold saw the same write. The
 * checker verifies both on the logged reads, as for guarded reads. A renew
 * that fails (SHL_ELOST: expired or revoked meanwhile) proves nothing and
 * its reads are not logged; a wait that times out or a cluster that does not
 * answer is counted, not an error. A hold costs a few requests besides its
 * wait (a watch) and comes once per ST_ETCD_HOLD_EVERY plain reads: etcd's
 * load stays about that of the plain reads.
 */
#include <stdlib.h>
#include <unistd.h>

#include "stress.h"

struct guarded {
    struct st_shared *sh;
    struct st_rlog *rl;
    struct st_rrec r;
};

/* This reader process's handle: its table generation, whether it saw the
 * table removed, and when it last looked at the name (removals, stress.h). */
static uint32_t rd_gen;
static int rd_removed;
static uint64_t rd_look;

/* A code other than SHL_OK and SHL_ELOST from a call: SHL_EREMOVED is the
 * table removed (opened again by the loop), anything else an error. */
static void reader_fail(struct st_shared *sh, int rc)
{
    if (rc == SHL_EREMOVED)
        rd_removed = 1;
    else
        atomic_fetch_add(&sh->reader_errors, 1);
}

/* With removals: a look at the table's name once per renew interval, as a
 * renewer does. 1 when the table was removed. */
static int reader_look(const struct st_config *c, struct st_shared *sh, shl_table *t)
{
    uint64_t now = st_now_ns();
    if (rd_removed || c->remove_rate <= 0 || now - rd_look < sh->renew_ns)
        return rd_removed;
    rd_look = now;
    if (shl_table_check(t) == SHL_EREMOVED)
        rd_removed = 1;
    return rd_removed;
}

/* Publishes r (sealed here) in the reader's own ring, for the checker; a
 * full ring is counted as an overflow instead. */
static void rlog_put(struct st_rlog *rl, struct st_rrec *r)
{
    uint64_t k = atomic_load_explicit(&rl->n, memory_order_relaxed);
    if (k - atomic_load_explicit(&rl->consumed, memory_order_acquire) >= ST_RLOG_CAP) {
        atomic_fetch_add_explicit(&rl->overflow, 1, memory_order_relaxed);
        return;
    }
    r->seal = st_rrec_seal(r);
    rl->rec[k % ST_RLOG_CAP] = *r;
    atomic_store_explicit(&rl->n, k + 1, memory_order_release);
}

/* Under the lease's lock, after the shared holder's check passed: the
 * newest logged write, and a record of this read. */
static void guarded_read(void *arg)
{
    struct guarded *g = arg;
    struct st_log *log = st_log_at(g->sh, g->r.lease);
    unsigned p = g->sh->workers + g->r.reader;
    /* A removed generation's reads are not logged: the ring is the next
     * one's by now. */
    if (!st_log_begin(g->sh, p, rd_gen))
        return;
    uint64_t n = atomic_load_explicit(&log->n, memory_order_acquire);
    g->r.seen = n ? log->rec[(n - 1) % ST_LOG_CAP].token : 0;
    rlog_put(g->rl, &g->r);
    st_log_done(g->sh, p);
}

/* "reader-<id>": the owner of the reader's shared holds. */
static void reader_owner(unsigned id, char owner[16])
{
    unsigned n = 7, v = id;
    char dig[12];
    unsigned d = 0;
    memcpy(owner, "reader-", 7);
    do {
        dig[d++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (d)
        owner[n++] = dig[--d];
    owner[n] = 0;
}

/* The guarded reads of one shared hold; returns the time of the release
 * call, or UINT64_MAX when the hold was lost or left to expire. */
static uint64_t hold_reads(shl_table *t, struct st_shared *sh, const char *name, const char *owner,
                           struct guarded *g, uint64_t *rng)
{
    unsigned reads = 1 + (unsigned)(st_rand(rng) % 4);
    for (unsigned i = 0; i < reads; i++) {
        int rc = shl_guard_shared(t, name, owner, g->r.token, guarded_read, g);
        if (rc != SHL_OK && rc != SHL_ELOST) /* lost: revoked, or expired */
            reader_fail(sh, rc);
        if (rc != SHL_OK)
            return UINT64_MAX;
        st_sleep_ns(st_rand(rng) % (sh->ttl_ns / 8 + 1));
    }
    if (st_rand(rng) % 8 == 0)
        return UINT64_MAX;
    uint64_t at = st_now_ns();
    st_iv_cut(st_ivlog_at(sh, sh->workers + g->r.reader), at);
    int rc = shl_release(t, name, owner, g->r.token);
    if (rc != SHL_OK && rc != SHL_ELOST)
        reader_fail(sh, rc);
    return at;
}

/* One shared hold of lease l: a few guarded reads, then a release (or, now
 * and then, the lease left to expire). Its sure interval is logged as a
 * worker's is (stress.h). */
static void shared_hold(shl_table *t, struct st_shared *sh, unsigned id, unsigned l,
                        const char *name, uint64_t *rng, uint64_t hold)
{
    char owner[16];
    reader_owner(id, owner);
    struct guarded g = {sh, st_rlog_at(sh, id), {0}};
    g.r.lease = l;
    g.r.reader = id;
    g.r.hold = hold;
    struct st_ivlog *ivl = st_ivlog_at(sh, sh->workers + id);
    st_iv_lb(ivl, st_now_ns());
    uint64_t rm = atomic_load_explicit(&sh->revoke_epoch[l], memory_order_acquire);
    uint64_t t0 = st_now_ns();
    int rc = shl_acquire_shared(t, name, owner, sh->ttl_ns, &g.r.token, &g.r.gen);
    if (rc == SHL_EBUSY) {
        atomic_fetch_add_explicit(&sh->shared_busy, 1, memory_order_relaxed);
        return;
    }
    if (rc == SHL_EFULL && !sh->pool_fits) { /* a pool too small for all: an answer */
        atomic_fetch_add_explicit(&sh->shared_full, 1, memory_order_relaxed);
        return;
    }
    if (rc != SHL_OK) {
        reader_fail(sh, rc);
        return;
    }
    struct st_iv iv = {st_now_ns(), t0 + sh->ttl_ns, g.r.token, l, ST_IV_SHARED, rm, t0, 0,
                       0,           rd_gen,          0};
    st_iv_begin(ivl, &iv);
    atomic_fetch_add_explicit(&sh->shared_holds, 1, memory_order_relaxed);
    st_iv_end(sh, ivl, hold_reads(t, sh, name, owner, &g, rng), 0); /* never stopped */
}

/* Checks one value read from lease l (words long, by token vtok): one
 * whole write of that lease by that token, not older than the last one this
 * reader saw there (seen[l], then moved on). A violation is counted as torn. */
static void value_check(struct st_shared *sh, unsigned l, const uint64_t *v, size_t len,
                        uint64_t vtok, uint64_t *seen)
{
    unsigned words = sh->value_words;
    struct st_rec r;
    if (len == 0 && vtok == 0)
        return;
    if (len != words * 8 || st_value_parse(v, words, &r) != 0 || r.token != vtok || r.lease != l ||
        vtok < seen[l])
        atomic_fetch_add(&sh->torn, 1);
    else
        seen[l] = vtok;
}

/* shl_read() of lease l, its value checked: SHL_OK (*vtok its token), or the
 * read's code, counted (SHL_ENOENT is not counted: never written yet). */
static int read_checked(shl_table *t, struct st_shared *sh, unsigned l, const char *name, int etcd,
                        uint64_t *seen, uint64_t *vtok)
{
    uint64_t v[ST_VALUE_WORDS];
    size_t len = 0;
    *vtok = 0;
    int rc = shl_read(t, name, v, sh->value_words * 8, &len, vtok);
    if (rc == SHL_ENOENT)
        return rc;
    if (rc == SHL_EUNAVAIL && etcd) { /* a member away: counted, not an error */
        atomic_fetch_add(&sh->unavail, 1);
        return rc;
    }
    if (rc != SHL_OK) {
        reader_fail(sh, rc);
        return rc;
    }
    atomic_fetch_add_explicit(&sh->reads, 1, memory_order_relaxed);
    value_check(sh, l, v, len, *vtok, seen);
    return SHL_OK;
}

/* An etcd table's shared hold of lease l (see the top of the file): queue
 * for it, read one to three times, renew, and log the reads only if the renew
 * confirmed that the hold lasted through them; then release. */
static void etcd_hold(shl_table *t, struct st_shared *sh, unsigned id, unsigned l, const char *name,
                      uint64_t *rng, uint64_t hold, uint64_t *seen)
{
    char owner[16];
    reader_owner(id, owner);
    struct st_rrec r[3] = {{0}};
    uint64_t token = 0, gen = 0;
    uint64_t te = atomic_load(&sh->token_epoch[l]);
    int rc = shl_acquire_shared_wait(t, name, owner, sh->ttl_ns, sh->ttl_ns, &token, &gen);
    if (rc == SHL_ECORRUPT && st_token_gone(sh, l, te)) {
        atomic_fetch_add(&sh->corrupt_seen, 1); /* its token record was deleted */
        return;
    }
    if (rc == SHL_ETIMEDOUT || rc == SHL_EBUSY) {
        atomic_fetch_add_explicit(&sh->shared_busy, 1, memory_order_relaxed);
        return;
    }
    if (rc == SHL_EUNAVAIL) { /* may hold it: it expires by itself */
        atomic_fetch_add(&sh->unavail, 1);
        return;
    }
    if (rc != SHL_OK) {
        reader_fail(sh, rc); /* SHL_EREMOVED: its prefix deleted (--admin-chaos) */
        return;
    }
    atomic_fetch_add_explicit(&sh->shared_holds, 1, memory_order_relaxed);
    unsigned reads = 1 + (unsigned)(st_rand(rng) % 3), done = 0;
    for (unsigned i = 0; i < reads; i++) {
        /* A while between the acquire and a read: longer than a refused
         * worker's pause before it tries again (20 ms on etcd), so that a
         * writer let in wrongly has the time to write. */
        st_sleep_ns(sh->ttl_ns / 16 + st_rand(rng) % (sh->ttl_ns / 16 + 1));
        uint64_t vtok;
        if (read_checked(t, sh, l, name, 1, seen, &vtok) != SHL_OK)
            break;
        r[done++] = (struct st_rrec){
            .token = token, .gen = gen, .seen = vtok, .hold = hold, .lease = l, .reader = id};
    }
    rc = shl_renew(t, name, owner, token, sh->ttl_ns);
    if (rc == SHL_OK) {
        if (done)
            atomic_fetch_add_explicit(&sh->shared_checked, 1, memory_order_relaxed);
        for (unsigned i = 0; i < done; i++)
            rlog_put(st_rlog_at(sh, id), &r[i]);
    } else if (rc == SHL_ELOST) { /* expired or revoked meanwhile: proves nothing */
        atomic_fetch_add_explicit(&sh->shared_lost, 1, memory_order_relaxed);
        return;
    } else if (rc == SHL_EUNAVAIL) {
        atomic_fetch_add(&sh->unavail, 1);
    } else {
        reader_fail(sh, rc);
    }
    rc = shl_release(t, name, owner, token);
    if (rc == SHL_EUNAVAIL)
        atomic_fetch_add(&sh->unavail, 1);
    else if (rc != SHL_OK && rc != SHL_ELOST)
        reader_fail(sh, rc);
}

/* Plain reads per shared hold on an etcd table. */
#define ST_ETCD_HOLD_EVERY 16

void st_reader_main(const struct st_config *c, struct st_shared *sh, unsigned id)
{
    shl_table *t;
    uint64_t *seen = calloc(sh->leases, sizeof *seen);
    char(*names)[ST_LEASE_NAME] = calloc(sh->leases, sizeof *names);
    if (!seen || !names || st_table_open(c, sh, &t, &rd_gen) != SHL_OK) {
        atomic_fetch_add(&sh->reader_errors, 1);
        _exit(3);
    }
    rd_look = st_now_ns();
    for (unsigned i = 0; i < sh->leases; i++)
        st_lease_name(i, names[i]);
    uint64_t rng = c->seed ^ UINT64_C(0x72656164) ^ ((uint64_t)id << 32);
    for (uint64_t n = 1; !atomic_load_explicit(&sh->stop, memory_order_relaxed); n++) {
        if (n % 16 == 0)
            st_sleep_ns(50000);      /* leave the workers some of a small machine */
        if (reader_look(c, sh, t)) { /* removed: the next table under the name */
            shl_close(t);
            if (st_table_open(c, sh, &t, &rd_gen) != SHL_OK) {
                if (atomic_load(&sh->stop))
                    _exit(0);
                atomic_fetch_add(&sh->reader_errors, 1);
                _exit(3);
            }
            rd_removed = 0;
            rd_look = st_now_ns();
            atomic_fetch_add(&sh->reopens_other, 1);
            continue;
        }
        unsigned l = (unsigned)(st_rand(&rng) % sh->leases);
        /* A shared hold instead of a plain read, now and then. On etcd more
         * often: most of a hold is spent queued (a watch, no requests), and
         * a queued reader gets in only when the lease comes free. */
        if (n % (c->etcd ? ST_ETCD_HOLD_EVERY : 64) == 0) {
            if (c->etcd)
                etcd_hold(t, sh, id, l, names[l], &rng, n, seen);
            else
                shared_hold(t, sh, id, l, names[l], &rng, n);
            continue;
        }
        uint64_t vtok;
        read_checked(t, sh, l, names[l], c->etcd, seen, &vtok);
    }
    shl_close(t);
    free(seen);
    free(names);
    _exit(0);
}
