/*
 * lib/kind.h - the two kinds of table and the operations of each.
 *
 * A table is either a shared-memory segment (SHL__KIND_SHM) or a prefix in
 * an etcd cluster (SHL__KIND_ETCD). Every public function that takes a
 * table tests the kind once at its entry (the files of lib/) and calls the
 * function of the same name below, shl__etcd_* (lib/kind_etcd/) or
 * shl__shm_* (lib/kind_shm/), as its last call: the shared-memory path
 * stays a direct call path (one predictable branch, no indirection). The
 * etcd kind is built only when SHL_HAVE_ETCD is 1; otherwise no handle of
 * that kind can exist, and names of it are refused with SHL_ENOTSUP at open.
 */
#ifndef SHL_LIB_KIND_H
#define SHL_LIB_KIND_H

#include <stddef.h>
#include <stdint.h>

#include "shmlease.h"

#ifndef SHL_HAVE_ETCD
#define SHL_HAVE_ETCD 0
#endif

#define SHL__KIND_SHM  0u
#define SHL__KIND_ETCD 1u

#define SHL__ETCD_TIMEOUT_MS 5000u /* shl_options.timeout_ms by default */

#define shl__unlikely(x) __builtin_expect(!!(x), 0)

/* An etcd table name, parsed: "etcd://HOST:PORT[,HOST:PORT...]/TABLE" or
 * "etcds://..." (TLS). */
#define SHL__ETCD_ENDPOINTS_MAX 1024
struct shl__etcd_name {
    int tls;
    char endpoints[SHL__ETCD_ENDPOINTS_MAX]; /* "host:port,host:port" */
    char table[SHL_TABLE_NAME_MAX + 1];      /* segments of [A-Za-z0-9._-], '/' between */
};

/* Whether `name` asks for an etcd table (starts with "etcd://" or
 * "etcds://"); then shl__etcd_parse() decides whether it is well formed. */
int shl__is_etcd_name(const char *name) __attribute__((visibility("hidden")));
/* Parses strictly: SHL_EINVAL for anything but the form above (an empty or
 * missing host, a port that is not 1..65535, an empty endpoint, a table name
 * with other characters, empty segments or over SHL_TABLE_NAME_MAX bytes). */
int shl__etcd_parse(const char *name, struct shl__etcd_name *out)
    __attribute__((visibility("hidden")));

struct shl__etcd; /* the etcd kind's part of a handle (lib/kind_etcd/etcd_table.c) */

#if SHL_HAVE_ETCD
#define SHL__ETCD_FN(decl) decl __attribute__((visibility("hidden")));
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
/* Without etcd support no etcd handle exists: these are never reached, and
 * say so with the code an etcd name gets at open. */
#define SHL__ETCD_FN(decl)                                                                         \
    static inline decl                                                                             \
    {                                                                                              \
        return SHL_ENOTSUP;                                                                        \
    }
#endif

/* The operations of the etcd kind. Arguments are those of the public
 * function of the same name, already checked as far as the caller checks
 * them for both kinds (handle, fork, owner, ttl, token pointer); `olen` is
 * the owner's length. Same results, plus SHL_EUNAVAIL. */
SHL__ETCD_FN(int shl__etcd_open(const struct shl__etcd_name *n, const shl_options *o, shl_table *t))
SHL__ETCD_FN(int shl__etcd_close(shl_table *t))
SHL__ETCD_FN(int shl__etcd_unlink(const struct shl__etcd_name *n))
SHL__ETCD_FN(int shl__etcd_info(shl_table *t, shl_table_info *info))
SHL__ETCD_FN(int shl__etcd_acquire(shl_table *t, const char *lease, const char *owner,
                                   uint32_t olen, uint64_t ttl_ns, uint64_t *token,
                                   shl_lease_info *holder))
SHL__ETCD_FN(int shl__etcd_acquire_shared(shl_table *t, const char *lease, const char *owner,
                                          uint32_t olen, uint64_t ttl_ns, uint64_t *token,
                                          uint64_t *gen, shl_lease_info *holder))
SHL__ETCD_FN(int shl__etcd_renew(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                                 uint64_t token, uint64_t ttl_ns))
SHL__ETCD_FN(int shl__etcd_release(shl_table *t, const char *lease, const char *owner,
                                   uint32_t olen, uint64_t token))
SHL__ETCD_FN(int shl__etcd_write(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                                 uint64_t token, const void *buf, size_t len))
SHL__ETCD_FN(int shl__etcd_update(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                                  uint64_t token, shl_update_fn fn, void *arg))
SHL__ETCD_FN(int shl__etcd_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
                                uint64_t *token))
SHL__ETCD_FN(int shl__etcd_stat(shl_table *t, const char *lease, shl_lease_info *info))
SHL__ETCD_FN(int shl__etcd_revoke(shl_table *t, const char *lease))
SHL__ETCD_FN(int shl__etcd_wait(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                                uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token))
SHL__ETCD_FN(int shl__etcd_shared_wait(shl_table *t, const char *lease, const char *owner,
                                       uint32_t olen, uint64_t ttl_ns, uint64_t timeout_ns,
                                       uint64_t *token, uint64_t *gen))
