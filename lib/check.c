/*
 * lib/check.c - verification of every invariant of a table or a segment
 * image: header and format word, mutex states, intent records, token and
 * expiry consistency, the hash index, history sanity.
 *
 * The same code runs over a live table (slots copied under their seqlocks,
 * never locked) and over a private copy of arbitrary bytes (an image from a
 * file, or a fuzzer's input). Nothing is trusted before it is checked: the
 * geometry is validated against the mapping's size before any slot is
 * addressed, and every field used as an index is bounded first.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

#define PID_LIMIT 4194304 /* the kernel's largest pid_max */

struct ck {
    void (*report)(void *arg, const char *problem);
    void *arg;
    unsigned problems;
    int live;     /* a mapped table: time and liveness can be judged */
    uint64_t now; /* table clock after the slot's copy (live only) */
};

__attribute__((format(printf, 2, 3))) static void problem(struct ck *c, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->problems++;
    if (c->report)
        c->report(c->arg, buf);
}

static void lock_problem(struct ck *c, const char *what, const pthread_mutex_t *m)
{
    int32_t tid;
    switch (shl__mutex_peek(m, &tid)) {
    case SHL__MX_DEAD:
        problem(c,
                "%s: its holder (tid %d) died inside the critical section; the next "
                "operation recovers it (or run shmlease repair)",
                what, (int)tid);
        break;
    case SHL__MX_BROKEN:
        problem(c, "%s: the lock is unrecoverable (ENOTRECOVERABLE); run shmlease repair", what);
        break;
    case SHL__MX_BADKIND:
        problem(c, "%s: the lock is not a robust process-shared mutex (damaged)", what);
        break;
    default:
        break;
    }
}

static void header_problem(void *arg, const char *text)
{
    problem(arg, "%s", text);
}

/* The header; 0 when the rest of the segment may be addressed. */
static int check_header(struct ck *c, const struct shl__hdr *h, size_t size, int *version)
{
    int addressable;
    int rc = shl__seg_check_header(h, size, SHL__UID_ANY, header_problem, c, &addressable);
    if (rc == SHL__SHM_EVERSION)
        *version = 1;
    if (!addressable)
        return -1;
    lock_problem(c, "table lock", &h->table_lock);
    int32_t tid;
    int ts = shl__mutex_peek(&h->table_lock, &tid);
    if (atomic_load_explicit(&h->add_armed, memory_order_acquire)) {
        uint32_t as = SHL__LD(h->add_slot), ab = SHL__LD(h->add_bucket);
        if (as >= h->capacity || ab >= h->index_size)
            problem(c, "header: armed name add names slot %u, bucket %u: out of range", as, ab);
        else if (ts == SHL__MX_FREE)
            problem(c, "header: a name add is armed but nobody is adding");
    }
    return 0;
}

/* Whether probing for slot i's name from its hash reaches bucket i + 1. */
static int reachable(const struct shl__hdr *h, const _Atomic uint32_t *idx, uint32_t i,
                     uint64_t hash)
{
    uint32_t mask = h->index_size - 1, b = (uint32_t)hash & mask;
    for (uint32_t n = 0; n < h->index_size; n++, b = (b + 1) & mask) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v == i + 1)
            return 1;
        if (v == 0)
            return 0;
    }
    return 0;
}

static void check_index(struct ck *c, const struct shl__hdr *h, uint32_t nslots)
{
    const _Atomic uint32_t *idx = shl__index(h);
    unsigned char *seen = calloc(nslots ? nslots : 1, 1);
    if (!seen) {
        problem(c, "index: out of memory while checking");
        return;
    }
    uint32_t used = 0;
    for (uint32_t b = 0; b < h->index_size; b++) {
        uint32_t v = atomic_load_explicit(&idx[b], memory_order_acquire);
        if (v == 0)
            continue;
        used++;
        if (v - 1 >= nslots) {
            /* A live add stores its bucket just before nslots: count again. */
            if (!(c->live && v - 1 <= atomic_load_explicit(&h->nslots, memory_order_acquire)))
                problem(c, "index: bucket %u names slot %u, beyond the %u used", b, v - 1, nslots);
        } else if (seen[v - 1]++) {
            problem(c, "index: slot %u appears in more than one bucket (again at %u)", v - 1, b);
        }
    }
    if (c->live) /* names added while the index was read */
        nslots = atomic_load_explicit(&h->nslots, memory_order_acquire);
    if (used > nslots + 1 || used > h->capacity)
        problem(c, "index: %u buckets in use for %u leases", used, nslots);
    free(seen);
}

static int name_ok(const struct shl__slot *s, struct shl__key *k, char *buf)
{
    if (s->name_len == 0 || s->name_len > SHL__NAME_MAX)
        return 0;
    memcpy(buf, s->name, s->name_len);
    buf[s->name_len] = '\0';
    return shl__key_lease(buf, k) == SHL_OK && k->len == s->name_len;
}

