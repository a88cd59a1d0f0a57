/*
 * tests/test_tool.c - the shmlease tool: golden output of ls and dump, JSON
 * parsed by python3, help and exit codes, damaged segments (the tool never
 * crashes: make check runs it under ASan), and a lock held by a stopped
 * process (ls and dump do not wait for it).
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash.h"
#include "kind_shm/shm_kind.h"

static char *run(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *run(int *status, const char *fmt, ...)
{
    char *out;
    va_list ap;
    va_start(ap, fmt);
    *status = t_tool_vrun(&out, fmt, ap);
    va_end(ap);
    cr_assert_lt(*status, 128, "'shmlease %s' died with status %d", fmt, *status);
    return out;
}

/* Replaces every whole-word occurrence of `from` by `to` (numbers only match
 * as whole numbers). */
static char *replace(char *s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    char *out = malloc(strlen(s) * (tl > fl ? tl : 1) + 1);
    for (char *p = s; *p;) {
        int edge_l = p == s || !isalnum((unsigned char)p[-1]);
        if (edge_l && strncmp(p, from, fl) == 0 && !isalnum((unsigned char)p[fl])) {
            memcpy(out + n, to, tl);
            n += tl;
            p += fl;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    free(s);
    return out;
}

/* "<word> bytes (46 KiB)" made "<word> bytes (<word>)", in place: the
 * word is no longer than the shortest size in words ("1.5 KiB"). */
static void words_too(char *s, const char *word)
{
    char pat[32];
    size_t n = (size_t)snprintf(pat, sizeof pat, "%s bytes (", word), w = strlen(word);
    for (char *p = strstr(s, pat), *q; p && (q = strchr(p + n, ')')); p = strstr(q, pat)) {
        cr_assert_geq((size_t)(q - (p + n)), w, "\"%s\" is longer than the size in words", word);
        memmove(p + n + w, q, strlen(q) + 1);
        memcpy(p + n, word, w);
        q = p + n + w;
    }
}

/* Table name, pid, segment size and the memory it takes replaced, runs of
 * spaces made one (column widths depend on the pid's length). */
static char *normalise(char *s, const char *table)
{
    char pid[16], size[32], allocated[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    shl_table *t;
    shl_table_info ti = {0};
    if (shl_open(table, NULL, &t) == SHL_OK) {
        shl_table_info_get(t, &ti);
        shl_close(t);
    }
    /* The segment's size follows the layout, which is not what is tested. */
    snprintf(size, sizeof size, "%llu", (unsigned long long)ti.size);
    snprintf(allocated, sizeof allocated, "%llu", (unsigned long long)ti.allocated);
    s = replace(replace(replace(replace(s, table, "TABLE"), pid, "PID"), size, "SIZE"), allocated,
                "TAKEN");
    /* ... and in words: "SIZE bytes (46 KiB)" */
    words_too(s, "SIZE");
    words_too(s, "TAKEN");
    size_t n = 0;
    for (size_t i = 0; s[i]; i++)
        if (!(s[i] == ' ' && n > 0 && s[n - 1] == ' '))
            s[n++] = s[i];
    s[n] = '\0';
    return s;
}

static void golden(const char *file, const char *got)
{
    char path[512];
    const char *root = getenv("SHL_ROOT");
    snprintf(path, sizeof path, "%s/tests/golden/%s", root ? root : ".", file);
    if (getenv("SHL_GOLDEN_UPDATE")) {
        FILE *f = fopen(path, "w");
        cr_assert(f, "cannot write %s", path);
        fputs(got, f);
        fclose(f);
        /* A run that rewrites its expectations has checked nothing. */
        cr_assert_fail("wrote %s: review it, then run again without SHL_GOLDEN_UPDATE", path);
    }
    FILE *f = fopen(path, "r");
    cr_assert(f, "missing golden file %s (SHL_GOLDEN_UPDATE=1 writes it)", path);
    char want[16384];
    size_t n = fread(want, 1, sizeof want - 1, f);
    fclose(f);
    want[n] = '\0';
    cr_assert_str_eq(got, want, "output differs from %s", path);
}

/* Leases in every state, on a manual clock so that times are fixed. */
static shl_table *scene(char *name, size_t cap)
{
    t_name(name, cap, "tool");
    shl_table *t = t_create(name, 8, 32, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_clock_set(t, 1000 * SEC), SHL_OK);
    cr_assert_eq(shl_acquire(t, "held", "worker one", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_write(t, "held", "worker one", tok, "hello, lease", 12), SHL_OK);
    cr_assert_eq(shl_renew(t, "held", "worker one", tok, 45 * SEC), SHL_OK);
    cr_assert_eq(shl_renew(t, "held", "intruder", tok, SEC), SHL_ELOST);
    cr_assert_eq(shl_acquire(t, "freed", "w2", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "freed", "w2", tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "expired", "w3", SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "revoked", "w4", 60 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_revoke(t, "revoked"), SHL_OK);
    cr_assert_eq(shl_clock_set(t, 1005 * SEC), SHL_OK);
    return t;
}

Test(tool, ls_golden)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    int st;
    char *out = normalise(run(&st, "ls %s", name), name);
    cr_assert_eq(st, 0);
    golden("ls.txt", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

Test(tool, dump_golden)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    int st;
    char *out = normalise(run(&st, "dump %s", name), name);
    cr_assert_eq(st, 0);
    golden("dump.txt", out);
    free(out);
    out = normalise(run(&st, "dump %s held --json", name), name);
    cr_assert_eq(st, 0);
    golden("dump_held.json", out);
    free(out);
    shl_close(t);
    shl_unlink(name);
}

Test(tool, dump_json_parses)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s dump %s --json | python3 -c '\n"
             "import json, sys\n"
             "d = json.load(sys.stdin)\n"
             "assert d[\"table\"][\"capacity\"] == 8 and d[\"table\"][\"clock\"] == \"manual\"\n"
             "L = {l[\"name\"]: l for l in d[\"leases\"]}\n"
             "assert sorted(L) == [\"expired\", \"freed\", \"held\", \"revoked\"], sorted(L)\n"
             "assert [L[n][\"state\"] for n in (\"held\", \"freed\", \"expired\", \"revoked\")] == "
             "[\"HELD\", \"FREE\", \"EXPIRED\", \"REVOKED\"]\n"
             "h = L[\"held\"]\n"
             "assert h[\"owner\"] == \"worker one\" and h[\"token\"] == 1\n"
             "assert h[\"counters\"][\"renew\"] == 1 and h[\"counters\"][\"rej_owner\"] == 1\n"
             "assert [e[\"op\"] for e in h[\"history\"]] == [\"acquire\", \"write\", \"renew\", "
             "\"reject\"] or [e[\"op\"] for e in h[\"history\"]] == [\"acquire\", \"renew\", "
             "\"reject\"], h[\"history\"]\n"
             "assert h[\"history\"][-1][\"why\"] == \"rej_owner\"\n"
             "assert bytes.fromhex(h[\"value\"][\"preview_hex\"]) == b\"hello, lease\"\n"
             "assert L[\"revoked\"][\"counters\"][\"revoke\"] == 1\n"
             "assert h[\"lock\"][\"state\"] == \"free\" and h[\"intent\"][\"armed\"] is False\n"
             "'",
             t_tool(), name);
    cr_assert_eq(t_run(cmd, NULL), 0, "JSON did not parse or had the wrong content");
    shl_close(t);
    shl_unlink(name);
}

/* Issue 25: history entries kept an owner's first 16 bytes, and dump
 * --json printed them as if whole. They keep the whole owner now, and an
 * entry reused by a shorter owner shows that owner, not the longer one's
 * tail. Another process (the tool) reads them. */
Test(tool, history_keeps_whole_owners)
{
    char name[96];
    t_name(name, sizeof name, "histowner");
    shl_table *t = t_create(name, 4, 16, SHL_CLOCK_MANUAL);
    char longo[SHL_OWNER_MAX + 1];
    for (int i = 0; i < SHL_OWNER_MAX; i++)
        longo[i] = (char)('a' + i % 26);
    longo[SHL_OWNER_MAX] = 0;
    uint64_t tk;
    for (int i = 0; i < 8; i++) { /* every entry of the ring, with the long owner */
        cr_assert_eq(shl_acquire(t, "L", longo, 100, &tk), SHL_OK);
        cr_assert_eq(shl_release(t, "L", longo, tk), SHL_OK);
    }
    cr_assert_eq(shl_acquire(t, "L", "short", 100, &tk), SHL_OK);
    shl_lease_detail *d = malloc(sizeof *d);
    cr_assert_eq(shl_inspect(t, "L", d), SHL_OK);
    cr_assert_eq(d->nevents, 8);
    cr_assert_str_eq(d->events[6].owner, longo);
    cr_assert_str_eq(d->events[7].owner, "short");
    /* A shared holder's events too: its acquisition, then its release. */
    cr_assert_eq(shl_acquire_shared(t, "S", longo, 100, &tk, NULL), SHL_OK);
    cr_assert_eq(shl_release(t, "S", longo, tk), SHL_OK);
    cr_assert_eq(shl_inspect(t, "S", d), SHL_OK);
    cr_assert_eq(d->nevents, 2);
    cr_assert_str_eq(d->events[0].owner, longo, "shared acquire: %s", d->events[0].owner);
    cr_assert_str_eq(d->events[1].owner, longo, "shared release: %s", d->events[1].owner);
    free(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s dump %s --json | python3 -c '\n"
             "import json, sys\n"
             "h = json.load(sys.stdin)[\"leases\"][0][\"history\"]\n"
             "assert [e[\"owner\"] for e in h[-3:]] == [\"%s\"] * 2 + [\"short\"], h\n"
             "'",
             t_tool(), name, longo);
    cr_assert_eq(t_run(cmd, NULL), 0, "dump --json did not show the whole owners");
    shl_close(t);
    shl_unlink(name);
}

Test(tool, help_and_exit_codes)
{
    static const char *const cmds[] = {"create", "ls",    "dump", "check", "repair",
                                       "revoke", "watch", "rm",   NULL};
    int st;
    for (int i = 0; cmds[i]; i++) {
        char *out = run(&st, "%s --help", cmds[i]);
        cr_assert_eq(st, 0, "%s --help", cmds[i]);
        cr_assert(strstr(out, "usage: shmlease"), "%s --help: %s", cmds[i], out);
        free(out);
        free(run(&st, "%s 2>/dev/null", cmds[i]));
        cr_assert_eq(st, 2, "%s without arguments is a usage error", cmds[i]);
    }
    char name[96];
    t_name(name, sizeof name, "nosuch");
    free(run(&st, "check %s 2>/dev/null", name));
    cr_assert_eq(st, 3, "a missing table");
    free(run(&st, "ls %s --bogus 2>/dev/null", name));
    cr_assert_eq(st, 2);
    shl_table *t = scene(name, sizeof name);
    free(run(&st, "revoke %s freed 2>/dev/null", name));
    cr_assert_eq(st, 1, "not held");
    char *out = run(&st, "revoke %s held", name);
    cr_assert_eq(st, 0);
    free(out);
    shl_lease_info in;
    cr_assert_eq(shl_stat(t, "held", &in), SHL_OK);
    cr_assert_eq(in.state, SHL_STATE_REVOKED);
    out = run(&st, "check %s", name);
    cr_assert_eq(st, 0, "clean: %s", out);
    free(out);
    out = run(&st, "repair %s --dry-run", name);
    cr_assert_eq(st, 0);
    cr_assert(strstr(out, "nothing to repair"), "%s", out);
    free(out);
    out = run(&st, "watch %s --count 2 --interval 1ms", name);
    cr_assert_eq(st, 0);
    cr_assert(strstr(strstr(out, "LEASE") + 1, "LEASE"), "two listings: %s", out);
    free(out);
    shl_close(t);
    free(run(&st, "rm %s", name));
    cr_assert_eq(st, 0);
    cr_assert_eq(shl_open(name, NULL, &t), SHL_ENOENT);
}

static void all_commands_survive(const char *name)
{
    static const char *const cmds[] = {"ls %s",
                                       "dump %s",
                                       "dump %s --json",
                                       "check %s",
                                       "repair %s --dry-run",
                                       "watch %s --count 1",
                                       NULL};
    for (int i = 0; cmds[i]; i++) {
        char fmt[64];
        int st;
        snprintf(fmt, sizeof fmt, "%s 2>/dev/null", cmds[i]);
        free(run(&st, fmt, name));
    }
}

Test(tool, damaged_index_checked_and_repaired)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    _Atomic uint32_t *idx = shl__index(t->hdr);
    for (uint32_t b = 0; b < t->hdr->index_size; b++)
        if (atomic_load(&idx[b]))
            atomic_store(&idx[b], atomic_load(&idx[b]) + 40);
    all_commands_survive(name);
    int st;
    char *out = run(&st, "check %s 2>/dev/null", name);
    cr_assert_eq(st, 1);
    cr_assert(strstr(out, "index: bucket"), "%s", out);
    free(out);
    out = run(&st, "repair %s", name);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "fill the empty bucket"), "%s", out);
    free(out);
    free(run(&st, "check %s", name));
    cr_assert_eq(st, 0);
    shl_close(t);
    shl_unlink(name);
}

