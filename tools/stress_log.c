/*
 * tools/stress_log.c - the campaign's shared region, evidence records and
 * lease values.
 *
 * The region is an anonymous MAP_SHARED mapping made before the workers are
 * forked, so that every worker inherits it and it disappears with the last
 * process. MAP_NORESERVE: the rings and bitmaps are sized for the worst case,
 * and only the pages actually touched cost memory.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "stress.h"

uint64_t st_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint64_t st_runqueue_ns(void)
{
    unsigned long long run = 0, queued = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &run, &queued) != 2)
        queued = 0;
    fclose(f);
    return queued;
}

void st_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / UINT64_C(1000000000)), (long)(ns % UINT64_C(1000000000))};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

struct st_shared *st_shared_create(const struct st_config *c)
{
    uint64_t log_off = (sizeof(struct st_shared) + 4095) & ~(uint64_t)4095;
    uint64_t acked_off = log_off + (uint64_t)c->leases * sizeof(struct st_log);
    acked_off = (acked_off + 4095) & ~(uint64_t)4095;
    uint64_t granted_off = acked_off + (uint64_t)c->workers * (ST_SEQ_BITS / 8);
    uint64_t rlog_off = granted_off + (uint64_t)c->leases * (ST_SEQ_BITS / 8);
    uint64_t iv_off = rlog_off + (uint64_t)c->readers * sizeof(struct st_rlog);
    uint64_t gens_off = iv_off + (uint64_t)(c->workers + c->readers) * sizeof(struct st_ivlog);
    /* Twice the removals the rate promises, and room for the forced ones. */
    double want = c->remove_rate > 0          ? 2 * c->remove_rate * c->seconds + 64
                  : c->etcd && c->admin_chaos ? 2 * ST_WIPE_RATE * c->seconds + 64
                                              : 1;
    uint32_t gens_cap = want > 4096 ? 4096 : (uint32_t)want;
    uint64_t gentok_off = gens_off + (uint64_t)gens_cap * sizeof(struct st_gen);
    uint64_t size = gentok_off + (uint64_t)gens_cap * c->leases * sizeof(struct st_gentok);
    void *p =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct st_shared *sh = p; /* zero-filled by the kernel */
    sh->workers = c->workers;
    sh->leases = c->leases;
    sh->ttl_ns = c->ttl_ns;
    sh->seed = c->seed;
    sh->log_off = log_off;
    sh->acked_off = acked_off;
    sh->granted_off = granted_off;
    sh->rlog_off = rlog_off;
    sh->iv_off = iv_off;
    sh->gens_off = gens_off;
    sh->gentok_off = gentok_off;
    sh->gens_cap = gens_cap;
    sh->renew_ns = c->ttl_ns / 3;
    sh->readers = c->readers;
    sh->value_words = ST_VALUE_WORDS;
    sh->size = size;
    return sh;
}

void st_shared_destroy(struct st_shared *sh)
{
    if (sh)
        munmap(sh, sh->size);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    return h * UINT64_C(0xff51afd7ed558ccd);
}

/* Never 0, so that a zero-filled (never written) record is not sealed. */
uint64_t st_rec_seal(const struct st_rec *r)
{
    uint64_t h = UINT64_C(0x5354524553534c47);
    h = mix(h, r->token);
    h = mix(h, r->seq);
    h = mix(h, ((uint64_t)r->lease << 32) | r->worker);
    h = mix(h, r->incarnation);
    return h | 1;
}

uint64_t st_rrec_seal(const struct st_rrec *r)
{
    uint64_t h = UINT64_C(0x5348415245445244);
    h = mix(h, r->token);
    h = mix(h, r->gen);
    h = mix(h, r->seen);
    h = mix(h, r->hold);
    h = mix(h, ((uint64_t)r->lease << 32) | r->reader);
    return h | 1;
}

/*
 * Value layout (words): token, seq, lease<<32 | worker, incarnation, filler
 * words derived from the seal and their position (so that pieces of two
 * values never pass), an end marker, the seal. shl_write() copies it in two
 * halves in the test build's crash-point order; a mix would fail here.
 */
#define VALUE_END UINT64_C(0x454e445354524553)

static uint64_t filler(uint64_t seal, unsigned i)
{
    return (seal ^ UINT64_C(0xaaaaaaaaaaaaaaaa)) + i * UINT64_C(0x9e3779b97f4a7c15);
}

void st_value_make(uint64_t *v, unsigned words, const struct st_rec *r)
{
    uint64_t seal = st_rec_seal(r);
    v[0] = r->token;
    v[1] = r->seq;
    v[2] = ((uint64_t)r->lease << 32) | r->worker;
    v[3] = r->incarnation;
    for (unsigned i = 4; i < words - 2; i++)
        v[i] = filler(seal, i);
    v[words - 2] = VALUE_END;
    v[words - 1] = seal;
}

int st_value_parse(const uint64_t *v, unsigned words, struct st_rec *r)
{
    memset(r, 0, sizeof *r);
    r->token = v[0];
    r->seq = v[1];
    r->lease = (uint32_t)(v[2] >> 32);
    r->worker = (uint32_t)v[2];
    r->incarnation = (uint32_t)v[3];
    uint64_t seal = st_rec_seal(r);
    if (v[words - 2] != VALUE_END || v[words - 1] != seal)
        return -1;
    for (unsigned i = 4; i < words - 2; i++)
        if (v[i] != filler(seal, i))
            return -1;
    r->seal = seal;
    return 0;
}
