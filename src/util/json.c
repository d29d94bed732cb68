/* json.c — checked JSON building (util/json.h). */
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

json_t *kg_json_textn(const char *s, size_t n)
{
    if (!s)
        return json_null();
    json_t *v = json_stringn(s, n);
    if (v)
        return v;
    /* Not UTF-8 (or no memory: then the copy below fails too).  Sanitized
     * piece by piece: jansson keeps embedded NULs, kg_utf8_sanitize stops at
     * them. */
    char *copy = malloc(n + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, n);
    copy[n] = '\0';
    for (char *p = copy; p < copy + n; p += strlen(p) + 1)
        kg_utf8_sanitize(p);
    v = json_stringn(copy, n);
    free(copy);
    return v;
}

json_t *kg_json_text(const char *s)
{
    return kg_json_textn(s, s ? strlen(s) : 0);
}

json_t *kg_json_number(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

int kg_json_set(json_t *obj, const char *key, json_t *value)
{
    if (!obj || !value) {
        json_decref(value);
        return -1;
    }
    return json_object_set_new(obj, key, value) == 0 ? 0 : -1;
}

int kg_json_push(json_t *arr, json_t *value)
{
    if (!arr || !value) {
        json_decref(value);
        return -1;
    }
    return json_array_append_new(arr, value) == 0 ? 0 : -1;
}
