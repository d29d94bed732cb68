/*
 * prompts.c — the words the model reads: template files with {{name}}
 * placeholders, the evaluation rendered from the structured result (so the
 * model sees every error the evaluator saw, not only the one-paragraph
 * summary), and the context builder that decides which earlier turns stay.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "util/util.h"

#ifndef KG_SOURCE_ROOT
#define KG_SOURCE_ROOT "."
#endif

#define KG_PROMPT_MAX_BYTES ((size_t)1 << 20)

void kg_prompts_free(kg_prompts *p)
{
    if (!p)
        return;
    free(p->first_turn);
    free(p->feedback);
    free(p->example);
    memset(p, 0, sizeof *p);
}

static int load_one(const char *dir, const char *name, int required, char **out, kg_error *err)
{
    kg_buf path = {0};
    kg_buf_printf(&path, "%s/%s", dir, name);
    size_t len = 0;
    int rc = KG_OK;
    if (!kg_file_exists(path.data) && !required)
        *out = kg_strdup("");
    else
        rc = kg_file_read(path.data, KG_PROMPT_MAX_BYTES, out, &len, err);
    kg_buf_free(&path);
    return rc;
}

int kg_prompts_load(const char *dir, kg_prompts *p, kg_error *err)
{
    memset(p, 0, sizeof *p);
    const char *d = dir ? dir : KG_SOURCE_ROOT "/prompts";
    if (!kg_dir_exists(d))
        return kg_error_set(err, KG_ERR_NOT_FOUND, "prompt folder %s does not exist", d);
    int rc = load_one(d, "first_turn.md", 1, &p->first_turn, err);
    if (rc == KG_OK)
        rc = load_one(d, "feedback.md", 1, &p->feedback, err);
    if (rc == KG_OK)
        rc = load_one(d, "example.md", 0, &p->example, err);
    if (rc != KG_OK)
        kg_prompts_free(p);
    return rc;
}

/* Replaces {{name}} by values[i] for names[i]; unknown placeholders stay, so a
 * user's template that mentions "{{" in code is not mangled. */
static char *substitute(const char *tpl, const char *const *names, const char *const *values, size_t n)
{
    kg_buf b = {0};
    const char *p = tpl;
    while (*p) {
        const char *open = strstr(p, "{{");
        if (!open) {
            kg_buf_puts(&b, p);
            break;
        }
        kg_buf_append(&b, p, (size_t)(open - p));
        const char *close = strstr(open + 2, "}}");
        size_t i = n;
        if (close)
            for (i = 0; i < n; i++)
                if (strlen(names[i]) == (size_t)(close - open - 2) && !strncmp(open + 2, names[i], strlen(names[i])))
                    break;
        if (i < n) {
            kg_buf_puts(&b, values[i] ? values[i] : "");
            p = close + 2;
        } else {
            kg_buf_puts(&b, "{{");
            p = open + 2;
        }
    }
    return kg_buf_release(&b);
}

int kg_prompt_first_turn(const kg_prompts *p, const kg_task *task, char **out, kg_error *err)
{
    const char *names[] = {"reference_code", "task_id", "task_name", "example"};
    const char *values[] = {task->source ? task->source : "", task->id ? task->id : "",
                            task->name ? task->name : "", p->example ? p->example : ""};
    /* The example may itself hold placeholders-free text only; substitute
     * the main template once so reference code containing "{{" stays put. */
    *out = substitute(p->first_turn, names, values, 4);
    return *out ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
}

/* ---- rendering the result */

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Long text keeps its head and its tail: tracebacks put the cause last. */
static void put_trimmed(kg_buf *b, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        kg_buf_puts(b, s);
        return;
    }
    size_t head = max / 3, tail = max - head;
    kg_buf_append(b, s, head);
    kg_buf_printf(b, "\n[... %zu characters omitted ...]\n", n - head - tail);
    kg_buf_puts(b, s + n - tail);
}

static void render_error(kg_buf *b, const char *heading, const json_t *e)
{
    if (!json_is_object(e))
        return;
    kg_buf_printf(b, "%s", heading);
    if (*str(e, "stage"))
        kg_buf_printf(b, " (stage %s)", str(e, "stage"));
    kg_buf_printf(b, ": %s: ", *str(e, "type") ? str(e, "type") : "error");
    put_trimmed(b, str(e, "message"), 1500);
    kg_buf_puts(b, "\n");
    if (*str(e, "cause_type"))
        kg_buf_printf(b, "  caused by %s: %.600s\n", str(e, "cause_type"), str(e, "cause_message"));
    size_t i;
    json_t *f;
    const json_t *frames = json_object_get(e, "frames");
    if (json_array_size(frames))
        kg_buf_puts(b, "  In your code (innermost last):\n");
    json_array_foreach(frames, i, f) {
        kg_buf_printf(b, "    %s line %lld, in %s: %s\n", *str(f, "file") ? str(f, "file") : "candidate.py",
                      (long long)json_integer_value(json_object_get(f, "line")), str(f, "function"),
                      str(f, "code"));
    }
}

