/* store.c — the job store's backend-neutral part (see store.h): dispatch through the backend's method table
 * (backend.h), what a backend leaves NULL, and the helpers the backends share. */
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/result_read.h"
#include "store/backend.h"
#include "util/util.h"

void kg_store_base_init(kg_store *s, const kg_store_ops *ops)
{
    s->ops = ops;
    s->marks = NULL;
    pthread_mutex_init(&s->marks_lock, NULL);
    s->watchers = NULL;
    s->backend_watching = 0;
    pthread_mutex_init(&s->watch_lock, NULL);
    pthread_mutex_init(&s->news_lock, NULL);
}

void kg_store_base_fini(kg_store *s)
{
    for (kg_store_watcher *w = s->watchers, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    s->watchers = NULL;
    pthread_mutex_destroy(&s->watch_lock);
    pthread_mutex_destroy(&s->news_lock);
    for (kg_store_mark *m = s->marks, *next; m; m = next) {
        next = m->next;
        free(m->key);
        free(m->id);
        free(m);
    }
    s->marks = NULL;
    pthread_mutex_destroy(&s->marks_lock);
}

int kg_store_open(const char *path, kg_store **out, kg_error *err)
{
    *out = NULL;
    if (!path)
        return kg_error_set(err, KG_ERR_INVALID, "the job store needs a path");
    if (!strncmp(path, "redis://", 8))
        return kg_store_redis_open(path, out, err);
    if (!strcmp(path, KG_STORE_MEMORY))
        return kg_store_memory_open(out, err);
    return kg_store_sqlite_open(path, out, err);
}

void kg_store_close(kg_store *s)
{
    if (s)
        s->ops->close(s);
}

int kg_store_has(const kg_store *s, unsigned flag)
{
    return (s->ops->flags & flag) == flag;
}

const char *kg_store_kind(const kg_store *s)
{
    return s->ops->name;
}

void kg_job_free(kg_job *j)
{
    if (!j)
        return;
    free(j->id);
    free(j->status);
    free(j->key);
    free(j->request);
    free(j->result);
    free(j->error);
    free(j->verdict);
    free(j->worker);
    free(j->cached_from);
    free(j->label);
    free(j->group);
    memset(j, 0, sizeof *j);
}

static int dup_field(const char *from, char **to)
{
    *to = NULL;
    return from && !(*to = kg_strdup(from));
}

int kg_job_copy(const kg_job *from, kg_job *to)
{
    *to = *from;
    int bad = dup_field(from->id, &to->id) | dup_field(from->status, &to->status) | dup_field(from->key, &to->key) |
              dup_field(from->request, &to->request) | dup_field(from->result, &to->result) |
              dup_field(from->error, &to->error) | dup_field(from->verdict, &to->verdict) |
              dup_field(from->worker, &to->worker) | dup_field(from->cached_from, &to->cached_from) |
              dup_field(from->label, &to->label) | dup_field(from->group, &to->group);
    if (bad) {
        kg_job_free(to);
        return KG_ERR_NOMEM;
    }
    return KG_OK;
}

/* verdict, reward, speedup and coverage of a result, for listings (backend.h). */
void kg_store_result_facts(const char *result, const json_t *result_json, char **verdict, double *reward,
                           double *speedup, int *has_speedup, double *coverage)
{
    *verdict = NULL;
    *coverage = -1;
    *reward = 0;
    *speedup = 0;
    *has_speedup = 0;
    json_t *parsed = !result_json && result ? json_loads(result, 0, NULL) : NULL;
    const json_t *r = result_json ? result_json : parsed;
    if (!r)
        return;
    kg_result_view v;
    kg_result_read(r, &v);
    *verdict = kg_strdup(v.verdict);
    if (!isnan(v.outcome.staged_reward))
        *reward = v.outcome.staged_reward;
    if (!isnan(v.outcome.speedup)) {
        *speedup = v.outcome.speedup;
        *has_speedup = 1;
    }
    if (!isnan(v.outcome.coverage))
        *coverage = v.outcome.coverage;
    json_decref(parsed);
}

char *kg_store_job_label(const kg_job *job)
{
    if (job->label)
        return kg_strdup(job->label);
    json_t *r = job->request ? json_loads(job->request, 0, NULL) : NULL;
    char *label = kg_strdup(json_string_value(json_object_get(r, "task")));
    json_decref(r);
    return label;
}

int kg_store_put_many(kg_store *s, const kg_job *jobs, size_t n, const int *replace, kg_error *err)
{
    return s->ops->put_many(s, jobs, n, replace, err);
}

int kg_store_put(kg_store *s, const kg_job *job, int replace, kg_error *err)
{
    return kg_store_put_many(s, job, 1, &replace, err);
}

int kg_store_get(kg_store *s, const char *id, kg_job *out, kg_error *err)
{
    return s->ops->get(s, id, out, err);
}

int kg_store_find_done(kg_store *s, const char *key, kg_job *out, kg_error *err)
{
    return s->ops->find_done(s, key, out, err);
}

int kg_store_claim(kg_store *s, const char *worker, kg_job *out, kg_error *err)
{
    return s->ops->claim(s, worker, NULL, out, err);
}

int kg_store_claim_routed(kg_store *s, const char *worker, const kg_route *r, kg_job *out, kg_error *err)
{
    return s->ops->claim(s, worker, r, out, err);
}

/* How many entries of list are g (the busy list holds a group once for each judge of it at work). */
static size_t count_in(const char *g, const char *const *list, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i], g))
            c++;
    return c;
}

