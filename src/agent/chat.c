/*
 * chat.c — the chat-completions client: one libcurl multi handle driving up
 * to `concurrency` requests from the calling thread, each retried with
 * exponential backoff (or the server's Retry-After) on 429, 5xx, timeouts,
 * connection errors and bodies that are not a chat completion.  Other 4xx
 * answers are final: retrying a bad request cannot help.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/http.h"
#include "util/json.h"
#include "util/util.h"


void kg_chat_config_default(kg_chat_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->temperature = 1.0;
    cfg->top_p = 0.95;
    cfg->max_tokens = 8192;
    cfg->timeout_s = 600;
    cfg->max_retries = 5;
    cfg->backoff_base_s = 1.0;
    cfg->backoff_max_s = 60;
    cfg->concurrency = 8;
}

void kg_chat_reply_free(kg_chat_reply *r)
{
    if (!r)
        return;
    free(r->content);
    free(r->finish_reason);
    r->content = r->finish_reason = NULL;
}

int kg_chat_parse_response(const char *body, size_t len, kg_chat_reply *r, kg_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return kg_error_set(err, KG_ERR_PROTOCOL, "response is not a JSON object (%s)", jerr.text);
    }
    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    /* Reasoning servers may put the whole answer in reasoning_content and
     * leave content null; the extractor can still find code in it. */
    if (!content)
        content = json_string_value(json_object_get(msg, "reasoning_content"));
    if (!content) {
        json_decref(root);
        return kg_error_set(err, KG_ERR_PROTOCOL, "response has no choices[0].message.content");
    }
    free(r->content);
    free(r->finish_reason);
    r->content = kg_strdup(content);
    const char *fr = json_string_value(json_object_get(choice, "finish_reason"));
    r->finish_reason = fr ? kg_strdup(fr) : NULL;
    json_t *usage = json_object_get(root, "usage");
    json_t *pt = json_object_get(usage, "prompt_tokens"), *ct = json_object_get(usage, "completion_tokens");
    r->prompt_tokens = json_is_integer(pt) ? (long)json_integer_value(pt) : -1;
    r->completion_tokens = json_is_integer(ct) ? (long)json_integer_value(ct) : -1;
    json_decref(root);
    if (!r->content)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    return KG_OK;
}

/* One request from submission to its final answer (retries included). */
typedef struct {
    void *id;           /* the caller's */
    char *body;         /* serialised request */
    char *tag;          /* X-Kgym-Request value, may be NULL */
    kg_chat_reply reply;
    double not_before_ms; /* backoff: not to be started before */
} entry;

typedef struct {
    entry *e;           /* NULL: free slot */
    CURL *easy;
    struct curl_slist *headers;
    kg_http_response resp;
    double started_ms;
} slot;

/* The request body; NULL when memory ran out or the messages cannot be
 * JSON (every step checked, util/json.h). */
