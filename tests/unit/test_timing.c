/*
 * test_timing.c — kgym's side of the timing protocol on synthetic protocol
 * messages: per-round and pooled statistics, the speedup and its interval,
 * the re-measure decision, the supervisor-clock bound, the profile block and
 * the findings they lead to in a full result.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/internal.h"
#include "kg_facts.h"
#include "kg_test.h"
#include "eval/eval.h"

/* n samples around `mean` with a relative spread `spread` (deterministic: a
 * fixed zig-zag, so the CV is known). */
static json_t *samples(double mean, double spread, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(mean * (1.0 + spread * ((i % 2) ? 1 : -1))));
    return a;
}

/* One round: begin at t, end at t + elapsed, reference and candidate means. */
static void add_round(json_t *msgs, int r, double t, double elapsed, double ref, double cand, int n)
{
    json_array_append_new(msgs, json_pack("{s:s, s:i, s:s, s:f}", "type", "timing_round", "round", r, "status",
                                          "begin", "t_ms", t));
    json_array_append_new(msgs, json_pack("{s:s, s:i, s:s, s:f, s:o, s:o}", "type", "timing_round", "round", r,
                                          "status", "end", "t_ms", t + elapsed, "reference_ms",
                                          ref > 0 ? samples(ref, 0.01, n) : json_array(), "candidate_ms",
                                          samples(cand, 0.01, n)));
}

static json_t *final_message(const json_t *msgs)
{
    json_t *ref = json_array(), *cand = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "type")), "timing_round") ||
            strcmp(json_string_value(json_object_get(m, "status")), "end"))
            continue;
        json_array_extend(ref, json_object_get(m, "reference_ms"));
        json_array_extend(cand, json_object_get(m, "candidate_ms"));
    }
    return json_pack("{s:s, s:o, s:o, s:s}", "type", "timing", "reference_ms", ref, "candidate_ms", cand, "gpu",
                     "NVIDIA H100 80GB HBM3");
}

static json_t *setup_message(int planned)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:s, s:b, s:i}", "type", "timing_setup", "warmup", 10, "iters", 50,
                     "planned_rounds", planned, "reference_mode", "eager", "fresh_inputs", 1, "flush_bytes",
                     104857600);
}

static void stable_rounds_need_no_more(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 120, 1.0, 0.5, 50);
    add_round(msgs, 2, 400, 120, 1.0, 0.5, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    json_decref(msgs);
}

static void noisy_rounds_ask_for_more_until_the_budget(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    /* Speedups 2.0, 2.5, 1.8: a CV far above 2%. */
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 120, 1.0, 0.4, 50);
    add_round(msgs, 2, 400, 120, 0.9, 0.5, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    o.timing_cv_threshold = 0.5; /* the same rounds are stable enough under a loose threshold */
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    o.timing_cv_threshold = 0.02;
    add_round(msgs, 3, 600, 120, 1.0, 0.45, 50);
    add_round(msgs, 4, 800, 120, 1.0, 0.55, 50);
    add_round(msgs, 5, 1000, 120, 1.0, 0.35, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0); /* 6 rounds: the budget is spent */
    o.timing_max_rounds = 10;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    json_decref(msgs);
}

/* --timing-agree (the default: two planned rounds, 0.003): two rounds stand only where their speedups lie within the
 * spread; else a third, then the CV rule as before.  Speedups 2.000 and 2.010 (0.5% apart): a third under 0.3%, none
 * under 1%; with the option off, the CV (0.25%) is under 2% and two rounds stand either way. */
static void two_rounds_stand_only_where_they_agree(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    KG_CHECK(o.timing_rounds == 2 && o.timing_agree == 0.003);
    json_t *msgs = json_array();
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 120, 1.005, 0.5, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1); /* the default: 0.5% apart, a third round */
    o.timing_agree = 0;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0); /* off: the CV rule alone */
    o.timing_agree = 0.01;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    /* A third round that agrees: three rounds, the CV rule decides (0.3% spread is not asked about again). */
    o.timing_agree = 0.003;
    add_round(msgs, 2, 400, 120, 1.0025, 0.5, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    json_decref(msgs);
}

/* One round with device-wide times too: each call's device time is its stream time plus a gap (the reference's
 * the host's latency; a candidate's larger where it left work on another stream), cand_gaps[i] for call i. */
static void add_round_gapv(json_t *msgs, int r, double t, double ref, double ref_gap, double cand,
                           const double *cand_gaps, int n)
{
    json_t *rs = samples(ref, 0.01, n), *cs = samples(cand, 0.01, n), *rd = json_array(), *cd = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(rd, json_real(json_real_value(json_array_get(rs, i)) + ref_gap));
        json_array_append_new(cd, json_real(json_real_value(json_array_get(cs, i)) + cand_gaps[i]));
    }
    json_array_append_new(msgs, json_pack("{s:s, s:i, s:s, s:f}", "type", "timing_round", "round", r, "status",
                                          "begin", "t_ms", t));
    json_array_append_new(msgs, json_pack("{s:s, s:i, s:s, s:f, s:o, s:o, s:o, s:o}", "type", "timing_round",
                                          "round", r, "status", "end", "t_ms", t + 100, "reference_ms", rs,
                                          "reference_device_ms", rd, "candidate_ms", cs, "candidate_device_ms",
                                          cd));
}

/* add_round_gapv with one gap for every call of the candidate (n at most 64). */
static void add_round_gaps(json_t *msgs, int r, double t, double ref, double ref_gap, double cand, double cand_gap,
                           int n)
{
    double gaps[64];
    for (int i = 0; i < n && i < 64; i++)
        gaps[i] = cand_gap;
    add_round_gapv(msgs, r, t, ref, ref_gap, cand, gaps, n < 64 ? n : 64);
}

/* The final "timing" message of the rounds so far, device-wide samples included. */
static json_t *final_with_device_times(const json_t *msgs)
{
    json_t *final = final_message(msgs), *rd = json_array(), *cd = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (json_object_get(m, "candidate_device_ms")) {
            json_array_extend(rd, json_object_get(m, "reference_device_ms"));
            json_array_extend(cd, json_object_get(m, "candidate_device_ms"));
        }
    }
    json_object_set_new(final, "reference_device_ms", rd);
    json_object_set_new(final, "candidate_device_ms", cd);
    return final;
}

/* Every round's speedup on one clock, the pooled samples' (the reported figure's): round 0's candidate left work
 * on another stream (a 0.2 ms gap: device times), round 1's did not (0.005 ms).  Round by round, round 0 on device
 * times (1.015 / 0.9 = 1.1278) and round 1 on stream times (1 / (0.9 / 1.015) = 1.1278) agree; on the pooled
 * samples' device clock (median gap 0.1 ms) round 1 is 1.015 / (0.9 / 1.015 + 0.005) = 1.1383, 0.93% apart: a third
 * round, and the result lists the two speedups that asked for it. */
static void rounds_use_the_figures_clock(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(2));
    add_round_gaps(msgs, 0, 0, 1.0, 0.015, 0.7, 0.2, 8);
    add_round_gaps(msgs, 1, 200, 1.0, 0.015, 0.9 / 1.015, 0.005, 8);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    json_array_append_new(msgs, final_with_device_times(msgs));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(t && json_is_object(t));
    json_t *rounds = json_object_get(t, "rounds");
    KG_CHECK(json_array_size(rounds) == 2);
    double a = json_number_value(json_object_get(json_array_get(rounds, 0), "speedup"));
    double b = json_number_value(json_object_get(json_array_get(rounds, 1), "speedup"));
    KG_CHECK(fabs(a - 1.015 / 0.9) < 1e-9 && fabs(b - 1.015 / (0.9 / 1.015 + 0.005)) < 1e-9);
    KG_CHECK(!strcmp(json_string_value(json_object_get(t, "clock_basis")), "device"));
    json_decref(t);
    json_decref(msgs);
}

/* Two rounds that agree but lasted less than KG_TIMING_AGREE_MIN_SHARE of the planned budget on kgym's clock, or
 * less than KG_TIMING_AGREE_MIN_MS (90 ms), get a third: rounds sized from a padded warm-up's pace (3 calls of a
 * heavy kernel) may end before the GPU meets its power limit (red team 27).  Two rounds of 40 ms: a third; of 50 ms:
 * they stand; of 44 ms at the default 100 ms budget (0.3 x 2 x 100 = 60 ms): a third, the 90 ms being the GPU's
 * onset and not the budget's; of 50 ms at a 400 ms budget (240 ms): a third; with --timing-round-ms 0 (no budget),
 * or rounds that held all `iters` calls, they stand. */
