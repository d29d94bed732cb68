/*
 * supervisor/arbiter.h — (internal) who may use a GPU right now.
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
 * Device memory is arbitrated too, because the lock alone does not keep
 * evaluations from running each other out of it: an evaluation's processes
 * keep their inputs and outputs on the GPU between phases.  Each evaluation
 * has an account that reserves its estimated need (the judge computes it from
 * the task's sizes) until the account is freed at the evaluation's end:
 *   - a request that makes an account's first reservation waits until the
 *     reservation fits beside the others (or nothing else is reserved: an
 *     evaluation alone always runs), in arrival order, except that one further
 *     back goes first when it fits and the accounts that went first, with it,
 *     leave the largest need ahead of it room (so the ones ahead wait only for
 *     what was reserved before them);
 *   - an account that already holds a reservation never waits for memory (a
 *     larger figure is taken as is), so a holder never waits on another
 *     holder and nothing deadlocks;
 *   - while a request waits for memory it holds back no one: an exclusive
 *     request joins the exclusive queue only once its memory is reserved, and
 *     the evaluations that hold reservations go on and finish.
 * KG_ARBITER_ALL_MEMORY reserves the whole device (kgym's re-run of an
 * evaluation alone after it ran out of memory): it waits for every other
 * reservation to end, and later ones wait behind it.
 * Ownership: kg_arbiter_request_new() returns a request the caller ends with
 * kg_arbiter_release() (granted) or kg_arbiter_cancel() (either state);
 * both free it.  An account is freed with kg_arbiter_account_free(), after
 * its requests.  Thread-safe.
 */
#ifndef KGYM_ARBITER_H
#define KGYM_ARBITER_H

#include <stddef.h>
#include <stdint.h>

#include "kgym/error.h"

typedef struct kg_arbiter kg_arbiter;
typedef struct kg_arbiter_request kg_arbiter_request;
typedef struct kg_arbiter_account kg_arbiter_account;

#define KG_ARBITER_ALL_MEMORY UINT64_MAX

typedef enum { KG_GPU_SHARED = 1, KG_GPU_EXCLUSIVE = 2 } kg_gpu_mode;

/* What the GPU's lock is doing, the one list of it: X(ENUM, "name").  The arbiter adds up the time spent in
 * each (kg_arbiter_stats.state_ms), which says where a run's GPU time went:
 *   idle       nothing held, nothing waiting (every evaluation in flight is compiling, setting up or between
 *              phases on the host);
 *   shared     shared phases held, no exclusive request waiting;
 *   draining   shared phases still held while an exclusive request waits for them to end (no new shared grant);
 *   handoff    nothing held but an exclusive request waiting (its thread has not polled yet);
 *   exclusive  an exclusive window held. */
#define KG_GPU_STATE_MAP(X)    \
    X(IDLE, "idle")            \
    X(SHARED, "shared")        \
    X(DRAINING, "draining")    \
    X(HANDOFF, "handoff")      \
    X(EXCLUSIVE, "exclusive")

typedef enum {
#define KG_GPU_STATE_ENUM(e, name) KG_GPU_STATE_##e,
    KG_GPU_STATE_MAP(KG_GPU_STATE_ENUM)
#undef KG_GPU_STATE_ENUM
    KG_GPU_STATE_COUNT
} kg_gpu_state;

/* "idle", "shared", ... (static storage); NULL out of range. */
const char *kg_gpu_state_name(kg_gpu_state s);

/* Shared time by how many shared phases were held at once: bin i is i + 1 holders, the last bin that many or
 * more. */
#define KG_ARBITER_HOLDER_BINS 12

typedef struct kg_arbiter_stats {
    uint64_t shared_grants;
    uint64_t exclusive_grants;
    double max_wait_ms;       /* longest wait from request to grant */
    int holders_shared;       /* now */
    int holder_exclusive;     /* now: 0 or 1 */
    int pending_exclusive;    /* now */
    uint64_t capacity_bytes;  /* device memory evaluations may reserve (0: not arbitrated) */
    uint64_t reserved_bytes;  /* now */
    int pending_memory;       /* now: requests waiting for their first reservation */
    uint64_t memory_waits;    /* requests that had to wait for memory */
    uint64_t peak_reserved_bytes;
    double state_ms[KG_GPU_STATE_COUNT];               /* time in each state since the arbiter was made (the
                                                        * exclusive one: the time exclusive windows were held) */
    double holders_ms[KG_ARBITER_HOLDER_BINS];         /* shared and draining time by shared holders (above) */
} kg_arbiter_stats;

int kg_arbiter_create(kg_arbiter **out, kg_error *err);
void kg_arbiter_destroy(kg_arbiter *a);

/* The device memory evaluations may reserve, in all; the first non-zero
 * figure stands (one arbiter is one GPU).  0 until set: memory is then not
 * arbitrated and reservations are granted at once. */
void kg_arbiter_set_capacity(kg_arbiter *a, uint64_t bytes);

/* One evaluation's reservation (none yet).  NULL on allocation failure. */
kg_arbiter_account *kg_arbiter_account_new(kg_arbiter *a);
/* Gives the reservation back and frees the account (NULL is a no-op).  Its
 * requests must have been released or cancelled first. */
void kg_arbiter_account_free(kg_arbiter_account *acc);
uint64_t kg_arbiter_account_reserved(const kg_arbiter_account *acc);
/* Gives the account's reservation back and keeps the account: its next request
 * with a figure is a first reservation again, which waits in line until it
 * fits (a stage whose need differs from the one before: the timing stage
 * after correctness).  The holder-never-waits rule above still holds: while
 * it waits, the account holds nothing.  Its requests must have been released
 * or cancelled first (NULL is a no-op). */
void kg_arbiter_account_renew(kg_arbiter_account *acc);

/* Registers a request (an exclusive one immediately holds back new shared
 * grants).  NULL on allocation failure. */
kg_arbiter_request *kg_arbiter_request_new(kg_arbiter *a, kg_gpu_mode mode);
/* The same, for an evaluation that needs `bytes` of device memory from now
 * until its account is freed: the grant first reserves them (see above). */
kg_arbiter_request *kg_arbiter_request_reserve(kg_arbiter *a, kg_gpu_mode mode, kg_arbiter_account *acc,
                                               uint64_t bytes);
/* 1 when the request holds the GPU (now or already), 0 when it must wait. */
int kg_arbiter_poll(kg_arbiter_request *r);
/* Polls until granted or timeout_ms passes (< 0: forever); 1 granted, 0 timed out. */
int kg_arbiter_wait(kg_arbiter_request *r, double timeout_ms);
/* How long a granted request waited for its memory reservation (from the request until the memory was
 * reserved; 0 when it reserved none or none had to wait): the part of its wait that memory, not the lock,
 * explains. */
double kg_arbiter_memory_wait_ms(const kg_arbiter_request *r);
/* Ends a granted request and frees it. */
void kg_arbiter_release(kg_arbiter_request *r);
/* Withdraws a request, granted or not, and frees it. */
void kg_arbiter_cancel(kg_arbiter_request *r);

void kg_arbiter_get_stats(kg_arbiter *a, kg_arbiter_stats *out);
/* The arbiter's state now, in words, into buf (always terminated): who holds
 * the GPU, what waits, how much memory is reserved.  For messages about a
 * wait that lasts. */
void kg_arbiter_describe(kg_arbiter *a, char *buf, size_t n);

#endif
