/* curriculum.c — adaptive level mix ("Beyond TritonRL", docs/rl.md
 * §Curriculum): harder levels get a larger share of the batch as the model's
 * accuracy on the level below rises, by Beyond TritonRL's step rule
 * (extensions/curriculum.py) or a linear ramp over the rolling accuracy.  The
 * sampler is seeded and its whole state (config, windows, step histories,
 * shares, RNG words) round-trips through JSON so a training run can stop and
 * resume with the same draws. */
#include "kgym/rl.h"
#include "util/json.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_CURRICULUM_MAX_WINDOW 1000000
#define KG_CURRICULUM_MAX_STEPS 1000 /* step_window and min_steps */
#define KG_CURRICULUM_SCHEMA "kgym.curriculum/1"

struct kg_curriculum {
    kg_curriculum_config cfg;
    kg_rng rng;
    uint8_t *history[KG_CURRICULUM_MAX_LEVELS]; /* ring buffers of 0/1 */
    size_t head[KG_CURRICULUM_MAX_LEVELS];      /* index of the oldest entry */
    size_t count[KG_CURRICULUM_MAX_LEVELS];
    size_t hits[KG_CURRICULUM_MAX_LEVELS];      /* 1s in the window */
    /* step rule */
    double share[KG_CURRICULUM_MAX_LEVELS];     /* current share of levels 1.. */
    double *steps[KG_CURRICULUM_MAX_LEVELS];    /* ring of the last step_window
                                                 * step accuracies */
    size_t steps_seen[KG_CURRICULUM_MAX_LEVELS]; /* step accuracies ever */
    size_t step_hits[KG_CURRICULUM_MAX_LEVELS], step_count[KG_CURRICULUM_MAX_LEVELS];
};

void kg_curriculum_config_default(kg_curriculum_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_levels = 2;
    /* Beyond TritonRL extensions/config.py: curriculum_start_p 0.1,
     * curriculum_end_p 0.5, curriculum_trigger_threshold 0.4 */
    cfg->level[1] = (kg_curriculum_ramp){0.10, 0.50, 0.40};
    /* one Dr. Kernel training step: 16 prompts × 16 samples */
    cfg->window = 256;
    cfg->rule = KG_CURRICULUM_STEP;
    /* extensions/curriculum.py update_curriculum: +0.05 once the last 5
     * step accuracies (at least 5) average >= the trigger */
    cfg->step = 0.05;
    cfg->step_window = 5;
    cfg->min_steps = 5;
}

int kg_curriculum_config_check(const kg_curriculum_config *cfg, kg_error *err)
{
    if (!cfg)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum config is NULL");
    if (cfg->n_levels < 1 || cfg->n_levels > KG_CURRICULUM_MAX_LEVELS)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum needs 1 to %d levels, not %zu",
                            KG_CURRICULUM_MAX_LEVELS, cfg->n_levels);
    if (cfg->window < 1 || cfg->window > KG_CURRICULUM_MAX_WINDOW)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum window %zu is outside 1..%d",
                            cfg->window, KG_CURRICULUM_MAX_WINDOW);
    if ((int)cfg->rule < 0 || cfg->rule >= KG_CURRICULUM_RULE_COUNT)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum rule %d is unknown", (int)cfg->rule);
    if (!(cfg->step >= 0 && cfg->step <= 1))
        return kg_error_set(err, KG_ERR_INVALID, "curriculum step %g is outside [0, 1]",
                            cfg->step);
    if (cfg->step_window < 1 || cfg->step_window > KG_CURRICULUM_MAX_STEPS ||
        cfg->min_steps > KG_CURRICULUM_MAX_STEPS)
        return kg_error_set(err, KG_ERR_INVALID,
                            "curriculum step_window %zu must be 1..%d and min_steps %zu at most "
                            "%d", cfg->step_window, KG_CURRICULUM_MAX_STEPS, cfg->min_steps,
                            KG_CURRICULUM_MAX_STEPS);
    double most = 0.0;
    for (size_t k = 1; k < cfg->n_levels; k++) {
        const kg_curriculum_ramp *r = &cfg->level[k];
        if (!(r->start_share >= 0 && r->start_share <= 1) ||
            !(r->end_share >= 0 && r->end_share <= 1))
            return kg_error_set(err, KG_ERR_INVALID,
                                "level %zu: start and end shares must lie in [0, 1]", k);
        if (!(r->target_accuracy > 0 && r->target_accuracy <= 1))
            return kg_error_set(err, KG_ERR_INVALID,
                                "level %zu: target accuracy must lie in (0, 1]", k);
        most += fmax(r->start_share, r->end_share);
    }
    /* level 0 takes the remainder, which must never go negative */
    if (most > 1.0 + 1e-12)
        return kg_error_set(err, KG_ERR_INVALID,
                            "the shares of levels 1.. can reach %g > 1, leaving level 0 "
                            "a negative share", most);
    return KG_OK;
}