/* The rank (store.h) of a queued job of `group` (NULL: none) under r, homes aside (rank 3: another process's
 * task, which needs the homes Redis alone keeps).  redis.c's claim script ranks in Lua by the same rule, with
 * homes: a change here is a change there. */
static int route_rank(const kg_route *r, const char *group)
{
    if (!group || !group[0])
        return 1;
    if (count_in(group, r->hot, r->nhot))
        return 0;
    if (count_in(group, r->busy, r->nbusy))
        return 2;
    return 1;
}

long kg_route_pick(const kg_route *r, const char *const *groups, size_t n)
{
    long best = n ? 0 : -1;
    int best_rank = 4;
    for (size_t i = 0; i < n && best_rank > 0; i++) {
        int rank = r ? route_rank(r, groups[i]) : 0;
        if (rank < best_rank) {
            best = (long)i;
            best_rank = rank;
        }
    }
    /* Only busy tasks: the one with the most queued jobs in the window for each of its judges at work here
     * (store.h), its oldest job; ties to the oldest. */
    if (best_rank == 2) {
        size_t best_q = 0, best_b = 1;
        for (size_t i = 0; i < n; i++) {
            if (!groups[i] || route_rank(r, groups[i]) != 2)
                continue;
            if (count_in(groups[i], groups, i)) /* only a group's oldest job stands for it */
                continue;
            size_t q = count_in(groups[i], groups, n), b = count_in(groups[i], r->busy, r->nbusy);
            if (q * best_b > best_q * b) {
                best = (long)i;
                best_q = q;
                best_b = b;
            }
        }
    }
    return best;
}

int kg_store_finish(kg_store *s, const char *id, const char *status, const char *result, const char *error,
                    kg_error *err)
{
    return kg_store_finish_as(s, id, status, result, error, NULL, NULL, err);
}

int kg_store_finish_as(kg_store *s, const char *id, const char *status, const char *result, const char *error,
                       const char *key, const char *cached_from, kg_error *err)
{
    return kg_store_finish_at(s, id, status, result, NULL, error, key, cached_from, kg_wall_s(), err);
}

