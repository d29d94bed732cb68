/* memory.c — the job store in this process's memory (see store.h, backend.h): the same contract as SQLite's
 * table, for the runs of one process (bench, rollout) and for tests.  Nothing survives the process: its
 * durability says so, and recovery has nothing to do.  It forgets (KG_STORE_FORGETS): bench's and rollout's pools
 * remove each job once its end was handed over (kg_sched_options.forget_ended), so the table holds the jobs in
 * flight, not every job of the run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend.h"
#include "util/json.h"
#include "util/util.h"

typedef struct entry {
    kg_job job;       /* job.seq orders the queue */
    double reward, speedup, coverage;
    int has_speedup;  /* coverage < 0: none */
} entry;

typedef struct memory_store {
    kg_store base; /* first: the method table */
    pthread_mutex_t lock;
    entry *jobs; /* in seq order (appended; a replaced job moves to the end) */
    size_t n, cap;
    long long seq;
} memory_store;

static const kg_store_ops memory_ops;

int kg_store_memory_open(kg_store **out, kg_error *err)
{
    *out = NULL;
    memory_store *m = calloc(1, sizeof *m);
    if (!m)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    kg_store_base_init(&m->base, &memory_ops);
    *out = &m->base;
    return KG_OK;
}

static void mem_close(kg_store *base)
{
    memory_store *m = (memory_store *)base;
    kg_store_base_fini(base);
    for (size_t i = 0; i < m->n; i++)
        kg_job_free(&m->jobs[i].job);
    free(m->jobs);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Lock held. */
static entry *find(memory_store *m, const char *id)
{
    for (size_t i = 0; id && i < m->n; i++)
        if (!strcmp(m->jobs[i].job.id, id))
            return &m->jobs[i];
    return NULL;
}

static int is(const entry *e, const char *status)
{
    return e->job.status && !strcmp(e->job.status, status);
}

/* Replaces *field with a copy of v (NULL allowed); KG_ERR_NOMEM leaves it as it was. */
static int set_text(char **field, const char *v)
{
    char *c = NULL;
    if (v && !(c = kg_strdup(v)))
        return KG_ERR_NOMEM;
    free(*field);
    *field = c;
    return KG_OK;
}

/* The listing facts of e's result (kg_store_result_facts; from result_json when the caller holds it parsed), into
 * e.  Lock held. */
static void set_facts(entry *e, const json_t *result_json)
{
    free(e->job.verdict);
    kg_store_result_facts(e->job.result, result_json, &e->job.verdict, &e->reward, &e->speedup, &e->has_speedup, &e->coverage);
}

static int mem_put_many(kg_store *base, const kg_job *jobs, size_t n, const int *replace, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    double t = kg_wall_s();
    pthread_mutex_lock(&m->lock);
    int rc = KG_OK;
    /* All checked before any is stored: a batch is all or nothing. */
    for (size_t i = 0; i < n && rc == KG_OK; i++) {
        const kg_job *job = &jobs[i];
        if (!job->id || !job->key || !job->request) {
            rc = kg_error_set(err, KG_ERR_INVALID, "a job needs an id, a key and a request");
            break;
        }
        entry *old = find(m, job->id);
        for (size_t k = 0; k < i && !old; k++)
            if (!strcmp(jobs[k].id, job->id))
                rc = kg_error_set(err, KG_ERR_INVALID, "a job with id \"%s\" exists already", job->id);
        if (old && !(replace && replace[i]))
            rc = kg_error_set(err, KG_ERR_INVALID, "a job with id \"%s\" exists already", job->id);
        else if (old && is(old, "running"))
            rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" is running; it cannot be replaced", job->id);
    }
    if (rc == KG_OK && m->n + n > m->cap) {
        size_t cap = (m->n + n) * 2 + 16;
        entry *grown = realloc(m->jobs, cap * sizeof *grown);
        if (!grown)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        else {
            m->jobs = grown;
            m->cap = cap;
        }
    }
    /* Copies first (only memory can fail), then the table changes. */
    entry *fresh = rc == KG_OK ? calloc(n ? n : 1, sizeof *fresh) : NULL;
    if (rc == KG_OK && !fresh)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == KG_OK; i++) {
        kg_job src = jobs[i];
        src.verdict = src.worker = src.label = NULL;
        src.status = (char *)(jobs[i].status ? jobs[i].status : "queued");
        if (kg_job_copy(&src, &fresh[i].job) != KG_OK)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        else /* NULL: the request names no task (or no memory for a label: listings show none) */
            fresh[i].job.label = kg_store_job_label(&jobs[i]);
    }
    if (rc != KG_OK) {
        for (size_t i = 0; fresh && i < n; i++)
            kg_job_free(&fresh[i].job);
        free(fresh);
        pthread_mutex_unlock(&m->lock);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        entry *old = find(m, jobs[i].id);
        if (old) { /* replaced: the new job joins the queue at its end, as a fresh evaluation should */
            kg_job_free(&old->job);
            memmove(old, old + 1, (size_t)(m->jobs + m->n - (old + 1)) * sizeof *old);
            m->n--;
        }
        entry *e = &m->jobs[m->n++];
        *e = fresh[i];
        e->job.seq = ++m->seq;
        e->job.attempts = 0;
        e->job.started_at = 0;
        e->job.submitted_at = jobs[i].submitted_at > 0 ? jobs[i].submitted_at : t;
        e->job.finished_at = strcmp(e->job.status, "queued") ? t : 0;
        set_facts(e, NULL);
    }
    free(fresh);
    pthread_mutex_unlock(&m->lock);
    return KG_OK;
}

