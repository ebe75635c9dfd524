/* prof_events.c - see prof_events.h. */
#include "prof_events.h"

#include <uchar.h>

#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_exc.h"
#include "prof_gc.h"
#include "prof_heapsnap.h"
#include "prof_lock.h"
#include "prof_log.h"

#define KW_GC 0x1ull
#define KW_CONTENTION 0x4000ull
#define KW_EXCEPTION 0x8000ull

static EVENTPIPE_SESSION g_session;
static int g_state;

DWORD prof_events_extra_event_mask(void)
{
    return 0;
}

int prof_events_state(void)
{
    return __atomic_load_n(&g_state, __ATOMIC_RELAXED);
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
    if (p & PROFILE_EXCEPTIONS)
        kw |= KW_EXCEPTION;
    if (p & (PROFILE_ALLOC | PROFILE_LIVE)) {
        UINT64 akw = 0;
        UINT32 alevel = EP_LEVEL_INFORMATIONAL;
        prof_alloc_session_needs(&akw, &alevel);
        kw |= akw;
        if (alevel > level)
            level = alevel;
    }
    prof_heapsnap_init();
    if (!kw)
        return;
    static const char16_t provider[] = u"Microsoft-Windows-DotNETRuntime";
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {
        .providerName = (const WCHAR *)provider, .keywords = kw, .loggingLevel = level,
        .filterData = NULL};
    ICorProfilerInfo15 *info = g_core.info;
    HRESULT hr = info->vt->EventPipeStartSession(info, 1, &cfg, 0, &g_session);
    if (hr < 0) {
        prof_log(LOG_WARN, "the runtime refused an EventPipe session (0x%08x): GC details, "
                 "allocations, live objects, exceptions and locks are off; cpu and wall go on",
                 (unsigned)hr);
        prof_core_disable(PROFILE_ALLOC | PROFILE_LIVE | PROFILE_EXCEPTIONS | PROFILE_LOCK);
        __atomic_store_n(&g_state, -1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&g_state, 1, __ATOMIC_RELAXED);
    prof_log(LOG_DEBUG, "EventPipe session on keywords 0x%llx level %u", (unsigned long long)kw,
             level);
}

void prof_events_stop(void)
{
    /* The session ends with the runtime; stopping it during Shutdown can trigger a GC there. */
    prof_heapsnap_stop();
}

void prof_events_delivered(EVENTPIPE_PROVIDER provider, DWORD id, DWORD version, const BYTE *data,
                           ULONG len, ThreadID thread, ULONG nframes, const UINT_PTR *frames)
{
    (void)provider;
    (void)thread;
    (void)nframes;
    (void)frames;
    if (!g_core.active || !data)
        return;
    switch (id) {
    case 1: /* GCStart */
    case 2: /* GCEnd */
        prof_gc_on_event(id, version, data, len);
        prof_heapsnap_on_event(id, version, data, len);
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
        prof_heapsnap_on_event(id, version, data, len);
        break;
    default:
        break;
    }
}
