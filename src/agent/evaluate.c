/*
 * evaluate.c — the two ways a turn is judged: in this process through a
 * supervisor (one machine), or by a kgym service (`kgym serve`, POST
 * /evaluate with KernelGYM's field names; kgym's full result comes back under
 * "kgym").  Both are called from the rollout's evaluation threads.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/http.h"
#include "util/json.h"
#include "util/util.h"

int kg_agent_eval_local(void *ctx, const kg_task *task, const char *reply, size_t len, json_t **result,
                        kg_error *err)
{
    kg_agent_local_eval *l = ctx;
    kg_eval_request req = {.task = task, .response = reply, .response_len = len, .candidate_name = NULL};
    return kg_eval_run(l->sup, l->opts, &req, result, err);
}

/* One HTTP exchange; body NULL makes it a GET.  *status 0: no answer. */
static int http_call(const char *url, const char *token, const char *body, double timeout_s, long *status,
                     kg_http_response *resp, kg_error *err)
{
    struct curl_slist *h;
    CURL *c = kg_http_request(url, token, NULL, body, timeout_s, resp, &h, err);
    if (!c)
        return KG_ERR_NOMEM; /* err filled */
    CURLcode cc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    kg_http_request_free(c, h);
    if (cc != CURLE_OK) {
        *status = 0;
        return kg_error_set(err, KG_ERR_IO, "%s: %s%s", url, resp->too_big ? "response too large: " : "",
                            curl_easy_strerror(cc));
    }
    return KG_OK;
}

/* kgym's result inside a service answer, as a new reference, or NULL. */
static json_t *kgym_result(const kg_http_response *resp)
{
    json_t *root = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    json_t *k = json_object_get(root, "kgym");
    json_t *out = json_is_object(k) && json_is_string(json_object_get(k, "verdict")) ? json_incref(k) : NULL;
    json_decref(root);
    return out;
}

/* Whether an answer says the evaluation is still under way: KernelGYM's status pending or processing (kgym
 * serve answers so, with 200, when a job outlives its --sync-timeout; older servers answered 202). */
static int still_running(const kg_http_response *resp)
{
    json_t *root = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    const char *st = json_string_value(json_object_get(root, "status"));
    int running = st && (!strcmp(st, "pending") || !strcmp(st, "processing"));
    json_decref(root);
    return running;
}

int kg_agent_eval_server(void *ctx, const kg_task *task, const char *reply, size_t len, json_t **result,
                         kg_error *err)
{
    kg_agent_server_eval *s = ctx;
    *result = NULL;
    kg_http_global_init();
    /* The service treats a known task_id as "that evaluation again" and
     * returns its stored result, so each (reference, reply) pair gets its
     * own id: the same pair may share a result, different ones never do. */
    char id[160];
    int k = snprintf(id, sizeof id, "kgym-rollout-");
    for (const char *p = task->id ? task->id : "task"; *p && k < 100; p++)
        id[k++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_');
    snprintf(id + k, sizeof id - (size_t)k, "-%016llx-%016llx",
             (unsigned long long)kg_hash64(task->source ? task->source : "", task->source ? strlen(task->source) : 0),
             (unsigned long long)kg_hash64(reply, len));
    /* The code goes as it is or not at all (not sanitized like other text,
     * util/json.h): the service must judge the bytes the model wrote. */
    json_t *code = json_stringn(reply, len), *ref = json_string(task->source ? task->source : "");
    if (!code || !ref) {
        json_decref(code);
        json_decref(ref);
        return kg_error_set(err, KG_ERR_INVALID, "the %s is not UTF-8: it cannot be sent as JSON",
                            !code ? "reply" : "reference");
    }
    json_t *req = json_object();
    int ok = kg_json_set(req, "task_id", json_string(id)) == 0 &&
             kg_json_set(req, "reference_code", json_incref(ref)) == 0 &&
             kg_json_set(req, "kernel_code", json_incref(code)) == 0 &&
             kg_json_set(req, "backend", json_string("triton")) == 0 &&
             kg_json_set(req, "entry_point", json_string("Model")) == 0;
    json_decref(ref); /* req holds its own references (or none, when it failed) */
    json_decref(code);
    char *body = ok ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory building the request");
    size_t ul = strlen(s->url);
    while (ul && s->url[ul - 1] == '/')
        ul--;
    kg_buf url = {0}, poll = {0};
    if (kg_buf_printf(&url, "%.*s/evaluate", (int)ul, s->url) != KG_OK ||
        kg_buf_printf(&poll, "%.*s/results/%s", (int)ul, s->url, id) != KG_OK) {
        kg_buf_free(&url);
        kg_buf_free(&poll);
        free(body);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory building the request");
    }
    int rc = KG_ERR_IO;
    double t0 = kg_now_ms();
    for (int attempt = 0; attempt <= s->max_retries; attempt++) {
        if (attempt)
            kg_backoff_sleep(kg_backoff_delay(&(kg_backoff){.base_s = 1, .max_s = 16}, attempt, -1));
        kg_http_response resp = {0};
        long status = 0;
        rc = http_call(url.data, s->token, body, s->timeout_s, &status, &resp, err);
        if (rc == KG_OK && status == 200 && still_running(&resp))
            status = 202;
        /* 202: still running; poll the result (KernelGYM's GET /results/ID). */
        while (rc == KG_OK && status == 202 && (s->timeout_s <= 0 || kg_now_ms() - t0 < s->timeout_s * 1000)) {
            sleep(1);
            kg_buf_free(&resp.body);
            rc = http_call(poll.data, s->token, NULL, 60, &status, &resp, err);
            if (rc == KG_OK && status == 404)
                status = 202; /* not stored yet */
            else if (rc == KG_OK && status == 200) {
                json_t *probe = kgym_result(&resp);
                if (!probe)
                    status = 202; /* answered, but the result is not there yet */
                json_decref(probe);
            }
        }
        int retry = rc != KG_OK;
        if (rc == KG_OK) {
            if (status == 429 || status >= 500) {
                rc = kg_error_set(err, KG_ERR_IO, "%s: HTTP %ld: %.300s", url.data, status, resp.body.data ? resp.body.data : "");
                retry = 1;
            } else if (status == 202) {
                rc = kg_error_set(err, KG_ERR_IO, "%s: evaluation %s still running after %.0f s", url.data, id,
                                  s->timeout_s);
            } else if (status != 200) {
                rc = kg_error_set(err, KG_ERR_INVALID, "%s: HTTP %ld: %.300s", url.data, status,
                                  resp.body.data ? resp.body.data : "");
            } else if (!(*result = kgym_result(&resp))) {
                rc = kg_error_set(err, KG_ERR_PROTOCOL,
                                  "%s: the answer has no \"kgym\" result object (is this a kgym service?)", url.data);
            }
        }
        kg_buf_free(&resp.body);
        if (!retry)
            break;
    }
    kg_buf_free(&url);
    kg_buf_free(&poll);
    free(body);
    return rc;
}
