/* metrics_format.c — the metrics report as a readable table and as JSON.
 * Undefined values (no samples, no timed correct sample) print as "-" in the
 * table and null in JSON, never as a made-up 0. */
#include "kgym/rl.h"
#include "util/json.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void print_value(FILE *f, int width, double v)
{
    if (isnan(v))
        fprintf(f, " %*s", width, "-");
    else
        fprintf(f, " %*.3f", width, v);
}

static void print_section(FILE *f, const kg_metrics_report *r, const kg_turn_metrics *rows,
                          const char *title)
{
    fprintf(f, "%s\n%5s %7s %8s %8s %8s", title, "turn", "samples", "compiled", "correct",
            "hacked");
    for (size_t p = 0; p < r->n_thresholds; p++) {
        char head[32];
        snprintf(head, sizeof head, "fast@%g", r->thresholds[p]);
        fprintf(f, " %8s", head);
    }
    fprintf(f, " %8s %6s\n", "geomean", "timed");
    for (size_t j = 0; j < r->n_turns; j++) {
        const kg_turn_metrics *m = &rows[j];
        fprintf(f, "%5d %7zu", (int)m->turn, m->samples);
        print_value(f, 8, m->compile_rate);
        print_value(f, 8, m->correct_rate);
        print_value(f, 8, m->hack_rate);
        for (size_t p = 0; p < r->n_thresholds; p++)
            print_value(f, 8, m->fast[p]);
        print_value(f, 8, m->geomean_speedup);
        fprintf(f, " %6zu\n", m->timed_correct);
    }
}

int kg_metrics_table(const kg_metrics_report *report, char **out, kg_error *err)
{
    if (!report || !out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_metrics_table: NULL argument");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return kg_error_set(err, KG_ERR_NOMEM, "open_memstream failed");
    fprintf(f, "%zu samples; rates are shares of all samples; geomean is over correct, "
               "timed samples\n\n", report->samples);
    print_section(f, report, report->per_turn, "Per turn");
    fputc('\n', f);
    print_section(f, report, report->best_of, "Best of turns <= t");
    if (fclose(f) != 0 || !text) {
        free(text);
        return kg_error_set(err, KG_ERR_NOMEM, "could not build the metrics table");
    }
    *out = text;
    return KG_OK;
}

/* The rows as a JSON array; NULL when memory ran out (util/json.h: every
 * step checked; json_pack checks its own). */
static json_t *rows_to_json(const kg_metrics_report *r, const kg_turn_metrics *rows)
{
    json_t *arr = json_array();
    int ok = arr != NULL;
    for (size_t j = 0; ok && j < r->n_turns; j++) {
        const kg_turn_metrics *m = &rows[j];
        json_t *fast = json_object();
        for (size_t p = 0; fast && p < r->n_thresholds; p++) {
            char key[32];
            snprintf(key, sizeof key, "%g", r->thresholds[p]);
            if (kg_json_set(fast, key, kg_json_number(m->fast[p])) != 0) {
                json_decref(fast);
                fast = NULL;
            }
        }
        ok = fast && kg_json_push(arr, json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:I, s:o}", "turn", (int)m->turn,
                                                 "samples", (json_int_t)m->samples, "compile_rate",
                                                 kg_json_number(m->compile_rate), "correct_rate",
                                                 kg_json_number(m->correct_rate), "hack_rate",
                                                 kg_json_number(m->hack_rate), "fast", fast, "timed_correct",
                                                 (json_int_t)m->timed_correct, "geomean_speedup",
                                                 kg_json_number(m->geomean_speedup))) == 0;
    }
    if (!ok) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

int kg_metrics_json(const kg_metrics_report *report, char **out, kg_error *err)
{
    if (!report || !out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_metrics_json: NULL argument");
    json_t *thresholds = json_array();
    for (size_t p = 0; thresholds && p < report->n_thresholds; p++)
        if (kg_json_push(thresholds, kg_json_number(report->thresholds[p])) != 0) {
            json_decref(thresholds);
            thresholds = NULL;
        }
    /* json_pack fails on a NULL "o" (and takes the others' references). */
    json_t *root = json_pack("{s:I, s:o, s:o, s:o}", "samples", (json_int_t)report->samples,
                             "thresholds", thresholds, "per_turn",
                             rows_to_json(report, report->per_turn), "best_of_turns",
                             rows_to_json(report, report->best_of));
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(root);
    if (!text)
        return kg_error_set(err, KG_ERR_NOMEM, "could not serialise the metrics");
    *out = text;
    return KG_OK;
}
