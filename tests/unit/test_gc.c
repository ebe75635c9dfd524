/*
 * test_gc.c - prof_gc's event and callback handling, fed with the event sequences the runtime
 * really delivers (recorded from .NET 10 in workstation and server GC mode; see the comments of
 * each scenario), from threads named as the runtime names its GC threads. Checks the per-GC
 * records, pause attribution, CPU accounting without double counting, duplicate delivery by a
 * second session, and that malformed or foreign payloads are ignored.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_gc.h"
#include "prof_gc_int.h"

#include "unit_check.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Burns about `us` microseconds of this thread's CPU. */
static void spin_us(int us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    volatile unsigned x = 0;
    do {
        for (int i = 0; i < 1000; i++)
            x += (unsigned)i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* Burns about `ms` of this thread's CPU. */
static void spin_ms(int ms)
{
    spin_us(ms * 1000);
}

static void put32(BYTE *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void put64(BYTE *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static void gc_start(uint32_t count, uint32_t depth, uint32_t reason, uint32_t type)
{
    BYTE d[26] = {0};
    put32(d, count);
    put32(d + 4, depth);
    put32(d + 8, reason);
    put32(d + 12, type);
    prof_gc_on_event(1, 2, d, sizeof d);
}

static void gc_end(uint32_t count, uint32_t depth)
{
    BYTE d[10] = {0};
    put32(d, count);
    put32(d + 4, depth);
    prof_gc_on_event(2, 1, d, sizeof d);
}

/* GCHeapStats_V2: size/promoted pairs for gen0..3, POH size at 94, POH promoted at 102. */
static void heap_stats(uint64_t base)
{
    BYTE d[110] = {0};
    for (int g = 0; g < 4; g++) {
        put64(d + g * 16, base * (uint64_t)(g + 1));    /* size */
        put64(d + g * 16 + 8, 100 * (uint64_t)(g + 1)); /* promoted */
    }
    put64(d + 94, 7);
    put64(d + 102, 1000);
    prof_gc_on_event(4, 2, d, sizeof d);
}

/* GCPerHeapHistory_V3 for one heap: 5 generations, SizeBefore = before/5, SizeAfter = 1. */
static void per_heap_history(uint32_t heap, uint64_t before)
{
    BYTE d[86 + 5 * 80] = {0};
    put32(d + 70, heap);
    put32(d + 82, 5);
    for (int g = 0; g < 5; g++) {
        put64(d + 86 + g * 80, before / 5);
        put64(d + 86 + g * 80 + 24, 1);
    }
    prof_gc_on_event(204, 3, d, sizeof d);
}

static void global_history(uint32_t heaps)
{
    BYTE d[82] = {0};
    put32(d + 8, heaps);
    prof_gc_on_event(205, 4, d, sizeof d);
}

static void suspend_begin(uint32_t reason)
{
    BYTE d[10] = {0};
    put32(d, reason);
    prof_gc_on_event(9, 1, d, sizeof d);
}

static void restart_end(void)
{
    BYTE d[2] = {0};
    prof_gc_on_event(7, 1, d, sizeof d); /* RestartEEBegin: ignored */
    prof_gc_on_event(3, 1, d, sizeof d);
}

/* ---- threads playing the runtime's parts ---- */

static volatile int sampler_go, sampler_done;

/* clrscope's own sampler suspending the runtime (reason 8) in the middle of a GC's pause. */
static void *sampler_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "clrscope-sample", 0, 0, 0);
    while (!__atomic_load_n(&sampler_go, __ATOMIC_ACQUIRE))
        sleep_ms(1);
    suspend_begin(8);
    restart_end();
    __atomic_store_n(&sampler_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The end of a workstation background GC, on ".NET BGC": its final pause (ForGCPrep), history,
 * then GCEnd and heap stats. */
static void *bgc_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, ".NET BGC", 0, 0, 0);
    suspend_begin(6);
    sleep_ms(4);
    restart_end();
    global_history(1);
    per_heap_history(0, 5000);
    gc_end(2, 2);
    heap_stats(3000);
    return NULL;
}

/* A server blocking gen0 GC on ".NET Server GC": callbacks come on this thread (its CPU is read
 * from /proc, not from the callbacks). Also delivers every event twice, as a second in-process
 * session (heap snapshots) would. */
static void *server_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, ".NET Server GC", 0, 0, 0);
    for (int copy = 0; copy < 2; copy++)
        suspend_begin(1);
    for (int copy = 0; copy < 2; copy++)
        gc_start(4, 0, 4, 0);
    spin_ms(5);
    global_history(2);
    for (int copy = 0; copy < 2; copy++) {
        per_heap_history(0, 10000);
        per_heap_history(1, 10000);
    }
    for (int copy = 0; copy < 2; copy++) {
        gc_end(4, 0);
        heap_stats(2000);
    }
    restart_end();
    restart_end();
    return NULL;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *one_pause_thread(void *arg)
{
    (void)arg;
    suspend_begin(1);
    restart_end();
    return NULL;
}

/* Threads that start together and suspend the runtime over and over, as clrscope's sampler and
 * app threads' GCs do: each end must find the slot its begin claimed. */
static pthread_barrier_t churn_start;
static void *churn_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&churn_start);
    for (int i = 0; i < 200; i++) {
        suspend_begin(8);
        restart_end();
    }
    return NULL;
}

