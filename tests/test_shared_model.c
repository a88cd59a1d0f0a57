/*
 * tests/test_shared_model.c - the shared-lease contract as a reference model
 * (a page, like LeaseStore), and a differential test: thousands of random
 * sequences of shared and exclusive acquire, renew, release, write, guarded
 * reads, revoke and clock moves, on a manual-clock table, agree with the
 * model operation for operation (result, token, gen, holder counts).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* ------------------------------------------------------------ the model */

#define M_OWNERS 5
#define M_MAXH   128 /* holders a sequence can create */

struct m_holder {
    int owner;
    uint64_t token, expiry;
    int live; /* not released, not revoked */
};

struct model {
    uint64_t now;
    uint64_t counter; /* the lease's one token counter */
    uint64_t gen;     /* token of the last exclusive acquisition (0: none) */
    struct m_holder ex;
    struct m_holder sh[M_MAXH];
    int nsh;
    uint64_t vtoken; /* token that wrote the value (0: never) */
};

static int m_valid(const struct model *m, const struct m_holder *h)
{
    return h->live && m->now < h->expiry; /* equality is expired */
}

static int m_shared_valid(const struct model *m)
{
    int n = 0;
    for (int i = 0; i < m->nsh; i++)
        n += m_valid(m, &m->sh[i]);
    return n;
}

static int m_acquire(struct model *m, int owner, uint64_t ttl, uint64_t *tok)
{
    if (m_valid(m, &m->ex) || m_shared_valid(m))
        return SHL_EBUSY;
    m->ex = (struct m_holder){owner, ++m->counter, m->now + ttl, 1};
    m->gen = *tok = m->counter;
    return SHL_OK;
}

static int m_acquire_shared(struct model *m, int owner, uint64_t ttl, uint64_t *tok, uint64_t *gen)
{
    if (m_valid(m, &m->ex) || m_shared_valid(m) >= SHL_SHARED_MAX)
        return SHL_EBUSY;
    for (int i = 0; i < m->nsh; i++)
        if (m_valid(m, &m->sh[i]) && m->sh[i].owner == owner)
            return SHL_EBUSY;
    m->sh[m->nsh++] = (struct m_holder){owner, ++m->counter, m->now + ttl, 1};
    *tok = m->counter;
    *gen = m->gen;
    return SHL_OK;
}

/* The holder (owner, token) names, of either kind, if it is valid. */
static struct m_holder *m_find(struct model *m, int owner, uint64_t tok, int kinds)
{
    struct m_holder *h = NULL;
    if ((kinds & 1) && m->ex.token == tok)
        h = &m->ex;
    for (int i = 0; (kinds & 2) && i < m->nsh; i++)
        if (m->sh[i].token == tok)
            h = &m->sh[i];
    return h && h->owner == owner && m_valid(m, h) ? h : NULL;
}

static int m_renew(struct model *m, int owner, uint64_t tok, uint64_t ttl)
{
    struct m_holder *h = m_find(m, owner, tok, 3);
    if (!h)
        return SHL_ELOST;
    h->expiry = m->now + ttl;
    return SHL_OK;
}

static int m_release(struct model *m, int owner, uint64_t tok)
{
    struct m_holder *h = m_find(m, owner, tok, 3);
    if (!h)
        return SHL_ELOST;
    h->live = 0;
    return SHL_OK;
}

static int m_write(struct model *m, int owner, uint64_t tok)
{
    if (!m_find(m, owner, tok, 1))
        return SHL_ELOST;
    m->vtoken = tok;
    return SHL_OK;
}

static int m_guard_shared(struct model *m, int owner, uint64_t tok)
{
    return m_find(m, owner, tok, 2) ? SHL_OK : SHL_ELOST;
}

static int m_revoke(struct model *m)
{
    if (!m_valid(m, &m->ex) && !m_shared_valid(m))
        return SHL_ENOENT;
    m->ex.live = 0;
    for (int i = 0; i < m->nsh; i++)
        m->sh[i].live = 0;
    return SHL_OK;
}

