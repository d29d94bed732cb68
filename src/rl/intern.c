/* intern.c — dense integer ids for the string keys of JSONL rows (prompts and
 * (prompt, sample) pairs), so that the numeric C API can group them. */
#include "rl_jsonl.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char **keys;
    int64_t *ids;
    size_t cap, count;
} intern_table;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int table_init(intern_table *t, size_t expected)
{
    t->cap = 16;
    while (t->cap < 2 * expected + 1)
        t->cap *= 2;
    t->count = 0;
    t->keys = calloc(t->cap, sizeof *t->keys);
    t->ids = calloc(t->cap, sizeof *t->ids);
    return t->keys && t->ids ? KG_OK : KG_ERR_NOMEM;
}

static void table_free(intern_table *t)
{
    for (size_t i = 0; t->keys && i < t->cap; i++)
        free(t->keys[i]);
    free(t->keys);
    free(t->ids);
}

/* The table never fills: it is sized for twice the number of rows. */
static int table_id(intern_table *t, const char *key, int64_t *id)
{
    size_t i = hash(key) & (t->cap - 1);
    while (t->keys[i] && strcmp(t->keys[i], key) != 0)
        i = (i + 1) & (t->cap - 1);
    if (!t->keys[i]) {
        t->keys[i] = strdup(key);
        if (!t->keys[i])
            return KG_ERR_NOMEM;
        t->ids[i] = (int64_t)t->count++;
    }
    *id = t->ids[i];
    return KG_OK;
}

int kg_rl_rows_ids(const kg_rl_rows *rows, int need_prompt, int64_t *prompt_id,
                   int64_t *sample_id, int64_t *trajectory_id, kg_error *err)
{
    intern_table prompts, samples, trajectories;
    memset(&prompts, 0, sizeof prompts);
    memset(&samples, 0, sizeof samples);
    memset(&trajectories, 0, sizeof trajectories);
    int rc = KG_OK;
    char *key = NULL;
    if (table_init(&prompts, rows->n) || table_init(&samples, rows->n) ||
        table_init(&trajectories, rows->n)) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory for %zu ids", rows->n);
        goto done;
    }
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kg_rl_row *row = &rows->rows[i];
        char line_key[32];
        const char *prompt = row->prompt;
        if (!prompt) {
            if (need_prompt) {
                char where[256];
                kg_rl_row_describe(row, where, sizeof where);
                rc = kg_error_set(err, KG_ERR_INVALID,
                                  "%s: no \"prompt\", \"task\" or result.task.id to group by",
                                  where);
                break;
            }
            /* "\x1f" cannot come from a well-formed id: no clash with real ones */
            snprintf(line_key, sizeof line_key, "\x1f#%zu", row->line);
            prompt = line_key;
        }
        size_t len = strlen(prompt) + strlen(row->sample) + 2;
        free(key);
        key = malloc(len);
        if (!key) {
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory for ids");
            break;
        }
        snprintf(key, len, "%s\x1f%s", prompt, row->sample);
        int64_t dummy;
        if (table_id(&prompts, prompt, prompt_id ? &prompt_id[i] : &dummy) ||
            table_id(&samples, row->sample, sample_id ? &sample_id[i] : &dummy) ||
            table_id(&trajectories, key, trajectory_id ? &trajectory_id[i] : &dummy))
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory for ids");
    }
done:
    free(key);
    table_free(&prompts);
    table_free(&samples);
    table_free(&trajectories);
    return rc;
}
