/*
 * rollout.c — the driver: tasks × samples × turns, pipelined.  Every
 * trajectory moves on its own: its next turn is asked of the model (one
 * curl multi stream for the whole run, at most `concurrency` requests in
 * flight) as soon as its previous turn has been evaluated, and each reply is
 * evaluated as soon as it arrives, so a slow request or evaluation holds up
 * only its own trajectory.  The evaluations run on the service's worker pool
 * (src/sched, `eval_jobs` workers) over a memory store, as `kgym bench`'s do:
 * each answered turn is a job {"item": i} (rollout_evaluate says what it is),
 * and a job's end continues its trajectory (rollout_job_end); the pool then
 * forgets the job (forget_ended), so the store holds the turns in flight, not
 * the run's.  Each evaluated turn is
 * appended to the trajectory file at once, so an interrupted run loses at
 * most the turns in flight.  Replies are cached in OUT.replies.jsonl as soon
 * as they arrive, so a resumed run never asks the model again for a turn it
 * already answered.  When every trajectory has ended, the file is rewritten
 * with advantages, PRS decisions and best-of-turns marks.
 *
 * Ownership: a trajectory is touched by one stage at a time (building its
 * context, waiting for the model, waiting for or in evaluation), so its
 * fields need no lock; the queues, counters and stats are under run.lock.
 * Lock order: run.lock may be held while the store is called, never the
 * other way round (the store calls nothing of ours).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "kgym/extract.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/json.h"
#include "util/util.h"

typedef struct {
    int turn;
    char *reply, *feedback;
    double reward;
    kg_eval_outcome outcome;
} turn_state;

typedef struct {
    size_t task;
    int sample;
    turn_state *turns;
    size_t n;
    int done, failed;
} traj;

typedef struct work {
    traj *t;
    json_t *messages;   /* context sent (owned) */
    json_t *kept;       /* turn numbers in the context (owned) */
    char *tag;          /* X-Kgym-Request */
    kg_chat_reply reply;
    int cached;
    struct work *next;  /* queue link */
} work;

typedef struct {
    work *head, *tail;
} queue;

typedef struct {
    const kg_rollout_config *cfg;
    kg_rollout_stats *stats;
    traj *trajs;
    size_t n_traj;
    char **first_prompts; /* per task */
    json_t *records;      /* every record of the file, in order */
    json_t *cache;        /* cached replies (read-only once the run starts) */
    int out_fd, cache_fd;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* in_eval fell to 0 */
    queue to_ask;
    queue evaluated;      /* evaluated turns whose trajectories rollout_job_end has not continued yet */
    kg_store *store;      /* the pool's jobs (memory) */
    kg_sched *pool;       /* the evaluation workers */
    work **items;         /* job {"item": i}'s turn, until its evaluation begins (then NULL) */
    size_t n_items, cap_items;
    size_t in_chat;       /* handed to the chat stream, not answered yet */
    size_t in_eval;       /* queued for or in evaluation, its trajectory not continued yet */
    size_t total_turns, correct_turns;
    int tty;
} run;

static void q_push(queue *q, work *w)
{
    w->next = NULL;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
}

static work *q_pop(queue *q)
{
    work *w = q->head;
    if (w) {
        q->head = w->next;
        if (!q->head)
            q->tail = NULL;
    }
    return w;
}

static void work_free(work *w)
{
    if (!w)
        return;
    json_decref(w->messages);
    json_decref(w->kept);
    free(w->tag);
    kg_chat_reply_free(&w->reply);
    free(w);
}

static int write_line(int fd, const json_t *o, kg_error *err)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s)
        return kg_error_set(err, KG_ERR_NOMEM, "cannot serialise a record");
    size_t n = strlen(s);
    s[n] = '\n'; /* overwrite the NUL: one write() per line keeps lines whole */
    const char *p = s;
    size_t left = n + 1;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            free(s);
            return kg_error_set(err, KG_ERR_IO, "write: %s", strerror(errno));
        }
        p += w;
        left -= (size_t)w;
    }
    free(s);
    return KG_OK;
}

/* Reads a JSONL file into an array; a final line that does not parse (the
 * process was killed mid-write) is dropped and the file truncated before it. */
