/*
 * tests/test_tool_output.c - output for people and for scripts: ls columns
 * that long names and owners do not break (nor owners that change while ls
 * reads the table), a lease nobody holds shown with
 * its last holder as such, ls --json with owners whole, shmlease tables
 * (text and JSON), dump's times next to now and values as text, check's
 * one-line summary, and remaining times rounded as printf rounds them.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

/* Where `word` starts in `line` (which ends at '\n'); -1 if not there. */
static int column(const char *line, const char *word)
{
    const char *end = strchr(line, '\n'), *p = strstr(line, word);
    return p && (!end || p < end) ? (int)(p - line) : -1;
}

Test(output, ls_columns_hold_long_names_and_free_leases_show_the_last_holder)
{
    char name[96], owner[SHL_OWNER_MAX + 1], lease[SHL_NAME_MAX + 1], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "outls"), 8, 16, SHL_CLOCK_MONOTONIC);
    memset(owner, 'o', SHL_OWNER_MAX);
    owner[SHL_OWNER_MAX] = '\0';
    memset(lease, 'n', SHL_NAME_MAX);
    lease[SHL_NAME_MAX] = '\0';
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, lease, owner, 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "short", "w2", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "short", "w2", tok), SHL_OK);
    cr_assert_eq(t_tool_run(&out, "ls %s", name), 0);
    /* Header, the long lease, the free one: STATE, TOKEN and WAITERS line up. */
    const char *l1 = out, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    int state = column(l1, "STATE"), waiters = column(l1, "WAITERS") + 7;
    cr_assert_eq(column(l2, "HELD"), state, "%s", out);
    cr_assert_eq(column(l3, "FREE"), state, "%s", out);
    cr_assert_eq((int)(strchr(l2, '\n') - l2), waiters, "%s", out);
    cr_assert_eq((int)(strchr(l3, '\n') - l3), waiters, "%s", out);
    cr_assert_neq(column(l2, owner), -1, "the owner was cut: %s", out);
    /* Not held: the last holder, as such, and no pid. */
    cr_assert_neq(column(l3, "(last: w2)"), -1, "%s", out);
    cr_assert_eq(l3[column(l1, "PID") + 2], '-', "a pid for a lease nobody holds: %s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

/* The columns are measured on the very leases they print: a lease whose
 * holder changes between a 63-byte owner and a 1-byte one all the while
 * (another process, acquiring and releasing) never pushes its line out of
 * them. Each run of ls sees it at some point of the flipping; 30 runs. */
Test(output, ls_columns_hold_while_an_owner_changes)
{
    char name[96], longer[SHL_OWNER_MAX + 1];
    enum { N = 3000 };
    shl_table *t = t_create(t_name(name, sizeof name, "outflip"), N, 16, SHL_CLOCK_MONOTONIC);
    for (int i = 0; i < N - 1; i++) {
        char lease[32];
        shl_lease *l;
        snprintf(lease, sizeof lease, "lease-%04d", i);
        cr_assert_eq(shl_lease_open(t, lease, "o", &l), SHL_OK);
        shl_lease_close(l);
    }
    memset(longer, 'L', SHL_OWNER_MAX);
    longer[SHL_OWNER_MAX] = '\0';
    pid_t parent = getpid(), flipper = fork();
    cr_assert_neq(flipper, -1);
    if (flipper == 0) {
        /* Killed with the test, whatever ends it. */
        shl_table *c;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent ||
            shl_open(name, NULL, &c) != SHL_OK)
            _exit(1);
        for (;;) {
            uint64_t tok;
            const char *who = longer;
            for (int k = 0; k < 2; k++, who = "s")
                if (shl_acquire(c, "flip", who, 60 * SEC, &tok) != SHL_OK ||
                    shl_release(c, "flip", who, tok) != SHL_OK)
                    _exit(2);
        }
    }
    int bad = 0;
    for (int run = 0; run < 30 && !bad; run++) {
        char *out;
        cr_assert_eq(t_tool_run(&out, "ls %s", name), 0);
        int waiters = column(out, "WAITERS") + 7;
        /* Every line's WAITERS field ends where the header's does (a note
         * may follow: it starts with two spaces). */
        for (const char *l = strchr(out, '\n') + 1; *l; l = strchr(l, '\n') + 1) {
            int len = (int)(strchr(l, '\n') - l);
            if (len < waiters || l[waiters - 1] < '0' || l[waiters - 1] > '9' ||
                (len > waiters && l[waiters] != ' ')) {
                cr_log_error("run %d, a line out of its columns:\n%.*s\n%.*s", run,
                             (int)(strchr(out, '\n') - out), out, len, l);
                bad = 1;
                break;
            }
        }
        free(out);
    }
    kill(flipper, SIGKILL);
    int st;
    cr_assert_eq(waitpid(flipper, &st, 0), flipper);
    cr_assert(WIFSIGNALED(st), "the flipper stopped on its own: %d", WEXITSTATUS(st));
    cr_assert_eq(bad, 0, "a line out of the columns measured for it");
    shl_close(t);
    shl_unlink(name);
}

