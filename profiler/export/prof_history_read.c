/* prof_history_read.c - the GC's and the runtime counters' windows past the memory, read from
 * the history's segments (prof_history.h). */
#include "prof_history.h"
#include "prof_history_read.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_gc.h"
#include "prof_scratch.h"

static int by_gc_t(const void *a, const void *b)
{
    const struct prof_gc_second *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int by_counter_t(const void *a, const void *b)
{
    const struct prof_counter_point *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->t_unix < y->t_unix ? -1 : x->t_unix > y->t_unix;
}

void prof_counters_view_free(struct prof_counters_view *v)
{
    free(v->pts);
    v->pts = NULL;
    v->n = 0;
    prof_hacc_free(&v->acc);
}

int prof_history_counters_view(double seconds, struct prof_counters_view *out)
{
    struct prof_history_reader r;
    prof_history_reader_state(&r);
    int reading = r.reading, serving = r.serving;
    int64_t L = r.seg_s;
    memset(out, 0, sizeof *out);
    prof_hacc_init(&out->acc, 1);
    double now = prof_unix_now(), from = now - seconds;
    /* the disk's part: whole segments before the first boundary the memory covers */
    int64_t cut = INT64_MIN / 2;
    if (serving || (reading && seconds > g_cfg.history_s)) {
        int64_t oldest = (int64_t)floor(now) - g_cfg.history_s + 1;
        cut = serving ? INT64_MAX / 2 : (oldest + L - 1) / L * L;
        prof_history_read_segments(r.pdir, PROF_HSEG_COUNTERS, (int64_t)floor(from), cut - 1, cut,
                                   NULL, &out->acc);
    }
    struct prof_counter_point *mem = NULL;
    size_t nmem = 0;
    if (!serving && prof_counters_series(cut > from ? (double)cut : from, now + 1, &mem, &nmem)) {
        prof_counters_view_free(out);
        return -1;
    }
    size_t n = nmem;
    for (uint32_t i = 0; i < out->acc.ncpt; i++)
        n += out->acc.cpt[i].t_unix >= from && out->acc.cpt[i].t_unix < (double)cut;
    out->pts = n ? malloc(n * sizeof *out->pts) : NULL;
    if (n && !out->pts) {
        free(mem);
        prof_counters_view_free(out);
        return -1;
    }
    for (uint32_t i = 0; i < out->acc.ncpt; i++)
        if (out->acc.cpt[i].t_unix >= from && out->acc.cpt[i].t_unix < (double)cut)
            out->pts[out->n++] = out->acc.cpt[i];
    if (nmem)
        memcpy(out->pts + out->n, mem, nmem * sizeof *mem);
    out->n += nmem;
    free(mem);
    if (out->n > 1)
        qsort(out->pts, out->n, sizeof *out->pts, by_counter_t);
    return 0;
}

int prof_history_gc_view(double seconds, size_t max_collections, struct prof_gc_view *out)
{
    struct prof_history_reader r;
    prof_history_reader_state(&r);
    int reading = r.reading, serving = r.serving;
    int64_t L = r.seg_s;
    if (!serving && (!reading || !(seconds > g_cfg.history_s)))
        return prof_gc_view(seconds, max_collections, out);
    memset(out, 0, sizeof *out);
    double now = prof_unix_now(), from = now - seconds;
    int64_t oldest = (int64_t)floor(now) - g_cfg.history_s + 1;
    int64_t cut = serving ? INT64_MAX / 2 : (oldest + L - 1) / L * L;
    struct prof_hacc acc;
    prof_hacc_init(&acc, 1);
    prof_history_read_segments(r.pdir, PROF_HSEG_GC, (int64_t)floor(from), cut - 1, cut, NULL,
                               &acc);
    struct prof_gc_view mv;
    memset(&mv, 0, sizeof mv);
    if (!serving && prof_gc_view(now - (double)cut, (size_t)-1, &mv)) {
        prof_hacc_free(&acc);
        return -1;
    }
    /* the disk's part (older than the cut) in order, then the memory's */
    if (acc.ngsec)
        prof_scratch_sort(&acc.mem, acc.gsec, acc.ngsec, sizeof *acc.gsec, by_gc_t);
    if (acc.ngcoll)
        prof_scratch_sort(&acc.mem, acc.gcoll, acc.ngcoll, sizeof *acc.gcoll,
                          prof_gc_collection_by_t);
    size_t ns = mv.nseconds, nc = mv.ncollections;
    for (uint32_t i = 0; i < acc.ngsec; i++)
        ns += acc.gsec[i].t > from;
    for (uint32_t i = 0; i < acc.ngcoll; i++)
        nc += acc.gcoll[i].t > from;
    out->seconds = ns ? malloc(ns * sizeof *out->seconds) : NULL;
    struct prof_gc_collection *all = nc ? malloc(nc * sizeof *all) : NULL;
    if ((ns && !out->seconds) || (nc && !all)) {
        free(all);
        prof_gc_view_free(out);
        prof_gc_view_free(&mv);
        prof_hacc_free(&acc);
        return -1;
    }
    for (uint32_t i = 0; i < acc.ngsec; i++)
        if (acc.gsec[i].t > from)
            out->seconds[out->nseconds++] = acc.gsec[i];
    for (size_t i = 0; i < mv.nseconds; i++)
        out->seconds[out->nseconds++] = mv.seconds[i];
    size_t k = 0;
    for (uint32_t i = 0; i < acc.ngcoll; i++)
        if (acc.gcoll[i].t > from)
            all[k++] = acc.gcoll[i];
    for (size_t i = 0; i < mv.ncollections; i++)
        all[k++] = mv.collections[i];
    for (size_t i = 0; i < k; i++) {
        int g = all[i].generation < 0 ? 0 : all[i].generation > 2 ? 2 : all[i].generation;
        out->window_by_gen[g]++;
        if (all[i].pause_ms > out->window_max_pause_ms)
            out->window_max_pause_ms = all[i].pause_ms;
    }
    size_t keep = k < max_collections ? k : max_collections; /* the newest */
    if (keep)
        memmove(all, all + (k - keep), keep * sizeof *all);
    out->collections = all;
    out->ncollections = keep;
    out->collections_omitted = k - keep + mv.collections_omitted + acc.gcoll_omitted;
    out->window_by_gen[0] += acc.gcoll_omitted; /* the segments leave out gen0 ones only */
    out->totals = mv.totals;
    if (serving && out->nseconds) /* an exited process's: what its last second said */
        memcpy(out->totals.heap, out->seconds[out->nseconds - 1].heap, sizeof out->totals.heap);
    out->t_to = now;
    out->t_from = out->nseconds ? out->seconds[0].t - out->seconds[0].dt : now;
    if (out->t_from < from)
        out->t_from = from;
    prof_gc_view_free(&mv);
    prof_hacc_free(&acc);
    return 0;
}
