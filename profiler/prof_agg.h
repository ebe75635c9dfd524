/*
 * prof_agg - the clrscope-agg thread: drains the callback ring (prof_ring) every 20 ms, names
 * frames and hands each record to the module that owns its kind; once a second it runs every
 * module's periodic tick (GC CPU share, live-object checks, self-cost figures).
 */
#ifndef PROF_AGG_H
#define PROF_AGG_H

#include <stdint.h>

struct prof_self_stats {
    double cpu_s;          /* CPU time used by clrscope-* threads */
    double cpu_share;      /* of process CPU over the last 10 s */
    int64_t rss_bytes;     /* process RSS (the app and clrscope together) */
    /* clrscope's own memory, accounted by its modules (bytes held, refreshed once a second):
     * the profile store, the event ring, the live-object tracker, the exception and lock
     * tables, the JIT code map, the export queue; mem_bytes is their sum. */
    int64_t mem_bytes;
    int64_t mem_store, mem_ring, mem_live, mem_tables, mem_codemap, mem_export, mem_tdump;
    uint64_t ring_dropped, ring_pushed;
};

int prof_agg_start(void);
void prof_agg_stop(void);
void prof_agg_self_stats(struct prof_self_stats *out);

#endif
