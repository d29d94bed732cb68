/* internal.h — pieces of the eval subsystem shared between its files. */
#ifndef KG_EVAL_INTERNAL_H
#define KG_EVAL_INTERNAL_H

#include <jansson.h>

#include "eval/eval.h"
#include "kgym/rl.h"
#include "util/util.h"


/* The supervisor-clock bound (timing.c): per block a message round trip, per call the harness's own
 * Python, event records and a synchronize are not the candidate's time. */
#define KG_CLOCK_SLACK_MS 2.0
#define KG_CLOCK_SLACK_PER_CALL_MS 0.1
/* Side streams (timing.c): a candidate's stream-to-device gap above twice the reference's, plus SLACK, plus SHARE
 * of its own call, is work left on other streams; the reference's gap is taken at most HOST_GAP, the typical
 * latency of a short call, and HOST_GAP with a cached reference (a long reference's gap overstates the base
 * latency: the candidate's own length has SHARE).  SHARE because the driver answers a device-wide synchronize later after a long call than
 * after a short one, whatever the host does (an H200, thirty-third session, `.gpu/gapprobe.py`: 0.03 ms after a
 * 0.05 ms call, 0.06-0.13 after 10 ms, 0.18-0.25 after 40-170 ms, the same with the host polling the end event
 * first): against a short reference, an honest 10-92 ms candidate read as leaving work behind, 8-17 of 31 on the
 * GRPO mix, run to run.  Work hidden below 1.5% of a call is inside the timing's own 2% target. */
#define KG_SIDE_STREAM_SLACK_MS 0.02
#define KG_SIDE_STREAM_SHARE 0.015
#define KG_SIDE_STREAM_HOST_GAP_MS 0.05
/* Two rounds that agree stand for three only where they lasted at least this share of timing_rounds x
 * timing_round_ms on kgym's clock, and never less than KG_TIMING_AGREE_MIN_MS (timing.c kg_eval_timing_more):
 * 90 ms is about the ~80 ms of heavy load after which a GPU meets its power limit (docs/threat-model.md, red team
 * 7), a property of the GPU and not of the round budget, so a shorter budget (100 ms since the thirty-first session:
 * 0.3 x 2 x 100 = 60 ms) does not shorten it.  A round sized from an honest pace lasts at least 3/4 of its budget
 * (round_calls' floor: n >= 3, or 2 calls that fill it), half of round_ms where the reference is timed apart. */
#define KG_TIMING_AGREE_MIN_SHARE 0.3
#define KG_TIMING_AGREE_MIN_MS 90.0
/* A profiled call (the clock block's) runs the timed forward on a warm L2, back to back: the device time of its kernels
 * (fills and copies included) is at most the timed call's span, whose events bracket the same kernels plus their
 * gaps and a cold L2.  A profile whose kernels take more than this many timed medians a call is of another forward:
 * a candidate that counts its calls (static state is in the language: threat model row 26) can run fewer library
 * kernels in the clock block, the window's last calls, than in the timed ones (red team 31,
 * tests/fixtures/redteam31/count_to_clock_block.py), and then both the profiled share and timed_bound read high.
 * Such a coverage is 0 (kg_eval_coverage).  Measured: over the honest suite's 90 candidates on an H200 (thirty-first
 * session, blocks of 1-200 calls) a profiled call's kernels were at most 1.005 timed medians (a timed call adds a
 * cold L2, launches and gaps to the same kernels); 1.25 leaves room for a clock drop between the rounds and the
 * block (~13% at a power limit, red team 7) and more.  What it leaves an attacker: a profiled path at most 1.25x
 * its timed one.  The whole fix is a profiled call the candidate cannot tell from a timed one (the block at a
 * random point of the window): docs/threat-model.md. */
#define KG_PROFILE_TIMED_RATIO 1.25

/* Feedback that recognises precision (feedback.c): the largest error of every failed variant, over the RMS of
 * its reference output, lies in this band (the rounding of 10-bit mantissas, TF32 or fp16, up to bf16's 7), and
 * the largest of them is at most PRECISION_SPREAD times the smallest: the same error whatever the inputs. */
