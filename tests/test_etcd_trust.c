/*
 * tests/test_etcd_trust.c - whom an etcd table trusts with its password and
 * records: no proxy that the environment names (only one named through
 * shl_options.proxy or SHMLEASE_ETCD_PROXY, and the password never through
 * one in clear), and with a CA file given, that CA alone (not the system's
 * CA directory as well). And the test clusters keep their password off
 * every argv, where ps shows it.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../etcd/curl_api.h"
#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

#define S(s) (s), strlen(s)

static struct etcd_cluster cl;

static void down(void)
{
    etcd_cluster_stop(&cl);
}

static void auth(void)
{
    t_guard(90);
    cr_assert_eq(etcd_cluster_start(&cl, 1, ETCD_AUTH), 0, "%s", cl.err);
}

static void tls(void)
{
    t_guard(90);
    cr_assert_eq(etcd_cluster_start(&cl, 1, ETCD_TLS), 0, "%s", cl.err);
}

/* A listener on a free localhost port that never accepts: whatever
 * connects waits in its backlog, where connected() finds it. */
static int listener(int *port)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert_eq(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(ls, 64), 0);
    cr_assert_eq(getsockname(ls, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return ls;
}

/* How many connections reached the listener. */
static int connected(int ls)
{
    int n = 0, fd;
    while ((fd = accept(ls, NULL, NULL)) >= 0) {
        close(fd);
        n++;
    }
    return n;
}

/* Every variable libcurl reads a proxy from, pointing at `url`. */
static void proxy_env(const char *url)
{
    static const char *vars[] = {"http_proxy", "https_proxy", "HTTPS_PROXY",
                                 "HTTP_PROXY", "ALL_PROXY",   "all_proxy"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        setenv(vars[i], url, 1);
    unsetenv("no_proxy");
    unsetenv("NO_PROXY");
    unsetenv("SHMLEASE_ETCD_PROXY");
}

static void open_auth(const char *table, const char *proxy, shl_table **t, int expect)
{
    char url[512];
    shl_options o;
    shl_options_init(&o);
    o.user = cl.user;
    o.password = cl.password;
    o.proxy = proxy;
    o.timeout_ms = 3000;
    etcd_cluster_url(&cl, table, url, sizeof url);
    *t = NULL;
    int rc = shl_open(url, &o, t);
    cr_assert_eq(rc, expect, "open %s: %s", url, shl_errname(rc));
}

/* With every proxy variable naming a listener, the table with a password
 * talks to the member directly: nothing reaches the listener, and the
 * operations work. */
Test(etcd_trust, environment_proxies_are_ignored, .init = auth, .fini = down)
{
    int port, ls = listener(&port);
    char purl[64];
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", port);
    proxy_env(purl);
    shl_table *t;
    open_auth("px", NULL, &t, SHL_OK);
    uint64_t tok;
    int rc = shl_acquire(t, "a", "me", 10 * SEC, &tok);
    cr_assert_eq(rc, SHL_OK, "acquire: %s", shl_errname(rc));
    cr_assert_eq(shl_release(t, "a", "me", tok), SHL_OK);
    shl_close(t);
    cr_assert_eq(connected(ls), 0, "a connection reached the environment's proxy");

    /* The watch stream too (a waiter). */
    etc_client *c;
    struct etc_config cfg = {
        .endpoints = cl.endpoints, .user = cl.user, .password = cl.password, .timeout_ms = 3000};
    cr_assert_eq(etc_open(&cfg, &c), ETC_OK, "%s", "direct sign-in");
    etc_watch *w;
    struct etc_event ev;
    cr_assert_eq(etc_watch_open(c, S("w"), NULL, 0, 0, &w), ETC_OK, "%s", etc_errmsg(c));
    cr_assert_eq(etc_put(c, S("w"), S("x"), 0, NULL), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    etc_event_free(&ev);
    etc_watch_close(w);
    etc_close(c);
    cr_assert_eq(connected(ls), 0, "a watch went to the environment's proxy");
    close(ls);
}

/* A proxy named through our option is used; with a password over plain
 * http it is refused before anything is sent. */
Test(etcd_trust, named_proxy, .init = auth, .fini = down)
{
    int port, ls = listener(&port);
    char purl[64];
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", port);
    proxy_env("");
    shl_table *t;
    open_auth("px", purl, &t, SHL_EINVAL);
    cr_assert_null(t);
    cr_assert_eq(connected(ls), 0, "the password went to a proxy over plain http");
    setenv("SHMLEASE_ETCD_PROXY", purl, 1);
    open_auth("px", NULL, &t, SHL_EINVAL);
    unsetenv("SHMLEASE_ETCD_PROXY");
    cr_assert_eq(connected(ls), 0, "the password went to a proxy over plain http");

    /* Without a password the proxy is used (the listener never answers, so
     * the call cannot succeed). */
    struct etc_config cfg = {.endpoints = cl.endpoints, .proxy = purl, .timeout_ms = 500};
    etc_client *c;
    struct etc_range r;
    cr_assert_eq(etc_open(&cfg, &c), ETC_OK);
    cr_assert_neq(etc_get(c, S("k"), NULL, 0, 0, 0, &r), ETC_OK);
    etc_close(c);
    cr_assert_geq(connected(ls), 1, "the named proxy was not used");
    cfg.proxy = "socks5://127.0.0.1:1";
    cr_assert_eq(etc_open(&cfg, &c), ETC_EINVAL, "a proxy that is not http(s)");
    close(ls);
}

/* libcurl's built-in CA directory (e.g. /etc/ssl/certs), or NULL. */
static const char *curl_capath(void)
{
    cr_assert_eq(etc_curl_load(), ETC_OK);
    void *h = dlopen(ETC_CURL_SONAME, RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h);
    curl_version_info_data *(*info)(CURLversion) = NULL;
    void *p = dlsym(h, "curl_version_info");
    cr_assert_not_null(p);
    memcpy(&info, &p, sizeof p);
    const curl_version_info_data *d = info(CURLVERSION_NOW);
    return d->age >= CURLVERSION_SEVENTH ? d->capath : NULL;
}

/* A put and a get: ETC_OK or the first code. */
static int round_trip(const char *cacert)
{
    struct etc_config cfg = {
        .endpoints = cl.endpoints, .tls = 1, .cacert = cacert, .timeout_ms = 5000};
    /* The member checks a client certificate when one comes. */
    cfg.cert = cl.cert;
    cfg.key = cl.key;
    etc_client *c;
    int rc = etc_open(&cfg, &c);
    if (rc)
        return rc;
    struct etc_range r;
    rc = etc_get(c, S("k"), NULL, 0, 0, 0, &r);
    if (!rc)
        etc_range_free(&r);
    etc_close(c);
    return rc;
}

/* The member's certificate is signed by the cluster's CA, which is in
 * libcurl's CA directory (a private mount in a child, over the real one)
 * but not in the CA file given: refused. */
Test(etcd_trust, only_the_given_ca, .init = tls, .fini = down)
{
    const char *capath = curl_capath();
    struct stat st;
    if (!capath || stat(capath, &st) || !S_ISDIR(st.st_mode))
        cr_skip_test("libcurl has no CA directory to plant a CA in");
    char dir[256], cmd[1024];
    snprintf(dir, sizeof dir, "%s/capath", cl.dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cp '%s' \"%s/$(openssl x509 -hash -noout -in '%s').0\"", dir, cl.ca,
             dir, cl.ca);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) && unshare(CLONE_NEWUSER | CLONE_NEWNS))
            _exit(10);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
            mount(dir, capath, NULL, MS_BIND, NULL))
            _exit(11);
        /* With the cluster's CA given it works; with another CA given
         * (the directory still holding the cluster's), refused. */
        if (round_trip(cl.ca) != ETC_OK)
            _exit(12);
        _exit(round_trip(cl.other_ca) == ETC_EPERM ? 0 : 13);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11)
        cr_skip_test("no private mount namespace to plant a CA directory in");
    cr_assert_neq(WEXITSTATUS(status), 12, "the cluster's own CA refused");
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "a CA in libcurl's CA directory was trusted besides "
                 "the CA file given");
}

