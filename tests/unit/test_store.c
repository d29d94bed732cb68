/* test_store.c — the service's job table: one contract (queue order,
 * claiming, finishing, cancelling, dedup lookups, in-flight marks, recovery
 * after a crash) run on the SQLite and the memory backends; SQLite's own
 * faults (a deleted file, a full disk); and the KernelGYM response mapping
 * of stored results. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include "server/server.h"
#include "server/service.h"
#include "store/backend.h"
#include "task/task.h"
#include "store/store.h"
#include "util/util.h"
#include "kg_fault.h"
#include "kg_stores.h"

static int pass, fail;
#define CHECK(cond, what)                                                                                   \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            pass++;                                                                                         \
        } else {                                                                                            \
            fail++;                                                                                         \
            printf("FAIL %s (line %d)\n", what, __LINE__);                                                  \
        }                                                                                                   \
    } while (0)

static int put_req(kg_store *s, const char *id, const char *request)
{
    kg_job j;
    memset(&j, 0, sizeof j);
    j.id = (char *)id;
    j.key = "kfull";
    j.request = (char *)request;
    kg_error err;
    return kg_store_put(s, &j, 0, &err);
}

/* A database on a 1 MiB tmpfs filled by puts: every put that said KG_OK is
 * there after a reopen, none that failed is (a COMMIT that failed on the
 * full disk used to be ignored: acknowledged, then lost).  Root only. */
