/*
 * cmd_bench.c — `kgym bench`: many (task, candidate) pairs, evaluated by a
 * few worker threads sharing one supervisor (one zygote), with a progress bar
 * and a summary.  Pairs come from a folder layout or a JSONL file.  The
 * workers are the service's (src/sched) over a memory store: each pair is a
 * job {"item": i}, claimed in order, and evaluate_item says what it is.
 * item_ended keeps each result and adds it to the run's tally (eval/tally.h,
 * as the service's counters do), and the pool then forgets the job.
 *
 * Each candidate is read once, when the jobs are queued, and evaluated from
 * memory: a pair is the bytes listed at the start, whatever happens to its file
 * during the run.  --dedup puts those bytes and the task's text into the job
 * (reference_code, kernel_code), so the pool's content key covers exactly what
 * is evaluated and its own dedup (sched.c: in-flight follow, done answer at
 * claim) answers an exact twin with its earlier pair's result, as `kgym serve`
 * does; the pool then keeps its ended jobs (a forgotten one answers no twin).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "eval/eval.h"
#include "eval/tally.h"
#include "kgym/rl.h"
#include "rl/result_read.h"
#include "sched/sched.h"
#include "store/store.h"
#include "task/task.h"
#include "util/json.h"
#include "util/util.h"

typedef struct {
    char *task_spec;
    char *candidate; /* path, or NULL when response is inline */
    char *response;  /* inline text from JSONL */
    char *expect;    /* a verdict, "not_correct", or NULL */
    char *label;
    /* The candidate's bytes, read when the jobs are queued (run_pool), evaluated from here or, with --dedup, from
     * the job's kernel_code (then NULL here: one copy in memory); read_error when its file could not be read
     * (the pair's error). */
    char *code;
    size_t code_len;
    char *read_error;
    json_t *result;
    char *error;
    size_t twin_of; /* --dedup: 1 + the index of the earlier pair whose result this pair was given; 0: its own */
} bench_item;

typedef struct {
    bench_item *items;
    size_t count, cap;
} bench_list;

static int add_item(bench_list *l, const char *task, const char *cand, const char *response,
                    const char *expect, const char *label)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        bench_item *p = realloc(l->items, cap * sizeof *p);
        if (!p)
            return -1;
        l->items = p;
        l->cap = cap;
    }
    bench_item *it = &l->items[l->count++];
    memset(it, 0, sizeof *it);
    it->task_spec = kg_strdup(task);
    it->candidate = kg_strdup(cand);
    it->response = kg_strdup(response);
    it->expect = kg_strdup(expect);
    it->label = kg_strdup(label);
    /* A copy that failed (memory) would run another pair than the one listed: the list is kept whole or the
     * command fails.  The item stays counted: the list's free releases it. */
    if (!task || !label || !it->task_spec || !it->label || (cand && !it->candidate) ||
        (response && !it->response) || (expect && !it->expect))
        return -1;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names);

/* Sorted entry names of a folder (NULL-terminated, malloc'd) in *out; *out NULL when it cannot be opened.
 * KG_ERR_NOMEM when they cannot all be kept (a list without some would leave tasks out unsaid). */
static int list_dir(const char *path, char ***out)
{
    *out = NULL;
    DIR *d = opendir(path);
    if (!d)
        return KG_OK;
    size_t n = 0, cap = 16;
    char **names = calloc(cap, sizeof *names);
    int rc = names ? KG_OK : KG_ERR_NOMEM;
    struct dirent *e;
    while (rc == KG_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n + 1 >= cap) {
            char **p = realloc(names, cap * 2 * sizeof *p);
            if (!p) {
                rc = KG_ERR_NOMEM;
                break;
            }
            names = p;
            cap *= 2;
        }
        if (!(names[n++] = kg_strdup(e->d_name)))
            rc = KG_ERR_NOMEM;
        names[n] = NULL;
    }
    closedir(d);
    if (rc != KG_OK) {
        free_names(names);
        return rc;
    }
    names[n] = NULL;
    qsort(names, n, sizeof *names, name_cmp);
    *out = names;
    return KG_OK;
}

