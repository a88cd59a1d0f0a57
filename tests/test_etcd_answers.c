/*
 * tests/test_etcd_answers.c - a release whose answer is lost, or is an
 * error, although etcd did it: the library must report what happened
 * (SHL_OK, the record gone), not SHL_ELOST.
 *
 * A real member sits behind a proxy process with two ports, the handle's
 * two endpoints. The proxy relays every request (over HTTP/1.0, one
 * connection each) and answers with the member's answer, except the
 * release's transaction (a txn with a delete) on the first port:
 *  - STOPPED: relayed, then answered "etcdserver: server stopped" (HTTP
 *    503, gRPC Unavailable), as etcd 3.4 answers a write whose proposal it
 *    made when it stops before the apply. The client took it for "not
 *    sent" and sent it again through the other port, where the record was
 *    already gone: SHL_ELOST.
 *  - LATE: held, unanswered, so the client gives up on it (its silent-member
 *    cap) and reads the record back through the second port: still there.
 *    It sends the delete again there, and the proxy relays the held one
 *    first, which lands in between: the second one's compare fails, and
 *    the library said SHL_ELOST for a release its first request made.
 * And a watch whose members confirm it slowly, with the client's attempts
 * capped (etc_silent_cap): it must go round the members until its deadline.
 */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

enum mode { STOPPED, LATE, SLOW_WATCH };

/* SLOW_WATCH: watches are confirmed only this long after the proxy began. */
#define WATCH_READY (1500 * MS)

static struct etcd_cluster cl;
static pid_t proxy;
static int ports[2];

/* One request: its path and body. */
struct req {
    char path[128];
    char *body;
    size_t len;
};

static int recv_some(int fd, char *buf, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0)
        return -1;
    ssize_t n = recv(fd, buf, cap, 0);
    return n <= 0 ? -1 : (int)n;
}

/* Reads a request (head, then the body its Content-Length says). */
static int read_req(int fd, struct req *r)
{
    static char buf[1 << 16];
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        int k = recv_some(fd, buf + n, sizeof buf - 1 - n);
        if (k < 0)
            return -1;
        n += (size_t)k;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    char *cl_h = strcasestr(buf, "content-length:");
    size_t want = cl_h ? strtoul(cl_h + 15, NULL, 10) : 0;
    size_t head = (size_t)(end + 4 - buf);
    if (sscanf(buf, "POST %127s", r->path) != 1)
        return -1;
    r->body = malloc(want + 1);
    r->len = want;
    size_t have = n - head < want ? n - head : want;
    memcpy(r->body, buf + head, have);
    while (have < want) {
        int k = recv_some(fd, r->body + have, want - have);
        if (k < 0)
            return -1;
        have += (size_t)k;
    }
    r->body[want] = '\0';
    return 0;
}

/* Sends r to the member over HTTP/1.0; its whole answer into *out. */
static size_t forward(const struct req *r, char **out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)cl.m[0].client_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    size_t n = 0, cap = 1 << 16;
    *out = malloc(cap);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        /* JSON: no NUL in the body. */
        dprintf(fd,
                "POST %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: "
                "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                r->path, r->len, r->body);
        int k;
        while (n < cap && (k = recv_some(fd, *out + n, cap - n)) > 0)
            n += (size_t)k;
    }
    close(fd);
    return n;
}

static void relay(int fd, const struct req *r)
{
    char *ans;
    size_t n = forward(r, &ans);
    dprintf(fd, "%.*s", (int)n, ans); /* HTTP and JSON: no NUL */
    free(ans);
}

static int is_release(const struct req *r)
{
    return strstr(r->path, "kv/txn") && strstr(r->body, "request_delete_range");
}

/* SLOW_WATCH: confirms the watches asked for so far once WATCH_READY has
 * passed (the connections stay open, as a watch's does). */
static void confirm_watches(int *w, size_t *nw, uint64_t ready)
{
    if (t_now() < ready)
        return;
    for (size_t i = 0; i < *nw; i++)
        dprintf(w[i], "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
                      "{\"result\":{\"header\":{\"revision\":\"1\"},\"created\":true}}\n");
    *nw = 0; /* left open: the client ends them */
}

