/*
 * tests/fuzz/fuzz_segment.c - libFuzzer target: arbitrary bytes as a segment
 * for shl_check_image(), then opened as a table and used: reads, inspection,
 * lease operations, check and repair (tests/helper_fuzz.c). Built and run by
 * `make fuzz`; its seeds (tests/corpus/, made by `make corpus`) are replayed
 * by `make test`.
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
