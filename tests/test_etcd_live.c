/*
 * tests/test_etcd_live.c - an etcd table stays usable when the cluster
 * changes under an open handle: auth enabled after the open (the handle
 * signs in when the server starts asking), and a waiter whose watch is on
 * a member that stops (it still hears the release, through another member).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

static struct etcd_cluster cl;

static void down(void)
{
    etcd_cluster_stop(&cl);
}

static void one_plain(void)
{
    t_guard(90);
    cr_assert_eq(etcd_cluster_start(&cl, 1, 0), 0, "%s", cl.err);
}

static shl_table *open_as(const char *table, const char *user, const char *password)
{
    char url[512];
    shl_options o;
    shl_options_init(&o);
    o.user = user;
    o.password = password;
    o.timeout_ms = 3000;
    shl_table *t = NULL;
    int rc = shl_open(etcd_cluster_url(&cl, table, url, sizeof url), &o, &t);
    cr_assert_eq(rc, SHL_OK, "open %s: %s", table, shl_strerror(rc));
    return t;
}

/* Opened with credentials while auth is off; an admin enables auth; the
 * handle's next operations sign in and succeed (before: SHL_EPERM). */
Test(etcd_live, auth_enabled_after_open, .init = one_plain, .fini = down)
{
    snprintf(cl.password, sizeof cl.password, "pw-live-%d", (int)getpid());
    shl_table *t = open_as("authlater", "root", cl.password);
    uint64_t tok = 0;
    cr_assert_eq(shl_acquire(t, "a", "me", 10 * SEC, &tok), SHL_OK);
    cr_assert_eq(etcd_cluster_enable_auth(&cl), 0, "%s", cl.err);

    /* Without credentials the cluster now refuses: auth is really on. */
    shl_table *anon = NULL;
    char url[512];
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 3000;
    int rc = shl_open(etcd_cluster_url(&cl, "authlater", url, sizeof url), &o, &anon);
    if (rc == SHL_OK) {
        uint64_t x;
        rc = shl_acquire(anon, "b", "anon", 10 * SEC, &x);
        shl_close(anon);
    }
    cr_assert_eq(rc, SHL_EPERM, "no credentials after auth enable: %s", shl_strerror(rc));

    rc = shl_renew(t, "a", "me", tok, 10 * SEC);
    cr_assert_eq(rc, SHL_OK, "renew after auth enable: %s", shl_strerror(rc));
    rc = shl_release(t, "a", "me", tok);
    cr_assert_eq(rc, SHL_OK, "release after auth enable: %s", shl_strerror(rc));
    uint64_t tok2 = 0;
    rc = shl_acquire(t, "a", "me", 10 * SEC, &tok2);
    cr_assert_eq(rc, SHL_OK, "acquire after auth enable: %s", shl_strerror(rc));
    cr_assert_gt(tok2, tok);
    cr_assert_eq(shl_release(t, "a", "me", tok2), SHL_OK);
    shl_close(t);
}