static void serve(int ls[2], enum mode m)
{
    int held = -1; /* LATE: the client connection of the held request */
    struct req hr = {{0}, NULL, 0};
    int watches[64];
    size_t nw = 0;
    uint64_t ready = t_now() + WATCH_READY;
    for (;;) {
        struct pollfd p[2] = {{.fd = ls[0], .events = POLLIN}, {.fd = ls[1], .events = POLLIN}};
        confirm_watches(watches, &nw, ready);
        if (poll(p, 2, 10) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & POLLIN))
                continue;
            int fd = accept(ls[i], NULL, NULL);
            struct req r = {{0}, NULL, 0};
            if (fd < 0)
                continue;
            if (read_req(fd, &r) != 0) {
                close(fd);
                free(r.body);
                continue;
            }
            if (m == SLOW_WATCH && strstr(r.path, "/watch") && nw < 64) {
                watches[nw++] = fd;
                free(r.body);
                continue;
            }
            if (i == 0 && is_release(&r) && m == STOPPED) {
                char *ans;
                free((forward(&r, &ans), ans)); /* done, then: */
                static const char b[] = "{\"error\":\"etcdserver: server stopped\",\"code\":14,"
                                        "\"message\":\"etcdserver: server stopped\"}";
                dprintf(fd,
                        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: "
                        "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                        sizeof b - 1, b);
            } else if (i == 0 && is_release(&r) && m == LATE && held < 0) {
                held = fd; /* no answer: the client gives up on it */
                hr = r;
                continue;
            } else {
                if (held >= 0 && is_release(&r)) { /* the held one lands first */
                    char *ans;
                    free((forward(&hr, &ans), ans));
                }
                relay(fd, &r);
            }
            shutdown(fd, SHUT_WR);
            close(fd);
            free(r.body);
        }
    }
}

static void start_proxy(enum mode m)
{
    int ls[2];
    for (int i = 0; i < 2; i++) {
        ls[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        cr_assert_eq(bind(ls[i], (struct sockaddr *)&a, sizeof a), 0);
        cr_assert_eq(listen(ls[i], 16), 0);
        cr_assert_eq(getsockname(ls[i], (struct sockaddr *)&a, &len), 0);
        ports[i] = ntohs(a.sin_port);
    }
    proxy = fork();
    cr_assert_geq(proxy, 0);
    if (proxy == 0) {
        serve(ls, m);
        _exit(0);
    }
    close(ls[0]);
    close(ls[1]);
}

static void up(void)
{
    t_guard(90);
    cr_assert_eq(etcd_cluster_start(&cl, 1, 0), 0, "%s", cl.err);
}

static void down(void)
{
    if (proxy > 0) {
        kill(proxy, SIGKILL);
        waitpid(proxy, NULL, 0);
        proxy = 0;
    }
    etcd_cluster_stop(&cl);
}

/* Acquires through the member, releases through the proxy: SHL_OK, and
 * the holder record is gone. */
static void release_through(enum mode m)
{
    start_proxy(m);
    char url[256];
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 5000;
    shl_table *direct = NULL, *t = NULL;
    cr_assert_eq(shl_open(etcd_cluster_url(&cl, "answers", url, sizeof url), &o, &direct), SHL_OK);
    uint64_t tok = 0;
    cr_assert_eq(shl_acquire(direct, "L", "me", 30 * SEC, &tok), SHL_OK);
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d/answers", ports[0], ports[1]);
    o.flags = 0;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    int rc = shl_release(t, "L", "me", tok);
    shl_lease_info in;
    cr_assert_eq(shl_stat(direct, "L", &in), SHL_OK);
    cr_assert_eq(rc, SHL_OK, "a release that happened: %s", shl_strerror(rc));
    cr_assert_eq(in.state, SHL_STATE_FREE, "the lease is free (state %d)", in.state);
    uint64_t next = 0;
    cr_assert_eq(shl_acquire(direct, "L", "other", 30 * SEC, &next), SHL_OK);
    cr_assert_gt(next, tok);
    shl_close(t);
    shl_close(direct);
}

Test(etcd_answers, release_answered_server_stopped_after_it_was_done, .init = up, .fini = down)
{
    release_through(STOPPED);
}

Test(etcd_answers, release_landing_after_its_read_back, .init = up, .fini = down)
{
    release_through(LATE);
}

/* Both members confirm watches only after 1.5 s: a client whose attempts
 * are capped at 500 ms gives up on each, and must go round again until its
 * deadline rather than fail after one round. */
Test(etcd_answers, capped_watch_goes_round_until_its_deadline, .init = up, .fini = down)
{
    start_proxy(SLOW_WATCH);
    char eps[64];
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1]);
    struct etc_config cfg = {.endpoints = eps, .timeout_ms = 5000};
    etc_client *c = NULL;
    cr_assert_eq(etc_open(&cfg, &c), ETC_OK);
    etc_silent_cap(c, 500 * MS);
    etc_watch *w = NULL;
    uint64_t t0 = t_now();
    int rc = etc_watch_open(c, "k", 1, NULL, 0, 0, &w);
    cr_assert_eq(rc, ETC_OK, "after %llu ms: %s (%s)", (unsigned long long)((t_now() - t0) / MS),
                 etc_errname(rc), etc_errmsg(c));
    etc_watch_close(w);
    etc_close(c);
}

/* The classification itself: "server stopped" may come after a proposal. */
Test(etcd_answers, server_stopped_may_have_been_done)
{
    static const char b[] = "{\"error\":\"etcdserver: server stopped\",\"code\":14}";
    struct etc_range r;
    int rc = etc_parse_range(b, sizeof b - 1, &r);
    cr_assert_eq(rc, ETC_EUNKNOWN, "%s", etc_errname(rc));
    etc_range_free(&r);
}
