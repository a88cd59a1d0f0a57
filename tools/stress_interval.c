/*
 * tools/stress_interval.c - interval exclusion: the holders log the
 * intervals in which they surely held a lease (stress.h says how each end
 * is taken), and the checker finds any two that overlap where the lease
 * allows only one: two exclusive holders, or an exclusive and a shared one.
 *
 * Unlike the evidence log, this needs no write: a library that lets a reader
 * in beside a valid writer is caught even while that writer is stopped and
 * writes nothing, and one that hands a lease over early even when neither
 * holder writes in the overlap.
 *
 * A removal of the table (--remove-rate) ends the holds on it as a revoke
 * does: at the start of a removal by shl_unlink(), at the end of a plain
 * unlink plus one renew interval (the time the holders have to notice).
 *
 * What it can miss: a hold whose interval is empty (the holder was stopped
 * or descheduled past its ttl inside the acquire call, or a revoke may have
 * touched it, or it died without the controller's kill), and an overlap
 * shorter than the holders' own clock reads around their calls. Holds kept
 * by a renewer thread count only up to their first ttl (the thread's renews
 * are not seen here). Two holds on tables of which the older was removed by a
 * plain unlink are not compared: they may overlap until its holders looked,
 * and what they did after that is judged by the workers (removed_accepted).
 *
 * The checker keeps, per lease, the intervals that a later one could still
 * overlap: every interval still to come starts at or after the lowest of the
 * processes' lower bounds (`lb`, stored before each acquire call and read
 * before the rings), so one that ended before that is dropped.
 */
#include <stdio.h>
#include <stdlib.h>

#include "stress.h"

void st_iv_lb(struct st_ivlog *l, uint64_t now)
{
    atomic_store_explicit(&l->lb, now, memory_order_release);
}

void st_iv_begin(struct st_ivlog *l, const struct st_iv *iv)
{
    l->cur = *iv;
    atomic_store_explicit(&l->open, 1, memory_order_release);
}

void st_iv_extend(struct st_ivlog *l, uint64_t end, uint64_t rmark, uint64_t rmark_at)
{
    if (!atomic_load_explicit(&l->open, memory_order_relaxed) || end <= l->cur.end)
        return;
    l->cur.end = end;
    l->cur.rmark = rmark;
    l->cur.rmark_at = rmark_at;
}

static void publish(struct st_ivlog *l, const struct st_iv *iv)
{
    uint64_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    if (n - atomic_load_explicit(&l->consumed, memory_order_acquire) >= ST_IV_CAP) {
        atomic_fetch_add_explicit(&l->overflow, 1, memory_order_relaxed);
        return;
    }
    l->rec[n % ST_IV_CAP] = *iv;
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
}

/* The interval cut where a revoke may have ended it: a revoke that changed
 * the lease's epoch since the holder's last mark (or was under way then)
 * landed after that mark was read. */
static void revoke_cut(struct st_shared *sh, struct st_iv *iv)
{
    uint64_t ep = atomic_load_explicit(&sh->revoke_epoch[iv->lease], memory_order_acquire);
    if ((ep != iv->rmark || (ep & 1)) && iv->end > iv->rmark_at)
        iv->end = iv->rmark_at;
}

static void close_at(struct st_shared *sh, struct st_ivlog *l, uint64_t end, uint32_t pauses)
{
    if (!atomic_load_explicit(&l->open, memory_order_relaxed))
        return;
    struct st_iv iv = l->cur;
    iv.stopped = pauses != iv.pauses;
    /* Not past now: a revoke still to come could end the hold before its
     * ttl, and the epoch is read only now. */
    uint64_t now = st_now_ns();
    if (end > now)
        end = now;
    if (end < iv.end)
        iv.end = end;
    /* A removal ends the hold as a revoke does (stress_removed.c). */
    uint64_t cut = st_gen_cut(sh, iv.gen);
    if (cut < iv.end)
        iv.end = cut;
    revoke_cut(sh, &iv);
    publish(l, &iv);
    atomic_store_explicit(&l->open, 0, memory_order_release);
}

void st_iv_cut(struct st_ivlog *l, uint64_t at)
{
    if (atomic_load_explicit(&l->open, memory_order_relaxed) && at < l->cur.end)
        l->cur.end = at;
}

void st_iv_end(struct st_shared *sh, struct st_ivlog *l, uint64_t end, uint32_t pauses)
{
    close_at(sh, l, end, pauses);
}

void st_iv_close_dead(struct st_shared *sh, struct st_ivlog *l, uint64_t kill_at, uint32_t pauses)
{
    uint64_t cut = atomic_load_explicit(&l->cut, memory_order_acquire);
    if (kill_at && (!cut || kill_at < cut))
        cut = kill_at;
    /* Died of something else than our kill: when is unknown, keep nothing. */
    close_at(sh, l, cut ? cut : 0, pauses);
    atomic_store_explicit(&l->cut, 0, memory_order_relaxed);
}

