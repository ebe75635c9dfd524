/* prof_gc.c - see prof_gc.h. */
#include "prof_gc.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "prof_agg.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_store.h"

#define GC_SLOTS    1024u         /* GCs that may start between two ticks without a drop */
#define PAUSE_SLOTS 16u           /* threads suspending the runtime at once */
#define SETTLE_NS   200000000LL   /* a GC's trailing events come within this after GCEnd */
#define STUCK_NS    30000000000LL /* a GC without GCEnd for this long is reported incomplete */
#define STALE_NS    60000000000LL /* a pause slot older than this may be taken over */
#define NAME_CHECKS 3             /* ticks during which a new thread's name is re-read */
#define CPU_EVERY   32u           /* app-thread GC pauses per one read of the thread's CPU clock */

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

enum { THR_OTHER = 0, THR_SERVER_GC = 1, THR_BGC = 2 };

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
 * changed only by CAS: two threads suspending at once (an app thread's GC and clrscope's own
 * sampler) once raced here, the second taking the slot the first had just claimed but not yet
 * marked open, and the first thread's GC lost its pause (unpaired end, pause_ms 0). */
enum { PS_GC = 1, PS_APP = 4 /* a GC run by an app thread */ };
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
    int64_t cpu_begin; /* the suspending app thread's CPU clock, -1 = not measured */
    uint64_t starts_at_begin, fg_starts_at_begin;
};

struct thr {
    uint32_t tid; /* 0 = empty */
    uint8_t kind, checks;
    int64_t cpu; /* last reading, -1 = none yet */
};

/* Written by runtime threads (atomics only). */
static struct {
    struct gc_slot slots[GC_SLOTS];
    struct pause_slot pause[PAUSE_SLOTS];
    uint64_t by_depth[3], background, induced, starts, fg_starts, first_number;
    uint64_t last_started, last_fg, last_bg;
    uint64_t pause_ns_total, lost_pauses;
    /* app threads' GC pauses: wall time of all, wall and CPU time of those measured both ways */
    uint64_t user_pauses, user_wall_ns, user_sampled_wall_ns, user_sampled_cpu_ns;
    uint64_t unpaired, lost_user;
    uint64_t heap[GC_NHEAPS];
    uint32_t heap_count;
    int bgc_seen;
    int enabled;
} E;

/* Owned by clrscope-agg; what readers need is guarded by `lock`. */
static struct {
    pthread_mutex_t lock;
    int ready;
    /* thread table, rebuilt every tick (double buffer) */
    struct thr *tab, *tab2;
    uint32_t tab_cap;
    uint64_t untracked; /* threads left out of the table at the last tick */
    int gc_threads, server_threads, server_seen;
    /* baselines */
    int64_t prev_proc, prev_mono;
    uint64_t prev_user_wall, prev_sampled_wall, prev_sampled_cpu;
    double cpu_per_wall;   /* app threads' CPU per second of their GC pauses (estimate, <= 1) */
    double user_cpu_total; /* seconds, the sum of the per-second estimates */
    uint64_t prev_pause, prev_depth[3];
    int64_t threads_cpu_total, proc_cpu_total;
    /* per-second ring */
    struct prof_gc_second *secs;
    size_t sec_cap, sec_head, sec_n;
    /* collection ring */
    struct prof_gc_collection *coll;
    size_t coll_cap, coll_head, coll_n;
    uint64_t consumed_upto, dropped;
    /* configuration fallbacks for the mode */
    int cfg_server, cfg_concurrent;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---------------------------------------------------------------------------------------------
 * Runtime side: callbacks and events. No malloc, no locks, no I/O beyond two cheap syscalls.
 */

/* Which kind of thread is running us: a dedicated GC thread or anything else. The name is asked
 * once per thread (a system call, three per GC: 0.1 % of an ASP.NET Core server's CPU); a thread
 * that was "anything else" is asked again at its 64th and 4096th call, in case it was named
 * since, and then no more: this runs inside GC pauses, where every system call is a chance for
 * the kernel to switch to another thread (see on_suspend_begin). */
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

static int64_t self_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
        uint64_t cur = LD(E.pause[i].owner);
        if (PO_TID(cur) == tid && pause_take(&E.pause[i], cur, tid, sec))
            return &E.pause[i];
    }
    for (unsigned i = 0; i < PAUSE_SLOTS; i++) {
        uint64_t cur = LD(E.pause[i].owner);
        if (PO_ST(cur) == PO_OPEN &&
            ((sec - PO_SEC(cur)) & 0x0fffffff) < STALE_NS / 1000000000LL)
            continue;
        if (pause_take(&E.pause[i], cur, tid, sec))
            return &E.pause[i];
    }
    return NULL;
}