static void short_rounds_get_a_third(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    add_round(msgs, 0, 0, 40, 1.0, 0.5, 3);
    add_round(msgs, 1, 100, 40, 1.0, 0.5, 3);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    o.timing_round_ms = 0;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    /* Rounds of every planned call (iters 3 here) were ended by the count, not sized by the pace: they stand. */
    o.timing_round_ms = 150;
    o.timing_iters = 3;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    json_decref(msgs);
    kg_eval_options_default(&o, "cuda:0");
    msgs = json_array();
    add_round(msgs, 0, 0, 50, 1.0, 0.5, 3);
    add_round(msgs, 1, 100, 50, 1.0, 0.5, 3);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    /* A third round of any length: three rounds, the CV rule alone. */
    add_round(msgs, 2, 200, 10, 1.0, 0.5, 3);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    json_decref(msgs);
    msgs = json_array();
    add_round(msgs, 0, 0, 50, 1.0, 0.5, 3);
    add_round(msgs, 1, 100, 50, 1.0, 0.5, 3);
    o.timing_round_ms = 400;
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    json_decref(msgs);
    kg_eval_options_default(&o, "cuda:0");
    KG_CHECK(o.timing_round_ms == 100);
    msgs = json_array();
    add_round(msgs, 0, 0, 44, 1.0, 0.5, 3);
    add_round(msgs, 1, 100, 44, 1.0, 0.5, 3);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    json_decref(msgs);
}

/* A timing_check message from the judge after `done` rounds. */
static json_t *check_message(int done, double t)
{
    return json_pack("{s:s, s:i, s:b, s:f}", "type", "timing_check", "rounds", done, "reply", 1, "t_ms", t);
}

/* Two planned rounds of n calls each lasting `elapsed` on kgym's clock (candidate means cand0, cand1; ref 0: the
 * rounds carry no reference samples), then the judge's timing_check. */
static json_t *two_rounds_then_a_check(double elapsed, double ref, double cand0, double cand1, int n)
{
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(2));
    add_round(msgs, 0, 0, elapsed, ref, cand0, n);
    add_round(msgs, 1, 200, elapsed, ref, cand1, n);
    json_array_append_new(msgs, check_message(2, 350));
    return msgs;
}

static const json_t *check_at(const json_t *t, size_t i)
{
    return json_array_get(json_object_get(t, "checks"), i);
}

static int check_is(const json_t *c, int rounds, int more, const char *reason, const char *basis)
{
    return c && json_integer_value(json_object_get(c, "rounds")) == rounds &&
           json_is_true(json_object_get(c, "more")) == more &&
           !strcmp(json_string_value(json_object_get(c, "reason")) ?: "", reason) &&
           !strcmp(json_string_value(json_object_get(c, "clock_basis")) ?: "", basis);
}

/* timing.checks: every timing_check, with kgym's answer and why, decided again over the messages that check saw.
 * Rounds 0 and 1 (stream speedups 2.0 and 2.0) are 9.8% apart on the device-wide clock (1.015 / 0.56 against
 * 1.015 / 0.615), which their pooled samples choose (candidate gaps 0.06 in round 0, 0.2 and 0.03 in round 1: median
 * 0.06 > 2 x 0.015 + 0.02): a third round, "disagree" on "device".  With round 2 (gap 0.005) the pooled median gap is 0.045: the figure and the rounds the
 * result lists are on the stream's clock, where the first two agree, and the second check ("stable") says so.  The
 * GPU timing suite met this (thirty-second session, the GEMM example: a third round for two rounds 0.06% apart on
 * the stream; on an H200 its basis flipped between runs, candidate gaps 0.037-0.086 ms). */
static void every_check_says_why(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(2));
    double g0[8] = {0.06, 0.06, 0.06, 0.06, 0.06, 0.06, 0.06, 0.06};
    double g1[8] = {0.2, 0.03, 0.2, 0.03, 0.2, 0.03, 0.2, 0.03};
    double g2[8] = {0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005};
    add_round_gapv(msgs, 0, 0, 1.0, 0.015, 0.5, g0, 8);
    add_round_gapv(msgs, 1, 200, 1.0, 0.015, 0.5, g1, 8);
    json_array_append_new(msgs, check_message(2, 350));
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1); /* what kgym answered then */
    add_round_gapv(msgs, 2, 400, 1.0, 0.015, 0.5, g2, 8);
    json_array_append_new(msgs, check_message(3, 550));
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0);
    json_array_append_new(msgs, final_with_device_times(msgs));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(t && json_array_size(json_object_get(t, "checks")) == 2);
    KG_CHECK(check_is(check_at(t, 0), 2, 1, "disagree", "device"));
    double spread = json_number_value(json_object_get(check_at(t, 0), "spread"));
    KG_CHECK(fabs(spread - (0.615 / 0.56 - 1)) < 1e-9);
    KG_CHECK(check_is(check_at(t, 1), 3, 0, "stable", "stream"));
    KG_CHECK(!strcmp(json_string_value(json_object_get(t, "clock_basis")) ?: "", "stream"));
    json_t *rounds = json_object_get(t, "rounds");
    KG_CHECK(json_array_size(rounds) == 3 &&
             fabs(json_number_value(json_object_get(json_array_get(rounds, 0), "speedup")) -
                  json_number_value(json_object_get(json_array_get(rounds, 1), "speedup"))) < 1e-9);
    json_decref(t);
    json_decref(msgs);

    /* The least-time rule: two short rounds that agree ("short", their time on kgym's clock), then a CV too high at
     * three rounds ("cv"). */
    msgs = two_rounds_then_a_check(40, 1.0, 0.5, 0.5, 3);
    add_round(msgs, 2, 400, 40, 1.0, 0.4, 3);
    json_array_append_new(msgs, check_message(3, 450));
    json_array_append_new(msgs, final_message(msgs));
    t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(t && json_array_size(json_object_get(t, "checks")) == 2);
    KG_CHECK(check_is(check_at(t, 0), 2, 1, "short", "stream"));
    KG_CHECK(fabs(json_number_value(json_object_get(check_at(t, 0), "lasted_ms")) - 80) < 1e-6);
    KG_CHECK(check_is(check_at(t, 1), 3, 1, "cv", "stream"));
    KG_CHECK(json_is_null(json_object_get(check_at(t, 1), "lasted_ms"))); /* three rounds: not read */
    json_decref(t);
    json_decref(msgs);

    /* Two short rounds that disagree: "disagree" (the spread is read before the least time, which is then not read). */
    msgs = two_rounds_then_a_check(40, 1.0, 0.5, 0.45, 3);
    json_array_append_new(msgs, final_message(msgs));
    t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(t && check_is(check_at(t, 0), 2, 1, "disagree", "stream"));
    KG_CHECK(json_is_null(json_object_get(check_at(t, 0), "lasted_ms")));
    json_decref(t);
    json_decref(msgs);

    /* The reference's samples from kgym (a cache hit, or the reference timed alone): the rounds carry the candidate's
     * only, and the checks are decided with the samples kgym supplied, as the live answer was (without them no
     * round has a speedup: "few_rounds" with 0 rounds). */
    msgs = two_rounds_then_a_check(120, 0, 0.5, 0.5, 50);
    json_array_append_new(msgs, final_message(msgs));
    json_t *cached = json_pack("{s:o}", "reference_ms", samples(1.0, 0.01, 50));
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, cached) == 0);
    t = kg_eval_timing_block(&o, msgs, cached, 0);
    KG_CHECK(t && check_is(check_at(t, 0), 2, 0, "stable", "stream"));
    KG_CHECK(fabs(json_number_value(json_object_get(t, "speedup")) - 2.0) < 1e-6);
    json_decref(t);
    json_decref(cached);
    json_decref(msgs);
}

/* The reference cache's protocol names the planned rounds: the reference alone is timed in that many rounds, so a
 * time kept from two (--timing-rounds 2) serves no evaluation of three (the red team of --timing-agree). */
static void reference_protocol_names_the_rounds(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *lookup = json_pack("{s:s, s:s, s:s, s:{s:i}}", "torch", "2.11", "triton", "3.6", "task_mode", "none",
                               "sizes", "batch_size", 16);
    kg_buf three = {0}, two = {0};
    o.timing_rounds = 3;
    KG_CHECK(kg_eval_reference_protocol(&o, lookup, &three) == KG_OK);
    o.timing_rounds = 2;
    KG_CHECK(kg_eval_reference_protocol(&o, lookup, &two) == KG_OK);
    KG_CHECK(three.data && two.data && strcmp(three.data, two.data) != 0);
    KG_CHECK(three.data && strstr(three.data, ";rounds=3;") != NULL);
    kg_buf_free(&three);
    kg_buf_free(&two);
    json_decref(lookup);
}

static void forged_rounds_do_not_count(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 120, 1.0, 0.25, 50);
    /* Only the first round carries the job's nonce. */
    json_object_set_new(json_array_get(msgs, 1), "nonce", json_string("secret"));
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1); /* both rounds: noisy */
    KG_CHECK(kg_eval_timing_more(&o, msgs, "secret", NULL) == 0); /* one round: nothing to compare */
    json_decref(msgs);
}

