/*
 * tests/test_threads.c - the threaded cases (tests/threads_cases.c) as
 * criterion tests.
 */
#include <criterion/criterion.h>

#include "common.h"
#include "threads_cases.h"

#define AS_TEST(name)                                                                              \
    Test(threads, name)                                                                            \
    {                                                                                              \
        t_guard(120);                                                                              \
        const char *err = tc_##name();                                                             \
        cr_assert_null(err, "%s", err ? err : "");                                                 \
    }
THREAD_CASES(AS_TEST)
