/*
 * redis.c — the job table on Redis, for a fleet: API servers that keep no
 * state and `kgym worker` processes on any number of GPU nodes.  store.c
 * dispatches to this backend's method table (backend.h) when the database is
 * a redis:// URL.
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
 * means Redis lost what it held); PUBLISH kgym:done {id} on every finish;
 * home:{group} (routing: the process serving a task, for a lease) and bound
 * (hash entry → the job a routed claim gave that entry to: claim_script).
 *
 * Threads: a small pool of connections behind a mutex.  Ownership as store.h.
 */
#include "store/backend.h"

#include <hiredis/hiredis.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/json.h"
#include "util/util.h"

#define POOL 16
#define P "kgym:"

typedef struct kg_rstore {
    kg_store base; /* first: the method table */
    char host[256];
    int port, db;
    pthread_mutex_t lock;
    redisContext *idle[POOL];
    int n_idle;
    double lease_s, ttl_s;
    int max_attempts;
    /* Under lock.  Durability: what Redis said when last asked (probe). */
    int accept_volatile; /* --redis-volatile: a Redis that would lose jobs is used all the same */
    int durable;         /* 1, 0 (why says why), -1 (unknown: CONFIG and INFO refused) */
    char why[512];
    char appendfsync[16]; /* "" when unknown */
    double probed_at;
    /* The data set's marker (kg_rstore_check): its value as this process knows it; a Redis whose marker is gone
     * or another has lost what it held. */
    char epoch[96];
    int away; /* the last check found Redis unreachable */
    long lost;
    double lost_at;
    /* kg_store_watch: the subscriber thread (its own connection) */
    pthread_t watcher;
    int watching;
    int watch_stop; /* atomic */
    void (*on_end)(void *arg, const char *id);
    void *on_end_arg;
} kg_rstore;

static redisContext *conn_get(kg_rstore *r, kg_error *err)
{
    pthread_mutex_lock(&r->lock);
    redisContext *c = r->n_idle ? r->idle[--r->n_idle] : NULL;
    pthread_mutex_unlock(&r->lock);
    if (c)
        return c;
    struct timeval tv = {5, 0};
    c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!c || c->err) {
        kg_error_set(err, KG_ERR_IO, "cannot connect to Redis at %s:%d: %s", r->host, r->port,
                     c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    struct timeval rt = {30, 0};
    redisSetTimeout(c, rt);
    if (r->db) {
        redisReply *x = redisCommand(c, "SELECT %d", r->db);
        freeReplyObject(x);
    }
    return c;
}

static void conn_put(kg_rstore *r, redisContext *c)
{
    if (!c)
        return;
    redisContext *stale[POOL];
    int n_stale = 0;
    pthread_mutex_lock(&r->lock);
    if (!c->err && r->n_idle < POOL) {
        r->idle[r->n_idle++] = c;
        c = NULL;
    } else if (c->err == REDIS_ERR_EOF || c->err == REDIS_ERR_IO) {
        /* A connection broken under us: Redis went away (a restart), and the idle ones are from before it and
         * broken too.  Dropped now, or each would fail one more request after Redis is back. */
        n_stale = r->n_idle;
        memcpy(stale, r->idle, sizeof *stale * (size_t)n_stale);
        r->n_idle = 0;
    }
    pthread_mutex_unlock(&r->lock);
    if (c) /* broken or surplus */
        redisFree(c);
    for (int i = 0; i < n_stale; i++)
        redisFree(stale[i]);
}

/* A command's reply; NULL (err filled) on a transport or Redis error. */
static redisReply *cmd(redisContext *c, kg_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *x = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!x) {
        kg_error_set(err, KG_ERR_IO, "Redis: %s", c->errstr[0] ? c->errstr : "no reply");
        return NULL;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        kg_error_set(err, KG_ERR_IO, "Redis: %s", x->str);
        freeReplyObject(x);
        return NULL;
    }
    return x;
}

static int cmd_ok(redisContext *c, kg_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *x = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!x)
        return kg_error_set(err, KG_ERR_IO, "Redis: %s", c->errstr[0] ? c->errstr : "no reply");
    int rc = x->type == REDIS_REPLY_ERROR ? kg_error_set(err, KG_ERR_IO, "Redis: %s", x->str) : KG_OK;
    freeReplyObject(x);
    return rc;
}

/* Creates the consumer group if it is missing: at the first start, and after
 * a Redis restart that lost it (no persistence; XADD alone re-creates the
 * stream without it, and every XREADGROUP then fails with NOGROUP).  From
 * entry 0, not "$": entries queued before the group existed are jobs too
 * (claim drops the entries of jobs that are no longer queued). */
static int ensure_group(redisContext *c, kg_error *err)
{
    redisReply *x = redisCommand(c, "XGROUP CREATE " P "stream workers 0 MKSTREAM");
    int rc = KG_OK;
    if (!x)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", c->errstr[0] ? c->errstr : "no reply");
    else if (x->type == REDIS_REPLY_ERROR && !strstr(x->str, "BUSYGROUP")) /* exists already: fine */
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x->str);
    freeReplyObject(x);
    return rc;
}

/* ---- durability ---- */

#define EPOCH P "epoch"
#define PROBE_EVERY_S 30.0 /* Redis is asked again this often (and after every absence or loss) */

/* A setting of Redis into val ("" when it will not say): CONFIG GET name, or where CONFIG is refused (managed
 * services rename or forbid it) the field of INFO section (NULL: none).  refused receives CONFIG's error the
 * first time.  KG_ERR_IO when Redis does not answer. */
