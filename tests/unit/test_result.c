/*
 * test_result.c — the verdict, reward, stages and feedback that C derives
 * from a child's report (src/eval/result.c), on hand-made reports: every
 * decision rule, without Python.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "kg_fault.h"
#include "kg_test.h"
#include "kg_facts.h"
#include "eval/internal.h"
#include "eval/eval.h"
#include "rl/result_read.h"
#include "util/util.h"

#define CAND "/tmp/kgym-eval-x/candidate.py"

static kg_task task = {.path = "/tasks/t.py", .id = "level1/1", .name = "t", .source = "", .hash = "fnv1a64:0"};

typedef struct {
    kg_child_report rep;
    double t;
} fake;

static void fake_init(fake *f)
{
    memset(f, 0, sizeof *f);
    f->rep.messages = json_array();
    f->rep.out.head = kg_strdup("");
    f->rep.out.tail = kg_strdup("");
    f->rep.err.head = kg_strdup("");
    f->rep.err.tail = kg_strdup("");
    f->rep.end = KG_END_COMPLETED;
    f->rep.pid = 1234;
}

static void msg(fake *f, json_t *m)
{
    f->t += 10;
    json_object_set_new(m, "t_ms", json_real(f->t));
    json_array_append_new(f->rep.messages, m);
}

static void stage_ok(fake *f, const char *name)
{
    msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", name, "status", "begin"));
    msg(f, json_pack("{s:s, s:s, s:s, s:f, s:s}", "type", "stage", "stage", name, "status", "ok", "ms", 1.0,
                     "detail", ""));
}

static json_t *cmp_facts(int mismatches, int shape_ok)
{
    return json_pack("{s:b, s:b, s:i, s:i, s:f, s:f, s:[i,i], s:[f,f], s:[i,i], s:[i,i], s:n}", "shape_ok",
                     shape_ok, "dtype_ok", 1, "elements", 100, "mismatches", mismatches, "max_abs_error",
                     mismatches ? 0.5 : 0.0, "max_rel_error", mismatches ? 0.25 : 0.0, "first_mismatch", 3, 7,
                     "first_mismatch_values", 1.0, 1.5, "reference_shape", 10, 10, "candidate_shape", 10,
                     shape_ok ? 10 : 9, "error");
}

static void variant(fake *f, const char *name, const char *status, int mismatches)
{
    json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f}", "type", "variant", "name", name,
                          "description", "desc", "status", status, "sizes", "n", 10, "atol", 1e-4, "rtol", 1e-4);
    if (!strcmp(status, "ran"))
        json_object_set_new(m, "compare", cmp_facts(mismatches, 1));
    if (!strcmp(status, "reference_failed"))
        json_object_set_new(m, "reason", json_string("the reference raised"));
    if (!strcmp(status, "candidate_raised"))
        json_object_set_new(m, "error", json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:s}]}", "type", "IndexError",
                                                  "message", "index 9 is out of bounds", "frames", "file", CAND,
                                                  "line", 12, "function", "forward", "code", "y = x[9]"));
    msg(f, m);
}

static void tiny_ok(fake *f, int shape_ok)
{
    msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "tiny_run", "status", "begin"));
    json_t *data = json_pack("{s:s, s:s, s:o, s:{s:f, s:f}}", "name", "tiny", "status", "ran", "compare",
                             cmp_facts(0, shape_ok), "spent_ms", "reference", 512.5, "call", 40.0);
    msg(f, json_pack("{s:s, s:s, s:s, s:s, s:o}", "type", "stage", "stage", "tiny_run", "status", "ok", "detail", "",
                     "data", data));
}

/* The result of the report as it stands. */
static json_t *build_raw(fake *f, kg_eval_options *o)
{
    kg_eval_request req = {.task = &task, .response = "code", .response_len = 4, .candidate_name = "k.py"};
    json_t *ex = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "ok", "ms", 0.1, "detail", "raw");
    json_t *r = NULL;
    kg_error err;
    int rc = kg_eval_build_result(o, &req, &f->rep, CAND, ex, &r, &err);
    if (rc != KG_OK)
        fprintf(stderr, "  build: %s\n", err.message);
    json_decref(ex);
    kg_child_report_free(&f->rep);
    return r;
}

/* The result of the report with the facts a pass needs added where it lacks them (kg_facts.h): the tests of
 * other rules start from a run that can pass. */
static json_t *build(fake *f, kg_eval_options *o)
{
    kg_test_complete_facts(f->rep.messages, strcmp(o->device, "cpu") != 0);
    return build_raw(f, o);
}

static const char *verdict(const json_t *r)
{
    return json_string_value(json_object_get(r, "verdict"));
}

static double reward(const json_t *r)
{
    return json_number_value(json_object_get(r, "reward"));
}

static const char *stage_status(const json_t *r, const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "stages"), i, s) {
        if (!strcmp(json_string_value(json_object_get(s, "name")), name))
            return json_string_value(json_object_get(s, "status"));
    }
    return "missing";
}

static const char *stage_detail(const json_t *r, const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "stages"), i, s) {
        if (!strcmp(json_string_value(json_object_get(s, "name")), name))
            return json_string_value(json_object_get(s, "detail")) ?: "";
    }
    return "";
}

static const char *feedback(const json_t *r)
{
    return json_string_value(json_object_get(r, "feedback"));
}

static void all_pass_is_correct(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    variant(&f, "signed", "reference_failed", 0);
    variant(&f, "size_odd", "ran", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK_NEAR(reward(r), 1.0, 0);
    KG_CHECK_STR(stage_status(r, "timing"), "skipped");
    const json_t *c = json_object_get(r, "correctness");
    KG_CHECK(json_is_true(json_object_get(c, "passed")));
    KG_CHECK(json_integer_value(json_object_get(c, "passed_count")) == 2);
    KG_CHECK(json_integer_value(json_object_get(c, "skipped_count")) == 1);
    KG_CHECK(json_is_null(json_object_get(r, "timing")));
    KG_CHECK_STR(json_string_value(json_object_get(r, "schema")), KG_RESULT_SCHEMA);
    /* Stage time comes from our stamps (10 ms apart), not the child's "ms": 1.0. */
    size_t i;
    json_t *s;
    int tiny_spent = 0;
    json_array_foreach(json_object_get(r, "stages"), i, s) {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (!strcmp(name, "parse"))
            KG_CHECK_NEAR(json_number_value(json_object_get(s, "ms")), 10.0, 1e-9);
        /* The tiny run's steps on the judge's clock come with its stage, and with no other. */
        const json_t *spent = json_object_get(s, "spent_ms");
        if (!strcmp(name, "tiny_run")) {
            tiny_spent = 1;
            KG_CHECK_NEAR(json_number_value(json_object_get(spent, "reference")), 512.5, 0);
            KG_CHECK_NEAR(json_number_value(json_object_get(spent, "call")), 40.0, 0);
        } else {
            KG_CHECK(spent == NULL);
        }
    }
    KG_CHECK(tiny_spent);
    json_decref(r);
}

static void mismatch_is_incorrect_with_facts(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    variant(&f, "size_odd", "ran", 4);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK_NEAR(reward(r), 0.7, 1e-12);
    KG_CHECK_STR(stage_status(r, "correctness"), "fail");
    const char *fb = feedback(r);
    KG_CHECK(strstr(fb, "size_odd") != NULL);
    KG_CHECK(strstr(fb, "4 of 100 elements") != NULL);
    KG_CHECK(strstr(fb, "[3,7]") != NULL);
    KG_CHECK(strstr(fb, "Passed: base") != NULL);
    json_decref(r);
}

static void candidate_raise_in_variant_is_runtime_error(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "size_odd", "candidate_raised", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:n}", "type", "stage", "stage", "correctness", "status", "fail",
                      "detail", "raised", "error"));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "runtime_error");
    KG_CHECK_NEAR(reward(r), 0.7, 1e-12);
    const json_t *e = json_object_get(r, "error");
    KG_CHECK_STR(json_string_value(json_object_get(e, "type")), "IndexError");
    const json_t *fr = json_array_get(json_object_get(e, "frames"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(fr, "file")), "candidate.py");
    KG_CHECK(strstr(feedback(r), "candidate.py line 12") != NULL);
    json_decref(r);
}

static void frames_outside_candidate_are_dropped(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "compile", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:[{s:s, s:i, s:s, s:s}, {s:s, s:i, s:s, s:s}]}}", "type",
                      "stage", "stage", "compile", "status", "fail", "detail", "NameError", "error", "type",
                      "NameError", "message", "name 'tl2' is not defined", "frames", "file",
                      "/harness/kgym_harness/judge/child.py", "line", 200, "function", "compile", "code", "secret",
                      "file", CAND, "line", 3, "function", "<module>", "code", "import tl2"));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "compile_error");
    KG_CHECK_NEAR(reward(r), 0.3, 1e-12);
    const json_t *frames = json_object_get(json_object_get(r, "error"), "frames");
    KG_CHECK(json_array_size(frames) == 1);
    KG_CHECK(strstr(feedback(r), "child.py") == NULL);
    KG_CHECK(strstr(feedback(r), "secret") == NULL);
    KG_CHECK(strstr(feedback(r), "import tl2") != NULL);
    json_decref(r);
}

/* A candidate that fills the runner's folder (a size-limited tmpfs: harness sandbox.mount_workdir) gets its
 * error and a line naming the limit (kgym's options), never a claim about the host's disk. */
/* A run whose tiny run failed with ``error`` (stolen), after ``finding`` (stolen; NULL: none): the stages before it
 * passed. */
static json_t *tiny_run_failure(kg_eval_options *o, const char *detail, json_t *error, json_t *finding)
{
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "tiny_run", "status", "begin"));
    if (finding)
        msg(&f, finding);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:o}", "type", "stage", "stage", "tiny_run", "status", "fail", "detail",
                      detail, "error", error));
    msg(&f, json_pack("{s:s}", "type", "done"));
    return build(&f, o);
}

static void full_workdir_feedback_names_the_limit(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    o.workdir_bytes = 64ull << 20;
    o.workdir_files = 500;
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "compile", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:[{s:s, s:i, s:s, s:s}]}}", "type", "stage", "stage",
                      "compile", "status", "fail", "detail", "OSError", "error", "type", "OSError", "message",
                      "[Errno 28] No space left on device: 'big'", "frames", "file", CAND, "line", 9, "function",
                      "__init__", "code", "f.write(data)"));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "compile_error");
    KG_CHECK(strstr(feedback(r), "No space left on device") != NULL);
    KG_CHECK(strstr(feedback(r), "writable folder is limited to 64 MiB and 500 files") != NULL);
    json_decref(r);
    /* Any other error says nothing of the folder. */
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "compile", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:[]}}", "type", "stage", "stage", "compile", "status",
                      "fail", "detail", "OSError", "error", "type", "OSError", "message", "[Errno 13] Permission denied"));
    msg(&f, json_pack("{s:s}", "type", "done"));
    r = build(&f, &o);
    KG_CHECK(strstr(feedback(r), "writable folder") == NULL);
    KG_CHECK(strstr(feedback(r), "storage_offset") == NULL);
    json_decref(r);
    /* An assert on the input's storage offset gets the reason its inputs have one. */
    r = tiny_run_failure(&o, "AssertionError",
                         json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:s}]}", "type", "AssertionError", "message",
                                   "expects a fresh tensor", "frames", "file", CAND, "line", 26, "function", "forward",
                                   "code", "assert x.storage_offset() == 0"), NULL);
    KG_CHECK(strstr(feedback(r), "storage_offset() is not 0") != NULL);
    json_decref(r);
    /* The judge says which inputs it raised on: the result keeps it beside the message, the feedback prints it. */
    r = tiny_run_failure(&o, "ValueError",
                         json_pack("{s:s, s:s, s:s, s:[]}", "type", "ValueError", "message", "bad things happen",
                                   "inputs", "on the tiny run's inputs, sizes n=4, d=12", "frames"), NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(r, "error"), "message")), "bad things happen");
    KG_CHECK(strstr(feedback(r), "ValueError: bad things happen\n(on the tiny run's inputs, sizes n=4, d=12)") != NULL);
    json_decref(r);
}

static void triton_compile_error_in_tiny_run(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *r = tiny_run_failure(&o, "CompilationError",
                                 json_pack("{s:s, s:s, s:[], s:b}", "type", "CompilationError", "message",
                                           "at 10:4: unsupported", "frames", "triton_compile", 1), NULL);
    KG_CHECK_STR(verdict(r), "compile_error");
    KG_CHECK_NEAR(reward(r), 0.3, 1e-12);
    KG_CHECK_STR(stage_status(r, "correctness"), "skipped");
    json_decref(r);
}

