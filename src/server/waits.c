/*
 * waits.c — requests that wait for jobs (POST /evaluate, /evaluate/batch, GET /v1/jobs/{id}?wait=S) hold no
 * thread while they wait.  The handler suspends its connection (MHD_suspend_connection) and hands it here; one
 * waiter thread watches every waiting connection's socket and its jobs, and resumes the connection when its jobs
 * have ended, its time is up, its client has hung up, or the server stops.  The handler, called again by MHD,
 * then answers (or, for a client that left, closes the connection).
 *
 * Why: a waiting request used to hold a connection thread until its job ended (up to --sync-timeout), also after
 * its client had gone; a trainer whose HTTP timeout was shorter than the queue wait, retrying, filled every
 * connection slot with requests nobody would read.  MHD does not look at a suspended connection's socket, so the
 * waiter does: poll() for POLLRDHUP ends the wait the moment the client closes its end (a client that only
 * half-closes after sending its request counts as gone, as nginx counts it).
 *
 * A job that a worker of this process ends is handed over in memory (kg_waits_wake with the job): its waits are
 * done without reading the store, and the handler answers from the job it was given.  Jobs are read from the
 * store only at once for a new wait (it may have ended before the wait began), after a wake without a job (an
 * outcome the worker does not know in full), for the one job of which the store brings news (kg_store_watch: this
 * process cancelled it, or another process of a fleet ended it, Redis's kgym:done), and as a fallback every 5 s
 * (the store stays the truth; twice a second in a fleet whose store brings no news).
 *
 * Threads: kg_waits_add from MHD's handlers, kg_waits_wake from the scheduler's workers, kg_waits_stop and
 * kg_waits_free from the main thread.  Only the waiter thread resumes connections and frees entries.  The workers
 * outlive kg_waits_stop (they drain after MHD stops), so kg_waits_wake works on stopped waits, and kg_waits_free
 * comes after the scheduler stopped (http.c says the whole order).
 */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "server/server.h"

#define KG_WAIT_CHECK_MS 500.0        /* a fleet: jobs ended by another process are seen within this */
#define KG_WAIT_CHECK_LOCAL_MS 5000.0 /* otherwise: every end comes in memory; this is the safety net */

typedef struct wait_entry {
    struct wait_entry *next;
    struct MHD_Connection *c;
    int fd;             /* the connection's socket: POLLRDHUP when the client hangs up */
    char **ids;         /* the jobs waited for (owned) */
    size_t n, done;     /* ids[0..done) have ended */
    double deadline_ms; /* kg_now_ms() */
    int fresh;          /* not read from the store yet since it was added */
    int *outcome;       /* the handler's (its request context), written before the resume */
    json_t **ended;     /* the handler's: {id: job} of the jobs handed over in memory, written before the resume */
    json_t *got;        /* those jobs so far (this thread's) */
} wait_entry;

/* A job handed over by kg_waits_wake. */
typedef struct ended_job {
    struct ended_job *next;
    char *id;
    json_t *job;
} ended_job;

struct kg_waits {
    kg_store *store;
    pthread_t thread;
    int started;
    int wake_fd; /* eventfd: a new wait, a job ended, stop */
    pthread_mutex_t lock;
    wait_entry *incoming;   /* added, not yet taken by the thread (under lock) */
    ended_job *ended;       /* handed over, not yet taken by the thread (under lock) */
    double check_ms;        /* the fallback's period */
    int watching;           /* kg_store_watch's news come (store_news): this process's cancels, other processes'
                             * ends where the store tells (KG_STORE_NEWS) */
    size_t waiting;         /* entries added and not yet resumed (under lock) */
    int jobs_ended;         /* kg_waits_wake since the thread last looked (under lock) */
    int stopping;           /* under lock */
};

static void wake(kg_waits *w)
{
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one); /* only fails when the counter is full: awake anyway */
    (void)r;
}

static void entry_free(wait_entry *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->ids[i]);
    free(e->ids);
    json_decref(e->got);
    free(e);
}

static void ended_free(ended_job *x)
{
    while (x) {
        ended_job *next = x->next;
        free(x->id);
        json_decref(x->job);
        free(x);
        x = next;
    }
}

static void resume(kg_waits *w, wait_entry *e, int outcome)
{
    *e->outcome = outcome;
    if (e->ended && e->got) { /* the handler's now */
        *e->ended = e->got;
        e->got = NULL;
    }
    MHD_resume_connection(e->c);
    entry_free(e);
    pthread_mutex_lock(&w->lock);
    w->waiting--;
    pthread_mutex_unlock(&w->lock);
}

