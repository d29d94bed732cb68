/* test_tally.c — the one sum over results (eval/tally.h), which the service's counters and bench's summary
 * share: verdict counts (unknown verdicts and missing results apart), the reward sum and mean, the geometric mean
 * speedup of correct results only, stage seconds of stages that ran; on a hand-computed set of results. */
#include "kg_test.h"

#include <math.h>

#include "eval/tally.h"

static void add_text(kg_result_tally *t, const char *text)
{
    json_error_t e;
    json_t *r = json_loads(text, JSON_DECODE_ANY, &e);
    KG_CHECK(r != NULL);
    kg_result_tally_add(t, r);
    json_decref(r);
}

/* Six results and one job without a result:
 *   correct  reward 1.0  speedup 2.0  compile 100 ms, correctness 50 ms, timing 200 ms
 *   correct  reward 0.5  speedup 8.0  compile 300 ms, timing skipped (999 ms: not counted)
 *   incorrect reward 0.2 speedup 3.0 (not correct: no speedup counted)  compile 100 ms, an unknown stage, a stage
 *            without a status
 *   a verdict no list names, no reward
 *   correct  reward "x" (not a number)  speedup 0 (a broken timing: not counted)
 *   a result that is not an object
 *   no result (a job kgym could not evaluate) */
static void test_hand_computed(void)
{
    kg_result_tally t = {0};
    add_text(&t, "{\"verdict\":\"correct\",\"reward\":1.0,\"timing\":{\"speedup\":2.0},\"stages\":["
                 "{\"name\":\"compile\",\"status\":\"ok\",\"ms\":100},"
                 "{\"name\":\"correctness\",\"status\":\"ok\",\"ms\":50},"
                 "{\"name\":\"timing\",\"status\":\"ok\",\"ms\":200}]}");
    add_text(&t, "{\"verdict\":\"correct\",\"reward\":0.5,\"timing\":{\"speedup\":8.0},\"stages\":["
                 "{\"name\":\"compile\",\"status\":\"ok\",\"ms\":300},"
                 "{\"name\":\"timing\",\"status\":\"skipped\",\"ms\":999}]}");
    add_text(&t, "{\"verdict\":\"incorrect\",\"reward\":0.2,\"timing\":{\"speedup\":3.0},\"stages\":["
                 "{\"name\":\"compile\",\"status\":\"ok\",\"ms\":100},"
                 "{\"name\":\"warp_drive\",\"status\":\"ok\",\"ms\":5000},"
                 "{\"name\":\"static\",\"ms\":7000}]}");
    add_text(&t, "{\"verdict\":\"failed\"}");
    add_text(&t, "{\"verdict\":\"correct\",\"reward\":\"x\",\"timing\":{\"speedup\":0}}");
    add_text(&t, "\"not a result\"");
    kg_result_tally_add(&t, NULL);

    KG_CHECK(t.results == 6);
    KG_CHECK(t.missing == 1);
    KG_CHECK(t.verdicts[KG_VERDICT_CORRECT] == 3);
    KG_CHECK(t.verdicts[KG_VERDICT_INCORRECT] == 1);
    KG_CHECK(t.verdicts[KG_VERDICT_COUNT] == 2); /* "failed" and the non-object */
    long known = 0;
    for (int i = 0; i < KG_VERDICT_COUNT; i++)
        known += t.verdicts[i];
    KG_CHECK(known == 4);
    KG_CHECK_NEAR(kg_result_tally_rate(&t, KG_VERDICT_CORRECT), 3.0 / 6, 1e-12);
    KG_CHECK_NEAR(t.reward_sum, 1.7, 1e-12);
    KG_CHECK_NEAR(kg_result_tally_mean_reward(&t), 1.7 / 6, 1e-12);
    KG_CHECK(t.timed_correct == 2);
    KG_CHECK_NEAR(kg_result_tally_geomean_speedup(&t), 4.0, 1e-12); /* sqrt(2 * 8) */
    KG_CHECK_NEAR(kg_result_tally_stage_seconds(&t, KG_STAGE_COMPILE), 0.5, 1e-12);
    KG_CHECK(t.stage_runs[KG_STAGE_COMPILE] == 3);
    KG_CHECK_NEAR(kg_result_tally_stage_seconds(&t, KG_STAGE_TIMING), 0.2, 1e-12);
    KG_CHECK(t.stage_runs[KG_STAGE_TIMING] == 1);
    KG_CHECK_NEAR(kg_result_tally_stage_seconds(&t, KG_STAGE_CORRECTNESS), 0.05, 1e-12);
    KG_CHECK(t.stage_runs[KG_STAGE_CORRECTNESS] == 1);
    KG_CHECK(t.stage_runs[KG_STAGE_STATIC] == 0 && t.stage_ms_sum[KG_STAGE_STATIC] == 0);
    KG_CHECK(t.stage_runs[KG_STAGE_PARSE] == 0 && t.stage_runs[KG_STAGE_EXTRACT] == 0);
}

/* Nothing added: rates and means are 0, the geometric mean is not a number (bench prints null). */
static void test_empty(void)
{
    kg_result_tally t = {0};
    KG_CHECK(kg_result_tally_rate(&t, KG_VERDICT_CORRECT) == 0.0);
    KG_CHECK(kg_result_tally_mean_reward(&t) == 0.0);
    KG_CHECK(isnan(kg_result_tally_geomean_speedup(&t)));
    KG_CHECK(kg_result_tally_stage_seconds(&t, KG_STAGE_COMPILE) == 0.0);
    kg_result_tally_add(&t, NULL);
    KG_CHECK(t.results == 0 && t.missing == 1 && kg_result_tally_mean_reward(&t) == 0.0);
}

static const kg_test_case cases[] = {
    {"hand_computed", test_hand_computed},
    {"empty", test_empty},
};

KG_TEST_MAIN("tally", cases)