static void free_names(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

/* One task folder: task.py plus candidates (*.py not starting with '_'). */
static int add_task_folder(bench_list *l, const char *folder, kg_error *err)
{
    kg_buf task = {0};
    if (kg_buf_printf(&task, "%s/task.py", folder) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory listing %s", folder);
    if (!kg_file_exists(task.data)) {
        kg_buf_free(&task);
        return KG_OK;
    }
    char **names;
    int rc = list_dir(folder, &names);
    for (size_t i = 0; rc == KG_OK && names && names[i]; i++) {
        const char *n = names[i];
        size_t len = strlen(n);
        if (len < 4 || strcmp(n + len - 3, ".py") || !strcmp(n, "task.py") || n[0] == '_')
            continue;
        kg_buf cand = {0}, label = {0};
        const char *base = strrchr(folder, '/');
        const char *expect = !strncmp(n, "correct", 7) ? "correct"
                             : !strncmp(n, "wrong", 5) ? "not_correct" : NULL;
        if (kg_buf_printf(&cand, "%s/%s", folder, n) != KG_OK ||
            kg_buf_printf(&label, "%s/%s", base ? base + 1 : folder, n) != KG_OK ||
            add_item(l, task.data, cand.data, NULL, expect, label.data) != 0)
            rc = KG_ERR_NOMEM;
        kg_buf_free(&cand);
        kg_buf_free(&label);
    }
    free_names(names);
    kg_buf_free(&task);
    return rc == KG_OK ? KG_OK : kg_error_set(err, rc, "out of memory listing %s", folder);
}

static int load_dir(bench_list *l, const char *dir, kg_error *err)
{
    if (!kg_dir_exists(dir))
        return kg_error_set(err, KG_ERR_NOT_FOUND, "%s is not a folder", dir);
    size_t before = l->count;
    int rc = add_task_folder(l, dir, err);
    if (rc != KG_OK)
        return rc;
    char **names;
    if (list_dir(dir, &names) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory listing %s", dir);
    for (size_t i = 0; rc == KG_OK && names && names[i]; i++) {
        kg_buf sub = {0};
        if (kg_buf_printf(&sub, "%s/%s", dir, names[i]) != KG_OK)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory listing %s", dir);
        else if (kg_dir_exists(sub.data))
            rc = add_task_folder(l, sub.data, err);
        kg_buf_free(&sub);
    }
    free_names(names);
    if (rc != KG_OK)
        return rc;
    if (l->count == before)
        return kg_error_set(err, KG_ERR_INVALID,
                            "%s holds no task folders (a folder with task.py and candidate .py files)", dir);
    return KG_OK;
}

/* A path in a JSONL line: as given if it exists, else relative to the JSONL's folder. */
static char *resolve_relative(const char *jsonl, const char *p)
{
    if (p[0] == '/' || kg_file_exists(p))
        return kg_strdup(p);
    const char *slash = strrchr(jsonl, '/');
    if (!slash)
        return kg_strdup(p);
    kg_buf b = {0};
    if (kg_buf_printf(&b, "%.*s/%s", (int)(slash - jsonl), jsonl, p) != KG_OK)
        return NULL; /* memory: the caller says so */
    return kg_buf_release(&b);
}

static int load_jsonl(bench_list *l, const char *path, kg_error *err)
{
    char *data = NULL;
    size_t len = 0;
    int rc = kg_file_read(path, 256u << 20, &data, &len, err);
    if (rc != KG_OK)
        return rc;
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        while (*line == ' ' || *line == '\t' || *line == '\r')
            line++;
        if (!*line || *line == '#')
            continue;
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        if (!json_is_object(o)) {
            json_decref(o);
            free(data);
            return kg_error_set(err, KG_ERR_INVALID, "%s line %d: not a JSON object (%s)", path, lineno,
                                jerr.text);
        }
        const char *task = json_string_value(json_object_get(o, "task"));
        if (!task)
            task = json_string_value(json_object_get(o, "kernelbench"));
        const char *cand = json_string_value(json_object_get(o, "candidate"));
        const char *resp = json_string_value(json_object_get(o, "response"));
        const char *expect = json_string_value(json_object_get(o, "expect"));
        if (!task || (!cand && !resp)) {
            json_decref(o);
            free(data);
            return kg_error_set(err, KG_ERR_INVALID,
                                "%s line %d: needs \"task\" (or \"kernelbench\") and \"candidate\" (or \"response\")",
                                path, lineno);
        }
        char *task_path = json_object_get(o, "task") ? resolve_relative(path, task) : kg_strdup(task);
        char *cand_path = cand ? resolve_relative(path, cand) : NULL;
        kg_buf label = {0};
        const char *cbase = cand ? strrchr(cand, '/') : NULL;
        int ok = task_path && (!cand || cand_path);
        if (cand && cbase) {
            /* Keep the candidate's folder in the label: names like honest.py repeat. */
            const char *p = cbase;
            while (p > cand && p[-1] != '/')
                p--;
            ok = ok && kg_buf_printf(&label, "%s %.*s", task, (int)(strlen(p)), p) == KG_OK;
        } else {
            ok = ok && kg_buf_printf(&label, "%s %s", task, cand ? cand : "(inline)") == KG_OK;
        }
        ok = ok && add_item(l, task_path, cand_path, resp, expect, label.data) == 0;
        kg_buf_free(&label);
        free(task_path);
        free(cand_path);
        json_decref(o);
        if (!ok) {
            free(data);
            return kg_error_set(err, KG_ERR_NOMEM, "%s line %d: out of memory", path, lineno);
        }
    }
    free(data);
    if (l->count == 0)
        return kg_error_set(err, KG_ERR_INVALID, "%s holds no pairs", path);
    return KG_OK;
}

/* ---- running */

typedef struct {
    bench_list *list;
    kg_supervisor *sup;
    kg_cli_eval_flags *flags;
    pthread_mutex_t lock;
    size_t done;
    double t0;
    int tty;
    kg_result_tally tally; /* every ended pair's result (eval/tally.h): verdicts, rewards, speedups */
    int dedup;        /* --dedup: exact twins answered once (the file's header) */
    int fifo;         /* --claim-order fifo: pairs taken in the list's order, not routed by task */
    size_t twins;     /* pairs answered from a twin, unevaluated */
    FILE *out;        /* --out: each result is written (and flushed) as it finishes */
    int out_failed;   /* a write to it failed: reported once, at the end */
    int finished;     /* every worker has returned: the watcher stops */
    pthread_cond_t wake;
} bench_run;

static int expectation_met(const bench_item *it)
{
    if (!it->expect)
        return 1;
    const char *v = it->result ? json_string_value(json_object_get(it->result, "verdict")) : NULL;
    if (!v)
        return 0;
    if (!strcmp(it->expect, "not_correct"))
        return strcmp(v, "correct") != 0;
    return !strcmp(v, it->expect);
}

/* " (twin of pair N)" for a pair answered from an earlier twin (N counts the list's pairs from 1), a note for one run
 * again after kgym's own failure (result.restarted), else "". */
static const char *twin_note(const bench_item *it, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (it->twin_of)
        snprintf(buf, cap, " (twin of pair %zu)", it->twin_of);
    else if (it->result && json_is_string(json_object_get(it->result, "restarted")))
        snprintf(buf, cap, " (run twice: see restarted)");
    return buf;
}

/* A twin's "cached_from" in --json and --out: {"pair": N, "label"} of the pair whose result it was given (N as in
 * twin_note), else null.  NULL: no memory. */
static json_t *twin_json(const bench_run *run, const bench_item *it)
{
    if (!it->twin_of)
        return json_null();
    return json_pack("{s:I, s:o}", "pair", (json_int_t)it->twin_of, "label",
                     kg_json_text(run->list->items[it->twin_of - 1].label));
}

static void progress(bench_run *run, const bench_item *it)
{
    size_t total = run->list->count;
    double elapsed = (kg_now_ms() - run->t0) / 1000.0;
    const char *v = it->result ? json_string_value(json_object_get(it->result, "verdict")) : "error";
    char twin[64];
    twin_note(it, twin, sizeof twin);
    if (run->tty) {
        int width = 30;
        int filled = (int)((double)run->done / (double)total * width);
        double eta = run->done ? elapsed / (double)run->done * (double)(total - run->done) : 0;
        fprintf(stderr, "\r\033[K[");
        for (int i = 0; i < width; i++)
            fputc(i < filled ? '#' : '.', stderr);
        fprintf(stderr, "] %zu/%zu  correct %d  other %zu  %.0fs elapsed, ~%.0fs left  (%s: %s%s)", run->done,
                total, (int)run->tally.verdicts[KG_VERDICT_CORRECT],
                run->done - (size_t)run->tally.verdicts[KG_VERDICT_CORRECT], elapsed, eta, it->label, v, twin);
        if (run->done == total)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "[%zu/%zu] %s: %s%s%s (%.1fs)\n", run->done, total, it->label, v, twin,
                expectation_met(it) ? "" : "  <-- expected ", elapsed);
        if (!expectation_met(it))
            fprintf(stderr, "        expected %s\n", it->expect);
    }
    fflush(stderr);
}

/* One --out line, written as soon as the evaluation ends: a run that is killed (a GPU session's time limit)
 * keeps every result it finished.  Called with run->lock held. */
static void write_out(bench_run *run, const bench_item *it)
{
    if (!run->out || run->out_failed)
        return;
    /* A shallow copy: the line's own fields are not added to the result the pair keeps (--json shows it). */
    json_t *line = it->result ? json_copy(it->result)
                              : json_pack("{s:s, s:s?}", "error", it->error ? it->error : "not evaluated", "task",
                                          it->task_spec);
    if (!line) {
        run->out_failed = 1;
        return;
    }
    /* A line without its expectation or its twin (memory) is a failed --out, never a shorter line. */
    char *text = kg_json_set(line, "expect", kg_json_text(it->expect)) == 0 &&
                         kg_json_set(line, "cached_from", twin_json(run, it)) == 0
                     ? json_dumps(line, JSON_COMPACT)
                     : NULL;
    json_decref(line);
    if (!text || fprintf(run->out, "%s\n", text) < 0 || fflush(run->out) != 0)
        run->out_failed = 1;
    free(text);
}

/* While evaluations run, a minute without one finishing gets a line on stderr saying what the GPU is doing
 * (the arbiter's state): a long wait for memory or an exclusive window, or a stall, shows while it happens,
 * not only in the results. */
#define KG_BENCH_QUIET_S 60
static void *watcher(void *arg)
{
    bench_run *run = arg;
    pthread_mutex_lock(&run->lock);
    size_t seen = run->done;
    double since = kg_now_ms();
    while (!run->finished) {
        struct timespec ts;
        kg_deadline_in(&ts, 5.0);
        pthread_cond_timedwait(&run->wake, &run->lock, &ts);
        if (run->done != seen) {
            seen = run->done;
            since = kg_now_ms();
        } else if (!run->finished && kg_now_ms() - since >= KG_BENCH_QUIET_S * 1000.0) {
            char state[200];
            kg_arbiter_describe(kg_supervisor_arbiter(run->sup), state, sizeof state);
            fprintf(stderr, "%s[bench] none finished in the last %d s (%zu of %zu done); GPU: %s\n",
                    run->tty ? "\r\033[K" : "", KG_BENCH_QUIET_S, run->done, run->list->count, state);
            since = kg_now_ms();
        }
    }
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

/* The pool's evaluate hook (sched.h): job {"item": i} is the list's pair i; with --dedup the job also holds the
 * bytes its key was made of (reference_code, kernel_code: queue_request), and those very bytes are evaluated. */
static int evaluate_item(void *arg, kg_supervisor *sup, kg_eval_options *opts, const kg_job *job, const json_t *req,
                         json_t **result, kg_error *err)
{
    bench_run *run = arg;
    json_t *ij = json_object_get(req, "item");
    if (!json_is_integer(ij) || json_integer_value(ij) < 0 || (size_t)json_integer_value(ij) >= run->list->count)
        return kg_error_set(err, KG_ERR_INTERNAL, "bench job %s names no pair", job->id);
    bench_item *it = &run->list->items[json_integer_value(ij)];
    if (it->read_error)
        return kg_error_set(err, KG_ERR_IO, "%s", it->read_error);
    const char *ref = json_string_value(json_object_get(req, "reference_code"));
    const json_t *kernel = json_object_get(req, "kernel_code");
    kg_task task;
    int rc = kg_task_resolve(run->flags->kernelbench, it->task_spec, &task, err);
    /* The judge loads the reference from its file: a file changed since the key was made would be evaluated under
     * the old text's key (and answer its twins with it).  Not evaluated instead. */
    if (rc == KG_OK && ref && strcmp(task.source, ref) != 0)
        rc = kg_error_set(err, KG_ERR_INVALID, "%s changed after kgym bench read it: not evaluated (--dedup matched "
                                               "its twins on the text read first)", task.path);
    if (rc == KG_OK) {
        kg_eval_request er = {.task = &task, .response = kernel ? json_string_value(kernel) : it->code,
                              .response_len = kernel ? json_string_length(kernel) : it->code_len,
                              .candidate_name = it->candidate};
        rc = kg_eval_run(sup, opts, &er, result, err);
    }
    kg_task_free(&task);
    return rc;
}

/* The pool's on_job_end: the pair's outcome (in memory: its result as the worker holds it, a twin's copy too, with
 * cached_from naming the job it was copied from), its progress line and its --out line. */
static void item_ended(void *arg, const kg_sched_end *end)
{
    bench_run *run = arg;
    if (!end) /* a bench job is never cancelled or queued again: an end not in full is a lack of memory */
        return;
    size_t i = (size_t)json_integer_value(json_object_get(end->request, "item"));
    if (!end->request || i >= run->list->count)
        return;
    bench_item *it = &run->list->items[i];
    it->result = json_incref((json_t *)end->result);
    if (!it->result)
        it->error = kg_strdup(end->job->error ? end->job->error : "the evaluation produced no result");
    /* Job ids are "bench-<index>" (run_pool). */
    const char *from = end->job->cached_from;
    size_t leader = 0;
    if (it->result && from && sscanf(from, "bench-%zu", &leader) == 1 && leader < run->list->count)
        it->twin_of = leader + 1;
    pthread_mutex_lock(&run->lock);
    run->done++;
    run->twins += it->twin_of != 0;
    kg_result_tally_add(&run->tally, it->result); /* every answer, a twin's too: the verdicts are the pairs' */
    progress(run, it);
    write_out(run, it);
    pthread_cond_broadcast(&run->wake);
    pthread_mutex_unlock(&run->lock);
}

/* The pair's candidate bytes, read once (it->code), or the reason they could not be (it->read_error: the pair's
 * error, the run goes on).  KG_ERR_NOMEM when even that cannot be kept. */
static int read_candidate(bench_item *it)
{
    if (!it->candidate) { /* inline: the JSONL's text is the candidate */
        it->code = it->response;
        it->code_len = strlen(it->response);
        it->response = NULL;
        return KG_OK;
    }
    kg_error e;
    kg_error_clear(&e);
    if (kg_file_read(it->candidate, 16u << 20, &it->code, &it->code_len, &e) == KG_OK)
        return KG_OK;
    it->read_error = kg_strdup(e.message);
    return it->read_error ? KG_OK : KG_ERR_NOMEM;
}

/* The task text of a spec, as kg_task_resolve reads it (the last one resolved is kept: a list's pairs of one task
 * come together, and one text serves them all).  NULL when it does not resolve (its evaluation says why) or holds
 * a NUL byte (the content key reads text up to its first NUL, the judge the whole file). */
typedef struct {
    char *spec;
    kg_task task;
    int ok;
} task_text;

static const char *reference_text(bench_run *run, task_text *tt, const char *spec)
{
    if (!tt->spec || strcmp(tt->spec, spec) != 0) {
        kg_task_free(&tt->task);
        free(tt->spec);
        kg_error e;
        tt->spec = kg_strdup(spec);
        tt->ok = tt->spec && kg_task_resolve(run->flags->kernelbench, spec, &tt->task, &e) == KG_OK;
        if (tt->ok) { /* the task's hash covers the file's every byte: the same over the text up to a NUL, or not */
            char whole[32];
            kg_hash64_string(tt->task.source, strlen(tt->task.source), whole);
            tt->ok = !strcmp(whole, tt->task.hash);
        }
    }
    return tt->ok ? tt->task.source : NULL;
}

/* Job i's request text (malloc'd; NULL: no memory).  {"item": i}; with --dedup also the task's text and the
 * candidate's bytes, so the pool's content key (kg_sched_content_key) is made of what evaluate_item evaluates.  A
 * pair whose bytes a JSON string cannot hold exactly (not UTF-8, a NUL: the key reads a string up to its first
 * NUL) or whose task does not resolve keeps the plain request: no key, evaluated on its own. */
static char *queue_request(bench_run *run, size_t i, task_text *tt)
{
    bench_item *it = &run->list->items[i];
    json_t *req = json_pack("{s:I}", "item", (json_int_t)i);
    const char *ref = run->dedup && it->code && !memchr(it->code, 0, it->code_len)
                          ? reference_text(run, tt, it->task_spec)
                          : NULL;
    json_t *rj = ref ? json_string(ref) : NULL; /* NULL: not UTF-8 */
    json_t *kj = rj ? json_stringn(it->code, it->code_len) : NULL;
    if (!kj)
        json_decref(rj);
    int keyed = kj != NULL;
    if (keyed) { /* kg_json_set takes each value, also when it fails */
        int bad = kg_json_set(req, "reference_code", rj) != 0;
        bad |= kg_json_set(req, "kernel_code", kj) != 0;
        if (bad) { /* no memory */
            json_decref(req);
            return NULL;
        }
    }
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (text && keyed) { /* the job holds the bytes now: evaluate_item reads them there */
        free(it->code);
        it->code = NULL;
    }
    return text;
}

/* Every pair evaluated by `jobs` workers of the service's pool over a memory store; returns once all ended.
 * Memory: every candidate is held from the start (bench lists are small: hundreds to thousands of pairs of a few
 * kB); with --dedup, once, in its job, and the ended jobs stay in the store with their results until the end. */
static int run_pool(bench_run *run, long jobs, kg_error *err)
{
    kg_store *store = NULL;
    int rc = kg_store_open(KG_STORE_MEMORY, &store, err);
    if (rc != KG_OK)
        return rc;
    size_t n = run->list->count;
    kg_job *js = calloc(n ? n : 1, sizeof *js);
    char (*ids)[32] = calloc(n ? n : 1, sizeof *ids), **reqs = calloc(n ? n : 1, sizeof *reqs);
    char (*groups)[65] = calloc(n ? n : 1, sizeof *groups);
    task_text tt = {0};
    if (!js || !ids || !reqs || !groups)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == KG_OK && i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "bench-%zu", i);
        if (read_candidate(&run->list->items[i]) != KG_OK || !(reqs[i] = queue_request(run, i, &tt)))
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory reading the candidates");
        else {
            /* The routing group (task.h): none for a task that does not resolve or holds a NUL (reference_text) */
            kg_task_group(reference_text(run, &tt, run->list->items[i].task_spec), groups[i]);
            js[i] = (kg_job){.id = ids[i], .key = ids[i], .request = reqs[i], .label = run->list->items[i].label,
                             .group = groups[i][0] ? groups[i] : NULL};
        }
    }
    kg_task_free(&tt.task);
    free(tt.spec);
    if (rc == KG_OK) /* all queued before any worker starts: claimed in the list's order */
        rc = kg_store_put_many(store, js, n, NULL, err);
    for (size_t i = 0; reqs && i < n; i++) /* the store holds its copies */
        free(reqs[i]);
    kg_sched *pool = NULL;
    if (rc == KG_OK) {
        /* Without --dedup item_ended keeps the result and the store holds the pairs left.  With it the store keeps
         * every ended job: a done one answers its later twins at claim (a forgotten one would not), and as many
         * spare threads as jobs claim beside the evaluations, so a twin that follows its pair in flight holds a
         * thread, not one of the --jobs evaluations (sched.h spare_workers). */
        kg_sched_options o = {.store = store, .sup = run->sup, .eval = run->flags->opts, .workers = (int)jobs,
                              .spare_workers = run->dedup ? (int)jobs : 0,
                              .max_queue = (long)n, .name_prefix = "bench:", .on_job_end = item_ended,
                              .on_job_end_arg = run, .evaluate = evaluate_item, .evaluate_arg = run,
                              .forget_ended = !run->dedup, .fifo = run->fifo};
        rc = kg_sched_start(&o, &pool, err);
    }
    if (rc == KG_OK) {
        pthread_mutex_lock(&run->lock);
        while (run->done < n) {
            /* The store as the truth: an end not handed over in full (no memory for it) still ends the run. */
            pthread_mutex_unlock(&run->lock);
            int over = kg_store_count(store, "queued") == 0 && kg_store_count(store, "running") == 0;
            pthread_mutex_lock(&run->lock);
            if (over)
                break;
            struct timespec ts;
            kg_deadline_in(&ts, 1.0);
            pthread_cond_timedwait(&run->wake, &run->lock, &ts);
        }
        pthread_mutex_unlock(&run->lock);
        kg_sched_stop(pool, 1e9); /* every job has ended: the workers are idle */
    }
    kg_store_close(store);
    free(js);
    free(ids);
    free(reqs);
    free(groups);
    return rc;
}