static void timing_block_has_rounds_speedup_and_interval(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(3));
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 110, 1.0, 0.5, 50);
    add_round(msgs, 2, 400, 100, 1.0, 0.5, 50);
    add_round(msgs, 3, 600, 100, 1.0, 0.5, 50);
    json_array_append_new(msgs, final_message(msgs));
    json_t *setup = json_array_get(msgs, 0), *final = json_array_get(msgs, json_array_size(msgs) - 1);
    json_object_set_new(setup, "input_mode", json_string("fresh_set_per_call"));
    json_object_set_new(setup, "canaries", json_true());
    json_object_set_new(final, "l2_persisting", json_pack("{s:{s:i, s:s}, s:{s:i, s:s}}", "judge", "max_bytes",
                                                          31457280, "reset", "ok", "runner", "max_bytes", 31457280,
                                                          "reset", "ok"));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(json_is_object(t));
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 2.0, 1e-9);
    json_t *ci = json_object_get(t, "speedup_ci");
    KG_CHECK(json_array_size(ci) == 2);
    double lo = json_number_value(json_array_get(ci, 0)), hi = json_number_value(json_array_get(ci, 1));
    KG_CHECK(lo <= 2.0 && hi >= 2.0 && hi - lo < 0.1);
    KG_CHECK(json_integer_value(json_object_get(t, "rounds_run")) == 4);
    KG_CHECK(json_integer_value(json_object_get(t, "remeasured")) == 1);
    KG_CHECK(json_array_size(json_object_get(t, "rounds")) == 4);
    json_t *r0 = json_array_get(json_object_get(t, "rounds"), 0);
    KG_CHECK_NEAR(json_number_value(json_object_get(r0, "supervisor_ms")), 120, 1e-9);
    /* 50 calls of 1.0 ms and 50 of 0.5 ms were reported in round 0. */
    KG_CHECK_NEAR(json_number_value(json_object_get(r0, "reported_ms")), 75.0, 1e-6);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t, "candidate_ms"), "cv")), 0.01 * sqrt(200.0 / 199),
                  1e-6);
    KG_CHECK(json_integer_value(json_object_get(json_object_get(t, "candidate_ms"), "samples")) == 200);
    KG_CHECK(json_is_false(json_object_get(t, "noisy")));
    KG_CHECK(json_is_false(json_object_get(t, "reference_cached")));
    KG_CHECK(!strcmp(json_string_value(json_object_get(t, "reference_samples")) ?: "", "interleaved"));
    KG_CHECK_STR(json_string_value(json_object_get(t, "reference_mode")), "eager");
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t, "clock"), "supervisor_ms")), 430, 1e-9);
    /* How the timed inputs were made and what the processes did about persisting L2 lines are carried. */
    KG_CHECK_STR(json_string_value(json_object_get(t, "input_mode")), "fresh_set_per_call");
    KG_CHECK(json_is_true(json_object_get(t, "canaries")));
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(t, "l2_persisting"), "runner"),
                                                   "reset")), "ok");
    json_decref(t);
    json_decref(msgs);
}

static void cached_reference_fills_in(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(3));
    add_round(msgs, 0, 0, 60, 0, 0.25, 50);
    add_round(msgs, 1, 100, 60, 0, 0.25, 50);
    json_array_append_new(msgs, final_message(msgs));
    json_t *cached = json_pack("{s:o}", "reference_ms", samples(1.0, 0.01, 150));
    /* The judge's account of its reference-alone timing (how its warm-up ended, rounds lost to a clock limit). */
    json_array_append_new(msgs, json_pack("{s:s, s:o, s:{s:[{s:i, s:f, s:s}], s:i}}", "type",
                                          kg_msg_name(KG_MSG_REFERENCE_TIMED), "reference_ms", samples(1.0, 0.01, 150),
                                          "alone", "warm", "calls", 9, "ms", 61.5, "ended", "settled", "lost", 1));
    json_t *t = kg_eval_timing_block(&o, msgs, cached, 0);
    KG_CHECK(json_is_true(json_object_get(t, "reference_cached")));
    KG_CHECK(!strcmp(json_string_value(json_object_get(t, "reference_samples")) ?: "", "cached"));
    /* cached: another evaluation's samples, so this message's account is not theirs */
    KG_CHECK(json_is_null(json_object_get(t, "reference_alone")));
    /* The same samples timed alone by this evaluation's judge (a miss): not the cache's, said so. */
    json_t *alone = kg_eval_timing_block(&o, msgs, cached, 1);
    KG_CHECK(json_is_false(json_object_get(alone, "reference_cached")));
    KG_CHECK(!strcmp(json_string_value(json_object_get(alone, "reference_samples")) ?: "", "alone"));
    json_t *facts = json_object_get(alone, "reference_alone");
    KG_CHECK(json_integer_value(json_object_get(facts, "lost")) == 1);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(facts, "warm"), 0), "ended")),
                 "settled");
    KG_CHECK_NEAR(json_number_value(json_object_get(alone, "speedup")), 4.0, 1e-9);
    json_decref(alone);
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 4.0, 1e-9);
    KG_CHECK(json_integer_value(json_object_get(json_object_get(t, "reference_ms"), "samples")) == 150);
    json_t *r1 = json_array_get(json_object_get(t, "rounds"), 1);
    KG_CHECK_NEAR(json_number_value(json_object_get(r1, "speedup")), 4.0, 1e-9);
    /* Without the cache's samples there is nothing to compare with. */
    json_t *none = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(json_is_null(none));
    json_decref(none);
    json_decref(t);
    json_decref(cached);
    json_decref(msgs);
}

static json_t *clock_block(double elapsed, double per_call, int calls)
{
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s, s:s, s:i, s:f}", "type", "clock_block", "status", "begin", "calls",
                                          calls, "t_ms", 1000.0));
    json_array_append_new(msgs, json_pack("{s:s, s:s, s:i, s:f, s:o}", "type", "clock_block", "status", "end",
                                          "calls", calls, "t_ms", 1000.0 + elapsed, "candidate_ms",
                                          samples(per_call, 0.0, calls)));
    return msgs;
}

/* The timing block carries the clock block as kgym saw it (its calls are the profile's too): the calls' median
 * beside the rounds' tells a block that ran another forward than the timed one; null where no block ran. */
static void timing_block_reports_the_clock_block(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(3));
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    add_round(msgs, 1, 200, 120, 1.0, 0.5, 50);
    json_t *none = kg_eval_timing_block(&o, msgs, NULL, 0);
    json_t *c = clock_block(45.0, 2.0, 20);
    json_array_extend(msgs, c);
    json_decref(c);
    json_array_append_new(msgs, final_message(msgs));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    json_t *b = json_object_get(t, "clock_block");
    KG_CHECK(json_is_object(b));
    KG_CHECK(json_integer_value(json_object_get(b, "calls")) == 20);
    KG_CHECK_NEAR(json_number_value(json_object_get(b, "median_ms")), 2.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(b, "reported_ms")), 40.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(b, "supervisor_ms")), 45.0, 1e-9);
    /* the rounds' candidate median (0.5 ms) is a quarter of the block's: both are in the block, side by side */
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t, "candidate_ms"), "median")), 0.5, 1e-9);
    json_decref(t);
    json_decref(msgs);
    /* rounds but no final message: no timing block at all; with one and no clock block, clock_block is null */
    KG_CHECK(json_is_null(none));
    json_decref(none);
    msgs = json_array();
    json_array_append_new(msgs, setup_message(3));
    add_round(msgs, 0, 0, 120, 1.0, 0.5, 50);
    json_array_append_new(msgs, final_message(msgs));
    t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(json_is_object(t) && json_is_null(json_object_get(t, "clock_block")));
    /* ... and no timing_check (the rounds were cut by a wrong output): timing.checks is an empty list */
    KG_CHECK(json_is_array(json_object_get(t, "checks")) && json_array_size(json_object_get(t, "checks")) == 0);
    json_decref(t);
    json_decref(msgs);
}

static void supervisor_clock_catches_a_faked_timer(void)
{
    /* 20 calls of 1 ms really took ~21 ms: honest. */
    json_t *msgs = clock_block(21.5, 1.0, 20);
    json_t *h = NULL;
    KG_CHECK(kg_eval_clock_finding(msgs, NULL, &h) == KG_OK);
    KG_CHECK(h == NULL);
    json_decref(h);
    json_decref(msgs);
    /* The same block reported as 20 calls of 0.01 ms: the timer lies. */
    msgs = clock_block(21.5, 0.01, 20);
    KG_CHECK(kg_eval_clock_finding(msgs, NULL, &h) == KG_OK);
    KG_CHECK(h != NULL);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "timer_discrepancy");
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(h, "evidence"), "supervisor_ms")), 21.5, 1e-9);
    json_decref(h);
    json_decref(msgs);
    /* A block too short to bound anything (tiny kernels, launch-bound): no finding either way. */
    msgs = clock_block(2.5, 0.001, 10);
    KG_CHECK(kg_eval_clock_finding(msgs, NULL, &h) == KG_OK);
    KG_CHECK(h == NULL);
    json_decref(h);
    json_decref(msgs);
}

static json_t *profile_message(double total, double mine, int calls)
{
    return json_pack("{s:s, s:i, s:f, s:f, s:i, s:i, s:[{s:s, s:f, s:i, s:b}, {s:s, s:f, s:i, s:b}], s:[s]}",
                     "type", "profile", "calls", calls, "total_device_us", total, "candidate_device_us", mine,
                     "kernel_count", 2, "candidate_kernel_count", 1,
                     "kernels", "name", "my_kernel", "device_us", mine, "count", calls, "candidate", 1, "name",
                     "at::native::vectorized_elementwise_kernel", "device_us", total - mine, "count", calls,
                     "candidate", 0,
                     "launched", "my_kernel");
}