/* ------------------------------------------------- the differential test */

static const char *const owners[M_OWNERS] = {"ann", "bob", "cy", "dee", "ed"};

static uint64_t rnd_state;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(rnd_state >> 33) % n;
}

static void guarded(void *arg)
{
    ++*(int *)arg;
}

struct run {
    shl_table *t;
    char lease[32];
    struct model m;
    uint64_t issued[M_MAXH]; /* tokens given out, to present again */
    int nissued;
    unsigned seq, step;
};

/* Each side evaluated once: `got` is often the call under test. */
#define AGREE(r, got, want, what)                                                                  \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        cr_assert_eq(g_, w_, "sequence %u step %u: %s: library %lld, model %lld", (r)->seq,        \
                     (r)->step, (what), g_, w_);                                                   \
    } while (0)

static uint64_t pick_token(struct run *r)
{
    if (r->nissued == 0 || rnd(10) == 0)
        return 1 + rnd(200); /* anything, mostly never issued */
    return r->issued[rnd((uint32_t)r->nissued)];
}

static void one_step(struct run *r)
{
    struct model *m = &r->m;
    int o = (int)rnd(M_OWNERS);
    uint64_t ttl = 1 + rnd(40);
    uint64_t tok = 0, mtok = 0, gen = 0, mgen = 0;
    int rc, want;
    switch (rnd(11)) {
    case 0:
    case 1:
        rc = shl_acquire(r->t, r->lease, owners[o], ttl, &tok);
        want = m_acquire(m, o, ttl, &mtok);
        AGREE(r, rc, want, "acquire");
        if (rc == SHL_OK) {
            AGREE(r, tok, mtok, "acquire's token");
            r->issued[r->nissued++] = tok;
        }
        break;
    case 2:
    case 3:
        rc = shl_acquire_shared(r->t, r->lease, owners[o], ttl, &tok, &gen);
        want = m_acquire_shared(m, o, ttl, &mtok, &mgen);
        AGREE(r, rc, want, "acquire_shared");
        if (rc == SHL_OK) {
            AGREE(r, tok, mtok, "shared token");
            AGREE(r, gen, mgen, "shared gen");
            r->issued[r->nissued++] = tok;
        }
        break;
    case 4:
        tok = pick_token(r);
        AGREE(r, shl_renew(r->t, r->lease, owners[o], tok, ttl), m_renew(m, o, tok, ttl), "renew");
        break;
    case 5:
        tok = pick_token(r);
        AGREE(r, shl_release(r->t, r->lease, owners[o], tok), m_release(m, o, tok), "release");
        break;
    case 6: {
        tok = pick_token(r);
        char v[24];
        int n = snprintf(v, sizeof v, "v%llu", (unsigned long long)tok);
        AGREE(r, shl_write(r->t, r->lease, owners[o], tok, v, (size_t)n), m_write(m, o, tok),
              "write");
        break;
    }
    case 7: {
        tok = pick_token(r);
        int ran = 0;
        rc = shl_guard_shared(r->t, r->lease, owners[o], tok, guarded, &ran);
        AGREE(r, rc, m_guard_shared(m, o, tok), "guard_shared");
        AGREE(r, ran, rc == SHL_OK, "guard_shared ran its callback");
        break;
    }
    case 8:
        if (rnd(4) == 0)
            AGREE(r, shl_revoke(r->t, r->lease), m_revoke(m), "revoke");
        break;
    default:
        m->now += rnd(30);
        cr_assert_eq(shl_clock_set(r->t, m->now), SHL_OK);
    }
    /* The state agrees too: the exclusive token, the number of valid
     * shared holders, the value's token. */
    shl_lease_info in;
    rc = shl_stat(r->t, r->lease, &in);
    if (rc == SHL_ENOENT) {
        AGREE(r, m->counter, 0, "a never-acquired lease");
        return;
    }
    AGREE(r, rc, SHL_OK, "stat");
    AGREE(r, in.token, m->gen, "exclusive token");
    AGREE(r, in.shared, (uint32_t)m_shared_valid(m), "valid shared holders");
    AGREE(r, in.value_token, m->vtoken, "value token");
    AGREE(r, in.state == SHL_STATE_HELD, m_valid(m, &m->ex), "exclusive holder valid");
}

