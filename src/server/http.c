/*
 * http.c — `kgym serve`'s HTTP side (libmicrohttpd: a pool of threads over epoll; a request that waits for its
 * job holds no thread, see waits.c): routing, auth, limits, JSON in and out; and kg_service_run(), which wires
 * store, supervisor, scheduler and server together.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/service.h"
#include "sched/sched.h"
#include "server/server.h"
#include "store/store.h"
#include "util/json.h"
#include "util/util.h"

typedef struct server {
    const kg_service_options *o;
    kg_store *store;
    kg_sched *sched;
    kg_waits *waits;
    double started_at;
    /* Request bodies held in memory by all connections together: past
     * max_body_bytes * KG_BODY_BUDGET, new uploads get 503 (a flood of large
     * bodies cannot take the server's memory). */
    atomic_size_t body_bytes;
    /* Requests that were suspended to wait and have not completed yet: a stopping server lets their answers go
     * out before it closes the connections. */
    atomic_int waits_open;
    /* Jobs answered at submission from the dedup cache since start: the
     * scheduler's totals count only evaluations, and the dashboard's
     * "finished" card shows both, each for what it is. */
    atomic_long cached;
    kg_sched_profile fleet; /* the profile every live worker of the fleet shares, when fleet_one */
    int fleet_one;
    double fleet_at_ms;     /* when the fleet's heartbeats were read (kept a second); under fleet_lock */
} server;

static pthread_mutex_t fleet_lock = PTHREAD_MUTEX_INITIALIZER;

#define KG_BODY_BUDGET 4
/* Threads that run the handlers (MHD's pool): twice the CPUs, 8 to 64.  No request holds one while it waits for
 * a job, so they bound only the work done at once (parsing, validation, store calls). */
#define KG_HTTP_THREADS_MIN 8
#define KG_HTTP_THREADS_MAX 64

/* A connection, for the header and body deadlines: its request line and
 * headers must arrive within --idle-timeout of its opening or of its previous
 * answer, and its body within --body-timeout of its headers.  MHD's own
 * timeout counts silence only, and a client sending a byte now and then
 * (slowloris) would hold the connection for ever.  And for the connection
 * limits: how many each client address holds. */
enum { CONN_BUSY = 0, CONN_HEADERS = 1, CONN_BODY = 2 };
typedef struct addr_rec {
    struct addr_rec *next;
    unsigned char a[16]; /* IPv4 in the first 4 bytes, the rest 0; or IPv6 */
    int family;
    int n;               /* its open connections */
} addr_rec;
typedef struct conn_rec {
    struct conn_rec *prev, *next;
    int fd;
    int waiting;  /* CONN_HEADERS or CONN_BODY since `since`; CONN_BUSY: being answered */
    double since; /* kg_now_ms() */
    addr_rec *addr;
    /* Over the limits when it opened (REFUSE_*): its first request is answered 503 with Retry-After, and it is
     * closed.  MHD's own limits close a connection without a word; ours are below theirs so that a client
     * learns why and when to come back. */
    int refused;
    int held_by_addr, held_in_all; /* the counts it was refused with */
} conn_rec;
enum { REFUSE_NONE = 0, REFUSE_ADDRESS = 1, REFUSE_SHARE = 2 };

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static conn_rec *conns;
static addr_rec *addrs;
static int n_conns, n_addrs; /* under conns_lock */

/* What a request waits for (waits.c), and how it is answered when its connection is resumed. */
enum { WAIT_NONE = 0, WAIT_EVALUATE, WAIT_BATCH, WAIT_JOB };

typedef struct request_ctx {
    kg_buf body;
    int too_large;
    int started;   /* the headers were seen (on_request's first call) */
    int bad_url;   /* the raw URL had %00: the decoded one is cut short there */
    size_t counted; /* bytes of body counted in server.body_bytes */
    int wait;       /* WAIT_*: suspended; the handler is called again when resumed */
    int waited;     /* was suspended (counted in server.waits_open until it completes) */
    int outcome;    /* KG_WAIT_*: written by the waiter before the resume */
    int view;       /* WAIT_JOB: 0 kgym's job, 1 /status, 2 /results */
    json_t *ids;    /* the jobs waited for: [{id, cached}] (submit_many's) or [id] */
    char *batch_id; /* WAIT_BATCH: the client's, or NULL */
    double submitted; /* WAIT_BATCH: kg_wall_s() at submission */
    json_t *ended;    /* the waited jobs that ended in this process: {id: kg_server_job_json with request}, written by
                       * the waiter before the resume (waits.c), or NULL */
} request_ctx;

void kg_service_options_default(kg_service_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 10907;
    o->db_path = "kgym-service.db";
    o->workers = 1;
    o->max_queue = 10000;
    o->max_code_bytes = 256 * 1024;
    o->max_body_bytes = 32u << 20;
    o->max_attempts = 3;
    o->sync_timeout_s = 1800;
    o->max_connections = 1000;
    o->max_client_connections = 64;
    o->idle_timeout_s = 30;
    o->body_timeout_s = 120;
    o->lease_s = 60;
    o->result_ttl_s = 7 * 86400;
    kg_eval_options_default(&o->eval, "cpu");
}

/* ---- responses ---- */

/* KernelGYM's error code for an HTTP status kgym answers with an error (its ErrorCode names). */
static const char *error_code_for(int status)
{
    if (status == 400 || status == 404 || status == 405 || status == 409 || status == 411 || status == 413 ||
        status == 415 || status == 401 || status == 403)
        return "VALIDATION_ERROR";
    if (status == 429 || status == 503)
        return "RESOURCE_ERROR";
    return "SYSTEM_ERROR";
}

/* close_after: "Connection: close", the connection ends once the answer is sent (a refused one). */
static enum MHD_Result send_text_as(struct MHD_Connection *c, int status, const char *type, char *text,
                                    size_t len, const char *retry_after, int close_after, const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (retry_after)
        MHD_add_response_header(r, "Retry-After", retry_after);
    if (close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status >= 400) /* as KernelGYM's server sends it with every error */
        MHD_add_response_header(r, "X-Error-Code", error_code_for(status));
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *c, int status, const char *type, char *text,
                                 size_t len, const char *retry_after)
{
    return send_text_as(c, status, type, text, len, retry_after, 0, NULL);
}

/* The answer when a response cannot be built or encoded (memory): a 500 that says so, from static text, since
 * nothing more can be allocated to say it. */
static const char oom_body[] = "{\"error\":\"out of memory: the response could not be built\",\"field\":null,"
                               "\"message\":\"out of memory: the response could not be built\","
                               "\"error_code\":\"SYSTEM_ERROR\"}";

static enum MHD_Result send_oom(struct MHD_Connection *c, int close_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof oom_body - 1, (void *)oom_body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Error-Code", error_code_for(500));
    if (close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, 500, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *body)
{
    /* 15 significant digits: a reward of 0.7 reads 0.7, not 0.69999999999999996 (jansson's default, 17, prints
     * every double exactly); no figure kgym reports is measured to more.  The store keeps results at 17. */
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(body);
    if (!text) /* body NULL: a response that could not be built whole (memory) is this error, never a part of it */
        return send_oom(c, 0);
    return send_text(c, status, "application/json", text, strlen(text), NULL);
}

/* An error (the text of every refusal); retry_after (seconds, may be NULL) tells clients when to retry,
 * close_after ends the connection after it, allow (405) lists the methods the path takes. */
static enum MHD_Result send_error_as(struct MHD_Connection *c, int status, const char *field, const char *msg,
                                     const char *retry_after, int close_after, const char *allow)
{
    /* kgym's {error, field}, with KernelGYM's ErrorResponse fields beside them (message, error_code,
     * timestamp): its clients read those. */
    json_t *e = json_pack("{s:s, s:s?, s:s}", "error", msg, "field", field && *field ? field : NULL, "message", msg);
    if (!e) /* msg not UTF-8 (it can quote client input): say so plainly */
        e = json_pack("{s:s, s:s?, s:s}", "error", "bad request", "field", NULL, "message", "bad request");
    if (e && (kg_json_set(e, "error_code", json_string(error_code_for(status))) != 0 ||
              kg_json_set(e, "timestamp", kg_service_iso_time(kg_wall_s())) != 0)) {
        json_decref(e);
        e = NULL;
    }
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (!text)
        return send_oom(c, close_after);
    return send_text_as(c, status, "application/json", text, strlen(text), retry_after, close_after, allow);
}

static enum MHD_Result send_error_retry(struct MHD_Connection *c, int status, const char *field, const char *msg,
                                        const char *retry_after)
{
    return send_error_as(c, status, field, msg, retry_after, 0, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *field, const char *msg)
{
    return send_error_retry(c, status, field, msg, NULL);
}

/* A store failure.  A conflict with what is stored is the client's (409);
 * anything else (a full disk, a lost database file, Redis down) is the
 * server's and passes: 503 with Retry-After, which clients retry. */
static enum MHD_Result send_store_error(struct MHD_Connection *c, int rc, const char *field, const kg_error *err)
{
    if (rc == KG_ERR_INVALID)
        return send_error(c, 409, field, err->message);
    return send_error_retry(c, 503, "", err->message, "5");
}

static enum MHD_Result send_full(struct MHD_Connection *c, long room)
{
    kg_buf b = {0};
    char *text = kg_buf_printf(&b, "the queue is full (%ld places left); retry later", room) == KG_OK
                     ? kg_buf_release(&b)
                     : NULL; /* the message without the count */
    enum MHD_Result ret = send_error_retry(c, 429, "", text ? text : "the queue is full", "5");
    free(text);
    return ret;
}

/* ---- jobs ---- */

static void new_id(char out[40])
{
    unsigned char r[10];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        /* getrandom cannot really fail for 10 bytes; a time-based id is still unique enough. */
        struct timeval tv;
        gettimeofday(&tv, NULL);
        memcpy(r, &tv, sizeof r < sizeof tv ? sizeof r : sizeof tv);
    }
    strcpy(out, "job-");
    for (size_t i = 0; i < sizeof r; i++)
        sprintf(out + 4 + 2 * i, "%02x", r[i]);
}

static double query_double(struct MHD_Connection *c, const char *name, double dflt, double lo, double hi, int *ok)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!v)
        return dflt;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    /* isfinite: strtod reads "nan" and "inf", and NaN passes every range
     * test (a wait of NaN seconds never ended). */
    if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) {
        *ok = 0;
        return dflt;
    }
    return d;
}

