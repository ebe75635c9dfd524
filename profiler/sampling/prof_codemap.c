/*
 * prof_codemap.c - the code map's method table (see prof_codemap.h): learns each method's code
 * range and frame shape from the runtime, looks addresses up through a direct-mapped cache,
 * flushes at an unload and every CODEMAP_FLUSH_NS, and publishes the frameless methods and OSR
 * return addresses to the walks (prof_maps) once a tick. The clrscope-sampler thread and
 * clrscope-agg, under prof_codemap_lock().
 */
#include "prof_codemap.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prof_agg.h"
#include "clr_abi.h"
#include "prof_codemap_int.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sighandler.h"
#include "prof_unload.h"

#define CODEMAP_MAX_CODES 32768
#define CODEMAP_FLUSH_NS (600LL * 1000000000LL)
#define PROLOG_BYTES 64

struct codemap_state codemap = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- the method table ---- */

/* Reads code bytes without trusting that they are mapped (a failed read is an error, not a
 * fault): clrscope's threads must not crash the process either. */
size_t prof_codemap_read_code(uintptr_t addr, uint8_t *buf, size_t len)
{
    if (__atomic_load_n(&codemap.no_code_reads, __ATOMIC_RELAXED) || !addr)
        return 0;
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    ssize_t got = process_vm_readv(g_core.pid, &local, 1, &remote, 1, 0);
    if (got < 0 && (errno == EPERM || errno == ENOSYS) &&
        !__atomic_exchange_n(&codemap.no_code_reads, 1, __ATOMIC_RELAXED))
        prof_log(LOG_INFO, "process_vm_readv is not allowed here; frames of methods without a "
                 "frame pointer may miss their caller");
    return got > 0 ? (size_t)got : 0;
}

static int find_code(uintptr_t key)
{
    uint32_t lo = 0, hi = codemap.npool;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct code *c = &codemap.pool[codemap.order[mid]];
        if (key < c->lo)
            hi = mid;
        else if (key >= c->hi)
            lo = mid + 1;
        else
            return (int)codemap.order[mid];
    }
    return -1;
}

void codemap_flush(int64_t now)
{
    codemap.npool = 0;
    codemap.ndyn = 0;
    memset(codemap.cache, 0, IPCACHE_SIZE * sizeof *codemap.cache);
    memset(codemap.callsites, 0, sizeof codemap.callsites);
    memset(codemap.leafoffs, 0, sizeof codemap.leafoffs);
    codemap.flushed_at = now;
    codemap.frameless_dirty = 1;
    codemap_inline_flush();
}

/* Adds the code range [lo, hi) of `fn` to the pool (sorted by lo); `entry`: the method starts at
 * lo, where its prologue tells its frame shape. Returns its index, -1 when the pool is full. */
static int add_code(uintptr_t lo, uintptr_t hi, uintptr_t start, FunctionID fn, int entry,
                    int dyn)
{
    if (codemap.npool >= CODEMAP_MAX_CODES)
        return -1;
    struct code c = {.lo = lo, .hi = hi, .start = start, .fn = fn, .dyn = (uint8_t)dyn};
    if (entry) {
        uint8_t bytes[PROLOG_BYTES];
        size_t want = hi - lo < sizeof bytes ? hi - lo : sizeof bytes;
        size_t len = prof_codemap_read_code(lo, bytes, want);
        prof_frame_decode(bytes, len, &c.shape);
    }
    codemap.pool[codemap.npool] = c;
    codemap.ndyn += (uint32_t)dyn;
    uint32_t at = 0; /* sorted insert */
    while (at < codemap.npool && codemap.pool[codemap.order[at]].lo < lo)
        at++;
    memmove(&codemap.order[at + 1], &codemap.order[at],
            (codemap.npool - at) * sizeof *codemap.order);
    codemap.order[at] = codemap.npool;
    if (c.shape.known && !c.shape.framed && c.shape.frame % 16 == 8) {
        codemap.frameless_dirty = 1;
        prof_sig_wake_sampler(); /* it publishes the table (prof_codemap_tick) */
    }
    return (int)codemap.npool++;
}

