/* prof_heapsnap.c - see prof_heapsnap.h.
 *
 * A snapshot, step by step:
 *   1. request (civetweb worker): guards (hs_guards.c: heap size vs CLRSCOPE_DUMP_MAX_HEAP_MB,
 *      memory headroom vs. the estimated need), a record in the list, the clrscope-heap thread started.
 *   2. clrscope-heap: dump directory checked, address space reserved (hs_capture), state ARMED,
 *      then a short-lived clrscope-heapgc thread starts the runtime session with the GCHeapDump |
 *      GCHeapCollect keywords. The runtime runs a blocking gen2 GC inside that call and fires the
 *      bulk events synchronously on its GC thread(s); prof_heapsnap_on_event recognises the dump
 *      GC by its GCStart (Induced, depth 2, not background) and GCEnd (same count). The session is
 *      stopped from clrscope-heapgc after the GC, never from a callback; prof_events then resets
 *      the provider with a throw-away copy of each of its sessions (dotnet/runtime#121462). The
 *      session call runs on its own thread because the runtime may attach a runtime Thread object
 *      to the caller, after which SYNC profiler calls (type names) would be refused on that
 *      thread.
 *   3. clrscope-heap: graph, dominators, paths (hs_graph), type names (prof_symbols), the
 *      .gcdump file (hs_gcdump, to a temporary name, then renamed), the per-type summary.
 */
#include "prof_heapsnap.h"
#include "hs_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uchar.h>
#include <unistd.h>

#include "hs_capture.h"
#include "hs_graph.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_events.h"
#include "prof_log.h"
#include "prof_scratch.h"
#include "prof_symbols.h"
#include "prof_unload.h"

#define KW_GC 0x1ull
#define KW_GCHEAPDUMP 0x100000ull
#define KW_GCHEAPCOLLECT 0x800000ull
#define GC_REASON_INDUCED 1u
#define GC_TYPE_BACKGROUND 1u

enum cap_state { ST_IDLE, ST_ARMED, ST_CAPTURING, ST_DONE };

/* ---- shared with the GC-thread callback (atomics only) ---- */
static int g_state = ST_IDLE;
static int g_inflight;
static struct heap_capture *g_cap;
static uint32_t g_gc_count;
static int64_t g_gc_start_ns, g_gc_end_ns;

/* ---- the list ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hs_snapshot **g_snaps; /* oldest first */
static int g_nsnaps, g_cap_snaps;
static int g_next_id = 1;
static struct hs_snapshot *g_running;
static pthread_t g_worker;
static int g_worker_live;
static int g_abort;
static int g_inited;

static const char16_t g_provider[] = u"Microsoft-Windows-DotNETRuntime";

/* ---------------------------------------------------------------- GC-thread side */

void prof_heapsnap_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (st != ST_ARMED && st != ST_CAPTURING)
        return;
    __atomic_fetch_add(&g_inflight, 1, __ATOMIC_ACQ_REL);
    st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    struct heap_capture *c = __atomic_load_n(&g_cap, __ATOMIC_ACQUIRE);
    if (!c || (st != ST_ARMED && st != ST_CAPTURING))
        goto out;
    if (id == 1) {
        uint32_t count, depth, reason, type;
        if (st == ST_ARMED && hc_parse_gc_start(data, len, &count, &depth, &reason, &type) &&
            depth == 2 && reason == GC_REASON_INDUCED && type != GC_TYPE_BACKGROUND) {
            __atomic_store_n(&g_gc_count, count, __ATOMIC_RELAXED);
            __atomic_store_n(&g_gc_start_ns, prof_now_ns(), __ATOMIC_RELAXED);
            int expect = ST_ARMED;
            __atomic_compare_exchange_n(&g_state, &expect, ST_CAPTURING, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE);
        }
    } else if (id == 2) {
        uint32_t count, depth;
        if (st == ST_CAPTURING && hc_parse_gc_end(data, len, &count, &depth) &&
            count == __atomic_load_n(&g_gc_count, __ATOMIC_RELAXED)) {
            /* An induced gen2 GC of the app's own that came first has no heap events: keep
             * waiting for ours (as dotnet-gcdump does). */
            int next = __atomic_load_n(&c->n_nodes, __ATOMIC_RELAXED) ? ST_DONE : ST_ARMED;
            __atomic_store_n(&g_gc_end_ns, prof_now_ns(), __ATOMIC_RELAXED);
            __atomic_store_n(&g_state, next, __ATOMIC_RELEASE);
        }
    } else if (st == ST_CAPTURING) {
        hc_on_event(c, id, version, data, len);
    }
