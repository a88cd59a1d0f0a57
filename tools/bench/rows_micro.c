/*
 * tools/bench/rows_micro.c - the floor, and shmlease's operations one by one.
 *
 * The floor is what any lease operation in shared memory must at least do:
 * take a robust process-shared mutex, read CLOCK_MONOTONIC, compare owner,
 * token and expiry, copy 64 bytes, unlock. shmlease's rows run the real
 * library calls, once through the name-taking API (validate and hash the
 * name, probe the index each call) and once through bound leases
 * (shl_lease_open: the name resolved once).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#define TTL (UINT64_C(10) * 1000000000u)
#define OWNER "bench-worker-01"
#define OTHER "bench-worker-02"

/* ---------------------------------------------------------------- floor */

struct floor_slot {
    pthread_mutex_t m;
    uint64_t owner, token, expiry;
    unsigned char value[64];
};

static struct floor_slot *floor_slot;

static const char *floor_setup(struct bench_row *r)
{
    (void)r;
    if (floor_slot)
        return NULL;
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return "mmap failed";
    floor_slot = p;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (pthread_mutex_init(&floor_slot->m, &a) != 0)
        return "robust mutex init failed";
    pthread_mutexattr_destroy(&a);
    floor_slot->owner = 0x0123456789abcdefu;
    floor_slot->token = 7;
    floor_slot->expiry = UINT64_MAX;
    return NULL;
}

static int run_mutex(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        pthread_mutex_lock(&floor_slot->m);
        BENCH_CLOBBER();
        pthread_mutex_unlock(&floor_slot->m);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return 0;
}

static int run_clock(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    uint64_t t0 = bench_now(), sink = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    __asm__ volatile("" : : "r"(sink));
    return 0;
}

static int run_floor(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    (void)r;
    unsigned char buf[64];
    memset(buf, 0x5a, sizeof buf);
    uint64_t owner = 0x0123456789abcdefu, token = 7, miss = 0;
    uint64_t t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        struct floor_slot *s = floor_slot;
        pthread_mutex_lock(&s->m);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        if (s->owner == owner && s->token == token && now < s->expiry)
            memcpy(s->value, buf, sizeof buf);
        else
            miss++;
        BENCH_CLOBBER();
        pthread_mutex_unlock(&s->m);
    }
    o->ns_op = (double)(bench_now() - t0) / (double)n;
    return miss ? -1 : 0;
}

void rows_floor(void)
{
    bench_add("floor", "robust mutex lock+unlock", floor_setup, run_mutex, NULL);
    bench_add("floor", "clock_gettime MONOTONIC", floor_setup, run_clock, NULL);
    bench_add("floor", "lease-op floor", floor_setup, run_floor, NULL);
}

/* ---------------------------------------------------------------- shmlease */

static shl_table *tab;
static int tab_users;

/* Each row has its own lease, named here; bound rows keep their shl_lease. */
struct op_ctx {
    char lease[32];
    shl_lease *bound;
    uint64_t token;
};

static struct op_ctx ctxs[32];
static int nctx;

/* The table of the shmlease, bound and names rows, open while a row uses it. */
static const char *tab_open(void)
{
    if (!tab) {
        char name[96];
        shl_options o;
        shl_options_init(&o);
        o.capacity = 64;
        o.value_size = 256;
        o.flags = SHL_CREATE | SHL_EXCL;
        int rc = shl_open(bench_table_name(name, sizeof name, "ops"), &o, &tab);
        if (rc != SHL_OK)
            return shl_strerror(rc);
    }
    tab_users++;
    return NULL;
}

static void tab_close(void)
{
    if (tab && --tab_users == 0) {
        char name[96];
        shl_close(tab);
        shl_unlink(bench_table_name(name, sizeof name, "ops"));
        tab = NULL;
    }
}

