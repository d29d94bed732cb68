/*
 * backend.h — the job store's method table, for the backends only (memory.c,
 * sqlite.c, redis.c) and store.c, which dispatches to them.  In the manner of
 * SQLite's sqlite3_io_methods: a backend's handle begins with a kg_store (its
 * `base`), whose ops point at the backend's functions; store.c calls them and
 * supplies what a backend leaves NULL (below), so nothing outside src/store
 * asks which backend it has.  What callers may rely on differently is said by
 * the table's flags (kg_store_has), not by the backend's name.
 *
 * Each method has the contract of the kg_store_* function of the same name
 * (store.h).  Threads and ownership as store.h.
 */
#ifndef KG_STORE_BACKEND_H
#define KG_STORE_BACKEND_H

#include <pthread.h>

#include "store/store.h"

typedef struct kg_store_ops {
    const char *name; /* "memory", "sqlite", "redis": for messages */
    unsigned flags;   /* KG_STORE_* (store.h) */
    void (*close)(kg_store *s);
    int (*put_many)(kg_store *s, const kg_job *jobs, size_t n, const int *replace, kg_error *err);
    int (*get)(kg_store *s, const char *id, kg_job *out, kg_error *err);
    int (*find_done)(kg_store *s, const char *key, kg_job *out, kg_error *err);
    /* route: NULL is the oldest queued job (kg_store_claim) */
    int (*claim)(kg_store *s, const char *worker, const kg_route *route, kg_job *out, kg_error *err);
    /* at: the job's finished_at (store.c's kg_wall_s(), or the caller's: kg_store_finish_at) */
    /* result_json: the same result parsed, when the caller holds it (the listing facts are read from it instead
     * of parsing the text again), or NULL. */
    int (*finish)(kg_store *s, const char *id, const char *status, const char *result, const json_t *result_json,
                  const char *error, const char *key, const char *cached_from, double at, kg_error *err);
    int (*requeue)(kg_store *s, const char *id, const char *reason, kg_error *err);
    int (*cancel)(kg_store *s, const char *id, char was[16], kg_error *err);
    long (*count)(kg_store *s, const char *status);
    int (*list)(kg_store *s, const char *status, int limit, json_t **out, kg_error *err);
    long (*queue_position)(kg_store *s, const char *id);
    /* Optional, with the KG_STORE_FORGETS flag: NULL is "ended jobs are kept" (kg_store_forget KG_ERR_INVALID). */
    int (*forget)(kg_store *s, const char *id, kg_error *err);
    /* Optional: NULL is "nothing to check" (KG_OK). */
    int (*check)(kg_store *s, kg_error *err);
    /* Optional: NULL is "every acknowledged job survives a crash of this process" (durable = 1). */
    int (*require_durable)(kg_store *s, int accept_volatile, kg_error *err);
    void (*durability)(kg_store *s, kg_store_durability *out);
    /* Optional: NULL is "nothing to recover at start-up" (leases hand jobs over instead: Redis). */
    int (*recover)(kg_store *s, int max_attempts, int *requeued, int *failed, kg_error *err);
    /* Optional: NULL is "no lease, no TTL" (the settings are ignored). */
    void (*configure)(kg_store *s, double lease_s, int max_attempts, double result_ttl_s);
    /* Optional, both or neither: the fleet's workers.  NULL: no fleet (heartbeat KG_OK, workers
     * KG_ERR_NOT_FOUND). */
    int (*heartbeat)(kg_store *s, const json_t *workers, double ttl_s, kg_error *err);
    int (*workers)(kg_store *s, json_t **out, kg_error *err);
    /* Optional, all three or none: in-flight marks other processes see.  NULL: the marks live in this
     * process (store.c), which is where every worker of a store that is not shared runs. */
    int (*inflight_lead)(kg_store *s, const char *key, const char *id, const char *stale, char leader[160],
                         kg_error *err);
    int (*inflight_leader)(kg_store *s, const char *key, char leader[160], kg_error *err);
    int (*inflight_end)(kg_store *s, const char *key, const char *id, kg_error *err);
    /* Optional, both or neither, with the flag KG_STORE_NEWS: news of jobs ended by other processes.  The backend
     * calls on_end(arg, id) from a thread of its own (and on_end(arg, NULL) when news may have been missed);
     * store.c watches once for all of kg_store_watch's watchers, and adds this process's own cancels.  NULL: the
     * backend cannot tell (memory: every job ends in this process; SQLite: another process sharing the file
     * says nothing). */
    int (*watch)(kg_store *s, void (*on_end)(void *arg, const char *id), void *arg, kg_error *err);
    void (*unwatch)(kg_store *s);
} kg_store_ops;

/* In-process in-flight marks (content key → leading job), for backends without their own. */
typedef struct kg_store_mark {
    char *key, *id;
    struct kg_store_mark *next;
} kg_store_mark;

/* A kg_store_watch watcher (store.c). */
typedef struct kg_store_watcher {
    void (*on_end)(void *arg, const char *id);
    void *arg;
    struct kg_store_watcher *next;
} kg_store_watcher;

/* The head of every backend's handle.  kg_store_base_init/kg_store_base_fini set up and release what store.c
 * keeps for every backend; the backend's open calls the first, its close the second. */
struct kg_store {
    const kg_store_ops *ops;
    pthread_mutex_t marks_lock;
    kg_store_mark *marks;
    pthread_mutex_t watch_lock;  /* one kg_store_watch/unwatch at a time (it starts and stops the backend's) */
    pthread_mutex_t news_lock;   /* guards watchers; held while news is handed out (never while the backend's
                                  * watch is stopped: its thread may be waiting for it) */
    kg_store_watcher *watchers;
    int backend_watching;        /* the backend's watch runs (under watch_lock) */
};
void kg_store_base_init(kg_store *s, const kg_store_ops *ops);
void kg_store_base_fini(kg_store *s);

/* The backends' constructors (store.c's kg_store_open picks one by the path). */
int kg_store_memory_open(kg_store **out, kg_error *err);
int kg_store_sqlite_open(const char *path, kg_store **out, kg_error *err);
int kg_store_redis_open(const char *url, kg_store **out, kg_error *err);

/* Backend-neutral helpers the backends share. */
/* verdict, reward, speedup and coverage of a result, for listings (*verdict malloc'd or NULL; reward 0, speedup
 * absent and coverage -1 where the result has none), read by the one result reader (rl/result_read.h): from
 * result_json when given, else from the text (parsed once here). */
void kg_store_result_facts(const char *result, const json_t *result_json, char **verdict, double *reward,
                           double *speedup, int *has_speedup, double *coverage);
/* The task label of a job for listings: job->label when the submitter set it, else read from its request
 * (malloc'd, NULL when it has none). */
char *kg_store_job_label(const kg_job *job);
/* The index among n queued jobs, oldest first (groups[i]: job i's group or NULL), that a claim routed by r takes
 * (store.h; NULL r: the oldest); -1 when n is 0.  Ranks 0 to 2: homes (rank 3) live in Redis's claim script. */
long kg_route_pick(const kg_route *r, const char *const *groups, size_t n);
/* The job's fields copied (malloc'd strings, as kg_store_get returns them). */
int kg_job_copy(const kg_job *from, kg_job *to);

#endif
