/*
 * rl_jsonl.h — reading the JSONL the RL subcommands consume (not installed;
 * used by src/cli/cmd_rl.c).  A line is either an evaluation result
 * (kgym.result/1: has "verdict", no "result") or a trajectory record
 * ({"task"|"prompt", "sample", "turn", "reward", "mask", "result"}); the
 * field names read are listed in docs/rl.md §Input.  kg_rl_rows owns every
 * parsed line; row fields that point into them are borrowed.
 */
#ifndef KG_RL_JSONL_H
#define KG_RL_JSONL_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "kgym/rl.h"

typedef struct {
    size_t line;        /* 1-based line number in the input */
    json_t *root;       /* the parsed line */
    json_t *result;     /* evaluation result: root itself, root.result, or NULL */
    int bare_result;    /* the line is an evaluation result, not a record */
    const char *prompt; /* prompt / task id; NULL when the line has none */
    char sample[64];    /* sample key; "\x1f<line>" (unique) when absent */
    int has_sample;
    int32_t turn;       /* "turn", 1 when absent */
    int mask;           /* "mask", 1 when absent */
    int keep;           /* "keep" (a rejection decision), 1 when absent */
    int has_reward;     /* a record's "reward" (never a bare result's) */
    double reward;
} kg_rl_row;

typedef struct {
    kg_rl_row *rows;
    size_t n, cap;
} kg_rl_rows;

/* Reads every non-blank line of `in`; `source` names it in messages. */
int kg_rl_rows_read(FILE *in, const char *source, kg_rl_rows *out, kg_error *err);
void kg_rl_rows_free(kg_rl_rows *rows);

/* "line 4 (task level1/19, sample 2, turn 1)" for error messages. */
void kg_rl_row_describe(const kg_rl_row *row, char *buf, size_t size);

/* The outcome in the row's evaluation result; KG_ERR_INVALID naming the line
 * when there is no result or its verdict is missing or unknown. */
int kg_rl_row_outcome(const kg_rl_row *row, kg_eval_outcome *out, kg_error *err);

/* Dense ids: prompt_id (may be NULL) per distinct prompt, trajectory_id and
 * sample_id per distinct (prompt, sample).  need_prompt: a row without a
 * prompt is an error; otherwise it becomes its own trajectory. */
int kg_rl_rows_ids(const kg_rl_rows *rows, int need_prompt, int64_t *prompt_id,
                   int64_t *sample_id, int64_t *trajectory_id, kg_error *err);

/* The record to print for a row: a trajectory record's own object (new
 * reference), or, for a bare result, {"task", "turn", "result"} wrapping it,
 * so that adding "reward" never overwrites the evaluator's staged credit. */
json_t *kg_rl_row_record(const kg_rl_row *row);

/* The number at result.<object>.<key> of a row (NaN when absent or not a
 * number), e.g. ("profile", "kernel_coverage"). */
double kg_rl_row_result_number(const kg_rl_row *row, const char *object, const char *key);

/* Outcome columns of every row (owned here; free with kg_rl_outcomes_free);
 * a row without a valid result is an error naming its line. */
typedef struct {
    int32_t *verdict;
    uint8_t *hacked;
    double *staged, *speedup, *coverage;
    kg_outcome_columns cols;
} kg_rl_outcomes;

int kg_rl_rows_outcomes(const kg_rl_rows *rows, kg_rl_outcomes *out, kg_error *err);
void kg_rl_outcomes_free(kg_rl_outcomes *outcomes);

/* Each (trajectory, turn) at most once; with single_turn, one row per
 * trajectory.  The message names both lines. */
int kg_rl_rows_check_turns(const kg_rl_rows *rows, const int64_t *trajectory, int single_turn,
                           kg_error *err);

/* MRS input: every row's per-token log-ratios ("log_ratios", or
 * "trainer_logprobs" − "rollout_logprobs") in one array (*flat_out, freed by
 * the caller with free()); offsets has rows->n + 1 entries. */
int kg_rl_rows_log_ratios(const kg_rl_rows *rows, double **flat_out, int64_t *offsets,
                          kg_error *err);

/* One compact JSON line. */
int kg_rl_print_json(FILE *out, json_t *value, kg_error *err);

/* Level of a row, 1-based: "level" if present, else from a task id that
 * starts with "level<K>" (KernelBench's "level1/19"); 0 when unknown. */
int kg_rl_row_level(const kg_rl_row *row);

#endif
