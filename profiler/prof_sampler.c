/* prof_sampler.c - see prof_sampler.h. */
#include "prof_sampler.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof_codemap.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_lock.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sighandler.h"
#include "prof_sigsample.h"
#include "prof_store.h"
#include "prof_symbols.h"
#include "prof_tdump.h"
#include "prof_threads.h"
#include "prof_unload.h"
#include "prof_walk.h"

enum cpu_mode { CPU_SUSPEND, CPU_SIGNAL };

#define SIGNAL_SYNC_NS 100000000LL /* how often the signal sampler picks up new threads */
/* ...and how soon after a thread starts (prof_sampler_thread_started) at the earliest after the
 * previous sync: an app that starts thousands of threads a second makes the sampler sync at most
 * this often, each sync a pass over the thread list (one kernel tick at 250 Hz, the grain of the
 * CPU timers themselves). At 1 ms, an app starting 3,500 threads a second cost clrscope 5 % of a
 * core against 1 % before; at 4 ms, 2 %, and threads that burn 30 ms each show 0.91 of it. */
#define SIGNAL_SYNC_MIN_NS 4000000LL
/* In signal mode the handlers fill per-thread rings and this thread only drains them, so it
 * wakes this far apart (or at the wall rate when that is faster), not once per sample: each
 * wake-up is a context switch on a core the app is using, and at 100 Hz the wake-ups cost more
 * than the samples (bench/results.md). */
#define SIGNAL_DRAIN_NS 50000000LL
/* Without the signal sampler this thread still keeps the maps snapshot and the code map fresh
 * for the allocation callback's frame-pointer walk (see "keep_maps"), this far apart at most. */
#define MAPS_KEEPER_NS 100000000LL

struct frame {
    uintptr_t fn, ip;
};

struct walk {
    struct frame *frames; /* max_frames entries */
    int n, max, truncated;
};

struct captured {
    uint32_t os_tid;
    int nframes, truncated;
    int64_t cpu_ns; /* the thread's CPU clock right after its walk, still suspended */
    /* thread dumps: the lock it waits for, read in the same suspension as its stack
     * (prof_lock_waiting: atomics only); wait_since 0 = none */
    uint64_t lock_id, lock_owner;
    int64_t wait_since;
};

struct cpu_seen {
    uint32_t tid;     /* 0 = free */
    uint32_t gen;     /* last tick that saw it */
    int64_t cpu_ns;
};

/* Scratch space for naming one signal sample (sampler thread only). */
struct sig_names {
    const char **leaf; /* max_frames, leaf first */
    unsigned char *managed;
    const char **root; /* max_frames + 1, root first */
    double now_unix;
};

/* The sampler's state. Written by prof_sampler_start (on the thread that starts clrscope,
 * before the sampler thread exists) and by the clrscope-sampler thread after; where noted,
 * atomics other threads read, or `st` under st_lock. */
struct sampler_state {
    pthread_t thread;
    int running;   /* atomic: the sampler thread runs (prof_sampler_start, prof_sampler_stop) */
    int stop;      /* atomic: prof_sampler_stop asks the sampler thread to end */
    uint32_t threads_started; /* atomic: a thread started since the last sync (1), else 0 */
    int cpu_mode;  /* enum cpu_mode; atomic (the sampler thread falls back to CPU_SUSPEND) */
    int wall_hz;
    int64_t tick_ns;  /* how far apart the thread wakes (but in stop-the-world CPU mode) */
    int ring_entries; /* per-thread signal ring size */
    /* The allocation and live profiles walk stacks by frame pointers (prof_walk) with the signal
     * sampler's maps snapshot and code map. When the signal sampler does not run (cpu off, the
     * stop-the-world sampler chosen or fallen back to) this thread keeps them fresh itself:
     * without them every allocation sample would take the runtime's much slower walk. */
    int keep_maps;
    uint32_t *tids; /* max_threads, for the signal sampler's thread list */
    struct sig_names sn;
    struct captured *caps;
    struct frame *frames; /* cap_threads * max_frames */
    int cap_threads;
    struct cpu_seen *seen;
    uint32_t nseen; /* power of two */
    uint64_t unload_acked; /* what the sampler last told prof_unload it had drained */
    int suspend_warned;    /* atomic (prof_log_once) */
    struct prof_sampler_stats st; /* under st_lock: the sampler thread writes, anyone reads */
    pthread_mutex_t st_lock;
};

