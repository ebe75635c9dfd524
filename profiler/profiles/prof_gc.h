/*
 * prof_gc - the garbage collector's share of CPU, its pauses, heap sizes and per-GC records.
 *
 * GC CPU = CPU of the runtime's dedicated GC threads (".NET Server GC", ".NET BGC", found by name
 *          under /proc/self/task and read with their thread CPU clocks once a second)
 *        + CPU of the app threads that run a blocking GC themselves (workstation GC): each one's
 *          own CPU clock read at the start and the end of its pause (GCSuspendEEBegin and
 *          GCRestartEEEnd, delivered on that thread; prof_gc_clock.c reads it without making
 *          the kernel switch threads mid-pause). Pauses of a dedicated GC thread are skipped
 *          there (that thread is already counted), so nothing counts twice.
 *        booked so that no second holds more GC CPU than the process used in it (a GC that
 *        straddles a tick is booked whole when it ends: what does not fit waits for the next
 *        second).
 * Process CPU comes from CLOCK_PROCESS_CPUTIME_ID, the scheduler's clock, like the GC threads';
 * an app thread's perf task clock may count a few tenths of a percent more (interrupt time),
 * which the booking absorbs.
 *
 * Per-GC records come from the runtime's GC events (GCStart, GCEnd, GCHeapStats,
 * GCPerHeapHistory, GCSuspendEEBegin/GCRestartEEEnd for pauses), delivered synchronously on the
 * thread that runs the GC. The event callback only copies fields into a fixed array of per-GC
 * slots with atomics (no malloc, no lock); clrscope-agg turns finished slots into records once a
 * second (prof_gc_tick), together with one per-second record of CPU, pause and heap sizes.
 *
 * ctx: prof_gc_init at Initialize, prof_gc_stop at Shutdown (after clrscope-agg stopped);
 * prof_gc_on_event on runtime threads (app or GC threads, possibly while the runtime is
 * suspended): lock-free, no allocation, no I/O; prof_gc_tick on clrscope-agg;
 * prof_gc_view, prof_gc_get_totals and prof_gc_last_start on any thread (web threads), copying
 * data out under a mutex that clrscope-agg holds only for microseconds; the name functions are
 * pure.
 */
#ifndef PROF_GC_H
#define PROF_GC_H

#include <stddef.h>
#include <stdint.h>

#include "clr_abi.h"

enum { GC_GEN0, GC_GEN1, GC_GEN2, GC_LOH, GC_POH, GC_NHEAPS };

/* One second of history. */
struct prof_gc_second {
    double t;             /* unix seconds at the end of the interval */
    double dt;            /* length of the interval, seconds */
    double process_cpu_s; /* CPU of the whole process in the interval */
    double gc_cpu_s;      /* gc_threads_cpu_s + gc_user_cpu_s */
    double gc_threads_cpu_s;
    double gc_user_cpu_s;
    double pause_s;           /* runtime suspended for GC (SuspendEEBegin..RestartEEEnd) */
    uint64_t heap[GC_NHEAPS]; /* generation sizes after the latest GC (GCHeapStats) */
    uint32_t collections[3];  /* GCs that started in the interval, by condemned generation */
};

enum prof_gc_type { GC_TYPE_BLOCKING = 0, GC_TYPE_BACKGROUND = 1, GC_TYPE_FOREGROUND = 2 };

/* One garbage collection. */
struct prof_gc_collection {
    uint64_t number;      /* the runtime's GC index (GCStart Count) */
    int generation;       /* condemned generation 0..2 */
    unsigned reason;      /* gc_reason */
    unsigned type;        /* prof_gc_type */
    int complete;         /* 0 when GCEnd or GCHeapStats never came */
    double t;             /* unix seconds at GCStart */
    double duration_ms;   /* GCStart..GCEnd */
    double pause_ms;      /* suspensions attributed to this GC */
    uint64_t heap_before; /* sum of generation sizes before (GCPerHeapHistory), 0 if unknown */
    uint64_t heap_after;  /* sum of generation sizes after (GCHeapStats) */
    uint64_t promoted;    /* bytes promoted out of the condemned generations */
};

struct prof_gc_totals {
    uint64_t by_depth[3];         /* GCs by condemned generation (exclusive) */
    uint64_t collection_count[3]; /* as GC.CollectionCount(n): GCs that collected gen n */
    uint64_t in_progress[3];      /* started, not yet ended (collection_count semantics) */
    uint64_t collections, background, induced;
    uint64_t first_number;        /* first GC index seen (GCs before the session are missed) */
    double pause_s;
    double gc_threads_cpu_s;      /* these three: since clrscope started */
    double gc_user_cpu_s;
    double process_cpu_s;
    uint64_t heap[GC_NHEAPS];     /* latest generation sizes */
    int server, concurrent;       /* GC mode (from threads seen, else from configuration) */
    int heap_count;               /* GC heaps; before the first GC: server GC threads, or 1 */
    int gc_threads;               /* dedicated GC threads alive at the last tick */
    uint64_t dropped_collections; /* per-GC records overwritten before clrscope-agg read them */
    uint64_t unpaired_callbacks;  /* GCRestartEEEnd without a GCSuspendEEBegin on the thread */
    uint64_t lost_pauses;         /* GC pauses not measured: too many suspending threads at once */
    uint64_t lost_blocking_gcs;   /* app-thread GCs not measured: too many at once */
    uint64_t untracked_threads;   /* threads the thread table had no room for at the last tick */
};

struct prof_gc_view {
    struct prof_gc_totals totals;
    double t_from, t_to;
    size_t nseconds;
    struct prof_gc_second *seconds; /* oldest first */
    size_t ncollections;
    struct prof_gc_collection *collections; /* oldest first */
    size_t collections_omitted;             /* in the window but beyond max_collections (oldest) */
    uint64_t window_by_gen[3];              /* every GC of the window (omitted ones too), by
                                             * condemned generation */
    double window_max_pause_ms;             /* and the longest pause among them */
};

void prof_gc_init(void);
void prof_gc_stop(void);
/* Runtime-provider GC events (keyword 0x1) from the in-process EventPipe session. */
void prof_gc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* 1 Hz, on clrscope-agg. */
void prof_gc_tick(double now_unix);

/* Copies the last `seconds` (per-second records and at most max_collections GC records, the
 * newest kept). 0 on success, -1 when out of memory. Free with prof_gc_view_free. */
int prof_gc_view(double seconds, size_t max_collections, struct prof_gc_view *out);
void prof_gc_view_free(struct prof_gc_view *v);
/* qsort order of collections (struct prof_gc_collection) by time. */
int prof_gc_collection_by_t(const void *a, const void *b);
void prof_gc_get_totals(struct prof_gc_totals *out);
/* Unix seconds at the start of the newest GC recorded, 0 when none is (or the gc profile is off). */
double prof_gc_last_start(void);
/* "AllocSmall", "Induced", ... (the runtime's gc_reason names); "Reason<N>" is written to buf for
 * unknown values. */
const char *prof_gc_reason_name(unsigned reason, char *buf, size_t cap);
const char *prof_gc_type_name(unsigned type);

struct prof_kind;
/* The aggregator's row: ticks the GC's CPU share. */
extern const struct prof_kind prof_gc_kind;

#endif
