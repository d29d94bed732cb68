/* sched.c — the embedded scheduler's worker threads (see sched.h). */
#include "sched/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/tally.h"
#include "kgym/rl.h"
#include "task/task.h"
#include "util/json.h"


typedef struct worker {
    struct kg_sched *sched;
    pthread_t thread;
    int started, running_job;
    char name[192];
    char current[160];
    char key[KG_SHA256_STRLEN]; /* the content key of the current job ("" when none) */
    char group[65];             /* the routing group of the current job ("" when none: store.h kg_route) */
    unsigned long claim_no;     /* order of the current claim among this scheduler's (in-flight dedup) */
    double lease_ms;            /* Redis: kg_now_ms() when the current job's lease was last known held (its claim,
                                 * or a heartbeat that renewed it: kg_sched_leases_renewed) */
    int news;                   /* the store brought news of the current job (job_news; read and cleared by its
                                 * watch, job_no_longer_ours, without the lock: atomic) */
    long processed;
    double busy_ms, busy_since_ms, heartbeat;
    /* The current job's outcome as store_outcome stored it (the worker's own; ended = 0: none, or not known in
     * full): handed to on_job_end. */
    int ended;
    char end_status[16];
    char *end_error, *end_cached_from;
    double end_at;
    json_t *end_result;
} worker;

/* A submitted request, parsed (kg_sched_submitted). */
typedef struct handed {
    char *id, *text;
    json_t *request;
    struct handed *next;
} handed;

struct kg_sched {
    kg_sched_options o;
    kg_sched_profile profile; /* its options and device kind: what its workers' keys are made with */
    pthread_mutex_t lock;
    pthread_cond_t work_cv, done_cv, slot_cv;
    int stopping;
    int threads;    /* workers + spare_workers: the worker threads */
    int evaluating; /* jobs being evaluated now (at most o.workers: take_slot) */
    int late_job_end;         /* KGYM_FAULT_LATE_JOB_END (sched.h): on_job_end waits for the stop */
    unsigned long generation; /* bumped on every submit */
    unsigned long claims_ended; /* claims that returned (a job, none, an error): kg_sched_claims_ended (atomic) */
    unsigned long claims;     /* jobs claimed so far */
    worker *workers;
    handed *handed; /* newest first (under lock) */
    long n_handed;
    /* counters since start */
    kg_result_tally tally; /* the jobs this process's workers ended: results (by verdict, stage times) and those
                            * failed without one (eval/tally.h) */
    double queue_wait_sum_s;
    long queue_wait_count;
    long stopped_news, stopped_check; /* jobs stopped (cancelled, or ended elsewhere) as their watch learned it */
    int watching;      /* job_news is one of the store's watchers (kg_store_watch) */
    char home[192];    /* this process's name in a fleet (kg_route.home): "" where the store is not shared */
    /* A shared store: whether every live worker of the fleet reads routed claims' entries (fleet_routes), and
     * when that was last asked (kg_now_ms; 0: never). */
    int fleet_routes, fleet_said_off;
    double fleet_asked_ms;
    double check_ms;   /* how often a job's watch reads the store without news (job_no_longer_ours) */
};

/* How often a running job's watch reads its job from the store when no news came: twice a second where other
 * processes may end it without news (SQLite: another server or worker process sharing the file; the memory store
 * too, which cannot say that none does), every 5 s as a safety net where the store brings news of every process
 * (KG_STORE_NEWS: Redis, whose subscription may have been away a moment). */
#define KG_SCHED_CHECK_MS 500.0
#define KG_SCHED_CHECK_NEWS_MS 5000.0

static void deadline_in(struct timespec *ts, double s)
{
    kg_deadline_in(ts, s); /* work_cv and done_cv run on CLOCK_MONOTONIC (kg_cond_init) */
}

static void count_result(kg_sched *s, const json_t *result, int failed, double queue_wait_s)
{
    pthread_mutex_lock(&s->lock);
    kg_result_tally_add(&s->tally, failed ? NULL : result); /* a failed job has no verdict: tally.missing */
    if (queue_wait_s >= 0) {
        s->queue_wait_sum_s += queue_wait_s;
        s->queue_wait_count++;
    }
    pthread_mutex_unlock(&s->lock);
}

int kg_sched_profile_of(const kg_eval_options *e, const char *device_kind, kg_sched_profile *out)
{
    memset(out, 0, sizeof *out);
    if (!device_kind)
        device_kind = e->device ? e->device : "cpu";
    char ph[KG_SHA256_STRLEN];
    const char *policy = e->policy_json ? e->policy_json : "";
    if (kg_sha256_string(policy, strlen(policy), ph) != KG_OK)
        return KG_ERR_INTERNAL;
    kg_buf k = {0};
    int wr = KG_OK; /* any write failed (memory): a key cut short would name another profile */
    /* /2: results are decided failing closed (a pass needs every fact: result.c kg_eval_unjudged), so a result
     * stored under /1 rules is never served as an answer under these.  /3: the first failing variant ends the
     * stage and the variants run cheapest first (which later hack a wrong kernel shows depends on both), and a
     * variant skipped for the task's sake counts as reported (an honest result that was runtime_error under /2). */
    wr |= kg_buf_printf(&k, "kgym.profile/3|device=%s|seed=%u|budget=%ld,%ld|", device_kind, e->seed,
                        e->budget_elements, e->tiny_budget_elements);
    wr |= kg_buf_printf(&k, "tolerance=%s|",
                        kg_eval_tolerance_profile_known(e->tolerance_profile) ? e->tolerance_profile : "strict");
    wr |= kg_buf_printf(&k, "tol=%.17g,%.17g|variants=%s|half=%s|credit=%.17g,%.17g,%.17g,%.17g,%.17g|", e->atol,
                        e->rtol, e->variants ? e->variants : "", e->half ? e->half : "", e->credit[0], e->credit[1],
                        e->credit[2], e->credit[3], e->credit[4]);
    wr |= kg_buf_printf(&k,
                        "timing=%d,%d,%d,%d,%.17g,%d,%.17g|profile=%d|policy=%s|penalty=%.17g|floor=%.17g|sandbox=%d|",
                        e->timing, e->timing_warmup, e->timing_rounds, e->timing_iters, e->timing_round_ms,
                        e->timing_max_rounds, e->timing_cv_threshold, e->profile, ph, e->hack_penalty,
                        e->coverage_floor, e->sandbox);
    /* Named only when set (the default, 0.003; 0 turns it off), so a profile that turns it off hashes as one from
     * before the option existed. */
    if (e->timing_agree > 0)
        wr |= kg_buf_printf(&k, "timing_agree=%.17g|", e->timing_agree);
    wr |= kg_buf_printf(&k, "unprotected=%s|", e->allow_unprotected ? e->allow_unprotected : "");
    /* A run that stops at the first failing variant may miss a hack that a later one shows (incorrect where
     * --all-variants says hacked: the red team's relu_hack_after_failure), so the two never answer for each other. */
    wr |= kg_buf_printf(&k, "all_variants=%d|", e->all_variants != 0);
    wr |= kg_buf_puts(&k, "stages=");
    for (int i = 0; i < KG_EVAL_STAGE_COUNT; i++)
        wr |= kg_buf_printf(&k, "%.17g,", e->stage_timeout_s[i]);
    wr |= kg_buf_printf(&k, "|limits=%.17g,%zu,%zu,%llu,%llu,%.17g,%llu|", e->limits.default_stage_timeout_s,
                  e->limits.capture_bytes, e->limits.output_limit_bytes, e->limits.address_space_bytes,
                  e->limits.file_size_bytes, e->limits.cpu_seconds, e->limits.runner_memory_bytes);
    int rc = wr == KG_OK ? kg_sha256_string(k.data, k.len, out->hash) : KG_ERR_NOMEM;
    kg_buf_free(&k);
    snprintf(out->reference_mode, sizeof out->reference_mode, "%s",
             e->reference_mode ? e->reference_mode : "eager"); /* run_job's default */
    snprintf(out->tolerance_profile, sizeof out->tolerance_profile, "%s",
             kg_eval_tolerance_profile_known(e->tolerance_profile) ? e->tolerance_profile : "strict");
    out->timeout_s = e->limits.total_timeout_s;
    return rc;
}

