/*
 * tests/test_etcd_leader_failover.c - leases on an etcd table while the
 * etcd leader dies (SIGKILL) or stops answering (SIGSTOP) under forked
 * workers looping acquire / write / release through all three members:
 * no token repeats or goes backwards, no stale write lands (the value's
 * whole history, read back from etcd's revisions, only ever moves to a
 * newer token, each written by its holder), stale writes are refused, and
 * work resumes within a few seconds. The figures are logged.
 *
 * "Stale" is by etcd's lease clock, not the writer's: a new etcd leader
 * extends every lease it takes over by its election timeout, so a holder
 * whose ttl passed (by its own clock) across a leader change may still hold
 * the lease, and its write land - no newer token was granted meanwhile (the
 * history check). Such late writes are counted, and allowed only for
 * acquisitions shortly before a fault.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

#define WORKERS     4
#define TTL         (2 * SEC)
#define MAX_EVENTS  (1 << 16)
#define STALE_EVERY 8         /* every 8th acquisition, a worker writes after its ttl */
#define RESUME_MAX  (8 * SEC) /* "a few seconds", on a busy machine */

enum { EV_ACQ, EV_WRITE, EV_STALE_WRITE, EV_RELEASE };

struct event {
    uint8_t worker, kind;
    int16_t rc;
    uint64_t token, at_ns;
};

struct shared {
    _Atomic int stop;
    _Atomic uint32_t n;
    struct event ev[MAX_EVENTS];
};

static struct etcd_cluster cl;
static struct shared *sh;
static char url[256];

static void record(int worker, int kind, int rc, uint64_t token)
{
    uint32_t i = atomic_fetch_add(&sh->n, 1);
    if (i < MAX_EVENTS)
        sh->ev[i] = (struct event){(uint8_t)worker, (uint8_t)kind, (int16_t)rc, token, t_now()};
}

static int worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char owner[16], payload[32];
    snprintf(owner, sizeof owner, "w%d", id);
    shl_options o;
    shl_options_init(&o);
    o.flags = 0;
    o.timeout_ms = 2000;
    shl_table *t = NULL;
    while (!atomic_load(&sh->stop) && shl_open(url, &o, &t) != SHL_OK)
        t_sleep_ns(50 * MS);
    unsigned n = 0;
    while (!atomic_load(&sh->stop)) {
        uint64_t tok = 0;
        int rc = shl_acquire(t, "L", owner, TTL, &tok);
        if (rc == SHL_EBUSY) {
            t_sleep_ns(2 * MS);
            continue;
        }
        record(id, EV_ACQ, rc, tok);
        if (rc != SHL_OK)
            continue;
        int len = snprintf(payload, sizeof payload, "P%d-%llu.", id, (unsigned long long)tok);
        int stale = ++n % STALE_EVERY == 0;
        if (stale)
            t_sleep_ns(TTL + 1500 * MS); /* past the ttl: the write must be refused */
        rc = shl_write(t, "L", owner, tok, payload, (size_t)len);
        record(id, stale ? EV_STALE_WRITE : EV_WRITE, rc, tok);
        rc = shl_release(t, "L", owner, tok);
        record(id, EV_RELEASE, rc, tok);
    }
    shl_close(t);
    return 0;
}

/* The first successful write after `since`: its time, or 0. */
static uint64_t first_write_after(uint64_t since)
{
    uint32_t n = atomic_load(&sh->n);
    uint64_t best = 0;
    for (uint32_t i = 0; i < n && i < MAX_EVENTS; i++)
        if (sh->ev[i].kind == EV_WRITE && sh->ev[i].rc == SHL_OK && sh->ev[i].at_ns > since &&
            (!best || sh->ev[i].at_ns < best))
            best = sh->ev[i].at_ns;
    return best;
}

/* Waits until a write succeeds after `since` (or RESUME_MAX): the delay. */
static uint64_t resume_after(uint64_t since)
{
    while (t_now() - since < RESUME_MAX && !first_write_after(since))
        t_sleep_ns(20 * MS);
    uint64_t at = first_write_after(since);
    cr_assert(at, "no write succeeded within %llu s of the fault",
              (unsigned long long)(RESUME_MAX / SEC));
    return at - since;
}

