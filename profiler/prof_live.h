/*
 * prof_live - sampled live objects: weak handles on sampled allocations, checked after each GC.
 */
#ifndef PROF_LIVE_H
#define PROF_LIVE_H

#include "prof_ring.h"
#include "prof_store.h"

void prof_live_init(void);
void prof_live_gc_finished(void);           /* runtime GC-finished callback */
void prof_live_consume(const struct prof_rec *rec, const char **names, int n); /* clrscope-agg */
void prof_live_tick(double now_unix);       /* 1 Hz, clrscope-agg */
/* The live objects as a view: rows v0 = estimated count, v1 = estimated bytes, v2 = tracked
 * objects, label = type name, optionally only `filter`'s. Any thread. */
int prof_live_view(const char *filter, struct prof_view *out);

#endif