static int setting(redisContext *c, const char *name, const char *section, const char *field, char *val, size_t n,
                   char refused[200], kg_error *err)
{
    val[0] = '\0';
    redisReply *x = redisCommand(c, "CONFIG GET %s", name);
    if (!x)
        return kg_error_set(err, KG_ERR_IO, "Redis: %s", c->errstr[0] ? c->errstr : "no reply");
    if (x->type == REDIS_REPLY_ARRAY && x->elements >= 2 && x->element[1]->type == REDIS_REPLY_STRING)
        snprintf(val, n, "%s", x->element[1]->str);
    else if (x->type == REDIS_REPLY_ERROR && !refused[0])
        snprintf(refused, 200, "CONFIG GET %s: %.150s", name, x->str);
    freeReplyObject(x);
    if (val[0] || !section)
        return KG_OK;
    x = redisCommand(c, "INFO %s", section);
    if (!x)
        return kg_error_set(err, KG_ERR_IO, "Redis: %s", c->errstr[0] ? c->errstr : "no reply");
    size_t fl = strlen(field);
    if (x->type == REDIS_REPLY_STRING && x->str) { /* RESP2: a bulk string */
        for (const char *l = x->str; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            if (!strncmp(l, field, fl) && l[fl] == ':') {
                snprintf(val, n, "%.*s", (int)strcspn(l + fl + 1, "\r\n"), l + fl + 1);
                break;
            }
    }
    freeReplyObject(x);
    return KG_OK;
}

/* Asks Redis whether an acknowledged job survives its restart, and records the answer (r->durable, why,
 * appendfsync).  Durable: appendonly yes, and no eviction (a maxmemory-policy other than noeviction, with a
 * maxmemory, drops jobs and results when memory runs short: volatile-* ones the finished jobs, which carry a TTL).
 * appendfsync is reported, not required: with everysec (Redis's default) or always a restart of Redis loses
 * nothing (Redis writes the AOF before it answers), a crash of its host a second at most with everysec.  Unknown
 * (-1) when Redis says neither by CONFIG nor by INFO.  Logs a change after the first answer.  KG_ERR_IO when
 * Redis does not answer. */
static int probe(kg_rstore *r, redisContext *c, kg_error *err)
{
    char aof[16], fsync[16], policy[64], maxmem[32], refused[200] = "";
    if (setting(c, "appendonly", "persistence", "aof_enabled", aof, sizeof aof, refused, err) != KG_OK ||
        setting(c, "appendfsync", NULL, NULL, fsync, sizeof fsync, refused, err) != KG_OK ||
        setting(c, "maxmemory-policy", "memory", "maxmemory_policy", policy, sizeof policy, refused, err) != KG_OK ||
        setting(c, "maxmemory", "memory", "maxmemory", maxmem, sizeof maxmem, refused, err) != KG_OK)
        return KG_ERR_IO;
    if (!strcmp(aof, "1")) /* INFO's spelling */
        snprintf(aof, sizeof aof, "yes");
    else if (!strcmp(aof, "0"))
        snprintf(aof, sizeof aof, "no");
    int durable = 1;
    char why[512] = "";
    if (!strcmp(aof, "no")) {
        durable = 0;
        snprintf(why, sizeof why,
                 "appendonly no: a restart of Redis would lose every acknowledged job; start it with --appendonly yes "
                 "(or CONFIG SET appendonly yes)");
    } else if (policy[0] && strcmp(policy, "noeviction") && maxmem[0] && strcmp(maxmem, "0")) {
        durable = 0;
        snprintf(why, sizeof why,
                 "maxmemory-policy %s with maxmemory %s: Redis would evict jobs and results when its memory is full; "
                 "set maxmemory-policy noeviction",
                 policy, maxmem);
    } else if (strcmp(aof, "yes") || !policy[0]) {
        durable = -1;
        snprintf(why, sizeof why, "Redis does not say whether it persists jobs (%s): run it with appendonly yes and "
                 "maxmemory-policy noeviction", refused[0] ? refused : "no appendonly or maxmemory-policy");
    }
    pthread_mutex_lock(&r->lock);
    int changed = r->probed_at > 0 && (durable != r->durable || strcmp(why, r->why));
    r->durable = durable;
    snprintf(r->why, sizeof r->why, "%s", why);
    snprintf(r->appendfsync, sizeof r->appendfsync, "%s", fsync);
    r->probed_at = kg_wall_s();
    int refuse = durable == 0 && !r->accept_volatile;
    pthread_mutex_unlock(&r->lock);
    if (changed && durable == 1)
        fprintf(stderr, "kgym: redis at %s:%d persists jobs again (appendonly yes)\n", r->host, r->port);
    else if (changed)
        fprintf(stderr, "kgym: WARNING: redis at %s:%d now has %s%s\n", r->host, r->port, why,
                refuse ? "; no job is accepted until it persists them (or restart kgym with --redis-volatile)" : "");
    return KG_OK;
}

/* KG_ERR_IO, naming the fix (why) and then advice, when Redis would lose jobs and --redis-volatile did not accept
 * that: no job is acknowledged into it (REFUSE_RUNNING), nor does kgym start on it (REFUSE_AT_START). */
#define REFUSE_RUNNING "; no job is accepted until it does (or restart kgym with --redis-volatile to accept that)"
#define REFUSE_AT_START ", or pass --redis-volatile to accept that"
static int refusal(kg_rstore *r, const char *advice, kg_error *err)
{
    pthread_mutex_lock(&r->lock);
    int refuse = r->durable == 0 && !r->accept_volatile;
    char why[512];
    snprintf(why, sizeof why, "%s", r->why);
    pthread_mutex_unlock(&r->lock);
    if (!refuse)
        return KG_OK;
    return kg_error_set(err, KG_ERR_IO, "redis at %s:%d has %s%s", r->host, r->port, why, advice);
}

/* Marks the data set (SET NX: the first process makes the mark, every other one reads it) and learns the mark's
 * value.  Nothing else writes it and it has no TTL: a mark gone or changed means the data set was lost. */
static int epoch_learn(redisContext *c, char out[96], kg_error *err)
{
    char mine[96], host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(mine, sizeof mine, "%.6f %s:%ld", kg_wall_s(), host, (long)getpid());
    if (cmd_ok(c, err, "SET " EPOCH " %s NX", mine) != KG_OK)
        return KG_ERR_IO;
    redisReply *x = cmd(c, err, "GET " EPOCH);
    if (!x)
        return KG_ERR_IO;
    int rc = KG_OK;
    if (x->type == REDIS_REPLY_STRING)
        snprintf(out, 96, "%s", x->str);
    else
        rc = kg_error_set(err, KG_ERR_IO, "Redis: the mark " EPOCH " could not be read back");
    freeReplyObject(x);
    return rc;
}

static int r_require_durable(kg_store *base, int accept_volatile, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    pthread_mutex_lock(&r->lock);
    r->accept_volatile = accept_volatile;
    pthread_mutex_unlock(&r->lock);
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    int rc = probe(r, c, err);
    conn_put(r, c);
    return rc == KG_OK ? refusal(r, REFUSE_AT_START, err) : rc;
}

static void r_durability(kg_store *base, kg_store_durability *out)
{
    kg_rstore *r = (kg_rstore *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->lock);
    out->durable = r->probed_at > 0 ? r->durable : -1;
    snprintf(out->why, sizeof out->why, "%s", r->probed_at > 0 ? r->why : "not asked yet");
    snprintf(out->appendfsync, sizeof out->appendfsync, "%s", r->appendfsync);
    out->data_lost = r->lost;
    out->data_lost_at = r->lost_at;
    pthread_mutex_unlock(&r->lock);
}

static const kg_store_ops redis_ops;
static void r_close(kg_store *base);
static int r_check(kg_store *base, kg_error *err);

int kg_store_redis_open(const char *url, kg_store **out, kg_error *err)
{
    *out = NULL;
    kg_rstore *r = calloc(1, sizeof *r);
    if (!r)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    kg_store_base_init(&r->base, &redis_ops);
    r->port = 6379;
    r->lease_s = 60;
    r->ttl_s = 7 * 86400;
    r->max_attempts = 3;
    r->durable = -1; /* not asked yet: nothing refused before kg_rstore_require_durable */
    const char *p = url + strlen("redis://");
    size_t hl = strcspn(p, ":/");
    if (hl == 0 || hl >= sizeof r->host) {
        kg_store_base_fini(&r->base);
        free(r);
        return kg_error_set(err, KG_ERR_INVALID, "--redis needs redis://HOST[:PORT][/DB], not \"%s\"", url);
    }
    memcpy(r->host, p, hl);
    p += hl;
    if (*p == ':')
        r->port = (int)strtol(p + 1, (char **)&p, 10);
    if (*p == '/')
        r->db = (int)strtol(p + 1, (char **)&p, 10);
    if (*p || r->port <= 0 || r->port > 65535) {
        kg_store_base_fini(&r->base);
        free(r);
        return kg_error_set(err, KG_ERR_INVALID, "--redis needs redis://HOST[:PORT][/DB], not \"%s\"", url);
    }
    pthread_mutex_init(&r->lock, NULL);
    redisContext *c = conn_get(r, err);
    if (!c) {
        r_close(&r->base);
        return err ? err->code : KG_ERR_IO;
    }
    int rc = ensure_group(c, err);
    if (rc == KG_OK)
        rc = epoch_learn(c, r->epoch, err);
    conn_put(r, c);
    if (rc != KG_OK) {
        r_close(&r->base);
        return rc;
    }
    *out = &r->base;
    return KG_OK;
}

static void r_unwatch(kg_store *base);

static void r_close(kg_store *base)
{
    kg_rstore *r = (kg_rstore *)base;
    r_unwatch(base);
    kg_store_base_fini(base);
    for (int i = 0; i < r->n_idle; i++)
        redisFree(r->idle[i]);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void r_configure(kg_store *base, double lease_s, int max_attempts, double result_ttl_s)
{
    kg_rstore *r = (kg_rstore *)base;
    if (lease_s > 0)
        r->lease_s = lease_s;
    if (max_attempts > 0)
        r->max_attempts = max_attempts;
    if (result_ttl_s > 0)
        r->ttl_s = result_ttl_s;
}

static const char *const fields[] = {"id", "status", "key", "request", "result", "error", "verdict", "worker",
                                     "cached_from", "attempts", "submitted_at", "started_at", "finished_at",
                                     "seq", "entry", "reward", "speedup", "label", "coverage", "group"};
#define NFIELDS (sizeof fields / sizeof *fields)

/* HMGET of every field into vals (malloc'd strings or NULL). 1 if the job exists, 0 if not; a negative status
 * (KG_ERR_IO, KG_ERR_NOMEM) when it could not be read whole, vals then all NULL. */
static int load(redisContext *c, const char *id, char *vals[NFIELDS], kg_error *err)
{
    memset(vals, 0, sizeof(char *) * NFIELDS);
    const char *argv[NFIELDS + 2];
    size_t lens[NFIELDS + 2];
    kg_buf key = {0};
    if (kg_buf_printf(&key, P "job:%s", id) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    argv[0] = "HMGET";
    argv[1] = key.data;
    for (size_t i = 0; i < NFIELDS; i++)
        argv[i + 2] = fields[i];
    for (size_t i = 0; i < NFIELDS + 2; i++)
        lens[i] = strlen(argv[i]);
    redisReply *x = redisCommandArgv(c, (int)(NFIELDS + 2), argv, lens);
    kg_buf_free(&key);
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        int rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x && x->str ? x->str : c->errstr);
        freeReplyObject(x);
        return rc;
    }
    /* A field that cannot be copied (memory) is an error, never a job read without it. */
    int nomem = 0;
    for (size_t i = 0; i < NFIELDS && i < x->elements; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING && !(vals[i] = kg_strdup(x->element[i]->str)))
            nomem = 1;
    freeReplyObject(x);
    if (nomem) {
        for (size_t i = 0; i < NFIELDS; i++) {
            free(vals[i]);
            vals[i] = NULL;
        }
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory reading job \"%s\"", id);
    }
    return vals[1] != NULL; /* status */
}