static void full_disk(const char *dir)
{
    if (geteuid() != 0) {
        printf("skip: full-disk checks need root (a tmpfs mount)\n");
        return;
    }
    kg_buf mnt = {0}, path = {0};
    kg_buf_printf(&mnt, "%s/tiny", dir);
    kg_buf_printf(&path, "%s/tiny/jobs.db", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", mnt.data);
    if (system(cmd) != 0 || mount("tmpfs", mnt.data, "tmpfs", 0, "size=1m") != 0) {
        printf("skip: cannot mount a tmpfs at %s (no CAP_SYS_ADMIN?)\n", mnt.data);
        kg_buf_free(&mnt);
        kg_buf_free(&path);
        return;
    }
    kg_store *s = NULL;
    kg_error err;
    CHECK(kg_store_open(path.data, &s, &err) == KG_OK, "open on a tiny tmpfs");
    /* ~40 KiB per request: the disk is full after a few dozen. */
    kg_buf req = {0};
    kg_buf_puts(&req, "{\"task\":\"t\",\"kernel_code\":\"");
    for (int i = 0; i < 40 * 1024; i++)
        kg_buf_puts(&req, "x");
    kg_buf_puts(&req, "\"}");
    int acked = 0, refused = 0;
    char ids[200][16];
    int ok_of[200];
    for (int i = 0; i < 200; i++) {
        snprintf(ids[i], sizeof ids[i], "f%d", i);
        ok_of[i] = put_req(s, ids[i], req.data) == KG_OK;
        acked += ok_of[i];
        refused += !ok_of[i];
    }
    CHECK(refused > 0 && acked > 0, "the tiny disk fills up: some puts refused");
    kg_job j;
    CHECK(kg_store_put(s, &(kg_job){.id = "after", .key = "k", .request = req.data}, 0, &err) == KG_ERR_IO &&
              strstr(err.message, "job store"),
          "a put on a full disk fails with the store's error");
    kg_store_close(s);
    s = NULL;
    CHECK(kg_store_open(path.data, &s, &err) == KG_OK, "reopen after the disk was full");
    int present = 0, lost = 0, ghosts = 0;
    for (int i = 0; s && i < 200; i++) {
        int there = kg_store_get(s, ids[i], &j, &err) == KG_OK;
        kg_job_free(&j);
        present += there;
        lost += ok_of[i] && !there;
        ghosts += !ok_of[i] && there;
    }
    CHECK(lost == 0, "no acknowledged job lost on a full disk");
    CHECK(ghosts == 0 && present == acked, "no refused job stored");
    if (lost || ghosts)
        printf("  acknowledged %d, present %d, lost %d, refused but stored %d\n", acked, present, lost, ghosts);
    kg_store_close(s);
    kg_buf_free(&req);
    umount2(mnt.data, MNT_DETACH);
    kg_buf_free(&mnt);
    kg_buf_free(&path);
}

static int put(kg_store *s, const char *id, const char *key, const char *status, const char *result)
{
    kg_job j;
    memset(&j, 0, sizeof j);
    j.id = (char *)id;
    j.key = (char *)key;
    j.request = "{\"task\":\"add_one\",\"reference_code\":\"x\",\"kernel_code\":\"y\"}";
    j.status = (char *)status;
    j.result = (char *)result;
    kg_error err;
    return kg_store_put(s, &j, 0, &err);
}

typedef struct {
    kg_store *s;
    int claimed;
} claimer;

static void *claim_all(void *arg)
{
    claimer *c = arg;
    kg_job j;
    kg_error err;
    while (kg_store_claim(c->s, "t", &j, &err) == KG_OK) {
        c->claimed++;
        kg_store_finish(c->s, j.id, "done", "{\"verdict\":\"correct\",\"reward\":1.0}", NULL, &err);
        kg_job_free(&j);
    }
    return NULL;
}

/* The contract every backend keeps (store.h), on path (a database file, or KG_STORE_MEMORY). */
/* What a kg_store_watch watcher heard (called in the cancelling thread here: no lock). */
typedef struct {
    char last[64];
    int calls;
} news_box;

static void heard(void *arg, const char *id)
{
    news_box *b = arg;
    b->calls++;
    snprintf(b->last, sizeof b->last, "%s", id ? id : "(all)");
}

static void contract(const char *path)
{
    kg_error err;
    printf("contract: %s\n", path);
    kg_store *s = NULL;
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "open");

    /* Queue order: oldest first, attempts counted, status running. */
    CHECK(put(s, "a", "k1", NULL, NULL) == KG_OK, "put a");
    CHECK(put(s, "b", "k2", NULL, NULL) == KG_OK, "put b");
    CHECK(put(s, "a", "k1", NULL, NULL) == KG_ERR_INVALID, "duplicate id refused without replace");
    CHECK(kg_store_count(s, "queued") == 2, "two queued");
    CHECK(kg_store_queue_position(s, "a") == 0 && kg_store_queue_position(s, "b") == 1, "queue positions");
    kg_job j;
    CHECK(kg_store_claim(s, "w0", &j, &err) == KG_OK && !strcmp(j.id, "a") && !strcmp(j.status, "running") &&
              j.attempts == 1 && j.started_at > 0 && !strcmp(j.worker, "w0"),
          "claim takes the oldest");
    kg_job_free(&j);
    CHECK(kg_store_queue_position(s, "a") == -1, "a running job has no queue position");

    /* A running job cannot be replaced (force_refresh while it runs). */
    kg_job r;
    memset(&r, 0, sizeof r);
    r.id = "a";
    r.key = "k1";
    r.request = "{}";
    CHECK(kg_store_put(s, &r, 1, &err) == KG_ERR_INVALID, "running job not replaced");

    /* Finish: verdict copied for listings; finishing twice is refused. */
    const char *res =
        "{\"verdict\":\"incorrect\",\"reward\":0.7,\"timing\":{\"speedup\":1.5},\"profile\":{\"coverage\":0.9}}";
    CHECK(kg_store_finish(s, "a", "done", res, NULL, &err) == KG_OK, "finish a");
    CHECK(kg_store_finish(s, "a", "done", res, NULL, &err) == KG_ERR_NOT_FOUND, "finish twice refused");
    CHECK(kg_store_get(s, "a", &j, &err) == KG_OK && !strcmp(j.status, "done") && j.verdict &&
              !strcmp(j.verdict, "incorrect") && j.finished_at >= j.started_at && j.result && !j.error,
          "get a done job");
    kg_job_free(&j);
    json_t *l0 = NULL;
    CHECK(kg_store_list(s, "done", 10, &l0, &err) == KG_OK && json_array_size(l0) == 1 &&
              json_real_value(json_object_get(json_array_get(l0, 0), "coverage")) == 0.9 &&
              json_real_value(json_object_get(json_array_get(l0, 0), "speedup")) == 1.5 &&
              !strcmp(json_string_value(json_object_get(json_array_get(l0, 0), "task")), "add_one"),
          "listing carries verdict facts: speedup, coverage, task");
    json_decref(l0);
    CHECK(kg_store_get(s, "nope", &j, &err) == KG_ERR_NOT_FOUND, "unknown id");
    kg_job_free(&j);

    /* Dedup lookup by content key: only done jobs count. */
    CHECK(kg_store_find_done(s, "k1", &j, &err) == KG_OK && !strcmp(j.id, "a"), "find done by key");
    kg_job_free(&j);
    CHECK(kg_store_find_done(s, "k2", &j, &err) == KG_ERR_NOT_FOUND, "queued job is no cache hit");
    kg_job_free(&j);

    /* A worker records its result under its own key (its profile's), with the job it was copied from. */
    CHECK(put(s, "rk", "submitter-key", NULL, NULL) == KG_OK, "put rk");
    CHECK(kg_store_claim(s, "w0", &j, &err) == KG_OK && !strcmp(j.id, "b"), "b first");
    kg_job_free(&j);
    CHECK(kg_store_claim(s, "w0", &j, &err) == KG_OK && !strcmp(j.id, "rk"), "then rk");
    kg_job_free(&j);
    CHECK(kg_store_finish_as(s, "rk", "done", res, NULL, "worker-key", "a", &err) == KG_OK, "finish as");
    CHECK(kg_store_requeue(s, "b", "not yet", &err) == KG_OK, "b back in the queue");
    CHECK(kg_store_find_done(s, "submitter-key", &j, &err) == KG_ERR_NOT_FOUND, "not under the submitter's key");
    kg_job_free(&j);
    CHECK(kg_store_find_done(s, "worker-key", &j, &err) == KG_OK && !strcmp(j.id, "rk") && j.cached_from &&
              !strcmp(j.cached_from, "a") && !strcmp(j.key, "worker-key"),
          "found under the worker's key, copied from a");
    kg_job_free(&j);

    /* Cancel: queued → cancelled, then never claimed; finished jobs stay.  Each watcher hears of a cancel made in
     * this process before kg_store_cancel returns (kg_store_watch), of that cancel only, and none after it left. */
    news_box n1 = {.calls = 0}, n2 = {.calls = 0};
    CHECK(kg_store_watch(s, heard, &n1, &err) == KG_OK && kg_store_watch(s, heard, &n2, &err) == KG_OK,
          "two watchers");
    char was[16];
    CHECK(kg_store_cancel(s, "b", was, &err) == KG_OK && !strcmp(was, "queued"), "cancel queued");
    CHECK(n1.calls == 1 && n2.calls == 1 && !strcmp(n1.last, "b") && !strcmp(n2.last, "b"),
          "each watcher heard of the cancel, before it returned");
    kg_store_unwatch(s, heard, &n1);
    CHECK(kg_store_claim(s, "w0", &j, &err) == KG_ERR_NOT_FOUND, "cancelled job not claimed");
    CHECK(kg_store_cancel(s, "a", was, &err) == KG_ERR_INVALID, "cancel a done job refused");
    CHECK(kg_store_cancel(s, "zzz", was, &err) == KG_ERR_NOT_FOUND, "cancel unknown");
    CHECK(n1.calls == 1 && n2.calls == 1, "a refused cancel is no news, and an unwatched watcher hears nothing");
    kg_store_unwatch(s, heard, &n2);

    /* Replace a finished job: queued again at the end (force_refresh). */
    r.status = "queued";
    r.request = "{\"task\":\"again\"}";
    CHECK(kg_store_put(s, &r, 1, &err) == KG_OK && kg_store_count(s, "queued") == 1, "finished job re-queued");

    /* A crash: running jobs come back as queued; one interrupted too often fails. */
    CHECK(put(s, "c", "k3", NULL, NULL) == KG_OK, "put c");
    kg_job x, y;
    CHECK(kg_store_claim(s, "w0", &x, &err) == KG_OK && kg_store_claim(s, "w1", &y, &err) == KG_OK,
          "claim two");
    kg_job_free(&x);
    kg_job_free(&y);
    if (strcmp(path, KG_STORE_MEMORY)) { /* a file: the 'crash' is a close; memory: a pool restarted over it */
        kg_store_close(s);
        s = NULL;
        CHECK(kg_store_open(path, &s, &err) == KG_OK, "reopen after a 'crash'");
    }
    int requeued = -1, failed = -1;
    CHECK(kg_store_recover(s, 3, &requeued, &failed, &err) == KG_OK && requeued == 2 && failed == 0,
          "recover re-queues both running jobs");
    /* Claim c twice more (3 attempts), crash each time: then it is failed. */
    for (int i = 0; i < 2; i++) {
        while (kg_store_claim(s, "w", &x, &err) == KG_OK)
            kg_job_free(&x);
        kg_store_recover(s, 3, &requeued, &failed, &err);
    }
    CHECK(kg_store_get(s, "c", &j, &err) == KG_OK && !strcmp(j.status, "failed") && j.attempts == 3 && j.error &&
              strstr(j.error, "interrupted 3 times"),
          "a job interrupted max_attempts times is failed with a reason");
    kg_job_free(&j);

    /* Listing: newest first, filtered by status. */
    json_t *list = NULL;
    CHECK(kg_store_list(s, "failed", 10, &list, &err) == KG_OK && json_array_size(list) == 2, "list failed");
    json_decref(list);
    CHECK(kg_store_list(s, NULL, 1, &list, &err) == KG_OK && json_array_size(list) == 1, "list limit");
    json_decref(list);

    /* Concurrent claimers never take the same job twice. */
    for (int i = 0; i < 60; i++) {
        char id[32];
        snprintf(id, sizeof id, "p%d", i);
        put(s, id, "kp", NULL, NULL);
    }
    claimer c1 = {s, 0}, c2 = {s, 0};
    pthread_t th1, th2;
    pthread_create(&th1, NULL, claim_all, &c1);
    pthread_create(&th2, NULL, claim_all, &c2);
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    CHECK(c1.claimed + c2.claimed == 60 && kg_store_count(s, "queued") == 0, "60 jobs claimed exactly once");

    /* A batch is all or nothing: one id that exists keeps every job out. */
    CHECK(put(s, "m2", "km", NULL, NULL) == KG_OK, "put m2");
    kg_job batch[3];
    memset(batch, 0, sizeof batch);
    const char *bids[] = {"m1", "m2", "m3"};
    for (int i = 0; i < 3; i++) {
        batch[i].id = (char *)bids[i];
        batch[i].key = "km";
        batch[i].request = "{}";
    }
    CHECK(kg_store_put_many(s, batch, 3, NULL, &err) == KG_ERR_INVALID && strstr(err.message, "m2"),
          "a batch with an existing id is refused, naming it");
    CHECK(kg_store_get(s, "m1", &j, &err) == KG_ERR_NOT_FOUND && kg_store_get(s, "m3", &j, &err) == KG_ERR_NOT_FOUND,
          "...and none of its jobs is stored");
    batch[1].id = "m4";
    CHECK(kg_store_put_many(s, batch, 3, NULL, &err) == KG_OK && kg_store_count(s, "queued") == 4,
          "a good batch is stored whole");

    /* A result that cannot be stored: the job goes back to the queue with the reason. */
    int requeued_once = 0;
    while (kg_store_claim(s, "w", &x, &err) == KG_OK) {
        if (!strcmp(x.id, "m3") && !requeued_once++)
            CHECK(kg_store_requeue(s, "m3", "the result could not be stored: disk full", &err) == KG_OK,
                  "requeue a running job");
        kg_job_free(&x);
    }
    CHECK(kg_store_get(s, "m3", &j, &err) == KG_OK && !strcmp(j.status, "running"), "...and claimed again");
    kg_job_free(&j);
    CHECK(kg_store_requeue(s, "m3", "the result could not be stored: disk full", &err) == KG_OK, "requeue again");
    CHECK(kg_store_get(s, "m3", &j, &err) == KG_OK && !strcmp(j.status, "queued") && j.error &&
              strstr(j.error, "disk full") && !j.worker,
          "a requeued job is queued, with its reason");
    kg_job_free(&j);
    CHECK(kg_store_requeue(s, "m3", "x", &err) == KG_ERR_NOT_FOUND, "requeue of a job not running refused");
    CHECK(kg_store_claim(s, "w", &x, &err) == KG_OK && !strcmp(x.id, "m3") && x.attempts == 3,
          "a requeued job is claimed again, its attempts counted");
    CHECK(kg_store_finish(s, "m3", "done", "{\"verdict\":\"correct\"}", NULL, &err) == KG_OK, "finish m3");
    kg_job_free(&x);
    CHECK(kg_store_get(s, "m3", &j, &err) == KG_OK && !j.error, "a finished job keeps no requeue reason");
    kg_job_free(&j);

    /* Garbage results never crash the listing facts. */
    CHECK(put(s, "g", "kg", "done", "not json {") == KG_OK, "garbage result stored");
    CHECK(kg_store_get(s, "g", &j, &err) == KG_OK && !j.verdict, "no verdict from garbage");
    kg_job_free(&j);
    kg_store_close(s);

}

