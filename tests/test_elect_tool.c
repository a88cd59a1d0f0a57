/*
 * tests/test_elect_tool.c - shmlease elect and shmlease observe with real
 * processes: three candidates run their commands one at a time; a
 * SIGKILLed leader (or its command) lets the next one lead and its token
 * never comes back; --again campaigns again after a revoke, and without it
 * a revoke stops the command with exit 4; observe --json prints each leader
 * in token order with the proclaimed value; usage errors are one line.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define EXIT_LOST 4

/* Starts "shmlease elect TABLE ELECTION --id ID OPTS... -- sh -c SCRIPT". */
static pid_t spawn_elect(const char *table, const char *id, const char *const *opts,
                         const char *script)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = "shmlease";
    argv[n++] = "elect";
    argv[n++] = table;
    argv[n++] = "leader";
    argv[n++] = "--id";
    argv[n++] = id;
    while (opts && *opts)
        argv[n++] = *opts++;
    argv[n++] = "--";
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n] = NULL;
    return t_spawn_tool(argv);
}

/* The lines of the file at path (at most max, each up to 127 bytes). */
static int read_lines(const char *path, char lines[][128], int max)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f)
        return 0;
    while (n < max && fgets(lines[n], 128, f))
        n++;
    fclose(f);
    return n;
}

struct lines_want {
    const char *path;
    int n;
};

static int has_lines(void *p)
{
    struct lines_want *w = p;
    char lines[16][128];
    return read_lines(w->path, lines, 16) >= w->n;
}

/* Waits (up to `s` seconds) for line n of path; its token and pid. */
static void line_of(const char *path, int n, uint64_t s, unsigned long long *tok, int *pid)
{
    struct lines_want w = {path, n};
    cr_assert(t_until(has_lines, &w, s * SEC), "%s: no line %d within %llu s", path, n,
              (unsigned long long)s);
    char lines[16][128];
    read_lines(path, lines, 16);
    cr_assert_eq(sscanf(lines[n - 1], "%llu %d", tok, pid), 2, "%s", lines[n - 1]);
}

/* Gone, or a zombie nobody reaped yet. */
static int process_gone(void *p)
{
    char state = t_proc_state(*(int *)p);
    return state == 0 || state == 'Z' || state == 'X';
}

/* A table as shmlease elect makes one (the defaults: a holder proven dead
 * loses its lease after the reclaim delay), with 64-byte values. */
static shl_table *make_table(char *name, size_t cap, const char *tag)
{
    shl_options o;
    shl_options_init(&o);
    o.value_size = 64;
    o.flags = SHL_CREATE | SHL_EXCL;
    shl_table *t = NULL;
    int rc = shl_open(t_name(name, cap, tag), &o, &t);
    cr_assert_eq(rc, SHL_OK, "create %s: %s", name, shl_strerror(rc));
    return t;
}

/* Each candidate's command logs "b TOKEN ID" when it starts and "e TOKEN
 * ID" when it ends, on one shared file opened for appending: the lines of
 * one command at a time alternate b, e with the same token. */
Test(elect_tool, three_candidates_run_one_command_at_a_time)
{
    t_guard(120);
    char name[96], log[128], script[512];
    shl_table *t = make_table(name, sizeof name, "el3");
    snprintf(log, sizeof log, "/tmp/%s.log", name);
    snprintf(script, sizeof script,
             "echo \"b $SHMLEASE_TOKEN $SHMLEASE_OWNER\" >> %s; sleep 0.3; "
             "echo \"e $SHMLEASE_TOKEN $SHMLEASE_OWNER\" >> %s",
             log, log);
    const char *opts[] = {"--ttl", "5s", NULL};
    pid_t c[3];
    const char *ids[] = {"c0", "c1", "c2"};
    for (int i = 0; i < 3; i++)
        c[i] = spawn_elect(name, ids[i], opts, script);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(t_wait(c[i]), 0, "candidate %d", i);
    char lines[16][128];
    int n = read_lines(log, lines, 16);
    cr_assert_eq(n, 6, "three terms, two lines each: %d lines", n);
    unsigned long long last = 0;
    int seen = 0;
    for (int i = 0; i < 6; i += 2) {
        char kb, ke, idb[16], ide[16];
        unsigned long long tb, te;
        cr_assert_eq(sscanf(lines[i], "%c %llu %15s", &kb, &tb, idb), 3);
        cr_assert_eq(sscanf(lines[i + 1], "%c %llu %15s", &ke, &te, ide), 3);
        cr_assert(kb == 'b' && ke == 'e' && tb == te && strcmp(idb, ide) == 0,
                  "two commands ran at once: '%s' then '%s'", lines[i], lines[i + 1]);
        cr_assert_gt(tb, last, "tokens in order");
        last = tb;
        seen |= 1 << (idb[1] - '0');
    }
    cr_assert_eq(seen, 7, "each candidate led once");
    unlink(log);
    shl_close(t);
    shl_unlink(name);
}