/* Learns the native code range and frame shape of the code of `fn` that contains `key`. */
static int learn(FunctionID fn, UINT_PTR rejit, uintptr_t key)
{
    ICorProfilerInfo15 *info = g_core.info;
    if (codemap.npool >= CODEMAP_MAX_CODES || g_core.info_version < 9)
        return -1;
    UINT_PTR starts[16];
    ULONG32 nstarts = 0;
    if (info->vt->GetNativeCodeStartAddresses(info, fn, rejit, 16, &nstarts, starts) != S_OK)
        return -1;
    for (ULONG32 i = 0; i < nstarts && i < 16; i++) {
        COR_PRF_CODE_INFO ci[4];
        ULONG32 nci = 0;
        if (info->vt->GetCodeInfo4(info, starts[i], 4, &nci, ci) != S_OK)
            continue;
        for (ULONG32 j = 0; j < nci && j < 4; j++) {
            uintptr_t lo = ci[j].startAddress, hi = lo + ci[j].size;
            if (key >= lo && key < hi)
                return add_code(lo, hi, starts[i], fn, lo == starts[i], 0);
        }
    }
    return -1;
}

/* The method of an address (fn 0: not managed code); *code = its range entry or -1. `ask`: an
 * address in no mapping of the snapshot asks for a new one (not for one a walk marked fresh,
 * whose handler asked already, with the backoff of prof_maps_maintain for words that only look
 * like code). */
static FunctionID lookup(uintptr_t key, int *code, int ask)
{
    uint32_t epoch = prof_unload_epoch();
    if (epoch != codemap.epoch) {
        /* a module unload started: its code may be gone, its range reused */
        codemap.epoch = epoch;
        codemap_flush(codemap.flushed_at);
        codemap_inline_forget_pairs();
        codemap.st.unload_flushes++;
        codemap.nosr = 0;
        codemap.st.osr_returns = 0;
        codemap.osr_dirty = 1;
        prof_sig_wake_sampler();
    }
    if (__atomic_load_n(&codemap.dyn.head, __ATOMIC_ACQUIRE) != codemap.dyn.tail)
        codemap_dyn_apply();
    struct ipc *e = &codemap.cache[(key ^ (key >> 13)) & (IPCACHE_SIZE - 1)];
    if (e->key == key && (!e->retry_s || (uint32_t)(prof_now_ns() / 1000000000LL) < e->retry_s)) {
        *code = e->code;
        return e->fn;
    }
    FunctionID fn = 0;
    uint32_t retry_s = 0;
    int idx = find_code(key), d;
    const char *module = prof_maps_native_name(key);
    if (idx >= 0 && codemap.pool[idx].dead) {
        idx = -1; /* a collected dynamic method's: nothing there now */
    } else if (idx >= 0) {
        fn = codemap.pool[idx].fn;
    } else if ((d = codemap_dyn_find(key)) >= 0) {
        fn = codemap.dyn.r[d].fn;
        idx = add_code(codemap.dyn.r[d].lo, codemap.dyn.r[d].hi, 0, fn,
                       (int)codemap.dyn.r[d].entry, 1);
    } else if (!strstr(module, ".so") && !prof_unload_may_query()) {
        *code = -1; /* taken before an unload started: not asked, not remembered */
        return 0;
    } else if (!strstr(module, ".so")) { /* shared libraries hold no managed code */
        ICorProfilerInfo15 *info = g_core.info;
        UINT_PTR rejit = 0;
        codemap.st.clr_lookups++;
        if (info->vt->GetFunctionFromIP2(info, (const BYTE *)key, &fn, &rejit) != S_OK) {
            /* no answer: a runtime stub, a dynamic method's code, or a lookup made while a GC
             * runs (the runtime refuses those): asked again a second later, so that a method
             * first seen during a GC is not left unnamed for good */
            fn = 0;
            codemap.st.clr_lookup_failures++;
            retry_s = (uint32_t)(prof_now_ns() / 1000000000LL) + 1;
        }
        if (fn)
            idx = learn(fn, rejit, key);
    }
    if (!fn && !prof_maps_is_code(key)) {
        if (ask)
            prof_maps_refresh(1); /* code mapped after the snapshot: ask again later */
        *code = -1;
        return 0;
    }
    *e = (struct ipc){.key = key, .fn = fn, .code = idx, .retry_s = fn ? 0 : retry_s};
    *code = idx;
    return fn;
}

FunctionID codemap_lookup(uintptr_t key, int *code)
{
    return lookup(key, code, 1);
}

