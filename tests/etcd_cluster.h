/*
 * tests/etcd_cluster.h - the tests' throwaway etcd clusters: the launcher
 * the stress tool, the demo and the benchmark use too (tools/etcd_cluster.h).
 */
#ifndef SHL_TESTS_ETCD_CLUSTER_H
#define SHL_TESTS_ETCD_CLUSTER_H

#include "../tools/etcd_cluster.h"

#endif