/* The command logs "TOKEN PID" and stays: exec makes its pid the
 * command's. */
#define STAY "echo \"$SHMLEASE_TOKEN $$\" >> %s; exec sleep 60"

/* A table name[96], its log[128] and the STAY script[512] on it. */
static shl_table *staying(char *name, char *log, char *script, const char *tag)
{
    shl_table *t = make_table(name, 96, tag);
    snprintf(log, 128, "/tmp/%s.log", name);
    snprintf(script, 512, STAY, log);
    return t;
}

Test(elect_tool, killing_the_leader_or_its_command_lets_another_lead)
{
    t_guard(120);
    char name[96], log[128], script[512];
    shl_table *t = staying(name, log, script, "elkill");
    const char *opts[] = {"--ttl", "30s", NULL};
    pid_t a = spawn_elect(name, "a", opts, script);
    unsigned long long tok1, tok2, tok3;
    int cmd1, cmd2, cmd3;
    line_of(log, 1, 10, &tok1, &cmd1);
    pid_t b = spawn_elect(name, "b", opts, script), c = spawn_elect(name, "c", opts, script);
    /* The leader's shmlease elect dies: its command goes with it, and the
     * term, orphaned, is taken over after the reclaim delay (1 s), far
     * before its 30 s ttl. */
    kill(a, SIGKILL);
    cr_assert_eq(t_wait(a), 128 + SIGKILL);
    cr_assert(t_until(process_gone, &cmd1, 5 * SEC), "the dead leader's command lives on");
    uint64_t t0 = t_now();
    line_of(log, 2, 20, &tok2, &cmd2);
    cr_log_info("elect: next leader %.3f s after the kill", (double)(t_now() - t0) / 1e9);
    cr_assert_gt(tok2, tok1);
    /* The leader's command dies: its shmlease elect resigns and exits with
     * its status; the last candidate leads at once. */
    kill(cmd2, SIGKILL);
    line_of(log, 3, 10, &tok3, &cmd3);
    cr_assert_gt(tok3, tok2);
    kill(cmd3, SIGKILL);
    cr_assert_eq(t_wait(b), 128 + SIGKILL);
    cr_assert_eq(t_wait(c), 128 + SIGKILL);
    char lines[16][128];
    cr_assert_eq(read_lines(log, lines, 16), 3, "a dead leader's token came back");
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "leader", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_FREE, "the last leader resigned");
    cr_assert_eq(in.token, tok3);
    unlink(log);
    shl_close(t);
    shl_unlink(name);
}

static void revoke_term(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s revoke %s leader", t_tool(), name);
    cr_assert_eq(t_run(cmd, NULL), 0);
}

Test(elect_tool, again_campaigns_after_a_revoke_and_without_it_exit_4)
{
    t_guard(120);
    char name[96], log[128], script[512];
    shl_table *t = staying(name, log, script, "elagain");
    /* A revoke is heard within the margin, not at the next renewal. */
    const char *again[] = {"--ttl", "30s", "--margin", "3s", "--again", NULL};
    pid_t a = spawn_elect(name, "a", again, script);
    unsigned long long tok1, tok2, tok3;
    int cmd1, cmd2, cmd3;
    line_of(log, 1, 10, &tok1, &cmd1);
    revoke_term(name);
    line_of(log, 2, 20, &tok2, &cmd2);
    cr_assert_gt(tok2, tok1);
    cr_assert(t_until(process_gone, &cmd1, 5 * SEC), "the revoked term's command lives on");
    /* SIGTERM goes to the command, whose status shmlease elect takes. */
    kill(a, SIGTERM);
    cr_assert_eq(t_wait(a), 128 + SIGTERM);
    const char *once[] = {"--ttl", "30s", "--margin", "3s", NULL};
    pid_t b = spawn_elect(name, "b", once, script);
    line_of(log, 3, 10, &tok3, &cmd3);
    cr_assert_gt(tok3, tok2);
    revoke_term(name);
    cr_assert_eq(t_wait(b), EXIT_LOST);
    cr_assert(t_until(process_gone, &cmd3, 5 * SEC), "the revoked term's command lives on");
    char lines[16][128];
    cr_assert_eq(read_lines(log, lines, 16), 3, "without --again it campaigned again");
    unlink(log);
    shl_close(t);
    shl_unlink(name);
}