FunctionID codemap_lookup_fresh(uintptr_t key, int *code)
{
    return lookup(key, code, 0);
}

void prof_codemap_lock(void)
{
    pthread_mutex_lock(&codemap.lock);
}

void prof_codemap_unlock(void)
{
    pthread_mutex_unlock(&codemap.lock);
}

/* Whether the bytes before ra end with a call instruction (cached per address). */
int codemap_after_call(uintptr_t ra)
{
    struct callsite *e = &codemap.callsites[(ra ^ (ra >> 11)) & (CALLSITE_CACHE - 1)];
    if (e->ra == ra)
        return e->ok;
    uint8_t before[8];
    int ok = prof_codemap_read_code(ra - 8, before, sizeof before) == sizeof before &&
             prof_frame_is_call_site(before, sizeof before);
    *e = (struct callsite){.ra = ra, .ok = ok};
    return ok;
}

uintptr_t prof_codemap_function(uintptr_t ra)
{
    int code;
    return codemap_lookup(ra - 1, &code);
}

int prof_codemap_init(int max_frames)
{
    if (codemap.pool) /* already (the signal sampler, then the maps keeper); all four or none */
        return 0;
    codemap.max_frames = max_frames;
    codemap.cap = CODEMAP_MAX_CODES;
    codemap.pool = malloc(codemap.cap * sizeof *codemap.pool);
    codemap.order = malloc(codemap.cap * sizeof *codemap.order);
    codemap.cache = calloc(IPCACHE_SIZE, sizeof *codemap.cache);
    codemap.frames = malloc((size_t)(max_frames + PROF_SIG_MAX_HOPS + 1) * sizeof *codemap.frames);
    if (!codemap.pool || !codemap.order || !codemap.cache || !codemap.frames) {
        free(codemap.pool);
        free(codemap.order);
        free(codemap.cache);
        free(codemap.frames);
        codemap.pool = NULL;
        codemap.order = NULL;
        codemap.cache = NULL;
        codemap.frames = NULL;
        return -ENOMEM;
    }
    codemap.flushed_at = prof_now_ns();
    return 0;
}

void prof_codemap_tick(int64_t now)
{
    if (now - codemap.flushed_at >= CODEMAP_FLUSH_NS)
        codemap_flush(now);
    codemap_inline_apply(); /* the JIT's notes, even while no sample is named */
    if (codemap.osr_dirty) { /* the return addresses of OSR frames (prof_sig_osrs) */
        codemap.osr_dirty = 0;
        prof_maps_set_osr(codemap.osr_ra, codemap.nosr);
    }
    if (!codemap.frameless_dirty)
        return;
    codemap.frameless_dirty = 0;
    uintptr_t(*r)[3] = malloc((codemap.npool ? codemap.npool : 1) * sizeof *r);
    if (!r)
        return;
    size_t n = 0;
    for (uint32_t i = 0; i < codemap.npool; i++) {
        const struct code *c = &codemap.pool[codemap.order[i]];
        /* a method that calls keeps sp 16-aligned at the call: frame % 16 == 8; anything else
         * is not a frameless caller (the handler only needs callers) */
        if (c->shape.known && !c->shape.framed && c->shape.frame % 16 == 8 && !c->dead) {
            r[n][0] = c->lo;
            r[n][1] = c->hi;
            r[n][2] = c->shape.frame;
            n++;
        }
    }
    prof_maps_set_frameless((const uintptr_t(*)[3])r, n);
    free(r);
    codemap.st.frameless = n;
}

void prof_codemap_get_stats(struct prof_codemap_stats *out)
{
    *out = codemap.st;
    out->methods = codemap.npool;
}

size_t prof_codemap_mem_bytes(void)
{
    if (!codemap.pool)
        return 0;
    return (size_t)codemap.cap * (sizeof *codemap.pool + sizeof *codemap.order) +
           IPCACHE_SIZE * sizeof *codemap.cache +
           (size_t)(codemap.max_frames + PROF_SIG_MAX_HOPS + 1) * sizeof *codemap.frames +
           codemap_inline_mem_bytes();
}

const struct prof_kind prof_codemap_kind = {
    .name = "code-map",
    .mem_bytes = prof_codemap_mem_bytes,
    .mem_name = "code_map",
};

