/*
 * tests/test_tool_metrics_serve.c - shmlease metrics served: the HTTP
 * endpoint serves the same text as the plain command (and OpenMetrics to a
 * scraper that asks for it); a non-loopback address needs --listen-any; the
 * textfile is replaced whole (a new file renamed over it), never written in
 * place. Each server is a real process, stopped with SIGTERM.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define EXIT_USAGE 2

struct server {
    pid_t pid;
    char err[64];
    char url[128];
};

/* Starts `shmlease metrics ARGS...` with stderr in a file; with `serving`,
 * waits until it says where it serves (up to 10 s). */
static void server_start(struct server *s, const char *const *args, int serving)
{
    strcpy(s->err, "/tmp/shl-metrics-err-XXXXXX");
    int fd = mkstemp(s->err);
    cr_assert_geq(fd, 0);
    fflush(NULL);
    s->pid = fork();
    cr_assert_geq(s->pid, 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no server behind */
        const char *argv[16] = {t_tool(), "metrics"};
        int n = 2;
        while (*args && n < 15)
            argv[n++] = *args++;
        argv[n] = NULL;
        dup2(fd, 2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd);
    s->url[0] = '\0';
    for (int i = 0; serving && i < 1000 && !s->url[0]; i++) {
        FILE *f = fopen(s->err, "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "shmlease metrics: serving %127s", s->url) == 1)
                break;
        if (f)
            fclose(f);
        if (!s->url[0])
            t_sleep_ns(10 * MS);
    }
    unlink(s->err); /* the server writes on through its descriptor */
    if (serving)
        cr_assert(s->url[0], "the server did not say where it serves");
}

/* SIGTERM; its exit status. */
static int server_stop(struct server *s)
{
    kill(s->pid, SIGTERM);
    return t_wait(s->pid);
}

static char *curl(const char *opts, const char *url)
{
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "curl -sS --max-time 20 %s '%s'", opts, url);
    cr_assert_eq(t_run(cmd, &out), 0, "%s failed: %s", cmd, out);
    return out;
}

/* A manual-clock table: nothing moves between two readings. */
static shl_table *still_table(char *name, size_t cap)
{
    shl_table *t = t_create(t_name(name, cap, "metstill"), 8, 16, SHL_CLOCK_MANUAL);
    uint64_t tok;
    cr_assert_eq(shl_clock_set(t, 1000 * SEC), SHL_OK);
    cr_assert_eq(shl_acquire(t, "job", "a", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_acquire(t, "done", "a", 30 * SEC, &tok), SHL_OK);
    cr_assert_eq(shl_release(t, "done", "a", tok), SHL_OK);
    return t;
}

Test(tool_metrics, http_serves_the_same_text_as_the_command)
{
    t_guard(120);
    char name[96];
    shl_table *t = still_table(name, sizeof name);
    char *plain;
    cr_assert_eq(t_tool_run(&plain, "metrics %s", name), 0);
    struct server s;
    const char *args[] = {"--listen", "127.0.0.1:0", name, NULL};
    server_start(&s, args, 1);
    cr_assert(strncmp(s.url, "http://127.0.0.1:", 17) == 0, "%s", s.url);
    char *served = curl("", s.url);
    cr_expect_str_eq(served, plain);
    free(served);
    /* The content type of the text format, and only /metrics. */
    char *head = curl("-I", s.url);
    cr_expect(strstr(head, "HTTP/1.1 200"), "%s", head);
    cr_expect(strstr(head, "text/plain; version=0.0.4"), "%s", head);
    free(head);
    char other[160];
    snprintf(other, sizeof other, "%.*s/nothing", (int)(strlen(s.url) - 8), s.url);
    char *code = curl("-o /dev/null -w '%{http_code}'", other);
    cr_expect_str_eq(code, "404");
    free(code);
    /* Asked for OpenMetrics, as Prometheus asks: the same samples, in a page
     * the strict OpenMetrics parser of prometheus_client accepts. */
    char *om = curl("-D - -H 'Accept: application/openmetrics-text;version=1.0.0,"
                    "text/plain;version=0.0.4;q=0.5'",
                    s.url);
    cr_expect(strstr(om, "Content-Type: application/openmetrics-text; version=1.0.0"), "%s", om);
    free(om);
    char cmd[1024], *said;
    snprintf(
        cmd, sizeof cmd,
        "curl -sS --max-time 20 -H 'Accept: application/openmetrics-text' '%s' | "
        "/usr/bin/python3 -c '\n"
        "import sys\n"
        "from prometheus_client.openmetrics.parser import text_string_to_metric_families\n"
        "page = sys.stdin.read()\n"
        "list(text_string_to_metric_families(page))\n"
        "print(\"\".join(l + chr(10) for l in page.splitlines() if l[:1] != \"#\"), end=\"\")\n"
        "' 2>&1",
        s.url);
    cr_expect_eq(t_run(cmd, &said), 0,
                 "OpenMetrics refused (python3-prometheus-client: make deps installs it): %s",
                 said);
    char *samples = plain, *w = plain; /* the plain page's sample lines */
    for (char *l = plain; *l;) {
        char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l + 1) : strlen(l);
        if (l[0] != '#') {
            memmove(w, l, n);
            w += n;
        }
        l += n;
    }
    *w = '\0';
    cr_expect_str_eq(said, samples);
    free(said);
    cr_expect_eq(server_stop(&s), 0, "SIGTERM ends the server with status 0");
    free(plain);
    shl_close(t);
}

Test(tool_metrics, non_loopback_needs_listen_any)
{
    t_guard(120);
    char name[96];
    shl_table *t = still_table(name, sizeof name);
    static const char *const refused[] = {"0.0.0.0:0", "[::]:0", "192.0.2.1:9187", NULL};
    for (int i = 0; refused[i]; i++) {
        char *out, cmd[512];
        /* Bounded: a tool that served instead would never return. */
        snprintf(cmd, sizeof cmd, "timeout 20 '%s' metrics --listen '%s' %s 2>&1", t_tool(),
                 refused[i], name);
        int st = t_run(cmd, &out);
        cr_expect_eq(st, EXIT_USAGE, "--listen %s: exit %d: %s", refused[i], st, out);
        cr_expect(strstr(out, "--listen-any"), "--listen %s said: %s", refused[i], out);
        free(out);
    }
    char *out;
    cr_expect_eq(t_tool_run(&out, "metrics --listen-any %s 2>&1", name), EXIT_USAGE, "%s", out);
    free(out);
    /* Allowed with --listen-any, and served. */
    struct server s;
    const char *args[] = {"--listen", "0.0.0.0:0", "--listen-any", name, NULL};
    server_start(&s, args, 1);
    cr_expect(strncmp(s.url, "http://0.0.0.0:", 15) == 0, "%s", s.url);
    char local[160];
    snprintf(local, sizeof local, "http://127.0.0.1:%s", s.url + 15);
    char *served = curl("", local);
    cr_expect(strstr(served, "shmlease_table_up{table="), "%s", served);
    free(served);
    cr_expect_eq(server_stop(&s), 0);
    shl_close(t);
}

/* The file's text as one reader sees it (cat: one open, then reads), NULL
 * when it does not exist. */
static char *slurp(const char *path)
{
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "cat '%s' 2>/dev/null", path);
    if (t_run(cmd, &out) == 0)
        return out;
    free(out);
    return NULL;
}

