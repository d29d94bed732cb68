/*
 * cmd_rollout.c — `kgym rollout`: multi-turn rollouts of a model served over
 * an OpenAI-compatible endpoint (src/agent), evaluated in this process or by
 * `kgym serve`, written as trajectory JSONL plus a metrics report.
 * Exit status: 0 every trajectory finished; 1 some did not (model or
 * evaluation errors: rerun with --resume) or kgym could not run; 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "agent/agent.h"
#include "task/task.h"
#include "util/json.h"
#include "util/util.h"

/* The run's reports (metrics, summary, plot) are for people and dashboards to read, not secrets: the usual
 * 0644 (less the umask), where kg_file_write's private 0600 left them unreadable to a team's other users. */
#define REPORT_MODE 0644

enum {
    OPT_HELP = 3000, OPT_TASKS, OPT_TASK, OPT_LEVEL, OPT_IDS, OPT_OUT, OPT_RESUME, OPT_URL, OPT_MODEL, OPT_KEY,
    OPT_TEMP, OPT_TOP_P, OPT_MAX_TOKENS, OPT_STOP, OPT_CONC, OPT_RETRIES, OPT_BACKOFF, OPT_BACKOFF_MAX,
    OPT_REQ_TIMEOUT, OPT_SAMPLES, OPT_TURNS, OPT_KEEP_BEST, OPT_MAX_CONTEXT, OPT_STOP_CORRECT, OPT_PROMPTS,
    OPT_FN, OPT_SET, OPT_ESTIMATOR, OPT_SINGLETON, OPT_GAMMA, OPT_RL_SEED, OPT_JOBS, OPT_SERVER, OPT_PRICE_IN,
    OPT_PRICE_OUT, OPT_NO_PROGRESS, OPT_REPORT_ONLY, OPT_MASK_VOID, OPT_SERVER_TOKEN, OPT_REEVAL
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kgym rollout --url URL --model NAME --out RUN.jsonl TASKS [options]\n\n"
            "Multi-turn rollouts: for each task, N samples x up to T turns of \"write -> evaluate ->\n"
            "feedback -> improve\" against an OpenAI-compatible chat-completions server.  Writes one\n"
            "record per turn to RUN.jsonl (docs/agent.md), then advantages, PRS decisions, best-of-turns,\n"
            "and a report: RUN.jsonl.metrics.json, RUN.jsonl.svg, RUN.jsonl.summary.json.\n\n"
            "Tasks (repeatable, combined):\n"
            "  --tasks PATH        a folder of task .py files, a task .py, or a JSONL of {\"id\",\"path\"}\n"
            "  --task SPEC         one task: a path or a KernelBench id (level1/19)\n"
            "  --level N [--ids 19,20]  KernelBench level N (all problems, or these ids); needs --kernelbench\n"
            "Model server:\n"
            "  --url URL           base URL (http://host:8000/v1) or the full .../chat/completions URL\n"
            "  --model NAME        model name sent to the server\n"
            "  --api-key KEY       bearer token (default: $KGYM_API_KEY, then $OPENAI_API_KEY)\n"
            "  --temperature X --top-p X --max-tokens N   sampling (1.0, 0.95, 8192; < 0 = not sent)\n"
            "  --stop S            stop string (repeatable)\n"
            "  --concurrency N     requests in flight (8)\n"
            "  --retries N         extra attempts on 429, 5xx, timeouts, malformed answers (5)\n"
            "  --backoff S --backoff-max S   backoff base·2^(attempt-1), capped (1, 60); Retry-After wins\n"
            "  --request-timeout S per attempt (600)\n"
            "  --price-in X --price-out X    USD per million prompt / completion tokens (cost report)\n"
            "Turns:\n"
            "  --samples N         trajectories per task (1)\n"
            "  --turns T           turns per trajectory (3)\n"
            "  --stop-on-correct   end a trajectory at its first correct turn\n"
            "  --keep-best K       test-time scaling: the context holds only the K best earlier turns by reward\n"
            "  --max-context-chars N   drop middle turns (oldest first) beyond this; the task stays (0 = off)\n"
            "  --prompts DIR       template folder (first_turn.md, feedback.md, example.md; default prompts/)\n"
            "Rewards and training fields:\n"
            "  --fn NAME           reward: drkernel (default), staged, tritonrl, speedup; --set NAME=VALUE\n"
            "  --estimator E       grpo, rloo, trloo (default); --singleton return|zero; --gamma G\n"
            "  --rl-seed N         seed of the PRS draws (1)\n"
            "  --mask-void-turns   mask a turn scoring <= 0 after an earlier turn scored > 0 (Dr. Kernel)\n"
            "Evaluation:\n"
            "  --jobs N            evaluations in parallel (2; evaluating here on a GPU, 6)\n"
            "  --reeval-above S    evaluate a kernel once more when its speedup is above S and keep the\n"
            "                      second result (Dr. Kernel, S = 3; default 3; 0 = never); the record's\n"
            "                      \"reevaluated_from\" holds the discarded speedup\n"
            "  --server URL        evaluate through `kgym serve` (POST URL/evaluate) instead of in-process\n"
            "  --server-token T    the service's bearer token (default: $KGYM_TOKEN)\n"
            "Run:\n"
            "  --out FILE          trajectory JSONL (required); FILE.replies.jsonl caches model replies\n"
            "  --resume            continue FILE: finished turns are kept, cached replies are not re-asked\n"
            "  --report-only       only (re)compute the report of FILE\n"
            "  --no-progress       no progress bar\n"
            "  --json              print the summary as JSON\n\n%s",
            kg_cli_eval_help);
}

