/*
 * tests/threads_twins.c - one bound lease, shared by threads, whose slot
 * repair retires while they read through it. Plain C (see
 * tests/threads_cases.c): run by criterion in make test and under
 * ThreadSanitizer in make check, where a race on the bound lease's slot
 * (each thread that meets the retirement stores the slot that kept the
 * name) or between the retirement and the lock-free readers is reported.
 *
 * Every read gives the retired slot's value (before the retirement) or the
 * keeper's (after it), whole, and once a thread has seen the keeper's it
 * never sees the other again.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kind_shm/shm_kind.h" /* to plant the twin: an emptied bucket */
#include "threads_cases.h"

#define HOUR      (UINT64_C(3600000000000))
#define READERS   4
#define AFTER     2000     /* reads each thread makes once it saw the keeper's value */
#define MAX_READS 5000000u /* the repair is long done by then (about a second) */

struct shared {
    shl_lease *bl;
    _Atomic int bad;
    char first[160];
};

static void *reader(void *arg)
{
    struct shared *s = arg;
    int moved = 0;
    unsigned after = 0;
    for (unsigned n = 0; after < AFTER; n++) {
        if (n == MAX_READS) {
            if (atomic_fetch_add(&s->bad, 1) == 0)
                snprintf(s->first, sizeof s->first, "%u reads, none gave the keeper's value",
                         MAX_READS);
            break;
        }
        char buf[16];
        size_t len = 0;
        uint64_t tok = 0;
        int rc = shl_lease_read(s->bl, buf, sizeof buf, &len, &tok);
        int old = rc == SHL_OK && len == 3 && memcmp(buf, "old", 3) == 0 && tok == 1;
        int now = rc == SHL_OK && len == 3 && memcmp(buf, "new", 3) == 0 && tok == 2;
        if ((!old && !now) || (old && moved)) {
            if (atomic_fetch_add(&s->bad, 1) == 0)
                snprintf(s->first, sizeof s->first, "read rc %d, %.*s token %llu%s", rc,
                         (int)(len < sizeof buf ? len : 0), buf, (unsigned long long)tok,
                         moved ? " after the keeper's value" : "");
            break;
        }
        moved |= now;
        after += moved;
    }
    return NULL;
}

const char *tc_bound_lease_shared_by_threads_follows_the_name(void)
{
    static char msg[256];
    char name[96];
    shl_table *t = tc_create(name, sizeof name, "thtwin", 16);
    if (!t)
        return "cannot create the table";
    struct shared s = {NULL, 0, ""};
    const char *err = NULL;
    uint64_t tok;
    struct shl__key k;
    uint32_t at;
    if (shl_lease_open(t, "L", "b", &s.bl) != SHL_OK ||
        shl_lease_acquire(s.bl, HOUR, &tok, NULL) != SHL_OK ||
        shl_lease_write(s.bl, tok, "old", 3) != SHL_OK || shl_lease_release(s.bl, tok) != SHL_OK ||
        shl__key_lease("L", &k) != SHL_OK || !shl__probe(t, &k, shl__tnslots(t), &at)) {
        err = "cannot set up L";
        goto out;
    }
    /* L's bucket emptied: the next acquire adds a twin, which issues token 2
     * and so keeps the name, held by the bound lease's owner. */
    atomic_store(&shl__tindex(t)[at], 0);
    shl__nc_forget();
    if (shl_acquire(t, "L", "b", HOUR, &tok) != SHL_OK || shl_release(t, "L", "b", tok) != SHL_OK ||
        shl_acquire(t, "L", "b", HOUR, &tok) != SHL_OK || tok != 2 ||
        shl_write(t, "L", "b", tok, "new", 3) != SHL_OK) {
        err = "cannot plant the twin";
        goto out;
    }
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        pthread_create(&th[i], NULL, reader, &s);
    if (shl_repair(t, 0, NULL, NULL) != SHL_OK)
        err = "repair failed";
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    if (!err && atomic_load(&s.bad))
        err = s.first;
    if (!err && shl_lease_renew(s.bl, tok, HOUR) != SHL_OK)
        err = "the bound lease does not renew the name's holder";
out:
    shl_lease_close(s.bl);
    shl_close(t);
    shl_unlink(name);
    if (err) {
        snprintf(msg, sizeof msg, "bound lease on a retired slot: %s", err);
        return msg;
    }
    return NULL;
}