json_t *kg_sched_profile_json(const kg_sched_profile *p)
{
    return json_pack("{s:s, s:s, s:s, s:f}", "hash", p->hash, "reference_mode", p->reference_mode,
                     "tolerance_profile", p->tolerance_profile, "timeout_s", p->timeout_s);
}

int kg_sched_profile_from_json(const json_t *j, kg_sched_profile *out)
{
    memset(out, 0, sizeof *out);
    const char *h = json_string_value(json_object_get(j, "hash"));
    const char *m = json_string_value(json_object_get(j, "reference_mode"));
    json_t *t = json_object_get(j, "timeout_s");
    if (!h || strlen(h) >= sizeof out->hash || !m || strlen(m) >= sizeof out->reference_mode || !json_is_number(t))
        return KG_ERR_INVALID;
    snprintf(out->hash, sizeof out->hash, "%s", h);
    snprintf(out->reference_mode, sizeof out->reference_mode, "%s", m);
    const char *tp = json_string_value(json_object_get(j, "tolerance_profile"));
    if (tp && !kg_eval_tolerance_profile_known(tp))
        return KG_ERR_INVALID;
    snprintf(out->tolerance_profile, sizeof out->tolerance_profile, "%s", tp ? tp : "strict");
    out->timeout_s = json_number_value(t);
    return KG_OK;
}

int kg_sched_content_key(const kg_sched_profile *p, const json_t *request, char key[KG_SHA256_STRLEN])
{
    const char *ref = json_string_value(json_object_get(request, "reference_code"));
    const char *kernel = json_string_value(json_object_get(request, "kernel_code"));
    if (!ref || !kernel)
        return KG_ERR_INVALID;
    /* What run_job evaluates with: the request's timeout and reference mode, else the profile's. */
    double timeout = json_number_value(json_object_get(request, "timeout"));
    if (timeout <= 0)
        timeout = p->timeout_s;
    const char *ref_mode = json_string_value(json_object_get(request, "reference_mode"));
    if (!ref_mode)
        ref_mode = p->reference_mode;
    const char *tolerance = json_string_value(json_object_get(request, "tolerance_profile"));
    if (!tolerance)
        tolerance = p->tolerance_profile[0] ? p->tolerance_profile : "strict";
    json_int_t perf_trials = json_integer_value(json_object_get(request, "num_perf_trials"));
    char rh[KG_SHA256_STRLEN];
    if (kg_sha256_string(ref, strlen(ref), rh) != KG_OK)
        return KG_ERR_INTERNAL;
    kg_buf k = {0};
    /* Both writes checked: a key cut short would name other content. */
    int rc = kg_buf_printf(&k, "kgym.key/4|%s|ref=%s|perf_trials=%lld|timeout=%.17g|reference=%s|tolerance=%s|",
                           p->hash, rh, (long long)perf_trials, timeout, ref_mode, tolerance) == KG_OK &&
                     kg_buf_puts(&k, kernel) == KG_OK
                 ? kg_sha256_string(k.data, k.len, key)
                 : KG_ERR_NOMEM;
    kg_buf_free(&k);
    return rc;
}