static const char *op_setup(struct bench_row *r)
{
    const char *why = tab_open();
    if (why)
        return why;
    if (nctx == (int)(sizeof ctxs / sizeof ctxs[0]))
        return "more rows than lease contexts (ctxs)";
    struct op_ctx *c = &ctxs[nctx];
    snprintf(c->lease, sizeof c->lease, "bench/lease-%02d", nctx);
    nctx++;
    r->ctx = c;
    const char *who = r->arg == 'b' ? OTHER : OWNER; /* 'b': held by someone else */
    if (shl_lease_open(tab, c->lease, OWNER, &c->bound) != SHL_OK)
        return "shl_lease_open failed";
    int held = r->arg != 'p' && r->arg != 'r'; /* 'r': held shared by 7 other readers */
    for (int k = 0; r->arg == 'r' && k < 7; k++) {
        char ow[32];
        uint64_t tk, gen;
        snprintf(ow, sizeof ow, "bench-reader-%d", k);
        if (shl_acquire_shared(tab, c->lease, ow, UINT64_C(1) << 62, &tk, &gen) != SHL_OK)
            return "shared acquire failed";
    }
    if (held && shl_acquire(tab, c->lease, who, UINT64_C(1) << 62, &c->token) != SHL_OK)
        return "first acquire failed";
    unsigned char v[256] = {1}; /* 'v': a 256 B value, else 64 B */
    size_t vlen = r->arg == 'v' ? sizeof v : 64;
    if (held && r->arg != 'b' && shl_write(tab, c->lease, OWNER, c->token, v, vlen))
        return "first write failed";
    return NULL;
}

static void op_teardown(struct bench_row *r)
{
    struct op_ctx *c = r->ctx;
    if (c)
        shl_lease_close(c->bound);
    tab_close();
}

static void empty_fn(void *arg)
{
    (void)arg;
}

/* The timed loop of a row whose context is a `type` (op_ctx, name_ctx). */
#define TIMED_CTX(type, body)                                                                  \
    do {                                                                                       \
        type *c = r->ctx;                                                                      \
        unsigned char buf[256];                                                                \
        memset(buf, 0x5a, sizeof buf);                                                         \
        int bad = 0;                                                                           \
        uint64_t t0 = bench_now();                                                             \
        for (uint64_t i = 0; i < n; i++) {                                                     \
            body;                                                                              \
        }                                                                                      \
        o->ns_op = (double)(bench_now() - t0) / (double)n;                                     \
        (void)buf;                                                                             \
        (void)c;                                                                               \
        return bad ? -1 : 0;                                                                   \
    } while (0)

#define TIMED(body) TIMED_CTX(struct op_ctx, body)

static int n_pair(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(uint64_t tk; bad |= shl_acquire(tab, c->lease, OWNER, TTL, &tk);
          bad |= shl_release(tab, c->lease, OWNER, tk));
}
static int n_shared_pair(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(uint64_t tk; uint64_t gen;
          bad |= shl_acquire_shared(tab, c->lease, OWNER, TTL, &tk, &gen);
          bad |= shl_release(tab, c->lease, OWNER, tk));
}
static int n_renew(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_renew(tab, c->lease, OWNER, c->token, UINT64_C(1) << 62));
}
static int n_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_write(tab, c->lease, OWNER, c->token, buf, 64));
}
static int n_read(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(size_t len; bad |= shl_read(tab, c->lease, buf, 64, &len, NULL));
}
static int n_write256(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_write(tab, c->lease, OWNER, c->token, buf, 256));
}
static int n_read256(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(size_t len; bad |= shl_read(tab, c->lease, buf, 256, &len, NULL) || len != 256);
}
static int n_busy(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(uint64_t tk; bad |= shl_acquire(tab, c->lease, OWNER, TTL, &tk) != SHL_EBUSY);
}
static int n_guard(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_guard(tab, c->lease, OWNER, c->token, empty_fn, NULL));
}
static int b_pair(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(uint64_t tk; bad |= shl_lease_acquire(c->bound, TTL, &tk, NULL);
          bad |= shl_lease_release(c->bound, tk));
}
static int b_renew(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_lease_renew(c->bound, c->token, UINT64_C(1) << 62));
}
static int b_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_lease_write(c->bound, c->token, buf, 64));
}
static int b_read(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(size_t len; bad |= shl_lease_read(c->bound, buf, 64, &len, NULL));
}
static int b_write256(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_lease_write(c->bound, c->token, buf, 256));
}
static int b_read256(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(size_t len; bad |= shl_lease_read(c->bound, buf, 256, &len, NULL) || len != 256);
}
static int b_busy(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(uint64_t tk; bad |= shl_lease_acquire(c->bound, TTL, &tk, NULL) != SHL_EBUSY);
}
static int b_guard(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    TIMED(bad |= shl_lease_guard(c->bound, c->token, empty_fn, NULL));
}

