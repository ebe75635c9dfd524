/* api_budget.c - the overhead governor's view (prof_budget): the `budget` object of
 * /api/v1/status, GET /api/v1/budget (the same with the last two minutes, second by second) and
 * its /metrics lines. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "prof_alloc.h"
#include "prof_budget.h"
#include "prof_config.h"
#include "prof_sampler.h"

static void budget_fields(cJSON *b, const struct prof_budget_view *v)
{
    double proc = v->window.proc_s;
    cJSON_AddBoolToObject(b, "enabled", v->enabled != 0);
    cJSON_AddNumberToObject(b, "target", v->target);
    cJSON_AddNumberToObject(b, "floor_core", g_cfg.overhead_floor);
    cJSON_AddNumberToObject(b, "allowed", proc > 0 ? v->allowed_s / proc : 0);
    cJSON_AddNumberToObject(b, "measured", v->measured);
    cJSON_AddNumberToObject(b, "window_s", PROF_BUDGET_WINDOW_S);
    cJSON_AddNumberToObject(b, "process_cpu_s", proc);
    cJSON *by = cJSON_AddObjectToObject(b, "by_source");
    cJSON_AddNumberToObject(by, "threads", proc > 0 ? v->window.threads_s / proc : 0);
    cJSON_AddNumberToObject(by, "callbacks",
                            proc > 0 ? (v->window.cb_alloc_s + v->window.cb_other_s) / proc : 0);
    cJSON_AddNumberToObject(by, "callbacks_alloc", proc > 0 ? v->window.cb_alloc_s / proc : 0);
    cJSON_AddNumberToObject(by, "runtime_events", proc > 0 ? v->window.runtime_s / proc : 0);
    cJSON_AddNumberToObject(by, "suspensions", proc > 0 ? v->window.susp_s / proc : 0);
    cJSON_AddNumberToObject(by, "signal_handler", proc > 0 ? v->window.handler_s / proc : 0);
    cJSON_AddNumberToObject(by, "perf_events", proc > 0 ? v->window.perf_s / proc : 0);
    cJSON_AddNumberToObject(b, "runtime_event_ns", v->runtime_ns_per_event);
    cJSON *src = cJSON_AddObjectToObject(b, "sources");
    cJSON *al = cJSON_AddObjectToObject(src, "alloc");
    cJSON_AddBoolToObject(al, "switchable", v->alloc_switchable != 0);
    cJSON_AddNumberToObject(al, "on_fraction", v->alloc_share);
    cJSON_AddNumberToObject(al, "on_fraction_window", v->window.on_share);
    cJSON_AddNumberToObject(al, "events", (double)v->alloc_events);
    cJSON_AddNumberToObject(al, "switches", (double)v->switches);
    cJSON_AddNumberToObject(al, "switch_failures", (double)v->switch_failures);
    cJSON_AddNumberToObject(al, "switch_cpu_s", v->switch_cpu_s);
    cJSON_AddNumberToObject(al, "switch_wall_s", v->switch_wall_s);
    cJSON_AddNumberToObject(al, "switch_wall_max_s", v->switch_wall_max_s);
    cJSON *wall = cJSON_AddObjectToObject(src, "wall");
    struct prof_sampler_stats ss;
    prof_sampler_get_stats(&ss);
    int slow = v->wall_slowdown >= 1 ? v->wall_slowdown : 1;
    cJSON_AddNumberToObject(wall, "slowdown", slow);
    cJSON_AddNumberToObject(wall, "hz", ss.wall_hz > 0 ? (double)ss.wall_hz / slow : 0);
    cJSON *cpu = cJSON_AddObjectToObject(src, "cpu");
    int cslow = v->cpu_slowdown >= 1 ? v->cpu_slowdown : 1;
    cJSON_AddNumberToObject(cpu, "slowdown", cslow);
    cJSON_AddNumberToObject(cpu, "hz", (double)g_cfg.sampling_hz / cslow);
    if (v->over)
        cJSON_AddStringToObject(b, "over", v->over);
    else
        cJSON_AddNullToObject(b, "over");
    if (v->changed_unix > 0) {
        cJSON *lc = cJSON_AddObjectToObject(b, "last_change");
        cJSON_AddNumberToObject(lc, "t", v->changed_unix);
        cJSON_AddStringToObject(lc, "source", v->changed_source ? v->changed_source : "alloc");
        cJSON_AddNumberToObject(lc, "from", v->changed_from);
        cJSON_AddNumberToObject(lc, "to", v->changed_to);
    } else {
        cJSON_AddNullToObject(b, "last_change");
    }
}

void api_budget_status(cJSON *status)
{
    struct prof_budget_view *v = malloc(sizeof *v); /* a few KB: not on a worker's stack */
    if (!v)
        return;
    prof_budget_read(v);
    budget_fields(cJSON_AddObjectToObject(status, "budget"), v);
    free(v);
}

int api_budget(const struct api_req *q, struct api_reply *out)
{
    (void)q;
    struct prof_budget_view *v = malloc(sizeof *v);
    if (!v)
        return api_reply_error(out, 503, "out of memory");
    prof_budget_read(v);
    cJSON *o = cJSON_CreateObject();
    budget_fields(o, v);
    cJSON *h = cJSON_AddArrayToObject(o, "history");
    for (int i = 0; i < v->nhistory; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "t", v->history[i].t_unix);
        cJSON_AddNumberToObject(p, "measured", v->history[i].measured);
        cJSON_AddNumberToObject(p, "alloc_on", v->history[i].alloc_on);
        cJSON_AddItemToArray(h, p);
    }
    free(v);
    return api_reply_json(out, 200, o);
}