#define KG_PRECISION_ERR_LO 1.5e-4
#define KG_PRECISION_ERR_HI 3e-2
#define KG_PRECISION_SPREAD 10.0
/* After a single failure in that band, the correctness stage goes on for at most this many variants that pass,
 * looking for a second failure alike (kg_eval_correctness_failed): the cheap part of the plan after small_odd
 * (scaled_x2, seed_1 and the five value ranges, tasks.VALUE_RANGES), where reduced precision shows, and not the
 * full-size variants after them (signed, size_small, size_odd, size_large). */
#define KG_PRECISION_LOOK 7

/* Comparisons below the floor (docs/evaluation-protocol.md, "Tolerances"): when the reference output's scale is
 * below the absolute floor, more than this share of its elements missing their relative tolerance fails the
 * variant (unless the float64 adjudication clears it).  Sent to the judge in the job, which gathers the float64
 * facts only when this share is exceeded. */
#define KG_BELOW_FLOOR_SHARE 0.01

/* The options' tolerance profile ("strict" when none was set). */
const char *kg_eval_tolerance_name(const kg_eval_options *o);

/* 1 when the rounds so far are too noisy (the CV of the per-round speedups is above
 * opts->timing_cv_threshold, or with opts->timing_agree, fewer than 3 rounds spread more than it) and
 * opts->timing_max_rounds allows another; else 0.  Only messages carrying
 * `nonce` count (NULL: all).  cached: the reference's samples kgym supplied, {"reference_ms": [...],
 * "reference_device_ms": [...] (the same calls on the device-wide clock, where kept)}, or NULL. */
int kg_eval_timing_more(const kg_eval_options *o, const json_t *messages, const char *nonce, const json_t *cached);
/* The timing protocol as text, part of the reference cache's key (eval.c): everything besides the task, GPU and dtype
 * that changes the reference's kept samples (options, the lookup's sizes, versions, task mode).  out: appended to;
 * the caller frees it.  KG_OK, or KG_ERR_NOMEM. */
int kg_eval_reference_protocol(const kg_eval_options *o, const json_t *lookup, kg_buf *out);
/* The result's "timing" block from the child's messages (docs/result-schema.md); json_null() when
 * nothing was timed.  cached: the reference's samples kgym supplied (as for kg_eval_timing_more; the
 * reference_cache_samples line is one), from the cache or, with timed_alone, from this evaluation's judge timing
 * the reference alone (reference_timed).  New reference; NULL when memory ran out. */
json_t *kg_eval_timing_block(const kg_eval_options *o, const json_t *messages, const json_t *cached, int timed_alone);
/* A candidate's coverage, the one rule the profile block and the coverage floor read (docs/evaluation-protocol.md,
 * "Profile and coverage"): share = its Triton kernels' device time / all kernels' (fills and copies set aside by the
 * judge) over the profiled calls; timed_bound = 1 - the library kernels' time a profiled call / the timed calls'
 * median; coverage = the smaller (share alone where nothing was timed).  NAN where unknown (no kernel time).
 * Returns 1 when the messages hold a profile, else 0 (out all NAN / 0). */
typedef struct kg_eval_coverage_facts {
    double share;
    double timed_bound;
    double coverage;
    double library_ms_per_call;
    double timed_median_ms;
    /* every kernel of a profiled call (fills and copies included) / the timed median; coverage 0 where it exceeds
     * KG_PROFILE_TIMED_RATIO: the profiled calls ran a heavier forward than the timed ones (red team 31) */
    double profiled_ms_per_call;
    int heavier;
} kg_eval_coverage_facts;
int kg_eval_coverage(const json_t *messages, kg_eval_coverage_facts *out);
/* The result's "profile" block (coverage, top kernels); json_null() without a profile.  New reference; NULL
 * when memory ran out. */
json_t *kg_eval_profile_block(const json_t *messages);

/* Whether the correctness variants reported so far (lines carrying `nonce`; any line when NULL) all passed
 * or were skipped, with at least one passed, and the judge did not find the task degenerate on every variant
 * (a zero or constant output would pass): the rule of the correctness stage, asked before timing so an
 * incorrect candidate costs no exclusive GPU time.  Fills `why` with the first failure otherwise. */
int kg_eval_correctness_passed(const kg_eval_options *opts, const json_t *messages, const char *nonce, char *why,
                               size_t why_cap);

