/* mrs.c — mismatch rejection sampling and truncated importance weights
 * (docs/rl.md §MRS; Dr. Kernel's verl_patch mismatch_helper.py).  The
 * rollout engine and the trainer compute slightly different token
 * probabilities; units (tokens, turns or trajectories, by mode) whose ratio
 * drifts are off-policy and are dropped, and a single token the trainer finds
 * nearly impossible vetoes its turn.  Loss-masked turns take no part. */
#include "kgym/rl.h"
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* exp() of a clamped log so a wild ratio gives a large but finite weight */
#define KG_LOG_WEIGHT_CLAMP 20.0

void kg_mrs_config_default(kg_mrs_config *cfg)
{
    cfg->mode = KG_MRS_GEOMETRIC;
    cfg->delta = 0.001;
    cfg->veto_threshold = 1e-4;
}

static int check_tokens(size_t n_turns, const int64_t *trajectory, const int64_t *offsets,
                        const double *log_ratio, kg_error *err)
{
    if (n_turns > 0 && (!trajectory || !offsets))
        return kg_error_set(err, KG_ERR_INVALID, "turns need trajectory ids and token offsets");
    if (n_turns > 0 && offsets[0] != 0)
        return kg_error_set(err, KG_ERR_INVALID, "token_offsets[0] must be 0, not %lld",
                            (long long)offsets[0]);
    for (size_t r = 0; r < n_turns; r++) {
        if (offsets[r + 1] < offsets[r])
            return kg_error_set(err, KG_ERR_INVALID,
                                "turn %zu: token offsets decrease (%lld then %lld)", r,
                                (long long)offsets[r], (long long)offsets[r + 1]);
        for (int64_t t = offsets[r]; t < offsets[r + 1]; t++) {
            /* -inf (the trainer gives the token probability 0) is meaningful
             * and vetoes the turn; NaN and +inf are broken inputs */
            if (!log_ratio || isnan(log_ratio[t]) || log_ratio[t] == INFINITY)
                return kg_error_set(err, KG_ERR_INVALID,
                                    "turn %zu, token %lld: log-ratio is %s", r,
                                    (long long)(t - offsets[r]),
                                    !log_ratio ? "missing" : isnan(log_ratio[t]) ? "NaN" : "+inf");
        }
    }
    return KG_OK;
}

static double clamped_exp(double x)
{
    return exp(fmin(fmax(x, -KG_LOG_WEIGHT_CLAMP), KG_LOG_WEIGHT_CLAMP));
}

/* Σℓ and the token count over a turn's tokens. */
static void turn_sums(const int64_t *offsets, const double *log_ratio, size_t r, double *sum,
                      int64_t *count)
{
    double s = 0.0;
    for (int64_t t = offsets[r]; t < offsets[r + 1]; t++)
        s += log_ratio[t];
    *sum = s;
    *count = offsets[r + 1] - offsets[r];
}

/* The ratio of a unit from its Σℓ and token count: the product (exp Σ) or
 * the geometric mean (exp of the mean; 1 for no tokens), exp clamped as in
 * Dr. Kernel (mismatch_helper.py SAFETY_BOUND). */
static double unit_ratio(int geometric, double sum, int64_t count)
{
    if (geometric)
        return count ? clamped_exp(sum / (double)count) : 1.0;
    return clamped_exp(sum);
}

