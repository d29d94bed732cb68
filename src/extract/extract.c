/*
 * extract.c — candidate extraction from raw model output (see
 * include/kgym/extract.h for the selection rules).
 *
 * Pipeline: validate -> clean (CR/CRLF to LF, BOM, chat-template tokens, cut
 * to the last assistant turn) -> split off <think> sections -> scan lines for
 * fences and markers -> normalise the chosen range.  Every pass is linear in
 * the input: the fuzzer feeds adversarial text, and a reply can be MiBs of
 * repeated fences.  Every transformation only shrinks the text, so buffers
 * are sized from the input once and never grow.
 */
#include "kgym/extract.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOM "\xEF\xBB\xBF"
/* U+FF5C FULLWIDTH VERTICAL LINE: DeepSeek writes its tokens <｜...｜>. */
#define FW_BAR "\xEF\xBD\x9C"

/* ---------------------------------------------------------------- bytes */

static int is_hspace(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }
static int is_space(char c) { return is_hspace(c) || c == '\n' || c == '\r'; }
static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

/* Case-insensitive: does s[0..n) equal the lower-case word w? */
static int ieq(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    if (n != wl)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (to_lower(s[i]) != w[i])
            return 0;
    return 1;
}

/* Case-insensitive: does s[0..n) start with the lower-case word w? */
static int iprefix(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    return n >= wl && ieq(s, wl, w);
}

/* Offset of the first pat in p[from..n), or n.  memmem is a GNU extension and
 * the fuzz build has no _GNU_SOURCE; the patterns are a few bytes, so a
 * memchr on the first byte keeps this linear. */
static size_t find_bytes(const char *p, size_t n, size_t from, const char *pat, size_t plen)
{
    while (from < n && n - from >= plen) {
        const char *q = memchr(p + from, pat[0], n - from - plen + 1);
        if (!q)
            break;
        if (memcmp(q, pat, plen) == 0)
            return (size_t)(q - p);
        from = (size_t)(q - p) + 1;
    }
    return n;
}

/* Offset of the '\n' ending the line at pos, or n. */
static size_t line_end(const char *p, size_t n, size_t pos)
{
    const char *q = pos < n ? memchr(p + pos, '\n', n - pos) : NULL;
    return q ? (size_t)(q - p) : n;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_space(s[i]))
            return 0;
    return 1;
}

/* Appends printf output to a fixed buffer, truncating silently: detail lines
 * and messages are for people and models, a cut-off tail loses nothing. */
static void appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------- cleaning */

/* Length of a special token "<|name|>" or "<｜name｜>" at p[0..n), 0 if there
 * is none; name and name_len get the name.  Names have no spaces or angle
 * brackets and are short, which keeps "a <|b" in prose from matching far. */
static size_t special_token(const char *p, size_t n, const char **name, size_t *name_len)
{
    size_t bar;
    if (n >= 2 && p[1] == '|')
        bar = 1;
    else if (n >= 4 && memcmp(p + 1, FW_BAR, 3) == 0)
        bar = 3;
    else
        return 0;
    size_t start = 1 + bar;
    for (size_t i = start; i < n && i - start <= 64; i++) {
        char c = p[i];
        if (is_space(c) || c == '<' || c == '>')
            return 0;
        int end = bar == 1 ? (c == '|' && i + 1 < n && p[i + 1] == '>')
                           : (i + 3 < n && memcmp(p + i, FW_BAR, 3) == 0 && p[i + 3] == '>');
        if (end) {
            if (i == start)
                return 0;
            *name = p + start;
            *name_len = i - start;
            return i + bar + 1;
        }
    }
    return 0;
}

static int is_role(const char *s, size_t n)
{
    return ieq(s, n, "assistant") || ieq(s, n, "user") || ieq(s, n, "system") ||
           ieq(s, n, "tool") || ieq(s, n, "ipython");
}

