/* test_rl_sampling.c — PRS keep probabilities and frequencies within
 * binomial bounds, MRS trajectory/turn rejection, truncated importance
 * weights, and the curriculum's schedule, sampler and save/resume. */
#include "kg_test.h"
#include "kgym/rl.h"

#include <math.h>
#include <stdlib.h>

static double prs_p(const kg_prs_config *cfg, kg_verdict v, double coverage, double speedup)
{
    kg_eval_outcome o = {v, v == KG_VERDICT_HACKED, NAN, speedup, coverage};
    double p = -1;
    KG_CHECK(kg_prs_keep_probability(cfg, &o, &p, NULL) == KG_OK);
    return p;
}

static void test_prs_probability(void)
{
    kg_prs_config cfg;
    kg_prs_config_default(&cfg);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.35, NAN), 0.5, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.32, NAN), 0.2, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.30, NAN), 0.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.10, NAN), 0.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.40, NAN), 1.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.95, NAN), 1.0, 1e-12);
    /* incorrect and hacked turns are never rejected, coverage or not */
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_INCORRECT, 0.0, NAN), 1.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_HACKED, NAN, NAN), 1.0, 1e-12);
    /* the speed escape and the hard cut */
    cfg.speedup_threshold = 1.5;
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.1, 2.0), 1.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.1, 1.2), 0.0, 1e-12);
    cfg.speedup_threshold = NAN;
    cfg.factor = 0;
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.31, NAN), 1.0, 1e-12);
    KG_CHECK_NEAR(prs_p(&cfg, KG_VERDICT_CORRECT, 0.29, NAN), 0.0, 1e-12);

    kg_error err;
    double p;
    kg_eval_outcome unprofiled = {KG_VERDICT_CORRECT, 0, 1.0, 1.0, NAN};
    KG_CHECK(kg_prs_keep_probability(&cfg, &unprofiled, &p, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "coverage") != NULL);
}

/* Geometric mode: trajectory 0 = correct turns with coverage 0.5 and 0.32
 * (geometric mean √0.16 = 0.4, so both have p = 1; per turn 1 and 0.2);
 * trajectory 1 = an incorrect turn (no coverage: counts as 1e-8) and a
 * correct one at 0.9: √(1e-8·0.9) ≈ 9.5e-5, p = 0, unless the first turn is
 * not live (masked or rejected): then 0.9, p = 1. */
static void test_prs_geometric(void)
{
    int32_t verdict[4] = {KG_VERDICT_CORRECT, KG_VERDICT_CORRECT, KG_VERDICT_INCORRECT,
                          KG_VERDICT_CORRECT};
    double coverage[4] = {0.5, 0.32, NAN, 0.9}, prob[4];
    int64_t traj[4] = {0, 0, 1, 1};
    uint8_t keep[4];
    kg_outcome_columns cols = {4, verdict, NULL, NULL, NULL, coverage};
    kg_prs_config cfg;
    kg_prs_config_default(&cfg);
    kg_rng rng;
    kg_rng_seed(&rng, 1);
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, traj, NULL, keep, prob, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(prob[0], 1.0, 1e-12);
    KG_CHECK_NEAR(prob[1], 0.2, 1e-12);
    cfg.mode = KG_PRS_GEOMETRIC;
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, traj, NULL, keep, prob, NULL, NULL) == KG_OK);
    const double want[4] = {1.0, 1.0, 1.0, 0.0};
    for (int i = 0; i < 4; i++)
        KG_CHECK_NEAR(prob[i], want[i], 1e-12);
    KG_CHECK(keep[0] && keep[1] && keep[2] && !keep[3]);
    uint8_t live[4] = {1, 1, 0, 1};
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, traj, live, keep, prob, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(prob[3], 1.0, 1e-12);
    /* a 0.35 coverage alone: (0.35 − 0.3)/0.1 */
    coverage[0] = 0.35;
    coverage[1] = 0.35;
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, traj, NULL, keep, prob, NULL, NULL) == KG_OK);
    KG_CHECK_NEAR(prob[0], 0.5, 1e-12);
    kg_error err;
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, NULL, NULL, keep, prob, NULL, &err) ==
             KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "trajectory") != NULL);
}