void rows_shmlease(void)
{
    static const struct {
        const char *name;
        int arg;
        int (*by_name)(struct bench_row *, uint64_t, struct bench_sample *);
        int (*bound)(struct bench_row *, uint64_t, struct bench_sample *);
    } ops[] = {
        {"acquire+release", 'p', n_pair, b_pair},  {"renew", 'h', n_renew, b_renew},
        {"write 64B", 'h', n_write, b_write},      {"read 64B", 'h', n_read, b_read},
        {"try-acquire, busy", 'b', n_busy, b_busy}, {"guard, empty callback", 'h', n_guard, b_guard},
        {"write 256B", 'v', n_write256, b_write256}, {"read 256B", 'v', n_read256, b_read256},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        bench_add("shmlease", ops[i].name, op_setup, ops[i].by_name, op_teardown)->arg = ops[i].arg;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        bench_add("bound", ops[i].name, op_setup, ops[i].bound, op_teardown)->arg = ops[i].arg;
    /* Shared leases: the pair alone, and beside 7 readers already in. */
    bench_add("shmlease", "shared acquire+release", op_setup, n_shared_pair, op_teardown)->arg = 'p';
    bench_add("shmlease", "shared acq+rel, 7 readers in", op_setup, n_shared_pair, op_teardown)
        ->arg = 'r';
}

/* ---------------------------------------------------------------- names */

/*
 * What a by-name call costs over the bound one as names grow: write, renew
 * and read of one lease by name and bound, with a lease name and an owner of
 * the same length, from 1 byte to the longest allowed (63), and the
 * realistic pair most programs write. Every length has its own lease; its
 * six rows share it. Same table as the rows above.
 */
struct name_ctx {
    char lease[SHL_NAME_MAX + 1];
    char owner[SHL_OWNER_MAX + 1];
    shl_lease *bound;
    uint64_t token;
    int users;
};

static struct name_ctx names[8]; /* [NAME_SETS]: the "in turn" rows' entry */

static const struct {
    const char *lease, *owner; /* NULL: made of `len` bytes */
    int len;
    const char *label;
} name_sets[] = {
    {"jobs/nightly-backup", "worker-07@host-a", 0, "19+16 B"},
    {NULL, NULL, 1, "1 B"},
    {NULL, NULL, 8, "8 B"},
    {NULL, NULL, 16, "16 B"},
    {NULL, NULL, 32, "32 B"},
    {NULL, NULL, 63, "63 B"},
};

#define NAME_SETS (int)(sizeof name_sets / sizeof name_sets[0])

static const char *name_init(int set)
{
    struct name_ctx *c = &names[set];
    if (c->users++)
        return NULL;
    if (name_sets[set].lease) {
        snprintf(c->lease, sizeof c->lease, "%s", name_sets[set].lease);
        snprintf(c->owner, sizeof c->owner, "%s", name_sets[set].owner);
    } else {
        int n = name_sets[set].len;
        for (int i = 0; i < n; i++) {
            c->lease[i] = (char)('a' + (i + set) % 26);
            c->owner[i] = (char)('A' + (i + set) % 26);
        }
        c->lease[0] = (char)('0' + set); /* distinct leases even at 1 byte */
        c->lease[n] = c->owner[n] = 0;
    }
    unsigned char v[64] = {1};
    if (shl_lease_open(tab, c->lease, c->owner, &c->bound) != SHL_OK)
        return "shl_lease_open failed";
    if (shl_acquire(tab, c->lease, c->owner, UINT64_C(1) << 62, &c->token) != SHL_OK ||
        shl_write(tab, c->lease, c->owner, c->token, v, 64) != SHL_OK)
        return "first acquire or write failed";
    return NULL;
}

static void name_fini(int set)
{
    struct name_ctx *c = &names[set];
    if (--c->users == 0)
        shl_lease_close(c->bound);
}

/* Set NAME_SETS ("in turn") is every set, named one after the other. */
static const char *name_setup(struct bench_row *r)
{
    int set = r->arg >> 8;
    const char *why = tab_open();
    if (why)
        return why;
    r->ctx = &names[set];
    for (int i = 0; i < NAME_SETS; i++)
        if ((set == NAME_SETS || set == i) && (why = name_init(i)) != NULL)
            return why;
    return NULL;
}

static void name_teardown(struct bench_row *r)
{
    int set = r->arg >> 8;
    for (int i = 0; i < NAME_SETS; i++)
        if (set == NAME_SETS || set == i)
            name_fini(i);
    tab_close();
}

/* Each call names the next of the six leases: no two calls in a row name
 * the same lease (what a program that works on many leases does). */
#define NTURN(body)                                                                                \
    TIMED_CTX(struct name_ctx, c = &names[i % NAME_SETS]; body)

static int nt_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTURN(bad |= shl_write(tab, c->lease, c->owner, c->token, buf, 64));
}
static int nt_bound_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTURN(bad |= shl_lease_write(c->bound, c->token, buf, 64));
}

