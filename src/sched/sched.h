/*
 * sched.h — the embedded scheduler: a pool of worker threads that take jobs
 * from the store's queue (oldest first), evaluate each through one
 * kg_supervisor with kg_eval_run(), and write the result back; plus the
 * waiting (a sync request, a long poll) and the counters /metrics and
 * /workers/status show.
 *
 * The queue lives in the store, so nothing here must survive a crash: a
 * restarted scheduler finds its queue in the database.
 *
 * A normalised request (what the store holds) is a JSON object:
 *   {"task": label, "reference_code": text, "kernel_code": text,
 *    "timeout": seconds or 0, "client": {...the fields the client sent...}}
 *
 * Threads: every function may be called from any thread.  Ownership: json_t
 * returned is a new reference the caller decrefs; kg_job as in store.h.
 */
#ifndef KG_SCHED_H
#define KG_SCHED_H

#include <jansson.h>

#include "eval/eval.h"
#include "supervisor/supervisor.h"
#include "store/store.h"
#include "util/util.h"

typedef struct kg_sched kg_sched;

/* A job's end as the worker that stored it knows it, handed to on_job_end: its waiters in this process learn the
 * outcome from it, without reading the store (which holds the same). */
typedef struct kg_sched_end {
    const kg_job *job;     /* the job as now stored (status done or failed, error, key, cached_from, attempts,
                            * worker, times, verdict; cached_from: the job whose result a copy took, answered at
                            * claim from a done twin or followed in flight, else NULL); request and result are
                            * NULL here: */
    const json_t *result;  /* the result (status done); never NULL for done */
    const json_t *request; /* the normalised request, parsed (NULL when it would not parse) */
} kg_sched_end;

typedef struct kg_sched_options {
    kg_store *store;        /* borrowed; outlives the scheduler */
    kg_supervisor *sup;     /* borrowed; NULL: no workers (jobs only queue), unless evaluate is set (it is
                             * handed to evaluate as it is, NULL included) */
    kg_eval_options eval;   /* base evaluation options; eval.device names the device */
    const char *task_dir;   /* private folder for reference files (borrowed); not used with evaluate */
    int workers;            /* evaluations at once (>= 0): the evaluation threads */
    int spare_workers;      /* threads beyond workers (>= 0; only with workers > 0): they claim jobs too, but at most
                             * workers jobs are evaluated at once, so a job that follows an identical one in flight
                             * (in-flight dedup) or is answered from the store costs no evaluation.  A claimed job
                             * waits here for a slot meanwhile: for a pool that owns its queue (bench --dedup), not
                             * for a fleet's shared one, where another process could have run it.  0: none */
    long max_queue;         /* queued jobs allowed (429 beyond) */
    const char *name_prefix; /* worker names: prefix + device + "#i" (unique across a fleet) */
    const char *device_kind; /* what the content key names as the device (the GPU model, --device-kind);
                              * NULL: eval.device */
    double lease_s;          /* Redis: the job lease (an in-flight follower waits this long beyond twice its
                              * own time limit at most) */
    void (*on_job_end)(void *arg, const kg_sched_end *end);
                                   /* called (from a worker thread) after a worker ended a job: the server's
                                    * waiting requests look at their jobs then (may be NULL).  end (borrowed for the
                                    * call; NULL when the worker does not know the stored outcome in full: a
                                    * cancel, a requeue, a copied result it had no memory to parse): the job's
                                    * outcome, a copy's too (its cached_from set).  Also during
                                    * kg_sched_stop's drain: on_job_end_arg must live until kg_sched_stop
                                    * returned 1 (for ever when it returns 0).  Fault injection: with
                                    * KGYM_FAULT_LATE_JOB_END=1 in the environment each call waits until the
                                    * scheduler stops (tests of the server's shutdown order). */
    void *on_job_end_arg;
    /* How a worker evaluates a claimed job whose request is not the normalised one above (bench, rollout: their
     * jobs name their own pairs).  NULL: the reference goes to a task file under task_dir, kernel_code is the
     * candidate.  Called from a worker thread with req (the job's request, parsed; NULL if it would not parse)
     * and opts (the scheduler's evaluation options, with the job's cancel watch set: the hook may change
     * them); returns as kg_eval_run.  A job whose key is not computable from its request is never deduplicated
     * (kg_sched_content_key needs reference_code and kernel_code). */
    int (*evaluate)(void *arg, kg_supervisor *sup, kg_eval_options *opts, const kg_job *job, const json_t *req,
                    json_t **result, kg_error *err);
    void *evaluate_arg;
    /* 1: a job this pool's workers ended is removed from the store (kg_store_forget) once on_job_end has returned
     * for it: for an owner that takes each outcome from on_job_end or its evaluate hook and never reads the store
     * for it again (bench, rollout), so the store holds the jobs in flight, not every job of the run.  The store
     * must forget (KG_STORE_FORGETS: memory; kg_sched_start refuses another); nobody may kg_sched_wait for such a
     * pool's jobs.  A job given back to the queue is not ended, and stays.  A forgotten job no longer answers its
     * twins (the content key's done answer at claim needs the job stored): an owner that wants twins answered
     * once (bench --dedup) keeps its ended jobs. */
    int forget_ended;
    /* 1: claim the oldest queued job.  0 (the default): routed (store.h kg_route), so that the samples of one task
     * follow each other on the judge kept for that task, and a fleet's processes spread over tasks. */
    int fifo;
} kg_sched_options;

