/*
 * tests/test_tool_metrics.c - shmlease metrics: promtool accepts what it
 * prints for a table that real processes acquired, refused, took over,
 * revoked, shared and waited for; the values are the segment's counters;
 * the pools; label values are escaped; the bound on leases; a removed
 * table; an etcd table's series; the PromQL of docs/OPERATIONS.md. Serving
 * it: tests/test_tool_metrics_serve.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/metrics.h"
#include "common.h"

#define EXIT_TABLE 3

/* promtool check metrics on `text`: its exit status; what it said in *said.
 * A missing promtool fails the test: the check must not pass unseen. */
static int promtool(const char *text, char **said)
{
    cr_assert_eq(t_run("command -v promtool >/dev/null 2>&1", NULL), 0,
                 "promtool is missing (make deps installs it): "
                 "apt-get install -y --no-install-recommends prometheus");
    char path[] = "/tmp/shl-metrics-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    int st = t_run(cmd, said);
    unlink(path);
    return st;
}

static int child_busy_and_wrong_owner(void *arg)
{
    shl_table *t;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 10;
    uint64_t tok;
    if (shl_acquire(t, "job", "b", 60 * SEC, &tok) != SHL_EBUSY)
        return 11;
    if (shl_renew(t, "job", "b", 1, 60 * SEC) != SHL_ELOST) /* another's lease */
        return 12;
    shl_close(t);
    return 0;
}

static int child_expires(void *arg)
{
    shl_table *t;
    uint64_t tok;
    if (shl_open(arg, NULL, &t) != SHL_OK || shl_acquire(t, "short", "c", MS, &tok) != SHL_OK)
        return 10;
    shl_close(t);
    return 0;
}

/* Takes "short" over from the expired holder, then writes with an older
 * token of its own (stale), and releases. */
static int child_takes_over(void *arg)
{
    shl_table *t;
    uint64_t tok;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 10;
    if (shl_acquire(t, "short", "d", 60 * SEC, &tok) != SHL_OK || tok != 2)
        return 11;
    if (shl_write(t, "short", "d", tok - 1, "x", 1) != SHL_ELOST)
        return 12;
    if (shl_write(t, "short", "d", tok, "y", 1) != SHL_OK ||
        shl_release(t, "short", "d", tok) != SHL_OK)
        return 13;
    shl_close(t);
    return 0;
}

static const char *reader_owner; /* set before each fork */

static int child_reader(void *arg)
{
    shl_table *t;
    uint64_t tok, gen;
    const char *owner = reader_owner;
    if (shl_open(arg, NULL, &t) != SHL_OK ||
        shl_acquire_shared(t, "readers", owner, 60 * SEC, &tok, &gen) != SHL_OK)
        return 10;
    shl_close(t);
    return 0;
}

/* Waits for "job" (held by the test), then releases it. */
static int child_waiter(void *arg)
{
    shl_table *t;
    uint64_t tok;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 10;
    if (shl_acquire_wait(t, "job", "w", 60 * SEC, 100 * SEC, &tok) != SHL_OK)
        return 11;
    if (shl_release(t, "job", "w", tok) != SHL_OK)
        return 12;
    shl_close(t);
    return 0;
}

/* Whether `shmlease metrics` shows line (whole), polled for up to 30 s (a
 * loaded machine may take long to start a waiter). */
static int shows_soon(const char *name, const char *line)
{
    char want[600];
    snprintf(want, sizeof want, "\n%s\n", line);
    for (int i = 0; i < 300; i++) {
        char *out;
        t_tool_run(&out, "metrics %s", name);
        int found = strstr(out, want) != NULL;
        free(out);
        if (found)
            return 1;
        t_sleep_ns(100 * MS);
    }
    return 0;
}

static void run_child(int (*fn)(void *), const char *name)
{
    pid_t p = t_fork(fn, (void *)name);
    cr_assert_eq(t_wait(p), 0, "a child failed");
}

/* promtool check metrics accepts `text` and has nothing to say. */
static void promtool_clean(const char *text)
{
    char *said;
    cr_expect_eq(promtool(text, &said), 0, "promtool check metrics: %s\non:\n%s", said, text);
    cr_expect_str_empty(said, "promtool had something to say: %s", said);
    free(said);
}