/* Is job id over in the store?  A job it no longer has is over too; a store that does not answer: not yet. */
static int job_over(kg_waits *w, const char *id)
{
    kg_job j;
    kg_error err;
    int rc = kg_store_get(w->store, id, &j, &err);
    if (rc != KG_OK)
        return rc == KG_ERR_NOT_FOUND;
    int over = strcmp(j.status, "queued") && strcmp(j.status, "running");
    kg_job_free(&j);
    return over;
}

/* Takes the news of ended jobs for e's ids (ids[0..done) have ended; an ended one moves there): a job handed
 * over is taken as it is; news without a job (another process ended it) is checked in the store, for that id
 * alone.  Returns 1 when all have ended. */
static int jobs_handed(kg_waits *w, wait_entry *e, const ended_job *x)
{
    for (; x && e->done < e->n; x = x->next) {
        for (size_t i = e->done; i < e->n; i++) {
            if (strcmp(e->ids[i], x->id))
                continue;
            int taken;
            if (x->job) {
                if (!e->got)
                    e->got = json_object();
                taken = e->got && json_object_set(e->got, x->id, x->job) == 0;
            } else {
                taken = job_over(w, x->id);
            }
            if (taken) {
                /* ended: moved before the ones still waited for */
                char *t = e->ids[e->done];
                e->ids[e->done] = e->ids[i];
                e->ids[i] = t;
                e->done++;
            }
            break;
        }
    }
    return e->done == e->n;
}

/* Have all of e's jobs ended?  A job the store no longer has (cancelled and expired, Redis lost its data) is
 * over too: the handler says what it finds.  A store that does not answer leaves the wait as it is. */
static int jobs_ended(kg_waits *w, wait_entry *e)
{
    while (e->done < e->n) {
        if (!job_over(w, e->ids[e->done]))
            return 0;
        e->done++;
    }
    return 1;
}

static void *waiter_main(void *arg)
{
    kg_waits *w = arg;
    wait_entry *mine = NULL; /* this thread's alone */
    size_t cap = 0;
    struct pollfd *pfd = NULL;
    double last_check = 0;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (w->incoming) { /* splice: the newest first does not matter, each has its own deadline */
            wait_entry *e = w->incoming;
            w->incoming = e->next;
            e->next = mine;
            mine = e;
        }
        int stop = w->stopping, ended = w->jobs_ended;
        w->jobs_ended = 0;
        ended_job *handed = w->ended;
        w->ended = NULL;
        pthread_mutex_unlock(&w->lock);
        if (stop) {
            ended_free(handed);
            while (mine) {
                wait_entry *e = mine;
                mine = e->next;
                resume(w, e, KG_WAIT_STOPPING);
            }
            break;
        }
        double now = kg_now_ms();
        int check = ended || now - last_check >= w->check_ms;
        if (check)
            last_check = now;
        /* The jobs, then the clock. */
        for (wait_entry **p = &mine; *p;) {
            wait_entry *e = *p;
            int outcome = KG_WAIT_PENDING;
            if (jobs_handed(w, e, handed) || ((check || e->fresh) && jobs_ended(w, e)))
                outcome = KG_WAIT_DONE;
            else if (kg_now_ms() >= e->deadline_ms)
                outcome = KG_WAIT_TIMEOUT;
            e->fresh = 0;
            if (outcome != KG_WAIT_PENDING) {
                *p = e->next;
                resume(w, e, outcome);
            } else {
                p = &e->next;
            }
        }
        ended_free(handed);
        /* The sockets: poll until a client hangs up, a wake, the next deadline or the next check. */
        size_t n = 0;
        for (wait_entry *e = mine; e; e = e->next)
            n++;
        if (n + 1 > cap) {
            struct pollfd *bigger = realloc(pfd, (n + 1) * 2 * sizeof *pfd);
            if (bigger) {
                pfd = bigger;
                cap = (n + 1) * 2;
            }
        }
        size_t np = 0;
        if (cap) {
            pfd[np++] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
            for (wait_entry *e = mine; e && np < cap; e = e->next)
                pfd[np++] = (struct pollfd){.fd = e->fd, .events = POLLRDHUP};
        }
        double next = last_check + w->check_ms;
        for (wait_entry *e = mine; e; e = e->next)
            if (e->deadline_ms < next)
                next = e->deadline_ms;
        double left = next - kg_now_ms();
        int timeout = left <= 0 ? 0 : (int)left + 1;
        int r = np ? poll(pfd, np, timeout) : poll(NULL, 0, timeout > 100 ? 100 : timeout); /* no memory: retry soon */
        if (r < 0 && errno != EINTR)
            r = 0;
        if (r > 0 && np) {
            if (pfd[0].revents & POLLIN) {
                uint64_t v;
                ssize_t got = read(w->wake_fd, &v, sizeof v);
                (void)got;
            }
            /* Clients that hung up (or whose socket failed): their wait ends now, the connection is closed. */
            size_t k = 1;
            for (wait_entry **p = &mine; *p && k < np; k++) {
                wait_entry *e = *p;
                if (pfd[k].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                    *p = e->next;
                    resume(w, e, KG_WAIT_GONE);
                } else {
                    p = &e->next;
                }
            }
        }
    }
    free(pfd);
    return NULL;
}

