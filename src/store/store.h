/*
 * store.h — the service's job table: every job (queued, running, done,
 * failed, cancelled) with its request and its result.  Three backends behind
 * one method table (backend.h), chosen by the path given to kg_store_open:
 *   a file path        SQLite in WAL mode (sqlite.c): durable, one server;
 *   "redis://HOST..."  Redis (redis.c): durable when Redis persists, shared by
 *                      a fleet of API servers and workers;
 *   KG_STORE_MEMORY    memory (memory.c): one process's jobs, lost with it
 *                      (bench and rollout, whose jobs live as long as the run).
 * The durable ones hold every acknowledged job, so a restarted server loses
 * nothing.
 *
 * The queue is the table itself: kg_store_claim() takes the oldest queued job
 * and marks it running in one transaction; kg_store_recover() (at start-up)
 * puts the jobs that were running back in the queue, or fails those that have
 * already been attempted max_attempts times (a job that kills the server must
 * not kill it forever).
 *
 * Threads: every function may be called from any thread (each backend locks
 * for itself).  Ownership: kg_job strings are malloc'd and released with
 * kg_job_free(); json_t results are new references the caller decrefs.
 */
#ifndef KG_STORE_H
#define KG_STORE_H

#include <jansson.h>

#include "kgym/error.h"

typedef struct kg_store kg_store;

typedef struct kg_job {
    char *id;
    char *status;       /* queued | running | done | failed | cancelled */
    char *key;          /* content hash of (task, candidate, protocol) */
    char *request;      /* the normalised request (JSON text) */
    char *result;       /* kgym result JSON text (done), else NULL */
    char *error;        /* why the job failed (failed), else NULL */
    char *verdict;      /* copied from the result for listings, else NULL */
    char *worker;       /* who ran it last */
    char *cached_from;  /* the job whose result was reused, else NULL */
    char *label;        /* kg_store_put: the task label listings show (NULL: read from the request);
                         * kg_store_get leaves it NULL */
    char *group;        /* the routing group (kg_store_claim_routed): SHA-256 (hex) of the bytes of the task the
                         * judge loads, or NULL (no routing) */
    int attempts;       /* times it was claimed */
    double submitted_at, started_at, finished_at; /* Unix seconds; 0 = not yet */
    long long seq;      /* queue order */
} kg_job;

/* The path that opens the memory backend. */
#define KG_STORE_MEMORY ":kgym-memory:"

int kg_store_open(const char *path, kg_store **out, kg_error *err);
void kg_store_close(kg_store *s);

/* Inserts a job (id, key, request, status "queued" or "done" with result and
 * cached_from).  replace != 0 overwrites an existing job of that id unless it
 * is running (KG_ERR_INVALID then); replace == 0 and an existing id:
 * KG_ERR_INVALID. */
int kg_store_put(kg_store *s, const kg_job *job, int replace, kg_error *err);
/* Inserts n jobs all or nothing (one transaction; one Redis script): a crash
 * or an error leaves none of them.  replace[i] as kg_store_put's (NULL: 0).
 * KG_OK only once every job is durably stored (a failed COMMIT, a full disk,
 * a database file deleted under the server, an unreachable Redis: KG_ERR_IO,
 * and nothing may be acknowledged). */
int kg_store_put_many(kg_store *s, const kg_job *jobs, size_t n, const int *replace, kg_error *err);
/* KG_ERR_NOT_FOUND when there is no such job. */
int kg_store_get(kg_store *s, const char *id, kg_job *out, kg_error *err);
/* The most recent done job with this key (KG_ERR_NOT_FOUND if none). */
int kg_store_find_done(kg_store *s, const char *key, kg_job *out, kg_error *err);
/* Claims the oldest queued job for worker: status running, attempts + 1.
 * KG_ERR_NOT_FOUND when the queue is empty. */
