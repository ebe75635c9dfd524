/*
 * prof_live.c - see prof_live.h. The slot table and the runtime's callbacks that write it: the
 * allocation callback (app threads: prof_live_track) and the GC callbacks (prof_live_gc_started,
 * prof_live_gc_finished: the scan at the end of each GC). clrscope-agg's side is in
 * prof_live_types.c, the readers in prof_live_read.c; prof_live_int.h holds what they share.
 *
 * WHY CREATING THE HANDLE IN THE ALLOCATION CALLBACK IS SAFE (the object has no MethodTable yet)
 *
 * AllocationSampled (.NET 10) is raised by Alloc() in vm/gchelpers.cpp right after
 * IGCHeap::Alloc() returns the zeroed memory and *before* the caller (AllocateObject,
 * AllocateSzArray, AllocateString...) stores the MethodTable; the runtime's comment says so.
 * GCAllocationTick (.NET 8/9) is raised inside the GC allocator (gc_heap::adjust_limit_clr), after
 * the new allocation context is cleared and the more-space lock released; `Address` is the start
 * of that context, where gc_heap::allocate() places the object when it retries (UOH: the object
 * itself). In both cases:
 *   1. The callback runs on the allocating thread, in cooperative mode, inside the allocation
 *      path. No GC can start before this thread reaches a GC-safe point, and there is none
 *      between the event and the MethodTable store: the runtime itself relies on that (the object
 *      is already inside the heap's allocated range). Everything this module and prof_walk call in
 *      the callback is GC_NOTRIGGER (DoStackSnapshot of the current thread, CreateHandle), so we
 *      add no safe point either.
 *   2. CreateHandle (ICorProfilerInfo13, SYNC, allowed in callbacks) with COR_PRF_HANDLE_TYPE_WEAK
 *      makes a long weak handle: HndCreateHandle -> HndAssignHandle -> HndWriteBarrier, which only
 *      looks the address up in the GC's region/segment map (WhichGeneration) to age the handle's
 *      clump. Nothing dereferences the object: the object validation in that path
 *      (VALIDATEOBJECTREF) compiles to nothing in release runtimes (vm/vars.hpp, !_DEBUG_IMPL),
 *      and the SetGCHandle event that would read more stays off (we never enable the GCHandle
 *      keyword).
 *   3. When the next GC scans the handle, the runtime has long written the MethodTable (and the
 *      array length), so the GC sees a well-formed object.
 * So clrscope does NOT write the MethodTable into the object itself (Datadog's trick) and makes no
 * assumption about the object layout. Residual risk, accepted and documented: a checked/debug
 * runtime validates the object in HndCreateHandle and would assert. Deferring the handle creation
 * is not an option: the address is only meaningful until the next GC moves the object.
 *
 * OWNERSHIP
 *   slots[] (shared, all fields accessed with atomics):
 *     FREE -> BUSY   an app thread claims a free slot by CAS in prof_live_track (callback);
 *     BUSY -> LIVE   the same thread, after CreateHandle, with a release store;
 *     BUSY -> FREE   the same thread, when CreateHandle fails;
 *     LIVE -> FREE   only prof_live_gc_finished (the runtime's GC-finished callback, where SYNC
 *                    calls are allowed), which checks GetObjectIDFromHandle (0 = collected) and
 *                    calls DestroyHandle. An atomic flag keeps two such callbacks from overlapping
 *                    (a background GC may end while an ephemeral one runs).
 *     `seq` is bumped at each claim; ring records carry (slot, seq), so clrscope-agg never
 *     attaches a stack to the wrong object, whatever order things happen in.
 *   meta[] and types[] (clrscope-agg, under g_live.agg.lock): the type, thread and stack of each
 *     live slot, per-type births/deaths and a 15-minute history; API handlers read them under
 *     the same lock.
 *
 * CAPACITY AND HONEST ESTIMATES
 *   Each tracked object carries its allocation sample's weights (count_w, bytes_w) times 2^shift,
 *   where 2^-shift is the probability that the sample was kept. When a GC finds the table at 7/8
 *   of CLRSCOPE_LIVE_MAX, it evicts each tracked object with probability 1/2 (DestroyHandle) and
 *   doubles the weights of the rest, and new samples are admitted with half the probability
 *   ("adaptive thinning", a Horvitz-Thompson estimator: unbiased, just noisier). When short-lived
 *   garbage fills the table between two GCs and a sample finds no free slot, the admission
 *   probability is halved too (at most once per GC). When a GC leaves the table under 1/4 full
 *   and nothing was turned away since the previous GC, it doubles again. Samples refused by
 *   thinning, evicted, or finding no free slot are counted as `untracked`; those that found no
 *   slot at all (`overflow`) are lost, which makes the estimates lower bounds: the reply says so
 *   (`capped`, `overflow`).
 */