static void to_job(char *vals[NFIELDS], kg_job *j)
{
    memset(j, 0, sizeof *j);
    j->id = vals[0];
    j->status = vals[1];
    j->key = vals[2];
    j->request = vals[3];
    j->result = vals[4];
    j->error = vals[5];
    j->verdict = vals[6];
    j->worker = vals[7];
    j->cached_from = vals[8];
    j->attempts = vals[9] ? atoi(vals[9]) : 0;
    j->submitted_at = vals[10] ? atof(vals[10]) : 0;
    j->started_at = vals[11] ? atof(vals[11]) : 0;
    j->finished_at = vals[12] ? atof(vals[12]) : 0;
    j->seq = vals[13] ? atoll(vals[13]) : 0;
    j->group = vals[19];
    for (size_t i = 9; i < 19; i++)
        free(vals[i]);
}

static void free_vals(char *vals[NFIELDS])
{
    for (size_t i = 0; i < NFIELDS; i++)
        free(vals[i]);
}

/* The listing facts of a result (kg_store_result_facts) as Redis hash values. */
static void result_facts(const char *result, const json_t *result_json, char **verdict, char reward[32],
                         char speedup[32], char coverage[32])
{
    double rw, sp, cov;
    int has_sp;
    kg_store_result_facts(result, result_json, verdict, &rw, &sp, &has_sp, &cov);
    snprintf(reward, 32, "%.17g", rw);
    speedup[0] = '\0';
    coverage[0] = '\0';
    if (has_sp)
        snprintf(speedup, 32, "%.17g", sp);
    if (cov != -1)
        snprintf(coverage, 32, "%.17g", cov);
}

/* Job creation in one script: Redis runs it atomically, so a job is never
 * left half made (a hash without its stream entry stays "queued" forever),
 * and a batch is all or nothing.  Every job is checked before any is
 * written, and nothing is when the data set is not the one this process
 * knows (its mark: a Redis that lost its data may not persist either; the
 * caller checks it first).  KEYS: the job hashes; ARGV: the mark, then per
 * job: replace, status, id, ttl, the number of field pairs, then the pairs. */
static const char put_script[] =
    "if redis.call('GET', '" EPOCH "') ~= ARGV[1] then return {'epoch', ''} end\n"
    "local pos = 2\n"
    "local jobs = {}\n"
    "for i = 1, #KEYS do\n"
    "  local j = {key = KEYS[i], replace = ARGV[pos], status = ARGV[pos + 1], id = ARGV[pos + 2],\n"
    "             ttl = ARGV[pos + 3]}\n"
    "  local nf = tonumber(ARGV[pos + 4])\n"
    "  j.first = pos + 5\n"
    "  j.last = pos + 4 + nf * 2\n"
    "  pos = j.last + 1\n"
    "  local old = redis.call('HGET', j.key, 'status')\n"
    "  if old then\n"
    "    if j.replace ~= '1' then return {'exists', j.id} end\n"
    "    if old == 'running' then return {'running', j.id} end\n"
    "  end\n"
    "  jobs[i] = j\n"
    "end\n"
    "for i = 1, #KEYS do\n"
    "  local j = jobs[i]\n"
    "  local seq = redis.call('INCR', '" P "seq')\n"
    "  redis.call('DEL', j.key)\n"
    "  redis.call('HSET', j.key, 'seq', seq, unpack(ARGV, j.first, j.last))\n"
    "  if j.status == 'queued' then\n"
    "    local e = redis.call('XADD', '" P "stream', '*', 'id', j.id)\n"
    "    redis.call('HSET', j.key, 'entry', e)\n"
    "    redis.call('ZADD', '" P "queued', seq, j.id)\n"
    "  else\n"
    "    redis.call('EXPIRE', j.key, j.ttl)\n"
    "    redis.call('HINCRBY', '" P "counts', j.status, 1)\n"
    "  end\n"
    "  redis.call('ZADD', '" P "recent', seq, j.id)\n"
    "end\n"
    "redis.call('ZREMRANGEBYRANK', '" P "recent', 0, -100001)\n"
    "return {'ok'}\n";

/* The strings of one job's arguments that are made here (they must live
 * until the script is sent). */
typedef struct job_strs {
    char *verdict, *label;
    char reward[32], speedup[32], coverage[32], sub[32], fin[32], ttl[32], nfs[16];
} job_strs;

/* Appends one job's arguments for put_script to argv/lens. */
static int job_args(kg_rstore *r, const kg_job *job, int replace, double t, job_strs *js, const char **argv,
                    size_t *lens, int *n, kg_error *err)
{
    if (!job || !job->id || !job->key || !job->request)
        return kg_error_set(err, KG_ERR_INVALID, "a job needs an id, a key and a request");
    const char *status = job->status ? job->status : "queued";
    result_facts(job->result, NULL, &js->verdict, js->reward, js->speedup, js->coverage);
    js->label = kg_store_job_label(job);
    snprintf(js->sub, sizeof js->sub, "%.6f", job->submitted_at > 0 ? job->submitted_at : t);
    snprintf(js->fin, sizeof js->fin, "%.6f", strcmp(status, "queued") ? t : 0.0);
    snprintf(js->ttl, sizeof js->ttl, "%lld", (long long)r->ttl_s);
    const char *pairs[][2] = {{"id", job->id},
                              {"status", status},
                              {"key", job->key},
                              {"request", job->request},
                              {"result", job->result},
                              {"error", job->error},
                              {"verdict", js->verdict},
                              {"cached_from", job->cached_from},
                              {"attempts", "0"},
                              {"submitted_at", js->sub},
                              {"started_at", "0"},
                              {"finished_at", js->fin},
                              {"reward", js->reward},
                              {"label", js->label},
                              {"speedup", js->speedup[0] ? js->speedup : NULL},
                              {"coverage", js->coverage[0] ? js->coverage : NULL},
                              {"group", job->group}};
    int nf = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
        nf += pairs[i][1] != NULL;
    snprintf(js->nfs, sizeof js->nfs, "%d", nf);
    const char *head[] = {replace ? "1" : "0", status, job->id, js->ttl, js->nfs};
    for (size_t i = 0; i < 5; i++) {
        argv[*n] = head[i];
        lens[(*n)++] = strlen(head[i]);
    }
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        if (!pairs[i][1])
            continue;
        argv[*n] = pairs[i][0];
        lens[(*n)++] = strlen(pairs[i][0]);
        argv[*n] = pairs[i][1];
        lens[(*n)++] = strlen(pairs[i][1]);
    }
    return KG_OK;
}

