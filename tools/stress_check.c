/*
 * tools/stress_check.c - the checker of `shmlease stress`.
 *
 * It runs in the controller, consuming each lease's evidence log in order
 * while the campaign runs (so that violations show up live and the rings can
 * be reused), and verifies:
 *
 *  - every visible record is whole (its seal matches): a killed writer's
 *    partial record is never published;
 *  - per lease, tokens in log order never decrease, and one token is only
 *    ever used by one writer (worker incarnation): otherwise an older holder
 *    wrote after a newer one had been granted the lease;
 *  - every guarded read of a shared holder saw the same write throughout its
 *    hold (none was accepted while it was valid), by a token not newer than
 *    its gen (no writer acquired while it held);
 *  - no two holders' sure intervals overlap where the lease allows one
 *    (stress_interval.c);
 *  - every write acknowledged to a worker is in the log (nothing lost), and no
 *    more records lack an acknowledgement than there were kills;
 *  - with removals (stress_removed.c): no token granted on a table generation
 *    at or below one granted on an earlier one;
 *  - at the end: the table's token for each lease is at least the newest
 *    token logged, the value is whole, was written by
 *    the token shl_read() names and is a logged record; and the table passes
 *    shl_check().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "stress.h"

#define PROBLEMS_KEPT 8

struct lease_state {
    uint64_t last_token;
    uint64_t last_writer; /* worker << 32 | incarnation */
    uint64_t records;
    uint32_t gen; /* the table generation of the newest record */
};

/* Per reader: the hold of its last guarded read, and what that read saw. */
struct reader_state {
    uint64_t hold, token, seen;
    int any;
};

struct st_checker {
    struct st_shared *sh;
    struct lease_state *ls;
    struct reader_state *rs;
    uint64_t *logged;   /* private: bit seq of worker w seen in a log */
    uint64_t *verified; /* per worker: acknowledgements checked below this */
    size_t logged_size;
    struct st_check_totals tot;
    unsigned nproblems;
    char problems[PROBLEMS_KEPT][192];
    struct st_ivcheck *iv; /* interval exclusion (stress_interval.c) */
    st_feed_fn feed;       /* records from elsewhere than the rings (etcd), or NULL */
    void *feed_arg;
    uint64_t incomplete; /* evidence that could not be read */
    uint64_t steps;
};

static void problem(struct st_checker *ck, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct st_checker *ck, uint64_t *counter, const char *fmt, ...)
{
    (*counter)++;
    ck->tot.violations++;
    if (ck->nproblems >= PROBLEMS_KEPT)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->problems[ck->nproblems++], sizeof ck->problems[0], fmt, ap);
    va_end(ap);
}

