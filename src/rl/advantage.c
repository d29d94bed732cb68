/* advantage.c — GRPO, RLOO and TRLOO advantages over per-turn records
 * (docs/rl.md §Advantages; Dr. Kernel reference §3.6).
 *
 * Two passes over sorted index arrays: first per trajectory (prompt, sample)
 * in turn order to build returns, then per group to subtract baselines.  The
 * leave-one-out baseline is computed as (S − G_i)/(N − 1) so that it does not
 * depend on G_i at all, which is what makes TRLOO unbiased. */
#include "kgym/rl.h"
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const estimator_names[] = {"grpo", "rloo", "trloo"};

int kg_estimator_parse(const char *name, kg_estimator *out, kg_error *err)
{
    for (int i = 0; name && i < 3; i++) {
        if (strcmp(name, estimator_names[i]) == 0) {
            *out = (kg_estimator)i;
            return KG_OK;
        }
    }
    return kg_error_set(err, KG_ERR_INVALID,
                        "unknown estimator \"%s\" (expected grpo, rloo or trloo)",
                        name ? name : "(null)");
}

const char *kg_estimator_name(kg_estimator estimator)
{
    return (int)estimator >= 0 && estimator <= KG_ESTIMATOR_TRLOO ? estimator_names[estimator]
                                                                  : "?";
}

void kg_advantage_config_default(kg_advantage_config *cfg, kg_estimator estimator)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->estimator = estimator;
    cfg->gamma = 1.0;
    cfg->normalize_std = 0;
    cfg->std_eps = 1e-6;
    cfg->singleton = KG_SINGLETON_ZERO;
}

static int check_config(const kg_advantage_config *cfg, kg_error *err)
{
    if ((int)cfg->estimator < 0 || cfg->estimator > KG_ESTIMATOR_TRLOO)
        return kg_error_set(err, KG_ERR_INVALID, "estimator code %d is unknown",
                            (int)cfg->estimator);
    if (!isfinite(cfg->gamma) || cfg->gamma < 0 || cfg->gamma > 1)
        return kg_error_set(err, KG_ERR_INVALID, "gamma %g is outside [0, 1]", cfg->gamma);
    if (!isfinite(cfg->std_eps) || cfg->std_eps < 0)
        return kg_error_set(err, KG_ERR_INVALID, "std_eps %g must be >= 0", cfg->std_eps);
    if (cfg->singleton != KG_SINGLETON_ZERO && cfg->singleton != KG_SINGLETON_RETURN)
        return kg_error_set(err, KG_ERR_INVALID, "singleton rule %d is unknown",
                            (int)cfg->singleton);
    return KG_OK;
}

/* Pass 1: returns G_t = Σ_{t'≥t} γ^{t'−t} r_t' within each trajectory.
 * Masked turns' rewards still count: a masked turn is excluded from the
 * loss, but what happened in it is still a consequence of earlier turns. */
static int compute_returns(const kg_advantage_config *cfg, size_t n, const int64_t *prompt,
                           const int64_t *sample, const int32_t *turn, const double *reward,
                           kg_rl_key *keys, double *ret, kg_error *err)
{
    for (size_t i = 0; i < n; i++)
        keys[i] = (kg_rl_key){prompt[i], sample[i], turn ? turn[i] : 0, i};
    kg_rl_sort_keys(keys, n);
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && keys[start - 1].a == keys[end - 1].a &&
               keys[start - 1].b == keys[end - 1].b)
            start--;
        /* [start, end) is one trajectory in increasing turn order */
        double g = 0.0;
        for (size_t k = end; k-- > start;) {
            size_t i = keys[k].index;
            if (k + 1 < end) {
                if (keys[k + 1].c == keys[k].c)
                    return kg_error_set(err, KG_ERR_INVALID,
                                        "records %zu and %zu are both prompt %lld, sample "
                                        "%lld, turn %lld",
                                        i, keys[k + 1].index, (long long)keys[k].a,
                                        (long long)keys[k].b, (long long)keys[k].c);
                g *= pow(cfg->gamma, (double)(keys[k + 1].c - keys[k].c));
            }
            g += reward[i];
            ret[i] = g;
        }
        if (cfg->estimator == KG_ESTIMATOR_RLOO && end - start > 1)
            return kg_error_set(err, KG_ERR_INVALID,
                                "records %zu and %zu are two turns of prompt %lld, sample "
                                "%lld: rloo is single-turn (use trloo for multi-turn data)",
                                keys[start].index, keys[start + 1].index,
                                (long long)keys[start].a, (long long)keys[start].b);
        end = start;
    }
    return KG_OK;
}