static int r_put_many(kg_store *base, const kg_job *jobs, size_t n, const int *replace, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    if (refusal(r, REFUSE_RUNNING, err) != KG_OK) /* acknowledged, it could be lost */
        return KG_ERR_IO;
    enum { PER_JOB = 5 + 2 * 17 };
    size_t cap = 4 + n + n * PER_JOB;
    const char **argv = calloc(cap, sizeof *argv);
    size_t *lens = calloc(cap, sizeof *lens);
    job_strs *js = calloc(n ? n : 1, sizeof *js);
    char **keys = calloc(n ? n : 1, sizeof *keys);
    int rc = KG_OK, m = 0, mark_at = 0;
    char nkeys[32], mark[96];
    if (!argv || !lens || !js || !keys) {
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(nkeys, sizeof nkeys, "%zu", n);
    argv[m] = "EVAL";
    lens[m++] = 4;
    argv[m] = put_script;
    lens[m++] = sizeof put_script - 1;
    argv[m] = nkeys;
    lens[m++] = strlen(nkeys);
    for (size_t i = 0; i < n && rc == KG_OK; i++) {
        kg_buf k = {0};
        if (!jobs[i].id || kg_buf_printf(&k, P "job:%s", jobs[i].id) != KG_OK) {
            kg_buf_free(&k);
            rc = kg_error_set(err, KG_ERR_INVALID, "a job needs an id, a key and a request");
            break;
        }
        keys[i] = kg_buf_release(&k);
        argv[m] = keys[i];
        lens[m++] = strlen(keys[i]);
    }
    mark_at = m++; /* filled below, before each try */
    double t = kg_wall_s();
    for (size_t i = 0; i < n && rc == KG_OK; i++)
        rc = job_args(r, &jobs[i], replace ? replace[i] : 0, t, &js[i], argv, lens, &m, err);
    if (rc != KG_OK)
        goto out;
    /* Twice at most: a data set found new (Redis lost its data since this process last looked) is checked (the
     * loss said, whether Redis persists asked again) before a job is written into it. */
    for (int tries = 0; tries < 2; tries++) {
        pthread_mutex_lock(&r->lock);
        snprintf(mark, sizeof mark, "%s", r->epoch);
        pthread_mutex_unlock(&r->lock);
        argv[mark_at] = mark;
        lens[mark_at] = strlen(mark);
        redisContext *c = conn_get(r, err);
        if (!c) {
            rc = KG_ERR_IO;
            goto out;
        }
        redisReply *x = redisCommandArgv(c, m, argv, lens);
        int new_set = 0;
        rc = KG_OK;
        if (!x || x->type == REDIS_REPLY_ERROR) {
            rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
        } else if (x->type == REDIS_REPLY_ARRAY && x->elements == 2 && x->element[0]->type == REDIS_REPLY_STRING &&
                   x->element[1]->type == REDIS_REPLY_STRING) {
            const char *why = x->element[0]->str, *id = x->element[1]->str;
            if (!strcmp(why, "epoch"))
                new_set = 1;
            else if (!strcmp(why, "running"))
                rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" is running; it cannot be replaced", id);
            else
                rc = kg_error_set(err, KG_ERR_INVALID, "a job with id \"%s\" exists already", id);
        } else if (x->type != REDIS_REPLY_ARRAY || x->elements != 1) {
            rc = kg_error_set(err, KG_ERR_IO, "Redis: an unexpected answer to the job script");
        }
        freeReplyObject(x);
        conn_put(r, c);
        if (!new_set)
            break;
        rc = r_check(&r->base, err); /* learns the new mark; KG_ERR_IO if Redis would lose the job */
        if (rc != KG_OK)
            break;
        rc = kg_error_set(err, KG_ERR_IO, "Redis: its data set changed while the job was written; try again");
    }
out:
    for (size_t i = 0; i < n && js && keys; i++) {
        free(js[i].verdict);
        free(js[i].label);
        free(keys[i]);
    }
    free(js);
    free(keys);
    free(argv);
    free(lens);
    return rc;
}

static int r_get(kg_store *base, const char *id, kg_job *out, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    memset(out, 0, sizeof *out);
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    char *vals[NFIELDS];
    int e = load(c, id, vals, err);
    conn_put(r, c);
    if (e < 0)
        return e;
    if (!e) {
        free_vals(vals);
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", id);
    }
    to_job(vals, out);
    return KG_OK;
}

static int r_find_done(kg_store *base, const char *key, kg_job *out, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    memset(out, 0, sizeof *out);
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    redisReply *x = cmd(c, err, "GET " P "done:%s", key);
    char *id = x && x->type == REDIS_REPLY_STRING ? kg_strdup(x->str) : NULL;
    freeReplyObject(x);
    conn_put(r, c);
    if (!id)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no result for this content");
    int rc = r_get(&r->base, id, out, err);
    free(id);
    if (rc == KG_OK && strcmp(out->status, "done")) {
        kg_job_free(out);
        return kg_error_set(err, KG_ERR_NOT_FOUND, "no result for this content");
    }
    return rc;
}

/* Entry id and job id of the first message of an XREADGROUP/XAUTOCLAIM list. */
static int first_entry(redisReply *list, char entry[64], char id[160])
{
    if (!list || list->type != REDIS_REPLY_ARRAY || list->elements < 1)
        return 0;
    redisReply *m = list->element[0];
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 || m->element[0]->type != REDIS_REPLY_STRING)
        return 0;
    snprintf(entry, 64, "%s", m->element[0]->str);
    redisReply *kv = m->element[1];
    id[0] = '\0';
    for (size_t i = 0; kv->type == REDIS_REPLY_ARRAY && i + 1 < kv->elements; i += 2)
        if (!strcmp(kv->element[i]->str, "id"))
            snprintf(id, 160, "%s", kv->element[i + 1]->str);
    return 1;
}

/* Claiming an entry, in one script (Redis runs it atomically: two workers never take one job, and a job is never
 * half claimed).  An entry of the stream is a ticket: whoever is delivered it claims one job with it.  Without a
 * route that is the job the entry names, as when each job had its entry for good; routed (store.h), the best of
 * the window's queued jobs, which takes the entry over (the job the entry named keeps its place, its seq, and gets
 * a new entry; the picked job's old entry no longer matches it, and whoever is delivered that one drops it, as it
 * drops the entry of a cancelled job); bound (a hash entry → job) says which job an entry was given to where that
 * is not the job it names, until the entry is acknowledged.  A reclaimed entry (its worker died: XAUTOCLAIM)
 * claims the job it is bound to again, never another.
 * ARGV: entry, the job id the entry names, worker, now, max_attempts, reclaimed (1/0), routed (1/0), window,
 * home ("" for none), home TTL (s), the number of hot groups and the groups, the number of busy groups and the
 * groups.  Answers {"ok", id} (claimed), {"drop", id} (the entry's job is gone or bound elsewhere: the entry is
 * acknowledged), {"taken", id} (another worker took the entry over and runs its job: left alone), {"spent", id,
 * attempts} (reclaimed too often: the caller fails it).  The ranks are
 * store.c route_rank's, with homes (rank 3): a change there is a change here. */
