/* store.c — the SQLite job table (see store.h). */
#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "store/redis.h"
#include "util/util.h"

struct kg_store {
    kg_rstore *redis; /* non-NULL: the fleet's Redis instead of SQLite */
    sqlite3 *db;
    char *path;       /* for messages */
    pthread_mutex_t lock;
};

static const char *const schema =
    "CREATE TABLE IF NOT EXISTS jobs ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " request TEXT NOT NULL,"
    " result TEXT, error TEXT, verdict TEXT, reward REAL, speedup REAL, coverage REAL, label TEXT,"
    " worker TEXT, cached_from TEXT,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " submitted_at REAL NOT NULL DEFAULT 0, started_at REAL NOT NULL DEFAULT 0,"
    " finished_at REAL NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status, seq);"
    "CREATE INDEX IF NOT EXISTS jobs_key ON jobs(key, status);";

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static int db_error(kg_store *s, kg_error *err, const char *what)
{
    return kg_error_set(err, KG_ERR_IO, "job store: %s: %s", what, sqlite3_errmsg(s->db));
}

/* The database file unlinked or replaced under us: SQLite would go on
 * writing to the orphaned inode and every job acknowledged from then on
 * would be gone at the next start.  Caller holds the lock. */
static int file_lost(kg_store *s, kg_error *err)
{
    int moved = 0;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved)
        return kg_error_set(err, KG_ERR_IO,
                            "job store: the database file %s was deleted or replaced while the server ran; "
                            "nothing more is accepted (restart the server)",
                            s->path);
    return KG_OK;
}

/* BEGIN IMMEDIATE, refused when the file is gone.  Caller holds the lock. */
static int tx_begin(kg_store *s, kg_error *err)
{
    int rc = file_lost(s, err);
    if (rc != KG_OK)
        return rc;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_error(s, err, "begin");
    return KG_OK;
}

/* COMMIT when rc is KG_OK, else ROLLBACK.  A COMMIT that fails (a full disk)
 * is rolled back and reported: the caller must not acknowledge what it
 * wrote.  Caller holds the lock. */
static int tx_end(kg_store *s, int rc, kg_error *err)
{
    if (rc == KG_OK && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
        return KG_OK;
    if (rc == KG_OK)
        rc = db_error(s, err, "commit");
    /* Leaves no transaction open (a failed COMMIT keeps it open, and every
     * later write would silently join it). */
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int kg_store_open(const char *path, kg_store **out, kg_error *err)
{
    *out = NULL;
    kg_store *s = calloc(1, sizeof *s);
    if (!s)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    if (!strncmp(path, "redis://", 8)) {
        int rc = kg_rstore_open(path, &s->redis, err);
        if (rc != KG_OK) {
            free(s);
            return rc;
        }
        *out = s;
        return KG_OK;
    }
    /* FULLMUTEX: cheap, and it keeps sqlite safe even if a caller forgets our lock. */
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        int rc = kg_error_set(err, KG_ERR_IO, "cannot open the job database %s: %s", path,
                              s->db ? sqlite3_errmsg(s->db) : "out of memory");
        sqlite3_close(s->db);
        free(s);
        return rc;
    }
    sqlite3_busy_timeout(s->db, 5000);
    char *msg = NULL;
    /* WAL: readers never block the writer; synchronous=NORMAL is durable
     * across a process crash (only an OS crash can lose the last commits). */
    if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg) !=
            SQLITE_OK ||
        sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = kg_error_set(err, KG_ERR_IO, "cannot set up the job database %s: %s", path,
                              msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(s->db);
        free(s);
        return rc;
    }
    s->path = kg_strdup(path);
    if (!s->path) {
        sqlite3_close(s->db);
        free(s);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return KG_OK;
}

void kg_store_close(kg_store *s)
{
    if (!s)
        return;
    if (s->redis) {
        kg_rstore_close(s->redis);
        free(s);
        return;
    }
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
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
    memset(j, 0, sizeof *j);
}

static char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? kg_strdup((const char *)t) : NULL;
}

