/*
 * arbiter.c — the per-GPU readers/writer arbiter (src/supervisor/arbiter.h).
 * A mutex guards the counts and two FIFO lists: exclusive requests waiting
 * for the GPU, and requests waiting for their account's first memory
 * reservation (a request is on at most one of them at a time: an exclusive
 * request joins the first only once its memory is reserved).  A condition
 * variable wakes kg_arbiter_wait() callers on every release.
 */
#include "supervisor/arbiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "util/util.h"

enum { PENDING, GRANTED };
enum { MEM_NONE, MEM_WAITING, MEM_RESERVED };

struct kg_arbiter_account {
    kg_arbiter *arbiter;
    uint64_t reserved;
    int jumped;               /* its reservation was made ahead of requests that waited longer */
};

struct kg_arbiter_request {
    kg_arbiter *arbiter;
    kg_gpu_mode mode;
    int state;
    double t_request;
    double t_reserved;        /* when its first reservation was made (0: none made) */
    kg_arbiter_request *next; /* in the pending-exclusive queue, or in the memory queue */
    kg_arbiter_account *account;
    uint64_t want;            /* the reservation a MEM_WAITING request makes */
    int mem;
    int counted_wait;         /* stats.memory_waits already counts it */
};

typedef struct {
    kg_arbiter_request *head, *tail;
    int count;
} fifo;

struct kg_arbiter {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int readers;
    int writer;
    fifo exclusive;           /* pending exclusive requests, arrival order */
    fifo memory;              /* requests waiting for a first reservation, arrival order */
    uint64_t capacity;
    uint64_t reserved;
    uint64_t jumped;          /* what the accounts that went ahead of the line hold now (may_reserve) */
    double t_state;           /* when stats.state_ms was last brought up to date (tick) */
    kg_arbiter_stats stats;
};

const char *kg_gpu_state_name(kg_gpu_state s)
{
    switch (s) {
#define KG_GPU_STATE_NAME(e, name) \
    case KG_GPU_STATE_##e:         \
        return name;
        KG_GPU_STATE_MAP(KG_GPU_STATE_NAME)
#undef KG_GPU_STATE_NAME
    default:
        return NULL;
    }
}

/* The lock's state now (arbiter.h, KG_GPU_STATE_MAP).  Lock held. */
static kg_gpu_state state_of(const kg_arbiter *a)
{
    if (a->writer)
        return KG_GPU_STATE_EXCLUSIVE;
    if (a->readers > 0)
        return a->exclusive.count > 0 ? KG_GPU_STATE_DRAINING : KG_GPU_STATE_SHARED;
    return a->exclusive.count > 0 ? KG_GPU_STATE_HANDOFF : KG_GPU_STATE_IDLE;
}

/* Adds the time since the last tick to the state the lock was in.  Called with the lock held before anything
 * that may change the state (a grant, a release, an exclusive request joining or leaving the queue), and by
 * kg_arbiter_get_stats, so the figures always add up to the arbiter's age. */
static void tick(kg_arbiter *a)
{
    double now = kg_now_ms();
    double dt = now - a->t_state;
    a->t_state = now;
    if (dt <= 0)
        return;
    a->stats.state_ms[state_of(a)] += dt;
    if (a->readers > 0)
        a->stats.holders_ms[a->readers < KG_ARBITER_HOLDER_BINS ? a->readers - 1 : KG_ARBITER_HOLDER_BINS - 1] += dt;
}

static void push(fifo *q, kg_arbiter_request *r)
{
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
    q->count++;
}

static void unlink_from(fifo *q, kg_arbiter_request *r)
{
    kg_arbiter_request **p = &q->head, *prev = NULL;
    while (*p && *p != r) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p)
        return;
    *p = r->next;
    if (q->tail == r)
        q->tail = prev;
    r->next = NULL;
    q->count--;
}

int kg_arbiter_create(kg_arbiter **out, kg_error *err)
{
    kg_arbiter *a = calloc(1, sizeof *a);
    if (!a)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&a->lock, NULL);
    kg_cond_init(&a->changed); /* kg_arbiter_wait's deadline is on CLOCK_MONOTONIC */
    a->t_state = kg_now_ms();
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

