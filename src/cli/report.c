/* report.c — the readable report of one evaluation result. */
#include <string.h>

#include "cli/common.h"

static const char *s(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static const char *verdict_color(const char *verdict)
{
    if (!strcmp(verdict, "correct"))
        return "\033[32m";
    if (!strcmp(verdict, "incorrect") || !strcmp(verdict, "hacked"))
        return "\033[31m";
    return "\033[33m";
}

/* Prints text wrapped at word boundaries to lines of at most `width` bytes (a longer word goes on a line of its
 * own, whole), every line after the first indented by `indent` spaces: details are never cut mid-word. */
static void print_wrapped(FILE *out, const char *text, int indent, size_t width)
{
    const char *p = text;
    int first = 1;
    while (*p) {
        size_t n = strlen(p);
        if (n > width) {
            size_t cut = width;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0) { /* one long word: up to its end */
                cut = width;
                while (p[cut] && p[cut] != ' ')
                    cut++;
            }
            n = cut;
        }
        if (!first)
            fprintf(out, "\n%*s", indent, "");
        fwrite(p, 1, n, out);
        first = 0;
        p += n;
        while (*p == ' ')
            p++;
    }
}

void kg_cli_print_report(FILE *out, const json_t *r, int color)
{
    const json_t *task = json_object_get(r, "task");
    const json_t *cand = json_object_get(r, "candidate");
    const char *verdict = s(r, "verdict");
    fprintf(out, "task       %s (%s)\n", s(task, "id"), s(task, "path"));
    fprintf(out, "candidate  %s  [%s]\n", *s(cand, "path") ? s(cand, "path") : "(stdin)",
            *s(cand, "source") ? s(cand, "source") : "not extracted");
    fprintf(out, "device     %s\n", s(json_object_get(r, "device"), "name"));
    /* The reward is kgym's staged partial credit (--credit), not a speed reward: say so, or a 0.70 reads as
     * "70% right". */
    fprintf(out, "verdict    %s%s%s   reward %.2f (staged credit%s)   %.1f s\n", color ? verdict_color(verdict) : "",
            verdict, color ? "\033[0m" : "", json_number_value(json_object_get(r, "reward")),
            !strcmp(verdict, "correct")  ? ""
            : !strcmp(verdict, "hacked") ? ": hacked earns the hack penalty"
                                         : ": partial, for the stages passed; 1.00 only when correct",
            json_number_value(json_object_get(r, "wall_ms")) / 1000.0);
    fprintf(out, "stages\n");
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(r, "stages"), i, st) {
        const char *status = s(st, "status");
        fprintf(out, "  %-12s %-7s %9.1f ms  ", s(st, "name"), status, json_number_value(json_object_get(st, "ms")));
        print_wrapped(out, s(st, "detail"), 37, 90);
        fputc('\n', out);
    }
    const json_t *variants = json_object_get(json_object_get(r, "correctness"), "variants");
    if (json_array_size(variants)) {
        fprintf(out, "variants\n");
        json_t *v;
        json_array_foreach(variants, i, v) {
            char *sizes = json_dumps(json_object_get(v, "sizes"), JSON_COMPACT | JSON_SORT_KEYS);
            fprintf(out, "  %-12s %-7s max|err| %-10.3g %s\n", s(v, "name"), s(v, "status"),
                    json_number_value(json_object_get(v, "max_abs_error")), sizes ? sizes : "");
            if (*s(v, "reason") && strcmp(s(v, "status"), "passed")) {
                fputs("               ", out);
                print_wrapped(out, s(v, "reason"), 15, 100);
                fputc('\n', out);
            }
            free(sizes);
        }
    }
    const json_t *t = json_object_get(r, "timing");
    if (json_is_object(t)) {
        const json_t *rm = json_object_get(t, "reference_ms"), *cm = json_object_get(t, "candidate_ms");
        fprintf(out, "timing     reference %.4g ms (cv %.1f%%), candidate %.4g ms (cv %.1f%%), speedup %.2fx  [%s]\n",
                json_number_value(json_object_get(rm, "median")), 100 * json_number_value(json_object_get(rm, "cv")),
                json_number_value(json_object_get(cm, "median")), 100 * json_number_value(json_object_get(cm, "cv")),
                json_number_value(json_object_get(t, "speedup")), s(t, "gpu"));
        /* Rounds beyond the planned ones, and why kgym asked for each (timing.checks: docs/result-schema.md). */
        json_int_t extra = json_integer_value(json_object_get(t, "remeasured"));
        if (extra > 0) {
            fprintf(out, "           %" JSON_INTEGER_FORMAT " rounds, %" JSON_INTEGER_FORMAT " re-measured:",
                    json_integer_value(json_object_get(t, "rounds_run")), extra);
            const json_t *c;
            size_t k, said = 0;
            json_array_foreach(json_object_get(t, "checks"), k, c) {
                if (json_is_true(json_object_get(c, "more")))
                    fprintf(out, "%s %s%s", said++ ? "," : "", s(c, "reason"),
                            !strcmp(s(c, "clock_basis"), "device") ? " (device-wide clock)" : "");
            }
            fputs(said ? "\n" : " why not recorded\n", out);
        }
    } else {
        fprintf(out, "timing     not measured%s\n", !strcmp(s(json_object_get(r, "device"), "kind"), "cpu") ? " (CPU)" : "");
    }
    /* What kept a passing run from `correct`, and what the verdict cannot see here (docs/result-schema.md). */
    const json_t *u;
    json_array_foreach(json_object_get(r, "unjudged"), i, u) {
        fprintf(out, "%-11s%s: ", i ? "" : "not judged", s(u, "fact"));
        print_wrapped(out, s(u, "reason"), 11, 100);
        fputc('\n', out);
    }
    const json_t *task_random = json_object_get(task, "randomness");
    if (*s(task_random, "handling") && strcmp(s(task_random, "handling"), "none")) {
        fprintf(out, "task       %s: ", s(task_random, "handling"));
        print_wrapped(out, s(task_random, "reason"), 11, 100);
        fputc('\n', out);
    }
    json_array_foreach(json_object_get(r, "limits"), i, u) {
        fprintf(out, "%-11s%s: ", i ? "" : "limits", s(u, "code"));
        print_wrapped(out, s(u, "text"), 11, 100);
        fputc('\n', out);
    }
    const json_t *p = json_object_get(r, "process");
    if (json_is_object(p) && strcmp(s(p, "end"), "completed"))
        fprintf(out, "process    ended: %s (exit %lld, signal %lld) in stage %s\n", s(p, "end"),
                (long long)json_integer_value(json_object_get(p, "exit_code")),
                (long long)json_integer_value(json_object_get(p, "signal")), s(p, "stage"));
    fprintf(out, "feedback\n");
    const char *fb = s(r, "feedback");
    fprintf(out, "  ");
    for (const char *c = fb; *c; c++) {
        fputc(*c, out);
        if (*c == '\n')
            fputs("  ", out);
    }
    fputc('\n', out);
}