typedef struct {
    char *buf;
    size_t len;
    int tokens;    /* template tokens removed */
    int assistant; /* an assistant role token was seen: buf is the last assistant turn */
} cleaned;

/* Copies in[0..len) to c->buf with line ends as LF, BOMs at the start and
 * template tokens removed.  When role tokens mark turns, only the last
 * assistant turn is kept: raw transcripts repeat the prompt, and KernelBench
 * prompts contain an example ModelNew that must not win over the answer. */
static int clean_text(const char *in, size_t len, cleaned *c)
{
    memset(c, 0, sizeof *c);
    c->buf = malloc(len + 1);
    if (!c->buf)
        return KG_ERR_NOMEM;
    char *out = c->buf;
    size_t i = 0, o = 0;
    int copying = 1;
    while (i < len) {
        char ch = in[i];
        if (o == 0 && len - i >= 3 && memcmp(in + i, BOM, 3) == 0) {
            i += 3;
            continue;
        }
        if (ch == '<') {
            const char *name = NULL;
            size_t nl = 0, tl = special_token(in + i, len - i, &name, &nl);
            if (tl) {
                c->tokens++;
                i += tl;
                const char *role = name;
                size_t rl = nl;
                int header = ieq(name, nl, "im_start") || ieq(name, nl, "start_header_id");
                if (header) {
                    /* "<|im_start|>assistant\n": the role is the word after it. */
                    size_t r = i;
                    while (r < len && r - i < 32 && (is_alnum(in[r]) || in[r] == '_'))
                        r++;
                    role = in + i;
                    rl = r - i;
                    i = r;
                    while (i < len && is_hspace(in[i]))
                        i++;
                    if (i < len && in[i] == '\r')
                        i++;
                    if (i < len && in[i] == '\n')
                        i++;
                }
                if (header || is_role(role, rl)) {
                    if (ieq(role, rl, "assistant")) {
                        o = 0; /* a later assistant turn replaces everything before */
                        copying = 1;
                        c->assistant = 1;
                    } else if (c->assistant) {
                        copying = 0; /* a user/system turn after the answer */
                    }
                }
                continue;
            }
            if (len - i >= 4 && memcmp(in + i, "</s>", 4) == 0) {
                c->tokens++;
                i += 4;
                continue;
            }
            if (o == 0 && len - i >= 3 && memcmp(in + i, "<s>", 3) == 0) {
                c->tokens++;
                i += 3;
                continue;
            }
        }
        if (ch == '\r') {
            ch = '\n';
            if (i + 1 < len && in[i + 1] == '\n')
                i++;
        }
        if (copying)
            out[o++] = ch;
        i++;
    }
    out[o] = '\0';
    c->len = o;
    return KG_OK;
}

/* Finds "<think>"/"<thinking>" (or the closing tag) at or after from;
 * returns its offset or n, and its length in *tlen. */
static size_t find_think(const char *p, size_t n, size_t from, int closing, size_t *tlen)
{
    const char *pat = closing ? "</think" : "<think";
    size_t pl = strlen(pat);
    while ((from = find_bytes(p, n, from, pat, pl)) < n) {
        size_t k = from + pl;
        if (k < n && p[k] == '>') {
            *tlen = pl + 1;
            return from;
        }
        if (n - k >= 4 && memcmp(p + k, "ing>", 4) == 0) {
            *tlen = pl + 4;
            return from;
        }
        from++;
    }
    *tlen = 0;
    return n;
}

typedef struct {
    char *outside;  /* the text with <think> sections removed */
    size_t outside_len;
    char *all;      /* the text with only the tags removed */
    size_t all_len;
    int think;      /* a section was found */
} think_split;

static void put(char *dst, size_t *dl, const char *src, size_t n)
{
    if (n) {
        memcpy(dst + *dl, src, n);
        *dl += n;
    }
}