/* When worker `who` was granted `tok`, or 0 if never. */
static uint64_t granted(int who, uint64_t tok)
{
    uint32_t n = atomic_load(&sh->n);
    for (uint32_t i = 0; i < n && i < MAX_EVENTS; i++)
        if (sh->ev[i].kind == EV_ACQ && sh->ev[i].rc == SHL_OK && sh->ev[i].worker == who &&
            sh->ev[i].token == tok)
            return sh->ev[i].at_ns;
    return 0;
}

/* Every value the record ever held, from etcd's history of TABLE/v/L: the
 * token in the record and in the payload agree, never go down, and were
 * granted to the worker that wrote. Returns how many writes landed. */
static unsigned check_history(uint64_t *max_token)
{
    struct etc_config cfg = {.endpoints = cl.endpoints, .timeout_ms = 5000};
    etc_client *c;
    etc_watch *w;
    cr_assert_eq(etc_open(&cfg, &c), ETC_OK);
    cr_assert_eq(etc_watch_open(c, "jobs/v/L", 8, NULL, 0, 1, &w), ETC_OK, "%s", etc_errmsg(c));
    unsigned landed = 0;
    uint64_t last = 0;
    struct etc_event ev;
    int rc;
    while ((rc = etc_watch_next(w, 1000, &ev)) == ETC_OK) {
        if (ev.type == ETC_EV_PUT) {
            unsigned long long rec, tok;
            int who;
            char *p = memchr(ev.kv.value, 'P', ev.kv.value_len);
            cr_assert(sscanf(ev.kv.value, "%llu", &rec) == 1, "a value record without token");
            if (p && sscanf(p, "P%d-%llu.", &who, &tok) == 2) {
                cr_assert_eq(rec, tok, "the record's token is its writer's");
                cr_assert(granted(who, tok), "w%d wrote with token %llu, never granted to it", who,
                          tok);
                cr_assert_geq(tok, last, "a write of token %llu landed after one of %llu", tok,
                              (unsigned long long)last);
                last = tok;
                landed++;
            }
        }
        etc_event_free(&ev);
    }
    cr_assert_eq(rc, ETC_ETIMEDOUT, "%s", etc_errname(rc));
    etc_watch_close(w);
    etc_close(c);
    *max_token = last;
    return landed;
}