/* Sleeps up to pause_s unless the scheduler stops; returns 1 when it stops. */
static int pause_unless_stopping(kg_sched *s, double pause_s)
{
    pthread_mutex_lock(&s->lock);
    if (!s->stopping) {
        struct timespec ts;
        deadline_in(&ts, pause_s);
        pthread_cond_timedwait(&s->work_cv, &s->lock, &ts);
    }
    int stop = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* Sleeps up to pause_s or until a worker of this scheduler ends a job, unless the scheduler stops; returns 1 when
 * it stops. */
static int wait_job_end(kg_sched *s, double pause_s)
{
    pthread_mutex_lock(&s->lock);
    if (!s->stopping) {
        struct timespec ts;
        deadline_in(&ts, pause_s);
        pthread_cond_timedwait(&s->done_cv, &s->lock, &ts);
    }
    int stop = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* Writes a job's outcome.  A write that fails (a full disk, a lost database, Redis away) is retried with a
 * growing pause.  A job that is no longer running (cancelled meanwhile) needs nothing.  Only a stopping scheduler
 * gives up at once: the job stays running, and the next server re-queues it (SQLite) or its lease runs out
 * (Redis).
 * Without leases (SQLite, memory): after three tries the job is failed with the reason instead (a smaller write: the disk may be full), or
 * else given back to the queue, and so on until one of them is stored.
 * Leased (KG_STORE_LEASED: Redis): a finished evaluation is not thrown away because Redis is away a while (a restart): its result is tried
 * again for as long as this worker surely holds the job's lease, that is until one lease after the later of its
 * claim and the last heartbeat that renewed it (none does while Redis is away), and at most one lease after the
 * first failure (a Redis that answers heartbeats but refuses this write must not hold the worker for ever).  Then
 * the job is given back to the queue, or, Redis still away, left to lease recovery: another worker takes it over
 * and evaluates it again (at-least-once).  Never failed for Redis's absence: that would lose a job that was fine. */
/* What store_outcome stored, for on_job_end: status with result_json (done; NULL: not known in memory) or error. */
static void ended_as(worker *w, const char *status, json_t *result_json, const char *error, const char *cached_from,
                     double at)
{
    if (!strcmp(status, "done") && !result_json)
        return; /* a result not parsed (a copy without memory to parse it): its waiters read it from the store */
    w->ended = 1;
    snprintf(w->end_status, sizeof w->end_status, "%s", status);
    w->end_error = error ? kg_strdup(error) : NULL;
    w->end_cached_from = cached_from ? kg_strdup(cached_from) : NULL;
    w->end_result = json_incref(result_json);
    w->end_at = at;
    if ((error && !w->end_error) || (cached_from && !w->end_cached_from))
        w->ended = 0; /* no memory: its waiters read the store */
}

static void end_clear(worker *w)
{
    w->ended = 0;
    free(w->end_error);
    free(w->end_cached_from);
    json_decref(w->end_result);
    w->end_error = w->end_cached_from = NULL;
    w->end_result = NULL;
}

static void store_outcome(worker *w, const char *id, const char *status, const char *result, json_t *result_json,
                          const char *error, const char *key, const char *cached_from)
{
    kg_sched *s = w->sched;
    int leased = kg_store_has(s->o.store, KG_STORE_LEASED);
    double pause = 0.5, first_fail_ms = 0;
    char reason[1200] = "";
    for (int attempt = 0;; attempt++) {
        kg_error e;
        kg_error_clear(&e);
        int rc;
        double at = kg_wall_s();
        if (attempt < 3 || leased) {
            rc = kg_store_finish_at(s->o.store, id, status, result, result_json, error, key && key[0] ? key : NULL,
                                    cached_from,
                                    at, &e);
            if (rc == KG_OK)
                ended_as(w, status, result_json, error, cached_from, at);
        } else if (attempt % 2) {
            rc = kg_store_finish_at(s->o.store, id, "failed", NULL, NULL, reason, NULL, NULL, at, &e);
            if (rc == KG_OK)
                ended_as(w, "failed", NULL, reason, NULL, at);
        } else {
            rc = kg_store_requeue(s->o.store, id, reason, &e);
        }
        if (rc == KG_OK || rc == KG_ERR_NOT_FOUND || rc == KG_ERR_INVALID) {
            if (attempt)
                fprintf(stderr, "kgym: job %s: outcome stored after %d retries (%s)\n", id, attempt,
                        attempt < 3 || leased ? "its result" : attempt % 2 ? "failed with the reason" : "queued again");
            return;
        }
        double now = kg_now_ms();
        if (!attempt)
            first_fail_ms = now;
        if (attempt == 2 || !reason[0])
            snprintf(reason, sizeof reason, "the evaluation ended but its outcome could not be stored: %.1000s",
                     e.message);
        if (leased) {
            pthread_mutex_lock(&s->lock);
            double held = w->lease_ms;
            pthread_mutex_unlock(&s->lock);
            double lease_s = s->o.lease_s > 0 ? s->o.lease_s : 60; /* the store's default */
            double left_s = ((held < first_fail_ms ? held : first_fail_ms) + lease_s * 1000 - now) / 1000;
            if (left_s <= 0) {
                kg_error qe;
                int qrc = kg_store_requeue(s->o.store, id, reason, &qe);
                fprintf(stderr, "kgym: job %s: its result could not be stored while this worker held its lease (%s); "
                        "%s\n", id, e.message, qrc == KG_OK ? "queued again: it is evaluated again"
                        : qrc == KG_ERR_NOT_FOUND ? "it is no longer running here"
                        : "left to lease recovery: another worker takes it over and evaluates it again");
                return;
            }
            if (pause > left_s)
                pause = left_s;
        }
        fprintf(stderr, "kgym: job %s: cannot store its outcome (%s); retrying in %.1f s\n", id, e.message, pause);
        if (pause_unless_stopping(s, pause))
            return;
        /* Leased (Redis): at most 2 s, so that a result in hand is stored soon after Redis is back (the worker waits
         * meanwhile, and a refused connection costs nothing). */
        double cap = leased ? 2 : 5;
        pause = pause * 2 < cap ? pause * 2 : cap;
    }
}

/* Finishes a job with the result of job `from` (result: its stored text; a job of the same key).  The copy is
 * parsed, so that on_job_end hands it over in full, cached_from included, as an evaluated job's: an owner that
 * takes each outcome from on_job_end (bench --dedup) learns of a twin's answer without reading the store, and the
 * service's waiters are answered from memory.  A parse that fails (memory) stores the text alone: the end is then
 * not known in full (sched.h). */
static void store_copy(worker *w, const char *id, const char *result, const char *from)
{
    json_t *parsed = json_loads(result, 0, NULL);
    store_outcome(w, id, "done", result, parsed, NULL, w->key, from);
    json_decref(parsed);
}

/* Whether the job a worker runs is still its to run: cancelled (DELETE, on this server or another one sharing
 * the store), or finished by another process, its evaluation is stopped.  Asked by the supervisor every 50 ms at
 * most (and by a follower after each wait).  The job is read from the store when the store brought news of it
 * (job_news: a cancel in this process, at once; Redis's kgym:done from any process of a fleet), so a running
 * evaluation stops within the supervisor's 50 ms of its cancel; and without news at once when the watch starts
 * (a cancel between the claim and the watch had no worker to tell) and then every check_ms (KG_SCHED_CHECK_MS:
 * another process sharing an SQLite file cancels without telling anyone). */
typedef struct {
    kg_sched *s;
    worker *w;
    const char *id;
    double next_ms;
    int stop;
} job_watch;

static int job_no_longer_ours(void *ctx)
{
    job_watch *jw = ctx;
    if (jw->stop)
        return 1;
    int told = __atomic_exchange_n(&jw->w->news, 0, __ATOMIC_SEQ_CST);
    double now = kg_now_ms();
    if (!told && now < jw->next_ms)
        return 0;
    jw->next_ms = now + jw->s->check_ms;
    kg_job j;
    kg_error err;
    if (kg_store_get(jw->s->o.store, jw->id, &j, &err) != KG_OK) /* a store that cannot answer stops nothing */
        return 0;
    jw->stop = !j.status || strcmp(j.status, "running") != 0;
    if (jw->stop) {
        pthread_mutex_lock(&jw->s->lock);
        if (told)
            jw->s->stopped_news++;
        else
            jw->s->stopped_check++;
        pthread_mutex_unlock(&jw->s->lock);
        fprintf(stderr, "kgym: %s: job %s is %s: stopped (%s)\n", jw->w->name, jw->id, j.status ? j.status : "gone",
                told ? "news from the store" : "seen on the worker's own check of the store");
    }
    kg_job_free(&j);
    return jw->stop;
}

/* The store's news (kg_store_watch): job id ended or was cancelled somewhere, or (NULL) news may have been missed.
 * The worker running it reads it at its watch's next call; a follower waiting (wait_job_end) is woken for it. */
static void job_news(void *arg, const char *id)
{
    kg_sched *s = arg;
    pthread_mutex_lock(&s->lock);
    int any = 0;
    for (int i = 0; i < s->threads; i++) {
        worker *w = &s->workers[i];
        if (w->running_job && (!id || !strcmp(w->current, id))) {
            __atomic_store_n(&w->news, 1, __ATOMIC_SEQ_CST);
            any = 1;
        }
    }
    if (any)
        pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->lock);
}

/* One job: the reference goes to a file named by its hash, the candidate
 * through kg_eval_run; the outcome goes back to the store.  req: the job's
 * stored request, parsed (NULL when it would not parse); borrowed. */
static void run_job(worker *w, kg_job *job, const json_t *req)
{
    kg_sched *s = w->sched;
    kg_error err;
    kg_error_clear(&err);
    json_t *result = NULL;
    int rc;
    kg_task task;
    memset(&task, 0, sizeof task);
    const char *ref = json_string_value(json_object_get(req, "reference_code"));
    const char *kernel = json_string_value(json_object_get(req, "kernel_code"));
    job_watch watch = {.s = s, .w = w, .id = job->id};
    if (s->o.evaluate) { /* the pool's owner says what the job is (sched.h) */
        kg_eval_options opts = s->o.eval;
        opts.limits.stop_requested = job_no_longer_ours;
        opts.limits.stop_ctx = &watch;
        rc = s->o.evaluate(s->o.evaluate_arg, s->o.sup, &opts, job, req, &result, &err);
    } else if (!req || !ref || !kernel) {
        rc = kg_error_set(&err, KG_ERR_INVALID, "the stored request of job %s is unreadable", job->id);
    } else {
        rc = kg_task_from_source(ref, strlen(ref), json_string_value(json_object_get(req, "task")),
                                 s->o.task_dir, &task, &err);
    }
    if (rc == KG_OK && !s->o.evaluate) {
        kg_eval_options opts = s->o.eval;
        double timeout = json_number_value(json_object_get(req, "timeout"));
        if (timeout > 0)
            opts.limits.total_timeout_s = timeout;
        /* The request's reference_backend (kernelgym.c), else the server's --reference-mode. */
        const char *ref_mode = json_string_value(json_object_get(req, "reference_mode"));
        if (ref_mode)
            opts.reference_mode = ref_mode;
        /* The request's tolerance_profile (kernelgym.c checked it at submit), else the server's. */
        const char *tolerance = json_string_value(json_object_get(req, "tolerance_profile"));
        if (tolerance && !kg_eval_tolerance_profile_known(tolerance))
            rc = kg_error_set(&err, KG_ERR_INVALID, "the stored request names an unknown tolerance profile \"%.40s\"",
                              tolerance);
        else if (tolerance)
            opts.tolerance_profile = tolerance;
        opts.limits.stop_requested = job_no_longer_ours;
        opts.limits.stop_ctx = &watch;
        kg_eval_request er = {.task = &task, .response = kernel, .response_len = strlen(kernel),
                              .candidate_name = "kernel_code"};
        if (rc == KG_OK)
            rc = kg_eval_run(s->o.sup, &opts, &er, &result, &err);
    }
    if (rc == KG_ERR_CANCELLED) { /* stopped for its cancel: the store already says so, nothing to count */
        kg_task_free(&task);
        return;
    }
    char *text = result ? json_dumps(result, JSON_COMPACT) : NULL;
    if (rc == KG_OK && text)
        store_outcome(w, job->id, "done", text, result, NULL, w->key, NULL);
    else
        store_outcome(w, job->id, "failed", NULL, NULL,
                      err.message[0] ? err.message : "the evaluation produced no result", w->key, NULL);
    count_result(s, result, !(rc == KG_OK && text),
                 job->started_at > 0 && job->submitted_at > 0 ? job->started_at - job->submitted_at : -1);
    free(text);
    json_decref(result);
    kg_task_free(&task);
}

/* In-flight dedup: a job with the very content another job is being evaluated for now (a client's retry under
 * a new id, the same sample submitted twice) waits for that evaluation and is finished with its result: one
 * evaluation, not two.  The first job claimed with a key marks itself its leader (kg_store_inflight_lead: in
 * this process for a store that is not shared; in Redis, inflight:{key}, renewed by its worker's heartbeat, gone
 * a lease after that worker dies); a job claimed with the same key meanwhile, by a worker of this process or
 * anywhere in the fleet, follows it: it waits (woken when a worker of this process ends a job, else twice a
 * second), re-reads the leader's job, and is finished with its result once it is done (cached_from names it).
 * A follower never leads while it follows, so two jobs never wait for each other.  The follower evaluates itself instead
 * when the leader ends otherwise (failed, cancelled, queued again, expired), when its mark is gone (its worker
 * died: the follower then leads), or past twice its own time limit plus a lease (a follower never waits for
 * ever).  force_refresh asks for an evaluation of its own: such a job may lead, never follows.  Returns 1 when
 * the job needs nothing more (followed, cancelled meanwhile, or the scheduler stopping: the job then stays
 * running for the lease to hand over); 0 when it must be evaluated, *leading set when it holds the mark (the
 * caller removes it after the evaluation). */
static int follow_identical(worker *w, const kg_job *job, const json_t *req, int *leading)
{
    kg_sched *s = w->sched;
    *leading = 0;
    if (!w->key[0] || !job->id)
        return 0;
    int fresh = json_is_true(json_object_get(req, "force_refresh"));
    double timeout = json_number_value(json_object_get(req, "timeout"));
    if (timeout <= 0)
        timeout = s->profile.timeout_s > 0 ? s->profile.timeout_s : 3600;
    double give_up = kg_now_ms() + (2 * timeout + s->o.lease_s + 60) * 1000.0;
    job_watch watch = {.s = s, .w = w, .id = job->id};
    char stale[160] = "";
    for (int rounds = 0; rounds < 1000; rounds++) { /* each round a new leader: bounded all the same */
        char leader[160];
        kg_error err;
        if (kg_store_inflight_lead(s->o.store, w->key, job->id, stale, leader, &err) != KG_OK)
            return 0; /* no mark (Redis away): no dedup, evaluate */
        if (!strcmp(leader, job->id)) {
            *leading = 1;
            return 0;
        }
        if (fresh)
            return 0;
        stale[0] = '\0';
        for (;;) {
            if (wait_job_end(s, 0.5))
                return 1;
            if (job_no_longer_ours(&watch))
                return 1; /* cancelled while it waited */
            if (kg_now_ms() > give_up) {
                fprintf(stderr, "kgym: job %s: gave up waiting for the identical job %s; evaluating it\n", job->id,
                        leader);
                return 0;
            }
            kg_job lj;
            int grc = kg_store_get(s->o.store, leader, &lj, &err);
            if (grc == KG_ERR_NOT_FOUND) {
                snprintf(stale, sizeof stale, "%s", leader);
                break;
            }
            if (grc != KG_OK)
                continue; /* Redis away a moment: the deadline bounds the wait */
            int running = lj.status && !strcmp(lj.status, "running");
            int done = lj.status && !strcmp(lj.status, "done") && lj.result && lj.key && !strcmp(lj.key, w->key);
            if (done)
                store_copy(w, job->id, lj.result, leader);
            kg_job_free(&lj);
            if (done)
                return 1;
            if (!running) { /* failed, cancelled, queued again, or done under another key: over */
                snprintf(stale, sizeof stale, "%s", leader);
                break;
            }
            char now_leads[160];
            if (kg_store_inflight_leader(s->o.store, w->key, now_leads, &err) == KG_OK && strcmp(now_leads, leader))
                break; /* its mark expired (its worker died) or passed on: lead, or follow the next one */
        }
    }
    return 0;
}

/* Dedup at claim: a job whose key (this worker's: its settings, its device kind) has a done result is finished
 * with it, unevaluated.  The API server answered from the store at submit only under its own key, which differs
 * from this worker's when their settings or devices differ (a fleet).  Returns 1 when it was so finished. */
static int answer_from_store(worker *w, const kg_job *job, const json_t *req)
{
    kg_sched *s = w->sched;
    if (!w->key[0] || json_is_true(json_object_get(req, "force_refresh")))
        return 0;
    kg_job done;
    kg_error err;
    if (kg_store_find_done(s->o.store, w->key, &done, &err) != KG_OK)
        return 0;
    int answered = done.result && done.id && strcmp(done.id, job->id) != 0;
    if (answered)
        store_copy(w, job->id, done.result, done.id);
    kg_job_free(&done);
    return answered;
}

/* The claimed job's request as its submitter handed it (kg_sched_submitted), or NULL: parse the stored text. */
static json_t *take_handed(kg_sched *s, const kg_job *job)
{
    json_t *req = NULL;
    pthread_mutex_lock(&s->lock);
    for (handed **p = &s->handed; *p; p = &(*p)->next) {
        handed *h = *p;
        if (job->id && !strcmp(h->id, job->id)) {
            *p = h->next;
            s->n_handed--;
            if (job->request && !strcmp(h->text, job->request)) /* not replaced meanwhile */
                req = json_incref(h->request);
            json_decref(h->request);
            free(h->id);
            free(h->text);
            free(h);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return req;
}

static void handed_free(handed *h)
{
    while (h) {
        handed *next = h->next;
        json_decref(h->request);
        free(h->id);
        free(h->text);
        free(h);
        h = next;
    }
}

void kg_sched_submitted(kg_sched *s, const char *id, const char *text, json_t *request)
{
    if (!s->o.workers || !id || !text || !request)
        return; /* nobody here claims it */
    handed *h = calloc(1, sizeof *h);
    if (!h || !(h->id = kg_strdup(id)) || !(h->text = kg_strdup(text))) {
        handed_free(h); /* no memory: its worker parses */
        return;
    }
    h->request = json_incref(request);
    pthread_mutex_lock(&s->lock);
    h->next = s->handed;
    s->handed = h;
    long cap = s->o.max_queue > 0 ? s->o.max_queue + s->threads : 1024;
    handed *drop = NULL;
    if (++s->n_handed > cap) { /* claimed elsewhere, or cancelled while queued: the oldest goes */
        handed **p = &s->handed;
        while ((*p)->next)
            p = &(*p)->next;
        drop = *p;
        *p = NULL;
        s->n_handed--;
    }
    pthread_mutex_unlock(&s->lock);
    handed_free(drop);
}

/* An evaluation slot: at most o.workers jobs are evaluated at once, whatever the number of threads.  A thread
 * beyond them (spare_workers) holds a claimed job that must be evaluated here until a slot is free; one that
 * follows an identical job in flight (follow_identical) or is answered from the store takes none, so with spare
 * threads a follower costs no evaluation.  Returns 1 with a slot taken (give it back with give_slot); 0 when the
 * job was cancelled or ended elsewhere meanwhile, or the scheduler stops (the job then stays running for its
 * lease to hand over, as a stopped follower's). */
static int take_slot(worker *w, const kg_job *job)
{
    kg_sched *s = w->sched;
    job_watch watch = {.s = s, .w = w, .id = job->id};
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        if (s->evaluating < s->o.workers) {
            s->evaluating++;
            pthread_mutex_unlock(&s->lock);
            return 1;
        }
        struct timespec ts;
        deadline_in(&ts, 0.5);
        pthread_cond_timedwait(&s->slot_cv, &s->lock, &ts);
        pthread_mutex_unlock(&s->lock);
        if (job->id && job_no_longer_ours(&watch))
            return 0; /* cancelled while it waited */
        pthread_mutex_lock(&s->lock);
    }
}

static void give_slot(kg_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->evaluating--;
    pthread_cond_broadcast(&s->slot_cv);
    pthread_mutex_unlock(&s->lock);
}

int kg_sched_group_of(const json_t *request, char out[65])
{
    /* up to its first NUL, as run_job writes it */
    return kg_task_group(json_string_value(json_object_get(request, "reference_code")), out);
}

/* Routed claims give a stream entry to another job than the one it names (redis.c claim_script, kgym:bound).  A
 * worker of a release before routing reads an entry as the job it names: taking over a dead worker's entry that was
 * given to another job, it would drop the entry as stale, and that job would stay running under the dead worker for
 * ever (red team 10).  So in a fleet a pool routes only while every live worker says, in its heartbeat, that it reads
 * such entries ("routed_entries", kg_sched_workers); asked every KG_SCHED_GATE_MS.  An older worker that joins is
 * seen at the next ask, so a routed entry it could misread exists only if a worker also dies within that time.  Each
 * ask reads every worker's heartbeat (kg_store_workers): every 5 s a process, not per claim. */
#define KG_SCHED_GATE_MS 5000.0

static int fleet_routes(kg_sched *s)
{
    double now = kg_now_ms();
    pthread_mutex_lock(&s->lock);
    int known = s->fleet_asked_ms > 0 && now - s->fleet_asked_ms < KG_SCHED_GATE_MS, open = s->fleet_routes;
    if (!known)
        s->fleet_asked_ms = now; /* one thread asks; the others use the last answer meanwhile */
    pthread_mutex_unlock(&s->lock);
    if (known)
        return open;
    json_t *workers = NULL;
    kg_error err;
    if (kg_store_workers(s->o.store, &workers, &err) != KG_OK)
        return open; /* the store did not answer: the last answer stands (closed at first) */
    const char *older = NULL;
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w) if (!json_is_true(json_object_get(w, "routed_entries")) && !older)
        older = json_string_value(json_object_get(w, "id"));
    pthread_mutex_lock(&s->lock);
    int said = s->fleet_said_off;
    s->fleet_routes = !older;
    s->fleet_said_off = !!older;
    pthread_mutex_unlock(&s->lock);
    if (older && !said)
        fprintf(stderr, "kgym: routing by task is off: worker %s shares this store and is of a release that would "
                        "misread routed claims' entries; jobs are claimed oldest first until it is gone\n", older);
    else if (!older && said)
        fprintf(stderr, "kgym: routing by task is on again: every worker of the fleet reads routed entries\n");
    json_decref(workers);
    return !older;
}

/* The next job for w: routed (store.h kg_route) by the tasks whose judges wait in this process's supervisor and
 * the tasks its workers evaluate now, unless the pool claims oldest first (o.fifo) or a fleet has a worker that
 * would misread a routed claim's entry (fleet_routes).  The route is this moment's: a claim that waits for a job
 * (Redis: up to 200 ms) picks with it, a hint that may be that much old. */
static int claim(worker *w, kg_job *job, kg_error *err)
{
    kg_sched *s = w->sched;
    if (s->o.fifo || (s->home[0] && !fleet_routes(s)))
        return kg_store_claim(s->o.store, w->name, job, err);
    char hot[KG_SUPERVISOR_HOT_MAX][65];
    int nhot = s->o.sup ? kg_supervisor_hot_tasks(s->o.sup, hot, KG_SUPERVISOR_HOT_MAX) : 0;
    const char *hot_list[KG_SUPERVISOR_HOT_MAX];
    for (int i = 0; i < nhot; i++)
        hot_list[i] = hot[i];
    /* Busy: the groups this pool's other threads evaluate (this thread's own job has ended). */
    char(*busy)[65] = calloc((size_t)s->threads + 1, sizeof *busy);
    const char **busy_list = calloc((size_t)s->threads + 1, sizeof *busy_list);
    size_t nbusy = 0;
    if (!busy || !busy_list) { /* no memory to route by: the oldest, as without routing */
        free(busy);
        free(busy_list);
        return kg_store_claim(s->o.store, w->name, job, err);
    }
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->threads; i++)
        if (s->workers[i].running_job && s->workers[i].group[0]) {
            memcpy(busy[nbusy], s->workers[i].group, sizeof busy[nbusy]);
            busy_list[nbusy] = busy[nbusy];
            nbusy++;
        }
    pthread_mutex_unlock(&s->lock);
    kg_route r = {.hot = hot_list, .nhot = (size_t)nhot, .busy = busy_list, .nbusy = nbusy,
                  .home = s->home[0] ? s->home : NULL, .home_ttl_s = s->o.lease_s > 0 ? s->o.lease_s : 60};
    int rc = kg_store_claim_routed(s->o.store, w->name, &r, job, err);
    free(busy);
    free(busy_list);
    return rc;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    kg_sched *s = w->sched;
    double backoff = 0.1;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        unsigned long seen = s->generation;
        int stop = s->stopping;
        w->heartbeat = kg_wall_s();
        pthread_mutex_unlock(&s->lock);
        if (stop)
            break;
        kg_job job;
        kg_error err;
        double asked_ms = kg_now_ms(); /* a lease given now runs at least one lease from here */
        int crc = claim(w, &job, &err);
        __atomic_add_fetch(&s->claims_ended, 1, __ATOMIC_SEQ_CST);
        if (crc != KG_OK && crc != KG_ERR_NOT_FOUND) {
            /* The store failed (Redis down, database lost): back off, up
             * to 5 s, instead of asking again at once in a tight loop. */
            if (backoff == 0.1)
                fprintf(stderr, "kgym: %s: cannot take jobs: %s (retrying)\n", w->name, err.message);
            pause_unless_stopping(s, backoff);
            backoff = backoff * 2 < 5 ? backoff * 2 : 5;
            continue;
        }
        if (backoff > 0.1)
            fprintf(stderr, "kgym: %s: the store answers again\n", w->name);
        backoff = 0.1;
        if (crc != KG_OK) {
            if (kg_store_has(s->o.store, KG_STORE_CLAIM_WAITS))
                continue; /* the claim itself waited for a job a while */
            pthread_mutex_lock(&s->lock);
            if (!s->stopping && s->generation == seen) {
                /* Timed: a job queued by another process (or a missed
                 * wake-up) is still found within a second. */
                struct timespec ts;
                deadline_in(&ts, 1.0);
                pthread_cond_timedwait(&s->work_cv, &s->lock, &ts);
            }
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        json_t *req = take_handed(s, &job); /* the submitter's, parsed, when it is in this process */
        if (!req && job.request)
            req = json_loads(job.request, 0, NULL); /* read once for all */
        /* This worker's key for the job, not the submitter's: a result is recorded, found and followed under
         * the key of the settings and device that produce it.  "" (unreadable request): no dedup. */
        char key[KG_SHA256_STRLEN] = "";
        if (!req || kg_sched_content_key(&s->profile, req, key) != KG_OK)
            key[0] = '\0';
        pthread_mutex_lock(&s->lock);
        w->running_job = 1;
        w->busy_since_ms = kg_now_ms();
        w->claim_no = ++s->claims;
        w->lease_ms = asked_ms;
        __atomic_store_n(&w->news, 0, __ATOMIC_SEQ_CST); /* news of an earlier job is not this one's */
        snprintf(w->current, sizeof w->current, "%s", job.id ? job.id : "");
        snprintf(w->key, sizeof w->key, "%s", key);
        snprintf(w->group, sizeof w->group, "%s", job.group ? job.group : "");
        pthread_mutex_unlock(&s->lock);

        int leading = 0;
        if (!answer_from_store(w, &job, req) && !follow_identical(w, &job, req, &leading) &&
            !(leading && answer_from_store(w, &job, req)) /* finished just before the mark was ours */ &&
            take_slot(w, &job)) {
            run_job(w, &job, req);
            give_slot(s);
        }
        if (leading)
            kg_store_inflight_end(s->o.store, w->key, job.id, NULL); /* after its outcome is stored */
        char end_key[KG_SHA256_STRLEN];
        snprintf(end_key, sizeof end_key, "%s", w->key);

        pthread_mutex_lock(&s->lock);
        w->running_job = 0;
        w->busy_ms += kg_now_ms() - w->busy_since_ms;
        w->processed++;
        w->current[0] = '\0';
        w->key[0] = '\0';
        w->group[0] = '\0';
        pthread_cond_broadcast(&s->done_cv);
        pthread_mutex_unlock(&s->lock);
        /* Fault injection (tests): the notice that this job ended is sent once the scheduler stops, the latest a
         * real one comes (an evaluation that ends during kg_sched_stop's drain).  The job itself is stored. */
        if (s->late_job_end)
            while (!pause_unless_stopping(s, 1.0)) {
            }
        if (s->o.on_job_end) {
            /* The job as the store now holds it, from what this worker stored (sched.h: kg_sched_end). */
            kg_job now = job;
            now.status = w->end_status;
            now.error = w->end_error;
            if (w->end_cached_from)
                now.cached_from = w->end_cached_from;
            if (end_key[0])
                now.key = end_key;
            now.finished_at = w->end_at;
            now.verdict = (char *)json_string_value(json_object_get(w->end_result, "verdict"));
            now.request = now.result = NULL;
            kg_sched_end end = {.job = &now, .result = w->end_result, .request = req};
            s->o.on_job_end(s->o.on_job_end_arg, w->ended ? &end : NULL);
        }
        end_clear(w);
        /* Its owner has its outcome: the job leaves the store (a job queued again is refused, and stays). */
        if (s->o.forget_ended)
            kg_store_forget(s->o.store, job.id, NULL);
        json_decref(req);
        kg_job_free(&job);
    }
    return NULL;
}