/* The sample line `line` (a whole line) is in text. */
static void has_line(const char *text, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    cr_expect(strstr(text, want), "no line '%s' in:\n%s", line, text);
}

Test(tool_metrics, busy_table_passes_promtool_with_the_segments_counts)
{
    char name[96], line[512];
    shl_table *t = t_create(t_name(name, sizeof name, "met"), 16, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "job", "a", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "we\"ird\\name", "a", 60 * SEC, &tok), SHL_OK);
#define L(...) (snprintf(line, sizeof line, __VA_ARGS__), line)
    run_child(child_busy_and_wrong_owner, name);
    run_child(child_expires, name);
    t_sleep_ns(5 * MS);
    run_child(child_takes_over, name);
    reader_owner = "r1";
    run_child(child_reader, name);
    reader_owner = "r2";
    run_child(child_reader, name);
    /* A waiter, counted while it waits; the revoke lets it in. */
    pid_t waiter = t_fork(child_waiter, name);
    cr_assert(shows_soon(name, L("shmlease_lease_waiters{table=\"%s\",lease=\"job\"} 1", name)),
              "the waiter was never counted");
    char *out;
    cr_assert_eq(t_tool_run(&out, "revoke %s job 2>&1", name), 0, "%s", out);
    free(out);
    cr_assert_eq(t_wait(waiter), 0, "the waiter failed");

    cr_assert_eq(t_tool_run(&out, "metrics %s", name), 0, "%s", out);
    promtool_clean(out);
    has_line(out, L("shmlease_table_up{table=\"%s\"} 1", name));
    has_line(out, L("shmlease_table_capacity{table=\"%s\"} 16", name));
    has_line(out, L("shmlease_table_leases{table=\"%s\"} 4", name));
    has_line(out, L("shmlease_table_leases_omitted{table=\"%s\"} 0", name));
    has_line(out, L("shmlease_lease_busy_refusals_total{table=\"%s\",lease=\"job\"} 1", name));
    has_line(
        out,
        L("shmlease_lease_rejections_total{table=\"%s\",lease=\"job\",reason=\"owner\"} 1", name));
    has_line(out, L("shmlease_lease_revokes_total{table=\"%s\",lease=\"job\"} 1", name));
    has_line(out, L("shmlease_lease_state{table=\"%s\",lease=\"job\",state=\"free\"} 1", name));
    has_line(out,
             L("shmlease_lease_acquisitions_total{table=\"%s\",lease=\"job\",kind=\"exclusive\"} 2",
               name));
    has_line(out, L("shmlease_lease_releases_total{table=\"%s\",lease=\"job\"} 1", name));
    has_line(out, L("shmlease_lease_waiters{table=\"%s\",lease=\"job\"} 0", name));
    has_line(out, L("shmlease_lease_expiries_total{table=\"%s\",lease=\"short\"} 1", name));
    has_line(out,
             L("shmlease_lease_acquisitions_total{table=\"%s\",lease=\"short\",kind=\"exclusive\"} "
               "2",
               name));
    has_line(out,
             L("shmlease_lease_rejections_total{table=\"%s\",lease=\"short\",reason=\"stale\"} 1",
               name));
    has_line(out, L("shmlease_lease_writes_total{table=\"%s\",lease=\"short\"} 1", name));
    has_line(out, L("shmlease_lease_releases_total{table=\"%s\",lease=\"short\"} 1", name));
    has_line(out, L("shmlease_lease_token{table=\"%s\",lease=\"short\"} 2", name));
    has_line(
        out,
        L("shmlease_lease_acquisitions_total{table=\"%s\",lease=\"readers\",kind=\"shared\"} 2",
          name));
    has_line(out, L("shmlease_lease_shared_holders{table=\"%s\",lease=\"readers\"} 2", name));
    /* The quote and the backslash of a lease name, escaped. */
    has_line(out, L("shmlease_lease_ttl_seconds{table=\"%s\",lease=\"we\\\"ird\\\\name\"} "
                    "60.000000000",
                    name));
#undef L
    free(out);
    shl_close(t);
}

/* The pools, by the label pool: their sizes and what is taken, as
 * shl_table_info gives them, and a spare taken back counted. */