static void test_prs_frequencies(void)
{
    /* 3 populations: coverage 0.35 (p = .5), 0.32 (p = .2), incorrect (p = 1) */
    enum { N = 30000 };
    int32_t *verdict = malloc(N * sizeof *verdict);
    double *coverage = malloc(N * sizeof *coverage), *prob = malloc(N * sizeof *prob);
    uint8_t *keep = malloc(N), *keep2 = malloc(N);
    KG_CHECK(verdict && coverage && prob && keep && keep2);
    if (!(verdict && coverage && prob && keep && keep2))
        goto out;
    for (size_t i = 0; i < N; i++) {
        verdict[i] = i % 3 == 2 ? KG_VERDICT_INCORRECT : KG_VERDICT_CORRECT;
        coverage[i] = i % 3 == 0 ? 0.35 : 0.32;
    }
    kg_outcome_columns cols = {N, verdict, NULL, NULL, NULL, coverage};
    kg_prs_config cfg;
    kg_prs_config_default(&cfg);
    kg_rng rng;
    kg_rng_seed(&rng, 99);
    kg_prs_stats st;
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, NULL, NULL, keep, prob, &st, NULL) == KG_OK);
    size_t kept[3] = {0, 0, 0}, n_each = N / 3;
    for (size_t i = 0; i < N; i++)
        kept[i % 3] += keep[i];
    const double p[3] = {0.5, 0.2, 1.0};
    for (int k = 0; k < 3; k++) {
        double freq = (double)kept[k] / (double)n_each;
        double bound = 4.5 * sqrt(p[k] * (1 - p[k]) / (double)n_each) + 1e-12;
        printf("  coverage population %d: kept %.4f (p %.2f, bound ±%.4f)\n", k, freq, p[k],
               bound);
        KG_CHECK(fabs(freq - p[k]) <= bound);
    }
    KG_CHECK(st.total == N && st.correct == 2 * n_each);
    KG_CHECK(st.kept == kept[0] + kept[1] + kept[2]);
    KG_CHECK(st.correct_kept == kept[0] + kept[1]);
    KG_CHECK_NEAR(st.expected_correct_kept, n_each * 0.7, 1e-6);
    KG_CHECK_NEAR(st.acceptance_rate, (double)st.kept / N, 1e-12);

    /* same seed, same decisions; another seed, other decisions */
    kg_rng_seed(&rng, 99);
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, NULL, NULL, keep2, NULL, NULL, NULL) == KG_OK);
    KG_CHECK(memcmp(keep, keep2, N) == 0);
    kg_rng_seed(&rng, 100);
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, NULL, NULL, keep2, NULL, NULL, NULL) == KG_OK);
    KG_CHECK(memcmp(keep, keep2, N) != 0);

    /* a correct record without coverage is named */
    coverage[7] = NAN;
    kg_error err;
    KG_CHECK(kg_prs_sample(&cfg, &rng, &cols, NULL, NULL, keep2, NULL, NULL, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "record 7") != NULL);
out:
    free(verdict); free(coverage); free(prob); free(keep); free(keep2);
}

static void test_mrs(void)
{
    kg_mrs_config cfg;
    kg_mrs_config_default(&cfg);
    /* trajectory 1: turns 0,1 with mean log-ratio log(1.0009): kept.
     * trajectory 2: turn 2, mean log(1.0011): dropped.
     * trajectory 3: turns 3 (a token at ratio 1e-5, offset by a large one in
     * turn 4 so the mean is 0): turn 3 vetoed, turn 4 kept. */
    double in = log(1.0009), out = log(1.0011), lo = log(1e-5);
    double lr[] = {in, in, in, in, out, out, 0, lo, -lo, 0};
    int64_t offsets[] = {0, 2, 4, 6, 8, 10};
    int64_t traj[] = {1, 1, 2, 3, 3};
    uint8_t keep[5];
    double geo[5];
    kg_mrs_stats st;
    KG_CHECK(kg_mrs_filter(&cfg, 5, traj, offsets, lr, NULL, keep, geo, NULL, &st, NULL) == KG_OK);
    KG_CHECK(keep[0] == 1 && keep[1] == 1);
    KG_CHECK(keep[2] == 0);
    KG_CHECK(keep[3] == 0 && keep[4] == 1);
    KG_CHECK_NEAR(geo[0], 1.0009, 1e-12);
    KG_CHECK_NEAR(geo[2], 1.0011, 1e-12);
    KG_CHECK_NEAR(geo[3], 1.0, 1e-12);
    /* trajectory 3 lost its vetoed turn */
    KG_CHECK(st.trajectories == 3 && st.trajectories_kept == 1);
    KG_CHECK(st.turns == 5 && st.turns_kept == 3 && st.turns_vetoed == 1);
    /* a wider window keeps trajectory 2 */
    cfg.delta = 0.002;
    KG_CHECK(kg_mrs_filter(&cfg, 5, traj, offsets, lr, NULL, keep, NULL, NULL, NULL, NULL) == KG_OK);
    KG_CHECK(keep[2] == 1);

    kg_error err;
    lr[5] = NAN;
    KG_CHECK(kg_mrs_filter(&cfg, 5, traj, offsets, lr, NULL, keep, NULL, NULL, NULL, &err) ==
             KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "turn 2, token 1") != NULL);
    int64_t bad_offsets[] = {0, 2, 1, 6, 8, 10};
    lr[5] = 0;
    KG_CHECK(kg_mrs_filter(&cfg, 5, traj, bad_offsets, lr, NULL, keep, NULL, NULL, NULL, &err) ==
             KG_ERR_INVALID);
}

