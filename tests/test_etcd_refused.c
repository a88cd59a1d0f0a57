/*
 * tests/test_etcd_refused.c - a cluster address where nothing listens
 * fails at once, with "connection refused by every member", instead of
 * retrying until the deadline and then saying that a change may have
 * happened. A member that accepts and stays silent is still waited for.
 * No etcd is needed: closed and silent ports of the loopback.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* A loopback socket bound to a free port: listening (a member that takes
 * connections and never answers) or not (the port is then closed once the
 * socket is: a member that is down). Its port. */
static int loopback(int listening, int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(*fd, 0);
    cr_assert_eq(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    if (listening)
        cr_assert_eq(listen(*fd, 16), 0);
    return ntohs(a.sin_port);
}

static int closed_port(void)
{
    int fd, port = loopback(0, &fd);
    close(fd); /* bound, never listened: connect() to it is refused */
    return port;
}

/* shl_open(name) with a timeout (0: the default), which must fail: its
 * code, and how long it took in *took. */
static int timed_open(const char *name, uint32_t timeout_ms, uint64_t *took)
{
    shl_options o;
    shl_options_init(&o);
    if (timeout_ms)
        o.timeout_ms = timeout_ms;
    shl_table *t = NULL;
    shl_clear_error();
    uint64_t t0 = t_now();
    int rc = shl_open(name, &o, &t);
    *took = t_now() - t0;
    cr_assert_null(t);
    return rc;
}

Test(etcd_refused, every_member_refusing_fails_at_once)
{
    t_guard(60);
    char name[128];
    int p1 = closed_port(), p2 = closed_port();
    snprintf(name, sizeof name, "etcd://127.0.0.1:%d,127.0.0.1:%d/refused", p1, p2);
    uint64_t took;
    int rc = timed_open(name, 0, &took); /* the default timeout: 5000 ms */
    cr_assert_eq(rc, SHL_EUNAVAIL, "%s", shl_errname(rc));
    /* Before, this took the whole 5 s timeout; a refused loopback connect
     * takes microseconds, so half of it is a bound no load reaches. */
    cr_assert_lt(took, 2500 * MS, "took %llu ms", (unsigned long long)(took / MS));
    char want[128];
    snprintf(want, sizeof want,
             "connection refused by every member (127.0.0.1:%d, 127.0.0.1:%d): nothing was sent",
             p1, p2);
    cr_assert(strstr(shl_last_error(), want), "detail: \"%s\"", shl_last_error());
}

/* One member refuses, another accepts and says nothing: that one may be
 * slow, so the call waits for it, to its timeout, as before. */
Test(etcd_refused, a_silent_member_is_waited_for)
{
    t_guard(60);
    int silent, ps = loopback(1, &silent), pc = closed_port();
    char name[128];
    snprintf(name, sizeof name, "etcd://127.0.0.1:%d,127.0.0.1:%d/refused", pc, ps);
    uint64_t took;
    int rc = timed_open(name, 800, &took);
    cr_assert_eq(rc, SHL_EUNAVAIL, "%s", shl_errname(rc));
    cr_assert_geq(took, 700 * MS, "gave up after %llu ms", (unsigned long long)(took / MS));
    cr_assert_null(strstr(shl_last_error(), "refused by every member"), "%s", shl_last_error());
    close(silent);
}

Test(etcd_refused, the_tool_says_so)
{
    t_guard(60);
    char *out;
    int p = closed_port();
    uint64_t t0 = t_now();
    int rc = t_tool_run(&out, "create etcd://127.0.0.1:%d/refused 2>&1", p);
    cr_assert_neq(rc, 0);
    cr_assert_lt(t_now() - t0, 2500 * MS);
    cr_assert(strstr(out, "connection refused by every member (127.0.0.1:"), "output: %s", out);
    free(out);
}
