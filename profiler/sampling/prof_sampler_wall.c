/*
 * prof_sampler_wall.c - the stop-the-world walk: with the runtime suspended, every managed
 * thread's stack by DoStackSnapshot into preallocated buffers (and its CPU clock, and for thread
 * dumps the lock it waits for); after the resume, a tick's samples named and recorded, wall time
 * weighed by the time since the previous tick, CPU time by what each thread's clock says it
 * burned since (the CPU sampler CLRSCOPE_CPU_SAMPLER=suspend). The clrscope-sampler thread only.
 *
 * Threads that have not run since their stack was walked are not walked again: a wall tick reads
 * every managed thread's CPU clock first (sampler_wall_prepare), records the kept stack of each
 * thread whose clock has not moved, and suspends the runtime only when one has, to walk those
 * (sampler_capture_all with use_cache). An idle process (threads blocked in waits, sleeps and
 * I/O) costs a clock read per thread and tick, and is never stopped. (The stop-the-world CPU
 * sampler walks every thread at every tick, for their CPU.)
 */
#include <stdlib.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_lock.h"
#include "prof_sampler_int.h"
#include "prof_store.h"
#include "prof_symbols.h"
#include "prof_threads.h"

struct walk {
    struct frame *frames; /* max_frames entries */
    int n, max, truncated;
};

static HRESULT snapshot_cb(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info, ULONG32 ctx_size,
                           BYTE *ctx, void *data)
{
    (void)frame_info;
    (void)ctx_size;
    (void)ctx;
    struct walk *w = data;
    if (w->n >= w->max) {
        w->truncated = 1;
        return E_FAIL; /* abort the walk; keep what we have (the leaf side) */
    }
    if (!fn && w->n > 0 && !w->frames[w->n - 1].fn)
        return S_OK; /* fold runs of native frames */
    w->frames[w->n].fn = fn;
    w->frames[w->n].ip = ip;
    w->n++;
    return S_OK;
}

int sampler_ensure_capacity(int threads)
{
    if (threads <= sampler.cap_threads)
        return 0;
    int nc = sampler.cap_threads ? sampler.cap_threads : 64;
    while (nc < threads)
        nc *= 2;
    if (nc > g_cfg.max_threads)
        nc = g_cfg.max_threads;
    struct captured *c = realloc(sampler.caps, (size_t)nc * sizeof *c);
    if (!c)
        return -1;
    sampler.caps = c;
    struct frame *f = realloc(sampler.frames, (size_t)nc * (size_t)g_cfg.max_frames * sizeof *f);
    if (!f)
        return -1;
    sampler.frames = f;
    sampler.cap_threads = nc;
    return 0;
}

static struct cpu_seen *seen_slot(uint32_t tid)
{
    uint32_t mask = sampler.nseen - 1;
    for (uint32_t i = (tid * 2654435761u) & mask, k = 0; k < sampler.nseen; i = (i + 1) & mask, k++)
        if (sampler.seen[i].tid == tid || sampler.seen[i].tid == 0)
            return &sampler.seen[i];
    return NULL;
}

/* tid's entry, taken (empty: no CPU seen, no stack) when it had none; NULL when the table is
 * full. */
static struct cpu_seen *seen_take(uint32_t tid)
{
    struct cpu_seen *s = seen_slot(tid);
    if (s && s->tid != tid) {
        free(s->stack); /* (a free slot holds none; see sampler_seen_sweep) */
        *s = (struct cpu_seen){.tid = tid, .cpu_ns = -1, .stack_cpu = -1, .now_cpu = -1};
    }
    return s;
}

/* tid's entry, or NULL. */
static struct cpu_seen *seen_find(uint32_t tid)
{
    struct cpu_seen *s = seen_slot(tid);
    return s && s->tid == tid ? s : NULL;
}

