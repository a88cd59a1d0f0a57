/*
 * lib/kind_shm/inspect.c - detailed snapshots of leases for the inspector.
 *
 * A snapshot copies a whole slot (and a value preview) under the slot's
 * seqlock, never under its mutex: a process stopped inside the critical
 * section cannot make a reader wait. When a change stays in flight for longer
 * than SNAP_WAIT_NS, the last copy is returned marked unstable, together with
 * who holds the lock.
 *
 * The shared-memory halves of shl_inspect(), shl_inspect_slot() and
 * shl_foreach() (their entry points, with the checks both kinds share, are
 * in lib/inspect.c), the slot snapshot that check and repair copy slots
 * with, and the public state of a holder (shl__state_of()) that shl_stat()
 * reports too.
 */
#include <time.h>

#include "shm_kind.h"

#define SNAP_WAIT_NS (UINT64_C(5) * 1000000) /* how long to wait for a writer */

/* A detail reports the segment's ops and counters as they are, in the
 * public codes (named by lib/code_names.c). */
static_assert(SHL_OP_ACQUIRE == SHL__OP_ACQUIRE && SHL_OP_WRITE == SHL__OP_WRITE &&
                  SHL_OP_REJECT == SHL__OP_REJECT && SHL_OP_RECOVER == SHL__OP_RECOVER &&
                  SHL_OP_SHARED == SHL__OP_SHARED && SHL_OP_SHARED + 1 == SHL__OP_COUNT,
              "public and segment op kinds agree");
static_assert(SHL_COUNTER_COUNT == SHL__C_COUNT && SHL_COUNTER_REJ_OWNER == SHL__C_REJ_OWNER,
              "public and segment counters agree");
static_assert(SHL_HISTORY_MAX == SHL__HIST_LEN, "history length");

/* The kernel's answers about holders' handles (shl__handle_alive(), one
 * fcntl each) during one scan: a table whose leases a few processes hold
 * asks about the same handles again and again, a quarter of ls's time on a
 * table of held leases. An answer is reused for MEMO_NS at most, so a
 * holder that dies meanwhile shows as HELD for that long, as it would had
 * it died just after the question. Direct-mapped by alive id. */
#define MEMO_NS   UINT64_C(10000000)
#define MEMO_WAYS 16

struct alive_memo {
    uint64_t live[MEMO_WAYS], at[MEMO_WAYS];
    int verdict[MEMO_WAYS];
};

static int alive_of(const shl_table *t, struct alive_memo *m, uint64_t live)
{
    if (!m || live == 0)
        return shl__handle_alive(t, live);
    unsigned w = (unsigned)(live % MEMO_WAYS);
    uint64_t mono = shl__mono_ns();
    if (m->live[w] == live && mono - m->at[w] < MEMO_NS)
        return m->verdict[w];
    int v = shl__handle_alive(t, live);
    m->live[w] = live;
    m->at[w] = mono;
    m->verdict[w] = v;
    return v;
}

/* shl__state_of(), its liveness asked through memo m (NULL: none). */
static int state_of(const shl_table *t, const struct shl__holder *h, uint64_t now,
                    struct alive_memo *m)
{
    if (h->state == SHL__ST_REVOKED || h->state == SHL__ST_RETIRED)
        return SHL_STATE_REVOKED;
    if (h->state != SHL__ST_HELD)
        return SHL_STATE_FREE;
    if (now >= h->expiry)
        return SHL_STATE_EXPIRED;
    return alive_of(t, m, h->live) == SHL__DEAD ? SHL_STATE_ORPHANED : SHL_STATE_HELD;
}

int shl__state_of(const shl_table *t, const struct shl__holder *h, uint64_t now)
{
    return state_of(t, h, now, NULL);
}