/* The five modes on one batch, with a loss-masked turn.  δ = 0.001.
 *   trajectory A: turn 0 ratios {1.0004, 1.0004}, turn 1 {1.0009},
 *                 turn 2 {5} (masked: it would sink every A ratio)
 *   trajectory B: turn 3 {0.9995, 1.0015}                              */
static void test_mrs_modes(void)
{
    double lr[] = {log(1.0004), log(1.0004), log(1.0009), log(5.0), log(0.9995), log(1.0015)};
    int64_t offsets[] = {0, 2, 3, 4, 6};
    int64_t traj[] = {0, 0, 0, 1};
    uint8_t mask[] = {1, 1, 0, 1};
    uint8_t keep[4], tokens[6];
    double ratio[4];
    kg_mrs_config cfg;
    kg_mrs_config_default(&cfg);
    KG_CHECK(cfg.mode == KG_MRS_GEOMETRIC);
    double geo_a = cbrt(1.0004 * 1.0004 * 1.0009), geo_b = sqrt(0.9995 * 1.0015);
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, mask, keep, ratio, tokens, NULL, NULL) ==
             KG_OK);
    for (int r = 0; r < 4; r++)
        KG_CHECK(keep[r] == 1);
    KG_CHECK_NEAR(ratio[0], geo_a, 1e-12);
    KG_CHECK_NEAR(ratio[2], geo_a, 1e-12);
    KG_CHECK_NEAR(ratio[3], geo_b, 1e-12);
    /* without the mask, the ratio 5 joins A's mean and drops all of A */
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, NULL, keep, ratio, NULL, NULL, NULL) ==
             KG_OK);
    KG_CHECK(keep[0] == 0 && keep[1] == 0 && keep[2] == 0 && keep[3] == 1);
    KG_CHECK_NEAR(ratio[0], pow(1.0004 * 1.0004 * 1.0009 * 5.0, 0.25), 1e-12);

    cfg.mode = KG_MRS_TURN_GEO;
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, mask, keep, ratio, NULL, NULL, NULL) ==
             KG_OK);
    KG_CHECK(keep[0] && keep[1] && keep[2] && keep[3]);
    KG_CHECK_NEAR(ratio[0], 1.0004, 1e-12);
    KG_CHECK_NEAR(ratio[1], 1.0009, 1e-12);
    KG_CHECK_NEAR(ratio[2], 1.0, 1e-12); /* masked: judged on nothing */
    KG_CHECK_NEAR(ratio[3], geo_b, 1e-12);

    cfg.mode = KG_MRS_TURN; /* products: 1.00080016, 1.0009, -, 1.00099925 */
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, mask, keep, ratio, NULL, NULL, NULL) ==
             KG_OK);
    KG_CHECK(keep[0] && keep[1] && keep[2] && keep[3]);
    KG_CHECK_NEAR(ratio[0], 1.00080016, 1e-12);
    KG_CHECK_NEAR(ratio[3], 1.00099925, 1e-12);

    cfg.mode = KG_MRS_SEQUENCE; /* A: 1.00080016 · 1.0009 = 1.0017009 > 1.001 */
    kg_mrs_stats st;
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, mask, keep, ratio, NULL, &st, NULL) ==
             KG_OK);
    KG_CHECK(keep[0] == 0 && keep[1] == 0 && keep[2] == 1 && keep[3] == 1);
    KG_CHECK_NEAR(ratio[1], 1.00080016 * 1.0009, 1e-12);
    KG_CHECK(st.trajectories_kept == 1 && st.turns_kept == 2);

    cfg.mode = KG_MRS_TOKEN; /* only 1.0015 is out; the masked 5 is not judged */
    KG_CHECK(kg_mrs_filter(&cfg, 4, traj, offsets, lr, mask, keep, ratio, tokens, NULL, NULL) ==
             KG_OK);
    const uint8_t want_tokens[6] = {1, 1, 1, 1, 1, 0};
    for (int t = 0; t < 6; t++)
        KG_CHECK(tokens[t] == want_tokens[t]);
    KG_CHECK(keep[0] && keep[1] && keep[2] && keep[3]);
    KG_CHECK(isnan(ratio[0]));

    /* −inf (the trainer gives the token probability 0) vetoes a live turn;
     * a masked turn is never vetoed */
    double lr2[] = {0.0, -INFINITY, -INFINITY};
    int64_t off2[] = {0, 2, 3};
    int64_t traj2[] = {0, 1};
    uint8_t mask2[] = {1, 0};
    cfg.mode = KG_MRS_GEOMETRIC;
    KG_CHECK(kg_mrs_filter(&cfg, 2, traj2, off2, lr2, mask2, keep, ratio, NULL, &st, NULL) ==
             KG_OK);
    KG_CHECK(keep[0] == 0 && keep[1] == 1 && st.turns_vetoed == 1);
    KG_CHECK_NEAR(ratio[0], exp(-20.0), 1e-18);
}

