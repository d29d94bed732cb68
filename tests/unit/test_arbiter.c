/* test_arbiter.c — the per-GPU readers/writer arbiter (src/supervisor/arbiter.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "kg_test.h"
#include "supervisor/arbiter.h"
#include "util/util.h"

static void shared_grants_coexist(void)
{
    kg_arbiter *a;
    KG_CHECK(kg_arbiter_create(&a, NULL) == KG_OK);
    kg_arbiter_request *r1 = kg_arbiter_request_new(a, KG_GPU_SHARED);
    kg_arbiter_request *r2 = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    KG_CHECK(kg_arbiter_poll(r2) == 1);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.holders_shared == 2 && s.holder_exclusive == 0);
    kg_arbiter_release(r1);
    kg_arbiter_release(r2);
    kg_arbiter_destroy(a);
}

static void exclusive_waits_for_readers_and_blocks_new_ones(void)
{
    kg_arbiter *a;
    kg_arbiter_create(&a, NULL);
    kg_arbiter_request *reader = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(reader));
    kg_arbiter_request *writer = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    KG_CHECK(kg_arbiter_poll(writer) == 0);       /* a reader holds the GPU */
    kg_arbiter_request *late = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(late) == 0);         /* writers first: no new readers */
    kg_arbiter_release(reader);
    KG_CHECK(kg_arbiter_poll(writer) == 1);
    KG_CHECK(kg_arbiter_poll(late) == 0);         /* the window is exclusive */
    kg_arbiter_release(writer);
    KG_CHECK(kg_arbiter_poll(late) == 1);
    kg_arbiter_release(late);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.exclusive_grants == 1 && s.shared_grants == 2);
    kg_arbiter_destroy(a);
}

static void exclusive_requests_are_fifo_and_cancellable(void)
{
    kg_arbiter *a;
    kg_arbiter_create(&a, NULL);
    kg_arbiter_request *x1 = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    kg_arbiter_request *x2 = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    kg_arbiter_request *x3 = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    KG_CHECK(kg_arbiter_poll(x2) == 0);           /* x1 arrived first */
    KG_CHECK(kg_arbiter_poll(x1) == 1);
    kg_arbiter_release(x1);
    kg_arbiter_cancel(x2);                         /* a child that died while waiting */
    KG_CHECK(kg_arbiter_poll(x3) == 1);            /* the queue moves past it */
    kg_arbiter_cancel(x3);                         /* cancel of a granted request releases */
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.holder_exclusive == 0 && s.pending_exclusive == 0);
    kg_arbiter_destroy(a);
}

static void wait_times_out(void)
{
    kg_arbiter *a;
    kg_arbiter_create(&a, NULL);
    kg_arbiter_request *x = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    KG_CHECK(kg_arbiter_wait(x, 100) == 1);
    kg_arbiter_request *r = kg_arbiter_request_new(a, KG_GPU_SHARED);
    double t0 = kg_now_ms();
    KG_CHECK(kg_arbiter_wait(r, 50) == 0);
    KG_CHECK(kg_now_ms() - t0 >= 45);
    kg_arbiter_cancel(r);
    kg_arbiter_release(x);
    kg_arbiter_destroy(a);
}

/* Many threads: invariants hold at every moment, and exclusive windows get
 * through a continuous stream of shared work. */
static kg_arbiter *stress;
static atomic_int in_shared, in_exclusive, violations, exclusive_done;
static atomic_int stop_readers;

static void *reader_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_readers)) {
        kg_arbiter_request *r = kg_arbiter_request_new(stress, KG_GPU_SHARED);
        kg_arbiter_wait(r, -1);
        atomic_fetch_add(&in_shared, 1);
        if (atomic_load(&in_exclusive))
            atomic_fetch_add(&violations, 1);
        usleep(200);
        atomic_fetch_sub(&in_shared, 1);
        kg_arbiter_release(r);
    }
    return NULL;
}

static void *writer_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        kg_arbiter_request *r = kg_arbiter_request_new(stress, KG_GPU_EXCLUSIVE);
        kg_arbiter_wait(r, -1);
        if (atomic_fetch_add(&in_exclusive, 1) != 0 || atomic_load(&in_shared))
            atomic_fetch_add(&violations, 1);
        usleep(300);
        atomic_fetch_sub(&in_exclusive, 1);
        kg_arbiter_release(r);
        atomic_fetch_add(&exclusive_done, 1);
    }
    return NULL;
}

