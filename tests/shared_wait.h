/*
 * tests/shared_wait.h - the waiting order of readers and writers, one
 * scenario run on a table of each kind (tests/helper_shared_wait.c), so
 * that both kinds are held to the same contract.
 */
#ifndef SHL_TESTS_SHARED_WAIT_H
#define SHL_TESTS_SHARED_WAIT_H

#include <stdint.h>

/* On the existing table `name` (lease "L" never used, a clock of real
 * time): a writer holds; readers R1, R2, a writer W and a reader R3 queue
 * in that order, each on a handle of its own. When the holder releases, R1
 * and R2 go in together (tokens h+1, h+2, gen h) while W, R3 and plain
 * readers stay out; W goes in (h+3) only once both readers are gone; R3
 * (h+4, gen h+3) only after W. `settle_ns`: how long "stays out" is
 * watched for. */
void t_shared_wait_order(const char *name, uint64_t settle_ns);

#endif
