/*
 * rl/result_read.h — (internal) the one reader of a kgym result (docs/result-schema.md): the verdict, reward,
 * speedup, coverage and hacks every consumer takes from it (the RL library, rollouts, bench, the store, the
 * scheduler's counters, the KernelGYM adapter).  Nothing is allocated: strings and arrays are borrowed from the
 * result, which must outlive the view.
 */
#ifndef KGYM_RL_RESULT_READ_H
#define KGYM_RL_RESULT_READ_H

#include <jansson.h>

#include "kgym/error.h"
#include "kgym/rl.h"

typedef struct kg_result_view {
    const char *verdict;     /* the result's "verdict" as written; NULL when it is not a string */
    int known;               /* verdict is a kg_verdict's name: outcome.verdict holds it */
    kg_eval_outcome outcome; /* verdict (when known), hacked (verdict hacked or hacks[] non-empty), staged_reward =
                              * "reward", speedup = timing.speedup, coverage = profile.coverage: NaN for each
                              * that is not a number */
    const json_t *hacks;     /* "hacks" (an array, or NULL) */
    const json_t *stages;    /* "stages" (an array, or NULL) */
} kg_result_view;

/* Reads a result (any JSON value: a non-object reads as nothing known). */
void kg_result_read(const json_t *result, kg_result_view *out);

/* The RL library's outcome of a result: KG_ERR_INVALID when it is not an object or its verdict is not one of
 * kg_verdict's (err says which). */
int kg_result_outcome(const json_t *result, kg_eval_outcome *out, kg_error *err);

#endif