/* Pass 2 on one group [start, end) of unmasked records. */
static void group_advantages(const kg_advantage_config *cfg, const kg_rl_key *keys,
                             size_t start, size_t end, const double *value, double *adv)
{
    size_t n = end - start;
    if (n == 1) {
        size_t i = keys[start].index;
        adv[i] = cfg->singleton == KG_SINGLETON_RETURN ? value[i] : 0.0;
        return;
    }
    double sum = 0.0;
    for (size_t k = start; k < end; k++)
        sum += value[keys[k].index];
    double mean = sum / (double)n;
    if (cfg->estimator == KG_ESTIMATOR_GRPO) {
        double scale = 1.0;
        if (cfg->normalize_std) {
            double ss = 0.0;
            for (size_t k = start; k < end; k++) {
                double d = value[keys[k].index] - mean;
                ss += d * d;
            }
            /* unbiased (N−1) std, as torch.std in VERL's GRPO */
            scale = 1.0 / (sqrt(ss / (double)(n - 1)) + cfg->std_eps);
        }
        for (size_t k = start; k < end; k++) {
            size_t i = keys[k].index;
            adv[i] = (value[i] - mean) * scale;
        }
        return;
    }
    for (size_t k = start; k < end; k++) {
        size_t i = keys[k].index;
        adv[i] = value[i] - (sum - value[i]) / (double)(n - 1);
    }
}

int kg_advantages(const kg_advantage_config *cfg, size_t n, const int64_t *prompt,
                  const int64_t *sample, const int32_t *turn, const double *reward,
                  const uint8_t *mask, double *advantage_out, double *return_out,
                  kg_error *err)
{
    if (!cfg || (n > 0 && (!prompt || !sample || !reward || !advantage_out)))
        return kg_error_set(err, KG_ERR_INVALID, "kg_advantages: NULL argument");
    int rc = check_config(cfg, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(reward[i]))
            return kg_error_set(err, KG_ERR_INVALID,
                                "record %zu (prompt %lld, sample %lld, turn %d): reward is %s",
                                i, (long long)prompt[i], (long long)sample[i],
                                turn ? (int)turn[i] : 0, isnan(reward[i]) ? "NaN" : "infinite");
    }
    if (n == 0)
        return KG_OK;
    kg_rl_key *keys = malloc(n * sizeof *keys);
    double *ret = return_out ? return_out : malloc(n * sizeof *ret);
    if (!keys || !ret) {
        free(keys);
        if (ret != return_out)
            free(ret);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", n);
    }
    rc = compute_returns(cfg, n, prompt, sample, turn, reward, keys, ret, err);
    if (!rc) {
        /* groups: (prompt, turn) for GRPO/TRLOO, prompt alone for RLOO (its
         * records are single-turn, so (prompt, turn) would split nothing) */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            advantage_out[i] = 0.0;
            if (mask && !mask[i])
                continue;
            int64_t group_turn = cfg->estimator == KG_ESTIMATOR_RLOO || !turn ? 0 : turn[i];
            keys[m++] = (kg_rl_key){prompt[i], group_turn, 0, i};
        }
        kg_rl_sort_keys(keys, m);
        for (size_t start = 0; start < m;) {
            size_t end = start + 1;
            while (end < m && keys[end].a == keys[start].a && keys[end].b == keys[start].b)
                end++;
            group_advantages(cfg, keys, start, end, ret, advantage_out);
            start = end;
        }
    }
    free(keys);
    if (ret != return_out)
        free(ret);
    return rc;
}
