/*
 * prof_gc - the garbage collector's share of CPU and per-GC records.
 * GC CPU = CPU of the runtime's dedicated GC threads (".NET Server GC", ".NET BGC", found under
 * /proc/self/task) + CPU burned by user threads while they run a blocking GC (measured with the
 * thread's CPU clock between GarbageCollectionStarted and Finished). Sampled every second.
 */
#ifndef PROF_GC_H
#define PROF_GC_H

#include "clr_abi.h"

void prof_gc_init(void);
void prof_gc_stop(void);
/* ICorProfilerCallback2 GC callbacks (COR_PRF_HIGH_BASIC_GC); any runtime thread. */
void prof_gc_started(int cgen, const BOOL *collected, int reason);
void prof_gc_finished(void);
/* Runtime-provider GC events (keyword 0x1) from the in-process EventPipe session. */
void prof_gc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* 1 Hz, on clrscope-agg. */
void prof_gc_tick(double now_unix);

#endif