int kg_store_claim(kg_store *s, const char *worker, kg_job *out, kg_error *err);
/* Routing a claim.  A judge is kept between evaluations only for the task whose bytes it ran (docs/protocol.md,
 * "A judge kept between evaluations"), so the samples of one task (a GRPO group) are cheapest when they follow
 * each other on one judge: its CUDA context, loaded kernels, caches and the task's reference time are there
 * already.  A job's group (kg_job.group) names its task by the SHA-256 of the reference bytes, the key the
 * supervisor keeps judges by.  A routed claim looks at the queued jobs whose sequence numbers are within
 * KG_ROUTE_WINDOW of the oldest queued job's and takes a job of the best rank (store.c route_rank; rank 3
 * needs homes, which Redis alone keeps: its claim script ranks by the same rule in Lua):
 *   0  its group is in `hot`: a judge of that task waits in this process;
 *   1  its group is neither busy here nor served by another process of the fleet (a task nobody holds: it gets a
 *      new judge), or it has no group;
 *   2  its group is busy here: every judge of it here is at work (a second judge here);
 *   3  its group is served by another process (its home, below): this one spills onto it.
 * Within ranks 0 and 1 the oldest job goes first.  Within ranks 2 and 3 (every task queued is held: a new judge
 * whichever is taken) the task goes first that has the most queued jobs in the window for each of its judges at
 * work here (`busy` names a group once per judge; another process's task counts as one judge), its oldest job
 * first, ties to the oldest: the new judge is kept for the task with the most work left per judge, where it will
 * serve the most samples, instead of the task that is oldest, whose last sample it may be (the GRPO mix on one
 * H200, ten jobs: 15-19 new judges for 64 evaluations against 18-32, x1.038 and x1.073 evaluations an hour).
 * So a pool's workers spread over different tasks and each task's samples go, one after another, to the judge
 * that ran its first; a queue holding only busy tasks is still served (ranks 2 and 3).  Routing orders the queue
 * and leaves no job behind: the window is one of sequence numbers, so once a job is the oldest queued, fewer than
 * KG_ROUTE_WINDOW jobs queued after it can be claimed before it, however well they rank (a window of the oldest
 * jobs by count would let a task with a judge waiting pass an older job for as long as its jobs kept coming).  In a fleet (a store with KG_STORE_SHARED) a claim of a job with a group makes
 * `home` that group's home for home_ttl_s unless another live process is (renewed by each such claim of its
 * home): a task's samples stay on one GPU while that GPU has room.  Homes are hints, never ownership: a job is
 * claimed by whoever takes it, exactly as without routing. */
#define KG_ROUTE_WINDOW 256
typedef struct kg_route {
    const char *const *hot; /* groups with a judge waiting in this process */
    size_t nhot;
    const char *const *busy; /* groups evaluated in this process now */
    size_t nbusy;
    const char *home;  /* this process's name in a fleet (shared stores only; NULL: no homes) */
    double home_ttl_s; /* how long a home lives after its last claim of the group */
} kg_route;
/* kg_store_claim, routed by r (NULL: the oldest job, as kg_store_claim). */
int kg_store_claim_routed(kg_store *s, const char *worker, const kg_route *r, kg_job *out, kg_error *err);

/* Ends a running job: status "done" (result) or "failed" (error).
 * KG_ERR_NOT_FOUND when the job is no longer running (cancelled meanwhile). */
int kg_store_finish(kg_store *s, const char *id, const char *status, const char *result,
                    const char *error, kg_error *err);
/* kg_store_finish, and: key (non-NULL) replaces the job's content key with the
 * one its evaluating worker computed (a done result is found again under it:
 * kg_store_find_done); cached_from (non-NULL) names the job whose result this
 * is (answered from the store when claimed, or an identical job followed in
 * flight). */
int kg_store_finish_as(kg_store *s, const char *id, const char *status, const char *result, const char *error,
                       const char *key, const char *cached_from, kg_error *err);
