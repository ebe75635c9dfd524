/*
 * prof_entry.c - the composition root and the COM surface the runtime sees: DllGetClassObject, a
 * static class factory and a static callback object implementing ICorProfilerCallback..11 in
 * plain C. Initialize starts capture (the profiler's modules, in order), then the dashboard
 * server; Shutdown stops them in reverse. Nothing else starts a module.
 *
 * Runs on runtime threads (the startup thread, app threads, GC threads). Every callback here only
 * forwards to the module that owns the event; none blocks, allocates much or calls back into
 * code that could wait on clrscope's own threads.
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clr_abi.h"
#include "prof_agg.h"
#include "prof_alloc.h"
#include "prof_codemap.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_budget.h"
#include "prof_events.h"
#include "prof_exc.h"
#include "prof_exporter.h"
#include "prof_history.h"
#include "prof_gc.h"
#include "prof_heapsnap.h"
#include "prof_live.h"
#include "prof_lock.h"
#include "prof_log.h"
#include "prof_utf8.h"
#include "prof_process.h"
#include "prof_sampler.h"
#include "prof_scratch.h"
#include "prof_sighandler.h"
#include "prof_store.h"
#include "prof_symbols.h"
#include "prof_tdump.h"
#include "prof_threads.h"
#include "prof_unload.h"
#include "prof_walk.h"
#include "web_server.h"

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

/* ---- start and stop: the one place that knows every module ---- */

static HRESULT entry_initialize(void *info_unknown)
{
    /* Named both as THE profiler and in the notification list, the runtime loads this library
     * twice, with one set of globals: the first one profiles, the second cancels itself. */
    static int initialized;
    if (__atomic_exchange_n(&initialized, 1, __ATOMIC_SEQ_CST))
        return CORPROF_E_PROFILER_CANCEL_ACTIVATION;
    g_core.start_unix = prof_unix_now();
    g_core.start_mono_ns = prof_now_ns();
    /* `clrscope run -- dotnet run`: the SDK's host and build processes take no port and print
     * no URL, so the one printed is the app's (prof_process.h). Decided before the
     * configuration is read: a program the SDK starts must not get even a warning about a bad
     * variable on its stderr, where MSBuild takes any line for a compiler error. */
    char args[4096], what[96], exe[1024];
    size_t n = prof_process_read_cmdline(args, sizeof args);
    ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[exe_len > 0 ? exe_len : 0] = 0;
    if (prof_process_is_clrscope_tool(args, n, exe))
        return S_OK; /* it execs the launcher at once: no port, no line, no discovery file */
    int sdk = prof_process_is_sdk(args, n, what, sizeof what);
    const char *w = getenv("CLRSCOPE_PROFILE_SDK"); /* prof_env_bool's truths, without its log */
    int want_sdk = w && (!strcmp(w, "1") || !strcasecmp(w, "true") || !strcasecmp(w, "yes") ||
                         !strcasecmp(w, "on"));
    if (sdk && !want_sdk) {
        if (sdk == PROF_PROCESS_SDK_COMMAND) { /* the command the user typed: tell them */
            prof_config_load();
            prof_log(LOG_INFO, "not profiling pid %d, %s; the apps it starts are profiled "
                     "(CLRSCOPE_PROFILE_SDK=1 profiles it too)", (int)getpid(), what);
        }
        return S_OK;
    }
    prof_config_load();
    prof_core_read_process_facts();
    int v = prof_core_attach(info_unknown);
    if (v < 12) {
        prof_log(LOG_WARN, "this runtime offers ICorProfilerInfo%d; clrscope needs 12 or newer "
                 "(.NET 5+) and stays passive", v);
        return S_OK; /* stay loaded and quiet; never fail the app */
    }
    prof_core_read_runtime_version();
    if (g_core.runtime_major && g_core.runtime_major < 8) {
        prof_log(LOG_WARN, "runtime %s is older than .NET 8, which clrscope needs: it stays "
                 "passive and the app runs unprofiled", g_core.runtime_version);
        return S_OK; /* no event asked for: the runtime calls nothing more */
    }
    g_core.profiles = g_cfg.profiles;
    /* module loads: for ModuleUnloadStarted (prof_unload.h); JIT compilation and dynamic
     * function unloads: for DynamicMethodJITCompilationFinished and DynamicMethodUnloaded, where
     * the code of dynamic methods is (prof_codemap.h), and the compilations' starts and ends, which
     * label the JIT's CPU samples with the method compiled (prof_sighandler.h; the other JIT
     * callbacks return at once; JITInlining allows every inlining and notes the pair, which names
     * inlined code as its own frame) */
    DWORD lo = COR_PRF_MONITOR_THREADS | COR_PRF_ENABLE_STACK_SNAPSHOT | COR_PRF_MONITOR_MODULE_LOADS |
               COR_PRF_MONITOR_JIT_COMPILATION;
    DWORD hi = COR_PRF_HIGH_BASIC_GC | COR_PRF_HIGH_MONITOR_EVENT_PIPE |
               COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS;
    lo |= prof_events_extra_event_mask() | prof_exc_event_mask();
    HRESULT hr = g_core.info->vt->SetEventMask2(g_core.info, lo, hi);
    if (hr < 0) {
        prof_log(LOG_ERROR, "SetEventMask2 failed (0x%08x); clrscope stays passive", (unsigned)hr);
        return S_OK;
    }
    prof_threads_init(g_cfg.max_threads);
    prof_symbols_init();
    prof_walk_init();
    if (prof_store_init(g_cfg.history_s, g_cfg.max_stack_nodes, g_cfg.max_name_bytes)) {
        prof_log(LOG_ERROR, "out of memory for the profile store; clrscope stays passive");
        return S_OK;
    }
    g_core.active = 1;
    prof_gc_init();
    prof_live_init();
    /* what clrscope-agg drives, in the order of its ticks (its memory fields in this order too) */
    static const struct prof_kind *const kinds[] = {
        &prof_store_kind, &prof_alloc_kind,    &prof_gc_kind,       &prof_live_kind,
        &prof_exc_kind,   &prof_lock_kind,     &prof_counters_kind, &prof_codemap_kind,
        &prof_exporter_kind, &prof_tdump_kind,   &prof_scratch_kind,
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        prof_agg_add(kinds[i]);
    prof_agg_start();
    prof_sampler_start();
    prof_heapsnap_init(); /* its event handler before the sessions start */
    prof_events_start();
    prof_budget_start(); /* after the sessions: it switches the allocation session */
    prof_exporter_start();
    prof_history_start();
    web_server_start(); /* last: the dashboard reads what capture publishes */
    prof_log(LOG_DEBUG, "initialized on runtime %s (ICorProfilerInfo%d)", g_core.runtime_version,
             v);
    return S_OK;
}

static void entry_shutdown(void)
{
    if (!g_core.active)
        return;
    prof_core_begin_stopping();
    web_server_stop();
    prof_exporter_stop();
    prof_history_stop();
    prof_budget_stop();
    prof_heapsnap_stop();
    prof_sampler_stop();
    prof_agg_stop();
    prof_gc_stop();
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
    return entry_initialize(info_unknown);
}

static HRESULT cb_shutdown(void *self)
{
    (void)self;
    entry_shutdown();
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

/* The thread's JIT marks (prof_sighandler.h): CPU samples taken while the JIT compiles are
 * labelled with the method it compiles. */
static HRESULT cb_jit_started(void *self, FunctionID fn, BOOL safe)
{
    (void)self;
    (void)safe;
    prof_sig_jit_push((uintptr_t)fn);
    return S_OK;
}

static HRESULT cb_jit_finished(void *self, FunctionID fn, HRESULT hr, BOOL safe)
{
    (void)self;
    (void)hr;
    (void)safe;
    prof_sig_jit_pop((uintptr_t)fn);
    return S_OK;
}

static HRESULT cb_dynamic_jit_started(void *self, FunctionID fn, BOOL safe, const BYTE *il,
                                      ULONG il_size)
{
    (void)self;
    (void)fn;
    (void)safe;
    (void)il;
    (void)il_size;
    prof_sig_jit_push(PROF_SIG_JIT_DYNAMIC);
    return S_OK;
}

static HRESULT cb_dynamic_jit_finished(void *self, FunctionID fn, HRESULT hr, BOOL safe)
{
    (void)self;
    (void)safe;
    prof_sig_jit_pop(PROF_SIG_JIT_DYNAMIC);
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
    prof_codemap_inlining((uintptr_t)caller, (uintptr_t)callee);
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
    vt[CB_JITCompilationStarted] = (const void *)cb_jit_started;
    vt[CB_JITCompilationFinished] = (const void *)cb_jit_finished;
    vt[CB_DynamicMethodJITCompilationStarted] = (const void *)cb_dynamic_jit_started;
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

/* ---- clrscope serve: the history of a process that has exited ---- */

/* process.json (prof_history.c writes it beside the segments): who wrote the history. */
static void read_process_file(const char *pdir)
{
    char path[1200], buf[4096];
    snprintf(path, sizeof path, "%s/process.json", pdir);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    if (!o)
        return;
    const cJSON *v;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "pid")))
        g_core.served_pid = (pid_t)v->valuedouble;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "process")))
        snprintf(g_core.process_name, sizeof g_core.process_name, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "command_line")))
        snprintf(g_core.cmdline, sizeof g_core.cmdline, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(o, "runtime")))
        snprintf(g_core.runtime_version, sizeof g_core.runtime_version, "%s", v->valuestring);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "start")))
        g_core.start_unix = v->valuedouble;
    cJSON_Delete(o);
    prof_utf8_clean(g_core.process_name);
    prof_utf8_clean(g_core.cmdline);
    prof_utf8_clean(g_core.runtime_version);
}

