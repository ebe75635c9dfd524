/*
 * prof_gc_events.c - prof_gc's runtime side: the runtime's GC events (GCStart, GCEnd,
 * GCHeapStats, GCPerHeapHistory, GCGlobalHeapHistory, GCSuspendEEBegin/GCRestartEEEnd), delivered
 * synchronously on the thread that runs the GC or suspends the runtime (app threads, dedicated GC
 * threads), possibly while the runtime is suspended: fields are copied into fixed per-GC and
 * per-pause slots with atomics, no malloc, no lock, no I/O beyond two CPU clock reads per app
 * thread's GC pause and a thread name asked a few times per thread.
 * clrscope-agg and the readers read what they left through the gc_events_* functions
 * (prof_gc_int.h), with atomics too.
 */
#include "prof_gc.h"
#include "prof_gc_int.h"

#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "prof_core.h"

#define PAUSE_SLOTS 16u           /* threads suspending the runtime at once */
#define SETTLE_NS   200000000LL   /* a GC's trailing events come within this after GCEnd */
#define STUCK_NS    30000000000LL /* a GC without GCEnd for this long is reported incomplete */
#define STALE_NS    60000000000LL /* a pause slot older than this may be taken over */

/* Relaxed atomics: every field shared with runtime threads goes through these. */
#define LD(x)     __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v)  __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)
/* A slot's fields are reset with release stores after its new number is stored, and read with
 * acquire loads before the number is read again: a reader that sees a reset field sees the new
 * number (a seqlock keyed by the GC number, without fences, which TSan cannot check). */
#define STR(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define LDA(x)    __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

enum { ST_STARTED = 1, ST_ENDED = 2, ST_STATS = 4, ST_HIST = 8 };

/* One GC in flight, indexed by number % GC_SLOTS. `number` is stored before the other fields
 * are reset and re-read after they are copied, so a reader detects a slot reused under it. */
struct gc_slot {
    uint64_t number;
    uint32_t state, gen, reason, type;
    int64_t t_start, t_end; /* CLOCK_MONOTONIC ns */
    int64_t pause_ns;
    uint64_t before, after_hist, after, promoted;
    uint64_t heaps_seen; /* GCPerHeapHistory heap indexes already added (bit per heap < 64) */
};

/* One thread's suspension of the runtime, from GCSuspendEEBegin to GCRestartEEEnd. A slot stays
 * its thread's after the end (ended: free for any thread to claim), so that an end delivered
 * twice (a second in-process session) is told from an end without a beginning.
 *
 * Who owns a slot, whether its pause is open, and since when (monotonic seconds) are one word,
 * changed only by CAS: when two threads suspend at once (an app thread's GC and clrscope's own
 * sampler), separate fields would let the second take the slot the first had just claimed but
 * not yet marked open, and the first thread's GC would lose its pause (unpaired end,
 * pause_ms 0). */
enum {
    PS_GC = 1,
    PS_APP = 4,       /* a GC run by an app thread */
    PS_PERF = 8,      /* its perf clock */
    PS_UNCLOCKED = 16 /* its clock not read: one pause in clock_every is (gc_events_clock_every) */
};
enum { PO_UNUSED = 0, PO_OPEN = 1, PO_ENDED = 2 };
#define PO_MAKE(tid, st, sec) \
    ((uint64_t)(tid) << 32 | (uint64_t)(st) << 28 | ((uint64_t)(sec) & 0x0fffffffu))
#define PO_TID(o) ((uint32_t)((o) >> 32))
#define PO_ST(o) ((uint32_t)((o) >> 28) & 3u)
#define PO_SEC(o) ((int64_t)((o) & 0x0fffffffu))
struct pause_slot {
    uint64_t owner; /* PO_MAKE(tid, state, second claimed) */
    uint32_t flags;
    int64_t t_begin;
    int64_t cpu_begin; /* the suspending app thread's CPU clock, -1 = not read */
    uint64_t starts_at_begin, fg_starts_at_begin;
};

/* The module's runtime side: written by runtime threads in the event callbacks, read by
 * clrscope-agg and the readers; every field with atomics. */
