/* prof_walk.c - see prof_walk.h. */
#include "prof_walk.h"

#include "clr_abi.h"
#include "prof_core.h"
#include "prof_symbols.h"

struct cur_walk {
    uintptr_t *frames;
    int n, max;
    uint32_t truncated;
};

static HRESULT cur_cb(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info, ULONG32 ctx_size, BYTE *ctx,
                      void *data)
{
    (void)ip;
    (void)frame_info;
    (void)ctx_size;
    (void)ctx;
    struct cur_walk *w = data;
    if (w->n >= w->max) {
        w->truncated = 1;
        return E_FAIL;
    }
    if (!fn && w->n > 0 && w->frames[w->n - 1] == 0)
        return S_OK;
    w->frames[w->n++] = fn;
    return S_OK;
}

int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated)
{
    ICorProfilerInfo15 *info = g_core.info;
    struct cur_walk w = {.frames = frames, .max = max};
    if (!info)
        return 0;
    info->vt->DoStackSnapshot(info, 0, cur_cb, COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
    /* Drop leading native frames: they are the runtime's event plumbing, not the app's code. */
    int skip = 0;
    while (skip < w.n && frames[skip] == 0)
        skip++;
    for (int i = skip; i < w.n; i++)
        frames[i - skip] = frames[i];
    if (truncated)
        *truncated = w.truncated;
    return w.n - skip;
}

int prof_walk_names(const uintptr_t *frames, int n, int truncated, const char **names, int cap)
{
    int k = 0;
    if (truncated && k < cap)
        names[k++] = "[truncated]";
    for (int i = n - 1; i >= 0 && k < cap; i--)
        names[k++] = frames[i] ? prof_symbols_function(frames[i]) : "[native code]";
    if (k == 0 && cap > 0)
        names[k++] = "[no managed frames]";
    return k;
}
