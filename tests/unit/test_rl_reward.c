/* test_rl_reward.c — every reward function against hand-computed values
 * (docs/rl.md §Rewards), penalties, batch look-up of the previous turn, and
 * bad input. */
#include "kg_test.h"
#include "kgym/rl.h"

#include <math.h>

static kg_eval_outcome outcome(kg_verdict v, double staged, double speedup, double coverage)
{
    kg_eval_outcome o = {v, v == KG_VERDICT_HACKED, staged, speedup, coverage};
    return o;
}

static double reward_of(const kg_reward_config *cfg, kg_eval_outcome o)
{
    double r = NAN;
    kg_error err;
    int rc = kg_reward_compute(cfg, &o, NULL, &r, &err);
    KG_CHECK(rc == KG_OK);
    return r;
}

static void test_drkernel_hand_computed(void)
{
    kg_reward_config cfg;
    kg_reward_config_default(&cfg, KG_REWARD_DRKERNEL);
    /* 0.5 + 0.5·2 + 0.5·0.8 */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 2.0, 0.8)), 1.9, 1e-12);
    /* speedup capped at 3: 0.5 + 1.5 + 0.5 */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 5.0, 1.0)), 2.5, 1e-12);
    /* a slow kernel is not punished: 0.5 + 0.5·0.2 + 0.5·0.4 */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 0.2, 0.4)), 0.8, 1e-12);
    /* CPU: nothing measured, correctness alone */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, NAN, NAN)), 0.5, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_INCORRECT, 0.7, 2.0, 0.9)), 0.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_HACKED, 0, 9.0, 1.0)), 0.0, 1e-12);
    /* correct verdict but a hack flagged in hacks[] is still a failure */
    kg_eval_outcome flagged = outcome(KG_VERDICT_CORRECT, 1, 2.0, 1.0);
    flagged.hacked = 1;
    KG_CHECK_NEAR(reward_of(&cfg, flagged), 0.0, 1e-12);
    /* the lower bound zeroes a slow kernel's speed term: 0.5 + 0 + 0.5·0.4 */
    KG_CHECK(kg_reward_config_set(&cfg, "speedup_lower_bound", 1.0, NULL) == KG_OK);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 0.2, 0.4)), 0.7, 1e-12);
}

static void test_staged_tritonrl_speedup(void)
{
    kg_reward_config cfg;
    kg_reward_config_default(&cfg, KG_REWARD_STAGED);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_INCORRECT, 0.7, NAN, NAN)), 0.7, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_COMPILE_ERROR, 0.3, NAN, NAN)), 0.3, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1.0, 2.0, NAN)), 1.0, 1e-12);
    cfg.speed_weight = 0.1; /* 1.0 + 0.1·2 */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1.0, 2.0, NAN)), 1.2, 1e-12);
    /* the speed term never rewards an incorrect kernel */
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_INCORRECT, 0.7, 2.0, NAN)), 0.7, 1e-12);

    kg_reward_config_default(&cfg, KG_REWARD_TRITONRL);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 1.5, NAN)), 2.5, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 4.0, NAN)), 3.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, NAN, NAN)), 1.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_INVALID, 0, NAN, NAN)), 0.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_HACKED, 0, 3.0, NAN)), 0.0, 1e-12);

    kg_reward_config_default(&cfg, KG_REWARD_SPEEDUP);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 2.0, NAN)), log(2.0), 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 100.0, NAN)), log(10.0), 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, 0.05, NAN)), -2.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_CORRECT, 1, NAN, NAN)), 0.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_TIMEOUT, 0, NAN, NAN)), -2.0, 1e-12);
}

static void test_penalties(void)
{
    kg_reward_config cfg;
    kg_reward_config_default(&cfg, KG_REWARD_DRKERNEL);
    KG_CHECK(kg_reward_config_set(&cfg, "hack_penalty", 1.0, NULL) == KG_OK);
    KG_CHECK(kg_reward_config_set(&cfg, "timeout_penalty", 0.25, NULL) == KG_OK);
    KG_CHECK(kg_reward_config_set(&cfg, "regression_penalty", 0.5, NULL) == KG_OK);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_HACKED, 0, 9.0, 1.0)), -1.0, 1e-12);
    KG_CHECK_NEAR(reward_of(&cfg, outcome(KG_VERDICT_TIMEOUT, 0, NAN, NAN)), -0.25, 1e-12);

    kg_eval_outcome good = outcome(KG_VERDICT_CORRECT, 1, 2.0, NAN); /* base 1.5 */
    kg_eval_outcome bad = outcome(KG_VERDICT_INCORRECT, 0.7, NAN, NAN); /* base 0 */
    double r = 0;
    KG_CHECK(kg_reward_compute(&cfg, &bad, &good, &r, NULL) == KG_OK);
    KG_CHECK_NEAR(r, -0.5, 1e-12); /* regressed: 0 − 0.5 */
    KG_CHECK(kg_reward_compute(&cfg, &good, &bad, &r, NULL) == KG_OK);
    KG_CHECK_NEAR(r, 1.5, 1e-12); /* improved: no penalty */
    KG_CHECK(kg_reward_compute(&cfg, &good, &good, &r, NULL) == KG_OK);
    KG_CHECK_NEAR(r, 1.5, 1e-12); /* equal: no penalty */
}