out:
    __atomic_fetch_sub(&g_inflight, 1, __ATOMIC_ACQ_REL);
}

/* ---------------------------------------------------------------- helpers */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void snap_fail(struct hs_snapshot *s, const char *msg)
{
    pthread_mutex_lock(&g_lock);
    copy_str(s->error, sizeof s->error, msg);
    s->phase = "failed";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->status, HS_FAILED, __ATOMIC_RELEASE);
    if (g_running == s)
        g_running = NULL;
    pthread_mutex_unlock(&g_lock);
    prof_log(LOG_WARN, "heap snapshot %d failed: %s", s->id, s->error);
}

static void set_phase(struct hs_snapshot *s, const char *phase, unsigned permille)
{
    pthread_mutex_lock(&g_lock);
    s->phase = phase;
    pthread_mutex_unlock(&g_lock);
    __atomic_store_n(&s->progress, permille, __ATOMIC_RELAXED);
}

static void snapshot_free(struct hs_snapshot *s)
{
    if (!s)
        return;
    prof_scratch_release(&s->mem); /* rows, paths and the strings they own */
    free(s);
}

/* ---------------------------------------------------------------- the session (clrscope-heapgc) */

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
        .providerName = (const WCHAR *)g_provider, .keywords = kw,
        .loggingLevel = EP_LEVEL_VERBOSE, .filterData = NULL};
    EVENTPIPE_SESSION session = 0;
    j->hr_start = info->vt->EventPipeStartSession(info, 1, &cfg, 0, &session);
    if (j->hr_start < 0)
        return NULL;
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_ARMED) {
        /* This runtime did not collect on enable: ask for the GC with the session open. */
        j->forced_gc = 1;
        j->hr_force = info->vt->ForceGC(info);
    }
    for (int i = 0; i < 200 && __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_CAPTURING; i++)
        sleep_ms(10);
    j->hr_stop = info->vt->EventPipeStopSession(info, session);
    prof_events_reapply_sessions();
    return NULL;
}

static void enforce_keep_locked(void)
{
    int keep = g_cfg.dump_keep > 0 ? g_cfg.dump_keep : 1;
    while (g_nsnaps > keep) {
        int victim = -1;
        for (int i = 0; i < g_nsnaps && victim < 0; i++)
            if (g_snaps[i] != g_running)
                victim = i;
        if (victim < 0)
            return;
        struct hs_snapshot *s = g_snaps[victim];
        memmove(g_snaps + victim, g_snaps + victim + 1,
                (size_t)(g_nsnaps - victim - 1) * sizeof *g_snaps);
        g_nsnaps--;
        if (s->file[0])
            unlink(s->file);
        snapshot_free(s);
    }
}