typedef struct {
    kg_task *v;
    size_t n, cap;
} task_list;

static int add_task(task_list *l, const char *kb, const char *spec, kg_error *err)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].path, spec) || !strcmp(l->v[i].id, spec))
            return KG_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        kg_task *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        l->v = p;
        l->cap = cap;
    }
    memset(&l->v[l->n], 0, sizeof l->v[l->n]);
    int rc = kg_task_resolve(kb, spec, &l->v[l->n], err);
    if (rc != KG_OK)
        return rc;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].id, l->v[l->n].id)) {
            /* Ids key trajectories: the same file twice is one task, two
             * files under one id would mix their records. */
            int same = !strcmp(l->v[i].hash, l->v[l->n].hash);
            rc = same ? KG_OK
                      : kg_error_set(err, KG_ERR_INVALID,
                                     "%s and %s share the task id \"%s\": list them in a JSONL with distinct \"id\"s",
                                     l->v[i].path, l->v[l->n].path, l->v[i].id);
            kg_task_free(&l->v[l->n]);
            return rc;
        }
    l->n++;
    return KG_OK;
}

static int name_cmp(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    long nx = strtol(x, NULL, 10), ny = strtol(y, NULL, 10);
    if (nx != ny)
        return (nx > ny) - (nx < ny);
    return strcmp(x, y);
}

static int add_folder(task_list *l, const char *kb, const char *dir, kg_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || e->d_name[0] == '_' || len < 4 || strcmp(e->d_name + len - 3, ".py"))
            continue;
        char **p = realloc(names, (n + 1) * sizeof *p);
        if (!p)
            break;
        names = p;
        names[n++] = kg_strdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, name_cmp);
    int rc = KG_OK;
    for (size_t i = 0; i < n; i++) {
        kg_buf p = {0};
        if (rc == KG_OK && kg_buf_printf(&p, "%s/%s", dir, names[i]) != KG_OK)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        if (rc == KG_OK)
            rc = add_task(l, kb, p.data, err);
        kg_buf_free(&p);
        free(names[i]);
    }
    free(names);
    if (rc == KG_OK && n == 0)
        rc = kg_error_set(err, KG_ERR_INVALID, "%s holds no task .py files", dir);
    return rc;
}