/* Every etcdctl the cluster runs goes through a wrapper on PATH that logs
 * its own argv and its parent's (the shell's): the password is on none. */
Test(etcd_trust, cluster_password_on_no_argv)
{
    t_guard(90);
    char dir[] = "/tmp/shl-ctl-XXXXXX", real[512], wrapper[600], cmd[2048], *out = NULL;
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(t_run("command -v etcdctl", &out), 0);
    snprintf(real, sizeof real, "%s", out);
    real[strcspn(real, "\n")] = '\0';
    free(out);
    snprintf(wrapper, sizeof wrapper, "%s/etcdctl", dir);
    FILE *f = fopen(wrapper, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "{ echo \"argv: $0 $*\"; printf 'parent: '; tr '\\0' ' ' </proc/$PPID/cmdline; echo; }"
            " >>'%s/argv.log'\n"
            "exec '%s' \"$@\"\n",
            dir, real);
    fclose(f);
    cr_assert_eq(chmod(wrapper, 0755), 0);
    char path[4096];
    snprintf(path, sizeof path, "%s:%s", dir, getenv("PATH"));
    setenv("PATH", path, 1);

    cr_assert_eq(etcd_cluster_start(&cl, 1, ETCD_AUTH), 0, "%s", cl.err);
    cr_assert_eq(etcd_cluster_ctl(&cl, "put k v"), 0, "%s", cl.err);
    char member[64];
    snprintf(member, sizeof member, "/proc/%d/cmdline", (int)cl.m[0].pid);
    snprintf(cmd, sizeof cmd, "cat '%s/argv.log'; tr '\\0' ' ' <%s", dir, member);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", cmd);
    char pw[sizeof cl.password];
    memcpy(pw, cl.password, sizeof pw);
    etcd_cluster_stop(&cl);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_not_null(strstr(out, "argv: "), "the wrapper was not used:\n%s", out);
    cr_assert_not_null(strstr(out, "user add"), "%s", out);
    cr_assert_not_null(strstr(out, "put k v"), "%s", out);
    cr_assert_gt(strlen(pw), 8);
    cr_assert_null(strstr(out, pw), "the password %s on an argv:\n%s", pw, out);
    free(out);
}

/* The tool's word for a TLS refusal names TLS, not another user's segment. */
Test(etcd_trust, tls_refusal_says_tls, .init = tls, .fini = down)
{
    char url[512], *out;
    etcd_cluster_url(&cl, "tlsmsg", url, sizeof url);
    setenv("SHMLEASE_ETCD_CERT", cl.cert, 1);
    setenv("SHMLEASE_ETCD_KEY", cl.key, 1);
    setenv("SHMLEASE_ETCD_CACERT", cl.other_ca, 1);
    static const char *const cmds[] = {"create", "check", "rm", "dump"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int st = t_tool_run(&out, "%s '%s' 2>&1", cmds[i], url);
        cr_assert_neq(st, 0, "%s: %s", cmds[i], out);
        cr_assert_not_null(strstr(out, "TLS"), "%s: %s", cmds[i], out);
        cr_assert_null(strstr(out, "another user's segment"), "%s: %s", cmds[i], out);
        free(out);
    }
    /* With the right CA it works (the refusal was the CA's). */
    setenv("SHMLEASE_ETCD_CACERT", cl.ca, 1);
    int st = t_tool_run(&out, "create '%s' 2>&1", url);
    cr_assert_eq(st, 0, "%s", out);
    free(out);
}