int kg_sched_start(const kg_sched_options *o, kg_sched **out, kg_error *err)
{
    *out = NULL;
    /* An evaluate hook says how a job is evaluated (rollout's may ask a service): it needs neither. */
    if (!o->store || (o->workers > 0 && !o->evaluate && (!o->sup || !o->task_dir)))
        return kg_error_set(err, KG_ERR_INVALID, "the scheduler needs a store, and a supervisor and a task folder "
                                                 "unless it has an evaluate hook");
    if (o->forget_ended && !kg_store_has(o->store, KG_STORE_FORGETS))
        return kg_error_set(err, KG_ERR_INVALID, "the %s store keeps its ended jobs: a pool that forgets them needs "
                                                 "one that forgets (memory)", kg_store_kind(o->store));
    kg_sched *s = calloc(1, sizeof *s);
    if (!s)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    s->o = *o;
    const char *late = getenv("KGYM_FAULT_LATE_JOB_END");
    s->late_job_end = late && !strcmp(late, "1");
    if (kg_sched_profile_of(&o->eval, o->device_kind, &s->profile) != KG_OK) {
        free(s);
        return kg_error_set(err, KG_ERR_INTERNAL, "the scheduler's profile could not be computed");
    }
    pthread_mutex_init(&s->lock, NULL);
    kg_cond_init(&s->work_cv);
    kg_cond_init(&s->done_cv);
    kg_cond_init(&s->slot_cv);
    s->threads = o->workers > 0 ? o->workers + (o->spare_workers > 0 ? o->spare_workers : 0) : 0;
    s->workers = calloc(s->threads > 0 ? (size_t)s->threads : 1, sizeof *s->workers);
    if (!s->workers) {
        free(s);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    /* News of the jobs the workers run (a cancel): without it (memory), every watch reads twice a second. */
    kg_error werr;
    s->watching = o->workers > 0 && kg_store_watch(o->store, job_news, s, &werr) == KG_OK;
    s->check_ms = s->watching && kg_store_has(o->store, KG_STORE_NEWS) ? KG_SCHED_CHECK_NEWS_MS : KG_SCHED_CHECK_MS;
    /* A fleet's process name: its workers' names without "#i" (unique across the fleet: host:pid:device). */
    if (kg_store_has(o->store, KG_STORE_SHARED))
        snprintf(s->home, sizeof s->home, "%s%s", o->name_prefix ? o->name_prefix : "",
                 o->eval.device ? o->eval.device : "cpu");
    if (s->home[0] && !o->fifo && o->workers > 0)
        fleet_routes(s); /* asked before the first claim: the workers' first claims are routed too */
    for (int i = 0; i < s->threads; i++) {
        worker *w = &s->workers[i];
        w->sched = s;
        snprintf(w->name, sizeof w->name, "%s%s#%d", o->name_prefix ? o->name_prefix : "",
                 o->eval.device ? o->eval.device : "cpu", i);
        w->heartbeat = kg_wall_s();
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            kg_sched_stop(s, 1e9);
            return kg_error_set(err, KG_ERR_IO, "cannot start worker thread %d", i);
        }
        w->started = 1;
    }
    *out = s;
    return KG_OK;
}

