/*
 * lib/handle.c - what every table handle is given when it is made, whatever
 * its kind: the fork generation it belongs to (a child refuses a handle made
 * before its fork, SHL_EFORK) and a serial number (the name cache tells
 * handles apart by it).
 */
#include <pthread.h>

#include "internal.h"

_Atomic unsigned shl__fork_gen;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    atomic_fetch_add_explicit(&shl__fork_gen, 1, memory_order_relaxed);
}

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

void shl__handle_watch_forks(void)
{
    pthread_once(&fork_once, register_fork_handler);
}

void shl__handle_stamp(shl_table *t)
{
    /* Serial numbers start at 1: 0 marks an empty name-cache entry. */
    static _Atomic uint64_t last;
    t->fork_gen = atomic_load(&shl__fork_gen);
    t->serial = atomic_fetch_add_explicit(&last, 1, memory_order_relaxed) + 1;
}
