/*
 * eval.c — one evaluation end to end: extraction in C, then a child from the
 * supervisor runs the Python stages, then result.c turns the child's report
 * into the result (see src/eval/eval.h).
 */
#include "eval/eval.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "eval/internal.h"
#include "eval/kinds.h"
#include "supervisor/arbiter.h"
#include "kgym/extract.h"
#include "eval/refcache.h"
#include "util/json.h"
#include "util/util.h"

const char *const *const kg_eval_stage_names = kg_stage_names + KG_EVAL_STAGE_FIRST;

int kg_eval_stage_index(const char *name)
{
    int s = (int)kg_stage_of(name);
    return s >= KG_EVAL_STAGE_FIRST && s < KG_STAGE_COUNT ? s - KG_EVAL_STAGE_FIRST : -1;
}

const char *const kg_eval_tolerance_profiles[] = {"strict", "kernelbench", NULL};

int kg_eval_tolerance_profile_known(const char *name)
{
    for (size_t i = 0; name && kg_eval_tolerance_profiles[i]; i++)
        if (!strcmp(name, kg_eval_tolerance_profiles[i]))
            return 1;
    return 0;
}

const char *kg_eval_tolerance_name(const kg_eval_options *o)
{
    return o && o->tolerance_profile ? o->tolerance_profile : kg_eval_tolerance_profiles[0];
}

int kg_eval_policy(const kg_eval_options *opts, json_t **policy, kg_error *err)
{
    *policy = NULL;
    if (opts && opts->policy) {
        *policy = json_incref((json_t *)opts->policy); /* jansson's reference counts are atomic */
        return KG_OK;
    }
    if (!opts || !opts->policy_json)
        return KG_OK;
    json_error_t jerr;
    *policy = json_loads(opts->policy_json, 0, &jerr);
    if (json_is_object(*policy))
        return KG_OK;
    json_decref(*policy);
    *policy = NULL;
    return kg_error_set(err, KG_ERR_INVALID, "the reward-hack policy is not a JSON object (line %d: %s)", jerr.line,
                        jerr.text);
}

void kg_eval_options_default(kg_eval_options *o, const char *device)
{
    memset(o, 0, sizeof *o);
    o->device = device;
    o->budget_elements = 65536;
    o->tiny_budget_elements = 4096;
    o->atol = o->rtol = -1;
    o->seed = 42;
    const double credit[5] = {0.0, 0.3, 0.5, 0.7, 1.0};
    memcpy(o->credit, credit, sizeof credit);
    o->timing = 1;
    o->timing_warmup = 10;
    /* Two planned rounds, a third unless their speedups agree within 0.3% (timing_agree; then the CV rule):
     * on an H100 this ended 55 of 62 timed candidates of the GRPO mix after two rounds, for +11.9% evaluations
     * an hour, the speedups as close to a three-round run's as two three-round runs are to each other
     * (twenty-seventh session, docs/PERFORMANCE.md). */
    o->timing_rounds = 2;
    o->timing_iters = 50;
    /* 100 ms (150 until the thirty-first session): on a cache hit the candidate's rounds are half of it, 50 ms, and
     * two that agree still need 90 ms on kgym's clock (KG_TIMING_AGREE_MIN_MS).  GRPO mix, H200: exclusive time
     * 12.8 -> 10.9 s, +8.2% evaluations an hour, speedups within 1.21% of 150's (docs/PERFORMANCE.md). */
    o->timing_round_ms = 100;
    o->timing_max_rounds = 6;
    o->timing_cv_threshold = 0.02;
    o->timing_agree = 0.003; /* docs/evaluation-protocol.md, "Re-measuring" */
    o->reference_mode = "eager";
    o->tolerance_profile = "strict";
    o->profile = 1;
    /* parse, static, compile, tiny_run, correctness, timing.  Generous: the
     * interpreter is slow and a GPU compile of several kernels takes seconds;
     * a hang is still caught in minutes, not hours. */
    const double stage[KG_EVAL_STAGE_COUNT] = {30, 30, 120, 120, 600, 300};
    memcpy(o->stage_timeout_s, stage, sizeof stage);
    o->limits.total_timeout_s = 1200;
    /* Start-up (task import, the runner's sandbox), the runner's checks between stages and the wind-down:
     * seconds on a healthy run.  With this budget an evaluation ends within the sum of its stage limits
     * plus one minute, wherever the candidate stalls. */
    o->limits.outside_stages_s = 60;
    o->limits.capture_bytes = 16 * 1024;
    o->limits.output_limit_bytes = 8u << 20;
    o->limits.file_size_bytes = 1ull << 30;
    o->limits.cpu_seconds = 3600;
    /* The runner's host memory, on either device (a memory cgroup: supervisor/memcg.c): RLIMIT_AS alone left a GPU
     * runner none (docs/threat-model.md). */
    o->limits.runner_memory_bytes = 32ull << 30;
    /* RLIMIT_AS breaks CUDA (it reserves huge virtual ranges): CPU only. */
    if (device && strcmp(device, "cpu") == 0)
        o->limits.address_space_bytes = 16ull << 30;
    o->policy_json = NULL;
    o->policy = NULL;
    o->hack_penalty = 0.0;
    /* On a GPU a correct candidate must spend at least half of its forward's device time in its own Triton
     * kernels (docs/threat-model.md, "Coverage floor"); the CPU has no device profile. */
    o->coverage_floor = device && strcmp(device, "cpu") != 0 ? 0.5 : 0.0;
    o->sandbox = 1;
    o->workdir_bytes = 1ull << 30;
    o->workdir_files = 10000;
    o->allow_unprotected = NULL;
}

