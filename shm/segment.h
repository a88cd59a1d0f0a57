/*
 * shm/segment.h - create, open, validate, map and remove a segment.
 *
 * Knows the segment's layout but nothing of what a lease means. Returns 0 or a
 * negative SHL__SHM_E* code (translated to the public SHL_E* codes by lib/).
 */
#ifndef SHL_SHM_SEGMENT_H
#define SHL_SHM_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "layout.h"

/* shm's return codes, one table: each has the public code of the same name
 * (SHL_EINVAL for SHL__SHM_EINVAL, ...), which lib/error.c derives from it. */
#define SHL__SHM_ERRORS(X)                                                                         \
    X(EINVAL, -1)                                                                                  \
    X(ENOENT, -2)                                                                                  \
    X(EEXIST, -3)                                                                                  \
    X(EPERM, -4)                                                                                   \
    X(ECORRUPT, -5)                                                                                \
    X(EVERSION, -6)                                                                                \
    X(ENOSPC, -7)                                                                                  \
    X(ENOMEM, -8)                                                                                  \
    X(ESYS, -9)                                                                                    \
    X(ETIMENS, -10)                                                                                \
    X(ETIMEDOUT, -11)                                                                              \
    X(EBROKEN, -12)

enum shl__shm_err {
    SHL__SHM_OK = 0,
#define SHL__SHM_ERR_ENUM(name, code) SHL__SHM_##name = code,
    SHL__SHM_ERRORS(SHL__SHM_ERR_ENUM)
#undef SHL__SHM_ERR_ENUM
};

/* The longest segment name (without '/'), or path (with its leading '/'). */
#define SHL__SEG_NAME_MAX 200

struct shl__seg_params {
    uint32_t capacity;
    uint32_t value_size;
    uint32_t mode; /* 0600 or 0660 */
    uint32_t clock;
    uint32_t policy;
    uint32_t reclaim_delay_ms;
    uint64_t token_floor; /* copied into the header; its meaning is lib's */
    uint32_t sh_groups;   /* reader pool groups (struct shl__sh_group) */
    uint32_t wq_groups;   /* waiter pool groups (struct shl__wq_group) */
    uint32_t history;     /* events per lease, 0 .. SHL__HIST_LEN */
    uint32_t vb_count;    /* spare value buffers of the value pool */
};

struct shl__geom {
    uint64_t index_off, slots_off, slot_stride, sh_pool_off, wq_pool_off, vb_pool_off, seg_size;
    uint64_t vbuf_size; /* a value buffer's bytes (shl__vbuf_size()) */
    uint64_t vbuf_home; /* a slot's own value buffer, from the slot (shl__vbuf_home()) */
    /* The largest (slot's offset + vcur's offset) that names a whole value
     * buffer inside the segment. */
    uint64_t vlim;
    uint32_t index_size;
    uint32_t sh_groups, wq_groups, history, vb_count; /* as created (struct shl__seg_params) */
};

struct shl__seg {
    struct shl__hdr *hdr;
    size_t size;
    int fd;      /* the segment's file, open read-write; -1 when none */
    int created; /* this call initialised the segment */
};

/* Geometry of a table; SHL__SHM_EINVAL when capacity or value size is out of range. */
/* The places of everything in a segment of these parameters (capacity,
 * value size, pools, history); SHL__SHM_EINVAL when out of range. */
int shl__geom(const struct shl__seg_params *p, struct shl__geom *g);
/* The same, from a header's fields. */
int shl__geom_of(const struct shl__hdr *h, struct shl__geom *g);

/* Checks a segment image of `size` bytes: magic, format word, ready word,
 * geometry, then the plain fields (owner, clock, mode, policy, counts).
 * Reads only. `uid` is the file owner (SHL__UID_ANY: not compared). Every
 * problem found is told to `say` (NULL: none) in a sentence; the check stops
 * at the first one that leaves the rest unaddressable. 0, SHL__SHM_EVERSION
 * (another build's format) or SHL__SHM_ECORRUPT; *addressable (when
 * non-NULL) is 1 when the geometry matches the size, so that the index and
 * slots may be addressed. The one header validator: the opener and the
 * checker (lib/kind_shm/check.c) both call it. */
#define SHL__UID_ANY UINT32_MAX
typedef void (*shl__hdr_say_fn)(void *arg, const char *problem);
int shl__seg_check_header(const void *base, size_t size, uint32_t uid, shl__hdr_say_fn say,
                          void *arg, int *addressable);

/*
 * Opens the segment `name` (a name without '/', in /dev/shm; or a path
 * starting with '/': place.h), or creates it when `p` is non-NULL and it
 * does not exist. `excl`: fail with SHL__SHM_EEXIST when it exists. `max_mode`: the
 * widest permission bits accepted from an existing segment.
 */
int shl__seg_open(const char *name, const struct shl__seg_params *p, int excl, uint32_t max_mode,
                  struct shl__seg *out);
