/*
 * tools/bench/report.h - the benchmark's output: terminal table, targets,
 * CSV, JSON, the contention data and its plot.
 */
#ifndef SHL_BENCH_REPORT_H
#define SHL_BENCH_REPORT_H

#include "bench.h"

struct report {
    struct bench_row *rows;
    int nrows;
    struct bench_note *notes;
    int nnotes;
    int rounds;
    const char *out; /* output directory */
};

/* Prints the report and writes the files; 0, or 1 if a file failed. */
int report_write(const struct report *rep);

#endif
