/* outcome.c — verdict names and the predicates every RL module shares, so
 * that "correct" and "compiled" mean the same thing in rewards, PRS and
 * metrics. */
#include "kgym/rl.h"
#include "rl/result_read.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const verdict_names[KG_VERDICT_COUNT] = {
#define KG_VERDICT_NAME_(e, code, name) [code] = name,
    KG_VERDICT_MAP(KG_VERDICT_NAME_)
#undef KG_VERDICT_NAME_
};
/* The codes are 0..n-1 (KG_VERDICT_COUNT follows the last one): a gap would leave a NULL name. */
#define KG_VERDICT_ONE_(e, code, name) +1
_Static_assert((0 KG_VERDICT_MAP(KG_VERDICT_ONE_)) == KG_VERDICT_COUNT, "verdict codes must be 0..n-1");
#undef KG_VERDICT_ONE_

int kg_verdict_parse(const char *name, kg_verdict *out, kg_error *err)
{
    if (!name)
        return kg_error_set(err, KG_ERR_INVALID, "verdict is missing");
    for (int v = 0; v < KG_VERDICT_COUNT; v++) {
        if (strcmp(name, verdict_names[v]) == 0) {
            *out = (kg_verdict)v;
            return KG_OK;
        }
    }
    char list[160] = ""; /* "correct, incorrect, ... or timeout", from the list */
    for (int v = 0; v < KG_VERDICT_COUNT; v++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 v == 0 ? "" : v == KG_VERDICT_COUNT - 1 ? " or " : ", ", verdict_names[v]);
    return kg_error_set(err, KG_ERR_INVALID, "unknown verdict \"%s\" (expected %s)", name, list);
}

const char *kg_verdict_name(kg_verdict verdict)
{
    if ((int)verdict < 0 || verdict >= KG_VERDICT_COUNT)
        return "?";
    return verdict_names[verdict];
}

int kg_outcome_is_correct(const kg_eval_outcome *outcome)
{
    return outcome->verdict == KG_VERDICT_CORRECT && !outcome->hacked;
}

/* Neither a timeout nor a hacked kernel counts as compiled, as in Dr.
 * Kernel: its reward client returns compiled = False for a task that did not
 * complete and for a decoy kernel (kernel/rewards/reward_client.py:448-485),
 * and its metrics read that flag (kernel_async.py:267, 285). */
int kg_outcome_compiled(const kg_eval_outcome *outcome)
{
    return outcome->verdict != KG_VERDICT_INVALID &&
           outcome->verdict != KG_VERDICT_COMPILE_ERROR &&
           outcome->verdict != KG_VERDICT_TIMEOUT && !outcome->hacked;
}

int kg_outcome_columns_get(const kg_outcome_columns *cols, size_t i,
                           kg_eval_outcome *out, kg_error *err)
{
    if (!cols || !cols->verdict)
        return kg_error_set(err, KG_ERR_INVALID, "outcome columns need verdicts");
    if (i >= cols->n)
        return kg_error_set(err, KG_ERR_INVALID, "record %zu is out of range (%zu records)",
                            i, cols->n);
    int32_t v = cols->verdict[i];
    if (v < 0 || v >= KG_VERDICT_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "record %zu: verdict code %d is not a kg_verdict",
                            i, (int)v);
    out->verdict = (kg_verdict)v;
    out->hacked = cols->hacked ? cols->hacked[i] != 0 : v == KG_VERDICT_HACKED;
    if (v == KG_VERDICT_HACKED)
        out->hacked = 1;
    out->staged_reward = cols->staged_reward ? cols->staged_reward[i] : NAN;
    out->speedup = cols->speedup ? cols->speedup[i] : NAN;
    out->coverage = cols->coverage ? cols->coverage[i] : NAN;
    return KG_OK;
}

/* --------------------------------------------------- reading a result */

static double number_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

void kg_result_read(const json_t *result, kg_result_view *out)
{
    memset(out, 0, sizeof *out);
    out->outcome.staged_reward = out->outcome.speedup = out->outcome.coverage = NAN;
    if (!json_is_object(result))
        return;
    out->verdict = json_string_value(json_object_get(result, "verdict"));
    out->known = out->verdict && kg_verdict_parse(out->verdict, &out->outcome.verdict, NULL) == KG_OK;
    const json_t *hacks = json_object_get(result, "hacks");
    out->hacks = json_is_array(hacks) ? hacks : NULL;
    const json_t *stages = json_object_get(result, "stages");
    out->stages = json_is_array(stages) ? stages : NULL;
    out->outcome.hacked = (out->known && out->outcome.verdict == KG_VERDICT_HACKED) || json_array_size(out->hacks) > 0;
    out->outcome.staged_reward = number_or_nan(json_object_get(result, "reward"));
    out->outcome.speedup = number_or_nan(json_object_get(json_object_get(result, "timing"), "speedup"));
    out->outcome.coverage = number_or_nan(json_object_get(json_object_get(result, "profile"), "coverage"));
}

int kg_result_outcome(const json_t *result, kg_eval_outcome *out, kg_error *err)
{
    if (!json_is_object(result))
        return kg_error_set(err, KG_ERR_INVALID, "record has no evaluation result");
    kg_result_view v;
    kg_result_read(result, &v);
    if (!v.known) /* kg_verdict_parse names what is wrong: missing, or not a verdict */
        return kg_verdict_parse(v.verdict, &out->verdict, err);
    *out = v.outcome;
    return KG_OK;
}