void kg_arbiter_set_capacity(kg_arbiter *a, uint64_t bytes)
{
    pthread_mutex_lock(&a->lock);
    if (!a->capacity && bytes) {
        a->capacity = bytes;
        pthread_cond_broadcast(&a->changed);
    }
    pthread_mutex_unlock(&a->lock);
}

kg_arbiter_account *kg_arbiter_account_new(kg_arbiter *a)
{
    kg_arbiter_account *acc = calloc(1, sizeof *acc);
    if (acc)
        acc->arbiter = a;
    return acc;
}

uint64_t kg_arbiter_account_reserved(const kg_arbiter_account *acc)
{
    kg_arbiter *a = acc->arbiter;
    pthread_mutex_lock(&a->lock);
    uint64_t n = acc->reserved;
    pthread_mutex_unlock(&a->lock);
    return n;
}

void kg_arbiter_account_renew(kg_arbiter_account *acc)
{
    if (!acc)
        return;
    kg_arbiter *a = acc->arbiter;
    pthread_mutex_lock(&a->lock);
    a->reserved -= acc->reserved;
    if (acc->jumped)
        a->jumped -= acc->reserved;
    acc->reserved = 0;
    acc->jumped = 0;
    pthread_cond_broadcast(&a->changed); /* the memory may let a waiting request in */
    pthread_mutex_unlock(&a->lock);
}

void kg_arbiter_account_free(kg_arbiter_account *acc)
{
    kg_arbiter_account_renew(acc); /* its reservation back, then the account */
    free(acc);
}

/* What a reservation of `bytes` takes: the whole device for KG_ARBITER_ALL_MEMORY.  Lock held. */
static uint64_t amount(const kg_arbiter *a, uint64_t bytes)
{
    return bytes == KG_ARBITER_ALL_MEMORY ? a->capacity : bytes;
}

/* Whether a first reservation of `bytes` fits now.  Lock held. */
static int fits(const kg_arbiter *a, uint64_t bytes)
{
    if (!a->capacity || !a->reserved) /* not arbitrated, or an evaluation alone: it always runs */
        return 1;
    if (bytes == KG_ARBITER_ALL_MEMORY)
        return 0;
    return bytes <= a->capacity && a->reserved <= a->capacity - bytes;
}

kg_arbiter_request *kg_arbiter_request_reserve(kg_arbiter *a, kg_gpu_mode mode, kg_arbiter_account *acc,
                                               uint64_t bytes)
{
    kg_arbiter_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->arbiter = a;
    r->mode = mode;
    r->state = PENDING;
    r->t_request = kg_now_ms();
    r->account = acc;
    pthread_mutex_lock(&a->lock);
    tick(a);
    if (acc && bytes && !acc->reserved) {
        r->mem = MEM_WAITING; /* joins the exclusive queue, if exclusive, once its memory is reserved */
        r->want = bytes;
        push(&a->memory, r);
    } else {
        if (acc && acc->reserved && amount(a, bytes) > acc->reserved) {
            /* A holder never waits for memory (arbiter.h says why): its larger figure is taken as is. */
            a->reserved += amount(a, bytes) - acc->reserved;
            if (acc->jumped)
                a->jumped += amount(a, bytes) - acc->reserved;
            acc->reserved = amount(a, bytes);
            if (a->reserved > a->stats.peak_reserved_bytes)
                a->stats.peak_reserved_bytes = a->reserved;
        }
        if (mode == KG_GPU_EXCLUSIVE)
            push(&a->exclusive, r);
    }
    pthread_mutex_unlock(&a->lock);
    return r;
}

kg_arbiter_request *kg_arbiter_request_new(kg_arbiter *a, kg_gpu_mode mode)
{
    return kg_arbiter_request_reserve(a, mode, NULL, 0);
}

/* Whether a waiting request may make its reservation now.  The first in line: when it fits.  One further
 * back: when it fits and what every account that went ahead of the line holds, with it, still leaves the
 * largest need ahead of it room.  So the ones ahead wait for nothing but what was reserved before they
 * reached the front, as in a strict line, while small evaluations use the memory a large one waits for
 * (measured on an H100: a 4 GiB evaluation waited 11 s behind 48-64 GiB ones).  KG_ARBITER_ALL_MEMORY is
 * never overtaken, and never overtakes.  Lock held. */