SHL__ETCD_FN(int shl__etcd_inspect(shl_table *t, const char *lease, shl_lease_detail *d))
SHL__ETCD_FN(int shl__etcd_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d),
                                   void *arg))
SHL__ETCD_FN(int shl__etcd_check(shl_table *t, void (*report)(void *arg, const char *problem),
                                 void *arg))

#undef SHL__ETCD_FN
#if !SHL_HAVE_ETCD
#pragma GCC diagnostic pop
#endif

/* The operations of the shared-memory kind (lib/kind_shm/), called by the
 * entry points in lib/ after the same checks as the etcd kind's above, each
 * as the entry's last call. Grouped by the entry file that calls them. */
#define SHL__SHM_FN __attribute__((visibility("hidden")))

struct shl__key;  /* a lease name, checked and hashed by the entry (internal.h) */
struct shl__slot; /* a lease's slot in the segment: opaque to the entry points */

/* lib/table.c. Open: `n` is the checked name, `o` the checked options (or
 * NULL); the handle in *out. Close frees nothing but the mapping and the
 * descriptor (the entry frees the handle). */
int shl__shm_open(const char n[SHL_TABLE_NAME_MAX + 1], const shl_options *o,
                  shl_table **out) SHL__SHM_FN;
void shl__shm_close(shl_table *t) SHL__SHM_FN;
int shl__shm_unlink(const char n[SHL_TABLE_NAME_MAX + 1]) SHL__SHM_FN;
int shl__shm_table_check(shl_table *t) SHL__SHM_FN;
int shl__shm_info(shl_table *t, shl_table_info *info) SHL__SHM_FN;
/* The table clock (manual or CLOCK_MONOTONIC), and setting a manual one. */
uint64_t shl__shm_now(const shl_table *t) SHL__SHM_FN;
int shl__shm_clock_set(shl_table *t, uint64_t now_ns) SHL__SHM_FN;

/* lib/lease.c, lib/revoke.c, lib/bound.c */

/* By name (kind_shm/lease.c): the lease's slot looked up, then the
 * operation on it. The holder's operations answer SHL_ELOST for a name
 * never used (nobody holds it). Acquire (also shared) and guard check their
 * owner, ttl and token themselves (shl__acquire_args(), shl__holder_args()):
 * without the owner's length, the entry point's hand-off is a tail call. */
int shl__shm_acquire(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                     uint64_t *token, shl_lease_info *holder) SHL__SHM_FN;
int shl__shm_renew(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                   uint64_t token, uint64_t ttl_ns) SHL__SHM_FN;
int shl__shm_release(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                     uint64_t token) SHL__SHM_FN;
int shl__shm_write(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                   uint64_t token, const void *buf, size_t len) SHL__SHM_FN;
int shl__shm_update(shl_table *t, const char *lease, const char *owner, uint32_t olen,
                    uint64_t token, shl_update_fn fn, void *arg) SHL__SHM_FN;
int shl__shm_guard(shl_table *t, const char *lease, const char *owner, uint64_t token,
                   shl_guard_fn fn, void *arg) SHL__SHM_FN;
int shl__shm_guard_shared(shl_table *t, const char *lease, const char *owner, uint64_t token,
                          shl_guard_fn fn, void *arg) SHL__SHM_FN;

/* kind_shm/revoke.c: shl_revoke() of the lease named by k. */
int shl__shm_revoke(shl_table *t, const struct shl__key *k) SHL__SHM_FN;

/* Bound leases (kind_shm/bound.c). The slot a bound lease keeps, found or
 * added at shl_lease_open(). */
int shl__shm_lease_slot(shl_table *t, const struct shl__key *k, struct shl__slot **s) SHL__SHM_FN;
/* The acquire on a slot already found (kind_shm/lease.c), for the by-name
 * acquire and a bound lease's: arguments checked, owner is olen bytes, same
 * results as shl_acquire_ex(), and SHL__SLOT_RETIRED when repair retired s
 * (index.c). A bound lease then follows the name to the slot that kept it
 * and acquires there (kind_shm/bound.c, out of line: the fast path keeps a
 * small frame); by name, the lookup finds it. */
#define SHL__SLOT_RETIRED 1
int shl__shm_acquire_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                        uint64_t ttl_ns, uint64_t *token, shl_lease_info *holder) SHL__SHM_FN;
int shl__shm_lease_acquire_moved(shl_lease *l, struct shl__slot *s, uint64_t ttl_ns,
                                 uint64_t *token, shl_lease_info *holder)
    __attribute__((cold)) SHL__SHM_FN;
/* The read of the slot *sp (kind_shm/read.c): a bound lease's, and the
 * by-name read's once it found the slot. It reads *sp itself, once, and
 * moves it when repair retired that slot (see shl__follow()). */
int shl__shm_read_at(shl_table *t, struct shl__slot **sp, void *buf, size_t cap, size_t *len,
                     uint64_t *token) SHL__SHM_FN;
