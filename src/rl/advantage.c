/* advantage.c — GRPO, RLOO and TRLOO advantages over per-turn records, and
 * the low-variance group filter
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

int kg_estimator_parse(const char *name, kg_estimator *out, kg_error *err)
{
    int v;
    int rc = kg_rl_option_parse(KG_OPT_ESTIMATOR, name, &v, err);
    if (!rc)
        *out = (kg_estimator)v;
    return rc;
}

const char *kg_estimator_name(kg_estimator estimator)
{
    return kg_rl_option_name(KG_OPT_ESTIMATOR, (int)estimator);
}

void kg_advantage_config_default(kg_advantage_config *cfg, kg_estimator estimator)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->estimator = estimator;
    cfg->gamma = 1.0;
    cfg->normalize_std = 0;
    cfg->std_eps = 1e-6;
    cfg->singleton = KG_SINGLETON_RETURN;
    cfg->masked_reward = KG_MASKED_REWARD_ZERO;
    cfg->rejected = KG_REJECTED_BASELINE;
    cfg->small_std = KG_SMALL_STD_ONE;
}

static int is_value(kg_rl_option option, int value)
{
    return strcmp(kg_rl_option_name(option, value), "?") != 0;
}

static int check_config(const kg_advantage_config *cfg, kg_error *err)
{
    if (!is_value(KG_OPT_ESTIMATOR, (int)cfg->estimator) ||
        !is_value(KG_OPT_SINGLETON, (int)cfg->singleton) ||
        !is_value(KG_OPT_MASKED_REWARD, (int)cfg->masked_reward) ||
        !is_value(KG_OPT_REJECTED, (int)cfg->rejected) ||
        !is_value(KG_OPT_SMALL_STD, (int)cfg->small_std))
        return kg_error_set(err, KG_ERR_INVALID,
                            "advantage config: estimator %d, singleton %d, masked_reward %d, "
                            "rejected %d or small_std %d is not a known code",
                            (int)cfg->estimator, (int)cfg->singleton, (int)cfg->masked_reward,
                            (int)cfg->rejected, (int)cfg->small_std);
    if (!isfinite(cfg->gamma) || cfg->gamma < 0 || cfg->gamma > 1)
        return kg_error_set(err, KG_ERR_INVALID, "gamma %g is outside [0, 1]", cfg->gamma);
    if (!isfinite(cfg->std_eps) || cfg->std_eps < 0)
        return kg_error_set(err, KG_ERR_INVALID, "std_eps %g must be >= 0", cfg->std_eps);
    return KG_OK;
}

/* Pass 1: returns G_t = Σ_{t'≥t} γ^{t'−t} r_t' within each trajectory.
 * A masked turn's reward is zeroed first unless masked_reward = keep:
 * Dr. Kernel multiplies rewards by the loss mask before its returns
 * (kernel_trainer.py apply_loss_mask_to_rewards), so a void turn's reward
 * reaches no earlier turn. */
static int compute_returns(const kg_advantage_config *cfg, size_t n, const int64_t *prompt,
                           const int64_t *sample, const int32_t *turn, const double *reward,
                           const uint8_t *mask, kg_rl_key *keys, double *ret, kg_error *err)
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
            if (!(mask && !mask[i] && cfg->masked_reward == KG_MASKED_REWARD_ZERO))
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

