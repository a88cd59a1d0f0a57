/*
 * tests/fuzz/fuzz_etcd.c - libFuzzer target: arbitrary bytes as every kind
 * of etcd answer and as a watch stream, through the client's parsers
 * (tests/etcd_fuzz.c). Built and run by `make fuzz` when the library is
 * built with etcd support; its seeds (tests/corpus-etcd/, real answers of
 * etcd 3.4) are replayed by `make test`.
 */
#include <stdlib.h>

#include "../fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_etcd_one(data, size) != 0)
        abort();
    return 0;
}