int kg_curriculum_schedule(const kg_curriculum_config *cfg, const double *accuracy,
                           double *shares_out, kg_error *err)
{
    int rc = kg_curriculum_config_check(cfg, err);
    if (rc)
        return rc;
    if (!accuracy || !shares_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_schedule: NULL argument");
    double rest = 1.0;
    for (size_t k = 1; k < cfg->n_levels; k++) {
        double acc = accuracy[k - 1];
        if (!(acc >= 0 && acc <= 1))
            return kg_error_set(err, KG_ERR_INVALID, "accuracy of level %zu is %g, not in [0, 1]",
                                k - 1, acc);
        const kg_curriculum_ramp *r = &cfg->level[k];
        double progress = fmin(acc / r->target_accuracy, 1.0);
        shares_out[k] = r->start_share + (r->end_share - r->start_share) * progress;
        rest -= shares_out[k];
    }
    shares_out[0] = fmax(rest, 0.0);
    return KG_OK;
}

static int allocate_history(kg_curriculum *cur, kg_error *err)
{
    for (size_t k = 0; k < cur->cfg.n_levels; k++) {
        cur->history[k] = calloc(cur->cfg.window, 1);
        cur->steps[k] = calloc(cur->cfg.step_window, sizeof *cur->steps[k]);
        if (!cur->history[k] || !cur->steps[k])
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory for a window of %zu",
                                cur->cfg.window);
        cur->share[k] = cur->cfg.level[k].start_share;
    }
    return KG_OK;
}

