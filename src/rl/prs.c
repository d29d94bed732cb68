/* prs.c — profiling-based rejection sampling (docs/rl.md §PRS; Dr. Kernel
 * reference §3.8): correct turns whose kernels cover little of the GPU time
 * are mostly lazy wrappers around PyTorch, so they are dropped from the loss
 * with a probability that falls linearly as coverage rises. */
#include "kgym/rl.h"

#include <math.h>
#include <string.h>

void kg_prs_config_default(kg_prs_config *cfg)
{
    cfg->mode = KG_PRS_TURN;
    cfg->threshold = 0.3;
    cfg->factor = 0.1;
    cfg->speedup_threshold = NAN;
}

int kg_prs_keep_probability(const kg_prs_config *cfg, const kg_eval_outcome *outcome,
                            double *p, kg_error *err)
{
    if (!cfg || !outcome || !p)
        return kg_error_set(err, KG_ERR_INVALID, "kg_prs_keep_probability: NULL argument");
    if (!isfinite(cfg->threshold) || isnan(cfg->factor))
        return kg_error_set(err, KG_ERR_INVALID, "PRS threshold and factor must be numbers");
    if (!kg_outcome_is_correct(outcome)) {
        *p = 1.0; /* only correct turns are candidates for rejection */
        return KG_OK;
    }
    if (isnan(outcome->coverage))
        return kg_error_set(err, KG_ERR_INVALID,
                            "a correct turn has no profile.coverage (PRS needs a GPU "
                            "evaluation with profiling)");
    double prob;
    if (cfg->factor > 0)
        prob = fmin(fmax((outcome->coverage - cfg->threshold) / cfg->factor, 0.0), 1.0);
    else
        prob = outcome->coverage >= cfg->threshold ? 1.0 : 0.0;
    /* the optional speed escape: a fast kernel is kept whatever its coverage */
    if (!isnan(cfg->speedup_threshold) && !isnan(outcome->speedup) &&
        outcome->speedup >= cfg->speedup_threshold)
        prob = 1.0;
    *p = prob;
    return KG_OK;
}

int kg_prs_sample(const kg_prs_config *cfg, kg_rng *rng, const kg_outcome_columns *cols,
                  uint8_t *keep_out, double *prob_out, kg_prs_stats *stats, kg_error *err)
{
    if (!cfg || !rng || !cols || !keep_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_prs_sample: NULL argument");
    kg_prs_stats s;
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < cols->n; i++) {
        kg_eval_outcome o;
        double p;
        int rc = kg_outcome_columns_get(cols, i, &o, err);
        if (!rc)
            rc = kg_prs_keep_probability(cfg, &o, &p, err);
        if (rc) {
            if (err) {
                char msg[sizeof err->message];
                memcpy(msg, err->message, sizeof msg);
                kg_error_set(err, rc, "record %zu: %s", i, msg);
            }
            return rc;
        }
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
    s.acceptance_rate = s.total ? (double)s.kept / (double)s.total : NAN;
    s.correct_acceptance_rate = s.correct ? (double)s.correct_kept / (double)s.correct : NAN;
    if (stats)
        *stats = s;
    return KG_OK;
}
