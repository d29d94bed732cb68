/* jsonl.c — parsing evaluation results and trajectory records line by line
 * (see rl_jsonl.h and docs/rl.md §Input). */
#include "rl_jsonl.h"
#include "rl/result_read.h"
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int row_error(const kg_rl_row *row, kg_error *err, const char *what)
{
    char where[256];
    kg_rl_row_describe(row, where, sizeof where);
    return kg_error_set(err, KG_ERR_INVALID, "%s: %s", where, what);
}

/* A 0/1 flag of the record ("mask", "keep"): true/false or 0/1; 1 when
 * absent or null. */
static int read_flag(const kg_rl_row *row, const char *name, int *out, kg_error *err)
{
    json_t *v = json_object_get(row->root, name);
    *out = 1;
    if (json_is_boolean(v))
        *out = json_is_true(v);
    else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
        *out = (int)json_integer_value(v);
    else if (v && !json_is_null(v)) {
        char what[64];
        snprintf(what, sizeof what, "\"%s\" must be true/false or 0/1", name);
        return row_error(row, err, what);
    }
    return KG_OK;
}

static const char *id_of(json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "id")))
        return json_string_value(json_object_get(v, "id"));
    return NULL;
}

static int parse_row(kg_rl_row *row, kg_error *err)
{
    json_t *root = row->root;
    if (!json_is_object(root))
        return row_error(row, err, "a line must be a JSON object");
    json_t *nested = json_object_get(root, "result");
    row->bare_result = !nested && json_object_get(root, "verdict") != NULL;
    if (nested && !json_is_object(nested) && !json_is_null(nested))
        return row_error(row, err, "\"result\" must be an evaluation result object");
    row->result = row->bare_result ? root : json_is_object(nested) ? nested : NULL;

    json_t *prompt = json_object_get(root, "prompt");
    if (json_is_string(prompt))
        row->prompt = json_string_value(prompt);
    else if (prompt && !json_is_null(prompt))
        return row_error(row, err, "\"prompt\" must be a string id");
    if (!row->prompt)
        row->prompt = id_of(json_object_get(root, "task"));
    if (!row->prompt && row->result)
        row->prompt = id_of(json_object_get(row->result, "task"));

    json_t *sample = json_object_get(root, "sample");
    row->has_sample = 1;
    if (json_is_integer(sample))
        snprintf(row->sample, sizeof row->sample, "%lld", (long long)json_integer_value(sample));
    else if (json_is_string(sample) && strlen(json_string_value(sample)) < sizeof row->sample)
        snprintf(row->sample, sizeof row->sample, "%s", json_string_value(sample));
    else if (!sample || json_is_null(sample)) {
        row->has_sample = 0; /* each such line is a sample of its own */
        snprintf(row->sample, sizeof row->sample, "\x1f%zu", row->line);
    } else
        return row_error(row, err, "\"sample\" must be an integer or a short string");

    json_t *turn = json_object_get(root, "turn");
    row->turn = 1;
    if (json_is_integer(turn) && json_integer_value(turn) >= INT32_MIN &&
        json_integer_value(turn) <= INT32_MAX)
        row->turn = (int32_t)json_integer_value(turn);
    else if (turn && !json_is_null(turn))
        return row_error(row, err, "\"turn\" must be an integer");

    if (read_flag(row, "mask", &row->mask, err) || read_flag(row, "keep", &row->keep, err))
        return KG_ERR_INVALID;

    /* a bare result's "reward" is the evaluator's staged credit, not an RL
     * reward; only a trajectory record's top-level "reward" counts here */
    json_t *reward = row->bare_result ? NULL : json_object_get(root, "reward");
    if (json_is_number(reward)) {
        row->has_reward = 1;
        row->reward = json_number_value(reward);
    } else if (reward && !json_is_null(reward)) {
        return row_error(row, err, "\"reward\" must be a number");
    }
    return KG_OK;
}