static const char claim_script[] =
    "local entry, id = ARGV[1], ARGV[2]\n"
    "local bound = redis.call('HGET', '" P "bound', entry)\n"
    "if bound then id = bound end\n"
    "local jk = '" P "job:' .. id\n"
    "local st = redis.call('HGET', jk, 'status')\n"
    "local en = redis.call('HGET', jk, 'entry')\n"
    "if not ((st == 'queued' or st == 'running') and (not en or en == entry)) then\n"
    "  redis.call('XACK', '" P "stream', 'workers', entry)\n"
    "  redis.call('XDEL', '" P "stream', entry)\n"
    "  redis.call('HDEL', '" P "bound', entry)\n"
    "  return {'drop', id}\n"
    "end\n"
    /* Delivered, not reclaimed, and its job already runs with this very entry: this worker stalled between its
     * XREADGROUP and this script for longer than a lease, and another took the entry over (XAUTOCLAIM) and runs
     * the job.  Not claimed again (two live workers would evaluate it); the entry is left as it is, its owner's
     * (if that one dies too, the lease brings it back). */
    "if ARGV[6] ~= '1' and st == 'running' and en == entry then return {'taken', id} end\n"
    "local attempts = tonumber(redis.call('HGET', jk, 'attempts') or '0')\n"
    "if ARGV[6] == '1' and attempts >= tonumber(ARGV[5]) then return {'spent', id, tostring(attempts)} end\n"
    "local pick, me = id, ARGV[9]\n"
    "if ARGV[6] ~= '1' and st == 'queued' and ARGV[7] == '1' then\n"
    "  local hot, busy, homes, pos = {}, {}, {}, 11\n"
    "  local nh = tonumber(ARGV[pos])\n"
    "  for i = 1, nh do hot[ARGV[pos + i]] = true end\n"
    "  pos = pos + nh + 1\n"
    "  for i = 1, tonumber(ARGV[pos]) do busy[ARGV[pos + i]] = (busy[ARGV[pos + i]] or 0) + 1 end\n"
    "  local best = 4\n"
    /* ranks 2 and 3 by task: queued jobs in the window, the oldest, the rank; in window order */
    "  local qn, qold, qrank, order = {}, {}, {}, {}\n"
    /* The window's anchor is the oldest job that is queued (memory.c, sqlite.c): a member whose job is not (its
     * cancel lost the connection between HSET and ZREM) would hold the window where no queued job is, for ever.
     * Such a member is removed here (no job is in kgym:queued without being queued: every writer of the status
     * keeps the two together or writes the status first). */
    "  local first = {}\n"
    "  for _ = 1, tonumber(ARGV[8]) do\n"
    "    first = redis.call('ZRANGE', '" P "queued', 0, 0, 'WITHSCORES')\n"
    "    if not first[1] or redis.call('HGET', '" P "job:' .. first[1], 'status') == 'queued' then break end\n"
    "    redis.call('ZREM', '" P "queued', first[1])\n"
    "  end\n"
    "  local upto = '(' .. tostring(tonumber(first[2] or '0') + tonumber(ARGV[8]))\n"
    "  for _, q in ipairs(redis.call('ZRANGEBYSCORE', '" P "queued', '-inf', upto, 'LIMIT', 0, tonumber(ARGV[8]))) do\n"
    "    local f = redis.call('HMGET', '" P "job:' .. q, 'status', 'group')\n"
    "    if f[1] == 'queued' then\n"
    "      local g, r = f[2], 1\n"
    "      if g and g ~= '' then\n"
    "        if hot[g] then r = 0\n"
    "        elseif busy[g] then r = 2\n"
    "        elseif me ~= '' then\n"
    "          if homes[g] == nil then homes[g] = redis.call('GET', '" P "home:' .. g) end\n"
    "          if homes[g] and homes[g] ~= me then r = 3 end\n"
    "        end\n"
    "      end\n"
    "      if r < best then best, pick = r, q end\n"
    "      if r == 0 then break end\n"
    "      if r >= 2 then\n"
    "        if not qn[g] then qn[g], qold[g], qrank[g] = 0, q, r; order[#order + 1] = g end\n"
    "        qn[g] = qn[g] + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    /* Only busy tasks (rank 2, or 3): the one with the most queued jobs for each of its judges at work here
     * (another process's: taken as one), its oldest job; ties to the oldest (store.c kg_route_pick). */
    "  if best == 2 or best == 3 then\n"
    "    local bq, bb = 0, 1\n"
    "    for _, g in ipairs(order) do\n"
    "      if qrank[g] == best then\n"
    "        local b = 1\n"
    "        if best == 2 then b = busy[g] end\n"
    "        if qn[g] * bb > bq * b then pick, bq, bb = qold[g], qn[g], b end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if pick ~= id then\n"
    "    redis.call('HSET', jk, 'entry', redis.call('XADD', '" P "stream', '*', 'id', id))\n"
    "    jk = '" P "job:' .. pick\n"
    /* The picked job's own entry names it no more: deleted now unless a worker was delivered it already (that one
     * drops it, acknowledged and deleted), so that the stream does not keep one more entry per routed claim. */
    "    local old = redis.call('HGET', jk, 'entry')\n"
    "    if old and old ~= entry and #redis.call('XPENDING', '" P "stream', 'workers', old, old, 1) == 0 then\n"
    "      redis.call('XDEL', '" P "stream', old)\n"
    "    end\n"
    "    redis.call('HSET', '" P "bound', entry, pick)\n"
    "    attempts = tonumber(redis.call('HGET', jk, 'attempts') or '0')\n"
    "  end\n"
    "end\n"
    "redis.call('HSET', jk, 'status', 'running', 'worker', ARGV[3], 'started_at', ARGV[4], 'attempts',\n"
    "           attempts + 1, 'entry', entry)\n"
    "redis.call('ZREM', '" P "queued', pick)\n"
    "if me ~= '' then\n"
    "  local g = redis.call('HGET', jk, 'group')\n"
    "  if g and g ~= '' then\n"
    "    local hk = '" P "home:' .. g\n"
    "    local h = redis.call('GET', hk)\n"
    "    if not h then redis.call('SET', hk, me, 'EX', ARGV[10])\n"
    "    elseif h == me then redis.call('EXPIRE', hk, ARGV[10]) end\n"
    "  end\n"
    "end\n"
    "return {'ok', pick}\n";

/* Runs claim_script for entry (naming job id); fills what it answered ("ok", "drop", "spent"), the job's id and,
 * for "spent", its attempts.  KG_ERR_IO when Redis failed (the entry stays pending: its lease brings it back),
 * KG_ERR_NOMEM. */
static int claim_entry(kg_rstore *r, redisContext *c, const char *worker, const kg_route *route, const char *entry,
                       const char *id, int reclaimed, char what[8], char job[160], int *attempts, kg_error *err)
{
    size_t nhot = route ? route->nhot : 0, nbusy = route ? route->nbusy : 0;
    size_t cap = 3 + 12 + nhot + nbusy, n = 0;
    const char **argv = calloc(cap, sizeof *argv);
    if (!argv)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    char now[32], maxa[16], window[16], ttl[32], nh[16], nb[16];
    snprintf(now, sizeof now, "%.6f", kg_wall_s());
    snprintf(maxa, sizeof maxa, "%d", r->max_attempts);
    snprintf(window, sizeof window, "%d", KG_ROUTE_WINDOW);
    /* At least a second: SET EX refuses 0 */
    snprintf(ttl, sizeof ttl, "%lld", route && route->home_ttl_s >= 1 ? (long long)route->home_ttl_s : 1LL);
    snprintf(nh, sizeof nh, "%zu", nhot);
    snprintf(nb, sizeof nb, "%zu", nbusy);
    argv[n++] = "EVAL";
    argv[n++] = claim_script;
    argv[n++] = "0";
    argv[n++] = entry;
    argv[n++] = id;
    argv[n++] = worker;
    argv[n++] = now;
    argv[n++] = maxa;
    argv[n++] = reclaimed ? "1" : "0";
    argv[n++] = route ? "1" : "0";
    argv[n++] = window;
    argv[n++] = route && route->home ? route->home : "";
    argv[n++] = ttl;
    argv[n++] = nh;
    for (size_t i = 0; i < nhot; i++)
        argv[n++] = route->hot[i] ? route->hot[i] : "";
    argv[n++] = nb;
    for (size_t i = 0; i < nbusy; i++)
        argv[n++] = route->busy[i] ? route->busy[i] : "";
    redisReply *x = redisCommandArgv(c, (int)n, argv, NULL);
    free(argv);
    int rc = KG_OK;
    if (!x || x->type == REDIS_REPLY_ERROR)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
    else if (x->type != REDIS_REPLY_ARRAY || x->elements < 2 || x->element[0]->type != REDIS_REPLY_STRING ||
             x->element[1]->type != REDIS_REPLY_STRING)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: an unexpected answer to the claim script");
    else {
        snprintf(what, 8, "%s", x->element[0]->str);
        snprintf(job, 160, "%s", x->element[1]->str);
        *attempts = x->elements >= 3 && x->element[2]->type == REDIS_REPLY_STRING ? atoi(x->element[2]->str) : 0;
    }
    freeReplyObject(x);
    return rc;
}

/* XAUTOCLAIMs one claim may make to look through the pending entries (10 each): a fleet's evaluations in flight. */
#define RECLAIM_SCANS 64

static int r_claim(kg_store *base, const char *worker, const kg_route *route, kg_job *out, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    memset(out, 0, sizeof *out);
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    int rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
    for (int tries = 0; tries < 8; tries++) {
        char entry[64], id[160];
        int reclaimed = 0;
        /* First a job whose lease ran out (its worker died), then a new one.  XAUTOCLAIM looks at COUNT * 10
         * pending entries from its cursor: the cursor it answers is followed to the end of the pending list, or
         * a dead worker's entry behind ten live ones (renewed) would not be taken over until they ended. */
        kg_error cerr;
        char cursor[64] = "0-0";
        int got = 0;
        redisReply *x = NULL;
        for (int scan = 0; scan < RECLAIM_SCANS; scan++) {
            x = cmd(c, &cerr, "XAUTOCLAIM " P "stream workers %s %lld %s COUNT 1", worker,
                    (long long)(r->lease_s * 1000), cursor);
            if (!x && !scan && strstr(cerr.message, "NOGROUP")) {
                /* Redis lost the group (a restart without persistence): make it
                 * again, or every job queued from now on waits forever. */
                if (ensure_group(c, &cerr) == KG_OK)
                    x = cmd(c, &cerr, "XAUTOCLAIM " P "stream workers %s %lld 0-0 COUNT 1", worker,
                            (long long)(r->lease_s * 1000));
            }
            if (!x)
                break;
            got = x->type == REDIS_REPLY_ARRAY && x->elements >= 2 && first_entry(x->element[1], entry, id);
            int more = !got && x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
                       x->element[0]->type == REDIS_REPLY_STRING && strcmp(x->element[0]->str, "0-0") != 0;
            if (more)
                snprintf(cursor, sizeof cursor, "%s", x->element[0]->str);
            freeReplyObject(x);
            if (!more)
                break;
        }
        if (!x) { /* Redis down or refusing: an error, not an empty queue (the caller backs off) */
            rc = kg_error_set(err, KG_ERR_IO, "%s", cerr.message);
            break;
        }
        if (got) {
            reclaimed = 1;
        } else {
            x = cmd(c, &cerr, "XREADGROUP GROUP workers %s COUNT 1 BLOCK 200 STREAMS " P "stream >", worker);
            if (!x) {
                rc = kg_error_set(err, KG_ERR_IO, "%s", cerr.message);
                break;
            }
            got = x->type == REDIS_REPLY_ARRAY && x->elements >= 1 && x->element[0]->elements >= 2 &&
                  first_entry(x->element[0]->element[1], entry, id);
            freeReplyObject(x);
        }
        if (!got) {
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
            break;
        }
        /* The submitter records the entry right after XADD; a worker may read the entry first, so a job without
         * one is this entry's, a different one means the job was replaced or claimed with another entry (the
         * script's rule). */
        char what[8], job[160];
        int attempts = 0;
        rc = claim_entry(r, c, worker, route, entry, id, reclaimed, what, job, &attempts, err);
        if (rc != KG_OK) /* the entry stays pending: another worker takes it over after the lease */
            break;
        if (!strcmp(what, "drop") || !strcmp(what, "taken")) {
            /* drop: cancelled, finished, replaced or expired (the script acknowledged it); taken: another worker
             * runs it with this entry (this one was too slow to claim it) */
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
            continue;
        }
        if (!strcmp(what, "spent")) {
            /* It took its worker down max_attempts times: stop, with a verdict. */
            kg_buf key = {0};
            if (kg_buf_printf(&key, P "job:%s", job) != KG_OK) { /* the entry stays pending, as when unread */
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
                break;
            }
            char msg[256], fin[32];
            snprintf(msg, sizeof msg,
                     "the evaluation was interrupted %d times (its worker process died each time); it is not run again",
                     attempts);
            snprintf(fin, sizeof fin, "%.6f", kg_wall_s());
            cmd_ok(c, err, "HSET %s status failed error %s finished_at %s", key.data, msg, fin);
            cmd_ok(c, err, "ZREM " P "queued %s", job); /* a queued job's entry can be reclaimed too */
            cmd_ok(c, err, "EXPIRE %s %lld", key.data, (long long)r->ttl_s);
            cmd_ok(c, err, "HINCRBY " P "counts failed 1");
            cmd_ok(c, err, "XACK " P "stream workers %s", entry);
            cmd_ok(c, err, "XDEL " P "stream %s", entry);
            cmd_ok(c, err, "HDEL " P "bound %s", entry);
            cmd_ok(c, err, "PUBLISH " P "done %s", job);
            kg_buf_free(&key);
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
            continue;
        }
        char *vals[NFIELDS];
        int e = load(c, job, vals, err);
        if (e > 0) {
            to_job(vals, out);
            rc = KG_OK;
        } else {
            if (e < 0) /* claimed but not read whole: its lease brings it back */
                rc = e;
            else
                rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
            free_vals(vals);
        }
        break;
    }
    conn_put(r, c);
    return rc;
}

static int r_finish(kg_store *base, const char *id, const char *status, const char *result, const json_t *result_json,
                    const char *error, const char *new_key, const char *cached_from, double at, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    char *vals[NFIELDS];
    int e = load(c, id, vals, err);
    int rc = KG_OK;
    if (e <= 0 || strcmp(vals[1], "running")) {
        rc = e < 0 ? e : kg_error_set(err, KG_ERR_NOT_FOUND, "job \"%s\" is not running", id);
    } else {
        char *verdict;
        char reward[32], speedup[32], coverage[32], fin[32];
        result_facts(result, result_json, &verdict, reward, speedup, coverage);
        snprintf(fin, sizeof fin, "%.6f", at);
        kg_buf key = {0};
        if (kg_buf_printf(&key, P "job:%s", id) != KG_OK) {
            free(verdict);
            free_vals(vals);
            conn_put(r, c);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
        const char *argv[32];
        int n = 0;
        argv[n++] = "HSET";
        argv[n++] = key.data;
        argv[n++] = "status";
        argv[n++] = status;
        argv[n++] = "finished_at";
        argv[n++] = fin;
        argv[n++] = "reward";
        argv[n++] = reward;
        if (result) {
            argv[n++] = "result";
            argv[n++] = result;
        }
        if (error) {
            argv[n++] = "error";
            argv[n++] = error;
        }
        if (verdict) {
            argv[n++] = "verdict";
            argv[n++] = verdict;
        }
        if (speedup[0]) {
            argv[n++] = "speedup";
            argv[n++] = speedup;
        }
        if (coverage[0]) {
            argv[n++] = "coverage";
            argv[n++] = coverage;
        }
        if (new_key) { /* the evaluating worker's key: the result is found again under it */
            argv[n++] = "key";
            argv[n++] = new_key;
        }
        if (cached_from) {
            argv[n++] = "cached_from";
            argv[n++] = cached_from;
        }
        redisReply *x = redisCommandArgv(c, n, argv, NULL);
        if (!x || x->type == REDIS_REPLY_ERROR)
            rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
        freeReplyObject(x);
        if (rc == KG_OK) {
            if (!error) /* a reason it was queued again is not its outcome (SQLite's finish clears it too) */
                cmd_ok(c, err, "HDEL %s error", key.data);
            cmd_ok(c, err, "EXPIRE %s %lld", key.data, (long long)r->ttl_s);
            const char *done_key = new_key ? new_key : vals[2];
            if (!strcmp(status, "done") && done_key && done_key[0])
                cmd_ok(c, err, "SET " P "done:%s %s EX %lld", done_key, id, (long long)r->ttl_s);
            cmd_ok(c, err, "HINCRBY " P "counts %s 1", status);
            if (vals[14]) { /* acknowledged, the entry is of no more use: deleted (the stream does not grow) */
                cmd_ok(c, err, "XACK " P "stream workers %s", vals[14]);
                cmd_ok(c, err, "XDEL " P "stream %s", vals[14]);
                cmd_ok(c, err, "HDEL " P "bound %s", vals[14]);
            }
            cmd_ok(c, err, "PUBLISH " P "done %s", id);
        }
        kg_buf_free(&key);
        free(verdict);
    }
    free_vals(vals);
    conn_put(r, c);
    return rc;
}

/* A running job back in the queue, in one script (no job half requeued):
 * its pending entry acknowledged, a new one added. */
static const char requeue_script[] =
    "if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end\n"
    "local old = redis.call('HGET', KEYS[1], 'entry')\n"
    "if old then\n"
    "  redis.call('XACK', '" P "stream', 'workers', old)\n"
    "  redis.call('XDEL', '" P "stream', old)\n"
    "  redis.call('HDEL', '" P "bound', old)\n"
    "end\n"
    "local e = redis.call('XADD', '" P "stream', '*', 'id', ARGV[1])\n"
    "redis.call('HSET', KEYS[1], 'status', 'queued', 'entry', e, 'error', ARGV[2], 'started_at', '0')\n"
    "redis.call('HDEL', KEYS[1], 'worker')\n"
    "redis.call('ZADD', '" P "queued', redis.call('HGET', KEYS[1], 'seq') or 0, ARGV[1])\n"
    "return 1\n";

static int r_requeue(kg_store *base, const char *id, const char *reason, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    kg_buf key = {0};
    if (kg_buf_printf(&key, P "job:%s", id) != KG_OK) {
        conn_put(r, c);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    const char *argv[] = {"EVAL", requeue_script, "1", key.data, id, reason ? reason : ""};
    redisReply *x = redisCommandArgv(c, 6, argv, NULL);
    int rc = KG_OK;
    if (!x || x->type == REDIS_REPLY_ERROR)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
    else if (x->type != REDIS_REPLY_INTEGER || x->integer != 1)
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "job \"%s\" is not running", id);
    freeReplyObject(x);
    kg_buf_free(&key);
    conn_put(r, c);
    return rc;
}

/* Redis answers, its data set is the one this process knew (its mark), and it would not lose jobs (unless
 * --redis-volatile).  A mark gone or replaced means Redis lost every job it held (a restart without persistence,
 * a FLUSHALL, a failover to an empty replica): said loudly once, counted for /health, and the new data set marked.
 * Durability is asked again after a loss, after Redis was unreachable, and every PROBE_EVERY_S. */
static int r_check(kg_store *base, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    redisReply *x = c ? cmd(c, err, "GET " EPOCH) : NULL;
    if (!x && c && c->err == REDIS_ERR_EOF) {
        /* An idle connection from before a restart of Redis (conn_put drops the others with it): not a reason
         * to call the store unhealthy.  Once more on a new one. */
        conn_put(r, c);
        c = conn_get(r, err);
        x = c ? cmd(c, err, "GET " EPOCH) : NULL;
    }
    if (!x) {
        pthread_mutex_lock(&r->lock);
        r->away = 1;
        pthread_mutex_unlock(&r->lock);
        conn_put(r, c);
        return KG_ERR_IO;
    }
    char seen[96] = "", known[96];
    if (x->type == REDIS_REPLY_STRING)
        snprintf(seen, sizeof seen, "%s", x->str);
    freeReplyObject(x);
    pthread_mutex_lock(&r->lock);
    snprintf(known, sizeof known, "%s", r->epoch);
    int was_away = r->away, due = kg_wall_s() - r->probed_at >= PROBE_EVERY_S;
    r->away = 0;
    pthread_mutex_unlock(&r->lock);
    int lost = strcmp(seen, known) != 0, rc = KG_OK;
    if (lost) {
        char fresh[96];
        rc = epoch_learn(c, fresh, err);
        int first = 0;
        pthread_mutex_lock(&r->lock);
        if (rc == KG_OK && !strcmp(r->epoch, known)) { /* not noticed by another thread meanwhile */
            snprintf(r->epoch, sizeof r->epoch, "%s", fresh);
            r->lost++;
            r->lost_at = kg_wall_s();
            first = 1;
        }
        pthread_mutex_unlock(&r->lock);
        if (first)
            fprintf(stderr,
                    "kgym: ALERT: redis at %s:%d LOST ITS DATA: the mark " EPOCH " (\"%s\") is %s. Redis restarted "
                    "without persistence, was flushed, or failed over to a replica without the data: every job it "
                    "held (queued, running and finished) and every result is gone; clients waiting for them get "
                    "404 and must submit them again.\n",
                    r->host, r->port, known, seen[0] ? "replaced" : "gone");
    }
    if (rc == KG_OK && (lost || was_away || due))
        rc = probe(r, c, err);
    conn_put(r, c);
    return rc == KG_OK ? refusal(r, REFUSE_RUNNING, err) : rc;
}

static int r_cancel(kg_store *base, const char *id, char was[16], kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    char *vals[NFIELDS];
    int e = load(c, id, vals, err);
    int rc = KG_OK;
    if (e < 0)
        rc = e;
    else if (!e)
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", id);
    else {
        snprintf(was, 16, "%s", vals[1]);
        if (strcmp(was, "queued") && strcmp(was, "running")) {
            rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" has finished (%s)", id, was);
        } else {
            char fin[32];
            snprintf(fin, sizeof fin, "%.6f", kg_wall_s());
            cmd_ok(c, err, "HSET " P "job:%s status cancelled finished_at %s", id, fin);
            cmd_ok(c, err, "EXPIRE " P "job:%s %lld", id, (long long)r->ttl_s);
            cmd_ok(c, err, "ZREM " P "queued %s", id);
            cmd_ok(c, err, "HINCRBY " P "counts cancelled 1");
            cmd_ok(c, err, "PUBLISH " P "done %s", id);
        }
    }
    free_vals(vals);
    conn_put(r, c);
    return rc;
}

static long r_count(kg_store *base, const char *status)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, NULL);
    if (!c)
        return -1;
    long n = -1;
    redisReply *x;
    if (status && !strcmp(status, "queued"))
        x = cmd(c, NULL, "ZCARD " P "queued");
    else if (status && !strcmp(status, "running"))
        x = cmd(c, NULL, "XPENDING " P "stream workers");
    else if (status)
        x = cmd(c, NULL, "HGET " P "counts %s", status);
    else
        x = cmd(c, NULL, "ZCARD " P "recent");
    if (x && x->type == REDIS_REPLY_INTEGER)
        n = (long)x->integer;
    else if (x && x->type == REDIS_REPLY_STRING)
        n = atol(x->str);
    else if (x && x->type == REDIS_REPLY_NIL)
        n = 0;
    else if (x && x->type == REDIS_REPLY_ARRAY && x->elements >= 1 && x->element[0]->type == REDIS_REPLY_INTEGER)
        n = (long)x->element[0]->integer;
    freeReplyObject(x);
    conn_put(r, c);
    return n;
}