static int split_think(const char *p, size_t n, think_split *t)
{
    memset(t, 0, sizeof *t);
    t->outside = malloc(n + 1);
    t->all = malloc(n + 1);
    if (!t->outside || !t->all)
        return KG_ERR_NOMEM;
    size_t pos = 0, tl = 0, cl = 0;
    size_t first_open = find_think(p, n, 0, 0, &tl);
    size_t first_close = find_think(p, n, 0, 1, &cl);
    if (first_close < first_open) {
        /* A "</think>" with no opening: the template put "<think>" in the
         * prompt, so the reply starts inside the reasoning. */
        put(t->all, &t->all_len, p, first_close);
        pos = first_close + cl;
        t->think = 1;
    }
    for (;;) {
        size_t at = find_think(p, n, pos, 0, &tl);
        put(t->outside, &t->outside_len, p + pos, at - pos);
        put(t->all, &t->all_len, p + pos, at - pos);
        if (at >= n)
            break;
        t->think = 1;
        size_t body = at + tl;
        size_t close = find_think(p, n, body, 1, &cl);
        put(t->all, &t->all_len, p + body, close - body);
        if (close >= n)
            break; /* unclosed: the rest is reasoning */
        pos = close + cl;
    }
    t->outside[t->outside_len] = '\0';
    t->all[t->all_len] = '\0';
    return KG_OK;
}

/* ------------------------------------------------------------- scanning */

typedef struct {
    char ch;          /* '`' or '~' */
    size_t count;     /* fence length, >= 3 */
    size_t info;      /* offset of the info string in the line */
    size_t info_len;  /* 0: untagged */
} fence;

/* Is s[0..n) a fence line: indentation, 3+ backticks or tildes, an optional
 * info string, trailing spaces? */
static int parse_fence(const char *s, size_t n, fence *f)
{
    size_t i = 0;
    while (i < n && is_hspace(s[i]))
        i++;
    if (i >= n || (s[i] != '`' && s[i] != '~'))
        return 0;
    f->ch = s[i];
    size_t c0 = i;
    while (i < n && s[i] == f->ch)
        i++;
    f->count = i - c0;
    if (f->count < 3)
        return 0;
    while (i < n && is_hspace(s[i]))
        i++;
    size_t e = n;
    while (e > i && is_space(s[e - 1]))
        e--;
    /* "```x```" on one line is inline code, not a fence (CommonMark). */
    if (f->ch == '`' && e > i && memchr(s + i, '`', e - i))
        return 0;
    f->info = i;
    f->info_len = e - i;
    return 1;
}

enum { LANG_NONE, LANG_PYTHON, LANG_OTHER };

/* Classifies a fence's info string by its first word and copies that word,
 * lower-cased and limited to safe characters, into tag (for messages). */
static int classify(const char *info, size_t n, char *tag, size_t cap)
{
    size_t i = 0;
    while (i < n && (info[i] == '{' || info[i] == '.'))
        i++; /* pandoc's {.python} */
    size_t w = i;
    while (w < n && (is_alnum(info[w]) || info[w] == '_' || info[w] == '+' || info[w] == '#' ||
                     info[w] == '.' || info[w] == '-'))
        w++;
    size_t k = 0;
    for (size_t j = i; j < w && k + 1 < cap; j++)
        tag[k++] = to_lower(info[j]);
    tag[k] = '\0';
    if (n == 0)
        return LANG_NONE;
    if (w == i)
        return LANG_OTHER;
    const char *word = info + i;
    size_t wl = w - i;
    if (ieq(word, wl, "py") || ieq(word, wl, "py3") || ieq(word, wl, "ipython") ||
        ieq(word, wl, "ipython3") || ieq(word, wl, "triton")) /* Triton kernels are Python */
        return LANG_PYTHON;
    if (iprefix(word, wl, "python")) { /* python, python3, python3.11 */
        for (size_t j = 6; j < wl; j++)
            if (!((word[j] >= '0' && word[j] <= '9') || word[j] == '.'))
                return LANG_OTHER;
        return LANG_PYTHON;
    }
    return LANG_OTHER;
}

