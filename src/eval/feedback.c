/*
 * feedback.c — the text a model reads after an evaluation.  It must be short
 * and actionable: what failed, where in the model's own code, on which inputs
 * and by how much.  Library and harness frames are never shown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/internal.h"
#include "util/util.h"

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void add_error(kg_buf *b, const json_t *error)
{
    if (!json_is_object(error))
        return;
    const char *msg = str(error, "message");
    kg_buf_printf(b, "\n%s: %.*s", str(error, "type"), (int)(strlen(msg) > 1200 ? 1200 : strlen(msg)), msg);
    if (*str(error, "cause_type") && strcmp(str(error, "cause_type"), str(error, "type")))
        kg_buf_printf(b, "\ncaused by %s: %.600s", str(error, "cause_type"), str(error, "cause_message"));
    size_t i;
    json_t *f;
    const json_t *frames = json_object_get(error, "frames");
    if (json_array_size(frames))
        kg_buf_puts(b, "\nIn your code:");
    json_array_foreach(frames, i, f) {
        kg_buf_printf(b, "\n  candidate.py line %lld, in %s: %s",
                      (long long)json_integer_value(json_object_get(f, "line")), str(f, "function"),
                      str(f, "code"));
    }
}

static const json_t *failed_stage(const json_t *result)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(result, "stages"), i, s) {
        if (!strcmp(str(s, "status"), "fail"))
            return s;
    }
    return NULL;
}

static void add_output_tail(kg_buf *b, const json_t *process)
{
    const char *err = str(process, "stderr");
    size_t n = strlen(err);
    if (!n)
        return;
    const char *start = n > 600 ? err + n - 600 : err;
    kg_buf_printf(b, "\nLast lines of stderr:\n%s", start);
}

char *kg_eval_feedback(const json_t *result, const kg_eval_options *opts)
{
    (void)opts;
    kg_buf b = {0};
    const char *verdict = str(result, "verdict");
    const json_t *stage = failed_stage(result);
    const json_t *error = json_object_get(result, "error");
    const json_t *process = json_object_get(result, "process");
    const json_t *corr = json_object_get(result, "correctness");

    if (!strcmp(verdict, "correct")) {
        kg_buf_printf(&b, "Correct on all %lld input variants that were checked.",
                      (long long)json_integer_value(json_object_get(corr, "passed_count")));
        const json_t *t = json_object_get(result, "timing");
        if (json_is_object(t) && json_is_number(json_object_get(t, "speedup")))
            kg_buf_printf(&b, " Speedup over the PyTorch reference: %.2fx (median %.4g ms vs %.4g ms).",
                          json_number_value(json_object_get(t, "speedup")),
                          json_number_value(json_object_get(json_object_get(t, "candidate_ms"), "median")),
                          json_number_value(json_object_get(json_object_get(t, "reference_ms"), "median")));
        else
            kg_buf_puts(&b, " Speed was not measured (CPU).");
        return kg_buf_release(&b);
    }
    const char *sname = stage ? str(stage, "name") : "";
    const char *detail = stage ? str(stage, "detail") : "";
    if (!strcmp(verdict, "invalid")) {
        if (!strcmp(sname, "extract"))
            kg_buf_printf(&b, "No usable code in your answer: %s. Reply with one ```python block "
                              "holding the complete module that defines class ModelNew.", detail);
        else if (!strcmp(sname, "parse"))
            kg_buf_printf(&b, "Your code does not parse: %s.", detail);
        else
            kg_buf_printf(&b, "Your code is not acceptable: %s.", detail);
        if (!strcmp(sname, "parse"))
            add_error(&b, error);
    } else if (!strcmp(verdict, "timeout")) {
        kg_buf_printf(&b, "Stage %s did not finish within %g s and was killed. Look for an infinite "
                          "loop, a kernel launched with an enormous grid, or a loop bound that never "
                          "ends.", sname, json_number_value(json_object_get(process, "limit_s")));
    } else if (!strcmp(verdict, "compile_error")) {
        kg_buf_printf(&b, "Your module failed to %s.",
                      !strcmp(sname, "compile") ? "import or construct ModelNew" : "compile a Triton kernel");
        add_error(&b, error);
        if (!json_is_object(error) && *detail)
            kg_buf_printf(&b, "\n%s", detail);
    } else if (!strcmp(verdict, "runtime_error")) {
        const char *cause = str(process, "cause");
        const char *end = str(process, "end");
        if (!strcmp(end, "signal"))
            kg_buf_printf(&b, "The process crashed during stage %s: %s. This usually means an "
                              "out-of-bounds memory access in a kernel (check masks and pointer arithmetic).",
                          sname, detail);
        else if (!strcmp(end, "output_flood"))
            kg_buf_printf(&b, "Your code printed too much output (%lld bytes) and was stopped during "
                              "stage %s. Remove debug prints.",
                          (long long)(json_integer_value(json_object_get(process, "stdout_bytes")) +
                                      json_integer_value(json_object_get(process, "stderr_bytes"))), sname);
        else if (!strcmp(cause, "out_of_memory"))
            kg_buf_printf(&b, "Out of memory during stage %s.", sname);
        else if (!strcmp(cause, "cuda_error"))
            kg_buf_printf(&b, "A CUDA error occurred during stage %s (often an illegal memory access in a "
                              "kernel: check masks and offsets).", sname);
        else if (json_is_object(error)) {
            kg_buf_printf(&b, "ModelNew raised an exception during stage %s", sname);
            size_t i;
            json_t *v;
            json_array_foreach(json_object_get(corr, "variants"), i, v) {
                if (!strcmp(str(v, "status"), "error")) {
                    char *sizes = json_dumps(json_object_get(v, "sizes"), JSON_COMPACT | JSON_SORT_KEYS);
                    kg_buf_printf(&b, " on input variant %s (%s; sizes %s)", str(v, "name"),
                                  str(v, "description"), sizes ? sizes : "{}");
                    free(sizes);
                    break;
                }
            }
            kg_buf_puts(&b, ".");
        }
        else
            kg_buf_printf(&b, "The evaluation process ended during stage %s: %s.", sname, detail);
        add_error(&b, error);
        if (!json_is_object(error))
            add_output_tail(&b, process);
    } else if (!strcmp(verdict, "incorrect")) {
        if (!strcmp(sname, "tiny_run")) {
            kg_buf_printf(&b, "Wrong output on small inputs: %s.", detail);
        } else {
            size_t i;
            json_t *v;
            int shown = 0;
            kg_buf_printf(&b, "Wrong output: %lld of %lld checked input variants failed.",
                          (long long)(json_integer_value(json_object_get(corr, "failed_count")) +
                                      json_integer_value(json_object_get(corr, "error_count"))),
                          (long long)(json_integer_value(json_object_get(corr, "failed_count")) +
                                      json_integer_value(json_object_get(corr, "error_count")) +
                                      json_integer_value(json_object_get(corr, "passed_count"))));
            json_array_foreach(json_object_get(corr, "variants"), i, v) {
                const char *vs = str(v, "status");
                if (strcmp(vs, "failed") && strcmp(vs, "error"))
                    continue;
                if (shown++ >= 3)
                    break;
                char *sizes = json_dumps(json_object_get(v, "sizes"), JSON_COMPACT | JSON_SORT_KEYS);
                kg_buf_printf(&b, "\n- %s (%s; sizes %s): %s", str(v, "name"), str(v, "description"),
                              sizes ? sizes : "{}", str(v, "reason"));
                free(sizes);
            }
            kg_buf_puts(&b, "\nPassed:");
            int any = 0;
            json_array_foreach(json_object_get(corr, "variants"), i, v) {
                if (!strcmp(str(v, "status"), "passed")) {
                    kg_buf_printf(&b, " %s", str(v, "name"));
                    any = 1;
                }
            }
            if (!any)
                kg_buf_puts(&b, " none");
            kg_buf_puts(&b, ".");
        }
    } else {
        kg_buf_printf(&b, "Verdict %s at stage %s: %s", verdict, sname, detail);
    }
    char *text = kg_buf_release(&b);
    if (text)
        kg_utf8_sanitize(text);
    return text;
}