static long r_queue_position(kg_store *base, const char *id)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, NULL);
    if (!c)
        return -1;
    redisReply *x = cmd(c, NULL, "ZRANK " P "queued %s", id);
    long n = x && x->type == REDIS_REPLY_INTEGER ? (long)x->integer : -1;
    freeReplyObject(x);
    conn_put(r, c);
    return n;
}

static int r_list(kg_store *base, const char *status, int limit, json_t **out, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    *out = NULL;
    if (limit <= 0 || limit > 10000)
        limit = 100;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    /* Newest first; with a status filter, look a little further back. */
    redisReply *x = cmd(c, err, "ZREVRANGE " P "recent 0 %d", status ? limit * 10 : limit - 1);
    if (!x) {
        conn_put(r, c);
        return KG_ERR_IO;
    }
    /* A listing is whole or an error: a summary that cannot be built (memory), or a job that cannot be read,
     * fails the listing, never a summary without some fields or a shorter list.  A job gone meanwhile (expired)
     * is not listed. */
    json_t *arr = json_array();
    int rc = arr ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory listing jobs");
    for (size_t i = 0; rc == KG_OK && x->type == REDIS_REPLY_ARRAY && i < x->elements &&
                       (int)json_array_size(arr) < limit;
         i++) {
        char *vals[NFIELDS];
        int e = load(c, x->element[i]->str, vals, err);
        if (e < 0) {
            rc = e;
            break;
        }
        if (!e || (status && strcmp(vals[1], status))) {
            free_vals(vals);
            continue;
        }
        json_t *o = json_object();
        int ok = kg_json_set(o, "id", kg_json_text(vals[0] ? vals[0] : "")) == 0 &&
                 kg_json_set(o, "status", kg_json_text(vals[1])) == 0 &&
                 kg_json_set(o, "verdict", kg_json_text(vals[6])) == 0 &&
                 kg_json_set(o, "reward", kg_json_number(vals[15] ? atof(vals[15]) : 0.0)) == 0 &&
                 kg_json_set(o, "speedup", vals[16] ? kg_json_number(atof(vals[16])) : json_null()) == 0 &&
                 kg_json_set(o, "task", kg_json_text(vals[17])) == 0 &&
                 kg_json_set(o, "attempts", json_integer(vals[9] ? atoi(vals[9]) : 0)) == 0 &&
                 kg_json_set(o, "submitted_at", kg_json_number(vals[10] ? atof(vals[10]) : 0.0)) == 0 &&
                 kg_json_set(o, "started_at", kg_json_number(vals[11] ? atof(vals[11]) : 0.0)) == 0 &&
                 kg_json_set(o, "finished_at", kg_json_number(vals[12] ? atof(vals[12]) : 0.0)) == 0 &&
                 kg_json_set(o, "cached_from", kg_json_text(vals[8])) == 0 &&
                 kg_json_set(o, "error", kg_json_text(vals[5])) == 0 &&
                 kg_json_set(o, "coverage", vals[18] ? kg_json_number(atof(vals[18])) : json_null()) == 0;
        if (!ok)
            json_decref(o);
        else
            ok = kg_json_push(arr, o) == 0;
        if (!ok)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory listing jobs");
        free_vals(vals);
    }
    freeReplyObject(x);
    conn_put(r, c);
    if (rc != KG_OK) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return KG_OK;
}