/* A line `class ModelNew(` or `class ModelNew:` (indentation allowed). */
static int is_modelnew_line(const char *s, size_t n)
{
    size_t i = n >= 3 && memcmp(s, BOM, 3) == 0 ? 3 : 0; /* make_code strips it */
    while (i < n && is_hspace(s[i]))
        i++;
    if (n - i < 5 || memcmp(s + i, "class", 5) != 0)
        return 0;
    i += 5;
    if (i >= n || !is_hspace(s[i]))
        return 0;
    while (i < n && is_hspace(s[i]))
        i++;
    if (n - i < 8 || memcmp(s + i, "ModelNew", 8) != 0)
        return 0;
    i += 8;
    while (i < n && is_hspace(s[i]))
        i++;
    return i < n && (s[i] == '(' || s[i] == ':');
}

static int defines_modelnew(const char *p, size_t start, size_t end)
{
    for (size_t pos = start; pos < end;) {
        size_t e = line_end(p, end, pos);
        if (is_modelnew_line(p + pos, e - pos))
            return 1;
        pos = e + 1;
    }
    return 0;
}

/* The quote character of a triple-quoted string still open after one line of
 * Python, given the one open before it (0: none).  Only triple-quoted
 * strings span lines, so this is all the state needed to tell whether a
 * fence line is code or string content.  Comments and one-line strings are
 * skipped so that a quote inside them does not start a string. */
static char py_line_state(const char *s, size_t n, char q)
{
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (q) {
            if (c == '\\')
                i += 2;
            else if (c == q && n - i >= 3 && s[i + 1] == q && s[i + 2] == q) {
                q = 0;
                i += 3;
            } else
                i++;
            continue;
        }
        if (c == '#')
            break;
        if (c == '"' || c == '\'') {
            if (n - i >= 3 && s[i + 1] == c && s[i + 2] == c) {
                q = c;
                i += 3;
                continue;
            }
            i++;
            while (i < n && s[i] != c)
                i += s[i] == '\\' ? 2 : 1;
            i++;
            continue;
        }
        i++;
    }
    return q;
}

/* Scans a block body from `from`.  Returns the offset of the line that ends
 * the block, or n if none does; *after is where scanning resumes: past a
 * closing fence, or AT a tagged fence that closed a Python block implicitly
 * (it opens the next block). */
static size_t find_close(const char *p, size_t n, size_t from, const fence *open, int python,
                         int strings, size_t *after, int *implicit)
{
    char q = 0;
    *implicit = 0;
    for (size_t pos = from; pos < n;) {
        size_t e = line_end(p, n, pos), next = e < n ? e + 1 : n;
        fence f;
        if (!q && parse_fence(p + pos, e - pos, &f)) {
            if (f.ch == open->ch && f.count >= open->count && f.info_len == 0) {
                *after = next;
                return pos;
            }
            /* "```python" is never Python code, so in a Python block it means
             * the model forgot to close the previous block. */
            if (python && f.info_len > 0) {
                *implicit = 1;
                *after = pos;
                return pos;
            }
        }
        if (python && strings)
            q = py_line_state(p + pos, e - pos, q);
        pos = next;
    }
    *after = n;
    return n;
}

static int is_marker(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && is_hspace(s[i]))
        i++;
    if (i >= n || s[i] != '#')
        return 0;
    while (i < n && s[i] == '#')
        i++;
    while (i < n && is_hspace(s[i]))
        i++;
    if (!iprefix(s + i, n - i, "kernel"))
        return 0;
    i += 6;
    size_t sp = i;
    while (i < n && is_hspace(s[i]))
        i++;
    if (i == sp || !iprefix(s + i, n - i, "implementation"))
        return 0;
    i += 14;
    if (i < n && s[i] == ':')
        i++;
    return is_blank(s + i, n - i);
}