/* The holder's operations on a slot already found (kind_shm/lease.c), for
 * the by-name calls and the bound leases: arguments checked, owner is olen
 * bytes, same results as the public functions. The caller read s from *sp
 * (sp NULL: from nowhere to update); a slot that repair retired meanwhile
 * is followed to the one that kept the name, where the operation is made,
 * as by name, and *sp names that slot from then on. */
int shl__shm_renew_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, uint64_t ttl_ns, struct shl__slot **sp) SHL__SHM_FN;
int shl__shm_release_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                        uint64_t token, struct shl__slot **sp) SHL__SHM_FN;
int shl__shm_write_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, const void *buf, size_t len,
                      struct shl__slot **sp) SHL__SHM_FN;
int shl__shm_guard_at(shl_table *t, struct shl__slot *s, const char *owner, uint32_t olen,
                      uint64_t token, shl_guard_fn fn, void *arg,
                      struct shl__slot **sp) SHL__SHM_FN;

/* lib/shared.c, lib/wait.c, lib/heartbeat.c */

/* kind_shm/shared.c: a shared acquire by name; like shl__shm_acquire(), it
 * checks its owner, ttl and token itself. */
int shl__shm_acquire_shared(shl_table *t, const char *lease, const char *owner, uint64_t ttl_ns,
                            uint64_t *token, uint64_t *gen, shl_lease_info *holder) SHL__SHM_FN;
/* kind_shm/wait.c: the waiting acquires, on the lease of key k (k->s: its
 * name, the caller's string), added if new. */
int shl__shm_wait(shl_table *t, const struct shl__key *k, const char *owner, uint32_t olen,
                  uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token) SHL__SHM_FN;
int shl__shm_shared_wait(shl_table *t, const struct shl__key *k, const char *owner, uint32_t olen,
                         uint64_t ttl_ns, uint64_t timeout_ns, uint64_t *token,
                         uint64_t *gen) SHL__SHM_FN;
/* kind_shm/heartbeat.c: the heartbeat record of the lease of key k
 * (SHL_ENOENT: no such lease). */
int shl__shm_heartbeat_get(shl_table *t, const struct shl__key *k, shl_heartbeat *hb) SHL__SHM_FN;

/* lib/read.c, lib/inspect.c, lib/check.c, lib/repair.c */

/* kind_shm/read.c: the lease's slot looked up, then read under its
 * seqlock. */
int shl__shm_read(shl_table *t, const char *lease, void *buf, size_t cap, size_t *len,
                  uint64_t *token) SHL__SHM_FN;
int shl__shm_stat(shl_table *t, const char *lease, shl_lease_info *info) SHL__SHM_FN;
/* kind_shm/inspect.c: shl_inspect() of the lease named by k. */
int shl__shm_inspect(shl_table *t, const struct shl__key *k, shl_lease_detail *d) SHL__SHM_FN;
int shl__shm_inspect_slot(shl_table *t, uint32_t slot, shl_lease_detail *d) SHL__SHM_FN;
int shl__shm_foreach(shl_table *t, int (*fn)(void *arg, const shl_lease_detail *d),
                     void *arg) SHL__SHM_FN;
/* kind_shm/check.c. shl__shm_check_image() is also repair's look at a
 * header it will not trust; shl__shm_check_name() checks the file of the
 * table named `name`, as shl__table_name() made it. */
int shl__shm_check(shl_table *t, void (*report)(void *arg, const char *problem),
                   void *arg) SHL__SHM_FN;
int shl__shm_check_image(const void *image, size_t size,
                         void (*report)(void *arg, const char *problem), void *arg) SHL__SHM_FN;
int shl__shm_check_name(const char *name, void (*report)(void *arg, const char *problem),
                        void *arg) SHL__SHM_FN;
/* kind_shm/repair.c */
int shl__shm_repair(shl_table *t, unsigned flags, void (*report)(void *arg, const char *action),
                    void *arg) SHL__SHM_FN;

/* lib/renewer.c (kind_shm/renewer_slot.c, kind_shm/heartbeat.c). The slot of a renewer's lease,
 * or NULL (a bad name, or a name not in the table); the word its thread
 * sleeps on, which every release, revoke and removal of that lease wakes;
 * a wake of it; the heartbeat record written at a renewal (`now`: the table
 * clock) and cleared at the renewer's end (only if it still names `token`);
 * whether shl_unlink() marked the table (one load), and whether the table
 * was removed by any means (its name looked at: marks it then). */
struct shl__slot *shl__shm_renewer_slot(shl_table *t, const char *lease) SHL__SHM_FN;
_Atomic uint32_t *shl__shm_renewer_wake(struct shl__slot *s) SHL__SHM_FN;
void shl__shm_renewer_poke(struct shl__slot *s) SHL__SHM_FN;
void shl__shm_renewer_beat(struct shl__slot *s, uint64_t token, uint64_t interval,
                           uint64_t now) SHL__SHM_FN;
void shl__shm_renewer_end(struct shl__slot *s, uint64_t token) SHL__SHM_FN;
int shl__shm_renewer_marked(const shl_table *t) SHL__SHM_FN;
int shl__shm_renewer_removed(const shl_table *t) SHL__SHM_FN;

#endif
