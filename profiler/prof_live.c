/*
 * prof_live.c - see prof_live.h.
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
 *   meta[] and types[] (clrscope-agg, under live.agg.lock): the type, thread and stack of each
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

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_typename.h"

enum { S_FREE = 0, S_BUSY = 1, S_LIVE = 2 };
enum { END_NONE = 0, END_COLLECTED = 1, END_EVICTED = 2 };

#define PROBES 64
#define GEN_UOH 3
#define HIST_N 90          /* 15 minutes of 10-second points */
#define HIST_STEP_S 10
#define MAX_TYPES 512      /* distinct live types with history; the rest share "[other types]" */
#define TYPE_HASH 1024u

struct live_slot {
    uint32_t state;
    uint32_t seq;
    uint32_t gen;          /* estimated generation: 0, 1, 2, or GEN_UOH */
    uint32_t shift;        /* inclusion probability 2^-shift */
    uint32_t gcs;          /* GCs that condemned its generation and found it alive */
    uint32_t ended_seq, ended_reason;
    ObjectHandleID handle;
    int64_t t_alloc_ms;
    int64_t t_seen_ms;     /* end of the last such GC (0 = none yet) */
    uint64_t size;
    double count_w, bytes_w;
};

struct live_meta {
    uint32_t seq;          /* the slot sequence this describes; 0 = none */
    uint32_t tid;
    uint32_t type;         /* index into live.agg.types */
    uint32_t nframes;
    const char **frames;   /* root first */
};

struct hist_point {
    double t;
    double count;
    float p50, maxage;
    uint32_t tracked;
    uint64_t births, deaths;
};

struct live_type {
    const char *name;
    uint64_t births, deaths;   /* tracked objects attached / found collected (cumulative) */
    struct hist_point hist[HIST_N];
    int head, n;               /* ring: next write position, points held */
    int leak;
    char reason[160];
};

/* The module's state. What Initialize sets is read-only after it; the rest is in two parts that
 * different threads write (see OWNERSHIP above):
 *   tab  the slot table: app threads claim slots in the allocation callback, the GC callbacks
 *        check and free them; every field is read and written with atomics, any thread;
 *   agg  what clrscope-agg derives from the records (each slot's type, thread and stack, the
 *        type rows and their history), under agg.lock, which the readers (API threads) take. */
static struct live_state {
    /* prof_live_init (Initialize), then read-only */
    int enabled;
    const char *why_off;
    uint32_t cap;
    double leak_window_s, leak_min_s;
    struct {
        struct live_slot *slots;
        uint64_t *live_bits;   /* atomic words: bit i set while slot i is LIVE (the GC scan's
                                * index) */
        uint32_t shift;        /* atomic: admission probability 2^-shift */
        uint64_t rng;          /* atomic */
        /* The deepest generation each GC in progress condemned. GCs run one at a time except a
         * background GC, inside which ephemeral GCs start and finish: [0] is the outer GC's, [1]
         * the one inside it, `in_gc` how many have started and not finished (0..2). With a
         * single variable a background GC's end would look like its last nested GC's
         * (gen0/gen1), and it would never prove a generation 2 object alive. */
        int condemned[2];      /* atomic */
        int in_gc;             /* atomic */
        int gc_busy;           /* atomic flag: a GC-finished callback is checking the table */
        uint64_t untracked, overflow, handle_failures, gcs, evicted, full_events; /* atomic */
        uint64_t bumped_at;    /* atomic: GC epoch of the last overflow-driven halving */
        uint64_t overflow_at_gc; /* the GC-finished callback only (under gc_busy) */
        uint32_t live_now;     /* atomic: live slots at the last GC */
    } tab;
    struct {
        pthread_mutex_t lock;  /* meta, types and everything below */
        struct live_meta *meta;
        struct live_type *types;
        uint32_t ntypes;
        uint32_t type_hash[TYPE_HASH]; /* index + 1 */
        uint64_t types_recycled;       /* rows given back by recycle_types */
        uint64_t deaths;
        double next_hist;
        int types_full_logged;
    } agg;
} live = {.agg.lock = PTHREAD_MUTEX_INITIALIZER};

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static double ld_d(const double *p)
{
    double v;
    __atomic_load(p, &v, __ATOMIC_RELAXED);
    return v;
}

static void st_d(double *p, double v)
{
    __atomic_store(p, &v, __ATOMIC_RELAXED);
}

