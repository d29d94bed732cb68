/*
 * server.h — internals of `kgym serve` shared by its files: request
 * validation (KernelGYM's EvaluationRequest fields, kgym's additions), the
 * mapping of a job onto KernelGYM's responses, the dashboard page.
 * Ownership: json_t returned are new references; strings are static.
 */
#ifndef KG_SERVER_H
#define KG_SERVER_H

#include <jansson.h>
#include <stddef.h>

#include "server/service.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/util.h"

/* A rejected request: the HTTP status, the message and the offending field. */
typedef struct kg_bad_request {
    int http;
    char error[512];
    char field[64];
} kg_bad_request;

/* Validates one evaluation request (KernelGYM's EvaluationRequest, or kgym's
 * {"task": "level1/19", ...}) and builds the normalised request the store
 * keeps (see sched.h) plus its content key under profile (SHA-256,
 * kg_sched_content_key).  need_task_id: KernelGYM's endpoints require
 * task_id.  Returns 0, or -1 with *bad filled. */
int kg_server_normalize(const kg_service_options *o, const kg_sched_profile *profile, const json_t *in,
                        int need_task_id, json_t **normalized, char key[KG_SHA256_STRLEN], int *force_refresh,
                        kg_bad_request *bad);

/* The job as JSON (kgym's native view): id, status, attempts, times, worker,
 * cached_from, error, result (parsed), and "kernelgym" when finished. */
json_t *kg_server_job_json(const kg_job *job, int with_request);
/* The same from a job whose result and request are already parsed (job->result and job->request are not read;
 * either may be NULL): the objects are referenced, not copied, and only read. */
json_t *kg_server_job_json_from(const kg_job *job, const json_t *result, const json_t *request, int with_request);

/* KernelGYM's TaskStatusResponse for a job (with error_message added). */
json_t *kg_server_status_json(const kg_job *job, long queue_position);

/* Orphans (orphans.c): kills the processes whose owning server is gone;
 * returns how many. */
int kg_server_kill_orphans(void);
/* Marks this process as the owner of what it starts (KGYM_SERVE_OWNER) and
 * forks a guardian that kills them when this process ends, however it ends.
 * Call before any thread is started. */
int kg_server_guard(kg_error *err);

/* Waiting requests (waits.c): POST /evaluate, /evaluate/batch and long polls wait for their jobs with their
 * connection suspended, holding no thread; one waiter thread resumes each when its jobs end, its time is up,
 * its client hangs up or the server stops, and MHD calls the handler again, which reads the outcome. */
struct MHD_Connection;
typedef struct kg_waits kg_waits;
enum { KG_WAIT_PENDING = 0, KG_WAIT_DONE, KG_WAIT_TIMEOUT, KG_WAIT_GONE, KG_WAIT_STOPPING };
int kg_waits_start(kg_store *store, kg_waits **out, kg_error *err);
/* Suspends c (call it from the access handler, which then returns MHD_YES) until every job of ids[0..n) has
 * ended or deadline_ms (kg_now_ms) passed, its client hung up, or kg_waits_stop; *outcome (the request's, alive
 * until the request completes) receives a KG_WAIT_* before c is resumed.  KG_ERR_INVALID once stopping and
 * KG_ERR_NOMEM: not suspended, answer now. */
int kg_waits_add(kg_waits *w, struct MHD_Connection *c, const char *const *ids, size_t n, double deadline_ms,
                 int *outcome, json_t **ended);
/* A job ended (a worker of this process, or a cancel).  id and job (kg_server_job_json with its request, as its
 * worker stored it; a new reference is taken): the waits for id are done without reading the store, and the
 * handler finds job in *ended (an object id → job, alive until the request completes; the handler decrefs it).
 * id NULL (the outcome not known in full): every wait reads its jobs from the store now. */
void kg_waits_wake(kg_waits *w, const char *id, json_t *job);
/* Requests waiting now. */
size_t kg_waits_count(kg_waits *w);
/* Resumes every waiting connection with KG_WAIT_STOPPING and refuses new waits; returns once all are resumed
 * (their answers are being written).  Call before MHD_stop_daemon: MHD must not be stopped with a connection
 * suspended. */
void kg_waits_stop(kg_waits *w);
/* Stops (kg_waits_stop) and frees w.  Only once nothing can call kg_waits_wake any more: the scheduler's workers
 * call it whenever they end a job, also during kg_sched_stop's drain, so after kg_sched_stop returned 1. */
void kg_waits_free(kg_waits *w);

/* The dashboard page (HTML + JS, no build step). */
extern const char kg_server_dashboard_html[];

#endif