static void profile_block_reports_coverage(void)
{
    json_t *msgs = json_array();
    json_array_append_new(msgs, profile_message(400, 100, 3));
    json_t *p = kg_eval_profile_block(msgs);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "coverage")), 0.25, 1e-12);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "kernel_coverage")), 0.5, 1e-12); /* 1 of 2 kernels */
    KG_CHECK(json_array_size(json_object_get(p, "kernels")) == 2);
    KG_CHECK(json_is_true(json_object_get(json_array_get(json_object_get(p, "kernels"), 0), "candidate")));
    json_decref(p);
    json_decref(msgs);
    msgs = json_array();
    p = kg_eval_profile_block(msgs);
    KG_CHECK(json_is_null(p));
    json_decref(p);
    json_decref(msgs);
}

/* A whole child report of a correct GPU run with timing and a profile: the result's blocks, and the
 * findings a coverage floor and a faked timer lead to. */
static json_t *gpu_result_block_after(const kg_eval_options *o, json_t *profile, double clock_per_call, int after);

static json_t *gpu_result_profiled(const kg_eval_options *o, json_t *profile, double clock_per_call)
{
    return gpu_result_block_after(o, profile, clock_per_call, 3);
}

/* gpu_result_profiled with the clock block and its profile after round `after` (0-2: between rounds, as the judge
 * runs it after a planned round drawn at random; 3: after the last, as it did before). */
static json_t *gpu_result_block_after(const kg_eval_options *o, json_t *profile, double clock_per_call, int after)
{
    json_t *msgs = json_array();
    const char *stages[] = {"parse", "static", "compile", "tiny_run", "correctness", "timing"};
    double t = 0;
    for (size_t i = 0; i < 6; i++) {
        json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:f}", "type", "stage", "stage", stages[i], "status",
                                              "begin", "t_ms", t));
        if (!strcmp(stages[i], "correctness")) {
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:{s:b, s:b, s:i}, s:f, s:f}", "type", "variant",
                                                  "name", "base", "status", "ran", "compare", "shape_ok", 1,
                                                  "dtype_ok", 1, "mismatches", 0, "atol", 1e-4, "rtol", 1e-4));
        }
        if (!strcmp(stages[i], "timing")) {
            json_array_append_new(msgs, setup_message(3));
            for (int r = 0; r <= 3; r++) {
                if (r == after) {
                    json_t *c = clock_block(21.5, clock_per_call, 20);
                    json_array_extend(msgs, c);
                    json_decref(c);
                    json_array_append_new(msgs, profile);
                }
                if (r < 3)
                    add_round(msgs, r, t + 200 * r, 120, 1.0, 0.5, 50);
            }
            json_array_append_new(msgs, final_message(msgs));
        }
        t += 600;
        json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:f, s:f, s:s}", "type", "stage", "stage", stages[i],
                                              "status", "ok", "t_ms", t, "ms", 10.0, "detail", ""));
    }
    json_array_append_new(msgs, json_pack("{s:s}", "type", "done"));
    kg_test_complete_facts(msgs, 1);
    kg_child_report rep;
    memset(&rep, 0, sizeof rep);
    rep.end = KG_END_COMPLETED;
    rep.messages = msgs;
    kg_task task = {.path = "task.py", .id = "task", .name = "task", .source = "x"};
    kg_eval_request req = {.task = &task, .response = "", .response_len = 0};
    json_t *result = NULL;
    kg_error err;
    json_t *extract = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "ok", "ms", 0.1, "detail", "");
    int rc = kg_eval_build_result(o, &req, &rep, "candidate.py", extract, &result, &err);
    KG_CHECK(rc == KG_OK);
    json_decref(extract);
    json_decref(msgs);
    return result;
}

/* gpu_result_profiled with a profile of 3 calls, 400 us of kernels of which `coverage_mine` the candidate's (< 0: a
 * profile emptied of kernel time). */
static json_t *gpu_result(const kg_eval_options *o, double coverage_mine, double clock_per_call)
{
    return gpu_result_profiled(o, coverage_mine < 0 ? profile_message(0, 0, 3) : profile_message(400, coverage_mine, 3),
                               clock_per_call);
}

static void result_carries_timing_profile_and_findings(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *r = gpu_result(&o, 380, 1.0);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(r, "timing"), "speedup")), 2.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(r, "profile"), "coverage")), 0.95, 1e-9);
    json_decref(r);

    /* Coverage 25% under a 50% floor: the work is PyTorch's. */
    o.coverage_floor = 0.5;
    r = gpu_result(&o, 100, 1.0);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                 "low_coverage");
    json_decref(r);
    /* A profile with no kernel time at all (suppressed in the runner, where the profiler lives): unknown coverage
     * fails closed under a floor. */
    r = gpu_result(&o, -1, 1.0);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                 "low_coverage");
    json_decref(r);
    o.coverage_floor = 0;
    r = gpu_result(&o, 100, 1.0); /* no floor: the same profile is only reported */
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    json_decref(r);
    /* Without a floor an emptied profile is no hack, but the profile was asked for and says nothing: the run is
     * not judged, never correct (fail closed). */
    r = gpu_result(&o, -1, 1.0);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "runtime_error");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "unjudged"), 0), "fact")),
                 "profile");
    json_decref(r);

    /* The clock block reported 100x faster than kgym's clock saw. */
    r = gpu_result(&o, 380, 0.01);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                 "timer_discrepancy");
    KG_CHECK(json_integer_value(json_object_get(r, "reward")) == 0);
    json_decref(r);
}


/* Red team 30: a forward that pads its own kernel only where its inputs repeat (the clock block's calls, which the
 * profile covers) reads a high share over the profiled calls, but the library kernels' time a call (0.3 ms) is
 * time of a timed call too (0.5 ms median: add_round's candidate), so at most 40% of a timed call can be its own. */
static void coverage_is_bounded_by_the_timed_calls(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    o.coverage_floor = 0.5;
    /* 20 profiled calls of 2.9 ms: its kernel 0.2 + 2.4 padding, the library 0.3 ms */
    json_t *r = gpu_result_profiled(&o, profile_message(58000, 52000, 20), 1.0);
    json_t *p = json_object_get(r, "profile");
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "profiled_share")), 52.0 / 58.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "timed_bound")), 0.4, 1e-9);
    /* 0.4 by timed_bound alone; 0 since red team 31: its profiled calls (2.9 ms of kernels) are 5.8 timed medians */
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "coverage")), 0.0, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    json_t *h = json_array_get(json_object_get(r, "hacks"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "low_coverage");
    KG_CHECK(strstr(json_string_value(json_object_get(h, "message")) ?: "", "timed call") != NULL);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(h, "evidence"), "profiled_share")), 52.0 / 58.0, 1e-9);
    json_decref(r);
    /* The honest forward of the same numbers (no padding: 0.2 + 0.3 ms a call) reads 40% either way. */
    r = gpu_result_profiled(&o, profile_message(10000, 4000, 20), 1.0);
    p = json_object_get(r, "profile");
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "profiled_share")), 0.4, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "coverage")), 0.4, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    json_decref(r);
    /* A forward whose library kernels are a small part of a timed call keeps its profiled share (the bound is
     * looser): 20 calls, 0.05 ms of library a call against a 0.5 ms median, share 0.8. */
    r = gpu_result_profiled(&o, profile_message(5000, 4000, 20), 1.0);
    p = json_object_get(r, "profile");
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "timed_bound")), 0.9, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "coverage")), 0.8, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    json_decref(r);
    /* Only a profile, nothing timed (the profile block alone): the share, unbounded. */
    json_t *msgs = json_array();
    json_array_append_new(msgs, profile_message(58000, 52000, 20));
    kg_eval_coverage_facts cov;
    KG_CHECK(kg_eval_coverage(msgs, &cov) == 1);
    KG_CHECK(isnan(cov.timed_bound));
    KG_CHECK_NEAR(cov.coverage, 52.0 / 58.0, 1e-9);
    json_decref(msgs);
}

/* Red team 31: a forward that counts its calls (static state is in the language) runs library kernels in its timed
 * calls (0.1 ms of its own + 0.4 ms of library: the 0.5 ms median, coverage 0.2) and none in the clock block, the
 * window's last calls, which the profile covers: 20 calls of 0.9 ms, all its own.  The profiled share is 1 and
 * timed_bound 1 (no library time a profiled call), so the floor passed; the profiled calls' kernels, 1.8 timed
 * medians a call, are not the timed forward's. */
static void a_profile_heavier_than_the_timed_calls_is_not_theirs(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    o.coverage_floor = 0.5;
    json_t *r = gpu_result_profiled(&o, profile_message(18000, 18000, 20), 1.0);
    json_t *p = json_object_get(r, "profile");
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "profiled_share")), 1.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "timed_bound")), 1.0, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "profiled_ms_per_call")), 0.9, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(p, "coverage")), 0.0, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    json_t *h = json_array_get(json_object_get(r, "hacks"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "low_coverage");
    KG_CHECK(strstr(json_string_value(json_object_get(h, "message")) ?: "", "not the one timed") != NULL);
    json_decref(r);
    /* An honest profile of the same forward on a warm L2 (0.45 ms a call, all its own) keeps its coverage; so does
     * one up to KG_PROFILE_TIMED_RATIO timed medians a call (a clock drop between the rounds and the block). */
    r = gpu_result_profiled(&o, profile_message(9000, 9000, 20), 1.0);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(r, "profile"), "coverage")), 1.0, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    json_decref(r);
    r = gpu_result_profiled(&o, profile_message(12000, 12000, 20), 1.0); /* 1.2 timed medians */
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(r, "profile"), "coverage")), 1.0, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    json_decref(r);
    r = gpu_result_profiled(&o, profile_message(13000, 13000, 20), 1.0); /* 1.3: over KG_PROFILE_TIMED_RATIO */
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    json_decref(r);
    /* Fills and copies count in the call's kernels (set aside from the share, not from the forward's time). */
    json_t *prof = profile_message(9000, 9000, 20);
    json_object_set_new(prof, "copy_device_us", json_real(9000));
    r = gpu_result_profiled(&o, prof, 1.0);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(r, "profile"), "coverage")), 0.0, 1e-9);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "hacked");
    json_decref(r);
}