/* Unmaps and closes the file (fd -1: nothing to close). */
void shl__seg_close(struct shl__seg *s);
/* Removes the name of table `name`: its file must start with the table's
 * magic word (else SHL__SHM_ECORRUPT, and the file is kept), and it is
 * marked removed first (shl__seg_mark_removed()); the name is unlinked only
 * if it still names the file marked. SHL__SHM_ENOENT, SHL__SHM_EPERM
 * (another owner, not a regular file), SHL__SHM_EINVAL, SHL__SHM_ESYS. */
int shl__seg_unlink(const char *name);

/* removed.c: with `fd` open read-write on a file of st->st_size bytes:
 * SHL__SHM_ECORRUPT when it does not start with the table's magic word in
 * either byte order (not a table); else 0, after storing the header's
 * removed mark and waking every slot's sleepers when the segment is of this
 * build and addressable (a table of another build or byte order, or a
 * damaged one, is not marked). */
struct stat;
int shl__seg_mark_removed(int fd, const struct stat *st);
/* Stores the removed mark of segment `h` (release), then bumps and wakes
 * the `wake` word of its first n slots, found with geometry `g` (one the
 * caller validated): a sleeper that reads a bumped word sees the mark. */
void shl__seg_mark(struct shl__hdr *h, const struct shl__geom *g, uint32_t n);

/* Whether the table `name` mapped from `fd` has lost its name: the file
 * has no link left, or the name is gone or names another file now. 1 or
 * 0; 0 also when it cannot be told (a stat that fails otherwise). */
int shl__seg_gone(const char *name, int fd);

/* Unlinks `name` if it still names the file open as `fd`: finishes the
 * removal of a segment marked removed whose remover died or stalled between
 * its mark and its unlink. 0, or the unlink's error (SHL__SHM_EPERM: the
 * directory does not let this user remove it). */
int shl__seg_unlink_same(const char *name, int fd);

/* Takes the pages of slot n of the segment (`fd`, geometry g) for its
 * adder (fallocate(2)), under the table mutex, before the slot is written,
 * so that no store into it can meet a full file system (a SIGBUS): with
 * those of the slots after it up to a boundary of SHL__SLOT_TAKE bytes, so
 * that most adds make no system call. Creation took the header's, the
 * index's and the pools' (the whole file on a file system without
 * fallocate(2): then this does nothing). Slots are added in order, and an
 * adder publishes its slot only once its pages are taken: slot n lies in
 * what the adder of slot n - 1 took, or this takes it. 0, SHL__SHM_ENOSPC
 * (or SHL__SHM_ENOMEM, SHL__SHM_ESYS): then nothing need have been
 * taken. */
int shl__seg_take_slot(int fd, const struct shl__geom *g, uint32_t n);

/* The first range [*from, *to) within [off, end) of the segment's file `fd`
 * that may hold bytes other than zero: 1, or 0 when the rest of [off, end)
 * holds only zeros. A page the table has never written (fallocate(2) left
 * it unwritten, or never took it) is a hole to lseek(SEEK_DATA), so a scan
 * of a large, mostly unused region need not touch, and so clear, its
 * pages; a page swapped out counts as data. When the file system cannot
 * tell (an error other than ENXIO), the whole of [off, end) is data. */
int shl__seg_next_data(int fd, uint64_t off, uint64_t end, uint64_t *from, uint64_t *to);

/* The size of the segment that header `h` describes (its capacity and value
 * size), 0 when this build does not understand the header. */
uint64_t shl__seg_described_size(const struct shl__hdr *h);

/*
 * Reads the file of segment `name` into private memory, without mapping it
 * (a file that shrinks meanwhile cannot SIGBUS the reader) and without
 * validating it (for the inspector's check of a segment that does not open).
 * The header is read first and decides how much more: the size its geometry
 * describes, at most the file's; the header alone when it is not one this
 * build understands. So a file grown far beyond its header is not copied
 * whole. On success *copy (malloc'd, the caller frees it) holds *len bytes from the start of the
 * file, and *file_size is the file's size (what was read, if it shrank while being read).
 * SHL__SHM_ENOENT, SHL__SHM_EPERM (not a regular file), SHL__SHM_ENOMEM, SHL__SHM_ESYS.
 */
int shl__seg_read_raw(const char *name, void **copy, size_t *len, uint64_t *file_size);

/* Identity of this process's time namespace: its inode number;
 * SHL__TIMENS_NONE when the kernel provably has none (procfs mounted, no
 * ns/time entry: one CLOCK_MONOTONIC for every process); 0 when unknown (no
 * /proc). A creator records it in the header; an opener shares the table
 * only when both are known and equal, unless SHMLEASE_NO_TIMENS=1 (then
 * only two known, different ones are refused). A creator whose own is
 * unknown is refused too, without SHMLEASE_NO_TIMENS=1. */
#define SHL__TIMENS_NONE UINT64_MAX
uint64_t shl__timens_id(void);

#endif
