/* test_rl_montecarlo.c — the self-inclusion bias of GRPO and its removal by
 * TRLOO, on a toy policy-gradient problem where the true gradient is known.
 *
 * Policy: softmax over K = 3 arms; arm a pays m_a + N(0, 1).  The exact
 * gradient of J(θ) = E[r] is g = Σ_a π_a m_a (e_a − π).  A group of N samples
 * gives the estimate ĝ = (1/N) Σ_i A_i (e_{a_i} − π).  We project the mean
 * estimate on g: ρ = <E ĝ, g> / |g|².  Theory (docs/rl.md): ρ_TRLOO = 1,
 * ρ_GRPO = (N−1)/N.  Bounds are 4 standard errors of the Monte Carlo mean
 * (a false failure about 1 run in 16,000), and the bias must exceed 6. */
#include "kg_test.h"
#include "kgym/rl.h"

#include <math.h>
#include <stdlib.h>

#define K 3
static const double theta[K] = {0.3, -0.2, 0.1};
static const double arm_mean[K] = {1.0, 0.0, 2.0};

static void policy(double *pi)
{
    double z = 0;
    for (int a = 0; a < K; a++)
        z += exp(theta[a]);
    for (int a = 0; a < K; a++)
        pi[a] = exp(theta[a]) / z;
}

static void true_gradient(const double *pi, double *g)
{
    double j = 0;
    for (int a = 0; a < K; a++)
        j += pi[a] * arm_mean[a];
    for (int a = 0; a < K; a++)
        g[a] = pi[a] * (arm_mean[a] - j); /* = Σ_b π_b m_b (δ_ab − π_a) */
}

static int draw_arm(kg_rng *rng, const double *pi)
{
    double u = kg_rng_uniform(rng), c = 0;
    for (int a = 0; a < K - 1; a++) {
        c += pi[a];
        if (u < c)
            return a;
    }
    return K - 1;
}

static double normal(kg_rng *rng)
{
    double u1 = 1.0 - kg_rng_uniform(rng), u2 = kg_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Running mean and standard error of the per-group projections. */
typedef struct {
    double sum, sumsq;
    size_t n;
} stat;

static void stat_add(stat *s, double x)
{
    s->sum += x;
    s->sumsq += x * x;
    s->n++;
}

static double stat_mean(const stat *s) { return s->sum / (double)s->n; }

static double stat_se(const stat *s)
{
    double m = stat_mean(s);
    return sqrt((s->sumsq / (double)s->n - m * m) / (double)(s->n - 1));
}

/* Projection of one group's gradient estimate [start, end) on g. */
static double projection(const double *adv, const int *arm, const uint8_t *mask, size_t start,
                         size_t end, size_t group_size, const double *pi, const double *g)
{
    double est[K] = {0, 0, 0}, gg = 0, dot = 0;
    for (size_t i = start; i < end; i++) {
        if (mask && !mask[i])
            continue;
        for (int a = 0; a < K; a++)
            est[a] += adv[i] * ((arm[i] == a) - pi[a]) / (double)group_size;
    }
    for (int a = 0; a < K; a++) {
        dot += est[a] * g[a];
        gg += g[a] * g[a];
    }
    return dot / gg;
}

static void check_ratio(const char *label, const stat *s, double expected, int must_be_biased)
{
    double m = stat_mean(s), se = stat_se(s);
    printf("  %-34s rho = %.4f  (expected %.4f, se %.4f)\n", label, m, expected, se);
    KG_CHECK(fabs(m - expected) < 4 * se);
    if (must_be_biased)
        KG_CHECK(1.0 - m > 6 * se); /* visibly short of the true gradient */
}

static void test_single_turn_bias(void)
{
    enum { N = 4, GROUPS = 50000, TOTAL = N * GROUPS };
    double pi[K], g[K];
    policy(pi);
    true_gradient(pi, g);
    int64_t *prompt = malloc(TOTAL * sizeof *prompt), *sample = malloc(TOTAL * sizeof *sample);
    double *reward = malloc(TOTAL * sizeof *reward), *a_gr = malloc(TOTAL * sizeof *a_gr),
           *a_tr = malloc(TOTAL * sizeof *a_tr), *a_rl = malloc(TOTAL * sizeof *a_rl);
    int *arm = malloc(TOTAL * sizeof *arm);
    KG_CHECK(prompt && sample && reward && a_gr && a_tr && a_rl && arm);
    if (!(prompt && sample && reward && a_gr && a_tr && a_rl && arm))
        goto out;
    kg_rng rng;
    kg_rng_seed(&rng, 2024);
    for (size_t i = 0; i < TOTAL; i++) {
        prompt[i] = (int64_t)(i / N);
        sample[i] = (int64_t)(i % N);
        arm[i] = draw_arm(&rng, pi);
        reward[i] = arm_mean[arm[i]] + normal(&rng);
    }
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, NULL, reward, NULL, NULL, a_gr, NULL, NULL) ==
             KG_OK);
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, NULL, reward, NULL, NULL, a_tr, NULL, NULL) ==
             KG_OK);
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_RLOO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, NULL, reward, NULL, NULL, a_rl, NULL, NULL) ==
             KG_OK);
    stat s_gr = {0, 0, 0}, s_tr = {0, 0, 0}, s_rl = {0, 0, 0};
    for (size_t grp = 0; grp < GROUPS; grp++) {
        size_t start = grp * N;
        stat_add(&s_gr, projection(a_gr, arm, NULL, start, start + N, N, pi, g));
        stat_add(&s_tr, projection(a_tr, arm, NULL, start, start + N, N, pi, g));
        stat_add(&s_rl, projection(a_rl, arm, NULL, start, start + N, N, pi, g));
    }
    check_ratio("GRPO, N=4 (self-included mean)", &s_gr, (N - 1.0) / N, 1);
    check_ratio("TRLOO, N=4 (leave-one-out)", &s_tr, 1.0, 0);
    check_ratio("RLOO, N=4", &s_rl, 1.0, 0);