/* The timing window's lines as the judge sends them (child.py timing), on kgym's clock: one exclusive window
 * (gpu_acquire timing_round), `rounds` rounds of 50 calls (each begun by gpu_purpose timing_round, 100 ms on kgym's
 * clock) with the candidate means `cand`, and, when `after` >= 0, the clock block (gpu_purpose clock_block, 20 calls
 * of `per_call` ms that kgym saw take 21.5 ms) and its profile (gpu_purpose profile, then the profile line) after
 * `after` rounds; with `final`, the timing line and the window's release.  Every segment lasts the same wherever
 * the block is, so what kgym reads from the lines should not depend on `after`.  Every line carries `nonce`. */
static void stamp(json_t *msgs, const char *nonce);

static json_t *window_lines(int rounds, const double *cand, int after, double per_call, json_t *profile, int final,
                            const char *nonce)
{
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(rounds));
    json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:f}", "type", "gpu_acquire", "mode", "exclusive",
                                          "purpose", "timing_round", "t_ms", 0.0));
    double t = 0;
    for (int r = 0; r <= rounds; r++) {
        if (r == after) {
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:f}", "type", "gpu_purpose", "purpose", "clock_block",
                                                  "t_ms", t));
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:i, s:f}", "type", "clock_block", "status", "begin",
                                                  "calls", 20, "t_ms", t + 2));
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:i, s:f, s:o}", "type", "clock_block", "status", "end",
                                                  "calls", 20, "t_ms", t + 23.5, "candidate_ms",
                                                  samples(per_call, 0.0, 20)));
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:f}", "type", "gpu_purpose", "purpose", "profile",
                                                  "t_ms", t + 24.5));
            json_t *p = json_deep_copy(profile);
            json_object_set_new(p, "t_ms", json_real(t + 30));
            json_array_append_new(msgs, p);
            t += 40;
        }
        if (r == rounds)
            break;
        json_array_append_new(msgs, json_pack("{s:s, s:s, s:f}", "type", "gpu_purpose", "purpose", "timing_round",
                                              "t_ms", t));
        add_round(msgs, r, t + 5, 100, 1.0, cand[r], 50);
        t += 110;
    }
    if (final) {
        json_t *f = final_message(msgs);
        json_object_set_new(f, "t_ms", json_real(t));
        json_array_append_new(msgs, f);
        json_array_append_new(msgs, json_pack("{s:s, s:f}", "type", "gpu_release", "t_ms", t));
    }
    stamp(msgs, nonce);
    return msgs;
}

/* The clock block and its profile now run after a planned round drawn at random (child.py timing, block_after), so
 * their lines can come between rounds: kgym's re-measuring decision, the supervisor-clock bound, the coverage, the
 * timing block and the exclusive time by purpose read the same from the lines wherever the block is.  Positions:
 * after round 0 or 1 (between), 2 (after the planned rounds: before kgym's timing_check, i.e. the end). */
static void the_clock_block_between_rounds_changes_nothing(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    KG_CHECK(o.timing_rounds == 2);
    /* varied: rounds of other candidate medians (0.45, 0.5, 0.55 ms; pooled median 0.5), so a figure read from the
     * rounds on one side of the block only would differ */
    const double stable[] = {0.5, 0.5, 0.5}, noisy[] = {0.5, 0.4, 0.5}, varied[] = {0.45, 0.55, 0.5};
    for (int planned = 2; planned <= 3; planned++) {
        /* What kgym answers at timing_check (after the planned rounds; the block is among them, or still to come) */
        for (int after = -1; after < planned; after++) {
            json_t *prof = profile_message(400, 380, 20);
            json_t *m = window_lines(planned, stable, after, 1.0, prof, 0, "n0");
            KG_CHECK(kg_eval_timing_more(&o, m, "n0", NULL) == 0);
            json_decref(m);
            m = window_lines(planned, noisy, after, 1.0, prof, 0, "n0");
            KG_CHECK(kg_eval_timing_more(&o, m, "n0", NULL) == 1);
            json_decref(m);
            json_decref(prof);
        }
    }
    o.coverage_floor = 0.5;
    const struct {
        double per_call, total, mine;
    } cases[] = {
        {1.0, 400, 380},      /* honest: coverage 0.95, no finding */
        {0.01, 400, 380},     /* the timer forged: timer_discrepancy */
        {1.0, 400, 100},      /* PyTorch does the work: low_coverage */
        {1.0, 13000, 13000},  /* the profiled forward 1.3 timed medians a call: not the timed one (red team 31) */
        {1.0, 58000, 52000},  /* padding in the block only: bounded by the timed calls (red team 30) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        json_t *prof = profile_message(cases[c].total, cases[c].mine, 20);
        json_t *end = window_lines(3, varied, 3, cases[c].per_call, prof, 1, "n0");
        json_t *t_end = kg_eval_timing_block(&o, end, NULL, 0), *g_end = kg_eval_gpu_block(end),
               *p_end = kg_eval_profile_block(end), *h_end = NULL;
        KG_CHECK(kg_eval_clock_finding(end, "n0", &h_end) == KG_OK);
        KG_CHECK((h_end != NULL) == (cases[c].per_call < 0.5));
        kg_eval_coverage_facts cov_end;
        KG_CHECK(kg_eval_coverage(end, &cov_end) == 1);
        KG_CHECK(json_integer_value(json_object_get(t_end, "rounds_run")) == 3);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(t_end, "clock_block"), "calls")) == 20);
        KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t_end, "clock_block"), "supervisor_ms")), 21.5,
                      1e-9);
        const json_t *by = json_object_get(json_object_get(g_end, "exclusive"), "by_purpose");
        KG_CHECK_NEAR(json_number_value(json_object_get(by, "timing_round")), 330, 1e-9);
        KG_CHECK_NEAR(json_number_value(json_object_get(by, "clock_block")), 24.5, 1e-9);
        KG_CHECK_NEAR(json_number_value(json_object_get(by, "profile")), 15.5, 1e-9);
        for (int after = 0; after < 3; after++) {
            json_t *mid = window_lines(3, varied, after, cases[c].per_call, prof, 1, "n0");
            json_t *t_mid = kg_eval_timing_block(&o, mid, NULL, 0), *g_mid = kg_eval_gpu_block(mid),
                   *p_mid = kg_eval_profile_block(mid), *h_mid = NULL;
            KG_CHECK(json_equal(t_mid, t_end));
            KG_CHECK(json_equal(g_mid, g_end));
            KG_CHECK(json_equal(p_mid, p_end));
            KG_CHECK(kg_eval_clock_finding(mid, "n0", &h_mid) == KG_OK);
            KG_CHECK((h_mid == NULL && h_end == NULL) || (h_mid && h_end && json_equal(h_mid, h_end)));
            kg_eval_coverage_facts cov_mid;
            KG_CHECK(kg_eval_coverage(mid, &cov_mid) == 1);
            KG_CHECK(cov_mid.coverage == cov_end.coverage && cov_mid.share == cov_end.share &&
                     cov_mid.timed_bound == cov_end.timed_bound && cov_mid.heavier == cov_end.heavier &&
                     cov_mid.profiled_ms_per_call == cov_end.profiled_ms_per_call);
            json_decref(h_mid);
            json_decref(p_mid);
            json_decref(g_mid);
            json_decref(t_mid);
            json_decref(mid);
        }
        json_decref(h_end);
        json_decref(p_end);
        json_decref(g_end);
        json_decref(t_end);
        json_decref(end);
        /* ... and the verdict of a whole result, its timing and profile blocks, wherever the block is */
        json_t *r_end = gpu_result_block_after(&o, json_deep_copy(prof), cases[c].per_call, 3);
        const char *expect[] = {"correct", "hacked", "hacked", "hacked", "hacked"};
        KG_CHECK_STR(json_string_value(json_object_get(r_end, "verdict")), expect[c]);
        for (int after = 0; after < 3; after++) {
            json_t *r_mid = gpu_result_block_after(&o, json_deep_copy(prof), cases[c].per_call, after);
            KG_CHECK_STR(json_string_value(json_object_get(r_mid, "verdict")),
                         json_string_value(json_object_get(r_end, "verdict")));
            KG_CHECK(json_equal(json_object_get(r_mid, "hacks"), json_object_get(r_end, "hacks")));
            KG_CHECK(json_equal(json_object_get(r_mid, "timing"), json_object_get(r_end, "timing")));
            KG_CHECK(json_equal(json_object_get(r_mid, "profile"), json_object_get(r_end, "profile")));
            KG_CHECK(json_equal(json_object_get(r_mid, "reward"), json_object_get(r_end, "reward")));
            json_decref(r_mid);
        }
        json_decref(r_end);
        json_decref(prof);
    }
}

