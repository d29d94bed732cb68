/*
 * server/service.h — (internal) `kgym serve`: the evaluation service.  An HTTP/JSON API
 * (libmicrohttpd) compatible with KernelGYM's (POST /evaluate, /evaluate/batch,
 * GET /status/{id}, /results/{id}, /health, /workers/status) plus kgym's own
 * asynchronous API (/v1/jobs), Prometheus /metrics and a dashboard at /.
 * Jobs and results live in a SQLite database (WAL), evaluated by a pool of
 * worker threads over one kg_supervisor.  docs/service.md documents it all.
 *
 * Ownership: kg_service_options strings are borrowed for the life of the
 * call; json_t returned is a new reference the caller decrefs.
 */
#ifndef KGYM_SERVICE_H
#define KGYM_SERVICE_H

#include <jansson.h>
#include <stddef.h>

#include "kgym/error.h"
#include "eval/eval.h"
#include "supervisor/supervisor.h"

/* SIGTERM to exit, at most: waiting requests answered (2 s), running evaluations given up to 5 s to finish,
 * then the process exits and leaves them to the next server. */
#define KG_SERVICE_STOP_S 10

typedef struct kg_service_options {
    const char *host;          /* "127.0.0.1" */
    int port;                  /* 10907; 0 = any free port */
    const char *port_file;     /* written with the bound port once listening (may be NULL) */
    const char *db_path;       /* SQLite database */
    const char *token;         /* bearer token; NULL = no auth (then only requests whose Host names this server:
                                * allow_hosts); an empty or blank one is refused (kg_service_check_token) */
    const char *const *allow_hosts; /* host names a token-less server also answers to (--allow-host) */
    int n_allow_hosts;
    const char *kernelbench;   /* KernelBench checkout for "task": "level1/19" (may be NULL) */
    int workers;               /* evaluations at once */
    int spare_workers;         /* threads beyond them, for jobs that follow an identical one (sched.h) */
    int fifo;                  /* claim the oldest job instead of routing by task (sched.h kg_sched_options.fifo) */
    long max_queue;            /* queued jobs allowed before 429 */
    size_t max_code_bytes;     /* per code field (kernel_code, reference_code) */
    size_t max_body_bytes;     /* whole request body */
    int max_attempts;          /* a job interrupted this often is failed, not re-run */
    double sync_timeout_s;     /* POST /evaluate waits at most this long, then answers 202 */
    int max_connections;       /* open connections in all (1000) */
    int max_client_connections;/* open connections from one client address (64) */
    double idle_timeout_s;     /* a connection silent this long is closed (30); independent of
                                * --sync-timeout: a handler waiting for a job is not idle */
    double body_timeout_s;     /* a request body must arrive whole within this long of its headers (120):
                                * a client dripping a byte now and then is otherwise never silent */
    const char *redis;         /* redis://HOST:PORT[/DB]: jobs live in Redis (a fleet), not db_path */
    double lease_s;            /* Redis: a claimed job whose worker stops renewing it is re-claimed after this */
    double result_ttl_s;       /* Redis: finished jobs expire after this */
    int redis_volatile;        /* Redis: use one that would lose jobs (appendonly no, eviction) all the same;
                                * without it such a Redis is refused at start and while it runs */
    int no_http;               /* `kgym worker`: evaluate only, no API */
    const char *device_kind;   /* the device as the content key names it (the GPU model; --device-kind):
                                * results are shared only between workers of one kind.  NULL: eval.device */
    kg_supervisor_options supervisor;
    kg_eval_options eval;      /* base options; eval.device is the device */
} kg_service_options;

void kg_service_options_default(kg_service_options *o);

/* A bearer token must be printable ASCII without spaces (what can travel in an Authorization header intact):
 * an empty or blank one (an unset $VAR on a command line) would otherwise turn auth off without a word.
 * source names where it came from ("--token", "KGYM_TOKEN") for the message.  KG_ERR_INVALID. */
int kg_service_check_token(const char *token, const char *source, kg_error *err);

/* Runs the service until SIGINT or SIGTERM.  KG_OK on a clean stop.  SIGTERM: every waiting request is answered
 * (503 unless its job ended) and the process exits within KG_SERVICE_STOP_S seconds (docs/service.md). */
int kg_service_run(const kg_service_options *o, kg_error *err);

/* KernelGYM's EvaluationResponse for a job: job is {"id", "status",
 * "result" (kgym result or null), "error", "submitted_at", "started_at",
 * "finished_at", "request"}.  kgym's full result is added under "kgym". */
json_t *kg_service_kernelgym_response(const json_t *job);
/* A Unix time as KernelGYM writes times (ISO 8601, UTC, milliseconds); JSON
 * null for 0 or less.  New reference. */
json_t *kg_service_iso_time(double unix_s);

#endif
