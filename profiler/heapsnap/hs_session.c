/* hs_session.c - the heap snapshot's dump GC (step 2 in prof_heapsnap.c).
 *
 * clrscope-heap reserves the capture's address space (hs_capture.c), arms the event hook, then a
 * short-lived clrscope-heapgc thread starts the runtime session with the GCHeapDump |
 * GCHeapCollect keywords. The runtime runs a blocking gen2 GC inside that call and fires the bulk
 * events synchronously on its GC thread(s); the event hook (on_event, which prof_events calls)
 * recognises the dump GC by its GCStart (Induced, depth 2, not background) and GCEnd (same
 * count) and feeds the capture in between. The session is stopped from clrscope-heapgc after the GC, never from a callback;
 * prof_events then resets the provider with a throw-away copy of each of its sessions
 * (dotnet/runtime#121462). The session call runs on its own thread because the runtime may
 * attach a runtime Thread object to the caller, after which SYNC profiler calls (type names)
 * would be refused on that thread.
 *
 * Threads: the event hook on GC threads (atomics only, no lock, no allocation); hs_session_init
 * at Initialize; hs_session_reserve and hs_session_collect on clrscope-heap, which waits for
 * clrscope-heapgc.
 * The state the three share is this file's alone.
 */
#include "hs_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <uchar.h>

#include "hs_capture.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_events.h"
#include "prof_log.h"

#define KW_GC 0x1ull
#define KW_GCHEAPDUMP 0x100000ull
#define KW_GCHEAPCOLLECT 0x800000ull
#define GC_REASON_INDUCED 1u
#define GC_TYPE_BACKGROUND 1u

enum cap_state { ST_IDLE, ST_ARMED, ST_CAPTURING, ST_DONE };

/* The dump GC's state, shared by clrscope-heap (arms, waits, disarms), clrscope-heapgc (reads
 * `state`) and the GC threads (the hook): atomics only, no lock. */
static struct dump_state {
    int state;                /* enum cap_state: clrscope-heap sets ARMED and IDLE, the hook
                                 CAPTURING, then DONE (or ARMED again: a GC without heap events) */
    int inflight;             /* hooks running now; clrscope-heap waits for 0 after disarming */
    struct heap_capture *cap; /* clrscope-heap's, set before arming, cleared when no hook runs */
    uint32_t gc_count;        /* the dump GC's number: its GCStart's, matched against GCEnd's */
    int64_t gc_start_ns, gc_end_ns; /* written by the hook, read by clrscope-heap once disarmed */
} dump = {.state = ST_IDLE};

static const char16_t runtime_provider[] = u"Microsoft-Windows-DotNETRuntime";

/* The event hook: heap-dump events and GCStart/GCEnd, on GC threads (prof_events_on_heapdump). */
static void on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    int st = __atomic_load_n(&dump.state, __ATOMIC_ACQUIRE);
    if (st != ST_ARMED && st != ST_CAPTURING)
        return;
    __atomic_fetch_add(&dump.inflight, 1, __ATOMIC_ACQ_REL);
    st = __atomic_load_n(&dump.state, __ATOMIC_ACQUIRE);
    struct heap_capture *c = __atomic_load_n(&dump.cap, __ATOMIC_ACQUIRE);
    if (!c || (st != ST_ARMED && st != ST_CAPTURING))
        goto out;
    if (id == 1) {
        uint32_t count, depth, reason, type;
        if (st == ST_ARMED && hc_parse_gc_start(data, len, &count, &depth, &reason, &type) &&
            depth == 2 && reason == GC_REASON_INDUCED && type != GC_TYPE_BACKGROUND) {
            __atomic_store_n(&dump.gc_count, count, __ATOMIC_RELAXED);
            __atomic_store_n(&dump.gc_start_ns, prof_now_ns(), __ATOMIC_RELAXED);
            int expect = ST_ARMED;
            __atomic_compare_exchange_n(&dump.state, &expect, ST_CAPTURING, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE);
        }
    } else if (id == 2) {
        uint32_t count, depth;
        if (st == ST_CAPTURING && hc_parse_gc_end(data, len, &count, &depth) &&
            count == __atomic_load_n(&dump.gc_count, __ATOMIC_RELAXED)) {
            /* An induced gen2 GC of the app's own that came first has no heap events: keep
             * waiting for ours (as dotnet-gcdump does). */
            int next = __atomic_load_n(&c->n_nodes, __ATOMIC_RELAXED) ? ST_DONE : ST_ARMED;
            __atomic_store_n(&dump.gc_end_ns, prof_now_ns(), __ATOMIC_RELAXED);
            __atomic_store_n(&dump.state, next, __ATOMIC_RELEASE);
        }
    } else if (st == ST_CAPTURING) {
        hc_on_event(c, id, version, data, len);
    }
out:
    __atomic_fetch_sub(&dump.inflight, 1, __ATOMIC_ACQ_REL);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct gcjob {
    HRESULT hr_start, hr_force, hr_stop;
    int forced_gc;
};