static int add_jsonl(task_list *l, const char *kb, const char *path, kg_error *err)
{
    char *data = NULL;
    size_t len = 0;
    int rc = kg_file_read(path, 64u << 20, &data, &len, err);
    if (rc != KG_OK)
        return rc;
    char *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r(data, "\n", &save); line && rc == KG_OK; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        while (*line == ' ' || *line == '\t' || *line == '\r')
            line++;
        if (!*line || *line == '#')
            continue;
        json_t *o = json_loads(line, 0, NULL);
        const char *p = json_string_value(json_object_get(o, "path"));
        const char *id = json_string_value(json_object_get(o, "id"));
        if (!p && !id) {
            rc = kg_error_set(err, KG_ERR_INVALID, "%s line %d: needs \"path\" or a KernelBench \"id\"", path, lineno);
        } else if (p) {
            kg_buf full = {0};
            const char *slash = strrchr(path, '/');
            int named = p[0] != '/' && !kg_file_exists(p) && slash
                            ? kg_buf_printf(&full, "%.*s/%s", (int)(slash - path), path, p) == KG_OK
                            : kg_buf_puts(&full, p) == KG_OK;
            size_t before = l->n;
            rc = named ? add_task(l, kb, full.data, err) : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
            if (rc == KG_OK && id && l->n > before && strcmp(l->v[l->n - 1].id, id)) {
                /* The JSONL's id names the task in the records; it must be unique. */
                for (size_t i = 0; i + 1 < l->n && rc == KG_OK; i++)
                    if (!strcmp(l->v[i].id, id))
                        rc = kg_error_set(err, KG_ERR_INVALID, "%s line %d: task id \"%s\" is used twice", path,
                                          lineno, id);
                if (rc == KG_OK) {
                    free(l->v[l->n - 1].id);
                    l->v[l->n - 1].id = kg_strdup(id);
                }
            } else if (rc == KG_OK && id && l->n == before) {
                rc = kg_error_set(err, KG_ERR_INVALID, "%s line %d: %s is listed twice", path, lineno, p);
            }
            kg_buf_free(&full);
        } else {
            rc = add_task(l, kb, id, err);
        }
        json_decref(o);
    }
    free(data);
    return rc;
}

static int add_tasks_arg(task_list *l, const char *kb, const char *arg, kg_error *err)
{
    size_t n = strlen(arg);
    if (kg_dir_exists(arg))
        return add_folder(l, kb, arg, err);
    if (n > 6 && !strcmp(arg + n - 6, ".jsonl"))
        return add_jsonl(l, kb, arg, err);
    return add_task(l, kb, arg, err);
}

static int add_level(task_list *l, const char *kb, int level, const char *ids, kg_error *err)
{
    if (!kb)
        kb = getenv("KGYM_KERNELBENCH");
    if (!kb)
        return kg_error_set(err, KG_ERR_INVALID, "--level needs --kernelbench DIR (or $KGYM_KERNELBENCH)");
    if (!ids) {
        kg_buf d = {0};
        int rc = kg_buf_printf(&d, "%s/level%d", kb, level) == KG_OK ? add_folder(l, kb, d.data, err)
                                                                      : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        kg_buf_free(&d);
        return rc;
    }
    char *copy = kg_strdup(ids), *save = NULL;
    int rc = KG_OK;
    for (char *t = strtok_r(copy, ",", &save); t && rc == KG_OK; t = strtok_r(NULL, ",", &save)) {
        kg_buf spec = {0};
        rc = kg_buf_printf(&spec, "level%d/%s", level, t) == KG_OK ? add_task(l, kb, spec.data, err)
                                                                   : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        kg_buf_free(&spec);
    }
    free(copy);
    return rc;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

static int read_records(const char *path, json_t **out, kg_error *err)
{
    *out = json_array();
    if (!*out)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    char *data = NULL;
    size_t len = 0;
    int rc = kg_file_read(path, 0, &data, &len, err);
    if (rc != KG_OK)
        return rc;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        if (!json_is_object(o))
            json_decref(o);
        else if (kg_json_push(*out, o) != 0)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory reading %s", path);
    }
    free(data);
    return rc;
}

