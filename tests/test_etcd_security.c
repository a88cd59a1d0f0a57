/*
 * tests/test_etcd_security.c - the etcd client with TLS (a member that
 * requires client certificates) and with etcd authentication: the right
 * credentials work, every wrong one is refused with ETC_EPERM (a plain
 * client on a TLS port: ETC_ECORRUPT), and an expired token is renewed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

#define S(s) (s), strlen(s)

static struct etcd_cluster cl;

static void down(void)
{
    etcd_cluster_stop(&cl);
}

static void certs(void)
{
    t_guard(60);
    cr_assert_eq(etcd_cluster_start(&cl, 1, ETCD_CLIENT_CERT), 0, "%s", cl.err);
}

static void auth(void)
{
    t_guard(60);
    cr_assert_eq(etcd_cluster_start(&cl, 1, ETCD_AUTH), 0, "%s", cl.err);
}

/* A put and a get through a client of cfg: ETC_OK or the first code. */
static int round_trip(const struct etc_config *cfg, char *why, size_t cap)
{
    etc_client *c;
    int rc = etc_open(cfg, &c);
    if (rc) {
        snprintf(why, cap, "open");
        return rc;
    }
    rc = etc_put(c, S("k"), S("v"), 0, NULL);
    struct etc_range r;
    if (!rc)
        rc = etc_get(c, S("k"), NULL, 0, 0, 0, &r);
    if (!rc) {
        rc = r.n == 1 && !strcmp(r.kvs[0].value, "v") ? ETC_OK : -100;
        etc_range_free(&r);
    }
    snprintf(why, cap, "%s", etc_errmsg(c));
    etc_close(c);
    return rc;
}

Test(etcd_security, client_certificates, .init = certs, .fini = down)
{
    char why[256];
    struct etc_config ok = {.endpoints = cl.endpoints,
                            .tls = 1,
                            .cacert = cl.ca,
                            .cert = cl.cert,
                            .key = cl.key,
                            .timeout_ms = 12000};
    int rc = round_trip(&ok, why, sizeof why);
    cr_assert_eq(rc, ETC_OK, "right certificates: %s (%s)", etc_errname(rc), why);

    struct {
        const char *what;
        struct etc_config cfg;
        int expect;
    } bad[] = {
        {"no client certificate", ok, ETC_EPERM},
        {"a client certificate of another CA", ok, ETC_EPERM},
        {"a server of another CA", ok, ETC_EPERM},
        {"the system's CAs only", ok, ETC_EPERM},
    };
    bad[0].cfg.cert = bad[0].cfg.key = NULL;
    bad[1].cfg.cert = cl.other_cert;
    bad[1].cfg.key = cl.other_key;
    bad[2].cfg.cacert = cl.other_ca;
    bad[3].cfg.cacert = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t t0 = t_now();
        rc = round_trip(&bad[i].cfg, why, sizeof why);
        cr_assert_eq(rc, bad[i].expect, "%s: %s (%s)", bad[i].what, etc_errname(rc), why);
        /* A refusal comes from the handshake, long before the 12 s
         * deadline (loading the system's CAs under a sanitizer and a busy
         * machine can take seconds). */
        cr_assert_lt(t_now() - t0, 6 * SEC, "%s: refused at once, not at the deadline",
                     bad[i].what);
    }

    /* Plain http to the TLS port: the member hangs up without a word, so
     * nothing is known of a write, and a read finds no member to answer. */
    struct etc_config plain = ok;
    plain.tls = 0;
    plain.timeout_ms = 500;
    etc_client *pc;
    struct etc_range r;
    cr_assert_eq(etc_open(&plain, &pc), ETC_OK);
    cr_assert_eq(etc_get(pc, S("k"), NULL, 0, 0, 0, &r), ETC_EUNAVAIL);
    cr_assert_eq(etc_put(pc, S("k"), S("x"), 0, NULL), ETC_EUNKNOWN);
    etc_close(pc);

    /* A watch over TLS. */
    etc_client *c;
    etc_watch *w;
    struct etc_event ev;
    cr_assert_eq(etc_open(&ok, &c), ETC_OK);
    cr_assert_eq(etc_watch_open(c, S("w"), NULL, 0, 0, &w), ETC_OK);
    cr_assert_eq(etc_put(c, S("w"), S("x"), 0, NULL), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_str_eq(ev.kv.value, "x");
    etc_event_free(&ev);
    etc_watch_close(w);
    /* ... and refused without a certificate. */
    etc_client *nc;
    struct etc_config nocert = ok;
    nocert.cert = nocert.key = NULL;
    cr_assert_eq(etc_open(&nocert, &nc), ETC_OK);
    w = NULL;
    cr_assert_eq(etc_watch_open(nc, S("w"), NULL, 0, 0, &w), ETC_EPERM, "%s", etc_errmsg(nc));
    cr_assert_null(w);
    etc_close(nc);
    etc_close(c);
}

Test(etcd_security, password, .init = auth, .fini = down)
{
    char why[256];
    struct etc_config ok = {
        .endpoints = cl.endpoints, .user = cl.user, .password = cl.password, .timeout_ms = 3000};
    int rc = round_trip(&ok, why, sizeof why);
    cr_assert_eq(rc, ETC_OK, "right password: %s (%s)", etc_errname(rc), why);

    struct etc_config wrong = ok;
    wrong.password = "not-the-password";
    etc_client *c;
    cr_assert_eq(etc_open(&wrong, &c), ETC_EPERM, "wrong password");
    cr_assert_null(c);
    wrong.user = "nobody";
    cr_assert_eq(etc_open(&wrong, &c), ETC_EPERM, "unknown user");

    /* No credentials at all: every call is refused. */
    struct etc_config none = {.endpoints = cl.endpoints, .timeout_ms = 3000};
    rc = round_trip(&none, why, sizeof why);
    cr_assert_eq(rc, ETC_EPERM, "no user: %s (%s)", etc_errname(rc), why);

    /* The tokens expire unused (ETCD_TOKEN_TTL): each client signs in again
     * on its own, for a call (c) and for a watch (c2). */
    etc_client *c2;
    cr_assert_eq(etc_open(&ok, &c), ETC_OK);
    cr_assert_eq(etc_open(&ok, &c2), ETC_OK);
    cr_assert_eq(etc_put(c, S("k"), S("1"), 0, NULL), ETC_OK);
    t_sleep_ns((uint64_t)(atoi(ETCD_TOKEN_TTL) + 2) * SEC);
    rc = etc_put(c, S("k"), S("2"), 0, NULL);
    cr_assert_eq(rc, ETC_OK, "after the token expired: %s (%s)", etc_errname(rc), etc_errmsg(c));
    etc_watch *w;
    struct etc_event ev;
    rc = etc_watch_open(c2, S("k"), NULL, 0, 0, &w);
    cr_assert_eq(rc, ETC_OK, "a watch after the token expired: %s (%s)", etc_errname(rc),
                 etc_errmsg(c2));
    cr_assert_eq(etc_put(c, S("k"), S("3"), 0, NULL), ETC_OK);
    cr_assert_eq(etc_watch_next(w, 5000, &ev), ETC_OK);
    cr_assert_str_eq(ev.kv.value, "3");
    etc_event_free(&ev);
    etc_watch_close(w);
    etc_close(c2);
    etc_close(c);
}
