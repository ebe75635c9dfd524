/*
 * prof_live - sampled live objects: weak handles on sampled allocations, checked after each GC.
 *
 * Ownership (see prof_live.c for the details and for why creating a handle on a not yet
 * initialised object is safe):
 *   - a fixed slot array (CLRSCOPE_LIVE_MAX slots, allocated at init) holds the handles. App
 *     threads claim free slots lock-free in the allocation callback (prof_live_track); the
 *     GC-finished callback is the only place that checks, destroys and frees handles;
 *   - everything derived (type, stack, thread, per-type history, leak verdicts) belongs to
 *     clrscope-agg and is read by API handlers under one mutex.
 *
 * ctx: prof_live_init at Initialize; prof_live_track on the allocating thread, in prof_alloc's
 * allocation callback; prof_live_gc_started/finished in the runtime's GC callbacks (runtime
 * threads; no locks, no allocation); prof_live_consume and prof_live_tick on clrscope-agg;
 * prof_live_view, prof_live_pprof_add, prof_live_report and prof_live_mem_bytes any thread.
 */
#ifndef PROF_LIVE_H
#define PROF_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "clr_abi.h"
#include "pprof_encoder.h"
#include "prof_ring.h"
#include "prof_store.h"

void prof_live_init(void);
/* Bytes the tracker holds (slots, their metadata, the per-type history); 0 when off. */
size_t prof_live_mem_bytes(void);
/* Runtime GC callbacks (any runtime thread; no locks, no allocation). */
void prof_live_gc_started(int cgen, const BOOL *collected);
void prof_live_gc_finished(void);
/* Allocation callback, on the allocating thread (prof_alloc_on_event): tracks the object at
 * `address` with a weak handle when there is room. `kind` is the event's AllocationKind (0 small
 * object heap, 1 LOH, 2 POH); count_w/bytes_w are the sample's upscaling weights. Returns the slot
 * index and stores its sequence number in *seq, or returns -1 (not tracked, counted). */
int prof_live_track(uintptr_t address, uint64_t size, int kind, double count_w, double bytes_w,
                    double t_unix, uint32_t *seq);
/* The overhead governor runs the allocation events for a share of each second, and a sample's
 * weights (prof_live_track) stand for the share planned; prof_alloc learns, once the second has
 * ended, how much of it the events really flowed. `fn` gives that second's planned / on factor:
 * it returns 1 with *factor set once the second is settled, 0 with *factor = 1 while it is not
 * yet. Every tracked object's estimate is weighed by the factor of the second it was allocated
 * in, the first settled one kept (prof_alloc forgets a second after the history's length). Set
 * once, at Initialize (prof_alloc). */
typedef int (*prof_live_factor_fn)(int64_t sec, double *factor);
void prof_live_set_factor(prof_live_factor_fn fn);
/* clrscope-agg, from prof_alloc's row: a REC_LIVE record (prof_alloc.h) with its frames named,
 * root first. Attaches the type, thread and stack to the tracked object's slot. */
void prof_live_consume(const struct prof_rec *rec, const char **names, int n);
void prof_live_tick(double now_unix);       /* 1 Hz, clrscope-agg */
/* The live objects as a view: rows v0 = estimated count, v1 = estimated bytes, v2 = tracked
 * objects, label = type name, optionally only `filter`'s. Any thread. */
int prof_live_view(const char *filter, struct prof_view *out);
/* One pprof sample per tracked object (frames, values per slot_to_col, labels: label_key = type,
 * "thread id", "age" in seconds, "gcs survived"). Any thread. Returns -1 on allocation failure. */
int prof_live_pprof_add(pprof_builder *b, int ncols, const int slot_to_col[PROF_NVALUES],
                        const char *label_key);

/* ---- the /api/v1/live table ---- */
struct prof_live_quant {
    double p50, p90, max;
};

struct prof_live_hist {
    double t;
    double count;
};

struct prof_live_type {
    const char *type;
    double count, bytes;        /* estimates (upscaled) */
    uint32_t tracked;
    struct prof_live_quant age_s;       /* since allocation, of objects not reclaimed yet */
    struct prof_live_quant seen_alive_s;/* lifetime proven by GCs that scanned the object */
    uint32_t gcs_p50, gcs_max;          /* GCs survived that condemned the object's generation */
    int leak_suspect;
    char leak_reason[160];
    int nhist;
    struct prof_live_hist *hist;        /* oldest first */
};

struct prof_live_report {
    uint32_t tracked, cap;
    int capped;
    uint64_t untracked;         /* sampled allocations not tracked (thinned, evicted, no room) */
    uint64_t overflow;          /* of which: no free slot at all (estimates are lower bounds) */
    uint64_t handle_failures;   /* CreateHandle refused */
    uint32_t sampling_shift;    /* new samples are admitted with probability 2^-shift */
    uint64_t gcs;               /* GCs seen since start */
    uint64_t deaths;            /* tracked objects found collected */
    uint64_t types_recycled;    /* type rows given back (idle types, the table 3/4 full) */
    int enabled;
    const char *disabled_reason;
    double leak_window_s, leak_min_s;
    size_t ntypes;
    struct prof_live_type *types; /* sorted by bytes, descending */
};

/* Builds the table (allocates; free with prof_live_report_free). Any thread. */
int prof_live_report(struct prof_live_report *out);
void prof_live_report_free(struct prof_live_report *r);

struct prof_kind;
/* The aggregator's row: ticks the checks of tracked objects (REC_LIVE records come through
 * prof_alloc's row, which consumes the allocation sample first). */
extern const struct prof_kind prof_live_kind;

#endif
