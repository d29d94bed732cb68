/*
 * http.c — `kgym serve`'s HTTP side (libmicrohttpd, one thread per
 * connection so a synchronous /evaluate or a long poll blocks only its own
 * connection): routing, auth, limits, JSON in and out; and kg_service_run(),
 * which wires store, supervisor, scheduler and server together.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <unistd.h>

#include "kgym/service.h"
#include "sched/sched.h"
#include "server/server.h"
#include "store/store.h"
#include "util/util.h"

typedef struct server {
    const kg_service_options *o;
    kg_store *store;
    kg_sched *sched;
    double started_at;
} server;

typedef struct request_ctx {
    kg_buf body;
    int too_large;
} request_ctx;

static double wall_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

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
    o->lease_s = 60;
    o->result_ttl_s = 7 * 86400;
    kg_eval_options_default(&o->eval, "cpu");
}

/* ---- responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, int status, const char *type, char *text,
                                 size_t len, const char *retry_after)
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
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        text = kg_strdup("{\"error\":\"the response could not be encoded\",\"field\":null}");
        status = 500;
    }
    return send_text(c, status, "application/json", text, strlen(text), NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *field, const char *msg)
{
    json_t *e = json_pack("{s:s, s:s?}", "error", msg, "field", field && *field ? field : NULL);
    if (!e) /* msg not UTF-8 (it can quote client input): say so plainly */
        e = json_pack("{s:s, s:s?}", "error", "bad request", "field", NULL);
    return send_json(c, status, e);
}

static enum MHD_Result send_bad(struct MHD_Connection *c, const kg_bad_request *b)
{
    return send_error(c, b->http ? b->http : 400, b->field, b->error);
}

static enum MHD_Result send_full(struct MHD_Connection *c, long room)
{
    char *text = NULL;
    kg_buf b = {0};
    kg_buf_printf(&b, "{\"error\":\"the queue is full (%ld places left); retry later\",\"field\":null}", room);
    text = kg_buf_release(&b);
    return send_text(c, 429, "application/json", text, strlen(text), "5");
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

/* Submits one validated request.  id may be NULL (a new one is made).
 * Existing id: answered as it stands unless fresh (then re-queued unless it
 * is queued or running already).  Same content already done and not fresh:
 * a new job answered at once from the stored result. */
static int submit(server *s, json_t *normalized, const char *key, const char *given_id, int fresh,
                  char id[160], int *cached, kg_error *err)
{
    *cached = 0;
    if (given_id)
        snprintf(id, 160, "%s", given_id);
    else
        new_id(id);
    kg_job old;
    if (given_id && kg_store_get(s->store, id, &old, NULL) == KG_OK) {
        int busy = !strcmp(old.status, "queued") || !strcmp(old.status, "running");
        kg_job_free(&old);
        if (!fresh || busy)
            return KG_OK;
    }
    char *req = json_dumps(normalized, JSON_COMPACT);
    if (!req)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    kg_job j;
    memset(&j, 0, sizeof j);
    j.id = id;
    j.key = (char *)key;
    j.request = req;
    j.status = "queued";
    kg_job done;
    int rc;
    if (!fresh && kg_store_find_done(s->store, key, &done, NULL) == KG_OK) {
        j.status = "done";
        j.result = done.result;
        j.cached_from = done.id;
        rc = kg_store_put(s->store, &j, 1, err);
        kg_job_free(&done);
        *cached = rc == KG_OK;
    } else {
        rc = kg_store_put(s->store, &j, 1, err);
        if (rc == KG_OK)
            kg_sched_notify(s->sched);
    }
    free(req);
    return rc;
}

static double query_double(struct MHD_Connection *c, const char *name, double dflt, double lo, double hi, int *ok)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!v)
        return dflt;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || d < lo || d > hi) {
        *ok = 0;
        return dflt;
    }
    return d;
}

static int is_terminal(const char *st)
{
    return st && strcmp(st, "queued") && strcmp(st, "running");
}

