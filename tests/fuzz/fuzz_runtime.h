/*
 * fuzz_runtime.h - the little a fuzz target (or a unit test of the API's handlers) needs to run
 * clrscope's modules without a runtime: the configuration from the environment, the store, the
 * event ring, and a stand-in for the runtime's ICorProfilerInfo whose every method fails
 * (E_FAIL), as a runtime that cannot answer would.
 */
#ifndef FUZZ_RUNTIME_H
#define FUZZ_RUNTIME_H

#include <stdio.h>
#include <stdlib.h>

#include "clr_abi.h"
#include "prof_agg.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_ring.h"
#include "prof_store.h"
#include "prof_symbols.h"

static HRESULT fuzz_fail_method(void)
{
    return (HRESULT)0x80004005; /* E_FAIL */
}

static void fuzz_runtime_init(unsigned profiles)
{
    static void *vt[1024];
    static struct {
        void **vt;
    } info = {vt};
    for (size_t i = 0; i < sizeof vt / sizeof vt[0]; i++)
        vt[i] = (void *)fuzz_fail_method;
    setenv("CLRSCOPE_LOG_LEVEL", "error", 0);
    prof_config_load();
    g_core.info = (ICorProfilerInfo15 *)(void *)&info;
    g_core.info_version = 12;
    g_core.runtime_major = 10;
    g_core.profiles = profiles;
    g_core.active = 1;
    g_core.start_unix = prof_unix_now();
    g_core.start_mono_ns = prof_now_ns();
    prof_symbols_init();
    if (prof_store_init(60, 20000, 64u << 10)) { /* little room for names: compactions run */
        fprintf(stderr, "prof_store_init failed\n");
        abort();
    }
}

#endif