/* The calling thread's slot (open or ended), or NULL. */
static struct pause_slot *pause_find(uint32_t tid, uint64_t *owner)
{
    for (unsigned i = 0; i < PAUSE_SLOTS; i++) {
        uint64_t cur = LD(E.pause[i].owner);
        if (PO_ST(cur) != PO_UNUSED && PO_TID(cur) == tid) {
            *owner = cur;
            return &E.pause[i];
        }
    }
    return NULL;
}

static struct gc_slot *slot_of(uint64_t number)
{
    if (!number)
        return NULL;
    struct gc_slot *s = &E.slots[number % GC_SLOTS];
    return LD(s->number) == number ? s : NULL;
}

/* The GC a number-less event (heap stats, heap history, pause end) belongs to: a background GC's
 * events come from a ".NET BGC" thread, every other GC's from the thread running it. */
static struct gc_slot *current_slot(void)
{
    return slot_of(self_kind() == THR_BGC ? LD(E.last_bg) : LD(E.last_fg));
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
    uint64_t last = LD(E.last_started);
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
    struct gc_slot *s = &E.slots[count % GC_SLOTS];
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
    __atomic_compare_exchange_n(&E.first_number, &zero, (uint64_t)count, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    ADD(E.by_depth[depth], 1);
    if (type == GC_TYPE_BACKGROUND) {
        ADD(E.background, 1);
        ST(E.bgc_seen, 1);
        ST(E.last_bg, (uint64_t)count);
    } else {
        ST(E.last_fg, (uint64_t)count);
        __atomic_fetch_add(&E.fg_starts, 1, __ATOMIC_RELEASE);
    }
    if (is_induced(reason))
        ADD(E.induced, 1);
    ST(E.last_started, (uint64_t)count);
    __atomic_fetch_add(&E.starts, 1, __ATOMIC_RELEASE);
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
        ST(E.heap[g], size[g]);
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
 * An app thread that suspends the runtime runs the GC itself (workstation GC); the CPU it burns
 * there is the wall time of its pause times the CPU per wall second measured on every CPU_EVERY-th
 * such pause, whose thread CPU clock is read here and at GCRestartEEEnd. Not on every pause:
 * reading a thread's CPU clock is a system call that brings the kernel's accounting of the
 * running thread up to date, and when its time slice is used up the kernel switches to another
 * runnable thread right there, with the thread holding the GC (and, past SuspendEE, every other
 * thread) waiting. Read at every pause, on a core shared with another server
 * (bench/aspnet_overhead.sh), a quarter of the GCs were switched out and the app's own
 * GC.GetTotalPauseDuration() per GC grew 2x (1.2x without the reads). */
static void on_suspend_begin(const BYTE *d, ULONG len, int64_t now)
{
    uint32_t reason = u32_at(d, len, 0);
    int gc = reason == 1 || reason == 6;
    /* a dedicated GC thread's CPU is read from its own clock every second */
    int app = gc && self_kind() == THR_OTHER;
    struct pause_slot *p = pause_claim(prof_self_tid(), now);
    if (!p) {
        if (gc)
            ADD(E.lost_pauses, 1);
        if (app)
            ADD(E.lost_user, 1);
        return;
    }
    ST(p->t_begin, now);
    ST(p->starts_at_begin, __atomic_load_n(&E.starts, __ATOMIC_ACQUIRE));
    ST(p->fg_starts_at_begin, __atomic_load_n(&E.fg_starts, __ATOMIC_ACQUIRE));
    ST(p->cpu_begin, app && ADD(E.user_pauses, 1) % CPU_EVERY == 0 ? self_cpu_ns() : -1);
    __atomic_store_n(&p->flags, (gc ? PS_GC : 0) | (app ? PS_APP : 0), __ATOMIC_RELEASE);
}

static void on_restart_end(int64_t now)
{
    uint64_t owner = 0;
    struct pause_slot *p = pause_find(prof_self_tid(), &owner);
    if (!p) {
        ADD(E.unpaired, 1);
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
        int64_t cpu_end = cpu_begin >= 0 ? self_cpu_ns() : -1;
        if (cpu_end >= cpu_begin && cpu_begin >= 0) {
            ADD(E.user_sampled_cpu_ns, (uint64_t)(cpu_end - cpu_begin));
            ADD(E.user_sampled_wall_ns, (uint64_t)ns);
        }
        ADD(E.user_wall_ns, (uint64_t)ns);
    }
    ADD(E.pause_ns_total, (uint64_t)ns);
    /* A GC that started inside this pause owns it. A background GC starts in the same pause as
     * the ephemeral GC that runs with it (usually the background GC first, sometimes after it):
     * the ephemeral one owns that pause whatever the order, the background GC its final pause.
     * With no GC started inside, it is the final pause of the running background GC. */
    struct gc_slot *s = NULL;
    if (__atomic_load_n(&E.fg_starts, __ATOMIC_ACQUIRE) > fg_before)
        s = slot_of(LD(E.last_fg));
    else if (__atomic_load_n(&E.starts, __ATOMIC_ACQUIRE) > started_before)
        s = slot_of(LD(E.last_started));
    else if (self_kind() == THR_BGC)
        s = slot_of(LD(E.last_bg));
    if (s)
        ADD(s->pause_ns, ns);
}

void prof_gc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    if (!LD(E.enabled) || !data)
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
            ST(E.heap_count, u32_at(data, len, 8));
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
 * Configuration fallback for the GC mode, used until GC threads or GCs tell the truth.
 */

/* DOTNET_x, then COMPlus_x; CLRConfig reads these numbers as hexadecimal. */
static int env_flag(const char *name, int def)
{
    const char *prefixes[] = {"DOTNET_", "COMPlus_"};
    for (int i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s%s", prefixes[i], name);
        const char *v = getenv(key);
        if (v && *v)
            return strtol(v, NULL, 16) != 0;
    }
    return def;
}

/* The app's runtimeconfig.json: next to the .dll run by `dotnet`, or next to the apphost. */
static cJSON *load_runtimeconfig(void)
{
    char args[4096] = "", path[4200] = "";
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n = 0;
    if (f) {
        n = fread(args, 1, sizeof args - 1, f);
        fclose(f);
    }
    args[n] = 0;
    const char *a0 = args, *base = strrchr(a0, '/');
    base = base ? base + 1 : a0;
    if (!strcmp(base, "dotnet")) {
        for (const char *a = args + strlen(args) + 1; a < args + n; a += strlen(a) + 1) {
            size_t l = strlen(a);
            if (l > 4 && !strcmp(a + l - 4, ".dll")) {
                snprintf(path, sizeof path, "%.*s.runtimeconfig.json", (int)(l - 4), a);
                break;
            }
        }
    } else {
        char exe[4096];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (l > 0) {
            exe[l] = 0;
            snprintf(path, sizeof path, "%s.runtimeconfig.json", exe);
        }
    }
    if (!path[0] || !(f = fopen(path, "re")))
        return NULL;
    char *buf = malloc(1 << 20);
    cJSON *root = NULL;
    if (buf) {
        size_t got = fread(buf, 1, (1 << 20) - 1, f);
        buf[got] = 0;
        root = cJSON_Parse(buf);
        free(buf);
    }
    fclose(f);
    return root;
}

static int config_flag(const cJSON *props, const char *key, int def)
{
    const cJSON *v = props ? cJSON_GetObjectItemCaseSensitive(props, key) : NULL;
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v);
    if (cJSON_IsString(v))
        return !strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "1");
    return def;
}