static int read_jsonl(const char *path, json_t **out, size_t *dropped, kg_error *err)
{
    *out = json_array();
    *dropped = 0;
    if (!*out)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory reading %s", path);
    if (!kg_file_exists(path))
        return KG_OK;
    char *data = NULL;
    size_t len = 0;
    int rc = kg_file_read(path, 0, &data, &len, err);
    if (rc != KG_OK)
        return rc;
    size_t pos = 0, good_end = 0;
    while (pos < len) {
        char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        json_t *o = end > pos ? json_loadb(data + pos, end - pos, 0, NULL) : NULL;
        if (json_is_object(o)) {
            if (kg_json_push(*out, o) != 0) {
                free(data);
                return kg_error_set(err, KG_ERR_NOMEM, "out of memory reading %s", path);
            }
            if (nl)
                good_end = end + 1;
            else
                good_end = len;
        } else {
            json_decref(o);
            if (end > pos) {
                if (nl) { /* a broken line in the middle is not ours to repair */
                    free(data);
                    return kg_error_set(err, KG_ERR_INVALID, "%s: line at byte %zu is not a JSON object", path, pos);
                }
                (*dropped)++;
            } else if (nl) {
                good_end = end + 1;
            }
        }
        pos = end + 1;
    }
    free(data);
    if (good_end < len && truncate(path, (off_t)good_end) != 0)
        return kg_error_set(err, KG_ERR_IO, "truncate %s: %s", path, strerror(errno));
    return KG_OK;
}

static traj *find_traj(run *r, const char *task_id, int sample)
{
    for (size_t i = 0; i < r->n_traj; i++)
        if (r->trajs[i].sample == sample && !strcmp(r->cfg->tasks[r->trajs[i].task].id, task_id))
            return &r->trajs[i];
    return NULL;
}

static int add_turn(traj *t, int turn, const char *reply, const char *feedback, double reward,
                    const kg_eval_outcome *o)
{
    turn_state *p = realloc(t->turns, (t->n + 1) * sizeof *p);
    if (!p)
        return -1;
    t->turns = p;
    turn_state *s = &t->turns[t->n];
    s->turn = turn;
    s->reply = kg_strdup(reply);
    s->feedback = kg_strdup(feedback);
    s->reward = reward;
    s->outcome = *o;
    if ((reply && !s->reply) || (feedback && !s->feedback)) {
        free(s->reply);
        free(s->feedback);
        return -1;
    }
    t->n++;
    return 0;
}

static int turn_cmp(const void *a, const void *b)
{
    const turn_state *x = a, *y = b;
    return (x->turn > y->turn) - (x->turn < y->turn);
}

/* Rebuilds trajectory state from the records already in the file. */
static int restore(run *r, kg_error *err)
{
    size_t i;
    json_t *rec;
    json_array_foreach(r->records, i, rec) {
        const char *task = json_string_value(json_object_get(rec, "task"));
        traj *t = task ? find_traj(r, task, (int)json_integer_value(json_object_get(rec, "sample"))) : NULL;
        if (!t)
            continue; /* another task or sample count: kept in the file, not continued */
        kg_eval_outcome o;
        kg_error e2;
        if (kg_agent_outcome(json_object_get(rec, "result"), &o, &e2) != KG_OK)
            return kg_error_set(err, KG_ERR_INVALID, "%s record %zu: %s", r->cfg->out_path, i + 1, e2.message);
        if (add_turn(t, (int)json_integer_value(json_object_get(rec, "turn")),
                     json_string_value(json_object_get(rec, "reply")),
                     json_string_value(json_object_get(rec, "feedback")),
                     json_number_value(json_object_get(rec, "reward")), &o))
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        r->stats->turns_resumed++;
    }
    for (size_t k = 0; k < r->n_traj; k++) {
        traj *t = &r->trajs[k];
        if (t->n)
            qsort(t->turns, t->n, sizeof *t->turns, turn_cmp);
        for (size_t j = 0; j < t->n; j++)
            if (t->turns[j].turn != (int)j + 1)
                return kg_error_set(err, KG_ERR_INVALID, "%s: task %s sample %d has turn %d where turn %zu belongs",
                                    r->cfg->out_path, r->cfg->tasks[t->task].id, t->sample, t->turns[j].turn, j + 1);
        if ((int)t->n >= r->cfg->turns)
            t->done = 1;
        if (r->cfg->stop_on_correct && t->n && kg_outcome_is_correct(&t->turns[t->n - 1].outcome))
            t->done = 1;
        for (size_t j = 0; j < t->n; j++)
            if (kg_outcome_is_correct(&t->turns[j].outcome))
                r->correct_turns++;
    }
    return KG_OK;
}

static const json_t *cached_reply(run *r, const traj *t, int turn)
{
    size_t i;
    json_t *c;
    const char *id = r->cfg->tasks[t->task].id;
    /* The last entry wins: a turn answered twice (killed between reply and
     * cache write) was cached twice with the newer answer last. */
    const json_t *hit = NULL;
    json_array_foreach(r->cache, i, c) {
        const char *task = json_string_value(json_object_get(c, "task"));
        if (task && !strcmp(task, id) && json_integer_value(json_object_get(c, "sample")) == t->sample &&
            json_integer_value(json_object_get(c, "turn")) == turn)
            hit = c;
    }
    return hit;
}

