/*
 * api_alloc.c - GET /api/v1/allocations (allocated types over a window, upscaled, with a 95%
 * interval for the total and the self-check against the runtime's exact allocated bytes) and GET /api/v1/live (sampled
 * live objects by type, with ages, GCs survived, a 15-minute history and the leak verdict).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_history.h"
#include "prof_live.h"
#include "prof_store.h"
#include "prof_walk.h"

struct type_sum {
    const char *type;
    int64_t count, bytes, samples;
};

static int cmp_bytes_desc(const void *a, const void *b)
{
    const struct type_sum *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->type, y->type);
}

/* Groups the view's rows by label. Labels are interned: equal names share one pointer, but
 * compare the text anyway. Returns the number of types (or -1 on allocation failure). */
static long group_by_type(const struct prof_view *v, struct type_sum **out)
{
    size_t hcap = 64;
    while (hcap < 2 * v->nrows + 2)
        hcap <<= 1;
    uint32_t *hash = calloc(hcap, sizeof *hash);
    struct type_sum *sums = calloc(v->nrows ? v->nrows : 1, sizeof *sums);
    if (!hash || !sums) {
        free(hash);
        free(sums);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < v->nrows; i++) {
        const struct prof_row *r = &v->rows[i];
        const char *label = r->label && r->label[0] ? r->label : "[unknown type]";
        uint64_t h = 1469598103934665603ull;
        for (const char *p = label; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        size_t k = (size_t)h & (hcap - 1);
        while (hash[k] && strcmp(sums[hash[k] - 1].type, label))
            k = (k + 1) & (hcap - 1);
        if (!hash[k]) {
            sums[n].type = label;
            hash[k] = (uint32_t)++n;
        }
        struct type_sum *s = &sums[hash[k] - 1];
        s->count += r->v[0];
        s->bytes += r->v[1];
        s->samples += r->v[2];
    }
    free(hash);
    qsort(sums, n, sizeof *sums, cmp_bytes_desc);
    *out = sums;
    return (long)n;
}

static const char *method_name(int m)
{
    return m == ALLOC_METHOD_SAMPLED ? "AllocationSampled"
           : m == ALLOC_METHOD_TICK  ? "AllocationTick"
                                     : NULL;
}

/* The upscaling self-check: the estimate against the runtime's own allocated-bytes counter
 * (System.Runtime alloc-rate = GC.GetTotalAllocatedBytes per interval, see prof_counters.h) over
 * the whole seconds of the window that the counter covers; and, on .NET 10, total.ci95. */
static void add_exact(cJSON *o, cJSON *tot, double t_from, double t_to)
{
    int64_t from_s = (int64_t)floor(t_from), to_s = (int64_t)floor(t_to);
    int64_t a = from_s, b = to_s, exact = 0;
    struct prof_counters_stats cs;
    prof_counters_get_stats(&cs);
    struct prof_view w;
    if (prof_counters_allocated(&a, &b, &exact) == 0 &&
        prof_store_view_range(PK_ALLOC_TYPE, a, b, NULL, &w) == 0) {
        int64_t est = 0;
        for (size_t i = 0; i < w.nrows; i++)
            est += w.rows[i].v[1];
        prof_view_free(&w);
        double ratio = exact > 0 ? (double)est / (double)exact : 0;
        cJSON_AddNumberToObject(o, "exact_bytes", (double)exact);
        cJSON_AddNumberToObject(o, "estimate_ratio", ratio);
        cJSON *sc = cJSON_AddObjectToObject(o, "self_check");
        cJSON_AddNumberToObject(sc, "t_from", (double)a);
        cJSON_AddNumberToObject(sc, "t_to", (double)(b + 1));
        cJSON_AddNumberToObject(sc, "estimated_bytes", (double)est);
        cJSON_AddNumberToObject(sc, "exact_bytes", (double)exact);
        cJSON_AddNumberToObject(sc, "ratio", ratio);
        cJSON_AddStringToObject(sc, "source", "GC.GetTotalAllocatedBytes, per second, from the "
                                "runtime's System.Runtime alloc-rate counter");
    } else {
        cJSON_AddNullToObject(o, "exact_bytes");
        cJSON_AddStringToObject(
            o, "exact_note",
            cs.stopped_gc_rate > 0 ? "the runtime counters were stopped: the app collects "
                                     "garbage more often than CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE "
                                     "times a second (see /api/v1/counters)"
            : !cs.enabled ? "the runtime counters are off (CLRSCOPE_RUNTIME_COUNTERS=0 or refused "
                            "by the runtime)"
            : cs.silent ? PROF_COUNTERS_SILENT_NOTE
            : !cs.events ? "the runtime has not delivered its System.Runtime counters yet (they "
                           "start once the app's managed code runs and come once a second)"
                         : "the runtime's allocated-bytes counter does not cover a whole second "
                           "of this window yet");
    }
    double lo, hi;
    uint64_t ci_samples;
    if (prof_alloc_total_ci(from_s, to_s, &lo, &hi, &ci_samples) == 0) {
        cJSON *ci = cJSON_AddArrayToObject(tot, "ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(round(lo)));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(round(hi)));
    }
}

int api_allocations(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    long limit;
    if (api_query_seconds(q, &seconds, out) < 0 ||
        api_query_long(q, "limit", 1000, 1, 100000, &limit, out) < 0)
        return 400;
    struct prof_alloc_stats st;
    prof_alloc_get_stats(&st);
    struct prof_view v;
    if (prof_history_view(PK_ALLOC_TYPE, seconds, NULL, &v, NULL))
        return api_reply_error(out, 503, "profile data unavailable (out of memory)");
    struct type_sum *sums = NULL;
    long ntypes = group_by_type(&v, &sums);
    if (ntypes < 0) {
        prof_view_free(&v);
        return api_reply_error(out, 503, "out of memory");
    }
    cJSON *o = cJSON_CreateObject();
    const char *m = method_name(st.method);
    if (m)
        cJSON_AddStringToObject(o, "method", m);
    else
        cJSON_AddNullToObject(o, "method");
    cJSON_AddBoolToObject(o, "enabled", (g_core.profiles & PROFILE_ALLOC) != 0);
    cJSON_AddStringToObject(o, "bias_note", prof_alloc_bias_note());
    cJSON_AddNumberToObject(o, "seconds", seconds);
    cJSON_AddNumberToObject(o, "t_from", v.t_from);
    cJSON_AddNumberToObject(o, "t_to", v.t_to);
    /* the share of the window the overhead governor had the allocation events on; counts and
     * bytes are already weighted by its inverse */
    double cov = prof_alloc_coverage((int64_t)floor(v.t_from), (int64_t)floor(v.t_to));
    cJSON_AddNumberToObject(o, "coverage", cov);
    if (cov < 0.999)
        cJSON_AddStringToObject(o, "coverage_note",
                                "the overhead governor (CLRSCOPE_OVERHEAD_BUDGET) had allocation "
                                "events on for this share of the window; every sample counts for "
                                "1/share, so shares stay unbiased; totals read low by the share "
                                "of the app's time the events themselves slow it (see "
                                "docs/overhead-budget.md)");
    /* a governed window's types err as its total does by which part of each second was seen:
     * their intervals widen by the total's widening (prof_alloc_time_widening) */
    double widen = prof_alloc_time_widening((int64_t)floor(v.t_from), (int64_t)floor(v.t_to));
    int64_t tc = 0, tb = 0, ts = 0;
    cJSON *types = cJSON_AddArrayToObject(o, "types");
    for (long i = 0; i < ntypes; i++) {
        tc += sums[i].count;
        tb += sums[i].bytes;
        ts += sums[i].samples;
        if (i >= limit)
            continue;
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", sums[i].type);
        cJSON_AddNumberToObject(t, "count", (double)sums[i].count);
        cJSON_AddNumberToObject(t, "bytes", (double)sums[i].bytes);
        cJSON_AddNumberToObject(t, "samples", (double)sums[i].samples);
        if (sums[i].samples > 0) {
            /* k samples of a type are a Poisson count: its estimate is off by about 1/sqrt(k)
             * (exact for objects of one size, the sampling being per byte) */
            double rel = widen * 1.96 / sqrt((double)sums[i].samples);
            cJSON *ci = cJSON_AddArrayToObject(t, "bytes_ci95");
            cJSON_AddItemToArray(ci, cJSON_CreateNumber(
                                         round((double)sums[i].bytes * (rel < 1 ? 1 - rel : 0))));
            cJSON_AddItemToArray(ci, cJSON_CreateNumber(round((double)sums[i].bytes * (1 + rel))));
        }
        cJSON_AddItemToArray(types, t);
    }
    /* shares need the totals, so they are filled in a second pass */
    cJSON *t;
    cJSON_ArrayForEach(t, types)
    {
        const cJSON *bi = cJSON_GetObjectItem(t, "bytes"), *ci = cJSON_GetObjectItem(t, "count");
        double b = bi ? bi->valuedouble : 0, c = ci ? ci->valuedouble : 0; /* (out of memory) */
        cJSON_AddNumberToObject(t, "share", tb > 0 ? b / (double)tb : 0);
        cJSON_AddNumberToObject(t, "count_share", tc > 0 ? c / (double)tc : 0);
    }
    cJSON_AddNumberToObject(o, "types_total", (double)ntypes);
    cJSON *tot = cJSON_AddObjectToObject(o, "total");
    cJSON_AddNumberToObject(tot, "count", (double)tc);
    cJSON_AddNumberToObject(tot, "bytes", (double)tb);
    cJSON_AddNumberToObject(tot, "samples", (double)ts);

    add_exact(o, tot, v.t_from, v.t_to);
    cJSON_AddNumberToObject(o, "tick_events", (double)st.tick_events);
    cJSON_AddNumberToObject(o, "dropped", (double)st.dropped);
    cJSON_AddNumberToObject(o, "samples_since_start", (double)st.samples);
    cJSON *wb = cJSON_AddObjectToObject(o, "stack_budget");
    cJSON_AddNumberToObject(wb, "per_s", g_cfg.alloc_stack_rate);
    cJSON_AddNumberToObject(wb, "walked", (double)st.walked);
    cJSON_AddNumberToObject(wb, "thinned", (double)st.thinned);
    struct prof_walk_stats ws;
    prof_walk_get_stats(&ws);
    cJSON *sw = cJSON_AddObjectToObject(o, "stack_walk");
    cJSON_AddStringToObject(sw, "method", prof_walk_mode_name(ws.mode));
    cJSON_AddNumberToObject(sw, "frame_pointer", (double)ws.fp);
    cJSON_AddNumberToObject(sw, "runtime", (double)ws.runtime);
    cJSON_AddNumberToObject(sw, "fallbacks", (double)ws.fallbacks);
    cJSON_AddNumberToObject(sw, "unknown_stub", (double)ws.unknown_stub);
    cJSON_AddNumberToObject(sw, "code_not_mapped", (double)ws.not_code);
    cJSON_AddNumberToObject(sw, "calibrations", (double)ws.calibrations);
    cJSON_AddNumberToObject(sw, "places_learned", ws.places_learned);
    cJSON_AddNumberToObject(sw, "places_unsure", ws.places_unsure);
    cJSON_AddNumberToObject(sw, "addresses_resolved", (double)ws.resolved);
    if (ws.mode == PROF_WALK_CHECK) {
        cJSON *c = cJSON_AddObjectToObject(sw, "check");
        cJSON_AddNumberToObject(c, "same", (double)ws.check_same);
        cJSON_AddNumberToObject(c, "different", (double)ws.check_differ);
    }
    free(sums);
    prof_view_free(&v);
    return api_reply_json(out, 200, o);
}

static cJSON *quant_json(cJSON *parent, const char *name, const struct prof_live_quant *q)
{
    cJSON *o = cJSON_AddObjectToObject(parent, name);
    cJSON_AddNumberToObject(o, "p50", round(q->p50 * 10) / 10);
    cJSON_AddNumberToObject(o, "p90", round(q->p90 * 10) / 10);
    cJSON_AddNumberToObject(o, "max", round(q->max * 10) / 10);
    return o;
}

int api_live(const struct api_req *q, struct api_reply *out)
{
    long limit;
    if (api_query_long(q, "limit", 1000, 1, 100000, &limit, out) < 0)
        return 400;
    struct prof_live_report rep;
    if (prof_live_report(&rep)) {
        prof_live_report_free(&rep);
        return api_reply_error(out, 503, "out of memory building the live-object table");
    }
    struct prof_alloc_stats st;
    prof_alloc_get_stats(&st);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "enabled", rep.enabled);
    if (!rep.enabled && rep.disabled_reason)
        cJSON_AddStringToObject(o, "note", rep.disabled_reason);
    const char *m = method_name(st.method);
    if (m)
        cJSON_AddStringToObject(o, "method", m);
    else
        cJSON_AddNullToObject(o, "method");
    cJSON_AddNumberToObject(o, "tracked", rep.tracked);
    cJSON_AddNumberToObject(o, "cap", rep.cap);
    cJSON_AddBoolToObject(o, "capped", rep.capped);
    cJSON_AddNumberToObject(o, "untracked", (double)rep.untracked);
    cJSON_AddNumberToObject(o, "overflow", (double)rep.overflow);
    cJSON_AddNumberToObject(o, "admission_probability", ldexp(1.0, -(int)rep.sampling_shift));
    cJSON_AddNumberToObject(o, "handle_failures", (double)rep.handle_failures);
    cJSON_AddNumberToObject(o, "gcs", (double)rep.gcs);
    cJSON_AddNumberToObject(o, "collected", (double)rep.deaths);
    cJSON *lk = cJSON_AddObjectToObject(o, "leak_rule");
    cJSON_AddNumberToObject(lk, "window_s", rep.leak_window_s);
    cJSON_AddNumberToObject(lk, "min_s", rep.leak_min_s);
    cJSON_AddStringToObject(
        lk, "rule",
        "over the window: >= 3 objects sampled, <= 20% as many collected, estimated live count "
        "up >= 20% (>= 3 tracked), oldest age up >= window/2 and median age up >= window/10");
    cJSON *types = cJSON_AddArrayToObject(o, "types");
    for (size_t i = 0; i < rep.ntypes && (long)i < limit; i++) {
        const struct prof_live_type *t = &rep.types[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "type", t->type);
        cJSON_AddNumberToObject(j, "count", round(t->count));
        cJSON_AddNumberToObject(j, "bytes", round(t->bytes));
        cJSON_AddNumberToObject(j, "tracked", t->tracked);
        quant_json(j, "age_s", &t->age_s);
        quant_json(j, "seen_alive_s", &t->seen_alive_s);
        cJSON *g = cJSON_AddObjectToObject(j, "gcs_survived");
        cJSON_AddNumberToObject(g, "p50", t->gcs_p50);
        cJSON_AddNumberToObject(g, "max", t->gcs_max);
        cJSON_AddBoolToObject(j, "leak_suspect", t->leak_suspect);
        /* always there (README): "" when there is nothing to say yet */
        cJSON_AddStringToObject(j, "leak_evidence", t->leak_reason);
        cJSON *h = cJSON_AddArrayToObject(j, "history");
        for (int k = 0; k < t->nhist; k++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "t", round(t->hist[k].t));
            cJSON_AddNumberToObject(p, "count", round(t->hist[k].count));
            cJSON_AddItemToArray(h, p);
        }
        cJSON_AddItemToArray(types, j);
    }
    cJSON_AddNumberToObject(o, "types_total", (double)rep.ntypes);
    cJSON_AddNumberToObject(o, "types_recycled", (double)rep.types_recycled);
    prof_live_report_free(&rep);
    return api_reply_json(out, 200, o);
}
