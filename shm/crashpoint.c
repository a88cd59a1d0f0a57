/*
 * shm/crashpoint.c - the test build's crash points (see crashpoint.h).
 */
#include "crashpoint.h"

#ifdef SHL_TESTING
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Armed through the environment so that a forked or exec'd child can be told
 * where to die: SHL_CRASHPOINT=<id>[:<hits>] dies on the <hits>-th pass;
 * SHL_CRASHPOINT=<id>:<hits>:stop stops there instead (SIGSTOP). */
static _Atomic int crash_id = -2;
static _Atomic int crash_left;
static _Atomic int crash_sig = SIGKILL;

/* A child arms its crash point after fork(), when its parent may already have
 * read (and cached) an unarmed environment: read it again in every child. */
static void crash_rearm(void)
{
    atomic_store(&crash_id, -2);
}

void shl__crashpoint_reset(void)
{
    crash_rearm();
}

__attribute__((constructor)) static void crash_at_fork(void)
{
    pthread_atfork(NULL, NULL, crash_rearm);
}

void shl__crashpoint(int id)
{
    int want = atomic_load_explicit(&crash_id, memory_order_relaxed);
    if (want == -2) {
        const char *e = getenv("SHL_CRASHPOINT");
        char *end = NULL;
        want = e ? (int)strtol(e, &end, 10) : -1;
        int hits = 1;
        if (end && *end == ':') {
            hits = (int)strtol(end + 1, &end, 10);
            atomic_store(&crash_sig, strcmp(end, ":stop") == 0 ? SIGSTOP : SIGKILL);
        }
        atomic_store(&crash_left, hits > 0 ? hits : 1);
        atomic_store(&crash_id, want);
    }
    if (want != id)
        return;
    if (atomic_fetch_sub(&crash_left, 1) == 1)
        raise(atomic_load(&crash_sig));
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int shl__crashpoint_unused;
#endif
