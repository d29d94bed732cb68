/* test_rl_advantage.c — GRPO, RLOO and TRLOO on hand-computed examples, the
 * properties the estimators promise (zero-sum groups, a leave-one-out
 * baseline that ignores the sample's own return, GRPO = (N−1)/N · TRLOO),
 * masking, singletons, and bad input. */
#include "kg_test.h"
#include "kgym/rl.h"

#include <math.h>

/* One prompt, samples 0..2, turns 1..2 (record i = 2·sample + turn − 1):
 *   s0: r = 0.0, 1.0   G = 1.0, 1.0
 *   s1: r = 0.5, 0.5   G = 1.0, 0.5
 *   s2: r = 1.0, 2.0   G = 3.0, 2.0          (γ = 1) */
static const int64_t P[6] = {0, 0, 0, 0, 0, 0};
static const int64_t S[6] = {0, 0, 1, 1, 2, 2};
static const int32_t T[6] = {1, 2, 1, 2, 1, 2};
static const double R[6] = {0.0, 1.0, 0.5, 0.5, 1.0, 2.0};

static void run(kg_estimator est, double gamma, const uint8_t *mask, double *adv, double *ret)
{
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, est);
    cfg.gamma = gamma;
    kg_error err;
    int rc = kg_advantages(&cfg, 6, P, S, T, R, mask, NULL, adv, ret, &err);
    KG_CHECK(rc == KG_OK);
    if (rc)
        fprintf(stderr, "  %s\n", err.message);
}

static void test_trloo_hand_computed(void)
{
    double adv[6], ret[6];
    run(KG_ESTIMATOR_TRLOO, 1.0, NULL, adv, ret);
    const double want_ret[6] = {1.0, 1.0, 1.0, 0.5, 3.0, 2.0};
    /* turn 1: G = [1, 1, 3]: 1 − (1+3)/2, 1 − (1+3)/2, 3 − (1+1)/2
     * turn 2: G = [1, .5, 2]: 1 − 2.5/2, .5 − 3/2, 2 − 1.5/2 */
    const double want_adv[6] = {-1.0, -0.25, -1.0, -1.0, 2.0, 1.25};
    for (int i = 0; i < 6; i++) {
        KG_CHECK_NEAR(ret[i], want_ret[i], 1e-12);
        KG_CHECK_NEAR(adv[i], want_adv[i], 1e-12);
    }
}

static void test_trloo_gamma(void)
{
    double adv[6], ret[6];
    run(KG_ESTIMATOR_TRLOO, 0.5, NULL, adv, ret);
    /* G1 = r1 + 0.5·r2: s0 0.5, s1 0.75, s2 2.0 */
    KG_CHECK_NEAR(ret[0], 0.5, 1e-12);
    KG_CHECK_NEAR(ret[2], 0.75, 1e-12);
    KG_CHECK_NEAR(ret[4], 2.0, 1e-12);
    KG_CHECK_NEAR(adv[0], 0.5 - (0.75 + 2.0) / 2, 1e-12);
    KG_CHECK_NEAR(adv[2], 0.75 - (0.5 + 2.0) / 2, 1e-12);
    KG_CHECK_NEAR(adv[4], 2.0 - (0.5 + 0.75) / 2, 1e-12);
}

static void test_grpo_hand_computed(void)
{
    double adv[6], ret[6];
    run(KG_ESTIMATOR_GRPO, 1.0, NULL, adv, ret);
    /* turn 1 mean 5/3, turn 2 mean 3.5/3 */
    KG_CHECK_NEAR(adv[0], 1.0 - 5.0 / 3, 1e-12);
    KG_CHECK_NEAR(adv[4], 3.0 - 5.0 / 3, 1e-12);
    KG_CHECK_NEAR(adv[3], 0.5 - 3.5 / 3, 1e-12);
    KG_CHECK_NEAR(adv[5], 2.0 - 3.5 / 3, 1e-12);

    /* std normalisation: turn 1 unbiased std = sqrt(4/3) */
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    cfg.normalize_std = 1;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[0], (-2.0 / 3) / sqrt(4.0 / 3), 1e-5);
    KG_CHECK_NEAR(adv[4], (4.0 / 3) / sqrt(4.0 / 3), 1e-5);
}