/* Each call timed to the stream's end event and to a device-wide synchronize.  An honest candidate's gap is the
 * reference's (host latency): the stream times are used.  A candidate that leaves 1 ms of work on another
 * stream shows a large gap: the device-wide times of both are used, and its "speedup" is gone. */
static json_t *two_clock_final(double ref, double cand, double ref_gap, double cand_gap)
{
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "type", "timing", "reference_ms", samples(ref, 0.01, 60),
                     "candidate_ms", samples(cand, 0.01, 60), "reference_device_ms", samples(ref + ref_gap, 0.01, 60),
                     "candidate_device_ms", samples(cand + cand_gap, 0.01, 60), "gpu", "NVIDIA H100");
}

static void side_stream_work_switches_to_device_times(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, two_clock_final(1.0, 0.5, 0.03, 0.035));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), "stream");
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 2.0, 1e-9);
    json_decref(t);
    json_decref(msgs);

    msgs = json_array();
    json_array_append_new(msgs, two_clock_final(1.0, 0.01, 0.03, 1.0));
    t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), "device");
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 1.03 / 1.01, 1e-9);
    KG_CHECK(json_number_value(json_object_get(t, "candidate_gap_ms")) > 0.9);
    json_decref(t);
    json_decref(msgs);

    /* The driver answers the synchronize later after a long call (0.18-0.25 ms after 40 ms on an H200) than
     * after the reference's short one: an honest 40 ms candidate stays on the stream's clock (twice 0.03 + 0.02 +
     * 1.5% of 40 = 0.68 ms), one that leaves 1 ms behind does not, nor does a 1 ms one that leaves 0.1 ms. */
    const struct {
        double cand, cand_gap;
        const char *basis;
    } by_length[] = {{40.0, 0.22, "stream"}, {40.0, 1.0, "device"}, {1.0, 0.1, "device"}, {1.0, 0.09, "stream"}};
    for (size_t i = 0; i < sizeof by_length / sizeof *by_length; i++) {
        msgs = json_array();
        json_array_append_new(msgs, two_clock_final(1.0, by_length[i].cand, 0.03, by_length[i].cand_gap));
        t = kg_eval_timing_block(&o, msgs, NULL, 0);
        KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), by_length[i].basis);
        json_decref(t);
        json_decref(msgs);
    }

    /* A long reference's gap is not the base latency (red team 34): beside a 40 ms reference whose synchronize came
     * 0.2 ms after its calls, a 1 ms candidate that leaves 0.4 ms behind is on the device-wide clock (2 x 0.05 +
     * 0.02 + 1.5% of 1); an honest one (0.03 ms) is not.  (With the reference's own gap, 0.435 ms passed.) */
    const struct {
        double cand_gap;
        const char *basis;
    } beside_long[] = {{0.4, "device"}, {0.03, "stream"}, {0.13, "stream"}};
    for (size_t i = 0; i < sizeof beside_long / sizeof *beside_long; i++) {
        msgs = json_array();
        json_array_append_new(msgs, two_clock_final(40.0, 1.0, 0.2, beside_long[i].cand_gap));
        t = kg_eval_timing_block(&o, msgs, NULL, 0);
        KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), beside_long[i].basis);
        json_decref(t);
        json_decref(msgs);
    }

    /* A side kernel that ends inside the synchronize's latency leaves no gap beyond an honest one (3 us on an
     * H200): the clock block's profile, which found device time on another stream, moves both models to the
     * device-wide clock whatever the gap; none found, or the figure absent (a driver that cannot say), leaves the
     * gap to decide, unless the judge says the runner withheld it (side_stream_missing: the judge's driver gives
     * stream ids; red team 33 replaced the runner's cudashare.stream_id).  The profile block reports the figure. */
    const struct {
        const char *side; /* JSON, or NULL: no such field */
        int missing;      /* side_stream_missing: 1 true, 0 false, -1 absent */
        const char *basis;
    } by_profile[] = {{"3.0", -1, "device"},  {"0", -1, "stream"},   {NULL, -1, "stream"}, {"null", -1, "stream"},
                      {"\"9\"", -1, "stream"}, {"null", 1, "device"}, {NULL, 1, "device"}, {"null", 0, "stream"},
                      {"0", 0, "stream"}};
    for (size_t i = 0; i < sizeof by_profile / sizeof *by_profile; i++) {
        msgs = json_array();
        json_t *prof = json_pack("{s:s, s:i, s:f, s:f}", "type", "profile", "calls", 10, "total_device_us", 30.0,
                                 "candidate_device_us", 30.0);
        if (by_profile[i].side)
            json_object_set_new(prof, "side_stream_device_us", json_loads(by_profile[i].side, JSON_DECODE_ANY, NULL));
        if (by_profile[i].missing >= 0)
            json_object_set_new(prof, "side_stream_missing", json_boolean(by_profile[i].missing));
        json_array_append_new(msgs, prof);
        json_array_append_new(msgs, two_clock_final(0.0066, 0.0015, 0.024, 0.024));
        t = kg_eval_timing_block(&o, msgs, NULL, 0);
        KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), by_profile[i].basis);
        json_t *pb = kg_eval_profile_block(msgs);
        KG_CHECK(by_profile[i].side ? json_object_get(pb, "side_stream_device_us") != NULL
                                    : json_is_null(json_object_get(pb, "side_stream_device_us")));
        json_decref(pb);
        json_decref(t);
        json_decref(msgs);
    }
}

/* n call times: `hid` for the calls with i % period < hidden, `base` for the others. */
static json_t *mixed_calls(double base, double hid, int n, int period, int hidden)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(i % period < hidden ? hid : base));
    return a;
}

/* Red team 33: a candidate that leaves the whole call on a side stream in 2 calls of 5 (their stream time 0.01 ms,
 * their device time the full call) kept an honest MEDIAN gap, and so the stream clock, while the trimmed mean of
 * its stream times (the speedup) fell by a third: x1.59.  The gap is read by the trimmed mean now: device clock,
 * and the speedup is the honest one.  The honest candidate (every call on the stream) stays on the stream clock. */
static void side_streams_in_a_minority_of_calls_are_counted(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    double speedup[2];
    const char *basis[2] = {"stream", "device"};
    for (int hidden = 0; hidden <= 2; hidden += 2) {
        json_t *msgs = json_array();
        json_array_append_new(msgs, json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "type", "timing", "reference_ms",
                                              mixed_calls(2.0, 2.0, 100, 5, 0), "reference_device_ms",
                                              mixed_calls(2.03, 2.03, 100, 5, 0), "candidate_ms",
                                              mixed_calls(1.0, 0.01, 100, 5, hidden), "candidate_device_ms",
                                              mixed_calls(1.03, 1.03, 100, 5, hidden), "gpu", "NVIDIA H200"));
        json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
        KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), basis[hidden / 2]);
        speedup[hidden / 2] = json_number_value(json_object_get(t, "speedup"));
        json_decref(t);
        json_decref(msgs);
    }
    KG_CHECK_NEAR(speedup[0], 2.0, 1e-9);
    KG_CHECK_NEAR(speedup[1], 2.03 / 1.03, 1e-9); /* no gain: both on the device-wide clock */

    /* During the run kgym reads only its harness's messages (the job's nonce): a profile line without it does not
     * move a live timing_check to the device-wide clock (it did: the profile was read unscreened). */
    json_t *msgs = json_array();
    add_round_gaps(msgs, 0, 0, 0.10, 0.03, 0.05, 0.03, 50);
    add_round_gaps(msgs, 1, 200, 0.10, 0.03, 0.05, 0.04, 50);
    stamp(msgs, "n0");
    int before = kg_eval_timing_more(&o, msgs, "n0", NULL);
    json_array_append_new(msgs, json_pack("{s:s, s:f}", "type", "profile", "side_stream_device_us", 1.0));
    KG_CHECK(kg_eval_timing_more(&o, msgs, "n0", NULL) == before);
    json_array_append_new(msgs, json_pack("{s:s, s:f, s:s}", "type", "profile", "side_stream_device_us", 1.0,
                                          "nonce", "n0"));
    KG_CHECK(kg_eval_timing_more(&o, msgs, "n0", NULL) != before); /* the harness's own profile does */
    json_decref(msgs);
}

/* The final message of a candidate timed alone against samples kgym supplied: no reference samples of its own. */
static json_t *alone_final(double cand, double cand_gap)
{
    return json_pack("{s:s, s:[], s:[], s:o, s:o, s:s}", "type", "timing", "reference_ms", "reference_device_ms",
                     "candidate_ms", samples(cand, 0, 60), "candidate_device_ms", samples(cand + cand_gap, 0, 60),
                     "gpu", "NVIDIA H200");
}

/* Red team 33: the cache kept the reference's stream times only, so a candidate on the device-wide clock was
 * divided into them (charged the synchronize's latency the reference was not), and the gap rule took the
 * reference's gap to be a constant 0.05 ms.  The cache keeps the same calls' device-wide times now: the figure is
 * device against device (reference_clock "device"); an entry without them (from before) keeps the old reading, and
 * says its reference_clock is "stream". */