int kg_eval_make_nonce(char out[33], kg_error *err)
{
    unsigned char raw[16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return kg_error_set(err, KG_ERR_IO, "getrandom: %s", strerror(errno));
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return KG_OK;
}

/* NULL when memory ran out.  The detail may quote the reply (not UTF-8: kept with '?'). */
static json_t *extract_stage(const char *status, double ms, const char *detail)
{
    return json_pack("{s:s, s:s, s:o, s:o}", "name", "extract", "status", status, "ms", kg_json_number(ms),
                     "detail", kg_json_text(detail ? detail : ""));
}

/* What the child may ask during an evaluation: whether its timing rounds are stable enough, and whether
 * the reference's times are in the cache (then it times only the candidate). */
typedef struct {
    const kg_eval_options *opts;
    const kg_task *task;
    const char *nonce;
    json_t *cached_reference; /* owned: {"reference_ms", "reference_device_ms" (where kept)}, the cache's samples
                               * on a hit or the judge's timed alone on a miss (reference_samples); NULL: none */
    int timed_alone;          /* cached_reference came from this evaluation's judge (reference_timed) */
    char key[65];                /* the cache key, "" when the child did not ask */
    const json_t *job;           /* the job the judge runs (borrowed): the task mode's key reads it */
    char mode_key[65];           /* the task mode's key (task_modes below), "" when the child did not ask */
    int mode_asked;              /* task_mode_lookup answered (once an evaluation) */
    int mode_served;             /* ... with a kept mode: the result's task.randomness.cached */
    int mode_reported;           /* task_mode answered (once an evaluation) */
} timing_talk;

/* The task's mode, as the judge found it before any of the candidate's code was loaded (whether the reference
 * draws random numbers in forward: tasks.forward_randomness, docs/evaluation-protocol.md "Random references"),
 * kept for this process's later evaluations of the same task, so that only the first of a GRPO group's samples
 * runs the reference's check (~0.24 s of a new judge's shared GPU phase on an H200, most of it first kernel uses:
 * docs/PERFORMANCE.md, eighth session).  Keyed by the task's bytes and every input of the check (the job's device,
 * tiny budget, budget, seed and tolerance profile, and torch's version); only a decided mode is kept ("none", "dropout_as_identity",
 * "refused"), never "unknown" (the reference could not run: maybe a passing cause).  Nothing of a candidate
 * reaches it: the judge reports the mode before `load`.  At most TASK_MODES_MAX, the oldest replaced. */
#define TASK_MODES_MAX 256
static struct {
    char key[65];
    json_t *mode; /* owned: {"handling", "modules", "ops", "drew", "differs", "reason"} */
} task_modes[TASK_MODES_MAX];
static size_t task_modes_next;
static pthread_mutex_t task_modes_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether the judge has begun a stage: the mode is asked for and reported before the first (the candidate's code
 * is loaded in `compile`), and kgym takes neither later, whatever the judge sends: a mode kept for a task's later
 * evaluations must not come from a judge that ran candidate code (a red-team review of c0617e4: a judge made to
 * report `none` after `compile` had turned every later sample of a dropout task incorrect). */
static int stages_begun(const json_t *messages)
{
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (kg_msg_is(m, KG_MSG_STAGE))
            return 1;
    }
    return 0;
}

/* The key of a task_mode_lookup (its `torch`), into talk->mode_key; 0 when it cannot be made.  The check's inputs
 * are read from the job the judge got, so the key cannot drift from what the judge ran with: device, tiny_budget,
 * budget (the CPU budget, null on a GPU), seed, and tolerance (its profile sets the reference's precision before
 * the check: compare.apply_reference_precision). */
static int task_mode_key(timing_talk *talk, const json_t *msg)
{
    const char *torch = json_string_value(json_object_get(msg, "torch"));
    const char *source = talk->task ? talk->task->source : NULL;
    if (!torch || !source || !talk->job)
        return 0;
    const json_t *j = talk->job;
    json_t *inputs = json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "device", json_object_get(j, "device"), "tiny_budget",
                               json_object_get(j, "tiny_budget"), "budget", json_object_get(j, "budget"), "seed",
                               json_object_get(j, "seed"), "tolerance", json_object_get(j, "tolerance"));
    char *text = inputs ? json_dumps(inputs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(inputs);
    kg_hash_field f[] = {KG_HASH_STR("kgym-task-mode/2"), {source, strlen(source)}, KG_HASH_STR(torch),
                         {text, text ? strlen(text) : 0}};
    int ok = text && kg_sha256_fields(f, sizeof f / sizeof f[0], talk->mode_key, NULL) == KG_OK;
    free(text);
    return ok;
}