static void wrong_shape_in_tiny_run(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 0);
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK_NEAR(reward(r), 0.5, 1e-12);
    KG_CHECK(strstr(feedback(r), "output shape [10,9], expected [10,10]") != NULL);
    json_decref(r);
}

static void timeout_and_crash(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "compile", "status", "begin"));
    f.rep.end = KG_END_TIMEOUT;
    f.rep.signal = SIGKILL;
    f.rep.stage_limit_s = 120;
    snprintf(f.rep.stage, sizeof f.rep.stage, "compile");
    f.rep.wall_ms = 5000;
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "timeout");
    KG_CHECK_NEAR(reward(r), 0.3, 1e-12);
    KG_CHECK(strstr(feedback(r), "120 s") != NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(r, "process"), "end")), "timeout");
    json_decref(r);

    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "tiny_run", "status", "begin"));
    f.rep.end = KG_END_SIGNAL;
    f.rep.signal = SIGSEGV;
    free(f.rep.err.head);
    f.rep.err.head = kg_strdup("Fatal Python error: Segmentation fault\n\xff\xfe bad utf8");
    r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "runtime_error");
    KG_CHECK_NEAR(reward(r), 0.5, 1e-12);
    const json_t *p = json_object_get(r, "process");
    KG_CHECK_STR(json_string_value(json_object_get(p, "cause")), "crash");
    KG_CHECK(strstr(feedback(r), "SIGSEGV") != NULL);
    /* Invalid UTF-8 from the child was made safe for JSON. */
    KG_CHECK(strstr(json_string_value(json_object_get(p, "stderr")), "?? bad utf8") != NULL);
    json_decref(r);
}

static void out_of_memory_cause(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    json_t *r = tiny_run_failure(&o, "oom",
                                 json_pack("{s:s, s:s, s:[]}", "type", "OutOfMemoryError", "message",
                                           "CUDA out of memory. Tried to allocate 80.00 GiB", "frames"), NULL);
    KG_CHECK_STR(verdict(r), "runtime_error");
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(r, "process"), "cause")), "out_of_memory");
    KG_CHECK(strstr(feedback(r), "Out of memory") != NULL);
    json_decref(r);
}

static void task_errors_are_not_verdicts(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    msg(&f, json_pack("{s:s, s:{s:s, s:s}}", "type", "task_error", "error", "type", "TaskError", "message",
                      "no get_inputs"));
    kg_eval_request req = {.task = &task, .response = "x", .response_len = 1};
    json_t *ex = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "ok", "ms", 0.1, "detail", "");
    json_t *r = NULL;
    kg_error err;
    KG_CHECK(kg_eval_build_result(&o, &req, &f.rep, CAND, ex, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(r == NULL);
    KG_CHECK(strstr(err.message, "no get_inputs") != NULL);
    kg_child_report_free(&f.rep);

    /* Every variant skipped: the reference is broken, not the candidate. */
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "reference_failed", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    KG_CHECK(kg_eval_build_result(&o, &req, &f.rep, CAND, ex, &r, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "every input variant") != NULL);
    kg_child_report_free(&f.rep);
    json_decref(ex);
}

static void extraction_failure_is_invalid(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    kg_eval_request req = {.task = &task, .response = "no code here", .response_len = 12};
    json_t *ex = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "fail", "ms", 0.1, "detail",
                           "no code found: the reply has no ``` fenced block");
    json_t *r = NULL;
    KG_CHECK(kg_eval_build_result(&o, &req, NULL, NULL, ex, &r, NULL) == KG_OK);
    KG_CHECK_STR(verdict(r), "invalid");
    KG_CHECK_NEAR(reward(r), 0.0, 0);
    KG_CHECK_STR(stage_status(r, "parse"), "skipped");
    KG_CHECK(json_is_null(json_object_get(r, "process")));
    KG_CHECK(strstr(feedback(r), "no ``` fenced block") != NULL);
    json_decref(r);
    json_decref(ex);
}

static void credit_is_configurable(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    const double c[5] = {-1, 0.1, 0.2, 0.4, 2.0};
    memcpy(o.credit, c, sizeof c);
    KG_CHECK_NEAR(kg_eval_credit(&o, "invalid", 0), -1, 0);
    KG_CHECK_NEAR(kg_eval_credit(&o, "compile_error", 1), 0.1, 0);
    KG_CHECK_NEAR(kg_eval_credit(&o, "runtime_error", 2), 0.2, 0);
    KG_CHECK_NEAR(kg_eval_credit(&o, "incorrect", 3), 0.4, 0);
    KG_CHECK_NEAR(kg_eval_credit(&o, "correct", 4), 2.0, 0);
    /* Never full credit without a correct verdict; hacked is always 0. */
    KG_CHECK_NEAR(kg_eval_credit(&o, "runtime_error", 4), 0.4, 0);
    KG_CHECK_NEAR(kg_eval_credit(&o, "hacked", 4), 0.0, 0);
    o.hack_penalty = -0.5;
    KG_CHECK_NEAR(kg_eval_credit(&o, "hacked", 4), -0.5, 0);
}

/* The decision alone, on facts (no messages): every branch of kg_eval_decide, with the credit it gives. */
static void decision_from_facts(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu"); /* credit 0, 0.3, 0.5, 0.7, 1 */
    o.hack_penalty = -0.25;
    enum { NONE = -1 };
    static const struct {
        kg_eval_facts f;
        kg_verdict verdict;
        int level, demote;
        double reward;
    } rows[] = {
        {{.failed_stage = NONE, .level = 4}, KG_VERDICT_CORRECT, 4, 0, 1.0},
        /* a pass with a fact missing is never correct, and never full credit */
        {{.failed_stage = NONE, .level = 4, .unjudged = 1}, KG_VERDICT_RUNTIME_ERROR, 4, 0, 0.7},
        {{.failed_stage = KG_STAGE_EXTRACT}, KG_VERDICT_INVALID, 0, 0, 0.0},
        {{.failed_stage = KG_STAGE_STATIC, .level = 0, .raised = 1}, KG_VERDICT_INVALID, 0, 0, 0.0},
        {{.failed_stage = KG_STAGE_PARSE, .timed_out = 1, .ended_early = 1}, KG_VERDICT_TIMEOUT, 0, 0, 0.0},
        {{.failed_stage = KG_STAGE_COMPILE, .level = 1, .raised = 1}, KG_VERDICT_COMPILE_ERROR, 1, 0, 0.3},
        /* died inside compile without an exception: not the compiler's verdict */
        {{.failed_stage = KG_STAGE_COMPILE, .level = 1, .ended_early = 1}, KG_VERDICT_RUNTIME_ERROR, 1, 0, 0.3},
        {{.failed_stage = KG_STAGE_COMPILE, .level = 1, .ended_early = 1, .timed_out = 1}, KG_VERDICT_TIMEOUT, 1,
         0, 0.3},
        /* a Triton compile error first seen in the tiny run drops the credit to the compile level */
        {{.failed_stage = KG_STAGE_TINY_RUN, .level = 2, .raised = 1, .raised_in_triton_compile = 1},
         KG_VERDICT_COMPILE_ERROR, 1, 0, 0.3},
        {{.failed_stage = KG_STAGE_TINY_RUN, .level = 2, .tiny_shape_bad = 1}, KG_VERDICT_INCORRECT, 2, 1, 0.5},
        {{.failed_stage = KG_STAGE_TINY_RUN, .level = 2, .raised = 1}, KG_VERDICT_RUNTIME_ERROR, 2, 0, 0.5},
        {{.failed_stage = KG_STAGE_CORRECTNESS, .level = 3}, KG_VERDICT_INCORRECT, 3, 1, 0.7},
        {{.failed_stage = KG_STAGE_CORRECTNESS, .level = 3, .raised = 1}, KG_VERDICT_RUNTIME_ERROR, 3, 0, 0.7},
        {{.failed_stage = KG_STAGE_CORRECTNESS, .level = 3, .ended_early = 1}, KG_VERDICT_RUNTIME_ERROR, 3, 0, 0.7},
        {{.failed_stage = KG_STAGE_TIMING, .level = 4}, KG_VERDICT_RUNTIME_ERROR, 4, 0, 0.7},
        {{.failed_stage = KG_STAGE_COUNT, .level = 4}, KG_VERDICT_RUNTIME_ERROR, 4, 0, 0.7},
        /* nondeterministic: a bug in a wrong candidate (demoted to a warning), a hack in any other */
        {{.failed_stage = KG_STAGE_CORRECTNESS, .level = 3, .hacks = 1, .nondeterministic_hacks = 1},
         KG_VERDICT_INCORRECT, 3, 1, 0.7},
        {{.failed_stage = KG_STAGE_CORRECTNESS, .level = 3, .hacks = 2, .nondeterministic_hacks = 1},
         KG_VERDICT_HACKED, 3, 1, -0.25},
        {{.failed_stage = NONE, .level = 4, .hacks = 1, .nondeterministic_hacks = 1}, KG_VERDICT_HACKED, 4, 0,
         -0.25},
        /* a caught exploit overrides every other verdict */
        {{.failed_stage = KG_STAGE_STATIC, .hacks = 1}, KG_VERDICT_HACKED, 0, 0, -0.25},
        {{.failed_stage = KG_STAGE_TINY_RUN, .level = 2, .timed_out = 1, .hacks = 3}, KG_VERDICT_HACKED, 2, 0,
         -0.25},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        kg_eval_decision d;
        memset(&d, 0x5a, sizeof d);
        kg_eval_decide(&o, &rows[i].f, &d);
        if (d.verdict != rows[i].verdict || d.level != rows[i].level ||
            d.demote_nondeterministic != rows[i].demote || fabs(d.reward - rows[i].reward) > 1e-12)
            fprintf(stderr, "  row %zu: %s level %d demote %d reward %g\n", i, kg_verdict_name(d.verdict), d.level,
                    d.demote_nondeterministic, d.reward);
        KG_CHECK(d.verdict == rows[i].verdict);
        KG_CHECK(d.level == rows[i].level);
        KG_CHECK(d.demote_nondeterministic == rows[i].demote);
        KG_CHECK_NEAR(d.reward, rows[i].reward, 1e-12);
    }
}

/* The one reader of a result (rl/result_read.h): what the RL library, bench, the scheduler and the KernelGYM
 * adapter take from it. */
static void reader_of_a_result(void)
{
    json_t *r = json_pack("{s:s, s:f, s:{s:f}, s:{s:f}, s:[], s:[{s:s}]}", "verdict", "correct", "reward", 1.0,
                          "timing", "speedup", 2.5, "profile", "coverage", 0.75, "hacks", "stages", "name", "parse");
    kg_result_view v;
    kg_result_read(r, &v);
    KG_CHECK(v.known && v.outcome.verdict == KG_VERDICT_CORRECT && !v.outcome.hacked);
    KG_CHECK_STR(v.verdict, "correct");
    KG_CHECK_NEAR(v.outcome.staged_reward, 1.0, 0);
    KG_CHECK_NEAR(v.outcome.speedup, 2.5, 0);
    KG_CHECK_NEAR(v.outcome.coverage, 0.75, 0);
    KG_CHECK(json_array_size(v.stages) == 1 && json_array_size(v.hacks) == 0);
    /* a finding makes any verdict hacked for the RL library */
    json_array_append_new(json_object_get(r, "hacks"), json_pack("{s:s}", "type", "output_alias"));
    kg_result_read(r, &v);
    KG_CHECK(v.outcome.hacked);
    /* not measured: NaN; a verdict kgym does not know: read as written, not known */
    json_object_del(r, "timing");
    json_object_del(r, "profile");
    json_object_set_new(r, "verdict", json_string("passed"));
    kg_result_read(r, &v);
    KG_CHECK(!v.known && v.verdict && !strcmp(v.verdict, "passed"));
    KG_CHECK(isnan(v.outcome.speedup) && isnan(v.outcome.coverage));
    kg_eval_outcome o;
    kg_error err;
    KG_CHECK(kg_result_outcome(r, &o, &err) == KG_ERR_INVALID && strstr(err.message, "passed"));
    json_object_del(r, "verdict");
    KG_CHECK(kg_result_outcome(r, &o, &err) == KG_ERR_INVALID && strstr(err.message, "missing"));
    KG_CHECK(kg_result_outcome(NULL, &o, &err) == KG_ERR_INVALID);
    kg_result_read(NULL, &v);
    KG_CHECK(!v.verdict && !v.known && isnan(v.outcome.staged_reward));
    json_decref(r);
}