/* In-flight marks (store.h).  One script each, so that a mark is replaced or removed only while it still names
 * the job the caller saw: two workers never both lead, and a leader never removes its successor's mark.
 * KEYS[1]: inflight:{key}; ARGV: id, stale, ttl (ms). */
static const char lead_script[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if cur and ARGV[2] ~= '' and cur == ARGV[2] then redis.call('DEL', KEYS[1]); cur = false end\n"
    "if not cur then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3]); return ARGV[1] end\n"
    "if cur == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end\n"
    "return cur\n";
static const char end_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
    "return 0\n";
/* The heartbeat's renewal: only the leader's own mark. */
static const char renew_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end\n"
    "return 0\n";

static int r_heartbeat(kg_store *base, const json_t *workers, double ttl_s, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    /* KG_OK only when every write and renewal went through: the scheduler counts a lease renewed only then
     * (kg_sched_leases_renewed). */
    int rc = KG_OK;
#define TRACK(e)                                                                                                   \
    do {                                                                                                           \
        if ((e) != KG_OK)                                                                                          \
            rc = KG_ERR_IO;                                                                                        \
    } while (0)
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w) {
        const char *name = json_string_value(json_object_get(w, "id"));
        const char *job = json_string_value(json_object_get(w, "current_job"));
        char *text = json_dumps(w, JSON_COMPACT);
        if (!name || !text) {
            free(text);
            continue;
        }
        if (ttl_s <= 0) { /* a worker that stops: listed no longer, its profile not counted at submit */
            free(text);
            TRACK(cmd_ok(c, err, "SREM " P "workers %s", name));
            TRACK(cmd_ok(c, err, "DEL " P "worker:%s", name));
            continue;
        }
        TRACK(cmd_ok(c, err, "SADD " P "workers %s", name));
        TRACK(cmd_ok(c, err, "SET " P "worker:%s %s EX %lld", name, text, (long long)(ttl_s > 1 ? ttl_s : 1)));
        free(text);
        if (job) {
            /* Renew the lease: XCLAIM by the owner resets the entry's idle time. */
            redisReply *x = cmd(c, err, "HGET " P "job:%s entry", job);
            if (!x)
                rc = KG_ERR_IO;
            else if (x->type == REDIS_REPLY_STRING)
                TRACK(cmd_ok(c, err, "XCLAIM " P "stream workers %s 0 %s JUSTID", name, x->str));
            freeReplyObject(x);
            /* And its in-flight mark, if it leads its content: followers wait while it lives. */
            const char *key = json_string_value(json_object_get(w, "current_key"));
            if (key && *key) {
                kg_buf k = {0};
                if (kg_buf_printf(&k, P "inflight:%s", key) != KG_OK)
                    rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
                char ttl[32];
                snprintf(ttl, sizeof ttl, "%lld", (long long)(r->lease_s * 1000));
                const char *argv[] = {"EVAL", renew_script, "1", k.data ? k.data : "", job, ttl};
                redisReply *y = k.data ? redisCommandArgv(c, 6, argv, NULL) : NULL;
                if (k.data && (!y || y->type == REDIS_REPLY_ERROR))
                    rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", y ? y->str : c->errstr);
                freeReplyObject(y);
                kg_buf_free(&k);
            }
        }
    }
#undef TRACK
    conn_put(r, c);
    return rc;
}