#define JOB_COLUMNS                                                                              \
    "seq, id, status, key, request, result, error, verdict, worker, cached_from, attempts, "    \
    "submitted_at, started_at, finished_at"

static void read_job(sqlite3_stmt *st, kg_job *j)
{
    memset(j, 0, sizeof *j);
    j->seq = sqlite3_column_int64(st, 0);
    j->id = col_text(st, 1);
    j->status = col_text(st, 2);
    j->key = col_text(st, 3);
    j->request = col_text(st, 4);
    j->result = col_text(st, 5);
    j->error = col_text(st, 6);
    j->verdict = col_text(st, 7);
    j->worker = col_text(st, 8);
    j->cached_from = col_text(st, 9);
    j->attempts = sqlite3_column_int(st, 10);
    j->submitted_at = sqlite3_column_double(st, 11);
    j->started_at = sqlite3_column_double(st, 12);
    j->finished_at = sqlite3_column_double(st, 13);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* verdict, reward and speedup of a result, for listings without parsing it. */
static void result_facts(const char *result, char **verdict, double *reward, double *speedup,
                         int *has_speedup, double *coverage)
{
    *verdict = NULL;
    *coverage = -1;
    *reward = 0;
    *speedup = 0;
    *has_speedup = 0;
    json_t *r = result ? json_loads(result, 0, NULL) : NULL;
    if (!r)
        return;
    *verdict = kg_strdup(json_string_value(json_object_get(r, "verdict")));
    *reward = json_number_value(json_object_get(r, "reward"));
    json_t *sp = json_object_get(json_object_get(r, "timing"), "speedup");
    if (json_is_number(sp)) {
        *speedup = json_number_value(sp);
        *has_speedup = 1;
    }
    json_t *cov = json_object_get(json_object_get(r, "profile"), "coverage");
    if (json_is_number(cov))
        *coverage = json_number_value(cov);
    json_decref(r);
}

static char *request_label(const char *request)
{
    json_t *r = request ? json_loads(request, 0, NULL) : NULL;
    char *label = kg_strdup(json_string_value(json_object_get(r, "task")));
    json_decref(r);
    return label;
}

/* Runs one statement that takes no result rows; returns sqlite's code. */
static int exec_simple(kg_store *s, const char *sql)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

/* One row of kg_store_put_many, inside its transaction (caller holds the lock). */
static int insert_one(kg_store *s, const kg_job *job, int replace, double t, kg_error *err)
{
    if (!job || !job->id || !job->key || !job->request)
        return kg_error_set(err, KG_ERR_INVALID, "a job needs an id, a key and a request");
    const char *status = job->status ? job->status : "queued";
    int rc = KG_OK;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT status FROM jobs WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "select");
    bind_text(st, 1, job->id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const char *old = (const char *)sqlite3_column_text(st, 0);
        if (!replace)
            rc = kg_error_set(err, KG_ERR_INVALID, "a job with id \"%s\" exists already", job->id);
        else if (old && !strcmp(old, "running"))
            rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" is running; it cannot be replaced", job->id);
    } else if (step != SQLITE_DONE) {
        rc = db_error(s, err, "select");
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != KG_OK)
        return rc;
    char *verdict = NULL;
    double reward = 0, speedup = 0;
    int has_speedup = 0;
    double coverage;
    result_facts(job->result, &verdict, &reward, &speedup, &has_speedup, &coverage);
    char *label = request_label(job->request);
    /* REPLACE deletes the old row: the job gets a new seq, i.e. joins the
     * queue at its end, which is what a fresh evaluation should do. */
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO jobs (id, status, key, request, result, error, verdict,"
                           " reward, speedup, label, cached_from, submitted_at, finished_at, coverage)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "insert");
    } else {
        bind_text(st, 1, job->id);
        bind_text(st, 2, status);
        bind_text(st, 3, job->key);
        bind_text(st, 4, job->request);
        bind_text(st, 5, job->result);
        bind_text(st, 6, job->error);
        bind_text(st, 7, verdict);
        sqlite3_bind_double(st, 8, reward);
        if (has_speedup)
            sqlite3_bind_double(st, 9, speedup);
        else
            sqlite3_bind_null(st, 9);
        bind_text(st, 10, label);
        bind_text(st, 11, job->cached_from);
        sqlite3_bind_double(st, 12, job->submitted_at > 0 ? job->submitted_at : t);
        sqlite3_bind_double(st, 13, strcmp(status, "queued") ? t : 0);
        if (coverage >= 0)
            sqlite3_bind_double(st, 14, coverage);
        else
            sqlite3_bind_null(st, 14);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_error(s, err, "insert");
    }
    sqlite3_finalize(st);
    free(verdict);
    free(label);
    return rc;
}