static void gpu_timing_statistics(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "begin"));
    msg(&f, json_pack("{s:s, s:[f,f,f,f], s:[f,f,f,f], s:s}", "type", "timing", "reference_ms", 4.0, 2.0, 3.0, 5.0,
                      "candidate_ms", 1.0, 2.0, 1.0, 1.0, "gpu", "NVIDIA H100"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    const json_t *t = json_object_get(r, "timing");
    KG_CHECK(json_is_object(t));
    /* The ratio of 10% trimmed means: of 4 samples none is dropped, so 3.5 / 1.25 (the medians' 3.5 / 1.0
     * would hide the candidate's slow call). */
    KG_CHECK_NEAR(json_number_value(json_object_get(t, "speedup")), 2.8, 1e-12);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t, "reference_ms"), "mean")), 3.5, 1e-12);
    KG_CHECK_NEAR(json_number_value(json_object_get(json_object_get(t, "candidate_ms"), "min")), 1.0, 1e-12);
    KG_CHECK(strstr(feedback(r), "2.80x") != NULL);
    json_decref(r);
}

static void fp64_adjudication(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    o.timing = 0;
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    /* A near miss the float64 reference clears... */
    json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o, s:{s:f, s:f, s:f, s:i}}", "type", "variant",
                          "name", "signed", "description", "d", "status", "ran", "sizes", "n", 10, "atol", 1e-4,
                          "rtol", 1e-4, "compare", cmp_facts(3, 1), "fp64", "reference_error", 2e-3,
                          "candidate_error", 1e-3, "slack", 4e-3, "mismatches", 0);
    msg(&f, m);
    /* ...and one it does not. */
    m = json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o, s:{s:f, s:f, s:f, s:i}}", "type", "variant", "name",
                  "size_odd", "description", "d", "status", "ran", "sizes", "n", 9, "atol", 1e-4, "rtol", 1e-4,
                  "compare", cmp_facts(3, 1), "fp64", "reference_error", 1e-6, "candidate_error", 5e-2, "slack",
                  2e-6, "mismatches", 3);
    msg(&f, m);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    const json_t *vs = json_object_get(json_object_get(r, "correctness"), "variants");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, 0), "status")), "passed");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, 0), "adjudicated")), "fp64");
    KG_CHECK(strstr(json_string_value(json_object_get(json_array_get(vs, 0), "reason")), "float64") != NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, 1), "status")), "failed");
    /* The miss it did not clear says how far both are from the exact result (precision, not logic, is the
     * question the model must answer). */
    KG_CHECK(strstr(json_string_value(json_object_get(json_array_get(vs, 1), "reason")),
                    "against a float64 run of the reference your largest error is 0.05, the float32 reference's own "
                    "1e-06") != NULL);
    json_decref(r);
}

/* A variant whose reference output is below the absolute floor (compare.variant_tolerance), reported with its
 * relative check: no element beyond atol, but more than KG_BELOW_FLOOR_SHARE of them beyond rtol of their own
 * value.  */
static json_t *below_floor_variant(const char *name, int relative_mismatches, int with_count, int relative_checked)
{
    json_t *cmp = cmp_facts(0, 1);
    if (with_count)
        json_object_set_new(cmp, "relative_mismatches", json_integer(relative_mismatches));
    json_object_set_new(cmp, "max_rel_error", json_real(4.5e-3));
    json_t *tol = json_pack("{s:s, s:f, s:f, s:b, s:f, s:f}", "profile", "strict", "base_atol", 1e-4, "scale", 2.5e-6,
                            "below_floor", 1, "floor", 1e-6, "share", KG_BELOW_FLOOR_SHARE);
    json_object_set_new(tol, "relative_atol", relative_checked ? json_real(2.5e-10) : json_null());
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o, s:o}", "type", "variant", "name", name,
                     "description", "d", "status", "ran", "sizes", "n", 10, "atol", 1e-6, "rtol", 1e-4, "compare", cmp,
                     "tolerance", tol);
}

static void below_floor_relative_rule(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    msg(&f, below_floor_variant("base", 1, 1, 1));             /* 1 of 100: within the share */
    msg(&f, below_floor_variant("seed_1", 40, 1, 1));          /* 40 of 100: an approximation */
    msg(&f, below_floor_variant("signed", 0, 0, 1));           /* announced, never counted: fails closed */
    msg(&f, below_floor_variant("small_values", 90, 1, 0));    /* a value-range variant: no relative check */
    json_t *noise = below_floor_variant("size_odd", 95, 1, 1); /* rounding noise the float64 result clears */
    json_object_set_new(noise, "fp64", json_pack("{s:f, s:f, s:f, s:i}", "reference_error", 3e-6, "candidate_error",
                                                 2e-6, "slack", 6e-6, "mismatches", 0));
    msg(&f, noise);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    const json_t *vs = json_object_get(json_object_get(r, "correctness"), "variants");
    const char *want[] = {"passed", "failed", "failed", "passed", "passed"};
    for (size_t i = 0; i < 5; i++)
        KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, i), "status")), want[i]);
    const char *why = json_string_value(json_object_get(json_array_get(vs, 1), "reason"));
    KG_CHECK(strstr(why, "40 of 100 elements (40.0%)") != NULL && strstr(why, "below the absolute floor") != NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, 4), "adjudicated")), "fp64");
    /* The result says how each output was judged. */
    const json_t *tol = json_object_get(json_array_get(vs, 1), "tolerance");
    KG_CHECK(json_is_true(json_object_get(tol, "below_floor")));
    KG_CHECK_NEAR(json_number_value(json_object_get(tol, "scale")), 2.5e-6, 1e-18);
    KG_CHECK(json_integer_value(json_object_get(json_array_get(vs, 1), "relative_mismatches")) == 40);
    KG_CHECK(strstr(feedback(r), "below the absolute floor") != NULL);
    json_decref(r);
}

/* A variant of a heavy-tailed float32 output (a cumprod): no element beyond atol, the small-elements check
 * announced in its tolerance when ``announced``, and the comparison's tail facts as given (NULL: none). */
static json_t *tail_variant(const char *name, int announced, json_t *tail)
{
    json_t *cmp = cmp_facts(0, 1);
    if (tail)
        json_object_set_new(cmp, "tail", tail);
    json_t *tol = json_pack("{s:s, s:f, s:f, s:b}", "profile", "strict", "base_atol", 1e-4, "scale", 4.4e-2,
                            "below_floor", 0);
    json_object_set_new(tol, "tail", announced ? json_pack("{s:f, s:f, s:i, s:i}", "bound", 0.015625, "conditioned",
                                                           0.000244140625, "tiny", 23000, "nonzero", 65000)
                                               : json_null());
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o, s:o}", "type", "variant", "name", name,
                     "description", "d", "status", "ran", "sizes", "n", 10, "atol", 4.4e-6, "rtol", 1e-4, "compare", cmp,
                     "tolerance", tol);
}

static void small_elements_rule(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    /* honest: every checked element within the bound */
    msg(&f, tail_variant("base", 1, json_pack("{s:i, s:i, s:f}", "checked", 21000, "mismatches", 0, "max_rel_error",
                                              4.5e-6)));
    /* small elements left zero: 15,823 of them beyond 2^-6 of their own value */
    msg(&f, tail_variant("seed_1", 1, json_pack("{s:i, s:i, s:f, s:[i,i], s:[f,f]}", "checked", 21000, "mismatches",
                                                15823, "max_rel_error", 1.0, "first_mismatch", 0, 21,
                                                "first_mismatch_values", 8.1e-10, 0.0)));
    msg(&f, tail_variant("signed", 1, NULL));                                         /* announced, not reported */
    msg(&f, tail_variant("size_odd", 1, json_pack("{s:s}", "error", "RuntimeError: no float64 kernel")));
    msg(&f, tail_variant("size_small", 0, NULL));                                     /* not announced: not asked */
    msg(&f, tail_variant("size_large", 1, json_pack("{s:i, s:s}", "checked", 3, "mismatches", "2"))); /* not a count */
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    const json_t *vs = json_object_get(json_object_get(r, "correctness"), "variants");
    const char *want[] = {"passed", "failed", "failed", "failed", "passed", "failed"};
    for (size_t i = 0; i < 6; i++)
        KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, i), "status")), want[i]);
    const char *why = json_string_value(json_object_get(json_array_get(vs, 1), "reason"));
    KG_CHECK(strstr(why, "15823 of 21000 well-conditioned elements") != NULL && strstr(why, "0.015625") != NULL &&
             strstr(why, "[0,21]") != NULL && strstr(why, "35% of the output's nonzero") != NULL);
    KG_CHECK(strstr(json_string_value(json_object_get(json_array_get(vs, 2), "reason")), "could not complete") != NULL);
    KG_CHECK(strstr(json_string_value(json_object_get(json_array_get(vs, 3), "reason")), "no float64 kernel") != NULL);
    /* The result keeps the facts. */
    KG_CHECK(json_integer_value(json_object_get(json_object_get(json_array_get(vs, 1), "tail"), "mismatches")) == 15823);
    KG_CHECK(json_is_object(json_object_get(json_object_get(json_array_get(vs, 0), "tolerance"), "tail")));
    json_decref(r);
}

/* A variant that failed by a relative error e of its output's RMS (scale 64: a GEMM), everywhere. */
static json_t *scaled_miss(const char *name, double e, int nonfinite)
{
    json_t *cmp = cmp_facts(50, 1);
    json_object_set_new(cmp, "max_abs_error", json_real(e * 64.0));
    json_object_set_new(cmp, "candidate_nonfinite", json_integer(nonfinite));
    json_object_set_new(cmp, "reference_nonfinite", json_integer(0));
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o, s:{s:s, s:f, s:b}}", "type", "variant", "name",
                     name, "description", "d", "status", "ran", "sizes", "n", 10, "atol", 6.4e-3, "rtol", 1e-4,
                     "compare", cmp, "tolerance", "profile", "strict", "scale", 64.0, "below_floor", 0);
}

/* dots: tl.dot calls without input_precision="ieee" in the candidate's source (the static stage's facts). */
static json_t *precision_run(kg_eval_options *o, const double *errs, const int *nonfinite, size_t n, int with_judge,
                             int dots)
{
    fake f;
    fake_init(&f);
    if (with_judge)
        msg(&f, json_pack("{s:s, s:b, s:b, s:s, s:s, s:s}", "type", "reference_precision", "matmul_tf32", 0,
                          "cudnn_tf32", 0, "float32_matmul_precision", "highest", "profile", "strict", "device",
                          "cuda"));
    stage_ok(&f, "parse");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "static", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:f, s:s, s:{s:{s:i, s:i, s:i}}}", "type", "stage", "stage", "static", "status",
                      "ok", "ms", 1.0, "detail", "", "data", "precision", "dot_reduced", dots, "dot_full", 1 - (dots > 0),
                      "half_precision", 0));
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    const char *names[] = {"base", "seed_1", "signed", "size_odd", "large_values"};
    for (size_t i = 0; i < n; i++) {
        if (errs[i] > 0)
            msg(&f, scaled_miss(names[i], errs[i], nonfinite ? nonfinite[i] : 0));
        else
            variant(&f, names[i], "ran", 0);
    }
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    return build(&f, o);
}

/* The first failing variant ends the stage (variant_go): kgym's answer is "stop" once a variant failed or raised,
 * except after a single miss in the reduced-precision band (a second one decides the feedback's diagnosis); the
 * variants of the plan the judge then did not run are the result's correctness.not_run, counted in the stage's
 * detail and the feedback, and the verdict is the same incorrect. */
