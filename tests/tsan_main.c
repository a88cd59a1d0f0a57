/*
 * tests/tsan_main.c - runs the threaded cases without criterion, for the
 * ThreadSanitizer build (make check). TSAN_OPTIONS=halt_on_error=1 makes any
 * reported race fail the run.
 */
#include <stdio.h>

#include "threads_cases.h"

int main(void)
{
    int passed = 0, failed = 0;
#define RUN(name)                                                                                  \
    do {                                                                                           \
        const char *err = tc_##name();                                                             \
        printf("[%s] threads::%s%s%s\n", err ? "FAIL" : "PASS", #name, err ? ": " : "",            \
               err ? err : "");                                                                    \
        err ? failed++ : passed++;                                                                 \
    } while (0);
    THREAD_CASES(RUN)
    printf("tsan: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
