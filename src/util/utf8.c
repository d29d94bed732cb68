/* utf8.c — making untrusted text safe for JSON strings. */
#include "util/util.h"

void kg_utf8_sanitize(char *s)
{
    unsigned char *p = (unsigned char *)s;
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
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
}
