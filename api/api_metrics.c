/*
 * api_metrics.c - GET /metrics: the runtime's and clrscope's own figures in the Prometheus text
 * exposition format 0.0.4. Every name starts with clrscope_, values are in base units (seconds,
 * bytes), counters end in _total. Cheap: totals only, no profile views are built.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_json.h"
#include "prof_agg.h"
#include "prof_budget.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_gc.h"
#include "prof_sampler.h"
#include "prof_store.h"
#include "prof_threads.h"

#define CLRSCOPE_VERSION  "0.1.0"
#define GC_RATIO_WINDOW_S 60.0

static void family(struct jbuf *b, const char *name, const char *type, const char *help)
{
    jb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_u(struct jbuf *b, const char *name, const char *type, const char *help,
                     uint64_t v)
{
    family(b, name, type, help);
    jb_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void metric_d(struct jbuf *b, const char *name, const char *type, const char *help, double v)
{
    family(b, name, type, help);
    jb_printf(b, "%s %.9g\n", name, v);
}

/* A label value with \, " and newline escaped. */
static void label_value(struct jbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            jb_raw(b, "\\", 1);
        if (*s == '\n')
            jb_raw(b, "\\n", 2);
        else
            jb_raw(b, s, 1);
    }
}

static void gc_metrics(struct jbuf *b)
{
    static const char *const heaps[GC_NHEAPS] = {"gen0", "gen1", "gen2", "loh", "poh"};
    struct prof_gc_view v;
    if (prof_gc_view(GC_RATIO_WINDOW_S, 0, &v))
        return;
    const struct prof_gc_totals *t = &v.totals;
    family(b, "clrscope_gc_collections_total", "counter",
           "Garbage collections since clrscope started, by condemned generation.");
    for (int g = 0; g < 3; g++)
        jb_printf(b, "clrscope_gc_collections_total{generation=\"gen%d\"} %" PRIu64 "\n", g,
             t->by_depth[g]);
    metric_u(b, "clrscope_gc_background_collections_total", "counter",
             "Background (concurrent) gen2 collections.", t->background);
    metric_u(b, "clrscope_gc_induced_collections_total", "counter",
             "Collections induced by the app (GC.Collect and friends).", t->induced);
    metric_d(b, "clrscope_gc_pause_seconds_total", "counter",
             "Time the runtime was suspended for the GC (SuspendEEBegin to RestartEEEnd).",
             t->pause_s);
    metric_d(b, "clrscope_gc_cpu_seconds_total", "counter",
             "CPU used by garbage collection: dedicated GC threads plus app threads running "
             "blocking GCs.",
             t->gc_threads_cpu_s + t->gc_user_cpu_s);
    metric_d(b, "clrscope_gc_threads_cpu_seconds_total", "counter",
             "CPU of the runtime's dedicated GC threads (.NET Server GC, .NET BGC).",
             t->gc_threads_cpu_s);
    double gc = 0, proc = 0;
    for (size_t i = 0; i < v.nseconds; i++) {
        gc += v.seconds[i].gc_cpu_s;
        proc += v.seconds[i].process_cpu_s;
    }
    metric_d(b, "clrscope_gc_cpu_ratio", "gauge",
             "GC CPU divided by process CPU over the last 60 seconds.",
             proc > 0 ? (gc / proc > 1 ? 1 : gc / proc) : 0);
    family(b, "clrscope_gc_heap_size_bytes", "gauge",
           "Generation sizes after the latest GC (GCHeapStats), fragmentation included.");
    for (int g = 0; g < GC_NHEAPS; g++)
        jb_printf(b, "clrscope_gc_heap_size_bytes{generation=\"%s\"} %" PRIu64 "\n", heaps[g],
             t->heap[g]);
    metric_u(b, "clrscope_gc_heap_count", "gauge", "GC heaps (1 in workstation mode).",
             (uint64_t)(t->heap_count > 0 ? t->heap_count : 1));
    metric_u(b, "clrscope_gc_server_mode", "gauge", "1 when the runtime uses server GC.",
             (uint64_t)t->server);
    metric_u(b, "clrscope_gc_records_dropped_total", "counter",
             "Per-GC records lost because too many GCs happened between two reads.",
             t->dropped_collections);
    prof_gc_view_free(&v);
}