static void progress_line(run *r)
{
    if (!r->cfg->progress)
        return;
    size_t done = r->stats->turns_done + r->stats->turns_resumed;
    size_t total = r->total_turns ? r->total_turns : 1;
    int width = 30, fill = (int)(done * (size_t)width / total);
    if (fill > width)
        fill = width;
    fprintf(stderr, "%s[%.*s%*s] %zu/%zu turns  correct %zu  tokens %ld in / %ld out  model errors %zu%s",
            r->tty ? "\r" : "", fill, "##############################", width - fill, "", done, total,
            r->correct_turns, r->stats->prompt_tokens, r->stats->completion_tokens, r->stats->model_errors,
            r->tty ? "\033[K" : "\n");
    fflush(stderr);
}

static int cache_reply(run *r, work *w, kg_error *err);

static json_t *usage_json(long pt, long ct)
{
    return json_pack("{s:o, s:o}", "prompt_tokens", pt >= 0 ? json_integer(pt) : json_null(), "completion_tokens",
                     ct >= 0 ? json_integer(ct) : json_null());
}

/* The turn's record (a new object), or NULL: memory, or text that must go as it is and is not UTF-8 (err says
 * which).  result: stolen, also on failure.  Code (the reply, the code in it) and the task's path go as they are
 * or not at all; labels and kgym's feedback are sanitized (docs/style.md). */
static json_t *turn_record(run *r, const work *w, int turn, json_t *result, double first_speedup, double reward,
                           const char *feedback, kg_error *err)
{
    const kg_rollout_config *cfg = r->cfg;
    const traj *t = w->t;
    const kg_task *task = &cfg->tasks[t->task];
    const char *reply = w->reply.content;
    const char *path = task->path ? task->path : "";
    if (!kg_utf8_valid(reply) || !kg_utf8_valid(path)) {
        json_decref(result);
        kg_error_set(err, KG_ERR_INVALID, "the %s is not UTF-8: it cannot be recorded as JSON",
                     kg_utf8_valid(reply) ? "task's path" : "reply");
        return NULL;
    }
    kg_extract_result ex;
    kg_extract_candidate(reply, strlen(reply), &ex, NULL);
    json_t *rec = json_object(), *msgs = json_deep_copy(w->messages);
    int ok = kg_json_push(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply)) == 0;
    double cost = (w->reply.prompt_tokens > 0 ? (double)w->reply.prompt_tokens * cfg->price_in : 0) / 1e6 +
                  (w->reply.completion_tokens > 0 ? (double)w->reply.completion_tokens * cfg->price_out : 0) / 1e6;
    ok = ok && kg_json_set(rec, "schema", kg_json_text(KG_TURN_SCHEMA)) == 0 &&
         kg_json_set(rec, "task", kg_json_text(task->id)) == 0 &&
         kg_json_set(rec, "task_path", json_string(path)) == 0 &&
         kg_json_set(rec, "sample", json_integer(t->sample)) == 0 &&
         kg_json_set(rec, "turn", json_integer(turn)) == 0 &&
         kg_json_set(rec, "messages", json_incref(msgs)) == 0 &&
         kg_json_set(rec, "context_turns", json_incref(w->kept)) == 0 &&
         kg_json_set(rec, "reply", json_string(reply)) == 0 &&
         kg_json_set(rec, "code", ex.code ? json_string(ex.code) : json_null()) == 0 &&
         kg_json_set(rec, "finish_reason", kg_json_text(w->reply.finish_reason)) == 0 &&
         kg_json_set(rec, "usage", usage_json(w->reply.prompt_tokens, w->reply.completion_tokens)) == 0 &&
         /* A cached reply was paid for once, by the run that asked: count it here. */
         kg_json_set(rec, "cost_usd", kg_json_number(cost)) == 0 &&
         kg_json_set(rec, "attempts", json_integer(w->reply.attempts)) == 0 &&
         kg_json_set(rec, "reply_cached", json_boolean(w->cached)) == 0 &&
         kg_json_set(rec, "result", json_incref(result)) == 0 &&
         /* the speedup of a first evaluation that was thrown away, or null */
         kg_json_set(rec, "reevaluated_from", kg_json_number(first_speedup)) == 0 &&
         kg_json_set(rec, "reward", kg_json_number(reward)) == 0 &&
         kg_json_set(rec, "reward_fn", kg_json_text(kg_reward_fn_name(cfg->reward.fn))) == 0 &&
         kg_json_set(rec, "mask", json_true()) == 0 &&
         kg_json_set(rec, "feedback", kg_json_text(feedback)) == 0;
    json_decref(msgs);
    json_decref(result);
    kg_extract_result_free(&ex);
    if (!ok) {
        json_decref(rec);
        kg_error_set(err, KG_ERR_NOMEM, "out of memory building the turn's record");
        return NULL;
    }
    return rec;
}

