/* buf.c — the growable, always NUL-terminated byte buffer (see util.h). */
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int buf_reserve(kg_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return KG_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return KG_ERR_NOMEM;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return KG_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return KG_OK;
}

int kg_buf_append(kg_buf *b, const void *data, size_t len)
{
    if (buf_reserve(b, len) != KG_OK)
        return KG_ERR_NOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return KG_OK;
}

int kg_buf_puts(kg_buf *b, const char *s)
{
    return kg_buf_append(b, s, strlen(s));
}

int kg_buf_vprintf(kg_buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return KG_ERR_INVALID;
    if (buf_reserve(b, (size_t)n) != KG_OK)
        return KG_ERR_NOMEM;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return KG_OK;
}

int kg_buf_printf(kg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = kg_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *kg_buf_release(kg_buf *b)
{
    char *p = b->data;
    if (!p)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void kg_buf_free(kg_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