static void test_rloo_hand_computed(void)
{
    const int64_t p[4] = {5, 5, 5, 8};
    const int64_t s[4] = {0, 1, 2, 0};
    const double r[4] = {1.0, 2.0, 6.0, 4.0};
    double adv[4];
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_RLOO);
    KG_CHECK(kg_advantages(&cfg, 4, p, s, NULL, r, NULL, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[0], 1.0 - 4.0, 1e-12);
    KG_CHECK_NEAR(adv[1], 2.0 - 3.5, 1e-12);
    KG_CHECK_NEAR(adv[2], 6.0 - 1.5, 1e-12);
    KG_CHECK_NEAR(adv[3], 4.0, 1e-12); /* prompt 8 has one sample: A = r */
    cfg.singleton = KG_SINGLETON_ZERO;
    KG_CHECK(kg_advantages(&cfg, 4, p, s, NULL, r, NULL, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[3], 0.0, 1e-12);

    /* RLOO refuses multi-turn data rather than silently mixing turns */
    kg_error err;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, NULL, adv, NULL, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "single-turn") != NULL);
}

static void test_masking(void)
{
    double adv[6], ret[6];
    uint8_t mask[6] = {1, 1, 1, 1, 1, 0}; /* s2's turn 2 is masked */
    run(KG_ESTIMATOR_TRLOO, 1.0, mask, adv, ret);
    /* its reward 2 is zeroed first: G = 0 there and s2's G1 = 1 + 0 */
    KG_CHECK_NEAR(adv[5], 0.0, 1e-12);
    KG_CHECK_NEAR(ret[5], 0.0, 1e-12);
    KG_CHECK_NEAR(ret[4], 1.0, 1e-12);
    /* turn 2 group is {s0: 1, s1: 0.5} */
    KG_CHECK_NEAR(adv[1], 0.5, 1e-12);
    KG_CHECK_NEAR(adv[3], -0.5, 1e-12);
    /* turn 1: G = [1, 1, 1], so every advantage is 0 */
    for (int i = 0; i < 6; i += 2)
        KG_CHECK_NEAR(adv[i], 0.0, 1e-12);

    /* masked_reward = keep: the masked reward stays in s2's G1 = 3 */
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    cfg.masked_reward = KG_MASKED_REWARD_KEEP;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, mask, NULL, adv, ret, NULL) == KG_OK);
    KG_CHECK_NEAR(ret[5], 2.0, 1e-12);
    KG_CHECK_NEAR(adv[4], 2.0, 1e-12);
    KG_CHECK_NEAR(adv[0], -1.0, 1e-12);

    /* mask two of three at turn 2: s0 alone is a singleton, A = G = 1 */
    uint8_t mask2[6] = {1, 1, 1, 0, 1, 0};
    run(KG_ESTIMATOR_TRLOO, 1.0, mask2, adv, ret);
    KG_CHECK_NEAR(adv[1], 1.0, 1e-12);
    /* turn 1: G = [1, 0.5 + 0, 1 + 0] */
    KG_CHECK_NEAR(adv[0], 1.0 - 0.75, 1e-12);
    KG_CHECK_NEAR(adv[2], 0.5 - 1.0, 1e-12);
    KG_CHECK_NEAR(adv[4], 1.0 - 0.75, 1e-12);
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    cfg.singleton = KG_SINGLETON_ZERO;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, mask2, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[1], 0.0, 1e-12);
}

/* Issue 15's example: a masked −1 at turn 2 must not reach turn 1. */
static void test_masked_reward_example(void)
{
    const int64_t p[4] = {0, 0, 0, 0}, s[4] = {0, 0, 1, 1};
    const int32_t t[4] = {1, 2, 1, 2};
    const double r[4] = {1, -1, 0, 0};
    const uint8_t mask[4] = {1, 0, 1, 1};
    double adv[4];
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_advantages(&cfg, 4, p, s, t, r, mask, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[0], 1.0, 1e-12);
    KG_CHECK_NEAR(adv[2], -1.0, 1e-12);
    KG_CHECK_NEAR(adv[1], 0.0, 1e-12);
    KG_CHECK_NEAR(adv[3], 0.0, 1e-12); /* alone at turn 2, G = 0 */
    cfg.masked_reward = KG_MASKED_REWARD_KEEP;
    KG_CHECK(kg_advantages(&cfg, 4, p, s, t, r, mask, NULL, adv, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(adv[0], 0.0, 1e-12);
    KG_CHECK_NEAR(adv[2], 0.0, 1e-12);
}

static void test_rejected(void)
{
    double adv[6];
    const uint8_t keep[6] = {1, 1, 1, 1, 0, 1}; /* s2's turn 1 rejected */
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, keep, adv, NULL, NULL) == KG_OK);
    /* baseline: s2's G1 = 3 still in the others' baselines */
    KG_CHECK_NEAR(adv[0], -1.0, 1e-12);
    KG_CHECK_NEAR(adv[2], -1.0, 1e-12);
    KG_CHECK_NEAR(adv[4], 0.0, 1e-12);
    KG_CHECK_NEAR(adv[5], 1.25, 1e-12); /* turn 2 untouched */
    cfg.rejected = KG_REJECTED_DROP;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, keep, adv, NULL, NULL) == KG_OK);
    /* drop: turn 1 group {s0: 1, s1: 1} */
    KG_CHECK_NEAR(adv[0], 0.0, 1e-12);
    KG_CHECK_NEAR(adv[2], 0.0, 1e-12);
    KG_CHECK_NEAR(adv[4], 0.0, 1e-12);
}