/* In-flight marks (kg_store_inflight_*): one leader per key; a stale leader is replaced; only the leader ends
 * its mark.  Backends without their own keep them in the process (store.c). */
static void marks(const char *path)
{
    kg_store *s = NULL;
    kg_error err;
    char leader[160];
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "open for marks");
    CHECK(kg_store_inflight_leader(s, "k", leader, &err) == KG_OK && !leader[0], "no mark yet");
    CHECK(kg_store_inflight_lead(s, "k", "j1", NULL, leader, &err) == KG_OK && !strcmp(leader, "j1"),
          "the first job leads");
    CHECK(kg_store_inflight_lead(s, "k", "j2", NULL, leader, &err) == KG_OK && !strcmp(leader, "j1"),
          "the second follows the first");
    CHECK(kg_store_inflight_lead(s, "k2", "j3", "", leader, &err) == KG_OK && !strcmp(leader, "j3"),
          "another key has its own leader");
    CHECK(kg_store_inflight_end(s, "k", "j2", &err) == KG_OK && kg_store_inflight_leader(s, "k", leader, &err) ==
              KG_OK && !strcmp(leader, "j1"),
          "a follower cannot end the leader's mark");
    CHECK(kg_store_inflight_lead(s, "k", "j2", "j1", leader, &err) == KG_OK && !strcmp(leader, "j2"),
          "a stale leader is replaced");
    CHECK(kg_store_inflight_end(s, "k", "j2", &err) == KG_OK && kg_store_inflight_leader(s, "k", leader, &err) ==
              KG_OK && !leader[0],
          "the leader ends its mark");
    kg_store_close(s);
}

