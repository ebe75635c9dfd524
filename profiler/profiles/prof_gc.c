/*
 * prof_gc.c - see prof_gc.h. clrscope-agg's side (prof_gc_tick: the per-second record and the
 * list of collections) and the readers (web threads), which share gc.lock. The runtime's events
 * are in prof_gc_events.c, the GC threads' CPU in prof_gc_cpu.c, the configured GC mode in
 * prof_gc_config.c.
 */
#include "prof_gc.h"
#include "prof_gc_int.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_agg.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"

/* The module's clrscope-agg side: written by clrscope-agg (prof_gc_tick), by Initialize and by
 * Shutdown; what the readers (web threads) need is guarded by `lock`. */
static struct gc_state {
    pthread_mutex_t lock;
    int ready;
    uint64_t untracked; /* threads left out of the table at the last tick */
    int gc_threads, server_threads, server_seen;
    /* baselines */
    int64_t prev_proc, prev_mono;
    uint64_t prev_user_cpu, prev_user_wall, prev_user_wall_clocked, prev_user_pauses;
    /* app threads' GC pauses: CPU over wall time at the pauses whose clocks were read, for
     * those that were not (gc_events_set_clock_every) */
    double user_ratio;
    uint32_t clock_every;
    int sampling_logged;
    /* GC CPU not booked yet because its second's process CPU was already all GC's (ns): a GC
     * that an app thread started before a tick is booked whole in the second it ends */
    int64_t carry_threads, carry_user;
    uint64_t prev_pause, prev_depth[3];
    int64_t threads_cpu_total, user_cpu_total, proc_cpu_total; /* ns, as booked */
    int clock_logged;
    /* per-second ring */
    struct prof_gc_second *secs;
    size_t sec_cap, sec_head, sec_n;
    /* collection ring */
    struct prof_gc_collection *coll;
    size_t coll_cap, coll_head, coll_n;
    uint64_t consumed_upto, dropped;
    /* configuration fallbacks for the mode */
    int cfg_server, cfg_concurrent;
} gc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Moves every settled GC into the collection ring. Called with gc.lock held. */
static void consume_slots(int64_t now)
{
    uint64_t hi = gc_events_last_started();
    if (!gc.consumed_upto) {
        uint64_t first = gc_events_first_number();
        if (!first)
            return;
        gc.consumed_upto = first - 1;
    }
    if (hi > gc.consumed_upto + GC_SLOTS) { /* overrun: the oldest slots are gone */
        gc.dropped += hi - GC_SLOTS - gc.consumed_upto;
        gc.consumed_upto = hi - GC_SLOTS;
    }
    while (gc.consumed_upto < hi) {
        struct prof_gc_collection rec;
        int rc = gc_events_read_slot(gc.consumed_upto + 1, now, &rec);
        if (rc == 0)
            break; /* in order: wait for the oldest GC still running (a background GC) */
        gc.consumed_upto++;
        if (rc < 0) {
            gc.dropped++;
            continue;
        }
        gc.coll[(gc.coll_head + gc.coll_n) % gc.coll_cap] = rec;
        if (gc.coll_n < gc.coll_cap)
            gc.coll_n++;
        else
            gc.coll_head = (gc.coll_head + 1) % gc.coll_cap;
    }
}

/* Books `*carry + raw` ns of GC CPU into a second that has `room` ns of process CPU left: what
 * does not fit waits in *carry for the next seconds (at most CARRY_MAX_NS: beyond, a clock ran
 * ahead of the process clock and the rest is dropped). Returns what was booked. */
#define CARRY_MAX_NS 2000000000LL
static int64_t book(int64_t raw, int64_t *carry, int64_t room)
{
    int64_t want = raw + *carry;
    int64_t got = want < room ? want : room;
    if (got < 0)
        got = 0;
    *carry = want - got;
    if (*carry > CARRY_MAX_NS)
        *carry = CARRY_MAX_NS;
    return got;
}