static int is_terminal(const char *st)
{
    return st && strcmp(st, "queued") && strcmp(st, "running");
}

/* The id a request names: task_id, else id, else one derived from the
 * batch's id and the request's place in it (a batch retried with the same
 * batch_id gets the same ids, so nothing is queued twice); NULL: a new one. */
static const char *given_id(const json_t *t, const char *batch_id, size_t i, char buf[160])
{
    const char *given = json_string_value(json_object_get(t, "task_id"));
    if (!given)
        given = json_string_value(json_object_get(t, "id"));
    if (!given && batch_id) {
        snprintf(buf, 160, "%s-%zu", batch_id, i);
        given = buf;
    }
    return given;
}

static int same_profile(const kg_sched_profile *a, const kg_sched_profile *b)
{
    return !strcmp(a->hash, b->hash) && !strcmp(a->reference_mode, b->reference_mode) &&
           !strcmp(a->tolerance_profile, b->tolerance_profile) && a->timeout_s == b->timeout_s;
}

/* The profile a job submitted now is keyed with, and whether a done result under that key may answer it at once
 * (1).  Embedded (SQLite): this server's own; its workers evaluate the job.  A fleet (Redis): the profile every
 * live worker shares (from their heartbeats, read at most once a second; this server's own workers included), so
 * an API server needs none of its workers' flags.  Workers of several profiles, or none alive: which one will
 * evaluate the job is not known, so no result answers it here; it is queued, and the worker that claims it
 * answers it from the store if a result exists under its own key (sched.c). */
static int submit_profile(server *s, kg_sched_profile *out)
{
    *out = *kg_sched_profile_get(s->sched); /* this server's own settings and device kind */
    if (!kg_store_has(s->store, KG_STORE_SHARED))
        return 1; /* no other process evaluates its jobs */
    pthread_mutex_lock(&fleet_lock);
    double now = kg_now_ms();
    if (now - s->fleet_at_ms > 1000) {
        s->fleet_at_ms = now;
        s->fleet_one = 0;
        kg_sched_profile first, p;
        memset(&first, 0, sizeof first);
        int n = 0, same = 1;
        if (s->o->workers > 0) {
            first = *kg_sched_profile_get(s->sched);
            n = 1;
        }
        json_t *ws = NULL;
        size_t i;
        json_t *w;
        if (kg_store_workers(s->store, &ws, NULL) != KG_OK)
            same = 0;
        json_array_foreach(ws, i, w) {
            if (kg_sched_profile_from_json(json_object_get(w, "profile"), &p) != KG_OK)
                same = 0; /* a worker that does not say: its answers are unknown */
            else if (n++ == 0)
                first = p;
            else if (!same_profile(&p, &first))
                same = 0;
        }
        json_decref(ws);
        if (n && same) {
            s->fleet = first;
            s->fleet_one = 1;
        }
    }
    int one = s->fleet_one;
    if (one)
        *out = s->fleet;
    pthread_mutex_unlock(&fleet_lock);
    return one;
}

/* Validates and submits a list of requests: all validated, then all stored
 * in one transaction (or none: a crash or a store error leaves no partial
 * batch), and only then acknowledged.  An id that exists is answered as it
 * stands, unless force_refresh (then queued again unless queued or running).
 * Same content already done and not fresh: answered at once from the stored
 * result.  *ids_out: [{id, cached}] in order; NULL when an error was sent. */
