/*
 * feedback.c — the text a model reads after an evaluation.  It must be short
 * and actionable: what failed, where in the model's own code, on which inputs
 * and by how much.  Library and harness frames are never shown.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/internal.h"
#include "eval/kinds.h"
#include "util/util.h"

/* The text being written: ok turns 0 at the first write that fails (memory) and stays 0, and the text is then
 * not given out at all (kg_eval_feedback returns NULL): a text cut short could say something false ("Wrong output
 * on small inputs" without the why, a hack without its rule). */
typedef struct {
    kg_buf buf;
    int ok;
} fb_text;

static void say(fb_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(fb_text *t, const char *fmt, ...)
{
    if (!t->ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    t->ok = kg_buf_vprintf(&t->buf, fmt, ap) == KG_OK;
    va_end(ap);
}

static void say_text(fb_text *t, const char *s)
{
    t->ok = t->ok && kg_buf_puts(&t->buf, s) == KG_OK;
}

/* A variant's sizes as JSON text (caller frees), or NULL with t failed when memory ran out. */
static char *sizes_text(fb_text *t, const json_t *v)
{
    const json_t *sizes = json_object_get(v, "sizes");
    char *text = json_dumps(sizes, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text && sizes)
        t->ok = 0;
    return text;
}

/* The text (caller frees; with every byte that is not UTF-8 made '?' when `sanitize`), or NULL when a write
 * failed. */
static char *finish(fb_text *t, int sanitize)
{
    if (!t->ok) {
        kg_buf_free(&t->buf);
        return NULL;
    }
    char *text = kg_buf_release(&t->buf);
    if (text && sanitize)
        kg_utf8_sanitize(text);
    return text;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void add_error(fb_text *b, const json_t *error, const kg_eval_options *opts)
{
    if (!json_is_object(error))
        return;
    const char *msg = str(error, "message");
    say(b, "\n%s: %.*s", str(error, "type"), (int)(strlen(msg) > 1200 ? 1200 : strlen(msg)), msg);
    /* Which inputs it raised on, where the judge says (the tiny run's sizes: smaller than the task's, and a kernel
     * that assumes the task's, a tl.dot's K of at least 16, needs to know). */
    if (*str(error, "inputs"))
        say(b, "\n(%.300s)", str(error, "inputs"));
    if (*str(error, "cause_type") && strcmp(str(error, "cause_type"), str(error, "type")))
        say(b, "\ncaused by %s: %.600s", str(error, "cause_type"), str(error, "cause_message"));
    /* ENOSPC in the runner is its own folder's limit (a tmpfs: harness sandbox.mount_workdir), never the host's
     * disk: said, with the limit, so that the model writes less (a kernel needs no files at all). */
    if (opts && (strstr(msg, "No space left on device") || strstr(str(error, "cause_message"),
                                                                  "No space left on device")))
        say(b, "\nThe evaluation's writable folder is limited to %.4g MiB and %ld files (and so is "
                         "its /dev/shm): your code filled it. A Triton kernel module needs to write no files.",
                      (double)opts->workdir_bytes / (1024.0 * 1024.0), opts->workdir_files);
    size_t i;
    json_t *f;
    const json_t *frames = json_object_get(error, "frames");
    if (json_array_size(frames))
        say_text(b, "\nIn your code:");
    int offset = 0;
    json_array_foreach(frames, i, f) {
        say(b, "\n  candidate.py line %lld, in %s: %s",
                      (long long)json_integer_value(json_object_get(f, "line")), str(f, "function"),
                      str(f, "code"));
        offset |= strstr(str(f, "code"), "storage_offset") != NULL;
    }
    /* An honest kernel that asserted its input starts its storage failed without knowing why (the third honest
     * probe): kgym hands inputs as views into a larger block, guarded around them. */
    if (offset)
        say_text(b, "\nkgym hands ModelNew its inputs as views into a larger, guarded buffer, so their "
                    "storage_offset() is not 0; a Triton kernel gets the tensor's data pointer with the offset "
                    "applied, so do not require a zero offset.");
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

static void add_output_tail(fb_text *b, const json_t *process)
{
    const char *err = str(process, "stderr");
    size_t n = strlen(err);
    if (!n)
        return;
    const char *start = n > 600 ? err + n - 600 : err;
    say(b, "\nLast lines of stderr:\n%s", start);
}

/* What each hack type means, said plainly to the model: what is not allowed and what to do instead. */
static const char *hack_rule(const char *type)
{
    const char *rule = kg_finding_rule_of(type); /* eval/kinds.def KG_FINDING_MAP */
    return rule && *rule ? rule : "a check of the evaluator's reward-hack policy";
}

static void add_hacks(fb_text *b, const json_t *hacks)
{
    say_text(b, "Rejected as a reward hack: your code does something that is not allowed.");
    size_t i;
    json_t *h;
    json_array_foreach(hacks, i, h) {
        if (i >= 6) {
            say(b, "\n(and %zu more)", json_array_size(hacks) - i);
            break;
        }
        const json_t *line = json_object_get(h, "line");
        say(b, "\n- Not allowed: %s.", hack_rule(str(h, "type")));
        if (json_is_integer(line) && json_integer_value(line) > 0)
            say(b, " candidate.py line %lld: %s", (long long)json_integer_value(line), str(h, "message"));
        else if (*str(h, "variant"))
            say(b, " Seen on input variant %s: %s", str(h, "variant"), str(h, "message"));
        else
            say(b, " %s", str(h, "message"));
    }
    say_text(b, "\nWrite the computation in your own @triton.jit kernels and launch them from "
                   "ModelNew.forward; use torch only to allocate outputs, reshape/view/permute tensors, hold "
                   "parameters (nn.Parameter or nn.Linear weights) and move dtypes or devices.");
}

/* Whether the failed variants look like reduced-precision arithmetic rather than a logic bug (issue 37), which
 * the feedback says only when the candidate's source has a reduced-precision construct (a TF32 tl.dot, fp16/bf16:
 * the tolerance block's candidate_precision): a GELU with the tanh approximation for erf misses by 1e-4 to 1e-3
 * everywhere too (level1/26, 88, level2/53 wrong fixtures), and no tl.dot is to blame there.  At least two failed
 * variants, all alike by kg_eval_precision_misses (result.c: the same rule keeps the judge going after a first such
 * failure, through at most KG_PRECISION_LOOK variants that pass, so that a second one can tell).  Fills the band
 * seen. */
static int precision_like(const json_t *corr, double *lo, double *hi)
{
    return kg_eval_precision_misses(json_object_get(corr, "variants"), lo, hi) >= 2;
}

/* Whether some variant failed by its values (an error measured, shape and dtype right, NaN where the reference has
 * it): what a TF32 dot can cause.  The interpreter computes tl.dot in full precision, so only a GPU's run is asked. */
static int value_miss(const json_t *corr)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(corr, "variants"), i, v) {
        if (kg_eval_value_miss(v))
            return 1;
    }
    return 0;
}

/* A task judged otherwise than its source reads (tasks.forward_randomness): the model must know, or it
 * implements a dropout that the judge turned off. */
static void add_task_note(fb_text *b, const json_t *result)
{
    const json_t *rnd = json_object_get(json_object_get(result, "task"), "randomness");
    if (!strcmp(str(rnd, "handling"), "dropout_as_identity"))
        say_text(b, "\nNote: this task is judged with its dropout layers in eval mode, where dropout is the "
                       "identity: drop nothing.");
}

char *kg_eval_feedback(const json_t *result, const kg_eval_options *opts)
{
    fb_text b = {.ok = 1};
    const char *verdict = str(result, "verdict");
    const json_t *stage = failed_stage(result);
    const json_t *error = json_object_get(result, "error");
    const json_t *process = json_object_get(result, "process");
    const json_t *corr = json_object_get(result, "correctness");

    if (!strcmp(verdict, "correct")) {
        say(&b, "Correct on all %lld input variants that were checked.",
                      (long long)json_integer_value(json_object_get(corr, "passed_count")));
        const json_t *t = json_object_get(result, "timing");
        if (json_is_object(t) && json_is_number(json_object_get(t, "speedup")))
            say(&b, " Speedup over the PyTorch reference: %.2fx (median %.4g ms vs %.4g ms).",
                          json_number_value(json_object_get(t, "speedup")),
                          json_number_value(json_object_get(json_object_get(t, "candidate_ms"), "median")),
                          json_number_value(json_object_get(json_object_get(t, "reference_ms"), "median")));
        else
            say_text(&b, " Speed was not measured (CPU).");
        /* Where the time goes, for the next attempt at speed (GPU: the profile). */
        const json_t *cov = json_object_get(json_object_get(result, "profile"), "coverage");
        if (json_is_number(cov))
            say(&b, " %.0f%% of the forward's GPU time runs in your own Triton kernels.",
                          100 * json_number_value(cov));
        add_task_note(&b, result);
        return finish(&b, 0);
    }
    const char *sname = stage ? str(stage, "name") : "";
    const char *detail = stage ? str(stage, "detail") : "";
    if (!strcmp(verdict, "hacked")) {
        add_hacks(&b, json_object_get(result, "hacks"));
        return finish(&b, 1);
    }
    if (!strcmp(verdict, "invalid")) {
        if (!strcmp(sname, "extract"))
            say(&b, "No usable code in your answer: %s. Reply with one ```python block "
                              "holding the complete module that defines class ModelNew.", detail);
        else if (!strcmp(sname, "parse"))
            say(&b, "Your code does not parse: %s.", detail);
        else
            say(&b, "Your code is not acceptable: %s.", detail);
        if (!strcmp(sname, "parse"))
            add_error(&b, error, opts);
    } else if (!strcmp(verdict, "timeout")) {
        say(&b, "Stage %s did not finish within %g s and was killed. Look for an infinite "
                          "loop, a kernel launched with an enormous grid, or a loop bound that never "
                          "ends.", sname, json_number_value(json_object_get(process, "limit_s")));
    } else if (!strcmp(verdict, "compile_error")) {
        say(&b, "Your module failed to %s.",
                      !strcmp(sname, "compile") ? "import or construct ModelNew" : "compile a Triton kernel");
        add_error(&b, error, opts);
        if (!json_is_object(error) && *detail)
            say(&b, "\n%s", detail);
    } else if (!strcmp(verdict, "runtime_error")) {
        const char *cause = str(process, "cause");
        const char *end = str(process, "end");
        const json_t *unjudged = json_array_get(json_object_get(result, "unjudged"), 0);
        if (unjudged && json_is_object(error)) {
            /* A pass that a repeat call of the candidate's own model broke (result.c kg_eval_unjudged). */
            say(&b, "Your output was right on every input variant, but ModelNew raised when the same model "
                              "was called again (%s). A model must work on every call, not only the first.",
                          str(unjudged, "reason"));
        } else if (unjudged) {
            say(&b, "Your output was right on every input variant, but the evaluation could not check "
                              "everything a correct verdict needs, so it is not counted as correct: %s.",
                          str(unjudged, "reason"));
        } else if (!strcmp(end, "signal") &&
                   json_integer_value(json_object_get(json_object_get(process, "host_memory"), "oom_kills")) > 0)
            /* The kernel killed the runner in its memory group (supervisor/memcg.c): not a crash of the code. */
            say(&b, "The process held more host memory than it may during stage %s and was stopped: %s. Keep "
                    "tensors on the device and allocate only outputs and what your kernels need.",
                sname, detail);
        else if (!strcmp(end, "signal"))
            say(&b, "The process crashed during stage %s: %s. This usually means an "
                              "out-of-bounds memory access in a kernel (check masks and pointer arithmetic).",
                          sname, detail);
        else if (!strcmp(end, "output_flood"))
            say(&b, "Your code printed too much output (%lld bytes) and was stopped during "
                              "stage %s. Remove debug prints.",
                          (long long)(json_integer_value(json_object_get(process, "stdout_bytes")) +
                                      json_integer_value(json_object_get(process, "stderr_bytes"))), sname);
        else if (!strcmp(cause, "out_of_memory"))
            say(&b, "Out of memory during stage %s.", sname);
        else if (!strcmp(cause, "cuda_error"))
            say(&b, "A CUDA error occurred during stage %s (often an illegal memory access in a "
                              "kernel: check masks and offsets).", sname);
        else if (json_is_object(error) && !strcmp(str(error, "type"), "OutputTooLarge"))
            /* The judge refused the answer before copying it (judge/child.py _answer_bound): no exception was raised. */
            say(&b, "ModelNew returned far more data than the reference's outputs hold during stage %s: return "
                    "exactly the reference's outputs, with their shapes and dtypes.", sname);
        else if (json_is_object(error)) {
            say(&b, "ModelNew raised an exception during stage %s", sname);
            size_t i;
            json_t *v;
            json_array_foreach(json_object_get(corr, "variants"), i, v) {
                if (!strcmp(str(v, "status"), "error")) {
                    char *sizes = sizes_text(&b, v);
                    say(&b, " on input variant %s (%s; sizes %s)", str(v, "name"),
                                  str(v, "description"), sizes ? sizes : "{}");
                    free(sizes);
                    break;
                }
            }
            say_text(&b, ".");
        }
        else
            say(&b, "The evaluation process ended during stage %s: %s.", sname, detail);
        add_error(&b, error, opts);
        if (!json_is_object(error) && !unjudged)
            add_output_tail(&b, process);
    } else if (!strcmp(verdict, "incorrect")) {
        if (!strcmp(sname, "tiny_run")) {
            say(&b, "Wrong output on small inputs: %s.", detail);
        } else if (json_integer_value(json_object_get(corr, "failed_count")) +
                       json_integer_value(json_object_get(corr, "error_count")) == 0) {
            /* Every variant passed and the stage still failed: the task, not the kernel (result.c). */
            say(&b, "Your output matched on every input variant, but this cannot count as correct: %s. "
                              "This is a fault of the task, not of your kernel.", detail);
        } else {
            size_t i;
            json_t *v;
            int shown = 0;
            say(&b, "Wrong output: %lld of %lld checked input variants failed.",
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
                char *sizes = sizes_text(&b, v);
                say(&b, "\n- %s (%s; sizes %s): %s", str(v, "name"), str(v, "description"),
                              sizes ? sizes : "{}", str(v, "reason"));
                free(sizes);
            }
            say_text(&b, "\nPassed:");
            int any = 0;
            json_array_foreach(json_object_get(corr, "variants"), i, v) {
                if (!strcmp(str(v, "status"), "passed")) {
                    say(&b, " %s", str(v, "name"));
                    any = 1;
                }
            }
            if (!any)
                say_text(&b, " none");
            say_text(&b, ".");
            size_t left = json_array_size(json_object_get(corr, "not_run"));
            if (left)
                say(&b, " Not run, since the stage had already failed: %zu more variant%s; fix this one first.",
                    left, left == 1 ? "" : "s");
            double lo, hi;
            const json_t *cp = json_object_get(json_object_get(result, "tolerance"), "candidate_precision");
            json_int_t dots = json_integer_value(json_object_get(cp, "dot_reduced"));
            json_int_t halves = json_integer_value(json_object_get(cp, "half_precision"));
            if ((dots > 0 || halves > 0) && precision_like(corr, &lo, &hi)) {
                const char *profile = kg_eval_tolerance_name(opts);
                say(&b, "\nEvery failing variant misses by about the same relative amount (largest error "
                                  "%.2g to %.2g of the output's RMS), whatever the inputs: that is the rounding of "
                                  "reduced-precision arithmetic, not a logic error.", lo, hi);
                if (dots > 0)
                    say(&b, " tl.dot on float32 inputs rounds them to TF32 (10-bit mantissa) by default, "
                                      "and %lld tl.dot call%s in your code do%s not ask otherwise: pass "
                                      "input_precision=\"ieee\" to tl.dot.",
                                  (long long)dots, dots == 1 ? "" : "s", dots == 1 ? "es" : "");
                if (halves > 0)
                    say_text(&b, " Your code uses fp16 or bf16 (10- and 7-bit mantissas): keep the operands in "
                                    "float32 and accumulate in float32.");
                if (!strcmp(profile, "strict"))
                    say_text(&b, " The strict tolerance profile holds float32 outputs to 1e-4 of their scale; "
                                    "the kernelbench profile (atol = rtol = 1e-2) accepts TF32.");
            } else if (dots > 0 && !strcmp(kg_eval_tolerance_name(opts), "strict") && opts->device &&
                       strcmp(opts->device, "cpu") && value_miss(corr)) {
                /* Not the diagnosis above (the errors do not look like rounding alone), but a fact of the source
                 * that fails this profile by itself: the honest probe's GEMM epilogues on an H200 (twenty-third
                 * session) failed so on 18 of 31 with no word of TF32 (a ReLU's threshold, a softmax's tail make
                 * the errors uneven), and a model that does not know of it cannot pass. */
                say(&b, "\nNote: %lld tl.dot call%s in your code do%s not pass input_precision=\"ieee\": on "
                                  "float32 inputs tl.dot rounds them to TF32 (10-bit mantissa) by default, which "
                                  "usually misses the strict profile's 1e-4 of the output's scale by itself. Pass "
                                  "input_precision=\"ieee\", then look at what still fails.",
                              (long long)dots, dots == 1 ? "" : "s", dots == 1 ? "es" : "");
            }
        }
    } else {
        say(&b, "Verdict %s at stage %s: %s", verdict, sname, detail);
    }
    add_task_note(&b, result);
    return finish(&b, 1);
}
