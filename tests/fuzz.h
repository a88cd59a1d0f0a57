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

/* The etcd client's response parsers (tests/etcd_fuzz.c, built with etcd
 * support): the kinds of answer, */
enum { FZ_ETCD_RANGE, FZ_ETCD_TXN, FZ_ETCD_LEASE, FZ_ETCD_STATUS, FZ_ETCD_WATCH };
/* one parse of p as an answer of `kind` (a watch: one message), *code the
 * parser's code: 0, or -1 when it broke its contract (a code it may not
 * give, an output it may not fill); */
int fz_etcd_parse(int kind, const char *p, size_t n, int *code);
/* and one fuzz input as every kind (and as a watch stream, line by line):
 * 0, or -1 when a parser broke its contract. */
int fz_etcd_one(const uint8_t *data, size_t size);

#endif