/* kg_store_watch's news: a job ended somewhere (id), or news may have been missed (NULL: every wait reads). */
static void store_news(void *arg, const char *id)
{
    kg_waits *w = arg;
    ended_job *x = id ? calloc(1, sizeof *x) : NULL;
    if (x && !(x->id = kg_strdup(id))) {
        free(x);
        x = NULL;
    }
    pthread_mutex_lock(&w->lock);
    if (x) {
        x->next = w->ended;
        w->ended = x;
    } else {
        w->jobs_ended = 1;
    }
    pthread_mutex_unlock(&w->lock);
    wake(w);
}

int kg_waits_start(kg_store *store, kg_waits **out, kg_error *err)
{
    *out = NULL;
    kg_waits *w = calloc(1, sizeof *w);
    if (!w)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    w->store = store;
    w->check_ms = KG_WAIT_CHECK_LOCAL_MS;
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0) {
        int e = errno;
        free(w);
        return kg_error_set(err, KG_ERR_IO, "eventfd: %s", strerror(e));
    }
    pthread_mutex_init(&w->lock, NULL);
    if (pthread_create(&w->thread, NULL, waiter_main, w) != 0) {
        kg_waits_free(w);
        return kg_error_set(err, KG_ERR_IO, "cannot start the waiter thread");
    }
    w->started = 1;
    /* News from the store: this process's cancels, and the jobs that other processes end (a fleet) where the store
     * tells (KG_STORE_NEWS); else, in a fleet, a check twice a second. */
    kg_error werr;
    int wrc = kg_store_watch(store, store_news, w, &werr);
    w->watching = wrc == KG_OK;
    if (wrc != KG_OK || (kg_store_has(store, KG_STORE_SHARED) && !kg_store_has(store, KG_STORE_NEWS)))
        w->check_ms = KG_WAIT_CHECK_MS;
    *out = w;
    return KG_OK;
}

int kg_waits_add(kg_waits *w, struct MHD_Connection *c, const char *const *ids, size_t n, double deadline_ms,
                 int *outcome, json_t **ended)
{
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    wait_entry *e = calloc(1, sizeof *e);
    if (!fd || !e || !(e->ids = calloc(n ? n : 1, sizeof *e->ids))) {
        free(e);
        return KG_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (!(e->ids[e->n++] = kg_strdup(ids[i]))) {
            entry_free(e);
            return KG_ERR_NOMEM;
        }
    e->c = c;
    e->fd = fd->connect_fd;
    e->deadline_ms = deadline_ms;
    e->fresh = 1;
    e->outcome = outcome;
    e->ended = ended;
    *outcome = KG_WAIT_PENDING;
    pthread_mutex_lock(&w->lock);
    if (w->stopping) {
        pthread_mutex_unlock(&w->lock);
        entry_free(e);
        return KG_ERR_INVALID;
    }
    /* Suspended before the thread can see it: it is never resumed before it was suspended. */
    MHD_suspend_connection(c);
    e->next = w->incoming;
    w->incoming = e;
    w->waiting++;
    pthread_mutex_unlock(&w->lock);
    wake(w);
    return KG_OK;
}

void kg_waits_wake(kg_waits *w, const char *id, json_t *job)
{
    if (!w)
        return;
    ended_job *x = id && job ? calloc(1, sizeof *x) : NULL;
    if (x && !(x->id = kg_strdup(id))) {
        free(x);
        x = NULL;
    }
    pthread_mutex_lock(&w->lock);
    if (x) {
        x->job = json_incref(job);
        x->next = w->ended;
        w->ended = x;
    } else {
        w->jobs_ended = 1; /* not handed over (or no memory for it): read from the store */
    }
    pthread_mutex_unlock(&w->lock);
    wake(w);
}

size_t kg_waits_count(kg_waits *w)
{
    pthread_mutex_lock(&w->lock);
    size_t n = w->waiting;
    pthread_mutex_unlock(&w->lock);
    return n;
}

void kg_waits_stop(kg_waits *w)
{
    if (!w || !w->started)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_mutex_unlock(&w->lock);
    wake(w);
    pthread_join(w->thread, NULL); /* it resumes every waiting connection, then ends */
    w->started = 0;
}

void kg_waits_free(kg_waits *w)
{
    if (!w)
        return;
    kg_waits_stop(w);
    if (w->watching) /* before the eventfd goes: the store's thread writes to it */
        kg_store_unwatch(w->store, store_news, w);
    close(w->wake_fd);
    ended_free(w->ended);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
