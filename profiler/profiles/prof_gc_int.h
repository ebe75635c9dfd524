/*
 * prof_gc_int.h - what the files of prof_gc share; no other module uses it.
 *
 *   prof_gc.c         clrscope-agg's once-a-second record (CPU, pauses, heap sizes) and the list
 *                     of collections, and the readers (web threads), under gc.lock
 *   prof_gc_events.c  the runtime's GC events (runtime threads, lock-free), and the reading of
 *                     what they left, with atomics, for the two above
 *   prof_gc_cpu.c     the CPU of the runtime's dedicated GC threads (clrscope-agg)
 *   prof_gc_clock.c   the CPU clock an app thread reads around the GCs it runs (runtime threads)
 *   prof_gc_config.c  the GC mode the app's configuration asks for (Initialize)
 */
#ifndef PROF_GC_INT_H
#define PROF_GC_INT_H

#include <stdint.h>

#include "prof_gc.h"

#define GC_SLOTS 1024u /* GCs that may start between two ticks without a drop (per-GC slots) */

/* What kind of thread: a dedicated GC thread (found by its name) or anything else. */
enum { THR_OTHER = 0, THR_SERVER_GC = 1, THR_BGC = 2 };

/* ---- prof_gc_events.c: every reader below uses atomics and may run on any thread ---- */

/* The running sums the event callbacks keep (each read on its own: no snapshot). */
struct gc_event_counts {
    uint64_t by_depth[3];     /* GCs started, by condemned generation */
    uint64_t pause_ns_total;  /* the GC's suspensions of the runtime */
    /* app threads' GC pauses: their wall time and count, the CPU their threads' clocks
     * counted, and the wall time of the pauses whose clocks were read (all but those
     * gc_events_set_clock_every left out, and reads that failed) */
    uint64_t user_wall_ns, user_pauses, user_cpu_ns, user_wall_clocked_ns;
    uint64_t heap[GC_NHEAPS]; /* generation sizes after the latest GC */
};
/* Whether the callbacks record anything (prof_gc_init turns them on, prof_gc_stop off). */
void gc_events_enable(int on);
void gc_events_counts(struct gc_event_counts *out);
/* App threads' pauses a second above which their CPU clocks are read at a share of them. */
#define PROF_GC_CLOCKED_PER_S 32
/* Read the clock at one app thread's pause in `every`, at random (1: at every one).
 * clrscope-agg. */
void gc_events_set_clock_every(uint32_t every);
/* The number of the newest GC started (acquire), and of the first one seen (0: none yet). */
uint64_t gc_events_last_started(void);
uint64_t gc_events_first_number(void);
/* Copies GC `number` into a record. 1 = done (rec filled), 0 = not finished yet (or its trailing
 * events may still come), -1 = its slot was reused for a later GC (the record is lost).
 * clrscope-agg. */
int gc_events_read_slot(uint64_t number, int64_t now, struct prof_gc_collection *rec);
/* Clears *t and fills what the events counted: GCs by depth and kind, pauses, heap sizes, the
 * GCs in progress, the heap count, `concurrent` when a background GC was seen, and the
 * callbacks' losses. */
void gc_events_totals(struct prof_gc_totals *t);

/* ---- prof_gc_cpu.c: clrscope-agg (start at Initialize; stop at Shutdown, under gc.lock) ---- */

/* A table for up to about max_threads threads; 0, or -1 when out of memory. */
int gc_cpu_start(int max_threads);
void gc_cpu_stop(void);
/* Reads the CPU of every dedicated GC thread, adds the deltas to the CPU profile under a
 * "Garbage Collector" frame, and returns their sum (ns); *n_gc: GC threads found, *server_seen:
 * of which server GC threads, *untracked: threads left out of the table. gcs_started: the
 * collections started so far (a new one makes the next call list the threads again). */
int64_t gc_cpu_scan(double now_unix, uint64_t gcs_started, int *n_gc, int *server_seen,
                    uint64_t *untracked);

/* ---- prof_gc_clock.c ---- */

/* Initialize, before the events are enabled. */
void gc_clock_init(void);
/* The calling thread's CPU time in ns (-1: unreadable); *perf: read from its perf task clock (1)
 * or from CLOCK_THREAD_CPUTIME_ID (0). Two readings subtract only when both came from the same
 * clock. Runtime threads, inside GC pauses. */
int64_t gc_clock_self_ns(int *perf);
/* Threads that opened a perf clock, reads of the thread CPU clock instead, and the errno with
 * which the kernel refused perf events to every thread (0: not refused). Any thread. */
void gc_clock_stats(uint64_t *perf_threads, uint64_t *thread_reads, int *refused);

/* ---- prof_gc_config.c: Initialize ---- */

/* The GC mode the app asks for (DOTNET_gcServer/gcConcurrent, else its runtimeconfig.json), the
 * fallback until GC threads or GCs tell. */
void gc_config_read(int *server, int *concurrent);

#endif
