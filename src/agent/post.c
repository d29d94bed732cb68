/*
 * post.c — what happens to a finished run's turn records: outcomes for the
 * RL library, advantages and returns, PRS keep decisions, the best turn of
 * each trajectory, and the metrics report.  All formulas live in src/rl;
 * this file only maps records to its arrays and back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "rl/result_read.h"
#include "util/json.h"
#include "util/util.h"

int kg_agent_outcome(const json_t *result, kg_eval_outcome *out, kg_error *err)
{
    return kg_result_outcome(result, out, err); /* the one reader (rl/result_read.h) */
}

/* Dense ids for the records' task and (task, sample). */
typedef struct {
    size_t n;
    int64_t *prompt, *sample, *traj;
    int32_t *turn;
    double *reward;
    int32_t *verdict;
    uint8_t *hacked;
    double *staged, *speedup, *coverage;
    kg_outcome_columns cols;
} columns;

static void columns_free(columns *c)
{
    free(c->prompt);
    free(c->sample);
    free(c->traj);
    free(c->turn);
    free(c->reward);
    free(c->verdict);
    free(c->hacked);
    free(c->staged);
    free(c->speedup);
    free(c->coverage);
}

static int columns_build(const json_t *records, columns *c, int need_reward, kg_error *err)
{
    memset(c, 0, sizeof *c);
    size_t n = json_array_size(records);
    c->n = n;
    size_t m = n ? n : 1;
    c->prompt = calloc(m, sizeof *c->prompt);
    c->sample = calloc(m, sizeof *c->sample);
    c->traj = calloc(m, sizeof *c->traj);
    c->turn = calloc(m, sizeof *c->turn);
    c->reward = calloc(m, sizeof *c->reward);
    c->verdict = calloc(m, sizeof *c->verdict);
    c->hacked = calloc(m, sizeof *c->hacked);
    c->staged = calloc(m, sizeof *c->staged);
    c->speedup = calloc(m, sizeof *c->speedup);
    c->coverage = calloc(m, sizeof *c->coverage);
    if (!c->prompt || !c->sample || !c->traj || !c->turn || !c->reward || !c->verdict || !c->hacked ||
        !c->staged || !c->speedup || !c->coverage) {
        columns_free(c);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* Ids by linear search: a run has thousands of records, not millions. */
    const char **tasks = calloc(m, sizeof *tasks);
    int64_t *traj_task = calloc(m, sizeof *traj_task), *traj_sample = calloc(m, sizeof *traj_sample);
    size_t nt = 0, ntraj = 0;
    int rc = KG_OK;
    if (!tasks || !traj_task || !traj_sample) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *rec = json_array_get(records, i);
        const char *task = json_string_value(json_object_get(rec, "task"));
        json_t *sample = json_object_get(rec, "sample"), *turn = json_object_get(rec, "turn");
        json_t *reward = json_object_get(rec, "reward");
        if (!task || !json_is_integer(sample) || !json_is_integer(turn) || (need_reward && !json_is_number(reward))) {
            rc = kg_error_set(err, KG_ERR_INVALID, "record %zu: needs \"task\", integer \"sample\" and \"turn\"%s",
                              i, need_reward ? " and \"reward\"" : "");
            goto done;
        }
        size_t t;
        for (t = 0; t < nt && strcmp(tasks[t], task); t++)
            ;
        if (t == nt)
            tasks[nt++] = task;
        c->prompt[i] = (int64_t)t;
        c->sample[i] = (int64_t)json_integer_value(sample);
        size_t k;
        for (k = 0; k < ntraj && !(traj_task[k] == (int64_t)t && traj_sample[k] == c->sample[i]); k++)
            ;
        if (k == ntraj) {
            traj_task[ntraj] = (int64_t)t;
            traj_sample[ntraj++] = c->sample[i];
        }
        c->traj[i] = (int64_t)k;
        c->turn[i] = (int32_t)json_integer_value(turn);
        c->reward[i] = json_is_number(reward) ? json_number_value(reward) : NAN;
        kg_eval_outcome o;
        kg_error e2;
        if (kg_agent_outcome(json_object_get(rec, "result"), &o, &e2) != KG_OK) {
            rc = kg_error_set(err, KG_ERR_INVALID, "record %zu (task %s, sample %lld, turn %d): %s", i, task,
                              (long long)c->sample[i], c->turn[i], e2.message);
            goto done;
        }
        c->verdict[i] = (int32_t)o.verdict;
        c->hacked[i] = (uint8_t)o.hacked;
        c->staged[i] = o.staged_reward;
        c->speedup[i] = o.speedup;
        c->coverage[i] = o.coverage;
    }
    c->cols = (kg_outcome_columns){.n = n, .verdict = c->verdict, .hacked = c->hacked,
                                   .staged_reward = c->staged, .speedup = c->speedup, .coverage = c->coverage};
done:
    free(tasks);
    free(traj_task);
    free(traj_sample);
    if (rc != KG_OK)
        columns_free(c);
    return rc;
}


