/*
 * tests/test_threads.c - the threaded cases (tests/threads_cases.c) as
 * criterion tests.
 */
#include <criterion/criterion.h>

#include "threads_cases.h"

#define AS_TEST(name)                                                                              \
    Test(threads, name, .timeout = 120)                                                            \
    {                                                                                              \
        const char *err = tc_##name();                                                             \
        cr_assert_null(err, "%s", err ? err : "");                                                 \
    }
THREAD_CASES(AS_TEST)
