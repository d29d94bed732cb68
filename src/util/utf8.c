/* utf8.c — making untrusted text safe for JSON strings. */
#include "util/util.h"

/* Walks s as jansson checks UTF-8: with fix, each invalid byte becomes '?'; without, s is only read and the
 * walk stops at the first.  Returns whether s was valid. */
static int utf8_walk(char *s, int fix)
{
    unsigned char *p = (unsigned char *)s;
    int valid = 1;
    while (*p) {
        int n = 0;
        if (*p < 0x80) {
            /* Control characters other than \n \t \r are kept: JSON escapes them. */
            p++;
            continue;
        } else if ((*p & 0xE0) == 0xC0 && *p >= 0xC2) {
            n = 1;
        } else if ((*p & 0xF0) == 0xE0) {
            n = 2;
        } else if ((*p & 0xF8) == 0xF0 && *p <= 0xF4) {
            n = 3;
        } else {
            if (!fix)
                return 0;
            valid = 0;
            *p++ = '?';
            continue;
        }
        int ok = 1;
        for (int i = 1; i <= n; i++)
            if ((p[i] & 0xC0) != 0x80) {
                ok = 0;
                break;
            }
        /* Overlong 3-byte forms and UTF-16 surrogates are rejected by jansson too. */
        if (ok && n == 2 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
            ok = 0;
        if (ok && n == 3 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
            ok = 0;
        if (!ok) {
            if (!fix)
                return 0;
            valid = 0;
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
    return valid;
}

void kg_utf8_sanitize(char *s)
{
    utf8_walk(s, 1);
}

int kg_utf8_valid(const char *s)
{
    return utf8_walk((char *)s, 0); /* read only: nothing is written without fix */
}
