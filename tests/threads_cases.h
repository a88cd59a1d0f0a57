/*
 * tests/threads_cases.h - threaded cases, shared by the criterion suite and
 * the ThreadSanitizer runner. Each returns NULL on success or what failed.
 */
#ifndef SHL_TESTS_THREADS_CASES_H
#define SHL_TESTS_THREADS_CASES_H

#include "run_mark.h"
#include "shmlease.h"

/* A new table of 8 leases of value_size bytes, named after `tag` into
 * name (cap bytes); NULL when it cannot be made. */
shl_table *tc_create(char *name, size_t cap, const char *tag, uint32_t value_size);

const char *tc_eight_threads_one_handle(void);
const char *tc_seqlock_readers_see_whole_values(void);
/* tests/threads_renewer.c */
const char *tc_renewer_keeps_lease_10x_ttl(void);
const char *tc_renewer_loss_reported_once_each_way(void);
const char *tc_renewer_refusal_reported(void);
const char *tc_renewer_refuses_bad_arguments(void);
const char *tc_fence_admit_race(void); /* tests/threads_fence.c */
/* tests/threads_inspect.c */
const char *tc_inspector_reads_while_writers_work(void);
const char *tc_repair_while_names_are_added(void); /* tests/threads_repair.c */
/* tests/threads_twins.c */
const char *tc_bound_lease_shared_by_threads_follows_the_name(void);

#define THREAD_CASES(X)                                                                            \
    X(eight_threads_one_handle)                                                                    \
    X(seqlock_readers_see_whole_values)                                                            \
    X(renewer_keeps_lease_10x_ttl)                                                                 \
    X(renewer_loss_reported_once_each_way)                                                         \
    X(renewer_refusal_reported)                                                                    \
    X(renewer_refuses_bad_arguments)                                                               \
    X(fence_admit_race)                                                                            \
    X(inspector_reads_while_writers_work)                                                          \
    X(repair_while_names_are_added)                                                                \
    X(bound_lease_shared_by_threads_follows_the_name)

#endif
