/*
 * arbiter.c — the per-GPU readers/writer arbiter (include/kgym/arbiter.h).
 * A mutex guards the counts and a FIFO list of pending exclusive requests;
 * a condition variable wakes kg_arbiter_wait() callers on every release.
 */
#include "kgym/arbiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "util/util.h"

enum { PENDING, GRANTED };

struct kg_arbiter_request {
    kg_arbiter *arbiter;
    kg_gpu_mode mode;
    int state;
    double t_request, t_grant;
    kg_arbiter_request *next; /* in the pending-exclusive queue */
};

struct kg_arbiter {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int readers;
    int writer;
    kg_arbiter_request *queue_head, *queue_tail; /* pending exclusive, arrival order */
    int queued;
    kg_arbiter_stats stats;
};

int kg_arbiter_create(kg_arbiter **out, kg_error *err)
{
    kg_arbiter *a = calloc(1, sizeof *a);
    if (!a)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, NULL);
    *out = a;
    return KG_OK;
}

void kg_arbiter_destroy(kg_arbiter *a)
{
    if (!a)
        return;
    pthread_cond_destroy(&a->changed);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

kg_arbiter_request *kg_arbiter_request_new(kg_arbiter *a, kg_gpu_mode mode)
{
    kg_arbiter_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->arbiter = a;
    r->mode = mode;
    r->state = PENDING;
    r->t_request = kg_now_ms();
    if (mode == KG_GPU_EXCLUSIVE) {
        pthread_mutex_lock(&a->lock);
        if (a->queue_tail)
            a->queue_tail->next = r;
        else
            a->queue_head = r;
        a->queue_tail = r;
        a->queued++;
        pthread_mutex_unlock(&a->lock);
    }
    return r;
}

static void dequeue(kg_arbiter *a, kg_arbiter_request *r)
{
    kg_arbiter_request **p = &a->queue_head, *prev = NULL;
    while (*p && *p != r) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p)
        return;
    *p = r->next;
    if (a->queue_tail == r)
        a->queue_tail = prev;
    r->next = NULL;
    a->queued--;
}

/* Called with the lock held. */
static int try_grant(kg_arbiter *a, kg_arbiter_request *r)
{
    if (r->state == GRANTED)
        return 1;
    if (r->mode == KG_GPU_SHARED) {
        if (a->writer || a->queued > 0)
            return 0;
        a->readers++;
        a->stats.shared_grants++;
    } else {
        if (a->writer || a->readers > 0 || a->queue_head != r)
            return 0;
        dequeue(a, r);
        a->writer = 1;
        a->stats.exclusive_grants++;
    }
    r->state = GRANTED;
    r->t_grant = kg_now_ms();
    double waited = r->t_grant - r->t_request;
    if (waited > a->stats.max_wait_ms)
        a->stats.max_wait_ms = waited;
    return 1;
}

int kg_arbiter_poll(kg_arbiter_request *r)
{
    kg_arbiter *a = r->arbiter;
    pthread_mutex_lock(&a->lock);
    int granted = try_grant(a, r);
    pthread_mutex_unlock(&a->lock);
    return granted;
}

int kg_arbiter_wait(kg_arbiter_request *r, double timeout_ms)
{
    kg_arbiter *a = r->arbiter;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ms >= 0) {
        long long ns = deadline.tv_nsec + (long long)(timeout_ms * 1e6);
        deadline.tv_sec += (time_t)(ns / 1000000000LL);
        deadline.tv_nsec = (long)(ns % 1000000000LL);
    }
    pthread_mutex_lock(&a->lock);
    int granted;
    while (!(granted = try_grant(a, r))) {
        int rc = timeout_ms < 0 ? pthread_cond_wait(&a->changed, &a->lock)
                                : pthread_cond_timedwait(&a->changed, &a->lock, &deadline);
        if (rc == ETIMEDOUT) {
            granted = try_grant(a, r);
            break;
        }
    }
    pthread_mutex_unlock(&a->lock);
    return granted;
}

static void end_request(kg_arbiter_request *r)
{
    kg_arbiter *a = r->arbiter;
    pthread_mutex_lock(&a->lock);
    if (r->state == GRANTED) {
        if (r->mode == KG_GPU_SHARED) {
            a->readers--;
        } else {
            a->writer = 0;
            a->stats.exclusive_ms += kg_now_ms() - r->t_grant;
        }
    } else if (r->mode == KG_GPU_EXCLUSIVE) {
        dequeue(a, r);
    }
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    free(r);
}

void kg_arbiter_release(kg_arbiter_request *r)
{
    if (r)
        end_request(r);
}

void kg_arbiter_cancel(kg_arbiter_request *r)
{
    if (r)
        end_request(r);
}

void kg_arbiter_get_stats(kg_arbiter *a, kg_arbiter_stats *out)
{
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    out->holders_shared = a->readers;
    out->holder_exclusive = a->writer;
    out->pending_exclusive = a->queued;
    pthread_mutex_unlock(&a->lock);
}