int kg_rl_rows_read(FILE *in, const char *source, kg_rl_rows *out, kg_error *err)
{
    memset(out, 0, sizeof *out);
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    ssize_t len;
    int rc = KG_OK;
    while ((len = getline(&line, &cap, in)) >= 0) {
        line_no++;
        size_t i = 0;
        while (i < (size_t)len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' ||
                                   line[i] == '\n'))
            i++;
        if (i == (size_t)len)
            continue; /* blank lines are allowed between records */
        if (out->n == out->cap) {
            size_t ncap = out->cap ? 2 * out->cap : 64;
            kg_rl_row *grown = realloc(out->rows, ncap * sizeof *grown);
            if (!grown) {
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory reading %s", source);
                break;
            }
            out->rows = grown;
            out->cap = ncap;
        }
        json_error_t jerr;
        json_t *root = json_loadb(line, (size_t)len, 0, &jerr);
        if (!root) {
            rc = kg_error_set(err, KG_ERR_INVALID, "%s line %zu: not JSON: %s", source, line_no,
                              jerr.text);
            break;
        }
        kg_rl_row *row = &out->rows[out->n++];
        memset(row, 0, sizeof *row);
        row->line = line_no;
        row->root = root;
        rc = parse_row(row, err);
        if (rc)
            break;
    }
    if (!rc && ferror(in))
        rc = kg_error_set(err, KG_ERR_IO, "error reading %s", source);
    free(line);
    if (rc)
        kg_rl_rows_free(out);
    return rc;
}

void kg_rl_rows_free(kg_rl_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++)
        json_decref(rows->rows[i].root);
    free(rows->rows);
    memset(rows, 0, sizeof *rows);
}

void kg_rl_row_describe(const kg_rl_row *row, char *buf, size_t size)
{
    int n = snprintf(buf, size, "line %zu", row->line);
    if (n < 0 || (size_t)n >= size)
        return;
    if (row->prompt)
        snprintf(buf + n, size - (size_t)n, " (task %.100s, sample %s, turn %d)", row->prompt,
                 row->has_sample ? row->sample : "-", (int)row->turn);
}

static double number_at(json_t *obj, const char *key, const char *sub)
{
    json_t *v = json_object_get(obj, key);
    if (sub)
        v = json_is_object(v) ? json_object_get(v, sub) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

double kg_rl_row_result_number(const kg_rl_row *row, const char *object, const char *key)
{
    return row->result ? number_at(row->result, object, key) : NAN;
}

int kg_rl_row_outcome(const kg_rl_row *row, kg_eval_outcome *out, kg_error *err)
{
    if (!row->result)
        return row_error(row, err, "no evaluation result (expected \"verdict\" or a \"result\" "
                                   "object)");
    if (!json_is_string(json_object_get(row->result, "verdict")))
        return row_error(row, err, "the evaluation result has no \"verdict\" string");
    kg_error inner;
    if (kg_result_outcome(row->result, out, &inner)) /* the one reader (rl/result_read.h) */
        return row_error(row, err, inner.message);
    return KG_OK;
}

json_t *kg_rl_row_record(const kg_rl_row *row)
{
    if (!row->bare_result)
        return json_incref(row->root);
    json_t *rec = json_object();
    if (!rec)
        return NULL;
    /* Whole or NULL (docs/style.md): a record without its task or result would be another record. */
    int ok = !row->prompt || kg_json_set(rec, "task", kg_json_text(row->prompt)) == 0;
    ok = ok && kg_json_set(rec, "turn", json_integer(row->turn)) == 0;
    ok = ok && kg_json_set(rec, "result", json_incref(row->root)) == 0;
    if (!ok) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

int kg_rl_print_json(FILE *out, json_t *value, kg_error *err)
{
    char *text = json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(12));
    if (!text)
        return kg_error_set(err, KG_ERR_NOMEM, "could not serialise a record");
    int ok = fputs(text, out) >= 0 && fputc('\n', out) != EOF;
    free(text);
    return ok ? KG_OK : kg_error_set(err, KG_ERR_IO, "could not write output");
}

int kg_rl_row_level(const kg_rl_row *row)
{
    json_t *level = json_object_get(row->root, "level");
    if (json_is_integer(level))
        return (int)json_integer_value(level);
    if (row->prompt && strncmp(row->prompt, "level", 5) == 0) {
        char *end;
        long k = strtol(row->prompt + 5, &end, 10);
        if (end != row->prompt + 5 && k > 0 && k < 1000)
            return (int)k;
    }
    return 0;
}