/* Does the line start like Python source (the RAW rule)?  With `flush` only an unindented line counts, and a
 * module's own first lines count too: a docstring opening (three double or single quotes, r-prefixed or not)
 * and `try:` (an import guarded for an older Triton).  Without a flush start the first indented one is taken
 * (a reply whose whole module is indented: make_code removes the common indentation).  Why both: a module that
 * opens with a docstring holding a line such as "from the reference: ..." or with `try:` over an indented
 * import was cut at that inner line and no longer parsed. */
static int python_start(const char *s, size_t n, int flush)
{
    size_t i = 0;
    while (i < n && is_hspace(s[i]))
        i++;
    if (flush && i > 0)
        return 0;
    s += i;
    n -= i;
    if (n >= 1 && (s[0] == '@' || s[0] == '#'))
        return 1;
    static const char *const kw[] = {"import", "from", "class", "def"};
    for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++) {
        size_t kl = strlen(kw[k]);
        if (n > kl && memcmp(s, kw[k], kl) == 0 && is_hspace(s[kl]))
            return 1;
    }
    if (!flush)
        return 0;
    size_t q = n >= 1 && (s[0] == 'r' || s[0] == 'R') ? 1 : 0;
    if (n >= q + 3 && (memcmp(s + q, "\"\"\"", 3) == 0 || memcmp(s + q, "'''", 3) == 0))
        return 1;
    return n >= 4 && memcmp(s, "try:", 4) == 0 && is_blank(s + 4, n - 4);
}

typedef struct {
    /* the candidate taken (the last one defining ModelNew) */
    int found;
    kg_extract_source source;
    size_t start, end;
    int block_index;
    int defining;        /* candidates defining ModelNew (the last is taken) */
    int implicit;        /* the taken block was closed by the next fence */
    size_t prose;        /* RAW: leading prose lines dropped */
    char what[64];       /* "```python block", "untagged ~~~ block" */
    /* what the text had, for error messages */
    int blocks, py_blocks, other_blocks, markers, unterminated_py, looks_python;
    int other_defines;
    char other_tag[24];
} scan;

static void scan_view(const char *p, size_t n, scan *s)
{
    memset(s, 0, sizeof *s);
    s->block_index = -1;
    /* String-aware closing is switched off after it once runs to the end of
     * the text: that bounds rescans to one, keeping the scan linear. */
    int strings = 1;
    size_t pos = 0;
    while (pos < n) {
        size_t e = line_end(p, n, pos), next = e < n ? e + 1 : n;
        fence f;
        if (parse_fence(p + pos, e - pos, &f)) {
            int idx = s->blocks++;
            char tag[24];
            int lang = classify(p + pos + f.info, f.info_len, tag, sizeof tag);
            int python = lang != LANG_OTHER;
            size_t after = n;
            int implicit = 0;
            size_t close = find_close(p, n, next, &f, python, strings, &after, &implicit);
            if (close >= n && python && strings) {
                size_t c2 = find_close(p, n, next, &f, python, 0, &after, &implicit);
                if (c2 < n) {
                    close = c2;
                    strings = 0;
                }
            }
            int defines = defines_modelnew(p, next, close);
            if (python) {
                s->py_blocks++;
                if (close >= n)
                    s->unterminated_py = 1;
                if (defines) {
                    s->found = 1;
                    s->defining++;
                    s->source = close < n ? KG_EXTRACT_FENCED : KG_EXTRACT_UNTERMINATED;
                    s->start = next;
                    s->end = close;
                    s->block_index = idx;
                    s->implicit = implicit;
                    const char *fs = f.ch == '`' ? "```" : "~~~";
                    s->what[0] = '\0';
                    if (lang == LANG_NONE)
                        appendf(s->what, sizeof s->what, "untagged %s block", fs);
                    else
                        appendf(s->what, sizeof s->what, "%s%s block", fs, tag);
                }
            } else {
                s->other_blocks++;
                if (defines && !s->other_defines) {
                    s->other_defines = 1;
                    memcpy(s->other_tag, tag, sizeof tag);
                }
            }
            pos = after;
            continue;
        }
        if (is_marker(p + pos, e - pos)) {
            s->markers++;
            size_t m = next, body_end = n, resume = n;
            int content = 0;
            while (m < n) {
                size_t me = line_end(p, n, m), mnext = me < n ? me + 1 : n;
                fence g;
                if (parse_fence(p + m, me - m, &g)) {
                    /* A bare fence after the code closes the section; a
                     * tagged one, or one right after the marker, opens a
                     * block of its own. */
                    body_end = m;
                    resume = g.info_len == 0 && content ? mnext : m;
                    break;
                }
                if (!is_blank(p + m, me - m))
                    content = 1;
                m = mnext;
            }
            if (defines_modelnew(p, next, body_end)) {
                s->found = 1;
                s->defining++;
                s->source = KG_EXTRACT_MARKER;
                s->start = next;
                s->end = body_end;
                s->block_index = -1;
                s->implicit = 0;
            }
            pos = resume;
            continue;
        }
        pos = next;
    }
    if (s->found || s->blocks || s->markers)
        return;
    /* No fence, no marker: the whole text, from its first Python-looking line (an unindented one if any). */
    for (int flush = 1; flush >= 0 && !s->looks_python; flush--) {
        s->prose = 0;
        for (pos = 0; pos < n;) {
            size_t e = line_end(p, n, pos);
            if (python_start(p + pos, e - pos, flush)) {
                s->looks_python = 1;
                break;
            }
            if (!is_blank(p + pos, e - pos))
                s->prose++;
            pos = e < n ? e + 1 : n;
        }
    }
    if (s->looks_python && defines_modelnew(p, pos, n)) {
        s->found = 1;
        s->defining = 1;
        s->source = KG_EXTRACT_RAW;
        s->start = pos;
        s->end = n;
    }
}

