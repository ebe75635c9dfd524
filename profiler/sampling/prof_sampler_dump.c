/*
 * prof_sampler_dump.c - thread dumps (prof_tdump.h) served on the clrscope-sampler thread: every
 * thread's OS state while the world still runs, then every managed thread's stack, CPU clock and
 * awaited lock with the runtime suspended (prof_sampler_wall.c's walk), names after the resume,
 * the dump grouped and published. The clrscope-sampler thread only.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clr_abi.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_sampler_int.h"
#include "prof_symbols.h"
#include "prof_tdump.h"
#include "prof_threads.h"
#include "prof_unload.h"

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
void sampler_dump_threads(ICorProfilerInfo15 *info, uint64_t want)
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
        n = sampler_capture_all(info, &overflow, 1, locks, 0, 0);
        info->vt->ResumeRuntime(info);
        t1 = prof_now_ns();
        if (!overflow)
            break;
        int can_grow = sampler.cap_threads < g_cfg.max_threads;
        /* for the next tick, whatever happens */
        sampler_ensure_capacity(sampler.cap_threads + overflow);
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
