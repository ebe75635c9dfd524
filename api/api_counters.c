/*
 * api_counters.c - GET /api/v1/counters[?seconds=N&points=M]: the latest value of each of the
 * runtime's own counters (System.Runtime EventCounters, as dotnet-counters shows them),
 * refreshed once a second by the runtime, and with `seconds` each counter's series over the
 * window (the part past the memory from the history on disk). Rates ("rate") are the increase
 * over the last interval, the others ("gauge") the value polled at its end; in the series a
 * rate is its increase per second. A post-mortem server answers from the history: the values
 * the process last recorded.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_json.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_history.h"

#define SERIES_MAX_BYTES (16u << 20)

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct prof_counter *)a)->name, ((const struct prof_counter *)b)->name);
}

/* A point's value as the series gives it: a rate per second, a gauge as it is. */
static double per_second(const struct prof_counter_point *p)
{
    return p->incrementing && p->interval_s > 0 ? p->value / p->interval_s : p->value;
}

/* The series of v's points (sorted by name, then time) over [from, to) as a JSON array into b:
 * each counter's points averaged into at most `points` equal stretches of the window. */
static void series_json(struct jbuf *b, const struct prof_counters_view *v, double from,
                        double to, long points)
{
    double step = (to - from) / (double)points;
    jb_lit(b, "[");
    for (size_t i = 0; i < v->n;) {
        size_t j = i;
        while (j < v->n && !strcmp(v->pts[j].name, v->pts[i].name))
            j++;
        const struct prof_counter_point *last = &v->pts[j - 1];
        if (i)
            jb_lit(b, ",");
        jb_lit(b, "{\"name\":");
        jb_str(b, v->pts[i].name);
        jb_lit(b, ",\"kind\":");
        jb_str(b, last->incrementing ? "rate" : "gauge");
        jb_lit(b, ",\"units\":");
        jb_str(b, last->units);
        jb_lit(b, ",\"interval_s\":");
        jb_num(b, last->interval_s);
        jb_lit(b, ",\"points\":[");
        int first = 1;
        for (size_t k = i; k < j;) {
            /* the stretch k falls in: its points' mean, at the last one's time */
            long at = step > 0 ? (long)floor((v->pts[k].t_unix - from) / step) : 0;
            double sum = 0;
            size_t m = k;
            while (m < j && (step > 0 ? (long)floor((v->pts[m].t_unix - from) / step) : 0) == at)
                sum += per_second(&v->pts[m++]);
            if (!first)
                jb_lit(b, ",");
            jb_lit(b, "[");
            first = 0;
            jb_num(b, round(v->pts[m - 1].t_unix * 1e3) / 1e3);
            jb_lit(b, ",");
            jb_num(b, sum / (double)(m - k));
            jb_lit(b, "]");
            k = m;
        }
        jb_lit(b, "]}");
        i = j;
    }
    jb_lit(b, "]");
}

/* A post-mortem server's latest values: each counter's last point in the history. */
static int last_points(const struct prof_counters_view *v, struct prof_counter *c, int max)
{
    int n = 0;
    for (size_t i = 0; i < v->n && n < max; i++) {
        if (i + 1 < v->n && !strcmp(v->pts[i + 1].name, v->pts[i].name))
            continue;
        struct prof_counter *o = &c[n++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", v->pts[i].name);
        snprintf(o->units, sizeof o->units, "%s", v->pts[i].units);
        o->value = v->pts[i].value;
        o->interval_s = v->pts[i].interval_s;
        o->t_unix = v->pts[i].t_unix;
        o->incrementing = v->pts[i].incrementing;
    }
    return n;
}

int api_counters(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    long points;
    int with_series = api_query_seconds(q, &seconds, out);
    if (with_series < 0 || api_query_long(q, "points", 600, 2, 10000, &points, out) < 0)
        return 400;
    struct prof_counters_view v = {0};
    int post_mortem = g_core.post_mortem;
    if (with_series || post_mortem) {
        if (post_mortem && !with_series)
            seconds = (double)prof_history_reach_s();
        if (prof_history_counters_view(seconds, &v))
            return api_reply_error(out, 503, "out of memory");
    }
    struct prof_counter *c = malloc(PROF_COUNTERS_MAX * sizeof *c);
    if (!c) {
        prof_counters_view_free(&v);
        return api_reply_error(out, 503, "out of memory");
    }
    int n = post_mortem ? last_points(&v, c, PROF_COUNTERS_MAX)
                        : prof_counters_snapshot(c, PROF_COUNTERS_MAX);
    qsort(c, (size_t)n, sizeof *c, cmp_name);
    struct prof_counters_stats st;
    prof_counters_get_stats(&st);
    double now = prof_unix_now();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "enabled", st.enabled != 0);
    cJSON_AddStringToObject(o, "provider", "System.Runtime");
    if (st.stopped_gc_rate > 0) {
        /* the guard stopped them: the values below are the last ones delivered */
        cJSON *g = cJSON_AddObjectToObject(o, "stopped");
        cJSON_AddNumberToObject(g, "t", st.stopped_t);
        cJSON_AddNumberToObject(g, "gc_rate", st.stopped_gc_rate);
        cJSON_AddNumberToObject(g, "max_gc_rate", (double)st.max_gc_rate);
        cJSON_AddStringToObject(g, "reason", "while these counters are on the runtime wakes its "
                                "finalizer thread after every GC; the app collected more often "
                                "than CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE times a second");
    }
    if (st.silent)
        cJSON_AddStringToObject(o, "note", PROF_COUNTERS_SILENT_NOTE);
    cJSON *arr = cJSON_AddArrayToObject(o, "counters");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", c[i].name);
        cJSON_AddStringToObject(e, "kind", c[i].incrementing ? "rate" : "gauge");
        cJSON_AddNumberToObject(e, "value", c[i].value);
        cJSON_AddStringToObject(e, "units", c[i].units);
        cJSON_AddNumberToObject(e, "interval_s", c[i].interval_s);
        cJSON_AddNumberToObject(e, "t", c[i].t_unix);
        cJSON_AddNumberToObject(e, "age_s", now - c[i].t_unix);
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddNumberToObject(o, "events", (double)st.events);
    cJSON_AddNumberToObject(o, "malformed", (double)st.malformed);
    cJSON_AddNumberToObject(o, "dropped", (double)st.dropped);
    cJSON_AddNumberToObject(o, "series_dropped", (double)st.series_dropped);
    free(c);
    if (with_series) {
        struct jbuf b;
        jb_init(&b, SERIES_MAX_BYTES);
        series_json(&b, &v, now - seconds, now, points);
        jb_raw(&b, "", 1); /* the NUL cJSON's raw item is copied up to */
        cJSON_AddNumberToObject(o, "seconds", seconds);
        if (b.overflow || !cJSON_AddRawToObject(o, "series", b.p)) {
            jb_free(&b);
            prof_counters_view_free(&v);
            cJSON_Delete(o);
            return api_reply_error(out, 503, "the series do not fit; lower seconds or points");
        }
        jb_free(&b);
    }
    prof_counters_view_free(&v);
    return api_reply_json(out, 200, o);
}
