/*
 * lib/mutation.c - the test build's deliberate bugs (see mutation.h).
 */
#include "mutation.h"

#ifdef SHL_TESTING
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
#define SHL__MUT_NAME(id, name, what) name,
    SHL__MUTATIONS(SHL__MUT_NAME)
#undef SHL__MUT_NAME
};

/* -2: not read yet; -1: none. The environment is read once: a mutation must
 * not come and go inside one process. */
static _Atomic int chosen = -2;

static int read_choice(void)
{
    const char *e = getenv("SHL_MUTATION");
    if (!e || !*e)
        return -1;
    for (int i = 0; i < SHL__MUT_COUNT; i++)
        if (strcmp(e, names[i]) == 0)
            return i;
    fprintf(stderr, "libshmlease (test build): unknown SHL_MUTATION '%s'\n", e);
    abort();
}

int shl__mutant(enum shl__mutation m)
{
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c == -2) {
        c = read_choice();
        atomic_store_explicit(&chosen, c, memory_order_relaxed);
    }
    return c == (int)m;
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int shl__mutation_unused;
#endif