/* kg_store_finish_as with its finished_at (Unix s) given: a worker that hands the finished job to its waiters in
 * memory (sched.c) tells them the time the store holds.  result_json: the result parsed, when the caller holds it
 * (the store reads the listing facts from it instead of parsing result again), or NULL. */
int kg_store_finish_at(kg_store *s, const char *id, const char *status, const char *result, const json_t *result_json,
                       const char *error, const char *key, const char *cached_from, double at, kg_error *err);
/* Gives a running job back to the queue (its result could not be stored),
 * with reason kept in its error field until it finishes.  KG_ERR_NOT_FOUND
 * when it is not running. */
int kg_store_requeue(kg_store *s, const char *id, const char *reason, kg_error *err);
/* Is the store usable?  SQLite: the database file is still the one opened
 * (not deleted or replaced).  Redis: it answers, and would not lose jobs
 * (kg_store_require_durable); and its data set is the one this process knew:
 * one found lost (its mark gone: a restart without persistence, a flush) is
 * logged and counted (kg_store_durability_get).  KG_ERR_IO with the reason. */
int kg_store_check(kg_store *s, kg_error *err);

/* Whether an acknowledged job survives a restart of the store. */
typedef struct kg_store_durability {
    int durable;          /* 1: yes (SQLite; Redis with appendonly yes and no eviction); 0: no (why says why);
                           * -1: unknown (Redis refused CONFIG and INFO) */
    char why[512];        /* "" when durable */
    char appendfsync[16]; /* Redis's fsync policy ("" when unknown, or SQLite) */
    long data_lost;       /* times this process found Redis's data set lost (kg_store_check) */
    double data_lost_at;  /* the last time (Unix s), 0 if never */
} kg_store_durability;
/* Redis: asks it whether it persists jobs, and fails (KG_ERR_IO, naming the
 * fix) when it does not, unless accept_volatile; the answer is asked again
 * by kg_store_check (after Redis was away, after a loss, and every 30 s),
 * and while it is "no" without accept_volatile no job is accepted
 * (kg_store_put_many: KG_ERR_IO).  Unknown is accepted.  SQLite: KG_OK. */
int kg_store_require_durable(kg_store *s, int accept_volatile, kg_error *err);
void kg_store_durability_get(kg_store *s, kg_store_durability *out);
/* Cancels a queued or running job; *was receives its former status (at least
 * 16 bytes).  KG_ERR_NOT_FOUND if no such job; finished jobs stay as they are
 * (KG_ERR_INVALID). */
int kg_store_cancel(kg_store *s, const char *id, char was[16], kg_error *err);
/* Start-up: running jobs go back to the queue, or to "failed" when they were
 * attempted max_attempts times already.  Counts are returned. */
int kg_store_recover(kg_store *s, int max_attempts, int *requeued, int *failed, kg_error *err);
/* Number of jobs with a status (NULL: all). */
long kg_store_count(kg_store *s, const char *status);
/* Jobs by status (NULL: any), newest first: summaries without request and
 * result (id, status, verdict, reward, speedup, task, attempts, times). */
int kg_store_list(kg_store *s, const char *status, int limit, json_t **out, kg_error *err);
/* Position in the queue (0 = next), -1 when not queued. */
long kg_store_queue_position(kg_store *s, const char *id);
/* Removes an ended job (done, failed or cancelled) for good, for a run whose consumer took the job's outcome when
 * it ended and never reads it again (bench, rollout: kg_sched_options.forget_ended), so that the store holds the
 * jobs in flight rather than every job of the run.  KG_ERR_NOT_FOUND: no such job.  KG_ERR_INVALID: the job has
 * not ended (queued or running: forgetting it would lose it), or the store keeps its ended jobs (it lacks
 * KG_STORE_FORGETS: SQLite and Redis are the service's record of its jobs, Redis's for their TTL). */
int kg_store_forget(kg_store *s, const char *id, kg_error *err);

void kg_job_free(kg_job *job);

/* What a backend promises beyond the functions' contracts (its method table's flags): callers ask for the
 * property they rely on, never for a backend by name. */