static void check_holder(struct ck *c, const char *who, const struct shl__slot *s,
                         uint32_t value_size, uint64_t floor)
{
    const struct shl__holder *h = &s->cur;
    if (h->state > SHL__ST_REVOKED)
        problem(c, "%s: unknown holder state %u", who, h->state);
    if (h->op >= SHL__OP_COUNT)
        problem(c, "%s: unknown holder op %u", who, h->op);
    if (h->owner_len > SHL__OWNER_MAX)
        problem(c, "%s: owner length %u exceeds %d", who, h->owner_len, SHL__OWNER_MAX);
    if (h->token == 0 && (h->state != SHL__ST_FREE || h->owner_len != 0))
        problem(c, "%s: never acquired (token 0) but state %u, owner length %u", who, h->state,
                h->owner_len);
    if (h->token != 0 &&
        (h->owner_len == 0 || h->since > h->expiry || h->pid <= 0 || h->pid > PID_LIMIT))
        problem(c,
                "%s: holder of token %llu is inconsistent (owner length %u, since %llu, "
                "expiry %llu, pid %d)",
                who, (unsigned long long)h->token, h->owner_len, (unsigned long long)h->since,
                (unsigned long long)h->expiry, (int)h->pid);
    if (c->live && h->token != 0 && h->since > c->now)
        problem(c, "%s: acquired at %llu, after the table's now %llu", who,
                (unsigned long long)h->since, (unsigned long long)c->now);
    if (s->vcur > 1)
        problem(c, "%s: value buffer index %u is neither 0 nor 1", who, s->vcur);
    for (int i = 0; i < 2; i++) {
        if (s->vh[i].len > value_size)
            problem(c, "%s: value buffer %d length %u out of range", who, i, s->vh[i].len);
        if (s->vh[i].token > h->token)
            problem(c, "%s: value buffer %d written by token %llu, above the lease's token %llu",
                    who, i, (unsigned long long)s->vh[i].token, (unsigned long long)h->token);
    }
    /* A floored table's first token is floor + 1: one acquisition per token
     * above the floor (a token below it wraps, and is reported). */
    if (s->count[SHL__C_ACQUIRE] != h->token - (h->token ? floor : 0))
        problem(c, "%s: %llu acquisitions counted for token %llu", who,
                (unsigned long long)s->count[SHL__C_ACQUIRE], (unsigned long long)h->token);
    if (s->count[SHL__C_EXPIRE] + s->count[SHL__C_RECLAIM] > s->count[SHL__C_ACQUIRE])
        problem(c, "%s: more takeovers and reclaims than acquisitions counted", who);
    if (s->dead_token > h->token)
        problem(c, "%s: death seen for token %llu, above the lease's token", who,
                (unsigned long long)s->dead_token);
}

static void check_history(struct ck *c, const char *who, const struct shl__slot *s)
{
    uint32_t n = s->hist_next < SHL__HIST_LEN ? s->hist_next : SHL__HIST_LEN;
    uint64_t last_time = 0, last_token = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = (s->hist_next - n + i) % SHL__HIST_LEN;
        const struct shl__event *e = &s->hist[at];
        if (e->op == SHL__OP_NONE || e->op >= SHL__OP_COUNT) {
            problem(c, "%s: history entry %u has unknown kind %u", who, at, e->op);
            continue;
        }
        if (e->op == SHL__OP_REJECT ? (e->why < SHL__C_REJ_EXPIRED || e->why >= SHL__C_COUNT)
                                    : e->why != 0)
            problem(c, "%s: history entry %u (%s) has reason %u", who, at, shl_op_name(e->op),
                    e->why);
        if (e->pid <= 0 || e->pid > PID_LIMIT)
            problem(c, "%s: history entry %u has pid %d", who, at, (int)e->pid);
        if (e->time < last_time)
            problem(c, "%s: history entry %u goes back in time (%llu after %llu)", who, at,
                    (unsigned long long)e->time, (unsigned long long)last_time);
        last_time = e->time;
        if (c->live && e->time > c->now)
            problem(c, "%s: history entry %u is in the future", who, at);
        if (e->op == SHL__OP_REJECT)
            continue;
        if (e->token < last_token || e->token > s->cur.token)
            problem(c, "%s: history entry %u (%s) has token %llu out of order (lease token %llu)",
                    who, at, shl_op_name(e->op), (unsigned long long)e->token,
                    (unsigned long long)s->cur.token);
        last_token = e->token;
    }
}

int shl__history_ok(const struct shl__slot *s)
{
    struct ck c = {NULL, NULL, 0, 0, 0};
    check_history(&c, "", s);
    return c.problems == 0;
}

/* On a live slot: whether a change is marked in flight (seq odd or intent
 * armed) while nobody holds the lock, seen three times 1 ms apart. A writer
 * holds the lock whenever it has either mark set, so seeing the mark, then a
 * free lock, then the same seq, means nobody is going to clear it. */
static int left_open(const struct shl__slot *s)
{
    for (int n = 0; n < 3; n++) {
        if (n) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        uint32_t a1 = atomic_load_explicit(&s->intent_armed, memory_order_acquire);
        uint32_t q1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        int32_t tid;
        int st = shl__mutex_peek(&s->lock, &tid);
        uint32_t q2 = atomic_load_explicit(&s->seq, memory_order_acquire);
        uint32_t a2 = atomic_load_explicit(&s->intent_armed, memory_order_acquire);
        if (st != SHL__MX_FREE || q1 != q2 || !((q1 & 1) || (a1 && a2)))
            return 0;
    }
    return 1;
}