/* POST /evaluate: KernelGYM's synchronous evaluation. */
static enum MHD_Result h_evaluate(server *s, struct MHD_Connection *c, json_t *body)
{
    json_t *n = NULL;
    char key[32], id[160];
    int fresh, cached;
    kg_bad_request b = {0};
    if (kg_server_normalize(s->o, body, 1, &n, key, &fresh, &b))
        return send_bad(c, &b);
    const char *task_id = json_string_value(json_object_get(body, "task_id"));
    long room = kg_sched_room(s->sched);
    if (room < 1) {
        json_decref(n);
        return send_full(c, room);
    }
    kg_error err;
    int rc = submit(s, n, key, task_id, fresh, id, &cached, &err);
    json_decref(n);
    if (rc != KG_OK)
        return send_error(c, rc == KG_ERR_INVALID ? 409 : 500, "task_id", err.message);
    double timeout = json_number_value(json_object_get(body, "timeout"));
    double wait = s->o->sync_timeout_s;
    if (timeout > 0 && timeout * 2 + 60 < wait)
        wait = timeout * 2 + 60;
    kg_job j;
    if (kg_sched_wait(s->sched, id, wait, &j, &err) != KG_OK)
        return send_error(c, 500, "", err.message);
    json_t *full = kg_server_job_json(&j, 1);
    json_t *resp = json_incref(json_object_get(full, "kernelgym"));
    int http = is_terminal(j.status) ? 200 : 202; /* still running: the client polls /status */
    kg_job_free(&j);
    json_decref(full);
    return send_json(c, http, resp);
}

