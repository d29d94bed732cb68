/*
 * rl_internal.h — helpers shared by the RL modules (not installed).  Sorting
 * record indices by composite keys is how every module groups records, so it
 * lives here once.  Callers own the key arrays they pass.
 */
#ifndef KG_RL_INTERNAL_H
#define KG_RL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* One record's grouping key; index is its position in the caller's arrays
 * and breaks ties so that the sort is deterministic. */
typedef struct {
    int64_t a, b;
    int64_t c;
    size_t index;
} kg_rl_key;

/* Sorts by (a, b, c, index). */
void kg_rl_sort_keys(kg_rl_key *keys, size_t n);

/* Record indices 0..n-1 sorted by id[i], so that each id is one run of keys
 * (see kg_rl_run_end); the caller frees the array.  NULL when out of memory. */
kg_rl_key *kg_rl_keys_by_id(const int64_t *id, size_t n);

/* End (exclusive) of the run of keys with keys[start].a. */
size_t kg_rl_run_end(const kg_rl_key *keys, size_t n, size_t start);

#endif
