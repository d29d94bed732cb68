/*
 * eval/tally.h — (internal) the one sum over evaluation results: how many ended, by verdict, their rewards, the
 * geometric mean speedup of the correct ones, and the seconds spent in each stage.  The service's counters
 * (src/sched: /metrics, /health) and `kgym bench`'s summary both add their results here, so a verdict, a reward or
 * a stage is counted one way wherever results are counted.  Each result is read by the one reader
 * (rl/result_read.h).
 *
 * Not used by the RL metrics (src/rl/metrics.c): they aggregate samples, not results (see its header comment).
 *
 * A tally is a plain struct: zero it to start ({0}); it allocates nothing and has no lock (its owner's lock guards
 * it, as it guards the owner's other counters).
 */
#ifndef KGYM_EVAL_TALLY_H
#define KGYM_EVAL_TALLY_H

#include <jansson.h>

#include "eval/kinds.h"
#include "kgym/rl.h"

typedef struct kg_result_tally {
    long results;                        /* results added */
    long missing;                        /* ends without a result (kgym could not evaluate: no verdict) */
    long verdicts[KG_VERDICT_COUNT + 1]; /* by kg_verdict; [KG_VERDICT_COUNT]: a verdict no list names, or none */
    double reward_sum;                   /* "reward" where it is a number (the mean is over every result) */
    long timed_correct;                  /* verdict correct with a speedup > 0 */
    double log_speedup_sum;              /* ln(speedup) over those */
    double stage_ms_sum[KG_STAGE_COUNT]; /* "ms" of each stage that ran (any status but skipped) */
    long stage_runs[KG_STAGE_COUNT];     /* how many ran */
} kg_result_tally;

/* Adds one ended job: its result (any JSON value: a non-object counts as a result with no verdict known), or NULL
 * for a job that ended without one (counted in missing, nothing else). */
void kg_result_tally_add(kg_result_tally *t, const json_t *result);

/* verdicts[v] / results; 0 with no results. */
double kg_result_tally_rate(const kg_result_tally *t, kg_verdict v);
/* reward_sum / results (a result without a reward counts as 0); 0 with no results. */
double kg_result_tally_mean_reward(const kg_result_tally *t);
/* exp(log_speedup_sum / timed_correct); NaN when no correct result was timed. */
double kg_result_tally_geomean_speedup(const kg_result_tally *t);
/* Seconds spent in stage s over every result (stage_ms_sum / 1000). */
double kg_result_tally_stage_seconds(const kg_result_tally *t, kg_stage s);

#endif