static void read_gc_config(void)
{
    cJSON *rc = load_runtimeconfig();
    const cJSON *opts = rc ? cJSON_GetObjectItemCaseSensitive(rc, "runtimeOptions") : NULL;
    const cJSON *props = opts ? cJSON_GetObjectItemCaseSensitive(opts, "configProperties") : NULL;
    G.cfg_server = env_flag("gcServer", config_flag(props, "System.GC.Server", 0));
    G.cfg_concurrent = env_flag("gcConcurrent", config_flag(props, "System.GC.Concurrent", 1));
    cJSON_Delete(rc);
}

/* ---------------------------------------------------------------------------------------------
 * clrscope-agg side.
 */

static int read_comm(uint32_t tid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

static int classify(uint32_t tid)
{
    char comm[32];
    if (read_comm(tid, comm, sizeof comm))
        return THR_OTHER;
    if (!strncmp(comm, ".NET Server GC", 14))
        return THR_SERVER_GC;
    if (!strncmp(comm, ".NET BGC", 8))
        return THR_BGC;
    return THR_OTHER;
}

static struct thr *tab_find(struct thr *tab, uint32_t tid, int insert)
{
    uint32_t mask = G.tab_cap - 1;
    for (uint32_t i = (tid * 2654435761u) & mask, k = 0; k < G.tab_cap; i = (i + 1) & mask, k++) {
        if (tab[i].tid == tid)
            return &tab[i];
        if (!tab[i].tid)
            return insert ? &tab[i] : NULL;
    }
    return NULL;
}

/* Reads the CPU of every dedicated GC thread, adds the deltas to the CPU profile under a
 * "Garbage Collector" frame, and returns their sum. Threads that exited since the last tick take
 * their last second of CPU with them (not counted). */
static int64_t scan_gc_threads(double now_unix, int *n_gc, int *server_seen, uint64_t *untracked)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    memset(G.tab2, 0, G.tab_cap * sizeof *G.tab2);
    int64_t total = 0;
    int gc_threads = 0, server = 0;
    uint32_t used = 0;
    uint64_t skipped = 0;
    const int64_t period = 1000000000LL / (g_cfg.sampling_hz > 0 ? g_cfg.sampling_hz : 100);
    const int cpu_on = (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU) != 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (!tid)
            continue;
        if (used + 1 >= G.tab_cap / 2) {
            skipped++;
            continue;
        }
        struct thr *old = tab_find(G.tab, tid, 0);
        struct thr *t = tab_find(G.tab2, tid, 1);
        if (!t)
            continue;
        used++;
        if (old) {
            *t = *old;
        } else {
            t->tid = tid;
            t->kind = THR_OTHER;
            t->checks = 0;
            t->cpu = -1;
        }
        if (t->kind == THR_OTHER && t->checks < NAME_CHECKS) {
            t->kind = (uint8_t)classify(tid);
            t->checks++;
        }
        if (t->kind == THR_OTHER)
            continue;
        gc_threads++;
        server += t->kind == THR_SERVER_GC;
        int64_t cpu = prof_thread_cpu_ns((pid_t)tid);
        if (cpu < 0)
            continue;
        /* a GC thread seen for the first time was created after clrscope started: all its CPU
         * is new */
        int64_t delta = t->cpu >= 0 ? cpu - t->cpu : cpu;
        t->cpu = cpu;
        if (delta <= 0)
            continue;
        total += delta;
        if (cpu_on) {
            static const char *const frame[] = {"Garbage Collector"};
            int64_t samples = delta / period;
            int64_t v[PROF_NVALUES] = {samples > 0 ? samples : 1, delta, 0};
            prof_store_add(PK_CPU, now_unix, frame, 1, tid, NULL, v);
        }
    }
    closedir(d);
    struct thr *swap = G.tab;
    G.tab = G.tab2;
    G.tab2 = swap;
    *n_gc = gc_threads;
    *server_seen = server;
    *untracked = skipped;
    return total;
}