static enum MHD_Result submit_many(server *s, struct MHD_Connection *c, json_t *tasks, int need_task_id,
                                   const char *field, const char *batch_id, json_t **ids_out)
{
    size_t n = json_array_size(tasks);
    size_t m = n ? n : 1;
    json_t **norm = calloc(m, sizeof *norm);
    char (*keys)[KG_SHA256_STRLEN] = calloc(m, sizeof *keys);
    char (*groups)[65] = calloc(m, sizeof *groups);
    char (*ids)[160] = calloc(m, sizeof *ids);
    int *fresh = calloc(m, sizeof *fresh), *cached = calloc(m, sizeof *cached), *replace = calloc(m, sizeof *replace);
    char **reqs = calloc(m, sizeof *reqs);
    kg_job *jobs = calloc(m, sizeof *jobs), *done = calloc(m, sizeof *done);
    json_t *seen = json_object();
    enum MHD_Result ret = MHD_YES;
    size_t nput = 0;
    int queued = 0;
    *ids_out = NULL;
    kg_sched_profile profile;
    int answer = submit_profile(s, &profile);
    if (!norm || !keys || !groups || !ids || !fresh || !cached || !replace || !reqs || !jobs || !done || !seen) {
        ret = send_error(c, 500, "", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        kg_bad_request b = {0};
        const json_t *t = json_array_get(tasks, i);
        char f[160];
        if (kg_server_normalize(s->o, &profile, t, need_task_id, &norm[i], keys[i], &fresh[i], &b)) {
            if (*field) /* a list: name the element ("tasks[3].kernel_code") */
                snprintf(f, sizeof f, "%s[%zu]%s%s", field, i, b.field[0] ? "." : "", b.field);
            else
                snprintf(f, sizeof f, "%s", b.field);
            ret = send_error(c, b.http, f, b.error);
            goto out;
        }
        kg_sched_group_of(norm[i], groups[i]); /* "" when it has none: claimed unrouted */
        char buf[160];
        const char *given = given_id(t, batch_id, i, buf);
        if (given) {
            snprintf(ids[i], 160, "%s", given);
        } else {
            new_id(ids[i]);
        }
        /* Two requests with one id in a batch would silently collapse into one job. */
        json_t *first = json_object_get(seen, ids[i]);
        if (first) {
            char msg[400];
            snprintf(f, sizeof f, "%s[%zu].%s", field, i, json_object_get(t, "task_id") ? "task_id" : "id");
            snprintf(msg, sizeof msg, "id \"%s\" appears twice in the list (at %lld and %zu); ids must be unique",
                     ids[i], (long long)json_integer_value(first), i);
            ret = send_error(c, 400, f, msg);
            goto out;
        }
        if (kg_json_set(seen, ids[i], json_integer((json_int_t)i)) != 0) { /* unchecked, ids could collapse */
            ret = send_error(c, 500, "", "out of memory");
            goto out;
        }
    }
    long room = kg_sched_room(s->sched);
    if (room < (long)n) {
        ret = send_full(c, room);
        goto out;
    }
    kg_error err;
    int rc = KG_OK;
    /* Two requests with one new id at once both find no job, and the later insert meets the earlier one's job.
     * It looks again and finds that job: answered as it stands (KernelGYM's idempotency), as if it had come a
     * moment later, not 409.  A conflict that stays (replacing a job that runs) is the client's: 409. */
    for (int attempt = 0; attempt < 3; attempt++) {
        nput = 0;
        queued = 0;
        for (size_t i = 0; i < n; i++) {
            cached[i] = replace[i] = 0;
            free(reqs[i]);
            reqs[i] = NULL;
            kg_job_free(&done[i]);
            memset(&done[i], 0, sizeof done[i]);
        }
        for (size_t i = 0; i < n; i++) {
            kg_job old;
            rc = kg_store_get(s->store, ids[i], &old, &err);
            if (rc == KG_OK) {
                int busy = !strcmp(old.status, "queued") || !strcmp(old.status, "running");
                kg_job_free(&old);
                if (!fresh[i] || busy)
                    continue; /* answered as it stands */
                replace[nput] = 1;
            } else if (rc != KG_ERR_NOT_FOUND) {
                ret = send_store_error(c, rc, field, &err);
                goto out;
            }
            /* Kept in the stored request (not in the key): the worker evaluates a fresh job even while an
             * identical one is in flight (sched.c, follow_identical). */
            if (fresh[i] && kg_json_set(norm[i], "force_refresh", json_true()) != 0) {
                ret = send_error(c, 500, "", "out of memory");
                goto out;
            }
            reqs[i] = json_dumps(norm[i], JSON_COMPACT);
            if (!reqs[i]) {
                ret = send_error(c, 500, "", "out of memory");
                goto out;
            }
            kg_job *j = &jobs[nput];
            memset(j, 0, sizeof *j);
            j->id = ids[i];
            j->key = keys[i];
            j->request = reqs[i];
            j->label = (char *)json_string_value(json_object_get(norm[i], "task")); /* not read again from reqs */
            j->group = groups[i][0] ? groups[i] : NULL;
            j->status = "queued";
            if (answer && !fresh[i] && kg_store_find_done(s->store, keys[i], &done[i], NULL) == KG_OK) {
                j->status = "done";
                j->result = done[i].result;
                j->cached_from = done[i].id;
                cached[i] = 1;
            } else {
                queued = 1;
            }
            nput++;
        }
        rc = nput ? kg_store_put_many(s->store, jobs, nput, replace, &err) : KG_OK;
        if (rc != KG_ERR_INVALID)
            break;
    }
    if (rc != KG_OK) {
        ret = send_store_error(c, rc, field, &err);
        goto out;
    }
    if (nput) {
        /* This process's workers take the requests as parsed here (the one parse of a request). */
        for (size_t i = 0; i < n; i++)
            if (reqs[i] && !cached[i])
                kg_sched_submitted(s->sched, ids[i], reqs[i], norm[i]);
        if (queued)
            kg_sched_notify(s->sched);
        for (size_t i = 0; i < n; i++)
            if (cached[i])
                atomic_fetch_add(&s->cached, 1);
    }
    /* The jobs are stored: an answer that cannot be built is a 500 the client retries (the same ids then find
     * them), never a shorter list. */
    json_t *out_ids = json_array();
    int ok = out_ids != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = kg_json_push(out_ids, json_pack("{s:s, s:b}", "id", ids[i], "cached", cached[i])) == 0;
    if (!ok) {
        json_decref(out_ids);
        ret = send_error(c, 500, "", "out of memory building the answer; the jobs are stored (retry with their ids)");
        goto out;
    }
    *ids_out = out_ids;
out:
    for (size_t i = 0; i < n; i++) {
        if (norm)
            json_decref(norm[i]);
        if (reqs)
            free(reqs[i]);
        if (done)
            kg_job_free(&done[i]);
    }
    json_decref(seen);
    free(norm);
    free(keys);
    free(groups);
    free(ids);
    free(fresh);
    free(cached);
    free(replace);
    free(reqs);
    free(jobs);
    free(done);
    return ret;
}

/* ---- waiting ---- */

/* A request that waits for jobs: its connection is suspended (no thread held) until they end, deadline_ms
 * passes, its client hangs up or the server stops; MHD then calls the handler again (answer_waited).  ids:
 * taken.  A stopping server takes no new wait: 503 now. */
static enum MHD_Result begin_wait(server *s, struct MHD_Connection *c, request_ctx *ctx, int kind, json_t *ids,
                                  double deadline_ms)
{
    size_t n = json_array_size(ids);
    const char **list = calloc(n ? n : 1, sizeof *list);
    int rc = list ? KG_OK : KG_ERR_NOMEM;
    for (size_t i = 0; list && i < n; i++) {
        json_t *e = json_array_get(ids, i);
        list[i] = json_string_value(json_is_object(e) ? json_object_get(e, "id") : e);
    }
    ctx->ids = ids;
    ctx->wait = kind;
    if (rc == KG_OK)
        rc = kg_waits_add(s->waits, c, list, n, deadline_ms, &ctx->outcome, &ctx->ended);
    free(list);
    if (rc == KG_OK) {
        ctx->waited = 1;
        atomic_fetch_add(&s->waits_open, 1);
        return MHD_YES;
    }
    ctx->wait = WAIT_NONE;
    if (rc == KG_ERR_INVALID)
        return send_error_retry(c, 503, "", "the server is stopping; the job is kept and runs when a server is "
                                            "back: ask for it again", "5");
    return send_error(c, 500, "", "out of memory");
}

/* The answer of POST /evaluate: the job's EvaluationResponse, 200 whether it ended or not. */
static enum MHD_Result answer_evaluate(server *s, struct MHD_Connection *c, const char *id, json_t *ended)
{
    kg_job j;
    memset(&j, 0, sizeof j);
    kg_error err;
    /* Ended in this process: its worker handed the job over (waits.c), nothing to read or parse. */
    json_t *full = json_incref(json_object_get(ended, id ? id : ""));
    if (!full) {
        int rc = kg_sched_wait(s->sched, id, 0, &j, &err);
        if (rc != KG_OK)
            return send_store_error(c, rc, "", &err);
        full = kg_server_job_json(&j, 1);
    }
    json_t *resp = json_incref(json_object_get(full, "kernelgym"));
    /* Still running after --sync-timeout: 200 with the job's status (pending or processing), a valid
     * EvaluationResponse.  Not 202: Dr. Kernel's client treats any 2xx but 200 as "submit again" and re-POSTs in
     * a tight loop, while on 200 with a status that is not final it polls /status every second, as it should.
     * kgym's client looks at the status. */
    kg_job_free(&j);
    json_decref(full);
    return send_json(c, 200, resp);
}

/* The answer of POST /evaluate/batch: each task's EvaluationResponse as it stands.  Whole or an error: an entry
 * that cannot be built (memory: 500) or read (the store: 503) is never left out of a shorter array, which a
 * client would pair with the wrong tasks.  A job no longer in the store (expired) is left out, as before. */
static enum MHD_Result answer_batch(server *s, struct MHD_Connection *c, json_t *ids, const char *bid,
                                   double submitted, json_t *ended)
{
    json_t *results = json_array();
    int completed = 0, failed = 0;
    int ok = results != NULL;
    size_t i;
    json_t *e;
    json_array_foreach(ids, i, e) {
        if (!ok)
            break;
        kg_job j;
        memset(&j, 0, sizeof j);
        kg_error err;
        const char *jid = json_string_value(json_object_get(e, "id"));
        json_t *full = json_incref(json_object_get(ended, jid ? jid : "")); /* handed over in memory (waits.c) */
        if (!full) {
            int rc = kg_sched_wait(s->sched, jid, 0, &j, &err);
            if (rc == KG_ERR_NOT_FOUND)
                continue;
            if (rc != KG_OK) {
                json_decref(results);
                return rc == KG_ERR_NOMEM ? send_error(c, 500, "", "out of memory") : send_store_error(c, rc, "", &err);
            }
            full = kg_server_job_json(&j, 1);
        }
        json_t *kr = json_object_get(full, "kernelgym"); /* NULL only when full could not be built */
        const char *st = json_string_value(json_object_get(kr, "status"));
        if (st && !strcmp(st, "completed"))
            completed++;
        else if (is_terminal(json_string_value(json_object_get(full, "status"))))
            failed++;
        ok = kg_json_push(results, json_incref(kr)) == 0;
        json_decref(full);
        kg_job_free(&j);
    }
    json_t *out = json_object();
    ok = ok && kg_json_set(out, "batch_id", kg_json_text(bid ? bid : "batch")) == 0 &&
         kg_json_set(out, "total_tasks", json_integer((json_int_t)json_array_size(ids))) == 0 &&
         kg_json_set(out, "completed_tasks", json_integer(completed)) == 0 &&
         kg_json_set(out, "failed_tasks", json_integer(failed)) == 0 &&
         kg_json_set(out, "results", json_incref(results)) == 0 &&
         kg_json_set(out, "batch_status", json_string(completed + failed == (int)json_array_size(ids)
                                                          ? "completed"
                                                          : "processing")) == 0 &&
         kg_json_set(out, "submitted_at", kg_service_iso_time(submitted)) == 0 && /* BatchEvaluationResponse: strings */
         kg_json_set(out, "completed_at", kg_service_iso_time(kg_wall_s())) == 0;
    json_decref(results);
    if (!ok) {
        json_decref(out);
        out = NULL; /* send_json: 500 out of memory */
    }
    return send_json(c, 200, out);
}

/* The answer of GET /v1/jobs/{id}, /status/{id}, /results/{id} (view 0, 1, 2). */
static enum MHD_Result answer_job(server *s, struct MHD_Connection *c, const char *id, int view)
{
    kg_job j;
    kg_error err;
    int rc = kg_sched_wait(s->sched, id, 0, &j, &err);
    if (rc == KG_ERR_NOT_FOUND) /* KernelGYM's endpoints call the id task_id */
        return send_error(c, 404, view ? "task_id" : "id", err.message);
    if (rc != KG_OK)
        return send_store_error(c, rc, "", &err);
    json_t *out;
    if (view == 1) { /* /status/{id} */
        out = kg_server_status_json(&j, kg_store_queue_position(s->store, id));
    } else if (view == 2) { /* /results/{id} */
        if (!is_terminal(j.status)) {
            char msg[256];
            snprintf(msg, sizeof msg, "job %.160s is %s; no result yet", id, j.status);
            kg_job_free(&j);
            return send_error(c, 404, "task_id", msg);
        }
        json_t *full = kg_server_job_json(&j, 1);
        out = json_incref(json_object_get(full, "kernelgym"));
        json_decref(full);
    } else {
        out = kg_server_job_json(&j, 0);
    }
    kg_job_free(&j);
    return send_json(c, 200, out);
}

/* Have all these jobs ended (or gone)?  -1: the store did not answer. */
static int all_ended(server *s, json_t *ids)
{
    size_t i;
    json_t *e;
    json_array_foreach(ids, i, e) {
        kg_job j;
        kg_error err;
        int rc = kg_store_get(s->store, json_string_value(json_is_object(e) ? json_object_get(e, "id") : e), &j,
                              &err);
        if (rc == KG_ERR_NOT_FOUND)
            continue;
        if (rc != KG_OK)
            return -1;
        int over = is_terminal(j.status);
        kg_job_free(&j);
        if (!over)
            return 0;
    }
    return 1;
}

/* The handler again, once the waiter resumed the connection. */
static enum MHD_Result answer_waited(server *s, struct MHD_Connection *c, request_ctx *ctx)
{
    int kind = ctx->wait;
    ctx->wait = WAIT_NONE;
    /* The client hung up (or shut its sending side).  An answer and a close, not MHD_NO: MHD would log every
     * abandoned request as an application error; a client that only half-closed still reads why. */
    if (ctx->outcome == KG_WAIT_GONE)
        return send_error_as(c, 400, "", "the client closed its side of the connection while the "
                             "request waited; the job is kept: ask for it again", NULL, 1, NULL);
    /* A stopping server answers what has ended; the rest get 503, which clients retry (the job is kept: the
     * next server runs it, and the same id finds it). */
    if (ctx->outcome == KG_WAIT_STOPPING && all_ended(s, ctx->ids) != 1)
        return send_error_retry(c, 503, "", "the server is stopping; the job is kept and runs when a server is "
                                            "back: ask for it again", "5");
    json_t *first = json_array_get(ctx->ids, 0);
    const char *id = json_string_value(json_is_object(first) ? json_object_get(first, "id") : first);
    if (kind == WAIT_EVALUATE)
        return answer_evaluate(s, c, id, ctx->ended);
    if (kind == WAIT_BATCH)
        return answer_batch(s, c, ctx->ids, ctx->batch_id, ctx->submitted, ctx->ended);
    return answer_job(s, c, id, ctx->view);
}

/* Answers at once when every job ended or there is no time to wait; else waits (begin_wait). */
static enum MHD_Result answer_or_wait(server *s, struct MHD_Connection *c, request_ctx *ctx, int kind,
                                      json_t *ids, double wait_s)
{
    if (wait_s > 0 && all_ended(s, ids) == 0)
        return begin_wait(s, c, ctx, kind, ids, kg_now_ms() + wait_s * 1000.0);
    ctx->ids = ids;
    ctx->wait = kind;
    ctx->outcome = KG_WAIT_DONE;
    return answer_waited(s, c, ctx);
}

/* ---- handlers ---- */

/* POST /evaluate: KernelGYM's synchronous evaluation. */
static enum MHD_Result h_evaluate(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *path_id,
                                  json_t *body)
{
    json_t *one = json_array(), *ids = NULL;
    if (!one || json_array_append(one, body) != 0) { /* an empty list would submit nothing and answer that */
        json_decref(one);
        return send_error(c, 500, "", "out of memory");
    }
    enum MHD_Result ret = submit_many(s, c, one, 1, "", NULL, &ids);
    json_decref(one);
    if (!ids)
        return ret;
    double timeout = json_number_value(json_object_get(body, "timeout"));
    double wait = s->o->sync_timeout_s;
    if (timeout > 0 && timeout * 2 + 60 < wait)
        wait = timeout * 2 + 60;
    return answer_or_wait(s, c, ctx, WAIT_EVALUATE, ids, wait);
}

/* A client's batch id: ids of requests without one derive from it. */
static int batch_id_of(struct MHD_Connection *c, const json_t *body, const char **out, enum MHD_Result *ret)
{
    json_t *bid = json_object_get(body, "batch_id");
    *out = json_string_value(bid);
    if (!bid || json_is_null(bid) || (*out && strlen(*out) >= 1 && strlen(*out) <= 100 &&
                                       strspn(*out, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                    "0123456789_-.:") == strlen(*out)))
        return 0;
    *ret = send_error(c, 400, "batch_id", "batch_id must be 1 to 100 characters of A-Z a-z 0-9 _ - . :");
    return -1;
}

/* POST /evaluate/batch: {batch_id, tasks: [EvaluationRequest] (1..100)}, synchronous. */
static enum MHD_Result h_batch(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *path_id,
                               json_t *body)
{
    if (!json_is_object(body))
        return send_error(c, 400, "", "the request must be a JSON object");
    json_t *tasks = json_object_get(body, "tasks");
    if (!json_is_array(tasks))
        return send_error(c, 400, "tasks", "tasks must be a list of evaluation requests");
    if (json_array_size(tasks) < 1 || json_array_size(tasks) > 100)
        return send_error(c, 400, "tasks", "tasks must hold 1 to 100 requests");
    const char *bid;
    enum MHD_Result ret;
    if (batch_id_of(c, body, &bid, &ret))
        return ret;
    ctx->submitted = kg_wall_s();
    json_t *ids = NULL;
    ret = submit_many(s, c, tasks, 1, "tasks", bid, &ids);
    if (!ids)
        return ret;
    if (bid && !(ctx->batch_id = kg_strdup(bid))) {
        json_decref(ids);
        return send_error(c, 500, "", "out of memory");
    }
    return answer_or_wait(s, c, ctx, WAIT_BATCH, ids, s->o->sync_timeout_s);
}

/* POST /v1/jobs: one request, or {"jobs": [...], "batch_id"?}; answers at once (202). */
static enum MHD_Result h_jobs_post(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *path_id,
                                   json_t *body)
{
    if (!json_is_object(body))
        return send_error(c, 400, "", "the request must be a JSON object");
    json_t *list = json_object_get(body, "jobs");
    int batch = list != NULL;
    if (batch && (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > 1000))
        return send_error(c, 400, "jobs", "jobs must be a list of 1 to 1000 evaluation requests");
    const char *bid = NULL;
    enum MHD_Result ret;
    if (batch && batch_id_of(c, body, &bid, &ret))
        return ret;
    json_t *one = NULL;
    if (!batch) {
        one = json_array();
        if (!one || json_array_append(one, body) != 0) { /* an empty list would submit nothing and answer that */
            json_decref(one);
            return send_error(c, 500, "", "out of memory");
        }
        list = one;
    }
    json_t *ids = NULL;
    ret = submit_many(s, c, list, 0, batch ? "jobs" : "", bid, &ids);
    json_decref(one);
    if (!ids)
        return ret;
    if (batch)
        return send_json(c, 202, json_pack("{s:o}", "jobs", ids));
    json_t *first = json_incref(json_array_get(ids, 0));
    json_decref(ids);
    return send_json(c, 202, first);
}

/* GET /v1/jobs/{id}, /status/{id}, /results/{id}: ?wait=S long-polls until the job ends. */
static enum MHD_Result job_get(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id, int view)
{
    int ok = 1;
    double wait = query_double(c, "wait", 0, 0, 600, &ok);
    if (!ok)
        return send_error(c, 400, "wait", "wait must be seconds from 0 to 600");
    ctx->view = view;
    return answer_or_wait(s, c, ctx, WAIT_JOB, json_pack("[s]", id), wait);
}

static enum MHD_Result h_job(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id, json_t *body)
{
    return job_get(s, c, ctx, id, 0);
}

static enum MHD_Result h_status(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                json_t *body)
{
    return job_get(s, c, ctx, id, 1);
}

static enum MHD_Result h_results(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                 json_t *body)
{
    return job_get(s, c, ctx, id, 2);
}

static enum MHD_Result h_job_delete(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                    json_t *body)
{
    char was[16] = "";
    kg_error err;
    int rc = kg_store_cancel(s->store, id, was, &err);
    if (rc == KG_ERR_NOT_FOUND)
        return send_error(c, 404, "id", err.message);
    if (rc != KG_OK)
        return send_store_error(c, rc, "id", &err);
    /* Its waiters and the worker running it heard of it from the store (kg_store_watch: this process's cancels
     * are news to every watcher), before kg_store_cancel returned. */
    return send_json(c, 200, json_pack("{s:s, s:s, s:s}", "id", id, "status", "cancelled", "was", was));
}

static enum MHD_Result h_jobs_list(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                   json_t *body)
{
    const char *status = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "status");
    static const char *const ok_status[] = {"queued", "running", "done", "failed", "cancelled"};
    int good = !status;
    for (size_t i = 0; status && i < 5; i++)
        good |= !strcmp(status, ok_status[i]);
    if (!good)
        return send_error(c, 400, "status", "status must be queued, running, done, failed or cancelled");
    int ok = 1;
    double limit = query_double(c, "limit", 100, 1, 10000, &ok);
    if (!ok)
        return send_error(c, 400, "limit", "limit must be a number from 1 to 10000");
    json_t *arr;
    kg_error err;
    int rc = kg_store_list(s->store, status, (int)limit, &arr, &err);
    if (rc != KG_OK)
        return send_store_error(c, rc, "", &err);
    return send_json(c, 200, json_pack("{s:o, s:I}", "jobs", arr, "count", (json_int_t)json_array_size(arr)));
}

