/*
 * tests/etcd_cluster.h - the tests' throwaway etcd clusters: the launcher
 * the stress tool, the demo and the benchmark use too (tools/etcd_cluster.h),
 * and the set-up most etcd suites share (tests/etcd_table.c).
 */
#ifndef SHL_TESTS_ETCD_CLUSTER_H
#define SHL_TESTS_ETCD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "../tools/etcd_cluster.h"
#include "shmlease.h"

/* Starts a one-member cluster in *cl (the test fails if it cannot) and opens
 * the table `prefix` on it with value_size; its name goes to url (cap). */
shl_table *t_etcd_up(struct etcd_cluster *cl, const char *prefix, uint32_t value_size, char *url,
                     size_t cap);

/* Closes t and stops the cluster; with check, shl_check(t) must pass first
 * (each problem logged). */
void t_etcd_down(struct etcd_cluster *cl, shl_table *t, int check);

/* A plain client of cl's members, for what etcdctl would do to the keys
 * (the test fails if it cannot open one); etc_close() it. */
struct etc_client *t_etcd_raw(const struct etcd_cluster *cl);

/* How many keys named k exist (0 or 1), read through a raw client. */
int t_etcd_exists(struct etc_client *e, const char *k);

/* A number that member 0 reports on /metrics: its text piped through the
 * shell filter `filter`, which must print the number alone. */
long t_etcd_metric(const struct etcd_cluster *cl, const char *filter);

#endif
