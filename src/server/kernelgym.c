/*
 * kernelgym.c — KernelGYM compatibility: which request fields exist, their
 * types and ranges (docs/service.md), and how a kgym result maps onto
 * KernelGYM's EvaluationResponse (same names, same defaults; kgym's full
 * result added under "kgym", nothing renamed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/service.h"
#include "eval/kinds.h"
#include "rl/result_read.h"
#include "task/task.h"
#include "sched/sched.h"
#include "server/server.h"
#include "util/json.h"
#include "util/util.h"

static int bad(kg_bad_request *b, int http, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(kg_bad_request *b, int http, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->error, sizeof b->error, fmt, ap);
    va_end(ap);
    b->http = http;
    snprintf(b->field, sizeof b->field, "%s", field ? field : "");
    return -1;
}

/* An optional integer field within [lo, hi]; absent or null keeps *out. */
static int opt_int(const json_t *in, const char *name, long lo, long hi, long *out, kg_bad_request *b)
{
    json_t *v = json_object_get(in, name);
    if (!v || json_is_null(v))
        return 0;
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == (double)(long)json_real_value(v))
        d = json_real_value(v);
    else
        return bad(b, 400, name, "%s must be an integer", name);
    if (d < lo || d > hi)
        return bad(b, 400, name, "%s must be between %ld and %ld", name, lo, hi);
    *out = (long)d;
    return 0;
}

static int opt_bool(const json_t *in, const char *name, int *out, kg_bad_request *b)
{
    json_t *v = json_object_get(in, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return bad(b, 400, name, "%s must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

static int opt_string(const json_t *in, const char *name, const char **out, kg_bad_request *b)
{
    json_t *v = json_object_get(in, name);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return bad(b, 400, name, "%s must be a string", name);
    *out = json_string_value(v);
    return 0;
}

static int id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.' || c == ':'))
            return 0;
    }
    return 1;
}

/* Unknown fields are kept (under request.client, as KernelGYM's clients
 * send extra keys) but not without bound: at most KG_UNKNOWN_MAX bytes of
 * JSON together, else a client could store megabytes per job in fields no
 * one reads. */
#define KG_UNKNOWN_MAX 16384
static int unknown_fields_too_big(const json_t *in, const char *const *bools, size_t nbools, kg_bad_request *b)
{
    static const char *const known[] = {"task_id", "reference_code", "kernel_code", "backend", "entry_point",
                                        "priority", "task", "id", "num_correct_trials", "num_perf_trials",
                                        "num_warmup", "timeout", "force_refresh", "reference_backend",
                                        "tolerance_profile"};
    size_t total = 0;
    const char *key, *biggest = NULL;
    size_t biggest_n = 0;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        int is_known = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known && !is_known; i++)
            is_known = !strcmp(key, known[i]);
        for (size_t i = 0; i < nbools && !is_known; i++)
            is_known = !strcmp(key, bools[i]);
        if (is_known)
            continue;
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        size_t n = strlen(key) + (text ? strlen(text) : 0);
        free(text);
        total += n;
        if (n > biggest_n) {
            biggest_n = n;
            biggest = key;
        }
    }
    if (total > KG_UNKNOWN_MAX)
        return bad(b, 413, biggest ? biggest : "",
                   "fields kgym does not know take %zu bytes (\"%.40s\" the most); the limit is %d", total,
                   biggest ? biggest : "", KG_UNKNOWN_MAX);
    return 0;
}

