/* api_status.c - GET /api/v1/status: who is profiled, on what runtime, what is on, and our cost. */
#include <cjson/cJSON.h>

#include "api.h"
#include "clrscope_commit.h"
#include "prof_agg.h"
#include "prof_codemap.h"
#include "prof_natsym.h"
#include "prof_stubs.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_events.h"
#include "prof_exporter.h"
#include "prof_history.h"
#include "prof_sampler.h"
#include "prof_store.h"
#include "prof_threads.h"
#include "prof_tdump.h"
#include "prof_unload.h"

/* The oldest glibc the library this code is linked into loads on: compiled into
 * libclrscope.so at its link (tools/packaging/build.cmake); the unit tests' executables that
 * link this file have none (a weak reference: null there). */
const char *clrscope_glibc_min(void) __attribute__((weak));

int api_status(const struct api_req *q, struct api_reply *out)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", g_core.pid);
    /* "live": a profiled process; "post-mortem": `clrscope serve`, the history of process
     * served_pid (which has exited), read from disk */
    cJSON_AddStringToObject(o, "mode", g_core.post_mortem ? "post-mortem" : "live");
    if (g_core.post_mortem)
        cJSON_AddNumberToObject(o, "served_pid", g_core.served_pid);
    cJSON *proc = cJSON_AddObjectToObject(o, "process");
    cJSON_AddStringToObject(proc, "name", g_core.process_name);
    cJSON_AddStringToObject(proc, "cmdline", g_core.cmdline);
    cJSON *rt = cJSON_AddObjectToObject(o, "runtime");
    cJSON_AddStringToObject(rt, "version", g_core.runtime_version);
    cJSON_AddNumberToObject(rt, "major", g_core.runtime_major);
    cJSON_AddNumberToObject(rt, "profiler_info", g_core.info_version);
    cJSON_AddNumberToObject(o, "uptime_s", prof_unix_now() - g_core.start_unix);
    cJSON_AddNumberToObject(o, "started", g_core.start_unix);
    cJSON *profiles = cJSON_AddArrayToObject(o, "profiles");
    unsigned p = __atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED);
    for (unsigned bit = 1; bit <= PROFILE_HEAP; bit <<= 1)
        if (p & bit)
            cJSON_AddItemToArray(profiles, cJSON_CreateString(prof_profile_name(bit)));
    cJSON_AddNumberToObject(o, "sampling_hz", g_cfg.sampling_hz);
    cJSON_AddNumberToObject(o, "history_s", g_cfg.history_s);
    cJSON_AddStringToObject(o, "clrscope_version", CLRSCOPE_VERSION);
    cJSON *build = cJSON_AddObjectToObject(o, "build");
    cJSON_AddStringToObject(build, "version", CLRSCOPE_VERSION);
    cJSON_AddStringToObject(build, "commit", CLRSCOPE_COMMIT);
    cJSON_AddStringToObject(build, "glibc_min",
                            clrscope_glibc_min ? clrscope_glibc_min() : "unknown");
    cJSON_AddStringToObject(o, "event_session",
                            prof_events_state() > 0 ? "running"
                            : prof_events_state() < 0 ? "refused" : "off");
    cJSON_AddNumberToObject(o, "managed_threads", (double)prof_threads_count());
    int waiting;
    uint64_t abandoned;
    api_pprof_waits(&waiting, &abandoned);
    cJSON *pw = cJSON_AddObjectToObject(o, "pprof_waits");
    cJSON_AddNumberToObject(pw, "waiting", waiting);
    cJSON_AddNumberToObject(pw, "abandoned", (double)abandoned);
    struct prof_counters_stats cs;
    prof_counters_get_stats(&cs);
    cJSON *rc = cJSON_AddObjectToObject(o, "runtime_counters");
    cJSON_AddBoolToObject(rc, "enabled", cs.enabled != 0);
    if (cs.stopped_gc_rate > 0)
        cJSON_AddNumberToObject(rc, "stopped_at_gc_rate", cs.stopped_gc_rate);
    cJSON_AddNumberToObject(rc, "events", (double)cs.events);
    if (cs.silent)
        cJSON_AddStringToObject(rc, "note", PROF_COUNTERS_SILENT_NOTE);
    cJSON_AddNumberToObject(rc, "malformed", (double)cs.malformed);
    cJSON_AddNumberToObject(rc, "dropped", (double)cs.dropped);

    struct prof_self_stats self;
    prof_agg_self_stats(&self);
    struct prof_sampler_stats ss;
    prof_sampler_get_stats(&ss);
    cJSON *so = cJSON_AddObjectToObject(o, "self");
    cJSON_AddNumberToObject(so, "cpu_s", self.cpu_s);
    cJSON_AddNumberToObject(so, "cpu_share", self.cpu_share);
    cJSON_AddNumberToObject(so, "rss_bytes", (double)self.rss_bytes);
    cJSON_AddNumberToObject(so, "mem_bytes", (double)self.mem_bytes);
    cJSON *mem = cJSON_AddObjectToObject(so, "mem");
    for (int i = 0; i < self.nmem; i++)
        cJSON_AddNumberToObject(mem, self.mem[i].name, (double)self.mem[i].bytes);
    cJSON_AddNumberToObject(so, "suspended_s", (double)ss.suspended_ns / 1e9);
    cJSON_AddNumberToObject(so, "sampler_ticks", (double)ss.ticks);
    cJSON_AddNumberToObject(so, "wall_cached_ticks", (double)ss.wall_cached_ticks);
    cJSON_AddNumberToObject(so, "wall_cached_samples", (double)ss.wall_cached_samples);
    cJSON_AddNumberToObject(so, "wall_quiet_skipped", (double)ss.wall_quiet_skipped);
    cJSON_AddNumberToObject(so, "wall_stalled_s", (double)ss.wall_stalled_ns / 1e9);
    cJSON_AddStringToObject(so, "wall_walk", ss.wall_walk ? ss.wall_walk : "suspend");
    cJSON_AddNumberToObject(so, "wall_signal_ticks", (double)ss.wall_signal_ticks);
    cJSON_AddNumberToObject(so, "wall_signal_samples", (double)ss.wall_signal_samples);
    cJSON *wsus = cJSON_AddObjectToObject(so, "wall_suspensions");
    cJSON_AddNumberToObject(wsus, "unlisted", (double)ss.wall_walks_unlisted);
    cJSON_AddNumberToObject(wsus, "unasked", (double)ss.wall_walks_unasked);
    cJSON_AddNumberToObject(wsus, "leaf_only", (double)ss.wall_walks_leaf);
    cJSON_AddNumberToObject(wsus, "deferred", (double)ss.wall_deferred);
    cJSON_AddStringToObject(so, "cpu_sampler", ss.cpu_sampler ? ss.cpu_sampler : "off");
    cJSON_AddNumberToObject(so, "wall_hz", ss.wall_hz);
    if (ss.sig.signo) {
        cJSON *sg = cJSON_AddObjectToObject(so, "signal_sampler");
        cJSON_AddNumberToObject(sg, "signal", ss.sig.signo);
        cJSON_AddStringToObject(sg, "timer", ss.sig.timer ? ss.sig.timer : "posix");
        if (ss.sig.timer_off)
            cJSON_AddStringToObject(sg, "timer_note", ss.sig.timer_off);
        cJSON_AddNumberToObject(sg, "perf_threads", (double)ss.sig.perf_threads);
        cJSON_AddNumberToObject(sg, "perf_fallbacks", (double)ss.sig.perf_fallbacks);
        if (ss.sig.reviewing) { /* auto: what perf events cost the app (README, CPU sampler) */
            cJSON *pc = cJSON_AddObjectToObject(sg, "perf_cost");
            if (ss.sig.switch_cost_ns >= 0)
                cJSON_AddNumberToObject(pc, "switch_ns", (double)ss.sig.switch_cost_ns);
            else
                cJSON_AddNullToObject(pc, "switch_ns");
            cJSON_AddNumberToObject(pc, "switches_per_cpu_s", ss.sig.switch_rate);
            if (ss.sig.switch_cost_ns >= 0)
                cJSON_AddNumberToObject(pc, "share", ss.sig.perf_cost);
            else
                cJSON_AddNullToObject(pc, "share");
            cJSON_AddNumberToObject(pc, "budget", ss.sig.timer_budget);
            cJSON_AddNumberToObject(pc, "clock_changes", (double)ss.sig.clock_changes);
        }
        cJSON_AddNumberToObject(sg, "perf_rearm_failures", (double)ss.sig.rearm_failures);
        cJSON_AddNumberToObject(sg, "drain_ms", (double)ss.tick_ns / 1e6);
        cJSON_AddNumberToObject(sg, "ring_entries", ss.ring_entries);
        cJSON_AddNumberToObject(sg, "threads", (double)ss.sig.threads);
        cJSON_AddNumberToObject(sg, "samples", (double)ss.sig.samples);
        cJSON_AddNumberToObject(sg, "timer_failures", (double)ss.sig.timer_failures);
        cJSON_AddNumberToObject(sg, "ring_full", (double)ss.sig.ring_full);
        cJSON_AddNumberToObject(sg, "interrupted_calls", (double)ss.sig.interrupted);
        cJSON_AddNumberToObject(sg, "interrupted_calls_outside",
                                (double)ss.sig.interrupted_outside);
        cJSON_AddNumberToObject(sg, "leaf_only", (double)(ss.sig.no_stack + ss.sig.altstack));
        cJSON_AddNumberToObject(sg, "truncated", (double)ss.sig.truncated);
        cJSON_AddNumberToObject(sg, "maps_refreshes", (double)ss.sig.maps_refreshes);
        cJSON_AddNumberToObject(sg, "new_code", (double)ss.sig.new_code);
        cJSON_AddNumberToObject(sg, "osr_returns", (double)ss.sig.osr_returns);
        if (ss.sig.wall.signo) {
            cJSON *wa = cJSON_AddObjectToObject(sg, "wall_asks");
            cJSON_AddNumberToObject(wa, "signal", ss.sig.wall.signo);
            cJSON_AddNumberToObject(wa, "asked", (double)ss.sig.wall.asked);
            cJSON_AddNumberToObject(wa, "answered", (double)ss.sig.wall.answered);
            cJSON_AddNumberToObject(wa, "late", (double)ss.sig.wall.late);
            cJSON_AddNumberToObject(wa, "blocked_outside", (double)ss.sig.wall.blocked_outside);
            cJSON_AddNumberToObject(wa, "fragile", (double)ss.sig.wall.fragile);
            cJSON_AddNumberToObject(wa, "no_ring", (double)ss.sig.wall.no_ring);
            cJSON_AddNumberToObject(wa, "ask_failures", (double)ss.sig.wall.ask_failures);
            cJSON_AddNumberToObject(wa, "unreadable", (double)ss.sig.wall.unreadable);
            cJSON_AddNumberToObject(wa, "same_wait", (double)ss.sig.wall.same_wait);
            cJSON_AddNumberToObject(wa, "unknown_caller", (double)ss.sig.wall.unknown);
            cJSON_AddNumberToObject(wa, "given_up", (double)ss.sig.wall.given_up);
            cJSON_AddNumberToObject(wa, "ring_full", (double)ss.sig.wall.ring_full);
            cJSON_AddNumberToObject(wa, "unproven", (double)ss.sig.wall.unproven);
            cJSON_AddNumberToObject(wa, "by_cpu", (double)ss.sig.wall.by_cpu);
            cJSON_AddNumberToObject(wa, "interrupted", (double)ss.sig.wall.interrupted);
            cJSON_AddNumberToObject(wa, "interrupted_outside",
                                    (double)ss.sig.wall.interrupted_outside);
        }
        struct prof_codemap_stats cm;
        prof_codemap_get_stats(&cm);
        cJSON *wk = cJSON_AddObjectToObject(sg, "walks");
        cJSON_AddNumberToObject(wk, "samples", (double)cm.named);
        cJSON_AddNumberToObject(wk, "cfi_leaf", (double)cm.cfi_leaf);
        cJSON_AddNumberToObject(wk, "link_register", (double)cm.link_register);
        cJSON_AddNumberToObject(wk, "unrooted", (double)cm.unrooted);
        cJSON_AddNumberToObject(wk, "unrooted_native", (double)cm.unrooted_native);
        cJSON_AddNumberToObject(wk, "jit", (double)cm.jit);
        cJSON_AddNumberToObject(wk, "new_code_named", (double)cm.new_code_named);
        cJSON_AddNumberToObject(wk, "new_code_cut", (double)cm.new_code_cut);
        cJSON_AddStringToObject(wk, "native_unwind",
                                ss.sig.native_unwind ? ss.sig.native_unwind : "cfi");
        cJSON_AddNumberToObject(wk, "cfi_libraries", ss.sig.cfi_libraries);
        struct prof_natsym_stats nst;
        prof_natsym_get_stats(&nst);
        cJSON *nsy = cJSON_AddObjectToObject(sg, "native_symbols");
        cJSON_AddNumberToObject(nsy, "libraries", nst.libraries);
        cJSON_AddNumberToObject(nsy, "with_symtab", nst.with_symtab);
        cJSON_AddNumberToObject(nsy, "debug_files", nst.debug_files);
        cJSON_AddNumberToObject(nsy, "dynsym_only", nst.dynsym_only);
        cJSON_AddNumberToObject(nsy, "refused", nst.refused);
        cJSON_AddNumberToObject(nsy, "functions", (double)nst.functions);
        cJSON_AddNumberToObject(nsy, "bytes", (double)nst.bytes);
        cJSON_AddNumberToObject(nsy, "over_cap", (double)nst.over_cap);
        struct prof_stubs_stats stb;
        prof_stubs_get_stats(&stb);
        cJSON *sto = cJSON_AddObjectToObject(sg, "stubs");
        cJSON_AddNumberToObject(sto, "named", (double)stb.named);
        cJSON_AddNumberToObject(sto, "unknown", (double)stb.unknown);
        cJSON_AddNumberToObject(sto, "unread", (double)stb.unread);
        cJSON *inl = cJSON_AddObjectToObject(sg, "inlining");
        cJSON_AddNumberToObject(inl, "pairs", (double)cm.inline_pairs);
        cJSON_AddNumberToObject(inl, "dropped", (double)cm.inline_dropped);
        cJSON_AddNumberToObject(inl, "frames", (double)cm.inline_frames);
        cJSON_AddNumberToObject(inl, "ambiguous", (double)cm.inline_ambiguous);
        cJSON *dm = cJSON_AddObjectToObject(sg, "dynamic_methods");
        cJSON_AddNumberToObject(dm, "known", (double)cm.dynamic_methods);
        cJSON_AddNumberToObject(dm, "compiled", (double)cm.dynamic_compiled);
        cJSON_AddNumberToObject(dm, "collected", (double)cm.dynamic_unloaded);
        cJSON_AddNumberToObject(dm, "dropped", (double)(cm.dynamic_dropped + cm.dynamic_dropped_notes));
    }

    struct prof_store_stats st;
    prof_store_get_stats(&st);
    cJSON *dr = cJSON_AddObjectToObject(o, "dropped");
    cJSON_AddNumberToObject(dr, "events", (double)self.ring_dropped);
    cJSON_AddNumberToObject(dr, "stack_nodes", (double)st.dropped_nodes);
    cJSON_AddNumberToObject(dr, "entries", (double)st.dropped_entries);
    cJSON_AddNumberToObject(dr, "names", (double)st.dropped_strings);
    cJSON_AddNumberToObject(dr, "skipped_ticks", (double)ss.skipped_ticks);
    cJSON_AddNumberToObject(dr, "truncated_stacks", (double)ss.truncated_stacks);
    cJSON *sto = cJSON_AddObjectToObject(o, "store");
    cJSON_AddNumberToObject(sto, "stack_nodes", (double)st.nodes);
    cJSON_AddNumberToObject(sto, "stack_node_cap", (double)st.node_cap);
    cJSON_AddNumberToObject(sto, "entries", (double)st.entries);
    cJSON_AddNumberToObject(sto, "names", (double)st.strings);
    cJSON_AddNumberToObject(sto, "compactions", (double)st.compactions);
    cJSON_AddNumberToObject(sto, "compacted_nodes", (double)st.compacted_nodes);
    cJSON_AddNumberToObject(sto, "name_bytes", (double)st.string_bytes);
    cJSON_AddNumberToObject(sto, "name_cap", (double)st.string_cap);
    cJSON_AddNumberToObject(sto, "name_compactions", (double)st.name_compactions);
    cJSON_AddNumberToObject(sto, "freed_names", (double)st.freed_names);
    cJSON_AddNumberToObject(sto, "stack_nodes_peak", (double)st.nodes_peak);
    cJSON_AddNumberToObject(sto, "name_bytes_peak", (double)st.string_bytes_peak);

    struct prof_history_stats hs;
    prof_history_get_stats(&hs);
    cJSON *hi = cJSON_AddObjectToObject(o, "history");
    cJSON_AddBoolToObject(hi, "enabled", hs.enabled);
    cJSON_AddStringToObject(hi, "dir", hs.dir);
    cJSON_AddStringToObject(hi, "process_dir", hs.process_dir);
    cJSON_AddStringToObject(hi, "off_reason", hs.off_reason);
    cJSON_AddNumberToObject(hi, "segment_s", hs.segment_s);
    cJSON_AddNumberToObject(hi, "max_mb", hs.max_mb);
    cJSON_AddNumberToObject(hi, "max_age_s", (double)hs.max_age_s);
    cJSON_AddNumberToObject(hi, "written", (double)hs.written);
    cJSON_AddNumberToObject(hi, "written_bytes", (double)hs.written_bytes);
    cJSON_AddNumberToObject(hi, "empty_skipped", (double)hs.empty_skipped);
    cJSON_AddNumberToObject(hi, "write_failures", (double)hs.write_failures);
    cJSON_AddNumberToObject(hi, "deleted", (double)hs.deleted);
    cJSON_AddNumberToObject(hi, "disk_bytes", (double)hs.disk_bytes);
    cJSON_AddNumberToObject(hi, "disk_segments", (double)hs.disk_segments);
    cJSON_AddNumberToObject(hi, "oldest", (double)hs.oldest_s);
    cJSON_AddNumberToObject(hi, "last_to", (double)hs.last_to_s);
    cJSON_AddNumberToObject(hi, "read", (double)hs.read);
    cJSON_AddNumberToObject(hi, "skipped", (double)hs.skipped);
    cJSON_AddStringToObject(hi, "last_error", hs.last_error);
    cJSON_AddNumberToObject(hi, "cpu_s", hs.write_cpu_s);

    struct prof_unload_stats us;
    prof_unload_get_stats(&us);
    cJSON *un = cJSON_AddObjectToObject(o, "module_unloads");
    cJSON_AddNumberToObject(un, "started", (double)us.unloads);
    cJSON_AddNumberToObject(un, "drain_wait_ms", (double)us.drain_waits_ms);
    cJSON_AddNumberToObject(un, "drain_timeouts", (double)us.drain_timeouts);
    cJSON_AddNumberToObject(un, "waits", (double)us.waits);
    cJSON_AddNumberToObject(un, "wait_ms_max", (double)us.wait_ns_max / 1e6);
    cJSON_AddNumberToObject(un, "timeouts", (double)us.timeouts);
    cJSON_AddNumberToObject(un, "unnamed_records", (double)us.refused);

    struct prof_tdump_stats ts;
    prof_tdump_get_stats(&ts);
    cJSON *td = cJSON_AddObjectToObject(o, "thread_dumps");
    cJSON_AddNumberToObject(td, "taken", (double)ts.taken);
    cJSON_AddNumberToObject(td, "reused", (double)ts.reused);
    cJSON_AddNumberToObject(td, "failed", (double)ts.failed);
    cJSON_AddNumberToObject(td, "timeouts", (double)ts.timeouts);

    const struct api_guard_stats *fg = &q->guard; /* the server's, given with the request */
    cJSON *db = cJSON_AddObjectToObject(o, "dashboard");
    cJSON_AddBoolToObject(db, "fd_guard", fg->guarded);
    cJSON_AddBoolToObject(db, "spare_fd_held", fg->spare_held);
    cJSON_AddBoolToObject(db, "out_of_fds", fg->out_of_fds);
    cJSON_AddNumberToObject(db, "refused_out_of_fds", (double)fg->refused);
    cJSON_AddNumberToObject(db, "queue_resets_out_of_fds", (double)fg->resets);
    cJSON_AddStringToObject(db, "allow_users", fg->allow_any ? "any" : "same");
    cJSON_AddNumberToObject(db, "refused_other_users", (double)fg->refused_users);
    cJSON_AddNumberToObject(db, "refused_unknown_user", (double)fg->unknown_owner);
    cJSON_AddNumberToObject(db, "dropped_over_cap", (double)fg->dropped_over_cap);
    cJSON_AddNumberToObject(db, "token_failures", (double)fg->token_failures);
    cJSON_AddNumberToObject(db, "throttled", (double)fg->throttled);

    cJSON *ex = cJSON_AddObjectToObject(o, "export");
    prof_exporter_status_json(ex);
    api_budget_status(o);
    return api_reply_json(out, 200, o);
}
