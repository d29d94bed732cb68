/* tally.c — the one sum over evaluation results (see tally.h). */
#include "eval/tally.h"

#include <math.h>
#include <string.h>

#include "rl/result_read.h"

void kg_result_tally_add(kg_result_tally *t, const json_t *result)
{
    if (!result) {
        t->missing++;
        return;
    }
    kg_result_view v;
    kg_result_read(result, &v);
    t->results++;
    t->verdicts[v.known ? (int)v.outcome.verdict : KG_VERDICT_COUNT]++;
    if (!isnan(v.outcome.staged_reward))
        t->reward_sum += v.outcome.staged_reward;
    /* The verdict alone, as bench's summary always has: a correct verdict is correct here whatever findings it
     * carries (the RL library's kg_outcome_is_correct also asks for no hack: its metrics are its own). */
    if (v.known && v.outcome.verdict == KG_VERDICT_CORRECT && v.outcome.speedup > 0) {
        t->timed_correct++;
        t->log_speedup_sum += log(v.outcome.speedup);
    }
    size_t k;
    json_t *st;
    json_array_foreach(v.stages, k, st) {
        const char *status = json_string_value(json_object_get(st, "status"));
        kg_stage s = kg_stage_of(json_string_value(json_object_get(st, "name")));
        if (s == KG_STAGE_COUNT || !status || !strcmp(status, "skipped"))
            continue; /* a skipped stage took no time: it would only lower the mean */
        t->stage_ms_sum[s] += json_number_value(json_object_get(st, "ms"));
        t->stage_runs[s]++;
    }
}

double kg_result_tally_rate(const kg_result_tally *t, kg_verdict v)
{
    return t->results && (int)v >= 0 && v < KG_VERDICT_COUNT ? (double)t->verdicts[v] / (double)t->results : 0.0;
}

double kg_result_tally_mean_reward(const kg_result_tally *t)
{
    return t->results ? t->reward_sum / (double)t->results : 0.0;
}

double kg_result_tally_geomean_speedup(const kg_result_tally *t)
{
    return t->timed_correct ? exp(t->log_speedup_sum / (double)t->timed_correct) : NAN;
}

double kg_result_tally_stage_seconds(const kg_result_tally *t, kg_stage s)
{
    return (int)s >= 0 && s < KG_STAGE_COUNT ? t->stage_ms_sum[s] / 1000.0 : 0.0;
}