/* A new reference to the kept mode under key, or NULL. */
static json_t *task_mode_get(const char *key)
{
    json_t *found = NULL;
    pthread_mutex_lock(&task_modes_lock);
    for (size_t i = 0; i < TASK_MODES_MAX && !found; i++)
        if (task_modes[i].mode && !strcmp(task_modes[i].key, key))
            found = json_deep_copy(task_modes[i].mode);
    pthread_mutex_unlock(&task_modes_lock);
    return found;
}

/* Keeps a task_mode message's decided mode under key; 1 when kept.  Two judges that found different modes for
 * one key (a check that is not repeatable: an output that differed by chance, a probe that could not run) leave
 * no mode kept: the next evaluation checks for itself. */
static int task_mode_put(const char *key, const json_t *msg)
{
    const char *h = json_string_value(json_object_get(msg, "handling"));
    if (!h || (strcmp(h, "none") && strcmp(h, "dropout_as_identity") && strcmp(h, "refused")))
        return 0;
    json_t *mode = json_object();
    static const char *const fields[] = {"handling", "modules", "ops", "drew", "differs", "reason"};
    for (size_t i = 0; mode && i < sizeof fields / sizeof fields[0]; i++) {
        const json_t *v = json_object_get(msg, fields[i]);
        if (v && json_object_set_new(mode, fields[i], json_deep_copy(v))) {
            json_decref(mode);
            mode = NULL;
        }
    }
    if (!mode)
        return 0;
    int kept = 1;
    pthread_mutex_lock(&task_modes_lock);
    size_t i = 0;
    while (i < TASK_MODES_MAX && !(task_modes[i].mode && !strcmp(task_modes[i].key, key)))
        i++;
    if (i < TASK_MODES_MAX) { /* two judges of one task found it at once */
        kept = json_equal(task_modes[i].mode, mode);
        if (!kept) {
            json_decref(task_modes[i].mode);
            task_modes[i].mode = NULL;
        }
        json_decref(mode);
    } else {
        size_t slot = task_modes_next;
        task_modes_next = (task_modes_next + 1) % TASK_MODES_MAX;
        json_decref(task_modes[slot].mode);
        memcpy(task_modes[slot].key, key, 65);
        task_modes[slot].mode = mode;
    }
    pthread_mutex_unlock(&task_modes_lock);
    return kept;
}

/* The timing protocol as a string: everything besides the task, GPU and dtype that changes the
 * reference's per-call times, so that a cached time is only reused under the same protocol. */
int kg_eval_reference_protocol(const kg_eval_options *o, const json_t *msg, kg_buf *out)
{
    /* v2: warm-up by wall time and rounds cut to round_ms (samples of v1 were taken otherwise).  v3: a new
     * input set drawn for every timed call (v2 scaled one set) and the persisting-L2 reset before each call.
     * v4: the reference's precision is the tolerance profile's (strict turns cuDNN's TF32 off, which v3 left on).
     * v5: the reference timed alone by the judge, no candidate call between its calls (v4's samples were taken
     * interleaved with a candidate's, whose load shaped them: docs/threat-model.md).  v6: that warm-up may end
     * once the judge read the GPU settled, its rounds watched as the candidate's are (v5's warmed up for warm_ms).
     * rounds: the reference alone is timed in that many rounds, so a time kept from two (--timing-rounds 2) has
     * fewer samples than one of three, and serves only its own (the red team of --timing-agree).  v7: a reference
     * of half a round's budget or more a call is timed in rounds of two calls (v6: three), and its warm-up may
     * settle after two calls (timing.round_calls, _warm_loop). */
    int rc = kg_buf_printf(out, "v7;warmup=%d;iters=%d;round_ms=%g;rounds=%d;flush=1;fresh=1;mode=%s;precision=%s;"
                  "seed=%u;torch=%s;triton=%s", o->timing_warmup, o->timing_iters, o->timing_round_ms, o->timing_rounds,
                  o->reference_mode ? o->reference_mode : "eager", kg_eval_tolerance_name(o), o->seed,
                  json_string_value(json_object_get(msg, "torch")) ?: "?",
                  json_string_value(json_object_get(msg, "triton")) ?: "?");
    /* A reference judged with its dropout in eval mode runs another forward than the task's own
     * (docs/evaluation-protocol.md, "Random references"). */
    const char *mode = json_string_value(json_object_get(msg, "task_mode"));
    if (rc == KG_OK && mode && strcmp(mode, "none"))
        rc = kg_buf_printf(out, ";task=%s", mode);
    /* The sizes the judge planned from the task's constants: the source alone does not fix them (a task that
     * reads its environment for a batch size: red team 7 got an 8192-row reference time for a 1024-row run). */
    const json_t *sizes = json_object_get(msg, "sizes");
    if (rc == KG_OK && json_is_object(sizes)) {
        char *text = json_dumps(sizes, JSON_COMPACT | JSON_SORT_KEYS);
        rc = text ? kg_buf_printf(out, ";sizes=%s", text) : KG_ERR_NOMEM;
        free(text);
    }
    return rc;
}

/* The reference's samples as kgym holds them for an evaluation: {"reference_ms": a copy of `stream`,
 * "reference_device_ms": a copy of `device`} (the same calls on the device-wide clock; left out unless
 * kg_refcache_device_ok takes them).  `stream` must be valid already.  NULL when memory runs out. */