static void log_clock_once(void)
{
    uint64_t perf_threads, thread_reads;
    int refused;
    gc_clock_stats(&perf_threads, &thread_reads, &refused);
    if (perf_threads)
        prof_log_once(gc.clock_logged, LOG_INFO, "gc: app threads' GC CPU read from their perf "
                      "task clocks");
    else if (thread_reads)
        prof_log_once(gc.clock_logged, LOG_INFO, "gc: no perf task clock (%s): app threads' "
                      "GC CPU read from CLOCK_THREAD_CPUTIME_ID, which can make the kernel switch "
                      "threads inside a GC pause on a busy core",
                      refused ? strerror(refused) : "no descriptor for it");
}

/* The app threads' GC CPU since the last tick: what their clocks counted, and for the pauses
 * whose clocks were not read their wall time at the CPU/wall ratio of those that were (the
 * last second's, or the last known; at first 1). Sets how many pauses the next second reads,
 * for at most PROF_GC_CLOCKED_PER_S reads a second. */
static int64_t user_cpu_delta(const struct gc_event_counts *ev, double dt)
{
    double cpu = (double)(ev->user_cpu_ns - gc.prev_user_cpu);
    double clocked = (double)(ev->user_wall_clocked_ns - gc.prev_user_wall_clocked);
    double wall = (double)(ev->user_wall_ns - gc.prev_user_wall);
    if (clocked > 0)
        gc.user_ratio = cpu / clocked;
    double est = cpu + (wall > clocked ? (wall - clocked) * gc.user_ratio : 0);
    uint64_t pauses = ev->user_pauses - gc.prev_user_pauses;
    gc.prev_user_pauses = ev->user_pauses;
    double rate = (double)pauses / (dt > 1 ? dt : 1); /* (ticks come a second apart) */
    uint32_t every = rate > PROF_GC_CLOCKED_PER_S
                         ? (uint32_t)ceil(rate / PROF_GC_CLOCKED_PER_S)
                         : 1;
    if (every != gc.clock_every) {
        gc.clock_every = every;
        gc_events_set_clock_every(every);
        if (every > 1)
            prof_log_once(gc.sampling_logged, LOG_INFO,
                          "gc: app threads pause for %llu GCs a second: their CPU clocks are "
                          "read at one pause in %u (over %d a second), the others' CPU "
                          "estimated from their wall time", (unsigned long long)pauses, every,
                          PROF_GC_CLOCKED_PER_S);
    }
    return est > 0 ? (int64_t)est : 0;
}

void prof_gc_tick(double now_unix)
{
    if (!gc.ready)
        return;
    int n_gc = 0, server = 0; /* dedicated GC threads, of which server GC threads */
    uint64_t untracked = 0;
    int64_t threads = gc_cpu_scan(now_unix, gc_events_last_started(), &n_gc, &server, &untracked);
    struct gc_event_counts ev;
    gc_events_counts(&ev);
    /* the process clock last: it then covers every GC CPU read before it */
    int64_t mono = prof_now_ns();
    int64_t proc = prof_process_cpu_ns();
    uint64_t ucpu = ev.user_cpu_ns;
    uint64_t pause = ev.pause_ns_total;
    uint64_t depth[3];
    for (int g = 0; g < 3; g++)
        depth[g] = ev.by_depth[g];

    /* GC CPU is what the GC threads' and the app threads' clocks counted, booked so that no
     * second holds more GC CPU than the process used in it */
    int64_t proc_ns = proc - gc.prev_proc > 0 ? proc - gc.prev_proc : 0;
    int64_t threads_ns = book(threads, &gc.carry_threads, proc_ns);
    int64_t user = user_cpu_delta(&ev, (double)(mono - gc.prev_mono) / 1e9);
    int64_t user_ns = book(user, &gc.carry_user, proc_ns - threads_ns);
    assert(threads_ns >= 0 && user_ns >= 0 && threads_ns + user_ns <= proc_ns);

    struct prof_gc_second s = {0};
    s.t = now_unix;
    s.dt = (double)(mono - gc.prev_mono) / 1e9;
    s.process_cpu_s = (double)proc_ns / 1e9;
    s.gc_threads_cpu_s = (double)threads_ns / 1e9;
    s.gc_user_cpu_s = (double)user_ns / 1e9;
    s.gc_cpu_s = (double)(threads_ns + user_ns) / 1e9;
    s.pause_s = (double)(pause - gc.prev_pause) / 1e9;
    for (int g = 0; g < GC_NHEAPS; g++)
        s.heap[g] = ev.heap[g];
    for (int g = 0; g < 3; g++)
        s.collections[g] = (uint32_t)(depth[g] - gc.prev_depth[g]);

    pthread_mutex_lock(&gc.lock);
    gc.gc_threads = n_gc;
    gc.server_threads = server;
    gc.server_seen |= server > 0;
    gc.untracked = untracked;
    gc.threads_cpu_total += threads_ns;
    gc.user_cpu_total += user_ns;
    gc.proc_cpu_total += proc_ns;
    gc.prev_mono = mono;
    gc.prev_proc = proc;
    gc.prev_user_cpu = ucpu;
    gc.prev_user_wall = ev.user_wall_ns;
    gc.prev_user_wall_clocked = ev.user_wall_clocked_ns;
    gc.prev_pause = pause;
    memcpy(gc.prev_depth, depth, sizeof depth);
    gc.secs[(gc.sec_head + gc.sec_n) % gc.sec_cap] = s;
    if (gc.sec_n < gc.sec_cap)
        gc.sec_n++;
    else
        gc.sec_head = (gc.sec_head + 1) % gc.sec_cap;
    consume_slots(mono);
    pthread_mutex_unlock(&gc.lock);
    log_clock_once();
}

