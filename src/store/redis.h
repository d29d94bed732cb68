/*
 * redis.h — the job table on Redis, for a fleet: API servers that keep no
 * state and `kgym worker` processes on any number of GPU nodes.  store.c
 * dispatches to these when the database is a redis:// URL; the functions
 * mirror store.h's.
 *
 * Keys (prefix "kgym:"): job:{id} hash (the job; TTL once finished),
 * stream (a Redis Stream of job ids, consumer group "workers": at-least-once
 * delivery; a claimed entry stays pending until the job is finished; a
 * worker's heartbeat renews its entries (XCLAIM JUSTID); an entry idle longer
 * than the lease is taken over by another worker with XAUTOCLAIM), queued
 * (zset id → seq), recent (zset id → seq, capped), done:{key} (content key →
 * id, TTL), counts (hash status → n), workers (set) + worker:{name} (hash,
 * TTL: heartbeats), seq (counter), inflight:{key} (content key → the job
 * evaluating it now, expiring a lease after the leader's last heartbeat);
 * epoch (the data set's mark: written once, never expiring; gone or changed
 * means Redis lost what it held); PUBLISH kgym:done {id} on every finish.
 *
 * Threads: a small pool of connections behind a mutex.  Ownership as store.h.
 */
#ifndef KG_STORE_REDIS_H
#define KG_STORE_REDIS_H

#include <jansson.h>

#include "kgym/error.h"
#include "store/store.h"

typedef struct kg_rstore kg_rstore;

int kg_rstore_open(const char *url, kg_rstore **out, kg_error *err);
void kg_rstore_close(kg_rstore *r);
void kg_rstore_configure(kg_rstore *r, double lease_s, int max_attempts, double result_ttl_s);
int kg_rstore_put_many(kg_rstore *r, const kg_job *jobs, size_t n, const int *replace, kg_error *err);
int kg_rstore_requeue(kg_rstore *r, const char *id, const char *reason, kg_error *err);
int kg_rstore_check(kg_rstore *r, kg_error *err);
int kg_rstore_require_durable(kg_rstore *r, int accept_volatile, kg_error *err);
void kg_rstore_durability(kg_rstore *r, kg_store_durability *out);
int kg_rstore_get(kg_rstore *r, const char *id, kg_job *out, kg_error *err);
int kg_rstore_find_done(kg_rstore *r, const char *key, kg_job *out, kg_error *err);
int kg_rstore_claim(kg_rstore *r, const char *worker, kg_job *out, kg_error *err);
int kg_rstore_finish(kg_rstore *r, const char *id, const char *status, const char *result, const char *error,
                     const char *key, const char *cached_from, kg_error *err);
int kg_rstore_cancel(kg_rstore *r, const char *id, char was[16], kg_error *err);
long kg_rstore_count(kg_rstore *r, const char *status);
int kg_rstore_list(kg_rstore *r, const char *status, int limit, json_t **out, kg_error *err);
long kg_rstore_queue_position(kg_rstore *r, const char *id);
int kg_rstore_heartbeat(kg_rstore *r, const json_t *workers, double ttl_s, kg_error *err);
int kg_rstore_workers(kg_rstore *r, json_t **out, kg_error *err);
int kg_rstore_inflight_lead(kg_rstore *r, const char *key, const char *id, const char *stale, char leader[160],
                            kg_error *err);
int kg_rstore_inflight_leader(kg_rstore *r, const char *key, char leader[160], kg_error *err);
int kg_rstore_inflight_end(kg_rstore *r, const char *key, const char *id, kg_error *err);

#endif