static struct sampler_state sampler = {.st_lock = PTHREAD_MUTEX_INITIALIZER};

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

static int ensure_capacity(int threads)
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

/* Drops threads not seen for a while so the table never fills with dead tids. */
static void seen_sweep(uint32_t gen)
{
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (sampler.seen[i].tid && gen - sampler.seen[i].gen > 100)
            sampler.seen[i].tid = 0;
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
static int capture_all(ICorProfilerInfo15 *info, int *overflow, int read_cpu, int read_locks)
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
            struct walk w = {.frames = &sampler.frames[(size_t)n * (size_t)g_cfg.max_frames],
                             .max = g_cfg.max_frames};
            HRESULT hr = info->vt->DoStackSnapshot(info, ids[i], snapshot_cb,
                                                   COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
            if (hr < 0 && hr != CORPROF_E_STACKSNAPSHOT_ABORTED && w.n == 0) {
                sampler.st.walk_failures++;
                /* still record the thread: its wall and CPU time count, under "[unknown]" */
            }
            sampler.caps[n].os_tid = os_tid;
            sampler.caps[n].nframes = w.n;
            sampler.caps[n].truncated = w.truncated;
            /* here, not after the resume: the CPU a thread burns once resumed belongs to what
             * it runs next, not to the stack just walked (read later, a busy machine's delay
             * before this thread ran again moved CPU from one caller to the other); only when
             * the tick samples CPU, so that a wall tick's suspension is no longer than it was */
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

static void record(int n, double now_unix, int64_t wall_ns, uint32_t gen, int do_cpu, int do_wall)
{
    const char **names = malloc((size_t)(g_cfg.max_frames + 1) * sizeof *names);
    if (!names)
        return;
    for (int t = 0; t < n; t++) {
        struct captured *c = &sampler.caps[t];
        struct frame *f = &sampler.frames[(size_t)t * (size_t)g_cfg.max_frames];
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
        struct cpu_seen *s = cpu >= 0 ? seen_slot(c->os_tid) : NULL;
        if (s) {
            if (s->tid == c->os_tid && cpu >= s->cpu_ns)
                delta = cpu - s->cpu_ns;
            s->tid = c->os_tid;
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
        sampler.st.samples++;
    }
    free(names);
}

/* ---- thread dumps (prof_tdump.h) ---- */

/* The thread's scheduler state from /proc ('R' running or runnable, 'S' sleeping, 'D' in
 * uninterruptible I/O, ...), '?' when it cannot be read. */
static char os_state(uint32_t tid)
{
    char path[64], buf[320];
    snprintf(path, sizeof path, "/proc/self/task/%u/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name (in parentheses) may hold anything */
    return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether a thread whose ContentionStart clrscope holds still waits for the lock: its stack is
 * in Monitor's or System.Threading.Lock's code (.NET 10 enters both in managed code), or, on .NET
 * 8 and 9, whose Monitor.Enter is a runtime helper with no managed frame, it sleeps with the
 * app's own code at its leaf. A wait that ended without its ContentionStop (a TryEnter that timed
 * out, an interrupted Enter) leaves the thread elsewhere: it is not shown, and closes no cycle. */
static int still_waits_for_lock(const char *const *f, uint32_t n, char state)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strncmp(f[i], "System.Threading.Monitor.", 25) ||
            !strncmp(f[i], "System.Threading.Lock.", 22))
            return 1;
    return g_core.runtime_major < 10 && n && state != 'R' && prof_tdump_app_frame(f[0]);
}

/* Serves dump request `want`: the threads' states first (the world still runs), then every
 * managed thread's stack and CPU clock with the runtime suspended, as a wall tick walks them;
 * names after the resume. Sampler thread only. */
static void dump_threads(ICorProfilerInfo15 *info, uint64_t want)
{
    size_t cap = (size_t)g_cfg.max_threads;
    uint32_t *tids = malloc(cap * sizeof *tids);
    char *states = malloc(cap);
    if (!tids || !states) {
        free(tids);
        free(states);
        prof_tdump_fail(want, "out of memory");
        return;
    }
    size_t nt = prof_threads_tids(tids, cap);
    qsort(tids, nt, sizeof *tids, cmp_u32);
    for (size_t i = 0; i < nt; i++)
        states[i] = os_state(tids[i]);
    int n = 0, overflow = 0, busy_tries = 0, grown = 0;
    int64_t t0 = 0, t1 = 0;
    double t_unix = 0;
    uint32_t epoch = 0;
    int locks = (g_core.profiles & PROFILE_LOCK) != 0;
    for (;;) {
        epoch = prof_unload_epoch();
        t_unix = prof_unix_now();
        t0 = prof_now_ns();
        HRESULT hr = info->vt->SuspendRuntime(info);
        if (hr != S_OK) {
            /* a GC (or another suspension) in progress: it ends soon */
            if (hr == CORPROF_E_SUSPENSION_IN_PROGRESS && ++busy_tries < 100 &&
                !prof_core_stopping() && !__atomic_load_n(&sampler.stop, __ATOMIC_ACQUIRE)) {
                struct timespec ts = {0, 5000000L};
                nanosleep(&ts, NULL);
                continue;
            }
            free(tids);
            free(states);
            prof_tdump_fail(want, "the runtime could not be suspended for the dump");
            return;
        }
        overflow = 0;
        n = capture_all(info, &overflow, 1, locks);
        info->vt->ResumeRuntime(info);
        t1 = prof_now_ns();
        if (!overflow)
            break;
        int can_grow = sampler.cap_threads < g_cfg.max_threads;
        ensure_capacity(sampler.cap_threads + overflow); /* for the next tick, whatever happens */
        if (grown || !can_grow || sampler.cap_threads < n + overflow)
            break;
        grown = 1; /* more threads than the sampler had room for: once more, with room */
    }
    struct prof_tdump *d = calloc(1, sizeof *d);
    size_t total = 0;
    for (int t = 0; t < n; t++)
        total += sampler.caps[t].nframes ? (size_t)sampler.caps[t].nframes : 1;
    const char **fr = malloc((total ? total : 1) * sizeof *fr);
    uint32_t *off = malloc((n ? (size_t)n : 1) * sizeof *off);
    uint32_t *len = malloc((n ? (size_t)n : 1) * sizeof *len);
    int *trunc = malloc((n ? (size_t)n : 1) * sizeof *trunc);
    if (d)
        d->threads = calloc(n ? (size_t)n : 1, sizeof *d->threads);
    if (!d || !d->threads || !fr || !off || !len || !trunc) {
        prof_tdump_free(d);
        free(fr), free(off), free(len), free(trunc), free(tids), free(states);
        prof_tdump_fail(want, "out of memory");
        return;
    }
    int asking = prof_unload_enter(epoch); /* the frames are named under their walk's epoch */
    size_t at = 0;
    for (int t = 0; t < n; t++) {
        struct captured *c = &sampler.caps[t];
        struct frame *f = &sampler.frames[(size_t)t * (size_t)g_cfg.max_frames];
        off[t] = (uint32_t)at;
        for (int i = 0; i < c->nframes; i++) /* leaf first, as walked */
            fr[at++] = f[i].fn ? prof_symbols_function(f[i].fn) : prof_symbols_native(f[i].ip);
        if (!c->nframes)
            fr[at++] = "[no managed frames]";
        len[t] = (uint32_t)(at - off[t]);
        trunc[t] = c->truncated;
    }
    if (asking)
        prof_unload_leave();
    for (int t = 0; t < n; t++) {
        struct prof_tdump_thread *th = &d->threads[t];
        th->tid = sampler.caps[t].os_tid;
        th->cpu_ns = sampler.caps[t].cpu_ns;
        prof_threads_name_of(th->tid, th->name, sizeof th->name);
        uint32_t *hit = bsearch(&th->tid, tids, nt, sizeof *tids, cmp_u32);
        th->state = hit ? states[hit - tids] : os_state(th->tid);
        int64_t since = sampler.caps[t].wait_since;
        /* a wait that began after the walk is not on its stack, nor one that ended unseen */
        if (since > 0 && since <= t1 && still_waits_for_lock(fr + off[t], len[t], th->state)) {
            th->lock_id = sampler.caps[t].lock_id;
            th->lock_owner = sampler.caps[t].lock_owner;
            th->wait_ns = t1 > since ? t1 - since : 1;
        }
    }
    d->nthreads = (uint32_t)n;
    d->omitted = (uint32_t)overflow;
    d->t_unix = t_unix;
    d->t_mono_ns = t0;
    d->suspend_ns = t1 - t0;
    if (prof_tdump_group(d, fr, off, len, trunc)) {
        prof_tdump_free(d);
        prof_tdump_fail(want, "out of memory");
    } else {
        prof_tdump_find_deadlocks(d); /* out of memory: the dump without them */
        prof_tdump_publish(want, d);
    }
    free(fr), free(off), free(len), free(trunc), free(tids), free(states);
}

/* Names one signal sample (prof_codemap) and stores it root first. */
static void on_sig_sample(void *arg, const struct prof_sigsample *smp)
{
    struct sig_names *sn = arg;
    int asking = prof_unload_enter(smp->epoch); /* (prof_unload.h) */
    int k = prof_codemap_name_stack(smp, sn->leaf, sn->managed, g_cfg.max_frames);
    if (asking)
        prof_unload_leave();
    int m = 0;
    if (smp->flags & PROF_SIG_F_TRUNCATED)
        sn->root[m++] = "[truncated]";
    for (int i = k - 1; i >= 0; i--)
        sn->root[m++] = sn->leaf[i];
    if (!m)
        sn->root[m++] = "[unknown]";
    int64_t v[PROF_NVALUES] = {1, smp->cpu_ns, 0};
    prof_store_add(PK_CPU, sn->now_unix, sn->root, m, smp->tid, NULL, v);
}

static void sig_stop(const char *why)
{
    prof_log(LOG_WARN, "cpu sampler: %s; switching to the stop-the-world sampler", why);
    prof_sigsample_stop();
    __atomic_store_n(&sampler.cpu_mode, CPU_SUSPEND, __ATOMIC_RELAXED);
    if (sampler.keep_maps && prof_maps_start())
        sampler.keep_maps = 0; /* the allocation walks keep the runtime's walk */
}

/* The signal sampler's own tick drains, names and refreshes; without it, only the refresh. */
static void maps_tick(int64_t now)
{
    prof_codemap_lock();
    prof_codemap_tick(now);
    prof_sigsample_maintain(now);
    prof_codemap_unlock();
    struct prof_sigsample_stats ss;
    prof_sigsample_get_stats(&ss);
    pthread_mutex_lock(&sampler.st_lock);
    sampler.st.sig = ss;
    pthread_mutex_unlock(&sampler.st_lock);
}

/* One tick of the signal sampler: drain what the handlers captured, pick up new threads. */
static void signal_tick_locked(int64_t now, int64_t *last_sync)
{
    sampler.sn.now_unix = prof_unix_now();
    int started = now - *last_sync >= SIGNAL_SYNC_MIN_NS &&
                  __atomic_load_n(&sampler.threads_started, __ATOMIC_RELAXED);
    if (now - *last_sync >= SIGNAL_SYNC_NS || started) {
        *last_sync = now;
        /* cleared before the list is read: a thread started after the read sets it again */
        __atomic_store_n(&sampler.threads_started, 0, __ATOMIC_SEQ_CST);
        if (!prof_sigsample_intact()) {
            sig_stop("another component replaced clrscope's signal handler");
            return;
        }
        size_t n = prof_threads_tids(sampler.tids, (size_t)g_cfg.max_threads);
        prof_sigsample_sync(sampler.tids, n, on_sig_sample, &sampler.sn);
        struct prof_sigsample_stats ss;
        prof_sigsample_get_stats(&ss);
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.sig = ss;
        pthread_mutex_unlock(&sampler.st_lock);
    }
    prof_sigsample_drain(on_sig_sample, &sampler.sn);
    prof_codemap_tick(now);
    prof_sigsample_maintain(now);
}

static void signal_tick(int64_t now, int64_t *last_sync)
{
    prof_codemap_lock(); /* clrscope-agg resolves allocation stacks with the same tables */
    signal_tick_locked(now, last_sync);
    prof_codemap_unlock();
    int perf = prof_sigsample_review(now); /* (its one measurement holds no lock) */
    if (perf >= 0 && sampler.cpu_mode == CPU_SIGNAL) {
        prof_codemap_lock();
        sampler.sn.now_unix = prof_unix_now();
        prof_sigsample_use_perf(perf, now, on_sig_sample, &sampler.sn);
        prof_codemap_unlock();
    }
}

static void sampler_drained(uint64_t wanted)
{
    prof_unload_drained(PROF_UNLOAD_SAMPLER, wanted);
    sampler.unload_acked = wanted;
}

static void *sampler_main(void *arg)
{
    (void)arg;
    prof_name_thread("sampler");
    ICorProfilerInfo15 *info = g_core.info;
    info->vt->InitializeCurrentThread(info);
    const int64_t period = 1000000000LL / g_cfg.sampling_hz;
    const int64_t wall_period = 1000000000LL / sampler.wall_hz;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int64_t last = prof_now_ns(), prev_tick = last, last_sync = last - SIGNAL_SYNC_NS;
    int64_t last_maps = last;
    uint32_t gen = 0;
    uint32_t nudges = prof_core_nudges();
    int advance = 1;
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 1);
    while (!__atomic_load_n(&sampler.stop, __ATOMIC_ACQUIRE) && !prof_core_stopping()) {
        /* the stop-the-world CPU sampler (chosen, or fallen back to) ticks at the sampling rate */
        int64_t tick = __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) == CPU_SUSPEND &&
                               (g_core.profiles & PROFILE_CPU)
                           ? period
                           : sampler.tick_ns;
        if (advance) {
            next.tv_nsec += tick;
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec++;
            }
        }
        int64_t deadline = (int64_t)next.tv_sec * 1000000000LL + next.tv_nsec;
        /* a new thread waits for its timer no longer than SIGNAL_SYNC_MIN_NS after the last sync */
        int64_t wake = deadline;
        if (sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU) &&
            __atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST) &&
            last_sync + SIGNAL_SYNC_MIN_NS < wake)
            wake = last_sync + SIGNAL_SYNC_MIN_NS;
        /* a module unload or a new thread cuts the nap short: the signal samples are named
         * before the unload goes on; the thread's timer is armed */
        if (prof_core_nap_nudged(wake, nudges))
            break;
        nudges = prof_core_nudges();
        uint64_t dump_wanted = prof_tdump_wanted();
        if (dump_wanted)
            dump_threads(info, dump_wanted);
        uint64_t unload_wanted = prof_unload_drain_wanted();
        int64_t now = prof_now_ns();
        advance = now >= deadline;
        if (!advance) {
            /* woken by an unload or a new thread, not by the clock: drain (and sync) only.
             * Sampling now would time the wall samples by the app's unloads (a thread waiting
             * for them in every sample). A thread that started less than SIGNAL_SYNC_MIN_NS
             * after the last sync waits for the next wake-up, which the nap above times. */
            int sync_due = __atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST) &&
                           now - last_sync >= SIGNAL_SYNC_MIN_NS;
            if (sampler.cpu_mode == CPU_SIGNAL &&
                (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU) &&
                (sync_due || unload_wanted != sampler.unload_acked))
                signal_tick(now, &last_sync);
            sampler_drained(unload_wanted);
            continue;
        }
        if (now - prev_tick > 10 * tick) /* we fell behind (suspended VM, debugger): resync */
            clock_gettime(CLOCK_MONOTONIC, &next);
        if (now - last > 10 * wall_period) /* and a stall is not wall time of the threads */
            last = now - wall_period;
        prev_tick = now;
        if (sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU))
            signal_tick(now, &last_sync);
        else if (sampler.keep_maps && now - last_maps >= MAPS_KEEPER_NS) {
            last_maps = now;
            maps_tick(now);
        }
        /* `last` is the previous wall sample: wall weights are the time since, at any rate */
        int cpu_suspend = sampler.cpu_mode == CPU_SUSPEND && (g_core.profiles & PROFILE_CPU);
        int wall_due = (g_core.profiles & PROFILE_WALL) && now - last >= wall_period - tick / 2;
        if (!cpu_suspend && !wall_due) {
            sampler_drained(unload_wanted);
            continue;
        }
        int64_t t0 = prof_now_ns();
        uint32_t epoch = prof_unload_epoch(); /* the frames are alive from here to the walk */
        HRESULT hr = info->vt->SuspendRuntime(info);
        if (hr != S_OK) {
            sampler.st.skipped_ticks++;
            if (hr != CORPROF_E_SUSPENSION_IN_PROGRESS && hr != CORPROF_E_RUNTIME_UNINITIALIZED)
                prof_log_once(sampler.suspend_warned, LOG_WARN, "SuspendRuntime failed (0x%08x); "
                              "skipping samples while it does", (unsigned)hr);
            sampler_drained(unload_wanted);
            continue;
        }
        int overflow = 0;
        int n = capture_all(info, &overflow, cpu_suspend, 0);
        info->vt->ResumeRuntime(info);
        int64_t t1 = prof_now_ns();
        gen++;
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.ticks++;
        sampler.st.suspended_ns += (uint64_t)(t1 - t0);
        sampler.st.last_thread_count = (uint64_t)(n + overflow);
        pthread_mutex_unlock(&sampler.st_lock);
        if (overflow)
            ensure_capacity(sampler.cap_threads + overflow);
        /* an unload that asked for a drain after this tick began waits for its end (below), so
         * the frames are named under the epoch they were walked in */
        int asking = prof_unload_enter(epoch);
        record(n, prof_unix_now(), t0 - last, gen, cpu_suspend, wall_due);
        if (asking)
            prof_unload_leave();
        sampler_drained(unload_wanted);
        if (wall_due)
            last = t0;
        if ((gen & 1023) == 0)
            seen_sweep(gen);
    }
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 0);
    return NULL;
}

