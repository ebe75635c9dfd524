/*
 * prof_codemap_dyn.c - dynamic methods (LCG: DynamicMethod, compiled Regex and expression trees)
 * in the code map. They have no metadata, so GetFunctionFromIP2 does not answer for their code.
 * The runtime tells each one's compilation (DynamicMethodJITCompilationFinished, on the compiling
 * thread) and collection (DynamicMethodUnloaded); the callbacks queue those notes without locks
 * (Vyukov's bounded queue, slot sequence numbers stored relative to the slot so that zeroed
 * memory is the empty queue) and the code map's owner applies them before its next lookup.
 * Producers: any app thread, in a runtime callback (no locks, no allocation); the rest under
 * prof_codemap_lock().
 */
#include <stdint.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_codemap_int.h"
#include "prof_core.h"
#include "prof_sighandler.h"
#include "prof_symbols.h"

static void dyn_push(uintptr_t lo, uintptr_t hi, FunctionID fn, int entry)
{
    uint64_t pos = __atomic_load_n(&codemap.dyn.head, __ATOMIC_RELAXED);
    struct dyn_note *n;
    for (;;) {
        uint64_t at = pos & (DYN_QUEUE - 1);
        n = &codemap.dyn.q[at];
        int64_t dif = (int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - pos);
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&codemap.dyn.head, &pos, pos + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (dif < 0) { /* full: the owner has not looked up anything for a while */
            __atomic_fetch_add(&codemap.dyn.dropped, 1, __ATOMIC_RELAXED);
            return;
        } else {
            pos = __atomic_load_n(&codemap.dyn.head, __ATOMIC_RELAXED);
        }
    }
    n->lo = lo;
    n->hi = hi;
    n->fn = fn;
    n->entry = (uint32_t)entry;
    __atomic_store_n(&n->seq, pos + 1 - (pos & (DYN_QUEUE - 1)), __ATOMIC_RELEASE);
}

static int dyn_pop(struct dyn_note *out)
{
    uint64_t at = codemap.dyn.tail & (DYN_QUEUE - 1);
    struct dyn_note *n = &codemap.dyn.q[at];
    if ((int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - (codemap.dyn.tail + 1)) < 0)
        return 0;
    *out = *n;
    __atomic_store_n(&n->seq, codemap.dyn.tail + DYN_QUEUE - at, __ATOMIC_RELEASE);
    codemap.dyn.tail++;
    return 1;
}

void prof_codemap_dynamic_compiled(uintptr_t fn)
{
    ICorProfilerInfo15 *info = g_core.info;
    if (!info || !fn)
        return;
    COR_PRF_CODE_INFO ci[4];
    ULONG32 nci = 0;
    if (g_core.info_version >= 9) {
        UINT_PTR start = 0;
        ULONG32 nstarts = 0;
        if (info->vt->GetNativeCodeStartAddresses(info, fn, 0, 1, &nstarts, &start) == S_OK &&
            nstarts && info->vt->GetCodeInfo4(info, start, 4, &nci, ci) == S_OK) {
            for (ULONG32 j = 0; j < nci && j < 4; j++)
                if (ci[j].size)
                    dyn_push(ci[j].startAddress, ci[j].startAddress + ci[j].size, fn,
                             ci[j].startAddress == start);
            return;
        }
    }
    nci = 0;
    if (info->vt->GetCodeInfo2(info, fn, 4, &nci, ci) == S_OK)
        for (ULONG32 j = 0; j < nci && j < 4; j++)
            if (ci[j].size)
                dyn_push(ci[j].startAddress, ci[j].startAddress + ci[j].size, fn, j == 0);
}

void prof_codemap_dynamic_unloaded(uintptr_t fn)
{
    if (fn)
        dyn_push(0, 0, fn, 0);
}

/* Forgets the ip cache's answers for [lo, hi) and for method fn. */
static void forget_cached(uintptr_t lo, uintptr_t hi, FunctionID fn)
{
    for (uint32_t i = 0; i < IPCACHE_SIZE; i++) {
        struct ipc *e = &codemap.cache[i];
        if (e->key && ((e->key >= lo && e->key < hi) || (fn && e->fn == fn)))
            e->key = 0;
    }
}

static void dyn_add(const struct dyn_note *n)
{
    uint32_t at = 0, keep = 0;
    /* code freed by a collected method is reused: what overlaps is gone */
    for (uint32_t i = 0; i < codemap.dyn.n; i++)
        if (codemap.dyn.r[i].hi <= n->lo || codemap.dyn.r[i].lo >= n->hi)
            codemap.dyn.r[keep++] = codemap.dyn.r[i];
    codemap.dyn.n = keep;
    /* learned from the code that was there before: the ranges do not overlap one another, so
     * the one with the highest start below n->hi overlaps if any does */
    uint32_t lo = 0, hi = codemap.npool;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (codemap.pool[codemap.order[mid]].lo < n->hi)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && codemap.pool[codemap.order[lo - 1]].hi > n->lo) {
        codemap_flush(codemap.flushed_at);
        codemap.st.dynamic_flushes++;
    }
    forget_cached(n->lo, n->hi, 0);
    if (codemap.dyn.n >= DYN_MAX) {
        codemap.st.dynamic_dropped++;
        return;
    }
    while (at < codemap.dyn.n && codemap.dyn.r[at].lo < n->lo)
        at++;
    memmove(&codemap.dyn.r[at + 1], &codemap.dyn.r[at],
            (codemap.dyn.n - at) * sizeof *codemap.dyn.r);
    codemap.dyn.r[at] =
        (struct dyn_range){.lo = n->lo, .hi = n->hi, .fn = n->fn, .entry = n->entry};
    codemap.dyn.n++;
}

static void dyn_remove(FunctionID fn)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < codemap.dyn.n; i++)
        if (codemap.dyn.r[i].fn != fn)
            codemap.dyn.r[keep++] = codemap.dyn.r[i];
    codemap.dyn.n = keep;
    for (uint32_t i = 0; codemap.ndyn && i < codemap.npool; i++)
        if (codemap.pool[i].dyn && codemap.pool[i].fn == fn) {
            codemap.pool[i].dead = 1;
            codemap.frameless_dirty = 1; /* its frame shape no longer describes that memory */
            prof_sig_wake_sampler();
        }
    forget_cached(0, 0, fn);
    prof_symbols_forget_dynamic();
}

/* Applies the queued notes (under prof_codemap_lock, before a lookup). */
void codemap_dyn_apply(void)
{
    struct dyn_note n;
    while (dyn_pop(&n)) {
        if (n.hi) {
            dyn_add(&n);
            codemap.st.dynamic_compiled++;
        } else {
            dyn_remove(n.fn);
            codemap.st.dynamic_unloaded++;
        }
    }
    codemap.st.dynamic_methods = codemap.dyn.n;
    codemap.st.dynamic_dropped_notes = __atomic_load_n(&codemap.dyn.dropped, __ATOMIC_RELAXED);
}

int codemap_dyn_find(uintptr_t key)
{
    uint32_t lo = 0, hi = codemap.dyn.n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (key < codemap.dyn.r[mid].lo)
            hi = mid;
        else if (key >= codemap.dyn.r[mid].hi)
            lo = mid + 1;
        else
            return (int)mid;
    }
    return -1;
}