static struct gc_events_state {
    struct gc_slot slots[GC_SLOTS];
    struct pause_slot pause[PAUSE_SLOTS];
    uint64_t by_depth[3], background, induced, starts, fg_starts, first_number;
    uint64_t last_started, last_fg, last_bg;
    uint64_t pause_ns_total, lost_pauses;
    /* app threads' GC pauses: their wall time, their count, and their threads' CPU with the
     * wall time of the pauses it was read at */
    uint64_t user_wall_ns, user_pauses, user_cpu_ns, user_wall_clocked_ns;
    uint32_t clock_every; /* read the clock at one app pause in this many (0, 1: every one) */
    uint64_t unpaired, lost_user;
    uint64_t heap[GC_NHEAPS];
    uint32_t heap_count;
    int bgc_seen;
    int enabled;
} gc_events;

/* Which kind of thread is running us: a dedicated GC thread or anything else. The name is asked
 * once per thread (a system call, three per GC: 0.1 % of an ASP.NET Core server's CPU); a thread
 * that was "anything else" is asked again at its 64th and 4096th call, in case it was named
 * since, and then no more: this runs inside GC pauses, where every system call is a chance for
 * the kernel to switch to another thread (see prof_gc_clock.c). */
static int self_kind(void)
{
    static PROF_TLS int kind = -1;
    static PROF_TLS uint32_t calls;
    if (kind > THR_OTHER)
        return kind;
    if (kind == THR_OTHER && ++calls != 64 && calls != 4096)
        return kind;
    char name[17] = "";
    kind = THR_OTHER;
    if (prctl(PR_GET_NAME, name, 0, 0, 0))
        return kind;
    if (!strncmp(name, ".NET Server GC", 14))
        kind = THR_SERVER_GC;
    else if (!strncmp(name, ".NET BGC", 8))
        kind = THR_BGC;
    return kind;
}

static uint32_t u32_at(const BYTE *d, ULONG len, ULONG off)
{
    uint32_t v = 0;
    if (off + 4 <= len)
        memcpy(&v, d + off, 4);
    return v;
}

static uint64_t u64_at(const BYTE *d, ULONG len, ULONG off)
{
    uint64_t v = 0;
    if (off + 8 <= len)
        memcpy(&v, d + off, 8);
    return v;
}

