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
 * `words` words) from the next revision; sh says which deletes of them
 * --admin-chaos made. NULL and *why on failure. */
struct st_etcd_feed *st_etcd_feed_new(const char *name, unsigned words, struct st_shared *sh,
                                      const char **why);
void st_etcd_feed_free(struct st_etcd_feed *f);
/* The checker's feed (st_feed_fn): arg is the st_etcd_feed. */
int st_etcd_feed(void *arg, struct st_checker *ck, int force);

#if SHL_HAVE_ETCD
#include "../etcd/etcd.h"

/* A client of etcd table `name` (its table part into table), whose
 * requests give up after ms. NULL and *why on failure. */
etc_client *st_etcd_client(const char *name, char *table, size_t tcap, unsigned ms,
                           const char **why);
/* --admin-chaos (stress_admin_etcd.c): deletes the holder record of the
 * lease, if any, under a compare of its mod revision, and notes its token
 * (st_gone_note()). 1: deleted; 0: none, or changed meanwhile; -1: no
 * answer (it may have happened). */
int st_etcd_admin_delete(etc_client *c, const char *table, struct st_shared *sh, unsigned lease);
/* --admin-chaos: a token record deleted, to be put back as it was. */
struct st_token_drop {
    int on; /* deleted (or maybe: no answer), not restored yet */
    unsigned lease;
    char key[SHL_TABLE_NAME_MAX + 8 + ST_LEASE_NAME];
    size_t kl;
    char was[24];
    size_t wl;
    uint64_t until; /* st_now_ns: when to restore it (the caller's) */
};
/* Deletes the token record of the lease when a value record carries a
 * token (the lease's token epoch odd from then on), into *d. 1: deleted;
 * 0: not; -1: no answer (d->on: it may have happened). */
int st_etcd_admin_drop_token(etc_client *c, const char *table, struct st_shared *sh, unsigned lease,
                             struct st_token_drop *d);
/* Puts d's token record back as it was, unless something wrote it
 * meanwhile, and ends the odd epoch. 0, or -1: no answer (try again). */
int st_etcd_admin_restore_token(etc_client *c, struct st_shared *sh, struct st_token_drop *d);
/* --admin-chaos: deletes every key of the table (etcdctl del --prefix) and
 * restores its meta and token records as they were, a removal of the
 * current table generation (stress.h; the workers open the next). 1 done;
 * 0 not now (nothing to delete, a process appending, no room for another
 * generation); -1 no answer (may be done, then counted as done). */
int st_etcd_admin_wipe(etc_client *c, const char *table, struct st_shared *sh);
/* Whether a value record deleted at revision rev went with a prefix
 * delete of --admin-chaos (or one under way). */
int st_wiped_at(struct st_shared *sh, int64_t rev);
#endif

#endif
