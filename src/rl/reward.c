/* reward.c — per-turn reward functions (docs/rl.md §Rewards).  Each is a
 * pure function of one evaluation outcome plus, for the regression penalty,
 * the previous turn's outcome. */
#include "kgym/rl.h"
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const fn_names[] = {"drkernel", "staged", "tritonrl", "speedup"};

int kg_reward_fn_parse(const char *name, kg_reward_fn *out, kg_error *err)
{
    for (int i = 0; name && i < 4; i++) {
        if (strcmp(name, fn_names[i]) == 0) {
            *out = (kg_reward_fn)i;
            return KG_OK;
        }
    }
    return kg_error_set(err, KG_ERR_INVALID,
                        "unknown reward function \"%s\" (expected drkernel, staged, "
                        "tritonrl or speedup)", name ? name : "(null)");
}

const char *kg_reward_fn_name(kg_reward_fn fn)
{
    return (int)fn >= 0 && fn <= KG_REWARD_SPEEDUP ? fn_names[fn] : "?";
}

void kg_reward_config_default(kg_reward_config *cfg, kg_reward_fn fn)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->fn = fn;
    cfg->speedup_lower_bound = 0.0;
    switch (fn) {
    case KG_REWARD_DRKERNEL: /* Dr. Kernel RL scripts, reference §3.3 */
        cfg->correct_weight = 0.5;
        cfg->speed_weight = 0.5;
        cfg->speedup_cap = 3.0;
        cfg->coverage_weight = 0.5;
        break;
    case KG_REWARD_STAGED: /* speed term off until asked for */
        cfg->speedup_cap = 3.0;
        break;
    case KG_REWARD_TRITONRL: /* TritonRL: valid·correct + valid·clip(S, 2) */
        cfg->correct_weight = 1.0;
        cfg->speed_weight = 1.0;
        cfg->speedup_cap = 2.0;
        break;
    case KG_REWARD_SPEEDUP:
        /* ln 10 caps the reward of absurd speedups (often timing noise);
         * the floor -2 (= ln 0.135) sits below any plausible correct kernel */
        cfg->speed_weight = 1.0;
        cfg->speedup_cap = 10.0;
        cfg->failure_reward = -2.0;
        break;
    }
}

int kg_reward_config_set(kg_reward_config *cfg, const char *name, double value,
                         kg_error *err)
{
    static const struct {
        const char *name;
        size_t offset;
    } fields[] = {
        {"correct_weight", offsetof(kg_reward_config, correct_weight)},
        {"speed_weight", offsetof(kg_reward_config, speed_weight)},
        {"speedup_cap", offsetof(kg_reward_config, speedup_cap)},
        {"speedup_lower_bound", offsetof(kg_reward_config, speedup_lower_bound)},
        {"coverage_weight", offsetof(kg_reward_config, coverage_weight)},
        {"failure_reward", offsetof(kg_reward_config, failure_reward)},
        {"hack_penalty", offsetof(kg_reward_config, hack_penalty)},
        {"timeout_penalty", offsetof(kg_reward_config, timeout_penalty)},
        {"regression_penalty", offsetof(kg_reward_config, regression_penalty)},
    };
    if (!isfinite(value))
        return kg_error_set(err, KG_ERR_INVALID, "reward constant %s must be finite",
                            name ? name : "(null)");
    for (size_t i = 0; name && i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(name, fields[i].name) == 0) {
            if (strcmp(name, "speedup_cap") == 0 && value <= 0)
                return kg_error_set(err, KG_ERR_INVALID, "speedup_cap must be > 0");
            *(double *)((char *)cfg + fields[i].offset) = value;
            return KG_OK;
        }
    }
    return kg_error_set(err, KG_ERR_INVALID,
                        "unknown reward constant \"%s\" (expected correct_weight, "
                        "speed_weight, speedup_cap, speedup_lower_bound, coverage_weight, "
                        "failure_reward, hack_penalty, timeout_penalty or "
                        "regression_penalty)", name ? name : "(null)");
}

static int check_outcome(const kg_eval_outcome *o, kg_error *err)
{
    if ((int)o->verdict < 0 || o->verdict >= KG_VERDICT_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "verdict code %d is not a kg_verdict",
                            (int)o->verdict);
    /* NaN means "not measured"; anything else non-finite or negative is a
     * broken result that must not turn into a huge reward silently. */
    if (!isnan(o->speedup) && (!isfinite(o->speedup) || o->speedup < 0))
        return kg_error_set(err, KG_ERR_INVALID, "speedup %g is not a finite value >= 0",
                            o->speedup);
    if (!isnan(o->coverage) && !(o->coverage >= 0 && o->coverage <= 1))
        return kg_error_set(err, KG_ERR_INVALID, "coverage %g is outside [0, 1]",
                            o->coverage);
    if (!isnan(o->staged_reward) && !isfinite(o->staged_reward))
        return kg_error_set(err, KG_ERR_INVALID, "staged reward is not finite");
    return KG_OK;
}

/* min(S, cap), or 0 when unmeasured, not correct, or below the lower bound:
 * an unmeasured speedup (CPU) earns no speed credit rather than a guess. */
static double capped_speedup(const kg_reward_config *cfg, const kg_eval_outcome *o)
{
    if (!kg_outcome_is_correct(o) || isnan(o->speedup))
        return 0.0;
    double s = fmin(o->speedup, cfg->speedup_cap);
    return s < cfg->speedup_lower_bound ? 0.0 : s;
}