/* KernelGYM's SystemHealthResponse fields, added to kgym's own: an ISO timestamp, gpu_status (this server's
 * device and workers), queue_status, memory_usage (none measured: empty), active_tasks, total_processed, uptime. */
static json_t *health_fields(server *s, json_t *o, long finished, long failed, json_int_t pending,
                             json_int_t processing)
{
    if (!o)
        return NULL;
    const char *dev = s->o->eval.device ? s->o->eval.device : "cpu";
    /* Whole or NULL (memory): send_json answers 500 then, never a health without some fields. */
    int ok = kg_json_set(o, "timestamp", kg_service_iso_time(kg_wall_s())) == 0 &&
             kg_json_set(o, "gpu_status", json_pack("{s:{s:i}}", dev, "workers", s->o->workers)) == 0 &&
             kg_json_set(o, "queue_status", json_pack("{s:I, s:I, s:I}", "pending", pending, "processing",
                                                      processing, "completed", (json_int_t)finished)) == 0 &&
             kg_json_set(o, "memory_usage", json_object()) == 0 &&
             kg_json_set(o, "active_tasks", json_integer(processing)) == 0 &&
             kg_json_set(o, "total_processed", json_integer((json_int_t)(finished + failed))) == 0 &&
             kg_json_set(o, "uptime", kg_json_number(kg_wall_s() - s->started_at)) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The store's part of /health: {ok, error?, durable: true|false|"unknown", durability? (why not),
 * appendfsync? (Redis), data_lost (times this process found Redis's data set lost), data_lost_at?}: an operator
 * sees whether an acknowledged job would survive a restart of the store, and whether one was lost already. */
static json_t *store_health(server *s, const kg_error *err)
{
    kg_store_durability d;
    kg_store_durability_get(s->store, &d);
    /* Whole or NULL (memory): the caller's json_pack then fails, and send_json answers 500. */
    json_t *o = json_pack("{s:b}", "ok", err == NULL);
    int ok = (!err || kg_json_set(o, "error", kg_json_text(err->message)) == 0) &&
             kg_json_set(o, "durable", d.durable < 0 ? json_string("unknown") : json_boolean(d.durable)) == 0 &&
             (!d.why[0] || kg_json_set(o, "durability", kg_json_text(d.why)) == 0) &&
             (!d.appendfsync[0] || kg_json_set(o, "appendfsync", kg_json_text(d.appendfsync)) == 0) &&
             kg_json_set(o, "data_lost", json_integer((json_int_t)d.data_lost)) == 0 &&
             (!d.data_lost || kg_json_set(o, "data_lost_at", kg_service_iso_time(d.data_lost_at)) == 0);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Healthy means able to take jobs: the store answers, its database is
 * still the one opened and (Redis) it would not lose them; otherwise 503
 * "unhealthy" with the store's error (a balancer takes the server out, an
 * operator reads why). */
static enum MHD_Result h_health(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                json_t *body)
{
    long finished, failed;
    kg_sched_totals(s->sched, &finished, &failed);
    kg_error err;
    if (kg_store_check(s->store, &err) != KG_OK)
        return send_json(c, 503, health_fields(s, json_pack("{s:s, s:f, s:o}", "status", "unhealthy", "uptime_s",
                                                            kg_wall_s() - s->started_at, "store",
                                                            store_health(s, &err)),
                                                finished, failed, 0, 0));
    json_int_t pending = (json_int_t)kg_store_count(s->store, "queued");
    json_int_t processing = (json_int_t)kg_store_count(s->store, "running");
    json_t *o = json_pack("{s:s, s:f, s:s, s:{s:I, s:I}, s:i, s:I, s:I}", "status", "healthy", "uptime_s",
                          kg_wall_s() - s->started_at, "device", s->o->eval.device ? s->o->eval.device : "cpu",
                          "queue", "pending", pending, "processing", processing, "workers", s->o->workers,
                          "jobs_finished", (json_int_t)finished, "jobs_failed", (json_int_t)failed);
    if (kg_json_set(o, "jobs_cached", json_integer((json_int_t)atomic_load(&s->cached))) != 0 ||
        kg_json_set(o, "store", store_health(s, NULL)) != 0) {
        json_decref(o);
        o = NULL; /* send_json: 500 out of memory */
    }
    return send_json(c, 200, health_fields(s, o, finished, failed, pending, processing));
}

/* GET /queue/status, as KernelGYM answers it: {pending, pending_by_prefix, worker_queues}; kgym has one queue
 * (no prefixes, no per-worker queues: workers claim from it) and adds what is running. */
static enum MHD_Result h_queue_status(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                      json_t *body)
{
    json_int_t pending = (json_int_t)kg_store_count(s->store, "queued");
    return send_json(c, 200, json_pack("{s:I, s:{s:I}, s:{}, s:I}", "pending", pending, "pending_by_prefix", "kgym",
                                       pending, "worker_queues", "processing",
                                       (json_int_t)kg_store_count(s->store, "running")));
}

static enum MHD_Result h_workers(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                 json_t *body)
{
    json_t *list = NULL;
    kg_error err;
    int wrc = kg_store_workers(s->store, &list, &err); /* a fleet: its heartbeats, and this process's threads */
    if (wrc == KG_ERR_NOT_FOUND) { /* no fleet: this process's threads */
        list = kg_sched_workers(s->sched);
    } else if (wrc != KG_OK) {
        return send_error(c, 503, "", err.message);
    } else {
        json_t *mine = kg_sched_workers(s->sched);
        if (!mine || json_array_extend(list, mine) != 0) { /* memory: whole or 500, never a worker left out */
            json_decref(list);
            list = NULL;
        }
        json_decref(mine);
    }
    json_t *byid = json_object();
    int active = 0;
    size_t i;
    json_t *w;
    json_array_foreach(list, i, w) {
        const char *wid = json_string_value(json_object_get(w, "id"));
        if (wid && json_object_set(byid, wid, w) != 0) {
            json_decref(byid);
            byid = NULL; /* json_pack fails on it: 500 */
            break;
        }
        active++;
    }
    if (!list) {
        json_decref(byid);
        return send_json(c, 200, NULL);
    }
    return send_json(c, 200, json_pack("{s:o, s:i, s:i, s:o}", "workers", byid, "total_workers",
                                       (int)json_array_size(list), "active_workers", active, "worker_list", list));
}

static enum MHD_Result h_metrics(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                 json_t *body)
{
    kg_buf b = {0};
    /* Every write checked: a part of the text would read as counters that are not there. */
    int wr = kg_sched_metrics(s->sched, &b);
    wr |= kg_buf_printf(&b,
                        "# HELP kgym_jobs_cached_total Jobs answered at submission from the result of an identical"
                        " one.\n# TYPE kgym_jobs_cached_total counter\nkgym_jobs_cached_total %ld\n",
                        atomic_load(&s->cached));
    wr |= kg_buf_printf(&b, "# HELP kgym_requests_waiting Requests waiting for their jobs (no thread held by any).\n"
                            "# TYPE kgym_requests_waiting gauge\nkgym_requests_waiting %zu\n",
                        s->waits ? kg_waits_count(s->waits) : (size_t)0);
    wr |= kg_buf_printf(&b, "# HELP kgym_uptime_seconds Seconds since the server started.\n"
                            "# TYPE kgym_uptime_seconds gauge\nkgym_uptime_seconds %.1f\n",
                        kg_wall_s() - s->started_at);
    if (wr != KG_OK) {
        kg_buf_free(&b);
        return send_error(c, 500, "", "out of memory");
    }
    size_t len = b.len;
    char *text = kg_buf_release(&b);
    if (!text)
        return MHD_NO;
    return send_text(c, 200, "text/plain; version=0.0.4", text, len, NULL);
}

static enum MHD_Result h_dashboard(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                   json_t *body)
{
    char *page = kg_strdup(kg_server_dashboard_html);
    return page ? send_text(c, 200, "text/html; charset=utf-8", page, strlen(page), NULL) : MHD_NO;
}

/* ---- routing ---- */

/* Every endpoint, once: the early checks (404, 405 and which are open, from the headers alone) and the dispatch
 * after the body read the same table.  A path ending in '/' takes an id: the rest of the URL. */
enum { M_GET = 1, M_POST = 2, M_DELETE = 4 };
typedef enum MHD_Result (*handler_fn)(server *s, struct MHD_Connection *c, request_ctx *ctx, const char *id,
                                      json_t *body);
typedef struct route_def {
    const char *path;
    unsigned methods;
    int open; /* no token needed: /health and the dashboard */
    handler_fn fn;
} route_def;

static const route_def routes[] = {
    {"/health", M_GET, 1, h_health},
    {"/", M_GET, 1, h_dashboard},
    {"/dashboard", M_GET, 1, h_dashboard},
    {"/evaluate", M_POST, 0, h_evaluate},
    {"/evaluate/batch", M_POST, 0, h_batch},
    {"/v1/jobs", M_POST, 0, h_jobs_post},
    {"/v1/jobs", M_GET, 0, h_jobs_list},
    {"/v1/jobs/", M_GET, 0, h_job},
    {"/v1/jobs/", M_DELETE, 0, h_job_delete},
    {"/status/", M_GET, 0, h_status},
    {"/results/", M_GET, 0, h_results},
    {"/tasks/", M_DELETE, 0, h_job_delete},
    {"/workers/status", M_GET, 0, h_workers},
    {"/queue/status", M_GET, 0, h_queue_status},
    {"/metrics", M_GET, 0, h_metrics},
};

static unsigned method_bit(const char *method)
{
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
        return M_GET;
    if (!strcmp(method, "POST"))
        return M_POST;
    if (!strcmp(method, "DELETE"))
        return M_DELETE;
    return 0;
}

/* The route of url and method; NULL with *status 404 (no such path) or 405 (*allow: the methods it takes),
 * or with 404 and *bad_id for an id with a '/' (sent as %2F, or a path one segment too long), which no job has:
 * it used to read as a wrong method.  *id: the URL's id part, for a path that takes one (any other id is looked
 * up: a job the API could not have made still answers 404 from the store, or is shown when a store holds it). */
static const route_def *find_route(const char *url, const char *method, const char **id, int *status,
                                   char allow[32], int *bad_id)
{
    unsigned m = method_bit(method), allowed = 0;
    *id = NULL;
    *bad_id = 0;
    allow[0] = '\0';
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const route_def *r = &routes[i];
        size_t n = strlen(r->path);
        int with_id = r->path[n - 1] == '/' && n > 1;
        if (with_id ? strncmp(url, r->path, n) || !url[n] : strcmp(url, r->path))
            continue;
        allowed |= r->methods;
        if (r->methods & m) {
            *id = with_id ? url + n : NULL;
            if (*id && strchr(*id, '/')) {
                *bad_id = 1;
                *status = 404;
                return NULL;
            }
            return r;
        }
    }
    *status = allowed ? 405 : 404;
    snprintf(allow, 32, "%s%s%s", allowed & M_GET ? "GET, HEAD" : "",
             (allowed & M_GET) && (allowed & (M_POST | M_DELETE)) ? ", " : "",
             allowed & M_POST ? "POST" : allowed & M_DELETE ? "DELETE" : "");
    return NULL;
}

static enum MHD_Result send_no_route(struct MHD_Connection *c, const char *id, int status, const char *allow,
                                     int bad_id)
{
    if (bad_id) {
        char msg[400];
        snprintf(msg, sizeof msg, "no job \"%.200s\": a job id never holds '/' (sent as %%2F or not); ids are 1 to "
                                  "128 characters of A-Z a-z 0-9 _ - . :", id);
        return send_error(c, 404, "id", msg);
    }
    if (status == 405) {
        char msg[96];
        snprintf(msg, sizeof msg, "method not allowed on this path (it takes %s)", allow);
        return send_error_as(c, 405, "", msg, NULL, 0, allow);
    }
    return send_error(c, 404, "", "no such endpoint");
}

static int auth_ok(server *s, struct MHD_Connection *c)
{
    const char *tok = s->o->token;
    if (!tok)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    /* The scheme is case-insensitive (RFC 9110 11.1): "bearer" is "Bearer". */
    if (!h || strncasecmp(h, "Bearer ", 7))
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    size_t a = strlen(h), b = strlen(tok);
    unsigned diff = (unsigned)(a ^ b);
    /* Constant time in the token's length: no timing oracle on the prefix. */
    for (size_t i = 0; i < b; i++)
        diff |= (unsigned char)(i < a ? h[i] : 0) ^ (unsigned char)tok[i];
    return diff == 0;
}

/* Does the Host header name this server?  Only asked of a server without a token: a web page on a name its
 * attacker controls (evil.example) can make that name resolve to 127.0.0.1 after it loaded (DNS rebinding) and
 * then talk to the server as if it were its own origin, reading answers (GET /v1/jobs) and queueing code; its
 * requests still carry its own name in Host, which a browser never lets a page set.  Allowed: localhost,
 * 127.0.0.1, [::1], the address the server was bound to, the address this connection reached (a server on
 * 0.0.0.0 reached at 10.0.0.5) and every --allow-host name, with any port or none (an ssh tunnel or a proxy
 * may forward from another port; the name is what a rebinding page cannot fake).  No Host at all is not a
 * browser's request: allowed. */
static int host_ok(server *s, struct MHD_Connection *c, const char *host)
{
    if (s->o->token || !host)
        return 1;
    size_t len;
    if (host[0] == '[') { /* an IPv6 literal: up to its ']' */
        const char *close = strchr(host, ']');
        if (!close)
            return 0;
        len = (size_t)(close - host) + 1;
    } else {
        len = strcspn(host, ":");
    }
    const char *port = host + len;
    if (*port && (*port != ':' || !port[1] || strspn(port + 1, "0123456789") != strlen(port + 1)))
        return 0;
    if (len == 0 || len > 255)
        return 0;
    char name[256];
    memcpy(name, host, len);
    name[len] = '\0';
    static const char *const own[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (!strcasecmp(name, own[i]))
            return 1;
    if (strcmp(s->o->host, "0.0.0.0") && !strcasecmp(name, s->o->host))
        return 1;
    for (int i = 0; i < s->o->n_allow_hosts; i++)
        if (!strcasecmp(name, s->o->allow_hosts[i]))
            return 1;
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct sockaddr_storage local;
    socklen_t sl = sizeof local;
    char addr[INET6_ADDRSTRLEN + 2] = "";
    if (fd && getsockname(fd->connect_fd, (struct sockaddr *)&local, &sl) == 0) {
        if (local.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&local)->sin_addr, addr, sizeof addr);
        else if (local.ss_family == AF_INET6 &&
                 inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&local)->sin6_addr, addr + 1, sizeof addr - 2)) {
            addr[0] = '[';
            strcat(addr, "]");
        }
    }
    return addr[0] && !strcasecmp(name, addr);
}