static char *build_body(const kg_chat_config *cfg, const json_t *messages)
{
    json_t *o = json_object();
    int ok = kg_json_set(o, "model", kg_json_text(cfg->model ? cfg->model : "default")) == 0 &&
             kg_json_set(o, "messages", json_deep_copy(messages)) == 0 &&
             (cfg->temperature < 0 || kg_json_set(o, "temperature", json_real(cfg->temperature)) == 0) &&
             (cfg->top_p < 0 || kg_json_set(o, "top_p", json_real(cfg->top_p)) == 0) &&
             (cfg->max_tokens <= 0 || kg_json_set(o, "max_tokens", json_integer(cfg->max_tokens)) == 0);
    if (ok && cfg->n_stop) {
        json_t *st = json_array();
        for (size_t i = 0; st && i < cfg->n_stop; i++)
            if (kg_json_push(st, kg_json_text(cfg->stop[i])) != 0) {
                json_decref(st);
                st = NULL;
            }
        ok = kg_json_set(o, "stop", st) == 0;
    }
    ok = ok && kg_json_set(o, "n", json_integer(1)) == 0;
    char *s = ok ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static char *endpoint_url(const char *base)
{
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    kg_buf b = {0};
    int rc = n >= 17 && !strncmp(base + n - 17, "/chat/completions", 17)
                 ? kg_buf_printf(&b, "%.*s", (int)n, base)
                 : kg_buf_printf(&b, "%.*s/chat/completions", (int)n, base);
    if (rc != KG_OK) { /* NULL: out of memory */
        kg_buf_free(&b);
        return NULL;
    }
    return kg_buf_release(&b);
}

static void entry_free(entry *e)
{
    if (!e)
        return;
    free(e->body);
    free(e->tag);
    kg_chat_reply_free(&e->reply);
    free(e);
}

static int start_slot(const kg_chat_config *cfg, CURLM *multi, const char *url, slot *s, entry *e, kg_error *err)
{
    memset(s, 0, sizeof *s);
    kg_buf tag = {0};
    if (e->tag && kg_buf_printf(&tag, "X-Kgym-Request: %s", e->tag) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    s->easy = kg_http_request(url, cfg->api_key, tag.data, e->body, cfg->timeout_s, &s->resp, &s->headers, err);
    kg_buf_free(&tag);
    if (!s->easy)
        return KG_ERR_NOMEM; /* err filled */
    s->e = e;
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    s->started_ms = kg_now_ms();
    e->reply.attempts++;
    curl_multi_add_handle(multi, s->easy);
    return KG_OK;
}

static void stop_slot(CURLM *multi, slot *s)
{
    if (!s->easy)
        return;
    curl_multi_remove_handle(multi, s->easy);
    kg_http_request_free(s->easy, s->headers);
    kg_buf_free(&s->resp.body);
    memset(s, 0, sizeof *s);
}

/* Judges a finished attempt: fills e->reply; returns 1 when worth another try. */
static int judge(slot *s, CURLcode cc)
{
    entry *e = s->e;
    kg_chat_reply *r = &e->reply;
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    r->http_status = status;
    const char *body = s->resp.body.data ? s->resp.body.data : "";
    if (cc != CURLE_OK) {
        snprintf(r->error, sizeof r->error, "%s%s", s->resp.too_big ? "response too large: " : "", curl_easy_strerror(cc));
        return !s->resp.too_big;
    }
    if (status == 429 || status >= 500) {
        snprintf(r->error, sizeof r->error, "HTTP %ld: %.300s", status, body);
        return 1;
    }
    if (status != 200) {
        snprintf(r->error, sizeof r->error, "HTTP %ld: %.300s", status, body);
        return 0;
    }
    kg_error perr;
    kg_error_clear(&perr);
    if (kg_chat_parse_response(body, s->resp.body.len, r, &perr) == KG_OK) {
        r->ok = 1;
        r->error[0] = 0;
        r->latency_ms = kg_now_ms() - s->started_ms;
        return 0;
    }
    /* A truncated or garbled body is usually a proxy or an overloaded
     * server: worth another try. */
    snprintf(r->error, sizeof r->error, "malformed response: %.400s", perr.message);
    return 1;
}

int kg_chat_stream(const kg_chat_config *cfg, kg_chat_pull_fn pull, kg_chat_done_fn done, void *ctx, kg_error *err)
{
    if (!cfg || !cfg->url || !*cfg->url)
        return kg_error_set(err, KG_ERR_INVALID, "no model server URL (--url)");
    if (cfg->concurrency < 1 || cfg->max_retries < 0 || cfg->timeout_s < 0)
        return kg_error_set(err, KG_ERR_INVALID, "concurrency must be >= 1, retries and timeout >= 0");
    kg_http_global_init();
    char *url = endpoint_url(cfg->url);
    slot *slots = calloc((size_t)cfg->concurrency, sizeof *slots);
    CURLM *multi = curl_multi_init();
    entry **waiting = NULL; /* in backoff */
    size_t n_wait = 0, cap_wait = 0, active = 0;
    int rc = KG_OK, no_more = 0;
    if (!url || !slots || !multi) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (;;) {
        double now = kg_now_ms();
        /* Fill free slots: retries whose backoff has passed first, then new requests. */
        for (int k = 0; k < cfg->concurrency; k++) {
            if (slots[k].easy)
                continue;
            entry *e = NULL;
            for (size_t q = 0; q < n_wait; q++)
                if (waiting[q]->not_before_ms <= now) {
                    e = waiting[q];
                    memmove(&waiting[q], &waiting[q + 1], (n_wait - q - 1) * sizeof *waiting);
                    n_wait--;
                    break;
                }
            if (!e && !no_more) {
                kg_chat_request req = {0};
                void *id = NULL;
                int got = pull(ctx, &req, &id);
                if (got < 0)
                    no_more = 1;
                if (got > 0) {
                    e = calloc(1, sizeof *e);
                    if (!e) {
                        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
                        goto out;
                    }
                    e->id = id;
                    e->body = build_body(cfg, req.messages);
                    e->tag = req.tag ? kg_strdup(req.tag) : NULL;
                    e->reply.prompt_tokens = e->reply.completion_tokens = -1;
                    if (!e->body) {
                        snprintf(e->reply.error, sizeof e->reply.error, "messages cannot be serialised");
                        done(ctx, e->id, &e->reply);
                        entry_free(e);
                        e = NULL;
                        k--; /* the slot is still free */
                        continue;
                    }
                }
            }
            if (!e)
                break;
            if ((rc = start_slot(cfg, multi, url, &slots[k], e, err)) != KG_OK) {
                entry_free(e);
                goto out;
            }
            active++;
        }
        if (no_more && active == 0 && n_wait == 0)
            break;
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
            rc = kg_error_set(err, KG_ERR_IO, "curl_multi_perform: %s", curl_multi_strerror(mc));
            goto out;
        }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            slot *s = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            entry *e = s->e;
            int retry = judge(s, m->data.result);
            const kg_backoff backoff = {cfg->backoff_base_s, cfg->backoff_max_s};
            double wait_s = kg_backoff_delay(&backoff, e->reply.attempts, s->resp.retry_after_s);
            stop_slot(multi, s);
            active--;
            if (retry && e->reply.attempts <= cfg->max_retries) {
                e->not_before_ms = kg_now_ms() + wait_s * 1000;
                if (n_wait == cap_wait) {
                    size_t cap = cap_wait ? cap_wait * 2 : 16;
                    entry **p = realloc(waiting, cap * sizeof *p);
                    if (!p) {
                        entry_free(e);
                        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
                        goto out;
                    }
                    waiting = p;
                    cap_wait = cap;
                }
                waiting[n_wait++] = e;
            } else {
                done(ctx, e->id, &e->reply);
                entry_free(e);
            }
        }
        /* Sleep until traffic, the next backoff end, or (new requests may
         * appear from other threads) at most 20 ms. */
        int wait_ms = active || n_wait ? 100 : 20;
        if (n_wait && active < (size_t)cfg->concurrency) {
            double soonest = waiting[0]->not_before_ms;
            for (size_t q = 1; q < n_wait; q++)
                if (waiting[q]->not_before_ms < soonest)
                    soonest = waiting[q]->not_before_ms;
            double d = soonest - kg_now_ms();
            wait_ms = d <= 0 ? 0 : d < 100 ? (int)d + 1 : 100;
        }
        if (!no_more && active < (size_t)cfg->concurrency && wait_ms > 20)
            wait_ms = 20;
        if (wait_ms > 0)
            curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
out:
    if (slots)
        for (int k = 0; k < cfg->concurrency; k++)
            if (slots[k].easy) {
                entry *e = slots[k].e;
                stop_slot(multi, &slots[k]);
                entry_free(e);
            }
    for (size_t q = 0; q < n_wait; q++)
        entry_free(waiting[q]);
    free(waiting);
    if (multi)
        curl_multi_cleanup(multi);
    free(slots);
    free(url);
    return rc;
}

/* kg_chat_batch on top of the stream: requests in order, replies by index. */
typedef struct {
    size_t n, next, finished;
    const kg_chat_request *requests;
    kg_chat_reply *replies;
    kg_chat_progress_fn progress;
    void *progress_ctx;
} batch;

static int batch_pull(void *ctx, kg_chat_request *req, void **id)
{
    batch *b = ctx;
    if (b->next == b->n)
        return -1;
    *req = b->requests[b->next];
    *id = (void *)(uintptr_t)b->next++;
    return 1;
}

static void batch_done(void *ctx, void *id, kg_chat_reply *reply)
{
    batch *b = ctx;
    size_t i = (size_t)(uintptr_t)id;
    b->replies[i] = *reply;
    memset(reply, 0, sizeof *reply); /* ownership moves to replies[i] */
    b->finished++;
    if (b->progress)
        b->progress(b->progress_ctx, i, b->replies, b->finished, b->n);
}

int kg_chat_batch(const kg_chat_config *cfg, size_t n, const kg_chat_request *requests,
                  kg_chat_reply *replies, kg_chat_progress_fn progress, void *progress_ctx,
                  kg_error *err)
{
    for (size_t i = 0; i < n; i++) {
        memset(&replies[i], 0, sizeof replies[i]);
        replies[i].prompt_tokens = replies[i].completion_tokens = -1;
    }
    batch b = {.n = n, .requests = requests, .replies = replies, .progress = progress, .progress_ctx = progress_ctx};
    return kg_chat_stream(cfg, batch_pull, batch_done, &b, err);
}
