/*
 * prof_sampler - CPU and wall-time stack sampling of every managed thread.
 *
 * Wall time: the clrscope-sampler thread wakes CLRSCOPE_WALL_HZ times a second, suspends the
 * runtime (ICorProfilerInfo10::SuspendRuntime), walks each managed thread with DoStackSnapshot into
 * preallocated buffers, resumes, and only then names frames and records samples, each weighted by
 * the time elapsed since the previous wall tick (so totals stay exact at any rate). This is the
 * stack-walk pattern the runtime supports on Linux for .NET 8, 9 and 10 (cross-thread
 * DoStackSnapshot without a suspension returns E_NOTIMPL there), and the only one that sees the
 * managed frames of a thread blocked in native code.
 *
 * CPU time, CLRSCOPE_CPU_SAMPLER:
 *   signal  (default) per-thread CPU timers and a frame-pointer walk in a signal handler
 *           (prof_sigsample.h): no suspension, samples only where CPU is spent, each weighted by
 *           the CPU time its timer measured. Falls back to `suspend` when no signal is free.
 *   suspend the stop-the-world walk above every CLRSCOPE_SAMPLING_HZ tick; each sample weighted
 *           by the CPU time the thread burned since the previous tick (per-thread CPU clocks).
 * Either way an idle thread costs CPU nothing and shows only in wall time.
 *
 * The same thread serves thread dumps (prof_tdump.h) and, when the allocation or live profile
 * walks stacks by frame pointers and the signal sampler does not run, keeps the maps snapshot and
 * the code map fresh for those walks (prof_maps.h).
 *
 * ctx: prof_sampler_start and prof_sampler_stop once each, from prof_entry (Initialize, shutdown);
 * prof_sampler_thread_started on any thread, in a runtime callback; prof_sampler_get_stats on any
 * thread but a runtime callback. Everything else runs on the clrscope-sampler thread it starts.
 */
#ifndef PROF_SAMPLER_H
#define PROF_SAMPLER_H

#include <stdint.h>

#include "prof_sigsample.h"

struct prof_sampler_stats {
    uint64_t ticks, skipped_ticks, samples, truncated_stacks, walk_failures;
    uint64_t suspended_ns;      /* total time the runtime stayed suspended for us */
    /* wall ticks recorded without suspending the runtime (no thread had run since its stack was
     * walked), and wall samples taken from a kept stack (in those ticks and beside walks) */
    uint64_t wall_cached_ticks, wall_cached_samples;
    /* CPU clock reads a wall tick skipped for threads quiet for 5 s (read one tick in 5) */
    uint64_t wall_quiet_skipped;
    /* wall time not given to any thread: the sampler thread was held back more than 10 wall
     * periods (a suspended VM, a debugger, a starved machine) and took the gap for a stall */
    uint64_t wall_stalled_ns;
    /* wall ticks that asked the threads that had run for their stacks by a signal and needed
     * no suspension (CLRSCOPE_WALL_WALK=signal), and the wall samples those answers gave */
    uint64_t wall_signal_ticks, wall_signal_samples;
    /* wall ticks that suspended the runtime all the same, by why: a walk had found a thread the
     * runtime's list had not given (then every thread is walked); threads that could not be
     * asked (wall_asks says why: no_ring, fragile, unreadable, unknown_caller, given_up); an
     * answer that held a leaf alone (a stack newer than the maps snapshot, or a signal stack) */
    uint64_t wall_walks_unlisted, wall_walks_unasked, wall_walks_leaf;
    /* wall samples put off to the next tick instead (up to two ticks in a row a thread) */
    uint64_t wall_deferred;
    const char *wall_walk;      /* "signal" or "suspend" */
    uint64_t last_thread_count;
    const char *cpu_sampler;    /* "signal", "suspend" or "off" */
    int wall_hz;                /* CLRSCOPE_WALL_HZ */
    int wall_slowdown;          /* the overhead governor's divisor of it now (1: none) */
    int cpu_slowdown;           /* the governor's divisor of the CPU sampling rate (1: none) */
    int64_t tick_ns;            /* how far apart the sampler thread wakes */
    int ring_entries;           /* signal sampler: samples a thread's ring holds between drains */
    struct prof_sigsample_stats sig; /* signal sampler counters (refreshed 10 times a second) */
};

int prof_sampler_start(void);
void prof_sampler_stop(void);
/* A managed thread was just given its OS thread (the runtime's ThreadAssignedToOSThread, called on
 * that thread). The signal sampler arms the new thread's CPU timer within SIGNAL_SYNC_MIN_NS
 * instead of at its next 100 ms sync, so a thread that lives a few milliseconds is CPU-sampled
 * too. Any thread, any time; no lock, no allocation: sets a flag and, when it was clear, wakes
 * the sampler thread (prof_core_nudge). */
void prof_sampler_thread_started(void);
void prof_sampler_get_stats(struct prof_sampler_stats *out);
/* The overhead governor (prof_budget): wall ticks `factor` times further apart (1..5; each wall
 * sample still weighs the time since the previous one, so wall totals stay exact). Not while the
 * stop-the-world CPU sampler runs, which takes wall samples at no extra cost. Any thread. */
#define PROF_SAMPLER_MAX_WALL_SLOWDOWN 5
void prof_sampler_set_wall_slowdown(int factor);
/* The overhead governor's last resort: each thread's CPU samples `factor` times further apart
 * (1, 2 or 4: CLRSCOPE_SAMPLING_HZ 100 becomes 50 or 25; each sample weighs the CPU time
 * between two, so CPU totals stay exact, only coarser). The signal sampler only; the
 * clrscope-sampler thread re-arms the threads' clocks at its next tick. Any thread. */
#define PROF_SAMPLER_MAX_CPU_SLOWDOWN 4
void prof_sampler_set_cpu_slowdown(int factor);
/* 1 while the CPU profile is taken by the signal sampler (whose rate the governor may lower);
 * any thread. */
int prof_sampler_cpu_by_signal(void);

#endif