/* Is the Content-Type application/json (parameters such as charset allowed)? */
static int is_json_type(const char *ct)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return !strncasecmp(ct, "application/json", n) && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static conn_rec *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* Everything that can be decided from the request line and the headers,
 * before a byte of the body is read: a client that may not upload is
 * refused before it uploads (unauthenticated bodies are never buffered).
 * Returns 1 and queues the refusal, or 0 to go on. */
static int refuse_early(server *s, struct MHD_Connection *c, const char *url, const char *method, request_ctx *ctx,
                        enum MHD_Result *ret)
{
    if (ctx->bad_url) {
        *ret = send_error(c, 400, "", "the URL contains %00 (a NUL byte), which no id or parameter may hold");
        return 1;
    }
    conn_rec *cr = conn_of(c);
    if (cr && cr->refused) {
        char msg[300];
        if (cr->refused == REFUSE_ADDRESS)
            snprintf(msg, sizeof msg, "your address holds %d connections to this server, more than the %d each "
                                      "address may (--max-client-connections); close some or retry later",
                     cr->held_by_addr, s->o->max_client_connections);
        else
            snprintf(msg, sizeof msg, "the server holds %d connections, more than --max-connections %d, and your "
                                      "address holds %d, more than its share; retry later",
                     cr->held_in_all, s->o->max_connections, cr->held_by_addr);
        *ret = send_error_as(c, 503, "", msg, "5", 1, NULL);
        return 1;
    }
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!host_ok(s, c, host)) {
        char msg[600];
        snprintf(msg, sizeof msg, "the Host header \"%.200s\" does not name this server: a server without a token "
                                  "answers only requests addressed to localhost, 127.0.0.1, [::1] or its own "
                                  "address (a web page on another name could have pointed that name here: DNS "
                                  "rebinding); --allow-host NAME admits another name, --token any",
                 host);
        *ret = send_error(c, 403, "Host", msg);
        return 1;
    }
    const char *id;
    int status, bad_id;
    char allow[32];
    const route_def *r = find_route(url, method, &id, &status, allow, &bad_id);
    if (!r) {
        *ret = send_no_route(c, id, status, allow, bad_id);
        return 1;
    }
    if (r->open)
        return 0;
    if (!auth_ok(s, c)) {
        *ret = send_error(c, 401, "Authorization", "a valid bearer token is required");
        return 1;
    }
    if (strcmp(method, "POST"))
        return 0;
    /* JSON only: a web page can POST text/plain or a form to any address
     * without asking (no CORS preflight), never application/json.  Without
     * this, a page a user of the machine opens could queue code here. */
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!is_json_type(ct)) {
        char msg[200];
        snprintf(msg, sizeof msg, "a POST body must be JSON with \"Content-Type: application/json\", not \"%.100s\"",
                 ct ? ct : "(none)");
        *ret = send_error(c, 415, "Content-Type", msg);
        return 1;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->o->max_body_bytes) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->o->max_body_bytes);
        *ret = send_error(c, 413, "", msg);
        return 1;
    }
    return 0;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method,
                             request_ctx *ctx)
{
    if (ctx->too_large) {
        char msg[160];
        if (ctx->too_large == 2)
            return send_error_retry(c, 503, "", "the server holds too many large request bodies; retry later",
                                    "5");
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->o->max_body_bytes);
        return send_error(c, 413, "", msg);
    }
    const char *id;
    int status, bad_id;
    char allow[32];
    const route_def *r = find_route(url, method, &id, &status, allow, &bad_id);
    if (!r) /* refuse_early answered it already; kept for safety */
        return send_no_route(c, id, status, allow, bad_id);
    json_t *body = NULL;
    if (!strcmp(method, "POST")) {
        json_error_t je;
        body = json_loadb(ctx->body.data ? ctx->body.data : "", ctx->body.len, JSON_REJECT_DUPLICATES, &je);
        if (!body) {
            char msg[300];
            snprintf(msg, sizeof msg, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
            return send_error(c, 400, "", msg);
        }
    }
    enum MHD_Result ret = r->fn(s, c, ctx, id, body);
    json_decref(body);
    return ret;
}

