/* test_rl_metrics.c — rates, Fast@p and geometric means per turn and as
 * best-of-turns on a hand-computed example; CPU results without timing; the
 * table, JSON and SVG renderings; bad input. */
#include "kg_test.h"
#include "kgym/rl.h"

#include <math.h>
#include <stdlib.h>

/* Three samples, two turns:
 *   s0: compile_error        -> correct S=2.0
 *   s1: correct S=1.1        -> incorrect
 *   s2: hacked (S=9 claimed) -> correct S=0.5 */
static const int32_t V[6] = {KG_VERDICT_COMPILE_ERROR, KG_VERDICT_CORRECT, KG_VERDICT_CORRECT,
                             KG_VERDICT_INCORRECT,     KG_VERDICT_HACKED,  KG_VERDICT_CORRECT};
static const double SP[6] = {NAN, 2.0, 1.1, NAN, 9.0, 0.5};
static const int64_t TR[6] = {0, 0, 1, 1, 2, 2};
static const int32_t TU[6] = {1, 2, 1, 2, 1, 2};

static void test_hand_computed(void)
{
    kg_outcome_columns cols = {6, V, NULL, NULL, SP, NULL};
    kg_metrics_report r;
    kg_error err;
    int rc = kg_metrics_compute(&cols, TR, TU, NULL, 0, &r, &err);
    KG_CHECK(rc == KG_OK);
    if (rc)
        return;
    KG_CHECK(r.samples == 3 && r.n_turns == 2 && r.n_thresholds == 5);
    const kg_turn_metrics *t1 = &r.per_turn[0], *t2 = &r.per_turn[1];
    KG_CHECK(t1->turn == 1 && t1->samples == 3);
    KG_CHECK_NEAR(t1->compile_rate, 1.0 / 3, 1e-12); /* compile_error, hacked: no */
    KG_CHECK_NEAR(t1->correct_rate, 1.0 / 3, 1e-12);
    KG_CHECK_NEAR(t1->hack_rate, 1.0 / 3, 1e-12);
    KG_CHECK_NEAR(t1->fast[0], 1.0 / 3, 1e-12); /* 1.1 >= 1 */
    KG_CHECK_NEAR(t1->fast[1], 0.0, 1e-12);     /* the hacked 9x counts for nothing */
    KG_CHECK_NEAR(t1->geomean_speedup, 1.1, 1e-12);

    KG_CHECK_NEAR(t2->compile_rate, 1.0, 1e-12);
    KG_CHECK_NEAR(t2->correct_rate, 2.0 / 3, 1e-12);
    KG_CHECK_NEAR(t2->hack_rate, 0.0, 1e-12);
    KG_CHECK_NEAR(t2->fast[0], 1.0 / 3, 1e-12);
    KG_CHECK_NEAR(t2->fast[3], 1.0 / 3, 1e-12); /* 2.0 >= 2: the bound counts */
    KG_CHECK_NEAR(t2->fast[4], 0.0, 1e-12);
    KG_CHECK_NEAR(t2->geomean_speedup, 1.0, 1e-12); /* sqrt(2 · 0.5) */

    const kg_turn_metrics *b1 = &r.best_of[0], *b2 = &r.best_of[1];
    KG_CHECK_NEAR(b1->correct_rate, t1->correct_rate, 1e-12);
    KG_CHECK_NEAR(b1->fast[0], t1->fast[0], 1e-12);
    /* best of turns 1..2: s0 2.0, s1 1.1, s2 0.5 */
    KG_CHECK_NEAR(b2->correct_rate, 1.0, 1e-12);
    KG_CHECK_NEAR(b2->compile_rate, 1.0, 1e-12); /* s2 compiled at turn 2 */
    KG_CHECK_NEAR(b2->hack_rate, 1.0 / 3, 1e-12);
    KG_CHECK_NEAR(b2->fast[0], 2.0 / 3, 1e-12);
    KG_CHECK_NEAR(b2->fast[1], 1.0 / 3, 1e-12);
    KG_CHECK_NEAR(b2->geomean_speedup, cbrt(2.0 * 1.1 * 0.5), 1e-12);
    KG_CHECK(b2->timed_correct == 3);

    kg_metrics_report_free(&r);

    /* s3 starts at turn 2 (a timeout) and s0 has no turn 2: best-of turn 1
     * divides by all 4 samples (s3 is a failure there), per turn 2 by the 3
     * that have it; a timeout never compiled */
    const int32_t v[5] = {KG_VERDICT_CORRECT, KG_VERDICT_INCORRECT, KG_VERDICT_CORRECT,
                          KG_VERDICT_TIMEOUT, KG_VERDICT_CORRECT};
    const double sp[5] = {1.5, NAN, 1.0, NAN, 2.0};
    const int64_t tr[5] = {0, 1, 1, 2, 3};
    const int32_t tu[5] = {1, 1, 2, 2, 2};
    kg_outcome_columns c2 = {5, v, NULL, NULL, sp, NULL};
    rc = kg_metrics_compute(&c2, tr, tu, NULL, 0, &r, &err);
    KG_CHECK(rc == KG_OK);
    if (rc)
        return;
    KG_CHECK(r.samples == 4 && r.best_of[0].samples == 4 && r.per_turn[1].samples == 3);
    KG_CHECK_NEAR(r.best_of[0].correct_rate, 1.0 / 4, 1e-12);
    KG_CHECK_NEAR(r.best_of[0].fast[0], 1.0 / 4, 1e-12);
    KG_CHECK_NEAR(r.best_of[0].compile_rate, 2.0 / 4, 1e-12);
    KG_CHECK_NEAR(r.per_turn[1].compile_rate, 2.0 / 3, 1e-12);
    KG_CHECK_NEAR(r.best_of[1].correct_rate, 3.0 / 4, 1e-12);
    KG_CHECK_NEAR(r.best_of[1].fast[3], 1.0 / 4, 1e-12); /* only s3's 2.0 */
    kg_metrics_report_free(&r);
    rc = kg_metrics_compute(&cols, TR, TU, NULL, 0, &r, &err);
    KG_CHECK(rc == KG_OK);
    if (rc)
        return;

    char *table = NULL, *json = NULL, *svg = NULL;
    KG_CHECK(kg_metrics_table(&r, &table, NULL) == KG_OK);
    KG_CHECK(table && strstr(table, "fast@1.2") && strstr(table, "Best of turns"));
    KG_CHECK(kg_metrics_json(&r, &json, NULL) == KG_OK);
    KG_CHECK(json && strstr(json, "\"best_of_turns\"") && strstr(json, "\"1.5\":"));
    KG_CHECK(kg_metrics_svg(&r, &svg, NULL) == KG_OK);
    size_t polylines = 0;
    for (const char *p = svg; p && (p = strstr(p, "<polyline")); p++)
        polylines++;
    KG_CHECK(svg && strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>"));
    KG_CHECK(polylines == 2 * r.n_thresholds);
    KG_CHECK(!strstr(svg, "No speedup was measured"));
    free(table);
    free(json);
    free(svg);
    kg_metrics_report_free(&r);
}

static void test_cpu_results_and_thresholds(void)
{
    /* no timing at all: correct counts, Fast@p and geomean cannot */
    int32_t v[3] = {KG_VERDICT_CORRECT, KG_VERDICT_CORRECT, KG_VERDICT_INVALID};
    int64_t traj[3] = {0, 1, 2};
    kg_outcome_columns cols = {3, v, NULL, NULL, NULL, NULL};
    const double p[2] = {1.0, 1.5};
    kg_metrics_report r;
    KG_CHECK(kg_metrics_compute(&cols, traj, NULL, p, 2, &r, NULL) == KG_OK);
    KG_CHECK(r.n_turns == 1 && r.per_turn[0].turn == 1 && r.n_thresholds == 2);
    KG_CHECK_NEAR(r.per_turn[0].correct_rate, 2.0 / 3, 1e-12);
    KG_CHECK_NEAR(r.per_turn[0].compile_rate, 2.0 / 3, 1e-12);
    KG_CHECK_NEAR(r.per_turn[0].fast[0], 0.0, 1e-12);
    KG_CHECK(isnan(r.per_turn[0].geomean_speedup) && r.per_turn[0].timed_correct == 0);
    char *json = NULL;
    KG_CHECK(kg_metrics_json(&r, &json, NULL) == KG_OK);
    KG_CHECK(json && strstr(json, "\"geomean_speedup\":null"));
    free(json);
    /* the chart says why every Fast@p is 0 (a timed run, above, carries no such note) */
    char *svg = NULL;
    KG_CHECK(kg_metrics_svg(&r, &svg, NULL) == KG_OK);
    KG_CHECK(svg && strstr(svg, "No speedup was measured") != NULL);
    free(svg);
    kg_metrics_report_free(&r);
}

static void test_bad_input(void)
{
    kg_error err;
    kg_metrics_report r;
    int32_t dup_turn[6] = {1, 1, 1, 2, 1, 2};
    kg_outcome_columns cols = {6, V, NULL, NULL, SP, NULL};
    KG_CHECK(kg_metrics_compute(&cols, TR, dup_turn, NULL, 0, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "both turn 1") != NULL);
    double sp[6] = {NAN, 2.0, 0.0, NAN, 9.0, 0.5};
    cols.speedup = sp;
    KG_CHECK(kg_metrics_compute(&cols, TR, TU, NULL, 0, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "record 2") != NULL);
    cols.speedup = SP;
    const double p[1] = {-1.0};
    KG_CHECK(kg_metrics_compute(&cols, TR, TU, p, 1, &r, &err) == KG_ERR_INVALID);
    /* an empty input is an empty report, not an error */
    kg_outcome_columns none = {0, V, NULL, NULL, NULL, NULL};
    KG_CHECK(kg_metrics_compute(&none, TR, TU, NULL, 0, &r, &err) == KG_OK);
    KG_CHECK(r.samples == 0 && r.n_turns == 0);
    kg_metrics_report_free(&r);
}

static const kg_test_case cases[] = {
    {"hand_computed", test_hand_computed},
    {"cpu_results_and_thresholds", test_cpu_results_and_thresholds},
    {"bad_input", test_bad_input},
};

KG_TEST_MAIN("rl_metrics", cases)