static void many_threads(void)
{
    kg_arbiter_create(&stress, NULL);
    pthread_t readers[8], writers[2];
    for (int i = 0; i < 8; i++)
        pthread_create(&readers[i], NULL, reader_thread, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&writers[i], NULL, writer_thread, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(writers[i], NULL);
    atomic_store(&stop_readers, 1);
    for (int i = 0; i < 8; i++)
        pthread_join(readers[i], NULL);
    KG_CHECK(atomic_load(&violations) == 0);
    KG_CHECK(atomic_load(&exclusive_done) == 40); /* writers were not starved */
    kg_arbiter_stats s;
    kg_arbiter_get_stats(stress, &s);
    KG_CHECK(s.exclusive_grants == 40);
    KG_CHECK(s.shared_grants > 0);
    KG_CHECK(s.state_ms[KG_GPU_STATE_EXCLUSIVE] > 0);
    kg_arbiter_destroy(stress);
}

/* Device memory (arbiter.h): capacity 100 units in these tests. */
static kg_arbiter *with_capacity(uint64_t cap)
{
    kg_arbiter *a;
    KG_CHECK(kg_arbiter_create(&a, NULL) == KG_OK);
    kg_arbiter_set_capacity(a, cap);
    kg_arbiter_set_capacity(a, cap * 2); /* the first figure stands */
    return a;
}

static void first_reservation_waits_until_it_fits(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e1 = kg_arbiter_account_new(a), *e2 = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 60);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    KG_CHECK(kg_arbiter_account_reserved(e1) == 60);
    KG_CHECK(kg_arbiter_memory_wait_ms(r1) < 50); /* reserved at once */
    kg_arbiter_request *r2 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e2, 60);
    KG_CHECK(kg_arbiter_poll(r2) == 0);            /* 120 > 100 */
    kg_arbiter_request *plain = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(plain) == 1);         /* a phase that reserves nothing is not held back */
    kg_arbiter_release(plain);
    kg_arbiter_release(r1);
    KG_CHECK(kg_arbiter_poll(r2) == 0);            /* a released phase keeps its evaluation's memory */
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.capacity_bytes == 100 && s.reserved_bytes == 60 && s.pending_memory == 1 && s.memory_waits == 1);
    struct timespec pause = {0, 120 * 1000 * 1000};
    nanosleep(&pause, NULL);
    kg_arbiter_account_free(e1);                   /* the evaluation ended */
    KG_CHECK(kg_arbiter_poll(r2) == 1);
    KG_CHECK(kg_arbiter_account_reserved(e2) == 60);
    KG_CHECK(kg_arbiter_memory_wait_ms(r2) >= 100); /* its wait was for memory */
    kg_arbiter_release(r2);
    kg_arbiter_account_free(e2);
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 0 && s.pending_memory == 0);
    kg_arbiter_destroy(a);
}

static void an_evaluation_alone_always_runs(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e = kg_arbiter_account_new(a);
    kg_arbiter_request *r = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e, 500);
    KG_CHECK(kg_arbiter_poll(r) == 1);              /* more than the device, but nothing else is reserved */
    kg_arbiter_release(r);
    kg_arbiter_account_free(e);
    /* Without a capacity memory is not arbitrated at all. */
    kg_arbiter *u;
    KG_CHECK(kg_arbiter_create(&u, NULL) == KG_OK);
    kg_arbiter_account *u1 = kg_arbiter_account_new(u), *u2 = kg_arbiter_account_new(u);
    kg_arbiter_request *q1 = kg_arbiter_request_reserve(u, KG_GPU_SHARED, u1, 1000);
    kg_arbiter_request *q2 = kg_arbiter_request_reserve(u, KG_GPU_SHARED, u2, 1000);
    KG_CHECK(kg_arbiter_poll(q1) == 1 && kg_arbiter_poll(q2) == 1);
    kg_arbiter_release(q1);
    kg_arbiter_release(q2);
    kg_arbiter_account_free(u1);
    kg_arbiter_account_free(u2);
    kg_arbiter_destroy(u);
    kg_arbiter_destroy(a);
}

