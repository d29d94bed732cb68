/*
 * kgym/rl.h — the RL library: per-turn rewards, advantage estimators (GRPO,
 * RLOO, TRLOO), rejection sampling (PRS, MRS, truncated importance weights),
 * an adaptive curriculum, and evaluation metrics (Fast@p by turn).
 *
 * It consumes evaluation outcomes (the fields of `kgym eval`'s result that
 * matter for RL, see docs/result-schema.md) and per-turn records; it knows
 * nothing of the evaluator's internals.  Formulas, defaults and sources are
 * in docs/rl.md.
 *
 * Conventions: arrays in, arrays out; the caller owns every array it passes
 * and every output array it sizes.  The only allocations the library hands
 * back are kg_metrics_report (free with kg_metrics_report_free), strings
 * returned through `char **` (free with free()) and the kg_curriculum handle
 * (free with kg_curriculum_free).  There is no global state; every random
 * draw goes through a caller-owned kg_rng.  Functions return KG_OK or a
 * negative kg_status and, on error, fill `err` with a message that names the
 * offending record by its index.
 */
#ifndef KGYM_RL_H
#define KGYM_RL_H

#include <stddef.h>
#include <stdint.h>

#include "kgym/error.h"

/* ------------------------------------------------------------------ RNG */

/* xoshiro256** seeded through splitmix64: reproducible across platforms, and
 * its four words are the whole state, so it can be saved and resumed. */
typedef struct {
    uint64_t s[4];
} kg_rng;

