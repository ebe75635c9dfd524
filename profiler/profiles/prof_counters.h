/*
 * prof_counters - the runtime's own counters: the System.Runtime EventSource's EventCounters
 * (alloc-rate, cpu-usage, working-set, gc-heap-size, exception-count, ... as dotnet-counters shows
 * them), which the runtime polls once a second on its ".NET Counter Poller" thread when our
 * EventPipe session enables the provider with EventCounterIntervalSec=1.
 *
 * clrscope uses them as an independent ground truth: alloc-rate is GC.GetTotalAllocatedBytes()
 * per interval, the exact total the allocation estimate is checked against (the "upscaling
 * self-check"), and the latest value of every counter is served by GET /api/v1/counters. Each
 * counter's values over the last CLRSCOPE_HISTORY_S are kept as a series (prof_counters_series,
 * recorded by prof_counters_tick), which the history on disk keeps too.
 *
 * ctx: prof_counters_start once at Initialize (from prof_events_start, which routes the events);
 * prof_counters_on_event on the runtime's poller thread inside EventPipeEventDelivered (no
 * malloc, no locks, no I/O); prof_counters_gc_finished in the runtime's GC-finished callback;
 * prof_counters_tick on clrscope-agg; the getters on any thread, never blocking the writer
 * (per-entry sequence counters); prof_counters_series on any thread but a runtime callback (it
 * takes the series' lock, which only clrscope-agg's tick takes besides).
 * CLRSCOPE_RUNTIME_COUNTERS is the polling interval in seconds (1, the default, to 60); 0 turns
 * the subscription off. While they are on the runtime wakes its finalizer thread after every GC
 * (measured: ~30 % of the throughput of an app collecting 4,900 times a second, about 100 us of
 * its CPU per GC): prof_counters_tick stops them above
 * CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE GCs a second.
 */
#ifndef PROF_COUNTERS_H
#define PROF_COUNTERS_H

#include <stdint.h>

#include "clr_abi.h"

#define PROF_COUNTERS_MAX 64 /* distinct counters kept; later ones are counted as dropped */

/* Starts the counters' own EventPipe session on the System.Runtime provider (Informational,
 * EventCounterIntervalSec=N), which the guard may stop without touching the runtime's events, and
 * prepares the per-second history. 1 when it runs; 0 when the subscription is off or the runtime
 * refused it (logged). */
int prof_counters_start(void);
/* A GC finished (the runtime's GC-finished callback: one atomic add). */
void prof_counters_gc_finished(void);
/* clrscope-agg, once a second: the guard. While the counters are on, the runtime wakes its
 * finalizer thread after every GC; above CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE GCs a second
 * (default 50, averaged over 10 s; 0 = never) their session is stopped and a line logged. */
void prof_counters_tick(double now_unix);
/* An event of the System.Runtime provider (the poller thread). */
void prof_counters_on_event(const BYTE *meta, ULONG meta_len, const BYTE *data, ULONG len);

/* Bytes the runtime counted as allocated (GC.GetTotalAllocatedBytes) over the whole unix seconds
 * *from_s..*to_s: the window is narrowed to the seconds the counter fully covers and written
 * back. 0 and *bytes, or -1 when the counter covers none of the window. */
int prof_counters_allocated(int64_t *from_s, int64_t *to_s, int64_t *bytes);
/* Bytes the runtime counted in each of its newest intervals (the last 256) that ended after
 * since_unix, each interval whole (one that began before since_unix counts in full: an upper
 * bound, never less than the truth), with the end of the newest (*covered_to) and the start of
 * the oldest one read (*oldest_from; later than since_unix when the intervals kept do not reach
 * back that far). 0, or -1 when no interval has come yet. */
int prof_counters_allocated_after(double since_unix, int64_t *bytes, double *covered_to,
                                  double *oldest_from);
/* The counters' polling interval in seconds while their session runs and is not known to be
 * silent (a caller may wait for the next interval); 0 when none will come. */
double prof_counters_alloc_interval_s(void);

struct prof_counter {
    char name[64];
    char units[16];
    double value;       /* Increment over the interval, or the mean */
    double interval_s;
    double t_unix;      /* when the runtime delivered it */
    int incrementing;
};
/* Copies the latest value of each counter seen (at most max); returns how many. */
int prof_counters_snapshot(struct prof_counter *out, int max);

/* One value of a counter's series, as the runtime delivered it at t_unix. */
struct prof_counter_point {
    const char *name, *units; /* strings that outlive the point's array (the module's own, or
                               * the history reader's accumulator's) */
    int incrementing;         /* a rate: value is the increase over interval_s */
    double t_unix, value, interval_s;
};
/* The points of every counter that arrived in [from_unix, to_unix), counter by counter in the
 * order they were first seen, each in time order: a malloc'd array (NULL when none) in *out,
 * its length in *n. 0, or -1 out of memory. */
int prof_counters_series(double from_unix, double to_unix, struct prof_counter_point **out,
                         size_t *n);
/* Bytes the series hold. */
size_t prof_counters_mem_bytes(void);

struct prof_counters_stats {
    int enabled;        /* the counters' session runs */
    double stopped_gc_rate; /* > 0: the guard stopped them at this many GCs/s ... */
    double stopped_t;       /* ... at this unix time */
    long max_gc_rate;       /* the guard's threshold (0 = off) */
    uint64_t events;    /* counter events read */
    int silent;         /* none yet, PROF_COUNTERS_SILENT_NOTE after start: none will come */
    uint64_t malformed; /* System.Runtime events that could not be read */
    uint64_t dropped;   /* values of counters past PROF_COUNTERS_MAX */
    uint64_t series_dropped; /* values the series missed (clrscope-agg seconds behind) */
};
void prof_counters_get_stats(struct prof_counters_stats *out);
#define PROF_COUNTERS_SILENT_NOTE                                                                \
    "no System.Runtime counter came in the 10 s after start: the app was likely built with "  \
    "EventSourceSupport=false (trimmed apps often are), which leaves the runtime no counters"

struct prof_kind;
/* The aggregator's row: ticks the counters' history. */
extern const struct prof_kind prof_counters_kind;

#endif