static void test_truncated_is(void)
{
    /* trajectory 0: turn 0 = ratios {0.5, 3}, turn 1 = {1.2}; trajectory 1:
     * turn 2 = {0.9} */
    double lr[] = {log(0.5), log(3.0), log(1.2), log(0.9)};
    int64_t offsets[] = {0, 2, 3, 4};
    int64_t traj[] = {0, 0, 1};
    double w[4];
    KG_CHECK(kg_truncated_is_weights(2.0, KG_IS_TOKEN, 3, traj, offsets, lr, w, NULL) == KG_OK);
    KG_CHECK_NEAR(w[0], 0.5, 1e-12);
    KG_CHECK_NEAR(w[1], 2.0, 1e-12);
    KG_CHECK_NEAR(w[2], 1.2, 1e-12);
    KG_CHECK(kg_truncated_is_weights(2.0, KG_IS_TURN, 3, traj, offsets, lr, w, NULL) == KG_OK);
    KG_CHECK_NEAR(w[0], 1.5, 1e-12);
    KG_CHECK_NEAR(w[1], 1.5, 1e-12);
    KG_CHECK_NEAR(w[2], 1.2, 1e-12);
    KG_CHECK(kg_truncated_is_weights(2.0, KG_IS_SEQUENCE, 3, traj, offsets, lr, w, NULL) ==
             KG_OK);
    KG_CHECK_NEAR(w[0], 1.8, 1e-12); /* 0.5·3·1.2 */
    KG_CHECK_NEAR(w[2], 1.8, 1e-12);
    KG_CHECK_NEAR(w[3], 0.9, 1e-12);
    kg_error err;
    KG_CHECK(kg_truncated_is_weights(0.0, KG_IS_TOKEN, 3, traj, offsets, lr, w, &err) ==
             KG_ERR_INVALID);
}

static void test_curriculum_schedule(void)
{
    kg_curriculum_config cfg;
    kg_curriculum_config_default(&cfg);
    double shares[KG_CURRICULUM_MAX_LEVELS];
    const double acc[][2] = {{0.0, 0}, {0.2, 0}, {0.4, 0}, {0.9, 0}};
    const double want_l2[] = {0.10, 0.30, 0.50, 0.50};
    for (int i = 0; i < 4; i++) {
        KG_CHECK(kg_curriculum_schedule(&cfg, acc[i], shares, NULL) == KG_OK);
        KG_CHECK_NEAR(shares[1], want_l2[i], 1e-12);
        KG_CHECK_NEAR(shares[0], 1.0 - want_l2[i], 1e-12);
    }
    /* three levels, each driven by the one below */
    cfg.n_levels = 3;
    cfg.level[2] = (kg_curriculum_ramp){0.0, 0.3, 0.5};
    const double acc3[3] = {0.2, 0.25, 0.0};
    KG_CHECK(kg_curriculum_schedule(&cfg, acc3, shares, NULL) == KG_OK);
    KG_CHECK_NEAR(shares[1], 0.3, 1e-12);
    KG_CHECK_NEAR(shares[2], 0.15, 1e-12);
    KG_CHECK_NEAR(shares[0], 0.55, 1e-12);

    kg_error err;
    cfg.level[2].end_share = 0.6; /* 0.5 + 0.6 > 1 */
    KG_CHECK(kg_curriculum_schedule(&cfg, acc3, shares, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "negative share") != NULL);
    KG_CHECK(kg_curriculum_config_from_json("{\"levels\": [{\"start\": 0.1}]}", &cfg, &err) ==
             KG_ERR_INVALID);
    KG_CHECK(kg_curriculum_config_from_json(
                 "{\"window\": 8, \"levels\": [{\"start\": 0.2, \"end\": 0.4, \"target\": 0.5}]}",
                 &cfg, &err) == KG_OK);
    KG_CHECK(cfg.n_levels == 2 && cfg.window == 8);
    KG_CHECK_NEAR(cfg.level[1].end_share, 0.4, 1e-12);
}