/* Evaluates one answered turn and appends its record (a pool worker, through rollout_evaluate).  A turn that
 * cannot be evaluated or recorded ends its trajectory, reported here; the status says so to the pool (its job
 * fails with err).  *out: the evaluation's result for the pool's store (a new reference) on KG_OK. */
static int evaluate_item(run *r, work *w, json_t **out, kg_error *err)
{
    const kg_rollout_config *cfg = r->cfg;
    traj *t = w->t;
    const kg_task *task = &cfg->tasks[t->task];
    int turn = (int)t->n + 1;
    const char *reply = w->reply.content;
    size_t rlen = strlen(reply);
    json_t *result = NULL;
    kg_error_clear(err);
    *out = NULL;
    int rc = cfg->evaluate(cfg->eval_ctx, task, reply, rlen, &result, err);
    if (rc != KG_OK) {
        pthread_mutex_lock(&r->lock);
        fprintf(stderr, "%skgym rollout: task %s sample %d turn %d not evaluated: %s\n", r->tty ? "\n" : "",
                task->id, t->sample, turn, err->message);
        r->stats->eval_errors++;
        t->failed = 1;
        pthread_mutex_unlock(&r->lock);
        json_decref(result);
        return rc;
    }
    kg_eval_outcome o;
    double reward = 0, first_speedup = NAN;
    char *feedback = NULL;
    int ok = kg_agent_outcome(result, &o, err) == KG_OK;
    if (ok && kg_reeval_wanted(&o, cfg->reeval_above)) {
        /* the second result replaces the first; if the second evaluation
         * fails outright, the first one stands */
        json_t *again = NULL;
        kg_error err2;
        kg_eval_outcome o2;
        if (cfg->evaluate(cfg->eval_ctx, task, reply, rlen, &again, &err2) == KG_OK &&
            kg_agent_outcome(again, &o2, &err2) == KG_OK) {
            first_speedup = o.speedup;
            json_decref(result);
            result = again;
            o = o2;
        } else {
            json_decref(again);
        }
    }
    const kg_eval_outcome *prev = t->n ? &t->turns[t->n - 1].outcome : NULL;
    if (ok)
        ok = kg_reward_compute(&cfg->reward, &o, prev, &reward, err) == KG_OK;
    if (ok)
        ok = kg_prompt_feedback(cfg->prompts, result, reward, turn, cfg->turns - turn, &feedback, err) == KG_OK;
    json_t *kept = json_incref(result);
    json_t *rec = ok ? turn_record(r, w, turn, json_incref(result), first_speedup, reward, feedback, err) : NULL;
    ok = rec != NULL;
    json_decref(result);

    pthread_mutex_lock(&r->lock);
    if (!ok) {
        fprintf(stderr, "%skgym rollout: task %s sample %d turn %d: %s\n", r->tty ? "\n" : "", task->id, t->sample,
                turn, err->message);
        r->stats->eval_errors++;
        t->failed = 1;
    } else if (json_array_append(r->records, rec) != 0 || add_turn(t, turn, reply, feedback, reward, &o) != 0) {
        /* before the line is written: the file and the final rewrite never disagree */
        if (json_array_size(r->records) && json_array_get(r->records, json_array_size(r->records) - 1) == rec)
            json_array_remove(r->records, json_array_size(r->records) - 1);
        kg_error_set(err, KG_ERR_NOMEM, "out of memory keeping the turn's record");
        fprintf(stderr, "%skgym rollout: task %s sample %d turn %d: %s\n", r->tty ? "\n" : "", task->id, t->sample,
                turn, err->message);
        r->stats->eval_errors++;
        t->failed = 1;
        ok = 0;
    } else if (write_line(r->out_fd, rec, err) != KG_OK) {
        json_array_remove(r->records, json_array_size(r->records) - 1);
        t->n--;
        free(t->turns[t->n].reply);
        free(t->turns[t->n].feedback);
        fprintf(stderr, "kgym rollout: %s: %s\n", cfg->out_path, err->message);
        r->stats->eval_errors++;
        t->failed = 1;
        ok = 0;
    } else {
        r->stats->turns_done++;
        if (kg_outcome_is_correct(&o))
            r->correct_turns++;
        if (turn >= cfg->turns || (cfg->stop_on_correct && kg_outcome_is_correct(&o)))
            t->done = 1;
        progress_line(r);
    }
    pthread_mutex_unlock(&r->lock);
    json_decref(rec);
    free(feedback);
    if (!ok) {
        json_decref(kept);
        return err->code != KG_OK ? err->code : KG_ERR_INTERNAL;
    }
    *out = kept;
    return KG_OK;
}

