/*
 * shm/removed.c - marking a segment removed before its name goes.
 *
 * A table's name can be removed while processes have the segment mapped
 * (shmlease rm, systemd-logind's RemoveIPC, a tmp cleaner). They keep using
 * the old segment while a new opener creates a fresh one under the name,
 * with tokens from the start: one lease, two holders, neither told. When the
 * removal goes through shl_unlink(), the segment is marked first: one word of
 * the header (`removed`, shm/layout.h) that every lease operation loads, and
 * a bump and a wake of every slot's `wake` word, so that sleepers (waiters,
 * renewers) look at once. Removals by anything else are noticed by looking
 * at the name (shl__seg_gone(), shm/segment.c).
 *
 * Only a file that starts with the table's magic word is a table: anything
 * else is refused and kept, never unlinked.
 */
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "futex.h"
#include "segment.h"

void shl__seg_mark(struct shl__hdr *h, const struct shl__geom *g, uint32_t n)
{
    atomic_store_explicit(&h->removed, SHL__REMOVED, memory_order_release);
    for (uint32_t i = 0; i < n; i++) {
        struct shl__slot *s = (struct shl__slot *)((char *)h + g->slots_off + i * g->slot_stride);
        atomic_fetch_add_explicit(&s->wake, 1, memory_order_seq_cst);
        shl__futex_wake(&s->wake, INT_MAX);
    }
}

int shl__seg_mark_removed(int fd, const struct stat *st)
{
    struct shl__hdr head;
    /* The magic word alone says "a table" (in either byte order: another
     * host's, shared through a volume); the rest may be damaged. */
    uint64_t magic;
    if (pread(fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic ||
        (magic != SHL__MAGIC && magic != __builtin_bswap64(SHL__MAGIC)))
        return SHL__SHM_ECORRUPT;
    if ((uint64_t)st->st_size < sizeof head ||
        pread(fd, &head, sizeof head, 0) != (ssize_t)sizeof head || head.magic != SHL__MAGIC)
        return 0; /* a damaged or foreign table: removed unmarked */
    if (head.format != shl__format_word())
        return 0; /* another build's table: it would not look at the mark */
    size_t size = (size_t)st->st_size;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return 0; /* a table all the same (too large to map here?): removed unmarked */
    int addressable = 0;
    struct shl__hdr *h = p;
    struct shl__geom g;
    if (shl__seg_check_header(p, size, SHL__UID_ANY, NULL, NULL, &addressable) == 0 &&
        addressable && shl__geom_of(h, &g) == 0) {
        uint32_t n = atomic_load_explicit(&h->nslots, memory_order_acquire);
        shl__seg_mark(h, &g, n < h->capacity ? n : h->capacity);
    }
    munmap(p, size);
    return 0;
}
