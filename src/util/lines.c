/* lines.c — the one reader of newline-ended lines from a descriptor (see util.h: kg_lines). */
#include "util/util.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

void kg_lines_free(kg_lines *r)
{
    kg_buf_free(&r->buf);
    r->start = r->scanned = 0;
}

int kg_lines_next(kg_lines *r, size_t max, char **line, size_t *len)
{
    size_t left = r->buf.len - r->start;
    char *from = r->buf.data ? r->buf.data + r->start : NULL;
    char *nl = left > r->scanned ? memchr(from + r->scanned, '\n', left - r->scanned) : NULL;
    if (nl) {
        size_t n = (size_t)(nl - from);
        if (n > max)
            return KG_LINES_TOO_LONG;
        *nl = '\0';
        r->start += n + 1;
        r->scanned = 0;
        *line = from;
        *len = n;
        return 1;
    }
    /* No whole line left: what remains (part of the next one) moves to the front, so that the buffer holds one
     * line's worth at most, however many lines went through it. */
    r->scanned = left;
    if (r->start) {
        memmove(r->buf.data, from, left);
        r->buf.len = left;
        r->buf.data[left] = '\0';
        r->start = 0;
    }
    return left > max ? KG_LINES_TOO_LONG : 0;
}

ssize_t kg_lines_fill(kg_lines *r, int fd)
{
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0 && kg_buf_append(&r->buf, chunk, (size_t)n) != KG_OK)
        return KG_LINES_NOMEM;
    return n;
}

int kg_lines_read(kg_lines *r, int fd, size_t max, double timeout_ms, char **line, size_t *len)
{
    double deadline = kg_now_ms() + timeout_ms;
    for (;;) {
        int got = kg_lines_next(r, max, line, len);
        if (got < 0)
            return got;
        if (got)
            return 1;
        double left = deadline - kg_now_ms();
        if (left <= 0)
            return KG_LINES_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)(left + 1));
        if (pr < 0 && errno != EINTR)
            return KG_LINES_EOF;
        if (pr <= 0)
            continue;
        ssize_t n = kg_lines_fill(r, fd);
        if (n == KG_LINES_NOMEM)
            return KG_LINES_NOMEM;
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return KG_LINES_EOF;
    }
}