/* Metrics, plot and summary of a finished (or interrupted) run. */
static int report(const char *out_path, const kg_rollout_stats *st, int json_out, kg_error *err)
{
    json_t *records = NULL;
    int rc = read_records(out_path, &records, err);
    if (rc != KG_OK) {
        json_decref(records);
        return rc;
    }
    kg_metrics_report m;
    memset(&m, 0, sizeof m);
    char *table = NULL, *mjson = NULL, *svg = NULL;
    if ((rc = kg_agent_metrics(records, &m, err)) != KG_OK)
        goto done;
    if ((rc = kg_metrics_table(&m, &table, err)) != KG_OK || (rc = kg_metrics_json(&m, &mjson, err)) != KG_OK ||
        (rc = kg_metrics_svg(&m, &svg, err)) != KG_OK)
        goto done;
    kg_buf p = {0};
    rc = kg_buf_printf(&p, "%s.metrics.json", out_path) == KG_OK
             ? kg_file_write_mode(p.data, mjson, strlen(mjson), REPORT_MODE, err)
             : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    kg_buf_free(&p);
    if (rc == KG_OK && kg_buf_printf(&p, "%s.svg", out_path) != KG_OK)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    if (rc == KG_OK)
        rc = kg_file_write_mode(p.data, svg, strlen(svg), REPORT_MODE, err);
    kg_buf_free(&p);
    if (rc != KG_OK)
        goto done;
    /* Token and cost totals from the records, so a resumed run counts all. */
    long pt = 0, ct = 0;
    double cost = 0;
    size_t i, best_correct = 0, trajs = 0;
    json_t *rec;
    json_array_foreach(records, i, rec) {
        json_t *u = json_object_get(rec, "usage");
        pt += (long)json_integer_value(json_object_get(u, "prompt_tokens"));
        ct += (long)json_integer_value(json_object_get(u, "completion_tokens"));
        cost += json_number_value(json_object_get(rec, "cost_usd"));
        if (json_is_true(json_object_get(rec, "best"))) {
            trajs++;
            kg_eval_outcome o;
            if (kg_agent_outcome(json_object_get(rec, "result"), &o, NULL) == KG_OK && kg_outcome_is_correct(&o))
                best_correct++;
        }
    }
    json_t *sum = json_pack("{s:s, s:I, s:I, s:I, s:f, s:I, s:I}", "run", out_path, "records",
                            (json_int_t)json_array_size(records), "prompt_tokens", (json_int_t)pt,
                            "completion_tokens", (json_int_t)ct, "cost_usd", cost, "trajectories",
                            (json_int_t)trajs, "best_of_turns_correct", (json_int_t)best_correct);
    int built = sum != NULL;
    if (st) {
        built = built && kg_json_set(sum, "this_run",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "turns_done", (json_int_t)st->turns_done,
                                      "turns_resumed", (json_int_t)st->turns_resumed, "replies_cached",
                                      (json_int_t)st->replies_cached, "model_errors", (json_int_t)st->model_errors,
                                      "eval_errors", (json_int_t)st->eval_errors, "chat_attempts",
                                      (json_int_t)st->chat_attempts, "trajectories_incomplete",
                                      (json_int_t)st->trajectories_incomplete)) == 0;
    }
    /* mjson is the metrics kgym itself serialised: NULL here is memory */
    built = built && kg_json_set(sum, "metrics", json_loads(mjson, 0, NULL)) == 0;
    built = built && kg_buf_printf(&p, "%s.summary.json", out_path) == KG_OK;
    char *s = built ? json_dumps(sum, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    rc = s ? kg_file_write_mode(p.data, s, strlen(s), REPORT_MODE, err)
           : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    kg_buf_free(&p);
    if (json_out) {
        if (s)
            puts(s);
    } else {
        fputs(table, stdout);
        printf("\n%zu records, %zu trajectories; best-of-turns correct %zu/%zu\n", json_array_size(records), trajs,
               best_correct, trajs);
        printf("tokens: %ld prompt + %ld completion; cost $%.4f\n", pt, ct, cost);
        if (st)
            printf("this run: %zu turns evaluated, %zu resumed, %zu replies from cache, %zu chat attempts, "
                   "%zu model errors, %zu evaluation errors, %zu trajectories incomplete\n",
                   st->turns_done, st->turns_resumed, st->replies_cached, st->chat_attempts, st->model_errors,
                   st->eval_errors, st->trajectories_incomplete);
        printf("report: %s.metrics.json, %s.svg, %s.summary.json\n", out_path, out_path, out_path);
    }
    free(s);
    json_decref(sum);
done:
    kg_metrics_report_free(&m);
    free(table);
    free(mjson);
    free(svg);
    json_decref(records);
    return rc;
}