int kg_sched_stop(kg_sched *s, double drain_s)
{
    if (!s)
        return 1;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->work_cv);
    pthread_cond_broadcast(&s->done_cv);
    pthread_cond_broadcast(&s->slot_cv);
    struct timespec ts;
    deadline_in(&ts, drain_s);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < s->threads; i++)
            busy |= s->workers[i].running_job;
        if (!busy)
            break;
        if (pthread_cond_timedwait(&s->done_cv, &s->lock, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < s->threads; i++)
        if (s->workers[i].started)
            pthread_join(s->workers[i].thread, NULL);
    if (s->watching) /* after it returns no news comes: s can go */
        kg_store_unwatch(s->o.store, job_news, s);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->slot_cv);
    pthread_mutex_destroy(&s->lock);
    handed_free(s->handed);
    free(s->workers);
    free(s);
    return 1;
}

void kg_sched_notify(kg_sched *s)
{
    pthread_mutex_lock(&s->lock);
    s->generation++;
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
}

long kg_sched_room(kg_sched *s)
{
    long queued = kg_store_count(s->o.store, "queued");
    long room = s->o.max_queue - (queued < 0 ? 0 : queued);
    return room < 0 ? 0 : room;
}

static int terminal(const char *status)
{
    return status && (!strcmp(status, "done") || !strcmp(status, "failed") || !strcmp(status, "cancelled"));
}