/* Why a scan found nothing, in words a model can act on. */
static void scan_error(const scan *s, char *msg, size_t cap)
{
    static const char need[] =
        "kgym needs the whole module, including `class ModelNew(nn.Module)`, in one ```python block";
    msg[0] = '\0';
    if (s->blocks > 0) {
        appendf(msg, cap, "%d fenced block%s found", s->blocks, s->blocks == 1 ? "" : "s");
        if (s->other_defines)
            appendf(msg, cap,
                    " but none tagged python (or untagged) defines `class ModelNew`; a ```%s "
                    "block does, but blocks tagged with another language are never taken: "
                    "tag the module ```python",
                    s->other_tag);
        else {
            appendf(msg, cap, " (%d python or untagged, %d tagged with another language) but none "
                              "defines `class ModelNew`", s->py_blocks, s->other_blocks);
            if (s->unterminated_py)
                appendf(msg, cap, " (the last fence is never closed)");
            if (s->markers)
                appendf(msg, cap, ", nor does the code after the `# Kernel Implementation` marker");
            appendf(msg, cap, "; %s", need);
        }
    } else if (s->markers) {
        appendf(msg, cap, "a `# Kernel Implementation` marker was found but the code after it "
                          "does not define `class ModelNew`; %s", need);
    } else if (s->looks_python) {
        appendf(msg, cap, "the reply has no ``` fenced block and looks like Python, but does not "
                          "define `class ModelNew`; %s", need);
    } else {
        appendf(msg, cap, "no code found: the reply has no ``` fenced block and does not look "
                          "like Python (no line starts with import, from, class, def, @ or #); "
                          "%s", need);
    }
}

/* ---------------------------------------------------------- normalising */

/* Copies p[start..end) into out->code: no BOM, no leading or trailing blank
 * lines, the indentation common to all lines removed (Python rejects an
 * indented first line, so this only ever repairs), one final newline.
 * Tabs stay: Python's tokenizer judges tab indentation, and expanding them
 * could turn an error into different code.  *dedent: bytes removed. */