Test(tool_metrics, pools_and_what_was_taken_back)
{
    char name[96], line[512];
    shl_options o;
    shl_options_init(&o);
    o.capacity = 8;
    o.value_size = 16;
    o.spare_values = 1;
    shl_table *t = t_create_opts(name, sizeof name, "metpool", &o);
    uint64_t a, b, r, gen;
    cr_assert_eq(shl_acquire(t, "A", "w", 60 * SEC, &a), SHL_OK);
    cr_assert_eq(shl_acquire(t, "B", "w", 60 * SEC, &b), SHL_OK);
    cr_assert_eq(shl_write(t, "A", "w", a, "1", 1), SHL_OK);
    cr_assert_eq(shl_write(t, "B", "w", b, "2", 1), SHL_OK); /* A's spare, taken back */
    cr_assert_eq(shl_acquire_shared(t, "R", "r", 60 * SEC, &r, &gen), SHL_OK);
    shl_table_info in = t_info(t);
    char *out;
    cr_assert_eq(t_tool_run(&out, "metrics %s", name), 0, "%s", out);
    promtool_clean(out);
#define L(...) (snprintf(line, sizeof line, __VA_ARGS__), line)
    has_line(out,
             L("shmlease_table_pool_size{table=\"%s\",pool=\"reader\"} %u", name, in.max_shared));
    has_line(out,
             L("shmlease_table_pool_size{table=\"%s\",pool=\"waiter\"} %u", name, in.max_waiters));
    has_line(out, L("shmlease_table_pool_size{table=\"%s\",pool=\"value\"} 1", name));
    has_line(out, L("shmlease_table_pool_taken{table=\"%s\",pool=\"reader\"} %u", name,
                    SHL_SHARED_GROUP));
    has_line(out, L("shmlease_table_pool_taken{table=\"%s\",pool=\"waiter\"} 0", name));
    has_line(out, L("shmlease_table_pool_taken{table=\"%s\",pool=\"value\"} 1", name));
    has_line(out, L("shmlease_table_pool_taken_back_total{table=\"%s\",pool=\"reader\"} 0", name));
    has_line(out, L("shmlease_table_pool_taken_back_total{table=\"%s\",pool=\"value\"} 1", name));
    /* The memory it takes now (tests/test_room.c: how it grows). */
    cr_assert_gt(in.allocated, 0u);
    has_line(out, L("shmlease_table_allocated_bytes{table=\"%s\"} %llu", name,
                    (unsigned long long)in.allocated));
#undef L
    free(out);
    shl_close(t);
}

/* A label value may hold anything a name may: '\', '"' and a newline are
 * escaped as the text format wants. A lease name cannot hold a newline (the
 * library refuses it), so the escaper is tested on its own for that one. */
Test(tool_metrics, label_values_are_escaped)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    metrics_label(f, "a\"b\\c\nd");
    /* Bytes no name may hold (a damaged segment's): \xNN, never raw. */
    metrics_label(f, "|\x01\xff");
    fclose(f);
    cr_expect_str_eq(buf, "a\\\"b\\\\c\\nd|\\\\x01\\\\xff");
    free(buf);

    char name[96];
    shl_table *t = t_create(t_name(name, sizeof name, "metesc"), 4, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_expect_eq(shl_acquire(t, "two\nlines", "a", SEC, &tok), SHL_EINVAL);
    shl_close(t);
}

/* A name that still names a table marked removed (here a second link to a
 * table that shl_unlink() removed, as an rm cut short leaves one): up 0 and
 * removed 1; a live table is removed 0. */
Test(tool_metrics, a_table_marked_removed_says_so)
{
    char name[96], other[96], a[128], b[128], line[256];
    shl_table *t = t_create(t_name(name, sizeof name, "metrm"), 4, 16, SHL_CLOCK_MONOTONIC);
    t_name(other, sizeof other, "metrm2");
    snprintf(a, sizeof a, "/dev/shm/%s", name);
    snprintf(b, sizeof b, "/dev/shm/%s", other);
    cr_assert_eq(link(a, b), 0);
    char *out;
    cr_assert_eq(t_tool_run(&out, "metrics %s", other), 0);
    snprintf(line, sizeof line, "\nshmlease_table_removed{table=\"%s\"} 0\n", other);
    cr_expect(strstr(out, line), "%s", out);
    free(out);
    cr_assert_eq(shl_unlink(name), SHL_OK);
    cr_expect_eq(t_tool_run(&out, "metrics %s 2>/dev/null", other), EXIT_TABLE);
    snprintf(line, sizeof line, "\nshmlease_table_removed{table=\"%s\"} 1\n", other);
    cr_expect(strstr(out, line), "%s", out);
    snprintf(line, sizeof line, "\nshmlease_table_up{table=\"%s\"} 0\n", other);
    cr_expect(strstr(out, line), "%s", out);
    free(out);
    unlink(b);
    shl_close(t);
}