static int base_reward(const kg_reward_config *cfg, const kg_eval_outcome *o,
                       double *out, kg_error *err)
{
    int rc = check_outcome(o, err);
    if (rc)
        return rc;
    int correct = kg_outcome_is_correct(o);
    switch (cfg->fn) {
    case KG_REWARD_DRKERNEL:
        *out = !correct ? cfg->failure_reward
                        : cfg->correct_weight + cfg->speed_weight * capped_speedup(cfg, o) +
                              cfg->coverage_weight * (isnan(o->coverage) ? 0.0 : o->coverage);
        return KG_OK;
    case KG_REWARD_STAGED:
        if (isnan(o->staged_reward))
            return kg_error_set(err, KG_ERR_INVALID,
                                "the staged reward needs the evaluator's \"reward\" field");
        *out = o->staged_reward + cfg->speed_weight * capped_speedup(cfg, o);
        return KG_OK;
    case KG_REWARD_TRITONRL:
        /* valid = syntax·func: our evaluator's invalid verdict is the syntax
         * gate and the hack detector is the functionality gate. */
        if (o->verdict == KG_VERDICT_INVALID || o->hacked || !correct)
            *out = cfg->failure_reward;
        else
            *out = cfg->correct_weight + cfg->speed_weight * capped_speedup(cfg, o);
        return KG_OK;
    case KG_REWARD_SPEEDUP:
        if (!correct) {
            *out = cfg->failure_reward;
        } else if (isnan(o->speedup)) {
            *out = 0.0; /* ln 1: no speed information, no speed credit */
        } else {
            double r = o->speedup > 0 ? log(o->speedup) : cfg->failure_reward;
            r = fmin(r, log(cfg->speedup_cap));
            *out = cfg->speed_weight * fmax(r, cfg->failure_reward);
        }
        return KG_OK;
    }
    return kg_error_set(err, KG_ERR_INVALID, "reward function code %d is unknown", (int)cfg->fn);
}

int kg_reward_compute(const kg_reward_config *cfg, const kg_eval_outcome *turn,
                      const kg_eval_outcome *previous, double *reward, kg_error *err)
{
    if (!cfg || !turn || !reward)
        return kg_error_set(err, KG_ERR_INVALID, "kg_reward_compute: NULL argument");
    double r;
    int rc = base_reward(cfg, turn, &r, err);
    if (rc)
        return rc;
    if (turn->hacked)
        r -= cfg->hack_penalty;
    if (turn->verdict == KG_VERDICT_TIMEOUT)
        r -= cfg->timeout_penalty;
    if (previous && cfg->regression_penalty != 0.0) {
        double prev;
        rc = base_reward(cfg, previous, &prev, err);
        if (rc)
            return rc;
        /* compared before penalties so a penalty never causes another one */
        double turn_base;
        base_reward(cfg, turn, &turn_base, NULL);
        if (turn_base < prev)
            r -= cfg->regression_penalty;
    }
    *reward = r;
    return KG_OK;
}

int kg_reward_batch(const kg_reward_config *cfg, const kg_outcome_columns *cols,
                    const int64_t *trajectory, const int32_t *turn,
                    double *reward_out, kg_error *err)
{
    if (!cfg || !cols || !reward_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_reward_batch: NULL argument");
    if (!trajectory != !turn)
        return kg_error_set(err, KG_ERR_INVALID,
                            "kg_reward_batch: pass both trajectory and turn, or neither");
    size_t n = cols->n;
    size_t *previous = NULL; /* previous[i] = index of the previous turn, or n */
    if (trajectory && n > 0) {
        kg_rl_key *keys = malloc(n * sizeof *keys);
        previous = malloc(n * sizeof *previous);
        if (!keys || !previous) {
            free(keys);
            free(previous);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu records", n);
        }
        for (size_t i = 0; i < n; i++) {
            keys[i] = (kg_rl_key){trajectory[i], turn[i], 0, i};
            previous[i] = n;
        }
        kg_rl_sort_keys(keys, n);
        for (size_t k = 1; k < n; k++) {
            if (keys[k].a != keys[k - 1].a)
                continue;
            if (keys[k].b == keys[k - 1].b) {
                int rc = kg_error_set(err, KG_ERR_INVALID,
                                      "records %zu and %zu are both turn %lld of trajectory %lld",
                                      keys[k - 1].index, keys[k].index, (long long)keys[k].b,
                                      (long long)keys[k].a);
                free(keys);
                free(previous);
                return rc;
            }
            previous[keys[k].index] = keys[k - 1].index;
        }
        free(keys);
    }
    for (size_t i = 0; i < n; i++) {
        kg_eval_outcome cur, prev;
        int rc = kg_outcome_columns_get(cols, i, &cur, err);
        int has_prev = previous && previous[i] < n;
        if (!rc && has_prev)
            rc = kg_outcome_columns_get(cols, previous[i], &prev, err);
        if (!rc)
            rc = kg_reward_compute(cfg, &cur, has_prev ? &prev : NULL, &reward_out[i], err);
        if (rc) {
            free(previous);
            /* prefix the record index so the caller can find the bad line */
            char msg[sizeof err->message];
            if (err) {
                memcpy(msg, err->message, sizeof msg);
                kg_error_set(err, rc, "record %zu: %s", i, msg);
            }
            return rc;
        }
    }
    free(previous);
    return KG_OK;
}

int kg_reeval_wanted(const kg_eval_outcome *outcome, double above)
{
    /* Dr. Kernel compares the raw speedup (a missing one reads as 0), whatever
     * the verdict */
    return outcome && above > 0 && !isnan(outcome->speedup) && outcome->speedup > above;
}
