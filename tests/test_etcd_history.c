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
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(&CL, 1, 0), 0, "%s", CL.err);
    etcd_cluster_url(&CL, "jobs", url, sizeof url);
    shl_options o;
    shl_options_init(&o);
    o.value_size = 64;
    cr_assert_eq(shl_open(url, &o, &T), SHL_OK);
}

static void down(void)
{
    shl_close(T);
    etcd_cluster_stop(&CL);
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
             "{\"time_ns\": 0, \"op\": \"end\", \"token\": %llu, \"pid\": 0, \"owner\": "
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

/* A token record without the holder events it implies (a table whose records
 * disagree): the history stops at the deadline, partial, and is no error. */
Test(etcd_history, disagreeing_records_give_a_partial_history)
{
    up();
    struct etc_config c = {0};
    c.endpoints = CL.endpoints;
    etc_client *e;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    cr_assert_eq(etc_put(e, "jobs/t/odd", 10, "3", 1, 0, NULL), ETC_OK);
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