/* Beyond TritonRL's step rule with its defaults (start 0.1, +0.05, window 5,
 * at least 5 step accuracies, trigger 0.4, cap 0.5), step by step. */
static void test_curriculum_step_rule(void)
{
    kg_curriculum_config cfg;
    kg_curriculum_config_default(&cfg);
    KG_CHECK(cfg.rule == KG_CURRICULUM_STEP);
    kg_curriculum *cur = NULL;
    KG_CHECK(kg_curriculum_create(&cfg, 1, &cur, NULL) == KG_OK);
    if (!cur)
        return;
    /* level-0 step accuracies; -1: a step without level-0 outcomes */
    const double acc[14] = {0.5, 0.5, 0.0, 0.5, 0.6, -1, 0.0, 1, 1, 1, 1, 1, 1, 1};
    /* steps 1-4: fewer than 5 accuracies; 5: mean .42 -> .15; 6: still .42
     * -> .20; 7: .5,0,.5,.6,0 = .32 -> stays; 8: 0,.5,.6,0,1 = .42 -> .25;
     * then .30 ... up to the cap .50 */
    const double want[14] = {0.1, 0.1, 0.1, 0.1, 0.15, 0.2, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
                             0.5};
    char *saved = NULL;
    for (int step = 0; step < 14; step++) {
        if (acc[step] >= 0) {
            /* ten outcomes with the step's accuracy, plus a level-1 one that
             * must not count for level 0 */
            for (int i = 0; i < 10; i++)
                KG_CHECK(kg_curriculum_record(cur, 0, i < (int)(acc[step] * 10 + 0.5), NULL) ==
                         KG_OK);
            KG_CHECK(kg_curriculum_record(cur, 1, 0, NULL) == KG_OK);
        }
        KG_CHECK(kg_curriculum_end_step(cur, NULL) == KG_OK);
        double shares[2];
        KG_CHECK(kg_curriculum_shares(cur, shares, NULL) == KG_OK);
        KG_CHECK_NEAR(shares[1], want[step], 1e-12);
        KG_CHECK_NEAR(shares[0], 1.0 - want[step], 1e-12);
        if (step == 6)
            KG_CHECK(kg_curriculum_save(cur, &saved, NULL) == KG_OK);
    }
    /* the state saved after step 7 resumes with the same step history */
    kg_curriculum *copy = NULL;
    KG_CHECK(saved && kg_curriculum_load(saved, &copy, NULL) == KG_OK);
    if (copy) {
        for (int i = 0; i < 10; i++)
            kg_curriculum_record(copy, 0, 1, NULL);
        kg_curriculum_end_step(copy, NULL);
        double shares[2];
        kg_curriculum_shares(copy, shares, NULL);
        KG_CHECK_NEAR(shares[1], 0.25, 1e-12);
    }
    /* a single success does not move the share (the issue with the old
     * linear default) */
    kg_curriculum *one = NULL;
    KG_CHECK(kg_curriculum_create(&cfg, 1, &one, NULL) == KG_OK);
    if (one) {
        kg_curriculum_record(one, 0, 1, NULL);
        kg_curriculum_end_step(one, NULL);
        double shares[2];
        kg_curriculum_shares(one, shares, NULL);
        KG_CHECK_NEAR(shares[1], 0.1, 1e-12);
    }
    kg_error err;
    cfg.step_window = 0;
    KG_CHECK(kg_curriculum_config_check(&cfg, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_curriculum_config_from_json("{\"rule\": \"steps\"}", &cfg, &err) ==
             KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "step, linear") != NULL);
    KG_CHECK(kg_curriculum_config_from_json("{\"rule\": \"linear\", \"min_steps\": 2}", &cfg,
                                            &err) == KG_OK);
    KG_CHECK(cfg.rule == KG_CURRICULUM_LINEAR && cfg.min_steps == 2);
    free(saved);
    kg_curriculum_free(copy);
    kg_curriculum_free(one);
    kg_curriculum_free(cur);
}

