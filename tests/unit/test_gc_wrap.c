/*
 * test_gc_wrap.c - GC numbers past 2^32. The runtime's GC events number collections with 32 bits
 * (0xffffffff is followed by 0, then 1); clrscope numbers them with 64. Numbered with the
 * events' 32 bits, after 2^32 GCs (50 days at 1,000 a second) the collection list would wait for
 * GC 4,294,967,296 for ever: no GC would be listed or counted per second again.
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_gc.h"

#include "unit_check.h"

static void put32(BYTE *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void one_gc(uint32_t count)
{
    BYTE s[10] = {0}, d[26] = {0}, e[10] = {0}, r[2] = {0};
    prof_gc_on_event(9, 1, s, sizeof s); /* SuspendEEBegin, reason 0 */
    put32(d, count);                     /* GCStart: count, depth 0, reason 0, type 0 */
    prof_gc_on_event(1, 2, d, sizeof d);
    put32(e, count);
    prof_gc_on_event(2, 1, e, sizeof e);
    prof_gc_on_event(3, 1, r, sizeof r); /* RestartEEEnd */
}

static const struct prof_gc_collection *find(const struct prof_gc_view *v, uint64_t n)
{
    for (size_t i = 0; i < v->ncollections; i++)
        if (v->collections[i].number == n)
            return &v->collections[i];
    return NULL;
}

int main(void)
{
    g_core.start_unix = prof_unix_now();
    g_core.start_mono_ns = prof_now_ns();
    g_core.profiles = PROFILE_GC;
    g_cfg.max_threads = 64;
    g_cfg.history_s = 60;
    g_cfg.sampling_hz = 100;
    g_cfg.gc_warn = 0.3;
    prctl(PR_SET_NAME, "app-worker", 0, 0, 0);
    prof_gc_init();

    const uint32_t counts[] = {0xfffffffdu, 0xfffffffeu, 0xffffffffu, 0, 1, 2, 3};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        one_gc(counts[i]);
    struct timespec ts = {0, 250 * 1000000L}; /* records settle for 200 ms */
    nanosleep(&ts, NULL);
    prof_gc_tick(prof_unix_now());

    struct prof_gc_view v;
    CHECK(prof_gc_view(60, 100, &v) == 0, "view");
    const uint64_t wrap = 1ull << 32;
    CHECK(find(&v, 0xfffffffdu) && find(&v, 0xffffffffu), "the GCs before the wrap");
    CHECK(find(&v, wrap + 1) && find(&v, wrap + 2) && find(&v, wrap + 3),
          "the GCs after the wrap, numbered on (%zu records)", v.ncollections);
    /* GC number 0 (2^32) is taken as no number, as before: one GC in 2^32 is not listed */
    CHECK(v.ncollections == 6, "records %zu", v.ncollections);
    CHECK(v.totals.collection_count[0] == 6, "gen0 collections %llu",
          (unsigned long long)v.totals.collection_count[0]);
    prof_gc_view_free(&v);
    prof_gc_stop();

    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
