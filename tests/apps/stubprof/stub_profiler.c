/*
 * stub_profiler.c - a stand-in for another vendor's profiler (an APM tracer) that holds
 * CORECLR_PROFILER, for the tests of clrscope loaded beside it from the notification list.
 *
 * Like a tracer it asks for JIT compilation and module load notifications; it counts the methods
 * JIT-compiled and, at Shutdown, writes "stubprof: N methods JIT-compiled" to the file named by
 * STUBPROF_OUT (nothing on the app's streams). CLSID {5B0D7A11-2E4C-4F0B-8C3D-1A2B3C4D5E6F}.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "clr_abi.h"

static const GUID CLSID_stub = {0x5B0D7A11, 0x2E4C, 0x4F0B,
                                {0x8C, 0x3D, 0x1A, 0x2B, 0x3C, 0x4D, 0x5E, 0x6F}};

struct com_object {
    const void *const *vt;
};

static struct com_object g_callback, g_factory;
static const void *g_cb_vtbl[CB_SLOT_COUNT];
static unsigned long g_jitted; /* atomic */

static HRESULT ok(void)
{
    return S_OK;
}

static ULONG one(void *self)
{
    (void)self;
    return 1;
}

static HRESULT cb_qi(void *self, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    int yes = clr_guid_eq(riid, &IID_IUnknown);
    for (int v = 1; v <= 11 && !yes; v++)
        yes = clr_guid_eq(riid, &IID_ICorProfilerCallback[v]);
    if (!yes)
        return E_NOINTERFACE;
    *ppv = self;
    return S_OK;
}

static HRESULT cb_initialize(void *self, void *unk)
{
    (void)self;
    struct com_object *u = unk;
    typedef HRESULT (*qi_fn)(void *, REFIID, void **);
    ICorProfilerInfo15 *info = NULL;
    if (((qi_fn)u->vt[0])(unk, &IID_ICorProfilerInfo[5], (void **)&info) != S_OK || !info)
        return E_FAIL;
    return info->vt->SetEventMask2(info, 0x20u /* COR_PRF_MONITOR_JIT_COMPILATION */ |
                                              COR_PRF_MONITOR_MODULE_LOADS, 0);
}

static HRESULT cb_jit_started(void *self, uintptr_t function, BOOL safe)
{
    (void)self;
    (void)function;
    (void)safe;
    __atomic_add_fetch(&g_jitted, 1, __ATOMIC_RELAXED);
    return S_OK;
}

static HRESULT cb_shutdown(void *self)
{
    (void)self;
    const char *out = getenv("STUBPROF_OUT");
    FILE *f = out && *out ? fopen(out, "w") : NULL;
    if (f) {
        fprintf(f, "stubprof: %lu methods JIT-compiled\n", __atomic_load_n(&g_jitted, __ATOMIC_RELAXED));
        fclose(f);
    }
    return S_OK;
}

static HRESULT cb_not_only(void *self, BOOL *only)
{
    (void)self;
    if (only)
        *only = 0; /* the main profiler */
    return S_OK;
}

static HRESULT cf_qi(void *self, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (!clr_guid_eq(riid, &IID_IUnknown) && !clr_guid_eq(riid, &IID_IClassFactory))
        return E_NOINTERFACE;
    *ppv = self;
    return S_OK;
}

static HRESULT cf_create(void *self, void *outer, REFIID riid, void **ppv)
{
    (void)self;
    if (outer)
        return CLASS_E_NOAGGREGATION;
    for (int i = 0; i < CB_SLOT_COUNT; i++)
        g_cb_vtbl[i] = (const void *)ok;
    g_cb_vtbl[0] = (const void *)cb_qi;
    g_cb_vtbl[1] = (const void *)one;
    g_cb_vtbl[2] = (const void *)one;
    g_cb_vtbl[CB_Initialize] = (const void *)cb_initialize;
    g_cb_vtbl[CB_Shutdown] = (const void *)cb_shutdown;
    g_cb_vtbl[CB_JITCompilationStarted] = (const void *)cb_jit_started;
    g_cb_vtbl[CB_LoadAsNotificationOnly] = (const void *)cb_not_only;
    g_callback.vt = g_cb_vtbl;
    return cb_qi(&g_callback, riid, ppv);
}

static HRESULT cf_lock(void *self, BOOL lock)
{
    (void)self;
    (void)lock;
    return S_OK;
}

static const void *const g_cf_vtbl[5] = {(const void *)cf_qi, (const void *)one, (const void *)one,
                                         (const void *)cf_create, (const void *)cf_lock};

__attribute__((visibility("default"))) HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid,
                                                                 void **ppv);

HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **ppv)
{
    if (!ppv || !clsid || !iid)
        return E_POINTER;
    *ppv = NULL;
    if (!clr_guid_eq(clsid, &CLSID_stub))
        return CLASS_E_CLASSNOTAVAILABLE;
    g_factory.vt = g_cf_vtbl;
    return cf_qi(&g_factory, iid, ppv);
}