/* Validates and submits a list of requests (all or nothing on validation). */
static enum MHD_Result submit_many(server *s, struct MHD_Connection *c, json_t *tasks, int need_task_id,
                                   const char *field, json_t **ids_out)
{
    size_t n = json_array_size(tasks);
    json_t **norm = calloc(n ? n : 1, sizeof *norm);
    char (*keys)[32] = calloc(n ? n : 1, sizeof *keys);
    int *fresh = calloc(n ? n : 1, sizeof *fresh);
    enum MHD_Result ret = MHD_YES;
    *ids_out = NULL;
    if (!norm || !keys || !fresh) {
        ret = send_error(c, 500, "", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        kg_bad_request b = {0};
        if (kg_server_normalize(s->o, json_array_get(tasks, i), need_task_id, &norm[i], keys[i], &fresh[i], &b)) {
            char f[128];
            if (*field) /* a list: name the element ("tasks[3].kernel_code") */
                snprintf(f, sizeof f, "%s[%zu]%s%s", field, i, b.field[0] ? "." : "", b.field);
            else
                snprintf(f, sizeof f, "%s", b.field);
            ret = send_error(c, b.http, f, b.error);
            goto out;
        }
    }
    long room = kg_sched_room(s->sched);
    if (room < (long)n) {
        ret = send_full(c, room);
        goto out;
    }
    json_t *ids = json_array();
    for (size_t i = 0; i < n; i++) {
        char id[160];
        int cached;
        kg_error err;
        const json_t *t = json_array_get(tasks, i);
        const char *given = json_string_value(json_object_get(t, "task_id"));
        if (!given)
            given = json_string_value(json_object_get(t, "id"));
        if (submit(s, norm[i], keys[i], given, fresh[i], id, &cached, &err) != KG_OK) {
            json_decref(ids);
            ret = send_error(c, 409, field, err.message);
            goto out;
        }
        json_array_append_new(ids, json_pack("{s:s, s:b}", "id", id, "cached", cached));
    }
    *ids_out = ids;
out:
    for (size_t i = 0; norm && i < n; i++)
        json_decref(norm[i]);
    free(norm);
    free(keys);
    free(fresh);
    return ret;
}

/* POST /evaluate/batch: {batch_id, tasks: [EvaluationRequest] (1..100)}, synchronous. */
static enum MHD_Result h_batch(server *s, struct MHD_Connection *c, json_t *body)
{
    if (!json_is_object(body))
        return send_error(c, 400, "", "the request must be a JSON object");
    json_t *tasks = json_object_get(body, "tasks");
    if (!json_is_array(tasks))
        return send_error(c, 400, "tasks", "tasks must be a list of evaluation requests");
    if (json_array_size(tasks) < 1 || json_array_size(tasks) > 100)
        return send_error(c, 400, "tasks", "tasks must hold 1 to 100 requests");
    json_t *bid = json_object_get(body, "batch_id");
    if (bid && !json_is_string(bid) && !json_is_null(bid))
        return send_error(c, 400, "batch_id", "batch_id must be a string");
    double submitted = wall_s();
    json_t *ids = NULL;
    enum MHD_Result ret = submit_many(s, c, tasks, 1, "tasks", &ids);
    if (!ids)
        return ret;
    json_t *results = json_array();
    int completed = 0, failed = 0;
    double end = kg_now_ms() + s->o->sync_timeout_s * 1000;
    size_t i;
    json_t *e;
    json_array_foreach(ids, i, e) {
        kg_job j;
        kg_error err;
        double left = (end - kg_now_ms()) / 1000;
        if (kg_sched_wait(s->sched, json_string_value(json_object_get(e, "id")), left > 0 ? left : 0, &j, &err) !=
            KG_OK)
            continue;
        json_t *full = kg_server_job_json(&j, 1);
        json_t *kr = json_object_get(full, "kernelgym");
        const char *st = json_string_value(json_object_get(kr, "status"));
        if (st && !strcmp(st, "completed"))
            completed++;
        else if (is_terminal(j.status))
            failed++;
        json_array_append(results, kr);
        json_decref(full);
        kg_job_free(&j);
    }
    json_t *out = json_object();
    json_object_set_new(out, "batch_id", json_is_string(bid) ? json_copy(bid) : json_string("batch"));
    json_object_set_new(out, "total_tasks", json_integer((json_int_t)json_array_size(ids)));
    json_object_set_new(out, "completed_tasks", json_integer(completed));
    json_object_set_new(out, "failed_tasks", json_integer(failed));
    json_object_set_new(out, "results", results);
    json_object_set_new(out, "batch_status",
                        json_string(completed + failed == (int)json_array_size(ids) ? "completed" : "processing"));
    json_object_set_new(out, "submitted_at", json_real(submitted));
    json_object_set_new(out, "completed_at", json_real(wall_s()));
    json_decref(ids);
    return send_json(c, 200, out);
}

/* POST /v1/jobs: one request, or {"jobs": [...]}; answers at once (202). */
static enum MHD_Result h_jobs_post(server *s, struct MHD_Connection *c, json_t *body)
{
    if (!json_is_object(body))
        return send_error(c, 400, "", "the request must be a JSON object");
    json_t *list = json_object_get(body, "jobs");
    int batch = list != NULL;
    if (batch && (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > 1000))
        return send_error(c, 400, "jobs", "jobs must be a list of 1 to 1000 evaluation requests");
    json_t *one = NULL;
    if (!batch) {
        one = json_array();
        json_array_append(one, body);
        list = one;
    }
    json_t *ids = NULL;
    enum MHD_Result ret = submit_many(s, c, list, 0, batch ? "jobs" : "", &ids);
    json_decref(one);
    if (!ids)
        return ret;
    if (batch)
        return send_json(c, 202, json_pack("{s:o}", "jobs", ids));
    json_t *first = json_incref(json_array_get(ids, 0));
    json_decref(ids);
    return send_json(c, 202, first);
}

static enum MHD_Result h_job_get(server *s, struct MHD_Connection *c, const char *id, int kernelgym_view)
{
    int ok = 1;
    double wait = query_double(c, "wait", 0, 0, 600, &ok);
    if (!ok)
        return send_error(c, 400, "wait", "wait must be seconds from 0 to 600");
    kg_job j;
    kg_error err;
    int rc = kg_sched_wait(s->sched, id, wait, &j, &err);
    if (rc == KG_ERR_NOT_FOUND) /* KernelGYM's endpoints call the id task_id */
        return send_error(c, 404, kernelgym_view ? "task_id" : "id", err.message);
    if (rc != KG_OK)
        return send_error(c, 500, "", err.message);
    json_t *out;
    int http = 200;
    if (kernelgym_view == 1) { /* /status/{id} */
        out = kg_server_status_json(&j, kg_store_queue_position(s->store, id));
    } else if (kernelgym_view == 2) { /* /results/{id} */
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
    return send_json(c, http, out);
}

static enum MHD_Result h_job_delete(server *s, struct MHD_Connection *c, const char *id)
{
    char was[16] = "";
    kg_error err;
    int rc = kg_store_cancel(s->store, id, was, &err);
    if (rc == KG_ERR_NOT_FOUND)
        return send_error(c, 404, "id", err.message);
    if (rc == KG_ERR_INVALID)
        return send_error(c, 409, "id", err.message);
    if (rc != KG_OK)
        return send_error(c, 500, "", err.message);
    return send_json(c, 200, json_pack("{s:s, s:s, s:s}", "id", id, "status", "cancelled", "was", was));
}

static enum MHD_Result h_jobs_list(server *s, struct MHD_Connection *c)
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
    if (kg_store_list(s->store, status, (int)limit, &arr, &err) != KG_OK)
        return send_error(c, 500, "", err.message);
    return send_json(c, 200, json_pack("{s:o, s:I}", "jobs", arr, "count", (json_int_t)json_array_size(arr)));
}

static enum MHD_Result h_health(server *s, struct MHD_Connection *c)
{
    long finished, failed;
    kg_sched_totals(s->sched, &finished, &failed);
    json_t *o = json_pack("{s:s, s:f, s:f, s:s, s:{s:I, s:I}, s:i, s:I, s:I}", "status", "healthy", "timestamp",
                          wall_s(), "uptime_s", wall_s() - s->started_at, "device",
                          s->o->eval.device ? s->o->eval.device : "cpu", "queue", "pending",
                          (json_int_t)kg_store_count(s->store, "queued"), "processing",
                          (json_int_t)kg_store_count(s->store, "running"), "workers", s->o->workers,
                          "jobs_finished", (json_int_t)finished, "jobs_failed", (json_int_t)failed);
    return send_json(c, 200, o);
}

static enum MHD_Result h_workers(server *s, struct MHD_Connection *c)
{
    json_t *list = NULL;
    kg_error err;
    if (kg_store_is_shared(s->store)) { /* the fleet's heartbeats, not this process's threads */
        if (kg_store_workers(s->store, &list, &err) != KG_OK)
            return send_error(c, 503, "", err.message);
        json_t *mine = kg_sched_workers(s->sched);
        json_array_extend(list, mine);
        json_decref(mine);
    } else {
        list = kg_sched_workers(s->sched);
    }
    json_t *byid = json_object();
    int active = 0;
    size_t i;
    json_t *w;
    json_array_foreach(list, i, w) {
        json_object_set(byid, json_string_value(json_object_get(w, "id")), w);
        active++;
    }
    return send_json(c, 200, json_pack("{s:o, s:i, s:i, s:o}", "workers", byid, "total_workers",
                                       (int)json_array_size(list), "active_workers", active, "worker_list", list));
}

static enum MHD_Result h_metrics(server *s, struct MHD_Connection *c)
{
    kg_buf b = {0};
    kg_sched_metrics(s->sched, &b);
    kg_buf_printf(&b, "# HELP kgym_uptime_seconds Seconds since the server started.\n"
                      "# TYPE kgym_uptime_seconds gauge\nkgym_uptime_seconds %.1f\n",
                  wall_s() - s->started_at);
    size_t len = b.len;
    char *text = kg_buf_release(&b);
    if (!text)
        return MHD_NO;
    return send_text(c, 200, "text/plain; version=0.0.4", text, len, NULL);
}

/* ---- routing ---- */

static int auth_ok(server *s, struct MHD_Connection *c)
{
    const char *tok = s->o->token;
    if (!tok || !*tok)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(tok);
    unsigned diff = (unsigned)(a ^ b);
    /* Constant time in the token's length: no timing oracle on the prefix. */
    for (size_t i = 0; i < b; i++)
        diff |= (unsigned char)(i < a ? h[i] : 0) ^ (unsigned char)tok[i];
    return diff == 0;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method,
                             request_ctx *ctx)
{
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    int post = !strcmp(method, "POST");
    int del = !strcmp(method, "DELETE");
    if (get && !strcmp(url, "/health"))
        return h_health(s, c);
    if (get && (!strcmp(url, "/") || !strcmp(url, "/dashboard"))) {
        char *page = kg_strdup(kg_server_dashboard_html);
        return page ? send_text(c, 200, "text/html; charset=utf-8", page, strlen(page), NULL) : MHD_NO;
    }
    if (!auth_ok(s, c))
        return send_error(c, 401, "Authorization", "a valid bearer token is required");
    if (ctx->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->o->max_body_bytes);
        return send_error(c, 413, "", msg);
    }
    json_t *body = NULL;
    if (post) {
        json_error_t je;
        body = json_loadb(ctx->body.data ? ctx->body.data : "", ctx->body.len, JSON_REJECT_DUPLICATES, &je);
        if (!body) {
            char msg[300];
            snprintf(msg, sizeof msg, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
            return send_error(c, 400, "", msg);
        }
    }
    enum MHD_Result ret;
    if (post && !strcmp(url, "/evaluate"))
        ret = h_evaluate(s, c, body);
    else if (post && !strcmp(url, "/evaluate/batch"))
        ret = h_batch(s, c, body);
    else if (post && !strcmp(url, "/v1/jobs"))
        ret = h_jobs_post(s, c, body);
    else if (get && !strcmp(url, "/v1/jobs"))
        ret = h_jobs_list(s, c);
    else if ((get || del) && !strncmp(url, "/v1/jobs/", 9) && url[9] && !strchr(url + 9, '/'))
        ret = del ? h_job_delete(s, c, url + 9) : h_job_get(s, c, url + 9, 0);
    else if (get && !strncmp(url, "/status/", 8) && url[8] && !strchr(url + 8, '/'))
        ret = h_job_get(s, c, url + 8, 1);
    else if (get && !strncmp(url, "/results/", 9) && url[9] && !strchr(url + 9, '/'))
        ret = h_job_get(s, c, url + 9, 2);
    else if (del && !strncmp(url, "/tasks/", 7) && url[7] && !strchr(url + 7, '/'))
        ret = h_job_delete(s, c, url + 7);
    else if (get && !strcmp(url, "/workers/status"))
        ret = h_workers(s, c);
    else if (get && !strcmp(url, "/metrics"))
        ret = h_metrics(s, c);
    else {
        static const char *const known[] = {"/evaluate", "/evaluate/batch", "/v1/jobs", "/workers/status",
                                            "/metrics"};
        int path_known = !strncmp(url, "/v1/jobs/", 9) || !strncmp(url, "/status/", 8) ||
                         !strncmp(url, "/results/", 9) || !strncmp(url, "/tasks/", 7);
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            path_known |= !strcmp(url, known[i]);
        ret = path_known ? send_error(c, 405, "", "method not allowed on this path")
                         : send_error(c, 404, "", "no such endpoint");
    }
    json_decref(body);
    return ret;
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
        return MHD_YES;
    }
    if (*upload_size) {
        /* Keep reading past the limit (answering mid-upload confuses
         * clients), but keep nothing. */
        if (!ctx->too_large && ctx->body.len + *upload_size > s->o->max_body_bytes) {
            ctx->too_large = 1;
            kg_buf_free(&ctx->body);
        }
        if (!ctx->too_large && kg_buf_append(&ctx->body, upload_data, *upload_size) != KG_OK)
            ctx->too_large = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    return route(s, c, url, method, ctx);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    request_ctx *ctx = *con_cls;
    if (ctx) {
        kg_buf_free(&ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

/* ---- the service ---- */

static int stop_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    char b = (char)sig;
    ssize_t r = write(stop_pipe[1], &b, 1);
    (void)r;
}

int kg_service_run(const kg_service_options *o, kg_error *err)
{
    int rc = KG_OK;
    server s = {.o = o, .started_at = wall_s()};
    kg_supervisor *sup = NULL;
    struct MHD_Daemon *d = NULL;
    char *task_dir = NULL;
    int stopped = 1;

    if (pipe2(stop_pipe, O_CLOEXEC) != 0)
        return kg_error_set(err, KG_ERR_IO, "pipe: %s", strerror(errno));
    rc = kg_store_open(o->redis ? o->redis : o->db_path, &s.store, err);
    if (rc != KG_OK)
        goto out;
    kg_store_configure(s.store, o->lease_s, o->max_attempts, o->result_ttl_s);
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
    kg_sched_options so = {.store = s.store, .sup = sup, .eval = o->eval, .task_dir = task_dir,
                           .workers = o->workers, .max_queue = o->max_queue, .name_prefix = prefix};
    rc = kg_sched_start(&so, &s.sched, err);
    if (rc != KG_OK)
        goto out;

    if (o->no_http) {
        fprintf(stderr, "kgym worker: %d worker(s) on %s, jobs from %s\n", o->workers,
                o->eval.device ? o->eval.device : "cpu", o->redis ? o->redis : o->db_path);
        goto serve;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        rc = kg_error_set(err, KG_ERR_INVALID, "--host must be an IPv4 address, not \"%s\"", o->host);
        goto out;
    }
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                             MHD_USE_ERROR_LOG,
                         (uint16_t)o->port, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(o->sync_timeout_s + 120),
                         MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!d) {
        rc = kg_error_set(err, KG_ERR_IO, "cannot listen on %s:%d (in use?)", o->host, o->port);
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : o->port;
    fprintf(stderr, "kgym serve: listening on http://%s:%d (device %s, %d worker(s))\n", o->host, port,
            o->eval.device ? o->eval.device : "cpu", o->workers);
    if (o->port_file) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d\n", port);
        kg_buf tmp = {0};
        kg_buf_printf(&tmp, "%s.tmp", o->port_file);
        /* Renamed into place: a watcher never reads a half-written port. */
        if (kg_file_write(tmp.data, buf, (size_t)n, err) != KG_OK || rename(tmp.data, o->port_file) != 0) {
            kg_buf_free(&tmp);
            rc = kg_error_set(err, KG_ERR_IO, "cannot write --port-file %s", o->port_file);
            goto out;
        }
        kg_buf_free(&tmp);
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
    if (kg_store_is_shared(s.store) && o->workers > 0) {
        json_t *w = kg_sched_workers(s.sched);
        kg_store_heartbeat(s.store, w, o->lease_s * 2, NULL);
        json_decref(w);
    }
    for (;;) {
        struct pollfd p = {.fd = stop_pipe[0], .events = POLLIN};
        if (poll(&p, 1, kg_store_is_shared(s.store) && o->workers > 0 ? (int)(beat_s * 1000) : -1) > 0)
            break;
        if (kg_store_is_shared(s.store) && o->workers > 0) {
            json_t *w = kg_sched_workers(s.sched);
            kg_error herr;
            if (kg_store_heartbeat(s.store, w, o->lease_s * 2, &herr) != KG_OK)
                fprintf(stderr, "kgym: heartbeat failed: %s\n", herr.message);
            json_decref(w);
        }
    }
    fprintf(stderr, "kgym: stopping\n");
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);

out:
    if (d)
        MHD_stop_daemon(d);
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