/* The raw URL, before MHD decodes it: a %00 there would cut the decoded
 * URL (a C string) short, and "/v1/jobs/a%00b" would read job "a".  The
 * context made here is the request's (MHD hands it to on_request). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    request_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx && uri)
        ctx->bad_url = strstr(uri, "%00") != NULL;
    return ctx;
}

/* The client's address as a key (IPv4 in the first 4 bytes). */
static int addr_key(struct MHD_Connection *c, unsigned char a[16], int *family)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    memset(a, 0, 16);
    if (!i || !i->client_addr)
        return -1;
    *family = i->client_addr->sa_family;
    if (*family == AF_INET)
        memcpy(a, &((const struct sockaddr_in *)i->client_addr)->sin_addr, 4);
    else if (*family == AF_INET6)
        memcpy(a, &((const struct sockaddr_in6 *)i->client_addr)->sin6_addr, 16);
    else
        return -1;
    return 0;
}

/* Opened connections are counted per client address.  One over --max-client-connections for its address, or
 * one that makes the total pass --max-connections from an address that holds more than its share (the limit
 * divided among the addresses connected), is refused: 503 with Retry-After to its first request, then closed.
 * An address under its share is still admitted past --max-connections (into MHD's hard limit above it), so
 * that many addresses holding their connections do not lock out a new one. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_rec *r = fd ? calloc(1, sizeof *r) : NULL;
        if (!r)
            return; /* no deadline for this one; MHD's idle timeout and limits still hold */
        r->fd = fd->connect_fd;
        r->waiting = CONN_HEADERS;
        r->since = kg_now_ms();
        unsigned char key[16];
        int family = 0;
        int keyed = addr_key(c, key, &family) == 0;
        pthread_mutex_lock(&conns_lock);
        addr_rec *a = NULL;
        for (a = addrs; keyed && a; a = a->next)
            if (a->family == family && !memcmp(a->a, key, 16))
                break;
        if (keyed && !a && (a = calloc(1, sizeof *a))) {
            memcpy(a->a, key, 16);
            a->family = family;
            a->next = addrs;
            addrs = a;
            n_addrs++;
        }
        r->addr = a;
        if (a)
            a->n++;
        n_conns++;
        int share = s->o->max_connections / (n_addrs > 0 ? n_addrs : 1);
        int mine = a ? a->n : 1;
        if (mine > s->o->max_client_connections)
            r->refused = REFUSE_ADDRESS;
        else if (n_conns > s->o->max_connections && mine > (share > 1 ? share : 1))
            r->refused = REFUSE_SHARE;
        r->held_by_addr = mine;
        r->held_in_all = n_conns;
        r->next = conns;
        if (conns)
            conns->prev = r;
        conns = r;
        pthread_mutex_unlock(&conns_lock);
        *socket_context = r;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn_rec *r = *socket_context;
        pthread_mutex_lock(&conns_lock);
        if (r->prev)
            r->prev->next = r->next;
        else
            conns = r->next;
        if (r->next)
            r->next->prev = r->prev;
        n_conns--;
        if (r->addr && --r->addr->n == 0) {
            for (addr_rec **p = &addrs; *p; p = &(*p)->next)
                if (*p == r->addr) {
                    *p = r->addr->next;
                    break;
                }
            free(r->addr);
            n_addrs--;
        }
        pthread_mutex_unlock(&conns_lock);
        free(r);
        *socket_context = NULL;
    }
}

