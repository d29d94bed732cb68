/* sqlite.c — the job store on one SQLite database in WAL mode (see store.h, backend.h). */
#include "store/backend.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/util.h"

typedef struct sqlite_store {
    kg_store base; /* first: the method table */
    sqlite3 *db;
    char *path;       /* for messages */
    pthread_mutex_t lock;
} sqlite_store;

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
    " finished_at REAL NOT NULL DEFAULT 0, grp TEXT);"
    "CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status, seq);"
    "CREATE INDEX IF NOT EXISTS jobs_key ON jobs(key, status);";

static int db_error(sqlite_store *s, kg_error *err, const char *what)
{
    return kg_error_set(err, KG_ERR_IO, "job store: %s: %s", what, sqlite3_errmsg(s->db));
}

/* The database file unlinked or replaced under us: SQLite would go on
 * writing to the orphaned inode and every job acknowledged from then on
 * would be gone at the next start.  Caller holds the lock. */
static int file_lost(sqlite_store *s, kg_error *err)
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
static int tx_begin(sqlite_store *s, kg_error *err)
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
static int tx_end(sqlite_store *s, int rc, kg_error *err)
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

static const kg_store_ops sqlite_ops;

/* A database made before jobs had a routing group (kg_job.group) gets the column; its jobs have none (NULL: they
 * are claimed as a group of their own, store.h). */
static int add_group_column(sqlite3 *db, char **msg)
{
    /* Looked at and added in one write transaction: two processes opening one old database at once would both
     * find no column, and the second's ALTER fail ("duplicate column name"), that server not starting. */
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, msg);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    int has = 0;
    rc = sqlite3_prepare_v2(db, "PRAGMA table_info(jobs)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        int step;
        while ((step = sqlite3_step(st)) == SQLITE_ROW)
            has |= sqlite3_column_text(st, 1) && !strcmp((const char *)sqlite3_column_text(st, 1), "grp");
        if (step != SQLITE_DONE)
            rc = step;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && !has)
        rc = sqlite3_exec(db, "ALTER TABLE jobs ADD COLUMN grp TEXT", NULL, NULL, msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, msg);
    if (rc != SQLITE_OK) {
        if (!*msg)
            *msg = sqlite3_mprintf("%s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}

int kg_store_sqlite_open(const char *path, kg_store **out, kg_error *err)
{
    *out = NULL;
    sqlite_store *s = calloc(1, sizeof *s);
    if (!s)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
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
        sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK || add_group_column(s->db, &msg) != SQLITE_OK) {
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
    kg_store_base_init(&s->base, &sqlite_ops);
    *out = &s->base;
    return KG_OK;
}

static void sq_close(kg_store *base)
{
    sqlite_store *s = (sqlite_store *)base;
    kg_store_base_fini(base);
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
}

static char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? kg_strdup((const char *)t) : NULL;
}

#define JOB_COLUMNS                                                                              \
    "seq, id, status, key, request, result, error, verdict, worker, cached_from, attempts, "    \
    "submitted_at, started_at, finished_at, grp"

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
    j->group = col_text(st, 14);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Runs one statement that takes no result rows; returns sqlite's code. */
static int exec_simple(sqlite_store *s, const char *sql)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

/* One row of kg_store_put_many, inside its transaction (caller holds the lock). */
static int insert_one(sqlite_store *s, const kg_job *job, int replace, double t, kg_error *err)
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
    kg_store_result_facts(job->result, NULL, &verdict, &reward, &speedup, &has_speedup, &coverage);
    char *label = kg_store_job_label(job);
    /* REPLACE deletes the old row: the job gets a new seq, i.e. joins the
     * queue at its end, which is what a fresh evaluation should do. */
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO jobs (id, status, key, request, result, error, verdict,"
                           " reward, speedup, label, cached_from, submitted_at, finished_at, coverage, grp)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
        bind_text(st, 15, job->group);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_error(s, err, "insert");
    }
    sqlite3_finalize(st);
    free(verdict);
    free(label);
    return rc;
}