static uint64_t next_random(void)
{
    uint64_t z = __atomic_add_fetch(&live.tab.rng, 0x9E3779B97F4A7C15ull, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t now_ms(void)
{
    return (int64_t)(prof_unix_now() * 1000.0);
}

static void type_hash_put(uint32_t idx);

void prof_live_init(void)
{
    live.leak_window_s = prof_env_double("CLRSCOPE_LEAK_WINDOW_S", 300, 30, 900);
    live.leak_min_s = prof_env_double("CLRSCOPE_LEAK_MIN_S", 20, 10, 900);
    if (!(g_core.profiles & PROFILE_LIVE)) {
        live.why_off = "the live profile is not enabled (CLRSCOPE_PROFILES)";
        return;
    }
    if (g_cfg.live_max <= 0) {
        live.why_off = "CLRSCOPE_LIVE_MAX is 0";
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    if (g_core.info_version < 13 || !g_core.info->vt->CreateHandle) {
        live.why_off = "the runtime has no ICorProfilerInfo13 (weak handles)";
        prof_log(LOG_WARN, "live objects need ICorProfilerInfo13 (.NET 7+); they are off");
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    live.cap = (uint32_t)g_cfg.live_max;
    live.tab.slots = calloc(live.cap, sizeof *live.tab.slots);
    live.agg.meta = calloc(live.cap, sizeof *live.agg.meta);
    live.agg.types = calloc(MAX_TYPES, sizeof *live.agg.types);
    live.tab.live_bits = calloc((live.cap + 63) / 64, sizeof *live.tab.live_bits);
    if (!live.tab.slots || !live.agg.meta || !live.agg.types || !live.tab.live_bits) {
        free(live.tab.slots);
        free(live.agg.meta);
        free(live.agg.types);
        free(live.tab.live_bits);
        live.tab.slots = NULL;
        live.agg.meta = NULL;
        live.agg.types = NULL;
        live.tab.live_bits = NULL;
        live.why_off = "out of memory for the live-object table";
        prof_log(LOG_WARN, "out of memory for %u live-object slots; live objects are off",
                 live.cap);
        prof_core_disable(PROFILE_LIVE);
        return;
    }
    live.agg.types[0].name = "[other types]";
    live.agg.ntypes = 1;
    type_hash_put(0); /* prof_typename's own "[other types]" is this row too */
    live.tab.rng = (uint64_t)prof_now_ns() ^ (uint64_t)g_core.pid << 32;
    live.tab.condemned[0] = live.tab.condemned[1] = -1;
    live.tab.in_gc = 0;
    live.enabled = 1;
}

/* ---- runtime callbacks ---- */

int prof_live_track(uintptr_t address, uint64_t size, int kind, double count_w, double bytes_w,
                    double t_unix, uint32_t *seq)
{
    if (!live.enabled || !address)
        return -1;
    uint32_t shift = LD(&live.tab.shift);
    uint64_t rnd = next_random();
    if (shift && (rnd & ((1ull << shift) - 1))) {
        __atomic_fetch_add(&live.tab.untracked, 1, __ATOMIC_RELAXED);
        return -1;
    }
    uint32_t start = (uint32_t)((rnd >> 32) % live.cap);
    for (uint32_t i = 0; i < PROBES && i < live.cap; i++) {
        uint32_t idx = (start + i) % live.cap;
        struct live_slot *s = &live.tab.slots[idx];
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
            __atomic_fetch_add(&live.tab.handle_failures, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&live.tab.untracked, 1, __ATOMIC_RELAXED);
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
        __atomic_fetch_or(&live.tab.live_bits[idx / 64], 1ull << (idx % 64), __ATOMIC_RELEASE);
        *seq = q;
        return (int)idx;
    }
    __atomic_fetch_add(&live.tab.overflow, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&live.tab.untracked, 1, __ATOMIC_RELAXED);
    /* Churn fills the table between GCs: halve the admission probability, at most once per GC
     * (objects already tracked keep their weights; see "CAPACITY" above). */
    uint64_t epoch = LD(&live.tab.gcs) + 1, seen = LD(&live.tab.bumped_at);
    if (seen != epoch && LD(&live.tab.shift) < 40 &&
        __atomic_compare_exchange_n(&live.tab.bumped_at, &seen, epoch, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        __atomic_fetch_add(&live.tab.shift, 1, __ATOMIC_RELAXED);
    return -1;
}

void prof_live_gc_started(int cgen, const BOOL *collected)
{
    if (!live.enabled)
        return;
    int deepest = -1;
    for (int g = 0; collected && g < cgen && g < 3; g++)
        if (collected[g])
            deepest = g;
    int before = __atomic_fetch_add(&live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    if (before >= 2) /* a start whose finish never came: stay at two */
        __atomic_fetch_sub(&live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&live.tab.condemned[before > 0], deepest, __ATOMIC_RELEASE);
}

/* The generation condemned by the GC that is finishing: the nested one when two are in
 * progress. (Should a background GC end while a nested GC runs, it takes the nested GC's
 * generation and the nested GC, ending after it, the background GC's: its objects were proven
 * alive by then anyway.) -1 when no start was seen. */
static int finishing_condemned(void)
{
    int before = __atomic_fetch_sub(&live.tab.in_gc, 1, __ATOMIC_ACQ_REL);
    if (before <= 0) {
        __atomic_store_n(&live.tab.in_gc, 0, __ATOMIC_RELEASE);
        return -1;
    }
    return __atomic_load_n(&live.tab.condemned[before > 1], __ATOMIC_ACQUIRE);
}

static void free_slot(uint32_t i, uint32_t reason)
{
    struct live_slot *s = &live.tab.slots[i];
    ICorProfilerInfo15 *info = g_core.info;
    info->vt->DestroyHandle(info, LD(&s->handle));
    ST(&s->handle, (ObjectHandleID)NULL);
    ST(&s->ended_reason, reason);
    ST(&s->ended_seq, LD(&s->seq));
    /* the bit goes first: a thread that claims the slot once it is FREE sets it again */
    __atomic_fetch_and(&live.tab.live_bits[i / 64], ~(1ull << (i % 64)), __ATOMIC_RELEASE);
    __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
}

/* The first slot at or after i whose live bit is set, or live.cap. Visiting only those keeps the
 * scan at GC end (inside the GC's pause) from touching every slot of a mostly empty table: on the
 * ASP.NET Core bench ~30 of 4,096 slots are live, and reading all of them cost 0.2 % of the
 * server's CPU in cache misses. */
static uint32_t live_next(uint32_t i)
{
    while (i < live.cap) {
        uint64_t w = __atomic_load_n(&live.tab.live_bits[i / 64], __ATOMIC_ACQUIRE) >> (i % 64);
        if (w)
            return i + (uint32_t)__builtin_ctzll(w);
        i = (i / 64 + 1) * 64;
    }
    return live.cap;
}

/* Halves the tracked set at random (see "CAPACITY" above). GC-finished callback only. */
static uint32_t thin_out(void)
{
    uint32_t kept = 0;
    for (uint32_t i = live_next(0); i < live.cap; i = live_next(i + 1)) {
        struct live_slot *s = &live.tab.slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_LIVE)
            continue;
        if (next_random() & 1) {
            free_slot(i, END_EVICTED);
            __atomic_fetch_add(&live.tab.evicted, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&live.tab.untracked, 1, __ATOMIC_RELAXED);
        } else {
            ST(&s->shift, LD(&s->shift) + 1);
            kept++;
        }
    }
    return kept;
}

void prof_live_gc_finished(void)
{
    if (!live.enabled)
        return;
    int cond = finishing_condemned();
    if (__atomic_exchange_n(&live.tab.gc_busy, 1, __ATOMIC_ACQUIRE))
        return; /* another GC's callback is checking the table right now */
    ICorProfilerInfo15 *info = g_core.info;
    int64_t now = now_ms();
    uint32_t alive = 0;
    for (uint32_t i = live_next(0); i < live.cap; i = live_next(i + 1)) {
        struct live_slot *s = &live.tab.slots[i];
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
    uint32_t shift = LD(&live.tab.shift);
    uint64_t overflow = LD(&live.tab.overflow);
    if (alive >= live.cap - live.cap / 8 && shift < 40) {
        __atomic_fetch_add(&live.tab.shift, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live.tab.full_events, 1, __ATOMIC_RELAXED);
        alive = thin_out();
    } else if (alive < live.cap / 4 && shift > 0 && overflow == live.tab.overflow_at_gc) {
        /* room again and nothing turned away since the last GC: admit twice as often */
        __atomic_compare_exchange_n(&live.tab.shift, &shift, shift - 1, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
    }
    live.tab.overflow_at_gc = overflow;
    ST(&live.tab.live_now, alive);
    __atomic_fetch_add(&live.tab.gcs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&live.tab.gc_busy, 0, __ATOMIC_RELEASE);
}

/* ---- clrscope-agg side (live.agg.lock held where noted) ---- */

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* live.agg.lock held: puts type idx (named) in the name index. */
static void type_hash_put(uint32_t idx)
{
    uint32_t h = str_hash(live.agg.types[idx].name) & (TYPE_HASH - 1);
    for (uint32_t i = 0; i < TYPE_HASH; i++) {
        uint32_t k = (h + i) & (TYPE_HASH - 1);
        if (!live.agg.type_hash[k]) {
            live.agg.type_hash[k] = idx + 1;
            return;
        }
    }
}

/* live.agg.lock held. */
static uint32_t type_index(const char *name)
{
    uint32_t h = str_hash(name) & (TYPE_HASH - 1);
    for (uint32_t i = 0; i < TYPE_HASH; i++) {
        uint32_t k = (h + i) & (TYPE_HASH - 1);
        uint32_t v = live.agg.type_hash[k];
        if (!v) {
            uint32_t idx = live.agg.ntypes;
            if (idx >= MAX_TYPES) /* a row history_step gave back */
                for (idx = 1; idx < live.agg.ntypes && live.agg.types[idx].name; idx++)
                    ;
            if (idx >= MAX_TYPES)
                break;
            if (idx == live.agg.ntypes)
                live.agg.ntypes++;
            live.agg.types[idx].name = name;
            live.agg.type_hash[k] = idx + 1;
            return idx;
        }
        if (!strcmp(live.agg.types[v - 1].name, name))
            return v - 1;
    }
    prof_log_once(live.agg.types_full_logged, LOG_WARN, "more than %d live types at once; new "
                  "ones are shown as [other types] until idle types give their rows back",
                  MAX_TYPES - 1);
    return 0;
}

/* A slot's meta describes an object that is gone: count the death and free the stack. */
static void retire_meta(uint32_t i)
{
    struct live_meta *m = &live.agg.meta[i];
    struct live_slot *s = &live.tab.slots[i];
    int evicted = LD(&s->ended_seq) == m->seq && LD(&s->ended_reason) == END_EVICTED;
    if (!evicted) {
        live.agg.types[m->type].deaths++;
        live.agg.deaths++;
    }
    free(m->frames);
    memset(m, 0, sizeof *m);
}

static int meta_current(uint32_t i)
{
    struct live_slot *s = &live.tab.slots[i];
    return live.agg.meta[i].seq && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_LIVE &&
           LD(&s->seq) == live.agg.meta[i].seq;
}

void prof_live_consume(const struct prof_rec *rec, const char **names, int n)
{
    if (!live.enabled || !rec->d)
        return;
    uint32_t slot = (uint32_t)(rec->d & 0xffffffffu) - 1;
    uint32_t seq = (uint32_t)(rec->d >> 32);
    if (slot >= live.cap)
        return;
    const char *label = prof_typename_of(rec->a, rec->text);
    const char **frames = n > 0 ? malloc((size_t)n * sizeof *frames) : NULL;
    if (frames)
        memcpy(frames, names, (size_t)n * sizeof *frames);
    pthread_mutex_lock(&live.agg.lock);
    uint32_t type = type_index(label);
    struct live_meta *m = &live.agg.meta[slot];
    if (m->seq)
        retire_meta(slot); /* the slot's previous object */
    live.agg.types[type].births++;
    struct live_slot *s = &live.tab.slots[slot];
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_LIVE && LD(&s->seq) == seq) {
        m->seq = seq;
        m->tid = rec->os_tid;
        m->type = type;
        m->frames = frames;
        m->nframes = frames ? (uint32_t)n : 0;
        frames = NULL;
    } else if (!(LD(&s->ended_seq) == seq && LD(&s->ended_reason) == END_EVICTED)) {
        live.agg.types[type].deaths++; /* collected before we got here */
        live.agg.deaths++;
    }
    pthread_mutex_unlock(&live.agg.lock);
    free(frames);
}

/* One tracked object, copied out under live.agg.lock. */
struct obj {
    uint32_t slot, type;
    double age, seen, cw, bw;
    uint32_t gcs;
};

/* live.agg.lock held. Collects the current live objects (optionally of one type name). */
static size_t collect(struct obj *out, double now, const char *filter)
{
    size_t n = 0;
    for (uint32_t i = 0; i < live.cap; i++) {
        if (!meta_current(i))
            continue;
        struct live_meta *m = &live.agg.meta[i];
        if (filter && strcmp(live.agg.types[m->type].name, filter))
            continue;
        struct live_slot *s = &live.tab.slots[i];
        double mult = ldexp(1.0, (int)LD(&s->shift));
        double t_alloc = (double)LD(&s->t_alloc_ms) / 1000.0;
        int64_t seen_ms = LD(&s->t_seen_ms);
        struct obj *o = &out[n];
        o->slot = i;
        o->type = m->type;
        o->age = now - t_alloc > 0 ? now - t_alloc : 0;
        o->seen = seen_ms ? (double)seen_ms / 1000.0 - t_alloc : 0;
        if (o->seen < 0)
            o->seen = 0;
        o->cw = ld_d(&s->count_w) * mult;
        o->bw = ld_d(&s->bytes_w) * mult;
        o->gcs = LD(&s->gcs);
        if (LD(&s->seq) != m->seq) /* reused while we read it */
            continue;
        n++;
    }
    return n;
}

static int cmp_obj(const void *a, const void *b)
{
    const struct obj *x = a, *y = b;
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    return x->age < y->age ? -1 : x->age > y->age;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Weighted quantiles of values[0..n) (sorted ascending) with weights w. */
static struct prof_live_quant quantiles(const double *values, const double *w, size_t n)
{
    struct prof_live_quant q = {0, 0, 0};
    if (!n)
        return q;
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += w ? w[i] : 1;
    double acc = 0;
    int got50 = 0, got90 = 0;
    for (size_t i = 0; i < n; i++) {
        acc += w ? w[i] : 1;
        if (!got50 && acc >= 0.5 * total) {
            q.p50 = values[i];
            got50 = 1;
        }
        if (!got90 && acc >= 0.9 * total) {
            q.p90 = values[i];
            got90 = 1;
        }
    }
    q.max = values[n - 1];
    return q;
}

/* Aggregates one type's run objs[0..n) (sorted by age) into t; scratch holds 3n doubles. */
static void summarize(const struct obj *objs, size_t n, double *scratch, struct prof_live_type *t)
{
    double *v = scratch, *w = scratch + n, *g = scratch + 2 * n;
    t->count = t->bytes = 0;
    for (size_t i = 0; i < n; i++) {
        t->count += objs[i].cw;
        t->bytes += objs[i].bw;
        v[i] = objs[i].age;
        w[i] = objs[i].cw;
    }
    t->tracked = (uint32_t)n;
    t->age_s = quantiles(v, w, n);
    for (size_t i = 0; i < n; i++)
        v[i] = objs[i].seen;
    qsort(v, n, sizeof *v, cmp_double);
    t->seen_alive_s = quantiles(v, NULL, n);
    for (size_t i = 0; i < n; i++)
        g[i] = objs[i].gcs;
    qsort(g, n, sizeof *g, cmp_double);
    t->gcs_p50 = n ? (uint32_t)g[(n - 1) / 2] : 0;
    t->gcs_max = n ? (uint32_t)g[n - 1] : 0;
}

/*
 * The leak heuristic (live.agg.lock held), evaluated every HIST_STEP_S seconds over the last
 * leak_window_s seconds of the type's history (at least leak_min_s of it):
 *   - evidence: at least 3 sampled objects of the type were allocated in the window;
 *   - retention: the GC collected at most 20% as many tracked objects as were allocated;
 *   - growth: the estimated live count grew by at least 20%, with at least 3 objects tracked;
 *   - aging: the oldest live object aged by at least half the window (what was live at the start
 *     is still live), and the median age grew by at least a tenth of it (new samples keep the
 *     median of a leak well below the oldest age, so this only rules out a lone immortal).
 * A cache whose entries are replaced fails retention and aging (old entries die, ages reset);
 * garbage fails retention; a stable population fails growth.
 */
static void judge(struct live_type *t)
{
    t->leak = 0;
    t->reason[0] = 0;
    if (t->n < 3)
        return;
    const struct hist_point *last = &t->hist[(t->head + HIST_N - 1) % HIST_N];
    const struct hist_point *first = NULL;
    for (int k = t->n; k >= 1; k--) {
        const struct hist_point *p = &t->hist[(t->head + HIST_N - k) % HIST_N];
        if (last->t - p->t <= live.leak_window_s + 1e-6) {
            first = p;
            break;
        }
    }
    if (!first)
        return;
    double span = last->t - first->t;
    if (span + 1e-6 < live.leak_min_s)
        return;
    uint64_t births = last->births - first->births;
    uint64_t deaths = last->deaths - first->deaths;
    int evidence = births >= 3;
    int retained = (double)deaths <= 0.2 * (double)births;
    int growth = last->count > first->count && last->count >= 1.2 * first->count &&
                 last->tracked >= 3;
    int aging = last->maxage - first->maxage >= 0.5 * span &&
                last->p50 - first->p50 >= 0.1 * span;
    t->leak = evidence && retained && growth && aging;
    snprintf(t->reason, sizeof t->reason,
             "over %.0f s: live %.0f -> %.0f (tracked %u -> %u), %llu sampled, %llu collected, "
             "oldest %.0f -> %.0f s, median age %.0f -> %.0f s",
             span, first->count, last->count, first->tracked, last->tracked,
             (unsigned long long)births, (unsigned long long)deaths, (double)first->maxage,
             (double)last->maxage, (double)first->p50, (double)last->p50);
}

/* live.agg.lock held. With the type table 3/4 full, gives back the rows of types that have had
 * no tracked object and no new sample for the last IDLE_POINTS history points (and that no
 * slot's stack still names): over weeks, the types an app ever allocated (generic
 * instantiations, closures, async state machines) would fill the table, and every type first
 * seen after that would be "[other types]" for the process's life, a leak in it never flagged. */
#define IDLE_POINTS 6
static void recycle_types(const struct prof_live_type *sum)
{
    if (live.agg.ntypes < MAX_TYPES - MAX_TYPES / 4)
        return;
    uint8_t *named = calloc(MAX_TYPES, 1);
    if (!named)
        return;
    for (uint32_t i = 0; i < live.cap; i++)
        if (live.agg.meta[i].seq)
            named[live.agg.meta[i].type] = 1;
    int freed = 0;
    for (uint32_t k = 1; k < live.agg.ntypes; k++) {
        struct live_type *t = &live.agg.types[k];
        if (!t->name || named[k] || sum[k].tracked || t->n < IDLE_POINTS)
            continue;
        int idle = 1;
        for (int j = 1; j <= IDLE_POINTS && idle; j++) {
            const struct hist_point *p = &t->hist[(t->head + HIST_N - j) % HIST_N];
            idle = !p->tracked && p->births == t->births;
        }
        if (!idle)
            continue;
        memset(t, 0, sizeof *t);
        freed++;
    }
    if (freed) {
        memset(live.agg.type_hash, 0, sizeof live.agg.type_hash);
        for (uint32_t k = 0; k < live.agg.ntypes; k++)
            if (live.agg.types[k].name)
                type_hash_put(k);
        live.agg.types_recycled += (uint64_t)freed;
    }
    free(named);
}

/* live.agg.lock held: appends a history point for every type and re-judges it. */
static void history_step(double now)
{
    size_t cap = live.cap ? live.cap : 1;
    struct obj *objs = malloc(cap * sizeof *objs);
    double *scratch = malloc(3 * cap * sizeof *scratch);
    struct prof_live_type *sum = calloc(MAX_TYPES, sizeof *sum);
    if (!objs || !scratch || !sum)
        goto out;
    size_t n = collect(objs, now, NULL);
    qsort(objs, n, sizeof *objs, cmp_obj);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && objs[j].type == objs[i].type)
            j++;
        summarize(objs + i, j - i, scratch, &sum[objs[i].type]);
        i = j;
    }
    for (uint32_t k = 0; k < live.agg.ntypes; k++) {
        struct live_type *t = &live.agg.types[k];
        if (!t->name || (!sum[k].tracked && !t->n && !t->births))
            continue;
        struct hist_point *p = &t->hist[t->head];
        p->t = now;
        p->count = sum[k].count;
        p->tracked = sum[k].tracked;
        p->p50 = (float)sum[k].age_s.p50;
        p->maxage = (float)sum[k].age_s.max;
        p->births = t->births;
        p->deaths = t->deaths;
        t->head = (t->head + 1) % HIST_N;
        if (t->n < HIST_N)
            t->n++;
        judge(t);
    }
    recycle_types(sum);
out:
    free(objs);
    free(scratch);
    free(sum);
}

void prof_live_tick(double now_unix)
{
    if (!live.enabled)
        return;
    pthread_mutex_lock(&live.agg.lock);
    for (uint32_t i = 0; i < live.cap; i++)
        if (live.agg.meta[i].seq && !meta_current(i))
            retire_meta(i);
    if (!live.agg.next_hist)
        live.agg.next_hist = now_unix + HIST_STEP_S;
    if (now_unix >= live.agg.next_hist) {
        history_step(now_unix);
        live.agg.next_hist += HIST_STEP_S;
        if (live.agg.next_hist < now_unix)
            live.agg.next_hist = now_unix + HIST_STEP_S;
    }
    pthread_mutex_unlock(&live.agg.lock);
}

/* ---- readers (any thread) ---- */

int prof_live_report(struct prof_live_report *out)
{
    memset(out, 0, sizeof *out);
    out->enabled = live.enabled;
    out->disabled_reason = live.why_off;
    out->cap = live.cap;
    out->untracked = LD(&live.tab.untracked);
    out->overflow = LD(&live.tab.overflow);
    out->handle_failures = LD(&live.tab.handle_failures);
    out->sampling_shift = LD(&live.tab.shift);
    out->gcs = LD(&live.tab.gcs);
    out->capped = out->sampling_shift > 0 || LD(&live.tab.full_events) > 0 || out->overflow > 0;
    out->leak_window_s = live.leak_window_s;
    out->leak_min_s = live.leak_min_s;
    if (!live.enabled)
        return 0;
    double now = prof_unix_now();
    struct obj *objs = malloc((size_t)live.cap * sizeof *objs);
    double *scratch = malloc(3 * (size_t)live.cap * sizeof *scratch);
    out->types = calloc(MAX_TYPES, sizeof *out->types);
    if (!objs || !scratch || !out->types) {
        free(objs);
        free(scratch);
        free(out->types);
        out->types = NULL;
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&live.agg.lock);
    out->deaths = live.agg.deaths;
    out->types_recycled = live.agg.types_recycled;
    size_t n = collect(objs, now, NULL);
    out->tracked = (uint32_t)n;
    qsort(objs, n, sizeof *objs, cmp_obj);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && objs[j].type == objs[i].type)
            j++;
        struct live_type *src = &live.agg.types[objs[i].type];
        struct prof_live_type *t = &out->types[out->ntypes++];
        t->type = src->name;
        summarize(objs + i, j - i, scratch, t);
        t->leak_suspect = src->leak;
        snprintf(t->leak_reason, sizeof t->leak_reason, "%s", src->reason);
        t->hist = src->n ? malloc((size_t)src->n * sizeof *t->hist) : NULL;
        if (src->n && !t->hist)
            rc = -1;
        for (int k = 0; t->hist && k < src->n; k++) {
            const struct hist_point *p = &src->hist[(src->head + HIST_N - src->n + k) % HIST_N];
            t->hist[k].t = p->t;
            t->hist[k].count = p->count;
        }
        t->nhist = t->hist ? src->n : 0;
        i = j;
    }
    pthread_mutex_unlock(&live.agg.lock);
    free(objs);
    free(scratch);
    /* by estimated bytes, descending (insertion sort: at most MAX_TYPES rows) */
    for (size_t i = 1; i < out->ntypes; i++) {
        struct prof_live_type key = out->types[i];
        size_t j = i;
        while (j > 0 && out->types[j - 1].bytes < key.bytes) {
            out->types[j] = out->types[j - 1];
            j--;
        }
        out->types[j] = key;
    }
    return rc;
}

void prof_live_report_free(struct prof_live_report *r)
{
    for (size_t i = 0; r->types && i < r->ntypes; i++)
        free(r->types[i].hist);
    free(r->types);
    r->types = NULL;
    r->ntypes = 0;
}

/* ---- views: a call-path trie built from the live objects' stacks ---- */

struct trie {
    uint32_t *parent;
    const char **name;
    size_t n, cap;
    uint32_t *hash; /* node + 1 */
    size_t hcap;
};

static uint32_t trie_child(struct trie *t, uint32_t parent, const char *name)
{
    uint64_t h = ((uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull) ^ (parent * 0xC2B2AE3Dull);
    size_t k = (size_t)(h >> 17) & (t->hcap - 1);
    for (;;) {
        uint32_t v = t->hash[k];
        if (!v)
            break;
        if (t->parent[v - 1] == parent && t->name[v - 1] == name)
            return v - 1;
        k = (k + 1) & (t->hcap - 1);
    }
    if (t->n >= t->cap)
        return parent; /* cannot happen: cap counts every frame */
    uint32_t node = (uint32_t)t->n++;
    t->parent[node] = parent;
    t->name[node] = name;
    t->hash[k] = node + 1;
    return node;
}

int prof_live_view(const char *filter, struct prof_view *out)
{
    memset(out, 0, sizeof *out);
    out->kind = -1;
    out->t_from = out->t_to = prof_unix_now();
    int rc = -1;
    struct trie t = {0};
    pthread_mutex_lock(&live.agg.lock);
    size_t frames = 1, objs = 0;
    for (uint32_t i = 0; live.enabled && i < live.cap; i++)
        if (meta_current(i)) {
            frames += live.agg.meta[i].nframes;
            objs++;
        }
    t.cap = frames;
    t.hcap = 16;
    while (t.hcap < 2 * frames)
        t.hcap <<= 1;
    t.parent = malloc(t.cap * sizeof *t.parent);
    t.name = malloc(t.cap * sizeof *t.name);
    t.hash = calloc(t.hcap, sizeof *t.hash);
    out->rows = malloc((objs ? objs : 1) * sizeof *out->rows);
    if (!t.parent || !t.name || !t.hash || !out->rows)
        goto unlock;
    t.parent[0] = 0;
    t.name[0] = "all";
    t.n = 1;
    for (uint32_t i = 0; live.enabled && i < live.cap; i++) {
        if (!meta_current(i))
            continue;
        struct live_meta *m = &live.agg.meta[i];
        const char *type = live.agg.types[m->type].name;
        if (filter && strcmp(type, filter))
            continue;
        struct live_slot *s = &live.tab.slots[i];
        uint32_t node = 0;
        for (uint32_t f = 0; f < m->nframes; f++)
            node = trie_child(&t, node, m->frames[f]);
        double mult = ldexp(1.0, (int)LD(&s->shift));
        struct prof_row *r = &out->rows[out->nrows++];
        r->node = node;
        r->tid = m->tid;
        r->label = type;
        r->v[0] = llround(ld_d(&s->count_w) * mult);
        r->v[1] = llround(ld_d(&s->bytes_w) * mult);
        r->v[2] = 1;
    }
    rc = 0;
unlock:
    pthread_mutex_unlock(&live.agg.lock);
    free(t.hash);
    if (rc) {
        free(t.parent);
        free(t.name);
        free(out->rows);
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->parent = t.parent;
    out->name = t.name;
    out->nnodes = t.n;
    return 0;
}

int prof_live_pprof_add(pprof_builder *b, int ncols, const int slot_to_col[PROF_NVALUES],
                        const char *label_key)
{
    const char **leaf_first = malloc((REC_MAX_FRAMES + 2) * sizeof *leaf_first);
    int64_t *vals = calloc((size_t)(ncols > 0 ? ncols : 1), sizeof *vals);
    if (!leaf_first || !vals) {
        free(leaf_first);
        free(vals);
        return -1;
    }
    int rc = 0;
    double now = prof_unix_now();
    pthread_mutex_lock(&live.agg.lock);
    for (uint32_t i = 0; live.enabled && i < live.cap; i++) {
        if (!meta_current(i))
            continue;
        struct live_meta *m = &live.agg.meta[i];
        struct live_slot *s = &live.tab.slots[i];
        int n = 0;
        for (uint32_t f = m->nframes; f > 0 && n < REC_MAX_FRAMES + 2; f--)
            leaf_first[n++] = m->frames[f - 1];
        double mult = ldexp(1.0, (int)LD(&s->shift));
        int64_t v[PROF_NVALUES] = {llround(ld_d(&s->count_w) * mult),
                                   llround(ld_d(&s->bytes_w) * mult), 1};
        memset(vals, 0, (size_t)ncols * sizeof *vals);
        for (int k = 0; k < PROF_NVALUES; k++)
            if (slot_to_col[k] >= 0 && slot_to_col[k] < ncols)
                vals[slot_to_col[k]] += v[k];
        char tid[16];
        snprintf(tid, sizeof tid, "%u", m->tid);
        double age = now - (double)LD(&s->t_alloc_ms) / 1000.0;
        const char *keys[4] = {label_key ? label_key : "object type", "thread id", "age",
                               "gcs survived"};
        const char *strs[4] = {live.agg.types[m->type].name, tid, NULL, NULL};
        int64_t nums[4] = {0, 0, age > 0 ? (int64_t)age : 0, (int64_t)LD(&s->gcs)};
        const char *units[4] = {NULL, NULL, "seconds", "count"};
        if (pprof_add_sample_ex(b, leaf_first, n, vals, keys, strs, nums, units, 4) < 0)
            rc = -1;
    }
    pthread_mutex_unlock(&live.agg.lock);
    free(leaf_first);
    free(vals);
    return rc;
}

size_t prof_live_mem_bytes(void)
{
    if (!live.tab.slots)
        return 0;
    return (size_t)live.cap * (sizeof *live.tab.slots + sizeof *live.agg.meta) +
           (live.cap + 63) / 64 * sizeof *live.tab.live_bits + MAX_TYPES * sizeof *live.agg.types;
}

const struct prof_kind prof_live_kind = {
    .name = "live",
    .profile = PROFILE_LIVE,
    .tick = prof_live_tick,
    .mem_bytes = prof_live_mem_bytes,
    .mem_name = "live_objects",
};