/* The connection's headers arrived (waiting 0) or its answer went (1). */
static void conn_waiting(struct MHD_Connection *c, int waiting)
{
    conn_rec *r = conn_of(c);
    if (!r)
        return;
    pthread_mutex_lock(&conns_lock);
    r->waiting = waiting;
    r->since = kg_now_ms();
    pthread_mutex_unlock(&conns_lock);
}

/* Ends the connections whose headers or body are late: shutdown() makes
 * MHD's next read of them fail, and MHD closes them.  A refused connection's
 * headers have a second (it holds a place above the limits).  Returns how
 * many. */
static int end_late_requests(double headers_s, double body_s)
{
    int n = 0;
    double now = kg_now_ms();
    pthread_mutex_lock(&conns_lock);
    for (conn_rec *r = conns; r; r = r->next) {
        double limit = r->waiting == CONN_BODY ? body_s : r->refused && headers_s > 1 ? 1 : headers_s;
        if (r->waiting != CONN_BUSY && now - r->since > limit * 1000) {
            shutdown(r->fd, SHUT_RDWR);
            r->waiting = CONN_BUSY;
            n++;
        }
    }
    pthread_mutex_unlock(&conns_lock);
    return n;
}

static void body_release(server *s, request_ctx *ctx)
{
    atomic_fetch_sub(&s->body_bytes, ctx->counted);
    ctx->counted = 0;
    kg_buf_free(&ctx->body);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size,
                                  void **con_cls)
{
    server *s = cls;
    request_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = calloc(1, sizeof *ctx);
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
    }
    if (ctx->wait) /* resumed by the waiter */
        return answer_waited(s, c, ctx);
    if (!ctx->started) { /* headers only, no body read yet */
        ctx->started = 1;
        conn_waiting(c, CONN_BODY); /* the body (if any) from now on: --body-timeout */
        enum MHD_Result ret;
        if (refuse_early(s, c, url, method, ctx, &ret))
            return ret;
        return MHD_YES;
    }
    if (*upload_size) {
        /* Past the limit (a chunked body has no Content-Length to refuse
         * early): keep reading but keep nothing. */
        size_t n = *upload_size;
        if (!ctx->too_large && ctx->body.len + n > s->o->max_body_bytes)
            ctx->too_large = 1;
        if (!ctx->too_large && atomic_fetch_add(&s->body_bytes, n) + n >
                                   s->o->max_body_bytes * KG_BODY_BUDGET) {
            atomic_fetch_sub(&s->body_bytes, n);
            ctx->too_large = 2;
        } else if (!ctx->too_large) {
            ctx->counted += n;
        }
        if (!ctx->too_large && kg_buf_append(&ctx->body, upload_data, n) != KG_OK)
            ctx->too_large = 1;
        if (ctx->too_large)
            body_release(s, ctx);
        *upload_size = 0;
        return MHD_YES;
    }
    conn_waiting(c, CONN_BUSY); /* the whole request is here: answering it has no deadline of ours */
    return route(s, c, url, method, ctx);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    server *s = cls;
    request_ctx *ctx = *con_cls;
    conn_waiting(c, CONN_HEADERS);
    if (ctx) {
        body_release(s, ctx);
        if (ctx->waited)
            atomic_fetch_sub(&s->waits_open, 1);
        json_decref(ctx->ids);
        json_decref(ctx->ended);
        free(ctx->batch_id);
        free(ctx);
        *con_cls = NULL;
    }
}

/* The listening socket, made here rather than by MHD: without SO_REUSEPORT
 * (MHD_OPTION_LISTENING_ADDRESS_REUSE let a second server bind the same
 * port and take half the requests), and with bind's own error for a port in
 * use. */
static int listen_socket(const kg_service_options *o, int *fd_out, kg_error *err)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1)
        return kg_error_set(err, KG_ERR_INVALID, "--host must be an IPv4 address, not \"%s\"", o->host);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return kg_error_set(err, KG_ERR_IO, "socket: %s", strerror(errno));
    /* SO_REUSEADDR only lets us bind over connections of a previous server
     * in TIME_WAIT; on Linux it never lets two listeners share a port. */
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 512) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            return kg_error_set(err, KG_ERR_IO,
                                "cannot listen on %s:%d: the port is in use (another kgym serve?); "
                                "choose another --port or stop the other server",
                                o->host, o->port);
        return kg_error_set(err, KG_ERR_IO, "cannot listen on %s:%d: %s", o->host, o->port, strerror(e));
    }
    *fd_out = fd;
    return KG_OK;
}

/* ---- the service ---- */

static int stop_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    char b = (char)sig;
    ssize_t r = write(stop_pipe[1], &b, 1);
    (void)r;
}

int kg_service_check_token(const char *token, const char *source, kg_error *err)
{
    if (!token)
        return KG_OK;
    size_t n = strlen(token), blank = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)token[i];
        blank += ch == ' ' || (ch >= '\t' && ch <= '\r');
        bad += ch <= ' ' || ch >= 0x7f;
    }
    if (n == blank)
        return kg_error_set(err, KG_ERR_INVALID,
                            "%s is %s: a server started so would have no auth at all; give a token, or leave %s "
                            "out (unset) to run without one", source, n ? "only whitespace" : "empty", source);
    if (bad)
        return kg_error_set(err, KG_ERR_INVALID,
                            "%s holds a space, a control or a non-ASCII character: a client could not send it "
                            "intact in an Authorization header; use printable ASCII", source);
    return KG_OK;
}

/* --allow-host: a host name or address as a Host header names it, without a port. */
static int check_allow_hosts(const kg_service_options *o, kg_error *err)
{
    for (int i = 0; i < o->n_allow_hosts; i++) {
        const char *h = o->allow_hosts[i];
        size_t n = strlen(h);
        int v6 = n > 2 && h[0] == '[' && h[n - 1] == ']' &&
                 strspn(h + 1, "0123456789abcdefABCDEF:.") == n - 2;
        int name = n > 0 && strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == n;
        if (n > 253 || !(v6 || name))
            return kg_error_set(err, KG_ERR_INVALID,
                                "--allow-host needs a host name or address as a Host header names it, without a "
                                "port (kgym.example, 10.0.0.5, [fd00::5]), not \"%.200s\"", h);
    }
    return KG_OK;
}

/* Every connection is a descriptor: the soft limit is raised to the hard one (often 1,024 against 500,000),
 * and a hard limit too low for the connection limits is said at start rather than met as failed accepts. */
static void raise_fd_limit(unsigned need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        fprintf(stderr, "kgym serve: WARNING: %llu open files allowed (ulimit -n), fewer than the %u the connection "
                        "limits need: raise it or lower --max-connections\n",
                (unsigned long long)rl.rlim_cur, need);
}

/* A worker of this process ended a job: its waiters get the job as the response shows it, built here from the
 * worker's own result and request (no store read, no parse), or, not known in full, read it from the store. */
static void wake_waits(void *arg, const kg_sched_end *end)
{
    json_t *full = end ? kg_server_job_json_from(end->job, end->result, end->request, 1) : NULL;
    kg_waits_wake(arg, end ? end->job->id : NULL, full);
    json_decref(full);
}