static int sq_put_many(kg_store *base, const kg_job *jobs, size_t n, const int *replace, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    double t = kg_wall_s();
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

static int get_where(sqlite_store *s, const char *sql, const char *arg, kg_job *out, kg_error *err)
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

static int sq_get(kg_store *base, const char *id, kg_job *out, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    return get_where(s, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?", id ? id : "", out, err);
}

static int sq_find_done(kg_store *base, const char *key, kg_job *out, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    return get_where(s,
                     "SELECT " JOB_COLUMNS " FROM jobs WHERE key = ? AND status = 'done'"
                     " ORDER BY seq DESC LIMIT 1",
                     key ? key : "", out, err);
}

static int sq_claim(kg_store *base, const char *worker, const kg_route *route, kg_job *out, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    int rc = tx_begin(s, err);
    if (rc != KG_OK) {
        pthread_mutex_unlock(&s->lock);
        return rc;
    }
    sqlite3_stmt *st = NULL;
    long long seq = -1;
    /* The window's queued jobs, oldest first; routed, the best of them (store.h).  Homes live in shared stores
     * only: processes sharing one database file route by their own judges alone. */
    long long seqs[KG_ROUTE_WINDOW];
    char *groups[KG_ROUTE_WINDOW];
    size_t n = 0;
    /* the window is of sequence numbers from the oldest (store.h: no job waits for ever) */
    if (sqlite3_prepare_v2(s->db,
                           "SELECT seq, grp FROM jobs WHERE status = 'queued' AND seq < (SELECT MIN(seq) FROM jobs"
                           " WHERE status = 'queued') + ? ORDER BY seq LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "claim");
        goto out;
    }
    sqlite3_bind_int(st, 1, KG_ROUTE_WINDOW);
    sqlite3_bind_int(st, 2, route ? KG_ROUTE_WINDOW : 1);
    while (n < KG_ROUTE_WINDOW && sqlite3_step(st) == SQLITE_ROW) {
        seqs[n] = sqlite3_column_int64(st, 0);
        groups[n] = col_text(st, 1); /* NULL for none, or when out of memory: then it is not routed */
        n++;
    }
    sqlite3_finalize(st);
    st = NULL;
    long pick = kg_route_pick(route, (const char *const *)groups, n);
    if (pick >= 0)
        seq = seqs[pick];
    for (size_t i = 0; i < n; i++)
        free(groups[i]);
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
    sqlite3_bind_double(st, 2, kg_wall_s());
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

static int sq_finish_as(kg_store *base, const char *id, const char *status, const char *result,
                        const json_t *result_json, const char *error, const char *key, const char *cached_from, double at,
                        kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    char *verdict = NULL;
    double reward = 0, speedup = 0;
    int has_speedup = 0;
    double coverage;
    kg_store_result_facts(result, result_json, &verdict, &reward, &speedup, &has_speedup, &coverage);
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
        sqlite3_bind_double(st, 7, at);
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

static int sq_requeue(kg_store *base, const char *id, const char *reason, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
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

static int sq_check(kg_store *base, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    pthread_mutex_lock(&s->lock);
    int rc = file_lost(s, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int sq_cancel(kg_store *base, const char *id, char was[16], kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
    kg_job j;
    int rc = sq_get(base, id, &j, err);
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
        sqlite3_bind_double(st, 1, kg_wall_s());
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

static int sq_recover(kg_store *base, int max_attempts, int *requeued, int *failed, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
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
        (sqlite3_bind_double(st, 1, kg_wall_s()), sqlite3_bind_int(st, 2, max_attempts),
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

static long sq_count(kg_store *base, const char *status)
{
    sqlite_store *s = (sqlite_store *)base;
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

static long sq_queue_position(kg_store *base, const char *id)
{
    sqlite_store *s = (sqlite_store *)base;
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
        if (sq_get(base, id, &j, NULL) != KG_OK || !j.status || strcmp(j.status, "queued"))
            n = -1;
        kg_job_free(&j);
    }
    return n;
}

static int sq_list(kg_store *base, const char *status, int limit, json_t **out, kg_error *err)
{
    sqlite_store *s = (sqlite_store *)base;
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
        /* A listing is whole or an error: a summary that cannot be built (memory) fails the listing, never a
         * summary without some fields or a shorter list. */
        int ok = arr != NULL;
        while (ok && sqlite3_step(st) == SQLITE_ROW) {
            json_t *o = json_object();
            const char *names[] = {"id", "status", "verdict"};
            for (int c = 0; ok && c < 3; c++)
                ok = kg_json_set(o, names[c], kg_json_text((const char *)sqlite3_column_text(st, c))) == 0;
            ok = ok && kg_json_set(o, "reward", kg_json_number(sqlite3_column_double(st, 3))) == 0 &&
                 kg_json_set(o, "speedup", sqlite3_column_type(st, 4) == SQLITE_NULL
                                               ? json_null()
                                               : kg_json_number(sqlite3_column_double(st, 4))) == 0 &&
                 kg_json_set(o, "task", kg_json_text((const char *)sqlite3_column_text(st, 5))) == 0 &&
                 kg_json_set(o, "attempts", json_integer(sqlite3_column_int(st, 6))) == 0 &&
                 kg_json_set(o, "submitted_at", kg_json_number(sqlite3_column_double(st, 7))) == 0 &&
                 kg_json_set(o, "started_at", kg_json_number(sqlite3_column_double(st, 8))) == 0 &&
                 kg_json_set(o, "finished_at", kg_json_number(sqlite3_column_double(st, 9))) == 0 &&
                 kg_json_set(o, "cached_from", kg_json_text((const char *)sqlite3_column_text(st, 10))) == 0 &&
                 kg_json_set(o, "error", kg_json_text((const char *)sqlite3_column_text(st, 11))) == 0 &&
                 kg_json_set(o, "coverage", sqlite3_column_type(st, 12) == SQLITE_NULL
                                                ? json_null()
                                                : kg_json_number(sqlite3_column_double(st, 12))) == 0;
            if (!ok) {
                json_decref(o);
                break;
            }
            ok = kg_json_push(arr, o) == 0;
        }
        if (!ok)
            rc = kg_error_set(err, KG_ERR_NOMEM, "out of memory listing jobs");
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

static const kg_store_ops sqlite_ops = {
    .name = "sqlite",
    .flags = 0,
    .close = sq_close,
    .put_many = sq_put_many,
    .get = sq_get,
    .find_done = sq_find_done,
    .claim = sq_claim,
    .finish = sq_finish_as,
    .requeue = sq_requeue,
    .cancel = sq_cancel,
    .count = sq_count,
    .list = sq_list,
    .queue_position = sq_queue_position,
    .check = sq_check,
    /* durability NULL: WAL with synchronous=NORMAL keeps every acknowledged job through a crash of the process
     * (an OS crash can lose the last commits). */
    .recover = sq_recover,
    /* configure, heartbeat, workers, inflight_*: NULL (one server; its in-flight marks live in it: store.c). */
};