static void first_failure_ends_correctness(void)
{
    fake f;
    fake_init(&f);
    char why[512];
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    msg(&f, json_pack("{s:s, s:[s,s,s,s]}", "type", "variant_plan", "variants", "base", "small_odd", "signed",
                      "offset"));
    variant(&f, "base", "ran", 0);
    KG_CHECK(kg_eval_correctness_failed(f.rep.messages, NULL, why, sizeof why) == 0);
    variant(&f, "small_odd", "reference_failed", 0); /* skipped: the task's, not the candidate's */
    KG_CHECK(kg_eval_correctness_failed(f.rep.messages, NULL, why, sizeof why) == 0);
    /* A single miss in the precision band: go on, so a second can tell TF32 from a bug. */
    msg(&f, scaled_miss("signed", 8e-4, 0));
    KG_CHECK(kg_eval_correctness_failed(f.rep.messages, NULL, why, sizeof why) == 0);
    fake g;
    fake_init(&g);
    variant(&g, "base", "ran", 3); /* a logic bug: an error of 0.5 on a unit output */
    KG_CHECK(kg_eval_correctness_failed(g.rep.messages, NULL, why, sizeof why) == 1);
    KG_CHECK(strstr(why, "variant base") != NULL);
    kg_child_report_free(&g.rep);
    fake_init(&g);
    variant(&g, "base", "candidate_raised", 0);
    KG_CHECK(kg_eval_correctness_failed(g.rep.messages, NULL, why, sizeof why) == 1);
    kg_child_report_free(&g.rep);
    /* Two misses alike (or a second failure of any kind) end it: offset is not run. */
    msg(&f, scaled_miss("size_odd", 9e-4, 0));
    KG_CHECK(kg_eval_correctness_failed(f.rep.messages, NULL, why, sizeof why) == 1);
    KG_CHECK(strstr(why, "variant signed") != NULL);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    /* A single miss in the precision band goes on for at most KG_PRECISION_LOOK variants that pass (the cheap
     * ones after small_odd) looking for a second; skipped ones do not count, nor passes before the miss. */
    fake h;
    fake_init(&h);
    variant(&h, "base", "ran", 0);
    msg(&h, scaled_miss("small_odd", 8e-4, 0));
    variant(&h, "scaled_x2", "reference_failed", 0); /* skipped: it does not count */
    for (int k = 0; k < KG_PRECISION_LOOK; k++) {
        KG_CHECK(kg_eval_correctness_failed(h.rep.messages, NULL, why, sizeof why) == 0);
        char name[32];
        snprintf(name, sizeof name, "v%d", k);
        variant(&h, name, "ran", 0);
    }
    KG_CHECK(kg_eval_correctness_failed(h.rep.messages, NULL, why, sizeof why) == 1);
    KG_CHECK(strstr(why, "variant small_odd") != NULL);
    kg_child_report_free(&h.rep);
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    const json_t *nr = json_object_get(json_object_get(r, "correctness"), "not_run");
    KG_CHECK(json_array_size(nr) == 1 && !strcmp(json_string_value(json_array_get(nr, 0)) ?: "", "offset"));
    KG_CHECK(strstr(stage_detail(r, "correctness"), "1 more not run") != NULL);
    KG_CHECK(strstr(feedback(r), "Not run, since the stage had already failed: 1 more variant;") != NULL);
    json_decref(r);
}

/* Issue 37: the same small relative error on every failing variant is reduced precision (TF32's 10-bit
 * mantissa), and the feedback says so and names the fix; a logic bug's errors, a lone failure, NaN outputs or
 * errors that differ widely are not. */
static void precision_feedback(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    o.timing = 0;
    const double tf32[] = {8e-4, 8e-4, 3.2e-3, 9e-4, 1e-3};
    json_t *r = precision_run(&o, tf32, NULL, 5, 1, 1);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK(strstr(feedback(r), "input_precision=\"ieee\"") != NULL && strstr(feedback(r), "TF32") != NULL);
    KG_CHECK(strstr(feedback(r), "1 tl.dot call in your code does not") != NULL);
    KG_CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(r, "tolerance"),
                                                                "candidate_precision"), "dot_reduced")) == 1);
    KG_CHECK(strstr(feedback(r), "kernelbench profile") != NULL);
    /* The reference's precision, as the judge reported it. */
    const json_t *tol = json_object_get(r, "tolerance");
    KG_CHECK_STR(json_string_value(json_object_get(tol, "profile")), "strict");
    const json_t *prec = json_object_get(tol, "reference_precision");
    KG_CHECK(json_is_false(json_object_get(prec, "matmul_tf32")) && json_is_false(json_object_get(prec, "cudnn_tf32")));
    KG_CHECK_STR(json_string_value(json_object_get(prec, "reported_by")), "judge");
    json_decref(r);
    /* Under kernelbench the note still names the fix, without pointing at the profile it is already under. */
    o.tolerance_profile = "kernelbench";
    r = precision_run(&o, tf32, NULL, 5, 0, 2);
    KG_CHECK(strstr(feedback(r), "input_precision=\"ieee\"") != NULL && strstr(feedback(r), "kernelbench profile") == NULL);
    tol = json_object_get(r, "tolerance");
    KG_CHECK_STR(json_string_value(json_object_get(tol, "profile")), "kernelbench");
    prec = json_object_get(tol, "reference_precision");
    KG_CHECK(json_is_true(json_object_get(prec, "cudnn_tf32"))); /* no judge report: the profile's own setting */
    KG_CHECK_STR(json_string_value(json_object_get(prec, "reported_by")), "profile");
    json_decref(r);
    o.tolerance_profile = "strict";
    const double bug[] = {0.4, 0.5, 0.6, 0.0, 0.0};          /* a logic bug: errors of the output's size */
    const double lone[] = {1e-3, 0.0, 0.0, 0.0, 0.0};        /* one variant alone */
    const double spread[] = {2e-4, 1e-2, 3e-3, 0.0, 0.0};    /* not the same error whatever the inputs */
    const int nan_out[] = {0, 7, 0, 0, 0};
    /* The same errors from code with no reduced-precision construct (a GELU's tanh approximation misses by
     * 1e-4 to 1e-3 everywhere): no note either. */
    const double *cases[] = {bug, lone, spread, tf32, tf32};
    for (size_t i = 0; i < 5; i++) {
        r = precision_run(&o, cases[i], i == 3 ? nan_out : NULL, 5, 1, i == 4 ? 0 : 1);
        KG_CHECK_STR(verdict(r), "incorrect");
        KG_CHECK(strstr(feedback(r), "about the same relative amount") == NULL);
        /* Code with a TF32 dot still hears that it fails strict by itself (a note, not the diagnosis); code
         * without one hears nothing of it. */
        KG_CHECK((strstr(feedback(r), "Note: 1 tl.dot call in your code does not pass") != NULL) == (i != 4));
        json_decref(r);
    }
    /* Under kernelbench TF32 passes: no note where the errors are not rounding-like. */
    o.tolerance_profile = "kernelbench";
    r = precision_run(&o, bug, NULL, 5, 1, 1);
    KG_CHECK(strstr(feedback(r), "input_precision") == NULL);
    json_decref(r);
    o.tolerance_profile = "strict";
    /* On the CPU the interpreter's tl.dot is full precision: no note there. */
    kg_eval_options cpu;
    kg_eval_options_default(&cpu, "cpu");
    cpu.timing = 0;
    r = precision_run(&cpu, bug, NULL, 5, 1, 1);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK(strstr(feedback(r), "input_precision") == NULL);
    json_decref(r);
    /* A failure of shape alone is not what a TF32 dot causes: no note. */
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "static", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:f, s:s, s:{s:{s:i, s:i, s:i}}}", "type", "stage", "stage", "static", "status",
                      "ok", "ms", 1.0, "detail", "", "data", "precision", "dot_reduced", 1, "dot_full", 0,
                      "half_precision", 0));
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:f, s:f, s:o}", "type", "variant", "name", "base",
                      "description", "d", "status", "ran", "sizes", "n", 10, "atol", 1e-4, "rtol", 1e-4, "compare",
                      cmp_facts(0, 0)));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK(strstr(feedback(r), "output shape") != NULL && strstr(feedback(r), "input_precision") == NULL);
    json_decref(r);
}

/* Every result states the tolerance profile and the reference's precision, an invalid reply's too. */
static void tolerance_in_every_result(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    o.tolerance_profile = "kernelbench";
    kg_eval_request req = {.task = &task, .response = "no code", .response_len = 7, .candidate_name = "k.py"};
    json_t *ex = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "fail", "ms", 0.1, "detail", "none");
    json_t *r = NULL;
    kg_error err;
    KG_CHECK(kg_eval_build_result(&o, &req, NULL, NULL, ex, &r, &err) == KG_OK);
    json_decref(ex);
    KG_CHECK_STR(verdict(r), "invalid");
    const json_t *tol = json_object_get(r, "tolerance");
    KG_CHECK_STR(json_string_value(json_object_get(tol, "profile")), "kernelbench");
    KG_CHECK(json_is_object(json_object_get(tol, "reference_precision")));
    json_decref(r);
}

/* A passing run plus one runtime finding: the verdict is hacked, the reward the penalty, the evidence kept. */
static void runtime_finding_is_hacked(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    o.hack_penalty = -1.0;
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:{s:[s]}}}", "type", "finding", "finding", "type",
                      "no_triton_launch", "stage", "tiny_run", "variant", "tiny", "message",
                      "ModelNew.forward launched no Triton kernel", "evidence", "kernels", "affine_kernel"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    KG_CHECK_NEAR(reward(r), -1.0, 0);
    const json_t *h = json_array_get(json_object_get(r, "hacks"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "no_triton_launch");
    KG_CHECK(json_is_object(json_object_get(h, "evidence")));
    KG_CHECK(strstr(feedback(r), "Not allowed") != NULL);
    KG_CHECK(strstr(feedback(r), "decoy") != NULL);
    KG_CHECK(strstr(feedback(r), "variant tiny") != NULL);
    json_decref(r);
}

/* `nondeterministic` (a right output, then a wrong one on the same inputs) is a hack in a candidate that
 * otherwise passes, and only a warning in one that is wrong anyway (an unwritten tail is a bug). */
static void nondeterministic_is_a_hack_only_when_otherwise_correct(void)
{
    for (int wrong = 0; wrong <= 1; wrong++) {
        kg_eval_options o;
        kg_eval_options_default(&o, "cpu");
        fake f;
        fake_init(&f);
        stage_ok(&f, "parse");
        stage_ok(&f, "static");
        stage_ok(&f, "compile");
        tiny_ok(&f, 1);
        msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
        variant(&f, "base", "ran", 0);
        variant(&f, "size_odd", "ran", wrong ? 7 : 0);
        msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s, s:s}}", "type", "finding", "finding", "type", "nondeterministic",
                          "stage", "correctness", "variant", "base_repeat", "message", "the same inputs gave a wrong output"));
        msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
        msg(&f, json_pack("{s:s}", "type", "done"));
        json_t *r = build(&f, &o);
        KG_CHECK_STR(verdict(r), wrong ? "incorrect" : "hacked");
        KG_CHECK(json_array_size(json_object_get(r, "hacks")) == (wrong ? 0u : 1u));
        KG_CHECK(json_array_size(json_object_get(r, "warnings")) == (wrong ? 1u : 0u));
        json_decref(r);
    }
}

/* A static finding fails the static stage; the feedback names the line. */
static void static_finding_names_the_line(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "static", "status", "begin"));
    msg(&f, json_pack("{s:s, s:{s:s, s:i, s:s, s:s, s:s}}", "type", "finding", "finding", "type", "torch_call",
                      "line", 17, "name", "torch.matmul", "message", "torch.matmul() inside forward", "stage",
                      "static"));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "static", "status", "fail", "detail",
                      "1 reward-hack policy finding(s)"));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    KG_CHECK_NEAR(reward(r), 0.0, 0);
    KG_CHECK_STR(stage_status(r, "static"), "fail");
    KG_CHECK(strstr(feedback(r), "candidate.py line 17") != NULL);
    json_decref(r);
}

/* The policy's "findings" map: warn lists the finding in warnings[] without changing the verdict; off drops it. */
/* A correct run with a state_cache and a try_except finding. */
static void two_findings(fake *f)
{
    fake_init(f);
    stage_ok(f, "parse");
    stage_ok(f, "static");
    stage_ok(f, "compile");
    tiny_ok(f, 1);
    msg(f, json_pack("{s:s, s:{s:s, s:i, s:s}}", "type", "finding", "finding", "type", "state_cache", "line", 3,
                     "message", "global"));
    msg(f, json_pack("{s:s, s:{s:s, s:i, s:s}}", "type", "finding", "finding", "type", "try_except", "line", 9,
                     "message", "try"));
    msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(f, "base", "ran", 0);
    msg(f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(f, json_pack("{s:s}", "type", "done"));
}

static void policy_severity_warn_and_off(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    o.policy_json = "{\"findings\": {\"state_cache\": \"warn\", \"try_except\": \"off\"}}";
    fake f;
    two_findings(&f);
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_array_size(json_object_get(r, "hacks")) == 0);
    KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 1);
    json_decref(r);

    /* Parsed once (opts.policy, as the CLI sets it): the evaluation reads the object, not the text again. */
    json_t *parsed = json_loads(o.policy_json, 0, NULL);
    o.policy = parsed;
    o.policy_json = "not JSON: must not be parsed again";
    json_t *got = NULL;
    kg_error err;
    KG_CHECK(kg_eval_policy(&o, &got, &err) == KG_OK && got == parsed);
    json_decref(got);
    two_findings(&f);
    r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 1);
    json_decref(r);
    o.policy = NULL; /* without it, the text is parsed, and a bad one is refused */
    KG_CHECK(kg_eval_policy(&o, &got, &err) == KG_ERR_INVALID && got == NULL);
    json_decref(parsed);
}

