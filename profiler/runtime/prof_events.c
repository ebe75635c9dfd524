/* prof_events.c - see prof_events.h. */
#include "prof_events.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <uchar.h>

#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_exc.h"
#include "prof_gc.h"
#include "prof_lock.h"
#include "prof_log.h"

#define KW_GC 0x1ull
#define KW_CONTENTION 0x4000ull
#define KW_EXCEPTION 0x8000ull

#define MAX_PROVIDERS 16
enum { PK_RUNTIME = 1, PK_COUNTERS = 2, PK_OTHER = 3 };

/* The module's state. The sessions and what they asked for are written at Initialize
 * (prof_events_start) and read by clrscope's threads (prof_events_reapply_sessions); the
 * provider table by the threads that deliver events, lock-free; the heap-dump handler is set at
 * Initialize and read by those threads. */
static struct events_state {
    prof_events_handler heapdump;  /* atomic: prof_events_on_heapdump; NULL: none */
    EVENTPIPE_SESSION session;     /* GC, allocations (unless split), contention */
    EVENTPIPE_SESSION exc_session; /* exceptions (start_exceptions_session) */
    int state;                     /* atomic: prof_events_state */
    /* What each running session of the runtime provider asked for (prof_events_reapply_sessions):
     * [0] the main session, [1] the exceptions' own, [2] the allocation session while it is on.
     * keywords 0 = that session is not running. Written under `switching` after Initialize. */
    struct {
        UINT64 keywords;
        UINT32 level;
    } cfg_of[3];
    /* The allocation switch (prof_events_alloc_switch): the allocation keyword in a session of
     * its own, and a parking session (no keyword) that stands in while it is off. */
    struct {
        pthread_mutex_t switching; /* the switch, and prof_events_hold_switch's holder */
        int split;                 /* the allocation keyword has its own session */
        int on;                    /* atomic: that session runs */
        UINT64 keywords;
        UINT32 level;
        EVENTPIPE_SESSION alloc, park;
        uint64_t switches, failed; /* atomic */
        struct prof_events_switch_times times; /* the last switch's (the switching thread) */
    } alloc_switch;
    /* Time spent in this module's delivery of events, by kind (atomic; CLOCK_MONOTONIC ns). */
    struct prof_events_cost cost;
    /* Providers seen so far: handle -> kind (PK_RUNTIME, PK_COUNTERS or PK_OTHER). Each slot is
     * claimed with a CAS (both fields atomic); a full table only costs a name lookup per event. */
    struct {
        EVENTPIPE_PROVIDER handle;
        int kind;
    } providers[MAX_PROVIDERS];
} events = {.alloc_switch = {.switching = PTHREAD_MUTEX_INITIALIZER}};

static int name_is(const WCHAR *name, ULONG got, const char *want)
{
    size_t len = strlen(want);
    /* whether the count includes the terminator is not documented: accept both */
    if (got != len && got != len + 1)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (name[i] != (WCHAR)want[i])
            return 0;
    return 1;
}

static int provider_kind(EVENTPIPE_PROVIDER p)
{
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        EVENTPIPE_PROVIDER h = __atomic_load_n(&events.providers[i].handle, __ATOMIC_ACQUIRE);
        if (h == p) {
            int k = __atomic_load_n(&events.providers[i].kind, __ATOMIC_ACQUIRE);
            if (k)
                return k;
            break;
        }
        if (h == 0)
            break;
    }
    WCHAR name[64];
    ULONG got = 0;
    ICorProfilerInfo15 *info = g_core.info;
    int kind = PK_OTHER;
    HRESULT hr = info->vt->EventPipeGetProviderInfo(info, p, 64, &got, name);
    if (hr >= 0) {
        if (name_is(name, got, "Microsoft-Windows-DotNETRuntime"))
            kind = PK_RUNTIME;
        else if (name_is(name, got, "System.Runtime"))
            kind = PK_COUNTERS;
    } else if ((uint32_t)hr != 0x8007007Au) {
        /* not "name longer than the buffer" (no provider of ours): asked again next event, so
         * that one failed call cannot make a provider's events ignored for the process's life */
        static int logged;
        prof_log_once(logged, LOG_WARN, "EventPipeGetProviderInfo failed (0x%08x); that "
                      "provider's event is ignored", (unsigned)hr);
        return PK_OTHER;
    }
    for (int i = 0; i < MAX_PROVIDERS; i++) {
        EVENTPIPE_PROVIDER expected = 0;
        if (__atomic_compare_exchange_n(&events.providers[i].handle, &expected, p, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
            expected == p) {
            __atomic_store_n(&events.providers[i].kind, kind, __ATOMIC_RELEASE);
            break;
        }
    }
    return kind;
}

