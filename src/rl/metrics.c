/* metrics.c — compile / correct / hack rates, Fast@p and geometric-mean
 * speedup per turn and as best-of-turns (docs/rl.md §Metrics; Dr. Kernel's
 * kernel/metrics/kernel_multi_turn_metrics.py).  A per-turn rate divides by
 * the samples that have the turn, a best-of-turns rate by all samples, so
 * Fast@p is Dr. Kernel's "fast@p_in_all".
 *
 * Not the service's and bench's sum over results (eval/tally.h), on purpose: these metrics count samples, not
 * results.  A best-of-turns rate folds each trajectory's turns into what it achieved by turn t (its best
 * speedup), and a sample without a turn t still counts there as a failure; a per-turn rate groups results by
 * turn.  "Correct" is kg_outcome_is_correct (no hack), "compiled" is Dr. Kernel's, and Fast@p needs the
 * thresholds: none of these is a count of verdicts.  The input is the RL library's outcome columns, not result
 * JSON, and libkgym.so (src/rl) is built without src/eval, where the tally lives.  What the two share is the
 * geometric mean of a log sum and a count. */
#include "kgym/rl.h"
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double default_thresholds[] = {1.0, 1.2, 1.5, 2.0, 3.0};

typedef struct {
    size_t n, compiled, correct, hacked, timed;
    size_t fast[KG_METRICS_MAX_THRESHOLDS];
    double log_sum;
} accumulator;

/* What a sample has achieved so far (best-of-turns) or in one turn. */
typedef struct {
    int seen, compiled, correct, hacked, timed;
    double best_speedup; /* over correct, timed candidates */
} sample_state;

static void absorb(sample_state *s, const kg_eval_outcome *o)
{
    s->seen = 1;
    s->compiled |= kg_outcome_compiled(o);
    s->hacked |= o->hacked;
    if (kg_outcome_is_correct(o)) {
        s->correct = 1;
        if (!isnan(o->speedup)) {
            s->best_speedup = s->timed ? fmax(s->best_speedup, o->speedup) : o->speedup;
            s->timed = 1;
        }
    }
}

static void add(accumulator *a, const sample_state *s, const kg_metrics_report *r)
{
    a->n++;
    a->compiled += (size_t)s->compiled;
    a->correct += (size_t)s->correct;
    a->hacked += (size_t)s->hacked;
    if (s->timed) {
        a->timed++;
        a->log_sum += log(s->best_speedup);
        for (size_t p = 0; p < r->n_thresholds; p++)
            a->fast[p] += s->best_speedup >= r->thresholds[p];
    }
}

static void finish(const accumulator *a, int32_t turn, const kg_metrics_report *r,
                   kg_turn_metrics *m)
{
    double n = (double)a->n;
    memset(m, 0, sizeof *m);
    m->turn = turn;
    m->samples = a->n;
    m->compile_rate = a->n ? (double)a->compiled / n : NAN;
    m->correct_rate = a->n ? (double)a->correct / n : NAN;
    m->hack_rate = a->n ? (double)a->hacked / n : NAN;
    for (size_t p = 0; p < r->n_thresholds; p++)
        m->fast[p] = a->n ? (double)a->fast[p] / n : NAN;
    m->timed_correct = a->timed;
    m->geomean_speedup = a->timed ? exp(a->log_sum / (double)a->timed) : NAN;
}

static int compare_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static size_t turn_slot(const int32_t *turns, size_t n_turns, int32_t t)
{
    const int32_t *hit = bsearch(&t, turns, n_turns, sizeof *turns, compare_i32);
    return (size_t)(hit - turns);
}