/* The runtime witness of host compute has a type of its own (host_values), so a policy that demotes the static
 * layer's host_compute to a warning (tests/fixtures/hacks/runtime_only.json) still makes the runtime's a hack, and
 * the feedback says what it means rather than the generic line. */
static void host_values_has_its_own_severity_and_rule(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    o.policy_json = "{\"findings\": {\"host_compute\": \"warn\", \"host_values\": \"hack\"}}";
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    msg(&f, json_pack("{s:s, s:{s:s, s:i, s:s}}", "type", "finding", "finding", "type", "host_compute", "line", 12,
                      "message", "x.tolist() turns a tensor into Python values"));
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:{s:{s:i}}}}", "type", "finding", "finding", "type",
                      "host_values", "stage", "tiny_run", "variant", "tiny", "message",
                      "tensor data became Python values inside forward (tolist)", "evidence", "conversions",
                      "tolist", 1));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    KG_CHECK(json_array_size(json_object_get(r, "hacks")) == 1);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                 "host_values");
    KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 1);
    KG_CHECK(strstr(feedback(r), "turning tensor data into Python values") != NULL);
    json_decref(r);
}

/* A launch the runner refused (guards._refuse): the forward raised LaunchArgumentError in the tiny run, which alone
 * is a runtime error (a string where no constant belongs: the mistake the GPU launcher reports too); with the
 * launch_argument finding beside it (a list, a module, a function: code for the interpreter's kernel body) the
 * verdict is hacked, reward the hack penalty, and the feedback says what a kernel takes. */
static void refused_launch_argument_is_hacked(void)
{
    for (int with_finding = 0; with_finding < 2; with_finding++) {
        kg_eval_options o;
        kg_eval_options_default(&o, "cpu");
        json_t *finding = with_finding ? json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:b}}}", "type",
                                                   "finding", "finding", "type", "launch_argument", "stage", "tiny_run",
                                                   "variant", "tiny", "message", "k: the parameter L was given list",
                                                   "evidence", "kernel", "k", "parameter", "L", "class", "list",
                                                   "constexpr", 0)
                                       : NULL;
        json_t *r = tiny_run_failure(&o, "raised",
                                     json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:s}]}", "type", "LaunchArgumentError",
                                               "message", "k: the parameter L was given list", "frames", "file", CAND,
                                               "line", 24, "function", "forward", "code", "k[(1,)](box, 1)"),
                                     finding);
        KG_CHECK_STR(verdict(r), with_finding ? "hacked" : "runtime_error");
        if (with_finding) {
            KG_CHECK_NEAR(reward(r), 0.0, 0);
            KG_CHECK(strstr(feedback(r), "an argument Triton's GPU launcher does not take") != NULL);
        }
        KG_CHECK(strstr(feedback(r), "the parameter L was given list") != NULL);
        json_decref(r);
    }
}

/* Lines without the job's nonce are dropped and reported; the genuine ones lose the nonce. */
static void forged_messages_are_dropped(void)
{
    json_t *m = json_array();
    json_array_append_new(m, json_pack("{s:s, s:s}", "type", "hello", "nonce", "abc"));
    json_array_append_new(m, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status",
                                       "ok", "nonce", "wrong"));
    json_array_append_new(m, json_pack("{s:s}", "type", "done"));
    size_t dropped = 0;
    KG_CHECK(kg_eval_screen_messages(m, "abc", &dropped) == KG_OK && dropped == 2);
    KG_CHECK(json_array_size(m) == 2);
    KG_CHECK(json_object_get(json_array_get(m, 0), "nonce") == NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(m, 1), "type")), "forged");
    KG_CHECK(kg_eval_screen_messages(m, NULL, &dropped) == KG_OK && dropped == 0);
    json_decref(m);

    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:I, s:s}", "type", "forged", "count", (json_int_t)3, "sample", "{}"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                 "protocol_forgery");
    json_decref(r);

    char a[33], b[33];
    KG_CHECK(kg_eval_make_nonce(a, NULL) == KG_OK && kg_eval_make_nonce(b, NULL) == KG_OK);
    KG_CHECK(strlen(a) == 32 && strcmp(a, b) != 0);
}

/* GPU: a median below bytes / peak bandwidth is physically impossible. */
static void faster_than_physics(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    for (int fast = 0; fast < 2; fast++) {
        fake f;
        fake_init(&f);
        stage_ok(&f, "parse");
        stage_ok(&f, "static");
        stage_ok(&f, "compile");
        tiny_ok(&f, 1);
        msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
        variant(&f, "base", "ran", 0);
        msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail",
                          ""));
        /* 1 GiB on an H100 (3.35 TB/s) takes at least 0.32 ms. */
        double t = fast ? 0.05 : 0.5;
        msg(&f, json_pack("{s:s, s:[f,f,f], s:[f,f,f], s:s, s:f}", "type", "timing", "reference_ms", 1.0, 1.0, 1.0,
                          "candidate_ms", t, t, t, "gpu", "NVIDIA H100 80GB HBM3", "min_bytes", 1073741824.0));
        msg(&f, json_pack("{s:s}", "type", "done"));
        json_t *r = build(&f, &o);
        KG_CHECK_STR(verdict(r), fast ? "hacked" : "correct");
        json_decref(r);
    }
    /* A small GEMM (L2-resident: no bytes floor) with 2*4096^3 FLOPs needs >= 0.139 ms at 989 TFLOP/s. */
    for (int fast = 0; fast < 2; fast++) {
        fake f;
        fake_init(&f);
        stage_ok(&f, "parse");
        stage_ok(&f, "static");
        stage_ok(&f, "compile");
        tiny_ok(&f, 1);
        msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
        variant(&f, "base", "ran", 0);
        msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail",
                          ""));
        double t = fast ? 0.01 : 0.2;
        msg(&f, json_pack("{s:s, s:[f,f,f], s:[f,f,f], s:s, s:f, s:f}", "type", "timing", "reference_ms", 1.0, 1.0,
                          1.0, "candidate_ms", t, t, t, "gpu", "NVIDIA H200", "min_bytes", 201326592.0, "flops",
                          137438953472.0));
        msg(&f, json_pack("{s:s}", "type", "done"));
        json_t *r = build(&f, &o);
        KG_CHECK_STR(verdict(r), fast ? "hacked" : "correct");
        json_decref(r);
    }
}

/* A write outside the candidate's tensors (the judge's canaries, transport.InPlace) is a hack whose
 * evidence keeps the byte offset, and the feedback says what to do instead. */
static void out_of_bounds_write_is_hacked(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:{s:[{s:i, s:i, s:i, s:i}]}}}", "type", "finding", "finding",
                      "type", "out_of_bounds_write", "stage", "tiny_run", "variant", "tiny", "message",
                      "the forward wrote outside input 0 (12 byte(s) changed, the first at byte 64 from its start, "
                      "past its end)", "evidence", "writes", "input", 0, "offset", 64, "bytes", 12, "block_offset",
                      4160));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    const json_t *h = json_array_get(json_object_get(r, "hacks"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "out_of_bounds_write");
    KG_CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(json_object_get(h, "evidence"),
                                                                               "writes"), 0), "offset")) == 64);
    KG_CHECK(strstr(feedback(r), "writing outside your tensors") != NULL);
    KG_CHECK(strstr(feedback(r), "mask every store") != NULL);
    json_decref(r);
}

/* A correct candidate timed on a device that can set L2 aside for persisting lines, with the runner's facts
 * about its persisting-L2 reset ({max_bytes, reset}). */
static json_t *timed_with_l2(const char *policy, double max_bytes, const char *reset)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    o.policy_json = policy;
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s, s:[f,f,f], s:[f,f,f], s:s, s:f, s:{s:{s:f, s:s}, s:{s:f, s:s}}}", "type", "timing",
                      "reference_ms", 1.0, 1.0, 1.0, "candidate_ms", 0.5, 0.5, 0.5, "gpu", "NVIDIA H200",
                      "min_bytes", 1048576.0, "l2_persisting", "judge", "max_bytes", max_bytes, "reset", "ok",
                      "runner", "max_bytes", max_bytes, "reset", reset));
    msg(&f, json_pack("{s:s}", "type", "done"));
    return build(&f, &o);
}

/* kgym's decision on a missing persisting-L2 reset in the runner: a warning (guard_error) where the device
 * can set L2 aside, nothing where it cannot or where the reset ran; fail-closed under a policy that makes
 * guard_error a hack. */
static void missing_l2_reset_is_a_warning(void)
{
    json_t *r = timed_with_l2(NULL, 31457280.0, "ShareError: the CUDA driver has no persisting-L2 control");
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_array_size(json_object_get(r, "hacks")) == 0);
    const json_t *w = json_array_get(json_object_get(r, "warnings"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(w, "type")), "guard_error");
    const char *text = json_string_value(json_object_get(w, "message"));
    KG_CHECK(text && strstr(text, "persisting L2") != NULL);
    KG_CHECK(text && strstr(text, "no persisting-L2 control") != NULL);
    const json_t *l2 = json_object_get(json_object_get(r, "timing"), "l2_persisting");
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(l2, "judge"), "reset")), "ok");
    json_decref(r);
    r = timed_with_l2(NULL, 31457280.0, "ok");
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 0);
    json_decref(r);
    r = timed_with_l2(NULL, 0.0, "not_needed");  /* before sm_80, or MIG: nothing can persist */
    KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 0);
    json_decref(r);
    r = timed_with_l2("{\"findings\": {\"guard_error\": \"hack\"}}", 31457280.0, "ShareError: failed");
    KG_CHECK_STR(verdict(r), "hacked");
    json_decref(r);
}

/* The sandbox report and the task's degeneracy facts are carried into the result. */
static void sandbox_and_degenerate_facts(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    msg(&f, json_pack("{s:s, s:[s], s:[s]}", "type", "sandbox", "active", "seccomp", "warnings", "no landlock"));
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    msg(&f, json_pack("{s:s, s:{s:b, s:b}}", "type", "task_facts", "facts", "input_independent", 1, "zero_output",
                      0));
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK_STR(json_string_value(json_array_get(json_object_get(json_object_get(r, "sandbox"), "active"), 0)),
                 "seccomp");
    const json_t *d = json_object_get(r, "degenerate");
    KG_CHECK(json_array_size(d) == 1);
    KG_CHECK_STR(json_string_value(json_array_get(d, 0)), "input_independent");
    json_decref(r);
}

/* The compile cache's counts and reasons (judge/kernelcache.py, the last passed stage's data) become the result's
 * compile_cache: numbers only for the counts, at most 4 reasons of at most 300 bytes, strings only. */
static void compile_cache_counts_and_reasons(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    char long_reason[400];
    memset(long_reason, 'x', sizeof long_reason - 1);
    long_reason[sizeof long_reason - 1] = '\0';
    msg(&f, json_pack("{s:s, s:s, s:s, s:s, s:{s:{s:i, s:i, s:i, s:s, s:[s, i, s, s, s, s]}}}", "type", "stage",
                      "stage", "compile", "status", "ok", "detail", "", "data", "kernel_cache_use", "requests", 3,
                      "failed", 2, "hits", 1, "compiled", "two", "reasons", "the worker ended with status 256", 7,
                      long_reason, "c", "d", "e"));
    json_t *r = build(&f, &o);
    const json_t *cc = json_object_get(r, "compile_cache");
    KG_CHECK(json_is_object(cc));
    KG_CHECK(json_number_value(json_object_get(cc, "requests")) == 3.0);
    KG_CHECK(json_number_value(json_object_get(cc, "failed")) == 2.0);
    KG_CHECK(json_object_get(cc, "compiled") == NULL); /* not a number: left out */
    const json_t *why = json_object_get(cc, "reasons");
    KG_CHECK(json_array_size(why) == 4);
    KG_CHECK_STR(json_string_value(json_array_get(why, 0)), "the worker ended with status 256");
    KG_CHECK(json_string_length(json_array_get(why, 1)) == 300);
    KG_CHECK_STR(json_string_value(json_array_get(why, 3)), "d");
    json_decref(r);
    /* No request: null. */
    fake_init(&f);
    stage_ok(&f, "parse");
    r = build(&f, &o);
    KG_CHECK(json_is_null(json_object_get(r, "compile_cache")));
    json_decref(r);
}