Test(tool, damaged_header_explained_and_refused)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    t->hdr->magic = 0x1122334455667788;
    all_commands_survive(name);
    int st;
    char *out = run(&st, "check %s 2>/dev/null", name);
    cr_assert_eq(st, 1);
    cr_assert(strstr(out, "bad magic"), "%s", out);
    free(out);
    out = run(&st, "repair %s 2>/dev/null", name);
    cr_assert_eq(st, 1);
    cr_assert(strstr(out, "cannot repair"), "%s", out);
    free(out);
    free(run(&st, "ls %s 2>/dev/null", name));
    cr_assert_eq(st, 3);
    shl_close(t);
    shl_unlink(name);
}

Test(tool, slot_and_history_flips_never_crash)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    unsigned char *base = (unsigned char *)t->hdr;
    for (uint32_t i = 0; i < 4; i++) {
        unsigned char *s = (unsigned char *)shl__slot_at(t->hdr, i);
        for (size_t off = sizeof(pthread_mutex_t); off < sizeof(struct shl__slot); off += 7 + i)
            s[off] ^= 0xa5;
    }
    (void)base;
    all_commands_survive(name);
    int st;
    free(run(&st, "check %s 2>/dev/null", name));
    cr_assert_eq(st, 1);
    free(run(&st, "repair %s >/dev/null 2>&1", name));
    cr_assert_lt(st, 128);
    shl_close(t);
    shl_unlink(name);
}