/* Forgetting ended jobs (kg_store_forget): the memory store drops a done, failed or cancelled job, so its size goes
 * back down, and refuses one queued or running (that would lose it); SQLite keeps every job (the service's
 * record) and says so. */
static void forget(const char *path)
{
    kg_store *s = NULL;
    kg_error err;
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "open for forget");
    int forgets = kg_store_has(s, KG_STORE_FORGETS);
    CHECK(forgets == !strcmp(path, KG_STORE_MEMORY), "only the memory store forgets");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "f%d", i);
        put(s, id, id, NULL, NULL);
    }
    kg_job j;
    char was[16];
    CHECK(kg_store_claim(s, "w", &j, &err) == KG_OK && !strcmp(j.id, "f0"), "claim f0");
    kg_job_free(&j);
    CHECK(kg_store_forget(s, "f0", &err) == KG_ERR_INVALID, "a running job is not forgotten");
    CHECK(kg_store_forget(s, "f3", &err) == KG_ERR_INVALID, "a queued job is not forgotten");
    CHECK(kg_store_finish(s, "f0", "done", "{\"verdict\":\"correct\"}", NULL, &err) == KG_OK, "finish f0");
    CHECK(kg_store_claim(s, "w", &j, &err) == KG_OK && !strcmp(j.id, "f1"), "claim f1");
    kg_job_free(&j);
    CHECK(kg_store_finish(s, "f1", "failed", NULL, "no", &err) == KG_OK, "fail f1");
    CHECK(kg_store_cancel(s, "f2", was, &err) == KG_OK, "cancel f2");
    CHECK(kg_store_count(s, NULL) == 4, "four jobs before forgetting");
    int rc0 = kg_store_forget(s, "f0", &err), rc1 = kg_store_forget(s, "f1", &err),
        rc2 = kg_store_forget(s, "f2", &err);
    if (forgets) {
        CHECK(rc0 == KG_OK && rc1 == KG_OK && rc2 == KG_OK, "done, failed and cancelled jobs are forgotten");
        CHECK(kg_store_count(s, NULL) == 1 && kg_store_count(s, "queued") == 1, "the store's size goes back down");
        CHECK(kg_store_get(s, "f0", &j, &err) == KG_ERR_NOT_FOUND, "a forgotten job is gone");
        kg_job_free(&j);
        CHECK(kg_store_forget(s, "f0", &err) == KG_ERR_NOT_FOUND, "forgetting it again: no such job");
        CHECK(kg_store_claim(s, "w", &j, &err) == KG_OK && !strcmp(j.id, "f3"), "the queue is as it was");
        kg_job_free(&j);
    } else {
        CHECK(rc0 == KG_ERR_INVALID && strstr(err.message, "keeps its ended jobs"), "SQLite keeps its ended jobs");
        CHECK(kg_store_count(s, NULL) == 4, "...all of them");
    }
    kg_store_close(s);
}

/* The listing facts of a result are the same whether the store parses its text or is handed it parsed (a worker
 * that holds the result: no parse in the process), and absent fields keep their defaults. */
static void facts_from_text_or_parsed(void)
{
    const char *texts[] = {
        "{\"verdict\":\"correct\",\"reward\":1.0,\"timing\":{\"speedup\":2.5},\"profile\":{\"coverage\":0.75}}",
        "{\"verdict\":\"incorrect\",\"reward\":0.7}",
        "{\"verdict\":\"hacked\",\"reward\":\"x\",\"timing\":{\"speedup\":null}}",
        "[1, 2]",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        json_t *r = json_loads(texts[i], 0, NULL);
        char *v1 = NULL, *v2 = NULL;
        double rw1, rw2, sp1, sp2, c1, c2;
        int h1, h2;
        kg_store_result_facts(texts[i], NULL, &v1, &rw1, &sp1, &h1, &c1);
        kg_store_result_facts("not read", r, &v2, &rw2, &sp2, &h2, &c2);
        CHECK(((!v1 && !v2) || (v1 && v2 && !strcmp(v1, v2))) && rw1 == rw2 && h1 == h2 && sp1 == sp2 && c1 == c2,
              "facts from the text = facts from the parsed result");
        if (i == 0)
            CHECK(v1 && !strcmp(v1, "correct") && rw1 == 1.0 && h1 && sp1 == 2.5 && c1 == 0.75, "every fact read");
        if (i == 1)
            CHECK(v1 && !strcmp(v1, "incorrect") && rw1 == 0.7 && !h1 && c1 == -1, "absent speedup and coverage");
        if (i == 2)
            CHECK(rw1 == 0 && !h1, "a reward or speedup that is not a number is none");
        free(v1);
        free(v2);
        json_decref(r);
    }
}

/* Allocation failures (docs/style.md): jansson's allocator fails its Nth allocation, for every N a listing or
 * a job's JSON takes.  Each gives the unfailed JSON or an error naming memory, never a listing or a job with a
 * part left out (a summary without a field, a shorter list).  ASan checks nothing leaks on the way out. */
/* what: 0 the store's listing, 1 a job's JSON (kg_server_job_json_from, which a listing's reader and every
 * waiter gets).  *dump: its text (sorted keys) or NULL; the status. */
static int fault_json(kg_store *s, const kg_job *j, const json_t *result, const json_t *request, int what,
                      long fail_at, char **dump)
{
    json_t *out = NULL;
    kg_error err;
    kg_error_clear(&err);
    kg_fault_arm(fail_at);
    int rc = KG_OK;
    if (what == 0)
        rc = kg_store_list(s, NULL, 10, &out, &err);
    else if (!(out = kg_server_job_json_from(j, result, request, 1)))
        rc = kg_error_set(&err, KG_ERR_NOMEM, "out of memory");
    kg_fault_disarm();
    *dump = out ? json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    if (rc != KG_OK && out)
        rc = KG_ERR_INTERNAL; /* a failure must not hand out JSON */
    if (rc == KG_ERR_NOMEM && !strstr(err.message, "out of memory"))
        rc = KG_ERR_INTERNAL;
    json_decref(out);
    return rc;
}