#define SEQUENCES 3000
#define STEPS     48

Test(shared_model, differential_thousands_of_sequences)
{
    t_guard(240);
    char name[96];
    /* The model knows no pools: a reader pool that every lease's readers
     * fit in at once (a lease keeps its expired readers' groups until it
     * is next acquired, and most are left so). */
    shl_options o;
    shl_options_init(&o);
    o.capacity = SEQUENCES;
    o.value_size = 32;
    o.clock = SHL_CLOCK_MANUAL;
    o.flags = SHL_CREATE | SHL_EXCL;
    o.policy = 0;
    o.max_shared = SEQUENCES * 2 * SHL_SHARED_GROUP; /* 5 owners: two groups a lease */
    shl_table *t = NULL;
    cr_assert_eq(shl_open(t_name(name, sizeof name, "shmodel"), &o, &t), SHL_OK);
    uint64_t now = 1000;
    cr_assert_eq(shl_clock_set(t, now), SHL_OK);
    rnd_state = 0x5eed;
    static struct run r;
    for (unsigned s = 0; s < SEQUENCES; s++) {
        memset(&r, 0, sizeof r);
        r.t = t;
        r.seq = s;
        snprintf(r.lease, sizeof r.lease, "seq%u", s);
        /* each sequence starts at the table's time, after the last one's */
        r.m.now = now;
        for (r.step = 0; r.step < STEPS; r.step++)
            one_step(&r);
        now = r.m.now + 100;
        cr_assert_eq(shl_clock_set(t, now), SHL_OK);
        if (s % 500 == 499)
            cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK, "check after sequence %u", s);
    }
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);
}

/* Many holders at once: the model's bound is the library's. */
Test(shared_model, differential_at_the_shared_limit)
{
    t_guard(60);
    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "shlimit"), 4, 32, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(t, 10), SHL_OK);
    static struct model m;
    memset(&m, 0, sizeof m);
    m.now = 10;
    char ow[16];
    for (int i = 0; i < SHL_SHARED_MAX + 3; i++) {
        uint64_t tok = 0, gen = 0, mtok = 0, mgen = 0;
        snprintf(ow, sizeof ow, "r%d", i);
        int want = i < SHL_SHARED_MAX ? SHL_OK : SHL_EBUSY;
        cr_assert_eq(shl_acquire_shared(t, "L", ow, 50, &tok, &gen), want, "reader %d", i);
        cr_assert_eq(m_acquire_shared(&m, 100 + i, 50, &mtok, &mgen), want);
        cr_assert_eq(tok, want == SHL_OK ? mtok : 0);
    }
    shl_lease_info in;
    uint64_t tok;
    cr_assert_eq(shl_acquire_ex(t, "L", "w", 10, &tok, &in), SHL_EBUSY);
    cr_assert_eq(in.shared, (uint32_t)SHL_SHARED_MAX, "a busy acquire says how many");
    cr_assert_eq(in.token, 1u, "and shows one shared holder");
    cr_assert_str_eq(in.owner, "r0");
    cr_assert_eq(shl_release(t, "L", "r7", 8), SHL_OK);
    uint64_t gen;
    cr_assert_eq(shl_acquire_shared(t, "L", "late", 50, &tok, &gen), SHL_OK, "a freed entry");
    cr_assert_eq(tok, SHL_SHARED_MAX + 1u);
    cr_assert_eq(shl_check(t, NULL, NULL), SHL_OK);
    shl_close(t);
    shl_unlink(name);
}
