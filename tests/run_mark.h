/*
 * tests/run_mark.h - the mark of this test run in the names of what it
 * creates. `make test` sets SHL_TEST_RUN to a value of its own and, at the
 * end, fails naming every /dev/shm entry that carries it: a test that leaves
 * a segment behind is found, and never one of another run going on at the
 * same time on the machine.
 */
#ifndef SHL_TESTS_RUN_MARK_H
#define SHL_TESTS_RUN_MARK_H

#include <stdlib.h>

/* "<mark>-" under make test, "" otherwise: put it before a name's tag. */
static inline const char *t_run_mark(void)
{
    static __thread char buf[40];
    const char *r = getenv("SHL_TEST_RUN");
    if (!r || !*r || __builtin_strlen(r) > 32)
        return "";
    if (!buf[0]) {
        size_t n = __builtin_strlen(r);
        __builtin_memcpy(buf, r, n);
        buf[n] = '-';
        buf[n + 1] = '\0';
    }
    return buf;
}

#endif