int kg_agent_annotate(json_t *records, const kg_advantage_config *adv, const kg_prs_config *prs, uint64_t seed,
                      kg_error *err)
{
    columns c;
    int rc = columns_build(records, &c, 1, err);
    if (rc != KG_OK)
        return rc;
    size_t m = c.n ? c.n : 1;
    double *a = calloc(m, sizeof *a), *g = calloc(m, sizeof *g), *p = calloc(m, sizeof *p);
    uint8_t *keep = calloc(m, 1), *mask = calloc(m, 1);
    if (!a || !g || !p || !keep || !mask) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c.n; i++) {
        json_t *mk = json_object_get(json_array_get(records, i), "mask");
        mask[i] = mk && (json_is_false(mk) || (json_is_integer(mk) && json_integer_value(mk) == 0)) ? 0 : 1;
    }
    /* PRS needs coverage for every correct turn (a GPU profile).  Without it
     * (CPU runs) the decision is "not made", never a guessed keep. */
    int prs_ok = prs != NULL;
    for (size_t i = 0; prs_ok && i < c.n; i++) {
        kg_eval_outcome o;
        kg_outcome_columns_get(&c.cols, i, &o, NULL);
        if (kg_outcome_is_correct(&o) && !isfinite(o.coverage))
            prs_ok = 0;
    }
    if (prs_ok && c.n) {
        kg_rng rng;
        kg_rng_seed(&rng, seed);
        if ((rc = kg_prs_sample(prs, &rng, &c.cols, c.traj, mask, keep, p, NULL, err)) != KG_OK)
            goto done;
    }
    /* PRS decides before the advantages, as in Dr. Kernel, so that a rejected
     * turn's advantage is 0 (adv->rejected says whether it stays in its
     * group's baseline). */
    if (c.n && (rc = kg_advantages(adv, c.n, c.prompt, c.sample, c.turn, c.reward, mask,
                                   prs_ok ? keep : NULL, a, g, err)) != KG_OK)
        goto done;
    for (size_t i = 0; i < c.n; i++) {
        json_t *rec = json_array_get(records, i);
        int ok = kg_json_set(rec, "return", kg_json_number(g[i])) == 0;
        ok = ok && kg_json_set(rec, "advantage", kg_json_number(a[i])) == 0;
        ok = ok && kg_json_set(rec, "estimator", json_string(kg_estimator_name(adv->estimator))) == 0;
        ok = ok && kg_json_set(rec, "prs_keep", prs_ok ? json_boolean(keep[i]) : json_null()) == 0;
        ok = ok && kg_json_set(rec, "prs_prob", prs_ok ? kg_json_number(p[i]) : json_null()) == 0;
        /* Best of turns: highest reward in the trajectory, earliest on ties. */
        int best = 1;
        for (size_t j = 0; j < c.n && best; j++) {
            if (j == i || c.traj[j] != c.traj[i])
                continue;
            if (c.reward[j] > c.reward[i] || (c.reward[j] == c.reward[i] && c.turn[j] < c.turn[i]))
                best = 0;
        }
        /* A record annotated in part would train on an advantage it does not have: the whole call fails. */
        if (!ok || kg_json_set(rec, "best", json_boolean(best)) != 0) {
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory annotating turn record %zu", i);
            goto done;
        }
    }
done:
    free(a);
    free(g);
    free(p);
    free(keep);
    free(mask);
    columns_free(&c);
    return rc;
}

int kg_agent_mask_void_turns(json_t *records, kg_error *err)
{
    columns c;
    int rc = columns_build(records, &c, 1, err);
    if (rc != KG_OK)
        return rc;
    for (size_t i = 0; i < c.n; i++) {
        int earlier_positive = 0;
        for (size_t j = 0; j < c.n; j++)
            if (c.traj[j] == c.traj[i] && c.turn[j] < c.turn[i] && c.reward[j] > 0)
                earlier_positive = 1;
        if (kg_json_set(json_array_get(records, i), "mask", json_boolean(!(earlier_positive && c.reward[i] <= 0))) != 0) {
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory masking turn record %zu", i);
            break;
        }
    }
    columns_free(&c);
    return rc;
}

int kg_agent_metrics(const json_t *records, kg_metrics_report *out, kg_error *err)
{
    columns c;
    int rc = columns_build(records, &c, 0, err);
    if (rc != KG_OK)
        return rc;
    if (c.n == 0) {
        columns_free(&c);
        return kg_error_set(err, KG_ERR_INVALID, "no turn records");
    }
    rc = kg_metrics_compute(&c.cols, c.traj, c.turn, NULL, 0, out, err);
    columns_free(&c);
    return rc;
}