/* A process stopped inside a lease's critical section, in the middle of a
 * change: ls, dump and check finish and name it. */
static int stop_inside(void *arg)
{
    shl_table *t;
    if (shl_open(arg, NULL, &t) != SHL_OK)
        return 3;
    struct shl__key k;
    shl__key_lease("held", &k);
    struct shl__slot *s = shl__find(t, &k);
    if (!s || shl__slot_lock(t, s) != SHL_OK)
        return 4;
    shl__seq_begin(s);
    raise(SIGSTOP);
    return 0;
}

Test(tool, stopped_locker_is_reported)
{
    t_guard(60);
    char name[96];
    shl_table *t = scene(name, sizeof name);
    pid_t p = t_fork(stop_inside, name);
    cr_assert_eq(t_wait_stopped(p), 0);
    int st;
    char pid[64];
    snprintf(pid, sizeof pid, "locked by pid %d mid-change", (int)p);
    char *out = run(&st, "ls %s", name);
    cr_assert_eq(st, 0);
    cr_assert(strstr(out, pid), "%s", out);
    free(out);
    out = run(&st, "dump %s", name);
    cr_assert(strstr(out, "mid-change"), "%s", out);
    free(out);
    out = run(&st, "check %s", name);
    cr_assert_eq(st, 0, "a live locker is not damage: %s", out);
    free(out);
    kill(p, SIGKILL);
    t_wait(p);
    out = run(&st, "ls %s", name);
    cr_assert(strstr(out, "died"), "%s", out);
    free(out);
    free(run(&st, "check %s >/dev/null 2>&1", name));
    cr_assert_eq(st, 1, "a dead locker is reported until the next operation");
    cr_assert_eq(shl_renew(t, "held", "worker one", 1, SEC), SHL_OK);
    free(run(&st, "check %s", name));
    cr_assert_eq(st, 0);
    shl_close(t);
    shl_unlink(name);
}