static int check_inputs(const kg_outcome_columns *cols, const double *thresholds,
                        size_t n_thresholds, kg_metrics_report *out, kg_error *err)
{
    if (!thresholds) {
        thresholds = default_thresholds;
        n_thresholds = sizeof default_thresholds / sizeof default_thresholds[0];
    }
    if (n_thresholds < 1 || n_thresholds > KG_METRICS_MAX_THRESHOLDS)
        return kg_error_set(err, KG_ERR_INVALID, "Fast@p needs 1 to %d thresholds, not %zu",
                            KG_METRICS_MAX_THRESHOLDS, n_thresholds);
    for (size_t p = 0; p < n_thresholds; p++) {
        if (!isfinite(thresholds[p]) || thresholds[p] <= 0)
            return kg_error_set(err, KG_ERR_INVALID, "Fast@p threshold %g must be > 0",
                                thresholds[p]);
        out->thresholds[p] = thresholds[p];
    }
    out->n_thresholds = n_thresholds;
    for (size_t i = 0; i < cols->n; i++) {
        kg_eval_outcome o;
        int rc = kg_outcome_columns_get(cols, i, &o, err);
        if (rc)
            return rc;
        /* a measured speedup of 0 or less is a broken timing, and its log
         * would poison the geometric mean */
        if (!isnan(o.speedup) && !(isfinite(o.speedup) && o.speedup > 0))
            return kg_error_set(err, KG_ERR_INVALID, "record %zu: speedup %g is not > 0", i,
                                o.speedup);
    }
    return KG_OK;
}

int kg_metrics_compute(const kg_outcome_columns *cols, const int64_t *trajectory,
                       const int32_t *turn, const double *thresholds, size_t n_thresholds,
                       kg_metrics_report *out, kg_error *err)
{
    if (!cols || !out || (cols->n > 0 && !trajectory))
        return kg_error_set(err, KG_ERR_INVALID, "kg_metrics_compute: NULL argument");
    memset(out, 0, sizeof *out);
    int rc = check_inputs(cols, thresholds, n_thresholds, out, err);
    if (rc)
        return rc;
    size_t n = cols->n;
    kg_rl_key *keys = malloc((n ? n : 1) * sizeof *keys);
    int32_t *turns = malloc((n ? n : 1) * sizeof *turns);
    accumulator *acc = calloc(2 * (n ? n : 1), sizeof *acc);
    if (!keys || !turns || !acc) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t t = turn ? turn[i] : 1;
        keys[i] = (kg_rl_key){trajectory[i], t, 0, i};
        turns[i] = t;
    }
    kg_rl_sort_keys(keys, n);
    qsort(turns, n, sizeof *turns, compare_i32);
    size_t n_turns = 0;
    for (size_t i = 0; i < n; i++)
        if (n_turns == 0 || turns[n_turns - 1] != turns[i])
            turns[n_turns++] = turns[i];
    accumulator *per_turn = acc, *best_of = acc + n_turns;

    for (size_t start = 0; start < n;) {
        size_t end = kg_rl_run_end(keys, n, start);
        out->samples++;
        sample_state best = {0, 0, 0, 0, 0, 0.0};
        size_t k = start;
        for (size_t j = 0; j < n_turns; j++) {
            for (; k < end && keys[k].b <= turns[j]; k++) {
                if (k > start && keys[k].b == keys[k - 1].b) {
                    rc = kg_error_set(err, KG_ERR_INVALID,
                                      "records %zu and %zu are both turn %lld of one sample",
                                      keys[k - 1].index, keys[k].index, (long long)keys[k].b);
                    goto done;
                }
                kg_eval_outcome o;
                kg_outcome_columns_get(cols, keys[k].index, &o, NULL);
                sample_state single = {0, 0, 0, 0, 0, 0.0};
                absorb(&single, &o);
                add(&per_turn[turn_slot(turns, n_turns, (int32_t)keys[k].b)], &single, out);
                absorb(&best, &o);
            }
            /* every sample counts at every turn: one with no turn <= t yet
             * is a failure there, as in Dr. Kernel's best_by_turn
             * (kernel_multi_turn_metrics.py) */
            add(&best_of[j], &best, out);
        }
        start = end;
    }
    out->per_turn = calloc(n_turns ? n_turns : 1, sizeof *out->per_turn);
    out->best_of = calloc(n_turns ? n_turns : 1, sizeof *out->best_of);
    if (!out->per_turn || !out->best_of) {
        kg_metrics_report_free(out);
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory for the metrics report");
        goto done;
    }
    out->n_turns = n_turns;
    for (size_t j = 0; j < n_turns; j++) {
        finish(&per_turn[j], turns[j], out, &out->per_turn[j]);
        finish(&best_of[j], turns[j], out, &out->best_of[j]);
    }
done:
    free(keys);
    free(turns);
    free(acc);
    return rc;
}

void kg_metrics_report_free(kg_metrics_report *report)
{
    if (!report)
        return;
    free(report->per_turn);
    free(report->best_of);
    report->per_turn = report->best_of = NULL;
    report->n_turns = 0;
}