void prof_gc_init(void)
{
    if (!(g_core.profiles & PROFILE_GC))
        return;
    int tabs = gc_cpu_start(g_cfg.max_threads);
    gc.sec_cap = (size_t)g_cfg.history_s + 1;
    gc.coll_cap = (size_t)prof_env_long("CLRSCOPE_GC_MAX_COLLECTIONS", 10000, 100, 1000000);
    gc.secs = calloc(gc.sec_cap, sizeof *gc.secs);
    gc.coll = calloc(gc.coll_cap, sizeof *gc.coll);
    if (tabs || !gc.secs || !gc.coll) {
        prof_log(LOG_ERROR, "gc: out of memory; the GC view is off");
        prof_gc_stop();
        prof_core_disable(PROFILE_GC);
        return;
    }
    gc_config_read(&gc.cfg_server, &gc.cfg_concurrent);
    gc_clock_init();
    gc.prev_mono = prof_now_ns();
    gc.prev_proc = prof_process_cpu_ns();
    gc.user_ratio = 1; /* (a pause's CPU is its wall time until one is read) */
    gc.clock_every = 1;
    gc.ready = 1;
    gc_events_enable(1);
}

void prof_gc_stop(void)
{
    /* Runtime threads may still deliver callbacks after Shutdown: they only touch the events'
     * state (prof_gc_events.c). */
    gc_events_enable(0);
    pthread_mutex_lock(&gc.lock);
    gc.ready = 0;
    gc_cpu_stop();
    free(gc.secs);
    free(gc.coll);
    gc.secs = NULL;
    gc.coll = NULL;
    gc.sec_n = gc.coll_n = 0;
    pthread_mutex_unlock(&gc.lock);
}

/* ---------------------------------------------------------------------------------------------
 * Readers (web threads).
 */

/* Called with gc.lock held. */
static void fill_totals(struct prof_gc_totals *t)
{
    gc_events_totals(t);
    t->gc_user_cpu_s = (double)gc.user_cpu_total / 1e9;
    t->gc_threads_cpu_s = (double)gc.threads_cpu_total / 1e9;
    t->process_cpu_s = (double)gc.proc_cpu_total / 1e9;
    t->gc_threads = gc.gc_threads;
    /* what the threads say once they have been scanned; the configuration before that (a
     * server GC configured on a single CPU falls back to workstation: threads tell) */
    t->server = gc.server_seen || t->heap_count > 1 || (gc.sec_n == 0 && gc.cfg_server);
    if (!t->heap_count) /* no GC yet */
        t->heap_count = t->server ? gc.server_threads : 1;
    t->concurrent = t->concurrent || gc.cfg_concurrent;
    t->dropped_collections = gc.dropped;
    t->untracked_threads = gc.untracked;
}