/* Drops threads not seen for a while so the table never fills with dead tids. */
void sampler_seen_sweep(uint32_t gen)
{
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (sampler.seen[i].tid && gen - sampler.seen[i].gen > 100) {
            free(sampler.seen[i].stack);
            sampler.seen[i] = (struct cpu_seen){0};
        }
    /* rebuild probe chains */
    struct cpu_seen *old = malloc(sampler.nseen * sizeof *old);
    if (!old)
        return;
    memcpy(old, sampler.seen, sampler.nseen * sizeof *old);
    memset(sampler.seen, 0, sampler.nseen * sizeof *old);
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (old[i].tid) {
            struct cpu_seen *s = seen_slot(old[i].tid);
            if (s)
                *s = old[i];
        }
    free(old);
}

/* Walks all managed threads while the runtime is suspended. No malloc, no locks, no logging. */
int sampler_capture_all(ICorProfilerInfo15 *info, int *overflow, int read_cpu, int read_locks,
                        int use_cache)
{
    ICorProfilerThreadEnum *en = NULL;
    int n = 0;
    if (info->vt->EnumThreads(info, &en) != S_OK || !en)
        return 0;
    ThreadID ids[64];
    ULONG got = 0;
    while (en->vt->Next(en, 64, ids, &got) >= 0 && got > 0) {
        for (ULONG i = 0; i < got; i++) {
            if (n >= sampler.cap_threads) {
                (*overflow)++;
                continue;
            }
            DWORD os_tid = 0;
            if (info->vt->GetThreadInfo(info, ids[i], &os_tid) != S_OK || !os_tid)
                continue;
            struct cpu_seen *s = use_cache ? seen_find(os_tid) : NULL;
            if (s && s->prep == sampler.prep && s->stack_cpu >= 0 && s->now_cpu == s->stack_cpu) {
                sampler.caps[n] = (struct captured){.os_tid = os_tid, .cached = 1, .cpu_ns = -1};
                n++;
                continue;
            }
            struct walk w = {.frames = &sampler.frames[(size_t)n * (size_t)g_cfg.max_frames],
                             .max = g_cfg.max_frames};
            HRESULT hr = info->vt->DoStackSnapshot(info, ids[i], snapshot_cb,
                                                   COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
            if (hr < 0 && hr != CORPROF_E_STACKSNAPSHOT_ABORTED && w.n == 0) {
                sampler.st.walk_failures++;
                /* still record the thread: its wall and CPU time count, under "[unknown]" */
            }
            sampler.caps[n].os_tid = os_tid;
            sampler.caps[n].cached = 0;
            sampler.caps[n].nframes = w.n;
            sampler.caps[n].truncated = w.truncated;
            /* here, not after the resume: the CPU a thread burns once resumed belongs to what
             * it runs next, not to the stack just walked (read later, a busy machine's delay
             * before this thread ran again would move CPU from one caller to the other); only
             * when the tick samples CPU, so that a wall tick without it suspends no longer */
            sampler.caps[n].cpu_ns = read_cpu ? prof_thread_cpu_ns((pid_t)os_tid) : -1;
            sampler.caps[n].wait_since = 0;
            if (read_locks &&
                !prof_lock_waiting(os_tid, &sampler.caps[n].lock_id, &sampler.caps[n].lock_owner,
                                   &sampler.caps[n].wait_since))
                sampler.caps[n].wait_since = 0;
            n++;
        }
        if (got < 64)
            break;
    }
    en->vt->Release(en);
    return n;
}

/* Keeps the stack just walked of thread c->os_tid for the next wall ticks, stamped with the CPU
 * clock read before the walk (a thread that ran in between is walked again at the next tick). */
static void keep_stack(const struct captured *c, const char **names, int k)
{
    struct cpu_seen *s = seen_take(c->os_tid);
    if (!s)
        return;
    if (!s->stack)
        s->stack = malloc((size_t)(g_cfg.max_frames + 2) * sizeof *s->stack);
    if (!s->stack) {
        s->stack_cpu = -1;
        return;
    }
    memcpy(s->stack, names, (size_t)k * sizeof *names);
    s->k = k;
    if (s->prep == sampler.prep && s->now_cpu >= 0) {
        s->stack_cpu = s->now_cpu;
    } else { /* not among the threads read before the walk: the thread list missed it */
        s->stack_cpu = -1;
        sampler.wall_unlisted = 1;
    }
}

void sampler_record(int n, double now_unix, int64_t wall_ns, uint32_t gen, int do_cpu, int do_wall,
                    int use_cache)
{
    const char **names = malloc((size_t)(g_cfg.max_frames + 1) * sizeof *names);
    if (!names)
        return;
    if (use_cache)
        sampler.wall_unlisted = 0; /* keep_stack says whether this walk found one */
    for (int t = 0; t < n; t++) {
        struct captured *c = &sampler.caps[t];
        struct frame *f = &sampler.frames[(size_t)t * (size_t)g_cfg.max_frames];
        if (c->cached) { /* not walked: its kept stack, for wall time only */
            struct cpu_seen *s = seen_find(c->os_tid);
            if (s && s->k > 0 && do_wall && (g_core.profiles & PROFILE_WALL)) {
                int64_t v[PROF_NVALUES] = {1, wall_ns, 0};
                prof_store_add(PK_WALL, now_unix, s->stack, s->k, c->os_tid, NULL, v);
                sampler.st.samples++;
                sampler.st.wall_cached_samples++;
            }
            continue;
        }
        int k = 0;
        if (c->truncated)
            names[k++] = "[truncated]";
        for (int i = c->nframes - 1; i >= 0; i--) /* leaf-first -> root-first */
            names[k++] = f[i].fn ? prof_symbols_function(f[i].fn) : prof_symbols_native(f[i].ip);
        if (k == 0)
            names[k++] = "[no managed frames]";
        if (c->truncated)
            sampler.st.truncated_stacks++;
        int64_t cpu = c->cpu_ns;
        int64_t delta = 0;
        struct cpu_seen *s = cpu >= 0 ? seen_take(c->os_tid) : NULL;
        if (s) {
            if (s->cpu_ns >= 0 && cpu >= s->cpu_ns)
                delta = cpu - s->cpu_ns;
            s->cpu_ns = cpu;
            s->gen = gen;
        }
        if (do_cpu && (g_core.profiles & PROFILE_CPU) && delta > 0) {
            int64_t v[PROF_NVALUES] = {1, delta, 0};
            prof_store_add(PK_CPU, now_unix, names, k, c->os_tid, NULL, v);
        }
        if (do_wall && (g_core.profiles & PROFILE_WALL)) {
            int64_t v[PROF_NVALUES] = {1, wall_ns, 0};
            prof_store_add(PK_WALL, now_unix, names, k, c->os_tid, NULL, v);
        }
        if (use_cache)
            keep_stack(c, names, k);
        sampler.st.samples++;
    }
    free(names);
    if (!use_cache)
        return;
    /* threads read before the walk that it did not find (gone, or not yet running managed
     * code): nothing to record for them until their clock moves */
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        if (s && s->prep == sampler.prep && s->stack_cpu < 0 && s->now_cpu >= 0) {
            s->stack_cpu = s->now_cpu;
            s->k = 0;
        }
    }
}

int sampler_wall_prepare(void)
{
    sampler.prep++;
    sampler.wall_ntids = prof_threads_tids(sampler.wall_tids, (size_t)g_cfg.max_threads);
    int idle = !sampler.wall_unlisted && sampler.wall_ntids > 0;
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        uint32_t tid = sampler.wall_tids[i];
        struct cpu_seen *s = seen_take(tid);
        if (!s) {
            idle = 0;
            continue;
        }
        s->now_cpu = prof_thread_cpu_ns((pid_t)tid);
        s->prep = sampler.prep;
        if (s->now_cpu >= 0 && s->now_cpu != s->stack_cpu)
            idle = 0;
    }
    return idle;
}

int sampler_wall_from_cache(double now_unix, int64_t wall_ns)
{
    int n = 0;
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        if (!s || s->prep != sampler.prep || s->now_cpu < 0 || s->k <= 0)
            continue;
        if (g_core.profiles & PROFILE_WALL) {
            int64_t v[PROF_NVALUES] = {1, wall_ns, 0};
            prof_store_add(PK_WALL, now_unix, s->stack, s->k, s->tid, NULL, v);
        }
        n++;
    }
    return n;
}
