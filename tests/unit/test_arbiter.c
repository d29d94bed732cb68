/* test_arbiter.c — the per-GPU readers/writer arbiter (src/supervisor/arbiter.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "kg_test.h"
#include "kgym/arbiter.h"
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
    KG_CHECK(s.exclusive_ms > 0);
    kg_arbiter_destroy(stress);
}

static const kg_test_case cases[] = {
    {"shared_grants_coexist", shared_grants_coexist},
    {"exclusive_waits_for_readers_and_blocks_new_ones", exclusive_waits_for_readers_and_blocks_new_ones},
    {"exclusive_requests_are_fifo_and_cancellable", exclusive_requests_are_fifo_and_cancellable},
    {"wait_times_out", wait_times_out},
    {"many_threads", many_threads},
};

KG_TEST_MAIN("arbiter", cases)