Test(tool_metrics, textfile_is_replaced_whole)
{
    t_guard(120);
    char name[96], dir[96], file[160];
    shl_table *t = still_table(name, sizeof name);
    char *plain;
    cr_assert_eq(t_tool_run(&plain, "metrics %s", name), 0);
    t_mkdtemp(dir, sizeof dir, "shl-textfile");
    snprintf(file, sizeof file, "%s/shmlease.prom", dir);

    char *out;
    cr_assert_eq(t_tool_run(&out, "metrics --textfile %s %s 2>&1", dir, name), 0, "%s", out);
    free(out);
    char *got = slurp(file);
    cr_assert(got, "no %s", file);
    cr_expect_str_eq(got, plain);
    free(got);
    struct stat st;
    cr_assert_eq(stat(file, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0644, "mode %o", st.st_mode & 07777);
    cr_expect_eq(t_dir_entries(dir, ""), 3, "only shmlease.prom is left in %s (with . and ..)",
                 dir);

    /* Every 10 ms: each write is a new file (a new inode) renamed over the
     * old one, and a reader never sees less than a whole file. */
    struct server s;
    const char *args[] = {"--textfile", dir, "--interval", "10ms", name, NULL};
    server_start(&s, args, 0);
    ino_t first = st.st_ino, seen = first;
    int renamed = 0;
    for (int i = 0; i < 300; i++) {
        char *now = slurp(file);
        cr_assert(now, "%s missing during a rewrite", file);
        cr_assert_str_eq(now, plain, "read %s part-written", file);
        free(now);
        if (stat(file, &st) == 0 && st.st_ino != seen) {
            seen = st.st_ino;
            renamed++;
        }
        t_sleep_ns(MS);
    }
    cr_expect_geq(renamed, 2, "the file was replaced %d times in 300 reads, 10 ms apart", renamed);
    cr_expect_eq(server_stop(&s), 0);
    cr_expect_eq(t_dir_entries(dir, ".shmlease"), 0, "a temporary file was left in %s", dir);

    /* A file of its own, for one service among others in the directory. */
    snprintf(file, sizeof file, "%s/jobs.prom", dir);
    cr_assert_eq(t_tool_run(&out, "metrics --textfile %s %s 2>&1", file, name), 0, "%s", out);
    free(out);
    got = slurp(file);
    cr_expect(got && strcmp(got, plain) == 0, "%s: %s", file, got);
    free(got);
    cr_expect_eq(t_dir_entries(dir, ".jobs"), 0, "a temporary file was left in %s", dir);
    /* Neither a directory nor a .prom file: a usage error. */
    cr_expect_eq(t_tool_run(&out, "metrics --textfile %s/x.txt %s 2>&1", dir, name), EXIT_USAGE,
                 "%s", out);
    free(out);
    t_rm_rf(dir);
    free(plain);
    shl_close(t);
}

/* SIGTERM ends a textfile writer in its sleep at once, not at its next
 * turn an hour later (t_guard fails a hang; systemd would SIGKILL it). */
Test(tool_metrics, sigterm_ends_a_long_interval)
{
    t_guard(120);
    char name[96], dir[96], file[160];
    shl_table *t = still_table(name, sizeof name);
    t_mkdtemp(dir, sizeof dir, "shl-textfile");
    snprintf(file, sizeof file, "%s/shmlease.prom", dir);
    struct server s;
    const char *args[] = {"--textfile", dir, "--interval", "1h", name, NULL};
    server_start(&s, args, 0);
    struct stat st;
    for (int i = 0; i < 3000 && stat(file, &st) != 0; i++)
        t_sleep_ns(10 * MS);
    cr_assert_eq(stat(file, &st), 0, "the first file was not written");
    cr_expect_eq(server_stop(&s), 0);
    t_rm_rf(dir);
    shl_close(t);
}