int kg_service_run(const kg_service_options *o, kg_error *err)
{
    int rc = KG_OK;
    server s = {.o = o, .started_at = kg_wall_s()};
    kg_supervisor *sup = NULL;
    struct MHD_Daemon *d = NULL;
    char *task_dir = NULL;
    int stopped = 1;

    if (!o->no_http) {
        rc = kg_service_check_token(o->token, "the token", err);
        if (rc == KG_OK)
            rc = check_allow_hosts(o, err);
        if (rc != KG_OK)
            return rc;
    }
    /* Before any thread: the guardian is forked. */
    int orphans = kg_server_kill_orphans();
    if (orphans)
        fprintf(stderr, "kgym serve: killed %d process(es) left by a server that died\n", orphans);
    rc = kg_server_guard(err);
    if (rc != KG_OK)
        return rc;
    if (pipe2(stop_pipe, O_CLOEXEC) != 0)
        return kg_error_set(err, KG_ERR_IO, "pipe: %s", strerror(errno));
    rc = kg_store_open(o->redis ? o->redis : o->db_path, &s.store, err);
    if (rc != KG_OK)
        goto out;
    kg_store_configure(s.store, o->lease_s, o->max_attempts, o->result_ttl_s);
    /* Fail closed: a Redis that would lose acknowledged jobs is refused unless --redis-volatile accepts that. */
    rc = kg_store_require_durable(s.store, o->redis_volatile, err);
    if (rc != KG_OK)
        goto out;
    if (o->redis) {
        kg_store_durability du;
        kg_store_durability_get(s.store, &du);
        if (du.durable == 1)
            fprintf(stderr, "kgym serve: %s persists jobs (appendonly yes, appendfsync %s)\n", o->redis,
                    du.appendfsync[0] ? du.appendfsync : "unknown");
        else if (du.durable == 0)
            fprintf(stderr, "kgym serve: WARNING: %s has %s; --redis-volatile accepts that: its jobs are lost "
                            "when it restarts\n", o->redis, du.why);
        else
            fprintf(stderr, "kgym serve: WARNING: %s: %s\n", o->redis, du.why);
    }
    int requeued = 0, failed = 0;
    rc = kg_store_recover(s.store, o->max_attempts, &requeued, &failed, err);
    if (rc != KG_OK)
        goto out;
    if (requeued || failed)
        fprintf(stderr, "kgym serve: recovered %d interrupted job(s): %d queued again, %d failed after %d attempts\n",
                requeued + failed, requeued, failed, o->max_attempts);
    fprintf(stderr, "kgym serve: %ld job(s) queued in %s\n", kg_store_count(s.store, "queued"),
            o->redis ? o->redis : o->db_path);
    if (o->workers > 0) {
        rc = kg_temp_dir("kgym-serve", &task_dir, err);
        if (rc == KG_OK)
            rc = kg_supervisor_open(&o->supervisor, &sup, err);
        if (rc != KG_OK)
            goto out;
    }
    char prefix[192] = "";
    if (o->redis) { /* names unique across the fleet: host:pid:device#i */
        char host[128] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        snprintf(prefix, sizeof prefix, "%s:%ld:", host, (long)getpid());
    }
    if (!o->no_http) {
        rc = kg_waits_start(s.store, &s.waits, err);
        if (rc != KG_OK)
            goto out;
    }
    kg_sched_options so = {.store = s.store, .sup = sup, .eval = o->eval, .task_dir = task_dir,
                           .workers = o->workers, .spare_workers = o->spare_workers, /* sched: none without workers */
                           .fifo = o->fifo,
                           .max_queue = o->max_queue, .name_prefix = prefix,
                           .device_kind = o->device_kind, .lease_s = o->lease_s,
                           .on_job_end = s.waits ? wake_waits : NULL, .on_job_end_arg = s.waits};
    rc = kg_sched_start(&so, &s.sched, err);
    if (rc != KG_OK)
        goto out;

    if (o->no_http) {
        fprintf(stderr, "kgym worker: %d worker(s) on %s (kind \"%s\"), jobs from %s\n", o->workers,
                o->eval.device ? o->eval.device : "cpu",
                o->device_kind ? o->device_kind : o->eval.device ? o->eval.device : "cpu",
                o->redis ? o->redis : o->db_path);
        goto serve;
    }
    int lfd = -1;
    rc = listen_socket(o, &lfd, err);
    if (rc != KG_OK)
        goto out;
    /* Threads: a pool runs the handlers over epoll; a request that waits for its job is suspended and holds
     * none (waits.c), so connections cost a descriptor each, not a thread.  Limits: ours (--max-connections,
     * --max-client-connections: on_connection) answer 503 with Retry-After; MHD's, set above ours, close a
     * connection without a word and are met only by a client opening connections faster than they are
     * refused (a refused one is given a second for its request: end_late_requests).  An idle timeout of its own
     * (a connection silent this long is closed; a request waiting for a job is not idle: MHD does not time out a
     * suspended connection). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = cpus > 0 ? (unsigned)cpus * 2 : KG_HTTP_THREADS_MIN;
    threads = threads < KG_HTTP_THREADS_MIN ? KG_HTTP_THREADS_MIN
              : threads > KG_HTTP_THREADS_MAX ? KG_HTTP_THREADS_MAX : threads;
    unsigned hard_all = (unsigned)o->max_connections + (unsigned)o->max_connections / 4 + 64;
    unsigned hard_ip = (unsigned)o->max_client_connections + 16;
    raise_fd_limit(hard_all + 64);
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                             MHD_USE_ERROR_LOG,
                         0, NULL, NULL, on_request, &s, MHD_OPTION_LISTEN_SOCKET, lfd,
                         MHD_OPTION_THREAD_POOL_SIZE, threads,
                         MHD_OPTION_NOTIFY_COMPLETED, on_done, &s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, &s,
                         MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s,
                         MHD_OPTION_CONNECTION_LIMIT, hard_all,
                         MHD_OPTION_PER_IP_CONNECTION_LIMIT, hard_ip,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(o->idle_timeout_s > 1 ? o->idle_timeout_s : 1),
                         MHD_OPTION_END);
    if (!d) {
        close(lfd);
        rc = kg_error_set(err, KG_ERR_IO, "cannot start the HTTP server on %s:%d", o->host, o->port);
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : o->port;
    fprintf(stderr, "kgym serve: listening on http://%s:%d (device %s, %d worker(s))\n", o->host, port,
            o->eval.device ? o->eval.device : "cpu", o->workers);
    if (o->port_file) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d\n", port);
        /* Atomic: a watcher never reads a half-written port. */
        if (kg_file_write_atomic(o->port_file, buf, (size_t)n, 0600, err) != KG_OK) {
            rc = kg_error_set(err, KG_ERR_IO, "cannot write --port-file %s", o->port_file);
            goto out;
        }
    }

serve:;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Shared store: heartbeats (workers visible in /workers/status, leases
     * of running jobs renewed) a few times per lease. */
    double beat_s = o->lease_s / 4 < 5 ? o->lease_s / 4 : 5;
    /* A fleet's heartbeats (KG_STORE_SHARED): its workers seen by every API server, their jobs' leases renewed. */
    int beats = kg_store_has(s.store, KG_STORE_SHARED) && o->workers > 0;
    if (beats) {
        json_t *w = kg_sched_workers(s.sched);
        kg_store_heartbeat(s.store, w, o->lease_s * 2, NULL);
        json_decref(w);
    }
    double next_beat = kg_now_ms() + beat_s * 1000;
    for (;;) {
        struct pollfd p = {.fd = stop_pipe[0], .events = POLLIN};
        /* Once a second: late headers are ended (d), orphans reaped (sup), heartbeats when due. */
        int tick = beats && beat_s < 1 ? (int)(beat_s * 1000) : 1000;
        if (poll(&p, 1, d || beats || sup ? tick : -1) > 0)
            break;
        if (d)
            end_late_requests(o->idle_timeout_s, o->body_timeout_s);
        /* This process is a child subreaper: what an evaluation orphaned comes to it, and one that ends
         * between evaluations would stay a zombie (the supervisor reaps after each child too). */
        if (sup)
            kg_supervisor_reap_orphans();
        /* Redis: its data set still the one known (a loss is said loudly at once, not at the next /health), and
         * whether it persists jobs asked again after it was away. */
        kg_store_check(s.store, NULL); /* SQLite: a cheap file check; memory: nothing */
        if (beats && kg_now_ms() >= next_beat) {
            double at = kg_now_ms();
            next_beat = at + beat_s * 1000;
            json_t *w = kg_sched_workers(s.sched);
            kg_error herr;
            if (kg_store_heartbeat(s.store, w, o->lease_s * 2, &herr) != KG_OK)
                fprintf(stderr, "kgym: heartbeat failed: %s\n", herr.message);
            else /* the leases it renewed run one lease from before it was sent */
                kg_sched_leases_renewed(s.sched, w, at);
            json_decref(w);
        }
    }
    fprintf(stderr, "kgym: stopping\n");
    if (beats) { /* no longer one of the fleet's live workers */
        json_t *w = kg_sched_workers(s.sched);
        kg_store_heartbeat(s.store, w, 0, NULL);
        json_decref(w);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);

out:
    /* Every waiting request is answered (its result if its job ended, else 503: the job is kept for the next
     * server) and given up to 2 s to go out before MHD closes the connections; running evaluations then get 5 s
     * (kg_sched_stop).  KG_SERVICE_STOP_S bounds the whole.
     * The order is who still uses what:
     * - kg_waits_stop before MHD_stop_daemon: MHD must not be stopped with a connection suspended, and only the
     *   waiter thread resumes them.  It also refuses new waits (a handler still running answers 503).
     * - MHD_stop_daemon before kg_sched_stop: the handlers read jobs through the scheduler (kg_sched_wait) until
     *   MHD has joined its threads; after it no handler and no completion callback (on_done) runs.
     * - kg_sched_stop before kg_waits_free: a worker that ends a job calls on_job_end (kg_waits_wake) with
     *   s.waits, and the 5 s drain is exactly when running jobs end.  Freed first, that wake wrote into freed
     *   memory (an ASan heap-use-after-free: test_serve_faults.sh's jobs that end while the server stops).
     *   kg_waits_wake on stopped waits is harmless (its lock and eventfd live until kg_waits_free).
     * - When an evaluation outlives the drain, the process leaves with _exit below and frees nothing: that
     *   worker's thread still holds the scheduler, the supervisor, the store and s.waits. */
    kg_waits_stop(s.waits);
    if (d) {
        double until = kg_now_ms() + 2000;
        while (atomic_load(&s.waits_open) > 0 && kg_now_ms() < until)
            poll(NULL, 0, 10);
        MHD_stop_daemon(d);
    }
    if (s.sched) {
        stopped = kg_sched_stop(s.sched, 5.0);
        if (!stopped) {
            /* An evaluation is still running: it stays "running" in the store
             * and the next server runs it again.  Leave without tearing down
             * what its thread still uses. */
            fprintf(stderr, "kgym serve: an evaluation is still running; it will be re-run on restart\n");
            fflush(stderr);
            _exit(rc == KG_OK ? 0 : 1);
        }
    }
    kg_waits_free(s.waits); /* every worker has ended: nothing calls kg_waits_wake any more */
    s.waits = NULL;
    kg_supervisor_close(sup);
    kg_store_close(s.store);
    if (task_dir) {
        kg_remove_tree(task_dir);
        free(task_dir);
    }
    close(stop_pipe[0]);
    close(stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
    return rc;
}