int kg_store_put_many(kg_store *s, const kg_job *jobs, size_t n, const int *replace, kg_error *err)
{
    if (s->redis)
        return kg_rstore_put_many(s->redis, jobs, n, replace, err);
    double t = now_s();
    pthread_mutex_lock(&s->lock);
    int rc = tx_begin(s, err);
    if (rc == KG_OK) {
        for (size_t i = 0; i < n && rc == KG_OK; i++)
            rc = insert_one(s, &jobs[i], replace ? replace[i] : 0, t, err);
        rc = tx_end(s, rc, err);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kg_store_put(kg_store *s, const kg_job *job, int replace, kg_error *err)
{
    return kg_store_put_many(s, job, 1, &replace, err);
}

static int get_where(kg_store *s, const char *sql, const char *arg, kg_job *out, kg_error *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "select");
    } else {
        bind_text(st, 1, arg);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            read_job(st, out);
            rc = KG_OK;
        } else if (step == SQLITE_DONE) {
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "no job \"%s\"", arg);
        } else {
            rc = db_error(s, err, "select");
        }
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kg_store_get(kg_store *s, const char *id, kg_job *out, kg_error *err)
{
    if (s->redis)
        return kg_rstore_get(s->redis, id, out, err);
    return get_where(s, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?", id ? id : "", out, err);
}

int kg_store_find_done(kg_store *s, const char *key, kg_job *out, kg_error *err)
{
    if (s->redis)
        return kg_rstore_find_done(s->redis, key, out, err);
    return get_where(s,
                     "SELECT " JOB_COLUMNS " FROM jobs WHERE key = ? AND status = 'done'"
                     " ORDER BY seq DESC LIMIT 1",
                     key ? key : "", out, err);
}

int kg_store_claim(kg_store *s, const char *worker, kg_job *out, kg_error *err)
{
    if (s->redis)
        return kg_rstore_claim(s->redis, worker, out, err);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    int rc = tx_begin(s, err);
    if (rc != KG_OK) {
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    sqlite3_stmt *st = NULL;
    long long seq = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT seq FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1", -1,
                           &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "claim");
        goto out;
    }
    if (sqlite3_step(st) == SQLITE_ROW)
        seq = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (seq < 0) {
        rc = kg_error_set(err, KG_ERR_NOT_FOUND, "the queue is empty");
        goto out;
    }
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE jobs SET status = 'running', worker = ?, attempts = attempts + 1,"
                           " started_at = ? WHERE seq = ?",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "claim");
        goto out;
    }
    bind_text(st, 1, worker);
    sqlite3_bind_double(st, 2, now_s());
    sqlite3_bind_int64(st, 3, seq);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_error(s, err, "claim");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT " JOB_COLUMNS " FROM jobs WHERE seq = ?", -1, &st, NULL) !=
        SQLITE_OK) {
        rc = db_error(s, err, "claim");
        goto out;
    }
    sqlite3_bind_int64(st, 1, seq);
    if (sqlite3_step(st) == SQLITE_ROW)
        read_job(st, out);
    else
        rc = db_error(s, err, "claim");
out:
    sqlite3_finalize(st);
    rc = tx_end(s, rc, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != KG_OK)
        kg_job_free(out); /* a claim that did not commit is no claim */
    return rc;
}

int kg_store_finish(kg_store *s, const char *id, const char *status, const char *result,
                    const char *error, kg_error *err)
{
    return kg_store_finish_as(s, id, status, result, error, NULL, NULL, err);
}