/* CLRSCOPE_CPU_SAMPLER and CLRSCOPE_WALL_HZ; starts the signal sampler when chosen. */
static void choose_modes(void)
{
    const char *m = getenv("CLRSCOPE_CPU_SAMPLER");
    sampler.cpu_mode = CPU_SIGNAL;
    if (m && !strcmp(m, "suspend"))
        sampler.cpu_mode = CPU_SUSPEND;
    else if (m && *m && strcmp(m, "signal"))
        prof_log(LOG_WARN, "CLRSCOPE_CPU_SAMPLER=\"%.40s\" is neither signal nor suspend; using "
                 "signal", m);
    const char *tm = getenv("CLRSCOPE_CPU_TIMER");
    int timer = PROF_SIG_TIMER_AUTO;
    if (tm && !strcmp(tm, "posix"))
        timer = PROF_SIG_TIMER_POSIX;
    else if (tm && !strcmp(tm, "perf"))
        timer = PROF_SIG_TIMER_PERF;
    else if (tm && *tm && strcmp(tm, "auto"))
        prof_log(LOG_WARN, "CLRSCOPE_CPU_TIMER=\"%.40s\" is not auto, perf or posix; using auto",
                 tm);
    prof_sigsample_set_timer(timer, g_cfg.cpu_timer_budget);
    /* The stop-the-world walk costs the same whatever it records: while it runs every tick for
     * CPU, wall samples come free at the full rate; otherwise they are what it costs. */
    long def = sampler.cpu_mode == CPU_SUSPEND ? g_cfg.sampling_hz : 5;
    if (def > g_cfg.sampling_hz)
        def = g_cfg.sampling_hz;
    sampler.wall_hz = (int)prof_env_long("CLRSCOPE_WALL_HZ", def, 1, g_cfg.sampling_hz);
    int64_t period = 1000000000LL / g_cfg.sampling_hz, wall_period = 1000000000LL / sampler.wall_hz;
    sampler.tick_ns = wall_period; /* wall alone */
    if (sampler.cpu_mode != CPU_SIGNAL || !(g_core.profiles & PROFILE_CPU)) {
        if (g_core.profiles & PROFILE_CPU)
            sampler.tick_ns = period;
        return;
    }
    /* signal mode: drain every SIGNAL_DRAIN_NS (or faster for wall samples); a thread burning a
     * core fills tick / period entries in between, 1.5 times that (+1) is room for jitter */
    int64_t tick = SIGNAL_DRAIN_NS;
    if ((g_core.profiles & PROFILE_WALL) && wall_period < tick)
        tick = wall_period;
    if (tick < period)
        tick = period;
    int64_t entries = (tick * 3 / 2 + period - 1) / period + 1;
    if (entries > PROF_SIG_MAX_ENTRIES) {
        entries = PROF_SIG_MAX_ENTRIES;
        tick = (entries - 1) * period * 2 / 3;
    }
    sampler.tick_ns = tick;
    sampler.ring_entries = (int)entries;
    sampler.tids = malloc((size_t)g_cfg.max_threads * sizeof *sampler.tids);
    sampler.sn.leaf = malloc((size_t)g_cfg.max_frames * sizeof *sampler.sn.leaf);
    sampler.sn.managed = malloc((size_t)g_cfg.max_frames);
    sampler.sn.root = malloc((size_t)(g_cfg.max_frames + 1) * sizeof *sampler.sn.root);
    if (!sampler.tids || !sampler.sn.leaf || !sampler.sn.managed || !sampler.sn.root ||
        prof_codemap_init(g_cfg.max_frames) ||
        prof_sigsample_start(g_cfg.sampling_hz, g_cfg.max_frames, g_cfg.max_threads,
                             sampler.ring_entries))
        sampler.cpu_mode = CPU_SUSPEND; /* prof_sigsample_start logged why */
}

