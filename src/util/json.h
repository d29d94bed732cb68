/*
 * util/json.h — building JSON with jansson, every step checked.
 *
 * jansson reports every failure of building as NULL or -1, and most code
 * ignores them: json_object_set_new(o, "k", json_real(NAN)) or a string that
 * is not UTF-8 leaves a field silently out.  kgym's policy (docs/style.md,
 * "Allocation failures"): allocation failures are handled, never fatal, and
 * reported as KG_ERR_NOMEM; a value jansson cannot represent is made
 * representable here instead of being lost:
 *   - kg_json_text(n): text that is not UTF-8 is kept with '?' for each
 *     invalid byte (kg_utf8_sanitize), as the rest of kgym treats a
 *     candidate's or a model's output; NULL text is JSON null;
 *   - kg_json_number: a non-finite number is JSON null ("not measured").
 * So these return NULL only when memory ran out, and kg_json_set/kg_json_push
 * returning -1 means the same.
 *
 * Ownership: kg_json_set and kg_json_push take value's reference, as
 * json_object_set_new does, also when they fail (value is then freed); a
 * NULL obj/arr or value is a failure, so a chain of calls may be checked at
 * its end.  Nothing here keeps state.
 */
#ifndef KG_UTIL_JSON_H
#define KG_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>

json_t *kg_json_text(const char *s);
json_t *kg_json_textn(const char *s, size_t n);
json_t *kg_json_number(double x);
int kg_json_set(json_t *obj, const char *key, json_t *value);
int kg_json_push(json_t *arr, json_t *value);

#endif