int kg_mrs_filter(const kg_mrs_config *cfg, size_t n_turns, const int64_t *trajectory,
                  const int64_t *token_offsets, const double *log_ratio, const uint8_t *mask,
                  uint8_t *keep_out, double *ratio_out, uint8_t *token_keep_out,
                  kg_mrs_stats *stats, kg_error *err)
{
    if (!cfg || (n_turns > 0 && !keep_out))
        return kg_error_set(err, KG_ERR_INVALID, "kg_mrs_filter: NULL argument");
    if (!(cfg->delta >= 0) || isnan(cfg->veto_threshold))
        return kg_error_set(err, KG_ERR_INVALID, "MRS delta must be >= 0");
    if ((int)cfg->mode < 0 || cfg->mode >= KG_MRS_MODE_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "MRS mode %d is unknown", (int)cfg->mode);
    int rc = check_tokens(n_turns, trajectory, token_offsets, log_ratio, err);
    if (rc)
        return rc;
    kg_rl_key *keys = kg_rl_keys_by_id(trajectory, n_turns);
    if (!keys)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu turns", n_turns);
    kg_mrs_stats s;
    memset(&s, 0, sizeof s);
    double lo = 1.0 - cfg->delta, hi = 1.0 + cfg->delta;
    double log_veto = cfg->veto_threshold > 0 ? log(cfg->veto_threshold) : -INFINITY;
    int per_trajectory = cfg->mode == KG_MRS_SEQUENCE || cfg->mode == KG_MRS_GEOMETRIC;
    int geometric = cfg->mode == KG_MRS_TURN_GEO || cfg->mode == KG_MRS_GEOMETRIC;
    for (size_t start = 0; start < n_turns;) {
        size_t end = kg_rl_run_end(keys, n_turns, start);
        /* trajectory modes pool the live turns' tokens */
        double seq_sum = 0.0;
        int64_t seq_count = 0;
        for (size_t k = start; k < end && per_trajectory; k++) {
            size_t r = keys[k].index;
            if (mask && !mask[r])
                continue;
            double sum;
            int64_t count;
            turn_sums(token_offsets, log_ratio, r, &sum, &count);
            seq_sum += sum;
            seq_count += count;
        }
        double seq_ratio = unit_ratio(geometric, seq_sum, seq_count);
        int all_kept = 1;
        for (size_t k = start; k < end; k++) {
            size_t r = keys[k].index;
            int live = !mask || mask[r];
            double ratio = seq_ratio;
            int keep = 1, vetoed = 0;
            if (cfg->mode == KG_MRS_TOKEN) {
                ratio = NAN;
                keep = 0;
                for (int64_t t = token_offsets[r]; t < token_offsets[r + 1]; t++) {
                    double w = clamped_exp(log_ratio[t]);
                    int tk = !live || (w >= lo && w <= hi);
                    keep |= tk;
                    if (token_keep_out)
                        token_keep_out[t] = (uint8_t)tk;
                }
                /* a turn without tokens has nothing to drop */
                keep |= token_offsets[r + 1] == token_offsets[r];
            } else {
                if (!per_trajectory) {
                    double sum;
                    int64_t count;
                    turn_sums(token_offsets, log_ratio, r, &sum, &count);
                    ratio = live ? unit_ratio(geometric, sum, count) : 1.0;
                }
                keep = !live || (ratio >= lo && ratio <= hi);
            }
            for (int64_t t = token_offsets[r]; live && t < token_offsets[r + 1] && !vetoed; t++)
                vetoed = log_ratio[t] < log_veto;
            keep = keep && !vetoed;
            /* the veto and the turn decision override token decisions */
            for (int64_t t = token_offsets[r]; token_keep_out && t < token_offsets[r + 1]; t++)
                if (cfg->mode != KG_MRS_TOKEN || !keep)
                    token_keep_out[t] = (uint8_t)keep;
            keep_out[r] = (uint8_t)keep;
            if (ratio_out)
                ratio_out[r] = ratio;
            s.turns++;
            s.turns_vetoed += (size_t)vetoed;
            s.turns_kept += (size_t)keep;
            all_kept &= keep;
        }
        s.trajectories++;
        s.trajectories_kept += (size_t)all_kept;
        start = end;
    }
    free(keys);
    if (stats)
        *stats = s;
    return KG_OK;
}

int kg_is_level_parse(const char *name, kg_is_level *out, kg_error *err)
{
    int v;
    int rc = kg_rl_option_parse(KG_OPT_IS_LEVEL, name, &v, err);
    if (!rc)
        *out = (kg_is_level)v;
    return rc;
}

int kg_truncated_is_weights(double cap, kg_is_level level, size_t n_turns,
                            const int64_t *trajectory, const int64_t *token_offsets,
                            const double *log_ratio, double *weights_out, kg_error *err)
{
    if (!(cap > 0))
        return kg_error_set(err, KG_ERR_INVALID, "importance-weight cap must be > 0");
    if ((int)level < 0 || level > KG_IS_SEQUENCE)
        return kg_error_set(err, KG_ERR_INVALID, "importance-weight level %d is unknown",
                            (int)level);
    int rc = check_tokens(n_turns, trajectory, token_offsets, log_ratio, err);
    if (rc)
        return rc;
    if (n_turns > 0 && token_offsets[n_turns] > 0 && !weights_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_truncated_is_weights: NULL output");
    kg_rl_key *keys = kg_rl_keys_by_id(trajectory, n_turns);
    if (!keys)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu turns", n_turns);
    for (size_t start = 0; start < n_turns;) {
        size_t end = kg_rl_run_end(keys, n_turns, start);
        double seq_sum = 0.0;
        for (size_t k = start; k < end; k++) {
            size_t r = keys[k].index;
            for (int64_t t = token_offsets[r]; t < token_offsets[r + 1]; t++)
                seq_sum += log_ratio[t];
        }
        for (size_t k = start; k < end; k++) {
            size_t r = keys[k].index;
            double turn_sum = 0.0;
            for (int64_t t = token_offsets[r]; t < token_offsets[r + 1]; t++)
                turn_sum += log_ratio[t];
            for (int64_t t = token_offsets[r]; t < token_offsets[r + 1]; t++) {
                double lw = level == KG_IS_TOKEN ? log_ratio[t]
                            : level == KG_IS_TURN ? turn_sum : seq_sum;
                weights_out[t] = fmin(clamped_exp(lw), cap);
            }
        }
        start = end;
    }
    free(keys);
    return KG_OK;
}