int kg_curriculum_create(const kg_curriculum_config *cfg, uint64_t seed, kg_curriculum **out,
                         kg_error *err)
{
    if (!out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_create: NULL output");
    *out = NULL;
    int rc = kg_curriculum_config_check(cfg, err);
    if (rc)
        return rc;
    kg_curriculum *cur = calloc(1, sizeof *cur);
    if (!cur)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory for a curriculum");
    cur->cfg = *cfg;
    kg_rng_seed(&cur->rng, seed);
    rc = allocate_history(cur, err);
    if (rc) {
        kg_curriculum_free(cur);
        return rc;
    }
    *out = cur;
    return KG_OK;
}

void kg_curriculum_free(kg_curriculum *cur)
{
    if (!cur)
        return;
    for (size_t k = 0; k < KG_CURRICULUM_MAX_LEVELS; k++) {
        free(cur->history[k]);
        free(cur->steps[k]);
    }
    free(cur);
}

const kg_curriculum_config *kg_curriculum_get_config(const kg_curriculum *cur)
{
    return cur ? &cur->cfg : NULL;
}

int kg_curriculum_record(kg_curriculum *cur, size_t level, int correct, kg_error *err)
{
    if (!cur)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum is NULL");
    if (level >= cur->cfg.n_levels)
        return kg_error_set(err, KG_ERR_INVALID, "level index %zu is not below %zu levels", level,
                            cur->cfg.n_levels);
    size_t w = cur->cfg.window;
    uint8_t bit = correct ? 1 : 0;
    if (cur->count[level] == w) {
        cur->hits[level] -= cur->history[level][cur->head[level]];
        cur->history[level][cur->head[level]] = bit;
        cur->head[level] = (cur->head[level] + 1) % w;
    } else {
        cur->history[level][(cur->head[level] + cur->count[level]) % w] = bit;
        cur->count[level]++;
    }
    cur->hits[level] += bit;
    cur->step_hits[level] += bit;
    cur->step_count[level]++;
    return KG_OK;
}

/* Appends a step accuracy to a level's ring of the last step_window. */
static void push_step(kg_curriculum *cur, size_t level, double accuracy)
{
    cur->steps[level][cur->steps_seen[level] % cur->cfg.step_window] = accuracy;
    cur->steps_seen[level]++;
}

/* Mean of the last step_window step accuracies (fewer if fewer exist). */
static double recent_step_mean(const kg_curriculum *cur, size_t level)
{
    size_t m = cur->steps_seen[level] < cur->cfg.step_window ? cur->steps_seen[level]
                                                             : cur->cfg.step_window;
    double sum = 0.0;
    for (size_t j = 0; j < m; j++)
        sum += cur->steps[level][j];
    return m ? sum / (double)m : 0.0;
}

int kg_curriculum_end_step(kg_curriculum *cur, kg_error *err)
{
    if (!cur)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum is NULL");
    const kg_curriculum_config *cfg = &cur->cfg;
    for (size_t k = 0; k < cfg->n_levels; k++) {
        if (cur->step_count[k])
            push_step(cur, k, (double)cur->step_hits[k] / (double)cur->step_count[k]);
        cur->step_hits[k] = cur->step_count[k] = 0;
    }
    /* Beyond TritonRL raises at every step while the condition holds, not
     * once per new accuracy */
    for (size_t k = 1; cfg->rule == KG_CURRICULUM_STEP && k < cfg->n_levels; k++) {
        const kg_curriculum_ramp *r = &cfg->level[k];
        if (cur->steps_seen[k - 1] >= cfg->min_steps && cur->steps_seen[k - 1] > 0 &&
            recent_step_mean(cur, k - 1) >= r->target_accuracy)
            cur->share[k] = fmin(cur->share[k] + cfg->step, r->end_share);
    }
    return KG_OK;
}

double kg_curriculum_accuracy(const kg_curriculum *cur, size_t level)
{
    if (!cur || level >= cur->cfg.n_levels)
        return NAN;
    return cur->count[level] ? (double)cur->hits[level] / (double)cur->count[level] : 0.0;
}

size_t kg_curriculum_observed(const kg_curriculum *cur, size_t level)
{
    return cur && level < cur->cfg.n_levels ? cur->count[level] : 0;
}

int kg_curriculum_shares(const kg_curriculum *cur, double *shares_out, kg_error *err)
{
    if (!cur || !shares_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_shares: NULL argument");
    if (cur->cfg.rule == KG_CURRICULUM_STEP) {
        double rest = 1.0;
        for (size_t k = 1; k < cur->cfg.n_levels; k++) {
            shares_out[k] = cur->share[k];
            rest -= cur->share[k];
        }
        shares_out[0] = rest > 0 ? rest : 0.0;
        return KG_OK;
    }
    double acc[KG_CURRICULUM_MAX_LEVELS];
    for (size_t k = 0; k < cur->cfg.n_levels; k++)
        acc[k] = kg_curriculum_accuracy(cur, k);
    return kg_curriculum_schedule(&cur->cfg, acc, shares_out, err);
}

int kg_curriculum_sample_level(kg_curriculum *cur, size_t *level_out, kg_error *err)
{
    double shares[KG_CURRICULUM_MAX_LEVELS];
    int rc = kg_curriculum_shares(cur, shares, err);
    if (rc)
        return rc;
    if (!level_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_sample_level: NULL output");
    double u = kg_rng_uniform(&cur->rng), cum = 0.0;
    size_t last_positive = 0;
    for (size_t k = 0; k < cur->cfg.n_levels; k++) {
        if (shares[k] > 0)
            last_positive = k;
        cum += shares[k];
        if (u < cum) {
            *level_out = k;
            return KG_OK;
        }
    }
    /* rounding left cum a hair below u: the draw belongs to the last level
     * that can be drawn at all */
    *level_out = last_positive;
    return KG_OK;
}

int kg_curriculum_sample_index(kg_curriculum *cur, size_t n, size_t *index_out, kg_error *err)
{
    if (!cur || !index_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_sample_index: NULL argument");
    if (n == 0)
        return kg_error_set(err, KG_ERR_INVALID, "cannot pick an index among 0 items");
    size_t i = (size_t)(kg_rng_uniform(&cur->rng) * (double)n);
    *index_out = i < n ? i : n - 1;
    return KG_OK;
}

/* ---------------------------------------------------------- persistence */

static json_t *config_to_json(const kg_curriculum_config *cfg)
{
    json_t *levels = json_array();
    int ok = levels != NULL;
    for (size_t k = 1; ok && k < cfg->n_levels; k++)
        ok = kg_json_push(levels, json_pack("{s:f, s:f, s:f}", "start", cfg->level[k].start_share, "end",
                                            cfg->level[k].end_share, "target",
                                            cfg->level[k].target_accuracy)) == 0;
    if (!ok) {
        json_decref(levels);
        return NULL;
    }
    return json_pack("{s:I, s:o, s:s, s:f, s:I, s:I}", "window", (json_int_t)cfg->window,
                     "levels", levels, "rule", kg_rl_option_name(KG_OPT_CURRICULUM_RULE,
                                                                 (int)cfg->rule),
                     "step", cfg->step, "step_window", (json_int_t)cfg->step_window,
                     "min_steps", (json_int_t)cfg->min_steps);
}

/* An optional non-negative integer member of a config object. */
static int size_member(json_t *root, const char *name, size_t *out, kg_error *err)
{
    json_t *v = json_object_get(root, name);
    if (!v)
        return KG_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return kg_error_set(err, KG_ERR_INVALID,
                            "curriculum \"%s\" must be a non-negative integer", name);
    *out = (size_t)json_integer_value(v);
    return KG_OK;
}

static int config_from_value(json_t *root, kg_curriculum_config *cfg, kg_error *err)
{
    if (!json_is_object(root))
        return kg_error_set(err, KG_ERR_INVALID, "curriculum config must be a JSON object");
    kg_curriculum_config_default(cfg);
    json_t *window = json_object_get(root, "window");
    if (window) {
        if (!json_is_integer(window) || json_integer_value(window) < 1)
            return kg_error_set(err, KG_ERR_INVALID,
                                "curriculum \"window\" must be a positive integer");
        cfg->window = (size_t)json_integer_value(window);
    }
    json_t *rule = json_object_get(root, "rule"), *step = json_object_get(root, "step");
    if (rule) {
        int v;
        if (kg_rl_option_parse(KG_OPT_CURRICULUM_RULE, json_string_value(rule), &v, err))
            return KG_ERR_INVALID;
        cfg->rule = (kg_curriculum_rule)v;
    }
    if (step) {
        if (!json_is_number(step))
            return kg_error_set(err, KG_ERR_INVALID, "curriculum \"step\" must be a number");
        cfg->step = json_number_value(step);
    }
    if (size_member(root, "step_window", &cfg->step_window, err) ||
        size_member(root, "min_steps", &cfg->min_steps, err))
        return KG_ERR_INVALID;
    json_t *levels = json_object_get(root, "levels");
    if (levels) {
        if (!json_is_array(levels) || json_array_size(levels) >= KG_CURRICULUM_MAX_LEVELS)
            return kg_error_set(err, KG_ERR_INVALID,
                                "curriculum \"levels\" must be an array of at most %d ramps",
                                KG_CURRICULUM_MAX_LEVELS - 1);
        cfg->n_levels = json_array_size(levels) + 1;
        memset(cfg->level, 0, sizeof cfg->level);
        for (size_t i = 0; i < json_array_size(levels); i++) {
            json_t *r = json_array_get(levels, i);
            json_t *s = json_object_get(r, "start"), *e = json_object_get(r, "end"),
                   *t = json_object_get(r, "target");
            if (!json_is_number(s) || !json_is_number(e) || !json_is_number(t))
                return kg_error_set(err, KG_ERR_INVALID,
                                    "curriculum levels[%zu] needs numbers \"start\", \"end\" "
                                    "and \"target\"", i);
            cfg->level[i + 1] = (kg_curriculum_ramp){json_number_value(s), json_number_value(e),
                                                     json_number_value(t)};
        }
    }
    return kg_curriculum_config_check(cfg, err);
}

int kg_curriculum_config_from_json(const char *json, kg_curriculum_config *cfg, kg_error *err)
{
    if (!json || !cfg)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_config_from_json: NULL argument");
    json_error_t jerr;
    json_t *root = json_loads(json, 0, &jerr);
    if (!root)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum config is not JSON: %s (line %d)",
                            jerr.text, jerr.line);
    int rc = config_from_value(root, cfg, err);
    json_decref(root);
    return rc;
}

int kg_curriculum_save(const kg_curriculum *cur, char **json_out, kg_error *err)
{
    if (!cur || !json_out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_save: NULL argument");
    /* RNG words as hex strings: JSON integers are signed 64-bit at best.
     * Every step is checked (util/json.h): a state missing one element would
     * load misaligned; json_pack below fails on any NULL part. */
    json_t *rng = json_array();
    int ok = rng != NULL;
    for (int i = 0; ok && i < 4; i++) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, cur->rng.s[i]);
        ok = kg_json_push(rng, json_string(hex)) == 0;
    }
    json_t *history = json_array();
    ok = ok && history;
    for (size_t k = 0; ok && k < cur->cfg.n_levels; k++) {
        json_t *h = json_array();
        for (size_t j = 0; h && j < cur->count[k]; j++)
            if (kg_json_push(h, json_integer(cur->history[k][(cur->head[k] + j) % cur->cfg.window])) != 0) {
                json_decref(h);
                h = NULL;
            }
        ok = kg_json_push(history, h) == 0;
    }
    /* step rule: current shares, step accuracies (oldest first), the count
     * ever seen, and the open step's outcomes */
    json_t *shares = json_array(), *steps = json_array(), *seen = json_array(),
           *open = json_array();
    ok = ok && shares && steps && seen && open;
    for (size_t k = 0; ok && k < cur->cfg.n_levels; k++) {
        ok = kg_json_push(shares, json_real(cur->share[k])) == 0;
        json_t *h = json_array();
        size_t m = cur->steps_seen[k] < cur->cfg.step_window ? cur->steps_seen[k]
                                                             : cur->cfg.step_window;
        for (size_t j = 0; h && j < m; j++)
            if (kg_json_push(h, json_real(cur->steps[k][(cur->steps_seen[k] - m + j) % cur->cfg.step_window])) !=
                0) {
                json_decref(h);
                h = NULL;
            }
        ok = ok && kg_json_push(steps, h) == 0;
        ok = ok && kg_json_push(seen, json_integer((json_int_t)cur->steps_seen[k])) == 0;
        ok = ok && kg_json_push(open, json_pack("[I, I]", (json_int_t)cur->step_hits[k],
                                                (json_int_t)cur->step_count[k])) == 0;
    }
    if (!ok) {
        json_decref(rng);
        json_decref(history);
        json_decref(shares);
        json_decref(steps);
        json_decref(seen);
        json_decref(open);
        return kg_error_set(err, KG_ERR_NOMEM, "could not serialise the curriculum");
    }
    json_t *root = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "schema",
                             KG_CURRICULUM_SCHEMA, "config", config_to_json(&cur->cfg), "rng",
                             rng, "history", history, "shares", shares, "step_accuracy", steps,
                             "steps_seen", seen, "open_step", open);
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    if (!text)
        return kg_error_set(err, KG_ERR_NOMEM, "could not serialise the curriculum");
    *json_out = text;
    return KG_OK;
}

/* The step rule's part of a saved state; absent in states saved before it,
 * which then start from the start shares. */
static int load_steps(json_t *root, kg_curriculum *cur, kg_error *err)
{
    json_t *shares = json_object_get(root, "shares"), *steps = json_object_get(root, "step_accuracy"),
           *seen = json_object_get(root, "steps_seen"), *open = json_object_get(root, "open_step");
    if (!shares && !steps && !seen && !open)
        return KG_OK;
    size_t n = cur->cfg.n_levels;
    if (json_array_size(shares) != n || json_array_size(steps) != n ||
        json_array_size(seen) != n || json_array_size(open) != n)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum \"shares\", \"step_accuracy\", "
                            "\"steps_seen\" and \"open_step\" need one entry per level (%zu)", n);
    for (size_t k = 0; k < n; k++) {
        json_t *sh = json_array_get(shares, k), *h = json_array_get(steps, k),
               *sn = json_array_get(seen, k), *op = json_array_get(open, k);
        json_int_t hits, count;
        if (!json_is_number(sh) || !(json_number_value(sh) >= 0 && json_number_value(sh) <= 1) ||
            !json_is_array(h) || json_array_size(h) > cur->cfg.step_window ||
            !json_is_integer(sn) || json_integer_value(sn) < (json_int_t)json_array_size(h) ||
            json_unpack(op, "[II]", &hits, &count) || hits < 0 || count < hits)
            return kg_error_set(err, KG_ERR_INVALID, "curriculum step state of level %zu is "
                                "malformed", k);
        cur->share[k] = json_number_value(sh);
        cur->steps_seen[k] = 0;
        for (size_t j = 0; j < json_array_size(h); j++) {
            double a = json_number_value(json_array_get(h, j));
            if (!json_is_number(json_array_get(h, j)) || !(a >= 0 && a <= 1))
                return kg_error_set(err, KG_ERR_INVALID,
                                    "curriculum step_accuracy[%zu][%zu] is not in [0, 1]", k, j);
            push_step(cur, k, a);
        }
        /* the ring holds the last entries in order; the total count may be
         * larger than what the ring remembers */
        size_t total = (size_t)json_integer_value(sn), m = cur->steps_seen[k];
        double ring[KG_CURRICULUM_MAX_STEPS];
        for (size_t j = 0; j < m; j++)
            ring[j] = cur->steps[k][j];
        cur->steps_seen[k] = total - m;
        for (size_t j = 0; j < m; j++)
            push_step(cur, k, ring[j]);
        cur->step_hits[k] = (size_t)hits;
        cur->step_count[k] = (size_t)count;
    }
    return KG_OK;
}