static void a_holder_never_waits_for_memory(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e1 = kg_arbiter_account_new(a), *e2 = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 60);
    kg_arbiter_request *r2 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e2, 30);
    KG_CHECK(kg_arbiter_poll(r1) == 1 && kg_arbiter_poll(r2) == 1);
    kg_arbiter_release(r1);
    /* e1 asks for more than is left: it already holds memory, so it is not made to wait for e2 (which
     * could be waiting for e1: a deadlock); its figure is taken as is. */
    kg_arbiter_request *more = kg_arbiter_request_reserve(a, KG_GPU_EXCLUSIVE, e1, 90);
    KG_CHECK(kg_arbiter_poll(more) == 0);           /* the exclusive window waits for e2's phase... */
    kg_arbiter_release(r2);
    KG_CHECK(kg_arbiter_poll(more) == 1);           /* ...and for nothing else */
    KG_CHECK(kg_arbiter_account_reserved(e1) == 90);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 120 && s.memory_waits == 0);
    kg_arbiter_release(more);
    kg_arbiter_account_free(e1);
    kg_arbiter_account_free(e2);
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 0);
    kg_arbiter_destroy(a);
}

/* A stage with a need of its own (kg_arbiter_account_renew): the account's reservation goes back and its next
 * figure waits in line as a first reservation; a smaller one goes ahead at once where it fits. */
static void a_renewed_reservation_waits_in_line(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e1 = kg_arbiter_account_new(a), *e2 = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 30);
    kg_arbiter_request *r2 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e2, 60);
    KG_CHECK(kg_arbiter_poll(r1) == 1 && kg_arbiter_poll(r2) == 1);
    kg_arbiter_release(r1);
    /* e1's timing stage needs 50: renewed, it holds nothing and waits for e2 (60 + 50 > 100) */
    kg_arbiter_account_renew(e1);
    KG_CHECK(kg_arbiter_account_reserved(e1) == 0);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 60);
    kg_arbiter_request *t1 = kg_arbiter_request_reserve(a, KG_GPU_EXCLUSIVE, e1, 50);
    KG_CHECK(kg_arbiter_poll(t1) == 0);
    kg_arbiter_release(r2);
    KG_CHECK(kg_arbiter_poll(t1) == 0); /* e2's phase ended, its memory did not */
    /* a third evaluation's 45 does not go ahead of e1's 50 (it would not leave e1 room) */
    kg_arbiter_account *e3 = kg_arbiter_account_new(a);
    kg_arbiter_request *r3 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e3, 45);
    KG_CHECK(kg_arbiter_poll(r3) == 0);
    kg_arbiter_account_free(e2);
    KG_CHECK(kg_arbiter_poll(t1) == 1 && kg_arbiter_account_reserved(e1) == 50);
    kg_arbiter_poll(r3); /* the shared phase waits for e1's exclusive window, */
    KG_CHECK(kg_arbiter_account_reserved(e3) == 45); /* its memory does not: 50 + 45 fit */
    kg_arbiter_release(t1);
    KG_CHECK(kg_arbiter_poll(r3) == 1);
    /* a smaller figure renewed goes at once where it fits */
    kg_arbiter_account_renew(e1);
    kg_arbiter_request *t2 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 20);
    KG_CHECK(kg_arbiter_poll(t2) == 1 && kg_arbiter_account_reserved(e1) == 20);
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 65);
    kg_arbiter_release(t2);
    kg_arbiter_release(r3);
    kg_arbiter_account_free(e1);
    kg_arbiter_account_free(e3);
    kg_arbiter_account_renew(NULL);
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 0 && s.pending_memory == 0);
    kg_arbiter_destroy(a);
}

static void a_memory_waiter_holds_back_no_one(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e1 = kg_arbiter_account_new(a), *e2 = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 70);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    kg_arbiter_release(r1);
    /* An exclusive request that waits for memory must not stop e1's next shared phases (writers first
     * would then deadlock: e1 cannot finish and give its memory back). */
    kg_arbiter_request *x = kg_arbiter_request_reserve(a, KG_GPU_EXCLUSIVE, e2, 70);
    KG_CHECK(kg_arbiter_poll(x) == 0);
    kg_arbiter_request *next = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 70);
    KG_CHECK(kg_arbiter_poll(next) == 1);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.pending_exclusive == 0 && s.pending_memory == 1);
    kg_arbiter_release(next);
    kg_arbiter_account_free(e1);
    KG_CHECK(kg_arbiter_poll(x) == 1);              /* memory, then the exclusive window */
    kg_arbiter_release(x);
    kg_arbiter_account_free(e2);
    kg_arbiter_destroy(a);
}