/* Starts keep_maps when the allocation walk wants it and the signal sampler does not run. */
static void choose_maps_keeper(void)
{
    struct prof_walk_stats ws;
    prof_walk_get_stats(&ws);
    if (!(g_core.profiles & (PROFILE_ALLOC | PROFILE_LIVE)) || ws.mode == PROF_WALK_RUNTIME)
        return;
    int signal_runs = sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU);
    if (!signal_runs && (prof_codemap_init(g_cfg.max_frames) || prof_maps_start())) {
        prof_log(LOG_WARN, "allocation stacks: no memory map snapshot; they take the runtime's "
                 "walk");
        return;
    }
    sampler.keep_maps = 1;
    if (!(g_core.profiles & (PROFILE_CPU | PROFILE_WALL)))
        sampler.tick_ns = MAPS_KEEPER_NS; /* the thread only keeps the maps */
}

void prof_sampler_thread_started(void)
{
    if (!__atomic_load_n(&sampler.running, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) != CPU_SIGNAL ||
        !(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU))
        return;
    if (!__atomic_exchange_n(&sampler.threads_started, 1, __ATOMIC_SEQ_CST))
        prof_core_nudge();
}

int prof_sampler_start(void)
{
    int walks = (g_core.profiles & (PROFILE_ALLOC | PROFILE_LIVE)) != 0;
    if (!(g_core.profiles & (PROFILE_CPU | PROFILE_WALL)) && !walks)
        return 0;
    choose_modes();
    choose_maps_keeper();
    sampler.nseen = 8192;
    sampler.seen = calloc(sampler.nseen, sizeof *sampler.seen);
    if (!sampler.seen || ensure_capacity(64)) {
        prof_log(LOG_ERROR, "cpu/wall sampler: out of memory; cpu and wall profiles are off");
        prof_core_disable(PROFILE_CPU | PROFILE_WALL);
        return -1;
    }
    if (pthread_create(&sampler.thread, NULL, sampler_main, NULL)) {
        prof_log(LOG_ERROR, "cpu/wall sampler: cannot start its thread; cpu and wall are off");
        prof_core_disable(PROFILE_CPU | PROFILE_WALL);
        return -1;
    }
    __atomic_store_n(&sampler.running, 1, __ATOMIC_RELEASE);
    prof_tdump_enable(1);
    return 0;
}

void prof_sampler_stop(void)
{
    if (!sampler.running)
        return;
    __atomic_store_n(&sampler.stop, 1, __ATOMIC_RELEASE);
    pthread_join(sampler.thread, NULL);
    prof_tdump_enable(0);
    if (sampler.cpu_mode == CPU_SIGNAL || sampler.keep_maps)
        prof_sigsample_stop(); /* and the allocation walks stop trusting the last snapshot */
    __atomic_store_n(&sampler.running, 0, __ATOMIC_RELEASE);
}

void prof_sampler_get_stats(struct prof_sampler_stats *out)
{
    pthread_mutex_lock(&sampler.st_lock);
    *out = sampler.st;
    int mode = __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED);
    out->cpu_sampler = !(g_core.profiles & PROFILE_CPU) ? "off"
                       : mode == CPU_SIGNAL             ? "signal"
                                                        : "suspend";
    out->wall_hz = sampler.wall_hz;
    out->tick_ns = !strcmp(out->cpu_sampler, "suspend") ? 1000000000LL / g_cfg.sampling_hz
                                                         : sampler.tick_ns;
    out->ring_entries = sampler.ring_entries;
    pthread_mutex_unlock(&sampler.st_lock);
}
