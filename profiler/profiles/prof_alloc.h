/*
 * prof_alloc - allocation sampling by type and stack (AllocationSampled on .NET 10+,
 * GCAllocationTick on .NET 8/9), upscaled to estimated counts and bytes.
 *
 * ctx: prof_alloc_session_needs once at Initialize (prof_events_start); prof_alloc_on_event on
 * the allocating thread inside the runtime's allocation path (no malloc, no locks, no logging:
 * it walks the stack into a ring record and may create a weak handle through prof_live_track);
 * prof_alloc_consume and prof_alloc_consume_type on clrscope-agg only; the getters, the interval
 * and the note on any thread.
 */
#ifndef PROF_ALLOC_H
#define PROF_ALLOC_H

#include <stdint.h>

#include "clr_abi.h"
#include "prof_ring.h"

enum prof_alloc_method {
    ALLOC_METHOD_NONE = 0,
    ALLOC_METHOD_SAMPLED = 1, /* AllocationSampled (event 303), .NET 10+ */
    ALLOC_METHOD_TICK = 2,    /* GCAllocationTick (event 10), .NET 8/9 */
};

/* EventPipe keywords/level the allocation profile needs on this runtime (g_core.runtime_major). */
void prof_alloc_session_needs(UINT64 *keywords, UINT32 *level);
/* On the allocating thread, inside EventPipeEventDelivered (ids 10 and 303). */
void prof_alloc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* On clrscope-agg: a REC_ALLOC (or REC_LIVE) record with its frames named (root first).
 * Record layout: a = TypeID, b = object size, c = estimated bytes, x = estimated count (both
 * upscaled by the stack budget), wcount/wbytes = the same before that upscaling,
 * d = live slot + 1 | sequence << 32 (REC_LIVE only), text = the runtime's type name (UTF-8).
 * Adds the stack (PK_ALLOC) and the type table's row (PK_ALLOC_TYPE). */
void prof_alloc_consume(const struct prof_rec *rec, const char **names, int n);
/* On clrscope-agg: a REC_ALLOC_TYPE record (a sample the stack budget left out): the type table's
 * row only. */
void prof_alloc_consume_type(const struct prof_rec *rec);

struct prof_alloc_stats {
    int method;             /* enum prof_alloc_method */
    uint64_t samples;       /* allocation events turned into samples */
    uint64_t dropped;       /* samples lost because the event ring was full */
    uint64_t tick_events;   /* GCAllocationTick events seen */
    uint64_t walked;        /* samples whose stack was walked */
    uint64_t thinned;       /* samples whose stack the budget left out (the walked ones
                             * stand for them in the stacks, see prof_alloc.c; all of them
                             * count in the table by type) */
};
void prof_alloc_get_stats(struct prof_alloc_stats *out);
/* AllocationSampled only: a 95% interval for the bytes allocated over from_s..to_s, from the
 * design doc's "failed trials" model; *samples = samples in the window. -1 when unavailable. */
int prof_alloc_total_ci(int64_t from_s, int64_t to_s, double *lo, double *hi, uint64_t *samples);
/* How many times the total's interval over [from_s, to_s] is as wide as its samples' count
 * alone makes it (>= 1; 1 without the governor or on .NET 8/9): the spread of the governed
 * seconds' estimates, which the table's types take too. Any thread. */
double prof_alloc_time_widening(int64_t from_s, int64_t to_s);
/* The overhead governor (prof_budget), which turns the allocation events on for a share of
 * each second: every sample from now on stands for `scale` (1 / that share) times what it would;
 * and, once second `sec` (unix) has ended, the share it was planned at and the share the events
 * really flowed (`on_fraction`). Switching takes time (tens of milliseconds on a loaded or
 * instrumented process), so the two differ: the store's views, totals and the interval of the
 * total weigh that second's samples by planned / on (prof_alloc_second_factor), which makes
 * them stand for 1 / on_fraction each. prof_alloc_coverage: the share of from_s..to_s that was
 * on (1 when never turned down). Any thread. */
void prof_alloc_set_scale(double scale);
void prof_alloc_note_coverage(int64_t sec, double on_fraction, double planned);
double prof_alloc_coverage(int64_t from_s, int64_t to_s);
/* planned / on of second `sec` (1 when either is unknown); any thread, no lock. */
double prof_alloc_second_factor(int64_t sec);
/* The same, and whether it is settled: 1 once the governor has noted the second or a later one
 * (a second it did not note was fully on), 0 while it may still be noted. prof_live weighs the
 * objects it tracks by it (prof_live_set_factor). Any thread, no lock. */
int prof_alloc_second_factor_settled(int64_t sec, double *factor);
/* A short note on the sampling method and its bias, for the API and the dashboard. */
const char *prof_alloc_bias_note(void);

struct prof_kind;
/* The aggregator's row: consumes REC_ALLOC and REC_LIVE (walked) and REC_ALLOC_TYPE (bare)
 * records; a REC_LIVE record goes on to prof_live_consume. */
extern const struct prof_kind prof_alloc_kind;

#endif