int kg_cli_rollout(int argc, char **argv)
{
    static const struct option own[] = {
        {"help", no_argument, NULL, OPT_HELP}, {"tasks", required_argument, NULL, OPT_TASKS},
        {"task", required_argument, NULL, OPT_TASK}, {"level", required_argument, NULL, OPT_LEVEL},
        {"ids", required_argument, NULL, OPT_IDS}, {"out", required_argument, NULL, OPT_OUT},
        {"resume", no_argument, NULL, OPT_RESUME}, {"url", required_argument, NULL, OPT_URL},
        {"model", required_argument, NULL, OPT_MODEL}, {"api-key", required_argument, NULL, OPT_KEY},
        {"temperature", required_argument, NULL, OPT_TEMP}, {"top-p", required_argument, NULL, OPT_TOP_P},
        {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS}, {"stop", required_argument, NULL, OPT_STOP},
        {"concurrency", required_argument, NULL, OPT_CONC}, {"retries", required_argument, NULL, OPT_RETRIES},
        {"backoff", required_argument, NULL, OPT_BACKOFF}, {"backoff-max", required_argument, NULL, OPT_BACKOFF_MAX},
        {"request-timeout", required_argument, NULL, OPT_REQ_TIMEOUT},
        {"samples", required_argument, NULL, OPT_SAMPLES}, {"turns", required_argument, NULL, OPT_TURNS},
        {"keep-best", required_argument, NULL, OPT_KEEP_BEST},
        {"max-context-chars", required_argument, NULL, OPT_MAX_CONTEXT},
        {"stop-on-correct", no_argument, NULL, OPT_STOP_CORRECT}, {"prompts", required_argument, NULL, OPT_PROMPTS},
        {"fn", required_argument, NULL, OPT_FN}, {"set", required_argument, NULL, OPT_SET},
        {"estimator", required_argument, NULL, OPT_ESTIMATOR}, {"singleton", required_argument, NULL, OPT_SINGLETON},
        {"gamma", required_argument, NULL, OPT_GAMMA}, {"rl-seed", required_argument, NULL, OPT_RL_SEED},
        {"jobs", required_argument, NULL, OPT_JOBS}, {"server", required_argument, NULL, OPT_SERVER},
        {"price-in", required_argument, NULL, OPT_PRICE_IN}, {"price-out", required_argument, NULL, OPT_PRICE_OUT},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS}, {"report-only", no_argument, NULL, OPT_REPORT_ONLY},
        {"mask-void-turns", no_argument, NULL, OPT_MASK_VOID}, {"server-token", required_argument, NULL, OPT_SERVER_TOKEN},
        {"reeval-above", required_argument, NULL, OPT_REEVAL},
    };
    struct option longopts[KG_CLI_EVAL_LONGOPTS_MAX + sizeof own / sizeof *own + 1];
    size_t nl = 0;
    for (size_t i = 0; i < kg_cli_eval_longopt_count; i++)
        longopts[nl++] = kg_cli_eval_longopts[i];
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        longopts[nl++] = own[i];
    longopts[nl] = (struct option){0, 0, 0, 0};

    kg_cli_eval_flags f;
    kg_cli_eval_flags_init(&f);
    f.reference_cache_private = 1; /* a task's reference timed once per process (common.h) */
    kg_chat_config chat;
    kg_chat_config_default(&chat);
    const char *stops[32];
    size_t n_stop = 0;
    const char *task_args[256], *sets[64], *out = NULL, *prompts_dir = NULL, *server = NULL, *ids = NULL;
    const char *server_token = getenv("KGYM_TOKEN");
    size_t n_task_args = 0, n_sets = 0;
    int level = 0, samples = 1, turns = 3, keep_best = 0, stop_correct = 0, jobs = 0, resume = 0, progress = 1;
    int report_only = 0, max_ctx = 0, mask_void = 0;
    double price_in = 0, price_out = 0, gamma = 1, rl_seed = 1, reeval_above = 3;
    const char *fn_name = "drkernel", *est_name = "trloo", *singleton = NULL;
    int c, code = 0;
    optind = 1;
    opterr = 0;
