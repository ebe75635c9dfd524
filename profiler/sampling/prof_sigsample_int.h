/*
 * prof_sigsample_int.h - what the files of the signal sampler share: its state (one struct,
 * defined in prof_sigsample.c), the per-thread bookkeeping, and the few functions one file calls
 * in another. Not for other modules: their interface is prof_sigsample.h.
 *
 * The files: prof_sigsample.c (the signal, start and stop, housekeeping, stats),
 * prof_sigsample_timers.c (each thread's ring and clock: arming, disarming, switching clocks),
 * prof_sigsample_drain.c (reading the rings), prof_sigsample_wall.c (wall asks),
 * prof_sigsample_caller.c (whose code made a system call a signal cut short),
 * prof_sigsample_review.c (auto: what perf events
 * cost the app) and prof_sigsample_calib.c (its one measurement, on a helper thread).
 *
 * ctx: the clrscope-sampler thread, as prof_sigsample.h says; the calibration's helper thread
 * reads sig.calib only.
 */
#ifndef PROF_SIGSAMPLE_INT_H
#define PROF_SIGSAMPLE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "prof_sighandler.h"
#include "prof_sigsample.h"

/* One sampled thread (sig.th, sorted by tid). */
struct sthread {
    uint32_t tid;
    uint32_t ring;
    int timer;        /* kernel timer id, -1 = none */
    int fd;           /* or a perf task-clock event, -1 = none */
    int64_t cpu_seen; /* perf: the thread's CPU clock when its samples were last weighed */
    int retry;        /* its clock could not be changed: the next sync arms it again */
    uint64_t ss_ins, ss_run; /* schedstat at the last review: switches in (0: none), CPU ns */
    int wall_fragile; /* seen blocked in a system call code outside the runtime made: never
                       * asked by a wall signal (prof_sigsample_wall.c) */
    int wall_proven;  /* seen other than running (in user code, or blocked in a call the
                       * runtime made), or running at WALL_PROOF_TICKS ticks: asked when running */
    int wall_running; /* ticks it was found running while not proven */
};

static inline int sigsample_armed(const struct sthread *t)
{
    return t->timer >= 0 || t->fd >= 0;
}

/* Something the handler may still be looking at: recycled (or closed) once inflight was 0. */
struct retired {
    int ring;  /* recycle this ring (-1 = none) */
    int fd;    /* or close this perf event (-1 = none): a handler that read its number from
                * g_sig.fdmap before it was cleared may still ioctl it, and once closed the number
                * could be the app's next file */
};

/* The perf-cost measurement's pipes and CPU (prof_sigsample_calib.c): shared with its helper
 * thread; static storage, so that a helper left behind never reads freed memory. One
 * measurement per process. */
struct sigsample_calib {
    int to[2], from[2]; /* pipes: sampler -> helper, helper -> sampler; each side closes its
                         * own ends */
    int cpu;            /* written before the helper starts; both pin themselves to it */
};

/* The signal sampler's state. Written by the clrscope-sampler thread only, but where noted
 * "start": by prof_sigsample_set_timer and prof_sigsample_start, on the thread that starts the
 * sampler before the sampler thread exists, read-only after. prof_sigsample_stop runs on the
 * sampler thread, or once it has ended. What the handler shares lives in g_sig
 * (prof_sighandler.h). */
