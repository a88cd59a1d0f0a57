/*
 * tests/test_etcd_history.c - a lease's history on an etcd table, read from
 * etcd's revisions of its holder record: the events in order with their
 * tokens and revisions, the newest SHL_HISTORY_MAX of many, a partial
 * history after a compaction (no error), and shmlease dump / dump --json.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster CL;
static char url[256];
static shl_table *T;

static void up(void)
{
    T = t_etcd_up(&CL, "jobs", 64, url, sizeof url);
}

static void down(void)
{
    t_etcd_down(&CL, T, 0);
}

static void expect(const shl_event_info *e, int op, uint64_t token, const char *owner)
{
    cr_assert_eq(e->op, op, "op %s, want %s", shl_op_name(e->op), shl_op_name(op));
    cr_assert_eq(e->token, token, "%s: token %llu, want %llu", shl_op_name(op),
                 (unsigned long long)e->token, (unsigned long long)token);
    cr_assert_str_eq(e->owner, owner);
    cr_assert_eq(e->time_ns, 0, "etcd keeps no time per revision");
    cr_assert_gt(e->revision, 0);
}

/* Revisions strictly increase, oldest first. */
static void ordered(const shl_lease_detail *d)
{
    for (uint32_t i = 1; i < d->nevents; i++)
        cr_assert_gt(d->events[i].revision, d->events[i - 1].revision, "event %u", i);
}

Test(etcd_history, acquire_renew_release_revoke_in_order)
{
    up();
    uint64_t a, b;
    shl_lease_detail d;
    cr_assert_eq(shl_acquire(T, "job", "alice", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 1);
    expect(&d.events[0], SHL_OP_ACQUIRE, a, "alice");
    /* Another ttl moves the record to a new etcd lease: an event; the same
     * ttl again is a keep-alive, which writes nothing. */
    cr_assert_eq(shl_renew(T, "job", "alice", a, 60 * SEC), SHL_OK);
    cr_assert_eq(shl_renew(T, "job", "alice", a, 60 * SEC), SHL_OK);
    cr_assert_eq(shl_release(T, "job", "alice", a), SHL_OK);
    cr_assert_eq(shl_acquire(T, "job", "bob", 30 * SEC, &b), SHL_OK);
    cr_assert_eq(b, a + 1);
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 4, "%u events", d.nevents);
    cr_assert_eq(d.events_total, 4);
    cr_assert_eq(d.history_partial, 0);
    expect(&d.events[0], SHL_OP_ACQUIRE, a, "alice");
    expect(&d.events[1], SHL_OP_RENEW, a, "alice");
    expect(&d.events[2], SHL_OP_END, a, "alice");
    expect(&d.events[3], SHL_OP_ACQUIRE, b, "bob");
    ordered(&d);
    cr_assert_str_eq(shl_op_name(SHL_OP_END), "end");

    /* Not held now: the walk ends at the delete after the last acquisition. */
    cr_assert_eq(shl_revoke(T, "job"), SHL_OK);
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 5);
    expect(&d.events[4], SHL_OP_END, b, "bob");
    ordered(&d);

    /* Another lease's events are not this one's; a lease never held has none. */
    uint64_t c;
    cr_assert_eq(shl_acquire(T, "other", "carol", 30 * SEC, &c), SHL_OK);
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 5);
    cr_assert_eq(shl_inspect(T, "other", &d), SHL_OK);
    cr_assert_eq(d.nevents, 1);
    expect(&d.events[0], SHL_OP_ACQUIRE, c, "carol");
    down();
}