static json_t *summary(bench_run *run, double wall_s)
{
    /* Whole or NULL (memory): a summary with a count left out would misreport the run. */
    json_t *by = json_object();
    int ok = 1;
    for (int i = 0; ok && i < KG_VERDICT_COUNT; i++)
        ok = kg_json_set(by, kg_verdict_name((kg_verdict)i), json_integer(run->tally.verdicts[i])) == 0;
    size_t n = run->list->count, errors = 0, expected = 0, met = 0;
    json_t *hack_types = json_object();
    /* Exclusive GPU ms by purpose, summed over the evaluations: a twin's result is its earlier pair's, whose time
     * is counted once. */
    json_t *exclusive = json_object();
    for (size_t i = 0; ok && i < n; i++) {
        bench_item *it = &run->list->items[i];
        if (!it->result) {
            errors++;
            continue;
        }
        kg_result_view v; /* the verdict, reward and speedup are the tally's; the hacks listed are read here */
        kg_result_read(it->result, &v);
        if (it->expect) {
            expected++;
            met += (size_t)expectation_met(it);
        }
        const char *purpose;
        json_t *ms;
        json_t *by_purpose =
            json_object_get(json_object_get(json_object_get(it->result, "gpu_phases"), "exclusive"), "by_purpose");
        json_object_foreach(it->twin_of ? NULL : by_purpose, purpose, ms)
            ok = ok && kg_json_set(exclusive, purpose,
                                   kg_json_number(json_number_value(json_object_get(exclusive, purpose)) +
                                                  json_number_value(ms))) == 0;
        size_t k;
        json_t *h;
        json_array_foreach(v.hacks, k, h) {
            const char *type = json_string_value(json_object_get(h, "type"));
            if (type)
                ok = ok && kg_json_set(hack_types, type,
                                       json_integer(json_integer_value(json_object_get(hack_types, type)) + 1)) == 0;
        }
    }
    if (!ok || !hack_types || !exclusive) {
        json_decref(by);
        json_decref(hack_types);
        json_decref(exclusive);
        return NULL;
    }
    /* Answered: pairs with a result (the verdicts, rewards and speedups above count each); evaluated: those
     * evaluated in this run, the answered less the twins given an earlier pair's result (--dedup). */
    size_t answered = n - errors, evaluated = answered - run->twins;
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:f, s:f, s:o, s:I, s:I, s:o, s:f, s:f, s:f, s:s, s:o}",
                     "pairs", (json_int_t)n, "answered", (json_int_t)answered, "evaluated", (json_int_t)evaluated,
                     "answered_from_twin", (json_int_t)run->twins, "errors", (json_int_t)errors, "dedup", run->dedup,
                     "verdicts", by, "correct_rate", kg_result_tally_rate(&run->tally, KG_VERDICT_CORRECT),
                     "mean_reward", kg_result_tally_mean_reward(&run->tally), "hacks_by_type", hack_types,
                     "expectations", (json_int_t)expected, "expectations_met", (json_int_t)met,
                     "geomean_speedup", kg_json_number(kg_result_tally_geomean_speedup(&run->tally)),
                     "wall_s", wall_s, "evaluations_per_hour", wall_s > 0 ? (double)evaluated * 3600.0 / wall_s : 0.0,
                     "answers_per_hour", wall_s > 0 ? (double)answered * 3600.0 / wall_s : 0.0,
                     "device", run->flags->device_resolved, "gpu_exclusive_ms_by_purpose", exclusive);
}

