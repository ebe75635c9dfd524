/*
 * prof_entry.c - the COM surface the runtime sees: DllGetClassObject, a static class factory and
 * a static callback object implementing ICorProfilerCallback..11 in plain C.
 *
 * Runs on runtime threads (the startup thread, app threads, GC threads). Every callback here only
 * forwards to the module that owns the event; none blocks, allocates much or calls back into
 * code that could wait on clrscope's own threads.
 */
#include <stddef.h>
#include <strings.h>
#include <string.h>
#include <stdlib.h>

#include "clr_abi.h"
#include "prof_codemap.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_events.h"
#include "prof_exc.h"
#include "prof_gc.h"
#include "prof_live.h"
#include "prof_sampler.h"
#include "prof_lock.h"
#include "prof_threads.h"
#include "prof_unload.h"

typedef void *(*slot_fn)(void);

struct com_object {
    const void *const *vt;
};

static HRESULT generic_ok(void)
{
    return S_OK;
}

static ULONG ref_constant(void *self)
{
    (void)self;
    return 1; /* static singletons: the runtime never frees them before Shutdown */
}

/* ---- callback object ---- */

static struct com_object g_callback;

static HRESULT cb_query_interface(void *self, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (clr_guid_eq(riid, &IID_IUnknown)) {
        *ppv = self;
        return S_OK;
    }
    for (int v = 1; v <= 11; v++)
        if (clr_guid_eq(riid, &IID_ICorProfilerCallback[v])) {
            *ppv = self;
            return S_OK;
        }
    return E_NOINTERFACE;
}

static HRESULT cb_initialize(void *self, void *info_unknown)
{
    (void)self;
    return prof_core_initialize(info_unknown);
}

static HRESULT cb_shutdown(void *self)
{
    (void)self;
    prof_core_shutdown();
    return S_OK;
}

static HRESULT cb_thread_created(void *self, ThreadID t)
{
    (void)self;
    prof_threads_created(t);
    return S_OK;
}

static HRESULT cb_thread_destroyed(void *self, ThreadID t)
{
    (void)self;
    prof_lock_thread_gone(prof_threads_destroyed(t));
    return S_OK;
}

static HRESULT cb_thread_assigned(void *self, ThreadID t, DWORD os_tid)
{
    (void)self;
    prof_threads_assigned(t, os_tid);
    prof_sampler_thread_started();
    return S_OK;
}

static HRESULT cb_thread_name_changed(void *self, ThreadID t, ULONG cch, WCHAR *name)
{
    (void)self;
    prof_threads_named(t, cch, name);
    return S_OK;
}

static HRESULT cb_gc_started(void *self, int cgen, BOOL *collected, int reason)
{
    (void)self;
    (void)reason;
    prof_live_gc_started(cgen, collected);
    prof_exc_gc_started();
    return S_OK;
}

static HRESULT cb_gc_finished(void *self)
{
    (void)self;
    prof_live_gc_finished();
    prof_counters_gc_finished();
    return S_OK;
}

/* A module's IDs stop being valid when this returns: prof_unload makes clrscope's naming threads
 * stop asking about what was taken before (it may wait, briefly, for a question in flight). */
static HRESULT cb_module_unload_started(void *self, ModuleID mod)
{
    (void)self;
    (void)mod;
    prof_unload_started();
    return S_OK;
}

static HRESULT cb_dynamic_jit_finished(void *self, FunctionID fn, HRESULT hr, BOOL safe)
{
    (void)self;
    (void)safe;
    if (hr >= 0)
        prof_codemap_dynamic_compiled(fn);
    return S_OK;
}

static HRESULT cb_dynamic_unloaded(void *self, FunctionID fn)
{
    (void)self;
    prof_codemap_dynamic_unloaded(fn);
    return S_OK;
}

static HRESULT cb_event_delivered(void *self, EVENTPIPE_PROVIDER provider, DWORD id, DWORD version,
                                  ULONG cb_meta, const BYTE *meta, ULONG cb_data, const BYTE *data,
                                  const GUID *activity, const GUID *related, ThreadID thread,
                                  ULONG nframes, UINT_PTR *frames)
{
    (void)self;
    (void)activity;
    (void)related;
    prof_events_delivered(provider, id, version, meta, cb_meta, data, cb_data, thread, nframes,
                          frames);
    return S_OK;
}

static HRESULT cb_exception_thrown(void *self, ObjectID obj)
{
    (void)self;
    prof_exc_on_throw(obj);
    return S_OK;
}

static HRESULT cb_cached_function_search(void *self, FunctionID fn, BOOL *use_cached)
{
    (void)self;
    (void)fn;
    if (use_cached)
        *use_cached = 1;
    return S_OK;
}