static void cached_device_times_keep_both_models_on_one_clock(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *with = json_pack("{s:o, s:o}", "reference_ms", samples(1.0, 0, 60), "reference_device_ms",
                             samples(1.05, 0, 60));
    json_t *without = json_pack("{s:o}", "reference_ms", samples(1.0, 0, 60));
    /* On the device-wide clock (the profile found side-stream time). */
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s, s:i, s:f, s:f, s:f}", "type", "profile", "calls", 10,
                                          "total_device_us", 30.0, "candidate_device_us", 30.0,
                                          "side_stream_device_us", 3.0));
    json_array_append_new(msgs, alone_final(0.5, 0.05));
    json_t *t = kg_eval_timing_block(&o, msgs, with, 0);
    KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), "device");
    KG_CHECK_STR(json_string_value(json_object_get(t, "reference_clock")), "device");
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 1.05 / 0.55, 1e-9);
    json_decref(t);
    t = kg_eval_timing_block(&o, msgs, without, 0);
    KG_CHECK_STR(json_string_value(json_object_get(t, "reference_clock")), "stream");
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 1.0 / 0.55, 1e-9);
    json_decref(t);
    json_decref(msgs);
    /* The gap rule does not take a long reference's own gap as the base latency (it would let a short candidate
     * hide that much): a 40 ms reference whose synchronize came 0.2 ms after its calls, a 1 ms candidate with a
     * 0.2 ms gap: device-wide clock (2 x 0.05 + 0.02 + 1.5% of 1 = 0.135), compared with the reference's
     * device-wide times; on the stream clock where its gap is honest. */
    json_decref(with);
    with = json_pack("{s:o, s:o}", "reference_ms", samples(40.0, 0, 60), "reference_device_ms",
                     samples(40.2, 0, 60));
    for (int hidden = 0; hidden <= 1; hidden++) {
        msgs = json_array();
        json_array_append_new(msgs, alone_final(1.0, hidden ? 0.2 : 0.03));
        t = kg_eval_timing_block(&o, msgs, with, 0);
        KG_CHECK_STR(json_string_value(json_object_get(t, "clock_basis")), hidden ? "device" : "stream");
        KG_CHECK_STR(json_string_value(json_object_get(t, "reference_clock")), hidden ? "device" : "stream");
        KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), hidden ? 40.2 / 1.2 : 40.0, 1e-9);
        json_decref(t);
        json_decref(msgs);
    }
    json_decref(with);
    json_decref(without);
}

/* GPU phases from the child's acquire/release lines and our stamps: a shared phase that waited 50 ms and held
 * 100; two exclusive timing rounds (200 and 300 ms), a profile (40 ms) ended by the next acquire rather than a
 * release, a clock block ended by the next acquire (155 ms), and one window whose purpose changes inside it. */
static void gpu_phases_sum_held_time_by_purpose(void)
{
    json_t *msgs = json_array();
    const struct {
        const char *type, *mode, *purpose;
        double t, waited;
    } lines[] = {
        {"gpu_acquire", "shared", "compile", 0, 50}, {"gpu_release", NULL, NULL, 150, 0},
        {"gpu_acquire", "exclusive", "timing_round", 200, 10}, {"gpu_release", NULL, NULL, 410, 0},
        {"gpu_acquire", "exclusive", "timing_round", 500, 0}, {"gpu_release", NULL, NULL, 800, 0},
        {"gpu_acquire", "exclusive", "profile", 900, 0}, {"gpu_acquire", "exclusive", "clock_block", 940, 5},
        {"variant", NULL, NULL, 1045, 0},
        /* one window, purposes switched inside it: 30 ms more of rounds, 20 of profile */
        {"gpu_acquire", "exclusive", "timing_round", 1100, 0}, {"gpu_purpose", NULL, "profile", 1130, 0},
        {"gpu_release", NULL, NULL, 1150, 0},
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        json_t *m = json_pack("{s:s, s:f}", "type", lines[i].type, "t_ms", lines[i].t);
        if (lines[i].mode)
            json_object_set_new(m, "mode", json_string(lines[i].mode));
        if (lines[i].purpose)
            json_object_set_new(m, "purpose", json_string(lines[i].purpose));
        if (lines[i].waited > 0)
            json_object_set_new(m, "waited_ms", json_real(lines[i].waited));
        if (!strcmp(lines[i].type, "gpu_release")) /* the judge's measured peak of each phase: the largest counts */
            json_object_set_new(m, "peak_bytes", json_integer(i == 3 ? 5000 : 1000));
        json_array_append_new(msgs, m);
    }
    json_t *g = kg_eval_gpu_block(msgs);
    KG_CHECK(json_integer_value(json_object_get(g, "peak_bytes")) == 5000);
    /* lines that name no stage count under their purpose: the 5000 was the first timing round's */
    KG_CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(g, "memory_by_stage"), "timing_round"),
                                                "peak_bytes")) == 5000);
    const json_t *sh = json_object_get(g, "shared"), *ex = json_object_get(g, "exclusive");
    KG_CHECK(json_integer_value(json_object_get(sh, "grants")) == 1);
    KG_CHECK_NEAR(json_number_value(json_object_get(sh, "held_ms")), 100, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(sh, "waited_ms")), 50, 1e-9);
    KG_CHECK(json_integer_value(json_object_get(ex, "grants")) == 5);
    KG_CHECK_NEAR(json_number_value(json_object_get(ex, "waited_ms")), 15, 1e-9);
    const json_t *by = json_object_get(ex, "by_purpose");
    KG_CHECK_NEAR(json_number_value(json_object_get(by, "timing_round")), 530, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(by, "profile")), 60, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(by, "clock_block")), 155, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(ex, "held_ms")), 745, 1e-9);
    /* Each mode's time per purpose (shared: the stage that asked) and its longest phase, whole: the window whose
     * purpose switched inside it is one phase (50 ms), under the purpose it was asked for. */
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(sh, "by_purpose"), "compile")), 100, 1e-9);
    KG_CHECK_NEAR(json_number_value(json_object_get(sh, "longest_ms")), 100, 1e-9);
    KG_CHECK(!strcmp(json_string_value(json_object_get(sh, "longest_purpose")) ?: "", "compile"));
    KG_CHECK_NEAR(json_number_value(json_object_get(ex, "longest_ms")), 300, 1e-9);
    KG_CHECK(!strcmp(json_string_value(json_object_get(ex, "longest_purpose")) ?: "", "timing_round"));
    KG_CHECK(json_object_get(g, "wind_down") == NULL); /* no wind_down line, no block */
    json_decref(g);
    /* The judge's wind_down line (its teardown's plan) comes through as its figures, nothing else of the line. */
    json_array_append_new(msgs, json_pack("{s:s, s:f, s:b, s:s, s:I, s:I, s:I, s:i}", "type", "wind_down", "t_ms",
                                          1200.0, "phased", 0, "why", "both hold little", "runner_bytes",
                                          (json_int_t)600 << 20, "judge_bytes", (json_int_t)900 << 20, "bound_bytes",
                                          (json_int_t)2 << 30, "runner_pid", 77));
    g = kg_eval_gpu_block(msgs);
    const json_t *wd = json_object_get(g, "wind_down");
    KG_CHECK(json_is_false(json_object_get(wd, "phased")));
    KG_CHECK(!strcmp(json_string_value(json_object_get(wd, "why")) ?: "", "both hold little"));
    KG_CHECK(json_integer_value(json_object_get(wd, "runner_bytes")) == (json_int_t)600 << 20);
    KG_CHECK(json_integer_value(json_object_get(wd, "judge_bytes")) == (json_int_t)900 << 20);
    KG_CHECK(json_integer_value(json_object_get(wd, "bound_bytes")) == (json_int_t)2 << 30);
    KG_CHECK(json_object_get(wd, "runner_pid") == NULL && json_object_size(wd) == 5);
    /* the phases' figures are those above */
    KG_CHECK(json_integer_value(json_object_get(json_object_get(g, "exclusive"), "grants")) == 5);
    json_decref(g);
    /* A phase that never ended (the child died holding it) is held to the last line, and can be the longest. */
    {
        /* Reservations and peaks per stage (the acquire's "stage", else its purpose): each stage's largest. */
        json_t *staged = json_array();
        const struct {
            const char *type, *stage;
            json_int_t reserve, peak;
        } st_lines[] = {{"gpu_acquire", "correctness", 800, 0}, {"gpu_release", NULL, 0, 700},
                        {"gpu_acquire", "correctness", 800, 0}, {"gpu_release", NULL, 0, 900},
                        {"gpu_acquire", "timing", 2400, 0},     {"gpu_release", NULL, 0, 1600},
                        {"gpu_acquire", NULL, 2400, 0},         {"gpu_release", NULL, 0, 100}};
        for (size_t i = 0; i < sizeof st_lines / sizeof *st_lines; i++) {
            json_t *m = json_pack("{s:s, s:f}", "type", st_lines[i].type, "t_ms", 10.0 * (double)i);
            if (!strcmp(st_lines[i].type, "gpu_acquire")) {
                json_object_set_new(m, "mode", json_string("shared"));
                json_object_set_new(m, "purpose", json_string("exit"));
                json_object_set_new(m, "reserve_bytes", json_integer(st_lines[i].reserve));
                if (st_lines[i].stage)
                    json_object_set_new(m, "stage", json_string(st_lines[i].stage));
            } else {
                json_object_set_new(m, "peak_bytes", json_integer(st_lines[i].peak));
            }
            json_array_append_new(staged, m);
        }
        g = kg_eval_gpu_block(staged);
        const json_t *mb = json_object_get(g, "memory_by_stage");
        KG_CHECK(json_object_size(mb) == 3);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(mb, "correctness"), "reserved_bytes")) == 800);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(mb, "correctness"), "peak_bytes")) == 900);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(mb, "timing"), "reserved_bytes")) == 2400);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(mb, "timing"), "peak_bytes")) == 1600);
        KG_CHECK(json_integer_value(json_object_get(json_object_get(mb, "exit"), "peak_bytes")) == 100);
        KG_CHECK(json_integer_value(json_object_get(g, "reserved_bytes")) == 2400);
        KG_CHECK(json_integer_value(json_object_get(g, "peak_bytes")) == 1600);
        json_decref(g);
        json_decref(staged);

        json_t *died = json_array();
        json_array_append_new(died, json_pack("{s:s, s:f, s:s, s:s}", "type", "gpu_acquire", "t_ms", 0.0, "mode",
                                              "shared", "purpose", "tiny_run"));
        json_array_append_new(died, json_pack("{s:s, s:f}", "type", "gpu_release", "t_ms", 40.0));
        json_array_append_new(died, json_pack("{s:s, s:f, s:s, s:s}", "type", "gpu_acquire", "t_ms", 50.0, "mode",
                                              "shared", "purpose", "correctness"));
        json_array_append_new(died, json_pack("{s:s, s:f}", "type", "variant", "t_ms", 250.0));
        g = kg_eval_gpu_block(died);
        sh = json_object_get(g, "shared");
        KG_CHECK_NEAR(json_number_value(json_object_get(sh, "longest_ms")), 200, 1e-9);
        KG_CHECK(!strcmp(json_string_value(json_object_get(sh, "longest_purpose")) ?: "", "correctness"));
        KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(sh, "by_purpose"), "tiny_run")), 40, 1e-9);
        KG_CHECK(json_is_null(json_object_get(json_object_get(g, "exclusive"), "longest_purpose")));
        json_decref(g);
        json_decref(died);
    }

    /* No GPU phases at all (CPU): null, not zeros that would read as "measured, and nothing". */
    json_t *cpu = json_array();
    json_array_append_new(cpu, json_pack("{s:s, s:f}", "type", "variant", "t_ms", 3.0));
    g = kg_eval_gpu_block(cpu);
    KG_CHECK(json_is_null(g));
    json_decref(g);
    json_decref(cpu);
    json_decref(msgs);
}