static void allocation_failures_give_no_partial_json(const char *path)
{
    kg_store *s = NULL;
    kg_error err;
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "open for allocation failures");
    if (!s)
        return;
    put(s, "fa", "ka", NULL, NULL);
    put(s, "fb", "kb", "done", "{\"verdict\":\"correct\",\"reward\":1.0,\"timing\":{\"speedup\":2.5}}");
    put(s, "fc", "kc", NULL, NULL);
    kg_job j;
    CHECK(kg_store_get(s, "fb", &j, &err) == KG_OK, "get fb");
    json_t *result = json_loads(j.result, 0, NULL), *request = json_loads(j.request, 0, NULL);
    for (int what = 0; what < 2; what++) {
        char *want = NULL;
        CHECK(fault_json(s, &j, result, request, what, 0, &want) == KG_OK && want, "unfailed JSON");
        long total = kg_fault_count; /* of the unfailed run */
        CHECK(total > 20, "the hook sees the JSON's allocations");
        long nomem = 0, same = 0, other = 0;
        for (long n = 1; n <= total; n++) {
            char *got = NULL;
            int rc = fault_json(s, &j, result, request, what, n, &got);
            if (rc == KG_OK && got && want && !strcmp(got, want))
                same++;
            else if (rc == KG_ERR_NOMEM && !got)
                nomem++;
            else {
                if (other++ == 0)
                    printf("  %s, allocation %ld failed: rc %d, %s\n", what ? "job JSON" : "listing", n, rc,
                           got ? got : "(none)");
            }
            free(got);
        }
        CHECK(other == 0 && nomem > 0 && nomem + same == total,
              what ? "a job's JSON is whole or out of memory" : "a listing is whole or out of memory");
        free(want);
    }
    json_decref(result);
    json_decref(request);
    kg_job_free(&j);
    kg_store_close(s);
}

/* -- Routing (store.h kg_route) ------------------------------------------------------------------------------ */


/* The id a claim routed by r took ("" when none), its job's group into group (may be NULL). */
static const char *claim_id(kg_store *s, const char *worker, const kg_route *r, char id[64], char group[16])
{
    kg_job j;
    kg_error err;
    id[0] = '\0';
    if (group)
        group[0] = '\0';
    if ((r ? kg_store_claim_routed(s, worker, r, &j, &err) : kg_store_claim(s, worker, &j, &err)) == KG_OK) {
        snprintf(id, 64, "%s", j.id);
        if (group)
            snprintf(group, 16, "%s", j.group ? j.group : "");
        /* ended at once (a lease running out must not bring it back: the takeover below looks for one job) */
        kg_store_finish(s, j.id, "done", "{\"verdict\":\"correct\",\"reward\":1.0}", NULL, &err);
        kg_job_free(&j);
    }
    return id;
}

static kg_route route_of(const char *const *hot, size_t nhot, const char *const *busy, size_t nbusy,
                         const char *home)
{
    kg_route r = {.hot = hot, .nhot = nhot, .busy = busy, .nbusy = nbusy, .home = home, .home_ttl_s = 60};
    return r;
}

/* The rule (store.h): a waiting judge's task first, then a task nobody holds, then a busy one, then another
 * process's; oldest first within ranks 0 and 1, the most work a judge first within 2 and 3; the window bounds how far a claim looks.  On every backend; homes and the
 * entries of a stream (Redis) where the store is shared. */