Test(tool, create_policy_shows_in_dump)
{
    char name[96];
    t_name(name, sizeof name, "pol");
    int st;
    free(run(&st, "create %s --capacity 4 --reclaim-orphans --reclaim-delay 1.5s", name));
    cr_assert_eq(st, 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s dump %s --json | python3 -c 'import json,sys; t=json.load(sys.stdin)[\"table\"]; "
             "assert t[\"reclaim_orphans\"] is True and t[\"reclaim_delay_ms\"] == 1500, t'",
             t_tool(), name);
    cr_assert_eq(t_run(cmd, NULL), 0);
    free(run(&st, "create %s-x --no-reclaim --reclaim-delay 1s 2>/dev/null", name));
    cr_assert_eq(st, 2, "a reclaim delay contradicts --no-reclaim");
    shl_unlink(name);
    /* The default reclaims after the default delay; --no-reclaim opts out. */
    static const struct {
        const char *opt, *want;
    } cases[] = {
        {"", "t[\"reclaim_orphans\"] is True and t[\"reclaim_delay_ms\"] == 1000"},
        {"--reclaim-delay 2s",
         "t[\"reclaim_orphans\"] is True and t[\"reclaim_delay_ms\"] == 2000"},
        {"--reclaim-orphans", "t[\"reclaim_orphans\"] is True and t[\"reclaim_delay_ms\"] == 0"},
        {"--no-reclaim", "t[\"reclaim_orphans\"] is False and t[\"reclaim_delay_ms\"] == 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        free(run(&st, "create %s %s", name, cases[i].opt));
        cr_assert_eq(st, 0, "create %s", cases[i].opt);
        snprintf(cmd, sizeof cmd,
                 "%s dump %s --json | python3 -c 'import json,sys; "
                 "t=json.load(sys.stdin)[\"table\"]; assert %s, t'",
                 t_tool(), name, cases[i].want);
        cr_assert_eq(t_run(cmd, NULL), 0, "create %s", cases[i].opt);
        shl_unlink(name);
    }
}

/* Whether the file at path p has something in it: the watching tool has
 * started and shown the table. */
static int has_output(void *p)
{
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

/* Forks `shmlease watch <name> --interval 10ms` with its stdout into out
 * and its stderr into err (or the test's), and returns once it has shown
 * the table: on a loaded machine a fixed wait may end before the tool
 * even started. */
static pid_t start_watch(const char *name, const char *out, const char *err)
{
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0);
    if (p == 0) {
        if (!freopen(out, "w", stdout) || (err && !freopen(err, "w", stderr)))
            _exit(99);
        execl(t_tool(), "shmlease", "watch", name, "--interval", "10ms", (char *)NULL);
        _exit(127);
    }
    cr_assert(t_until(has_output, (void *)out, 20 * SEC), "watch showed nothing in 20 s");
    return p;
}

/* watch exits cleanly on Ctrl-C (SIGINT). */
Test(tool, watch_exits_on_interrupt)
{
    t_guard(30);
    char name[96], out[128];
    shl_table *t = scene(name, sizeof name);
    snprintf(out, sizeof out, "/tmp/%s.out", name);
    pid_t p = start_watch(name, out, NULL);
    unlink(out);
    kill(p, SIGINT);
    cr_assert_eq(t_wait(p), 0, "watch ends with status 0 on SIGINT");
    shl_close(t);
    shl_unlink(name);
}

/* Names and owners from a segment reach the terminal escaped: a damaged or
 * hostile segment cannot send ESC or BEL to it. */
Test(tool, control_bytes_in_names_and_owners_are_escaped)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    struct shl__slot *s = shl__tslot(t, 0); /* "held", by "worker one" */
    cr_assert_str_eq(s->name, "held");
    static const char evil_name[] = "h\033]0;pwned\007\x80";
    static const char evil_owner[] = "w\033[2J\007";
    memcpy(s->name, evil_name, sizeof evil_name);
    s->name_len = sizeof evil_name - 1;
    memcpy(s->cur.owner, evil_owner, sizeof evil_owner);
    s->cur.owner_len = sizeof evil_owner - 1;
    static const char *const cmds[] = {"ls %s", "dump %s", "watch %s --count 1", NULL};
    for (int i = 0; cmds[i]; i++) {
        int st;
        char *out = run(&st, cmds[i], name);
        cr_assert_eq(st, 0, "%s", out);
        cr_assert(!strchr(out, '\033') && !strchr(out, '\007') && !strchr(out, '\x80'),
                  "a control byte reached the output of '%s': %s", cmds[i], out);
        cr_assert(strstr(out, "h\\x1b]0;pwned\\x07\\x80"), "name not shown escaped: %s", out);
        cr_assert(strstr(out, "w\\x1b[2J\\x07"), "owner not shown escaped: %s", out);
        free(out);
    }
    shl_close(t);
    shl_unlink(name);
}