struct ivset {
    struct st_iv *v;
    size_t n, cap;
};

struct st_ivcheck {
    struct st_shared *sh;
    struct ivset *ls; /* per lease */
    uint64_t checked;
};

struct st_ivcheck *st_ivcheck_new(struct st_shared *sh)
{
    struct st_ivcheck *ic = calloc(1, sizeof *ic);
    if (!ic)
        return NULL;
    ic->sh = sh;
    ic->ls = calloc(sh->leases, sizeof *ic->ls);
    if (!ic->ls) {
        free(ic);
        return NULL;
    }
    return ic;
}

void st_ivcheck_free(struct st_ivcheck *ic)
{
    if (!ic)
        return;
    for (unsigned l = 0; l < ic->sh->leases; l++)
        free(ic->ls[l].v);
    free(ic->ls);
    free(ic);
}

static const char *kind_name(uint32_t k)
{
    return k == ST_IV_EXCL ? "exclusive" : "shared";
}

/* Checks iv against the kept intervals of its lease, then keeps it. */
static void check_one(struct st_ivcheck *ic, const struct st_iv *iv, st_iv_report_fn report,
                      void *arg)
{
    ic->checked++;
    if (iv->end <= iv->start || iv->lease >= ic->sh->leases)
        return;
    struct ivset *s = &ic->ls[iv->lease];
    for (size_t i = 0; i < s->n; i++) {
        const struct st_iv *o = &s->v[i];
        if (iv->kind != ST_IV_EXCL && o->kind != ST_IV_EXCL)
            continue;
        /* Two tables: after a plain unlink of the older one, its holders
         * may go on until they look (one renew interval, where its holds
         * were cut): an overlap there is the window the library allows. */
        uint32_t older = iv->gen < o->gen ? iv->gen : o->gen;
        if (iv->gen != o->gen && older < ic->sh->gens_cap &&
            atomic_load(&st_gen_at(ic->sh, older)->plain))
            continue;
        uint64_t lo = iv->start > o->start ? iv->start : o->start;
        uint64_t hi = iv->end < o->end ? iv->end : o->end;
        if (lo >= hi)
            continue;
        char msg[192];
        snprintf(msg, sizeof msg,
                 "lease %u: %s hold by token %llu and %s hold by token %llu both surely "
                 "held it for %.3f ms%s",
                 iv->lease, kind_name(o->kind), (unsigned long long)o->token, kind_name(iv->kind),
                 (unsigned long long)iv->token, (double)(hi - lo) / 1e6,
                 iv->stopped || o->stopped ? " (one was stopped meanwhile)" : "");
        const struct st_iv *x = iv->kind == ST_IV_EXCL ? iv : o;
        report(arg, msg, x->stopped && (iv->kind != ST_IV_EXCL || o->kind != ST_IV_EXCL));
        break; /* one report per interval */
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct st_iv *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return; /* not kept: a later overlap with it goes unseen */
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *iv;
}

uint64_t st_ivcheck_step(struct st_ivcheck *ic, st_iv_report_fn report, void *arg,
                         uint64_t *overflow)
{
    struct st_shared *sh = ic->sh;
    unsigned np = sh->workers + sh->readers;
    /* The bounds first: whatever is published after this was still to come,
     * and starts at or after its process's bound. */
    uint64_t floor = UINT64_MAX;
    for (unsigned p = 0; p < np; p++) {
        uint64_t lb = atomic_load_explicit(&st_ivlog_at(sh, p)->lb, memory_order_acquire);
        if (lb < floor)
            floor = lb;
    }
    *overflow = 0;
    for (unsigned p = 0; p < np; p++) {
        struct st_ivlog *l = st_ivlog_at(sh, p);
        uint64_t n = atomic_load_explicit(&l->n, memory_order_acquire);
        uint64_t c = atomic_load_explicit(&l->consumed, memory_order_relaxed);
        for (; c < n; c++) {
            struct st_iv iv = l->rec[c % ST_IV_CAP];
            check_one(ic, &iv, report, arg);
        }
        atomic_store_explicit(&l->consumed, c, memory_order_release);
        *overflow += atomic_load_explicit(&l->overflow, memory_order_relaxed);
    }
    for (unsigned i = 0; i < sh->leases; i++) {
        struct ivset *s = &ic->ls[i];
        size_t k = 0;
        for (size_t j = 0; j < s->n; j++)
            if (s->v[j].end > floor)
                s->v[k++] = s->v[j];
        s->n = k;
    }
    return ic->checked;
}
