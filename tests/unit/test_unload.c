/*
 * test_unload - prof_unload's two promises, with threads standing in for the runtime's:
 *   1. a thread inside prof_unload_enter(e) for IDs taken at epoch e never sees them freed: the
 *      "unloader" frees an object right after prof_unload_started returns, readers check it is
 *      still alive while they are inside (hundreds of thousands of tries, thousands of unloads);
 *   2. prof_unload_started has every active consumer drain first: it returns only after the
 *      consumer passed its loop with the request, and gives up (counted) on one that never does.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "prof_core.h"
#include "prof_unload.h"
#include "unit_check.h"

struct object {
    int alive; /* atomic */
};

static struct object *g_cur; /* atomic: the object a reader may take now */
static int g_stop;           /* atomic */
static long g_entered, g_refused, g_violations;

static void *reader(void *arg)
{
    (void)arg;
    long entered = 0, refused = 0, bad = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        /* "take a sample": the epoch, then an ID that is alive at that moment */
        uint32_t e = prof_unload_epoch();
        struct object *o = __atomic_load_n(&g_cur, __ATOMIC_ACQUIRE);
        if (!prof_unload_enter(e)) {
            refused++;
            continue;
        }
        entered++;
        if (!prof_unload_may_query())
            bad++;
        for (int i = 0; i < 50; i++) /* "ask the runtime about it" for a while */
            if (!__atomic_load_n(&o->alive, __ATOMIC_ACQUIRE))
                bad++;
        prof_unload_leave();
        if (prof_unload_may_query())
            bad++;
    }
    __atomic_add_fetch(&g_entered, entered, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_refused, refused, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_violations, bad, __ATOMIC_RELAXED);
    return NULL;
}

static void test_single_thread(void)
{
    uint32_t e0 = prof_unload_epoch();
    CHECK(!prof_unload_may_query(), "outside any enter");
    CHECK(prof_unload_enter(e0) == 1, "entering with the current epoch");
    CHECK(prof_unload_enter(e0) == 1, "nested");
    prof_unload_leave();
    CHECK(prof_unload_may_query(), "still inside the outer enter");
    prof_unload_leave();
    CHECK(!prof_unload_may_query(), "left");
    prof_unload_leave(); /* one leave too many: ignored */
    CHECK(!prof_unload_may_query(), "an extra leave changes nothing");
    int in = 0;
    for (int i = 0; i < 9; i++)
        in += prof_unload_enter(e0);
    CHECK(in == 8, "nesting stops at 8 (got %d)", in);
    for (int i = 0; i < 8; i++)
        prof_unload_leave();
    CHECK(!prof_unload_may_query(), "and unwinds");

    struct prof_unload_stats a, b;
    prof_unload_get_stats(&a);
    prof_unload_started();
    CHECK(prof_unload_epoch() == e0 + 1, "an unload bumps the epoch");
    CHECK(prof_unload_enter(e0) == 0, "IDs from before the unload are refused");
    CHECK(!prof_unload_may_query(), "a refused enter leaves nothing to leave");
    CHECK(prof_unload_enter(e0 + 1) == 1, "IDs taken after it are fine");
    prof_unload_leave();
    prof_unload_get_stats(&b);
    CHECK(b.unloads == a.unloads + 1 && b.refused == a.refused + 1 && b.waits == a.waits,
          "stats: unloads %llu->%llu refused %llu->%llu waits %llu->%llu",
          (unsigned long long)a.unloads, (unsigned long long)b.unloads,
          (unsigned long long)a.refused, (unsigned long long)b.refused,
          (unsigned long long)a.waits, (unsigned long long)b.waits);
}

static void test_readers_never_see_freed(void)
{
    enum { READERS = 3, UNLOADS = 3000 };
    struct object *objs = calloc(UNLOADS + 1, sizeof *objs);
    objs[0].alive = 1;
    __atomic_store_n(&g_cur, &objs[0], __ATOMIC_RELEASE);
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    for (int u = 1; u <= UNLOADS; u++) {
        struct object *old = __atomic_load_n(&g_cur, __ATOMIC_ACQUIRE);
        objs[u].alive = 1;
        __atomic_store_n(&g_cur, &objs[u], __ATOMIC_RELEASE); /* new IDs from here on */
        prof_unload_started();                                /* the old one's unload */
        __atomic_store_n(&old->alive, 0, __ATOMIC_RELEASE);   /* ... frees it */
        if (u % 64 == 0)
            sched_yield();
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    struct prof_unload_stats st;
    prof_unload_get_stats(&st);
    CHECK(g_violations == 0, "%ld reads of a freed object inside an enter", g_violations);
    CHECK(g_entered > 1000, "readers got in %ld times", g_entered);
    CHECK(st.timeouts == 0, "%llu waits gave up", (unsigned long long)st.timeouts);
    printf("readers: %ld entered, %ld refused; %llu of the unloads waited for one\n", g_entered,
           g_refused, (unsigned long long)st.waits);
    free(objs);
}

static long g_passes;      /* atomic: consumer loop passes that acknowledged a request */
static int g_consumer_run; /* atomic */

static void *consumer(void *arg)
{
    (void)arg;
    prof_unload_consumer(PROF_UNLOAD_AGG, 1);
    while (__atomic_load_n(&g_consumer_run, __ATOMIC_ACQUIRE)) {
        uint32_t nudges = prof_core_nudges();
        uint64_t want = prof_unload_drain_wanted();
        /* (drain the queues here) */
        prof_unload_drained(PROF_UNLOAD_AGG, want);
        if (want)
            __atomic_add_fetch(&g_passes, 1, __ATOMIC_RELEASE);
        prof_core_nap_nudged(prof_now_ns() + 20000000LL, nudges);
    }
    prof_unload_consumer(PROF_UNLOAD_AGG, 0);
    return NULL;
}

static void test_consumers_drain_first(void)
{
    __atomic_store_n(&g_consumer_run, 1, __ATOMIC_RELEASE);
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);
    struct timespec ts = {0, 30000000}; /* let it start and nap */
    nanosleep(&ts, NULL);
    struct prof_unload_stats a, b;
    prof_unload_get_stats(&a);
    int waited_for_it = 0;
    for (int i = 0; i < 20; i++) {
        long before = __atomic_load_n(&g_passes, __ATOMIC_ACQUIRE);
        prof_unload_started();
        if (__atomic_load_n(&g_passes, __ATOMIC_ACQUIRE) > before)
            waited_for_it++;
    }
    prof_unload_get_stats(&b);
    CHECK(waited_for_it == 20, "the unload returned before the consumer drained %d of 20 times",
          20 - waited_for_it);
    CHECK(b.drain_timeouts == a.drain_timeouts, "%llu drains timed out",
          (unsigned long long)(b.drain_timeouts - a.drain_timeouts));
    __atomic_store_n(&g_consumer_run, 0, __ATOMIC_RELEASE);
    prof_core_nudge();
    pthread_join(th, NULL);

    /* a consumer that is active but never comes round: the unload goes on, counted */
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 1);
    prof_unload_get_stats(&a);
    prof_unload_started();
    prof_unload_get_stats(&b);
    CHECK(b.drain_timeouts == a.drain_timeouts + 1, "a stuck consumer's drain is given up on");
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 0);
    prof_unload_get_stats(&a);
    prof_unload_started();
    prof_unload_get_stats(&b);
    CHECK(b.drain_timeouts == a.drain_timeouts, "an inactive consumer is not waited for");
}

int main(void)
{
    test_single_thread();
    test_readers_never_see_freed();
    test_consumers_drain_first();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