/* KernelGYM's rule: at least 10 non-blank characters. */
static int too_short(const char *code)
{
    int n = 0;
    for (const char *p = code; *p && n < 10; p++)
        n += !(*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r');
    return n < 10;
}

int kg_server_normalize(const kg_service_options *o, const kg_sched_profile *profile, const json_t *in,
                        int need_task_id, json_t **normalized, char key[KG_SHA256_STRLEN], int *force_refresh,
                        kg_bad_request *b)
{
    *normalized = NULL;
    *force_refresh = 0;
    if (!json_is_object(in))
        return bad(b, 400, "", "the request must be a JSON object");
    const char *task_id = NULL, *ref = NULL, *kernel = NULL, *backend = "triton", *entry = "Model",
               *priority = "normal", *task = NULL;
    if (opt_string(in, "task_id", &task_id, b) || opt_string(in, "reference_code", &ref, b) ||
        opt_string(in, "kernel_code", &kernel, b) || opt_string(in, "backend", &backend, b) ||
        opt_string(in, "entry_point", &entry, b) || opt_string(in, "priority", &priority, b) ||
        opt_string(in, "task", &task, b))
        return -1;
    if (need_task_id && !task_id)
        return bad(b, 400, "task_id", "task_id is required");
    if (task_id && !id_ok(task_id))
        return bad(b, 400, "task_id", "task_id must be 1 to 128 characters of A-Z a-z 0-9 _ - . :");
    const char *native_id = NULL; /* /v1/jobs may name its job "id" */
    if (opt_string(in, "id", &native_id, b))
        return -1;
    if (native_id && !id_ok(native_id))
        return bad(b, 400, "id", "id must be 1 to 128 characters of A-Z a-z 0-9 _ - . :");
    if (!kernel)
        return bad(b, 400, "kernel_code", "kernel_code is required");
    if (strlen(kernel) > o->max_code_bytes)
        return bad(b, 413, "kernel_code", "kernel_code is %zu bytes; the limit is %zu", strlen(kernel),
                   o->max_code_bytes);
    if (too_short(kernel))
        return bad(b, 400, "kernel_code", "kernel_code must have at least 10 non-blank characters");
    if (strcmp(backend, "triton"))
        return bad(b, 400, "backend", "backend \"%s\" is not supported: kgym evaluates Triton kernels",
                   backend);
    if (strcmp(entry, "Model"))
        return bad(b, 400, "entry_point",
                   "entry_point must be \"Model\" (the candidate defines ModelNew), not \"%s\"", entry);
    if (strcmp(priority, "low") && strcmp(priority, "normal") && strcmp(priority, "high"))
        return bad(b, 400, "priority", "priority must be low, normal or high");
    long correct_trials = 5, perf_trials = 100, warmup = 3, timeout = 300;
    int force = 0, flag = 0;
    if (opt_int(in, "num_correct_trials", 1, 20, &correct_trials, b) ||
        opt_int(in, "num_perf_trials", 1, 1000, &perf_trials, b) ||
        opt_int(in, "num_warmup", 0, 100, &warmup, b) || opt_int(in, "timeout", 10, 3600, &timeout, b) ||
        opt_bool(in, "force_refresh", &force, b))
        return -1;
    static const char *const bools[] = {"use_reference_cache", "is_valid", "verbose_errors", "enable_profiling",
                                        "enable_triton_detection", "run_triton_detection",
                                        "measure_performance", "run_performance", "run_correctness",
                                        "detect_decoy_kernel"};
    for (size_t i = 0; i < sizeof bools / sizeof *bools; i++)
        if (opt_bool(in, bools[i], &flag, b))
            return -1;

    if (unknown_fields_too_big(in, bools, sizeof bools / sizeof *bools, b))
        return -1;

    /* KernelGYM's reference_backend: what the reference is timed as.  Its server compiles the reference for
     * torch_compile (or torch-compile, compile) and runs it eagerly for anything else; kgym maps those to its
     * reference modes and refuses names it does not know rather than time something else than was asked. */
    const char *backend_in = NULL, *ref_mode = NULL;
    if (opt_string(in, "reference_backend", &backend_in, b))
        return -1;
    if (backend_in) {
        if (!strcasecmp(backend_in, "torch_compile") || !strcasecmp(backend_in, "torch-compile") ||
            !strcasecmp(backend_in, "compile"))
            ref_mode = "compile";
        else if (!strcasecmp(backend_in, "pytorch") || !strcasecmp(backend_in, "torch") ||
                 !strcasecmp(backend_in, "eager"))
            ref_mode = "eager";
        else
            return bad(b, 400, "reference_backend",
                       "reference_backend must be pytorch (eager) or torch_compile, not \"%.60s\"", backend_in);
    }

    /* kgym's own field: the tolerance profile (strict, kernelbench); absent → the server's --tolerance-profile.
     * Part of the content key: a result judged under one profile never answers a request for the other. */
    const char *tolerance = NULL;
    if (opt_string(in, "tolerance_profile", &tolerance, b))
        return -1;
    if (tolerance && !kg_eval_tolerance_profile_known(tolerance))
        return bad(b, 400, "tolerance_profile", "tolerance_profile must be strict or kernelbench, not \"%.60s\"",
                   tolerance);

    /* The reference: code given, or a KernelBench id on this server. */
    kg_task t;
    memset(&t, 0, sizeof t);
    char *ref_owned = NULL;
    const char *label = task_id;
    if (ref) {
        if (strlen(ref) > o->max_code_bytes)
            return bad(b, 413, "reference_code", "reference_code is %zu bytes; the limit is %zu", strlen(ref),
                       o->max_code_bytes);
        if (too_short(ref))
            return bad(b, 400, "reference_code", "reference_code must have at least 10 non-blank characters");
    } else if (task) {
        /* Ids only: a path would let a client read the server's files. */
        if (strncmp(task, "level", 5) || strstr(task, ".."))
            return bad(b, 400, "task", "task must be a KernelBench id like level1/19");
        if (!o->kernelbench || !*o->kernelbench)
            return bad(b, 400, "task", "this server has no KernelBench checkout (--kernelbench)");
        kg_error err;
        int rc = kg_task_resolve(o->kernelbench, task, &t, &err);
        if (rc != KG_OK)
            return bad(b, rc == KG_ERR_NOT_FOUND ? 404 : 400, "task", "%s", err.message);
        ref_owned = t.source;
        t.source = NULL;
        ref = ref_owned;
        label = t.id;
    } else {
        return bad(b, 400, "reference_code", "reference_code (or a KernelBench \"task\" id) is required");
    }

    json_t *client = json_deep_copy(in);
    json_object_del(client, "reference_code");
    json_object_del(client, "kernel_code");
    json_t *n = json_pack("{s:s?, s:s, s:s, s:I, s:I, s:s?, s:s?, s:o}", "task", label, "reference_code", ref,
                          "kernel_code", kernel, "timeout", (json_int_t)timeout, "num_perf_trials",
                          (json_int_t)perf_trials, "reference_mode", ref_mode, "tolerance_profile", tolerance,
                          "client", client);
    /* Code goes as it is or not at all (docs/style.md): text that is not UTF-8 (a task file's) is named; any other
     * failure here is memory. */
    const char *not_text = !n && ref && !kg_utf8_valid(ref)         ? "reference_code"
                           : !n && kernel && !kg_utf8_valid(kernel) ? "kernel_code"
                           : !n && label && !kg_utf8_valid(label)   ? "task"
                                                                    : NULL;
    free(ref_owned);
    kg_task_free(&t);
    if (!n && not_text)
        return bad(b, 400, not_text, "%s is not valid UTF-8", not_text);
    if (!n)
        return bad(b, 500, "", "out of memory building the job's request");
    /* The key under the profile the caller expects the job to be evaluated with; its worker keys it again with
     * its own when it claims it (sched.c), and records the result under that. */
    if (kg_sched_content_key(profile, n, key) != KG_OK) {
        json_decref(n);
        return bad(b, 500, "", "the request's content key could not be computed");
    }
    *normalized = n;
    *force_refresh = force;
    return 0;
}

json_t *kg_service_iso_time(double unix_s)
{
    if (unix_s <= 0)
        return json_null();
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[64];
    int ms = (int)((unix_s - (double)t) * 1000);
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    return json_string(buf);
}

/* KernelGYM's error code of a result's verdict; NULL for correct and for a verdict kgym does not know. */
static const char *error_code_of(const kg_result_view *v)
{
    if (!v->verdict)
        return "SYSTEM_ERROR";
    if (!v->known)
        return NULL;
    switch (v->outcome.verdict) {
    case KG_VERDICT_INVALID:
    case KG_VERDICT_HACKED:
        return "VALIDATION_ERROR";
    case KG_VERDICT_COMPILE_ERROR:
        return "COMPILATION_ERROR";
    case KG_VERDICT_RUNTIME_ERROR:
        return "RUNTIME_ERROR";
    case KG_VERDICT_INCORRECT:
        return "CORRECTNESS_ERROR";
    case KG_VERDICT_TIMEOUT:
        return "TIMEOUT_ERROR";
    default:
        return NULL;
    }
}

/* Did the candidate get past import (KernelGYM's "compiled")?  Not without a verdict, nor for invalid,
 * compile_error, or a timeout before its module ran (parse, static, compile). */
static int compiled_of(const json_t *r, const kg_result_view *v)
{
    if (!v->verdict)
        return 0;
    if (!v->known)
        return 1;
    if (v->outcome.verdict == KG_VERDICT_INVALID || v->outcome.verdict == KG_VERDICT_COMPILE_ERROR)
        return 0;
    if (v->outcome.verdict == KG_VERDICT_TIMEOUT) {
        const char *st = json_string_value(json_object_get(json_object_get(r, "process"), "stage"));
        kg_stage at = kg_stage_of(st);
        if (at >= KG_STAGE_PARSE && at <= KG_STAGE_COMPILE)
            return 0;
    }
    return 1;
}

json_t *kg_service_kernelgym_response(const json_t *job)
{
    const char *jstatus = json_string_value(json_object_get(job, "status"));
    const json_t *r = json_object_get(job, "result");
    int have = json_is_object(r);
    kg_result_view v; /* the one reader of a result (rl/result_read.h) */
    kg_result_read(r, &v);
    const char *verdict = v.verdict;
    int compiled = have && compiled_of(r, &v);
    int correct = v.known && v.outcome.verdict == KG_VERDICT_CORRECT;
    const json_t *timing = have ? json_object_get(r, "timing") : NULL;
    double ref_ms = -1.0, ker_ms = -1.0, speedup = 0.0;
    if (json_is_object(timing)) {
        json_t *m = json_object_get(json_object_get(timing, "reference_ms"), "median");
        if (json_is_number(m))
            ref_ms = json_number_value(m);
        m = json_object_get(json_object_get(timing, "candidate_ms"), "median");
        if (json_is_number(m))
            ker_ms = json_number_value(m);
        if (correct && !isnan(v.outcome.speedup))
            speedup = v.outcome.speedup;
        else if (correct && ref_ms > 0 && ker_ms > 0)
            speedup = ref_ms / ker_ms;
    }
    const char *status;
    if (jstatus && !strcmp(jstatus, "done"))
        status = compiled ? "completed" : "failed"; /* KernelGYM: compiled results are "completed" */
    else if (jstatus && !strcmp(jstatus, "failed"))
        status = "failed";
    else if (jstatus && !strcmp(jstatus, "cancelled"))
        status = "failed"; /* KernelGYM's statuses have no "cancelled": error_message says so */
    else if (jstatus && !strcmp(jstatus, "running"))
        status = "processing";
    else
        status = "pending";

    /* Every step checked (docs/style.md): a response that cannot be built whole is NULL (the server answers 500),
     * never one with a field missing (a client reads a missing "correctness" its own way). */
    json_t *meta = json_object();
    int ok = meta != NULL;
    if (have) {
        json_t *dev = json_object_get(r, "device");
        ok = ok && kg_json_set(meta, "hardware", json_incref(json_object_get(dev, "name") ?: json_null())) == 0;
        ok = ok && kg_json_set(meta, "device", json_incref(json_object_get(dev, "kind") ?: json_null())) == 0;
        json_t *c = json_object_get(r, "correctness");
        if (json_is_object(c)) {
            json_int_t p = json_integer_value(json_object_get(c, "passed_count"));
            /* Of the planned trials: those not run after the stage had failed count as not passed. */
            json_int_t n = (json_int_t)(json_array_size(json_object_get(c, "variants")) +
                                        json_array_size(json_object_get(c, "not_run")));
            char buf[64];
            snprintf(buf, sizeof buf, "(%lld / %lld)", (long long)p, (long long)n);
            ok = ok && kg_json_set(meta, "correctness_trials", json_string(buf)) == 0;
        }
        json_t *e = json_object_get(r, "error");
        const char *em = json_string_value(json_object_get(e, "message"));
        const char *et = json_string_value(json_object_get(e, "type"));
        if (em && v.known && v.outcome.verdict == KG_VERDICT_COMPILE_ERROR) {
            ok = ok && kg_json_set(meta, "compilation_error", json_string(em)) == 0;
            if (et)
                ok = ok && kg_json_set(meta, "compilation_error_name", json_string(et)) == 0;
        } else if (em) {
            ok = ok && kg_json_set(meta, "runtime_error", json_string(em)) == 0;
            if (et)
                ok = ok && kg_json_set(meta, "runtime_error_name", json_string(et)) == 0;
        } else if (json_array_size(json_object_get(r, "unjudged")) > 0) {
            /* A pass that lacked a fact (result.c, fail closed): the client's error says which. */
            const json_t *u = json_array_get(json_object_get(r, "unjudged"), 0);
            ok = ok && kg_json_set(meta, "runtime_error", json_string(json_string_value(json_object_get(u, "reason")) ?: "")) == 0;
            ok = ok && kg_json_set(meta, "runtime_error_name", json_string("Unjudged")) == 0;
        }
        if (v.known && v.outcome.verdict == KG_VERDICT_INCORRECT)
            ok = ok && kg_json_set(meta, "correctness_issue", json_string("Output mismatch")) == 0;
        /* Dr. Kernel's coverage rewards divide these numbers (time: the candidate's kernels' device time by all
         * kernels'; number: its distinct kernels by all distinct kernels).  They are the profile's own
         * measurements, as KernelGYM sends them; a result without them (CPU, no profile) sends none, and the
         * client's coverage reward is then 0, as KernelGYM's is without a profile.  The candidate's time is at most
         * the result's coverage times the total: where the timed calls bound the coverage below the profiled calls'
         * share (src/eval/timing.c kg_eval_coverage), the client's division gives the bounded figure too. */
        json_t *prof = json_object_get(r, "profile");
        json_t *cand_us = json_object_get(prof, "candidate_device_us"), *all_us = json_object_get(prof, "total_device_us");
        json_t *cand_n = json_object_get(prof, "candidate_kernel_count"), *all_n = json_object_get(prof, "kernel_count");
        json_t *coverage = json_object_get(prof, "coverage");
        if (json_is_number(cand_us) && json_is_number(all_us)) {
            double mine = json_number_value(cand_us);
            if (json_is_number(coverage))
                mine = fmin(mine, json_number_value(coverage) * json_number_value(all_us));
            ok = ok && kg_json_set(meta, "custom_kernel_cuda_time_in_profiling_us", json_real(mine)) == 0;
            ok = ok && kg_json_set(meta, "total_kernel_run_time_in_profiling_us", json_real(json_number_value(all_us))) == 0;
        }
        if (json_is_integer(cand_n) && json_is_integer(all_n)) {
            ok = ok && kg_json_set(meta, "num_custom_kernel", json_incref(cand_n)) == 0;
            ok = ok && kg_json_set(meta, "num_total_kernels", json_incref(all_n)) == 0;
        }
    }
    const json_t *client = json_object_get(json_object_get(job, "request"), "client");
    ok = ok && kg_json_set(meta, "backend", json_string("triton")) == 0;
    json_t *rb = json_object_get(client, "reference_backend");
    if (json_is_string(rb)) /* as KernelGYM notes it */
        ok = ok && kg_json_set(meta, "reference_backend", json_incref(rb)) == 0;
    /* How the outputs were judged (kgym's tolerance profile and the reference's precision), from the result. */
    json_t *tol = json_object_get(r, "tolerance");
    if (json_is_string(json_object_get(tol, "profile")))
        ok = ok && kg_json_set(meta, "tolerance_profile", json_incref(json_object_get(tol, "profile"))) == 0;
    if (json_is_object(json_object_get(tol, "reference_precision")))
        ok = ok && kg_json_set(meta, "reference_precision", json_incref(json_object_get(tol, "reference_precision"))) == 0;
    json_t *nc = json_object_get(client, "num_correct_trials");
    json_t *np = json_object_get(client, "num_perf_trials");
    ok = ok && kg_json_set(meta, "num_correct_trials", json_is_integer(nc) ? json_copy(nc) : json_integer(5)) == 0;
    ok = ok && kg_json_set(meta, "num_perf_trials", json_is_integer(np) ? json_copy(np) : json_integer(100)) == 0;

    json_t *err_msg = json_null(), *err_code = json_null();
    const char *jerr = json_string_value(json_object_get(job, "error"));
    if (jstatus && !strcmp(jstatus, "failed")) {
        err_msg = kg_json_text(jerr ? jerr : "the evaluation could not be carried out"); /* may quote input */
        err_code = json_string("SYSTEM_ERROR");
    } else if (jstatus && !strcmp(jstatus, "cancelled")) {
        err_msg = json_string("Task cancelled");
        err_code = json_string("UNKNOWN_ERROR");
    } else if (have && !correct) {
        /* kgym's feedback: what failed and why, never just "Task failed". */
        const char *fb = json_string_value(json_object_get(r, "feedback"));
        err_msg = json_string(fb && *fb ? fb : verdict ? verdict : "failed");
        const char *code = error_code_of(&v);
        err_code = code ? json_string(code) : json_null();
    }
    double sub = json_number_value(json_object_get(job, "submitted_at"));
    double fin = json_number_value(json_object_get(job, "finished_at"));
    double start = json_number_value(json_object_get(job, "started_at"));
    json_t *task_id = json_object_get(job, "id");
    ok = ok && err_msg && err_code;
    json_t *out = json_object();
    ok = ok && kg_json_set(out, "task_id", json_incref(task_id ? task_id : json_null())) == 0;
    ok = ok && kg_json_set(out, "status", json_string(status)) == 0;
    ok = ok && kg_json_set(out, "compiled", json_boolean(compiled)) == 0;
    ok = ok && kg_json_set(out, "correctness", json_boolean(correct)) == 0;
    ok = ok && kg_json_set(out, "decoy_kernel", json_boolean(v.known && v.outcome.verdict == KG_VERDICT_HACKED)) == 0;
    ok = ok && kg_json_set(out, "reference_runtime", json_real(ref_ms)) == 0;
    ok = ok && kg_json_set(out, "kernel_runtime", json_real(ker_ms)) == 0;
    ok = ok && kg_json_set(out, "speedup", json_real(speedup)) == 0;
    ok = kg_json_set(out, "metadata", meta) == 0 && ok; /* these three are taken either way */
    ok = kg_json_set(out, "error_message", err_msg) == 0 && ok;
    ok = kg_json_set(out, "error_code", err_code) == 0 && ok;
    ok = ok && kg_json_set(out, "submitted_at", kg_service_iso_time(sub)) == 0;
    ok = ok && kg_json_set(out, "completed_at", kg_service_iso_time(fin)) == 0;
    ok = ok && kg_json_set(out, "processing_time", fin > 0 && start > 0 ? json_real(fin - start) : json_null()) == 0;
    ok = ok && kg_json_set(out, "kgym", json_incref(have ? (json_t *)r : json_null())) == 0;
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *kg_server_job_json(const kg_job *j, int with_request)
{
    /* The store keeps what kgym wrote: a result or request that does not load is memory, and a job shown
     * without its result would read as one that has none. */
    json_t *r = j->result ? json_loads(j->result, 0, NULL) : NULL;
    json_t *req = j->request ? json_loads(j->request, 0, NULL) : NULL;
    json_t *o = (r || !j->result) && (req || !j->request) ? kg_server_job_json_from(j, r, req, with_request) : NULL;
    json_decref(r);
    json_decref(req);
    return o;
}

json_t *kg_server_job_json_from(const kg_job *j, const json_t *result, const json_t *request, int with_request)
{
    json_t *r = (json_t *)result, *req = (json_t *)request; /* only read (and referenced) */
    json_t *o = json_object();
    int ok = o != NULL;
    ok = ok && kg_json_set(o, "id", kg_json_text(j->id ? j->id : "")) == 0;
    ok = ok && kg_json_set(o, "status", kg_json_text(j->status ? j->status : "unknown")) == 0;
    ok = ok && kg_json_set(o, "verdict", j->verdict ? kg_json_text(j->verdict) : json_null()) == 0;
    ok = ok && kg_json_set(o, "attempts", json_integer(j->attempts)) == 0;
    ok = ok && kg_json_set(o, "worker", j->worker ? kg_json_text(j->worker) : json_null()) == 0;
    ok = ok && kg_json_set(o, "cached_from", j->cached_from ? kg_json_text(j->cached_from) : json_null()) == 0;
    ok = ok && kg_json_set(o, "submitted_at", kg_json_number(j->submitted_at)) == 0;
    ok = ok && kg_json_set(o, "started_at", kg_json_number(j->started_at)) == 0;
    ok = ok && kg_json_set(o, "finished_at", kg_json_number(j->finished_at)) == 0;
    ok = ok && kg_json_set(o, "queue_wait_s",
                        j->started_at > 0 ? kg_json_number(j->started_at - j->submitted_at) : json_null()) == 0;
    /* a job's error may quote a client's input */
    ok = ok && kg_json_set(o, "error", j->error ? kg_json_text(j->error) : json_null()) == 0;
    ok = ok && kg_json_set(o, "result", r ? json_incref(r) : json_null()) == 0;
    ok = ok && kg_json_set(o, "task", req && json_object_get(req, "task") ? json_copy(json_object_get(req, "task"))
                                                                       : json_null()) == 0;
    ok = ok && kg_json_set(o, "request", req ? json_incref(req) : json_null()) == 0;
    ok = ok && kg_json_set(o, "kernelgym", ok ? kg_service_kernelgym_response(o) : NULL) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    if (!with_request)
        json_object_del(o, "request");
    return o;
}

json_t *kg_server_status_json(const kg_job *j, long queue_position)
{
    json_t *full = kg_server_job_json(j, 1);
    json_t *kgr = json_object_get(full, "kernelgym");
    json_t *o = json_object();
    int ok = full && o;
    ok = ok && kg_json_set(o, "task_id", kg_json_text(j->id ? j->id : "")) == 0;
    ok = ok && kg_json_set(o, "status", json_incref(json_object_get(kgr, "status"))) == 0;
    int done = j->status && strcmp(j->status, "queued") && strcmp(j->status, "running");
    /* TaskStatusResponse.progress is a percentage (0-100). */
    ok = ok && kg_json_set(o, "progress", kg_json_number(done ? 100.0 : j->status && !strcmp(j->status, "running") ? 50.0 : 0.0)) == 0;
    ok = ok && kg_json_set(o, "estimated_completion", json_null()) == 0;
    ok = ok && kg_json_set(o, "queue_position", queue_position >= 0 ? json_integer(queue_position) : json_null()) == 0;
    ok = ok && kg_json_set(o, "assigned_device", j->worker ? kg_json_text(j->worker) : json_null()) == 0;
    /* Added: KernelGYM drops these, so its clients only ever see "Task failed". */
    ok = ok && kg_json_set(o, "error_message", json_incref(json_object_get(kgr, "error_message"))) == 0;
    ok = ok && kg_json_set(o, "error_code", json_incref(json_object_get(kgr, "error_code"))) == 0;
    ok = ok && kg_json_set(o, "verdict", j->verdict ? kg_json_text(j->verdict) : json_null()) == 0;
    json_decref(full);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
