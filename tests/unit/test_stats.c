/* test_stats.c — summaries and the bootstrap speedup interval (src/stats). */
#include <math.h>
#include <stdlib.h>

#include "kg_test.h"
#include "stats/stats.h"

static void summary_by_hand(void)
{
    const double x[] = {5, 1, 4, 2, 3, 100, 3, 2, 4, 1}; /* sorted: 1 1 2 2 3 3 4 4 5 100 */
    kg_stats s;
    KG_CHECK(kg_stats_summarize(x, 10, 0.1, &s, NULL) == KG_OK);
    KG_CHECK(s.n == 10);
    KG_CHECK_NEAR(s.mean, 12.5, 1e-12);
    KG_CHECK_NEAR(s.median, 3.0, 1e-12);
    KG_CHECK_NEAR(s.trimmed_mean, (1 + 2 + 2 + 3 + 3 + 4 + 4 + 5) / 8.0, 1e-12); /* one dropped each end */
    KG_CHECK_NEAR(s.min, 1, 0);
    KG_CHECK_NEAR(s.max, 100, 0);
    double ss = 0;
    for (int i = 0; i < 10; i++)
        ss += (x[i] - 12.5) * (x[i] - 12.5);
    KG_CHECK_NEAR(s.stdev, sqrt(ss / 9), 1e-12);
    KG_CHECK_NEAR(s.cv, s.stdev / 12.5, 1e-12);
    /* The trimmed mean resists the outlier; the mean does not. */
    KG_CHECK(fabs(s.trimmed_mean - 3.0) < 0.1 && s.mean > 12);
}

static void summary_edges(void)
{
    kg_stats s;
    const double one = 2.5;
    KG_CHECK(kg_stats_summarize(&one, 1, 0.1, &s, NULL) == KG_OK);
    KG_CHECK_NEAR(s.median, 2.5, 0);
    KG_CHECK_NEAR(s.trimmed_mean, 2.5, 0);
    KG_CHECK_NEAR(s.stdev, 0, 0);
    kg_error err;
    KG_CHECK(kg_stats_summarize(&one, 0, 0.1, &s, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_stats_summarize(&one, 1, 0.5, &s, &err) == KG_ERR_INVALID);
    const double bad[] = {1, NAN, 2};
    KG_CHECK(kg_stats_summarize(bad, 3, 0.1, &s, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "sample 1") != NULL);
    const double neg[] = {1, -2};
    KG_CHECK(kg_stats_summarize(neg, 2, 0, &s, &err) == KG_ERR_INVALID);
}

static double gauss(uint64_t *s)
{
    /* Box-Muller from a 64-bit LCG: test-only noise. */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    double u1 = ((*s >> 11) + 1.0) / 9007199254740993.0;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    double u2 = ((*s >> 11) + 1.0) / 9007199254740993.0;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static void speedup_interval_covers_truth(void)
{
    /* Reference 2.0 ms, candidate 1.0 ms, 5% noise: the true speedup is 2.
     * Over 100 independent experiments a 95% interval should cover it about
     * 95 times; accept 85..100 (binomial sd ~2.2). */
    uint64_t s = 12345;
    int covered = 0;
    for (int e = 0; e < 100; e++) {
        double ref[50], cand[50];
        for (int i = 0; i < 50; i++) {
            ref[i] = 2.0 * (1 + 0.05 * gauss(&s));
            cand[i] = 1.0 * (1 + 0.05 * gauss(&s));
        }
        kg_speedup sp;
        KG_CHECK(kg_stats_speedup(ref, 50, cand, 50, 0.1, 0.95, 500, (uint64_t)e + 1, &sp, NULL) == KG_OK);
        KG_CHECK(sp.low <= sp.speedup && sp.speedup <= sp.high);
        covered += sp.low <= 2.0 && 2.0 <= sp.high;
    }
    KG_CHECK(covered >= 85);
}

static void speedup_interval_width_shrinks_with_noise(void)
{
    uint64_t s = 99;
    double ref_q[100], cand_q[100], ref_n[100], cand_n[100];
    for (int i = 0; i < 100; i++) {
        double a = gauss(&s), b = gauss(&s);
        ref_q[i] = 3.0 * (1 + 0.01 * a);
        cand_q[i] = 1.5 * (1 + 0.01 * b);
        ref_n[i] = 3.0 * (1 + 0.2 * fabs(a));
        cand_n[i] = 1.5 * (1 + 0.2 * fabs(b));
    }
    kg_speedup quiet, noisy;
    KG_CHECK(kg_stats_speedup(ref_q, 100, cand_q, 100, 0.1, 0.95, 1000, 7, &quiet, NULL) == KG_OK);
    KG_CHECK(kg_stats_speedup(ref_n, 100, cand_n, 100, 0.1, 0.95, 1000, 7, &noisy, NULL) == KG_OK);
    KG_CHECK_NEAR(quiet.speedup, 2.0, 0.02);
    KG_CHECK(quiet.high - quiet.low < noisy.high - noisy.low);
    /* Same seed, same interval: reproducible. */
    kg_speedup again;
    kg_stats_speedup(ref_q, 100, cand_q, 100, 0.1, 0.95, 1000, 7, &again, NULL);
    KG_CHECK(again.low == quiet.low && again.high == quiet.high);
}

static void speedup_bad_input(void)
{
    const double a[] = {1, 2}, z[] = {0, 0};
    kg_speedup sp;
    kg_error err;
    KG_CHECK(kg_stats_speedup(a, 2, z, 2, 0.1, 0.95, 100, 1, &sp, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "zero") != NULL);
    KG_CHECK(kg_stats_speedup(a, 2, a, 2, 0.1, 1.5, 100, 1, &sp, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_stats_speedup(a, 0, a, 2, 0.1, 0.95, 100, 1, &sp, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "reference") != NULL);
    KG_CHECK(kg_stats_speedup(a, 2, a, 2, 0.1, 0.95, 3, 1, &sp, &err) == KG_ERR_INVALID);
}

static const kg_test_case cases[] = {
    {"summary_by_hand", summary_by_hand},
    {"summary_edges", summary_edges},
    {"speedup_interval_covers_truth", speedup_interval_covers_truth},
    {"speedup_interval_width_shrinks_with_noise", speedup_interval_width_shrinks_with_noise},
    {"speedup_bad_input", speedup_bad_input},
};

KG_TEST_MAIN("stats", cases)