Test(etcd_leader_failover, workers_through_leader_kill_and_stop)
{
    t_guard(180);
    cr_assert_eq(etcd_cluster_start(&cl, 3, 0), 0, "%s", cl.err);
    etcd_cluster_url(&cl, "jobs", url, sizeof url);
    shl_options o;
    shl_options_init(&o);
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    shl_close(t);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    pid_t kids[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        kids[i] = t_fork(worker, (void *)(intptr_t)i);

    t_sleep_ns(2 * SEC);
    cr_assert(first_write_after(0), "the workers got going");

    /* The leader dies. */
    int leader = etcd_cluster_leader(&cl, 5000);
    cr_assert_geq(leader, 0, "%s", cl.err);
    uint64_t t_kill = t_now();
    cr_assert_eq(etcd_cluster_kill(&cl, leader), 0);
    uint64_t resume_kill = resume_after(t_kill);
    t_sleep_ns(2 * SEC);
    cr_assert_eq(etcd_cluster_restart(&cl, leader), 0, "%s", cl.err);
    t_sleep_ns(1 * SEC);

    /* The (new) leader stops answering, longer than a ttl. */
    leader = etcd_cluster_leader(&cl, 5000);
    cr_assert_geq(leader, 0, "%s", cl.err);
    uint64_t t_stop = t_now();
    cr_assert_eq(etcd_cluster_pause(&cl, leader), 0);
    uint64_t resume_stop = resume_after(t_stop);
    t_sleep_ns(TTL + SEC);
    cr_assert_eq(etcd_cluster_resume(&cl, leader), 0);
    t_sleep_ns(2 * SEC);

    atomic_store(&sh->stop, 1);
    for (int i = 0; i < WORKERS; i++)
        cr_assert_eq(t_wait(kids[i]), 0);
    uint32_t n = atomic_load(&sh->n);
    cr_assert_lt(n, MAX_EVENTS, "the log overflowed");

    /* Tokens: each acquisition that succeeded has its own, and in the
     * order they were granted they only go up. */
    /* The faults: from a ttl before each (a lease taken then is extended by
     * the new leader) until work resumed. */
    uint64_t fault[2][2] = {{t_kill - TTL - SEC, t_kill + resume_kill + SEC},
                            {t_stop - TTL - SEC, t_stop + resume_stop + SEC}};
    unsigned acquired = 0, unavail = 0, writes = 0, stale_refused = 0, stale_tried = 0;
    unsigned stale_landed = 0, stale_unavail = 0;
    uint64_t last = 0, max_acquired = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct event *e = &sh->ev[i];
        if (e->kind == EV_ACQ && e->rc == SHL_OK) {
            acquired++;
            max_acquired = e->token > max_acquired ? e->token : max_acquired;
        }
        unavail += e->rc == SHL_EUNAVAIL;
        writes += e->kind == EV_WRITE && e->rc == SHL_OK;
        stale_tried += e->kind == EV_STALE_WRITE;
        stale_refused += e->kind == EV_STALE_WRITE && e->rc == SHL_ELOST;
        cr_assert(e->kind != EV_STALE_WRITE || e->rc == SHL_OK || e->rc == SHL_ELOST ||
                      e->rc == SHL_EUNAVAIL,
                  "a late write: %s", shl_strerror(e->rc));
        /* No answer in time (a fault): it may have landed, which the
         * history check covers. */
        stale_unavail += e->kind == EV_STALE_WRITE && e->rc == SHL_EUNAVAIL;
        if (e->kind == EV_STALE_WRITE && e->rc == SHL_OK) {
            uint64_t when = granted(e->worker, e->token);
            int near = 0;
            for (int f = 0; f < 2; f++)
                near |= when >= fault[f][0] && when <= fault[f][1];
            cr_assert(near, "w%d wrote with token %llu after its ttl, far from a leader change",
                      e->worker, (unsigned long long)e->token);
            stale_landed++;
        }
    }
    /* Sorted by when they were granted (the log is in call-return order,
     * near enough; sort to be exact). */
    uint64_t *toks = calloc(acquired, sizeof *toks), *at = calloc(acquired, sizeof *at);
    unsigned k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (sh->ev[i].kind == EV_ACQ && sh->ev[i].rc == SHL_OK) {
            unsigned j = k++;
            while (j > 0 && at[j - 1] > sh->ev[i].at_ns) {
                at[j] = at[j - 1];
                toks[j] = toks[j - 1];
                j--;
            }
            at[j] = sh->ev[i].at_ns;
            toks[j] = sh->ev[i].token;
        }
    for (unsigned i = 0; i < acquired; i++) {
        cr_assert_gt(toks[i], last, "token %llu granted after %llu", (unsigned long long)toks[i],
                     (unsigned long long)last);
        last = toks[i];
    }
    free(toks);
    free(at);

    uint64_t max_landed;
    unsigned landed = check_history(&max_landed);
    cr_assert_geq(landed, writes, "every confirmed write is in the history");
    cr_assert_leq(max_landed, max_acquired);
    cr_assert_gt(stale_tried, 0);
    cr_assert_gt(stale_refused, 0, "writes after the ttl are refused");
    cr_assert_eq(stale_refused + stale_landed + stale_unavail, stale_tried);
    cr_log_info("leader failover: %u acquisitions (tokens up to %llu), %u writes landed, "
                "%u stale writes refused (%u late ones landed across a leader change), "
                "%u calls unavailable; resumed %llu ms after the "
                "leader's SIGKILL, %llu ms after its SIGSTOP",
                acquired, (unsigned long long)max_acquired, landed, stale_refused, stale_landed,
                unavail, (unsigned long long)(resume_kill / MS),
                (unsigned long long)(resume_stop / MS));
    munmap(sh, sizeof *sh);
    etcd_cluster_stop(&cl);
}