static void test_small_std(void)
{
    /* issue 15's example: rewards 1 and 1.0000001, std = 1e-7/√2 < 1e-6 */
    const int64_t p[3] = {0, 0, 1}, s[3] = {0, 1, 0};
    const double r[3] = {1.0, 1.0000001, 4.0};
    double adv[3];
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    cfg.normalize_std = 1;
    KG_CHECK(kg_advantages(&cfg, 3, p, s, NULL, r, NULL, NULL, adv, NULL, NULL) == KG_OK);
    double half = (r[1] - r[0]) / 2; /* G − mean */
    KG_CHECK_NEAR(adv[0], -half / (1.0 + 1e-6), 1e-15);
    KG_CHECK_NEAR(adv[1], half / (1.0 + 1e-6), 1e-15);
    /* a singleton: mean 0, std 1, so A = G/(1 + eps) */
    KG_CHECK_NEAR(adv[2], 4.0 / (1.0 + 1e-6), 1e-12);
    cfg.small_std = KG_SMALL_STD_KEEP;
    KG_CHECK(kg_advantages(&cfg, 3, p, s, NULL, r, NULL, NULL, adv, NULL, NULL) == KG_OK);
    double std = (r[1] - r[0]) / sqrt(2.0);
    KG_CHECK_NEAR(adv[1], half / (std + 1e-6), 1e-9);
    KG_CHECK(adv[1] > 0.04 && adv[1] < 0.05);
    KG_CHECK_NEAR(adv[2], 4.0, 1e-12);
}

static void test_group_filter(void)
{
    /* group 7: 0, 0.0005, 0.001 (std 0.0005 < 1e-3): rejected
     * group 8: 0, 1 (std 0.707): kept; group 9: one record: kept (the
     * variance test needs two) unless min_group_size > 1 */
    const int64_t g[6] = {7, 8, 7, 9, 8, 7};
    const double r[6] = {0.0, 0.0, 0.0005, 5.0, 1.0, 0.001};
    uint8_t keep[6];
    size_t rejected;
    kg_group_filter_config cfg;
    kg_group_filter_config_default(&cfg);
    KG_CHECK(kg_group_filter(&cfg, 6, g, r, keep, &rejected, NULL) == KG_OK);
    const uint8_t want[6] = {0, 1, 0, 1, 1, 0};
    for (int i = 0; i < 6; i++)
        KG_CHECK(keep[i] == want[i]);
    KG_CHECK(rejected == 1);
    /* Dr. Kernel's minimum for n = 3 samples: 3 // 2 + 1 = 2 */
    cfg.min_group_size = 2;
    KG_CHECK(kg_group_filter(&cfg, 6, g, r, keep, &rejected, NULL) == KG_OK);
    KG_CHECK(keep[3] == 0 && keep[1] == 1 && rejected == 2);
    cfg.min_std = 1e-4;
    cfg.min_group_size = 0;
    KG_CHECK(kg_group_filter(&cfg, 6, g, r, keep, &rejected, NULL) == KG_OK);
    KG_CHECK(keep[0] == 1 && rejected == 0);
    kg_error err;
    cfg.min_std = NAN;
    KG_CHECK(kg_group_filter(&cfg, 6, g, r, keep, NULL, &err) == KG_ERR_INVALID);
}

/* Random single-turn groups of sizes 2..7 for the property tests. */
static size_t random_groups(kg_rng *rng, int64_t *p, int64_t *s, double *r, size_t cap)
{
    size_t n = 0;
    for (int64_t g = 0; n + 8 < cap; g++) {
        size_t size = 2 + (size_t)(kg_rng_uniform(rng) * 6);
        for (size_t j = 0; j < size; j++, n++) {
            p[n] = g;
            s[n] = (int64_t)j;
            r[n] = 3.0 * kg_rng_uniform(rng) - 1.0;
        }
    }
    return n;
}