struct st_checker *st_checker_new(struct st_shared *sh)
{
    struct st_checker *ck = calloc(1, sizeof *ck);
    if (!ck)
        return NULL;
    ck->sh = sh;
    ck->ls = calloc(sh->leases, sizeof *ck->ls);
    ck->verified = calloc(sh->workers, sizeof *ck->verified);
    ck->rs = calloc(sh->readers ? sh->readers : 1, sizeof *ck->rs);
    ck->logged_size = (size_t)sh->workers * (ST_SEQ_BITS / 8);
    void *p = mmap(NULL, ck->logged_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck->logged = p == MAP_FAILED ? NULL : p;
    ck->iv = st_ivcheck_new(sh);
    if (!ck->ls || !ck->verified || !ck->logged || !ck->rs || !ck->iv) {
        st_checker_free(ck);
        return NULL;
    }
    return ck;
}

void st_checker_free(struct st_checker *ck)
{
    if (!ck)
        return;
    if (ck->logged)
        munmap(ck->logged, ck->logged_size);
    free(ck->ls);
    free(ck->verified);
    free(ck->rs);
    st_ivcheck_free(ck->iv);
    free(ck);
}

static uint64_t *logged_bits(struct st_checker *ck, unsigned w)
{
    return ck->logged + (uint64_t)w * (ST_SEQ_BITS / 64);
}

static int bit(const uint64_t *bits, uint64_t i)
{
    return (int)((bits[i / 64] >> (i % 64)) & 1);
}

static int acked(struct st_checker *ck, unsigned w, uint64_t seq)
{
    _Atomic uint64_t *a = st_acked_bits(ck->sh, w);
    return (int)((atomic_load_explicit(&a[seq / 64], memory_order_acquire) >> (seq % 64)) & 1);
}

void st_checker_set_feed(struct st_checker *ck, st_feed_fn fn, void *arg)
{
    ck->feed = fn;
    ck->feed_arg = arg;
}

void st_checker_incomplete(struct st_checker *ck, const char *why)
{
    ck->incomplete++;
    if (ck->nproblems < PROBLEMS_KEPT)
        snprintf(ck->problems[ck->nproblems++], sizeof ck->problems[0], "evidence incomplete: %s",
                 why);
}

static void check_record(struct st_checker *ck, unsigned lease, uint64_t pos,
                         const struct st_rec *r)
{
    struct lease_state *ls = &ck->ls[lease];
    ck->tot.records++;
    ls->records++;
    if (r->seal != st_rec_seal(r) || r->lease != lease || r->worker >= ck->sh->workers ||
        r->seq >= ST_SEQ_BITS) {
        problem(ck, &ck->tot.bad_seal, "lease %u record %llu: half-written or foreign record",
                lease, (unsigned long long)pos);
        return;
    }
    uint64_t writer = ((uint64_t)r->worker << 32) | r->incarnation;
    if (r->token < ls->last_token)
        problem(ck, &ck->tot.order,
                "lease %u record %llu: token %llu by w%u.%u logged after token %llu", lease,
                (unsigned long long)pos, (unsigned long long)r->token, r->worker, r->incarnation,
                (unsigned long long)ls->last_token);
    else if (r->token == ls->last_token && writer != ls->last_writer)
        problem(ck, &ck->tot.shared_token,
                "lease %u record %llu: token %llu used by w%u.%u and w%u.%u", lease,
                (unsigned long long)pos, (unsigned long long)r->token, r->worker, r->incarnation,
                (unsigned)(ls->last_writer >> 32), (unsigned)ls->last_writer);
    if (r->token >= ls->last_token) {
        ls->last_token = r->token;
        ls->last_writer = writer;
        ls->gen = r->gen;
    }
    uint64_t *lb = logged_bits(ck, r->worker);
    lb[r->seq / 64] |= UINT64_C(1) << (r->seq % 64);
}

void st_checker_record(struct st_checker *ck, unsigned lease, uint64_t pos, const struct st_rec *r)
{
    if (lease >= ck->sh->leases) {
        problem(ck, &ck->tot.bad_seal, "record %llu: lease %u is not one of the campaign's",
                (unsigned long long)pos, lease);
        return;
    }
    check_record(ck, lease, pos, r);
}

static void consume(struct st_checker *ck, unsigned lease)
{
    struct st_log *log = st_log_at(ck->sh, lease);
    uint64_t n = atomic_load_explicit(&log->n, memory_order_acquire);
    uint64_t c = atomic_load_explicit(&log->consumed, memory_order_relaxed);
    for (; c < n; c++) {
        struct st_rec r = log->rec[c % ST_LOG_CAP];
        check_record(ck, lease, c, &r);
    }
    atomic_store_explicit(&log->consumed, c, memory_order_release);
}

static void check_read(struct st_checker *ck, unsigned reader, const struct st_rrec *r)
{
    struct reader_state *rs = &ck->rs[reader];
    ck->tot.guarded_reads++;
    if (r->seal != st_rrec_seal(r) || r->reader != reader || r->lease >= ck->sh->leases) {
        problem(ck, &ck->tot.bad_seal, "reader %u: half-written or foreign guarded-read record",
                reader);
        return;
    }
    if (r->seen > r->gen)
        problem(ck, &ck->tot.shared_newer,
                "lease %u: reader %u (token %llu, gen %llu) saw a write by token %llu, newer "
                "than its gen, while valid",
                r->lease, reader, (unsigned long long)r->token, (unsigned long long)r->gen,
                (unsigned long long)r->seen);
    else if (rs->any && rs->hold == r->hold && rs->token == r->token && rs->seen != r->seen)
        problem(ck, &ck->tot.shared_overlap,
                "lease %u: a write by token %llu was accepted while reader %u held token %llu "
                "(it had seen token %llu)",
                r->lease, (unsigned long long)r->seen, reader, (unsigned long long)r->token,
                (unsigned long long)rs->seen);
    rs->any = 1;
    rs->hold = r->hold;
    rs->token = r->token;
    rs->seen = r->seen;
}

static void consume_reads(struct st_checker *ck, unsigned reader)
{
    struct st_rlog *rl = st_rlog_at(ck->sh, reader);
    uint64_t n = atomic_load_explicit(&rl->n, memory_order_acquire);
    uint64_t c = atomic_load_explicit(&rl->consumed, memory_order_relaxed);
    for (; c < n; c++) {
        struct st_rrec r = rl->rec[c % ST_RLOG_CAP];
        check_read(ck, reader, &r);
    }
    atomic_store_explicit(&rl->consumed, c, memory_order_release);
    ck->tot.overflow += atomic_load_explicit(&rl->overflow, memory_order_relaxed);
}

static void iv_report(void *arg, const char *msg, int stopped)
{
    struct st_checker *ck = arg;
    problem(ck, &ck->tot.interval_overlap, "%s", msg);
    ck->tot.interval_stopped += stopped != 0;
}

static void step(struct st_checker *ck, int force)
{
    struct st_shared *sh = ck->sh;
    uint64_t snap[ST_WORKERS_MAX];
    /* Acknowledgements first: each was published after its record, so every
     * record they name is in the logs by the time those are read below. */
    for (unsigned w = 0; w < sh->workers; w++)
        snap[w] = atomic_load_explicit(&sh->w[w].acked_hi, memory_order_acquire);
    uint64_t overflow = 0;
    for (unsigned l = 0; l < sh->leases; l++) {
        consume(ck, l);
        overflow += atomic_load_explicit(&st_log_at(sh, l)->overflow, memory_order_relaxed);
    }
    uint64_t iv_overflow;
    ck->tot.intervals = st_ivcheck_step(ck->iv, iv_report, ck, &iv_overflow);
    overflow += iv_overflow;
    ck->tot.overflow = overflow + ck->incomplete;
    if (ck->feed) {
        int rc = ck->feed(ck->feed_arg, ck, force);
        ck->tot.overflow = overflow + ck->incomplete;
        if (rc != 0)
            return; /* not in step with the acknowledgements: check them later */
    }
    for (unsigned r = 0; r < sh->readers; r++)
        consume_reads(ck, r);
    if (force || ++ck->steps % 128 == 0) /* removals: tokens per generation */
        st_gentok_check(sh);
    for (unsigned w = 0; w < sh->workers; w++) {
        const uint64_t *lb = logged_bits(ck, w);
        for (uint64_t s = ck->verified[w]; s < snap[w]; s++)
            if (!bit(lb, s) && acked(ck, w, s))
                problem(ck, &ck->tot.lost, "w%u write %llu acknowledged but not in the log", w,
                        (unsigned long long)s);
        if (snap[w] > ck->verified[w])
            ck->verified[w] = snap[w];
    }
}

void st_checker_step(struct st_checker *ck)
{
    step(ck, 0);
}

static void table_report(void *arg, const char *msg)
{
    struct st_checker *ck = arg;
    problem(ck, &ck->tot.table, "table check: %s", msg);
}

static void final_lease(struct st_checker *ck, shl_table *t, unsigned l)
{
    char name[ST_LEASE_NAME];
    st_lease_name(l, name);
    struct lease_state *ls = &ck->ls[l];
    shl_lease_info in;
    int rc = shl_stat(t, name, &in);
    /* Written only on a table since removed: nothing of it on this one. */
    if (rc == SHL_ENOENT && (ls->records == 0 || ls->gen != atomic_load(&ck->sh->gen)))
        return;
    if (rc != SHL_OK) {
        problem(ck, &ck->tot.table, "%s: shl_stat: %s", name, shl_errname(rc));
        return;
    }
    /* A lease last logged on a table since removed: this table's tokens are
     * compared with that one's by st_gentok_check() (bound leases add their
     * names to a new table before any acquisition: token 0 here). */
    if (in.token < ls->last_token && ls->gen == atomic_load(&ck->sh->gen))
        problem(ck, &ck->tot.table, "%s: table token %llu below logged token %llu", name,
                (unsigned long long)in.token, (unsigned long long)ls->last_token);
    if (in.state < SHL_STATE_FREE || in.state > SHL_STATE_ORPHANED)
        problem(ck, &ck->tot.table, "%s: unexpected state %d", name, in.state);
    uint64_t v[ST_VALUE_WORDS];
    size_t len = 0;
    uint64_t vtok = 0;
    unsigned words = ck->sh->value_words;
    rc = shl_read(t, name, v, words * 8, &len, &vtok);
    if (rc != SHL_OK) {
        problem(ck, &ck->tot.table, "%s: shl_read: %s", name, shl_errname(rc));
        return;
    }
    if (len == 0 && vtok == 0)
        return;
    struct st_rec r;
    if (len != words * 8 || st_value_parse(v, words, &r) != 0) {
        problem(ck, &ck->tot.table, "%s: value is not one whole write (%zu bytes)", name, len);
        return;
    }
    if (r.token != vtok || vtok > in.token || r.lease != l || r.worker >= ck->sh->workers ||
        r.seq >= ST_SEQ_BITS || !bit(logged_bits(ck, r.worker), r.seq))
        problem(ck, &ck->tot.table,
                "%s: value (token %llu, w%u write %llu) does not match the log (value token "
                "%llu, lease token %llu)",
                name, (unsigned long long)r.token, r.worker, (unsigned long long)r.seq,
                (unsigned long long)vtok, (unsigned long long)in.token);
}

static void count_report(void *arg, const char *msg)
{
    (void)msg;
    (*(uint64_t *)arg)++;
}

/*
 * A worker killed inside a critical section leaves its lock for the next
 * locker to recover (see shm/mutex.h); at the end of a campaign nobody may
 * have come yet, and shl_check() rightly reports the recovery as pending.
 * Those are counted, not held against the library; then the checker is that
 * next operation: on each lease a release by an owner that never held it
 * (takes the lock, recovers, is refused, changes nothing), and for the table
 * lock the acquisition of one more name. What shl_check() reports after that
 * is a violation.
 */
static void settle(struct st_checker *ck, shl_table *t)
{
    uint64_t pending = 0;
    shl_check(t, count_report, &pending);
    ck->tot.settled = pending;
    for (unsigned l = 0; l < ck->sh->leases; l++) {
        char name[ST_LEASE_NAME];
        st_lease_name(l, name);
        int rc = shl_release(t, name, "stress-checker", UINT64_MAX);
        /* A table made again after a removal may never have had the lease. */
        if (rc == SHL_ENOENT && atomic_load(&ck->sh->gen) != 0 &&
            ck->ls[l].gen != atomic_load(&ck->sh->gen))
            continue;
        if (rc != SHL_ELOST)
            problem(ck, &ck->tot.table, "%s: the next operation after the campaign: %s", name,
                    shl_errname(rc));
    }
    if (pending) {
        uint64_t tok;
        int rc = shl_acquire(t, "stress-settle", "stress-checker", 1, &tok);
        if (rc != SHL_OK && rc != SHL_EBUSY)
            problem(ck, &ck->tot.table, "adding a name after the campaign: %s", shl_errname(rc));
    }
}

void st_checker_final(struct st_checker *ck, shl_table *t, uint64_t kills)
{
    struct st_shared *sh = ck->sh;
    step(ck, 1);
    /* Records without an acknowledgement: the writer died between the two.
     * Each kill can leave at most one. */
    uint64_t unacked = 0;
    for (unsigned w = 0; w < sh->workers; w++) {
        uint64_t end = atomic_load(&sh->w[w].next_seq);
        if (end > ST_SEQ_BITS)
            end = ST_SEQ_BITS;
        const uint64_t *lb = logged_bits(ck, w);
        _Atomic uint64_t *ab = st_acked_bits(sh, w);
        for (uint64_t i = 0; i < (end + 63) / 64; i++)
            unacked += (uint64_t)__builtin_popcountll(lb[i] & ~atomic_load(&ab[i]));
    }
    ck->tot.unacked = unacked;
    if (unacked > kills) {
        uint64_t dummy = 0;
        problem(ck, &dummy,
                "%llu logged writes were never acknowledged, but only %llu kills (and "
                "unanswered writes)",
                (unsigned long long)unacked, (unsigned long long)kills);
    }
    for (unsigned l = 0; l < sh->leases; l++)
        final_lease(ck, t, l);
    settle(ck, t);
    uint64_t before = ck->tot.table;
    int rc = shl_check(t, table_report, ck);
    ck->tot.table_checked = 1;
    if (rc != SHL_OK && ck->tot.table == before)
        problem(ck, &ck->tot.table, "table check: %s", shl_errname(rc));
}

uint64_t st_violations_now(struct st_shared *sh, const struct st_checker *ck,
                           const struct st_chaos_totals *tot)
{
    static const enum st_wc bad[] = {ST_C_LATE_ACCEPT, ST_C_BAD_VALUE,      ST_C_STALE_ACCEPT,
                                     ST_C_LOST_EXCL,   ST_C_TOKEN_REUSE,    ST_C_LATE_LOCKED,
                                     ST_C_ASLEEP,      ST_C_REMOVED_ACCEPT, ST_C_GONE_ACCEPT};
    uint64_t n = ck->tot.violations + atomic_load(&sh->torn) + tot->check_problems +
                 atomic_load(&sh->token_below_removed) + atomic_load(&sh->wipe_strays);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        n += st_worker_count(sh, bad[i]);
    return n;
}

uint64_t st_checker_violations(const struct st_checker *ck)
{
    return ck->tot.violations;
}

void st_checker_totals(const struct st_checker *ck, struct st_check_totals *out)
{
    *out = ck->tot;
}

const char *st_checker_problem(const struct st_checker *ck, unsigned i)
{
    return i < ck->nproblems ? ck->problems[i] : NULL;
}