/* rm of a table with held leases refuses and says who holds what. */
Test(tool, rm_refuses_held_leases_without_force)
{
    char name[96];
    shl_table *t = scene(name, sizeof name);
    int st;
    char *out = run(&st, "rm %s 2>&1", name);
    cr_assert_eq(st, 1, "%s", out);
    cr_assert(strstr(out, "lease held is held by owner worker one"), "%s", out);
    cr_assert(strstr(out, "--force"), "%s", out);
    cr_assert(!strstr(out, "lease freed") && !strstr(out, "lease revoked"), "%s", out);
    free(out);
    shl_table *again;
    cr_assert_eq(shl_open(name, NULL, &again), SHL_OK, "the table was removed");
    shl_close(again);
    free(run(&st, "rm %s --force", name));
    cr_assert_eq(st, 0);
    cr_assert_eq(shl_open(name, NULL, &again), SHL_ENOENT);
    shl_close(t);
}

struct child_exit {
    pid_t pid;
    int status;
};

static int child_exited(void *p)
{
    struct child_exit *c = p;
    int st;
    if (waitpid(c->pid, &st, WNOHANG) != c->pid)
        return 0;
    c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return 1;
}

/* watch says when its table is removed, and exits. */
Test(tool, watch_says_when_its_table_is_removed)
{
    t_guard(60);
    char name[96], path[128], out[128];
    shl_table *t = scene(name, sizeof name);
    snprintf(path, sizeof path, "/tmp/%s.err", name);
    snprintf(out, sizeof out, "/tmp/%s.out", name);
    pid_t p = start_watch(name, out, path);
    unlink(out);
    cr_assert_eq(shl_unlink(name), SHL_OK);
    struct child_exit c = {p, -1};
    int ended = t_until(child_exited, &c, 10 * SEC);
    if (!ended) {
        kill(p, SIGKILL);
        t_wait(p);
    }
    cr_assert(ended, "watch kept watching a removed table");
    cr_assert_eq(c.status, 3);
    char err[512] = "";
    FILE *f = fopen(path, "r");
    cr_assert(f);
    err[fread(err, 1, sizeof err - 1, f)] = '\0';
    fclose(f);
    unlink(path);
    cr_assert(strstr(err, "was removed"), "%s", err);
    shl_close(t);
}