static double num_or_nan(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The time a profile row spent, under whichever name the profiler used. */
static double kernel_time(const json_t *k, const char **unit)
{
    static const char *const keys[] = {"total_ms", "ms", "time_ms", "cuda_time_ms", "total_us", "cuda_time_us", "us"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        double v = num_or_nan(json_object_get(k, keys[i]));
        if (isfinite(v)) {
            *unit = strstr(keys[i], "us") ? "us" : "ms";
            return v;
        }
    }
    *unit = "";
    return NAN;
}

static void render_profile(kg_buf *b, const json_t *profile)
{
    if (!json_is_object(profile))
        return;
    double cov = num_or_nan(json_object_get(profile, "coverage"));
    if (isfinite(cov))
        kg_buf_printf(b, "Coverage: %.0f%% of GPU kernel time runs in your own Triton kernels.\n", cov * 100);
    const json_t *kernels = json_object_get(profile, "kernels");
    size_t n = json_array_size(kernels);
    if (!n)
        return;
    /* Five slowest, by selection (n is small). */
    size_t shown = 0;
    char *used = calloc(n, 1);
    if (!used)
        return;
    kg_buf_puts(b, "Slowest kernels:\n");
    while (shown < 5 && shown < n) {
        size_t best = n;
        double bt = -1;
        for (size_t i = 0; i < n; i++) {
            const char *u;
            double t = kernel_time(json_array_get(kernels, i), &u);
            if (!used[i] && (best == n || (isfinite(t) && t > bt))) {
                best = i;
                bt = isfinite(t) ? t : -1;
            }
        }
        used[best] = 1;
        const json_t *k = json_array_get(kernels, best);
        const char *u;
        double t = kernel_time(k, &u);
        const json_t *own = json_object_get(k, "triton");
        if (!own)
            own = json_object_get(k, "candidate");
        kg_buf_printf(b, "  - %s", *str(k, "name") ? str(k, "name") : "?");
        if (isfinite(t))
            kg_buf_printf(b, ": %.4g %s", t, u);
        if (json_is_boolean(own))
            kg_buf_puts(b, json_is_true(own) ? " (yours)" : " (not yours: PyTorch/library)");
        kg_buf_puts(b, "\n");
        shown++;
    }
    free(used);
}

static void render_timing(kg_buf *b, const json_t *timing)
{
    if (!json_is_object(timing))
        return;
    double s = num_or_nan(json_object_get(timing, "speedup"));
    if (!isfinite(s))
        return;
    kg_buf_printf(b, "Speedup: %.3gx over the PyTorch reference", s);
    const json_t *ci = json_object_get(timing, "speedup_ci");
    if (!ci)
        ci = json_object_get(timing, "speedup_ci95");
    double lo = NAN, hi = NAN;
    if (json_is_array(ci)) {
        lo = num_or_nan(json_array_get(ci, 0));
        hi = num_or_nan(json_array_get(ci, 1));
    } else if (json_is_object(ci)) {
        lo = num_or_nan(json_object_get(ci, "low"));
        hi = num_or_nan(json_object_get(ci, "high"));
    }
    if (isfinite(lo) && isfinite(hi))
        kg_buf_printf(b, " (95%% confidence interval %.3g–%.3g)", lo, hi);
    double rm = num_or_nan(json_object_get(json_object_get(timing, "reference_ms"), "median"));
    double cm = num_or_nan(json_object_get(json_object_get(timing, "candidate_ms"), "median"));
    if (isfinite(rm) && isfinite(cm))
        kg_buf_printf(b, "; median %.4g ms (reference) vs %.4g ms (yours)", rm, cm);
    kg_buf_puts(b, s >= 1 ? ".\n" : ". Your kernel is slower than PyTorch.\n");
}

static void render_hacks(kg_buf *b, const json_t *hacks)
{
    size_t n = json_array_size(hacks), i;
    json_t *h;
    if (!n)
        return;
    kg_buf_printf(b, "Rejected as reward hacking (%zu finding%s):\n", n, n == 1 ? "" : "s");
    json_array_foreach(hacks, i, h) {
        if (json_is_string(h)) {
            kg_buf_printf(b, "  - %.500s\n", json_string_value(h));
            continue;
        }
        const char *kind = *str(h, "kind") ? str(h, "kind") : *str(h, "name") ? str(h, "name") : str(h, "check");
        const char *why = *str(h, "detail") ? str(h, "detail") : *str(h, "message") ? str(h, "message") : str(h, "reason");
        if (*kind || *why) {
            kg_buf_printf(b, "  - %s%s%.500s\n", kind, *kind && *why ? ": " : "", why);
        } else {
            char *d = json_dumps(h, JSON_COMPACT);
            kg_buf_printf(b, "  - %.500s\n", d ? d : "?");
            free(d);
        }
    }
}

static void render_process(kg_buf *b, const json_t *p)
{
    if (!json_is_object(p))
        return;
    const char *end = str(p, "end");
    if (*end && strcmp(end, "completed")) {
        kg_buf_printf(b, "Process: ended by \"%s\"", end);
        if (!strcmp(end, "signal"))
            kg_buf_printf(b, " (signal %lld)", (long long)json_integer_value(json_object_get(p, "signal")));
        else if (!strcmp(end, "exit"))
            kg_buf_printf(b, " (exit code %lld)", (long long)json_integer_value(json_object_get(p, "exit_code")));
        if (*str(p, "stage"))
            kg_buf_printf(b, " during stage %s", str(p, "stage"));
        double lim = num_or_nan(json_object_get(p, "limit_s"));
        if (isfinite(lim))
            kg_buf_printf(b, " (limit %.3g s)", lim);
        if (*str(p, "cause"))
            kg_buf_printf(b, ": %s", str(p, "cause"));
        kg_buf_puts(b, "\n");
    }
    const char *se = str(p, "stderr");
    if (*se) {
        kg_buf_puts(b, "Your program's stderr (tail):\n");
        size_t n = strlen(se);
        put_trimmed(b, n > 1200 ? se + n - 1200 : se, 1200);
        kg_buf_puts(b, se[n - 1] == '\n' ? "" : "\n");
    }
}

int kg_feedback_render(const json_t *result, char **out, kg_error *err)
{
    *out = NULL;
    if (!json_is_object(result))
        return kg_error_set(err, KG_ERR_INVALID, "no evaluation result to render");
    kg_buf b = {0};
    const char *verdict = str(result, "verdict");
    kg_buf_printf(&b, "Verdict: %s", *verdict ? verdict : "unknown");
    double r = num_or_nan(json_object_get(result, "reward"));
    if (isfinite(r))
        kg_buf_printf(&b, " (staged score %.2g of 1)", r);
    kg_buf_puts(&b, "\n");

    /* Stages: the first failure with its detail, and how far it got. */
    size_t i;
    json_t *s;
    kg_buf passed = {0};
    json_array_foreach(json_object_get(result, "stages"), i, s) {
        const char *st = str(s, "status");
        if (!strcmp(st, "ok"))
            kg_buf_printf(&passed, "%s%s", passed.len ? ", " : "", str(s, "name"));
        else if (!strcmp(st, "fail")) {
            kg_buf_printf(&b, "Failed stage: %s", str(s, "name"));
            if (*str(s, "detail")) {
                kg_buf_puts(&b, " — ");
                put_trimmed(&b, str(s, "detail"), 1500);
            }
            kg_buf_puts(&b, "\n");
        }
    }
    if (passed.len)
        kg_buf_printf(&b, "Stages passed: %s\n", passed.data);
    kg_buf_free(&passed);

    render_error(&b, "Error", json_object_get(result, "error"));

    /* Every variant that did not pass, with its own reason. */
    const json_t *corr = json_object_get(result, "correctness");
    const json_t *vars = json_object_get(corr, "variants");
    size_t nv = json_array_size(vars), bad = 0, ok = 0;
    json_t *v;
    json_array_foreach(vars, i, v) {
        const char *st = str(v, "status");
        if (!strcmp(st, "passed"))
            ok++;
        else if (!strcmp(st, "failed") || !strcmp(st, "error"))
            bad++;
    }
    if (nv) {
        kg_buf_printf(&b, "Correctness: %zu of %zu input variants passed", ok, nv);
        kg_buf_puts(&b, bad ? "; failing variants:\n" : ".\n");
        size_t shown = 0;
        json_array_foreach(vars, i, v) {
            const char *st = str(v, "status");
            if (strcmp(st, "failed") && strcmp(st, "error"))
                continue;
            if (shown++ == 8) {
                kg_buf_printf(&b, "  - ... and %zu more\n", bad - 8);
                break;
            }
            kg_buf_printf(&b, "  - %s [%s]", str(v, "name"), st);
            if (*str(v, "description"))
                kg_buf_printf(&b, " (%s)", str(v, "description"));
            kg_buf_puts(&b, ": ");
            put_trimmed(&b, *str(v, "reason") ? str(v, "reason") : "no reason given", 800);
            kg_buf_puts(&b, "\n");
            const json_t *ve = json_object_get(v, "error");
            if (json_is_object(ve) && json_array_size(json_object_get(ve, "frames")))
                render_error(&b, "    raised", ve);
        }
    }
    render_timing(&b, json_object_get(result, "timing"));
    render_profile(&b, json_object_get(result, "profile"));
    render_hacks(&b, json_object_get(result, "hacks"));
    render_process(&b, json_object_get(result, "process"));
    const char *fb = str(result, "feedback");
    if (*fb) {
        kg_buf_puts(&b, "Evaluator's summary:\n");
        put_trimmed(&b, fb, 4000);
        kg_buf_puts(&b, "\n");
    }
    *out = kg_buf_release(&b);
    if (!*out)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    /* Trimming may split a UTF-8 sequence; JSON needs valid text. */
    kg_utf8_sanitize(*out);
    return KG_OK;
}

int kg_prompt_feedback(const kg_prompts *p, const json_t *result, double reward, int turn, int turns_left,
                       char **out, kg_error *err)
{
    char *eval = NULL;
    int rc = kg_feedback_render(result, &eval, err);
    if (rc != KG_OK)
        return rc;
    char rs[32], ts[16], ls[16];
    snprintf(rs, sizeof rs, "%.4g", reward);
    snprintf(ts, sizeof ts, "%d", turn);
    snprintf(ls, sizeof ls, "%d", turns_left);
    const char *names[] = {"evaluation", "verdict", "reward", "turn", "turns_left"};
    const char *values[] = {eval, str(result, "verdict"), rs, ts, ls};
    *out = substitute(p->feedback, names, values, 5);
    free(eval);
    return *out ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
}

/* ---- context */

int kg_agent_context(const char *first_prompt, const kg_turn_view *turns, size_t n, int keep_best,
                     size_t max_chars, json_t **messages, json_t **kept_turns, kg_error *err)
{
    *messages = NULL;
    if (kept_turns)
        *kept_turns = NULL;
    char *keep = calloc(n ? n : 1, 1);
    if (!keep)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    if (keep_best > 0 && (size_t)keep_best < n) {
        /* The keep_best highest rewards; among equals the later turn, which
         * already saw the earlier one's feedback. */
        for (int k = 0; k < keep_best; k++) {
            size_t best = n;
            for (size_t i = 0; i < n; i++)
                if (!keep[i] && (best == n || !(turns[i].reward < turns[best].reward)))
                    best = i;
            keep[best] = 1;
        }
    } else {
        memset(keep, 1, n);
    }
    size_t total = strlen(first_prompt);
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            total += strlen(turns[i].reply ? turns[i].reply : "") + strlen(turns[i].feedback ? turns[i].feedback : "");
    /* Over budget: drop the oldest kept pair that is not the latest kept. */
    if (max_chars) {
        size_t last = n;
        for (size_t i = n; i-- > 0;)
            if (keep[i]) {
                last = i;
                break;
            }
        for (size_t i = 0; i < n && total > max_chars; i++) {
            if (!keep[i] || i == last)
                continue;
            keep[i] = 0;
            total -= strlen(turns[i].reply ? turns[i].reply : "") + strlen(turns[i].feedback ? turns[i].feedback : "");
        }
    }
    json_t *m = json_array(), *kt = json_array();
    json_array_append_new(m, json_pack("{s:s, s:s}", "role", "user", "content", first_prompt));
    for (size_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "assistant", "content",
                                           turns[i].reply ? turns[i].reply : ""));
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "user", "content",
                                           turns[i].feedback ? turns[i].feedback : ""));
        json_array_append_new(kt, json_integer(turns[i].turn));
    }
    free(keep);
    *messages = m;
    if (kept_turns)
        *kept_turns = kt;
    else
        json_decref(kt);
    return KG_OK;
}