int kg_sched_wait(kg_sched *s, const char *id, double timeout_s, kg_job *out, kg_error *err)
{
    double end = kg_now_ms() + timeout_s * 1000.0;
    for (;;) {
        int rc = kg_store_get(s->o.store, id, out, err);
        if (rc != KG_OK || terminal(out->status))
            return rc;
        double left = (end - kg_now_ms()) / 1000.0;
        if (left <= 0)
            return KG_OK;
        kg_job_free(out);
        pthread_mutex_lock(&s->lock);
        if (!s->stopping) {
            /* At most 0.5 s: another server or a worker process on the same
             * database finishes jobs without signalling us. */
            struct timespec ts;
            deadline_in(&ts, left < 0.5 ? left : 0.5);
            pthread_cond_timedwait(&s->done_cv, &s->lock, &ts);
        }
        int stop = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stop)
            return kg_store_get(s->o.store, id, out, err);
    }
}

json_t *kg_sched_workers(kg_sched *s)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&s->lock);
    double now = kg_now_ms();
    for (int i = 0; i < s->threads; i++) {
        worker *w = &s->workers[i];
        double busy = w->busy_ms + (w->running_job ? now - w->busy_since_ms : 0);
        if (kg_json_push(
                arr, json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:f, s:f, s:o, s:b}", "id", w->name, "device",
                           s->o.eval.device ? s->o.eval.device : "cpu", "status",
                           w->running_job ? "busy" : "idle", "online", "true", "current_job",
                           w->running_job ? json_string(w->current) : json_null(), "current_key",
                           w->running_job && w->key[0] ? json_string(w->key) : json_null(), "tasks_processed",
                           (json_int_t)w->processed, "busy_s", busy / 1000.0, "last_heartbeat",
                           w->heartbeat, "profile", kg_sched_profile_json(&s->profile),
                           /* this release reads an entry a routed claim gave to another job (fleet_routes) */
                           "routed_entries", 1)) != 0) {
            /* Whole or nothing: a worker left out would look gone to the fleet (its lease not renewed). */
            json_decref(arr);
            arr = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return arr;
}

