/*
 * prof_pprof - profile views to pprof: frames leaf-first from the call-path trie, the row's values
 * placed in the builder's columns, and labels (thread id, thread name, and the row's own label such
 * as the allocated type). Shared by the /debug/pprof endpoints and the Datadog exporter.
 *
 * ctx: any clrscope thread (civetweb workers, clrscope-export); nothing shared but the store's
 * and the live set's own locks.
 */
#ifndef PROF_PPROF_H
#define PROF_PPROF_H

#include "pprof_encoder.h"
#include "prof_store.h"

/* slot_to_col[k] = builder column receiving v[k], or -1. label_key names the row label (or NULL). */
int prof_pprof_add_view(pprof_builder *b, const struct prof_view *v, int ncols,
                        const int slot_to_col[PROF_NVALUES], const char *label_key);

/* One profile type of the dashboard and /debug/pprof: how to build it alone. */
struct prof_pprof_spec {
    const char *name;      /* "cpu", "wall", "alloc", "exceptions", "lock", "heap" */
    int kind;              /* PK_* or -1 for live objects */
    pprof_value_type types[3];
    int ntypes;
    int slot_to_col[PROF_NVALUES];
    pprof_value_type period_type;
    const char *label_key;
};

const struct prof_pprof_spec *prof_pprof_spec(const char *name);
/* Builds the gzip'd pprof of `spec` over the whole unix seconds from_s..to_s (inclusive), or of
 * the live set for heap (the range is then unused). Its time and duration are the range's, cut
 * at the profiler's start when the range reaches back before it and at now when it reaches the
 * current second. The encoder works in `mem`, where *out stays until the arena is released. */
int prof_pprof_build(const struct prof_pprof_spec *spec, int64_t from_s, int64_t to_s,
                     struct prof_scratch *mem, unsigned char **out, size_t *len);

#endif