static void routing(const char *path)
{
    kg_error err;
    printf("routing: %s\n", path);
    kg_store *s = NULL;
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "open");
    if (!s)
        return;
    kg_store_require_durable(s, 1, &err);
    const char *A[] = {"A"}, *B[] = {"B"}, *AB[] = {"A", "B"};
    char id[64], g[16];
    CHECK(kg_test_put_grouped(s, "a1", "A") == KG_OK && kg_test_put_grouped(s, "a2", "A") == KG_OK && kg_test_put_grouped(s, "b1", "B") == KG_OK &&
              kg_test_put_grouped(s, "n1", NULL) == KG_OK && kg_test_put_grouped(s, "c1", "C") == KG_OK,
          "jobs of three tasks and one without a group");
    kg_job got;
    CHECK(kg_store_get(s, "a2", &got, &err) == KG_OK && got.group && !strcmp(got.group, "A"),
          "a job keeps its group in the store");
    kg_job_free(&got);
    CHECK(kg_store_get(s, "n1", &got, &err) == KG_OK && !got.group, "a job without a group has none");
    kg_job_free(&got);
    kg_route r = route_of(NULL, 0, NULL, 0, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, g), "a1") && !strcmp(g, "A"), "nothing held: the oldest");
    r = route_of(NULL, 0, A, 1, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "b1"), "a busy task's next job waits while a task nobody holds is queued");
    r = route_of(A, 1, B, 1, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "a2"), "the task of a waiting judge first");
    r = route_of(NULL, 0, AB, 2, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "n1"), "a job without a group is a task nobody holds");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "c1"), "then the next task nobody holds");
    CHECK(kg_test_put_grouped(s, "b2", "B") == KG_OK && kg_test_put_grouped(s, "a3", "A") == KG_OK, "two more of busy tasks");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "b2"), "only busy tasks queued: the oldest (a second judge)");
    CHECK(!strcmp(claim_id(s, "w", NULL, id, NULL), "a3"), "unrouted: the oldest");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), ""), "the queue is empty");

    /* Only busy tasks queued: the task with the most queued jobs for each of its judges at work, its oldest job;
     * ties to the oldest.  A has two judges at work and three jobs queued (1.5 a judge), B one and two (2). */
    const char *AAB[] = {"A", "A", "B"};
    CHECK(kg_test_put_grouped(s, "a4", "A") == KG_OK && kg_test_put_grouped(s, "a5", "A") == KG_OK &&
              kg_test_put_grouped(s, "a6", "A") == KG_OK && kg_test_put_grouped(s, "b4", "B") == KG_OK &&
              kg_test_put_grouped(s, "b5", "B") == KG_OK,
          "busy tasks' jobs, the older ones of the task with more judges");
    r = route_of(NULL, 0, AAB, 3, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "b4"), "the busy task with the most queued a judge (B 2, A 1.5)");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "a4"), "then A (1.5 a judge against B's 1), its oldest job");
    r = route_of(NULL, 0, AB, 2, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "a5"), "A 2 a judge against B's 1");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "a6"), "a tie (1 each): the oldest");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "b5"), "the last");
    r = route_of(A, 1, AB, 2, NULL);
    CHECK(kg_test_put_grouped(s, "b6", "B") == KG_OK && kg_test_put_grouped(s, "b7", "B") == KG_OK &&
              kg_test_put_grouped(s, "a7", "A") == KG_OK,
          "a waiting judge's task among busy ones");
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "a7"), "a waiting judge still goes first, whatever is queued");
    while (claim_id(s, "w", NULL, id, NULL)[0]) {
    }

    /* The window: a job behind KG_ROUTE_WINDOW others is not looked at, however well it would rank. */
    int ok = 1;
    for (int i = 0; i < KG_ROUTE_WINDOW + 4 && ok; i++) {
        char wid[32];
        snprintf(wid, sizeof wid, "w%d", i);
        ok = kg_test_put_grouped(s, wid, "W") == KG_OK;
    }
    const char *W[] = {"W"}, *Z[] = {"Z"};
    CHECK(ok && kg_test_put_grouped(s, "z1", "Z") == KG_OK, "a queue longer than the window");
    r = route_of(Z, 1, W, 1, NULL);
    CHECK(!strcmp(claim_id(s, "w", &r, id, NULL), "w0"), "a job behind the window is not claimed before its turn");
    int claimed = 1;
    while (claim_id(s, "w", NULL, id, NULL)[0])
        claimed++;
    CHECK(claimed == KG_ROUTE_WINDOW + 5, "every job claimed once");

    /* No job waits for ever: an old job of a task nobody holds, among jobs of a task whose judge always waits
     * (rank 0 each time), is claimed once fewer than KG_ROUTE_WINDOW later jobs went first. */
    ok = kg_test_put_grouped(s, "s0", "S") == KG_OK && kg_test_put_grouped(s, "old", "O") == KG_OK;
    for (int i = 1; i < 2 * KG_ROUTE_WINDOW && ok; i++) {
        char sid[32];
        snprintf(sid, sizeof sid, "s%d", i);
        ok = kg_test_put_grouped(s, sid, "S") == KG_OK;
    }
    const char *S[] = {"S"};
    r = route_of(S, 1, NULL, 0, NULL);
    int before = -1;
    for (int i = 0; i < 2 * KG_ROUTE_WINDOW + 1 && before < 0; i++)
        if (!strcmp(claim_id(s, "w", &r, id, NULL), "old"))
            before = i;
    CHECK(ok && before >= 1 && before <= KG_ROUTE_WINDOW, "an old job is not passed for ever by a hot task's");
    while (claim_id(s, "w", NULL, id, NULL)[0]) {
    }

    if (kg_store_has(s, KG_STORE_SHARED)) {
        /* Homes: a task whose job a process claimed is that process's while it lives; another process takes a
         * task nobody holds first, and spills onto the first's only when nothing else is queued. */
        CHECK(kg_test_put_grouped(s, "h1", "H") == KG_OK && kg_test_put_grouped(s, "h2", "H") == KG_OK && kg_test_put_grouped(s, "k1", "K") == KG_OK &&
                  kg_test_put_grouped(s, "h3", "H") == KG_OK,
              "jobs of two tasks");
        kg_route p1 = route_of(NULL, 0, NULL, 0, "p1"), p2 = route_of(NULL, 0, NULL, 0, "p2");
        CHECK(!strcmp(claim_id(s, "p1#0", &p1, id, NULL), "h1"), "p1 takes the oldest, its task becomes p1's");
        CHECK(!strcmp(claim_id(s, "p2#0", &p2, id, NULL), "k1"), "p2 takes a task nobody holds before p1's");
        const char *K[] = {"K"}, *H[] = {"H"};
        kg_route p2k = route_of(NULL, 0, K, 1, "p2");
        CHECK(!strcmp(claim_id(s, "p2#1", &p2k, id, NULL), "h2"), "p2 spills onto p1's task when nothing else is queued");
        kg_route p1h = route_of(H, 1, NULL, 0, "p1");
        CHECK(!strcmp(claim_id(s, "p1#0", &p1h, id, NULL), "h3"), "p1's waiting judge takes its task's last job");
        /* Spilling (rank 3) onto the task of another process's with the most queued jobs, not the oldest. */
        const char *Q[] = {"Q"};
        kg_route p1q = route_of(NULL, 0, Q, 1, "p1");
        CHECK(kg_test_put_grouped(s, "q1", "Q") == KG_OK && kg_test_put_grouped(s, "t1", "T") == KG_OK &&
                  !strcmp(claim_id(s, "p1#0", &p1, id, NULL), "q1") && !strcmp(claim_id(s, "p1#1", &p1q, id, NULL), "t1"),
              "p1 holds two tasks");
        CHECK(kg_test_put_grouped(s, "q2", "Q") == KG_OK && kg_test_put_grouped(s, "t2", "T") == KG_OK &&
                  kg_test_put_grouped(s, "t3", "T") == KG_OK,
              "more of both");
        CHECK(!strcmp(claim_id(s, "p2#0", &p2, id, NULL), "t2"), "p2 spills onto p1's task with more queued (T 2, Q 1)");
        while (claim_id(s, "p1#0", NULL, id, NULL)[0]) {
        }

        /* A job claimed with another job's entry: when its worker dies, the entry brings back that job (not the
         * one the entry named, which was claimed with an entry of its own or is still queued). */
        kg_store_configure(s, 1.0, 3, 3600);
        CHECK(kg_test_put_grouped(s, "x1", "X") == KG_OK && kg_test_put_grouped(s, "y1", "Y") == KG_OK && kg_test_put_grouped(s, "y2", "Y") == KG_OK,
              "jobs for a takeover");
        const char *Y[] = {"Y"};
        kg_route hy = route_of(Y, 1, NULL, 0, "p3");
        kg_job held;
        int have = kg_store_claim_routed(s, "p3#0", &hy, &held, &err) == KG_OK;
        CHECK(have && !strcmp(held.id, "y1"), "a waiting judge's task, claimed with x1's entry");
        if (have)
            kg_job_free(&held);
        /* p3 dies here: y1's lease runs out */
        usleep(1300 * 1000);
        kg_route p4 = route_of(NULL, 0, NULL, 0, "p4");
        kg_job j;
        int taken = kg_store_claim_routed(s, "p4#0", &p4, &j, &err) == KG_OK;
        CHECK(taken && !strcmp(j.id, "y1") && j.attempts == 2, "the dead worker's job is taken over (attempts 2)");
        if (taken) {
            CHECK(kg_store_finish(s, j.id, "done", "{\"verdict\":\"correct\",\"reward\":1.0}", NULL, &err) == KG_OK,
                  "finished by its new worker");
            kg_job_free(&j);
        }
        char seen[3][64];
        int n = 0;
        while (n < 3 && claim_id(s, "p4#0", &p4, seen[n], NULL)[0])
            n++;
        CHECK(n == 2 && ((!strcmp(seen[0], "x1") && !strcmp(seen[1], "y2")) ||
                         (!strcmp(seen[0], "y2") && !strcmp(seen[1], "x1"))),
              "the others are claimed once each, none twice, none lost");
        kg_store_configure(s, 60.0, 3, 3600);
    }
    kg_store_close(s);
}