static int may_reserve(const kg_arbiter *a, const kg_arbiter_request *r)
{
    if (a->memory.head == r)
        return fits(a, r->want);
    if (r->want == KG_ARBITER_ALL_MEMORY || !fits(a, r->want))
        return 0;
    uint64_t ahead = 0;
    for (const kg_arbiter_request *q = a->memory.head; q && q != r; q = q->next) {
        if (q->want == KG_ARBITER_ALL_MEMORY)
            return 0;
        if (q->want > ahead)
            ahead = q->want;
    }
    return ahead <= a->capacity && a->jumped <= a->capacity - ahead && r->want <= a->capacity - ahead - a->jumped;
}

/* A waiting request's memory, once may_reserve allows it.  Lock held. */
static int try_reserve(kg_arbiter *a, kg_arbiter_request *r)
{
    if (r->mem != MEM_WAITING)
        return 1;
    if (!may_reserve(a, r)) {
        if (!r->counted_wait) {
            r->counted_wait = 1;
            a->stats.memory_waits++;
        }
        return 0;
    }
    int jumped = a->memory.head != r;
    unlink_from(&a->memory, r);
    uint64_t n = amount(a, r->want);
    r->account->reserved = n;
    r->account->jumped = jumped;
    if (jumped)
        a->jumped += n;
    r->t_reserved = kg_now_ms();
    a->reserved += n;
    if (a->reserved > a->stats.peak_reserved_bytes)
        a->stats.peak_reserved_bytes = a->reserved;
    r->mem = MEM_RESERVED;
    if (r->mode == KG_GPU_EXCLUSIVE)
        push(&a->exclusive, r);
    pthread_cond_broadcast(&a->changed); /* the next in line may fit as well */
    return 1;
}

/* Called with the lock held. */
static int try_grant(kg_arbiter *a, kg_arbiter_request *r)
{
    if (r->state == GRANTED)
        return 1;
    tick(a); /* try_reserve may queue an exclusive request; a grant changes the state */
    if (!try_reserve(a, r))
        return 0;
    if (r->mode == KG_GPU_SHARED) {
        if (a->writer || a->exclusive.count > 0)
            return 0;
        a->readers++;
        a->stats.shared_grants++;
    } else {
        if (a->writer || a->readers > 0 || a->exclusive.head != r)
            return 0;
        unlink_from(&a->exclusive, r);
        a->writer = 1;
        a->stats.exclusive_grants++;
    }
    r->state = GRANTED;
    double waited = kg_now_ms() - r->t_request;
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
    kg_deadline_in(&deadline, timeout_ms >= 0 ? timeout_ms / 1e3 : 0);
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

double kg_arbiter_memory_wait_ms(const kg_arbiter_request *r)
{
    kg_arbiter *a = r->arbiter;
    pthread_mutex_lock(&a->lock);
    double ms = r->t_reserved > 0 ? r->t_reserved - r->t_request : 0;
    pthread_mutex_unlock(&a->lock);
    return ms;
}

static void end_request(kg_arbiter_request *r)
{
    kg_arbiter *a = r->arbiter;
    pthread_mutex_lock(&a->lock);
    tick(a);
    if (r->state == GRANTED) {
        if (r->mode == KG_GPU_SHARED) {
            a->readers--;
        } else {
            a->writer = 0;
        }
    } else if (r->mem == MEM_WAITING) {
        unlink_from(&a->memory, r);
    } else if (r->mode == KG_GPU_EXCLUSIVE) {
        unlink_from(&a->exclusive, r);
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
    tick(a);
    *out = a->stats;
    out->holders_shared = a->readers;
    out->holder_exclusive = a->writer;
    out->pending_exclusive = a->exclusive.count;
    out->capacity_bytes = a->capacity;
    out->reserved_bytes = a->reserved;
    out->pending_memory = a->memory.count;
    pthread_mutex_unlock(&a->lock);
}

void kg_arbiter_describe(kg_arbiter *a, char *buf, size_t n)
{
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    snprintf(buf, n,
             "%d shared and %d exclusive holders, %d exclusive and %d memory requests waiting, %.1f of %.1f GiB "
             "reserved",
             s.holders_shared, s.holder_exclusive, s.pending_exclusive, s.pending_memory,
             (double)s.reserved_bytes / (1 << 30), (double)s.capacity_bytes / (1 << 30));
}