/* A copy of e's job for a caller (without its label, as the other backends). */
static int give(const entry *e, kg_job *out, kg_error *err)
{
    kg_job src = e->job;
    src.label = NULL;
    if (kg_job_copy(&src, out) != KG_OK) {
        memset(out, 0, sizeof *out);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    return KG_OK;
}

static int mem_get(kg_store *base, const char *id, kg_job *out, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    int rc = e ? give(e, out, err) : kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", id ? id : "");
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_find_done(kg_store *base, const char *key, kg_job *out, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->lock);
    entry *hit = NULL;
    for (size_t i = m->n; key && i-- > 0 && !hit;)
        if (is(&m->jobs[i], "done") && !strcmp(m->jobs[i].job.key, key))
            hit = &m->jobs[i];
    int rc = hit ? give(hit, out, err) : kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", key ? key : "");
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_claim(kg_store *base, const char *worker, const kg_route *route, kg_job *out, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->lock);
    /* The window's queued jobs, oldest first (the table is in seq order); routed, the best of them (store.h). */
    entry *window[KG_ROUTE_WINDOW];
    const char *groups[KG_ROUTE_WINDOW];
    size_t n = 0;
    long long oldest = -1;
    for (size_t i = 0; i < m->n && n < (route ? KG_ROUTE_WINDOW : 1); i++)
        if (is(&m->jobs[i], "queued")) {
            if (oldest < 0)
                oldest = m->jobs[i].job.seq;
            if (m->jobs[i].job.seq - oldest >= KG_ROUTE_WINDOW)
                break; /* the window is of sequence numbers from the oldest (store.h: no job waits for ever) */
            groups[n] = m->jobs[i].job.group;
            window[n++] = &m->jobs[i];
        }
    long pick = kg_route_pick(route, groups, n); /* homes live in shared stores only */
    entry *e = pick >= 0 ? window[pick] : NULL;
    int rc;
    if (!e) {
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
    } else if (set_text(&e->job.status, "running") != KG_OK || set_text(&e->job.worker, worker) != KG_OK) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    } else {
        e->job.attempts++;
        e->job.started_at = kg_wall_s();
        rc = give(e, out, err);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int not_running(const char *id, kg_error *err)
{
    return kg_error_set(err, KG_ERR_NOT_FOUND, "job \"%s\" is not running", id);
}

static int mem_finish(kg_store *base, const char *id, const char *status, const char *result,
                      const json_t *result_json, const char *error, const char *key, const char *cached_from, double at,
                      kg_error *err)
{
    memory_store *m = (memory_store *)base;
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    int rc;
    if (!e || !is(e, "running")) {
        rc = not_running(id, err);
    } else {
        kg_job next = {0};
        next.status = kg_strdup(status);
        next.result = result ? kg_strdup(result) : NULL;
        next.error = error ? kg_strdup(error) : NULL;
        next.key = key ? kg_strdup(key) : NULL;
        next.cached_from = cached_from ? kg_strdup(cached_from) : NULL;
        if (!next.status || (result && !next.result) || (error && !next.error) || (key && !next.key) ||
            (cached_from && !next.cached_from)) {
            kg_job_free(&next);
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        } else {
            free(e->job.status);
            e->job.status = next.status;
            free(e->job.result);
            e->job.result = next.result;
            free(e->job.error);
            e->job.error = next.error;
            if (next.key) {
                free(e->job.key);
                e->job.key = next.key;
            }
            if (next.cached_from) {
                free(e->job.cached_from);
                e->job.cached_from = next.cached_from;
            }
            e->job.finished_at = at;
            set_facts(e, result_json);
            rc = KG_OK;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_requeue(kg_store *base, const char *id, const char *reason, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    int rc;
    if (!e || !is(e, "running"))
        rc = not_running(id, err);
    else if (set_text(&e->job.error, reason) != KG_OK || set_text(&e->job.status, "queued") != KG_OK)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    else {
        /* keeps its seq, so its place in the queue: it was claimed in order (as SQLite's) */
        set_text(&e->job.worker, NULL);
        e->job.started_at = 0;
        rc = KG_OK;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int mem_cancel(kg_store *base, const char *id, char was[16], kg_error *err)
{
    memory_store *m = (memory_store *)base;
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    int rc;
    if (!e) {
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", id ? id : "");
    } else {
        snprintf(was, 16, "%s", e->job.status ? e->job.status : "");
        if (!is(e, "queued") && !is(e, "running"))
            rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" has finished (%s)", id, was);
        else if (set_text(&e->job.status, "cancelled") != KG_OK)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        else {
            e->job.finished_at = kg_wall_s();
            rc = KG_OK;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* An ended job's entry goes (the pool's forget_ended: its owner already has the outcome), so the store holds the
 * jobs in flight, not every result of a run; a queued or running job is refused. */
static int mem_forget(kg_store *base, const char *id, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    int rc;
    if (!e) {
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", id ? id : "");
    } else if (is(e, "queued") || is(e, "running")) {
        rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" is %s: only an ended job is forgotten", id, e->job.status);
    } else {
        kg_job_free(&e->job);
        memmove(e, e + 1, (size_t)(m->jobs + m->n - (e + 1)) * sizeof *e); /* the queue keeps its order */
        m->n--;
        rc = KG_OK;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Nothing survives the process, but the contract holds within it: running jobs go back to the queue (a pool
 * restarted over the same store), or fail after max_attempts. */
static int mem_recover(kg_store *base, int max_attempts, int *requeued, int *failed, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    pthread_mutex_lock(&m->lock);
    int rc = KG_OK;
    for (size_t i = 0; i < m->n && rc == KG_OK; i++) {
        entry *e = &m->jobs[i];
        if (!is(e, "running"))
            continue;
        if (e->job.attempts >= max_attempts) {
            char why[200];
            snprintf(why, sizeof why,
                     "the evaluation was interrupted %d times (its process died each time); it is not run again",
                     e->job.attempts);
            if (set_text(&e->job.status, "failed") != KG_OK || set_text(&e->job.error, why) != KG_OK)
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
            e->job.finished_at = kg_wall_s();
            (*failed)++;
        } else {
            if (set_text(&e->job.status, "queued") != KG_OK)
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
            set_text(&e->job.worker, NULL);
            (*requeued)++;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static long mem_count(kg_store *base, const char *status)
{
    memory_store *m = (memory_store *)base;
    long n = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n; i++)
        n += !status || is(&m->jobs[i], status);
    pthread_mutex_unlock(&m->lock);
    return n;
}

static long mem_queue_position(kg_store *base, const char *id)
{
    memory_store *m = (memory_store *)base;
    long n = -1;
    pthread_mutex_lock(&m->lock);
    entry *e = find(m, id);
    if (e && is(e, "queued")) {
        n = 0;
        for (size_t i = 0; i < m->n; i++)
            n += is(&m->jobs[i], "queued") && m->jobs[i].job.seq < e->job.seq;
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}

static int mem_list(kg_store *base, const char *status, int limit, json_t **out, kg_error *err)
{
    memory_store *m = (memory_store *)base;
    *out = NULL;
    if (limit <= 0 || limit > 10000)
        limit = 100;
    json_t *arr = json_array();
    if (!arr)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    /* A listing is whole or an error: a summary that cannot be built (memory) fails the listing, never a
     * summary without some fields or a shorter list. */
    int ok = 1;
    pthread_mutex_lock(&m->lock);
    for (size_t i = m->n; ok && i-- > 0 && (int)json_array_size(arr) < limit;) {
        const entry *e = &m->jobs[i];
        if (status && !is(e, status))
            continue;
        json_t *o = json_object();
        ok = kg_json_set(o, "id", kg_json_text(e->job.id)) == 0 &&
             kg_json_set(o, "status", kg_json_text(e->job.status)) == 0 &&
             kg_json_set(o, "verdict", kg_json_text(e->job.verdict)) == 0 &&
             kg_json_set(o, "reward", kg_json_number(e->reward)) == 0 &&
             kg_json_set(o, "speedup", e->has_speedup ? kg_json_number(e->speedup) : json_null()) == 0 &&
             kg_json_set(o, "task", kg_json_text(e->job.label)) == 0 &&
             kg_json_set(o, "attempts", json_integer(e->job.attempts)) == 0 &&
             kg_json_set(o, "submitted_at", kg_json_number(e->job.submitted_at)) == 0 &&
             kg_json_set(o, "started_at", kg_json_number(e->job.started_at)) == 0 &&
             kg_json_set(o, "finished_at", kg_json_number(e->job.finished_at)) == 0 &&
             kg_json_set(o, "cached_from", kg_json_text(e->job.cached_from)) == 0 &&
             kg_json_set(o, "error", kg_json_text(e->job.error)) == 0 &&
             kg_json_set(o, "coverage", e->coverage >= 0 ? kg_json_number(e->coverage) : json_null()) == 0;
        if (!ok) {
            json_decref(o);
            break;
        }
        ok = kg_json_push(arr, o) == 0;
    }
    pthread_mutex_unlock(&m->lock);
    if (!ok) {
        json_decref(arr);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory listing jobs");
    }
    *out = arr;
    return KG_OK;
}

static void mem_durability(kg_store *base, kg_store_durability *out)
{
    out->durable = 0;
    snprintf(out->why, sizeof out->why, "a memory store's jobs live as long as its process");
}

static const kg_store_ops memory_ops = {
    .name = "memory",
    .flags = KG_STORE_FORGETS,
    .close = mem_close,
    .put_many = mem_put_many,
    .get = mem_get,
    .find_done = mem_find_done,
    .claim = mem_claim,
    .finish = mem_finish,
    .requeue = mem_requeue,
    .cancel = mem_cancel,
    .count = mem_count,
    .list = mem_list,
    .queue_position = mem_queue_position,
    .forget = mem_forget,
    /* check NULL: nothing can be lost under it.  require_durable NULL: no one asks it for durability. */
    .durability = mem_durability,
    .recover = mem_recover,
};