static int wait_inflight(void)
{
    for (int i = 0; i < 5000; i++) {
        if (!__atomic_load_n(&g_inflight, __ATOMIC_ACQUIRE))
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

/* Steps 1-2: the dump GC and its events into `cap`. Returns 0, or -1 after failing `s`. */
static int collect(struct hs_snapshot *s, struct heap_capture *cap)
{
    char err[256];
    set_phase(s, "collecting", 20);
    prof_unload_consumer(PROF_UNLOAD_HEAP, 1); /* until the types are named (analyse) */
    s->unload_epoch = prof_unload_epoch();
    __atomic_store_n(&g_cap, cap, __ATOMIC_RELEASE);
    __atomic_store_n(&g_state, ST_ARMED, __ATOMIC_RELEASE);
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
    int st = __atomic_exchange_n(&g_state, ST_IDLE, __ATOMIC_ACQ_REL);
    if (wait_inflight()) {
        /* a callback is stuck inside the capture: leak it rather than free it under its feet */
        snap_fail(s, "the runtime's event callback did not finish; snapshot abandoned");
        return -1;
    }
    __atomic_store_n(&g_cap, NULL, __ATOMIC_RELEASE);
    s->gc_pause_ms = st == ST_DONE ? (double)(g_gc_end_ns - g_gc_start_ns) / 1e6 : 0;
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
        snprintf(err, sizeof err, "cannot start a thread");
    else if (job.hr_start < 0)
        snprintf(err, sizeof err, "the runtime refused the heap-dump session (0x%08x)",
                 (unsigned)job.hr_start);
    else if (st == ST_CAPTURING)
        snprintf(err, sizeof err, "the heap-dump GC did not finish");
    else
        snprintf(err, sizeof err, "the runtime ran no heap-dump GC (ForceGC 0x%08x)",
                 (unsigned)job.hr_force);
    snap_fail(s, err);
    return -1;
}

/* Step 3: graph, names, file, summary. Takes over `cap`. */
static void analyse(struct hs_snapshot *s, struct heap_capture *cap)
{
    set_phase(s, "analyzing", 400);
    struct heap_graph *g = calloc(1, sizeof *g);
    if (!g) {
        hc_release(cap);
        snap_fail(s, "out of memory");
        return;
    }
    int64_t t0 = prof_now_ns();
    int rc = hg_index(g, cap, &g_abort, &s->progress, 400, 550);
    int64_t t1 = prof_now_ns();
    if (!rc)
        rc = hg_dominators(g, &g_abort, &s->progress, 550, 750);
    int64_t t2 = prof_now_ns();
    if (!rc)
        rc = hg_paths(g, &g_abort);
    int64_t t3 = prof_now_ns();
    s->ms_index = (double)(t1 - t0) / 1e6;
    s->ms_dominators = (double)(t2 - t1) / 1e6;
    s->ms_paths = (double)(t3 - t2) / 1e6;
    const char **tnames =
        rc ? NULL : prof_scratch_calloc(&g->mem, (size_t)g->ntypes + 1, sizeof *tnames);
    if (rc || !tnames) {
        snap_fail(s, rc ? g->error : "out of memory");
        hg_free(g);
        free(g);
        return;
    }
    __atomic_store_n(&s->progress, 800u, __ATOMIC_RELAXED);
    /* NULL: no modules */
    const char **tmods = prof_scratch_calloc(&g->mem, (size_t)g->ntypes + 1, sizeof *tmods);
    /* a type whose module started unloading since the GC is named from the caches only; the
     * check is per type so that an unload does not hold up behind a long naming run */
    for (uint32_t t = 0; t < g->ntypes; t++) {
        int asking = prof_unload_enter(s->unload_epoch);
        tnames[t] = prof_symbols_class((ClassID)g->types[t].id);
        if (tmods)
            tmods[t] = prof_symbols_class_module((ClassID)g->types[t].id);
        if (asking)
            prof_unload_leave();
    }
    prof_unload_consumer(PROF_UNLOAD_HEAP, 0);
    s->ms_names = (double)(prof_now_ns() - t3) / 1e6;
    s->objects = g->n;
    s->bytes = g->bytes;
    s->references = g->ne - g->unresolved_edges;
    s->roots = g->nroots;
    s->unresolved_references = g->unresolved_edges;
    s->unreachable_objects = g->unreachable;
    s->unreachable_bytes = g->unreachable_bytes;
    s->approximate = g->approximate;
    prof_log(LOG_DEBUG, "heap snapshot %d: %llu roots unresolved, %u objects unreachable (%llu "
             "bytes), dominators in %d passes", s->id, (unsigned long long)g->unresolved_roots,
             g->unreachable, (unsigned long long)g->unreachable_bytes, g->iterations);
    set_phase(s, "writing", 850);
    char ferr[256] = "";
    int64_t t4 = prof_now_ns();
    char path[sizeof s->file];
    uint64_t file_bytes = 0;
    int frc = hs_file_write(s, g, tnames, tmods, path, sizeof path, &file_bytes, ferr, sizeof ferr);
    if (!frc) {
        pthread_mutex_lock(&g_lock); /* handlers read the name (prof_heapsnap_lock) */
        s->file_bytes = file_bytes;
        snprintf(s->file, sizeof s->file, "%s", path);
        pthread_mutex_unlock(&g_lock);
    }
    int64_t t5 = prof_now_ns();
    int src = hs_summary_build(s, g, tnames);
    s->ms_write = (double)(t5 - t4) / 1e6;
    s->ms_summary = (double)(prof_now_ns() - t5) / 1e6;
    hg_free(g); /* tnames and tmods too */
    free(g);
    if (src || frc) {
        snap_fail(s, src ? "out of memory while summarising" : ferr);
        return;
    }
    pthread_mutex_lock(&g_lock);
    s->phase = "done";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->progress, 1000u, __ATOMIC_RELAXED);
    __atomic_store_n(&s->status, HS_DONE, __ATOMIC_RELEASE);
    g_running = NULL;
    pthread_mutex_unlock(&g_lock);
    prof_log(LOG_INFO, "heap snapshot %d: %llu objects, %.1f MB, written to %s in %.1f s", s->id,
             (unsigned long long)s->objects, (double)s->bytes / 1048576.0, s->file,
             s->duration_s);
}

static void run_snapshot(struct hs_snapshot *s)
{
    char err[256];
    char msg[400];
    if (hs_dump_dir_ready(msg, sizeof msg)) {
        snap_fail(s, msg);
        return;
    }
    struct heap_capture *cap = calloc(1, sizeof *cap);
    if (!cap || reserve_for(cap, (int64_t)s->heap_estimate)) {
        hs_errtext(errno, err, sizeof err);
        free(cap);
        snprintf(msg, sizeof msg, "cannot reserve address space for the snapshot: %.200s", err);
        snap_fail(s, msg);
        return;
    }
    if (collect(s, cap)) {
        prof_unload_consumer(PROF_UNLOAD_HEAP, 0);
        if (!__atomic_load_n(&g_cap, __ATOMIC_ACQUIRE)) {
            hc_release(cap);
            free(cap);
        }
        return;
    }
    analyse(s, cap); /* hg_index takes the capture's pages over and zeroes *cap */
    prof_unload_consumer(PROF_UNLOAD_HEAP, 0); /* (analyse may have failed before naming) */
    free(cap);
}

static void *worker(void *arg)
{
    prof_name_thread("heap");
    run_snapshot(arg);
    hs_tidy_exited();
    pthread_mutex_lock(&g_lock);
    enforce_keep_locked();
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

/* ---------------------------------------------------------------- API side */

void prof_heapsnap_init(void)
{
    g_inited = 1;
}

void prof_heapsnap_stop(void)
{
    __atomic_store_n(&g_abort, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_lock);
    int live = g_worker_live;
    pthread_t w = g_worker;
    g_worker_live = 0;
    pthread_mutex_unlock(&g_lock);
    if (live) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_timedjoin_np(w, NULL, &ts))
            pthread_detach(w); /* still inside the runtime: let the process exit around it */
    }
}