out:
    free(prompt); free(sample); free(reward); free(a_gr); free(a_tr); free(a_rl); free(arm);
}

/* Two turns of groups of 8; in half of the groups only 2 samples' second
 * turns stay unmasked, so GRPO's shrinkage depends on the turn and the
 * group: (N−1)/N = 7/8 at turn 1, 1/2 or 7/8 at turn 2.  TRLOO stays 1. */
static void test_multi_turn_shrinking_groups(void)
{
    enum { N = 8, GROUPS = 16000, TOTAL = 2 * N * GROUPS };
    double pi[K], g[K];
    policy(pi);
    true_gradient(pi, g);
    int64_t *prompt = malloc(TOTAL * sizeof *prompt), *sample = malloc(TOTAL * sizeof *sample);
    int32_t *turn = malloc(TOTAL * sizeof *turn);
    double *reward = malloc(TOTAL * sizeof *reward), *a_gr = malloc(TOTAL * sizeof *a_gr),
           *a_tr = malloc(TOTAL * sizeof *a_tr);
    int *arm = malloc(TOTAL * sizeof *arm);
    uint8_t *mask = malloc(TOTAL);
    uint8_t *small = malloc(GROUPS);
    KG_CHECK(prompt && sample && turn && reward && a_gr && a_tr && arm && mask && small);
    if (!(prompt && sample && turn && reward && a_gr && a_tr && arm && mask && small))
        goto out;
    kg_rng rng;
    kg_rng_seed(&rng, 7);
    /* layout: group grp, turn t (0/1), sample j at index (2·grp + t)·N + j */
    for (size_t grp = 0; grp < GROUPS; grp++) {
        small[grp] = kg_rng_uniform(&rng) < 0.5;
        for (int t = 0; t < 2; t++) {
            for (size_t j = 0; j < N; j++) {
                size_t i = (2 * grp + (size_t)t) * N + j;
                prompt[i] = (int64_t)grp;
                sample[i] = (int64_t)j;
                turn[i] = t + 1;
                arm[i] = draw_arm(&rng, pi);
                reward[i] = arm_mean[arm[i]] + normal(&rng);
                mask[i] = t == 0 || !small[grp] || j < 2;
            }
        }
    }
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, turn, reward, mask, NULL, a_gr, NULL, NULL) ==
             KG_OK);
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, turn, reward, mask, NULL, a_tr, NULL, NULL) ==
             KG_OK);
    stat gr1 = {0, 0, 0}, tr1 = {0, 0, 0}, gr2s = {0, 0, 0}, tr2s = {0, 0, 0},
         gr2l = {0, 0, 0}, tr2l = {0, 0, 0};
    for (size_t grp = 0; grp < GROUPS; grp++) {
        size_t s1 = 2 * grp * N, s2 = (2 * grp + 1) * N, size2 = small[grp] ? 2 : N;
        stat_add(&gr1, projection(a_gr, arm, mask, s1, s1 + N, N, pi, g));
        stat_add(&tr1, projection(a_tr, arm, mask, s1, s1 + N, N, pi, g));
        stat_add(small[grp] ? &gr2s : &gr2l, projection(a_gr, arm, mask, s2, s2 + N, size2, pi, g));
        stat_add(small[grp] ? &tr2s : &tr2l, projection(a_tr, arm, mask, s2, s2 + N, size2, pi, g));
    }
    check_ratio("GRPO turn 1, N=8", &gr1, 7.0 / 8, 1);
    check_ratio("TRLOO turn 1, N=8", &tr1, 1.0, 0);
    check_ratio("GRPO turn 2, masked to N=2", &gr2s, 0.5, 1);
    check_ratio("TRLOO turn 2, masked to N=2", &tr2s, 1.0, 0);
    check_ratio("GRPO turn 2, N=8", &gr2l, 7.0 / 8, 1);
    check_ratio("TRLOO turn 2, N=8", &tr2l, 1.0, 0);
