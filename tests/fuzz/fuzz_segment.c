/*
 * tests/fuzz/fuzz_segment.c - libFuzzer target: arbitrary bytes as a segment
 * for shl_check_image(), shl_open() validation, shl_check() and inspection.
 * Built and run by `make fuzz`; its corpus (tests/corpus/) is replayed by
 * `make test`.
 */
#include <stdlib.h>

#include "../fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_one(data, size) != 0)
        abort();
    return 0;
}
