/*
 * prof_agg - the clrscope-agg thread: drains the callback ring (prof_ring) every 2-50 ms, names
 * the frames of each record and hands it to the kind that consumes it; once a second it runs
 * every kind's tick (GC CPU share, live-object checks, exception and lock estimates) and reads
 * clrscope's own cost (its threads' CPU, the memory each module holds).
 *
 * The aggregator names no module: each registers a row (struct prof_kind) that says what it
 * consumes and does, the composition root (prof_entry.c) in Initialize and the dashboard server
 * when it starts. Rows are appended, never removed; the kind table is what a caller that wants
 * to see or steer what each profile costs walks (prof_agg_kinds).
 *
 * The aggregator owns the process's one callback ring: it makes it at start and drains it; the
 * modules that produce records reserve them in prof_agg_ring().
 *
 * ctx: prof_agg_add any thread (before or after prof_agg_start); prof_agg_start/stop from
 * Initialize/Shutdown; every callback of a row on clrscope-agg only; prof_agg_ring (runtime
 * callbacks), prof_agg_self_stats and prof_agg_kinds any thread; prof_agg_use_ring tests only.
 */
#ifndef PROF_AGG_H
#define PROF_AGG_H

#include <stddef.h>
#include <stdint.h>

struct prof_rec;
struct prof_ring;

struct prof_kind {
    const char *name;     /* "alloc", "exceptions", "store", ... */
    unsigned profile;     /* PROFILE_* bits it serves; 0 for a module that profiles nothing */
    unsigned records;     /* 1u << REC_*: the ring's records it consumes, their frames named */
    unsigned bare;        /* 1u << REC_*: records it consumes as they are (no frames, no names) */
    /* a record of `records` (names[0..n): leaf first) or of `bare` (names NULL, n 0) */
    void (*consume)(const struct prof_rec *r, const char **names, int n);
    void (*poll)(int64_t now_ns);  /* every pass of the loop, before the drain (2-500 a second) */
    void (*tick)(double now_unix); /* once a second, in the order the rows were added */
    size_t (*mem_bytes)(void);     /* the bytes it holds now */
    const char *mem_name; /* the /api/v1/status memory field its bytes add to (rows may share) */
};

#define PROF_AGG_MAX_KINDS 32
#define PROF_AGG_MAX_MEM 16

/* Adds a row; `k` must stay valid for the process's life (a static const). 0, or -1 when the
 * table is full (logged). */
int prof_agg_add(const struct prof_kind *k);
/* The rows added so far, in order; *n their count. The array only grows. */
const struct prof_kind *const *prof_agg_kinds(size_t *n);

struct prof_mem_use {
    const char *name;  /* a mem_name of the kind table, or "event_ring" */
    int64_t bytes;
};

struct prof_self_stats {
    double cpu_s;          /* CPU time used by clrscope-* threads */
    double cpu_share;      /* of process CPU over the last 10 s */
    int64_t rss_bytes;     /* process RSS (the app and clrscope together) */
    /* clrscope's own memory, accounted by its modules (bytes held, refreshed once a second):
     * the event ring first, then each mem_name of the kind table in the order of first use;
     * mem_bytes is their sum. */
    int64_t mem_bytes;
    struct prof_mem_use mem[PROF_AGG_MAX_MEM];
    int nmem;
    uint64_t ring_dropped, ring_pushed;
};

/* The callback ring (prof_ring.h): runtime callbacks reserve and commit records in it, on any
 * thread; clrscope-agg drains it. NULL before prof_agg_start, or when there was no memory for it
 * (prof_ring_reserve then fails, counted as a drop by the producer). */
struct prof_ring *prof_agg_ring(void);
/* Tests and fuzz targets, which run no clrscope-agg: the ring producers write into and the
 * caller drains itself. */
void prof_agg_use_ring(struct prof_ring *r);

/* The dashboard took a connection: the pollers (its guards) are looked at 4 times a second for
 * the next 10 s, not once a second as while nothing comes. Any thread (its workers). */
void prof_agg_poll_often(void);

int prof_agg_start(void);
void prof_agg_stop(void);
void prof_agg_self_stats(struct prof_self_stats *out);

#endif