static void test_curriculum_sampler(void)
{
    kg_curriculum_config cfg;
    kg_curriculum_config_default(&cfg);
    cfg.rule = KG_CURRICULUM_LINEAR;
    cfg.window = 4;
    kg_curriculum *cur = NULL;
    KG_CHECK(kg_curriculum_create(&cfg, 5, &cur, NULL) == KG_OK);
    if (!cur)
        return;
    /* rolling window of 4: after 1,1,0,0,0 it holds 1,0,0,0 */
    int outcomes[] = {1, 1, 0, 0, 0};
    for (int i = 0; i < 5; i++)
        KG_CHECK(kg_curriculum_record(cur, 0, outcomes[i], NULL) == KG_OK);
    KG_CHECK_NEAR(kg_curriculum_accuracy(cur, 0), 0.25, 1e-12);
    KG_CHECK(kg_curriculum_observed(cur, 0) == 4);
    KG_CHECK(kg_curriculum_record(cur, 2, 1, NULL) == KG_ERR_INVALID);
    double shares[2];
    KG_CHECK(kg_curriculum_shares(cur, shares, NULL) == KG_OK);
    KG_CHECK_NEAR(shares[1], 0.1 + 0.4 * 0.25 / 0.4, 1e-12);

    /* draw frequencies follow the shares (0.35 for level 1) */
    enum { DRAWS = 20000 };
    size_t level1 = 0, level;
    for (int i = 0; i < DRAWS; i++) {
        KG_CHECK(kg_curriculum_sample_level(cur, &level, NULL) == KG_OK);
        level1 += level == 1;
    }
    double freq = (double)level1 / DRAWS;
    KG_CHECK(fabs(freq - 0.35) < 4.5 * sqrt(0.35 * 0.65 / DRAWS));

    /* save, keep drawing; the restored copy draws the same sequence */
    char *saved = NULL;
    KG_CHECK(kg_curriculum_save(cur, &saved, NULL) == KG_OK);
    kg_curriculum *copy = NULL;
    KG_CHECK(saved && kg_curriculum_load(saved, &copy, NULL) == KG_OK);
    if (copy) {
        KG_CHECK_NEAR(kg_curriculum_accuracy(copy, 0), 0.25, 1e-12);
        int same = 1;
        for (int i = 0; i < 50; i++) {
            size_t a, b, ia, ib;
            kg_curriculum_sample_level(cur, &a, NULL);
            kg_curriculum_sample_level(copy, &b, NULL);
            kg_curriculum_sample_index(cur, 17, &ia, NULL);
            kg_curriculum_sample_index(copy, 17, &ib, NULL);
            same &= a == b && ia == ib && ia < 17;
        }
        KG_CHECK(same);
        /* the window keeps rolling identically after a reload */
        kg_curriculum_record(cur, 0, 1, NULL);
        kg_curriculum_record(copy, 0, 1, NULL);
        KG_CHECK_NEAR(kg_curriculum_accuracy(copy, 0), kg_curriculum_accuracy(cur, 0), 1e-12);
        KG_CHECK_NEAR(kg_curriculum_accuracy(copy, 0), 0.25, 1e-12); /* 0,0,0,1 */
    }
    kg_error err;
    kg_curriculum *bad = NULL;
    KG_CHECK(kg_curriculum_load("{\"schema\": \"other\"}", &bad, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_curriculum_load("not json", &bad, &err) == KG_ERR_INVALID);
    KG_CHECK(bad == NULL);
    free(saved);
    kg_curriculum_free(copy);
    kg_curriculum_free(cur);
}

static const kg_test_case cases[] = {
    {"prs_probability", test_prs_probability},
    {"prs_frequencies", test_prs_frequencies},
    {"prs_geometric", test_prs_geometric},
    {"mrs", test_mrs},
    {"mrs_modes", test_mrs_modes},
    {"truncated_is", test_truncated_is},
    {"curriculum_schedule", test_curriculum_schedule},
    {"curriculum_step_rule", test_curriculum_step_rule},
    {"curriculum_sampler", test_curriculum_sampler},
};

KG_TEST_MAIN("rl_sampling", cases)