int kg_store_finish_as(kg_store *s, const char *id, const char *status, const char *result, const char *error,
                       const char *key, const char *cached_from, kg_error *err)
{
    if (s->redis)
        return kg_rstore_finish(s->redis, id, status, result, error, key, cached_from, err);
    if (!id || !status || (strcmp(status, "done") && strcmp(status, "failed")))
        return kg_error_set(err, KG_ERR_INVALID, "a job finishes as done or failed");
    char *verdict = NULL;
    double reward = 0, speedup = 0;
    int has_speedup = 0;
    double coverage;
    result_facts(result, &verdict, &reward, &speedup, &has_speedup, &coverage);
    pthread_mutex_lock(&s->lock);
    int rc = file_lost(s, err);
    sqlite3_stmt *st = NULL;
    if (rc != KG_OK) {
        /* nothing written: the caller retries or requeues */
    } else if (sqlite3_prepare_v2(s->db,
                           "UPDATE jobs SET status = ?, result = ?, error = ?, verdict = ?, reward = ?,"
                           " speedup = ?, finished_at = ?, coverage = ?, key = COALESCE(?, key),"
                           " cached_from = COALESCE(?, cached_from) WHERE id = ? AND status = 'running'",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "finish");
    } else {
        bind_text(st, 1, status);
        bind_text(st, 2, result);
        bind_text(st, 3, error);
        bind_text(st, 4, verdict);
        sqlite3_bind_double(st, 5, reward);
        if (has_speedup)
            sqlite3_bind_double(st, 6, speedup);
        else
            sqlite3_bind_null(st, 6);
        sqlite3_bind_double(st, 7, now_s());
        if (coverage >= 0)
            sqlite3_bind_double(st, 8, coverage);
        else
            sqlite3_bind_null(st, 8);
        bind_text(st, 9, key);
        bind_text(st, 10, cached_from);
        bind_text(st, 11, id);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_error(s, err, "finish");
        else if (sqlite3_changes(s->db) == 0)
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "job \"%s\" is not running", id);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    free(verdict);
    return rc;
}

