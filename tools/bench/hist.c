/*
 * tools/bench/hist.c - latency histograms for the forked rows.
 */
#include "bench.h"

void bench_hist_add(struct bench_hist *h, uint64_t ns)
{
    h->n++;
    if (ns / 4 < BENCH_HIST_LIN) {
        h->lin[ns / 4]++;
        return;
    }
    int b = 63 - __builtin_clzll(ns);
    h->log[b < BENCH_HIST_LOG ? b : BENCH_HIST_LOG - 1]++;
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *h)
{
    for (int i = 0; i < BENCH_HIST_LIN; i++)
        into->lin[i] += h->lin[i];
    for (int i = 0; i < BENCH_HIST_LOG; i++)
        into->log[i] += h->log[i];
    into->n += h->n;
}

/* The value below which pct percent of the samples fall (bucket midpoint). */
double bench_hist_pct(const struct bench_hist *h, double pct)
{
    if (h->n == 0)
        return 0;
    uint64_t want = (uint64_t)((double)h->n * pct / 100.0);
    uint64_t seen = 0;
    for (int i = 0; i < BENCH_HIST_LIN; i++) {
        seen += h->lin[i];
        if (seen > want)
            return i * 4.0 + 2.0;
    }
    for (int i = 0; i < BENCH_HIST_LOG; i++) {
        seen += h->log[i];
        if (seen > want)
            return (double)(UINT64_C(3) << i) / 2.0;
    }
    return (double)(UINT64_C(1) << (BENCH_HIST_LOG - 1));
}