int prof_heapsnap_request(int force, struct hs_refusal *why)
{
    memset(why, 0, sizeof *why);
    why->heap_bytes = why->limit_bytes = why->available_bytes = why->needed_bytes = -1;
    if (!g_core.active || !g_inited || !(g_core.profiles & PROFILE_HEAP) || g_core.info_version < 12 ||
        prof_core_stopping()) {
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "%s",
                 !(g_core.profiles & PROFILE_HEAP)
                     ? "heap snapshots are off (CLRSCOPE_PROFILES does not include heap)"
                     : "heap snapshots need a .NET 5+ runtime with clrscope active");
        return 0;
    }
    pthread_mutex_lock(&g_lock);
    if (g_running) {
        why->reason = HS_BUSY;
        why->running_id = g_running->id;
        if (g_running->id)
            snprintf(why->message, sizeof why->message, "heap snapshot %d is still running",
                     g_running->id);
        else
            snprintf(why->message, sizeof why->message, "a heap snapshot is starting");
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    /* claim the slot before the (slow) guards so two requests cannot both pass */
    struct hs_snapshot *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&g_lock);
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "out of memory");
        return 0;
    }
    s->status = HS_RUNNING;
    s->phase = "starting";
    s->t = prof_unix_now();
    s->forced = force;
    g_running = s;
    /* The previous worker has published its result but may still be on its way out, waiting
     * for g_lock to apply CLRSCOPE_DUMP_KEEP: it is joined here, without the lock (joining it
     * under the lock deadlocked a request made the moment the previous snapshot was done).
     * The claimed slot keeps every other request from joining it too. */
    int join = g_worker_live;
    pthread_t prev = g_worker;
    g_worker_live = 0;
    pthread_mutex_unlock(&g_lock);
    if (join)
        pthread_join(prev, NULL);

    int64_t heap = 0;
    int refused = hs_guards_check(force, why, &heap);
    pthread_mutex_lock(&g_lock);
    if (!refused && __atomic_load_n(&g_abort, __ATOMIC_RELAXED)) { /* stop ran meanwhile */
        refused = 1;
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "the process is shutting down");
    }
    if (refused) {
        g_running = NULL;
        pthread_mutex_unlock(&g_lock);
        free(s);
        return 0;
    }
    s->heap_estimate = (uint64_t)heap;
    s->id = g_next_id++;
    if (g_nsnaps == g_cap_snaps) {
        int nc = g_cap_snaps ? g_cap_snaps * 2 : 8;
        struct hs_snapshot **ns = realloc(g_snaps, (size_t)nc * sizeof *ns);
        if (!ns) {
            g_running = NULL;
            pthread_mutex_unlock(&g_lock);
            free(s);
            why->reason = HS_UNAVAILABLE;
            snprintf(why->message, sizeof why->message, "out of memory");
            return 0;
        }
        g_snaps = ns;
        g_cap_snaps = nc;
    }
    g_snaps[g_nsnaps++] = s;
    enforce_keep_locked();
    if (pthread_create(&g_worker, NULL, worker, s)) {
        snprintf(s->error, sizeof s->error, "cannot start the snapshot thread");
        s->phase = "failed";
        s->status = HS_FAILED;
        g_running = NULL;
    } else {
        g_worker_live = 1;
    }
    int id = s->id;
    pthread_mutex_unlock(&g_lock);
    return id;
}

void prof_heapsnap_lock(void)
{
    pthread_mutex_lock(&g_lock);
}

void prof_heapsnap_unlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

int prof_heapsnap_count(void)
{
    return g_nsnaps;
}

const struct hs_snapshot *prof_heapsnap_at(int i)
{
    return i >= 0 && i < g_nsnaps ? g_snaps[g_nsnaps - 1 - i] : NULL;
}

const struct hs_snapshot *prof_heapsnap_find(int id)
{
    for (int i = 0; i < g_nsnaps; i++)
        if (g_snaps[i]->id == id)
            return g_snaps[i];
    return NULL;
}

int prof_heapsnap_delete(int id)
{
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    for (int i = 0; i < g_nsnaps; i++) {
        struct hs_snapshot *s = g_snaps[i];
        if (s->id != id)
            continue;
        if (s == g_running) {
            rc = -2;
            break;
        }
        memmove(g_snaps + i, g_snaps + i + 1, (size_t)(g_nsnaps - i - 1) * sizeof *g_snaps);
        g_nsnaps--;
        if (s->file[0])
            unlink(s->file);
        snapshot_free(s);
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}