#include "prof_agg.h"
#include "prof_live.h"
#include "prof_live_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"

#define PROBES 64 /* slots a sample tries before it counts as overflow */

struct live_state g_live = {.agg.lock = PTHREAD_MUTEX_INITIALIZER};

static void st_d(double *p, double v)
{
    __atomic_store(p, &v, __ATOMIC_RELAXED);
}

static uint64_t next_random(void)
{
    uint64_t z = __atomic_add_fetch(&g_live.tab.rng, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t now_ms(void)
{
    return (int64_t)(prof_unix_now() * 1000.0);
}

void prof_live_init(void)
{
    g_live.leak_window_s = prof_env_double("CLRSCOPE_LEAK_WINDOW_S", 300, 30, 900);
    g_live.leak_min_s = prof_env_double("CLRSCOPE_LEAK_MIN_S", 20, 10, 900);
    if (!(g_core.profiles & PROFILE_LIVE)) {
        g_live.why_off = "the live profile is not enabled (CLRSCOPE_PROFILES)";
        return;
    }
    if (g_cfg.live_max <= 0) {
        g_live.why_off = "CLRSCOPE_LIVE_MAX is 0";
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    if (g_core.info_version < 13 || !g_core.info->vt->CreateHandle) {
        g_live.why_off = "the runtime has no ICorProfilerInfo13 (weak handles)";
        prof_log(LOG_WARN, "live objects need ICorProfilerInfo13 (.NET 7+); they are off");
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    g_live.cap = (uint32_t)g_cfg.live_max;
    g_live.tab.slots = calloc(g_live.cap, sizeof *g_live.tab.slots);
    g_live.agg.meta = calloc(g_live.cap, sizeof *g_live.agg.meta);
    g_live.agg.types = calloc(MAX_TYPES, sizeof *g_live.agg.types);
    g_live.tab.live_bits = calloc((g_live.cap + 63) / 64, sizeof *g_live.tab.live_bits);
    if (!g_live.tab.slots || !g_live.agg.meta || !g_live.agg.types || !g_live.tab.live_bits) {
        free(g_live.tab.slots);
        free(g_live.agg.meta);
        free(g_live.agg.types);
        free(g_live.tab.live_bits);
        g_live.tab.slots = NULL;
        g_live.agg.meta = NULL;
        g_live.agg.types = NULL;
        g_live.tab.live_bits = NULL;
        g_live.why_off = "out of memory for the live-object table";
        prof_log(LOG_WARN, "out of memory for %u live-object slots; live objects are off",
                 g_live.cap);
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    live_types_start();
    g_live.tab.rng = (uint64_t)prof_now_ns() ^ (uint64_t)g_core.pid << 32;
    g_live.tab.condemned[0] = g_live.tab.condemned[1] = -1;
    g_live.tab.in_gc = 0;
    g_live.enabled = 1;
}

/* ---- runtime callbacks ---- */

int prof_live_track(uintptr_t address, uint64_t size, int kind, double count_w, double bytes_w,
                    double t_unix, uint32_t *seq)
{
    if (!g_live.enabled || !address)
        return -1;
    uint32_t shift = LD(&g_live.tab.shift);
    uint64_t rnd = next_random();
    if (shift && (rnd & ((1ull << shift) - 1))) {
        __atomic_fetch_add(&g_live.tab.untracked, 1, __ATOMIC_RELAXED);
        return -1;
    }
    uint32_t start = (uint32_t)((rnd >> 32) % g_live.cap);
    for (uint32_t i = 0; i < PROBES && i < g_live.cap; i++) {
        uint32_t idx = (start + i) % g_live.cap;
        struct live_slot *s = &g_live.tab.slots[idx];
        uint32_t expect = S_FREE;
        if (LD(&s->state) != S_FREE ||
            !__atomic_compare_exchange_n(&s->state, &expect, S_BUSY, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        ICorProfilerInfo15 *info = g_core.info;
        ObjectHandleID h = NULL;
        HRESULT hr = info->vt->CreateHandle(info, (ObjectID)address, COR_PRF_HANDLE_TYPE_WEAK, &h);
        if (hr < 0 || !h) {
            __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
            __atomic_fetch_add(&g_live.tab.handle_failures, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&g_live.tab.untracked, 1, __ATOMIC_RELAXED);
            return -1;
        }
        uint32_t q = LD(&s->seq) + 1;
        if (!q)
            q = 1;
        ST(&s->handle, h);
        ST(&s->t_alloc_ms, (int64_t)(t_unix * 1000.0));
        ST(&s->t_seen_ms, (int64_t)0);
        ST(&s->size, size);
        st_d(&s->count_w, count_w);
        st_d(&s->bytes_w, bytes_w);
        ST(&s->gen, kind == 0 ? 0u : (uint32_t)GEN_UOH);
        ST(&s->shift, shift);
        ST(&s->gcs, 0u);
        ST(&s->seq, q);
        __atomic_store_n(&s->state, S_LIVE, __ATOMIC_RELEASE);
        __atomic_fetch_or(&g_live.tab.live_bits[idx / 64], 1ull << (idx % 64), __ATOMIC_RELEASE);
        *seq = q;
        return (int)idx;
    }
    __atomic_fetch_add(&g_live.tab.overflow, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_live.tab.untracked, 1, __ATOMIC_RELAXED);
    /* Churn fills the table between GCs: halve the admission probability, at most once per GC
     * (objects already tracked keep their weights; see "CAPACITY" above). */
    uint64_t epoch = LD(&g_live.tab.gcs) + 1, seen = LD(&g_live.tab.bumped_at);
    if (seen != epoch && LD(&g_live.tab.shift) < 40 &&
        __atomic_compare_exchange_n(&g_live.tab.bumped_at, &seen, epoch, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        __atomic_fetch_add(&g_live.tab.shift, 1, __ATOMIC_RELAXED);
    return -1;
}

void prof_live_gc_started(int cgen, const BOOL *collected)
{
    if (!g_live.enabled)
        return;
    int deepest = -1;
    for (int g = 0; collected && g < cgen && g < 3; g++)
        if (collected[g])
            deepest = g;
    int before = __atomic_fetch_add(&g_live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    if (before >= 2) /* a start whose finish never came: stay at two */
        __atomic_fetch_sub(&g_live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&g_live.tab.condemned[before > 0], deepest, __ATOMIC_RELEASE);
}

/* The generation condemned by the GC that is finishing: the nested one when two are in
 * progress. (Should a background GC end while a nested GC runs, it takes the nested GC's
 * generation and the nested GC, ending after it, the background GC's: its objects were proven
 * alive by then anyway.) -1 when no start was seen. */
static int finishing_condemned(void)
{
    int before = __atomic_fetch_sub(&g_live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    if (before <= 0) {
        __atomic_store_n(&g_live.tab.in_gc, 0, __ATOMIC_RELEASE);
        return -1;
    }
    return __atomic_load_n(&g_live.tab.condemned[before > 1], __ATOMIC_ACQUIRE);
}

static void free_slot(uint32_t i, uint32_t reason)
{
    struct live_slot *s = &g_live.tab.slots[i];
    ICorProfilerInfo15 *info = g_core.info;
    info->vt->DestroyHandle(info, LD(&s->handle));
    ST(&s->handle, (ObjectHandleID)NULL);
    ST(&s->ended_reason, reason);
    ST(&s->ended_seq, LD(&s->seq));
    /* the bit goes first: a thread that claims the slot once it is FREE sets it again */
    __atomic_fetch_and(&g_live.tab.live_bits[i / 64], ~(1ull << (i % 64)), __ATOMIC_RELEASE);
    __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
}

/* The first slot at or after i whose live bit is set, or g_live.cap. Visiting only those keeps the
 * scan at GC end (inside the GC's pause) from touching every slot of a mostly empty table: on the
 * ASP.NET Core bench ~30 of 4,096 slots are live, and reading all of them cost 0.2 % of the
 * server's CPU in cache misses. */
static uint32_t live_next(uint32_t i)
{
    while (i < g_live.cap) {
        uint64_t w = __atomic_load_n(&g_live.tab.live_bits[i / 64], __ATOMIC_ACQUIRE) >> (i % 64);
        if (w)
            return i + (uint32_t)__builtin_ctzll(w);
        i = (i / 64 + 1) * 64;
    }
    return g_live.cap;
}

/* Halves the tracked set at random (see "CAPACITY" above). GC-finished callback only. */
static uint32_t thin_out(void)
{
    uint32_t kept = 0;
    for (uint32_t i = live_next(0); i < g_live.cap; i = live_next(i + 1)) {
        struct live_slot *s = &g_live.tab.slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_LIVE)
            continue;
        if (next_random() & 1) {
            free_slot(i, END_EVICTED);
            __atomic_fetch_add(&g_live.tab.evicted, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&g_live.tab.untracked, 1, __ATOMIC_RELAXED);
        } else {
            ST(&s->shift, LD(&s->shift) + 1);
            kept++;
        }
    }
    return kept;
}

void prof_live_gc_finished(void)
{
    if (!g_live.enabled)
        return;
    int cond = finishing_condemned();
    if (__atomic_exchange_n(&g_live.tab.gc_busy, 1, __ATOMIC_ACQUIRE))
        return; /* another GC's callback is checking the table right now */
    ICorProfilerInfo15 *info = g_core.info;
    int64_t now = now_ms();
    uint32_t alive = 0;
    for (uint32_t i = live_next(0); i < g_live.cap; i = live_next(i + 1)) {
        struct live_slot *s = &g_live.tab.slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_LIVE)
            continue;
        ObjectID obj = 0;
        HRESULT hr = info->vt->GetObjectIDFromHandle(info, LD(&s->handle), &obj);
        if (hr >= 0 && !obj) {
            free_slot(i, END_COLLECTED);
            continue;
        }
        alive++;
        if (hr < 0 || cond < 0)
            continue;
        uint32_t gen = LD(&s->gen);
        if ((gen < GEN_UOH && (int)gen <= cond) || (gen == GEN_UOH && cond >= 2)) {
            /* this GC scanned the object's generation and it survived: proven alive now */
            ST(&s->t_seen_ms, now);
            ST(&s->gcs, LD(&s->gcs) + 1);
            if (gen < 2)
                ST(&s->gen, gen + 1);
        }
    }
    uint32_t shift = LD(&g_live.tab.shift);
    uint64_t overflow = LD(&g_live.tab.overflow);
    if (alive >= g_live.cap - g_live.cap / 8 && shift < 40) {
        __atomic_fetch_add(&g_live.tab.shift, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&g_live.tab.full_events, 1, __ATOMIC_RELAXED);
        alive = thin_out();
    } else if (alive < g_live.cap / 4 && shift > 0 && overflow == g_live.tab.overflow_at_gc) {
        /* room again and nothing turned away since the last GC: admit twice as often */
        __atomic_compare_exchange_n(&g_live.tab.shift, &shift, shift - 1, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
    }
    g_live.tab.overflow_at_gc = overflow;
    ST(&g_live.tab.live_now, alive);
    __atomic_fetch_add(&g_live.tab.gcs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&g_live.tab.gc_busy, 0, __ATOMIC_RELEASE);
}

size_t prof_live_mem_bytes(void)
{
    if (!g_live.tab.slots)
        return 0;
    return (size_t)g_live.cap * (sizeof *g_live.tab.slots + sizeof *g_live.agg.meta) +
           (g_live.cap + 63) / 64 * sizeof *g_live.tab.live_bits +
           MAX_TYPES * sizeof *g_live.agg.types;
}

const struct prof_kind prof_live_kind = {
    .name = "live",
    .profile = PROFILE_LIVE,
    .tick = prof_live_tick,
    .mem_bytes = prof_live_mem_bytes,
    .mem_name = "live_objects",
};