static int run_observer(void *p)
{
    return t_run(p, NULL);
}

/* Each command stays until the observer has printed its term: no term is
 * over before the observer could look, so none may be skipped. */
Test(elect_tool, observe_json_prints_each_leader_in_token_order)
{
    t_guard(120);
    char name[96], out[128], wait_sh[128], cmd[1024];
    shl_table *t = make_table(name, sizeof name, "elobs");
    snprintf(out, sizeof out, "/tmp/%s.json", name);
    snprintf(wait_sh, sizeof wait_sh, "/tmp/%s.sh", name);
    FILE *f = fopen(wait_sh, "w");
    cr_assert(f);
    fprintf(f,
            "i=0; until grep -q \"\\\"token\\\": $SHMLEASE_TOKEN,\" %s; do\n"
            "  i=$((i + 1)); [ $i -lt 3000 ] || exit 1; sleep 0.01\n"
            "done\n",
            out);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' observe %s leader --json --count 3 > %s", t_tool(), name, out);
    pid_t obs = t_fork(run_observer, cmd);
    for (int i = 1; i <= 3; i++) {
        char *o;
        cr_assert_eq(t_tool_run(&o, "elect %s leader --id c%d --value 'v %d' -w 30 -- sh %s 2>&1",
                                name, i, i, wait_sh),
                     0);
        free(o);
    }
    cr_assert_eq(t_wait(obs), 0);
    char lines[16][128];
    cr_assert_eq(read_lines(out, lines, 16), 3);
    for (int i = 1; i <= 3; i++) {
        char want[128];
        snprintf(want, sizeof want,
                 "{\"election\": \"leader\", \"id\": \"c%d\", \"token\": %d, \"pid\": ", i, i);
        cr_assert(strncmp(lines[i - 1], want, strlen(want)) == 0, "%s", lines[i - 1]);
        snprintf(want, sizeof want, "\"value\": \"v %d\"}\n", i);
        cr_assert(strstr(lines[i - 1], want), "%s", lines[i - 1]);
    }
    /* Text lines: the current leader, then the next ones; none now. */
    char *o;
    cr_assert_eq(t_tool_run(&o, "observe %s leader --timeout 0.2 2>&1", name), 1);
    cr_assert(strstr(o, "no leader"), "%s", o);
    free(o);
    unlink(out);
    unlink(wait_sh);
    shl_close(t);
    shl_unlink(name);
}

Test(elect_tool, usage_errors_are_one_line_with_the_help)
{
    static const char *const bad[][2] = {
        {"elect", "elect T"},
        {"elect", "elect T E"},
        {"elect", "elect T E -- "},
        {"elect", "elect T E --ttl 0 -- true"},
        {"elect", "elect T E --id 'a\tb' -- true"},
        {"elect", "elect T E --wait x -- true"},
        {"elect", "elect T 'bad name' -- true"},
        {"observe", "observe T"},
        {"observe", "observe T E F"},
        {"observe", "observe T E --count x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *o;
        cr_assert_eq(t_tool_run(&o, "%s 2>&1 >/dev/null", bad[i][1]), 2, "%s", bad[i][1]);
        char want[64];
        snprintf(want, sizeof want, "; see 'shmlease %s --help'\n", bad[i][0]);
        size_t n = strlen(o), w = strlen(want);
        cr_expect(n > w && strcmp(o + n - w, want) == 0 && strchr(o, '\n') == o + n - 1,
                  "%s: not one line with the help: %s", bad[i][1], o);
        free(o);
    }
}

/* A text line is ID TOKEN VALUE; the value's bytes outside printable ASCII,
 * and '\', are written \xNN, so that a value cannot drive the terminal. */
Test(elect_tool, observe_text_line_escapes_the_value)
{
    t_guard(60);
    char name[96], *o;
    shl_table *t = make_table(name, sizeof name, "eltext");
    cr_assert_eq(t_tool_run(&o,
                            "elect %s leader --id 'host a' --value \"$(printf 'x\\t\\\\y')\" -- "
                            "'%s' observe %s leader --count 1",
                            name, t_tool(), name),
                 0);
    cr_assert_str_eq(o, "host a 1 x\\x09\\x5cy\n");
    free(o);
    shl_close(t);
    shl_unlink(name);
}