static int r_workers(kg_store *base, json_t **out, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    *out = NULL;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    redisReply *x = cmd(c, err, "SMEMBERS " P "workers");
    if (!x) {
        conn_put(r, c);
        return KG_ERR_IO;
    }
    /* The list is whole or an error (memory): a live worker is never left out, nor taken for gone. */
    json_t *arr = json_array();
    int rc = arr ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory listing workers");
    for (size_t i = 0; rc == KG_OK && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        const char *name = x->element[i]->str;
        redisReply *y = cmd(c, NULL, "GET " P "worker:%s", name);
        json_error_t jerr;
        json_t *w = y && y->type == REDIS_REPLY_STRING ? json_loads(y->str, 0, &jerr) : NULL;
        if (w) {
            if (kg_json_push(arr, w) != 0)
                rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory listing workers");
        } else if (y && y->type == REDIS_REPLY_STRING && json_error_code(&jerr) == json_error_out_of_memory) {
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory listing workers");
        } else { /* heartbeat expired: the worker is gone */
            cmd_ok(c, NULL, "SREM " P "workers %s", name);
        }
        freeReplyObject(y);
    }
    freeReplyObject(x);
    conn_put(r, c);
    if (rc != KG_OK) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return KG_OK;
}

static int r_inflight_lead(kg_store *base, const char *key, const char *id, const char *stale, char leader[160],
                            kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    leader[0] = '\0';
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    kg_buf k = {0};
    if (kg_buf_printf(&k, P "inflight:%s", key) != KG_OK) {
        conn_put(r, c);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    char ttl[32];
    snprintf(ttl, sizeof ttl, "%lld", (long long)(r->lease_s * 1000));
    const char *argv[] = {"EVAL", lead_script, "1", k.data ? k.data : "", id, stale ? stale : "", ttl};
    redisReply *x = redisCommandArgv(c, 7, argv, NULL);
    int rc = KG_OK;
    if (!k.data)
        rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    else if (!x || x->type == REDIS_REPLY_ERROR)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
    else if (x->type != REDIS_REPLY_STRING)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: an unexpected answer to the in-flight script");
    else
        snprintf(leader, 160, "%s", x->str);
    freeReplyObject(x);
    kg_buf_free(&k);
    conn_put(r, c);
    return rc;
}

static int r_inflight_leader(kg_store *base, const char *key, char leader[160], kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    leader[0] = '\0';
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    redisReply *x = cmd(c, err, "GET " P "inflight:%s", key);
    int rc = x ? KG_OK : KG_ERR_IO;
    if (x && x->type == REDIS_REPLY_STRING)
        snprintf(leader, 160, "%s", x->str);
    freeReplyObject(x);
    conn_put(r, c);
    return rc;
}

static int r_inflight_end(kg_store *base, const char *key, const char *id, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    redisContext *c = conn_get(r, err);
    if (!c)
        return KG_ERR_IO;
    kg_buf k = {0};
    if (kg_buf_printf(&k, P "inflight:%s", key) != KG_OK) {
        conn_put(r, c);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    const char *argv[] = {"EVAL", end_script, "1", k.data ? k.data : "", id};
    redisReply *x = redisCommandArgv(c, 5, argv, NULL);
    int rc = KG_OK;
    if (!x || x->type == REDIS_REPLY_ERROR)
        rc = kg_error_set(err, KG_ERR_IO, "Redis: %s", x ? x->str : c->errstr);
    freeReplyObject(x);
    kg_buf_free(&k);
    conn_put(r, c);
    return rc;
}

/* kg_store_watch's thread: SUBSCRIBE kgym:done on a connection of its own, each message's id to on_end.  poll()
 * with a timeout, not a read timeout (hiredis leaves a context that timed out unusable), so a stop is seen within
 * a second.  A lost connection is made again after a second; once back, on_end(NULL): what was published
 * meanwhile is gone, so every waiter reads its jobs. */
static void *watch_main(void *arg)
{
    kg_rstore *r = arg;
    int lost = 0;
    while (!__atomic_load_n(&r->watch_stop, __ATOMIC_SEQ_CST)) {
        struct timeval tv = {2, 0};
        redisContext *c = redisConnectWithTimeout(r->host, r->port, tv);
        redisReply *x = c && !c->err ? redisCommand(c, "SUBSCRIBE " P "done") : NULL;
        if (!x || x->type == REDIS_REPLY_ERROR) {
            freeReplyObject(x);
            if (c)
                redisFree(c);
            lost = 1;
            struct pollfd none;
            poll(&none, 0, 1000);
            continue;
        }
        freeReplyObject(x);
        if (lost)
            r->on_end(r->on_end_arg, NULL);
        lost = 0;
        while (!__atomic_load_n(&r->watch_stop, __ATOMIC_SEQ_CST)) {
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            int n = poll(&p, 1, 1000);
            if (n == 0 || (n < 0 && errno == EINTR))
                continue;
            void *reply = NULL;
            if (n < 0 || redisGetReply(c, &reply) != REDIS_OK) {
                lost = 1;
                break;
            }
            /* One read may have brought several messages: every complete one in the reader now. */
            do {
                redisReply *m = reply;
                if (m && m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING &&
                    !strcmp(m->element[0]->str ? m->element[0]->str : "", "message"))
                    r->on_end(r->on_end_arg, m->element[2]->str);
                freeReplyObject(reply);
                reply = NULL;
            } while (redisReaderGetReply(c->reader, &reply) == REDIS_OK && reply);
        }
        redisFree(c);
    }
    return NULL;
}

static int r_watch(kg_store *base, void (*on_end)(void *arg, const char *id), void *arg, kg_error *err)
{
    kg_rstore *r = (kg_rstore *)base;
    if (r->watching)
        return kg_error_set(err, KG_ERR_INVALID, "the store is watched already");
    r->on_end = on_end;
    r->on_end_arg = arg;
    __atomic_store_n(&r->watch_stop, 0, __ATOMIC_SEQ_CST);
    if (pthread_create(&r->watcher, NULL, watch_main, r) != 0)
        return kg_error_set(err, KG_ERR_IO, "cannot start the thread that watches Redis for ended jobs");
    r->watching = 1;
    return KG_OK;
}

static void r_unwatch(kg_store *base)
{
    kg_rstore *r = (kg_rstore *)base;
    if (!r->watching)
        return;
    __atomic_store_n(&r->watch_stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(r->watcher, NULL);
    r->watching = 0;
}

static const kg_store_ops redis_ops = {
    .name = "redis",
    .flags = KG_STORE_SHARED | KG_STORE_LEASED | KG_STORE_CLAIM_WAITS | KG_STORE_NEWS,
    .close = r_close,
    .put_many = r_put_many,
    .get = r_get,
    .find_done = r_find_done,
    .claim = r_claim,
    .finish = r_finish,
    .requeue = r_requeue,
    .cancel = r_cancel,
    .count = r_count,
    .list = r_list,
    .queue_position = r_queue_position,
    .check = r_check,
    .require_durable = r_require_durable,
    .durability = r_durability,
    /* recover: NULL: leases do its job (an entry whose worker died is claimed again). */
    .configure = r_configure,
    .heartbeat = r_heartbeat,
    .workers = r_workers,
    .inflight_lead = r_inflight_lead,
    .inflight_leader = r_inflight_leader,
    .inflight_end = r_inflight_end,
    .watch = r_watch,
    .unwatch = r_unwatch,
};
