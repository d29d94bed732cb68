/*
 * stats/stats.h — (internal) the statistics behind kgym's timing figures: robust
 * summaries of per-call times and a confidence interval for a speedup.
 *
 * The harness only reports raw per-call milliseconds; every number derived
 * from them is computed here, in C, reproducibly (the bootstrap draws from a
 * caller-given seed).  Arrays in, structs out; nothing is allocated for the
 * caller and there is no global state.
 */
#ifndef KGYM_STATS_H
#define KGYM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "kgym/error.h"

typedef struct kg_stats {
    size_t n;
    double mean;
    double trimmed_mean; /* mean of the middle values: `trim` of each end dropped */
    double median;
    double min, max;
    double stdev;        /* sample standard deviation (n - 1) */
    double cv;           /* stdev / mean; 0 when mean is 0 */
} kg_stats;

/* Summarises x[0..n): trim is the share dropped at EACH end for the trimmed
 * mean (0.1 = 10%, must be in [0, 0.5)).  KG_ERR_INVALID for n == 0, a bad
 * trim, or a non-finite or negative value (a time cannot be negative). */
int kg_stats_summarize(const double *x, size_t n, double trim, kg_stats *out, kg_error *err);

typedef struct kg_speedup {
    double speedup;  /* trimmed_mean(reference) / trimmed_mean(candidate) */
    double low, high;/* the confidence interval (percentile bootstrap) */
    double confidence;
    int resamples;
} kg_speedup;

/* Speedup of the candidate over the reference with a percentile-bootstrap
 * confidence interval: both samples are resampled independently `resamples`
 * times (default 2000 when 0) with a xorshift generator seeded by `seed`, and
 * the ratio of trimmed means is taken each time.  confidence in (0, 1). */
int kg_stats_speedup(const double *reference, size_t n_reference, const double *candidate,
                     size_t n_candidate, double trim, double confidence, int resamples, uint64_t seed,
                     kg_speedup *out, kg_error *err);

#endif
