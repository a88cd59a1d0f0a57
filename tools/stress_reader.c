/*
 * tools/stress_reader.c - a reader process of `shmlease stress`.
 *
 * Reads the leases' values lock-free (shl_read()) while the workers write
 * them, as fast as it can: every value it sees must be one whole write (its
 * seal matches), carry the token shl_read() names, and, per lease, no value
 * may be older than one it saw before. A library that writes a value where a
 * reader can be copying it is caught here, not only after a crash (and a
 * writer stopped half-way through its copy is seen for as long as it stays
 * stopped).
 */
#include <stdlib.h>
#include <unistd.h>

#include "stress.h"

void st_reader_main(const struct st_config *c, struct st_shared *sh, unsigned id)
{
    shl_table *t;
    uint64_t *seen = calloc(sh->leases, sizeof *seen);
    char(*names)[ST_LEASE_NAME] = calloc(sh->leases, sizeof *names);
    if (!seen || !names || shl_open(c->table, NULL, &t) != SHL_OK) {
        atomic_fetch_add(&sh->reader_errors, 1);
        _exit(3);
    }
    for (unsigned i = 0; i < sh->leases; i++)
        st_lease_name(i, names[i]);
    uint64_t rng = c->seed ^ UINT64_C(0x72656164) ^ ((uint64_t)id << 32);
    for (uint64_t n = 1; !atomic_load_explicit(&sh->stop, memory_order_relaxed); n++) {
        if (n % 16 == 0)
            st_sleep_ns(50000); /* leave the workers some of a small machine */
        unsigned l = (unsigned)(st_rand(&rng) % sh->leases);
        uint64_t v[ST_VALUE_WORDS];
        size_t len = 0;
        uint64_t vtok = 0;
        unsigned words = sh->value_words;
        int rc = shl_read(t, names[l], v, words * 8, &len, &vtok);
        if (rc == SHL_ENOENT)
            continue;
        if (rc == SHL_EUNAVAIL && c->etcd) { /* a member away: counted, not an error */
            atomic_fetch_add(&sh->unavail, 1);
            continue;
        }
        if (rc != SHL_OK) {
            atomic_fetch_add(&sh->reader_errors, 1);
            continue;
        }
        atomic_fetch_add_explicit(&sh->reads, 1, memory_order_relaxed);
        if (len == 0 && vtok == 0)
            continue;
        struct st_rec r;
        if (len != words * 8 || st_value_parse(v, words, &r) != 0 || r.token != vtok ||
            r.lease != l || vtok < seen[l])
            atomic_fetch_add(&sh->torn, 1);
        else
            seen[l] = vtok;
    }
    shl_close(t);
    free(seen);
    free(names);
    _exit(0);
}
