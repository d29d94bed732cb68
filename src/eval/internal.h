/* internal.h — pieces of the eval subsystem shared between its files. */
#ifndef KG_EVAL_INTERNAL_H
#define KG_EVAL_INTERNAL_H

#include <jansson.h>

#include "kgym/eval.h"

/* Concise text a model can act on, rendered from a finished result
 * (verdict, failing stage, trimmed error, failing variant).  malloc'd. */
char *kg_eval_feedback(const json_t *result, const kg_eval_options *opts);

#endif