/* What a worker's results depend on besides the request: its device kind and
 * evaluation settings.  Workers publish it with their heartbeats; two
 * workers of one profile produce answers to the same requests. */
typedef struct kg_sched_profile {
    char hash[KG_SHA256_STRLEN]; /* SHA-256 of the device kind and every evaluation setting */
    char reference_mode[32];     /* how the reference of a request that names no mode is timed */
    char tolerance_profile[32];  /* the tolerance profile of a request that names none ("strict", "kernelbench") */
    double timeout_s;            /* the limit of a request that sets no timeout */
} kg_sched_profile;

/* The profile of options e on a device of kind device_kind (NULL: e->device). */
int kg_sched_profile_of(const kg_eval_options *e, const char *device_kind, kg_sched_profile *out);
/* As JSON {"hash", "reference_mode", "tolerance_profile", "timeout_s"} (new reference), and back
 * (KG_ERR_INVALID if malformed; a profile without "tolerance_profile", from an older worker, is "strict"). */
json_t *kg_sched_profile_json(const kg_sched_profile *p);
int kg_sched_profile_from_json(const json_t *j, kg_sched_profile *out);
/* The content key of a normalised request evaluated under profile p: SHA-256
 * over p, the reference, the candidate, and the request's timeout,
 * num_perf_trials, reference mode and tolerance profile (the profile's where
 * it names none).
 * The API server computes it at submit with the profile its fleet's workers
 * share; each worker again with its own when it claims the job, and the
 * result is recorded under the worker's key: two jobs share a key only when
 * one's result answers the other.  KG_ERR_INVALID when the request lacks its
 * code. */
int kg_sched_content_key(const kg_sched_profile *p, const json_t *request, char key[KG_SHA256_STRLEN]);
/* The routing group of a normalised request (store.h kg_route): the SHA-256 (hex) of its reference_code, the bytes
 * the task file its judge loads holds (kg_task_from_source writes them as they are), so the key its judges are kept
 * by.  "" in out (and -1) when it has none. */
int kg_sched_group_of(const json_t *request, char out[65]);
/* This scheduler's profile (its options and device kind; borrowed). */
const kg_sched_profile *kg_sched_profile_get(kg_sched *s);

int kg_sched_start(const kg_sched_options *o, kg_sched **out, kg_error *err);
/* Stops taking jobs and waits up to drain_s for running evaluations.
 * Returns 1 when everything stopped (the scheduler is freed), 0 when an
 * evaluation is still running (the scheduler is left alive on purpose: the
 * caller should exit the process; the job stays "running" in the store and
 * is re-run by the next server). */
int kg_sched_stop(kg_sched *s, double drain_s);

/* Wakes the workers: a job was queued. */
void kg_sched_notify(kg_sched *s);
/* Hands a just stored job's request to this process's workers, parsed: the worker that claims job id uses it
 * instead of parsing the stored text again, when that text is still `text` (the request stored; a job replaced
 * meanwhile is read from the store).  request: a new reference is taken.  At most a queue's worth is kept (the
 * oldest dropped: their workers parse). */
void kg_sched_submitted(kg_sched *s, const char *id, const char *text, json_t *request);
/* Room left in the queue (max_queue - queued), never negative. */
long kg_sched_room(kg_sched *s);
/* Waits until job id is done, failed or cancelled, or timeout_s passed
 * (0: no wait), and fills out with its current state. */
int kg_sched_wait(kg_sched *s, const char *id, double timeout_s, kg_job *out, kg_error *err);
/* Worker threads: {"id", "device", "status", "current_job", "tasks_processed",
 * "busy_s", "last_heartbeat", "profile"} each; NULL when it cannot be built whole (memory). */
json_t *kg_sched_workers(kg_sched *s);
/* Appends the Prometheus text of the scheduler's counters.  KG_ERR_NOMEM when a write failed (out then holds
 * part of it: the caller discards it). */
int kg_sched_metrics(kg_sched *s, kg_buf *out);
/* Redis: a heartbeat that began at at_ms (kg_now_ms) renewed the leases of workers' current jobs (workers:
 * kg_sched_workers' objects as sent).  A worker that cannot store a finished job's result retries for as long as
 * it surely holds the lease (store_outcome). */
void kg_sched_leases_renewed(kg_sched *s, const json_t *workers, double at_ms);
/* Claims the workers made that have returned (with a job, none, or an error), since start.  A claim routes by
 * the busy tasks it read when it began: a caller that marked a task busy knows a claim that saw it once this
 * count has grown by two past its reading (the claim under way then, and the next). */
unsigned long kg_sched_claims_ended(kg_sched *s);
/* Jobs finished since start, and their evaluation seconds (for /health). */
void kg_sched_totals(kg_sched *s, long *finished, long *failed);

#endif