static void wrong_on_timed_inputs_is_incorrect(void)
{
    /* The timing stage re-ran a mismatching timed call untimed and it was wrong there too: a plain bug
     * reported as a failed variant, so the verdict is incorrect, not hacked. */
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "begin"));
    variant(&f, "timed_inputs", "ran", 5);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "incorrect");
    KG_CHECK_NEAR(reward(r), 0.7, 1e-12);
    KG_CHECK(json_array_size(json_object_get(r, "hacks")) == 0);
    KG_CHECK(strstr(feedback(r), "timed_inputs") != NULL);
    json_decref(r);
}

/* The runner's end as kgym's own facts (eval.c adds them after the nonce screening): SIGSYS from its seccomp
 * filter is sandbox_violation, non-answers on the judge's socket protocol_forgery; both are hacks, reward 0.
 * The warnings of the process that forked the runner (a refused PID namespace) join the runner's own. */
static void runner_end_facts_are_hacks(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    const char *kinds[] = {"sandbox_violation", "forged"};
    const char *want[] = {"sandbox_violation", "protocol_forgery"};
    for (int k = 0; k < 2; k++) {
        fake f;
        fake_init(&f);
        stage_ok(&f, "parse");
        stage_ok(&f, "static");
        msg(&f, json_pack("{s:s, s:[s], s:[s]}", "type", "sandbox", "active", "seccomp: ...", "warnings",
                          "IPC namespace not created (Operation not permitted)"));
        msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "compile", "status", "begin"));
        f.rep.end = KG_END_SIGNAL;
        f.rep.signal = 31;
        f.rep.runner_ended = 1;
        f.rep.runner_notes = json_pack("[s]", "pid namespace not created (Operation not permitted)");
        json_array_append_new(f.rep.messages, k == 0 ? json_pack("{s:s, s:s}", "type", kinds[k], "stage", "compile")
                                                       : json_pack("{s:s, s:i, s:s}", "type", kinds[k], "count", 1,
                                                                   "sample", "x"));
        json_t *r = build(&f, &o);
        KG_CHECK_STR(verdict(r), "hacked");
        KG_CHECK_NEAR(reward(r), 0.0, 0);
        KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                     want[k]);
        const json_t *w = json_object_get(json_object_get(r, "sandbox"), "warnings");
        KG_CHECK(json_array_size(w) == 2);
        KG_CHECK(strstr(json_string_value(json_array_get(w, 1)) ?: "", "pid namespace") != NULL);
        json_decref(r);
    }
}

/* Correctness facts up to a passed correctness stage; the caller adds what comes after. */
static void passed_correctness(fake *f)
{
    stage_ok(f, "parse");
    stage_ok(f, "static");
    stage_ok(f, "compile");
    tiny_ok(f, 1);
    msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(f, "base", "ran", 0);
    variant(f, "large_values", "ran", 0);
}

/* A task whose reference is zero (or the same) on every variant: every variant passing proves nothing, so the
 * correctness stage fails, the verdict is incorrect and the feedback blames the task; the same run with a
 * variant that repaired the degeneracy is correct. */
static void degenerate_everywhere_is_not_correct(void)
{
    const char *kinds[] = {"zero_everywhere", "constant_everywhere", "input_independent_everywhere", NULL};
    for (int k = 0; k < 4; k++) {
        kg_eval_options o;
        kg_eval_options_default(&o, "cpu");
        fake f;
        fake_init(&f);
        passed_correctness(&f);
        json_t *facts = json_pack("{s:[s,s], s:b, s:b, s:b, s:i, s:i, s:[], s:[], s:[], s:[s]}", "checked", "base",
                                  "large_values", "zero_everywhere", k == 0, "constant_everywhere", k == 1,
                                  "input_independent_everywhere", k == 2, "compared", 1, "compared_same_model", 3,
                                  "nonzero_on", "varies_on", "input_dependent_on", "not_an_input_on", "base");
        if (k == 3) { /* repaired: large_values made the reference non-zero and input-dependent */
            json_array_append_new(json_object_get(facts, "nonzero_on"), json_string("large_values"));
            json_array_append_new(json_object_get(facts, "input_dependent_on"), json_string("large_values"));
        }
        msg(&f, json_pack("{s:s, s:o}", "type", "degeneracy", "facts", facts));
        /* Asked before timing: a degenerate task is not timed (GPU: a kernel that need not read its inputs
         * would be beneath the speed-of-light floor and called a hack). */
        char why[1024];
        kg_test_complete_facts(f.rep.messages, 0);
        KG_CHECK(kg_eval_correctness_passed(&o, f.rep.messages, NULL, why, sizeof why) == !kinds[k]);
        KG_CHECK(!kinds[k] || strstr(why, "the task is degenerate") != NULL);
        KG_CHECK(k != 2 || strstr(why, "does not depend on the input values") != NULL);
        KG_CHECK(k != 2 || strstr(why, "3 pairs of variants") != NULL);
        msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail",
                          ""));
        msg(&f, json_pack("{s:s}", "type", "done"));
        json_t *r = build(&f, &o);
        const json_t *d = json_object_get(r, "degeneracy");
        KG_CHECK(json_integer_value(json_object_get(d, "variants_checked")) == 2);
        if (kinds[k]) {
            KG_CHECK_STR(verdict(r), "incorrect");
            KG_CHECK_STR(stage_status(r, "correctness"), "fail");
            KG_CHECK(json_is_true(json_object_get(d, kinds[k])));
            KG_CHECK(strstr(feedback(r), "the task is degenerate") != NULL);
            KG_CHECK(strstr(feedback(r), "not of your kernel") != NULL);
            KG_CHECK(reward(r) < 1.0);
        } else {
            KG_CHECK_STR(verdict(r), "correct");
            KG_CHECK_STR(json_string_value(json_array_get(json_object_get(d, "nonzero_on"), 0)), "large_values");
        }
        json_decref(r);
    }
}

/* kgym's census found processes the candidate left running when the judge was done: the hack stray_process,
 * whatever else passed, with the names as evidence. */
static void processes_left_running_are_a_hack(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda");
    fake f;
    fake_init(&f);
    passed_correctness(&f);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    msg(&f, json_pack("{s:s, s:i, s:s}", "type", "left_running", "count", 1, "names", "kgatk-survivor"));
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    const json_t *h = json_array_get(json_object_get(r, "hacks"), 0);
    KG_CHECK_STR(json_string_value(json_object_get(h, "type")), "stray_process");
    KG_CHECK_STR(json_string_value(json_object_get(json_object_get(h, "evidence"), "names")), "kgatk-survivor");
    KG_CHECK(strstr(feedback(r), "leaving processes running") != NULL);
    KG_CHECK(reward(r) == 0.0);
    json_decref(r);
}

/* The process killed outside every stage (stuck in the checks after correctness), or exiting there without
 * finishing: no stage failed, but the evaluation is not complete and must not be correct. */
static void ended_between_stages_is_not_correct(void)
{
    for (int k = 0; k < 2; k++) {
        kg_eval_options o;
        kg_eval_options_default(&o, "cpu");
        fake f;
        fake_init(&f);
        passed_correctness(&f);
        msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail",
                          ""));
        snprintf(f.rep.stage, sizeof f.rep.stage, "correctness");
        f.rep.outside_stage = 1;
        f.rep.end = k == 0 ? KG_END_TIMEOUT : KG_END_EXIT;
        f.rep.stage_limit_s = 60;
        f.rep.exit_code = 3;
        json_t *r = build(&f, &o);
        KG_CHECK_STR(verdict(r), k == 0 ? "timeout" : "runtime_error");
        KG_CHECK_STR(stage_status(r, "correctness"), "fail");
        KG_CHECK(reward(r) < 1.0);
        json_decref(r);
    }
    /* Killed before its first stage. */
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    f.rep.end = KG_END_TIMEOUT;
    f.rep.outside_stage = 1;
    f.rep.stage_limit_s = 60;
    json_t *r = build(&f, &o);
    KG_CHECK_STR(verdict(r), "timeout");
    KG_CHECK_STR(stage_status(r, "parse"), "fail");
    json_decref(r);
}


/* ---- fail closed: a `correct` verdict needs every fact (result.c kg_eval_unjudged) ---- */

/* An honest run with every fact a pass needs: base and size_odd compared, on a GPU timed and profiled. */
static void passing_run(fake *f, int gpu)
{
    stage_ok(f, "parse");
    stage_ok(f, "static");
    stage_ok(f, "compile");
    tiny_ok(f, 1);
    msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(f, "base", "ran", 0);
    variant(f, "size_odd", "ran", 0);
    msg(f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    if (gpu) {
        msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "begin"));
        msg(f, json_pack("{s:s, s:[f,f,f], s:[f,f,f], s:s}", "type", "timing", "reference_ms", 2.0, 2.0, 2.0,
                         "candidate_ms", 1.0, 1.0, 1.0, "gpu", "NVIDIA H200"));
        msg(f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "timing", "status", "ok", "detail", ""));
    }
    msg(f, json_pack("{s:s}", "type", "done"));
    kg_test_complete_facts(f->rep.messages, gpu);
}

static const char *first_unjudged(const json_t *r)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(r, "unjudged"), 0), "fact")) ?: "";
}

static const char *first_reason(const json_t *r)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(r, "unjudged"), 0), "reason")) ?: "";
}

/* Not correct, with the fact named first in `unjudged`; the reward stays below full credit. */
static void check_unjudged(const json_t *r, const char *fact, const char *reason_part)
{
    KG_CHECK_STR(verdict(r), "runtime_error");
    KG_CHECK_STR(first_unjudged(r), fact);
    KG_CHECK(strstr(first_reason(r), reason_part) != NULL);
    KG_CHECK(reward(r) < 1.0);
    KG_CHECK(!json_is_true(json_object_get(json_object_get(r, "correctness"), "passed")));
    KG_CHECK(strstr(feedback(r), "not counted as correct") != NULL || strstr(feedback(r), "called again") != NULL);
}

/* A passing run (on a GPU when `gpu`) whose every `type` message is dropped: not correct, `fact` unjudged with a
 * reason naming `reason_part`. */
static void check_unjudged_without(kg_eval_options *o, int gpu, const char *type, const char *fact,
                                   const char *reason_part)
{
    fake f;
    fake_init(&f);
    passing_run(&f, gpu);
    KG_CHECK(kg_test_drop_messages(f.rep.messages, type) == 1);
    json_t *r = build_raw(&f, o);
    check_unjudged(r, fact, reason_part);
    json_decref(r);
}

/* The complete run passes on both devices, with nothing unjudged: the baseline every test below takes one fact
 * away from. */
static void complete_facts_are_correct(void)
{
    for (int gpu = 0; gpu <= 1; gpu++) {
        kg_eval_options o;
        kg_eval_options_default(&o, gpu ? "cuda:0" : "cpu");
        fake f;
        fake_init(&f);
        passing_run(&f, gpu);
        json_t *r = build_raw(&f, &o);
        KG_CHECK_STR(verdict(r), "correct");
        KG_CHECK(json_array_size(json_object_get(r, "unjudged")) == 0);
        KG_CHECK(json_array_size(json_object_get(json_object_get(r, "sandbox"), "missing")) == 0);
        json_decref(r);
    }
}

/* The judge planned a variant it never reported (a comparison skipped by a bug, a message lost), or announced
 * no plan at all: the pass is not given. */
static void missing_variant_is_not_correct(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    json_array_append_new(json_object_get((json_t *)kg_test_find(f.rep.messages, "variant_plan"), "variants"),
                          json_string("signed"));
    json_t *r = build_raw(&f, &o);
    check_unjudged(r, "variants", "variant signed was planned");
    json_decref(r);

    check_unjudged_without(&o, 0, "variant_plan", "variant_plan", "did not announce");

    /* The degeneracy facts never reported (a zero or constant output might pass every variant). */
    check_unjudged_without(&o, 0, "degeneracy", "degeneracy", "degenerate");
}

/* A planned variant the judge could not run faithfully for the task's sake, not the candidate's (its inputs could not
 * keep the task's structure: tasks.StructureNotKept; a parameters variant whose model has no constant parameter at
 * its sizes) is reported "skipped" with the reason, as a variant whose reference failed is: reported, not a
 * missing fact, so an honest candidate still passes on the others (red team, twenty-fifth session: it was unjudged,
 * a false runtime_error).  Every variant skipped is still no pass (CORRECTNESS_NONE_PASSED). */