static void test_batch_finds_previous_turn(void)
{
    kg_reward_config cfg;
    kg_reward_config_default(&cfg, KG_REWARD_DRKERNEL);
    cfg.regression_penalty = 0.5;
    /* two trajectories, turns given out of order; trajectory 7 goes correct
     * (turn 1) -> incorrect (turn 2); trajectory 9 goes incorrect -> correct */
    int32_t verdict[] = {KG_VERDICT_INCORRECT, KG_VERDICT_CORRECT, KG_VERDICT_CORRECT,
                         KG_VERDICT_INCORRECT};
    double speedup[] = {NAN, 1.0, 1.0, NAN};
    int64_t traj[] = {7, 9, 7, 9};
    int32_t turn[] = {2, 2, 1, 1};
    kg_outcome_columns cols = {4, verdict, NULL, NULL, speedup, NULL};
    double out[4];
    KG_CHECK(kg_reward_batch(&cfg, &cols, traj, turn, out, NULL) == KG_OK);
    KG_CHECK_NEAR(out[0], -0.5, 1e-12);
    KG_CHECK_NEAR(out[1], 1.0, 1e-12);
    KG_CHECK_NEAR(out[2], 1.0, 1e-12);
    KG_CHECK_NEAR(out[3], 0.0, 1e-12);
    /* without trajectories there is no previous turn, so no penalty */
    KG_CHECK(kg_reward_batch(&cfg, &cols, NULL, NULL, out, NULL) == KG_OK);
    KG_CHECK_NEAR(out[0], 0.0, 1e-12);
}

static void test_bad_input(void)
{
    kg_reward_config cfg;
    kg_error err;
    kg_reward_config_default(&cfg, KG_REWARD_STAGED);
    kg_eval_outcome o = outcome(KG_VERDICT_CORRECT, NAN, 1.0, NAN);
    double r;
    KG_CHECK(kg_reward_compute(&cfg, &o, NULL, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "reward") != NULL);

    kg_reward_config_default(&cfg, KG_REWARD_DRKERNEL);
    o = outcome(KG_VERDICT_CORRECT, 1, -1.0, NAN);
    KG_CHECK(kg_reward_compute(&cfg, &o, NULL, &r, &err) == KG_ERR_INVALID);
    o = outcome(KG_VERDICT_CORRECT, 1, 1.0, 1.5);
    KG_CHECK(kg_reward_compute(&cfg, &o, NULL, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "coverage") != NULL);

    KG_CHECK(kg_reward_config_set(&cfg, "no_such_constant", 1.0, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "no_such_constant") != NULL);
    KG_CHECK(kg_reward_config_set(&cfg, "speedup_cap", NAN, &err) == KG_ERR_INVALID);

    kg_reward_fn fn;
    KG_CHECK(kg_reward_fn_parse("tritonrl", &fn, &err) == KG_OK && fn == KG_REWARD_TRITONRL);
    KG_CHECK(kg_reward_fn_parse("bogus", &fn, &err) == KG_ERR_INVALID);
    kg_verdict v;
    KG_CHECK(kg_verdict_parse("compile_error", &v, &err) == KG_OK &&
             v == KG_VERDICT_COMPILE_ERROR);
    KG_CHECK(kg_verdict_parse("passed", &v, &err) == KG_ERR_INVALID);

    /* a bad verdict code in a batch names the record */
    int32_t verdict[] = {KG_VERDICT_CORRECT, 42};
    kg_outcome_columns cols = {2, verdict, NULL, NULL, NULL, NULL};
    double out[2];
    KG_CHECK(kg_reward_batch(&cfg, &cols, NULL, NULL, out, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "record 1") != NULL);
    /* duplicate turns of one trajectory */
    int64_t traj[] = {1, 1};
    int32_t turn[] = {1, 1};
    verdict[1] = KG_VERDICT_INCORRECT;
    KG_CHECK(kg_reward_batch(&cfg, &cols, traj, turn, out, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "both turn 1") != NULL);
}

/* Dr. Kernel re-evaluates when the speedup exceeds its cap 3 (strictly),
 * whatever the verdict; an unmeasured speedup never triggers. */
static void test_reeval_rule(void)
{
    kg_eval_outcome o = {KG_VERDICT_CORRECT, 0, 1.0, 3.0, 0.5};
    KG_CHECK(!kg_reeval_wanted(&o, 3.0)); /* 3 is not above 3 */
    o.speedup = 3.0001;
    KG_CHECK(kg_reeval_wanted(&o, 3.0));
    KG_CHECK(!kg_reeval_wanted(&o, 0.0)); /* 0: never */
    KG_CHECK(!kg_reeval_wanted(&o, 4.0));
    o.verdict = KG_VERDICT_HACKED;
    o.hacked = 1;
    o.speedup = 9.0;
    KG_CHECK(kg_reeval_wanted(&o, 3.0));
    o.speedup = NAN;
    KG_CHECK(!kg_reeval_wanted(&o, 3.0));
    KG_CHECK(!kg_reeval_wanted(NULL, 3.0));
}

static const kg_test_case cases[] = {
    {"reeval_rule", test_reeval_rule},
    {"drkernel_hand_computed", test_drkernel_hand_computed},
    {"staged_tritonrl_speedup", test_staged_tritonrl_speedup},
    {"penalties", test_penalties},
    {"batch_finds_previous_turn", test_batch_finds_previous_turn},
    {"bad_input", test_bad_input},
};

KG_TEST_MAIN("rl_reward", cases)