static void test_properties(void)
{
    enum { CAP = 400 };
    int64_t p[CAP], s[CAP];
    double r[CAP], a_tr[CAP], a_gr[CAP], a_tr2[CAP], a_gr2[CAP];
    kg_rng rng;
    kg_rng_seed(&rng, 11);
    size_t n = random_groups(&rng, p, s, r, CAP);
    kg_advantage_config tr, gr;
    kg_advantage_config_default(&tr, KG_ESTIMATOR_TRLOO);
    kg_advantage_config_default(&gr, KG_ESTIMATOR_GRPO);
    KG_CHECK(kg_advantages(&tr, n, p, s, NULL, r, NULL, NULL, a_tr, NULL, NULL) == KG_OK);
    KG_CHECK(kg_advantages(&gr, n, p, s, NULL, r, NULL, NULL, a_gr, NULL, NULL) == KG_OK);

    /* zero-sum groups, and GRPO = (N−1)/N · TRLOO record by record */
    for (size_t start = 0; start < n;) {
        size_t end = start;
        double sum_tr = 0, sum_gr = 0;
        while (end < n && p[end] == p[start]) {
            sum_tr += a_tr[end];
            sum_gr += a_gr[end];
            end++;
        }
        double N = (double)(end - start);
        KG_CHECK_NEAR(sum_tr, 0.0, 1e-12);
        KG_CHECK_NEAR(sum_gr, 0.0, 1e-12);
        for (size_t i = start; i < end; i++)
            KG_CHECK_NEAR(a_gr[i], (N - 1) / N * a_tr[i], 1e-12);
        start = end;
    }

    /* changing one sample's own reward moves its TRLOO advantage one-for-one:
     * its baseline A_i − G_i is untouched.  GRPO's baseline moves with it. */
    size_t i = 3;
    double old = r[i];
    r[i] = old + 1.7;
    KG_CHECK(kg_advantages(&tr, n, p, s, NULL, r, NULL, NULL, a_tr2, NULL, NULL) == KG_OK);
    KG_CHECK(kg_advantages(&gr, n, p, s, NULL, r, NULL, NULL, a_gr2, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(a_tr2[i] - r[i], a_tr[i] - old, 1e-12);
    KG_CHECK(fabs((a_gr2[i] - r[i]) - (a_gr[i] - old)) > 0.1);
}

static void test_bad_input(void)
{
    kg_advantage_config cfg;
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_TRLOO);
    kg_error err;
    double adv[6], r[6];
    memcpy(r, R, sizeof r);
    r[3] = NAN;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, r, NULL, NULL, adv, NULL, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "record 3") != NULL && strstr(err.message, "NaN") != NULL);

    int32_t dup_turn[6] = {1, 1, 1, 2, 1, 2};
    KG_CHECK(kg_advantages(&cfg, 6, P, S, dup_turn, R, NULL, NULL, adv, NULL, &err) ==
             KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "records 0 and 1") != NULL);

    cfg.gamma = 1.5;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, NULL, adv, NULL, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "gamma") != NULL);

    kg_estimator est;
    KG_CHECK(kg_estimator_parse("trloo", &est, &err) == KG_OK && est == KG_ESTIMATOR_TRLOO);
    KG_CHECK(kg_estimator_parse("ppo", &est, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "grpo, rloo, trloo") != NULL);
    int v;
    KG_CHECK(kg_rl_option_parse(KG_OPT_REJECTED, "drop", &v, &err) == KG_OK &&
             v == KG_REJECTED_DROP);
    KG_CHECK(kg_rl_option_parse(KG_OPT_MRS_MODE, "geo", &v, &err) == KG_ERR_INVALID);
    KG_CHECK(strcmp(kg_rl_option_name(KG_OPT_SMALL_STD, 5), "?") == 0);
    cfg.gamma = 1.0;
    cfg.small_std = (kg_small_std_rule)7;
    KG_CHECK(kg_advantages(&cfg, 6, P, S, T, R, NULL, NULL, adv, NULL, &err) == KG_ERR_INVALID);
    cfg.small_std = KG_SMALL_STD_ONE;
    /* no records is not an error */
    kg_advantage_config_default(&cfg, KG_ESTIMATOR_GRPO);
    KG_CHECK(kg_advantages(&cfg, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &err) == KG_OK);
}

static const kg_test_case cases[] = {
    {"trloo_hand_computed", test_trloo_hand_computed},
    {"trloo_gamma", test_trloo_gamma},
    {"grpo_hand_computed", test_grpo_hand_computed},
    {"rloo_hand_computed", test_rloo_hand_computed},
    {"masking", test_masking},
    {"masked_reward_example", test_masked_reward_example},
    {"rejected", test_rejected},
    {"small_std", test_small_std},
    {"group_filter", test_group_filter},
    {"properties", test_properties},
    {"bad_input", test_bad_input},
};

KG_TEST_MAIN("rl_advantage", cases)