Test(etcd_history, newest_events_of_many)
{
    up();
    uint64_t tok = 0;
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(shl_acquire(T, "job", "w", 30 * SEC, &tok), SHL_OK);
        cr_assert_eq(shl_release(T, "job", "w", tok), SHL_OK);
    }
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.events_total, 12);
    cr_assert_eq(d.nevents, SHL_HISTORY_MAX);
    /* The newest 8: acquire/end of tokens 3..6, oldest first. */
    for (uint32_t i = 0; i < d.nevents; i++)
        expect(&d.events[i], i % 2 ? SHL_OP_END : SHL_OP_ACQUIRE, 3 + i / 2, "w");
    ordered(&d);
    down();
}

/* shl_foreach on 20 leases whose events interleave in the store (one round
 * of operations on every lease, then the next): each lease gets its own
 * events, all of them, in order, as shl_inspect() reads them one by one. */
#define N_LEASES 20
#define N_EXP    32
struct exp_hist {
    char name[16];
    uint64_t tok;
    char owner[24];
    int held;
    unsigned n;
    struct {
        int op;
        uint64_t token;
        char owner[24];
    } ev[N_EXP];
};

static void happened(struct exp_hist *x, int op)
{
    cr_assert_lt(x->n, N_EXP);
    x->ev[x->n].op = op;
    x->ev[x->n].token = x->tok;
    strcpy(x->ev[x->n].owner, x->owner);
    x->n++;
}

static void acquire_as(struct exp_hist *x, const char *owner)
{
    snprintf(x->owner, sizeof x->owner, "%s", owner);
    cr_assert_eq(shl_acquire(T, x->name, x->owner, 30 * SEC, &x->tok), SHL_OK);
    x->held = 1;
    happened(x, SHL_OP_ACQUIRE);
}

static void release_it(struct exp_hist *x)
{
    cr_assert_eq(shl_release(T, x->name, x->owner, x->tok), SHL_OK);
    x->held = 0;
    happened(x, SHL_OP_END);
}

struct seen {
    unsigned n;
    shl_lease_detail d[N_LEASES + 1];
};

static int collect(void *arg, const shl_lease_detail *d)
{
    struct seen *s = arg;
    cr_assert_lt(s->n, N_LEASES + 1, "more leases than made");
    s->d[s->n++] = *d;
    return 0;
}

Test(etcd_history, foreach_gives_every_lease_its_whole_history)
{
    up();
    struct exp_hist *x = calloc(N_LEASES, sizeof *x);
    cr_assert(x);
    for (unsigned i = 0; i < N_LEASES; i++)
        snprintf(x[i].name, sizeof x[i].name, "l%02u", i);
    for (unsigned round = 0; round < 4; round++) {
        for (unsigned i = 0; i < N_LEASES; i++) {
            char owner[24];
            snprintf(owner, sizeof owner, "o%u.%u", i, round);
            if (round == 0 || (round == 2 && i % 2 == 0)) {
                if (x[i].held)
                    release_it(&x[i]);
                acquire_as(&x[i], owner);
            } else if (round == 1 && i % 3 == 0) {
                /* another ttl moves the holder record: an event */
                cr_assert_eq(shl_renew(T, x[i].name, x[i].owner, x[i].tok, 60 * SEC), SHL_OK);
                happened(&x[i], SHL_OP_RENEW);
            } else if (round == 3 && i % 4 == 1) {
                release_it(&x[i]);
            }
        }
    }
    /* More events than a detail keeps: the newest SHL_HISTORY_MAX. */
    for (int k = 0; k < 5; k++) {
        if (x[7].held)
            release_it(&x[7]);
        acquire_as(&x[7], "again");
    }
    struct seen *s = calloc(1, sizeof *s);
    cr_assert(s);
    cr_assert_eq(shl_foreach(T, collect, s), SHL_OK);
    cr_assert_eq(s->n, N_LEASES);
    for (int i = 0; i < N_LEASES; i++) {
        const shl_lease_detail *d = &s->d[i];
        cr_assert_str_eq(d->name, x[i].name, "key order");
        cr_assert_eq(d->history_partial, 0, "%s", d->name);
        cr_assert_eq(d->events_total, x[i].n, "%s: %llu events, want %u", d->name,
                     (unsigned long long)d->events_total, x[i].n);
        unsigned keep = x[i].n < SHL_HISTORY_MAX ? x[i].n : SHL_HISTORY_MAX;
        cr_assert_eq(d->nevents, keep, "%s", d->name);
        for (unsigned k = 0; k < keep; k++) {
            unsigned j = x[i].n - keep + k;
            expect(&d->events[k], x[i].ev[j].op, x[i].ev[j].token, x[i].ev[j].owner);
        }
        ordered(d);
        shl_lease_detail one;
        cr_assert_eq(shl_inspect(T, x[i].name, &one), SHL_OK);
        cr_assert_eq(one.nevents, d->nevents);
        cr_assert_eq(memcmp(one.events, d->events, sizeof one.events[0] * one.nevents), 0,
                     "%s: foreach and inspect disagree", d->name);
    }
    free(s);
    free(x);
    down();
}

