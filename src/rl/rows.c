/* rows.c — whole-input helpers over kg_rl_rows for the RL subcommands:
 * outcome columns, the one-row-per-(trajectory, turn) check, and MRS token
 * log-ratios.  Errors name the offending lines (see rl_jsonl.h). */
#include "rl_jsonl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kg_rl_outcomes_free(kg_rl_outcomes *t)
{
    free(t->verdict);
    free(t->hacked);
    free(t->staged);
    free(t->speedup);
    free(t->coverage);
    memset(t, 0, sizeof *t);
}

int kg_rl_rows_outcomes(const kg_rl_rows *rows, kg_rl_outcomes *t, kg_error *err)
{
    size_t n = rows->n ? rows->n : 1;
    memset(t, 0, sizeof *t);
    t->verdict = malloc(n * sizeof *t->verdict);
    t->hacked = malloc(n);
    t->staged = malloc(n * sizeof(double));
    t->speedup = malloc(n * sizeof(double));
    t->coverage = malloc(n * sizeof(double));
    if (!t->verdict || !t->hacked || !t->staged || !t->speedup || !t->coverage) {
        kg_rl_outcomes_free(t);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu outcomes", rows->n);
    }
    for (size_t i = 0; i < rows->n; i++) {
        kg_eval_outcome o;
        int rc = kg_rl_row_outcome(&rows->rows[i], &o, err);
        if (rc) {
            kg_rl_outcomes_free(t);
            return rc;
        }
        t->verdict[i] = (int32_t)o.verdict;
        t->hacked[i] = (uint8_t)o.hacked;
        t->staged[i] = o.staged_reward;
        t->speedup[i] = o.speedup;
        t->coverage[i] = o.coverage;
    }
    t->cols = (kg_outcome_columns){rows->n, t->verdict, t->hacked, t->staged, t->speedup,
                                   t->coverage};
    return KG_OK;
}

typedef struct {
    size_t row;
    int64_t trajectory;
    int32_t turn;
} turn_key;

static int compare_turn_keys(const void *pa, const void *pb)
{
    const turn_key *a = pa, *b = pb;
    if (a->trajectory != b->trajectory)
        return a->trajectory < b->trajectory ? -1 : 1;
    if (a->turn != b->turn)
        return a->turn < b->turn ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

int kg_rl_rows_check_turns(const kg_rl_rows *rows, const int64_t *trajectory, int single_turn,
                           kg_error *err)
{
    if (rows->n < 2)
        return KG_OK;
    turn_key *keys = malloc(rows->n * sizeof *keys);
    if (!keys)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu rows", rows->n);
    for (size_t i = 0; i < rows->n; i++)
        keys[i] = (turn_key){i, trajectory[i], rows->rows[i].turn};
    qsort(keys, rows->n, sizeof *keys, compare_turn_keys);
    int rc = KG_OK;
    for (size_t k = 1; k < rows->n && !rc; k++) {
        if (keys[k].trajectory != keys[k - 1].trajectory)
            continue;
        const kg_rl_row *a = &rows->rows[keys[k - 1].row], *b = &rows->rows[keys[k].row];
        char where[256];
        kg_rl_row_describe(b, where, sizeof where);
        if (keys[k].turn == keys[k - 1].turn)
            rc = kg_error_set(err, KG_ERR_INVALID, "%s repeats the turn of line %zu", where,
                              a->line);
        else if (single_turn)
            rc = kg_error_set(err, KG_ERR_INVALID,
                              "%s is a second turn of the sample of line %zu: rloo is "
                              "single-turn (use --estimator trloo for multi-turn data)",
                              where, a->line);
    }
    free(keys);
    return rc;
}

static int row_error(const kg_rl_row *row, kg_error *err, kg_status code, const char *what)
{
    char where[256];
    kg_rl_row_describe(row, where, sizeof where);
    return kg_error_set(err, code, "%s: %s", where, what);
}

/* A token's log value: a JSON number, or the string "-inf" (JSON has no
 * infinities; a trainer probability of 0 is a real outcome, and it vetoes
 * its turn).  Returns 0 for anything else. */
static int log_value(json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 1;
    }
    if (json_is_string(v) && strcmp(json_string_value(v), "-inf") == 0) {
        *out = -INFINITY;
        return 1;
    }
    return 0;
}

/* Appends one row's token log-ratios to *flat (capacity *cap). */
static int append_log_ratios(const kg_rl_row *row, double **flat, size_t *len, size_t *cap,
                             kg_error *err)
{
    json_t *lr = json_object_get(row->root, "log_ratios");
    json_t *tr = json_object_get(row->root, "trainer_logprobs");
    json_t *ro = json_object_get(row->root, "rollout_logprobs");
    size_t count;
    if (json_is_array(lr))
        count = json_array_size(lr);
    else if (json_is_array(tr) && json_is_array(ro) && json_array_size(tr) == json_array_size(ro))
        count = json_array_size(tr);
    else
        return row_error(row, err, KG_ERR_INVALID,
                         "needs \"log_ratios\" (log π_trainer − log π_rollout per token) or "
                         "equally long \"trainer_logprobs\" and \"rollout_logprobs\"");
    if (*len + count > *cap) {
        size_t ncap = (*cap ? *cap * 2 : 1024) + count;
        double *grown = realloc(*flat, ncap * sizeof *grown);
        if (!grown)
            return row_error(row, err, KG_ERR_NOMEM, "out of memory");
        *flat = grown;
        *cap = ncap;
    }
    for (size_t t = 0; t < count; t++) {
        double a, b = 0.0;
        if (!log_value(lr ? json_array_get(lr, t) : json_array_get(tr, t), &a) ||
            (!lr && (!json_is_number(json_array_get(ro, t)) ||
                     !isfinite(b = json_number_value(json_array_get(ro, t))))))
            return row_error(row, err, KG_ERR_INVALID,
                             "token log-probabilities must be numbers (a log-ratio or a "
                             "trainer log-probability may be the string \"-inf\"; a rollout "
                             "log-probability must be finite: the rollout sampled the token)");
        (*flat)[(*len)++] = a - b;
    }
    return KG_OK;
}

int kg_rl_rows_log_ratios(const kg_rl_rows *rows, double **flat_out, int64_t *offsets,
                          kg_error *err)
{
    size_t len = 0, cap = 0;
    double *flat = NULL;
    offsets[0] = 0;
    for (size_t i = 0; i < rows->n; i++) {
        int rc = append_log_ratios(&rows->rows[i], &flat, &len, &cap, err);
        if (rc) {
            free(flat);
            return rc;
        }
        offsets[i + 1] = (int64_t)len;
    }
    if (!flat && !(flat = malloc(sizeof *flat)))
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    *flat_out = flat;
    return KG_OK;
}