static int load_value(json_t *root, kg_curriculum **out, kg_error *err)
{
    json_t *schema = json_object_get(root, "schema");
    if (!json_is_string(schema) || strcmp(json_string_value(schema), KG_CURRICULUM_SCHEMA) != 0)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum state lacks \"schema\": \"%s\"",
                            KG_CURRICULUM_SCHEMA);
    kg_curriculum_config cfg;
    json_t *config = json_object_get(root, "config");
    int rc = config_from_value(config, &cfg, err);
    if (rc)
        return rc;
    /* a state saved before the step rule existed ran the linear rule */
    if (!json_object_get(config, "rule"))
        cfg.rule = KG_CURRICULUM_LINEAR;
    json_t *rng = json_object_get(root, "rng"), *history = json_object_get(root, "history");
    if (!json_is_array(rng) || json_array_size(rng) != 4)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum \"rng\" must hold 4 hex words");
    if (!json_is_array(history) || json_array_size(history) != cfg.n_levels)
        return kg_error_set(err, KG_ERR_INVALID,
                            "curriculum \"history\" must hold one array per level (%zu)",
                            cfg.n_levels);
    kg_curriculum *cur;
    rc = kg_curriculum_create(&cfg, 0, &cur, err);
    if (rc)
        return rc;
    for (int i = 0; i < 4; i++) {
        const char *hex = json_string_value(json_array_get(rng, (size_t)i));
        char *end = NULL;
        if (hex && *hex)
            cur->rng.s[i] = strtoull(hex, &end, 16);
        if (!hex || !*hex || *end || strlen(hex) > 16) {
            kg_curriculum_free(cur);
            return kg_error_set(err, KG_ERR_INVALID, "curriculum rng[%d] is not a hex word", i);
        }
    }
    for (size_t k = 0; k < cfg.n_levels; k++) {
        json_t *h = json_array_get(history, k);
        size_t len = json_array_size(h);
        if (!json_is_array(h) || len > cfg.window) {
            kg_curriculum_free(cur);
            return kg_error_set(err, KG_ERR_INVALID,
                                "curriculum history[%zu] must be an array of at most %zu "
                                "outcomes", k, cfg.window);
        }
        for (size_t j = 0; j < len; j++) {
            json_t *v = json_array_get(h, j);
            if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1)) {
                kg_curriculum_free(cur);
                return kg_error_set(err, KG_ERR_INVALID,
                                    "curriculum history[%zu][%zu] must be 0 or 1", k, j);
            }
            kg_curriculum_record(cur, k, (int)json_integer_value(v), NULL);
        }
        cur->step_hits[k] = cur->step_count[k] = 0;
    }
    rc = load_steps(root, cur, err);
    if (rc) {
        kg_curriculum_free(cur);
        return rc;
    }
    *out = cur;
    return KG_OK;
}

int kg_curriculum_load(const char *json, kg_curriculum **out, kg_error *err)
{
    if (!json || !out)
        return kg_error_set(err, KG_ERR_INVALID, "kg_curriculum_load: NULL argument");
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loads(json, 0, &jerr);
    if (!root)
        return kg_error_set(err, KG_ERR_INVALID, "curriculum state is not JSON: %s (line %d)",
                            jerr.text, jerr.line);
    int rc = json_is_object(root) ? load_value(root, out, err)
                                  : kg_error_set(err, KG_ERR_INVALID,
                                                 "curriculum state must be a JSON object");
    json_decref(root);
    return rc;
}