static void all_memory_drains_the_others_first(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e1 = kg_arbiter_account_new(a), *solo = kg_arbiter_account_new(a),
                       *late = kg_arbiter_account_new(a), *gone = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e1, 30);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    kg_arbiter_request *s = kg_arbiter_request_reserve(a, KG_GPU_EXCLUSIVE, solo, KG_ARBITER_ALL_MEMORY);
    KG_CHECK(kg_arbiter_poll(s) == 0);              /* e1 still holds 30 */
    kg_arbiter_request *w = kg_arbiter_request_reserve(a, KG_GPU_SHARED, gone, 10);
    kg_arbiter_request *l = kg_arbiter_request_reserve(a, KG_GPU_SHARED, late, 10);
    KG_CHECK(kg_arbiter_poll(l) == 0);              /* it would fit, but it is behind the solo run */
    kg_arbiter_cancel(w);                           /* a waiter that went away leaves the line */
    kg_arbiter_release(r1);
    kg_arbiter_account_free(e1);
    KG_CHECK(kg_arbiter_wait(s, 1000) == 1);
    KG_CHECK(kg_arbiter_account_reserved(solo) == 100);
    KG_CHECK(kg_arbiter_poll(l) == 0);              /* the whole device is taken */
    kg_arbiter_release(s);
    kg_arbiter_account_free(solo);
    KG_CHECK(kg_arbiter_poll(l) == 1);
    kg_arbiter_release(l);
    kg_arbiter_account_free(late);
    kg_arbiter_account_free(gone);
    kg_arbiter_stats st;
    kg_arbiter_get_stats(a, &st);
    KG_CHECK(st.reserved_bytes == 0 && st.pending_memory == 0 && st.pending_exclusive == 0);
    kg_arbiter_destroy(a);
}

/* A small evaluation may go ahead of a large one that does not fit yet, but never into the room the large one
 * needs once what was reserved before it is given back: the large one waits for nothing more than in a strict
 * line. */
static void small_evaluations_go_ahead_without_delaying_the_line(void)
{
    kg_arbiter *a = with_capacity(100);
    kg_arbiter_account *e[5];
    for (int i = 0; i < 5; i++)
        e[i] = kg_arbiter_account_new(a);
    kg_arbiter_request *r1 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e[0], 50);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    kg_arbiter_request *big = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e[1], 60);
    KG_CHECK(kg_arbiter_poll(big) == 0);            /* 110 > 100 */
    kg_arbiter_request *small = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e[2], 30);
    KG_CHECK(kg_arbiter_poll(small) == 1);          /* fits, and 30 + the 60 ahead of it fit in 100 */
    kg_arbiter_request *more = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e[3], 15);
    KG_CHECK(kg_arbiter_poll(more) == 0);           /* fits now (95), but 30 + 15 + 60 would not */
    kg_arbiter_request *solo = kg_arbiter_request_reserve(a, KG_GPU_SHARED, e[4], KG_ARBITER_ALL_MEMORY);
    KG_CHECK(kg_arbiter_poll(solo) == 0);
    kg_arbiter_release(r1);
    kg_arbiter_account_free(e[0]);
    KG_CHECK(kg_arbiter_poll(big) == 1);            /* what was reserved before it is gone: it fits */
    KG_CHECK(kg_arbiter_poll(more) == 0);           /* now first in line: 30 + 60 + 15 > 100, it waits */
    kg_arbiter_release(small);
    kg_arbiter_account_free(e[2]);
    KG_CHECK(kg_arbiter_poll(more) == 1);
    KG_CHECK(kg_arbiter_poll(solo) == 0);           /* the whole device: after everyone */
    kg_arbiter_release(big);
    kg_arbiter_account_free(e[1]);
    kg_arbiter_release(more);
    kg_arbiter_account_free(e[3]);
    KG_CHECK(kg_arbiter_poll(solo) == 1);
    kg_arbiter_release(solo);
    kg_arbiter_account_free(e[4]);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 0 && s.pending_memory == 0);
    /* The room a jump took comes back with it: the same jump is allowed again. */
    kg_arbiter_account *f[4];
    for (int i = 0; i < 4; i++)
        f[i] = kg_arbiter_account_new(a);
    kg_arbiter_request *h = kg_arbiter_request_reserve(a, KG_GPU_SHARED, f[0], 50);
    kg_arbiter_request *w = kg_arbiter_request_reserve(a, KG_GPU_SHARED, f[1], 60);
    kg_arbiter_request *j = kg_arbiter_request_reserve(a, KG_GPU_SHARED, f[2], 40);
    KG_CHECK(kg_arbiter_poll(h) == 1 && kg_arbiter_poll(w) == 0 && kg_arbiter_poll(j) == 1);
    kg_arbiter_request *j2 = kg_arbiter_request_reserve(a, KG_GPU_SHARED, f[3], 5);
    KG_CHECK(kg_arbiter_poll(j2) == 0);             /* fits (95), but 40 + 5 + 60 > 100 */
    kg_arbiter_release(j);
    kg_arbiter_account_free(f[2]);
    KG_CHECK(kg_arbiter_poll(j2) == 1);             /* 5 + 60 <= 100 */
    kg_arbiter_release(j2);
    kg_arbiter_account_free(f[3]);
    kg_arbiter_cancel(w);
    kg_arbiter_release(h);
    kg_arbiter_account_free(f[0]);
    kg_arbiter_account_free(f[1]);
    kg_arbiter_get_stats(a, &s);
    KG_CHECK(s.reserved_bytes == 0 && s.pending_memory == 0);
    kg_arbiter_destroy(a);
}