double prof_gc_last_start(void)
{
    pthread_mutex_lock(&gc.lock);
    double t = gc.coll_n ? gc.coll[(gc.coll_head + gc.coll_n - 1) % gc.coll_cap].t : 0;
    pthread_mutex_unlock(&gc.lock);
    return t;
}

void prof_gc_get_totals(struct prof_gc_totals *out)
{
    pthread_mutex_lock(&gc.lock);
    fill_totals(out);
    pthread_mutex_unlock(&gc.lock);
}

int prof_gc_view(double seconds, size_t max_collections, struct prof_gc_view *out)
{
    memset(out, 0, sizeof *out);
    double now = prof_unix_now();
    double from = now - seconds;
    pthread_mutex_lock(&gc.lock);
    fill_totals(&out->totals);
    size_t ns = 0, nc = 0;
    for (size_t i = 0; i < gc.sec_n; i++)
        if (gc.secs[(gc.sec_head + i) % gc.sec_cap].t > from)
            ns++;
    for (size_t i = 0; i < gc.coll_n; i++) {
        const struct prof_gc_collection *c = &gc.coll[(gc.coll_head + i) % gc.coll_cap];
        if (c->t <= from)
            continue;
        nc++;
        out->window_by_gen[c->generation < 0 ? 0 : c->generation > 2 ? 2 : c->generation]++;
        if (c->pause_ms > out->window_max_pause_ms)
            out->window_max_pause_ms = c->pause_ms;
    }
    size_t keep = nc < max_collections ? nc : max_collections;
    out->seconds = ns ? malloc(ns * sizeof *out->seconds) : NULL;
    out->collections = keep ? malloc(keep * sizeof *out->collections) : NULL;
    if ((ns && !out->seconds) || (keep && !out->collections)) {
        pthread_mutex_unlock(&gc.lock);
        prof_gc_view_free(out);
        return -1;
    }
    for (size_t i = gc.sec_n - ns; i < gc.sec_n; i++)
        out->seconds[out->nseconds++] = gc.secs[(gc.sec_head + i) % gc.sec_cap];
    for (size_t i = gc.coll_n - keep; i < gc.coll_n; i++)
        out->collections[out->ncollections++] = gc.coll[(gc.coll_head + i) % gc.coll_cap];
    out->collections_omitted = nc - keep;
    pthread_mutex_unlock(&gc.lock);
    out->t_to = now;
    out->t_from = out->nseconds ? out->seconds[0].t - out->seconds[0].dt : now;
    if (out->t_from < from)
        out->t_from = from;
    return 0;
}

void prof_gc_view_free(struct prof_gc_view *v)
{
    free(v->seconds);
    free(v->collections);
    v->seconds = NULL;
    v->collections = NULL;
    v->nseconds = v->ncollections = 0;
}

const char *prof_gc_reason_name(unsigned reason, char *buf, size_t cap)
{
    static const char *const names[] = {
        "AllocSmall",
        "Induced",
        "LowMemory",
        "Empty",
        "AllocLarge",
        "OutOfSpaceSOH",
        "OutOfSpaceLOH",
        "InducedNoForce",
        "Stress",
        "InducedLowMemory",
        "InducedCompacting",
        "LowMemoryHost",
        "PMFullGC",
        "LowMemoryHostBlocking",
        "BGCTuningSOH",
        "BGCTuningLOH",
        "BGCStepping",
        "InducedAggressive",
    };
    if (reason < sizeof names / sizeof names[0])
        return names[reason];
    snprintf(buf, cap, "Reason%u", reason);
    return buf;
}

const char *prof_gc_type_name(unsigned type)
{
    switch (type) {
    case GC_TYPE_BLOCKING:
        return "blocking";
    case GC_TYPE_BACKGROUND:
        return "background";
    case GC_TYPE_FOREGROUND:
        return "foreground";
    default:
        return "unknown";
    }
}

const struct prof_kind prof_gc_kind = {
    .name = "gc",
    .profile = PROFILE_GC,
    .tick = prof_gc_tick,
};

int prof_gc_collection_by_t(const void *a, const void *b)
{
    const struct prof_gc_collection *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}