static int make_code(const char *p, size_t start, size_t end, kg_extract_result *out,
                     size_t *dedent)
{
    size_t first = start;
    while (first < end && is_space(p[first]))
        first++;
    if (end - first >= 3 && memcmp(p + first, BOM, 3) == 0) {
        /* A BOM before the first code line: drop it with the blank lines. */
        first += 3;
        start = first;
        while (first < end && is_space(p[first]))
            first++;
    }
    size_t ls = first;
    while (ls > start && p[ls - 1] != '\n')
        ls--;
    size_t last = end;
    while (last > ls && is_space(p[last - 1]))
        last--;

    const char *pre = NULL;
    size_t plen = 0;
    for (size_t pos = ls; pos < last;) {
        size_t e = line_end(p, last, pos), ind = 0;
        while (pos + ind < e && is_hspace(p[pos + ind]))
            ind++;
        if (pos + ind < e) { /* non-blank line */
            if (!pre) {
                pre = p + pos;
                plen = ind;
            } else {
                size_t k = 0, lim = ind < plen ? ind : plen;
                while (k < lim && p[pos + k] == pre[k])
                    k++;
                plen = k;
            }
        }
        pos = e + 1;
    }

    char *code = malloc(last - ls + 2);
    if (!code)
        return KG_ERR_NOMEM;
    size_t o = 0;
    for (size_t pos = ls; pos < last;) {
        size_t e = line_end(p, last, pos), k = 0;
        while (k < plen && pos + k < e && p[pos + k] == pre[k])
            k++;
        memcpy(code + o, p + pos + k, e - pos - k);
        o += e - pos - k;
        code[o++] = '\n';
        pos = e + 1;
    }
    code[o] = '\0';
    out->code = code;
    out->code_len = o;
    *dedent = plen;
    return KG_OK;
}

/* ------------------------------------------------------------------ API */

const char *kg_extract_source_name(kg_extract_source s)
{
    switch (s) {
    case KG_EXTRACT_FENCED: return "fenced_block";
    case KG_EXTRACT_MARKER: return "marker";
    case KG_EXTRACT_UNTERMINATED: return "unterminated_fence";
    case KG_EXTRACT_RAW: return "raw";
    }
    return "unknown";
}

void kg_extract_result_free(kg_extract_result *r)
{
    if (!r)
        return;
    free(r->code);
    memset(r, 0, sizeof *r);
    r->block_index = -1;
}

static int fill_result(const char *view, const scan *s, const cleaned *c, int from_think,
                       kg_extract_result *out)
{
    size_t dedent = 0;
    int rc = make_code(view, s->start, s->end, out, &dedent);
    if (rc != KG_OK)
        return rc;
    out->source = s->source;
    out->blocks_found = s->blocks;
    out->block_index = s->block_index;
    out->from_think = from_think;
    char *d = out->detail;
    size_t cap = sizeof out->detail;
    d[0] = '\0';
    switch (s->source) {
    case KG_EXTRACT_FENCED:
        appendf(d, cap, "%s %s (%d of %d) defining ModelNew", s->defining > 1 ? "last" : "the",
                s->what, s->block_index + 1, s->blocks);
        if (s->implicit)
            appendf(d, cap, ", closed by the next fence");
        break;
    case KG_EXTRACT_UNTERMINATED:
        appendf(d, cap, "unterminated %s (%d of %d): the rest of the text, defining ModelNew",
                s->what, s->block_index + 1, s->blocks);
        break;
    case KG_EXTRACT_MARKER:
        appendf(d, cap, "%s code after a `# Kernel Implementation` marker defining ModelNew",
                s->defining > 1 ? "the last" : "the");
        break;
    case KG_EXTRACT_RAW:
        appendf(d, cap, "no fence: the whole reply is Python defining ModelNew");
        if (s->prose)
            appendf(d, cap, " (%zu leading prose line%s dropped)", s->prose,
                    s->prose == 1 ? "" : "s");
        break;
    }
    if (from_think)
        appendf(d, cap, "; found only inside the <think> section");
    if (c->assistant)
        appendf(d, cap, "; last assistant turn");
    if (dedent)
        appendf(d, cap, "; common indentation of %zu removed", dedent);
    return KG_OK;
}

