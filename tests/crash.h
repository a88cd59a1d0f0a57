/*
 * tests/crash.h - helpers for crash, orphan, check and repair tests.
 */
#ifndef SHL_TESTS_CRASH_H
#define SHL_TESTS_CRASH_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define C_VALUE_SIZE 128
#define C_GENS       4
/* Each generation of a value has its own length and bytes, so a value that
 * mixes two generations matches none. */
static inline uint32_t c_gen_len(unsigned gen)
{
    return 16u + 24u * gen;
} /* <= C_VALUE_SIZE */

void c_fill(unsigned char *buf, uint32_t len, unsigned gen);
/* The generation that buf holds whole, or -1 when it is torn or foreign. */
int c_value_gen(const unsigned char *buf, size_t len);
/* The generation of the lease's value: 0 if never written, -1 if torn. */
int c_read_gen(shl_table *t, const char *lease);
int c_write_gen(shl_table *t, const char *lease, const char *owner, uint64_t token, unsigned gen);

/* Arms crash point `cp` in this process (dies on its hits-th pass). */
void c_arm(int cp, int hits);

/* Forks a child that opens `table`, arms `cp` and runs op(t, arg); returns
 * its status (128 + 9 when it died at the crash point). */
int c_die_at(const char *table, int cp, int hits, int (*op)(shl_table *t, void *arg), void *arg);

#define C_MAX_PROBLEMS 32
struct c_problems {
    unsigned n;
    char line[C_MAX_PROBLEMS][320];
};
int c_check(shl_table *t, struct c_problems *p);
int c_check_image(const void *img, size_t size, struct c_problems *p);
int c_repair(shl_table *t, unsigned flags, struct c_problems *p);
int c_has(const struct c_problems *p, const char *needle);
/* The end of a test's table: check finds nothing wrong, then it is closed
 * and its name removed. */
void c_done(shl_table *t, const char *name);

/* The mapped segment of a table and its size (white-box corruption tests). */
void *c_segment(shl_table *t, size_t *size);
size_t c_segment_size(shl_table *t);

#endif
