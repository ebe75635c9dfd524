/*
 * prof_sampler - CPU and wall-time stack sampling of every managed thread.
 *
 * Method: the clrscope-sampler thread wakes CLRSCOPE_SAMPLING_HZ times a second, suspends the
 * runtime (ICorProfilerInfo10::SuspendRuntime), walks each managed thread with DoStackSnapshot into
 * preallocated buffers, resumes, and only then names frames and records samples. This is the
 * stack-walk pattern the runtime supports on Linux for .NET 8, 9 and 10 (cross-thread
 * DoStackSnapshot without a suspension returns E_NOTIMPL there). CPU samples are weighted by the
 * CPU time each thread really burned since the previous tick (per-thread CPU clocks), wall samples
 * by the elapsed time, so an idle thread costs CPU nothing and shows only in wall time.
 */
#ifndef PROF_SAMPLER_H
#define PROF_SAMPLER_H

#include <stdint.h>

struct prof_sampler_stats {
    uint64_t ticks, skipped_ticks, samples, truncated_stacks, walk_failures;
    uint64_t suspended_ns;      /* total time the runtime stayed suspended for us */
    uint64_t last_thread_count;
};

int prof_sampler_start(void);
void prof_sampler_stop(void);
void prof_sampler_get_stats(struct prof_sampler_stats *out);

#endif