int kg_extract_candidate(const char *text, size_t len, kg_extract_result *out, kg_error *err)
{
    if (out) {
        memset(out, 0, sizeof *out);
        out->block_index = -1;
    }
    if (!out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_extract_candidate: out is NULL");
    if (!text && len)
        return kg_error_set(err, KG_ERR_INVALID, "kg_extract_candidate: text is NULL");
    if (len == 0)
        return kg_error_set(err, KG_ERR_INVALID, "the reply is empty");
    if (len > KG_EXTRACT_MAX_INPUT)
        return kg_error_set(err, KG_ERR_INVALID,
                            "the reply is %zu bytes, over the %zu-byte (16 MiB) limit; a candidate "
                            "module is a few KiB",
                            len, KG_EXTRACT_MAX_INPUT);
    const char *nul = memchr(text, '\0', len);
    if (nul)
        return kg_error_set(err, KG_ERR_INVALID,
                            "the text contains a NUL byte (at offset %zu); the reply must be "
                            "plain text",
                            (size_t)(nul - text));

    cleaned c;
    think_split t;
    int blocks = 0;
    memset(&t, 0, sizeof t);
    int rc = clean_text(text, len, &c);
    if (rc != KG_OK)
        goto done;
    if (is_blank(c.buf, c.len)) {
        rc = kg_error_set(err, KG_ERR_INVALID, "%s",
                          c.assistant ? "the reply's last assistant turn is empty"
                          : c.tokens  ? "the reply is empty: it has only chat-template tokens "
                                        "(such as <|im_end|>) and whitespace"
                                      : "the reply is empty (only whitespace)");
        goto done;
    }
    rc = split_think(c.buf, c.len, &t);
    if (rc != KG_OK)
        goto done;

    scan s;
    scan_view(t.outside, t.outside_len, &s);
    blocks = s.blocks;
    if (s.found) {
        rc = fill_result(t.outside, &s, &c, 0, out);
        goto done;
    }
    char msg[768];
    if (t.think && !s.blocks && !s.markers) {
        /* Nothing code-like outside the reasoning: the answer may be in it
         * (an unclosed <think>, or a reply that ended with its summary). */
        scan s2;
        scan_view(t.all, t.all_len, &s2);
        blocks = s2.blocks;
        if (s2.found) {
            rc = fill_result(t.all, &s2, &c, 1, out);
            goto done;
        }
        if (is_blank(t.all, t.all_len)) {
            rc = kg_error_set(err, KG_ERR_INVALID,
                              "the reply is empty: it has only an empty <think> section");
        } else if (is_blank(t.outside, t.outside_len)) {
            scan_error(&s2, msg, sizeof msg);
            rc = kg_error_set(err, KG_ERR_INVALID,
                              "the reply has nothing outside its <think> section, and inside "
                              "it: %s", msg);
        } else {
            scan_error(&s, msg, sizeof msg);
            rc = kg_error_set(err, KG_ERR_INVALID, "%s (the <think> section has none either)",
                              msg);
        }
        goto done;
    }
    scan_error(&s, msg, sizeof msg);
    rc = kg_error_set(err, KG_ERR_INVALID, "%s", msg);

done:
    if (rc == KG_ERR_NOMEM)
        kg_error_set(err, KG_ERR_NOMEM, "out of memory extracting from a %zu-byte reply", len);
    else if (rc == KG_OK)
        kg_error_clear(err);
    free(c.buf);
    free(t.outside);
    free(t.all);
    if (rc != KG_OK) {
        kg_extract_result_free(out);
        out->blocks_found = blocks; /* kept on failure: callers log it */
    }
    return rc;
}