static void check_slot(struct ck *c, const struct shl__hdr *h, uint32_t i,
                       const struct shl__slot *s, int stable)
{
    char who[SHL__NAME_MAX + 32], nm[SHL__NAME_MAX + 1];
    struct shl__key k;
    int named = name_ok(s, &k, nm);
    if (named)
        snprintf(who, sizeof who, "lease %s (slot %u)", nm, i);
    else
        snprintf(who, sizeof who, "slot %u", i);
    if (!named)
        problem(c, "%s: invalid name (length %u)", who, s->name_len);
    else if (!reachable(h, shl__index(h), i, k.hash))
        problem(c, "%s: not reachable through the index", who);
    int32_t tid;
    int ls = shl__mutex_peek(&s->lock, &tid);
    lock_problem(c, who, &s->lock);
    if (ls == SHL__MX_DEAD || ls == SHL__MX_BADKIND)
        return; /* mid-change by design: recovery will settle the rest */
    if (ls == SHL__MX_HELD && (!stable || s->intent_armed))
        return; /* a change in flight by a live process */
    if (ls != SHL__MX_HELD && (!c->live || left_open(shl__slot_at(h, i)))) {
        if (s->seq & 1)
            problem(c, "%s: a change is marked in flight (seq %u) but nobody holds the lock", who,
                    s->seq);
        if (s->intent_armed)
            problem(c, "%s: an intent (%s, token %llu) is armed but nobody holds the lock", who,
                    shl_op_name((int)s->meta.op), (unsigned long long)s->intent.token);
    }
    if (s->intent_armed > 1)
        problem(c, "%s: intent flag %u is neither 0 nor 1", who, s->intent_armed);
    check_holder(c, who, s, h->value_size, h->token_floor);
    check_history(c, who, s);
}

/* Everything after the header: the index, then each used slot. */
static void check_body(struct ck *c, const struct shl__hdr *h)
{
    uint32_t n = atomic_load_explicit(&h->nslots, memory_order_acquire);
    if (n > h->capacity)
        n = h->capacity;
    check_index(c, h, n);
    struct shl__slot *copy = c->live ? malloc(sizeof *copy) : NULL;
    if (c->live && !copy) {
        problem(c, "slots: out of memory while checking");
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct shl__slot *s = shl__slot_at(h, i);
        int stable = 1;
        if (c->live) {
            unsigned char pv[1];
            stable = shl__slot_snapshot(h, s, copy, pv, 0);
            s = copy;
            /* After the copy: nothing in it can be later than this. */
            c->now = h->clock == SHL__CLOCK_MANUAL
                         ? atomic_load_explicit(&h->manual_now, memory_order_acquire)
                         : shl__mono_ns();
        }
        check_slot(c, h, i, s, stable);
    }
    free(copy);
}

static int verdict(const struct ck *c, int version)
{
    if (!c->problems)
        return SHL_OK;
    return version ? SHL_EVERSION : SHL_ECORRUPT;
}

int shl_check(shl_table *t, void (*report)(void *arg, const char *problem), void *arg)
{
    SHL__CHECK_HANDLE(t);
    struct ck c = {report, arg, 0, 1, 0};
    int version = 0;
    if (check_header(&c, t->hdr, t->size, &version) == 0)
        check_body(&c, t->hdr);
    return verdict(&c, version);
}

int shl_check_image(const void *image, size_t size, void (*report)(void *arg, const char *problem),
                    void *arg)
{
    if (!image && size)
        return SHL_EINVAL;
    /* A private, aligned copy: the caller's bytes may be unaligned, and may
     * change under us if they are a live mapping. */
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return SHL_ENOMEM;
    memcpy(copy, image, size);
    struct ck c = {report, arg, 0, 0, 0};
    int version = 0;
    if (check_header(&c, copy, size, &version) == 0)
        check_body(&c, copy);
    free(copy);
    return verdict(&c, version);
}

int shl_check_name(const char *name, void (*report)(void *arg, const char *problem), void *arg)
{
    char n[SHL_TABLE_NAME_MAX + 1];
    int rc = shl__table_name(name, n);
    if (rc != SHL_OK)
        return rc;
    void *copy;
    size_t len;
    uint64_t file_size;
    rc = shl__seg_read_raw(n, &copy, &len, &file_size);
    if (rc != 0)
        return shl__from_shm(rc);
    /* Only the part the header describes was read: a file longer than that
     * is reported here, and that part is checked as the table it claims. */
    int longer = file_size > len && shl__seg_described_size(copy) == len;
    if (longer) {
        struct ck c = {report, arg, 0, 0, 0};
        problem(&c,
                "header: the file is %llu bytes, longer than the %zu bytes its header describes",
                (unsigned long long)file_size, len);
    }
    rc = shl_check_image(copy, len, report, arg);
    free(copy);
    return rc == SHL_OK && longer ? SHL_ECORRUPT : rc;
}