Test(output, ls_json_keeps_owners_whole)
{
    char name[96], owner[SHL_OWNER_MAX + 1], cmd[1024];
    shl_table *t = t_create(t_name(name, sizeof name, "outjs"), 8, 16, SHL_CLOCK_MONOTONIC);
    memset(owner, 'q', SHL_OWNER_MAX);
    owner[SHL_OWNER_MAX] = '\0';
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "held", owner, 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "free", "w2", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "free", "w2", tok), SHL_OK);
    snprintf(cmd, sizeof cmd,
             "'%s' ls %s --json | python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "l={x[\"name\"]: x for x in d[\"leases\"]}; h=l[\"held\"]; f=l[\"free\"]; "
             "assert d[\"table\"] == \"%s\", d; "
             "assert h[\"owner\"] == \"q\" * %d and h[\"last_owner\"] is None, h; "
             "assert h[\"state\"] == \"HELD\" and h[\"pid\"] > 0 and h[\"token\"] == 1, h; "
             "assert f[\"owner\"] is None and f[\"last_owner\"] == \"w2\", f; "
             "assert f[\"state\"] == \"FREE\" and f[\"pid\"] is None and f[\"shared\"] == [], f'",
             t_tool(), name, name, SHL_OWNER_MAX);
    cr_assert_eq(t_run(cmd, NULL), 0, "%s", cmd);
    shl_close(t);
    shl_unlink(name);
}

Test(output, tables_lists_the_tables_of_a_directory)
{
    char dir[96], cmd[1024], *out;
    t_mkdtemp(dir, sizeof dir, "outtables");
    cr_assert_eq(t_tool_run(NULL, "create %s/a.shl --capacity 4 >/dev/null", dir), 0);
    cr_assert_eq(t_tool_run(NULL, "create %s/b.shl --no-reclaim >/dev/null", dir), 0);
    snprintf(cmd, sizeof cmd, "echo not a table > %s/c.txt", dir);
    cr_assert_eq(t_run(cmd, NULL), 0);
    cr_assert_eq(t_tool_run(&out, "tables %s", dir), 0);
    char want[160];
    snprintf(want, sizeof want, "%s/a.shl", dir);
    cr_assert(strstr(out, want), "%s", out);
    cr_assert(strstr(out, "1.000s"), "a's reclaim delay: %s", out);
    cr_assert(strstr(out, " off "), "b reclaims nothing: %s", out);
    cr_assert_null(strstr(out, "c.txt"), "a file that is no table: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "'%s' tables %s --json | python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "assert [x[\"name\"] for x in d] == [\"%s/a.shl\", \"%s/b.shl\"], d; "
             "assert d[0][\"capacity\"] == 4 and d[0][\"used\"] == 0, d; "
             "assert d[0][\"reclaim_orphans\"] and d[0][\"reclaim_delay_ms\"] == 1000, d; "
             "assert not d[1][\"reclaim_orphans\"] and d[1][\"error\"] is None, d'",
             t_tool(), dir, dir, dir);
    cr_assert_eq(t_run(cmd, NULL), 0, "%s", cmd);
    t_rm_rf(dir);
}

Test(output, dump_says_times_next_to_now_and_values_as_text)
{
    char name[96], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "outdump"), 8, 16, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_clock_set(t, 1000 * SEC), SHL_OK);
    cr_assert_eq(shl_acquire(t, "text", "w", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "text", "w", tok, "say \"hi\"\n", 9), SHL_OK);
    cr_assert_eq(shl_acquire(t, "bin", "w", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "bin", "w", tok, "\x01\x02\xff", 3), SHL_OK);
    cr_assert_eq(shl_clock_set(t, 1002 * SEC), SHL_OK);
    cr_assert_eq(t_tool_run(&out, "dump %s", name), 0);
    cr_assert(strstr(out, "value     9 bytes by token 1: \"say \\\"hi\\\"\\n\""), "%s", out);
    cr_assert(strstr(out, "value     3 bytes by token 1: 0102ff"), "%s", out);
    cr_assert(strstr(out, "since 1000000000000 (2.000s ago), expiry 1030000000000 (in 28.000s)"),
              "%s", out);
    cr_assert(strstr(out, "1000000000000 2.000s ago"), "history times: %s", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

Test(output, check_says_ok_on_one_line)
{
    char name[96], want[160], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "outchk"), 8, 16, SHL_CLOCK_MONOTONIC);
    uint64_t tok;
    cr_assert_eq(shl_acquire(t, "a", "w", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "b", "w", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(t_tool_run(&out, "check %s 2>&1", name), 0);
    snprintf(want, sizeof want, "ok: table %s, 2 leases, no problem found\n", name);
    cr_assert_str_eq(out, want);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

/* ls writes remaining times without floating point (tools/cli.c); they
 * must read as "%.3fs", "%.1fms" and "%.1fus" of the time printed them:
 * carries, exact halves (1.0625 s is one in binary too), and the largest. */
Test(output, ls_remaining_times_round_as_printf_does)
{
    static const uint64_t ttl[] = {1,
                                   999,
                                   1000,
                                   1049,
                                   1050,
                                   1051,
                                   99949,
                                   99950,
                                   999949,
                                   999950,
                                   999999,
                                   1000000,
                                   1049999,
                                   1050000,
                                   1250000,
                                   999949999,
                                   999950000,
                                   999999999,
                                   1000000000,
                                   1000499999,
                                   1000500000,
                                   1062500000,
                                   1999999500,
                                   3600000000000,
                                   123456789012345,
                                   999999999999999,
                                   UINT64_C(1000000000000000),
                                   UINT64_C(4611686018427387904)};
    enum { N = sizeof ttl / sizeof ttl[0] };
    char name[96], *out;
    shl_table *t = t_create(t_name(name, sizeof name, "outrem"), N, 16, SHL_CLOCK_MANUAL);
    cr_assert_eq(shl_clock_set(t, SEC), SHL_OK);
    for (int i = 0; i < N; i++) {
        char lease[32];
        uint64_t tok;
        snprintf(lease, sizeof lease, "rem%02d", i);
        cr_assert_eq(shl_acquire(t, lease, "o", ttl[i], &tok), SHL_OK, "ttl %llu",
                     (unsigned long long)ttl[i]);
    }
    cr_assert_eq(t_tool_run(&out, "ls %s", name), 0);
    for (int i = 0; i < N; i++) {
        char lease[32], want[48], *line;
        double ns = (double)ttl[i];
        if (ttl[i] >= SEC)
            snprintf(want, sizeof want, " %.3fs ", ns / 1e9);
        else if (ttl[i] >= MS)
            snprintf(want, sizeof want, " %.1fms ", ns / 1e6);
        else if (ttl[i] >= 1000)
            snprintf(want, sizeof want, " %.1fus ", ns / 1e3);
        else
            snprintf(want, sizeof want, " %lluns ", (unsigned long long)ttl[i]);
        snprintf(lease, sizeof lease, "\nrem%02d ", i);
        cr_assert_not_null(line = strstr(out, lease), "%s missing:\n%s", lease + 1, out);
        cr_assert(column(line + 1, want) > 0, "%s: wanted%s in:\n%.*s", lease + 1, want,
                  (int)(strchr(line + 1, '\n') - line - 1), line + 1);
    }
    free(out);
    shl_close(t);
    cr_assert_eq(shl_unlink(name), SHL_OK);
}