void prof_events_on_heapdump(prof_events_handler h)
{
    __atomic_store_n(&events.heapdump, h, __ATOMIC_RELEASE);
}

static void to_heapdump(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    prof_events_handler h = __atomic_load_n(&events.heapdump, __ATOMIC_ACQUIRE);
    if (h)
        h(id, version, data, len);
}

DWORD prof_events_extra_event_mask(void)
{
    return 0;
}

int prof_events_state(void)
{
    return __atomic_load_n(&events.state, __ATOMIC_RELAXED);
}

static const char16_t runtime_provider[] = u"Microsoft-Windows-DotNETRuntime";

static HRESULT start_runtime_session(UINT64 kw, UINT32 level, EVENTPIPE_SESSION *out)
{
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {.providerName = (const WCHAR *)runtime_provider,
                                             .keywords = kw,
                                             .loggingLevel = level,
                                             .filterData = NULL};
    ICorProfilerInfo15 *info = g_core.info;
    return info->vt->EventPipeStartSession(info, 1, &cfg, 0, out);
}

/* Exceptions get a session of their own at level Error. ExceptionThrown, the one event the
 * profile reads, is an Error-level event; the same keyword at Informational also makes the
 * runtime build ExceptionCatch/Finally/FilterStart (each with its method's name formatted) and
 * their Stop events for every handler an exception passes, which clrscope would only discard:
 * 2.2x the cost of a throw against 1.3x (bench/results.md, exceptions_overhead). A session has
 * one level for all its keywords, hence two sessions. The runtime checks those handler events
 * against the provider's level and keywords summed over all sessions, so the saving holds only
 * while no other session asks for Informational: here, when exceptions run with cpu and wall
 * alone. With the GC, allocation or lock profiles on, the handler events are built again. */
static void start_exceptions_session(void)
{
    HRESULT hr = start_runtime_session(KW_EXCEPTION, EP_LEVEL_ERROR, &events.exc_session);
    if (hr < 0) {
        events.exc_session = 0;
        prof_log(LOG_WARN, "the runtime refused the exceptions' EventPipe session (0x%08x): the "
                 "exceptions profile is off; the rest goes on", (unsigned)hr);
        prof_core_disable(PROFILE_EXCEPTIONS);
        return;
    }
    events.cfg_of[1].keywords = KW_EXCEPTION;
    events.cfg_of[1].level = EP_LEVEL_ERROR;
    __atomic_store_n(&events.state, 1, __ATOMIC_RELEASE);
}

static void start_alloc_session(void)
{
    HRESULT hr = start_runtime_session(events.alloc_switch.keywords, events.alloc_switch.level,
                                       &events.alloc_switch.alloc);
    if (hr < 0) {
        events.alloc_switch.alloc = 0;
        events.alloc_switch.split = 0;
        prof_log(LOG_WARN, "the runtime refused the allocations' EventPipe session (0x%08x): "
                 "allocations and live objects are off; the rest goes on", (unsigned)hr);
        prof_core_disable(PROFILE_ALLOC | PROFILE_LIVE);
        return;
    }
    events.cfg_of[2].keywords = events.alloc_switch.keywords;
    events.cfg_of[2].level = events.alloc_switch.level;
    __atomic_store_n(&events.alloc_switch.on, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&events.state, 1, __ATOMIC_RELEASE);
}

