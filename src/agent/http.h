/*
 * agent/http.h — the one libcurl helper of kgym's clients (the model server's
 * chat completions, chat.c; a kgym service's /evaluate, evaluate.c): a JSON
 * request as an easy handle, its response body capped, and the server's
 * Retry-After kept for kg_backoff_delay.
 *
 * Ownership: kg_http_request's handle and *headers belong to the caller, who
 * frees them with kg_http_request_free after the transfer (easy or multi);
 * resp->body is the caller's too (kg_buf_free).
 */
#ifndef KG_AGENT_HTTP_H
#define KG_AGENT_HTTP_H

#include <curl/curl.h>

#include "kgym/error.h"
#include "util/util.h"

/* A larger response body aborts the transfer (resp->too_big set). */
#define KG_HTTP_MAX_BODY ((size_t)64 << 20)

typedef struct kg_http_response {
    kg_buf body;          /* what arrived, NUL-terminated */
    int too_big;          /* the body passed KG_HTTP_MAX_BODY */
    double retry_after_s; /* the Retry-After header's seconds; -1 when none (or an HTTP date) */
} kg_http_response;

/* Once per process before any libcurl use: curl_global_init is not
 * thread-safe before libcurl 7.84.  Safe to call from any thread, often. */
void kg_http_global_init(void);

/* An easy handle for one request to url: a POST of body (JSON, not copied:
 * it must outlive the transfer), or a GET when body is NULL; with
 * "Authorization: Bearer token" when token is non-empty, and one more header
 * line when extra_header is non-NULL; the whole transfer limited to timeout_s
 * (none when <= 0) and connecting to 30 s.  The response goes to *resp, which
 * this resets.  NULL with err filled when libcurl cannot make one. */
CURL *kg_http_request(const char *url, const char *token, const char *extra_header, const char *body,
                      double timeout_s, kg_http_response *resp, struct curl_slist **headers, kg_error *err);
void kg_http_request_free(CURL *easy, struct curl_slist *headers);

#endif