static void skipped_variant_is_reported(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "ran", 0);
    variant(&f, "signed", "skipped", 0);
    variant(&f, "size_odd", "ran", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    kg_test_complete_facts(f.rep.messages, 0);
    KG_CHECK(json_array_size(json_object_get(kg_test_find(f.rep.messages, "variant_plan"), "variants")) == 3);
    json_t *r = build_raw(&f, &o);
    KG_CHECK_STR(json_string_value(json_object_get(r, "verdict")), "correct");
    KG_CHECK(json_array_size(json_object_get(r, "unjudged")) == 0);
    json_t *vs = json_object_get(json_object_get(r, "correctness"), "variants");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(vs, 1), "status")), "skipped");
    json_decref(r);

    /* Nothing but skipped variants: nothing passed, no pass. */
    fake_init(&f);
    stage_ok(&f, "parse");
    stage_ok(&f, "static");
    stage_ok(&f, "compile");
    tiny_ok(&f, 1);
    msg(&f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
    variant(&f, "base", "skipped", 0);
    variant(&f, "size_odd", "skipped", 0);
    msg(&f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail", ""));
    msg(&f, json_pack("{s:s}", "type", "done"));
    kg_test_complete_facts(f.rep.messages, 0);
    r = build_raw(&f, &o);
    KG_CHECK(strcmp(json_string_value(json_object_get(r, "verdict")) ?: "", "correct") != 0);
    json_decref(r);
}

/* The repeat checks of the base variant never reported: both unjudged. */
static void missing_repeat_checks_are_not_correct(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    KG_CHECK(kg_test_drop_messages(f.rep.messages, "repeat_checks") == 1);
    json_t *r = build_raw(&f, &o);
    check_unjudged(r, "cached_output", "never run");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "unjudged"), 1), "fact")),
                 "nondeterministic");
    json_decref(r);

    /* Only the first check decided (the third call was never made). */
    fake_init(&f);
    passing_run(&f, 0);
    json_object_set_new(json_object_get((json_t *)kg_test_find(f.rep.messages, "repeat_checks"), "checks"),
                        "nondeterministic", json_string("not_run"));
    r = build_raw(&f, &o);
    check_unjudged(r, "nondeterministic", "did not run to its decision");
    KG_CHECK(json_array_size(json_object_get(r, "unjudged")) == 1);
    json_decref(r);
}

/* The candidate raised on a repeat call of base (what the judge used to store as `second_call_error`, which
 * nothing read: a model that raises after its first call passed with both checks unjudged).  Now its own
 * exception is the error, frames cut to candidate.py, and the verdict runtime_error. */
static void raise_in_repeat_call_is_runtime_error(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    json_t *rc = (json_t *)kg_test_find(f.rep.messages, "repeat_checks");
    json_object_set_new(json_object_get(rc, "checks"), "cached_output", json_string("not_run"));
    json_object_set_new(json_object_get(rc, "checks"), "nondeterministic", json_string("not_run"));
    json_object_set_new(rc, "error", json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:s}, {s:s, s:i, s:s, s:s}]}", "type",
                                               "RuntimeError", "message", "only one call", "frames", "file",
                                               "/x/runner.py", "line", 3, "function", "call", "code", "m(x)", "file",
                                               CAND, "line", 30, "function", "forward", "code", "raise X"));
    json_object_set_new(rc, "raised_by", json_string("candidate"));
    json_t *r = build_raw(&f, &o);
    check_unjudged(r, "cached_output", "ModelNew raised on a repeat call");
    const json_t *e = json_object_get(r, "error");
    KG_CHECK_STR(json_string_value(json_object_get(e, "type")), "RuntimeError");
    KG_CHECK_STR(json_string_value(json_object_get(e, "stage")), "correctness");
    KG_CHECK(json_array_size(json_object_get(e, "frames")) == 1);
    KG_CHECK(json_object_get(json_array_get(json_object_get(r, "unjudged"), 0), "error") == NULL);
    KG_CHECK(strstr(feedback(r), "candidate.py line 30") != NULL);
    KG_CHECK(strstr(feedback(r), "every call") != NULL);
    json_decref(r);

    /* The judge's own work raised in the check (not the candidate): unjudged, no candidate error. */
    fake_init(&f);
    passing_run(&f, 0);
    rc = (json_t *)kg_test_find(f.rep.messages, "repeat_checks");
    json_object_set_new(json_object_get(rc, "checks"), "nondeterministic", json_string("not_run"));
    json_object_set_new(rc, "error", json_pack("{s:s, s:s}", "type", "ValueError", "message", "reference broke"));
    json_object_set_new(rc, "raised_by", json_string("judge"));
    r = build_raw(&f, &o);
    check_unjudged(r, "nondeterministic", "the judge's nondeterministic check");
    KG_CHECK(json_is_null(json_object_get(r, "error")));
    json_decref(r);
}

/* A check that raised (guard_error, `warn` by default: kgym's bug, never the candidate's hack) leaves what it
 * checks unjudged: not correct.  Only a policy that turns the finding off accepts that. */
static void check_that_raised_is_not_correct(void)
{
    for (int off = 0; off <= 1; off++) {
        kg_eval_options o;
        kg_eval_options_default(&o, "cpu");
        if (off)
            o.policy_json = "{\"findings\": {\"guard_error\": \"off\"}}";
        fake f;
        fake_init(&f);
        passing_run(&f, 0);
        msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s, s:s}}", "type", "finding", "finding", "type", "guard_error",
                          "stage", "correctness", "message", "a runtime check failed: TypeError: x", "source",
                          "runner"));
        json_t *r = build_raw(&f, &o);
        if (off) {
            KG_CHECK_STR(verdict(r), "correct");
        } else {
            check_unjudged(r, "checks", "a runtime check failed");
            KG_CHECK(json_array_size(json_object_get(r, "warnings")) == 1);
            KG_CHECK(json_array_size(json_object_get(r, "hacks")) == 0);
        }
        json_decref(r);
    }
}

/* GPU: timing asked for and no timed calls, or no profile: not correct.  --no-timing under the default coverage
 * floor leaves the floor unchecked (unjudged, with the way out); with --coverage-floor 0 too it passes. */
static void missing_timing_or_profile_on_gpu_is_not_correct(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    fake f;
    check_unjudged_without(&o, 1, "timing", "timing", "no timed calls");
    check_unjudged_without(&o, 1, "profile", "profile", "no profile");

    o.timing = 0;
    fake_init(&f);
    passing_run(&f, 1);
    kg_test_drop_messages(f.rep.messages, "timing");
    kg_test_drop_messages(f.rep.messages, "profile");
    json_t *r = build_raw(&f, &o);
    check_unjudged(r, "profile", "--coverage-floor 0");
    json_decref(r);
    o.coverage_floor = 0;
    fake_init(&f);
    passing_run(&f, 1);
    kg_test_drop_messages(f.rep.messages, "timing");
    kg_test_drop_messages(f.rep.messages, "profile");
    r = build_raw(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    const json_t *lim = json_object_get(r, "limits");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, 0), "code")), "not_timed");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, 1), "code")), "no_coverage_floor");
    json_decref(r);

    /* The CPU needs neither. */
    kg_eval_options c;
    kg_eval_options_default(&c, "cpu");
    fake_init(&f);
    passing_run(&f, 0);
    KG_CHECK(kg_test_find(f.rep.messages, "profile") == NULL);
    r = build_raw(&f, &c);
    KG_CHECK_STR(verdict(r), "correct");
    json_decref(r);
}

/* Appends a profile with `mine` of 1000 us in the candidate's own kernels, after dropping any other. */
static void profile_share(fake *f, double mine)
{
    kg_test_drop_messages(f->rep.messages, "profile");
    msg(f, json_pack("{s:s, s:i, s:f, s:f, s:i, s:i}", "type", "profile", "calls", 3, "total_device_us", 1000.0,
                     "candidate_device_us", mine, "kernel_count", 2, "candidate_kernel_count", 1));
}

/* On a GPU coverage decides by default: a correct run whose profile puts most device time outside the
 * candidate's kernels (the measured decoy: 11%) is low_coverage; half is enough (a memset of the output by
 * torch.zeros is not the candidate's); an emptied profile fails closed.  The CPU has no floor. */
static void coverage_floor_is_the_default_on_gpu(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cuda:0");
    KG_CHECK_NEAR(o.coverage_floor, 0.5, 0);
    const double mine[] = {110, 499, 500, 900, 0};
    const char *want[] = {"hacked", "hacked", "correct", "correct", "hacked"};
    for (size_t k = 0; k < sizeof mine / sizeof *mine; k++) {
        fake f;
        fake_init(&f);
        passing_run(&f, 1);
        if (mine[k] > 0) {
            profile_share(&f, mine[k]);
        } else {
            kg_test_drop_messages(f.rep.messages, "profile");
            msg(&f, json_pack("{s:s, s:i, s:f, s:f}", "type", "profile", "calls", 3, "total_device_us", 0.0,
                              "candidate_device_us", 0.0));
        }
        json_t *r = build_raw(&f, &o);
        KG_CHECK_STR(verdict(r), want[k]);
        if (!strcmp(want[k], "hacked"))
            KG_CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r, "hacks"), 0), "type")),
                         "low_coverage");
        json_decref(r);
    }
    kg_eval_options c;
    kg_eval_options_default(&c, "cpu");
    KG_CHECK_NEAR(c.coverage_floor, 0, 0);
}

/* Sets the sandbox report's protection codes to every required one but `without`. */
static void protections_without(fake *f, const char *without)
{
    json_t *sb = (json_t *)kg_test_find(f->rep.messages, "sandbox");
    json_t *codes = kg_test_all_protections();
    for (size_t i = json_array_size(codes); i-- > 0;)
        if (!strcmp(json_string_value(json_array_get(codes, i)), without))
            json_array_remove(codes, i);
    json_object_set_new(sb, "protections", codes);
}

/* A protection the kernel refused: not correct unless the operator allowed running without it, and then the
 * result says which (sandbox.waived, limits).  The CPU requires no_processes, a GPU (compilers) does not. */
static void refused_protection_is_not_correct(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    protections_without(&f, "landlock");
    json_t *r = build_raw(&f, &o);
    check_unjudged(r, "sandbox", "landlock");
    KG_CHECK_STR(json_string_value(json_array_get(json_object_get(json_object_get(r, "sandbox"), "missing"), 0)),
                 "landlock");
    json_decref(r);

    /* A forged or unknown code grants nothing. */
    fake_init(&f);
    passing_run(&f, 0);
    protections_without(&f, "seccomp");
    json_array_append_new(json_object_get((json_t *)kg_test_find(f.rep.messages, "sandbox"), "protections"),
                          json_string("seccomp2"));
    r = build_raw(&f, &o);
    check_unjudged(r, "sandbox", "seccomp");
    json_decref(r);

    const char *allow[] = {"landlock", "pid_namespace,landlock", "all"};
    for (size_t k = 0; k < 3; k++) {
        o.allow_unprotected = allow[k];
        fake_init(&f);
        passing_run(&f, 0);
        protections_without(&f, "landlock");
        r = build_raw(&f, &o);
        KG_CHECK_STR(verdict(r), "correct");
        KG_CHECK_STR(json_string_value(json_array_get(json_object_get(json_object_get(r, "sandbox"), "waived"), 0)),
                     "landlock");
        const json_t *lim = json_object_get(r, "limits");
        KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, json_array_size(lim) - 1), "code")),
                     "protections_waived");
        json_decref(r);
    }
    o.allow_unprotected = "pid_namespace"; /* another protection allowed: landlock is still required */
    fake_init(&f);
    passing_run(&f, 0);
    protections_without(&f, "landlock");
    r = build_raw(&f, &o);
    check_unjudged(r, "sandbox", "landlock");
    json_decref(r);
    o.allow_unprotected = NULL;
    o.sandbox = 0; /* --no-sandbox: every protection may be missing */
    fake_init(&f);
    passing_run(&f, 0);
    json_object_set_new((json_t *)kg_test_find(f.rep.messages, "sandbox"), "protections", json_array());
    r = build_raw(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_array_size(json_object_get(json_object_get(r, "sandbox"), "waived")) > 10);
    json_decref(r);
    /* No sandbox report at all. */
    kg_eval_options_default(&o, "cpu");
    fake_init(&f);
    passing_run(&f, 0);
    kg_test_drop_messages(f.rep.messages, "sandbox");
    r = build_raw(&f, &o);
    check_unjudged(r, "sandbox", "report is missing");
    json_decref(r);

    for (int gpu = 0; gpu <= 1; gpu++) {
        kg_eval_options_default(&o, gpu ? "cuda:0" : "cpu");
        fake_init(&f);
        passing_run(&f, gpu);
        protections_without(&f, "no_processes");
        r = build_raw(&f, &o);
        KG_CHECK_STR(verdict(r), gpu ? "correct" : "runtime_error");
        json_decref(r);
    }

    kg_error e;
    KG_CHECK(kg_eval_check_protection_list("landlock,seccomp", &e) == KG_OK);
    KG_CHECK(kg_eval_check_protection_list("all", &e) == KG_OK);
    KG_CHECK(kg_eval_check_protection_list("landlock,selinux", &e) == KG_ERR_INVALID);
    KG_CHECK(strstr(e.message, "selinux") != NULL && strstr(e.message, "judge_not_dumpable") != NULL);
    KG_CHECK(kg_eval_check_protection_list("", &e) == KG_ERR_INVALID);
}

