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

#include "kgym/service.h"
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

/* KernelGYM's TaskStatusResponse for a job (with error_message added). */
json_t *kg_server_status_json(const kg_job *job, long queue_position);

/* Orphans (orphans.c): kills the processes whose owning server is gone;
 * returns how many. */
int kg_server_kill_orphans(void);
/* Marks this process as the owner of what it starts (KGYM_SERVE_OWNER) and
 * forks a guardian that kills them when this process ends, however it ends.
 * Call before any thread is started. */
int kg_server_guard(kg_error *err);

/* The dashboard page (HTML + JS, no build step). */
extern const char kg_server_dashboard_html[];

#endif