static void print_table(FILE *out, bench_run *run, const json_t *sum)
{
    fprintf(out, "\n%-58s %-14s %-12s %6s %8s %7s\n", "pair", "verdict", "expected", "reward", "speedup",
            "time s");
    for (size_t i = 0; i < run->list->count; i++) {
        bench_item *it = &run->list->items[i];
        const char *v = it->result ? json_string_value(json_object_get(it->result, "verdict")) : "ERROR";
        const json_t *sp = it->result ? json_object_get(json_object_get(it->result, "timing"), "speedup") : NULL;
        char speed[32] = "-";
        if (json_is_number(sp))
            snprintf(speed, sizeof speed, "%.2fx", json_number_value(sp));
        char twin[64];
        fprintf(out, "%-58.58s %-14s %-12s %6.2f %8s %7.1f%s%s\n", it->label, v, it->expect ? it->expect : "-",
                it->result ? json_number_value(json_object_get(it->result, "reward")) : 0.0, speed,
                it->result ? json_number_value(json_object_get(it->result, "wall_ms")) / 1000.0 : 0.0,
                twin_note(it, twin, sizeof twin), expectation_met(it) ? "" : "   <-- MISMATCH");
        if (it->error)
            fprintf(out, "    error: %s\n", it->error);
    }
    fprintf(out, "\nverdicts:");
    const json_t *by = json_object_get(sum, "verdicts");
    for (int i = 0; i < KG_VERDICT_COUNT; i++) {
        const char *name = kg_verdict_name((kg_verdict)i);
        if (json_integer_value(json_object_get(by, name)))
            fprintf(out, " %s %lld", name, (long long)json_integer_value(json_object_get(by, name)));
    }
    fprintf(out, "\ncorrect rate %.1f%%, mean reward %.3f", 100 * json_number_value(json_object_get(sum, "correct_rate")),
            json_number_value(json_object_get(sum, "mean_reward")));
    const json_t *gm = json_object_get(sum, "geomean_speedup");
    if (json_is_number(gm))
        fprintf(out, ", geomean speedup of correct %.2fx", json_number_value(gm));
    fprintf(out, "\n");
    if (json_integer_value(json_object_get(sum, "expectations")))
        fprintf(out, "expectations met: %lld of %lld\n", (long long)json_integer_value(json_object_get(sum, "expectations_met")),
                (long long)json_integer_value(json_object_get(sum, "expectations")));
    if (json_integer_value(json_object_get(sum, "errors")))
        fprintf(out, "not evaluated (kgym errors): %lld\n", (long long)json_integer_value(json_object_get(sum, "errors")));
    const json_t *exclusive = json_object_get(sum, "gpu_exclusive_ms_by_purpose");
    if (json_object_size(exclusive)) {
        const char *purpose;
        json_t *ms;
        fprintf(out, "exclusive GPU time (s):");
        json_object_foreach((json_t *)exclusive, purpose, ms)
            fprintf(out, " %s %.1f", purpose, json_number_value(ms) / 1000.0);
        fprintf(out, "\n");
    }
    const json_t *mem = json_object_get(sum, "gpu_memory");
    json_int_t cap = json_integer_value(json_object_get(mem, "capacity_bytes"));
    if (cap > 0) {
        double unit = cap >= (1 << 30) ? (double)(1 << 30) : (double)(1 << 20);
        const char *name = cap >= (1 << 30) ? "GiB" : "MiB";
        fprintf(out, "device memory: %.1f %s for evaluations, at most %.1f %s reserved at once, %lld waits\n",
                (double)cap / unit, name, (double)json_integer_value(json_object_get(mem, "peak_reserved_bytes")) / unit,
                name, (long long)json_integer_value(json_object_get(mem, "waits")));
    }
    fprintf(out, "%lld evaluations in %.1f s on %s (%.0f per hour)",
            (long long)json_integer_value(json_object_get(sum, "evaluated")),
            json_number_value(json_object_get(sum, "wall_s")), json_string_value(json_object_get(sum, "device")),
            json_number_value(json_object_get(sum, "evaluations_per_hour")));
    if (json_is_true(json_object_get(sum, "dedup")))
        fprintf(out, "; %lld pairs answered, %lld of them from an earlier exact twin, unevaluated (%.0f answers per "
                     "hour)",
                (long long)json_integer_value(json_object_get(sum, "answered")),
                (long long)json_integer_value(json_object_get(sum, "answered_from_twin")),
                json_number_value(json_object_get(sum, "answers_per_hour")));
    fprintf(out, "\n");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kgym bench DIR | --jsonl FILE [options]\n"
            "\n"
            "Evaluates many (task, candidate) pairs and prints a summary table.  Candidates are read once,\n"
            "when the run starts, and evaluated from memory.\n"
            "  DIR                 each subfolder with a task.py is a task; every other .py in it (not\n"
            "                      starting with '_') is a candidate; correct*.py are expected correct,\n"
            "                      wrong*.py not correct\n"
            "  --jsonl FILE        one pair per line: {\"task\": FILE | \"kernelbench\": \"level1/19\",\n"
            "                      \"candidate\": FILE | \"response\": TEXT, \"expect\": VERDICT|\"not_correct\"}\n"
            "  --jobs N            evaluations at once (default on a GPU, where they share it and timing\n"
            "                      runs in exclusive windows: 10 on a machine with one GPU, 6 where it has\n"
            "                      several; on the CPU its cores, at most 4)\n"
            "  --out FILE          also write every result as JSONL to FILE, each as it finishes\n"
            "  --dedup             exact twins evaluated once, as `kgym serve` does: a pair whose task text\n"
            "                      and candidate bytes equal an earlier pair's gets that pair's result,\n"
            "                      unevaluated (\"cached_from\": {\"pair\": N, \"label\"} in --json and --out,\n"
            "                      N counting the list's pairs from 1; \"(twin of pair N)\" in the progress).\n"
            "                      The verdicts count every pair; the summary says how many were evaluated\n"
            "                      and how many answered from a twin, and evaluations per hour counts the\n"
            "                      evaluated only.  Costs memory: every ended pair's job (its task text,\n"
            "                      candidate and result) is kept until the run ends, so that later twins\n"
            "                      find it\n"
            "  --claim-order ORDER which pair a free evaluation takes next: task (the default) puts a\n"
            "                      task's pairs one after another on the judge kept for that task and\n"
            "                      spreads the evaluations over tasks; fifo takes them in the list's order\n"
            "  --check             exit 3 when any expectation is not met or a pair was not evaluated\n"
            "  --json              the summary and every result as one JSON document\n"
            "\n%s\n"
            "Exit status: 0 when the pairs were evaluated, 3 with --check when expectations failed,\n"
            "2 for a usage error, 1 when kgym could not start.\n",
            kg_cli_eval_help);
}