Test(tool_metrics, max_leases_bounds_the_series_and_counts_the_rest)
{
    char name[96], line[256];
    shl_table *t = t_create(t_name(name, sizeof name, "metmax"), 16, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    for (int i = 0; i < 5; i++) {
        char l[16];
        snprintf(l, sizeof l, "l%d", i);
        cr_assert_eq(shl_acquire(t, l, "a", 60 * SEC, &tok), SHL_OK);
    }
    char *out;
    cr_assert_eq(t_tool_run(&out, "metrics --max-leases 2 %s", name), 0);
    snprintf(line, sizeof line, "\nshmlease_table_leases_omitted{table=\"%s\"} 3\n", name);
    cr_expect(strstr(out, line), "%s", out);
    int series = 0;
    for (char *p = strstr(out, "\nshmlease_lease_token{"); p;
         p = strstr(p + 1, "\nshmlease_lease_token{"))
        series++;
    cr_expect_eq(series, 2, "%d leases shown", series);
    free(out);
    /* A table that does not open: up 0, exit 3, the others still shown. */
    int st = t_tool_run(&out, "metrics %s no-such-table-%d 2>/dev/null", name, (int)getpid());
    cr_expect_eq(st, EXIT_TABLE);
    snprintf(line, sizeof line, "\nshmlease_table_up{table=\"no-such-table-%d\"} 0\n",
             (int)getpid());
    cr_expect(strstr(out, line), "%s", out);
    free(out);
    shl_close(t);
}

#if SHL_HAVE_ETCD
#include "etcd_cluster.h"

/* On an etcd table: what etcd keeps (state, holders, time left, token,
 * waiters, revision), and no series for what it does not (counters,
 * capacity, segment size, removal mark, ttl), rather than a made-up 0. */
Test(tool_metrics, etcd_table_gives_what_etcd_keeps)
{
    t_guard(120);
    struct etcd_cluster cl;
    char url[256], line[512];
    shl_table *t = t_etcd_up(&cl, "metrics", 16, url, sizeof url);
    uint64_t tok, rtok, gen;
    cr_assert_eq(shl_acquire(t, "job", "w", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire_shared(t, "rd", "r", 60 * SEC, &rtok, &gen), SHL_OK);
    cr_assert_eq(shl_acquire(t, "done", "w", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "done", "w", tok), SHL_OK);
    char *out;
    cr_assert_eq(t_tool_run(&out, "metrics '%s'", url), 0, "%s", out);
    promtool_clean(out);
#define L(...) (snprintf(line, sizeof line, __VA_ARGS__), line)
    has_line(out, L("shmlease_table_up{table=\"%s\"} 1", url));
    has_line(out, L("shmlease_table_leases{table=\"%s\"} 3", url));
    has_line(out, L("shmlease_lease_state{table=\"%s\",lease=\"job\",state=\"held\"} 1", url));
    has_line(out, L("shmlease_lease_state{table=\"%s\",lease=\"done\",state=\"free\"} 1", url));
    has_line(out, L("shmlease_lease_token{table=\"%s\",lease=\"job\"} 1", url));
    has_line(out, L("shmlease_lease_shared_holders{table=\"%s\",lease=\"rd\"} 1", url));
    has_line(out, L("shmlease_lease_waiters{table=\"%s\",lease=\"job\"} 0", url));
    cr_expect(strstr(out, L("shmlease_lease_remaining_seconds{table=\"%s\",lease=\"job\"} 5", url)),
              "job's time left, 50 to 60 s: %s", out);
    cr_expect(strstr(out, L("shmlease_lease_last_revision{table=\"%s\",lease=\"job\"} ", url)),
              "%s", out);
    /* Nothing etcd does not keep: no counter, no state it cannot tell. */
    static const char *const absent[] = {
        "_total{",
        "shmlease_table_capacity{",
        "shmlease_table_size_bytes{",
        "shmlease_table_pool",
        "table_removed{",
        "shmlease_lease_ttl_seconds{",
        "state=\"expired\"",
        "state=\"revoked\"",
        "state=\"orphaned\"",
    };
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_expect(!strstr(out, absent[i]), "'%s' made up for an etcd table:\n%s", absent[i], out);
#undef L
    free(out);
    t_etcd_down(&cl, t, 1);
}
#endif

/* The three PromQL expressions of docs/OPERATIONS.md (its promql blocks, in
 * order), evaluated by promtool on series shaped as shmlease metrics prints
 * them: acquisitions a second per table, stale refusals a second, leases
 * past 90 % of their ttl. */
static const char promql_test_py[] =
    "import json, re, sys\n"
    "doc = open(sys.argv[1]).read()\n"
    "exprs = re.findall(r'```promql\\n(.*?)\\n```', doc, re.S)\n"
    "assert len(exprs) == 3, 'want 3 promql blocks, found %d' % len(exprs)\n"
    "S = [('shmlease_lease_acquisitions_total{table=\"t\",lease=\"a\",kind=\"exclusive\"}', "
    "'0+60x10'),\n"
    "     ('shmlease_lease_acquisitions_total{table=\"t\",lease=\"a\",kind=\"shared\"}', "
    "'0+120x10'),\n"
    "     ('shmlease_lease_rejections_total{table=\"t\",lease=\"a\",reason=\"stale\"}', "
    "'0+30x10'),\n"
    "     ('shmlease_lease_rejections_total{table=\"t\",lease=\"b\",reason=\"stale\"}', "
    "'0+0x10'),\n"
    "     ('shmlease_lease_rejections_total{table=\"t\",lease=\"a\",reason=\"owner\"}', "
    "'0+600x10'),\n"
    "     ('shmlease_lease_remaining_seconds{table=\"t\",lease=\"a\"}', '25x10'),\n"
    "     ('shmlease_lease_ttl_seconds{table=\"t\",lease=\"a\"}', '30x10'),\n"
    "     ('shmlease_lease_remaining_seconds{table=\"t\",lease=\"b\"}', '2x10'),\n"
    "     ('shmlease_lease_ttl_seconds{table=\"t\",lease=\"b\"}', '30x10'),\n"
    "     ('shmlease_lease_remaining_seconds{table=\"t\",lease=\"c\"}', '0x10')]\n"
    "want = [('{table=\"t\"}', 3), ('{table=\"t\",lease=\"a\"}', 0.5),\n"
    "        ('shmlease_lease_remaining_seconds{table=\"t\",lease=\"b\"}', 2)]\n"
    "y = ['rule_files: []', 'evaluation_interval: 1m', 'tests:', '  - interval: 1m',\n"
    "     '    input_series:']\n"
    "for s, v in S:\n"
    "    y += ['      - series: ' + json.dumps(s), '        values: ' + json.dumps(v)]\n"
    "y.append('    promql_expr_test:')\n"
    "for e, (l, v) in zip(exprs, want):\n"
    "    y += ['      - expr: ' + json.dumps(e), '        eval_time: 10m',\n"
    "          '        exp_samples:', '          - labels: ' + json.dumps(l),\n"
    "          '            value: %s' % v]\n"
    "open(sys.argv[2], 'w').write('\\n'.join(y) + '\\n')\n";

Test(tool_metrics, promql_of_the_guide_gives_the_answers)
{
    char dir[96], cmd[8192], *out;
    cr_assert_eq(t_run("command -v promtool >/dev/null 2>&1", NULL), 0,
                 "promtool is missing (make deps installs it): "
                 "apt-get install -y --no-install-recommends prometheus");
    t_mkdtemp(dir, sizeof dir, "shl-promql");
    const char *root = getenv("SHL_ROOT");
    snprintf(cmd, sizeof cmd,
             "python3 - '%s/docs/OPERATIONS.md' %s/t.yml <<'PYEOF' && promtool test rules "
             "%s/t.yml 2>&1\n%sPYEOF\n",
             root ? root : ".", dir, dir, promql_test_py);
    int st = t_run(cmd, &out);
    cr_expect_eq(st, 0, "%s", out);
    free(out);
    t_rm_rf(dir);
}