out:
    free(prompt); free(sample); free(turn); free(reward); free(a_gr); free(a_tr); free(arm);
    free(mask); free(small);
}

/* Masks that depend on the outcome, as void-turn and PRS masks do: a
 * sample with r < 1 stays in the loss with probability 0.3, one with r >= 1
 * with 0.9.  The kept-sample estimate ĝ = (1/N) Σ_i m_i A_i (e_{a_i} − π) then
 * aims at a different gradient.  With u_a = E[m r | a], v_a = E[m | a],
 * q = Σ π_a v_a (the keep rate), b* = Σ π_a u_a / q (the mean reward of kept
 * samples) and K ~ Binomial(N − 1, q) the number of kept others:
 *   ∇E[m r] = π ⊙ (u − π·u),  ∇E[m] = π ⊙ (v − π·v)
 *   TRLOO:  E ĝ = ∇E[m r] − P(K ≥ 1) b* ∇E[m]
 * because sample i's baseline (the mean of the kept others, or nothing when
 * none is kept) is independent of sample i and has mean b* given K ≥ 1.
 * That is P(kept)·∇E[r | kept] up to the (1 − q)^{N−1} chance of a singleton:
 * the gradient of the mean reward among kept samples.
 *   GRPO:   A_i = K/(K+1)·(G_i − b_i), so
 *           E ĝ = (E[K/(K+1)] + P(K = 0)) ∇E[m r] − E[K/(K+1)] b* ∇E[m]
 * which is not a fixed multiple of TRLOO's: the shrink factor is averaged
 * over the random kept-group size, and its value depends on the outcomes. */