static double mono_to_unix(int64_t mono)
{
    return g_core.start_unix + (double)(mono - g_core.start_mono_ns) / 1e9;
}

/* Copies slot `number` into a record. 1 = done (rec filled), 0 = not finished yet, -1 = the
 * slot was reused for a later GC (the record is lost). */
static int read_slot(uint64_t number, int64_t now, struct prof_gc_collection *rec)
{
    struct gc_slot *s = &E.slots[number % GC_SLOTS];
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

/* Moves every settled GC into the collection ring. Called with G.lock held. */
static void consume_slots(int64_t now)
{
    uint64_t hi = __atomic_load_n(&E.last_started, __ATOMIC_ACQUIRE);
    if (!G.consumed_upto) {
        uint64_t first = LD(E.first_number);
        if (!first)
            return;
        G.consumed_upto = first - 1;
    }
    if (hi > G.consumed_upto + GC_SLOTS) { /* overrun: the oldest slots are gone */
        G.dropped += hi - GC_SLOTS - G.consumed_upto;
        G.consumed_upto = hi - GC_SLOTS;
    }
    while (G.consumed_upto < hi) {
        struct prof_gc_collection rec;
        int rc = read_slot(G.consumed_upto + 1, now, &rec);
        if (rc == 0)
            break; /* in order: wait for the oldest GC still running (a background GC) */
        G.consumed_upto++;
        if (rc < 0) {
            G.dropped++;
            continue;
        }
        G.coll[(G.coll_head + G.coll_n) % G.coll_cap] = rec;
        if (G.coll_n < G.coll_cap)
            G.coll_n++;
        else
            G.coll_head = (G.coll_head + 1) % G.coll_cap;
    }
}

void prof_gc_tick(double now_unix)
{
    if (!G.ready)
        return;
    int64_t mono = prof_now_ns();
    int64_t proc = prof_process_cpu_ns();
    int n_gc = 0, server = 0; /* dedicated GC threads, of which server GC threads */
    uint64_t untracked = 0;
    int64_t threads = scan_gc_threads(now_unix, &n_gc, &server, &untracked);
    uint64_t uwall = LD(E.user_wall_ns), swall = LD(E.user_sampled_wall_ns);
    uint64_t scpu = LD(E.user_sampled_cpu_ns);
    uint64_t pause = LD(E.pause_ns_total);
    uint64_t depth[3];
    for (int g = 0; g < 3; g++)
        depth[g] = LD(E.by_depth[g]);

    struct prof_gc_second s = {0};
    s.t = now_unix;
    s.dt = (double)(mono - G.prev_mono) / 1e9;
    s.process_cpu_s = (double)(proc - G.prev_proc) / 1e9;
    s.gc_threads_cpu_s = (double)threads / 1e9;
    /* CPU per wall second of the pauses measured both ways, smoothed over a few seconds; a
     * thread cannot burn more CPU than the wall time it ran for */
    if (swall > G.prev_sampled_wall) {
        double r = (double)(scpu - G.prev_sampled_cpu) / (double)(swall - G.prev_sampled_wall);
        if (r > 1)
            r = 1;
        G.cpu_per_wall = G.cpu_per_wall < 0 ? r : 0.7 * G.cpu_per_wall + 0.3 * r;
    }
    s.gc_user_cpu_s = (double)(uwall - G.prev_user_wall) / 1e9 *
                      (G.cpu_per_wall < 0 ? 1.0 : G.cpu_per_wall);
    s.gc_cpu_s = s.gc_threads_cpu_s + s.gc_user_cpu_s;
    s.pause_s = (double)(pause - G.prev_pause) / 1e9;
    for (int g = 0; g < GC_NHEAPS; g++)
        s.heap[g] = LD(E.heap[g]);
    for (int g = 0; g < 3; g++)
        s.collections[g] = (uint32_t)(depth[g] - G.prev_depth[g]);

    pthread_mutex_lock(&G.lock);
    G.gc_threads = n_gc;
    G.server_threads = server;
    G.server_seen |= server > 0;
    G.untracked = untracked;
    G.threads_cpu_total += threads;
    G.proc_cpu_total += proc - G.prev_proc;
    G.prev_mono = mono;
    G.prev_proc = proc;
    G.prev_user_wall = uwall;
    G.prev_sampled_wall = swall;
    G.prev_sampled_cpu = scpu;
    G.user_cpu_total += s.gc_user_cpu_s;
    G.prev_pause = pause;
    memcpy(G.prev_depth, depth, sizeof depth);
    G.secs[(G.sec_head + G.sec_n) % G.sec_cap] = s;
    if (G.sec_n < G.sec_cap)
        G.sec_n++;
    else
        G.sec_head = (G.sec_head + 1) % G.sec_cap;
    consume_slots(mono);
    pthread_mutex_unlock(&G.lock);
}

void prof_gc_init(void)
{
    if (!(g_core.profiles & PROFILE_GC))
        return;
    G.tab_cap = 256;
    while (G.tab_cap < (uint32_t)g_cfg.max_threads * 2u && G.tab_cap < (1u << 20))
        G.tab_cap <<= 1;
    G.sec_cap = (size_t)g_cfg.history_s + 1;
    G.coll_cap = (size_t)prof_env_long("CLRSCOPE_GC_MAX_COLLECTIONS", 10000, 100, 1000000);
    G.tab = calloc(G.tab_cap, sizeof *G.tab);
    G.tab2 = calloc(G.tab_cap, sizeof *G.tab2);
    G.secs = calloc(G.sec_cap, sizeof *G.secs);
    G.coll = calloc(G.coll_cap, sizeof *G.coll);
    if (!G.tab || !G.tab2 || !G.secs || !G.coll) {
        prof_log(LOG_ERROR, "gc: out of memory; the GC view is off");
        prof_gc_stop();
        prof_core_disable(PROFILE_GC);
        return;
    }
    read_gc_config();
    G.prev_mono = prof_now_ns();
    G.prev_proc = prof_process_cpu_ns();
    G.cpu_per_wall = -1; /* none measured yet: wall time */
    G.ready = 1;
    __atomic_store_n(&E.enabled, 1, __ATOMIC_RELEASE);
}

void prof_gc_stop(void)
{
    /* Runtime threads may still deliver callbacks after Shutdown: they only touch E. */
    __atomic_store_n(&E.enabled, 0, __ATOMIC_RELEASE);
    pthread_mutex_lock(&G.lock);
    G.ready = 0;
    free(G.tab);
    free(G.tab2);
    free(G.secs);
    free(G.coll);
    G.tab = G.tab2 = NULL;
    G.secs = NULL;
    G.coll = NULL;
    G.sec_n = G.coll_n = 0;
    pthread_mutex_unlock(&G.lock);
}

/* ---------------------------------------------------------------------------------------------
 * Readers (web threads).
 */

/* Called with G.lock held. */
static void fill_totals(struct prof_gc_totals *t)
{
    memset(t, 0, sizeof *t);
    for (int g = 0; g < 3; g++)
        t->by_depth[g] = LD(E.by_depth[g]);
    t->collection_count[2] = t->by_depth[2];
    t->collection_count[1] = t->by_depth[1] + t->by_depth[2];
    t->collection_count[0] = t->by_depth[0] + t->collection_count[1];
    t->collections = t->collection_count[0];
    t->background = LD(E.background);
    t->induced = LD(E.induced);
    t->first_number = LD(E.first_number);
    t->pause_s = (double)LD(E.pause_ns_total) / 1e9;
    t->gc_user_cpu_s = G.user_cpu_total;
    t->gc_threads_cpu_s = (double)G.threads_cpu_total / 1e9;
    t->process_cpu_s = (double)G.proc_cpu_total / 1e9;
    for (int g = 0; g < GC_NHEAPS; g++)
        t->heap[g] = LD(E.heap[g]);
    /* GCs started and not ended, among the slots still holding their GC */
    uint64_t hi = LD(E.last_started);
    for (uint64_t n = hi; n > 0 && hi - n < GC_SLOTS; n--) {
        struct gc_slot *s = &E.slots[n % GC_SLOTS];
        if (LD(s->number) != n)
            continue;
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if ((st & ST_STARTED) && !(st & ST_ENDED))
            for (uint32_t g = 0; g <= LD(s->gen) && g < 3; g++)
                t->in_progress[g]++;
    }
    t->heap_count = (int)LD(E.heap_count);
    t->gc_threads = G.gc_threads;
    /* what the threads say once they have been scanned; the configuration before that (a
     * server GC configured on a single CPU falls back to workstation: threads tell) */
    t->server = G.server_seen || t->heap_count > 1 || (G.sec_n == 0 && G.cfg_server);
    if (!t->heap_count) /* no GC yet */
        t->heap_count = t->server ? G.server_threads : 1;
    t->concurrent = LD(E.bgc_seen) || G.cfg_concurrent;
    t->dropped_collections = G.dropped;
    t->unpaired_callbacks = LD(E.unpaired);
    t->lost_pauses = LD(E.lost_pauses);
    t->lost_blocking_gcs = LD(E.lost_user);
    t->untracked_threads = G.untracked;
}

double prof_gc_last_start(void)
{
    pthread_mutex_lock(&G.lock);
    double t = G.coll_n ? G.coll[(G.coll_head + G.coll_n - 1) % G.coll_cap].t : 0;
    pthread_mutex_unlock(&G.lock);
    return t;
}

void prof_gc_get_totals(struct prof_gc_totals *out)
{
    pthread_mutex_lock(&G.lock);
    fill_totals(out);
    pthread_mutex_unlock(&G.lock);
}

int prof_gc_view(double seconds, size_t max_collections, struct prof_gc_view *out)
{
    memset(out, 0, sizeof *out);
    double now = prof_unix_now();
    double from = now - seconds;
    pthread_mutex_lock(&G.lock);
    fill_totals(&out->totals);
    size_t ns = 0, nc = 0;
    for (size_t i = 0; i < G.sec_n; i++)
        if (G.secs[(G.sec_head + i) % G.sec_cap].t > from)
            ns++;
    for (size_t i = 0; i < G.coll_n; i++) {
        const struct prof_gc_collection *c = &G.coll[(G.coll_head + i) % G.coll_cap];
        if (c->t <= from)
            continue;
        nc++;
        out->window_by_gen[c->generation < 0 ? 0 : c->generation > 2 ? 2 : c->generation]++;
        if (c->pause_ms > out->window_max_pause_ms)
            out->window_max_pause_ms = c->pause_ms;
    }
    size_t keep = nc < max_collections ? nc : max_collections;
    out->seconds = ns ? malloc(ns * sizeof *out->seconds) : NULL;
    out->collections = keep ? malloc(keep * sizeof *out->collections) : NULL;
    if ((ns && !out->seconds) || (keep && !out->collections)) {
        pthread_mutex_unlock(&G.lock);
        prof_gc_view_free(out);
        return -1;
    }
    for (size_t i = G.sec_n - ns; i < G.sec_n; i++)
        out->seconds[out->nseconds++] = G.secs[(G.sec_head + i) % G.sec_cap];
    for (size_t i = G.coll_n - keep; i < G.coll_n; i++)
        out->collections[out->ncollections++] = G.coll[(G.coll_head + i) % G.coll_cap];
    out->collections_omitted = nc - keep;
    pthread_mutex_unlock(&G.lock);
    out->t_to = now;
    out->t_from = out->nseconds ? out->seconds[0].t - out->seconds[0].dt : now;
    if (out->t_from < from)
        out->t_from = from;
    return 0;
}

void prof_gc_view_free(struct prof_gc_view *v)
{
    free(v->seconds);
    free(v->collections);
    v->seconds = NULL;
    v->collections = NULL;
    v->nseconds = v->ncollections = 0;
}

const char *prof_gc_reason_name(unsigned reason, char *buf, size_t cap)
{
    static const char *const names[] = {
        "AllocSmall",
        "Induced",
        "LowMemory",
        "Empty",
        "AllocLarge",
        "OutOfSpaceSOH",
        "OutOfSpaceLOH",
        "InducedNoForce",
        "Stress",
        "InducedLowMemory",
        "InducedCompacting",
        "LowMemoryHost",
        "PMFullGC",
        "LowMemoryHostBlocking",
        "BGCTuningSOH",
        "BGCTuningLOH",
        "BGCStepping",
        "InducedAggressive",
    };
    if (reason < sizeof names / sizeof names[0])
        return names[reason];
    snprintf(buf, cap, "Reason%u", reason);
    return buf;
}

const char *prof_gc_type_name(unsigned type)
{
    switch (type) {
    case GC_TYPE_BLOCKING:
        return "blocking";
    case GC_TYPE_BACKGROUND:
        return "background";
    case GC_TYPE_FOREGROUND:
        return "foreground";
    default:
        return "unknown";
    }
}

const struct prof_kind prof_gc_kind = {
    .name = "gc",
    .profile = PROFILE_GC,
    .tick = prof_gc_tick,
};