void prof_events_start(void)
{
    UINT64 kw = 0;
    UINT32 level = EP_LEVEL_INFORMATIONAL;
    unsigned p = g_core.profiles;
    if (p & (PROFILE_GC | PROFILE_LIVE | PROFILE_HEAP))
        kw |= KW_GC;
    if (p & PROFILE_LOCK)
        kw |= KW_CONTENTION;
    if (p & (PROFILE_ALLOC | PROFILE_LIVE)) {
        UINT64 akw = 0;
        UINT32 alevel = EP_LEVEL_INFORMATIONAL;
        prof_alloc_session_needs(&akw, &alevel);
        /* With a governor, AllocationSampled (.NET 10: a keyword of its own, at Informational)
         * gets a session it can stop and start; GCAllocationTick (.NET 8/9) needs the GC keyword
         * at Verbose, which a second session would deliver twice. */
        if (g_cfg.overhead_budget > 0 && alevel == EP_LEVEL_INFORMATIONAL && akw &&
            !(akw & KW_GC)) {
            events.alloc_switch.split = 1;
            events.alloc_switch.keywords = akw;
            events.alloc_switch.level = alevel;
            akw = 0;
        }
        kw |= akw;
        if (alevel > level)
            level = alevel;
    }
    if (kw) {
        HRESULT hr = start_runtime_session(kw, level, &events.session);
        if (hr < 0) {
            prof_log(LOG_WARN, "the runtime refused an EventPipe session (0x%08x): GC details, "
                     "allocations, live objects%s and locks are off; cpu and wall go on",
                     (unsigned)hr, prof_exc_uses_events() ? ", exceptions" : "");
            prof_core_disable(PROFILE_ALLOC | PROFILE_LIVE | PROFILE_LOCK |
                              (prof_exc_uses_events() ? PROFILE_EXCEPTIONS : 0));
            __atomic_store_n(&events.state, -1, __ATOMIC_RELAXED);
        } else {
            events.cfg_of[0].keywords = kw;
            events.cfg_of[0].level = level;
            __atomic_store_n(&events.state, 1, __ATOMIC_RELEASE);
            prof_log(LOG_DEBUG, "EventPipe session on keywords 0x%llx level %u",
                     (unsigned long long)kw, level);
        }
    }
    if (events.alloc_switch.split && prof_events_state() >= 0)
        start_alloc_session();
    if ((g_core.profiles & PROFILE_EXCEPTIONS) && prof_exc_uses_events() &&
        prof_events_state() >= 0)
        start_exceptions_session();
    /* The System.Runtime counters in a session of their own, which prof_counters may stop
     * (they cost the app a finalizer wake-up per GC) without touching the runtime's events */
    if (prof_counters_start() && prof_events_state() == 0)
        __atomic_store_n(&events.state, 1, __ATOMIC_RELEASE);
}

void prof_events_reapply_sessions(void)
{
    if (__atomic_load_n(&events.state, __ATOMIC_ACQUIRE) != 1)
        return;
    ICorProfilerInfo15 *info = g_core.info;
    for (int i = 0; i < 3; i++) {
        if (!events.cfg_of[i].keywords)
            continue;
        EVENTPIPE_SESSION tmp = 0;
        if (start_runtime_session(events.cfg_of[i].keywords, events.cfg_of[i].level, &tmp) >= 0 &&
            tmp)
            info->vt->EventPipeStopSession(info, tmp);
    }
}

void prof_events_switch_times(struct prof_events_switch_times *out)
{
    *out = events.alloc_switch.times;
}

int prof_events_alloc_switchable(void)
{
    return events.alloc_switch.split && g_core.info;
}

int prof_events_alloc_on(void)
{
    return !events.alloc_switch.split || __atomic_load_n(&events.alloc_switch.on, __ATOMIC_ACQUIRE);
}

/* The parking session: the runtime provider with no keyword at level Critical. It matches only
 * events that have no keyword at all, and while it runs it makes the runtime recompute what the
 * provider's sessions ask for without the allocation session: a bare stop leaves the runtime
 * building every AllocationSampled event for nobody (dotnet/runtime#121462). */
static HRESULT start_park(void)
{
    return start_runtime_session(0, EP_LEVEL_CRITICAL, &events.alloc_switch.park);
}

int prof_events_alloc_switch(int on)
{
    if (!prof_events_alloc_switchable())
        return -1;
    if (pthread_mutex_trylock(&events.alloc_switch.switching))
        return 1; /* a heap snapshot's session is open: not now */
    ICorProfilerInfo15 *info = g_core.info;
    int rc = 0;
    if (on == __atomic_load_n(&events.alloc_switch.on, __ATOMIC_ACQUIRE))
        goto out;
    struct prof_events_switch_times *t = &events.alloc_switch.times;
    if (on) {
        /* start first, then stop the parking session: the stop's recompute still sees the
         * allocation session, which is what must stay on */
        t->call_ns = prof_now_ns();
        HRESULT hr = start_runtime_session(events.alloc_switch.keywords, events.alloc_switch.level,
                                           &events.alloc_switch.alloc);
        t->flip_ns = prof_now_ns();
        if (hr < 0 || !events.alloc_switch.alloc) {
            events.alloc_switch.alloc = 0;
            rc = -1;
            goto out;
        }
        events.cfg_of[2].keywords = events.alloc_switch.keywords;
        events.cfg_of[2].level = events.alloc_switch.level;
        __atomic_store_n(&events.alloc_switch.on, 1, __ATOMIC_RELEASE);
        if (events.alloc_switch.park)
            info->vt->EventPipeStopSession(info, events.alloc_switch.park);
        events.alloc_switch.park = 0;
    } else {
        /* stop, then start the parking session, whose start recomputes without it */
        t->call_ns = prof_now_ns();
        info->vt->EventPipeStopSession(info, events.alloc_switch.alloc);
        t->flip_ns = prof_now_ns();
        events.alloc_switch.alloc = 0;
        events.cfg_of[2].keywords = 0;
        __atomic_store_n(&events.alloc_switch.on, 0, __ATOMIC_RELEASE);
        if (start_park() < 0) {
            events.alloc_switch.park = 0;
            /* no session to recompute with: a throw-away copy of the others does it */
            prof_events_reapply_sessions();
        }
    }
    __atomic_fetch_add(&events.alloc_switch.switches, 1, __ATOMIC_RELAXED);
    t->done_ns = prof_now_ns();
out:
    if (rc)
        __atomic_fetch_add(&events.alloc_switch.failed, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&events.alloc_switch.switching);
    return rc;
}