void kg_sched_leases_renewed(kg_sched *s, const json_t *workers, double at_ms)
{
    size_t k;
    json_t *o;
    pthread_mutex_lock(&s->lock);
    json_array_foreach(workers, k, o) {
        const char *name = json_string_value(json_object_get(o, "id"));
        const char *job = json_string_value(json_object_get(o, "current_job"));
        for (int i = 0; name && job && i < s->threads; i++) {
            worker *w = &s->workers[i];
            if (w->running_job && !strcmp(w->name, name) && !strcmp(w->current, job) && w->lease_ms < at_ms)
                w->lease_ms = at_ms;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

const kg_sched_profile *kg_sched_profile_get(kg_sched *s)
{
    return &s->profile;
}

unsigned long kg_sched_claims_ended(kg_sched *s)
{
    return __atomic_load_n(&s->claims_ended, __ATOMIC_SEQ_CST);
}

void kg_sched_totals(kg_sched *s, long *finished, long *failed)
{
    pthread_mutex_lock(&s->lock);
    *finished = s->tally.results;
    *failed = s->tally.missing;
    pthread_mutex_unlock(&s->lock);
}

int kg_sched_metrics(kg_sched *s, kg_buf *b)
{
    int wr = KG_OK; /* any write failed (memory) */
    wr |= kg_buf_puts(b, "# HELP kgym_jobs Jobs in the store by status.\n# TYPE kgym_jobs gauge\n");
    for (int i = 0; i < KG_JOB_STATUS_COUNT; i++)
        wr |= kg_buf_printf(b, "kgym_jobs{status=\"%s\"} %ld\n", kg_job_status_names[i],
                            kg_store_count(s->o.store, kg_job_status_names[i]));
    wr |= kg_buf_printf(b, "# HELP kgym_queue_depth Jobs waiting for a worker.\n# TYPE kgym_queue_depth gauge\n"
                           "kgym_queue_depth %ld\n",
                        kg_store_count(s->o.store, "queued"));
    pthread_mutex_lock(&s->lock);
    wr |= kg_buf_puts(b, "# HELP kgym_jobs_finished_total Jobs evaluated by this process, by verdict.\n"
                         "# TYPE kgym_jobs_finished_total counter\n");
    for (int i = 0; i < KG_VERDICT_COUNT; i++)
        wr |= kg_buf_printf(b, "kgym_jobs_finished_total{verdict=\"%s\"} %ld\n", kg_verdict_name((kg_verdict)i),
                            s->tally.verdicts[i]);
    /* A job kgym could not evaluate has no verdict; the label keeps its job status (docs/service.md). */
    wr |= kg_buf_printf(b, "kgym_jobs_finished_total{verdict=\"%s\"} %ld\n", kg_job_status_names[KG_JOB_FAILED],
                        s->tally.missing);
    wr |= kg_buf_puts(b, "# HELP kgym_stage_seconds Time spent in each evaluation stage.\n"
                         "# TYPE kgym_stage_seconds summary\n");
    for (int i = 0; i < KG_STAGE_COUNT; i++)
        wr |= kg_buf_printf(b,
                            "kgym_stage_seconds_sum{stage=\"%s\"} %.6f\nkgym_stage_seconds_count{stage=\"%s\"} %ld\n",
                            kg_stage_names[i], kg_result_tally_stage_seconds(&s->tally, (kg_stage)i), kg_stage_names[i],
                            s->tally.stage_runs[i]);
    wr |= kg_buf_printf(b, "# HELP kgym_queue_wait_seconds Enqueue-to-start latency.\n"
                           "# TYPE kgym_queue_wait_seconds summary\n"
                           "kgym_queue_wait_seconds_sum %.6f\nkgym_queue_wait_seconds_count %ld\n",
                        s->queue_wait_sum_s, s->queue_wait_count);
    wr |= kg_buf_puts(b, "# HELP kgym_device_busy_seconds_total Evaluation time per worker and device.\n"
                         "# TYPE kgym_device_busy_seconds_total counter\n");
    double now = kg_now_ms();
    for (int i = 0; i < s->threads; i++) {
        worker *w = &s->workers[i];
        double busy = w->busy_ms + (w->running_job ? now - w->busy_since_ms : 0);
        wr |= kg_buf_printf(b, "kgym_device_busy_seconds_total{device=\"%s\",worker=\"%s\"} %.3f\n",
                            s->o.eval.device ? s->o.eval.device : "cpu", w->name, busy / 1000.0);
    }
    wr |= kg_buf_printf(b, "# HELP kgym_workers Evaluation workers.\n# TYPE kgym_workers gauge\nkgym_workers %d\n",
                        s->o.workers);
    wr |= kg_buf_printf(b, "# HELP kgym_jobs_stopped_total Jobs whose evaluation (or wait for an identical one) was "
                           "stopped because they were cancelled or ended elsewhere, by how the worker learned it: "
                           "news from the store, or its own check.\n# TYPE kgym_jobs_stopped_total counter\n"
                           "kgym_jobs_stopped_total{seen_by=\"news\"} %ld\nkgym_jobs_stopped_total{seen_by=\"check\"} "
                           "%ld\n",
                        s->stopped_news, s->stopped_check);
    pthread_mutex_unlock(&s->lock);
    return wr == KG_OK ? KG_OK : KG_ERR_NOMEM;
}