/* Pass 2 on one group [start, end) of the records that enter baselines. */
static void group_advantages(const kg_advantage_config *cfg, const kg_rl_key *keys,
                             size_t start, size_t end, const double *value, double *adv)
{
    size_t n = end - start;
    int grpo_std = cfg->estimator == KG_ESTIMATOR_GRPO && cfg->normalize_std;
    if (n == 1) {
        size_t i = keys[start].index;
        double a = cfg->singleton == KG_SINGLETON_RETURN ? value[i] : 0.0;
        /* Dr. Kernel's GRPO gives a singleton mean 0 and std 1, so its
         * advantage is G/(1 + eps) (core_algos.py compute_grpo_outcome_advantage) */
        if (grpo_std && cfg->small_std == KG_SMALL_STD_ONE)
            a /= 1.0 + cfg->std_eps;
        adv[i] = a;
        return;
    }
    double sum = 0.0;
    for (size_t k = start; k < end; k++)
        sum += value[keys[k].index];
    double mean = sum / (double)n;
    if (cfg->estimator == KG_ESTIMATOR_GRPO) {
        double scale = 1.0;
        if (grpo_std) {
            double ss = 0.0;
            for (size_t k = start; k < end; k++) {
                double d = value[keys[k].index] - mean;
                ss += d * d;
            }
            /* unbiased (N−1) std, as torch.std; a std below eps would blow
             * rounding noise up to ±1, so Dr. Kernel replaces it by 1 */
            double std = sqrt(ss / (double)(n - 1));
            if (cfg->small_std == KG_SMALL_STD_ONE && std < cfg->std_eps)
                std = 1.0;
            scale = 1.0 / (std + cfg->std_eps);
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
                  const uint8_t *mask, const uint8_t *keep, double *advantage_out,
                  double *return_out, kg_error *err)
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
    rc = compute_returns(cfg, n, prompt, sample, turn, reward, mask, keys, ret, err);
    if (!rc) {
        /* groups: (prompt, turn) for GRPO/TRLOO, prompt alone for RLOO (its
         * records are single-turn, so (prompt, turn) would split nothing) */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            advantage_out[i] = 0.0;
            if (mask && !mask[i])
                continue;
            if (keep && !keep[i] && cfg->rejected == KG_REJECTED_DROP)
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
        /* a rejected record only loses its own gradient (Dr. Kernel
         * multiplies advantages by the edited response mask) */
        for (size_t i = 0; keep && i < n; i++)
            if (!keep[i])
                advantage_out[i] = 0.0;
    }
    free(keys);
    if (ret != return_out)
        free(ret);
    return rc;
}

void kg_group_filter_config_default(kg_group_filter_config *cfg)
{
    cfg->min_std = 1e-3;
    cfg->min_group_size = 0;
}

int kg_group_filter(const kg_group_filter_config *cfg, size_t n, const int64_t *group,
                    const double *reward, uint8_t *keep_out, size_t *groups_rejected_out,
                    kg_error *err)
{
    if (!cfg || (n > 0 && (!group || !reward || !keep_out)))
        return kg_error_set(err, KG_ERR_INVALID, "kg_group_filter: NULL argument");
    if (!(cfg->min_std >= 0) || !isfinite(cfg->min_std))
        return kg_error_set(err, KG_ERR_INVALID, "min_std %g must be a number >= 0",
                            cfg->min_std);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(reward[i]))
            return kg_error_set(err, KG_ERR_INVALID, "record %zu: reward is not finite", i);
    kg_rl_key *keys = kg_rl_keys_by_id(group, n);
    if (!keys)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", n);
    size_t rejected = 0;
    for (size_t start = 0; start < n;) {
        size_t end = kg_rl_run_end(keys, n, start);
        size_t m = end - start;
        double sum = 0.0, ss = 0.0;
        for (size_t k = start; k < end; k++)
            sum += reward[keys[k].index];
        double mean = sum / (double)m;
        for (size_t k = start; k < end; k++) {
            double d = reward[keys[k].index] - mean;
            ss += d * d;
        }
        /* the variance test needs two records (torch.std of one is NaN, and
         * Dr. Kernel skips it); the size test catches singletons instead */
        int low_var = m > 1 && sqrt(ss / (double)(m - 1)) < cfg->min_std;
        int small = m < cfg->min_group_size;
        for (size_t k = start; k < end; k++)
            keep_out[keys[k].index] = (uint8_t)!(low_var || small);
        rejected += (size_t)(low_var || small);
        start = end;
    }
    free(keys);
    if (groups_rejected_out)
        *groups_rejected_out = rejected;
    return KG_OK;
}