int kg_store_finish_at(kg_store *s, const char *id, const char *status, const char *result, const json_t *result_json,
                       const char *error, const char *key, const char *cached_from, double at, kg_error *err)
{
    if (!id || !status || (strcmp(status, "done") && strcmp(status, "failed")))
        return kg_error_set(err, KG_ERR_INVALID, "a job finishes as done or failed");
    return s->ops->finish(s, id, status, result, result_json, error, key, cached_from, at, err);
}

int kg_store_requeue(kg_store *s, const char *id, const char *reason, kg_error *err)
{
    return s->ops->requeue(s, id, reason, err);
}

int kg_store_check(kg_store *s, kg_error *err)
{
    return s->ops->check ? s->ops->check(s, err) : KG_OK;
}

int kg_store_require_durable(kg_store *s, int accept_volatile, kg_error *err)
{
    return s->ops->require_durable ? s->ops->require_durable(s, accept_volatile, err) : KG_OK;
}

void kg_store_durability_get(kg_store *s, kg_store_durability *out)
{
    memset(out, 0, sizeof *out);
    if (s->ops->durability)
        s->ops->durability(s, out);
    else
        out->durable = 1;
}

static void news(void *arg, const char *id);

int kg_store_cancel(kg_store *s, const char *id, char was[16], kg_error *err)
{
    int rc = s->ops->cancel(s, id, was, err);
    if (rc == KG_OK)
        news(s, id); /* this process's own cancel: its watchers (a worker running the job) hear of it now */
    return rc;
}

int kg_store_recover(kg_store *s, int max_attempts, int *requeued, int *failed, kg_error *err)
{
    *requeued = *failed = 0;
    return s->ops->recover ? s->ops->recover(s, max_attempts, requeued, failed, err) : KG_OK;
}

long kg_store_count(kg_store *s, const char *status)
{
    return s->ops->count(s, status);
}

long kg_store_queue_position(kg_store *s, const char *id)
{
    return s->ops->queue_position(s, id);
}

int kg_store_forget(kg_store *s, const char *id, kg_error *err)
{
    if (!s->ops->forget)
        return kg_error_set(err, KG_ERR_INVALID, "the %s store keeps its ended jobs", s->ops->name);
    return s->ops->forget(s, id, err);
}

int kg_store_list(kg_store *s, const char *status, int limit, json_t **out, kg_error *err)
{
    return s->ops->list(s, status, limit, out, err);
}

void kg_store_configure(kg_store *s, double lease_s, int max_attempts, double result_ttl_s)
{
    if (s->ops->configure)
        s->ops->configure(s, lease_s, max_attempts, result_ttl_s);
}

int kg_store_heartbeat(kg_store *s, const json_t *workers, double ttl_s, kg_error *err)
{
    return s->ops->heartbeat ? s->ops->heartbeat(s, workers, ttl_s, err) : KG_OK;
}

int kg_store_workers(kg_store *s, json_t **out, kg_error *err)
{
    *out = NULL;
    if (!s->ops->workers)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "a local store has no fleet");
    return s->ops->workers(s, out, err);
}

/* In-process marks (a backend without its own): every worker that can follow a job of this store runs in this
 * process, so a mark needs no lease: it lives until its leader ends it (kg_store_inflight_end after the leader's
 * outcome is stored), or a follower finds its job over and names it stale. */
static kg_store_mark **mark_find(kg_store *s, const char *key)
{
    kg_store_mark **p = &s->marks;
    while (*p && strcmp((*p)->key, key))
        p = &(*p)->next;
    return p;
}

