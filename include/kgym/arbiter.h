/*
 * kgym/arbiter.h — who may use a GPU right now.
 *
 * Several evaluations share one GPU for import, compilation, tiny runs and
 * correctness (shared mode), but timing and profiling need the GPU to
 * themselves (exclusive mode): another evaluation's kernels running at the
 * same time would slow the measured ones.  One arbiter per GPU is a
 * readers/writer lock with two twists the supervisor needs:
 *   - it is polled, not blocked on: a supervisor thread also has to read its
 *     child's output and enforce deadlines while it waits for the GPU;
 *   - writers go first: once an exclusive request is pending, no new shared
 *     grant is made, so timing windows are never starved by a stream of
 *     correctness runs; exclusive requests are served in arrival order.
 * Ownership: kg_arbiter_request() returns a request the caller ends with
 * kg_arbiter_release() (granted) or kg_arbiter_cancel() (either state);
 * both free it.  Thread-safe.
 */
#ifndef KGYM_ARBITER_H
#define KGYM_ARBITER_H

#include <stdint.h>

#include "kgym/error.h"

typedef struct kg_arbiter kg_arbiter;
typedef struct kg_arbiter_request kg_arbiter_request;

typedef enum { KG_GPU_SHARED = 1, KG_GPU_EXCLUSIVE = 2 } kg_gpu_mode;

typedef struct kg_arbiter_stats {
    uint64_t shared_grants;
    uint64_t exclusive_grants;
    double exclusive_ms;      /* total time exclusive windows were held */
    double max_wait_ms;       /* longest wait from request to grant */
    int holders_shared;       /* now */
    int holder_exclusive;     /* now: 0 or 1 */
    int pending_exclusive;    /* now */
} kg_arbiter_stats;

int kg_arbiter_create(kg_arbiter **out, kg_error *err);
void kg_arbiter_destroy(kg_arbiter *a);

/* Registers a request (an exclusive one immediately holds back new shared
 * grants).  NULL on allocation failure. */
kg_arbiter_request *kg_arbiter_request_new(kg_arbiter *a, kg_gpu_mode mode);
/* 1 when the request holds the GPU (now or already), 0 when it must wait. */
int kg_arbiter_poll(kg_arbiter_request *r);
/* Polls until granted or timeout_ms passes (< 0: forever); 1 granted, 0 timed out. */
int kg_arbiter_wait(kg_arbiter_request *r, double timeout_ms);
/* Ends a granted request and frees it. */
void kg_arbiter_release(kg_arbiter_request *r);
/* Withdraws a request, granted or not, and frees it. */
void kg_arbiter_cancel(kg_arbiter_request *r);

void kg_arbiter_get_stats(kg_arbiter *a, kg_arbiter_stats *out);

#endif