static HRESULT cb_jit_inlining(void *self, FunctionID caller, FunctionID callee, BOOL *inline_ok)
{
    (void)self;
    (void)caller;
    (void)callee;
    if (inline_ok)
        *inline_ok = 1;
    return S_OK;
}

/* The runtime asks every profiler it loads whether it only takes notifications. Loaded as THE
 * profiler (CORECLR_PROFILER names clrscope), clrscope says no, as before. Loaded from the
 * notification list (CORECLR_ENABLE_NOTIFICATION_PROFILERS=1, CORECLR_NOTIFICATION_PROFILERS=
 * path={clsid}), beside another profiler such as an APM tracer, it must say yes or it is not
 * loaded; everything it asks for (the event mask in prof_core.c) is allowed to such profilers. */
static HRESULT cb_load_as_notification_only(void *self, BOOL *only)
{
    (void)self;
    if (only) {
        const char *en = getenv("CORECLR_ENABLE_PROFILING");
        const char *main = getenv("CORECLR_PROFILER");
        *only = !(en && !strcmp(en, "1") && main &&
                  !strcasecmp(main, "{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}"));
    }
    return S_OK;
}

/* Every one of the 98 slots holds a valid function; unused ones return S_OK (SysV: the callee
 * ignores arguments it does not read, the caller cleans up). */
static const void *g_callback_vtbl[CB_SLOT_COUNT];

static void callback_vtbl_init(void)
{
    const void **vt = (const void **)g_callback_vtbl;
    for (int i = 0; i < CB_SLOT_COUNT; i++)
        vt[i] = (const void *)generic_ok;
    vt[CB_QueryInterface] = (const void *)cb_query_interface;
    vt[CB_AddRef] = (const void *)ref_constant;
    vt[CB_Release] = (const void *)ref_constant;
    vt[CB_Initialize] = (const void *)cb_initialize;
    vt[CB_Shutdown] = (const void *)cb_shutdown;
    vt[CB_ThreadCreated] = (const void *)cb_thread_created;
    vt[CB_ThreadDestroyed] = (const void *)cb_thread_destroyed;
    vt[CB_ThreadAssignedToOSThread] = (const void *)cb_thread_assigned;
    vt[CB_ThreadNameChanged] = (const void *)cb_thread_name_changed;
    vt[CB_GarbageCollectionStarted] = (const void *)cb_gc_started;
    vt[CB_GarbageCollectionFinished] = (const void *)cb_gc_finished;
    vt[CB_EventPipeEventDelivered] = (const void *)cb_event_delivered;
    vt[CB_ModuleUnloadStarted] = (const void *)cb_module_unload_started;
    vt[CB_ExceptionThrown] = (const void *)cb_exception_thrown;
    vt[CB_JITCachedFunctionSearchStarted] = (const void *)cb_cached_function_search;
    vt[CB_JITInlining] = (const void *)cb_jit_inlining;
    vt[CB_DynamicMethodJITCompilationFinished] = (const void *)cb_dynamic_jit_finished;
    vt[CB_DynamicMethodUnloaded] = (const void *)cb_dynamic_unloaded;
    vt[CB_LoadAsNotificationOnly] = (const void *)cb_load_as_notification_only;
    g_callback.vt = g_callback_vtbl;
}

/* ---- class factory ---- */

static struct com_object g_factory;

static HRESULT cf_query_interface(void *self, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    if (clr_guid_eq(riid, &IID_IUnknown) || clr_guid_eq(riid, &IID_IClassFactory)) {
        *ppv = self;
        return S_OK;
    }
    *ppv = NULL;
    return E_NOINTERFACE;
}

static HRESULT cf_create_instance(void *self, void *outer, REFIID riid, void **ppv)
{
    (void)self;
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (outer)
        return CLASS_E_NOAGGREGATION;
    callback_vtbl_init();
    return cb_query_interface(&g_callback, riid, ppv);
}

static HRESULT cf_lock_server(void *self, BOOL lock)
{
    (void)self;
    (void)lock;
    return S_OK;
}

static const void *const g_factory_vtbl[5] = {
    (const void *)cf_query_interface, (const void *)ref_constant, (const void *)ref_constant,
    (const void *)cf_create_instance, (const void *)cf_lock_server,
};

__attribute__((visibility("default"))) HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid,
                                                                 void **ppv);

HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **ppv)
{
    if (!ppv || !clsid || !iid)
        return E_POINTER;
    *ppv = NULL;
    if (!clr_guid_eq(clsid, &CLSID_clrscope))
        return CLASS_E_CLASSNOTAVAILABLE;
    g_factory.vt = g_factory_vtbl;
    return cf_query_interface(&g_factory, iid, ppv);
}