int kg_store_inflight_lead(kg_store *s, const char *key, const char *id, const char *stale, char leader[160],
                           kg_error *err)
{
    leader[0] = '\0';
    if (s->ops->inflight_lead)
        return s->ops->inflight_lead(s, key, id, stale, leader, err);
    int rc = KG_OK;
    pthread_mutex_lock(&s->marks_lock);
    kg_store_mark **p = mark_find(s, key);
    if (*p && !(stale && stale[0] && !strcmp((*p)->id, stale))) {
        snprintf(leader, 160, "%s", (*p)->id);
    } else {
        char *nid = kg_strdup(id);
        kg_store_mark *m = *p ? *p : calloc(1, sizeof *m);
        char *nkey = *p ? NULL : kg_strdup(key);
        if (!nid || !m || (!*p && !nkey)) {
            free(nid);
            free(nkey);
            if (!*p)
                free(m);
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        } else {
            free(m->id);
            m->id = nid;
            if (!*p) {
                m->key = nkey;
                m->next = NULL;
                *p = m;
            }
            snprintf(leader, 160, "%s", id);
        }
    }
    pthread_mutex_unlock(&s->marks_lock);
    return rc;
}

int kg_store_inflight_leader(kg_store *s, const char *key, char leader[160], kg_error *err)
{
    leader[0] = '\0';
    if (s->ops->inflight_leader)
        return s->ops->inflight_leader(s, key, leader, err);
    pthread_mutex_lock(&s->marks_lock);
    kg_store_mark **p = mark_find(s, key);
    if (*p)
        snprintf(leader, 160, "%s", (*p)->id);
    pthread_mutex_unlock(&s->marks_lock);
    return KG_OK;
}

int kg_store_inflight_end(kg_store *s, const char *key, const char *id, kg_error *err)
{
    if (s->ops->inflight_end)
        return s->ops->inflight_end(s, key, id, err);
    pthread_mutex_lock(&s->marks_lock);
    kg_store_mark **p = mark_find(s, key);
    if (*p && !strcmp((*p)->id, id)) {
        kg_store_mark *m = *p;
        *p = m->next;
        free(m->key);
        free(m->id);
        free(m);
    }
    pthread_mutex_unlock(&s->marks_lock);
    return KG_OK;
}

/* News for every watcher: the backend's (its thread), or this process's own cancel (kg_store_cancel's). */
static void news(void *arg, const char *id)
{
    kg_store *s = arg;
    pthread_mutex_lock(&s->news_lock);
    for (kg_store_watcher *w = s->watchers; w; w = w->next)
        w->on_end(w->arg, id);
    pthread_mutex_unlock(&s->news_lock);
}

int kg_store_watch(kg_store *s, void (*on_end)(void *arg, const char *id), void *arg, kg_error *err)
{
    kg_store_watcher *w = calloc(1, sizeof *w);
    if (!w)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    w->on_end = on_end;
    w->arg = arg;
    pthread_mutex_lock(&s->watch_lock);
    int rc = KG_OK;
    /* The backend's news, once for all watchers: started with the first. */
    if (s->ops->watch && !s->backend_watching) {
        rc = s->ops->watch(s, news, s, err);
        s->backend_watching = rc == KG_OK;
    }
    if (rc == KG_OK) {
        pthread_mutex_lock(&s->news_lock);
        w->next = s->watchers;
        s->watchers = w;
        pthread_mutex_unlock(&s->news_lock);
    } else {
        free(w);
    }
    pthread_mutex_unlock(&s->watch_lock);
    return rc;
}

void kg_store_unwatch(kg_store *s, void (*on_end)(void *arg, const char *id), void *arg)
{
    pthread_mutex_lock(&s->watch_lock);
    pthread_mutex_lock(&s->news_lock);
    for (kg_store_watcher **p = &s->watchers; *p; p = &(*p)->next)
        if ((*p)->on_end == on_end && (*p)->arg == arg) {
            kg_store_watcher *gone = *p;
            *p = gone->next;
            free(gone);
            break;
        }
    int last = !s->watchers;
    pthread_mutex_unlock(&s->news_lock); /* the backend's thread may be waiting for it: let it finish first */
    if (last && s->backend_watching) {
        s->ops->unwatch(s);
        s->backend_watching = 0;
    }
    pthread_mutex_unlock(&s->watch_lock);
}
