/*
 * api_counters.c - GET /api/v1/counters: the latest value of each of the runtime's own counters
 * (System.Runtime EventCounters, as dotnet-counters shows them), refreshed once a second by the
 * runtime. Rates ("rate") are the increase over the last interval, the others ("gauge") the value
 * polled at its end.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "prof_core.h"
#include "prof_counters.h"

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct prof_counter *)a)->name, ((const struct prof_counter *)b)->name);
}

int api_counters(const struct api_req *q, struct api_reply *out)
{
    (void)q;
    struct prof_counter *c = malloc(PROF_COUNTERS_MAX * sizeof *c);
    if (!c)
        return api_reply_error(out, 503, "out of memory");
    int n = prof_counters_snapshot(c, PROF_COUNTERS_MAX);
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
    free(c);
    return api_reply_json(out, 200, o);
}