#define BAD(...)                                                                                                \
    do {                                                                                                        \
        code = kg_cli_usage_error("rollout", __VA_ARGS__);                                                      \
        goto out;                                                                                               \
    } while (0)
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        double d;
        switch (c) {
        case 'h':
        case OPT_HELP:
            usage(stdout);
            goto out;
        case OPT_TASKS:
        case OPT_TASK:
            if (n_task_args == 256)
                BAD("at most 256 --tasks/--task");
            task_args[n_task_args++] = optarg;
            break;
        case OPT_LEVEL:
            if (parse_int(optarg, 1, &level))
                BAD("--level wants a positive integer");
            break;
        case OPT_IDS: ids = optarg; break;
        case OPT_OUT: out = optarg; break;
        case OPT_RESUME: resume = 1; break;
        case OPT_URL: chat.url = optarg; break;
        case OPT_MODEL: chat.model = optarg; break;
        case OPT_KEY: chat.api_key = optarg; break;
        case OPT_TEMP:
            if (parse_double(optarg, &chat.temperature))
                BAD("--temperature wants a number");
            break;
        case OPT_TOP_P:
            if (parse_double(optarg, &chat.top_p))
                BAD("--top-p wants a number");
            break;
        case OPT_MAX_TOKENS:
            if (parse_double(optarg, &d) || d > 10000000)
                BAD("--max-tokens wants an integer");
            chat.max_tokens = (int)d;
            break;
        case OPT_STOP:
            if (n_stop == 32)
                BAD("at most 32 --stop strings");
            stops[n_stop++] = optarg;
            break;
        case OPT_CONC:
            if (parse_int(optarg, 1, &chat.concurrency))
                BAD("--concurrency wants an integer >= 1");
            break;
        case OPT_RETRIES:
            if (parse_int(optarg, 0, &chat.max_retries))
                BAD("--retries wants an integer >= 0");
            break;
        case OPT_BACKOFF:
            if (parse_double(optarg, &chat.backoff_base_s) || chat.backoff_base_s < 0)
                BAD("--backoff wants seconds >= 0");
            break;
        case OPT_BACKOFF_MAX:
            if (parse_double(optarg, &chat.backoff_max_s) || chat.backoff_max_s < 0)
                BAD("--backoff-max wants seconds >= 0");
            break;
        case OPT_REQ_TIMEOUT:
            if (parse_double(optarg, &chat.timeout_s) || chat.timeout_s < 0)
                BAD("--request-timeout wants seconds >= 0");
            break;
        case OPT_SAMPLES:
            if (parse_int(optarg, 1, &samples))
                BAD("--samples wants an integer >= 1");
            break;
        case OPT_TURNS:
            if (parse_int(optarg, 1, &turns))
                BAD("--turns wants an integer >= 1");
            break;
        case OPT_KEEP_BEST:
            if (parse_int(optarg, 0, &keep_best))
                BAD("--keep-best wants an integer >= 0");
            break;
        case OPT_MAX_CONTEXT:
            if (parse_int(optarg, 0, &max_ctx))
                BAD("--max-context-chars wants an integer >= 0 (at most 1000000)");
            break;
        case OPT_STOP_CORRECT: stop_correct = 1; break;
        case OPT_PROMPTS: prompts_dir = optarg; break;
        case OPT_FN: fn_name = optarg; break;
        case OPT_SET:
            if (n_sets == 64)
                BAD("at most 64 --set");
            sets[n_sets++] = optarg;
            break;
        case OPT_ESTIMATOR: est_name = optarg; break;
        case OPT_SINGLETON: singleton = optarg; break;
        case OPT_GAMMA:
            if (parse_double(optarg, &gamma) || gamma < 0 || gamma > 1)
                BAD("--gamma wants a number in [0, 1]");
            break;
        case OPT_RL_SEED:
            if (parse_double(optarg, &rl_seed) || rl_seed < 0)
                BAD("--rl-seed wants an integer >= 0");
            break;
        case OPT_JOBS:
            if (parse_int(optarg, 1, &jobs) || jobs > 64)
                BAD("--jobs wants an integer in 1..64");
            break;
        case OPT_SERVER: server = optarg; break;
        case OPT_SERVER_TOKEN: server_token = optarg; break;
        case OPT_REEVAL:
            if (parse_double(optarg, &reeval_above) || reeval_above < 0)
                BAD("--reeval-above wants a speedup >= 0 (0 = never re-evaluate)");
            break;
        case OPT_PRICE_IN:
            if (parse_double(optarg, &price_in) || price_in < 0)
                BAD("--price-in wants a number >= 0");
            break;
        case OPT_PRICE_OUT:
            if (parse_double(optarg, &price_out) || price_out < 0)
                BAD("--price-out wants a number >= 0");
            break;
        case OPT_NO_PROGRESS: progress = 0; break;
        case OPT_REPORT_ONLY: report_only = 1; break;
        case OPT_MASK_VOID: mask_void = 1; break;
        case '?':
        case ':':
            BAD("unknown option or missing value: %s", argv[optind - 1]);
        default: {
            int r = kg_cli_eval_option(&f, c, optarg);
            if (r <= 0) {
                code = 2;
                goto out;
            }
        }
        }
    }
    if (optind < argc)
        BAD("unexpected argument \"%s\"", argv[optind]);
    if (!out)
        BAD("--out FILE is required");
    kg_error err;
    kg_error_clear(&err);
    if (report_only) {
        if (report(out, NULL, f.json, &err) != KG_OK) {
            fprintf(stderr, "kgym rollout: %s\n", err.message);
            code = err.code == KG_ERR_NOT_FOUND || err.code == KG_ERR_INVALID ? 2 : 1;
        }
        goto out;
    }
    if (!chat.url)
        BAD("--url is required (the model server)");
    if (!chat.model)
        BAD("--model is required");
    if (!chat.api_key)
        chat.api_key = getenv("KGYM_API_KEY");
    if (!chat.api_key)
        chat.api_key = getenv("OPENAI_API_KEY");
    chat.stop = stops;
    chat.n_stop = n_stop;
    if (ids && !level)
        BAD("--ids needs --level");

    kg_rollout_config rc;
    memset(&rc, 0, sizeof rc);
    kg_reward_fn fn;
    kg_estimator est;
    if (kg_reward_fn_parse(fn_name, &fn, &err) != KG_OK || kg_estimator_parse(est_name, &est, &err) != KG_OK)
        BAD("%s", err.message);
    kg_reward_config_default(&rc.reward, fn);
    for (size_t i = 0; i < n_sets; i++) {
        const char *eq = strchr(sets[i], '=');
        double v;
        char name[64];
        if (!eq || (size_t)(eq - sets[i]) >= sizeof name || parse_double(eq + 1, &v))
            BAD("--set wants NAME=NUMBER, not \"%s\"", sets[i]);
        snprintf(name, sizeof name, "%.*s", (int)(eq - sets[i]), sets[i]);
        if (kg_reward_config_set(&rc.reward, name, v, &err) != KG_OK)
            BAD("%s", err.message);
    }
    kg_advantage_config_default(&rc.advantage, est);
    rc.advantage.gamma = gamma;
    if (singleton) {
        int v;
        if (kg_rl_option_parse(KG_OPT_SINGLETON, singleton, &v, &err) != KG_OK)
            BAD("--singleton: %s", err.message);
        rc.advantage.singleton = (kg_singleton_rule)v;
    }
    kg_prs_config_default(&rc.prs);

    task_list tasks = {0};
    kg_prompts prompts;
    memset(&prompts, 0, sizeof prompts);
    kg_supervisor *sup = NULL;
    for (size_t i = 0; i < n_task_args; i++)
        if (add_tasks_arg(&tasks, f.kernelbench, task_args[i], &err) != KG_OK) {
            code = kg_cli_usage_error("rollout", "%s", err.message);
            goto cleanup;
        }
    if (level && add_level(&tasks, f.kernelbench, level, ids, &err) != KG_OK) {
        code = kg_cli_usage_error("rollout", "%s", err.message);
        goto cleanup;
    }
    if (!tasks.n) {
        code = kg_cli_usage_error("rollout", "no tasks: give --tasks, --task or --level");
        goto cleanup;
    }
    if (kg_prompts_load(prompts_dir, &prompts, &err) != KG_OK) {
        code = kg_cli_usage_error("rollout", "%s", err.message);
        goto cleanup;
    }
    if (!resume && kg_file_exists(out)) {
        code = kg_cli_usage_error("rollout", "%s exists: pass --resume to continue it, or remove it", out);
        goto cleanup;
    }
    kg_agent_local_eval local = {0};
    kg_agent_server_eval remote = {.url = server, .token = server_token, .timeout_s = 1800, .max_retries = 3};
    if (kg_cli_setup(&f, &err) != KG_OK) {
        code = err.code == KG_ERR_INVALID ? kg_cli_usage_error("rollout", "%s", err.message) : 1;
        if (code == 1)
            fprintf(stderr, "kgym rollout: %s\n", err.message);
        goto cleanup;
    }
    if (server) {
        rc.evaluate = kg_agent_eval_server;
        rc.eval_ctx = &remote;
    } else {
        kg_supervisor_options so = kg_cli_supervisor_options(&f);
        if (kg_supervisor_open(&so, &sup, &err) != KG_OK) {
            fprintf(stderr, "kgym rollout: %s\n", err.message);
            code = 1;
            goto cleanup;
        }
        local.sup = sup;
        local.opts = &f.opts;
        rc.evaluate = kg_agent_eval_local;
        rc.eval_ctx = &local;
    }
    rc.tasks = tasks.v;
    rc.n_tasks = tasks.n;
    rc.samples = samples;
    rc.turns = turns;
    rc.keep_best = keep_best;
    rc.max_context_chars = (size_t)max_ctx;
    rc.stop_on_correct = stop_correct;
    rc.mask_void_turns = mask_void;
    rc.reeval_above = reeval_above;
    rc.chat = &chat;
    rc.prompts = &prompts;
    rc.seed = (uint64_t)rl_seed;
    /* Evaluating here: the device's default; through --server, the server's workers decide, and 2 at once. */
    rc.eval_jobs = jobs ? jobs : server ? 2 : kg_cli_default_jobs(&f, 2);
    rc.out_path = out;
    rc.resume = resume;
    rc.price_in = price_in;
    rc.price_out = price_out;
    rc.progress = progress;
    kg_rollout_stats st;
    if (kg_rollout_run(&rc, &st, &err) != KG_OK) {
        fprintf(stderr, "kgym rollout: %s\n", err.message);
        code = err.code == KG_ERR_INVALID ? 2 : 1;
        goto cleanup;
    }
    if (report(out, &st, f.json, &err) != KG_OK) {
        /* No records at all (every request failed) is not a crash: say so. */
        fprintf(stderr, "kgym rollout: no report: %s\n", err.message);
        code = 1;
    }
    if (st.trajectories_incomplete) {
        fprintf(stderr, "kgym rollout: %zu of %zu trajectories are incomplete (model or evaluation errors); "
                        "rerun with --resume to finish them\n", st.trajectories_incomplete, st.trajectories);
        code = 1;
    }
cleanup:
    if (sup)
        kg_supervisor_close(sup);
    kg_prompts_free(&prompts);
    for (size_t i = 0; i < tasks.n; i++)
        kg_task_free(&tasks.v[i]);
    free(tasks.v);
out:
    kg_cli_eval_flags_free(&f);
    return code;
#undef BAD
}