#define KG_STORE_SHARED 1u      /* other processes claim and finish its jobs (a fleet): workers, heartbeats */
#define KG_STORE_LEASED 2u      /* a claimed job is held by a lease that heartbeats renew; a worker that loses
                                 * it loses the job (another takes it over) instead of recovery at start-up */
#define KG_STORE_CLAIM_WAITS 4u /* kg_store_claim itself waits a while for a job when the queue is empty */
#define KG_STORE_FORGETS 8u     /* kg_store_forget removes ended jobs (memory); without it they are kept */
#define KG_STORE_NEWS 16u       /* jobs ended by other processes come as news (kg_store_watch): Redis's kgym:done */
int kg_store_has(const kg_store *s, unsigned flag);
/* The backend's name ("memory", "sqlite", "redis"), for messages. */
const char *kg_store_kind(const kg_store *s);
/* Redis only: lease of a claimed job (a job whose worker stops renewing it is
 * claimed again after this long), attempts before a job is failed, TTL of
 * finished jobs.  No effect on SQLite (attempts are kg_store_recover's). */
void kg_store_configure(kg_store *s, double lease_s, int max_attempts, double result_ttl_s);
/* Redis only: publishes the workers (kg_sched_workers' objects) with a TTL
 * and renews the lease of each one's current job; ttl_s <= 0 removes them
 * (a worker that stops).  No-op on SQLite. */
int kg_store_heartbeat(kg_store *s, const json_t *workers, double ttl_s, kg_error *err);
/* Redis only: the fleet's live workers (KG_ERR_NOT_FOUND on a store with no fleet). */
int kg_store_workers(kg_store *s, json_t **out, kg_error *err);

/* In-flight dedup: one evaluation per content key at a time.  Redis: across
 * the fleet; the other backends keep the marks in this process (where all
 * their workers run), and a mark lives until its leader ends it.  The mark
 * inflight:{key} names the job that evaluates that content now, and expires
 * one lease after its last renewal (the leader's worker's heartbeat renews it:
 * kg_store_heartbeat with a worker's "current_key"), so a leader whose worker
 * died stops leading by itself.
 * kg_store_inflight_lead makes job id the leader of key unless another mark
 * lives: leader receives the leading job's id (id itself when it leads, the
 * mark then renewed).  stale (may be NULL or ""): a leader known to be over
 * (its job not running): its mark is replaced. */
int kg_store_inflight_lead(kg_store *s, const char *key, const char *id, const char *stale, char leader[160],
                           kg_error *err);
/* The job that leads key now ("" when no mark lives). */
int kg_store_inflight_leader(kg_store *s, const char *key, char leader[160], kg_error *err);
/* Removes id's mark on key (nothing when another job leads). */
int kg_store_inflight_end(kg_store *s, const char *key, const char *id, kg_error *err);

/* News of ended jobs, for waiters and for the workers running them: on_end(arg, id) is called when a job of the
 * store was cancelled by this process (every backend: from kg_store_cancel's thread, before it returns) and,
 * on a store with KG_STORE_NEWS, when a job ended in any process (Redis: a subscription to kgym:done, which
 * every finish and cancel publishes; from a thread of the store's), and on_end(arg, NULL) when news may have
 * been missed (the subscription was lost and is back): read every job concerned.  News is a hint, the store
 * the truth: a watcher reads the job to know how it ended.  Without KG_STORE_NEWS, what other processes do
 * comes as no news (SQLite: another server or worker process sharing the file): read the store now and then.
 * Any number of watchers; on_end must not call kg_store_watch or kg_store_unwatch.  kg_store_unwatch(s, on_end,
 * arg) removes the watcher (after it returns, on_end is not running for it) before arg goes. */
int kg_store_watch(kg_store *s, void (*on_end)(void *arg, const char *id), void *arg, kg_error *err);
void kg_store_unwatch(kg_store *s, void (*on_end)(void *arg, const char *id), void *arg);

#endif