struct sigsample_state {
    int signo;            /* start: the signal, 0 = not started */
    int64_t interval_ns;  /* start: CPU time between two samples of a thread */
    int max_rings;        /* start: rings at most (CLRSCOPE_MAX_THREADS, PROF_SIG_MAX_CHUNKS) */
    int timer_mode;       /* start: PROF_SIG_TIMER_* asked for */
    int cfi_off;          /* start: CLRSCOPE_NATIVE_UNWIND=fp */
    int cfi_rebuilds;     /* CFI tables built again for libraries loaded since (cfi_update) */
    double budget;        /* start: CLRSCOPE_CPU_TIMER_BUDGET as a fraction of the app's CPU */
    int stopped;          /* prof_sigsample_stop was called: no clock is armed again */
    /* the clocks: perf events or POSIX timers (start, then arm and prof_sigsample_use_perf) */
    int perf;             /* new threads get perf events (else POSIX timers) */
    int perf_usable;      /* the kernel gives perf events here (auto may go back to them) */
    int perf_budget;      /* perf events at most (file descriptors) */
    int perf_open;        /* perf events now */
    int perf_user_only;   /* the kernel refused events that count its time: exclude_kernel */
    const char *perf_off; /* why the POSIX timers are used (NULL: perf events) */
    uint64_t perf_fallbacks, clock_misses;
    uint64_t phase_rng;   /* xorshift64 state for the timers' first expiries (never 0) */
    /* auto: what perf events cost the app (prof_sigsample_review) */
    int64_t switch_cost_ns; /* measured extra per context switch of a thread with one; -1 */
    double switch_rate;   /* the app's context switches per CPU-second, last window */
    double perf_cost;     /* switch_cost_ns * switch_rate: their share of the app's CPU */
    int64_t review_at, rev_cpu_ns, changed_at;
    uint64_t rev_switches, clock_changes;
    size_t review_next;   /* the next thread whose schedstat the review reads */
    int calib_tried, over, under; /* windows in a row past the budget / under half of it */
    struct sigsample_calib calib;
    /* the sampled threads and their rings */
    struct sthread *th;   /* sorted by tid */
    size_t nth;
    int *free_rings;      /* allocated at start */
    int nfree;
    int nchunks;          /* chunks allocated (g_sig.chunks[0..nchunks)) */
    struct retired *ret;  /* rings and perf events the handler may still be using */
    size_t nret, capret;
    uint64_t timer_failures, samples, truncated, new_code;
    uint64_t interrupted_outside; /* CPU samples that cut short a call made outside the runtime */
    int timer_failure_logged, perf_logged; /* atomic (prof_log_once) */
};

/* `sig`: the sampler side; what the handler reads is g_sig (prof_sighandler.h). */
extern struct sigsample_state sig;

static inline int64_t sigsample_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline struct prof_sig_ring *sigsample_ring_at(int idx)
{
    char *chunk = (char *)g_sig.chunks[idx / PROF_SIG_CHUNK];
    return (struct prof_sig_ring *)(chunk + (size_t)(idx % PROF_SIG_CHUNK) * g_sig.ring_size);
}

/* prof_sigsample.c: hands a ring (ring >= 0) or a perf event's fd (fd >= 0) back once no
 * handler runs (the reclaim in prof_sigsample_maintain and prof_sigsample_stop). */
void sigsample_retire(int ring, int fd);

/* prof_sigsample_timers.c */
/* The thread's CPU clock (ns), or -1 when it cannot be read (the thread is gone). */
int64_t sigsample_thread_cpu(uint32_t tid);
/* A perf task-clock event's attributes as the sampler uses them (arm_perf, calib_event). */
struct perf_event_attr;
void sigsample_task_clock_attr(struct perf_event_attr *a, uint64_t period);
/* Stops t's perf event: late signals for its fd map to nothing from now on. The fd is closed
 * by the reclaim, once no handler runs that may have read it from the map before. */
void sigsample_close_perf(struct sthread *t);

/* prof_sigsample_drain.c: hands t's full entries to fn, weighed; returns how many. */
int sigsample_drain_ring(struct sthread *t, prof_sigsample_fn fn, void *arg);

/* prof_sigsample.c: 1 when signal s has no handler, is not ignored and is blocked by neither
 * the main thread nor the calling one. */
int sigsample_signal_free(int s);

/* prof_sigsample_caller.c: 1 when a native frame's name ("[native libcoreclr.so]") is the
 * runtime's own code. */
int sigsample_wall_runtime_code(const char *name);
/* prof_sigsample_caller.c: for a walk whose signal cut a system call short (PROF_SIG_F_EINTR),
 * the name of the code outside the runtime that made the call (the first frame past the
 * CFI-unwound libraries), or NULL when the runtime made it or the walk does not say. */
const char *sigsample_cut_call_outside(const uintptr_t *ips, uint32_t n);

/* prof_sigsample_calib.c: what a perf event on each of two threads adds to a context switch
 * between them on one CPU (ns), or -1 when it could not be measured. */
int64_t sigsample_calibrate(void);

#endif