static double std_normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static void test_outcome_dependent_masks(void)
{
    enum { N = 8, GROUPS = 40000, TOTAL = N * GROUPS };
    const double cut = 1.0, keep_low = 0.3, keep_high = 0.9;
    double pi[K], u[K], v[K], du[K], dv[K];
    policy(pi);
    double ubar = 0, vbar = 0;
    for (int a = 0; a < K; a++) {
        double z = cut - arm_mean[a], phi = exp(-z * z / 2) / sqrt(2 * M_PI), cdf = std_normal_cdf(z);
        /* E[r; r < c] = m Φ(c − m) − φ(c − m), E[r; r >= c] = m (1 − Φ) + φ */
        u[a] = keep_low * (arm_mean[a] * cdf - phi) + keep_high * (arm_mean[a] * (1 - cdf) + phi);
        v[a] = keep_low * cdf + keep_high * (1 - cdf);
        ubar += pi[a] * u[a];
        vbar += pi[a] * v[a];
    }
    for (int a = 0; a < K; a++) {
        du[a] = pi[a] * (u[a] - ubar);
        dv[a] = pi[a] * (v[a] - vbar);
    }
    double q = vbar, bstar = ubar / vbar, p_none = pow(1 - q, N - 1), shrink = 0;
    for (int k = 0; k < N; k++) { /* E[K/(K+1)], K ~ Binomial(N − 1, q) */
        double pk = tgamma(N) / (tgamma(k + 1) * tgamma(N - k)) * pow(q, k) * pow(1 - q, N - 1 - k);
        shrink += pk * k / (k + 1.0);
    }
    double g_tr[K], g_gr[K], gg = 0, dot_gr = 0;
    for (int a = 0; a < K; a++) {
        g_tr[a] = du[a] - (1 - p_none) * bstar * dv[a];
        g_gr[a] = (shrink + p_none) * du[a] - shrink * bstar * dv[a];
        gg += g_tr[a] * g_tr[a];
        dot_gr += g_gr[a] * g_tr[a];
    }
    double want_gr = dot_gr / gg;
    printf("  keep rate q = %.4f, kept mean reward b* = %.4f, E[K/(K+1)] = %.4f\n", q, bstar,
           shrink);

    int64_t *prompt = malloc(TOTAL * sizeof *prompt), *sample = malloc(TOTAL * sizeof *sample);
    double *reward = malloc(TOTAL * sizeof *reward), *a_gr = malloc(TOTAL * sizeof *a_gr),
           *a_tr = malloc(TOTAL * sizeof *a_tr);
    int *arm = malloc(TOTAL * sizeof *arm);
    uint8_t *mask = malloc(TOTAL);
    KG_CHECK(prompt && sample && reward && a_gr && a_tr && arm && mask);
    if (!(prompt && sample && reward && a_gr && a_tr && arm && mask))
        goto out;
    kg_rng rng;
    kg_rng_seed(&rng, 15);
    for (size_t i = 0; i < TOTAL; i++) {
        prompt[i] = (int64_t)(i / N);
        sample[i] = (int64_t)(i % N);
        arm[i] = draw_arm(&rng, pi);
        reward[i] = arm_mean[arm[i]] + normal(&rng);
        mask[i] = kg_rng_uniform(&rng) < (reward[i] < cut ? keep_low : keep_high);
    }
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, NULL, reward, mask, NULL, a_gr, NULL,
                           NULL) == KG_OK);
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_advantages(&cfg, TOTAL, prompt, sample, NULL, reward, mask, NULL, a_tr, NULL,
                           NULL) == KG_OK);
    stat s_gr = {0, 0, 0}, s_tr = {0, 0, 0};
    for (size_t grp = 0; grp < GROUPS; grp++) {
        size_t start = grp * N;
        stat_add(&s_gr, projection(a_gr, arm, mask, start, start + N, N, pi, g_tr));
        stat_add(&s_tr, projection(a_tr, arm, mask, start, start + N, N, pi, g_tr));
    }
    check_ratio("TRLOO, outcome-dependent mask", &s_tr, 1.0, 0);
    check_ratio("GRPO, outcome-dependent mask", &s_gr, want_gr, 1);
    /* GRPO's shortfall is not the (N−1)/N = 7/8 of unmasked groups */
    KG_CHECK(fabs(stat_mean(&s_gr) - 7.0 / 8) > 6 * stat_se(&s_gr));
out:
    free(prompt); free(sample); free(reward); free(a_gr); free(a_tr); free(arm); free(mask);
}

static const kg_test_case cases[] = {
    {"single_turn_bias", test_single_turn_bias},
    {"multi_turn_shrinking_groups", test_multi_turn_shrinking_groups},
    {"outcome_dependent_masks", test_outcome_dependent_masks},
};

KG_TEST_MAIN("rl_montecarlo", cases)
