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
    const char *out;    /* output directory */
    const char *before; /* NULL, or an earlier run's results.csv */
};

/* Prints the report and writes the files; 0, or 1 if a file failed. */
int report_write(const struct report *rep);

/* The median ns/op of a row of this run; 0 when it has none. */
double report_median(const struct report *rep, const char *group, const char *name);

/* Compares the bound and by-name rows with an earlier run's results.csv
 * (before.c); 0, or 1 when the file cannot be read. */
int report_before(const struct report *rep, const char *csv);

#endif