static int cache_reply(run *r, work *w, kg_error *err)
{
    const traj *t = w->t;
    if (!kg_utf8_valid(w->reply.content)) /* code: cached as it is or not at all */
        return kg_error_set(err, KG_ERR_INVALID, "the reply is not UTF-8: it cannot be cached as JSON");
    json_t *c = json_object();
    int ok = kg_json_set(c, "task", kg_json_text(r->cfg->tasks[t->task].id)) == 0 &&
             kg_json_set(c, "sample", json_integer(t->sample)) == 0 &&
             kg_json_set(c, "turn", json_integer((json_int_t)t->n + 1)) == 0 &&
             kg_json_set(c, "reply", json_string(w->reply.content)) == 0 &&
             kg_json_set(c, "finish_reason", kg_json_text(w->reply.finish_reason)) == 0 &&
             kg_json_set(c, "usage", usage_json(w->reply.prompt_tokens, w->reply.completion_tokens)) == 0 &&
             kg_json_set(c, "attempts", json_integer(w->reply.attempts)) == 0;
    int rc = ok ? write_line(r->cache_fd, c, err) : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    json_decref(c);
    return rc;
}

/* Hands an answered turn to the pool (any thread, run.lock not held; the caller counted it in in_eval): job
 * "rollout-i" {"item": i}.  A turn the store refuses ends its trajectory here. */
static void submit_eval(run *r, work *w)
{
    kg_error err;
    kg_error_clear(&err);
    int rc = KG_OK;
    size_t i = 0;
    pthread_mutex_lock(&r->lock);
    if (r->n_items == r->cap_items) {
        size_t cap = r->cap_items ? r->cap_items * 2 : 64;
        work **p = realloc(r->items, cap * sizeof *p);
        if (p) {
            r->items = p;
            r->cap_items = cap;
        } else {
            rc = kg_error_set(&err, KG_ERR_NOMEM, "out of memory");
        }
    }
    if (rc == KG_OK) {
        i = r->n_items++;
        r->items[i] = w;
    }
    pthread_mutex_unlock(&r->lock);
    char id[40], req[48];
    snprintf(id, sizeof id, "rollout-%zu", i);
    snprintf(req, sizeof req, "{\"item\": %zu}", i);
    const kg_task *task = &r->cfg->tasks[w->t->task];
    char group[65];
    kg_task_group(task->source, group); /* the routing group (task.h) */
    kg_job job = {.id = id, .key = id, .request = req, .label = (char *)task->id, .group = group[0] ? group : NULL};
    if (rc == KG_OK && (rc = kg_store_put(r->store, &job, 0, &err)) == KG_OK) {
        pthread_mutex_lock(&r->lock);
        kg_sched *pool = r->pool; /* NULL before the pool starts: its workers find the job when they do */
        pthread_mutex_unlock(&r->lock);
        if (pool)
            kg_sched_notify(pool);
        return;
    }
    traj *t = w->t;
    pthread_mutex_lock(&r->lock);
    if (i < r->n_items && r->items[i] == w)
        r->items[i] = NULL;
    fprintf(stderr, "%skgym rollout: task %s sample %d turn %zu not evaluated: %s\n", r->tty ? "\n" : "",
            r->cfg->tasks[t->task].id, t->sample, t->n + 1, err.message);
    r->stats->eval_errors++;
    t->failed = 1;
    if (--r->in_eval == 0)
        pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    work_free(w);
}

/* Prepares a trajectory's next turn (caller owns t): its context, then either
 * the cached reply (straight to evaluation) or a place in the model's queue. */
