/*
 * stats.c — robust summaries and the bootstrap speedup interval
 * (src/stats/stats.h).  Timing samples are small (tens to hundreds), so
 * sorting copies is cheap and simpler than selection algorithms.
 */
#include "stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Trimmed mean of an already sorted array. */
static double trimmed_sorted(const double *v, size_t n, double trim)
{
    size_t cut = (size_t)floor(trim * (double)n);
    if (2 * cut >= n)
        cut = (n - 1) / 2;
    double sum = 0;
    for (size_t i = cut; i < n - cut; i++)
        sum += v[i];
    return sum / (double)(n - 2 * cut);
}

static int check(const double *x, size_t n, double trim, const char *what, kg_error *err)
{
    if (!x || n == 0)
        return kg_error_set(err, KG_ERR_INVALID, "%s: no samples", what);
    if (!(trim >= 0 && trim < 0.5))
        return kg_error_set(err, KG_ERR_INVALID, "%s: trim %g is not in [0, 0.5)", what, trim);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || x[i] < 0)
            return kg_error_set(err, KG_ERR_INVALID, "%s: sample %zu is %g (times must be finite and >= 0)",
                                what, i, x[i]);
    return KG_OK;
}

int kg_stats_summarize(const double *x, size_t n, double trim, kg_stats *out, kg_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = check(x, n, trim, "summary", err);
    if (rc != KG_OK)
        return rc;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    memcpy(v, x, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    out->n = n;
    out->mean = sum / (double)n;
    out->trimmed_mean = trimmed_sorted(v, n, trim);
    out->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    out->min = v[0];
    out->max = v[n - 1];
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - out->mean) * (v[i] - out->mean);
    out->stdev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    out->cv = out->mean > 0 ? out->stdev / out->mean : 0;
    free(v);
    return KG_OK;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* One bootstrap replicate's trimmed mean of x (resampled into buf). */
static double replicate(const double *x, size_t n, double trim, double *buf, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = x[xorshift(state) % n];
    qsort(buf, n, sizeof *buf, cmp_double);
    return trimmed_sorted(buf, n, trim);
}

int kg_stats_speedup(const double *reference, size_t n_reference, const double *candidate,
                     size_t n_candidate, double trim, double confidence, int resamples, uint64_t seed,
                     kg_speedup *out, kg_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = check(reference, n_reference, trim, "reference times", err);
    if (rc == KG_OK)
        rc = check(candidate, n_candidate, trim, "candidate times", err);
    if (rc != KG_OK)
        return rc;
    if (!(confidence > 0 && confidence < 1))
        return kg_error_set(err, KG_ERR_INVALID, "confidence %g is not in (0, 1)", confidence);
    if (resamples == 0)
        resamples = 2000;
    if (resamples < 10 || resamples > 1000000)
        return kg_error_set(err, KG_ERR_INVALID, "resamples %d is not in [10, 1000000]", resamples);
    kg_stats r, c;
    kg_stats_summarize(reference, n_reference, trim, &r, NULL);
    kg_stats_summarize(candidate, n_candidate, trim, &c, NULL);
    if (c.trimmed_mean <= 0)
        return kg_error_set(err, KG_ERR_INVALID, "the candidate's times are all zero: no speedup exists");
    size_t big = n_reference > n_candidate ? n_reference : n_candidate;
    double *buf = malloc(big * sizeof *buf);
    double *ratios = malloc((size_t)resamples * sizeof *ratios);
    if (!buf || !ratios) {
        free(buf);
        free(ratios);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    uint64_t state = seed ? seed : 0x9E3779B97F4A7C15ull;
    size_t kept = 0;
    for (int i = 0; i < resamples; i++) {
        double cr = replicate(candidate, n_candidate, trim, buf, &state);
        double rr = replicate(reference, n_reference, trim, buf, &state);
        if (cr > 0)
            ratios[kept++] = rr / cr;
    }
    qsort(ratios, kept, sizeof *ratios, cmp_double);
    double alpha = (1 - confidence) / 2;
    size_t lo = (size_t)floor(alpha * (double)(kept - 1));
    size_t hi = (size_t)ceil((1 - alpha) * (double)(kept - 1));
    out->speedup = r.trimmed_mean / c.trimmed_mean;
    out->low = ratios[lo];
    out->high = ratios[hi];
    out->confidence = confidence;
    out->resamples = resamples;
    free(buf);
    free(ratios);
    return KG_OK;
}