static void nap(void)
{
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

/* Copies the records of the groups slot s names (as just copied into
 * out->slot) into the image. Those of a ref that names none (or one out of
 * range) are left as they are: the accessors (shl__tsh(), shl__twq())
 * take such a ref for none and never read them, and a copy's refs are only
 * ever cleared (shl__pool_take() refuses a copy). Not clearing them saves
 * some 5 KB of stores per slot, which a scan of a big table pays a million
 * times. */
static void copy_groups(const shl_table *t, struct shl__slot_image *out)
{
    for (uint32_t r = 0; r < SHL__SH_REFS; r++) {
        uint32_t ref = out->slot.sh_ref[r], at = r * SHL__SH_GROUP;
        if (ref && ref <= t->geom.sh_groups) {
            const struct shl__sh_group *g = shl__tsh_group(t, ref - 1);
            shl__copy_from_shared(&out->sh[at], g->sh, sizeof g->sh);
            shl__copy_from_shared(&out->sh_dead_token[at], g->dead_token, sizeof g->dead_token);
            shl__copy_from_shared(&out->sh_dead_seen[at], g->dead_seen, sizeof g->dead_seen);
        }
    }
    for (uint32_t r = 0; r < SHL__WQ_REFS; r++) {
        uint32_t ref = out->slot.wq_ref[r], at = r * SHL__WQ_GROUP;
        if (ref && ref <= t->geom.wq_groups)
            shl__copy_from_shared(&out->wq[at], shl__twq_group(t, ref - 1)->wq,
                                  SHL__WQ_GROUP * sizeof out->wq[0]);
    }
}

/* Copies the headers of slot s's value buffers (its own, and the spare
 * that the copy's `vref` names) and the spare's offset for `vcur`. */
static void copy_values(const shl_table *t, const struct shl__slot *s, struct shl__slot_image *out)
{
    shl__copy_from_shared(&out->vh[0], shl__tvhome(t, s), sizeof out->vh[0]);
    uint32_t r = out->slot.vref;
    out->vrel_spare = 0;
    if (r && r <= t->geom.vb_count) {
        shl__copy_from_shared(&out->vh[1], shl__tvb(t, r - 1), sizeof out->vh[1]);
        out->vrel_spare = shl__tvb_rel(t, s, r - 1);
    }
}

/* Copies the history entries written so far (all of them once the ring has
 * gone round: hist_next as just copied into out->slot) and zeroes the rest,
 * which in the segment are still zero: a lease with few events costs no
 * read of the other entries' lines (704 bytes a lease by default). */
static void copy_history(const shl_table *t, const struct shl__slot *s, struct shl__slot_image *out)
{
    uint32_t len = t->geom.history, next = out->slot.hist_next;
    uint32_t n = next < len ? next : len;
    shl__copy_from_shared(out->hist, shl__slot_hist(s), n * sizeof out->hist[0]);
    memset(&out->hist[n], 0, sizeof out->hist - n * sizeof out->hist[0]);
}

int shl__slot_snapshot(const shl_table *t, const struct shl__slot *s, struct shl__slot_image *out,
                       unsigned char *preview, uint32_t pcap)
{
    uint64_t deadline = 0;
    uint32_t value_size = t->value_size;
    for (unsigned i = 0;; i++) {
        uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
        shl__copy_from_shared(&out->slot, s, sizeof out->slot);
        copy_history(t, s, out);
        copy_groups(t, out);
        copy_values(t, s, out);
        const struct shl__vhdr *vh = shl__tvcur(t, &out->slot);
        uint32_t len = vh ? vh->len : 0;
        uint32_t n = len < pcap ? len : pcap;
        if (n > value_size)
            n = value_size;
        if (n)
            shl__copy_from_shared(
                preview, shl__vdata(shl__tvat(t, s, out->slot.vcur & ~SHL__VCUR_FLAGS)), n);
        atomic_thread_fence(memory_order_acquire);
        if (!(q & 1) && atomic_load_explicit(&s->seq, memory_order_relaxed) == q)
            return 1;
        if (i < 64)
            continue;
        uint64_t now = shl__mono_ns();
        if (!deadline)
            deadline = now + SNAP_WAIT_NS;
        else if (now > deadline)
            return 0;
        nap();
    }
}

static int lock_state(const pthread_mutex_t *m, int32_t *pid)
{
    switch (shl__mutex_peek(m, pid)) {
    case SHL__MX_FREE:
        *pid = 0;
        return SHL_LOCK_FREE;
    case SHL__MX_HELD:
        return SHL_LOCK_HELD;
    case SHL__MX_DEAD:
        return SHL_LOCK_DEAD;
    default:
        return SHL_LOCK_BROKEN;
    }
}

/* Zeroes the detail that `d` holds from the last fill here (after one
 * memset of the whole): the fields before the events, and of the arrays
 * the entries that fill counted. A scan fills one detail a million times,
 * and most of its 4.6 KB are arrays that most leases leave empty. */
static void detail_zero_again(shl_lease_detail *d)
{
    uint32_t ne = d->nevents < SHL_HISTORY_MAX ? d->nevents : SHL_HISTORY_MAX;
    uint32_t ns = d->nshared < SHL_SHARED_MAX ? d->nshared : SHL_SHARED_MAX;
    uint32_t np = d->preview_len < SHL_PREVIEW_MAX ? d->preview_len : SHL_PREVIEW_MAX;
    memset(d, 0, offsetof(shl_lease_detail, events));
    memset(d->events, 0, ne * sizeof d->events[0]);
    d->preview_len = 0;
    memset(d->preview, 0, np);
    d->token_last = 0;
    d->nshared = 0;
    memset(d->shared, 0, ns * sizeof d->shared[0]);
    d->history_partial = 0;
}

/* Fills detail d, zeroed by the caller, from a slot copy (the slot of a
 * struct shl__slot_image; preview and `stable` left to the caller);
 * liveness is asked through `t`, and memo m (NULL: none). */
static void detail_fill(const shl_table *t, const struct shl__slot *c, uint32_t slot, uint64_t now,
                        shl_lease_detail *d, struct alive_memo *m)
{
    uint32_t nl = c->name_len <= SHL__NAME_MAX ? c->name_len : SHL__NAME_MAX;
    memcpy(d->name, c->name, nl);
    d->slot = slot;
    const struct shl__holder *cur = &c->cur;
    shl_lease_info *in = &d->info;
    uint32_t ol = cur->owner_len <= SHL_OWNER_MAX ? cur->owner_len : SHL_OWNER_MAX;
    memcpy(in->owner, cur->owner, ol);
    in->token = cur->token;
    in->expiry_ns = cur->expiry;
    in->since_ns = cur->since;
    in->now_ns = now;
    in->pid = cur->pid;
    in->waiters = shl__waiters_count(t, c);
    const struct shl__vhdr *vh = shl__tvcur(t, c);
    in->value_len = vh ? vh->len : 0;
    in->value_token = vh ? vh->token : 0;
    in->state = state_of(t, cur, now, m);
    if (in->state == SHL_STATE_HELD || in->state == SHL_STATE_ORPHANED)
        in->remaining_ns = cur->expiry - now;
    d->lock = lock_state(&c->lock, &d->lock_pid);
    if (d->lock == SHL_LOCK_HELD && c->locker)
        d->lock_pid = c->locker; /* the pid, where the lock word has the tid */
    d->intent_armed = c->intent_armed != 0;
    d->intent_op = (int)c->meta.op;
    d->intent_token = c->intent.token;
    d->heartbeat_ns = c->heartbeat;
    d->renewer_stalled = shl__heartbeat_stalled(c, now);
    d->dead_seen_ns = c->dead_token == cur->token && cur->token ? c->dead_seen : 0;
    memcpy(d->counters, c->count, sizeof d->counters);
    d->token_last = c->tok_last > cur->token ? c->tok_last : cur->token;
    for (uint32_t i = 0; i < SHL__SHARED_MAX; i++) {
        const struct shl__holder *h = shl__tsh(t, c, i);
        if (!((c->shared >> i) & 1) || !h || h->state != SHL__ST_HELD)
            continue;
        shl_shared_holder *o = &d->shared[d->nshared++];
        uint32_t hl = h->owner_len <= SHL_OWNER_MAX ? h->owner_len : SHL_OWNER_MAX;
        memcpy(o->owner, h->owner, hl);
        o->token = h->token;
        o->expiry_ns = h->expiry;
        o->since_ns = h->since;
        o->pid = h->pid;
        o->state = state_of(t, h, now, m);
        if (o->state == SHL_STATE_HELD || o->state == SHL_STATE_ORPHANED) {
            o->remaining_ns = h->expiry - now;
            in->shared++;
        }
    }
    d->events_total = c->hist_next;
    uint32_t len = t->geom.history;
    uint32_t n = c->hist_next < len ? c->hist_next : len;
    d->nevents = n;
    for (uint32_t i = 0; i < n; i++) {
        const struct shl__event *e = &shl__slot_hist(c)[(c->hist_next - n + i) % len];
        shl_event_info *o = &d->events[i];
        o->time_ns = e->time;
        o->token = e->token;
        o->pid = e->pid;
        o->op = e->op;
        o->why = e->why;
        /* Up to the NUL: the bytes after it may be an older entry's. */
        size_t hl = strnlen(e->owner, SHL_OWNER_MAX);
        memcpy(o->owner, e->owner, hl);
        memset(o->owner + hl, 0, sizeof o->owner - hl);
        for (size_t j = 0; j < hl; j++) /* keep it printable */
            if (o->owner[j] < ' ' || o->owner[j] > '~')
                o->owner[j] = '?';
    }
}

/* shl_inspect_slot() of a slot below nslots into `d`, zeroed first whole;
 * or, in a scan (memo: its answers about handles), as detail_zero_again()
 * when d holds the scan's last lease (or zeros). */
static void inspect_slot(shl_table *t, uint32_t slot, shl_lease_detail *d, struct alive_memo *scan)
{
    struct shl__slot_image copy;
    unsigned char pv[SHL_PREVIEW_MAX];
    int stable = shl__slot_snapshot(t, shl__tslot(t, slot), &copy, pv, sizeof pv);
    if (scan)
        detail_zero_again(d);
    else
        memset(d, 0, sizeof *d);
    detail_fill(t, &copy.slot, slot, shl__now(t), d, scan);
    d->stable = stable;
    d->preview_len = d->info.value_len < SHL_PREVIEW_MAX ? d->info.value_len : SHL_PREVIEW_MAX;
    if (d->preview_len > t->value_size)
        d->preview_len = t->value_size;
    memcpy(d->preview, pv, d->preview_len);
}

int shl__shm_inspect_slot(shl_table *t, uint32_t slot, shl_lease_detail *d)
{
    if (slot >= shl__tnslots(t))
        return SHL_ENOENT;
    inspect_slot(t, slot, d, NULL);
    return SHL_OK;
}

int shl__shm_inspect(shl_table *t, const struct shl__key *k, shl_lease_detail *d)
{
    struct shl__slot *s = shl__find(t, k);
    if (!s)
        return SHL_ENOENT;
    uint32_t slot = (uint32_t)(((char *)s - (char *)shl__tslot(t, 0)) / t->geom.slot_stride);
    return shl__shm_inspect_slot(t, slot, d);
}

/* Asks for the lines of slot s ahead of its snapshot: a scan of a table
 * larger than the caches waits on memory for each slot's lines, and can
 * have the next slot's on the way while it copies and hands over this
 * one. Only the slot: its history and value lines are read only when used. */
static void prefetch_slot(const struct shl__slot *s)
{
    for (size_t at = 0; at < sizeof *s; at += SHL__CACHELINE)
        __builtin_prefetch((const char *)s + at);
}

int shl__shm_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d), void *arg)
{
    shl_lease_detail d;
    memset(&d, 0, sizeof d);
    struct alive_memo memo = {{0}, {0}, {0}};
    /* Bounded by the capacity read at open: a damaged nslots cannot make
     * this loop run past the table. */
    uint32_t n = shl__tnslots(t);
    for (uint32_t i = 0; i < n; i++) {
        if (i + 1 < n)
            prefetch_slot(shl__tslot(t, i + 1));
        inspect_slot(t, i, &d, &memo);
        int rc = fn(arg, &d);
        if (rc)
            return rc;
    }
    return SHL_OK;
}
