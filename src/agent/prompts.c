/*
 * prompts.c — the words the model reads: template files with {{name}}
 * placeholders, the evaluation (the result's feedback: one renderer,
 * src/eval/feedback.c, for training and rollouts alike), and the context
 * builder that decides which earlier turns stay.
 */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "util/json.h"
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
    if (kg_buf_printf(&path, "%s/%s", dir, name) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    size_t len = 0;
    int rc = KG_OK;
    if (!kg_file_exists(path.data) && !required)
        rc = (*out = kg_strdup("")) ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
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
 * user's template that mentions "{{" in code is not mangled.  NULL when memory ran out (never a prompt cut
 * short). */
static char *substitute(const char *tpl, const char *const *names, const char *const *values, size_t n)
{
    kg_buf b = {0};
    int ok = 1;
    const char *p = tpl;
    while (ok && *p) {
        const char *open = strstr(p, "{{");
        if (!open) {
            ok = kg_buf_puts(&b, p) == KG_OK;
            break;
        }
        ok = kg_buf_append(&b, p, (size_t)(open - p)) == KG_OK;
        const char *close = strstr(open + 2, "}}");
        size_t i = n;
        if (close)
            for (i = 0; i < n; i++)
                if (strlen(names[i]) == (size_t)(close - open - 2) && !strncmp(open + 2, names[i], strlen(names[i])))
                    break;
        if (i < n) {
            ok = ok && kg_buf_puts(&b, values[i] ? values[i] : "") == KG_OK;
            p = close + 2;
        } else {
            ok = ok && kg_buf_puts(&b, "{{") == KG_OK;
            p = open + 2;
        }
    }
    if (!ok) {
        kg_buf_free(&b);
        return NULL;
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

int kg_feedback_render(const json_t *result, char **out, kg_error *err)
{
    *out = NULL;
    if (!json_is_object(result))
        return kg_error_set(err, KG_ERR_INVALID, "no evaluation result to render");
    /* The result's own feedback is the text every client trains on (verl, KernelGYM's error_message): a rollout
     * shows the same.  A result without one (written by another tool) is rendered by the same renderer. */
    const char *fb = str(result, "feedback");
    *out = *fb ? kg_strdup(fb) : kg_eval_feedback(result, NULL);
    if (!*out)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
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
    /* The prompt (the task's source) and the replies are code: sent as they are or not at all (docs/style.md), so
     * text that is not UTF-8 is the input's error; feedback is kgym's (sanitized). */
    if (!kg_utf8_valid(first_prompt)) {
        free(keep);
        return kg_error_set(err, KG_ERR_INVALID, "the first prompt (the task's source) is not UTF-8");
    }
    for (size_t i = 0; i < n; i++)
        if (keep[i] && turns[i].reply && !kg_utf8_valid(turns[i].reply)) {
            free(keep);
            return kg_error_set(err, KG_ERR_INVALID, "the reply of turn %d is not UTF-8", turns[i].turn);
        }
    json_t *m = json_array(), *kt = json_array();
    int ok = m && kt && kg_json_push(m, json_pack("{s:s, s:s}", "role", "user", "content", first_prompt)) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        if (!keep[i])
            continue;
        ok = kg_json_push(m, json_pack("{s:s, s:s}", "role", "assistant", "content",
                                       turns[i].reply ? turns[i].reply : "")) == 0;
        ok = ok && kg_json_push(m, json_pack("{s:s, s:o}", "role", "user", "content",
                                             kg_json_text(turns[i].feedback ? turns[i].feedback : ""))) == 0;
        ok = ok && kg_json_push(kt, json_integer(turns[i].turn)) == 0;
    }
    free(keep);
    if (!ok) {
        json_decref(m);
        json_decref(kt);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory building the conversation");
    }
    *messages = m;
    if (kept_turns)
        *kept_turns = kt;
    else
        json_decref(kt);
    return KG_OK;
}