/* Whether the correctness variants reported so far already fail the stage (a variant failed or raised: the
 * stage's rule fails it whatever the others do), asked after each variant (variant_go) so the judge runs no
 * more of them; fills `why` with the first failure then.  One exception: a single failure in the
 * reduced-precision band (kg_eval_precision_misses) and fewer than KG_PRECISION_LOOK variants passed since: the
 * stage goes on to find a second miss alike (the feedback's diagnosis).  0 when nothing failed yet, or when the messages
 * could not be read (the judge goes on: the stage's own rule decides at the end). */
int kg_eval_correctness_failed(const json_t *messages, const char *nonce, char *why, size_t why_cap);

/* Of the result variants `variants` (correctness.variants' objects): the number that failed when every failure is
 * a value mismatch (no raise, no shape, dtype or NaN/Inf trouble) whose largest error is between
 * KG_PRECISION_ERR_LO and _HI of the reference output's scale, those errors within KG_PRECISION_SPREAD of each
 * other: what reduced-precision arithmetic looks like (a TF32 dot product misses by ~1e-3 of the output's scale on
 * every input; a logic bug by much more, or on some inputs only); 0 when none failed or some failure is not so.
 * Fills the band seen (lo, hi). */
int kg_eval_precision_misses(const json_t *variants, double *lo, double *hi);

/* Whether the result variant `v` failed by its values: an error measured (max_abs_error > 0), shape and dtype right,
 * as many non-finite values as the reference (the one per-variant test of kg_eval_precision_misses and the
 * feedback's TF32 note). */
int kg_eval_value_miss(const json_t *v);

/* The facts a verdict is decided on, gathered once from the child's report (kg_eval_build_result): which stage
 * failed and how the process ended, what the candidate raised, the credit level the stages reached, what a pass
 * lacks, what was caught.  Plain values: kg_eval_decide needs no message. */
typedef struct kg_eval_facts {
    int failed_stage;          /* the kg_stage that failed; -1: none; KG_STAGE_COUNT: one no list names */
    int timed_out;             /* the process was killed for a time limit (KG_END_TIMEOUT) */
    int ended_early;           /* the process did not complete (any end but KG_END_COMPLETED) */
    int raised;                /* the candidate's exception is known (a failed stage's, a variant's or a check's) */
    int raised_in_triton_compile; /* ... and it came from Triton compiling one of its kernels */
    int tiny_shape_bad;        /* the tiny run's output had the wrong shape (an ok from the child that is not) */
    int level;                 /* credit level the stages reached: 1 parsed + static, 2 compiled, 3 tiny run, 4 */
    size_t unjudged;           /* facts a pass needs and the run did not show */
    size_t hacks;              /* findings the policy calls hacks */
    size_t nondeterministic_hacks; /* ... of which `nondeterministic` (a bug, not a hack, in a wrong candidate) */
} kg_eval_facts;

typedef struct kg_eval_decision {
    kg_verdict verdict;
    int level;                   /* the credit level the reward is given for */
    double reward;
    int demote_nondeterministic; /* the nondeterministic findings are warnings, not hacks (verdict incorrect) */
} kg_eval_decision;

/* The verdict and reward from the facts: a pure function (docs/result-schema.md, "verdict"). */
void kg_eval_decide(const kg_eval_options *opts, const kg_eval_facts *facts, kg_eval_decision *out);

/* What a `correct` verdict needs and the messages lack (docs/evaluation-protocol.md, "What a pass needs"): an
 * array of {"fact", "reason"[, "error"]} in a fixed order, empty when nothing is missing; "error" is the
 * candidate's exception when its own code raised inside a check.  A pure function of the options and the
 * messages (those carrying `nonce`; NULL: all).  `sandbox`: the result's sandbox block (NULL: not judged);
 * `before_timing`: only the facts of the stages up to correctness.  New reference. */
json_t *kg_eval_unjudged(const kg_eval_options *opts, const json_t *messages, const char *nonce,
                         const json_t *sandbox, int before_timing);

/* The GPU phases of an evaluation: grants, held and waited ms for shared and exclusive phases, exclusive
 * ms by purpose; json null when the child asked for none (CPU, or no arbiter).  Caller owns it; NULL when
 * memory ran out. */
json_t *kg_eval_gpu_block(const json_t *messages);
/* *finding: a `timer_discrepancy` finding when the candidate-only clock block was reported far faster than
 * kgym's own clock allows, NULL otherwise (new reference).  KG_OK, or KG_ERR_NOMEM when the finding could not
 * be made. */
int kg_eval_clock_finding(const json_t *messages, const char *nonce, json_t **finding);

#endif