/* Six threads run evaluations the way the supervisor and kgym eval drive the arbiter: shared phases that
 * reserve nothing (compile, tiny run), a first reservation with the correctness variants, a retry alone now
 * and then, exclusive timing rounds, the account freed at the end, and now and then the whole evaluation
 * re-run with all of the device.  No wait may last: a stall is a deadlock. */
static kg_arbiter *sim;
static atomic_int sim_stalls, sim_done;

static int sim_phase(kg_gpu_mode mode, kg_arbiter_account *acc, uint64_t bytes)
{
    kg_arbiter_request *r = kg_arbiter_request_reserve(sim, mode, acc, bytes);
    if (!kg_arbiter_wait(r, 5000)) {
        atomic_fetch_add(&sim_stalls, 1);
        kg_arbiter_cancel(r);
        return 0;
    }
    usleep(50 + (unsigned)(rand() % 200));
    kg_arbiter_release(r);
    return 1;
}

static void *sim_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    static const uint64_t sizes[] = {0, 2, 20, 36, 51, 68, 80};
    for (int e = 0; e < 40 && !atomic_load(&sim_stalls); e++) {
        uint64_t want = sizes[rand_r(&seed) % 7];
        kg_arbiter_account *acc = kg_arbiter_account_new(sim);
        int ok = sim_phase(KG_GPU_SHARED, acc, 0) && sim_phase(KG_GPU_SHARED, acc, 0);
        for (int v = 0; ok && v < 4; v++)
            ok = sim_phase(KG_GPU_SHARED, acc, want);
        if (ok && rand_r(&seed) % 4 == 0)
            ok = sim_phase(KG_GPU_EXCLUSIVE, acc, want); /* out_of_memory_retry */
        /* the timing stage's own figure, renewed (judge/child.py reserve_for) half the time */
        uint64_t timing = want;
        if (rand_r(&seed) % 2 == 0) {
            timing = sizes[rand_r(&seed) % 7];
            kg_arbiter_account_renew(acc);
        }
        for (int t = 0; ok && t < 3; t++)
            ok = sim_phase(KG_GPU_EXCLUSIVE, acc, timing);
        kg_arbiter_account_free(acc);
        if (ok && rand_r(&seed) % 5 == 0) { /* kgym eval's solo re-run */
            kg_arbiter_account *all = kg_arbiter_account_new(sim);
            ok = sim_phase(KG_GPU_EXCLUSIVE, all, KG_ARBITER_ALL_MEMORY);
            kg_arbiter_account_free(all);
        }
        if (ok)
            atomic_fetch_add(&sim_done, 1);
    }
    return NULL;
}