static void budget_metrics(struct jbuf *b)
{
    struct prof_budget_view *v = malloc(sizeof *v); /* a few KB: not on a worker's stack */
    if (!v)
        return;
    prof_budget_read(v);
    metric_d(b, "clrscope_budget_target_ratio", "gauge",
             "CLRSCOPE_OVERHEAD_BUDGET: the share of the process's CPU clrscope may cost (0: "
             "no governor).", v->enabled ? v->target : 0);
    metric_d(b, "clrscope_budget_measured_ratio", "gauge",
             "What clrscope cost over the last 10 s (threads, callbacks, the runtime's work for "
             "its allocation events) divided by the process's CPU.", v->measured);
    metric_d(b, "clrscope_budget_alloc_on_ratio", "gauge",
             "The share of each second the allocation events are on.", v->alloc_share);
    metric_u(b, "clrscope_budget_alloc_switches_total", "counter",
             "Times the governor switched the allocation events on or off.", v->switches);
    metric_d(b, "clrscope_budget_wall_slowdown", "gauge",
             "How many times further apart the governor keeps the wall sampler's ticks (1: as "
             "configured).", v->wall_slowdown >= 1 ? v->wall_slowdown : 1);
    metric_d(b, "clrscope_budget_cpu_slowdown", "gauge",
             "How many times further apart the governor keeps each thread's CPU samples (1: as "
             "configured).", v->cpu_slowdown >= 1 ? v->cpu_slowdown : 1);
    free(v);
}

static void self_metrics(struct jbuf *b)
{
    budget_metrics(b);
    struct prof_self_stats self;
    prof_agg_self_stats(&self);
    metric_d(b, "clrscope_process_cpu_seconds_total", "counter",
             "CPU time of the whole process (CLOCK_PROCESS_CPUTIME_ID).",
             (double)prof_process_cpu_ns() / 1e9);
    metric_d(b, "clrscope_profiler_cpu_seconds_total", "counter",
             "CPU used by clrscope's own threads.", self.cpu_s);
    metric_d(b, "clrscope_profiler_cpu_ratio", "gauge",
             "clrscope's CPU divided by process CPU over the last 10 seconds.", self.cpu_share);
    metric_u(b, "clrscope_process_resident_memory_bytes", "gauge",
             "Resident memory of the process (clrscope included).",
             (uint64_t)(self.rss_bytes > 0 ? self.rss_bytes : 0));
    family(b, "clrscope_profiler_memory_bytes", "gauge",
           "Memory held by clrscope, accounted by module (store, rings, tables, code map, queue, "
           "thread dump).");
    for (int i = 0; i < self.nmem; i++)
        jb_printf(b, "clrscope_profiler_memory_bytes{module=\"%s\"} %" PRId64 "\n",
                  self.mem[i].name, self.mem[i].bytes > 0 ? self.mem[i].bytes : 0);
    metric_u(b, "clrscope_events_total", "counter",
             "Runtime events handed from callbacks to the aggregator.", self.ring_pushed);
    metric_u(b, "clrscope_events_dropped_total", "counter",
             "Runtime events dropped because the hand-off ring was full.", self.ring_dropped);

    struct prof_sampler_stats ss;
    prof_sampler_get_stats(&ss);
    metric_u(b, "clrscope_sampler_ticks_total", "counter", "Stack-sampling ticks taken.", ss.ticks);
    metric_u(b, "clrscope_sampler_skipped_ticks_total", "counter",
             "Sampling ticks skipped (runtime could not be suspended).", ss.skipped_ticks);
    metric_u(b, "clrscope_sampler_samples_total", "counter", "Thread stacks sampled.", ss.samples);
    metric_u(b, "clrscope_sampler_walk_failures_total", "counter", "Stack walks that failed.",
             ss.walk_failures);
    metric_u(b, "clrscope_sampler_truncated_stacks_total", "counter",
             "Stacks cut at CLRSCOPE_MAX_FRAMES.", ss.truncated_stacks);
    metric_d(b, "clrscope_sampler_suspended_seconds_total", "counter",
             "Time the runtime stayed suspended for clrscope's sampler.",
             (double)ss.suspended_ns / 1e9);
    metric_u(b, "clrscope_sampler_wall_cached_ticks_total", "counter",
             "Wall ticks recorded from kept stacks without suspending the runtime.",
             ss.wall_cached_ticks);
    metric_u(b, "clrscope_sampler_wall_cached_samples_total", "counter",
             "Wall samples taken from the kept stack of a thread that had not run.",
             ss.wall_cached_samples);
    metric_u(b, "clrscope_sampler_wall_signal_ticks_total", "counter",
             "Wall ticks that asked the threads that had run for their stacks by a signal, "
             "without suspending the runtime.", ss.wall_signal_ticks);
    metric_u(b, "clrscope_sampler_wall_signal_samples_total", "counter",
             "Wall samples from threads' answers to a signal.", ss.wall_signal_samples);
    metric_u(b, "clrscope_sampler_threads", "gauge", "Managed threads seen at the last tick.",
             ss.last_thread_count);
    family(b, "clrscope_cpu_sampler_info", "gauge",
           "The CPU sampler in use (signal, suspend, off).");
    jb_lit(b, "clrscope_cpu_sampler_info{sampler=\"");
    label_value(b, ss.cpu_sampler ? ss.cpu_sampler : "off");
    jb_lit(b, "\"} 1\n");
    metric_u(b, "clrscope_cpu_sampler_samples_total", "counter",
             "CPU samples taken by the signal sampler.", ss.sig.samples);
    metric_u(b, "clrscope_cpu_sampler_timer_failures_total", "counter",
             "Threads the signal sampler could not arm a CPU timer for.", ss.sig.timer_failures);

    struct prof_store_stats st;
    prof_store_get_stats(&st);
    metric_u(b, "clrscope_store_stack_nodes", "gauge", "Call-path nodes held.", st.nodes);
    metric_u(b, "clrscope_store_stack_nodes_limit", "gauge",
             "Call-path node cap (CLRSCOPE_MAX_STACK_NODES).", st.node_cap);
    metric_u(b, "clrscope_store_entries", "gauge", "Per-second profile entries held.", st.entries);
    metric_u(b, "clrscope_store_names", "gauge", "Distinct frame and label names held.",
             st.strings);
    metric_u(b, "clrscope_store_name_bytes", "gauge", "Bytes of frame and label names held.",
             st.string_bytes);
    metric_u(b, "clrscope_store_name_bytes_limit", "gauge",
             "Cap of the names' bytes (CLRSCOPE_MAX_NAME_BYTES).", st.string_cap);
    metric_u(b, "clrscope_store_name_compactions_total", "counter",
             "Names compactions (names no longer in the history freed).", st.name_compactions);
    metric_u(b, "clrscope_store_samples_total", "counter", "Samples added to the store.",
             st.samples_added);
    metric_u(b, "clrscope_store_compactions_total", "counter",
             "Call-path trie compactions (paths no longer in the history dropped).", st.compactions);
    family(b, "clrscope_store_dropped_total", "counter",
           "Samples or names the store had no room for, by what was full.");
    jb_printf(b, "clrscope_store_dropped_total{what=\"stack_nodes\"} %" PRIu64 "\n", st.dropped_nodes);
    jb_printf(b, "clrscope_store_dropped_total{what=\"entries\"} %" PRIu64 "\n", st.dropped_entries);
    jb_printf(b, "clrscope_store_dropped_total{what=\"names\"} %" PRIu64 "\n", st.dropped_strings);
    metric_u(b, "clrscope_managed_threads", "gauge", "Managed threads alive.",
             (uint64_t)prof_threads_count());
}