static int pause_take(struct pause_slot *p, uint64_t cur, uint32_t tid, int64_t sec)
{
    return __atomic_compare_exchange_n(&p->owner, &cur, PO_MAKE(tid, PO_OPEN, sec), 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Claims a slot for `tid` in a small table, marked open: its own (if nobody took it since), then
 * one never used, ended or stale. */
static struct pause_slot *pause_claim(uint32_t tid, int64_t now)
{
    int64_t sec = now / 1000000000LL;
    for (unsigned i = 0; i < PAUSE_SLOTS; i++) {
        uint64_t cur = LD(gc_events.pause[i].owner);
        if (PO_TID(cur) == tid && pause_take(&gc_events.pause[i], cur, tid, sec))
            return &gc_events.pause[i];
    }
    for (unsigned i = 0; i < PAUSE_SLOTS; i++) {
        uint64_t cur = LD(gc_events.pause[i].owner);
        if (PO_ST(cur) == PO_OPEN &&
            ((sec - PO_SEC(cur)) & 0x0fffffff) < STALE_NS / 1000000000LL)
            continue;
        if (pause_take(&gc_events.pause[i], cur, tid, sec))
            return &gc_events.pause[i];
    }
    return NULL;
}

/* The calling thread's slot (open or ended), or NULL. */
static struct pause_slot *pause_find(uint32_t tid, uint64_t *owner)
{
    for (unsigned i = 0; i < PAUSE_SLOTS; i++) {
        uint64_t cur = LD(gc_events.pause[i].owner);
        if (PO_ST(cur) != PO_UNUSED && PO_TID(cur) == tid) {
            *owner = cur;
            return &gc_events.pause[i];
        }
    }
    return NULL;
}

static struct gc_slot *slot_of(uint64_t number)
{
    if (!number)
        return NULL;
    struct gc_slot *s = &gc_events.slots[number % GC_SLOTS];
    return LD(s->number) == number ? s : NULL;
}

/* The GC a number-less event (heap stats, heap history, pause end) belongs to: a background GC's
 * events come from a ".NET BGC" thread, every other GC's from the thread running it. */
static struct gc_slot *current_slot(void)
{
    return slot_of(self_kind() == THR_BGC ? LD(gc_events.last_bg) : LD(gc_events.last_fg));
}

static int is_induced(uint32_t reason)
{
    return reason == 1 || reason == 7 || reason == 10 || reason == 17;
}

/* The events number GCs with 32 bits; clrscope with 64, the high half taken from the newest GC
 * started (numbers within 2^31 of it): after 2^32 GCs (50 days at 1,000 a second) the numbers
 * went on from 1 while everything waited for the next one after 4,294,967,295. */
static uint64_t widen_number(uint32_t count)
{
    uint64_t last = LD(gc_events.last_started);
    uint64_t n = (last & ~0xffffffffull) | count;
    if (n + 0x80000000ull < last)
        n += 1ull << 32;
    else if (n > last + 0x80000000ull && n >= 1ull << 32)
        n -= 1ull << 32;
    return n;
}

static void on_gc_start(const BYTE *d, ULONG len, int64_t now)
{
    uint32_t count32 = u32_at(d, len, 0), depth = u32_at(d, len, 4);
    uint32_t reason = u32_at(d, len, 8), type = u32_at(d, len, 12);
    if (!count32)
        return;
    uint64_t count = widen_number(count32);
    if (depth > 2)
        depth = 2;
    struct gc_slot *s = &gc_events.slots[count % GC_SLOTS];
    /* a second in-process session (heap snapshots) delivers every event once more */
    if (LD(s->number) == count && (LD(s->state) & ST_STARTED))
        return;
    __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&s->number, (uint64_t)count, __ATOMIC_RELEASE);
    STR(s->gen, depth);
    STR(s->reason, reason);
    STR(s->type, type);
    STR(s->t_start, now);
    STR(s->t_end, 0);
    STR(s->pause_ns, 0);
    STR(s->before, 0);
    STR(s->after_hist, 0);
    STR(s->after, 0);
    STR(s->promoted, 0);
    STR(s->heaps_seen, 0);
    __atomic_store_n(&s->state, ST_STARTED, __ATOMIC_RELEASE);

    uint64_t zero = 0;
    __atomic_compare_exchange_n(&gc_events.first_number, &zero, (uint64_t)count, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    ADD(gc_events.by_depth[depth], 1);
    if (type == GC_TYPE_BACKGROUND) {
        ADD(gc_events.background, 1);
        ST(gc_events.bgc_seen, 1);
        ST(gc_events.last_bg, (uint64_t)count);
    } else {
        ST(gc_events.last_fg, (uint64_t)count);
        __atomic_fetch_add(&gc_events.fg_starts, 1, __ATOMIC_RELEASE);
    }
    if (is_induced(reason))
        ADD(gc_events.induced, 1);
    ST(gc_events.last_started, (uint64_t)count);
    __atomic_fetch_add(&gc_events.starts, 1, __ATOMIC_RELEASE);
}

static void on_gc_end(const BYTE *d, ULONG len, int64_t now)
{
    uint32_t count32 = u32_at(d, len, 0);
    struct gc_slot *s = count32 ? slot_of(widen_number(count32)) : NULL;
    if (!s)
        return;
    ST(s->t_end, now);
    __atomic_fetch_or(&s->state, ST_ENDED, __ATOMIC_RELEASE);
}

/* GCHeapStats V1/V2: size and promoted bytes per generation, pairs of u64 from offset 0 (gen0..3),
 * POH at 94 (V2). */
static void on_heap_stats(const BYTE *d, ULONG len)
{
    if (len < 64)
        return;
    uint64_t size[GC_NHEAPS], prom[GC_NHEAPS];
    for (int g = 0; g < 4; g++) {
        size[g] = u64_at(d, len, (ULONG)g * 16);
        prom[g] = u64_at(d, len, (ULONG)g * 16 + 8);
    }
    size[GC_POH] = u64_at(d, len, 94);
    prom[GC_POH] = u64_at(d, len, 102);
    uint64_t total = 0;
    for (int g = 0; g < GC_NHEAPS; g++) {
        ST(gc_events.heap[g], size[g]);
        total += size[g];
    }
    struct gc_slot *s = current_slot();
    if (!s)
        return;
    uint32_t gen = LD(s->gen);
    uint64_t promoted = 0;
    for (uint32_t g = 0; g <= gen && g < 3; g++)
        promoted += prom[g];
    if (gen >= 2)
        promoted += prom[GC_LOH] + prom[GC_POH];
    ST(s->after, total);
    ST(s->promoted, promoted);
    __atomic_fetch_or(&s->state, ST_STATS, __ATOMIC_RELEASE);
}

/* GCPerHeapHistory_V3: fixed header of 86 bytes (Count u32 at 82), then Count records of ten
 * pointer-sized values: SizeBefore, FreeListBefore, FreeObjBefore, SizeAfter, ... One event per
 * heap: the sizes add up. */
static void on_per_heap_history(const BYTE *d, ULONG len)
{
    if (len < 86)
        return;
    uint32_t count = u32_at(d, len, 82);
    uint64_t before = 0, after = 0;
    for (uint32_t g = 0; g < count && g < 8 && 86 + (g + 1) * 80 <= len; g++) {
        before += u64_at(d, len, 86 + g * 80);
        after += u64_at(d, len, 86 + g * 80 + 24);
    }
    struct gc_slot *s = current_slot();
    if (!s)
        return;
    uint32_t heap = u32_at(d, len, 70);
    if (heap < 64 &&
        (__atomic_fetch_or(&s->heaps_seen, 1ull << heap, __ATOMIC_RELAXED) & (1ull << heap)))
        return; /* delivered twice (second session) */
    ADD(s->before, before);
    ADD(s->after_hist, after);
    __atomic_fetch_or(&s->state, ST_HIST, __ATOMIC_RELEASE);
}

/* GCSuspendEEBegin: the runtime starts stopping threads. Reasons 1 (ForGC) and 6 (ForGCPrep) are
 * the GC's; others (our own sampler's SuspendRuntime, the debugger) are not pauses of the GC.
 * Begin and end are paired per thread: another thread's suspension event may interleave.
 *
 * Which thread runs the GC: in dotnet/runtime's GC (GCHeap::GarbageCollectGeneration, in
 * src/coreclr/gc), a workstation GC (no MULTIPLE_HEAPS) calls GCToEEInterface::SuspendEE, then
 * garbage_collect, then GCToEEInterface::RestartEE on the thread that asked for it: the app
 * thread whose allocation failed, or that called GC.Collect. A server GC instead sets
 * ee_suspend_event and waits, and heap 0's ".NET Server GC" thread suspends the runtime and
 * collects with the other GC threads; a background GC's own pauses come from its ".NET BGC"
 * thread. GCToEEInterface::SuspendEE writes GCSuspendEEBegin on the calling thread before it
 * stops any thread, and RestartEE writes GCRestartEEEnd on it after every thread is resumed
 * (CoreCLR: ThreadSuspend::SuspendEE/RestartEE, src/coreclr/vm/threadsuspend.cpp); the
 * in-process EventPipe session hands each event to clrscope synchronously on the thread that
 * wrote it. So between the two events of a pause, an app thread's CPU clock counts exactly the
 * CPU it spent suspending the runtime, collecting and restarting it; a dedicated GC thread's CPU
 * is read from its own clock every second instead (prof_gc_cpu.c), so nothing counts twice.
 *
 * The clock is read here before any thread is stopped and at GCRestartEEEnd after they all run
 * again, with the read that does not make the kernel switch threads (prof_gc_clock.c). */
/* Whether this app thread's pause has its clock read: always while app threads pause less than
 * PROF_GC_CLOCKED_PER_S times a second, else one pause in clock_every, drawn at random (a
 * per-thread xorshift) so that no GC pattern lines up with the choice. A read is a system call
 * (~1-6 us on a VM) at each end of the pause: at 100+ GCs a second, most of the GC events'
 * cost. The pauses not read are estimated by clrscope-agg from their wall time (prof_gc.c). */
static int clock_this_pause(void)
{
    uint32_t every = LD(gc_events.clock_every);
    if (every <= 1)
        return 1;
    static PROF_TLS uint64_t rng;
    if (!rng)
        rng = ((uint64_t)prof_self_tid() << 32 | 1) * 0x9E3779B97F4A7C15ull;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng >> 11) % every == 0;
}

static void on_suspend_begin(const BYTE *d, ULONG len, int64_t now)
{
    uint32_t reason = u32_at(d, len, 0);
    int gc = reason == 1 || reason == 6;
    /* a dedicated GC thread's CPU is read from its own clock every second */
    int app = gc && self_kind() == THR_OTHER;
    struct pause_slot *p = pause_claim(prof_self_tid(), now);
    if (!p) {
        if (gc)
            ADD(gc_events.lost_pauses, 1);
        if (app)
            ADD(gc_events.lost_user, 1);
        return;
    }
    ST(p->t_begin, now);
    ST(p->starts_at_begin, __atomic_load_n(&gc_events.starts, __ATOMIC_ACQUIRE));
    ST(p->fg_starts_at_begin, __atomic_load_n(&gc_events.fg_starts, __ATOMIC_ACQUIRE));
    int perf = 0, clocked = app && clock_this_pause();
    ST(p->cpu_begin, clocked ? gc_clock_self_ns(&perf) : -1);
    __atomic_store_n(&p->flags, (gc ? PS_GC : 0) | (app ? PS_APP : 0) | (perf ? PS_PERF : 0) |
                                    (app && !clocked ? PS_UNCLOCKED : 0),
                     __ATOMIC_RELEASE);
}

static void on_restart_end(int64_t now)
{
    uint64_t owner = 0;
    struct pause_slot *p = pause_find(prof_self_tid(), &owner);
    if (!p) {
        ADD(gc_events.unpaired, 1);
        return;
    }
    if (PO_ST(owner) != PO_OPEN)
        return; /* delivered twice (second session) */
    uint32_t flags = __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
    int64_t ns = now - LD(p->t_begin);
    uint64_t started_before = LD(p->starts_at_begin), fg_before = LD(p->fg_starts_at_begin);
    int64_t cpu_begin = LD(p->cpu_begin);
    uint64_t ended = PO_MAKE(PO_TID(owner), PO_ENDED, PO_SEC(owner));
    if (!__atomic_compare_exchange_n(&p->owner, &owner, ended, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return; /* taken over as stale meanwhile: not this pause's figures */
    if (!(flags & PS_GC) || ns < 0)
        return;
    if (flags & PS_APP) {
        if (!(flags & PS_UNCLOCKED)) {
            int perf = 0;
            int64_t cpu_end = cpu_begin >= 0 ? gc_clock_self_ns(&perf) : -1;
            if (cpu_begin >= 0 && cpu_end >= cpu_begin && perf == !!(flags & PS_PERF)) {
                ADD(gc_events.user_cpu_ns, (uint64_t)(cpu_end - cpu_begin));
                ADD(gc_events.user_wall_clocked_ns, (uint64_t)ns);
            } else {
                ADD(gc_events.lost_user, 1);
            }
        }
        ADD(gc_events.user_wall_ns, (uint64_t)ns);
        ADD(gc_events.user_pauses, 1);
    }
    ADD(gc_events.pause_ns_total, (uint64_t)ns);
    /* A GC that started inside this pause owns it. A background GC starts in the same pause as
     * the ephemeral GC that runs with it (usually the background GC first, sometimes after it):
     * the ephemeral one owns that pause whatever the order, the background GC its final pause.
     * With no GC started inside, it is the final pause of the running background GC. */
    struct gc_slot *s = NULL;
    if (__atomic_load_n(&gc_events.fg_starts, __ATOMIC_ACQUIRE) > fg_before)
        s = slot_of(LD(gc_events.last_fg));
    else if (__atomic_load_n(&gc_events.starts, __ATOMIC_ACQUIRE) > started_before)
        s = slot_of(LD(gc_events.last_started));
    else if (self_kind() == THR_BGC)
        s = slot_of(LD(gc_events.last_bg));
    if (s)
        ADD(s->pause_ns, ns);
}

void prof_gc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    if (!LD(gc_events.enabled) || !data)
        return;
    int64_t now = prof_now_ns();
    /* Versions are checked: other providers of the session reuse small ids (EventPipe's own
     * ProcessInfo is id 1, version 0). */
    switch (id) {
    case 1: /* GCStart_V1/V2 */
        if ((version == 1 || version == 2) && len >= 16)
            on_gc_start(data, len, now);
        break;
    case 2: /* GCEnd_V1 */
        if (version == 1 && len >= 8)
            on_gc_end(data, len, now);
        break;
    case 4: /* GCHeapStats_V1/V2 */
        if (version == 1 || version == 2)
            on_heap_stats(data, len);
        break;
    case 204: /* GCPerHeapHistory_V3 */
        if (version == 3)
            on_per_heap_history(data, len);
        break;
    case 205: /* GCGlobalHeapHistory_V2+: NumHeaps i32 at 8 */
        if (version >= 2 && len >= 12)
            ST(gc_events.heap_count, u32_at(data, len, 8));
        break;
    case 9: /* GCSuspendEEBegin_V1 */
        if (version == 1 && len >= 4)
            on_suspend_begin(data, len, now);
        break;
    case 3: /* GCRestartEEEnd_V1 */
        if (version == 1)
            on_restart_end(now);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * What the events left, for clrscope-agg and the readers (any thread, atomics).
 */

void gc_events_enable(int on)
{
    __atomic_store_n(&gc_events.enabled, on, __ATOMIC_RELEASE);
}

void gc_events_counts(struct gc_event_counts *out)
{
    out->user_wall_ns = LD(gc_events.user_wall_ns);
    out->user_pauses = LD(gc_events.user_pauses);
    out->user_cpu_ns = LD(gc_events.user_cpu_ns);
    out->user_wall_clocked_ns = LD(gc_events.user_wall_clocked_ns);
    out->pause_ns_total = LD(gc_events.pause_ns_total);
    for (int g = 0; g < 3; g++)
        out->by_depth[g] = LD(gc_events.by_depth[g]);
    for (int g = 0; g < GC_NHEAPS; g++)
        out->heap[g] = LD(gc_events.heap[g]);
}

void gc_events_set_clock_every(uint32_t every)
{
    ST(gc_events.clock_every, every);
}

uint64_t gc_events_last_started(void)
{
    return __atomic_load_n(&gc_events.last_started, __ATOMIC_ACQUIRE);
}

uint64_t gc_events_first_number(void)
{
    return LD(gc_events.first_number);
}

static double mono_to_unix(int64_t mono)
{
    return g_core.start_unix + (double)(mono - g_core.start_mono_ns) / 1e9;
}

/* The slot's fields are read with acquire loads between two reads of its number (see STR). */
int gc_events_read_slot(uint64_t number, int64_t now, struct prof_gc_collection *rec)
{
    struct gc_slot *s = &gc_events.slots[number % GC_SLOTS];
    if (__atomic_load_n(&s->number, __ATOMIC_ACQUIRE) != number)
        return -1;
    uint32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    int64_t t_start = LDA(s->t_start), t_end = LDA(s->t_end);
    int ended = (state & ST_ENDED) != 0;
    if (!(state & ST_STARTED))
        return 0;
    if (ended ? now - t_end < SETTLE_NS : now - t_start < STUCK_NS)
        return 0;
    rec->number = number;
    rec->generation = (int)LDA(s->gen);
    rec->reason = LDA(s->reason);
    rec->type = LDA(s->type);
    rec->complete = ended && (state & ST_STATS);
    rec->t = mono_to_unix(t_start);
    rec->duration_ms = ended ? (double)(t_end - t_start) / 1e6 : 0;
    rec->pause_ms = (double)LDA(s->pause_ns) / 1e6;
    rec->heap_before = (state & ST_HIST) ? LDA(s->before) : 0;
    rec->heap_after = (state & ST_STATS)  ? LDA(s->after)
                      : (state & ST_HIST) ? LDA(s->after_hist)
                                          : 0;
    rec->promoted = LDA(s->promoted);
    return __atomic_load_n(&s->number, __ATOMIC_ACQUIRE) == number ? 1 : -1;
}

void gc_events_totals(struct prof_gc_totals *t)
{
    memset(t, 0, sizeof *t);
    for (int g = 0; g < 3; g++)
        t->by_depth[g] = LD(gc_events.by_depth[g]);
    t->collection_count[2] = t->by_depth[2];
    t->collection_count[1] = t->by_depth[1] + t->by_depth[2];
    t->collection_count[0] = t->by_depth[0] + t->collection_count[1];
    t->collections = t->collection_count[0];
    t->background = LD(gc_events.background);
    t->induced = LD(gc_events.induced);
    t->first_number = LD(gc_events.first_number);
    t->pause_s = (double)LD(gc_events.pause_ns_total) / 1e9;
    for (int g = 0; g < GC_NHEAPS; g++)
        t->heap[g] = LD(gc_events.heap[g]);
    /* GCs started and not ended, among the slots still holding their GC */
    uint64_t hi = LD(gc_events.last_started);
    for (uint64_t n = hi; n > 0 && hi - n < GC_SLOTS; n--) {
        struct gc_slot *s = &gc_events.slots[n % GC_SLOTS];
        if (LD(s->number) != n)
            continue;
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if ((st & ST_STARTED) && !(st & ST_ENDED))
            for (uint32_t g = 0; g <= LD(s->gen) && g < 3; g++)
                t->in_progress[g]++;
    }
    t->heap_count = (int)LD(gc_events.heap_count);
    t->concurrent = LD(gc_events.bgc_seen) != 0;
    t->unpaired_callbacks = LD(gc_events.unpaired);
    t->lost_pauses = LD(gc_events.lost_pauses);
    t->lost_blocking_gcs = LD(gc_events.lost_user);
}