enum { OPT_JSONL = 1, OPT_JOBS, OPT_OUT, OPT_CHECK, OPT_DEDUP, OPT_CLAIM_ORDER, OPT_HELP };

int kg_cli_bench(int argc, char **argv)
{
    static const struct option own[] = {
        {"jsonl", required_argument, NULL, OPT_JSONL}, {"jobs", required_argument, NULL, OPT_JOBS},
        {"out", required_argument, NULL, OPT_OUT}, {"check", no_argument, NULL, OPT_CHECK},
        {"dedup", no_argument, NULL, OPT_DEDUP}, {"claim-order", required_argument, NULL, OPT_CLAIM_ORDER},
        {"help", no_argument, NULL, OPT_HELP}};
    struct option longopts[KG_CLI_EVAL_LONGOPTS_MAX + sizeof own / sizeof *own + 1];
    size_t n = 0;
    for (size_t i = 0; i < kg_cli_eval_longopt_count; i++)
        longopts[n++] = kg_cli_eval_longopts[i];
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        longopts[n++] = own[i];
    longopts[n++] = (struct option){0, 0, 0, 0};
    kg_cli_eval_flags f;
    kg_cli_eval_flags_init(&f);
    f.reference_cache_private = 1; /* a task's reference timed once per process (common.h) */
    const char *jsonl = NULL, *out_path = NULL;
    long jobs = 0;
    int check = 0, dedup = 0, fifo = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj:", longopts, NULL)) != -1) {
        if (c == OPT_JSONL)
            jsonl = optarg;
        else if (c == OPT_JOBS || c == 'j') {
            char *end;
            jobs = strtol(optarg, &end, 10);
            if (*end || jobs < 1 || jobs > 256) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error("bench", "--jobs needs a number from 1 to 256, not \"%s\"", optarg);
            }
        } else if (c == OPT_OUT)
            out_path = optarg;
        else if (c == OPT_CHECK)
            check = 1;
        else if (c == OPT_DEDUP)
            dedup = 1;
        else if (c == OPT_CLAIM_ORDER) {
            if (kg_cli_claim_order(optarg, &fifo) != 0) {
                kg_cli_eval_flags_free(&f);
                return kg_cli_usage_error("bench", "--claim-order is task or fifo, not \"%s\"", optarg);
            }
        }
        else if (c == OPT_HELP || c == 'h') {
            usage(stdout);
            kg_cli_eval_flags_free(&f);
            return 0;
        } else if (c == '?' || c == ':') {
            kg_cli_eval_flags_free(&f);
            return kg_cli_usage_error("bench", "unknown option or missing value: %s", argv[optind - 1]);
        } else if (kg_cli_eval_option(&f, c, optarg) <= 0) {
            kg_cli_eval_flags_free(&f);
            return 2;
        }
    }
    const char *dir = optind < argc ? argv[optind] : NULL;
    if ((dir == NULL) == (jsonl == NULL) || (dir && optind + 1 < argc)) {
        kg_cli_eval_flags_free(&f);
        return kg_cli_usage_error("bench", "give exactly one of DIR or --jsonl FILE");
    }
    kg_error err;
    kg_error_clear(&err);
    bench_list list = {0};
    kg_supervisor *sup = NULL;
    FILE *out_file = NULL;
    int rc = 0;
    if (kg_cli_setup(&f, &err) != KG_OK) {
        rc = 2;
        goto fail;
    }
    if ((dir ? load_dir(&list, dir, &err) : load_jsonl(&list, jsonl, &err)) != KG_OK) {
        rc = 2;
        goto fail;
    }
    if (out_path && !(out_file = fopen(out_path, "we"))) {
        kg_error_set(&err, KG_ERR_IO, "cannot write %s", out_path);
        rc = 2;
        goto fail;
    }
    kg_supervisor_options so = kg_cli_supervisor_options(&f);
    fprintf(stderr, "kgym bench: %zu pairs on %s; starting the Python zygote...\n", list.count,
            f.device_resolved);
    if (kg_supervisor_open(&so, &sup, &err) != KG_OK) {
        rc = 1;
        goto fail;
    }
    if (!jobs) {
        /* On a GPU the arbiter runs timing and profiling in exclusive windows, so several evaluations can
         * overlap their compile and correctness work with another's measurement. */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = kg_cli_default_jobs(&f, cores > 4 ? 4 : cores > 0 ? (int)cores : 1);
    }
    if ((size_t)jobs > list.count)
        jobs = (long)list.count;
    kg_arbiter_stats as0; /* the arbiter at the run's start: its state times are reported for the run alone */
    kg_arbiter_get_stats(kg_supervisor_arbiter(sup), &as0);
    bench_run run = {.list = &list, .sup = sup, .flags = &f, .t0 = kg_now_ms(), .tty = isatty(2), .out = out_file,
                     .dedup = dedup, .fifo = fifo};
    pthread_mutex_init(&run.lock, NULL);
    kg_cond_init(&run.wake); /* its waits' deadlines are on CLOCK_MONOTONIC */
    pthread_t watch;
    int watching = pthread_create(&watch, NULL, watcher, &run) == 0;
    int prc = run_pool(&run, jobs, &err);
    pthread_mutex_lock(&run.lock);
    run.finished = 1;
    pthread_cond_signal(&run.wake);
    pthread_mutex_unlock(&run.lock);
    if (watching)
        pthread_join(watch, NULL);
    pthread_cond_destroy(&run.wake);
    pthread_mutex_destroy(&run.lock);
    if (prc != KG_OK) {
        rc = 1;
        goto fail;
    }
    double wall_s = (kg_now_ms() - run.t0) / 1000.0;
    json_t *sum = summary(&run, wall_s);
    kg_arbiter_stats as;
    kg_arbiter_get_stats(kg_supervisor_arbiter(sup), &as);
    /* Device memory (arbiter.h): what evaluations could reserve, the most they held reserved at once, and how
     * many waits for memory there were. */
    int ok = kg_json_set(sum, "jobs", json_integer(jobs)) == 0 &&
             kg_json_set(sum, "gpu_exclusive_ms", kg_json_number(as.state_ms[KG_GPU_STATE_EXCLUSIVE])) == 0 &&
             kg_json_set(sum, "gpu_exclusive_grants", json_integer((json_int_t)as.exclusive_grants)) == 0 &&
             kg_json_set(sum, "gpu_shared_grants", json_integer((json_int_t)as.shared_grants)) == 0 &&
             kg_json_set(sum, "gpu_max_wait_ms", kg_json_number(as.max_wait_ms)) == 0 &&
             kg_json_set(sum, "gpu_memory", json_pack("{s:I, s:I, s:I}", "capacity_bytes",
                                                      (json_int_t)as.capacity_bytes, "peak_reserved_bytes",
                                                      (json_int_t)as.peak_reserved_bytes, "waits",
                                                      (json_int_t)as.memory_waits)) == 0;
    /* Where the GPU's time went, by the arbiter's state (arbiter.h, KG_GPU_STATE_MAP), and the shared part by how
     * many shared phases were held at once: whether the run was bound by exclusive windows, by shared phases,
     * by shared phases draining before a window, or left the GPU with nothing to do. */
    json_t *occupancy = json_object(), *holders = json_array();
    for (int i = 0; occupancy && i < KG_GPU_STATE_COUNT; i++)
        if (kg_json_set(occupancy, kg_gpu_state_name((kg_gpu_state)i),
                        kg_json_number(as.state_ms[i] - as0.state_ms[i])) != 0)
            ok = 0;
    for (int i = 0; holders && i < KG_ARBITER_HOLDER_BINS; i++)
        if (kg_json_push(holders, kg_json_number(as.holders_ms[i] - as0.holders_ms[i])) != 0)
            ok = 0;
    /* kg_json_set takes its value whatever happens (frees it on failure). */
    ok = kg_json_set(sum, "gpu_state_ms", occupancy) == 0 && ok;
    ok = kg_json_set(sum, "gpu_shared_holders_ms", holders) == 0 && ok;
    if (!ok) { /* no report rather than a part of one (the --out lines are written already) */
        json_decref(sum);
        sum = NULL;
        fprintf(stderr, "kgym bench: out of memory building the summary\n");
        rc = 1;
    }
    if (out_file) {
        int closed = fclose(out_file) == 0;
        out_file = NULL;
        if (run.out_failed || !closed) {
            fprintf(stderr, "kgym bench: writing %s failed: results are missing from it\n", out_path);
            rc = 1;
        }
    }
    if (!sum) {
        goto done;
    } else if (f.json) {
        /* Whole or an error: an entry left out would pair the rest with the wrong pairs. */
        json_t *all = json_array();
        for (size_t i = 0; ok && i < list.count; i++) {
            bench_item *it = &list.items[i];
            json_t *entry = json_object();
            ok = kg_json_set(entry, "label", kg_json_text(it->label)) == 0 &&
                 kg_json_set(entry, "candidate", kg_json_text(it->candidate)) == 0 &&
                 kg_json_set(entry, "expect", kg_json_text(it->expect)) == 0 &&
                 kg_json_set(entry, "result", it->result ? json_incref(it->result) : json_null()) == 0 &&
                 kg_json_set(entry, "error", kg_json_text(it->error)) == 0 &&
                 kg_json_set(entry, "cached_from", twin_json(&run, it)) == 0 &&
                 kg_json_set(entry, "expectation_met", json_boolean(expectation_met(it))) == 0;
            ok = ok ? kg_json_push(all, entry) == 0 : (json_decref(entry), 0);
        }
        json_t *doc = ok ? json_pack("{s:o, s:o}", "summary", json_incref(sum), "results", all)
                         : (json_decref(all), NULL);
        char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (text) {
            puts(text);
            free(text);
        } else {
            fprintf(stderr, "kgym bench: out of memory building the report\n");
            rc = 1;
        }
        json_decref(doc);
    } else {
        print_table(stdout, &run, sum);
    }
    if (check && (json_integer_value(json_object_get(sum, "expectations_met")) !=
                      json_integer_value(json_object_get(sum, "expectations")) ||
                  json_integer_value(json_object_get(sum, "errors"))))
        rc = 3;
    json_decref(sum);
    goto done;
fail:
    fprintf(stderr, "kgym bench: %s\n", err.message);
done:
    if (out_file)
        fclose(out_file);
    for (size_t i = 0; i < list.count; i++) {
        bench_item *it = &list.items[i];
        free(it->task_spec);
        free(it->candidate);
        free(it->response);
        free(it->expect);
        free(it->label);
        free(it->error);
        free(it->code);
        free(it->read_error);
        json_decref(it->result);
    }
    free(list.items);
    kg_supervisor_close(sup);
    kg_cli_eval_flags_free(&f);
    return rc;
}