/* The task's randomness: reported none or dropout-as-identity passes (the latter said in the result and the
 * feedback); unreported or unknown does not. */
static void task_randomness_is_a_fact(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    const char *handling[] = {"dropout_as_identity", "unknown", NULL};
    for (size_t k = 0; k < 3; k++) {
        fake f;
        fake_init(&f);
        passing_run(&f, 0);
        kg_test_drop_messages(f.rep.messages, "task_mode");
        if (handling[k])
            msg(&f, json_pack("{s:s, s:s, s:[s], s:s}", "type", "task_mode", "handling", handling[k], "modules",
                              "drop", "reason", "the reference could not be run"));
        json_t *r = build_raw(&f, &o);
        if (k == 0) {
            KG_CHECK_STR(verdict(r), "correct");
            KG_CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(r, "task"), "randomness"),
                                                           "handling")),
                         "dropout_as_identity");
            KG_CHECK(strstr(feedback(r), "dropout is the identity") != NULL);
            KG_CHECK(json_is_false(json_object_get(json_object_get(json_object_get(r, "task"), "randomness"), "cached")));
        } else {
            check_unjudged(r, "task_randomness", k == 1 ? "unknown" : "did not report");
        }
        json_decref(r);
    }
    /* Whether the mode came from an earlier evaluation of the task is kgym's own record (eval.c's task_modes, set by
     * kg_eval_run): a judge saying so is not taken. */
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    kg_test_drop_messages(f.rep.messages, "task_mode");
    msg(&f, json_pack("{s:s, s:s, s:[], s:s, s:b}", "type", "task_mode", "handling", "none", "modules", "reason", "",
                      "cached", 1));
    json_t *r = build_raw(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    KG_CHECK(json_is_false(json_object_get(json_object_get(json_object_get(r, "task"), "randomness"), "cached")));
    json_decref(r);
}

/* On the CPU every result says what its verdict cannot see; a shrunk task says so too. */
static void cpu_results_state_their_limits(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    json_object_set_new((json_t *)kg_test_find(f.rep.messages, "variant_plan"), "shrunk", json_true());
    json_t *r = build_raw(&f, &o);
    KG_CHECK_STR(verdict(r), "correct");
    const json_t *lim = json_object_get(r, "limits");
    KG_CHECK(json_array_size(lim) == 3);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, 0), "code")), "interpreter_serial");
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, 1), "code")), "shrunk_sizes");
    KG_CHECK(strstr(json_string_value(json_object_get(json_array_get(lim, 1), "text")), "65536") != NULL);
    KG_CHECK_STR(json_string_value(json_object_get(json_array_get(lim, 2), "code")), "not_timed");
    json_decref(r);
}

/* Runner findings only add: one of a type kgym does not know, reported by the runner, is a hack (never dropped). */
static void runner_findings_only_add(void)
{
    kg_eval_options o;
    kg_eval_options_default(&o, "cpu");
    fake f;
    fake_init(&f);
    passing_run(&f, 0);
    msg(&f, json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "finding", "finding", "type", "made_up", "message", "x",
                      "source", "runner"));
    json_t *r = build_raw(&f, &o);
    KG_CHECK_STR(verdict(r), "hacked");
    json_decref(r);
}

/* Allocation failures, in the manner of SQLite's fault-injection tests: jansson's Nth allocation fails, for
 * every N that the build of a result makes, over several kinds of report.  Each run either gives exactly the
 * result of the run without failures or KG_ERR_NOMEM and no result: never a partial result, never another
 * verdict (a finding or an unjudged fact lost to memory must not turn into "correct").  ASan checks that no
 * run leaks or touches freed memory. */
/* The reports: a passing run (CPU and GPU), two findings under a policy read from its text, a variant that
 * raised (frames, an error), a forged line and processes left running, a stage that never ended. */
static void fault_report(fake *f, int kind)
{
    if (kind != 2)
        fake_init(f); /* two_findings starts its own */
    switch (kind) {
    case 0:
    case 1:
        passing_run(f, kind);
        break;
    case 2:
        two_findings(f);
        kg_test_complete_facts(f->rep.messages, 0);
        break;
    case 3:
        stage_ok(f, "parse");
        stage_ok(f, "static");
        stage_ok(f, "compile");
        tiny_ok(f, 1);
        msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "begin"));
        variant(f, "base", "ran", 0);
        variant(f, "size_odd", "candidate_raised", 0);
        variant(f, "big", "ran", 3);
        msg(f, json_pack("{s:s, s:s, s:s, s:s}", "type", "stage", "stage", "correctness", "status", "ok", "detail",
                         ""));
        msg(f, json_pack("{s:s}", "type", "done"));
        kg_test_complete_facts(f->rep.messages, 0);
        break;
    case 4:
        passing_run(f, 0);
        msg(f, json_pack("{s:s, s:i, s:s}", "type", "forged", "count", 2, "sample", "{\"type\": \"done\"}"));
        msg(f, json_pack("{s:s, s:i, s:s}", "type", "left_running", "count", 1, "names", "sleep"));
        break;
    default:
        stage_ok(f, "parse");
        msg(f, json_pack("{s:s, s:s, s:s}", "type", "stage", "stage", "static", "status", "begin"));
        f->rep.end = KG_END_TIMEOUT;
        f->rep.stage_limit_s = 30;
        f->rep.wall_ms = 31000;
        snprintf(f->rep.stage, sizeof f->rep.stage, "static");
        break;
    }
}

/* One build under the hook; *dump is the result's text (sorted keys) or NULL. */
static int fault_build(int kind, long fail_at, char **dump)
{
    kg_eval_options o;
    kg_eval_options_default(&o, kind == 1 ? "cuda:0" : "cpu");
    if (kind == 2)
        o.policy_json = "{\"findings\": {\"state_cache\": \"warn\", \"try_except\": \"off\"}}";
    fake f;
    fault_report(&f, kind);
    kg_eval_request req = {.task = &task, .response = "code", .response_len = 4, .candidate_name = "k.py"};
    json_t *ex = json_pack("{s:s, s:s, s:f, s:s}", "name", "extract", "status", "ok", "ms", 0.1, "detail", "raw");
    json_t *r = NULL;
    kg_error err;
    kg_error_clear(&err);
    kg_fault_arm(fail_at);
    int rc = kg_eval_build_result(&o, &req, &f.rep, CAND, ex, &r, &err);
    kg_fault_disarm();
    *dump = r ? json_dumps(r, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    if (rc != KG_OK && r)
        rc = KG_ERR_INTERNAL; /* a failure must not hand out a result */
    if (rc == KG_ERR_NOMEM && !strstr(err.message, "out of memory"))
        rc = KG_ERR_INTERNAL;
    json_decref(r);
    json_decref(ex);
    kg_child_report_free(&f.rep);
    return rc;
}

static void allocation_failures_give_no_partial_result(void)
{
    const char *want_verdicts[] = {"correct", "correct", "correct", "runtime_error", "hacked", "timeout"};
    for (int kind = 0; kind < 6; kind++) {
        char *want = NULL;
        KG_CHECK(fault_build(kind, 0, &want) == KG_OK && want != NULL);
        long total = kg_fault_count; /* of the unfailed run */
        json_t *w = want ? json_loads(want, 0, NULL) : NULL;
        KG_CHECK_STR(verdict(w), want_verdicts[kind]);
        json_decref(w);
        KG_CHECK(total > 100); /* the hook sees the build's allocations */
        long nomem = 0, same = 0;
        for (long n = 1; n <= total; n++) {
            char *got = NULL;
            int rc = fault_build(kind, n, &got);
            if (rc == KG_OK && got && want && !strcmp(got, want))
                same++;
            else if (rc == KG_ERR_NOMEM && !got)
                nomem++;
            else {
                size_t at = 0; /* where the text first differs */
                while (got && want && got[at] && got[at] == want[at])
                    at++;
                fprintf(stderr, "  report %d, allocation %ld failed: rc %d, at: %.160s\n  want: %.160s\n", kind, n,
                        rc, got ? got + at : "(no result)", want ? want + at : "");
            }
            free(got);
        }
        KG_CHECK(nomem + same == total);
        KG_CHECK(nomem > 0);
        free(want);
    }
}

static const kg_test_case cases[] = {
    {"allocation_failures_give_no_partial_result", allocation_failures_give_no_partial_result},
    {"out_of_bounds_write_is_hacked", out_of_bounds_write_is_hacked},
    {"missing_l2_reset_is_a_warning", missing_l2_reset_is_a_warning},
    {"complete_facts_are_correct", complete_facts_are_correct},
    {"missing_variant_is_not_correct", missing_variant_is_not_correct},
    {"skipped_variant_is_reported", skipped_variant_is_reported},
    {"missing_repeat_checks_are_not_correct", missing_repeat_checks_are_not_correct},
    {"raise_in_repeat_call_is_runtime_error", raise_in_repeat_call_is_runtime_error},
    {"check_that_raised_is_not_correct", check_that_raised_is_not_correct},
    {"missing_timing_or_profile_on_gpu_is_not_correct", missing_timing_or_profile_on_gpu_is_not_correct},
    {"coverage_floor_is_the_default_on_gpu", coverage_floor_is_the_default_on_gpu},
    {"refused_protection_is_not_correct", refused_protection_is_not_correct},
    {"task_randomness_is_a_fact", task_randomness_is_a_fact},
    {"cpu_results_state_their_limits", cpu_results_state_their_limits},
    {"runner_findings_only_add", runner_findings_only_add},
    {"degenerate_everywhere_is_not_correct", degenerate_everywhere_is_not_correct},
    {"processes_left_running_are_a_hack", processes_left_running_are_a_hack},
    {"ended_between_stages_is_not_correct", ended_between_stages_is_not_correct},
    {"runner_end_facts_are_hacks", runner_end_facts_are_hacks},
    {"wrong_on_timed_inputs_is_incorrect", wrong_on_timed_inputs_is_incorrect},
    {"runtime_finding_is_hacked", runtime_finding_is_hacked},
    {"nondeterministic_is_a_hack_only_when_otherwise_correct", nondeterministic_is_a_hack_only_when_otherwise_correct},
    {"static_finding_names_the_line", static_finding_names_the_line},
    {"policy_severity_warn_and_off", policy_severity_warn_and_off},
    {"host_values_has_its_own_severity_and_rule", host_values_has_its_own_severity_and_rule},
    {"refused_launch_argument_is_hacked", refused_launch_argument_is_hacked},
    {"forged_messages_are_dropped", forged_messages_are_dropped},
    {"faster_than_physics", faster_than_physics},
    {"sandbox_and_degenerate_facts", sandbox_and_degenerate_facts},
    {"compile_cache_counts_and_reasons", compile_cache_counts_and_reasons},
    {"fp64_adjudication", fp64_adjudication},
    {"small_elements_rule", small_elements_rule},
    {"below_floor_relative_rule", below_floor_relative_rule},
    {"precision_feedback", precision_feedback},
    {"first_failure_ends_correctness", first_failure_ends_correctness},
    {"tolerance_in_every_result", tolerance_in_every_result},
    {"all_pass_is_correct", all_pass_is_correct},
    {"mismatch_is_incorrect_with_facts", mismatch_is_incorrect_with_facts},
    {"candidate_raise_in_variant_is_runtime_error", candidate_raise_in_variant_is_runtime_error},
    {"full_workdir_feedback_names_the_limit", full_workdir_feedback_names_the_limit},
    {"frames_outside_candidate_are_dropped", frames_outside_candidate_are_dropped},
    {"triton_compile_error_in_tiny_run", triton_compile_error_in_tiny_run},
    {"wrong_shape_in_tiny_run", wrong_shape_in_tiny_run},
    {"timeout_and_crash", timeout_and_crash},
    {"out_of_memory_cause", out_of_memory_cause},
    {"task_errors_are_not_verdicts", task_errors_are_not_verdicts},
    {"extraction_failure_is_invalid", extraction_failure_is_invalid},
    {"credit_is_configurable", credit_is_configurable},
    {"decision_from_facts", decision_from_facts},
    {"reader_of_a_result", reader_of_a_result},
    {"gpu_timing_statistics", gpu_timing_statistics},
};

KG_TEST_MAIN("result", cases)