/* `clrscope serve DIR` (tools/launcher_run.c loads this library and calls it): the dashboard and
 * the API's history routes over the segments a process left in DIR (api_routes.h: `history`),
 * read-only, the clock frozen at their end; no runtime, no capture thread. Returns once SIGINT or
 * SIGTERM arrives: 0, or 1 with a log line when DIR cannot be served. */
__attribute__((visibility("default"))) int clrscope_serve(const char *dir);

int clrscope_serve(const char *dir)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the server's threads inherit it: sigwait below */
    prof_config_load();
    prof_core_read_process_facts();
    g_core.post_mortem = 1;
    char why[400];
    if (prof_history_serve(dir, why, sizeof why)) {
        prof_log(LOG_ERROR, "serve: %s", why);
        return 1;
    }
    g_core.start_unix = prof_unix_now();
    read_process_file(dir);
    g_core.profiles = PROFILE_CPU | PROFILE_WALL | PROFILE_ALLOC | PROFILE_EXCEPTIONS |
                      PROFILE_LOCK | PROFILE_GC;
    if (web_server_start())
        return 1;
    prof_log(LOG_ALWAYS, "serving the history of pid %d (%s) from %s; Ctrl-C ends it",
             (int)g_core.served_pid, g_core.process_name, dir);
    int sig = 0;
    sigwait(&set, &sig);
    prof_core_begin_stopping();
    web_server_stop();
    return 0;
}