/* The runtime's own System.Runtime counters, latest values, one labelled gauge family. */
static void runtime_counter_metrics(struct jbuf *b)
{
    struct prof_counter *c = malloc(PROF_COUNTERS_MAX * sizeof *c);
    if (!c)
        return;
    int n = prof_counters_snapshot(c, PROF_COUNTERS_MAX);
    if (n > 0)
        family(b, "clrscope_runtime_counter", "gauge",
               "Latest System.Runtime EventCounters values (rate: increase over interval_s).");
    for (int i = 0; i < n; i++) {
        jb_lit(b, "clrscope_runtime_counter{name=\"");
        label_value(b, c[i].name);
        jb_lit(b, "\",units=\"");
        label_value(b, c[i].units);
        jb_printf(b, "\",kind=\"%s\"} %.9g\n", c[i].incrementing ? "rate" : "gauge", c[i].value);
    }
    free(c);
}

int api_metrics(const struct api_req *q, struct api_reply *out)
{
    (void)q;
    struct jbuf b;
    jb_init(&b, 1u << 20);
    family(&b, "clrscope_build_info", "gauge", "clrscope and .NET runtime versions.");
    jb_lit(&b, "clrscope_build_info{version=\"" CLRSCOPE_VERSION "\",runtime_version=\"");
    label_value(&b, g_core.runtime_version);
    jb_lit(&b, "\"} 1\n");
    metric_d(&b, "clrscope_uptime_seconds", "gauge", "Seconds since clrscope started.",
             prof_unix_now() - g_core.start_unix);
    if (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_GC)
        gc_metrics(&b);
    self_metrics(&b);
    runtime_counter_metrics(&b);
    if (!b.p)
        b.overflow = 1; /* not a byte written: out of memory */
    return api_reply_jbuf(out, 200, "text/plain; version=0.0.4; charset=utf-8", &b,
                          "out of memory building /metrics");
}
