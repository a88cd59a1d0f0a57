/*
 * tests/threads_cases.h - threaded cases, shared by the criterion suite and
 * the ThreadSanitizer runner. Each returns NULL on success or what failed.
 */
#ifndef SHL_TESTS_THREADS_CASES_H
#define SHL_TESTS_THREADS_CASES_H

#include "shmlease.h"

const char *tc_eight_threads_one_handle(void);
const char *tc_seqlock_readers_see_whole_values(void);

#define THREAD_CASES(X)                                                                        \
    X(eight_threads_one_handle)                                                                \
    X(seqlock_readers_see_whole_values)

#endif