/* The store's revision now: that of a new acquisition of lease "probe". */
static int64_t revision_now(void)
{
    shl_lease_detail d;
    uint64_t tok;
    cr_assert_eq(shl_acquire(T, "probe", "p", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_inspect(T, "probe", &d), SHL_OK);
    cr_assert_eq(d.nevents, 1);
    return d.events[0].revision;
}

Test(etcd_history, compacted_history_is_partial_not_an_error)
{
    up();
    uint64_t a, b, g;
    cr_assert_eq(shl_acquire(T, "job", "alice", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_release(T, "job", "alice", a), SHL_OK);
    cr_assert_eq(shl_acquire(T, "gone", "gus", 30 * SEC, &g), SHL_OK);
    cr_assert_eq(shl_release(T, "gone", "gus", g), SHL_OK);
    int64_t rev = revision_now();
    char args[64];
    snprintf(args, sizeof args, "compact %lld >/dev/null", (long long)rev);
    cr_assert_eq(etcd_cluster_ctl(&CL, args), 0, "%s", args);
    cr_assert_eq(shl_acquire(T, "job", "bob", 30 * SEC, &b), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 1);
    cr_assert_eq(d.nevents, 1, "%u events", d.nevents);
    expect(&d.events[0], SHL_OP_ACQUIRE, b, "bob");
    cr_assert_gt(d.events[0].revision, rev);
    cr_assert_eq(shl_release(T, "job", "bob", b), SHL_OK);
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 2);
    expect(&d.events[1], SHL_OP_END, b, "bob");

    /* A lease whose every event was compacted away: partial, empty, no error. */
    cr_assert_eq(shl_inspect(T, "gone", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 1);
    cr_assert_eq(d.nevents, 0);
    /* Nothing older than its first acquisition: complete. */
    cr_assert_eq(shl_inspect(T, "probe", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 0);
    cr_assert_eq(d.nevents, 1);
    down();
}

Test(etcd_history, dump_and_json_show_it)
{
    up();
    uint64_t a, b;
    cr_assert_eq(shl_acquire(T, "job", "alice", 30 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_release(T, "job", "alice", a), SHL_OK);
    cr_assert_eq(shl_acquire(T, "job", "bob", 30 * SEC, &b), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.nevents, 3);
    char *out, want[160];
    cr_assert_eq(t_tool_run(&out, "dump '%s' 2>&1", url), 0);
    cr_assert(strstr(out, "history   3 of 3 events\n"), "%s", out);
    for (int i = 0; i < 3; i++) {
        static const char *const ops[] = {"acquire", "end", "acquire"};
        snprintf(want, sizeof want, "rev %16lld  %-8s token %-6llu %s\n",
                 (long long)d.events[i].revision, ops[i], (unsigned long long)(i < 2 ? a : b),
                 i < 2 ? "alice" : "bob");
        cr_assert(strstr(out, want), "want \"%s\" in:\n%s", want, out);
    }
    free(out);
    cr_assert_eq(t_tool_run(&out, "dump --json '%s' 2>&1", url), 0);
    cr_assert(strstr(out, "\"events_total\": 3, \"history_partial\": false"), "%s", out);
    snprintf(want, sizeof want,
             "{\"time_ns\": null, \"op\": \"end\", \"token\": %llu, \"pid\": null, \"owner\": "
             "\"alice\", \"why\": \"\", \"revision\": %lld}",
             (unsigned long long)a, (long long)d.events[1].revision);
    cr_assert(strstr(out, want), "want %s in:\n%s", want, out);
    free(out);

    char args[64];
    snprintf(args, sizeof args, "compact %lld >/dev/null", (long long)d.events[2].revision);
    cr_assert_eq(etcd_cluster_ctl(&CL, args), 0);
    cr_assert_eq(t_tool_run(&out, "dump '%s' 2>&1", url), 0);
    cr_assert(strstr(out, "(partial: older revisions compacted or out of reach)"), "%s", out);
    free(out);
    cr_assert_eq(t_tool_run(&out, "dump --json '%s' 2>&1", url), 0);
    cr_assert(strstr(out, "\"history_partial\": true"), "%s", out);
    free(out);
    down();
}

/* A shared acquisition moves the token record and never touches the holder
 * record: a lease whose last acquisition was shared has its history whole
 * (it ends at the delete after the last exclusive acquisition, the gen
 * record's), and a lease only ever held shared has none, not a partial one. */
Test(etcd_history, shared_acquisitions_leave_the_history_whole)
{
    up();
    uint64_t w, r, s, g;
    cr_assert_eq(shl_acquire(T, "job", "alice", 30 * SEC, &w), SHL_OK);
    cr_assert_eq(shl_release(T, "job", "alice", w), SHL_OK);
    cr_assert_eq(shl_acquire_shared(T, "job", "reader", 30 * SEC, &r, &g), SHL_OK);
    cr_assert_eq(shl_acquire_shared(T, "only", "reader", 30 * SEC, &s, &g), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(T, "job", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 0, "nothing of job's history is missing");
    cr_assert_eq(d.nevents, 2, "%u events", d.nevents);
    expect(&d.events[0], SHL_OP_ACQUIRE, w, "alice");
    expect(&d.events[1], SHL_OP_END, w, "alice");
    cr_assert_eq(shl_inspect(T, "only", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 0, "a lease never held exclusively misses no event");
    cr_assert_eq(d.nevents, 0, "%u events", d.nevents);
    char *out;
    cr_assert_eq(t_tool_run(&out, "dump --json '%s' 2>&1", url), 0);
    cr_assert_null(strstr(out, "\"history_partial\": true"), "%s", out);
    free(out);
    cr_assert_eq(shl_release(T, "job", "reader", r), SHL_OK);
    cr_assert_eq(shl_release(T, "only", "reader", s), SHL_OK);
    down();
}

/* Token and gen records without the holder events they imply (an
 * exclusive acquisition: a table whose records disagree): the history stops
 * at the deadline, partial, and is no error. */
Test(etcd_history, disagreeing_records_give_a_partial_history)
{
    up();
    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    etc_client *e;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    cr_assert_eq(etc_put(e, "jobs/t/odd", 10, "3", 1, 0, NULL), ETC_OK);
    cr_assert_eq(etc_put(e, "jobs/g/odd", 10, "3", 1, 0, NULL), ETC_OK);
    etc_close(e);
    shl_options o;
    shl_options_init(&o);
    o.value_size = 64;
    o.timeout_ms = 500;
    shl_table *t;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    shl_lease_detail d;
    cr_assert_eq(shl_inspect(t, "odd", &d), SHL_OK);
    cr_assert_eq(d.history_partial, 1);
    cr_assert_eq(d.nevents, 0, "%u events", d.nevents);
    shl_close(t);
    down();
}
