/*
 * kg_facts.h — the facts a `correct` verdict needs (src/eval/result.c kg_eval_unjudged), for tests that build a
 * child's report by hand: kg_test_complete_facts adds each one the report lacks, as an honest run reports it,
 * so that a test about something else starts from a run that can pass.  Tests of the facts themselves start
 * from a completed report and take one away (kg_test_drop_messages).
 */
#ifndef KG_FACTS_H
#define KG_FACTS_H

#include <jansson.h>
#include <string.h>

#include "eval/eval.h"

static inline const json_t *kg_test_find(const json_t *msgs, const char *type)
{
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "type")) ?: "", type))
            return m;
    return NULL;
}

/* Removes every message of `type`; returns how many. */
static inline size_t kg_test_drop_messages(json_t *msgs, const char *type)
{
    size_t n = 0;
    for (size_t i = json_array_size(msgs); i-- > 0;)
        if (!strcmp(json_string_value(json_object_get(json_array_get(msgs, i), "type")) ?: "", type)) {
            json_array_remove(msgs, i);
            n++;
        }
    return n;
}

/* Every protection code of KG_PROTECTIONS: what a fully sandboxed runner reports. */
static inline json_t *kg_test_all_protections(void)
{
    json_t *codes = json_array();
#define KG_TEST_CODE(code, cpu, gpu, what) json_array_append_new(codes, json_string(#code));
    KG_PROTECTIONS(KG_TEST_CODE)
#undef KG_TEST_CODE
    return codes;
}

/* Adds the facts `msgs` lacks: the variant plan (the variants reported, in order), both repeat checks run,
 * the degeneracy facts, the task's randomness ("none"), the sandbox's protection codes (all), and on a GPU a
 * profile wholly in the candidate's kernels. */
static inline void kg_test_complete_facts(json_t *msgs, int gpu)
{
    size_t i;
    json_t *m;
    if (!kg_test_find(msgs, "variant_plan")) {
        json_t *names = json_array();
        json_array_foreach(msgs, i, m) {
            const char *t = json_string_value(json_object_get(m, "type"));
            const char *n = json_string_value(json_object_get(m, "name"));
            if (!t || strcmp(t, "variant") || !n || !strcmp(n, "timed_inputs"))
                continue;
            int dup = 0;
            size_t k;
            json_t *x;
            json_array_foreach(names, k, x)
                dup |= !strcmp(json_string_value(x), n);
            if (!dup)
                json_array_append_new(names, json_string(n));
        }
        json_array_append_new(msgs, json_pack("{s:s, s:o, s:b}", "type", "variant_plan", "variants", names, "shrunk",
                                              0));
    }
    if (!kg_test_find(msgs, "repeat_checks"))
        json_array_append_new(msgs, json_pack("{s:s, s:s, s:{s:s, s:s}, s:n, s:n}", "type", "repeat_checks", "variant",
                                              "base", "checks", "cached_output", "ran", "nondeterministic", "ran",
                                              "error", "raised_by"));
    if (!kg_test_find(msgs, "degeneracy"))
        json_array_append_new(msgs, json_pack("{s:s, s:{s:[s], s:b, s:b, s:[s], s:[s], s:[s]}}", "type", "degeneracy",
                                              "facts", "checked", "base", "zero_everywhere", 0, "constant_everywhere",
                                              0, "nonzero_on", "base", "input_dependent_on", "base",
                                              "not_an_input_on", "base"));
    if (!kg_test_find(msgs, "task_mode"))
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "type", "task_mode", "handling", "none"));
    json_t *sb = (json_t *)kg_test_find(msgs, "sandbox");
    if (!sb)
        json_array_append_new(msgs, json_pack("{s:s, s:[s], s:[], s:o}", "type", "sandbox", "active", "everything",
                                              "warnings", "protections", kg_test_all_protections()));
    else if (!json_object_get(sb, "protections"))
        json_object_set_new(sb, "protections", kg_test_all_protections());
    if (gpu && !kg_test_find(msgs, "profile"))
        json_array_append_new(msgs, json_pack("{s:s, s:i, s:f, s:f, s:i, s:i, s:[{s:s, s:f, s:i, s:b}]}", "type",
                                              "profile", "calls", 3, "total_device_us", 300.0, "candidate_device_us",
                                              300.0, "kernel_count", 1, "candidate_kernel_count", 1, "kernels",
                                              "name", "my_kernel", "device_us", 300.0, "count", 3, "candidate", 1));
}

#endif