int kg_store_requeue(kg_store *s, const char *id, const char *reason, kg_error *err)
{
    if (s->redis)
        return kg_rstore_requeue(s->redis, id, reason, err);
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    int rc = file_lost(s, err);
    /* Appended to the end of the queue (a new seq would need a new row; the
     * old seq keeps its place, which is fair: it was claimed in order). */
    if (rc != KG_OK) {
    } else if (sqlite3_prepare_v2(s->db,
                                  "UPDATE jobs SET status = 'queued', worker = NULL, started_at = 0, error = ?"
                                  " WHERE id = ? AND status = 'running'",
                                  -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "requeue");
    } else {
        bind_text(st, 1, reason);
        bind_text(st, 2, id);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_error(s, err, "requeue");
        else if (sqlite3_changes(s->db) == 0)
            rc = kg_error_set(err, KG_ERR_NOT_FOUND, "job \"%s\" is not running", id);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kg_store_check(kg_store *s, kg_error *err)
{
    if (s->redis)
        return kg_rstore_check(s->redis, err);
    pthread_mutex_lock(&s->lock);
    int rc = file_lost(s, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kg_store_require_durable(kg_store *s, int accept_volatile, kg_error *err)
{
    return s->redis ? kg_rstore_require_durable(s->redis, accept_volatile, err) : KG_OK;
}

void kg_store_durability_get(kg_store *s, kg_store_durability *out)
{
    if (s->redis) {
        kg_rstore_durability(s->redis, out);
        return;
    }
    /* WAL with synchronous=NORMAL: every acknowledged job survives a crash of the process (an OS crash can lose
     * the last commits). */
    memset(out, 0, sizeof *out);
    out->durable = 1;
}

int kg_store_cancel(kg_store *s, const char *id, char was[16], kg_error *err)
{
    if (s->redis)
        return kg_rstore_cancel(s->redis, id, was, err);
    kg_job j;
    int rc = kg_store_get(s, id, &j, err);
    if (rc != KG_OK)
        return rc;
    snprintf(was, 16, "%s", j.status ? j.status : "");
    kg_job_free(&j);
    if (strcmp(was, "queued") && strcmp(was, "running"))
        return kg_error_set(err, KG_ERR_INVALID, "job \"%s\" has finished (%s)", id, was);
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    rc = file_lost(s, err);
    if (rc != KG_OK) {
        /* refused: the cancel would be lost with the file */
    } else if (sqlite3_prepare_v2(s->db,
                           "UPDATE jobs SET status = 'cancelled', finished_at = ?"
                           " WHERE id = ? AND status IN ('queued', 'running')",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "cancel");
    } else {
        sqlite3_bind_double(st, 1, now_s());
        bind_text(st, 2, id);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_error(s, err, "cancel");
        else if (sqlite3_changes(s->db) == 0) /* it finished in between */
            rc = kg_error_set(err, KG_ERR_INVALID, "job \"%s\" has finished", id);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kg_store_recover(kg_store *s, int max_attempts, int *requeued, int *failed, kg_error *err)
{
    if (s->redis) { /* leases do this job: an entry whose worker died is claimed again */
        *requeued = *failed = 0;
        return KG_OK;
    }
    *requeued = *failed = 0;
    pthread_mutex_lock(&s->lock);
    int rc = tx_begin(s, err);
    if (rc != KG_OK) {
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE jobs SET status = 'failed', finished_at = ?, error = 'the evaluation"
                           " was interrupted ' || attempts || ' times (its process died each time); it"
                           " is not run again' WHERE status = 'running' AND attempts >= ?",
                           -1, &st, NULL) != SQLITE_OK ||
        (sqlite3_bind_double(st, 1, now_s()), sqlite3_bind_int(st, 2, max_attempts),
         sqlite3_step(st) != SQLITE_DONE)) {
        rc = db_error(s, err, "recover");
        goto out;
    }
    *failed = sqlite3_changes(s->db);
    sqlite3_finalize(st);
    st = NULL;
    if (exec_simple(s, "UPDATE jobs SET status = 'queued', worker = NULL WHERE status = 'running'") !=
        SQLITE_OK) {
        rc = db_error(s, err, "recover");
        goto out;
    }
    *requeued = sqlite3_changes(s->db);
out:
    sqlite3_finalize(st);
    rc = tx_end(s, rc, err);
    pthread_mutex_unlock(&s->lock);
    if (rc != KG_OK)
        *requeued = *failed = 0;
    return rc;
}

long kg_store_count(kg_store *s, const char *status)
{
    if (s->redis)
        return kg_rstore_count(s->redis, status);
    long n = -1;
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    const char *sql = status ? "SELECT COUNT(*) FROM jobs WHERE status = ?" : "SELECT COUNT(*) FROM jobs";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (status)
            bind_text(st, 1, status);
        if (sqlite3_step(st) == SQLITE_ROW)
            n = (long)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    return n;
}

long kg_store_queue_position(kg_store *s, const char *id)
{
    if (s->redis)
        return kg_rstore_queue_position(s->redis, id);
    long n = -1;
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND seq <"
                           " (SELECT seq FROM jobs WHERE id = ? AND status = 'queued')",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, id ? id : "", -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) == SQLITE_ROW)
            n = (long)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    /* COUNT over an empty subquery is 0 even for a job that is not queued. */
    if (n == 0) {
        kg_job j;
        if (kg_store_get(s, id, &j, NULL) != KG_OK || !j.status || strcmp(j.status, "queued"))
            n = -1;
        kg_job_free(&j);
    }
    return n;
}

int kg_store_list(kg_store *s, const char *status, int limit, json_t **out, kg_error *err)
{
    if (s->redis)
        return kg_rstore_list(s->redis, status, limit, out, err);
    *out = NULL;
    if (limit <= 0 || limit > 10000)
        limit = 100;
    json_t *arr = json_array();
    int rc = KG_OK;
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = NULL;
    const char *sql =
        status ? "SELECT id, status, verdict, reward, speedup, label, attempts, submitted_at, started_at,"
                 " finished_at, cached_from, error, coverage FROM jobs WHERE status = ? ORDER BY seq DESC LIMIT ?"
               : "SELECT id, status, verdict, reward, speedup, label, attempts, submitted_at, started_at,"
                 " finished_at, cached_from, error, coverage FROM jobs ORDER BY seq DESC LIMIT ?";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "list");
    } else {
        int i = 1;
        if (status)
            bind_text(st, i++, status);
        sqlite3_bind_int(st, i, limit);
        while (sqlite3_step(st) == SQLITE_ROW) {
            json_t *o = json_object();
            const char *names[] = {"id", "status", "verdict"};
            for (int c = 0; c < 3; c++) {
                const unsigned char *t = sqlite3_column_text(st, c);
                json_object_set_new(o, names[c], t ? json_string((const char *)t) : json_null());
            }
            json_object_set_new(o, "reward", json_real(sqlite3_column_double(st, 3)));
            json_object_set_new(o, "speedup", sqlite3_column_type(st, 4) == SQLITE_NULL
                                                  ? json_null()
                                                  : json_real(sqlite3_column_double(st, 4)));
            const unsigned char *label = sqlite3_column_text(st, 5);
            json_object_set_new(o, "task", label ? json_string((const char *)label) : json_null());
            json_object_set_new(o, "attempts", json_integer(sqlite3_column_int(st, 6)));
            json_object_set_new(o, "submitted_at", json_real(sqlite3_column_double(st, 7)));
            json_object_set_new(o, "started_at", json_real(sqlite3_column_double(st, 8)));
            json_object_set_new(o, "finished_at", json_real(sqlite3_column_double(st, 9)));
            const unsigned char *cf = sqlite3_column_text(st, 10);
            json_object_set_new(o, "cached_from", cf ? json_string((const char *)cf) : json_null());
            const unsigned char *e = sqlite3_column_text(st, 11);
            json_object_set_new(o, "error", e ? json_string((const char *)e) : json_null());
            json_object_set_new(o, "coverage", sqlite3_column_type(st, 12) == SQLITE_NULL
                                                   ? json_null()
                                                   : json_real(sqlite3_column_double(st, 12)));
            json_array_append_new(arr, o);
        }
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->lock);
    if (rc != KG_OK) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return KG_OK;
}

int kg_store_is_shared(const kg_store *s)
{
    return s->redis != NULL;
}

void kg_store_configure(kg_store *s, double lease_s, int max_attempts, double result_ttl_s)
{
    if (s->redis)
        kg_rstore_configure(s->redis, lease_s, max_attempts, result_ttl_s);
}

int kg_store_heartbeat(kg_store *s, const json_t *workers, double ttl_s, kg_error *err)
{
    return s->redis ? kg_rstore_heartbeat(s->redis, workers, ttl_s, err) : KG_OK;
}

int kg_store_workers(kg_store *s, json_t **out, kg_error *err)
{
    if (!s->redis) {
        *out = NULL;
        return kg_error_set(err, KG_ERR_NOT_FOUND, "a local store has no fleet");
    }
    return kg_rstore_workers(s->redis, out, err);
}

int kg_store_inflight_lead(kg_store *s, const char *key, const char *id, const char *stale, char leader[160],
                           kg_error *err)
{
    leader[0] = '\0';
    if (!s->redis)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "a local store has no fleet");
    return kg_rstore_inflight_lead(s->redis, key, id, stale, leader, err);
}

int kg_store_inflight_leader(kg_store *s, const char *key, char leader[160], kg_error *err)
{
    leader[0] = '\0';
    if (!s->redis)
        return kg_error_set(err, KG_ERR_NOT_FOUND, "a local store has no fleet");
    return kg_rstore_inflight_leader(s->redis, key, leader, err);
}

int kg_store_inflight_end(kg_store *s, const char *key, const char *id, kg_error *err)
{
    return s->redis ? kg_rstore_inflight_end(s->redis, key, id, err) : KG_OK;
}