KG_API void kg_rng_seed(kg_rng *rng, uint64_t seed);
KG_API uint64_t kg_rng_next(kg_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
KG_API double kg_rng_uniform(kg_rng *rng);

/* -------------------------------------------------------- named options */

/* Every named choice of the library (an enum below) has one row in the
 * table of src/rl/options.c: value i is called names[i] on the CLI, in the
 * Python binding and in docs/rl.md. */
typedef enum {
    KG_OPT_ESTIMATOR = 0,     /* kg_estimator */
    KG_OPT_SINGLETON = 1,     /* kg_singleton_rule */
    KG_OPT_MASKED_REWARD = 2, /* kg_masked_reward_rule */
    KG_OPT_REJECTED = 3,      /* kg_rejected_rule */
    KG_OPT_SMALL_STD = 4,     /* kg_small_std_rule */
    KG_OPT_IS_LEVEL = 5,      /* kg_is_level */
    KG_OPT_MRS_MODE = 6,      /* kg_mrs_mode */
    KG_OPT_PRS_MODE = 7,      /* kg_prs_mode */
    KG_OPT_CURRICULUM_RULE = 8, /* kg_curriculum_rule */
    KG_OPT_COUNT = 9
} kg_rl_option;

/* Value of a name; KG_ERR_INVALID listing the accepted names otherwise. */
KG_API int kg_rl_option_parse(kg_rl_option option, const char *name, int *out,
                              kg_error *err);
/* Name of a value; "?" when out of range. */
KG_API const char *kg_rl_option_name(kg_rl_option option, int value);

/* ------------------------------------------------------------ outcomes */

/* The verdicts, the one list of them (in the manner of libuv's UV_ERRNO_MAP): X(ENUM, code, "name").  The codes
 * are ABI (python/kgym/rl.py passes them through ctypes; kg_outcome_columns carries them): append only.  The C
 * enum and names (src/rl/outcome.c) and the Python constants (scripts/gen_kinds.py writes python/kgym/kinds.py
 * and harness/kgym_harness/shared/kinds.py; harness/tests/test_kinds.py fails when they differ) come from it. */
#define KG_VERDICT_MAP(X)                  \
    X(CORRECT, 0, "correct")               \
    X(INCORRECT, 1, "incorrect")           \
    X(HACKED, 2, "hacked")                 \
    X(INVALID, 3, "invalid")               \
    X(COMPILE_ERROR, 4, "compile_error")   \
    X(RUNTIME_ERROR, 5, "runtime_error")   \
    X(TIMEOUT, 6, "timeout")

typedef enum {
#define KG_VERDICT_ENUM_(e, code, name) KG_VERDICT_##e = code,
    KG_VERDICT_MAP(KG_VERDICT_ENUM_)
#undef KG_VERDICT_ENUM_
    KG_VERDICT_COUNT
} kg_verdict;

/* Parses a result's "verdict" string; KG_ERR_INVALID for anything else. */
KG_API int kg_verdict_parse(const char *name, kg_verdict *out, kg_error *err);
/* The schema's name of a verdict ("compile_error"); "?" when out of range. */
KG_API const char *kg_verdict_name(kg_verdict verdict);

/* What the RL library reads from one evaluation result.  NaN marks a field
 * that was not measured (null in the JSON, e.g. timing on CPU). */
typedef struct {
    kg_verdict verdict;
    int hacked;           /* verdict == hacked, or hacks[] non-empty */
    double staged_reward; /* result.reward: the evaluator's partial credit */
    double speedup;       /* result.timing.speedup */
    double coverage;      /* result.profile.coverage */
} kg_eval_outcome;

/* The same fields as columns, for batch calls from C, Python or NumPy.
 * verdict is required; each other pointer may be NULL (all "not measured";
 * hacked NULL means "hacked iff verdict == hacked"). */
typedef struct {
    size_t n;
    const int32_t *verdict;      /* kg_verdict values */
    const uint8_t *hacked;
    const double *staged_reward;
    const double *speedup;
    const double *coverage;
} kg_outcome_columns;

/* A candidate that passed the correctness check and was not flagged. */
KG_API int kg_outcome_is_correct(const kg_eval_outcome *outcome);
/* "compiled" for the compile rate: verdict not in {invalid, compile_error,
 * timeout} and not hacked (Dr. Kernel's reward client). */
KG_API int kg_outcome_compiled(const kg_eval_outcome *outcome);
/* Row i of the columns as one outcome; KG_ERR_INVALID for a bad verdict. */
KG_API int kg_outcome_columns_get(const kg_outcome_columns *cols, size_t i,
                                  kg_eval_outcome *out, kg_error *err);

/* -------------------------------------------------------------- rewards */

typedef enum {
    KG_REWARD_DRKERNEL = 0, /* 0.5·correct + 0.5·min(S,3) + 0.5·coverage */
    KG_REWARD_STAGED = 1,   /* evaluator partial credit + optional speed term */
    KG_REWARD_TRITONRL = 2, /* valid·correct + valid·clip(S, 2) */
    KG_REWARD_SPEEDUP = 3   /* ln S for correct kernels, a floor otherwise */
} kg_reward_fn;

typedef struct {
    kg_reward_fn fn;
    double correct_weight;      /* drkernel, tritonrl: weight of correctness */
    double speed_weight;        /* weight of the speed term (staged: 0 = off) */
    double speedup_cap;         /* speed term uses min(S, cap) */
    double speedup_lower_bound; /* a capped speedup below this counts as 0 */
    double coverage_weight;     /* drkernel: weight of profile.coverage */
    double failure_reward;      /* reward of a failed / incorrect / hacked turn
                                 * (speedup fn: the floor) */
    double hack_penalty;        /* subtracted when hacked */
    double timeout_penalty;     /* subtracted when verdict == timeout */
    double regression_penalty;  /* subtracted when this turn's base reward is
                                 * below the previous turn's */
} kg_reward_config;

/* The defaults of docs/rl.md for fn (Dr. Kernel's recipe for drkernel). */
KG_API void kg_reward_config_default(kg_reward_config *cfg, kg_reward_fn fn);
/* "drkernel" | "staged" | "tritonrl" | "speedup". */
KG_API int kg_reward_fn_parse(const char *name, kg_reward_fn *out, kg_error *err);
KG_API const char *kg_reward_fn_name(kg_reward_fn fn);
/* Sets one constant by its docs/rl.md name ("speedup_cap", ...); rejects
 * unknown names and non-finite values. */
KG_API int kg_reward_config_set(kg_reward_config *cfg, const char *name, double value,
                                kg_error *err);

/* Reward of one turn.  previous is the same trajectory's previous turn (for
 * the regression penalty) or NULL. */
KG_API int kg_reward_compute(const kg_reward_config *cfg, const kg_eval_outcome *turn,
                             const kg_eval_outcome *previous, double *reward,
                             kg_error *err);

/* Whether to evaluate a kernel a second time before rewarding it: its
 * measured speedup is above `above` (> 0; Dr. Kernel uses its reward's
 * speedup cap, 3).  An implausibly large speedup is more often a timing
 * accident than a kernel, so Dr. Kernel re-runs the evaluation once and keeps
 * the second result (kernel/workers/reward_manager/kernel_async.py:247-256).
 * The evaluation itself belongs to the caller (kgym rollout does it). */
KG_API int kg_reeval_wanted(const kg_eval_outcome *outcome, double above);

/* Rewards of n turns.  trajectory and turn (both NULL, or both set) locate
 * each turn's previous turn: the largest smaller turn of the same
 * trajectory.  reward_out has cols->n entries. */
KG_API int kg_reward_batch(const kg_reward_config *cfg, const kg_outcome_columns *cols,
                           const int64_t *trajectory, const int32_t *turn,
                           double *reward_out, kg_error *err);

/* ----------------------------------------------------------- advantages */

typedef enum {
    KG_ESTIMATOR_GRPO = 0,  /* G_i − mean_j G_j (self included) [/ std] */
    KG_ESTIMATOR_RLOO = 1,  /* r_i − mean_{j≠i} r_j, groups = prompt, 1 turn */
    KG_ESTIMATOR_TRLOO = 2, /* G_i − mean_{j≠i} G_j, groups = (prompt, turn) */
    KG_ESTIMATOR_COUNT = 3
} kg_estimator;

typedef enum {
    KG_SINGLETON_RETURN = 0, /* a group of one has no baseline: A = G (Dr. Kernel) */
    KG_SINGLETON_ZERO = 1,   /* ... has advantage 0 */
    KG_SINGLETON_COUNT = 2
} kg_singleton_rule;

/* The reward of a loss-masked turn (mask = 0) in earlier turns' returns. */
typedef enum {
    KG_MASKED_REWARD_ZERO = 0, /* zeroed before returns (Dr. Kernel) */
    KG_MASKED_REWARD_KEEP = 1, /* still counted: the turn is a consequence of
                                * the earlier ones */
    KG_MASKED_REWARD_COUNT = 2
} kg_masked_reward_rule;

/* A rejected record (keep = 0: PRS, MRS, the group filter). */
typedef enum {
    KG_REJECTED_BASELINE = 0, /* advantage 0 but still in its group and its
                               * baseline: rejection edits only the response
                               * mask (Dr. Kernel) */
    KG_REJECTED_DROP = 1,     /* advantage 0 and out of every baseline, so
                               * groups shrink */
    KG_REJECTED_COUNT = 2
} kg_rejected_rule;

/* GRPO with normalize_std: a group whose std is below std_eps. */
typedef enum {
    KG_SMALL_STD_ONE = 0,  /* std := 1 (Dr. Kernel) */
    KG_SMALL_STD_KEEP = 1, /* (G − mean)/(std + eps) as is */
    KG_SMALL_STD_COUNT = 2
} kg_small_std_rule;

typedef struct {
    kg_estimator estimator;
    double gamma;             /* G_t = Σ_{t'≥t} γ^{t'−t} r_t'; default 1 */
    int normalize_std;        /* GRPO only: divide by the group's std */
    double std_eps;           /* GRPO: A = (G − mean) / (std + eps) */
    kg_singleton_rule singleton;
    kg_masked_reward_rule masked_reward;
    kg_rejected_rule rejected;
    kg_small_std_rule small_std;
} kg_advantage_config;

/* Dr. Kernel's defaults: singleton return, masked rewards zeroed, rejected
 * records kept in baselines, small std replaced by 1 (docs/rl.md §3). */
KG_API void kg_advantage_config_default(kg_advantage_config *cfg,
                                        kg_estimator estimator);
/* "grpo" | "rloo" | "trloo". */
KG_API int kg_estimator_parse(const char *name, kg_estimator *out, kg_error *err);
KG_API const char *kg_estimator_name(kg_estimator estimator);

/* Advantages of n per-turn records.  prompt, sample and turn identify a
 * record (a trajectory is (prompt, sample)); mask (the loss mask) and keep
 * (the rejection decision) may be NULL (all 1).  A masked record gets
 * advantage 0 and stays out of every baseline; its reward enters earlier
 * turns' returns as cfg->masked_reward says.  A rejected record gets
 * advantage 0 and stays in its baseline as cfg->rejected says.
 * advantage_out and return_out (may be NULL) have n entries.  NaN rewards,
 * duplicate (prompt, sample, turn) and, for RLOO, several turns per
 * trajectory are errors. */
KG_API int kg_advantages(const kg_advantage_config *cfg, size_t n,
                         const int64_t *prompt, const int64_t *sample,
                         const int32_t *turn, const double *reward,
                         const uint8_t *mask, const uint8_t *keep,
                         double *advantage_out, double *return_out, kg_error *err);

/* Low-variance group filter: a group of more than one record whose rewards
 * have an unbiased std below min_std is rejected whole, and so is a group of
 * fewer than min_group_size records.  Dr. Kernel applies it with
 * min_std = 1e-3 and min_group_size = n // 2 + 1 for n samples per prompt. */
typedef struct {
    double min_std;        /* 1e-3; 0 disables the variance test */
    size_t min_group_size; /* 0 or 1 disables the size test */
} kg_group_filter_config;

KG_API void kg_group_filter_config_default(kg_group_filter_config *cfg);
/* group[i] names record i's group; keep_out (n) gets 0 for every record of a
 * rejected group; groups_rejected_out (may be NULL) counts them. */
KG_API int kg_group_filter(const kg_group_filter_config *cfg, size_t n,
                           const int64_t *group, const double *reward,
                           uint8_t *keep_out, size_t *groups_rejected_out,
                           kg_error *err);

/* -------------------------------------------- rejection sampling: PRS */

typedef enum {
    KG_PRS_TURN = 0,      /* each turn's own coverage (Dr. Kernel's scripts) */
    KG_PRS_GEOMETRIC = 1, /* the geometric mean of the coverage of the
                           * trajectory's live turns, for all its turns */
    KG_PRS_MODE_COUNT = 2
} kg_prs_mode;

typedef struct {
    kg_prs_mode mode;
    double threshold;         /* 0.3 */
    double factor;            /* 0.1; <= 0 gives a hard cut at threshold */
    double speedup_threshold; /* NaN = off; else also keep if S >= this */
} kg_prs_config;

typedef struct {
    size_t total, kept;
    size_t correct, correct_kept;
    double acceptance_rate;         /* kept / total (NaN when total == 0) */
    double correct_acceptance_rate; /* correct_kept / correct */
    double expected_correct_kept;   /* Σ keep probability over correct turns */
} kg_prs_stats;

KG_API void kg_prs_config_default(kg_prs_config *cfg);
/* clamp((coverage − threshold)/factor, 0, 1) for a correct turn, 1 otherwise;
 * KG_ERR_INVALID when a correct turn has no coverage. */
KG_API int kg_prs_keep_probability(const kg_prs_config *cfg,
                                   const kg_eval_outcome *outcome, double *p,
                                   kg_error *err);
/* One Bernoulli draw per record (keep iff u < p); keep_out and prob_out (may
 * be NULL) have cols->n entries; stats may be NULL.  The geometric mode needs
 * trajectory (cols->n ids); live (may be NULL = all) marks the turns whose
 * coverage enters the mean: those neither loss-masked nor already rejected,
 * as Dr. Kernel's response mask does.  There, a turn without a measured
 * coverage counts as coverage 0 (clamped to 1e-8) unless it is correct, which
 * is an error as in the turn mode. */
KG_API int kg_prs_sample(const kg_prs_config *cfg, kg_rng *rng,
                         const kg_outcome_columns *cols, const int64_t *trajectory,
                         const uint8_t *live, uint8_t *keep_out, double *prob_out,
                         kg_prs_stats *stats, kg_error *err);

/* -------------------------------------------- rejection sampling: MRS */

/* Token log-ratios are log π_trainer(token) − log π_rollout(token).  Turns
 * are rows; turn r owns tokens [token_offsets[r], token_offsets[r+1]); a
 * trajectory is the set of turns sharing trajectory[r].
 *
 * What the MRS ratio r is computed over; a unit is kept iff r lies in
 * [1 − δ, 1 + δ].  Dr. Kernel's names (its rollout_rs). */
typedef enum {
    KG_MRS_TOKEN = 0,     /* r = the token's ratio; keeps tokens */
    KG_MRS_TURN = 1,      /* r = product of the turn's ratios */
    KG_MRS_TURN_GEO = 2,  /* r = geometric mean of the turn's ratios */
    KG_MRS_SEQUENCE = 3,  /* r = product over the trajectory's live turns */
    KG_MRS_GEOMETRIC = 4, /* r = geometric mean over the trajectory's live
                           * turns (Dr. Kernel's scripts) */
    KG_MRS_MODE_COUNT = 5
} kg_mrs_mode;

typedef struct {
    kg_mrs_mode mode;
    double delta;          /* keep iff the ratio lies in [1−δ, 1+δ];
                            * δ = 0.001 */
    double veto_threshold; /* drop a turn with any token ratio below this;
                            * 1e-4; <= 0 disables */
} kg_mrs_config;

typedef struct {
    size_t trajectories, trajectories_kept; /* kept: no live turn dropped */
    size_t turns, turns_kept, turns_vetoed;
} kg_mrs_stats;

KG_API void kg_mrs_config_default(kg_mrs_config *cfg);
/* mask (n_turns, may be NULL = all live) is the loss mask: a masked turn's
 * tokens are left out of every ratio, and it is never dropped (it is already
 * out of the loss), as in Dr. Kernel where the loss mask zeroes the response
 * mask first.  keep_out (n_turns) is 0 for a dropped turn: its ratio is out
 * of bounds, one of its tokens is below veto_threshold, or (token mode) every
 * one of its tokens is out of bounds.  ratio_out (n_turns, may be NULL) gets
 * the ratio the turn was judged by (NaN in token mode); token_keep_out
 * (token_offsets[n_turns], may be NULL) each token's decision.  stats may be
 * NULL. */
KG_API int kg_mrs_filter(const kg_mrs_config *cfg, size_t n_turns,
                         const int64_t *trajectory, const int64_t *token_offsets,
                         const double *log_ratio, const uint8_t *mask,
                         uint8_t *keep_out, double *ratio_out,
                         uint8_t *token_keep_out, kg_mrs_stats *stats,
                         kg_error *err);

typedef enum {
    KG_IS_TOKEN = 0,    /* w = ratio of the token */
    KG_IS_TURN = 1,     /* w = product of the turn's ratios */
    KG_IS_SEQUENCE = 2, /* w = product over the whole trajectory */
    KG_IS_LEVEL_COUNT = 3
} kg_is_level;

KG_API int kg_is_level_parse(const char *name, kg_is_level *out, kg_error *err);
/* Truncated importance weights min(w, cap), one per token (weights_out has
 * token_offsets[n_turns] entries); log-weights are clamped to ±20. */
KG_API int kg_truncated_is_weights(double cap, kg_is_level level, size_t n_turns,
                                   const int64_t *trajectory,
                                   const int64_t *token_offsets,
                                   const double *log_ratio, double *weights_out,
                                   kg_error *err);

/* ----------------------------------------------------------- curriculum */

#define KG_CURRICULUM_MAX_LEVELS 8

/* How a level's share moves with the accuracy of the level below. */
typedef enum {
    KG_CURRICULUM_STEP = 0,   /* Beyond TritonRL's code: at each step, once
                               * at least min_steps step accuracies exist and
                               * the mean of the last step_window reaches
                               * target, share += step, up to end */
    KG_CURRICULUM_LINEAR = 1, /* start + (end − start)·min(acc/target, 1)
                               * over the rolling accuracy */
    KG_CURRICULUM_RULE_COUNT = 2
} kg_curriculum_rule;

/* Level k >= 1 has a ramp from start to end driven by the accuracy of level
 * k−1 reaching target; how it moves is the rule.  level[0] is unused; level
 * 0 gets what the others leave. */
typedef struct {
    double start_share, end_share, target_accuracy;
} kg_curriculum_ramp;

typedef struct {
    size_t n_levels; /* 1 .. KG_CURRICULUM_MAX_LEVELS */
    kg_curriculum_ramp level[KG_CURRICULUM_MAX_LEVELS];
    size_t window;   /* outcomes per level in the rolling accuracy (linear) */
    kg_curriculum_rule rule;
    /* step rule: a step's accuracy of a level is the share correct among
     * the outcomes recorded since the previous kg_curriculum_end_step */
    double step;        /* share added per step: 0.05 */
    size_t step_window; /* step accuracies averaged: 5 */
    size_t min_steps;   /* step accuracies needed before any raise: 5 */
} kg_curriculum_config;

/* Two levels, Beyond TritonRL's step rule: level 1 starts at 10% and gains
 * 5% per step while the mean of level 0's last 5 step accuracies is at least
 * 40%, up to 50%. */
KG_API void kg_curriculum_config_default(kg_curriculum_config *cfg);
KG_API int kg_curriculum_config_check(const kg_curriculum_config *cfg, kg_error *err);
/* The linear rule alone: shares (n_levels) from accuracies (n_levels), each
 * level k >= 1 at start + (end − start)·min(acc_{k−1}/target, 1). */
KG_API int kg_curriculum_schedule(const kg_curriculum_config *cfg,
                                  const double *accuracy, double *shares_out,
                                  kg_error *err);

typedef struct kg_curriculum kg_curriculum; /* opaque; owns its history */

KG_API int kg_curriculum_create(const kg_curriculum_config *cfg, uint64_t seed,
                                kg_curriculum **out, kg_error *err);
KG_API void kg_curriculum_free(kg_curriculum *cur);
KG_API const kg_curriculum_config *kg_curriculum_get_config(const kg_curriculum *cur);
/* Adds one outcome of a task of level `level` to its rolling window. */
KG_API int kg_curriculum_record(kg_curriculum *cur, size_t level, int correct,
                                kg_error *err);
/* Ends a training step: each level's outcomes since the last step become
 * one step accuracy (a level without outcomes adds none), and under the step
 * rule each level k >= 1 whose level k−1 has at least min_steps step
 * accuracies, the last step_window of them averaging at least target, gains
 * step, up to end. */
KG_API int kg_curriculum_end_step(kg_curriculum *cur, kg_error *err);
/* Rolling accuracy of a level (0 before any outcome); NaN for a bad level. */
KG_API double kg_curriculum_accuracy(const kg_curriculum *cur, size_t level);
/* How many outcomes of the level are in the window now. */
KG_API size_t kg_curriculum_observed(const kg_curriculum *cur, size_t level);
KG_API int kg_curriculum_shares(const kg_curriculum *cur, double *shares_out,
                                kg_error *err);
/* Draws a level with probability equal to its share. */
KG_API int kg_curriculum_sample_level(kg_curriculum *cur, size_t *level_out,
                                      kg_error *err);
/* Draws an index in [0, n) uniformly (for picking a task of a level). */
KG_API int kg_curriculum_sample_index(kg_curriculum *cur, size_t n, size_t *index_out,
                                      kg_error *err);
/* Whole state (config, windows, RNG) as JSON; *json_out is freed by free(). */
KG_API int kg_curriculum_save(const kg_curriculum *cur, char **json_out,
                              kg_error *err);
KG_API int kg_curriculum_load(const char *json, kg_curriculum **out, kg_error *err);
/* Reads a config from JSON text {"window": W, "levels": [{"start", "end",
 * "target"}, ...]} where levels[0] describes level index 1. */
KG_API int kg_curriculum_config_from_json(const char *json, kg_curriculum_config *cfg,
                                          kg_error *err);

/* -------------------------------------------------------------- metrics */

#define KG_METRICS_MAX_THRESHOLDS 16

typedef struct {
    int32_t turn;
    size_t samples;          /* denominator of every rate */
    double compile_rate, correct_rate, hack_rate;
    double fast[KG_METRICS_MAX_THRESHOLDS]; /* Fast@p, share of all samples */
    size_t timed_correct;    /* correct samples with a measured speedup */
    double geomean_speedup;  /* over timed correct samples; NaN if none */
} kg_turn_metrics;

typedef struct {
    size_t n_thresholds;
    double thresholds[KG_METRICS_MAX_THRESHOLDS];
    size_t samples;          /* distinct trajectories */
    size_t n_turns;
    kg_turn_metrics *per_turn;  /* n_turns, by increasing turn */
    kg_turn_metrics *best_of;   /* n_turns: best candidate of turns <= t */
} kg_metrics_report;

/* thresholds NULL uses {1, 1.2, 1.5, 2, 3}.  trajectory and turn have
 * cols->n entries (turn NULL: every record is turn 1). */
KG_API int kg_metrics_compute(const kg_outcome_columns *cols,
                              const int64_t *trajectory, const int32_t *turn,
                              const double *thresholds, size_t n_thresholds,
                              kg_metrics_report *out, kg_error *err);
KG_API void kg_metrics_report_free(kg_metrics_report *report);
/* Renderings; each *out is freed by free(). */
KG_API int kg_metrics_table(const kg_metrics_report *report, char **out,
                            kg_error *err);
KG_API int kg_metrics_json(const kg_metrics_report *report, char **out,
                           kg_error *err);
/* Fast@p by turn (solid: per turn, dashed: best of turns) as SVG. */
KG_API int kg_metrics_svg(const kg_metrics_report *report, char **out, kg_error *err);

#endif