/* A database made before jobs had a group: opened, it gets the column, and its jobs have none. */
static void old_database(const char *path)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK &&
              sqlite3_exec(db,
                           KG_TEST_JOBS_BEFORE_ROUTING "INSERT INTO jobs (id, status, key, request) VALUES ('old', 'queued', 'k', '{}');",
                           NULL, NULL, NULL) == SQLITE_OK,
          "a database of the old schema");
    sqlite3_close(db);
    kg_store *s = NULL;
    kg_error err;
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "opened by this kgym");
    if (!s)
        return;
    CHECK(kg_test_put_grouped(s, "new", "G") == KG_OK, "a job with a group put");
    const char *G[] = {"G"};
    kg_route r = route_of(G, 1, NULL, 0, NULL);
    char id[64], g[16];
    CHECK(!strcmp(claim_id(s, "w", &r, id, g), "new") && !strcmp(g, "G"), "routed in the old database");
    CHECK(!strcmp(claim_id(s, "w", &r, id, g), "old") && !g[0], "its old job, without a group");
    kg_store_close(s);
    CHECK(kg_store_open(path, &s, &err) == KG_OK, "opened again (the column is there already)");
    kg_store_close(s);
}

int main(void)
{
    char *dir = NULL;
    kg_error err;
    if (kg_temp_dir("kgym-test-store", &dir, &err) != KG_OK) {
        printf("cannot make a temp dir: %s\n0 passed, 1 failed\n", err.message);
        return 1;
    }
    kg_buf path = {0};
    kg_buf_printf(&path, "%s/jobs.db", dir);
    contract(path.data);
    contract(KG_STORE_MEMORY);
    marks(path.data);
    marks(KG_STORE_MEMORY);
    {
        kg_buf rpath = {0}, opath = {0};
        CHECK(kg_buf_printf(&rpath, "%s/routing.db", dir) == KG_OK && kg_buf_printf(&opath, "%s/old.db", dir) == KG_OK,
              "path");
        routing(rpath.data);
        routing(KG_STORE_MEMORY);
        old_database(opath.data);
        char url[64];
        int port = 0;
        pid_t redis = kg_test_redis_start(dir, &port, url);
        if (redis > 0) {
            routing(url);
            kg_test_redis_stop(redis);
        } else {
            printf("skip: no redis-server (routing on Redis)\n");
        }
        kg_buf_free(&rpath);
        kg_buf_free(&opath);
    }
    {
        kg_buf fpath = {0};
        CHECK(kg_buf_printf(&fpath, "%s/forget.db", dir) == KG_OK, "path");
        forget(fpath.data);
        kg_buf_free(&fpath);
    }
    forget(KG_STORE_MEMORY);
    facts_from_text_or_parsed();
    allocation_failures_give_no_partial_json(KG_STORE_MEMORY);
    {
        kg_buf fpath = {0};
        CHECK(kg_buf_printf(&fpath, "%s/faults.db", dir) == KG_OK, "path");
        allocation_failures_give_no_partial_json(fpath.data);
        kg_buf_free(&fpath);
    }
    kg_store *s = NULL;
    kg_job x;

    /* The database file deleted under a running server: noticed, nothing more accepted. */
    CHECK(kg_store_open(path.data, &s, &err) == KG_OK && kg_store_check(s, &err) == KG_OK, "reopen: healthy");
    unlink(path.data);
    CHECK(kg_store_check(s, &err) == KG_ERR_IO && strstr(err.message, "deleted"), "a deleted database is noticed");
    CHECK(put(s, "late", "kl", NULL, NULL) == KG_ERR_IO, "no put into a deleted database");
    CHECK(kg_store_claim(s, "w", &x, &err) == KG_ERR_IO, "no claim from a deleted database");
    kg_store_close(s);

    full_disk(dir);

    /* A bad path is an error, not a crash. */
    CHECK(kg_store_open("/nonexistent/dir/x.db", &s, &err) != KG_OK && strstr(err.message, "x.db"),
          "bad database path");

    /* KernelGYM mapping. */
    json_t *job = json_pack("{s:s, s:s, s:f, s:f, s:f, s:{s:{s:i}}}", "id", "t1", "status", "done",
                            "submitted_at", 1.0, "started_at", 2.0, "finished_at", 3.5, "request", "client",
                            "num_perf_trials", 7);
    json_object_set_new(job, "result",
                        json_loads("{\"verdict\":\"correct\",\"feedback\":\"ok\",\"device\":{\"kind\":\"cuda\","
                                   "\"name\":\"H100\"},\"correctness\":{\"passed_count\":7,\"variants\":[1,2,3,4,5,"
                                   "6,7]},\"timing\":{\"reference_ms\":{\"median\":2.0},\"candidate_ms\":{\"median\":"
                                   "1.0},\"speedup\":2.0},\"profile\":{\"coverage\":0.9,\"total_device_us\":250.0,"
                                   "\"candidate_device_us\":225.0,\"kernel_count\":4,\"candidate_kernel_count\":3}}",
                                   0, NULL));
    json_t *k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "completed") &&
              json_is_true(json_object_get(k, "compiled")) && json_is_true(json_object_get(k, "correctness")) &&
              json_real_value(json_object_get(k, "speedup")) == 2.0 &&
              json_real_value(json_object_get(k, "reference_runtime")) == 2.0 &&
              json_is_null(json_object_get(k, "error_message")) &&
              json_real_value(json_object_get(k, "processing_time")) == 1.5,
          "correct result maps onto KernelGYM fields");
    json_t *meta = json_object_get(k, "metadata");
    CHECK(!strcmp(json_string_value(json_object_get(meta, "correctness_trials")), "(7 / 7)") &&
              json_integer_value(json_object_get(meta, "num_perf_trials")) == 7 &&
              json_real_value(json_object_get(meta, "custom_kernel_cuda_time_in_profiling_us")) == 225.0 &&
              json_real_value(json_object_get(meta, "total_kernel_run_time_in_profiling_us")) == 250.0 &&
              json_integer_value(json_object_get(meta, "num_custom_kernel")) == 3 &&
              json_integer_value(json_object_get(meta, "num_total_kernels")) == 4 &&
              json_is_object(json_object_get(k, "kgym")),
          "metadata: trials, the profile's device times and kernel counts (Dr. Kernel's coverage), kgym result");
    json_decref(k);
    /* A coverage the timed calls bound below the profiled share (red team 30): the candidate's time sent is the
     * bounded share of the total, so the client's division gives the result's coverage. */
    json_object_set_new(json_object_get(json_object_get(job, "result"), "profile"), "coverage", json_real(0.4));
    k = kg_service_kernelgym_response(job);
    meta = json_object_get(k, "metadata");
    CHECK(json_real_value(json_object_get(meta, "custom_kernel_cuda_time_in_profiling_us")) == 100.0 &&
              json_real_value(json_object_get(meta, "total_kernel_run_time_in_profiling_us")) == 250.0,
          "metadata: the candidate's time is the bounded coverage's share of the total");
    json_decref(k);
    json_object_set_new(job, "result",
                        json_loads("{\"verdict\":\"compile_error\",\"feedback\":\"ImportError: no module "
                                   "magic\",\"timing\":null,\"error\":{\"type\":\"ImportError\",\"message\":\"no "
                                   "module magic\"}}",
                                   0, NULL));
    k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "failed") &&
              json_is_false(json_object_get(k, "compiled")) &&
              !strcmp(json_string_value(json_object_get(k, "error_code")), "COMPILATION_ERROR") &&
              strstr(json_string_value(json_object_get(k, "error_message")), "magic") &&
              json_real_value(json_object_get(k, "kernel_runtime")) == -1.0 &&
              json_real_value(json_object_get(k, "speedup")) == 0.0,
          "compile error: failed, with kgym's feedback, runtimes -1");
    json_decref(k);
    json_object_set_new(job, "result",
                        json_loads("{\"verdict\":\"incorrect\",\"feedback\":\"3 elements differ\","
                                   "\"timing\":{\"speedup\":5.0}}",
                                   0, NULL));
    k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "completed") &&
              json_is_true(json_object_get(k, "compiled")) && json_is_false(json_object_get(k, "correctness")) &&
              json_real_value(json_object_get(k, "speedup")) == 0.0 &&
              !strcmp(json_string_value(json_object_get(k, "error_code")), "CORRECTNESS_ERROR"),
          "incorrect: completed, no speedup credit");
    json_decref(k);
    json_object_set_new(job, "status", json_string("failed"));
    json_object_set_new(job, "result", json_null());
    json_object_set_new(job, "error", json_string("the task failed on its own: NameError"));
    k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "failed") &&
              !strcmp(json_string_value(json_object_get(k, "error_code")), "SYSTEM_ERROR") &&
              strstr(json_string_value(json_object_get(k, "error_message")), "NameError"),
          "system failure keeps its message");
    json_decref(k);
    json_object_set_new(job, "status", json_string("cancelled"));
    k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "failed") &&
              !strcmp(json_string_value(json_object_get(k, "error_message")), "Task cancelled") &&
              !strcmp(json_string_value(json_object_get(k, "submitted_at")), "1970-01-01T00:00:01.000Z"),
          "cancelled is failed (KernelGYM has no such status), times are ISO strings");
    json_decref(k);
    json_object_set_new(job, "status", json_string("queued"));
    k = kg_service_kernelgym_response(job);
    CHECK(!strcmp(json_string_value(json_object_get(k, "status")), "pending"), "queued is pending");
    json_decref(k);
    json_decref(job);

    /* SHA-256 content keys (FIPS 180-2 test vector "abc"). */
    char h[KG_SHA256_STRLEN];
    CHECK(kg_sha256_string("abc", 3, h) == KG_OK &&
              !strcmp(h, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
          "SHA-256 of \"abc\"");

    /* kg_task_from_source: a file named by the hash, reused. */
    kg_task t1, t2;
    const char *src = "import torch\nclass Model: pass\n";
    CHECK(kg_task_from_source(src, strlen(src), "mytask", dir, &t1, &err) == KG_OK && kg_file_exists(t1.path) &&
              !strcmp(t1.id, "mytask") && strstr(t1.path, "task-") && strlen(strstr(t1.path, "task-")) == 5 + 64 + 3,
          "task from source");
    CHECK(kg_task_from_source(src, strlen(src), NULL, dir, &t2, &err) == KG_OK && !strcmp(t1.path, t2.path) &&
              !strcmp(t1.hash, t2.hash),
          "same source, same file");
    kg_task_free(&t1);
    kg_task_free(&t2);
    CHECK(kg_task_from_source(src, strlen(src), NULL, "/nonexistent/x", &t1, &err) != KG_OK, "bad folder");
    kg_task_free(&t1);

    kg_buf_free(&path);
    kg_remove_tree(dir);
    free(dir);
    printf("%d passed, %d failed\n", pass, fail);
    return fail != 0;
}
