/*
 * lib/internal.h - what the library's files share, whatever the kind of
 * table: the handle, the bound lease, the argument checks and refusal
 * details, names, and the problem lines of a check. Not installed. The shared-memory kind's own
 * internals are in kind_shm/shm_kind.h, the etcd kind's in
 * kind_etcd/etcd_kind.h; the operations the entry points call on each kind
 * are declared in kind.h.
 *
 * Names: shl_ public, shl__ internal non-static, static for the rest.
 */
#ifndef SHL_LIB_INTERNAL_H
#define SHL_LIB_INTERNAL_H

#include <stdatomic.h>
#include <string.h>

#include "../shm/segment.h"
#include "kind.h"
#include "mutation.h"
#include "shmlease.h"
#include "scan.h"

#define SHL__HIDDEN __attribute__((visibility("hidden")))
/* For the small helpers of the acquire's hot path. */
#define SHL__ALWAYS_INLINE static inline __attribute__((always_inline))

/* Who this handle is in the records it writes. */
struct shl__self {
    int32_t pid;   /* getpid() at open: display only (a handle is refused after fork) */
    uint64_t live; /* alive id, its OFD lock held on `fd` (shm/alive.h); 0: none */
};

struct shl_table {
    struct shl__hdr *hdr; /* NULL for an etcd table */
    size_t size;
    int fd;                 /* the segment's file, open for the handle's lifetime */
    unsigned kind;          /* SHL__KIND_*: tested at the entry of every public call */
    struct shl__etcd *etcd; /* the etcd kind's state (kind.h), else NULL */
    /* Geometry, copied at open from the validated header and never re-read
     * from shared memory: a stray write into the header cannot move an
     * offset or a bound the library uses (see the shl__t* accessors). */
    struct shl__geom geom;
    uint32_t capacity;
    uint32_t clock;
    uint32_t value_size;
    unsigned fork_gen;    /* shl__fork_gen when opened */
    uint64_t serial;      /* unique among this process's handles (name_cache.h) */
    uint64_t token_floor; /* hdr->token_floor: tokens start above it */
    uint64_t token_limit; /* the highest token this table may issue */
    int created;
    struct shl__self self;
    _Atomic uint32_t wait_nonce; /* last nonce given to a waiting call (kind_shm/wait.c) */
    /* The last holder a refused acquire proved alive, and when (orphan.c). */
    _Atomic uint64_t alive_memo_live, alive_memo_at;
    char name[SHL_TABLE_NAME_MAX + 1];
};

/* lib/handle.c. Bumped in every child after fork(): a handle from before
 * is refused. */
extern _Atomic unsigned shl__fork_gen SHL__HIDDEN;
/* Counts forks from now on (once per process; before a handle is made). */
void shl__handle_watch_forks(void) SHL__HIDDEN;
/* Gives a new handle its fork generation and its serial number. */
void shl__handle_stamp(shl_table *t) SHL__HIDDEN;

/* Whether this process is a child forked since `gen` was read: what a
 * handle, and everything made from one (bound leases, renewers), records
 * when it is made. */
static inline int shl__forked(unsigned gen)
{
    return gen != atomic_load_explicit(&shl__fork_gen, memory_order_relaxed);
}

#define SHL__CHECK_HANDLE(t)                                                                       \
    do {                                                                                           \
        if (!(t))                                                                                  \
            return SHL_EINVAL;                                                                     \
        if (shl__forked((t)->fork_gen))                                                            \
            return SHL_EFORK;                                                                      \
    } while (0)

/* A bound lease (lib/bound.c): a lease name and an owner resolved once.
 * Both halves of its calls read it: the entry points test the kind by `s`
 * and hand the shared-memory kind's slot on (kind_shm/bound.c). */
struct shl_lease {
    shl_table *t;
    /* NULL on an etcd table: the calls go by name. Loaded with
     * shl__slot_in() and stored as shl__follow() does (kind_shm/index.c):
     * the threads sharing the lease may follow a retired slot's name at
     * once, each storing the same keeper. */
    struct shl__slot *s;
    unsigned fork_gen; /* the handle's: a child's copy refuses even after shl_close() */
    uint32_t olen;
    char owner[SHL_OWNER_MAX + 1];
    char name[SHL_NAME_MAX + 1];
};

/* A slot pointer that other threads may store (a bound lease's), loaded
 * once: see shl__follow(). */
static inline struct shl__slot *shl__slot_in(struct shl__slot *const *sp)
{
    return __atomic_load_n(sp, __ATOMIC_RELAXED);
}

/* Validated name: its length and hash, computed in one pass. */
struct shl__key {
    const char *s;
    uint32_t len;
    uint64_t hash;
};

/* lib/problem.c: a check's problems, counted, each handed to `fn` (if any) as
 * one line of text. Shared by the checks of both kinds of table. */
struct shl__problems {
    void (*fn)(void *arg, const char *problem);
    void *arg;
    unsigned count;
};
void shl__problem(struct shl__problems *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3))) SHL__HIDDEN;

int shl__key_lease(const char *name, struct shl__key *k) SHL__HIDDEN;

/* lib/detail.c: the refusal path's detail (shl_last_error()). Each sets it
 * and returns its code (the others SHL_EINVAL); cold, never on success. */
#define SHL__COLD __attribute__((cold, noinline)) SHL__HIDDEN
int shl__fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3))) SHL__COLD;
int shl__bad_lease(const char *name) SHL__COLD;
int shl__bad_ttl(const char *what, uint64_t ttl_ns) SHL__COLD;
int shl__bad_table_name(const char *name) SHL__COLD;
int shl__bad_token(void) SHL__COLD;
int shl__bad_acquire(const char *owner, uint64_t ttl_ns, const uint64_t *token) SHL__COLD;
/* wyhash 4.1 with its default secret (names.c); a lease name's hash is
 * shl__wyhash(name, len, 0). */
uint64_t shl__wyhash(const void *key, size_t len, uint64_t seed) SHL__HIDDEN;
/* shl__owner_len(): scan.h, inline. */
/* The arguments of an acquire, as both kinds check them: the owner (its
 * length into *olen), the ttl, where the token goes. */
static inline int shl__acquire_args(const char *owner, uint64_t ttl_ns, const uint64_t *token,
                                    uint32_t *olen)
{
    if (shl__owner_len(owner, olen) != SHL_OK || ttl_ns == 0 || !token)
        return shl__bad_acquire(owner, ttl_ns, token);
    return SHL_OK;
}

/* The holder's arguments of renew, release, write, update and guard, as
 * both kinds check them: the owner (its length into *olen), then the
 * token. */
static inline int shl__holder_args(const char *owner, uint64_t token, uint32_t *olen)
{
    if (shl__owner_len(owner, olen) != SHL_OK)
        return SHL_EINVAL;
    if (token == 0)
        return shl__bad_token();
    return SHL_OK;
}

int shl__table_name(const char *in, char *out) SHL__HIDDEN;
int shl__from_shm(int rc) SHL__HIDDEN;

#endif
