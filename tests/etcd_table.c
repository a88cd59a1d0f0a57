/*
 * tests/etcd_table.c - the set-up most etcd suites share: a one-member
 * cluster with one table on it (tests/etcd_cluster.h).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../etcd/etcd.h"
#include "common.h"
#include "etcd_cluster.h"

shl_table *t_etcd_up(struct etcd_cluster *cl, const char *prefix, uint32_t value_size, char *url,
                     size_t cap)
{
    t_guard(120);
    cr_assert_eq(etcd_cluster_start(cl, 1, 0), 0, "%s", cl->err);
    etcd_cluster_url(cl, prefix, url, cap);
    shl_options o;
    shl_options_init(&o);
    o.value_size = value_size;
    shl_table *t = NULL;
    cr_assert_eq(shl_open(url, &o, &t), SHL_OK);
    return t;
}

static void log_problem(void *arg, const char *problem)
{
    (void)arg;
    cr_log_error("check: %s", problem);
}

void t_etcd_down(struct etcd_cluster *cl, shl_table *t, int check)
{
    if (check)
        cr_assert_eq(shl_check(t, log_problem, NULL), SHL_OK, "the table's keys are consistent");
    shl_close(t);
    etcd_cluster_stop(cl);
}

etc_client *t_etcd_raw(const struct etcd_cluster *cl)
{
    struct etc_config c = {0};
    c.endpoints = cl->endpoints;
    etc_client *e = NULL;
    cr_assert_eq(etc_open(&c, &e), ETC_OK);
    return e;
}

int t_etcd_exists(etc_client *e, const char *k)
{
    struct etc_range r = {0};
    cr_assert_eq(etc_get(e, k, strlen(k), NULL, 0, 0, 0, &r), ETC_OK);
    int n = (int)r.n;
    etc_range_free(&r);
    return n;
}

long t_etcd_metric(const struct etcd_cluster *cl, const char *filter)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "curl -s http://%s/metrics | %s", etcd_cluster_endpoint(cl, 0),
             filter);
    cr_assert_eq(t_run(cmd, &out), 0, "%s", cmd);
    long n = -1;
    cr_assert_eq(sscanf(out, "%ld", &n), 1, "metrics: %s", out);
    free(out);
    return n;
}