#define NTIMED(body) TIMED_CTX(struct name_ctx, body)

static int nn_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(bad |= shl_write(tab, c->lease, c->owner, c->token, buf, 64));
}
static int nn_renew(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(bad |= shl_renew(tab, c->lease, c->owner, c->token, UINT64_C(1) << 62));
}
static int nn_read(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(size_t len; bad |= shl_read(tab, c->lease, buf, sizeof buf, &len, NULL));
}
static int nb_write(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(bad |= shl_lease_write(c->bound, c->token, buf, 64));
}
static int nb_renew(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(bad |= shl_lease_renew(c->bound, c->token, UINT64_C(1) << 62));
}
static int nb_read(struct bench_row *r, uint64_t n, struct bench_sample *o)
{
    NTIMED(size_t len; bad |= shl_lease_read(c->bound, buf, sizeof buf, &len, NULL));
}

void rows_names(void)
{
    static const struct {
        const char *op;
        int (*by_name)(struct bench_row *, uint64_t, struct bench_sample *);
        int (*bound)(struct bench_row *, uint64_t, struct bench_sample *);
    } ops[] = {
        {"write 64B", nn_write, nb_write},
        {"renew", nn_renew, nb_renew},
        {"read 64B", nn_read, nb_read},
    };
    for (int set = 0; set < NAME_SETS; set++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            for (int bound = 0; bound < 2; bound++) {
                char name[64];
                snprintf(name, sizeof name, "%s, %s, %s", ops[i].op, name_sets[set].label,
                         bound ? "bound" : "by name");
                bench_add("names", name, name_setup, bound ? ops[i].bound : ops[i].by_name,
                          name_teardown)
                    ->arg = set << 8;
            }
    bench_add("names", "write 64B, 6 leases in turn, by name", name_setup, nt_write,
              name_teardown)
        ->arg = NAME_SETS << 8;
    bench_add("names", "write 64B, 6 leases in turn, bound", name_setup, nt_bound_write,
              name_teardown)
        ->arg = NAME_SETS << 8;
}