static const struct prof_gc_collection *find(const struct prof_gc_view *v, uint64_t n)
{
    for (size_t i = 0; i < v->ncollections; i++)
        if (v->collections[i].number == n)
            return &v->collections[i];
    return NULL;
}

static void malformed_input(void)
{
    BYTE junk[512];
    memset(junk, 0xff, sizeof junk);
    prof_gc_on_event(1, 0, junk, 186); /* EventPipe's ProcessInfo: id 1, version 0 */
    prof_gc_on_event(1, 2, junk, 3);   /* truncated GCStart */
    prof_gc_on_event(2, 1, junk, 2);
    prof_gc_on_event(4, 2, junk, 10);
    prof_gc_on_event(204, 3, junk, 90); /* claims 0xffffffff generations */
    prof_gc_on_event(9, 1, junk, 1);
    prof_gc_on_event(205, 2, junk, 4);
    prof_gc_on_event(1, 2, NULL, 26);
    restart_end(); /* no SuspendEEBegin on this thread */
}

int main(void)
{
    g_core.start_unix = prof_unix_now();
    g_core.start_mono_ns = prof_now_ns();
    g_core.profiles = PROFILE_GC; /* no cpu profile: the store stays out of this test */
    g_cfg.max_threads = 64;
    g_cfg.history_s = 60;
    g_cfg.sampling_hz = 100;
    g_cfg.gc_warn = 0.3;
    prctl(PR_SET_NAME, "app-worker", 0, 0, 0);
    prof_gc_init();

    char rb[24];
    CHECK(!strcmp(prof_gc_reason_name(4, rb, sizeof rb), "AllocLarge"), "reason 4");
    CHECK(!strcmp(prof_gc_reason_name(99, rb, sizeof rb), "Reason99"), "reason 99");
    CHECK(!strcmp(prof_gc_type_name(1), "background"), "type 1");

    malformed_input();
    struct prof_gc_totals t;
    prof_gc_get_totals(&t);
    CHECK(t.collections == 0, "malformed events counted %llu GCs",
          (unsigned long long)t.collections);
    CHECK(t.unpaired_callbacks == 1, "unpaired %llu", (unsigned long long)t.unpaired_callbacks);

    /* 1. Workstation blocking gen0 GC on this app thread (order seen on .NET 10):
     * SuspendEEBegin(ForGC), GCStart, GlobalHeapHistory, PerHeapHistory, GCEnd, HeapStats,
     * RestartEEBegin, RestartEEEnd (the app thread's CPU clock is read at the first and the
     * last). The sampler's own
     * suspension events interleave from another thread. */
    pthread_t sampler;
    pthread_create(&sampler, NULL, sampler_thread, NULL);
    int64_t w0 = prof_now_ns(), cpu0 = thread_cpu_ns();
    suspend_begin(1);
    __atomic_store_n(&sampler_go, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&sampler_done, __ATOMIC_ACQUIRE))
        sleep_ms(1);
    pthread_join(sampler, NULL);
    gc_start(1, 0, 0, 0);
    spin_ms(20);
    global_history(1);
    per_heap_history(0, 1000);
    gc_end(1, 0);
    heap_stats(1000);
    sleep_ms(12); /* off CPU inside the pause: its CPU per wall second is well below 1 */
    restart_end();
    int64_t cpu1 = thread_cpu_ns();

    /* 2. Workstation background GC #2 preceded by an ephemeral gen1 GC #3 in the same pause,
     * both started by this thread; the BGC ends later on the ".NET BGC" thread. */
    int64_t cpu2 = thread_cpu_ns();
    suspend_begin(1);
    gc_start(2, 2, 0, 1);
    gc_start(3, 1, 0, 0);
    spin_ms(10);
    global_history(1);
    per_heap_history(0, 2000);
    gc_end(3, 1);
    heap_stats(1500);
    restart_end();
    int64_t cpu3 = thread_cpu_ns();
    prof_gc_get_totals(&t);
    CHECK(t.in_progress[2] == 1 && t.in_progress[0] == 1, "BGC in progress: %llu %llu",
          (unsigned long long)t.in_progress[0], (unsigned long long)t.in_progress[2]);
    pthread_t th;
    pthread_create(&th, NULL, bgc_thread, NULL);
    pthread_join(th, NULL);

    /* 3. Server GC #4 on a ".NET Server GC" thread, events delivered twice. */
    pthread_create(&th, NULL, server_thread, NULL);
    pthread_join(th, NULL);

    sleep_ms(250); /* records are read once their trailing events have settled (200 ms) */
    prof_gc_tick(prof_unix_now());

    struct prof_gc_view v;
    CHECK(prof_gc_view(60, 100, &v) == 0, "view");
    t = v.totals;
    CHECK(t.by_depth[0] == 2 && t.by_depth[1] == 1 && t.by_depth[2] == 1, "by depth %llu %llu %llu",
          (unsigned long long)t.by_depth[0], (unsigned long long)t.by_depth[1],
          (unsigned long long)t.by_depth[2]);
    CHECK(t.collection_count[0] == 4 && t.collection_count[1] == 2 && t.collection_count[2] == 1,
          "collection counts");
    CHECK(t.background == 1 && t.first_number == 1, "background %llu first %llu",
          (unsigned long long)t.background, (unsigned long long)t.first_number);
    CHECK(t.in_progress[0] == 0, "nothing in progress");
    CHECK(t.unpaired_callbacks == 1, "the sampler's, BGC's and duplicated RestartEEEnd are not unpaired");
    CHECK(t.heap_count == 2, "heap count %d", t.heap_count);
    /* user CPU: each pause of the app thread has its CPU clock read at both ends (~20 ms of CPU
     * in ~33 ms of wall time, then ~10 ms): the thread's own clock read just outside them agrees.
     * The server thread's 5 ms are not counted here (its own clock is read every second). */
    double want = (double)((cpu1 - cpu0) + (cpu3 - cpu2)) / 1e9;
    CHECK(t.gc_user_cpu_s > want * 0.95 - 0.001 && t.gc_user_cpu_s <= want * 1.02 + 0.001,
          "user gc cpu %.4f, want %.4f", t.gc_user_cpu_s, want);
    CHECK(t.gc_user_cpu_s < (double)(prof_now_ns() - w0) / 1e9 * 0.9,
          "user gc cpu %.4f is CPU, not the pauses' wall time", t.gc_user_cpu_s);
    CHECK(t.gc_user_cpu_s <= t.pause_s, "user cpu %.4f inside pauses %.4f", t.gc_user_cpu_s,
          t.pause_s);
    CHECK(v.ncollections == 4, "records %zu", v.ncollections);

    const struct prof_gc_collection *c1 = find(&v, 1), *c2 = find(&v, 2), *c3 = find(&v, 3),
                                    *c4 = find(&v, 4);
    CHECK(c1 && c2 && c3 && c4, "all four records");
    if (c1 && c2 && c3 && c4) {
        CHECK(c1->generation == 0 && c1->type == GC_TYPE_BLOCKING && c1->complete, "gc1 kind");
        /* the whole pause, not cut short by the sampler's RestartEEEnd on another thread */
        CHECK(c1->pause_ms >= 20, "gc1 pause %.3f", c1->pause_ms);
        CHECK(c1->heap_before == 1000 && c1->heap_after == 1000 * 10 + 7, "gc1 heap %llu -> %llu",
              (unsigned long long)c1->heap_before, (unsigned long long)c1->heap_after);
        CHECK(c1->promoted == 100, "gc1 promoted %llu", (unsigned long long)c1->promoted);
        CHECK(c3->generation == 1 && c3->pause_ms >= 10, "gc3: the pause goes to the newest GC");
        CHECK(c3->promoted == 300, "gc3 promoted gen0+gen1 %llu", (unsigned long long)c3->promoted);
        CHECK(c3->heap_before == 2000, "gc3 before %llu", (unsigned long long)c3->heap_before);
        CHECK(c2->generation == 2 && c2->type == GC_TYPE_BACKGROUND && c2->complete, "gc2 kind");
        CHECK(c2->pause_ms >= 4, "gc2 final pause %.3f", c2->pause_ms);
        CHECK(c2->heap_before == 5000 && c2->heap_after == 3000 * 10 + 7, "gc2 heap from BGC");
        CHECK(c2->promoted == 100 + 200 + 300 + 400 + 1000, "gc2 promoted all gens %llu",
              (unsigned long long)c2->promoted);
        CHECK(c4->heap_before == 20000, "gc4 two heaps, each once: %llu",
              (unsigned long long)c4->heap_before);
        CHECK(c4->pause_ms > 5, "gc4 pause %.3f", c4->pause_ms);
        double sum = c1->pause_ms + c2->pause_ms + c3->pause_ms + c4->pause_ms;
        CHECK(sum > t.pause_s * 1e3 - 0.01 && sum < t.pause_s * 1e3 + 0.01,
              "every pause attributed: %.3f vs %.3f", sum, t.pause_s * 1e3);
    }
    CHECK(t.heap[GC_GEN0] == 2000 && t.heap[GC_POH] == 7, "latest heap sizes");
    CHECK(v.nseconds == 1, "one second recorded");
    if (v.nseconds) {
        CHECK(v.seconds[0].collections[0] == 2 && v.seconds[0].collections[2] == 1,
              "per-second counts");
        CHECK(v.seconds[0].gc_cpu_s <= v.seconds[0].process_cpu_s, "gc cpu %.4f > process %.4f",
              v.seconds[0].gc_cpu_s, v.seconds[0].process_cpu_s);
    }
    prof_gc_view_free(&v);


    /* Many app threads, one after the other, each suspending the runtime once (workstation GCs
     * triggered by whichever thread allocates): an ended pause's slot is free for the next
     * thread, so none is lost though there are more threads than slots. */
    for (int i = 0; i < 40; i++) {
        pthread_create(&th, NULL, one_pause_thread, NULL);
        pthread_join(th, NULL);
    }
    prof_gc_get_totals(&t);
    CHECK(t.lost_pauses == 0 && t.lost_blocking_gcs == 0, "40 threads' pauses, lost %llu",
          (unsigned long long)t.lost_pauses);
    CHECK(t.unpaired_callbacks == 1, "unpaired after 40 threads %llu",
          (unsigned long long)t.unpaired_callbacks);

    /* Suspensions on several threads at once, new threads each round (so every round claims
     * slots afresh while others end theirs): a begin and its end always meet. A slot claimed
     * but not yet marked open was once taken by a second thread in between, and the first
     * thread's end was unpaired (a GC with pause_ms 0 in a CI run). */
    uint64_t unpaired_before = t.unpaired_callbacks;
    for (int round = 0; round < 60; round++) {
        enum { CHURN = 10 }; /* fewer than the slots: every begin finds one */
        pthread_t ths[CHURN];
        pthread_barrier_init(&churn_start, NULL, CHURN);
        for (int i = 0; i < CHURN; i++)
            pthread_create(&ths[i], NULL, churn_thread, NULL);
        for (int i = 0; i < CHURN; i++)
            pthread_join(ths[i], NULL);
        pthread_barrier_destroy(&churn_start);
    }
    prof_gc_get_totals(&t);
    CHECK(t.unpaired_callbacks == unpaired_before, "concurrent suspensions: %llu ends unpaired",
          (unsigned long long)(t.unpaired_callbacks - unpaired_before));

    /* 4. The other order, seen once in a CI run on .NET 10: an ephemeral gen1 GC #5 first, then
     * background GC #6, in one pause. The ephemeral GC owns the pause (as when the background GC
     * starts first); the background GC gets only its final pause. */
    suspend_begin(1);
    gc_start(5, 1, 0, 0);
    spin_ms(6);
    global_history(1);
    per_heap_history(0, 2000);
    gc_end(5, 1);
    heap_stats(1500);
    gc_start(6, 2, 0, 1);
    restart_end();
    sleep_ms(250);
    prof_gc_tick(prof_unix_now());
    CHECK(prof_gc_view(60, 100, &v) == 0, "view after the other order");
    const struct prof_gc_collection *c5 = find(&v, 5), *c6 = find(&v, 6);
    CHECK(c5 && c5->complete && c5->pause_ms >= 5, "gc5: the ephemeral GC owns the pause (%.3f)",
          c5 ? c5->pause_ms : -1.0);
    CHECK(!c6 || c6->pause_ms == 0, "gc6: no pause yet (%.3f)", c6 ? c6->pause_ms : -1.0);
    prof_gc_view_free(&v);

    /* A GC that straddles ticks is booked when it ends, and no second takes more GC CPU than
     * the process used in it: the rest waits for the next seconds. ~150 ms of GC CPU before a
     * tick, ~5 ms after it, then the end and a tick at once: that second cannot hold it all. */
    /* (a second without pauses: the 41 above made the module read one pause's clock in 2) */
    prof_gc_tick(prof_unix_now());
    CHECK(prof_gc_view(60, 100, &v) == 0, "view before the straddling GC");
    size_t n0 = v.nseconds;
    double user_before = v.totals.gc_user_cpu_s;
    prof_gc_view_free(&v);
    /* measured with the clock the module reads on this thread (its perf task clock, else the
     * thread CPU clock): the two differ by interrupt time, 3.5 % in one CI run under load */
    int perf_clock;
    int64_t cpu4 = gc_clock_self_ns(&perf_clock);
    suspend_begin(1);
    gc_start(7, 0, 0, 0);
    spin_ms(150);
    prof_gc_tick(prof_unix_now());
    spin_ms(5);
    gc_end(7, 0);
    heap_stats(1000);
    restart_end();
    int64_t cpu5 = gc_clock_self_ns(&perf_clock);
    prof_gc_tick(prof_unix_now());
    spin_ms(200); /* the app's own work: room for what waited */
    prof_gc_tick(prof_unix_now());
    CHECK(prof_gc_view(60, 100, &v) == 0, "view after the straddling GC");
    double booked_sum = 0;
    for (size_t i = 0; i < v.nseconds; i++) {
        CHECK(v.seconds[i].gc_cpu_s <= v.seconds[i].process_cpu_s,
              "second %zu: gc cpu %.4f > process %.4f", i, v.seconds[i].gc_cpu_s,
              v.seconds[i].process_cpu_s);
        booked_sum += v.seconds[i].gc_cpu_s;
    }
    CHECK(v.nseconds == n0 + 3, "seconds %zu after %zu", v.nseconds, n0);
    if (v.nseconds == n0 + 3)
        CHECK(v.seconds[n0 + 1].gc_user_cpu_s < 0.1 && v.seconds[n0 + 2].gc_user_cpu_s > 0.05,
              "the straddling GC waited: %.4f then %.4f", v.seconds[n0 + 1].gc_user_cpu_s,
              v.seconds[n0 + 2].gc_user_cpu_s);
    double want2 = (double)(cpu5 - cpu4) / 1e9;
    double got = v.totals.gc_user_cpu_s - user_before;
    CHECK(got > want2 * 0.95 - 0.001 && got <= want2 * 1.02 + 0.001,
          "straddling GC booked %.4f of %.4f", got, want2);
    CHECK(booked_sum <= v.totals.process_cpu_s, "gc %.4f > process %.4f", booked_sum,
          v.totals.process_cpu_s);
    prof_gc_view_free(&v);

    /* 5. An allocation-heavy app: 320 app-thread pauses in a second (~0.3 ms of CPU each, a
     * third of them also 0.2 ms off CPU). Past PROF_GC_CLOCKED_PER_S a second, the next second
     * reads the clock at one pause in 10 (at random) and estimates the others from their wall
     * time at the read ones' CPU/wall ratio: the total stays the thread's CPU. */
    struct gc_event_counts e0, e1;
    prof_gc_tick(prof_unix_now());
    for (int round = 0; round < 2; round++) {
        CHECK(prof_gc_view(60, 100, &v) == 0, "view before round %d", round);
        double before = v.totals.gc_user_cpu_s;
        prof_gc_view_free(&v);
        gc_events_counts(&e0);
        int64_t ca = gc_clock_self_ns(&perf_clock);
        for (int i = 0; i < 320; i++) {
            suspend_begin(1);
            spin_us(300);
            if (i % 3 == 0)
                nanosleep(&(struct timespec){0, 200000}, NULL);
            restart_end();
        }
        int64_t cb = gc_clock_self_ns(&perf_clock);
        gc_events_counts(&e1);
        prof_gc_tick(prof_unix_now());
        CHECK(prof_gc_view(60, 100, &v) == 0, "view after round %d", round);
        double got5 = v.totals.gc_user_cpu_s - before, want5 = (double)(cb - ca) / 1e9;
        prof_gc_view_free(&v);
        double clocked = (double)(e1.user_wall_clocked_ns - e0.user_wall_clocked_ns);
        double wall = (double)(e1.user_wall_ns - e0.user_wall_ns);
        CHECK(e1.user_pauses - e0.user_pauses == 320, "round %d: %llu pauses", round,
              (unsigned long long)(e1.user_pauses - e0.user_pauses));
        if (round == 0)
            CHECK(clocked == wall, "round 0: every pause clocked (%.0f of %.0f ns)", clocked,
                  wall);
        else
            CHECK(clocked > 0 && clocked < 0.25 * wall,
                  "round 1: one pause in 10 clocked (%.0f of %.0f ns)", clocked, wall);
        CHECK(got5 > want5 * 0.8 && got5 < want5 * 1.1, "round %d: app GC CPU %.4f of %.4f",
              round, got5, want5);
    }

    prof_gc_stop();
    prof_gc_on_event(1, 2, (const BYTE *)"\7\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
    prof_gc_get_totals(&t);
    CHECK(t.collections == 7, "no counting after stop");

    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