static int schedule_next(run *r, traj *t, kg_error *err)
{
    const kg_rollout_config *cfg = r->cfg;
    work *w = calloc(1, sizeof *w);
    kg_turn_view *views = calloc(t->n ? t->n : 1, sizeof *views);
    if (!w || !views) {
        free(w);
        free(views);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    w->t = t;
    for (size_t j = 0; j < t->n; j++)
        views[j] = (kg_turn_view){t->turns[j].turn, t->turns[j].reply, t->turns[j].feedback, t->turns[j].reward};
    int rc = kg_agent_context(r->first_prompts[t->task], views, t->n, cfg->keep_best, cfg->max_context_chars,
                              &w->messages, &w->kept, err);
    free(views);
    if (rc != KG_OK) {
        work_free(w);
        return rc;
    }
    int turn = (int)t->n + 1;
    const json_t *c = cached_reply(r, t, turn);
    const char *content = c ? json_string_value(json_object_get(c, "reply")) : NULL;
    if (content) {
        w->cached = 1;
        w->reply.ok = 1;
        w->reply.content = kg_strdup(content);
        const char *fr = json_string_value(json_object_get(c, "finish_reason"));
        w->reply.finish_reason = fr ? kg_strdup(fr) : NULL;
        json_t *u = json_object_get(c, "usage");
        json_t *pt = json_object_get(u, "prompt_tokens"), *ct = json_object_get(u, "completion_tokens");
        w->reply.prompt_tokens = json_is_integer(pt) ? (long)json_integer_value(pt) : -1;
        w->reply.completion_tokens = json_is_integer(ct) ? (long)json_integer_value(ct) : -1;
        w->reply.attempts = (int)json_integer_value(json_object_get(c, "attempts"));
        if (!w->reply.content || (fr && !w->reply.finish_reason)) {
            work_free(w);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
    } else {
        kg_buf tag = {0};
        if (kg_buf_printf(&tag, "task=%s; sample=%d; turn=%d", cfg->tasks[t->task].id, t->sample, turn) != 0) {
            kg_buf_free(&tag);
            work_free(w);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
        w->tag = kg_buf_release(&tag);
    }
    pthread_mutex_lock(&r->lock);
    if (w->cached) {
        r->stats->replies_cached++;
        r->in_eval++;
    } else {
        q_push(&r->to_ask, w);
    }
    pthread_mutex_unlock(&r->lock);
    if (w->cached)
        submit_eval(r, w);
    return KG_OK;
}

/* The chat stream wants a request (main thread). */
static int chat_pull(void *ctx, kg_chat_request *req, void **id)
{
    run *r = ctx;
    pthread_mutex_lock(&r->lock);
    work *w = q_pop(&r->to_ask);
    int got = w ? 1 : (r->in_chat == 0 && r->in_eval == 0) ? -1 : 0;
    if (w) {
        r->in_chat++;
        *req = (kg_chat_request){.messages = w->messages, .tag = w->tag};
        *id = w;
    }
    pthread_mutex_unlock(&r->lock);
    return got;
}

/* A request has its final answer (main thread): cache it, account for it,
 * and hand it to the pool at once. */
static void chat_done(void *ctx, void *id, kg_chat_reply *reply)
{
    run *r = ctx;
    const kg_rollout_config *cfg = r->cfg;
    work *w = id;
    traj *t = w->t;
    int evaluate = 0;
    pthread_mutex_lock(&r->lock);
    w->reply = *reply;
    memset(reply, 0, sizeof *reply);
    r->in_chat--;
    r->stats->chat_attempts += (size_t)w->reply.attempts;
    if (!w->reply.ok) {
        fprintf(stderr, "%skgym rollout: task %s sample %d turn %zu: model request failed after %d attempt%s: %s\n",
                r->tty ? "\n" : "", cfg->tasks[t->task].id, t->sample, t->n + 1, w->reply.attempts,
                w->reply.attempts == 1 ? "" : "s", w->reply.error);
        r->stats->model_errors++;
        t->failed = 1;
        work_free(w);
    } else {
        if (w->reply.prompt_tokens > 0)
            r->stats->prompt_tokens += w->reply.prompt_tokens;
        if (w->reply.completion_tokens > 0)
            r->stats->completion_tokens += w->reply.completion_tokens;
        r->stats->cost_usd += (w->reply.prompt_tokens > 0 ? (double)w->reply.prompt_tokens * cfg->price_in : 0) / 1e6 +
                              (w->reply.completion_tokens > 0 ? (double)w->reply.completion_tokens * cfg->price_out : 0) / 1e6;
        kg_error err;
        if (cache_reply(r, w, &err) != KG_OK) /* still evaluated; only a resume would lose it */
            fprintf(stderr, "kgym rollout: reply cache: %s\n", err.message);
        r->in_eval++; /* with in_chat-- under one lock: the stream never sees "nothing left" in between */
        evaluate = 1;
    }
    pthread_mutex_unlock(&r->lock);
    if (evaluate)
        submit_eval(r, w);
}

/* The pool's evaluate hook (sched.h): job "rollout-i" is the turn items[i], evaluated through cfg->evaluate (in
 * this process or by a service: sup is not used).  Its trajectory is continued by rollout_job_end. */
static int rollout_evaluate(void *arg, kg_supervisor *sup, kg_eval_options *opts, const kg_job *job,
                            const json_t *req, json_t **result, kg_error *err)
{
    (void)sup;
    (void)opts;
    (void)req;
    run *r = arg;
    size_t i;
    char tail;
    work *w = NULL;
    pthread_mutex_lock(&r->lock);
    if (job->id && sscanf(job->id, "rollout-%zu%c", &i, &tail) == 1 && i < r->n_items) {
        w = r->items[i];
        r->items[i] = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (!w)
        return kg_error_set(err, KG_ERR_INTERNAL, "rollout job %s names no turn", job->id ? job->id : "");
    int rc = evaluate_item(r, w, result, err);
    pthread_mutex_lock(&r->lock);
    q_push(&r->evaluated, w);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* The pool's on_job_end (a worker, after it stored a job's end): every evaluated turn's trajectory goes on to its
 * next turn.  Taken from r->evaluated, not from end (which may be NULL), so that no turn is left uncounted: each
 * is continued once, by the first worker that looks. */
static void rollout_job_end(void *arg, const kg_sched_end *end)
{
    (void)end;
    run *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        work *w = q_pop(&r->evaluated);
        pthread_mutex_unlock(&r->lock);
        if (!w)
            return;
        traj *t = w->t;
        work_free(w);
        /* The next turn is queued before this one stops counting, so the
         * stream never sees "nothing left" while a trajectory is between turns. */
        if (!t->done && !t->failed) {
            kg_error err;
            if (schedule_next(r, t, &err) != KG_OK) {
                pthread_mutex_lock(&r->lock);
                fprintf(stderr, "kgym rollout: task %s sample %d: %s\n", r->cfg->tasks[t->task].id, t->sample,
                        err.message);
                r->stats->eval_errors++;
                t->failed = 1;
                pthread_mutex_unlock(&r->lock);
            }
        }
        pthread_mutex_lock(&r->lock);
        if (--r->in_eval == 0)
            pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
    }
}

static int run_all(run *r, kg_error *err)
{
    const kg_rollout_config *cfg = r->cfg;
    int jobs = cfg->eval_jobs < 1 ? 1 : cfg->eval_jobs > 64 ? 64 : cfg->eval_jobs;
    int rc = kg_store_open(KG_STORE_MEMORY, &r->store, err);
    /* Every trajectory's first turn queued before any worker starts: a cached reply is claimed in order, and a
     * trajectory that cannot start stops the run before anything is evaluated. */
    for (size_t i = 0; i < r->n_traj && rc == KG_OK; i++)
        if (!r->trajs[i].done && !r->trajs[i].failed)
            rc = schedule_next(r, &r->trajs[i], err);
    if (rc == KG_OK) {
        kg_sched_options o = {.store = r->store, .workers = jobs, .max_queue = (long)r->total_turns,
                              .name_prefix = "rollout:", .on_job_end = rollout_job_end, .on_job_end_arg = r,
                              .evaluate = rollout_evaluate, .evaluate_arg = r,
                              /* a turn's result is recorded by rollout_evaluate: its job need not outlive it */
                              .forget_ended = 1};
        kg_sched *pool = NULL;
        rc = kg_sched_start(&o, &pool, err);
        pthread_mutex_lock(&r->lock);
        r->pool = pool;
        pthread_mutex_unlock(&r->lock);
    }
    if (rc == KG_OK)
        rc = kg_chat_stream(cfg->chat, chat_pull, chat_done, r, err);
    /* After an error too, what is in evaluation (and the cached turns that follow it) is evaluated and recorded
     * before the pool stops: it stops taking jobs at once. */
    pthread_mutex_lock(&r->lock);
    while (r->pool && r->in_eval)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    kg_sched_stop(r->pool, 1e9); /* nothing in evaluation: the workers are idle */
    pthread_mutex_lock(&r->lock);
    r->pool = NULL;
    pthread_mutex_unlock(&r->lock);
    kg_store_close(r->store);
    r->store = NULL;
    /* After an error: what never reached the model or the evaluator. */
    work *w;
    while ((w = q_pop(&r->to_ask)))
        work_free(w);
    while ((w = q_pop(&r->evaluated)))
        work_free(w);
    for (size_t i = 0; i < r->n_items; i++)
        work_free(r->items[i]);
    free(r->items);
    r->items = NULL;
    r->n_items = r->cap_items = 0;
    return rc;
}

static int rewrite_annotated(run *r, kg_error *err)
{
    const kg_rollout_config *cfg = r->cfg;
    if (json_array_size(r->records) == 0)
        return KG_OK;
    int rc = cfg->mask_void_turns ? kg_agent_mask_void_turns(r->records, err) : KG_OK;
    if (rc == KG_OK)
        rc = kg_agent_annotate(r->records, &cfg->advantage, &cfg->prs, cfg->seed, err);
    if (rc != KG_OK)
        return rc;
    kg_atomic_file f; /* a reader sees the old file or the new one */
    if ((rc = kg_atomic_begin(&f, cfg->out_path, 0644, err)) != KG_OK)
        return rc;
    size_t i;
    json_t *rec;
    json_array_foreach(r->records, i, rec) {
        if ((rc = write_line(f.fd, rec, err)) != KG_OK)
            break;
    }
    if (rc != KG_OK) {
        kg_atomic_abort(&f);
        return rc;
    }
    return kg_atomic_commit(&f, err);
}

int kg_rollout_run(const kg_rollout_config *cfg, kg_rollout_stats *stats, kg_error *err)
{
    memset(stats, 0, sizeof *stats);
    if (!cfg->n_tasks || cfg->samples < 1 || cfg->turns < 1 || !cfg->out_path || !cfg->evaluate || !cfg->chat ||
        !cfg->prompts)
        return kg_error_set(err, KG_ERR_INVALID, "rollout needs tasks, samples >= 1, turns >= 1, an output, "
                                                 "a model and an evaluator");
    if (!cfg->resume && kg_file_exists(cfg->out_path))
        return kg_error_set(err, KG_ERR_INVALID, "%s exists: pass --resume to continue it, or remove it",
                            cfg->out_path);
    run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.stats = stats;
    r.out_fd = r.cache_fd = -1;
    r.tty = isatty(2);
    pthread_mutex_init(&r.lock, NULL);
    kg_cond_init(&r.cond);
    kg_buf cache_path = {0};
    int rc = kg_buf_printf(&cache_path, "%s.replies.jsonl", cfg->out_path) == 0
                 ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    size_t dropped = 0, dropped_c = 0;
    if (rc != KG_OK)
        goto done;
    r.n_traj = cfg->n_tasks * (size_t)cfg->samples;
    r.trajs = calloc(r.n_traj, sizeof *r.trajs);
    r.first_prompts = calloc(cfg->n_tasks, sizeof *r.first_prompts);
    if (!r.trajs || !r.first_prompts) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < cfg->n_tasks; i++) {
        for (int s = 0; s < cfg->samples; s++)
            r.trajs[i * (size_t)cfg->samples + (size_t)s] = (traj){.task = i, .sample = s};
        if ((rc = kg_prompt_first_turn(cfg->prompts, &cfg->tasks[i], &r.first_prompts[i], err)) != KG_OK)
            goto done;
    }
    r.total_turns = r.n_traj * (size_t)cfg->turns;
    if (!cfg->resume) {
        unlink(cache_path.data); /* a stale cache of a removed run must not answer for the model */
        r.records = json_array();
        r.cache = json_array();
        if (!r.records || !r.cache) {
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
            goto done;
        }
    } else {
        if ((rc = read_jsonl(cfg->out_path, &r.records, &dropped, err)) != KG_OK ||
            (rc = read_jsonl(cache_path.data, &r.cache, &dropped_c, err)) != KG_OK)
            goto done;
        if ((rc = restore(&r, err)) != KG_OK)
            goto done;
        if (dropped && cfg->progress)
            fprintf(stderr, "kgym rollout: dropped an incomplete last line of %s\n", cfg->out_path);
    }
    r.out_fd = open(cfg->out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    r.cache_fd = open(cache_path.data, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (r.out_fd < 0 || r.cache_fd < 0) {
        rc = kg_error_set(err, KG_ERR_IO, "%s: %s", cfg->out_path, strerror(errno));
        goto done;
    }
    if (cfg->progress && stats->turns_resumed)
        fprintf(stderr, "kgym rollout: resuming %s: %zu turns already done\n", cfg->out_path, stats->turns_resumed);
    progress_line(&r);
    if ((rc = run_all(&r, err)) != KG_OK)
        goto done;
    if (cfg->progress && r.tty)
        fputc('\n', stderr);
    close(r.out_fd);
    r.out_fd = -1;
    if ((rc = rewrite_annotated(&r, err)) != KG_OK)
        goto done;
    stats->trajectories = r.n_traj;
    for (size_t i = 0; i < r.n_traj; i++)
        if (!r.trajs[i].done)
            stats->trajectories_incomplete++;
done:
    if (r.out_fd >= 0)
        close(r.out_fd);
    if (r.cache_fd >= 0)
        close(r.cache_fd);
    for (size_t i = 0; r.trajs && i < r.n_traj; i++) {
        for (size_t j = 0; j < r.trajs[i].n; j++) {
            free(r.trajs[i].turns[j].reply);
            free(r.trajs[i].turns[j].feedback);
        }
        free(r.trajs[i].turns);
    }
    free(r.trajs);
    for (size_t i = 0; r.first_prompts && i < cfg->n_tasks; i++)
        free(r.first_prompts[i]);
    free(r.first_prompts);
    json_decref(r.records);
    json_decref(r.cache);
    kg_buf_free(&cache_path);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.cond);
    return rc;
}
