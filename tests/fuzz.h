/*
 * tests/fuzz.h - the fuzz body shared by `make fuzz` and the corpus replay.
 */
#ifndef SHL_TESTS_FUZZ_H
#define SHL_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Runs one input through the image check, then opens a private copy of it
 * as a table and uses it (reads, inspection, lease operations, check,
 * repair). 0, or -1 when a function broke its contract (a crash is the
 * fuzzer's to see). */
int fz_one(const uint8_t *data, size_t size);

#endif