static void *gc_thread(void *arg)
{
    struct gcjob *j = arg;
    prof_name_thread("heapgc");
    ICorProfilerInfo15 *info = g_core.info;
    UINT64 kw = KW_GCHEAPDUMP | KW_GCHEAPCOLLECT;
    if (prof_events_state() != 1 || !(g_core.profiles & PROFILE_HEAP))
        kw |= KW_GC; /* no main session to deliver GCStart/GCEnd */
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {
        .providerName = (const WCHAR *)runtime_provider, .keywords = kw,
        .loggingLevel = EP_LEVEL_VERBOSE, .filterData = NULL};
    EVENTPIPE_SESSION session = 0;
    /* The governor's allocation switch waits while this session is open: a session started
     * then would be told of the GCHeapCollect keyword and trigger a GC of its own. */
    prof_events_hold_switch();
    j->hr_start = info->vt->EventPipeStartSession(info, 1, &cfg, 0, &session);
    if (j->hr_start < 0) {
        prof_events_release_switch();
        return NULL;
    }
    if (__atomic_load_n(&dump.state, __ATOMIC_ACQUIRE) == ST_ARMED) {
        /* This runtime did not collect on enable: ask for the GC with the session open. */
        j->forced_gc = 1;
        j->hr_force = info->vt->ForceGC(info);
    }
    for (int i = 0; i < 200 && __atomic_load_n(&dump.state, __ATOMIC_ACQUIRE) == ST_CAPTURING; i++)
        sleep_ms(10);
    j->hr_stop = info->vt->EventPipeStopSession(info, session);
    prof_events_reapply_sessions();
    prof_events_release_switch();
    return NULL;
}

static int wait_inflight(void)
{
    for (int i = 0; i < 5000; i++) {
        if (!__atomic_load_n(&dump.inflight, __ATOMIC_ACQUIRE))
            return 0;
        sleep_ms(1);
    }
    return -1;
}

static int reserve_for(struct heap_capture *cap, int64_t heap)
{
    /* Address space only (pages are committed when written): be generous. The generation
     * bounds can under-count (server GC); the resident set bounds the heap from above. */
    int64_t rss = hs_rss_bytes();
    uint64_t h = heap > 0 ? (uint64_t)heap : (uint64_t)g_cfg.dump_max_heap;
    if (rss > 0 && (uint64_t)rss > h)
        h = (uint64_t)rss;
    h += h / 2 + (64u << 20);
    uint64_t nodes = h / 24 + (1u << 20), edges = h / 8 + (4u << 20);
    if (nodes > 0x7ffffff0u)
        nodes = 0x7ffffff0u;
    if (edges > 0xfffffff0u)
        edges = 0xfffffff0u;
    return hc_reserve(cap, nodes, edges, 4u << 20, 32u << 20);
}

void hs_session_init(void)
{
    prof_events_on_heapdump(on_event);
}

struct heap_capture *hs_session_reserve(int64_t heap)
{
    struct heap_capture *cap = calloc(1, sizeof *cap);
    if (!cap || reserve_for(cap, heap)) {
        int e = errno;
        free(cap);
        errno = e;
        return NULL;
    }
    return cap;
}

int hs_session_collect(struct hs_snapshot *s, struct heap_capture *cap, char *err, size_t errcap)
{
    __atomic_store_n(&dump.cap, cap, __ATOMIC_RELEASE);
    __atomic_store_n(&dump.state, ST_ARMED, __ATOMIC_RELEASE);
    struct gcjob job = {0};
    pthread_t th;
    int started = !pthread_create(&th, NULL, gc_thread, &job);
    while (started) {
        /* progress while the world is stopped: bytes reported so far vs. the estimate */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!pthread_timedjoin_np(th, NULL, &ts))
            break;
        uint64_t b = __atomic_load_n(&cap->bytes, __ATOMIC_RELAXED);
        double frac = s->heap_estimate ? (double)b / (double)s->heap_estimate : 0;
        __atomic_store_n(&s->progress, 20 + (unsigned)(380 * (frac > 1 ? 1 : frac)),
                         __ATOMIC_RELAXED);
    }
    int st = __atomic_exchange_n(&dump.state, ST_IDLE, __ATOMIC_ACQ_REL);
    if (wait_inflight()) {
        /* a callback is stuck inside the capture: leak it rather than free it under its feet */
        snprintf(err, errcap, "the runtime's event callback did not finish; snapshot abandoned");
        return -1;
    }
    __atomic_store_n(&dump.cap, NULL, __ATOMIC_RELEASE);
    s->gc_pause_ms = st == ST_DONE ? (double)(dump.gc_end_ns - dump.gc_start_ns) / 1e6 : 0;
    if (started && job.hr_start >= 0 && st == ST_DONE) {
        prof_log(LOG_DEBUG, "heap snapshot %d: %llu objects, %llu references, %llu roots (%llu "
                 "weak skipped), %llu statics, %llu other events, GC %.1f ms%s", s->id,
                 (unsigned long long)cap->n_nodes, (unsigned long long)cap->n_edges,
                 (unsigned long long)cap->n_roots, (unsigned long long)cap->weak_roots,
                 (unsigned long long)cap->n_statics, (unsigned long long)cap->other_events,
                 s->gc_pause_ms, job.forced_gc ? " (ForceGC)" : "");
        return 0;
    }
    if (!started)
        snprintf(err, errcap, "cannot start a thread");
    else if (job.hr_start < 0)
        snprintf(err, errcap, "the runtime refused the heap-dump session (0x%08x)",
                 (unsigned)job.hr_start);
    else if (st == ST_CAPTURING)
        snprintf(err, errcap, "the heap-dump GC did not finish");
    else
        snprintf(err, errcap, "the runtime ran no heap-dump GC (ForceGC 0x%08x)",
                 (unsigned)job.hr_force);
    hc_release(cap);
    free(cap);
    return -1;
}
