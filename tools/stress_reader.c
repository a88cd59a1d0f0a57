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
 * each guarded read logs what it saw (stress.h), for the checker.
 */
#include <stdlib.h>
#include <unistd.h>

#include "stress.h"

struct guarded {
    struct st_shared *sh;
    struct st_rlog *rl;
    struct st_rrec r;
};

/* Under the lease's lock, after the shared holder's check passed: the
 * newest logged write, and a record of this read. */
static void guarded_read(void *arg)
{
    struct guarded *g = arg;
    struct st_log *log = st_log_at(g->sh, g->r.lease);
    uint64_t n = atomic_load_explicit(&log->n, memory_order_acquire);
    g->r.seen = n ? log->rec[(n - 1) % ST_LOG_CAP].token : 0;
    uint64_t k = atomic_load_explicit(&g->rl->n, memory_order_relaxed);
    if (k - atomic_load_explicit(&g->rl->consumed, memory_order_acquire) >= ST_RLOG_CAP) {
        atomic_fetch_add_explicit(&g->rl->overflow, 1, memory_order_relaxed);
        return;
    }
    g->r.seal = st_rrec_seal(&g->r);
    g->rl->rec[k % ST_RLOG_CAP] = g->r;
    atomic_store_explicit(&g->rl->n, k + 1, memory_order_release);
}

/* One shared hold of lease l: a few guarded reads, then a release (or, now
 * and then, the lease left to expire). */
static void shared_hold(shl_table *t, struct st_shared *sh, unsigned id, unsigned l,
                        const char *name, uint64_t *rng, uint64_t hold)
{
    char owner[16] = "reader-";
    unsigned n = 7, v = id;
    char dig[12];
    unsigned d = 0;
    do {
        dig[d++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (d)
        owner[n++] = dig[--d];
    owner[n] = 0;
    struct guarded g = {sh, st_rlog_at(sh, id), {0}};
    g.r.lease = l;
    g.r.reader = id;
    g.r.hold = hold;
    int rc = shl_acquire_shared(t, name, owner, sh->ttl_ns, &g.r.token, &g.r.gen);
    if (rc == SHL_EBUSY) {
        atomic_fetch_add_explicit(&sh->shared_busy, 1, memory_order_relaxed);
        return;
    }
    if (rc != SHL_OK) {
        atomic_fetch_add(&sh->reader_errors, 1);
        return;
    }
    atomic_fetch_add_explicit(&sh->shared_holds, 1, memory_order_relaxed);
    unsigned reads = 1 + (unsigned)(st_rand(rng) % 4);
    for (unsigned i = 0; i < reads; i++) {
        rc = shl_guard_shared(t, name, owner, g.r.token, guarded_read, &g);
        if (rc != SHL_OK && rc != SHL_ELOST) /* lost: revoked, or expired */
            atomic_fetch_add(&sh->reader_errors, 1);
        if (rc != SHL_OK)
            return;
        st_sleep_ns(st_rand(rng) % (sh->ttl_ns / 8 + 1));
    }
    if (st_rand(rng) % 8 != 0) {
        rc = shl_release(t, name, owner, g.r.token);
        if (rc != SHL_OK && rc != SHL_ELOST)
            atomic_fetch_add(&sh->reader_errors, 1);
    }
}

void st_reader_main(const struct st_config *c, struct st_shared *sh, unsigned id)
{
    shl_table *t;
    uint64_t *seen = calloc(sh->leases, sizeof *seen);
    char(*names)[ST_LEASE_NAME] = calloc(sh->leases, sizeof *names);
    if (!seen || !names || shl_open(c->table, NULL, &t) != SHL_OK) {
        atomic_fetch_add(&sh->reader_errors, 1);
        _exit(3);
    }
    for (unsigned i = 0; i < sh->leases; i++)
        st_lease_name(i, names[i]);
    uint64_t rng = c->seed ^ UINT64_C(0x72656164) ^ ((uint64_t)id << 32);
    for (uint64_t n = 1; !atomic_load_explicit(&sh->stop, memory_order_relaxed); n++) {
        if (n % 16 == 0)
            st_sleep_ns(50000); /* leave the workers some of a small machine */
        unsigned l = (unsigned)(st_rand(&rng) % sh->leases);
        if (n % 64 == 0 && !c->etcd) { /* guarded shared reads: shared-memory tables only */
            shared_hold(t, sh, id, l, names[l], &rng, n);
            continue;
        }
        uint64_t v[ST_VALUE_WORDS];
        size_t len = 0;
        uint64_t vtok = 0;
        unsigned words = sh->value_words;
        int rc = shl_read(t, names[l], v, words * 8, &len, &vtok);
        if (rc == SHL_ENOENT)
            continue;
        if (rc == SHL_EUNAVAIL && c->etcd) { /* a member away: counted, not an error */
            atomic_fetch_add(&sh->unavail, 1);
            continue;
        }
        if (rc != SHL_OK) {
            atomic_fetch_add(&sh->reader_errors, 1);
            continue;
        }
        atomic_fetch_add_explicit(&sh->reads, 1, memory_order_relaxed);
        if (len == 0 && vtok == 0)
            continue;
        struct st_rec r;
        if (len != words * 8 || st_value_parse(v, words, &r) != 0 || r.token != vtok ||
            r.lease != l || vtok < seen[l])
            atomic_fetch_add(&sh->torn, 1);
        else
            seen[l] = vtok;
    }
    shl_close(t);
    free(seen);
    free(names);
    _exit(0);
}