static json_t *reference_samples(const json_t *stream, const json_t *device)
{
    char why[128];
    json_t *r = json_object();
    int ok = kg_json_set(r, "reference_ms", json_deep_copy(stream)) == 0;
    if (ok && device && kg_refcache_device_ok(stream, device, why, sizeof why))
        ok = kg_json_set(r, "reference_device_ms", json_deep_copy(device)) == 0;
    if (!ok) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static void answer_child(void *ctx, const json_t *messages, const json_t *msg, json_t **reply)
{
    timing_talk *talk = ctx;
    kg_msg kind = kg_msg_kind(msg);
    if (kind == KG_MSG_TIMING_CHECK) {
        *reply = json_pack("{s:s, s:i}", "type", kg_msg_name(KG_MSG_TIMING_MORE), "rounds",
                           kg_eval_timing_more(talk->opts, messages, talk->nonce, talk->cached_reference));
    } else if (kind == KG_MSG_TIMING_GO) {
        /* Timing an incorrect candidate would only spend exclusive GPU time on a figure nobody uses. */
        char why[512];
        int go = kg_eval_correctness_passed(talk->opts, messages, talk->nonce, why, sizeof why);
        /* why quotes the candidate's exception, cut: kept with '?' where the cut split a character. */
        *reply = json_pack("{s:s, s:b, s:o}", "type", kg_msg_name(KG_MSG_TIMING_GO), "go", go, "why",
                           kg_json_text(go ? "" : why));
    } else if (kind == KG_MSG_VARIANT_GO) {
        /* Variants after one that failed cannot change the verdict: the judge stops unless --all-variants. */
        char why[512] = "";
        int failed = kg_eval_correctness_failed(messages, talk->nonce, why, sizeof why);
        *reply = json_pack("{s:s, s:b, s:o}", "type", kg_msg_name(KG_MSG_VARIANT_GO), "go", !failed, "why",
                           kg_json_text(failed ? why : ""));
    } else if (kind == KG_MSG_TASK_MODE_LOOKUP) {
        /* Whether an earlier evaluation in this process decided this task's mode (task_modes above): answered
         * once an evaluation, before its first stage (else a miss). */
        json_t *mode = NULL;
        if (!talk->mode_asked && !stages_begun(messages) && task_mode_key(talk, msg))
            mode = task_mode_get(talk->mode_key);
        talk->mode_asked = 1;
        talk->mode_served = mode != NULL;
        *reply = json_pack("{s:s, s:b, s:o}", "type", kg_msg_name(KG_MSG_TASK_MODE_CACHE), "hit", mode != NULL,
                           "mode", mode ? mode : json_null());
    } else if (kind == KG_MSG_TASK_MODE) {
        /* The mode the judge found: kept only when this evaluation's lookup missed, once, before the first stage
         * (a mode kgym handed out is not kept again). */
        int kept = talk->mode_asked && !talk->mode_served && !talk->mode_reported && talk->mode_key[0] &&
                   !stages_begun(messages) && task_mode_put(talk->mode_key, msg);
        talk->mode_reported = 1;
        *reply = json_pack("{s:s, s:b}", "type", kg_msg_name(KG_MSG_TASK_MODE_CACHE), "kept", kept);
    } else if (kind == KG_MSG_REFERENCE_CACHE_LOOKUP) {
        int hit = 0;
        const char *gpu = json_string_value(json_object_get(msg, "gpu"));
        const char *dtype = json_string_value(json_object_get(msg, "dtype"));
        kg_buf protocol = {0};
        /* A protocol string cut short by memory would key another protocol's times: no lookup then (a miss). */
        int have_protocol = kg_eval_reference_protocol(talk->opts, msg, &protocol) == KG_OK;
        json_t *entry = NULL;
        if (talk->opts->refcache && gpu && dtype && have_protocol && protocol.data &&
            kg_refcache_key(talk->task->source, strlen(talk->task->source), gpu, dtype, protocol.data, talk->key,
                            NULL) == KG_OK &&
            kg_refcache_get(talk->opts->refcache, talk->key, &entry, NULL) == KG_OK) {
            json_decref(talk->cached_reference);
            talk->cached_reference = reference_samples(json_object_get(entry, "reference_ms"),
                                                       json_object_get(entry, "reference_device_ms"));
            hit = talk->cached_reference != NULL;
        }
        json_decref(entry);
        kg_buf_free(&protocol);
        *reply = json_pack("{s:s, s:b}", "type", kg_msg_name(KG_MSG_REFERENCE_CACHE), "hit", hit);
    } else if (kind == KG_MSG_REFERENCE_TIMED) {
        /* A miss: the judge timed the reference alone at the start of its exclusive window, before any of the
         * candidate's calls there, and hands the samples over.  They stand for the cache's from now on: the
         * candidate is timed alone against them, and a correct evaluation stores them (store_reference_times).
         * Taken only after a lookup that missed, once, and only as the cache would take them
         * (kg_refcache_samples_ok: 1..KG_REFCACHE_MAX_SAMPLES finite, non-negative times). */
        const json_t *samples = json_object_get(msg, "reference_ms");
        char why[128];
        int take = talk->key[0] && !talk->cached_reference && kg_refcache_samples_ok(samples, why, sizeof why);
        if (take) {
            talk->cached_reference = reference_samples(samples, json_object_get(msg, "reference_device_ms"));
            talk->timed_alone = talk->cached_reference != NULL;
            take = talk->timed_alone;
        }
        *reply = json_pack("{s:s, s:b}", "type", kg_msg_name(KG_MSG_REFERENCE_CACHE), "hit", take);
    }
}

/* Whether the child reported a CUDA out-of-memory error (a failed stage or a variant's); `why` gets
 * "<stage or variant>: <message>" of the first, for the result (a re-run's reason). */
static int out_of_memory(const kg_child_report *rep, char *why, size_t why_cap)
{
    size_t i;
    json_t *m;
    json_array_foreach(rep->messages, i, m) {
        /* torch raises torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate ...") from its
         * allocator, but an allocation inside a library or Triton's launcher surfaces as
         * torch.AcceleratorError / RuntimeError "CUDA error: out of memory": both count. */
        const json_t *e = json_object_get(m, "error");
        const char *texts[] = {json_string_value(json_object_get(e, "type")),
                               json_string_value(json_object_get(e, "message")),
                               json_string_value(json_object_get(e, "cause_type")),
                               json_string_value(json_object_get(e, "cause_message"))};
        for (int k = 0; k < 4; k++)
            if (texts[k] && (strstr(texts[k], "OutOfMemoryError") || strstr(texts[k], "out of memory"))) {
                const char *where = json_string_value(json_object_get(m, "stage"));
                if (!where || json_is_string(json_object_get(m, "name")))
                    where = json_string_value(json_object_get(m, "name"));
                snprintf(why, why_cap, "%s: %.200s", where ? where : "?", texts[1] ? texts[1] : texts[k]);
                return 1;
            }
    }
    return 0;
}

/* Before the evaluation runs again (alone after running out of memory, or after kgym's own failure): the first
 * run's report, and the reference samples it brought, are not the next run's. */
static void forget_run(kg_child_report *rep, timing_talk *talk)
{
    kg_child_report_free(rep);
    json_decref(talk->cached_reference);
    talk->cached_reference = NULL;
    talk->timed_alone = 0;
}

/* Whether the run ended, unfinished, before the judge's sandbox report: what comes before it (the job, the
 * hello, the runner's lockdown and CUDA context) reads nothing of the candidate's.  `why` gets how it ended and
 * the start of the processes' stderr (the judge says there which socket broke: judge/child.py
 * _say_channel_lost). */
static int ended_before_sandbox(const kg_child_report *rep, char *why, size_t why_cap)
{
    if (rep->end == KG_END_COMPLETED)
        return 0;
    size_t i;
    json_t *m;
    json_array_foreach(rep->messages, i, m) {
        if (kg_msg_is(m, KG_MSG_SANDBOX))
            return 0;
    }
    const char *err = rep->err.head ? rep->err.head : "";
    char how[64];
    if (rep->end == KG_END_SIGNAL)
        snprintf(how, sizeof how, "was killed by signal %d", rep->signal);
    else
        snprintf(how, sizeof how, "ended (%s, status %d)", kg_child_end_name(rep->end), rep->exit_code);
    snprintf(why, why_cap, "the first run's %s %s before its sandbox report%s%.300s",
             rep->runner_ended ? "runner" : "judge", how, *err ? ": " : "", err);
    return 1;
}

/* After a run that timed the reference itself: its samples go into the cache for the next evaluation. */
static void store_reference_times(const kg_eval_options *opts, timing_talk *talk, const json_t *messages)
{
    /* Only samples the judge took alone (reference_timed): since v5 the cache holds no reference time taken
     * beside a candidate's calls. */
    if (!opts->refcache || !talk->key[0] || !talk->timed_alone || !talk->cached_reference)
        return;
    size_t i;
    json_t *m, *lookup = NULL;
    json_array_foreach(messages, i, m) {
        if (kg_msg_is(m, KG_MSG_REFERENCE_CACHE_LOOKUP))
            lookup = m;
    }
    const json_t *samples = json_object_get(talk->cached_reference, "reference_ms");
    const json_t *device = json_object_get(talk->cached_reference, "reference_device_ms");
    if (!lookup || json_array_size(samples) == 0)
        return;
    kg_buf protocol = {0};
    kg_eval_reference_protocol(opts, lookup, &protocol);
    if (protocol.data)
        kg_refcache_put(opts->refcache, talk->key, samples, device, json_string_value(json_object_get(lookup, "gpu")),
                        json_string_value(json_object_get(lookup, "dtype")), protocol.data, NULL);
    kg_buf_free(&protocol);
}

void kg_eval_extract(const char *response, size_t len, kg_eval_extraction *out)
{
    memset(out, 0, sizeof *out);
    kg_error_clear(&out->err);
    out->rc = kg_extract_candidate(response ? response : "", len, &out->ex, &out->err);
}

void kg_eval_extraction_free(kg_eval_extraction *x)
{
    kg_extract_result_free(&x->ex);
}

int kg_eval_run(kg_supervisor *sup, const kg_eval_options *opts, const kg_eval_request *req,
                json_t **result, kg_error *err)
{
    *result = NULL;
    double t0 = kg_now_ms();
    kg_eval_extraction own;
    const kg_eval_extraction *x = req->extracted;
    if (!x) {
        kg_eval_extract(req->response, req->response_len, &own);
        x = &own;
    }
    const kg_extract_result *exr = &x->ex;
    int rc = x->rc;
    if (rc == KG_ERR_NOMEM || rc != KG_OK) {
        if (rc == KG_ERR_NOMEM) {
            rc = kg_error_set(err, rc, "out of memory extracting the candidate");
        } else {
            /* Nothing usable: the verdict is "invalid" and no child is needed. */
            json_t *stage = extract_stage("fail", kg_now_ms() - t0, x->err.message);
            rc = stage ? kg_eval_build_result(opts, req, NULL, NULL, stage, result, err)
                       : kg_error_set(err, KG_ERR_NOMEM, "out of memory building the extract stage");
            json_decref(stage);
            if (rc == KG_OK && kg_json_set(*result, "wall_ms", kg_json_number(kg_now_ms() - t0)) != 0) {
                json_decref(*result);
                *result = NULL;
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory building the result");
            }
        }
        if (x == &own)
            kg_eval_extraction_free(&own);
        return rc;
    }
    json_t *stage = extract_stage("ok", kg_now_ms() - t0, exr->detail);

    char *dir = NULL;
    int dir_lock = -1; /* held until the folder is removed: a kgym killed before leaves it to a later one's sweep */
    rc = stage ? kg_temp_dir_owned("kgym-eval", &dir, &dir_lock, err)
               : kg_error_set(err, KG_ERR_NOMEM, "out of memory building the extract stage");
    kg_buf path = {0};
    if (rc == KG_OK && kg_buf_printf(&path, "%s/candidate.py", dir) != KG_OK)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory naming the candidate's file");
    if (rc == KG_OK)
        rc = kg_file_write(path.data, exr->code, exr->code_len, err);
    json_t *job = NULL;
    json_t *timeouts = NULL;
    kg_child_report rep;
    memset(&rep, 0, sizeof rep);
    char nonce[33] = "";
    if (rc == KG_OK)
        rc = kg_eval_make_nonce(nonce, err);
    timing_talk talk = {.opts = opts, .task = req->task, .nonce = nonce};
    int solo_rerun = 0, restarted = 0;
    char solo_reason[256] = "", restart_why[512] = "";
    json_t *policy = NULL;
    if (rc == KG_OK)
        rc = kg_eval_policy(opts, &policy, err);
    if (rc == KG_OK) {
        int cpu = strcmp(opts->device, "cpu") == 0;
        job = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "type", kg_msg_name(KG_MSG_JOB), "workdir", dir,
                        "candidate", path.data, "task", req->task->path, "tiny_budget",
                        (json_int_t)opts->tiny_budget_elements, "seed", (int)opts->seed, "threads",
                        1);
        /* The job is what the judge runs: one field lost would run another evaluation than asked. */
        int ok = kg_json_set(job, "device", json_string(cpu ? "cpu" : "cuda")) == 0;
        ok = ok && kg_json_set(job, "budget", cpu && opts->budget_elements > 0 ? json_integer(opts->budget_elements)
                                                                               : json_null()) == 0;
        ok = ok && kg_json_set(job, "atol", opts->atol >= 0 ? kg_json_number(opts->atol) : json_null()) == 0;
        ok = ok && kg_json_set(job, "rtol", opts->rtol >= 0 ? kg_json_number(opts->rtol) : json_null()) == 0;
        /* How outputs are judged (compare.variant_tolerance): the share C's rule allows below the floor, so that
         * the judge gathers the float64 facts exactly when this file's rule needs them. */
        ok = ok && kg_json_set(job, "tolerance", json_pack("{s:s, s:f}", "profile", kg_eval_tolerance_name(opts),
                                                           "below_floor_share", KG_BELOW_FLOOR_SHARE)) == 0;
        json_t *half = json_array();
        if (ok && opts->half && strstr(opts->half, "fp16"))
            ok = kg_json_push(half, json_string("fp16")) == 0;
        if (ok && opts->half && strstr(opts->half, "bf16"))
            ok = kg_json_push(half, json_string("bf16")) == 0;
        ok = kg_json_set(job, "half", half) == 0 && ok;
        if (ok && opts->variants && *opts->variants) {
            json_t *v = json_array();
            char *copy = kg_strdup(opts->variants), *save = NULL;
            ok = copy != NULL;
            for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; ok && t; t = strtok_r(NULL, ",", &save))
                ok = kg_json_push(v, kg_json_text(t)) == 0;
            free(copy);
            ok = kg_json_set(job, "variants", v) == 0 && ok;
        }
        ok = ok && kg_json_set(job, "all_variants", json_boolean(opts->all_variants != 0)) == 0;
        ok = ok && kg_json_set(job, "timing",
                            json_pack("{s:b, s:i, s:i, s:i, s:s, s:b, s:b}", "enabled", opts->timing && !cpu,
                                      "warmup", opts->timing_warmup, "rounds", opts->timing_rounds, "iters",
                                      opts->timing_iters, "reference_mode",
                                      opts->reference_mode ? opts->reference_mode : "eager", "reference_cache",
                                      opts->refcache != NULL, "profile", opts->profile != 0)) == 0;
        ok = ok && kg_json_set(json_object_get(job, "timing"), "round_ms", kg_json_number(opts->timing_round_ms)) == 0;
        ok = ok && kg_json_set(job, "gpu_arbiter", json_true()) == 0;
        ok = ok && kg_json_set(job, "nonce", json_string(nonce)) == 0;
        if (policy)
            ok = ok && kg_json_set(job, "policy", json_incref(policy)) == 0;
        ok = ok && kg_json_set(job, "coverage_floor",
                               opts->coverage_floor > 0 ? kg_json_number(opts->coverage_floor) : json_null()) == 0;
        /* The runner's sandbox (docs/threat-model.md): namespaces, uid, seccomp and Landlock on reads and
         * writes, on every device; --no-sandbox turns all of it off (debugging only). */
        ok = ok && kg_json_set(job, "sandbox", json_pack("{s:b, s:b, s:b, s:I, s:I}", "enabled", opts->sandbox != 0,
                                                         "seccomp", opts->sandbox != 0, "landlock", opts->sandbox != 0,
                                                         "workdir_bytes", (json_int_t)opts->workdir_bytes,
                                                         "workdir_files", (json_int_t)opts->workdir_files)) == 0;
        timeouts = json_object();
        for (int i = 0; ok && i < KG_EVAL_STAGE_COUNT; i++)
            ok = kg_json_set(timeouts, kg_eval_stage_names[i], kg_json_number(opts->stage_timeout_s[i])) == 0;
        kg_child_limits limits = opts->limits;
        limits.stage_timeouts_s = timeouts;
        limits.on_request = answer_child;
        limits.on_request_ctx = &talk;
        talk.job = job;
        rc = ok ? kg_supervisor_run(sup, job, &limits, &rep, err)
                : kg_error_set(err, KG_ERR_NOMEM, "out of memory building the evaluation's job");
        if (rc == KG_OK && !cpu && out_of_memory(&rep, solo_reason, sizeof solo_reason)) {
            /* Out of memory although the child retried alone: the other evaluations' memory may be to
             * blame (reservations are estimates; an evaluation that ran first holds what it allocated).
             * Run it once more with the whole device: first every other reservation must end (the others
             * finish, later ones wait behind this one), then the GPU is held exclusively for the whole run.
             * Only an out-of-memory error then is the candidate's. */
            kg_arbiter *arb = kg_supervisor_arbiter(sup);
            kg_arbiter_account *all = kg_arbiter_account_new(arb);
            kg_arbiter_request *solo = all ? kg_arbiter_request_reserve(arb, KG_GPU_EXCLUSIVE, all,
                                                                        KG_ARBITER_ALL_MEMORY)
                                           : NULL;
            /* Bounded like any wait for the GPU (supervisor.h): not granted in the evaluation's whole time
             * limit, the failure is kgym's, not the candidate's. */
            double limit_ms = opts->limits.total_timeout_s > 0 ? opts->limits.total_timeout_s * 1000.0 : -1;
            if (solo && !kg_arbiter_wait(solo, limit_ms)) {
                rc = kg_error_set(err, KG_ERR_INTERNAL, "the re-run alone after running out of GPU memory was "
                                                        "not granted the GPU in %.0f s", limit_ms / 1000.0);
            } else if (solo) {
                forget_run(&rep, &talk);
                rc = kg_json_set(job, "gpu_arbiter", json_false()) == 0
                         ? kg_supervisor_run(sup, job, &limits, &rep, err)
                         : kg_error_set(err, KG_ERR_NOMEM, "out of memory building the evaluation's job");
                solo_rerun = 1;
            }
            if (solo)
                kg_arbiter_release(solo);
            kg_arbiter_account_free(all);
        }
        if (rc == KG_OK && ended_before_sandbox(&rep, restart_why, sizeof restart_why)) {
            /* The judge ended before its sandbox report: no process had read a byte of the candidate yet (the
             * runner locks itself down before it does, and reports that first), so the end is kgym's or the
             * machine's, never the candidate's, and a verdict from it ("invalid: your code does not parse") would
             * be false.  Seen once on an H100 (twenty-sixth session: a kept judge's channel broke at its next job's
             * start, exit status 3).  Run once more in a pair forked for it (no warm pair, no kept judge); the
             * second run's end, whatever it is, is the result (a refused protection fails closed both times). */
            forget_run(&rep, &talk);
            limits.fresh_pair = 1;
            rc = kg_supervisor_run(sup, job, &limits, &rep, err);
            restarted = 1;
        }
    }
    if (rc == KG_OK) {
        /* kgym's own facts below are findings: one lost could be a hack unreported, so none may be. */
        int ok = kg_eval_screen_messages(rep.messages, nonce, NULL) == KG_OK;
        /* The runner's seccomp filter kills it with SIGSYS for a system call only an attack makes (a
         * network socket, ptrace, io_uring, a signal to another process...): kgym's own fact, added after
         * the screening, and a hack whatever else happened. */
        if (ok && rep.runner_ended && rep.end == KG_END_SIGNAL && rep.signal == SIGSYS)
            ok = kg_json_push(rep.messages, json_pack("{s:s, s:o}", "type", kg_msg_name(KG_MSG_SANDBOX_VIOLATION),
                                                      "stage", kg_json_text(rep.stage))) == 0;
        /* Processes the candidate started and left running (kgym's census of the runner's uid when the judge
         * was done): a daemon or a setsid grandchild meant to outlive the evaluation. */
        if (ok && rep.left_running > 0)
            ok = kg_json_push(rep.messages, json_pack("{s:s, s:i, s:o}", "type", kg_msg_name(KG_MSG_LEFT_RUNNING),
                                                      "count", rep.left_running, "names",
                                                      kg_json_text(rep.left_running_names))) == 0;
        /* Lines on the judge's socket that are not the runner's answers: the candidate wrote on the
         * harness's channel (the judge stopped at once and said so). */
        if (ok && rep.runner_ended && rep.end == KG_END_PROTOCOL) {
            /* The judge's own words for what it read (its runner_lost message: the line or the memory it
             * refused), as the evidence: a runner fault that is not a forgery shows itself there. */
            const char *said = NULL;
            size_t i;
            json_t *m;
            json_array_foreach(rep.messages, i, m) {
                const char *type = json_string_value(json_object_get(m, "type"));
                if (type && !strcmp(type, kg_msg_name(KG_MSG_RUNNER_LOST)))
                    said = json_string_value(json_object_get(m, "message"));
            }
            kg_buf sample = {0};
            int built = kg_buf_printf(&sample, "a line on the judge's socket that is not the runner's answer%s%.300s",
                                      said ? ": " : "", said ? said : "") == 0;
            /* kg_json_text: the cut may split a character of the runner's bytes, which json_pack's "s" refuses. */
            ok = built && kg_json_push(rep.messages, json_pack("{s:s, s:i, s:o}", "type", kg_msg_name(KG_MSG_FORGED),
                                                               "count", 1, "sample", kg_json_text(sample.data))) == 0;
            kg_buf_free(&sample);
        }
        if (ok && talk.cached_reference) /* after the screening: this line is kgym's own, not the child's */
            ok = kg_json_push(rep.messages, json_pack("{s:s, s:O, s:O*, s:s}", "type",
                                                      kg_msg_name(KG_MSG_REFERENCE_CACHE_SAMPLES), "reference_ms",
                                                      json_object_get(talk.cached_reference, "reference_ms"),
                                                      "reference_device_ms",
                                                      json_object_get(talk.cached_reference, "reference_device_ms"),
                                                      "source", talk.timed_alone ? "alone" : "cached")) == 0;
        /* The candidate's file as the judge wrote it for the runner, in the workdir the pair ran in (a warm
         * pair's is its own): <workdir>/src/<name> (harness transport.source_path), the name its tracebacks
         * carry. */
        kg_buf ran = {0};
        ok = ok && kg_buf_printf(&ran, "%s/src/candidate.py", rep.workdir && *rep.workdir ? rep.workdir : dir) == KG_OK;
        rc = ok ? kg_eval_build_result(opts, req, &rep, ran.data, stage, result, err)
                : kg_error_set(err, KG_ERR_NOMEM, "out of memory reading the evaluation's messages");
        kg_buf_free(&ran);
        /* Only a clean run's reference times are kept: a candidate caught cheating may have slowed the
         * reference down (work left running, a patched function) to inflate its own speedup next time. */
        if (rc == KG_OK && !strcmp(json_string_value(json_object_get(*result, "verdict")) ?: "", "correct"))
            store_reference_times(opts, &talk, rep.messages);
        if (rc == KG_OK) {
            json_t *cand = json_object_get(*result, "candidate");
            ok = kg_json_set(cand, "source", json_string(kg_extract_source_name(exr->source))) == 0;
            ok = ok && kg_json_set(*result, "wall_ms", kg_json_number(kg_now_ms() - t0)) == 0;
            ok = ok && kg_json_set(*result, "gpu_solo_rerun", json_boolean(solo_rerun)) == 0;
            /* whether the task's mode came from an earlier evaluation: kgym's own word, not the judge's */
            json_t *randomness = json_object_get(json_object_get(*result, "task"), "randomness");
            if (json_is_object(randomness))
                ok = ok && kg_json_set(randomness, "cached", json_boolean(talk.mode_served)) == 0;
            /* what ran out of memory the first time, while sharing; the cut may have split a character */
            if (solo_rerun)
                ok = ok && kg_json_set(*result, "gpu_solo_rerun_reason", kg_json_text(solo_reason)) == 0;
            /* how the first run ended, where it ended before the candidate was read (ended_before_sandbox) */
            ok = ok && kg_json_set(*result, "restarted", restarted ? kg_json_text(restart_why) : json_null()) == 0;
            if (!ok) {
                json_decref(*result);
                *result = NULL;
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory building the result");
            }
        }
    }
    kg_child_report_free(&rep);
    json_decref(job);
    json_decref(policy);
    json_decref(talk.cached_reference);
    json_decref(timeouts);
    json_decref(stage);
    if (dir) {
        kg_remove_tree(dir);
        free(dir);
    }
    if (dir_lock >= 0)
        close(dir_lock);
    kg_buf_free(&path);
    if (x == &own)
        kg_eval_extraction_free(&own);
    return rc;
}