static void evaluations_with_memory_never_deadlock(void)
{
    sim = with_capacity(71);
    pthread_t th[6];
    for (int i = 0; i < 6; i++)
        pthread_create(&th[i], NULL, sim_thread, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    KG_CHECK(atomic_load(&sim_stalls) == 0);
    KG_CHECK(atomic_load(&sim_done) == 240);
    kg_arbiter_stats s;
    kg_arbiter_get_stats(sim, &s);
    KG_CHECK(s.reserved_bytes == 0 && s.pending_memory == 0 && s.pending_exclusive == 0);
    KG_CHECK(s.memory_waits > 0);
    kg_arbiter_destroy(sim);
}

/* Where the lock's time went (kg_arbiter_stats.state_ms): each state held ~40 ms in turn, the sum the
 * arbiter's age, shared time binned by holders. */
static void time_is_added_up_by_state(void)
{
    kg_arbiter *a;
    KG_CHECK(kg_arbiter_create(&a, NULL) == KG_OK);
    const unsigned step_us = 40000;
    double t0 = kg_now_ms();
    usleep(step_us);                                             /* idle */
    kg_arbiter_request *r1 = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(r1) == 1);
    usleep(step_us);                                             /* shared, 1 holder */
    kg_arbiter_request *r2 = kg_arbiter_request_new(a, KG_GPU_SHARED);
    KG_CHECK(kg_arbiter_poll(r2) == 1);
    usleep(step_us);                                             /* shared, 2 holders */
    kg_arbiter_request *x = kg_arbiter_request_new(a, KG_GPU_EXCLUSIVE);
    KG_CHECK(kg_arbiter_poll(x) == 0);
    kg_arbiter_release(r2);
    usleep(step_us);                                             /* draining, 1 holder */
    kg_arbiter_release(r1);
    usleep(step_us);                                             /* handoff: x has not polled */
    KG_CHECK(kg_arbiter_poll(x) == 1);
    usleep(step_us);                                             /* exclusive */
    kg_arbiter_release(x);
    usleep(step_us);                                             /* idle again */
    kg_arbiter_stats s;
    kg_arbiter_get_stats(a, &s);
    double age = kg_now_ms() - t0, sum = 0, bins = 0;
    for (int i = 0; i < KG_GPU_STATE_COUNT; i++)
        sum += s.state_ms[i];
    for (int i = 0; i < KG_ARBITER_HOLDER_BINS; i++)
        bins += s.holders_ms[i];
    KG_CHECK(sum >= age - 1 && sum <= age + 5);                  /* made just before t0: a little more */
    /* Each state at least its sleep; none more than its sleeps and a loaded machine's slack. */
    KG_CHECK(s.state_ms[KG_GPU_STATE_IDLE] >= 80 && s.state_ms[KG_GPU_STATE_IDLE] < 80 + 150);
    KG_CHECK(s.state_ms[KG_GPU_STATE_SHARED] >= 80 && s.state_ms[KG_GPU_STATE_SHARED] < 80 + 150);
    KG_CHECK(s.state_ms[KG_GPU_STATE_DRAINING] >= 40 && s.state_ms[KG_GPU_STATE_DRAINING] < 40 + 150);
    KG_CHECK(s.state_ms[KG_GPU_STATE_HANDOFF] >= 40 && s.state_ms[KG_GPU_STATE_HANDOFF] < 40 + 150);
    KG_CHECK(s.state_ms[KG_GPU_STATE_EXCLUSIVE] >= 40 && s.state_ms[KG_GPU_STATE_EXCLUSIVE] < 40 + 150);
    KG_CHECK(s.holders_ms[0] >= 80 && s.holders_ms[1] >= 40 && s.holders_ms[2] == 0);
    KG_CHECK_NEAR(bins, s.state_ms[KG_GPU_STATE_SHARED] + s.state_ms[KG_GPU_STATE_DRAINING], 1e-6);
    KG_CHECK_STR(kg_gpu_state_name(KG_GPU_STATE_DRAINING), "draining");
    KG_CHECK(kg_gpu_state_name(KG_GPU_STATE_COUNT) == NULL);
    kg_arbiter_destroy(a);
}

static const kg_test_case cases[] = {
    {"time_is_added_up_by_state", time_is_added_up_by_state},
    {"shared_grants_coexist", shared_grants_coexist},
    {"exclusive_waits_for_readers_and_blocks_new_ones", exclusive_waits_for_readers_and_blocks_new_ones},
    {"exclusive_requests_are_fifo_and_cancellable", exclusive_requests_are_fifo_and_cancellable},
    {"wait_times_out", wait_times_out},
    {"many_threads", many_threads},
    {"first_reservation_waits_until_it_fits", first_reservation_waits_until_it_fits},
    {"an_evaluation_alone_always_runs", an_evaluation_alone_always_runs},
    {"a_holder_never_waits_for_memory", a_holder_never_waits_for_memory},
    {"a_renewed_reservation_waits_in_line", a_renewed_reservation_waits_in_line},
    {"a_memory_waiter_holds_back_no_one", a_memory_waiter_holds_back_no_one},
    {"all_memory_drains_the_others_first", all_memory_drains_the_others_first},
    {"small_evaluations_go_ahead_without_delaying_the_line", small_evaluations_go_ahead_without_delaying_the_line},
    {"evaluations_with_memory_never_deadlock", evaluations_with_memory_never_deadlock},
};

KG_TEST_MAIN("arbiter", cases)