void prof_events_hold_switch(void)
{
    pthread_mutex_lock(&events.alloc_switch.switching);
}

void prof_events_release_switch(void)
{
    pthread_mutex_unlock(&events.alloc_switch.switching);
}

void prof_events_read_cost(struct prof_events_cost *out)
{
    out->alloc_ns = __atomic_load_n(&events.cost.alloc_ns, __ATOMIC_RELAXED);
    out->alloc_events = __atomic_load_n(&events.cost.alloc_events, __ATOMIC_RELAXED);
    out->other_ns = __atomic_load_n(&events.cost.other_ns, __ATOMIC_RELAXED);
    out->other_events = __atomic_load_n(&events.cost.other_events, __ATOMIC_RELAXED);
    out->switches = __atomic_load_n(&events.alloc_switch.switches, __ATOMIC_RELAXED);
    out->switch_failures = __atomic_load_n(&events.alloc_switch.failed, __ATOMIC_RELAXED);
}

static void route(int kind, DWORD id, DWORD version, const BYTE *meta, ULONG meta_len,
                  const BYTE *data, ULONG len);

void prof_events_delivered(EVENTPIPE_PROVIDER provider, DWORD id, DWORD version, const BYTE *meta,
                           ULONG meta_len, const BYTE *data, ULONG len, ThreadID thread,
                           ULONG nframes, const UINT_PTR *frames)
{
    (void)thread;
    (void)nframes;
    (void)frames;
    if (!g_core.active || !data)
        return;
    int64_t t0 = prof_now_ns();
    int kind = provider_kind(provider);
    route(kind, id, version, meta, meta_len, data, len);
    int64_t spent = prof_now_ns() - t0;
    int is_alloc = kind == PK_RUNTIME && (id == 10 || id == 303);
    __atomic_fetch_add(is_alloc ? &events.cost.alloc_ns : &events.cost.other_ns,
                       (uint64_t)(spent > 0 ? spent : 0), __ATOMIC_RELAXED);
    __atomic_fetch_add(is_alloc ? &events.cost.alloc_events : &events.cost.other_events, 1,
                       __ATOMIC_RELAXED);
}

static void route(int kind, DWORD id, DWORD version, const BYTE *meta, ULONG meta_len,
                  const BYTE *data, ULONG len)
{
    if (kind == PK_COUNTERS) {
        prof_counters_on_event(meta, meta_len, data, len);
        return;
    }
    if (kind != PK_RUNTIME)
        return; /* e.g. EventPipe's own ProcessInfo event (id 1) */
    switch (id) {
    case 1: /* GCStart */
    case 2: /* GCEnd */
        prof_gc_on_event(id, version, data, len);
        to_heapdump(id, version, data, len);
        break;
    case 3: case 4: case 7: case 8: case 9: case 35: case 204: case 205:
        prof_gc_on_event(id, version, data, len);
        break;
    case 10:  /* GCAllocationTick */
    case 303: /* AllocationSampled */
        prof_alloc_on_event(id, version, data, len);
        break;
    case 80: /* ExceptionThrown_V1 */
        prof_exc_on_event(id, version, data, len);
        break;
    case 81: /* ContentionStart */
    case 91: /* ContentionStop */
        prof_lock_on_event(id, version, data, len);
        break;
    case 15: case 16: case 17: case 18: case 19: case 20: case 21: case 22: case 23:
    case 36: case 37: case 38:
        to_heapdump(id, version, data, len);
        break;
    default:
        break;
    }
}
