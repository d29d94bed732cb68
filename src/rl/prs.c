/* prs.c — profiling-based rejection sampling (docs/rl.md §PRS; Dr. Kernel
 * reference §3.8): correct turns whose kernels cover little of the GPU time
 * are mostly lazy wrappers around PyTorch, so they are dropped from the loss
 * with a probability that falls linearly as coverage rises.  The coverage is
 * the turn's own, or (geometric mode) the geometric mean over the
 * trajectory's live turns (Dr. Kernel's kernel/rewards/coverage_helper.py). */
#include "kgym/rl.h"
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kg_prs_config_default(kg_prs_config *cfg)
{
    cfg->mode = KG_PRS_TURN;
    cfg->threshold = 0.3;
    cfg->factor = 0.1;
    cfg->speedup_threshold = NAN;
}

/* clamp((c − threshold)/factor, 0, 1) for a correct turn judged on coverage
 * c, raised to 1 by the speed escape; 1 for any other turn. */
static double keep_probability(const kg_prs_config *cfg, const kg_eval_outcome *outcome,
                               double c)
{
    if (!kg_outcome_is_correct(outcome))
        return 1.0; /* only correct turns are candidates for rejection */
    double prob;
    if (cfg->factor > 0)
        prob = fmin(fmax((c - cfg->threshold) / cfg->factor, 0.0), 1.0);
    else
        prob = c >= cfg->threshold ? 1.0 : 0.0;
    /* the optional speed escape: a fast kernel is kept whatever its coverage */
    if (!isnan(cfg->speedup_threshold) && !isnan(outcome->speedup) &&
        outcome->speedup >= cfg->speedup_threshold)
        prob = 1.0;
    return prob;
}

static int check_config(const kg_prs_config *cfg, kg_error *err)
{
    if (!isfinite(cfg->threshold) || isnan(cfg->factor))
        return kg_error_set(err, KG_ERR_INVALID, "PRS threshold and factor must be numbers");
    if ((int)cfg->mode < 0 || cfg->mode >= KG_PRS_MODE_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "PRS mode %d is unknown", (int)cfg->mode);
    return KG_OK;
}

int kg_prs_keep_probability(const kg_prs_config *cfg, const kg_eval_outcome *outcome,
                            double *p, kg_error *err)
{
    if (!cfg || !outcome || !p)
        return kg_error_set(err, KG_ERR_INVALID, "kg_prs_keep_probability: NULL argument");
    int rc = check_config(cfg, err);
    if (rc)
        return rc;
    if (kg_outcome_is_correct(outcome) && isnan(outcome->coverage))
        return kg_error_set(err, KG_ERR_INVALID,
                            "a correct turn has no profile.coverage (PRS needs a GPU "
                            "evaluation with profiling)");
    *p = keep_probability(cfg, outcome, outcome->coverage);
    return KG_OK;
}

/* Geometric mode: each record's trajectory coverage exp(mean log c) over the
 * live turns, with c clamped to 1e-8 and the exponent to ±20 (Dr. Kernel's
 * coverage_helper.py), into cov_out. */
static int geometric_coverage(const kg_outcome_columns *cols, const int64_t *trajectory,
                              const uint8_t *live, double *cov_out, kg_error *err)
{
    size_t n = cols->n;
    kg_rl_key *keys = kg_rl_keys_by_id(trajectory, n);
    if (!keys)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", n);
    for (size_t start = 0; start < n;) {
        size_t end = kg_rl_run_end(keys, n, start);
        double sum = 0.0;
        size_t count = 0;
        for (size_t k = start; k < end; k++) {
            size_t i = keys[k].index;
            if (live && !live[i])
                continue;
            double c = cols->coverage ? cols->coverage[i] : NAN;
            /* an unmeasured coverage is Dr. Kernel's default 0 */
            sum += log(fmax(isnan(c) ? 0.0 : c, 1e-8));
            count++;
        }
        double mean = count ? sum / (double)count : 0.0;
        double g = exp(fmin(fmax(mean, -20.0), 20.0));
        for (size_t k = start; k < end; k++)
            cov_out[keys[k].index] = g;
        start = end;
    }
    free(keys);
    return KG_OK;
}

static int record_error(kg_error *err, int rc, size_t i)
{
    if (err) {
        char msg[sizeof err->message];
        memcpy(msg, err->message, sizeof msg);
        kg_error_set(err, rc, "record %zu: %s", i, msg);
    }
    return rc;
}

int kg_prs_sample(const kg_prs_config *cfg, kg_rng *rng, const kg_outcome_columns *cols,
                  const int64_t *trajectory, const uint8_t *live, uint8_t *keep_out,
                  double *prob_out, kg_prs_stats *stats, kg_error *err)
{
    if (!cfg || !rng || !cols || !keep_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_prs_sample: NULL argument");
    int rc = check_config(cfg, err);
    if (rc)
        return rc;
    int geometric = cfg->mode == KG_PRS_GEOMETRIC;
    if (geometric && cols->n > 0 && !trajectory)
        return kg_error_set(err, KG_ERR_INVALID, "PRS geometric mode needs trajectory ids");
    double *cov = NULL;
    if (geometric) {
        cov = malloc((cols->n ? cols->n : 1) * sizeof *cov);
        if (!cov)
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", cols->n);
    }
    /* every record is checked before any draw, so an error leaves no
     * half-drawn stream behind */
    for (size_t i = 0; i < cols->n; i++) {
        kg_eval_outcome o;
        double p;
        rc = kg_outcome_columns_get(cols, i, &o, err);
        if (!rc)
            rc = kg_prs_keep_probability(cfg, &o, &p, err);
        if (rc) {
            free(cov);
            return record_error(err, rc, i);
        }
    }
    if (geometric && (rc = geometric_coverage(cols, trajectory, live, cov, err)) != KG_OK) {
        free(cov);
        return rc;
    }
    kg_prs_stats s;
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < cols->n; i++) {
        kg_eval_outcome o;
        kg_outcome_columns_get(cols, i, &o, NULL);
        double p = keep_probability(cfg, &o, geometric ? cov[i] : o.coverage);
        /* always draw, even for p in {0, 1}, so that record i's draw does not
         * depend on the other records' probabilities */
        double u = kg_rng_uniform(rng);
        int keep = u < p;
        keep_out[i] = (uint8_t)keep;
        if (prob_out)
            prob_out[i] = p;
        s.total++;
        s.kept += (size_t)keep;
        if (kg_outcome_is_correct(&o)) {
            s.correct++;
            s.correct_kept += (size_t)keep;
            s.expected_correct_kept += p;
        }
    }
    free(cov);
    s.acceptance_rate = s.total ? (double)s.kept / (double)s.total : NAN;
    s.correct_acceptance_rate = s.correct ? (double)s.correct_kept / (double)s.correct : NAN;
    if (stats)
        *stats = s;
    return KG_OK;
}
