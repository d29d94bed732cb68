/*
 * http.c — the libcurl helper of agent/http.h: one place that sets up a JSON
 * request, caps its response and reads Retry-After.
 */
#include "agent/http.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void kg_http_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    kg_http_response *r = ud;
    size_t n = size * nmemb;
    if (r->body.len + n > KG_HTTP_MAX_BODY) {
        r->too_big = 1;
        return 0; /* aborts the transfer */
    }
    return kg_buf_append(&r->body, ptr, n) == 0 ? n : 0;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    kg_http_response *r = ud;
    size_t n = size * nmemb;
    if (n > 12 && !strncasecmp(ptr, "retry-after:", 12)) {
        char tmp[64];
        size_t k = n - 12 < sizeof tmp - 1 ? n - 12 : sizeof tmp - 1;
        memcpy(tmp, ptr + 12, k);
        tmp[k] = 0;
        char *end;
        double v = strtod(tmp, &end);
        /* Only the delta-seconds form; an HTTP date falls back to our backoff. */
        if (end != tmp && isfinite(v) && v >= 0)
            r->retry_after_s = v;
    }
    return n;
}

CURL *kg_http_request(const char *url, const char *token, const char *extra_header, const char *body,
                      double timeout_s, kg_http_response *resp, struct curl_slist **headers, kg_error *err)
{
    memset(resp, 0, sizeof *resp);
    resp->retry_after_s = -1;
    *headers = NULL;
    CURL *c = curl_easy_init();
    if (!c) {
        kg_error_set(err, KG_ERR_NOMEM, "curl_easy_init failed");
        return NULL;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    /* No "Expect: 100-continue": it costs a round trip per request and some
     * proxies mishandle it. */
    struct curl_slist *more = h ? curl_slist_append(h, "Expect:") : NULL;
    h = more ? more : h;
    if (more && token && *token) {
        kg_buf a = {0};
        more = kg_buf_printf(&a, "Authorization: Bearer %s", token) == KG_OK ? curl_slist_append(h, a.data) : NULL;
        kg_buf_free(&a);
        h = more ? more : h;
    }
    if (more && extra_header) {
        more = curl_slist_append(h, extra_header);
        h = more ? more : h;
    }
    if (!more) {
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
    if (timeout_s > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    *headers = h;
    return c;
}

void kg_http_request_free(CURL *easy, struct curl_slist *headers)
{
    if (easy)
        curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
}
