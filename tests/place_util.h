/*
 * tests/place_util.h - a tmpfs of the test's own, for tables at a path.
 */
#ifndef SHL_TESTS_PLACE_UTIL_H
#define SHL_TESTS_PLACE_UTIL_H

#include <stddef.h>

/* Moves the calling test process into a mount namespace of its own and
 * mounts a fresh tmpfs of `size` (e.g. "16m", mode 0700) on a new directory
 * /tmp/shlplace-XXXXXX, written to dir (cap >= 64). Skips the test when
 * this process may not mount. The mount ends with the process. */
void place_tmpfs(char *dir, size_t cap, const char *size);

/* Unmounts and removes what place_tmpfs() made (nothing when dir is ""). */
void place_cleanup(char *dir);

#endif