/* Before timing, kgym tells the child whether the candidate passed: all variants passed or skipped, one at
 * least, counting only lines that carry the job's nonce (a forged "passed" line changes nothing). */
static json_t *variant_line(const char *name, const char *nonce, double mismatches)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:b, s:b, s:f, s:f}}", "type", "variant", "nonce", nonce, "name", name,
                     "status", "ran", "compare", "shape_ok", 1, "dtype_ok", 1, "mismatches", mismatches, "elements",
                     1024.0);
}

/* Stamps `nonce` on every message that carries none. */
static void stamp(json_t *msgs, const char *nonce)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
        if (!json_object_get(m, "nonce"))
            json_object_set_new(m, "nonce", json_string(nonce));
}

static void timing_goes_only_for_passing_candidates(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    char why[256];
    json_t *msgs = json_array();
    KG_CHECK(!kg_eval_correctness_passed(&o, msgs, "N", why, sizeof why));
    KG_CHECK(strstr(why, "no correctness variant passed") != NULL);
    json_array_append_new(msgs, variant_line("base", "N", 0));
    json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:s}", "type", "variant", "nonce", "N", "name", "huge",
                                          "status", "reference_failed"));
    /* The facts of the correctness stage (the plan, the repeat checks...) count only with the job's nonce: a
     * candidate that forges them gets no timing. */
    kg_test_complete_facts(msgs, 1);
    stamp(msgs, "forged");
    KG_CHECK(!kg_eval_correctness_passed(&o, msgs, "N", why, sizeof why));
    KG_CHECK(strstr(why, "not judged") != NULL);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
        json_object_set_new(m, "nonce", json_string("N"));
    KG_CHECK(kg_eval_correctness_passed(&o, msgs, "N", why, sizeof why));
    json_array_append_new(msgs, variant_line("size_odd", "forged", 7));
    KG_CHECK(kg_eval_correctness_passed(&o, msgs, "N", why, sizeof why));
    json_array_append_new(msgs, variant_line("size_odd", "N", 7));
    KG_CHECK(!kg_eval_correctness_passed(&o, msgs, "N", why, sizeof why));
    KG_CHECK(strstr(why, "size_odd") != NULL && strstr(why, "7 of 1024") != NULL);
    json_decref(msgs);
}

/* A round the judge flagged warm_broken (a clock limit its early-ended warm-up had not met appeared in it) counts
 * nowhere: not in re-measuring, not as a re-measured round; the result lists it with the flag. */
static void warm_broken_rounds_do_not_count(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *msgs = json_array();
    json_array_append_new(msgs, setup_message(3));
    add_round(msgs, 0, 0, 120, 1.0, 0.35, 50); /* speedup 2.86: timed before the candidate's own power limit */
    json_object_set_new(json_array_get(msgs, json_array_size(msgs) - 1), "warm_broken", json_pack("{s:i}", "reasons", 4));
    add_round(msgs, 1, 200, 120, 1.0, 0.5, 50);
    add_round(msgs, 2, 400, 120, 1.0, 0.5, 50);
    add_round(msgs, 3, 600, 120, 1.0, 0.5, 50);
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 0); /* with round 0 the CV would ask for more */
    json_object_del(json_array_get(msgs, 2), "warm_broken");
    KG_CHECK(kg_eval_timing_more(&o, msgs, NULL, NULL) == 1);
    json_object_set_new(json_array_get(msgs, 2), "warm_broken", json_pack("{s:i}", "reasons", 4));
    json_array_append_new(msgs, final_message(msgs));
    json_t *t = kg_eval_timing_block(&o, msgs, NULL, 0);
    KG_CHECK(json_is_object(t));
    KG_CHECK(json_integer_value(json_object_get(t, "rounds_run")) == 4);
    KG_CHECK(json_integer_value(json_object_get(t, "rounds_not_counted")) == 1);
    KG_CHECK(json_integer_value(json_object_get(t, "remeasured")) == 0);
    KG_CHECK(json_is_object(json_object_get(json_array_get(json_object_get(t, "rounds"), 0), "warm_broken")));
    KG_CHECK(!json_object_get(json_array_get(json_object_get(t, "rounds"), 1), "warm_broken"));
    KG_CHECK(json_is_false(json_object_get(t, "noisy")));
    json_decref(t);
    json_decref(msgs);
}

int main(void)
{
    const kg_test_case cases[] = {
        {"stable rounds need no more", stable_rounds_need_no_more},
        {"two rounds stand only where they agree (--timing-agree)", two_rounds_stand_only_where_they_agree},
        {"the reference cache's protocol names the rounds", reference_protocol_names_the_rounds},
        {"every round's speedup on the figure's clock", rounds_use_the_figures_clock},
        {"two short rounds get a third", short_rounds_get_a_third},
        {"every check says why (timing.checks)", every_check_says_why},
        {"noisy rounds ask for more until the budget", noisy_rounds_ask_for_more_until_the_budget},
        {"forged rounds do not count", forged_rounds_do_not_count},
        {"warm-broken rounds do not count", warm_broken_rounds_do_not_count},
        {"timing block: rounds, speedup, interval", timing_block_has_rounds_speedup_and_interval},
        {"cached reference fills in", cached_reference_fills_in},
        {"timing block reports the clock block", timing_block_reports_the_clock_block},
        {"supervisor clock catches a faked timer", supervisor_clock_catches_a_faked_timer},
        {"profile block reports coverage", profile_block_reports_coverage},
        {"coverage is bounded by the timed calls (red team 30)", coverage_is_bounded_by_the_timed_calls},
        {"a profile heavier than the timed calls is not theirs (red team 31)",
         a_profile_heavier_than_the_timed_calls_is_not_theirs},
        {"the clock block between rounds changes nothing kgym reads (block-random)",
         the_clock_block_between_rounds_changes_nothing},
        {"side-stream work switches to device times", side_stream_work_switches_to_device_times},
        {"side streams in a minority of calls are counted", side_streams_in_a_minority_of_calls_are_counted},
        {"cached device-wide times keep both models on one clock", cached_device_times_keep_both_models_on_one_clock},
        {"result carries timing, profile and findings", result_carries_timing_profile_and_findings},
        {"GPU phases: held time by purpose", gpu_phases_sum_held_time_by_purpose},
        {"timing goes only for passing candidates", timing_goes_only_for_passing_candidates},
    };
    return kg_test_main("timing", cases, sizeof cases / sizeof cases[0]);
}
