/*
 * tools/stress_etcd.h - the campaign's evidence on an etcd table: etcd's
 * history of the value records, read with a watch (stress_etcd.c). Built
 * with etcd support only.
 */
#ifndef SHL_TOOLS_STRESS_ETCD_H
#define SHL_TOOLS_STRESS_ETCD_H

#include "stress.h"

struct st_etcd_feed;

/* Starts watching the value records of etcd table `name` (values of
 * `words` words) from the next revision. NULL and *why on failure. */
struct st_etcd_feed *st_etcd_feed_new(const char *name, unsigned words, const char **why);
void st_etcd_feed_free(struct st_etcd_feed *f);
/* The checker's feed (st_feed_fn): arg is the st_etcd_feed. */
int st_etcd_feed(void *arg, struct st_checker *ck, int force);

#endif
