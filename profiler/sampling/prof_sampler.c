/*
 * prof_sampler.c - the clrscope-sampler thread (see prof_sampler.h): its loop, which wakes at the
 * rate the modes ask, drains and names the signal sampler's samples (or only keeps the maps
 * snapshot fresh for the allocation walks), takes the stop-the-world ticks and serves thread
 * dumps; the choice of modes, start and stop. The sampler thread, but prof_sampler_start,
 * prof_sampler_stop (the thread that starts and stops clrscope), prof_sampler_thread_started (any
 * thread) and prof_sampler_get_stats (any thread).
 */
#include "prof_sampler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof_codemap.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sampler_int.h"
#include "prof_sighandler.h"
#include "prof_sigsample.h"
#include "prof_store.h"
#include "prof_tdump.h"
#include "prof_threads.h"
#include "prof_unload.h"
#include "prof_walk.h"

#define SIGNAL_SYNC_NS 100000000LL /* how often the signal sampler picks up new threads */
/* ...and how soon after a thread starts (prof_sampler_thread_started) at the earliest after the
 * previous sync: an app that starts thousands of threads a second makes the sampler sync at most
 * this often, each sync a pass over the thread list (one kernel tick at 250 Hz, the grain of the
 * CPU timers themselves). Measured with an app starting 3,500 threads a second: at 1 ms a sync
 * costs clrscope 5 % of a core, at 4 ms 2 %, and threads that burn 30 ms each show 0.91 of it. */
#define SIGNAL_SYNC_MIN_NS 4000000LL
/* In signal mode the handlers fill per-thread rings and this thread only drains them, so it
 * wakes this far apart (or at the wall rate when that is faster), not once per sample: each
 * wake-up is a context switch on a core the app is using, and at 100 Hz the wake-ups cost more
 * than the samples (bench/results.md). */
#define SIGNAL_DRAIN_NS 50000000LL
/* Without the signal sampler this thread still keeps the maps snapshot and the code map fresh
 * for the allocation callback's frame-pointer walk (see "keep_maps"), this far apart at most. */
#define MAPS_KEEPER_NS 100000000LL

struct sampler_state sampler = {.st_lock = PTHREAD_MUTEX_INITIALIZER};

/* Names one signal sample (prof_codemap) and stores it root first. */
int sampler_name_sample(struct sig_names *sn, const struct prof_sigsample *smp)
{
    int asking = prof_unload_enter(smp->epoch); /* (prof_unload.h) */
    int k = prof_codemap_name_stack(smp, sn->leaf, sn->managed, g_cfg.max_frames);
    if (asking)
        prof_unload_leave();
    int m = 0;
    if (smp->flags & PROF_SIG_F_TRUNCATED)
        sn->root[m++] = "[truncated]";
    for (int i = k - 1; i >= 0; i--)
        sn->root[m++] = sn->leaf[i];
    if (!m)
        sn->root[m++] = "[unknown]";
    return m;
}

/* Sets the drain's clock: now_unix, the cycle counter then, and the counter's rate. */
static void sig_names_stamp(struct sig_names *sn, int64_t now_ns)
{
    sn->now_unix = prof_unix_now();
    sn->now_cycles = prof_sig_cycles();
    if (!sn->cycles0_ns) {
        sn->cycles0 = sn->now_cycles;
        sn->cycles0_ns = now_ns;
    } else if (now_ns - sn->cycles0_ns >= 1000000000LL && sn->now_cycles > sn->cycles0) {
        sn->ns_per_cycle = (double)(now_ns - sn->cycles0_ns) / (double)(sn->now_cycles - sn->cycles0);
    }
}

/* When a signal sample was taken: the drain's time less the sample's age by the cycle counter;
 * the drain's time when the counter cannot say (not measured yet, or an age that is negative
 * or over SAMPLE_MAX_AGE_NS, as cores whose counters disagree would give). */
#define SAMPLE_MAX_AGE_NS 10000000000LL
static double sample_unix(const struct sig_names *sn, const struct prof_sigsample *smp)
{
    if (sn->ns_per_cycle <= 0 || !smp->cycles || smp->cycles > sn->now_cycles)
        return sn->now_unix;
    double age_ns = (double)(sn->now_cycles - smp->cycles) * sn->ns_per_cycle;
    return age_ns <= (double)SAMPLE_MAX_AGE_NS ? sn->now_unix - age_ns / 1e9 : sn->now_unix;
}

static void on_sig_sample(void *arg, const struct prof_sigsample *smp)
{
    struct sig_names *sn = arg;
    int m = sampler_name_sample(sn, smp);
    int64_t v[PROF_NVALUES] = {1, smp->cpu_ns, 0};
    prof_store_add(PK_CPU, sample_unix(sn, smp), sn->root, m, smp->tid, NULL, v);
    if (sampler.wall_by_cpu)
        sampler_wall_cpu_sample(sample_unix(sn, smp), smp, sn->root, m);
}

static void sig_stop(const char *why)
{
    prof_log(LOG_WARN, "cpu sampler: %s; switching to the stop-the-world sampler", why);
    prof_sigsample_stop();
    __atomic_store_n(&sampler.cpu_mode, CPU_SUSPEND, __ATOMIC_RELAXED);
    if (sampler.keep_maps && prof_maps_start())
        sampler.keep_maps = 0; /* the allocation walks keep the runtime's walk */
}

/* The signal sampler's own tick drains, names and refreshes; without it, only the refresh. */
static void maps_tick(int64_t now)
{
    prof_codemap_lock();
    prof_codemap_tick(now);
    prof_sigsample_maintain(now);
    prof_codemap_unlock();
    struct prof_sigsample_stats ss;
    prof_sigsample_get_stats(&ss);
    prof_sigsample_wall_get_stats(&ss.wall);
    pthread_mutex_lock(&sampler.st_lock);
    sampler.st.sig = ss;
    pthread_mutex_unlock(&sampler.st_lock);
}

/* One tick of the signal sampler: drain what the handlers captured, pick up new threads. */
static void signal_tick_locked(int64_t now, int64_t *last_sync)
{
    sig_names_stamp(&sampler.sn, now);
    int started = now - *last_sync >= SIGNAL_SYNC_MIN_NS &&
                  __atomic_load_n(&sampler.threads_started, __ATOMIC_RELAXED);
    if (now - *last_sync >= SIGNAL_SYNC_NS || started) {
        *last_sync = now;
        /* cleared before the list is read: a thread started after the read sets it again */
        __atomic_store_n(&sampler.threads_started, 0, __ATOMIC_SEQ_CST);
        if (!prof_sigsample_intact()) {
            sig_stop("another component replaced clrscope's signal handler");
            return;
        }
        size_t n = prof_threads_tids(sampler.tids, (size_t)g_cfg.max_threads);
        prof_sigsample_sync(sampler.tids, n, on_sig_sample, &sampler.sn);
        struct prof_sigsample_stats ss;
        prof_sigsample_get_stats(&ss);
        prof_sigsample_wall_get_stats(&ss.wall);
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.sig = ss;
        pthread_mutex_unlock(&sampler.st_lock);
    }
    prof_sigsample_drain(on_sig_sample, &sampler.sn);
    prof_codemap_tick(now);
    prof_sigsample_maintain(now);
}

static int cpu_slowdown(void)
{
    int f = __atomic_load_n(&sampler.cpu_slowdown, __ATOMIC_RELAXED);
    return f >= 1 && f <= PROF_SAMPLER_MAX_CPU_SLOWDOWN ? f : 1;
}

void prof_sampler_set_cpu_slowdown(int factor)
{
    if (factor < 1)
        factor = 1;
    if (factor > PROF_SAMPLER_MAX_CPU_SLOWDOWN)
        factor = PROF_SAMPLER_MAX_CPU_SLOWDOWN;
    __atomic_store_n(&sampler.cpu_slowdown, factor, __ATOMIC_RELAXED);
}

int prof_sampler_cpu_by_signal(void)
{
    return __atomic_load_n(&sampler.running, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) == CPU_SIGNAL;
}

static void signal_tick(int64_t now, int64_t *last_sync)
{
    prof_codemap_lock(); /* clrscope-agg resolves allocation stacks with the same tables */
    signal_tick_locked(now, last_sync);
    prof_codemap_unlock();
    int perf = prof_sigsample_review(now); /* (its one measurement holds no lock) */
    if (perf >= 0 && sampler.cpu_mode == CPU_SIGNAL) {
        prof_codemap_lock();
        sig_names_stamp(&sampler.sn, prof_now_ns());
        prof_sigsample_use_perf(perf, now, on_sig_sample, &sampler.sn);
        prof_codemap_unlock();
    }
    /* the overhead governor's rate (its samples recorded at the rate they were taken at) */
    int64_t interval = 1000000000LL / g_cfg.sampling_hz * cpu_slowdown();
    if (sampler.cpu_mode == CPU_SIGNAL && interval != prof_sigsample_interval()) {
        prof_codemap_lock();
        sig_names_stamp(&sampler.sn, prof_now_ns());
        prof_sigsample_set_interval(interval, on_sig_sample, &sampler.sn);
        prof_codemap_unlock();
    }
}

static void sampler_drained(uint64_t wanted)
{
    prof_unload_drained(PROF_UNLOAD_SAMPLER, wanted);
    sampler.unload_acked = wanted;
}

static int wall_slowdown(void)
{
    int f = __atomic_load_n(&sampler.wall_slowdown, __ATOMIC_RELAXED);
    return f >= 1 && f <= PROF_SAMPLER_MAX_WALL_SLOWDOWN ? f : 1;
}

void prof_sampler_set_wall_slowdown(int factor)
{
    if (factor < 1)
        factor = 1;
    if (factor > PROF_SAMPLER_MAX_WALL_SLOWDOWN)
        factor = PROF_SAMPLER_MAX_WALL_SLOWDOWN;
    __atomic_store_n(&sampler.wall_slowdown, factor, __ATOMIC_RELAXED);
}

/* Idle ticks (signal mode): after a tick that found no new CPU sample and no new thread, the
 * sampler naps through the ticks until the next wall tick is due (at most IDLE_NAP_MAX_NS),
 * each handler counting toward a doorbell that wakes it once half a ring's samples have come:
 * an idle process pays for its wall ticks only, not for 20 wake-ups a second. */
#define IDLE_NAP_MAX_NS 1000000000LL

/* When an idle nap ends: at the next wall tick (wall_at), at most IDLE_NAP_MAX_NS after the
 * deadline. */
static int64_t idle_deadline(int64_t deadline, int64_t wall_at, int wall_on)
{
    int64_t due = deadline + IDLE_NAP_MAX_NS;
    if (wall_on && wall_at < due)
        due = wall_at;
    return due > deadline ? due : deadline;
}

/* The gap to the next wall tick: uniform in [every/2, 3*every/2), so the mean rate is the one
 * asked and the ticks fall at every phase of an app's own period (a fixed grid saw a thread
 * with a 100 ms spin/sleep cycle spin 8 % or 45 % of the time, by its phase, at 5 Hz). The
 * weights are the time since the previous tick, so the totals stay exact. */
static int64_t wall_gap(int64_t every, uint64_t *rng)
{
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return every / 2 + (int64_t)((x >> 11) % (uint64_t)(every > 0 ? every : 1));
}

static void *sampler_main(void *arg)
{
    (void)arg;
    prof_name_thread("sampler");
    ICorProfilerInfo15 *info = g_core.info;
    info->vt->InitializeCurrentThread(info);
    const int64_t period = 1000000000LL / g_cfg.sampling_hz;
    const int64_t wall_period = 1000000000LL / sampler.wall_hz;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int64_t last = prof_now_ns(), prev_tick = last, last_sync = last - SIGNAL_SYNC_NS;
    int64_t last_maps = last;
    uint64_t rng = (uint64_t)last * 0x9E3779B97F4A7C15ull | 1;
    int64_t wall_at = last + wall_gap(wall_period, &rng); /* the next wall tick (jittered) */
    uint32_t nudges = prof_core_nudges();
    int advance = 1, idle = 0;
    uint64_t last_handled = 0;
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 1);
    while (!__atomic_load_n(&sampler.stop, __ATOMIC_ACQUIRE) && !prof_core_stopping()) {
        /* the stop-the-world CPU sampler (chosen, or fallen back to) ticks at the sampling rate */
        int64_t tick = __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) == CPU_SUSPEND &&
                               (g_core.profiles & PROFILE_CPU)
                           ? period
                           : sampler.tick_ns;
        if (advance) {
            next.tv_nsec += tick;
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec++;
            }
        }
        int64_t deadline = (int64_t)next.tv_sec * 1000000000LL + next.tv_nsec;
        /* the wall ticks keep their own time, off the drain ticks' grid (see wall_gap); with
         * the stop-the-world CPU sampler they come with its ticks */
        int cpu_suspend_mode = __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) ==
                                   CPU_SUSPEND && (g_core.profiles & PROFILE_CPU);
        int wall_own = (g_core.profiles & PROFILE_WALL) && !cpu_suspend_mode;
        /* a new thread waits for its timer no longer than SIGNAL_SYNC_MIN_NS after the last sync */
        int64_t wake = deadline;
        if (wall_own && wall_at < wake)
            wake = wall_at;
        if (sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU) &&
            __atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST) &&
            last_sync + SIGNAL_SYNC_MIN_NS < wake)
            wake = last_sync + SIGNAL_SYNC_MIN_NS;
        /* idle: nap on through the ticks, woken by the handlers' doorbell (see idle_deadline) */
        int signal_cpu = sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU);
        int idle_nap = 0;
        uint32_t *bell = prof_sigsample_bell(), bell_seen = 0;
        if (idle && signal_cpu && wake == deadline &&
            !__atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST)) {
            bell_seen = __atomic_load_n(bell, __ATOMIC_SEQ_CST);
            prof_sigsample_arm_bell(sampler.ring_entries > 2 ? (uint32_t)sampler.ring_entries / 2
                                                             : 1);
            if (prof_sigsample_handled() == last_handled) {
                idle_nap = 1;
                wake = idle_deadline(deadline, wall_at, wall_own);
            } else {
                prof_sigsample_arm_bell(0);
            }
        }
        /* a module unload or a new thread cuts the nap short: the signal samples are named
         * before the unload goes on; the thread's timer is armed */
        int stop = idle_nap ? prof_core_nap_word(bell, bell_seen, wake, nudges)
                            : prof_core_nap_nudged(wake, nudges);
        int rang = idle_nap && __atomic_load_n(bell, __ATOMIC_SEQ_CST) != bell_seen;
        if (idle_nap)
            prof_sigsample_arm_bell(0);
        if (stop)
            break;
        nudges = prof_core_nudges();
        uint64_t dump_wanted = prof_tdump_wanted();
        if (dump_wanted)
            sampler_dump_threads(info, dump_wanted);
        uint64_t unload_wanted = prof_unload_drain_wanted();
        int64_t now = prof_now_ns();
        advance = now >= deadline;
        if (idle_nap && now - deadline >= tick) {
            /* the ticks napped through are skipped, not caught up one after another */
            int64_t skip = (now - deadline) / tick * tick;
            next.tv_sec += (time_t)(skip / 1000000000LL);
            next.tv_nsec += (long)(skip % 1000000000LL);
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec++;
            }
        }
        if (rang)
            idle = 0;
        int wall_time = wall_own && now >= wall_at;
        if (!advance && !wall_time) {
            /* woken by an unload or a new thread, not by the clock: drain (and sync) only.
             * Sampling now would time the wall samples by the app's unloads (a thread waiting
             * for them in every sample). A thread that started less than SIGNAL_SYNC_MIN_NS
             * after the last sync waits for the next wake-up, which the nap above times. */
            int sync_due = __atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST) &&
                           now - last_sync >= SIGNAL_SYNC_MIN_NS;
            if (sampler.cpu_mode == CPU_SIGNAL &&
                (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU) &&
                (sync_due || rang || unload_wanted != sampler.unload_acked))
                signal_tick(now, &last_sync);
            sampler_drained(unload_wanted);
            continue;
        }
        if (now - prev_tick > 10 * tick) /* we fell behind (suspended VM, debugger): resync */
            clock_gettime(CLOCK_MONOTONIC, &next);
        if (now - last > 10 * wall_period * wall_slowdown()) { /* a stall is not wall time */
            pthread_mutex_lock(&sampler.st_lock);
            sampler.st.wall_stalled_ns += (uint64_t)(now - last - wall_period);
            pthread_mutex_unlock(&sampler.st_lock);
            last = now - wall_period;
        }
        if (advance)
            prev_tick = now;
        if (sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU)) {
            uint64_t handled = prof_sigsample_handled(); /* (before the drain: none missed) */
            signal_tick(now, &last_sync);
            idle = handled == last_handled &&
                   !__atomic_load_n(&sampler.threads_started, __ATOMIC_SEQ_CST);
            last_handled = handled;
        } else if (sampler.keep_maps && now - last_maps >= MAPS_KEEPER_NS) {
            last_maps = now;
            maps_tick(now);
        }
        /* `last` is the previous wall sample: wall weights are the time since, at any rate, so
         * the governor may stretch the period (the stop-the-world CPU sampler gets wall free) */
        int cpu_suspend = sampler.cpu_mode == CPU_SUSPEND && (g_core.profiles & PROFILE_CPU);
        int64_t wall_every = cpu_suspend ? wall_period : wall_period * wall_slowdown();
        int wall_due = cpu_suspend ? (g_core.profiles & PROFILE_WALL) &&
                                         now - last >= wall_every - tick / 2
                                   : wall_time;
        if (wall_due && !cpu_suspend)
            wall_at = now + wall_gap(wall_every, &rng);
        if (!cpu_suspend && !wall_due) {
            sampler_drained(unload_wanted);
            continue;
        }
        /* (every way of walking marks the threads it saw: the table drops those gone) */
        if ((++sampler.clock & 63) == 0)
            sampler_seen_sweep(100);
        int64_t t0 = prof_now_ns();
        /* a wall tick keeps the stacks of threads that have not run since they were walked */
        int use_cache = !cpu_suspend && sampler.wall_tids;
        int only_marked = 0;
        if (use_cache && sampler_wall_prepare()) {
            int n = sampler_wall_from_cache(prof_unix_now(), t0 - last);
            pthread_mutex_lock(&sampler.st_lock);
            sampler.st.ticks++;
            sampler.st.wall_cached_ticks++;
            sampler.st.samples += (uint64_t)n;
            sampler.st.wall_cached_samples += (uint64_t)n;
            pthread_mutex_unlock(&sampler.st_lock);
            sampler_drained(unload_wanted);
            last = t0;
            continue;
        }
        /* those that ran are asked for their stacks by a signal; the walk below only for those
         * that cannot be (see prof_sigsample_wall.c) */
        if (use_cache && sampler.wall_signal && !sampler.wall_unlisted &&
            sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU) &&
            prof_sigsample_wall_on()) {
            int answers = 0, cached = 0, leaf = 0;
            int marked =
                sampler_wall_by_signal(prof_unix_now(), t0 - last, &answers, &cached, &leaf);
            pthread_mutex_lock(&sampler.st_lock);
            sampler.st.samples += (uint64_t)(answers + cached);
            sampler.st.wall_cached_samples += (uint64_t)cached;
            sampler.st.wall_signal_samples += (uint64_t)answers;
            if (!marked) {
                sampler.st.ticks++;
                sampler.st.wall_signal_ticks++;
            } else if (marked > leaf) {
                sampler.st.wall_walks_unasked++;
            } else {
                sampler.st.wall_walks_leaf++;
            }
            pthread_mutex_unlock(&sampler.st_lock);
            if (!marked) {
                sampler_drained(unload_wanted);
                last = t0;
                continue;
            }
            only_marked = 1;
        }
        if (use_cache && !only_marked && sampler.wall_unlisted && sampler.wall_signal) {
            pthread_mutex_lock(&sampler.st_lock);
            sampler.st.wall_walks_unlisted++;
            pthread_mutex_unlock(&sampler.st_lock);
        }
        uint32_t epoch = prof_unload_epoch(); /* the frames are alive from here to the walk */
        HRESULT hr = info->vt->SuspendRuntime(info);
        if (hr != S_OK) {
            sampler.st.skipped_ticks++;
            if (hr != CORPROF_E_SUSPENSION_IN_PROGRESS && hr != CORPROF_E_RUNTIME_UNINITIALIZED)
                prof_log_once(sampler.suspend_warned, LOG_WARN, "SuspendRuntime failed (0x%08x); "
                              "skipping samples while it does", (unsigned)hr);
            sampler_drained(unload_wanted);
            continue;
        }
        int overflow = 0;
        int n = sampler_capture_all(info, &overflow, cpu_suspend, 0, use_cache, only_marked);
        info->vt->ResumeRuntime(info);
        int64_t t1 = prof_now_ns();
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.ticks++;
        sampler.st.suspended_ns += (uint64_t)(t1 - t0);
        sampler.st.last_thread_count = (uint64_t)(n + overflow);
        pthread_mutex_unlock(&sampler.st_lock);
        if (overflow)
            sampler_ensure_capacity(sampler.cap_threads + overflow);
        /* an unload that asked for a drain after this tick began waits for its end (below), so
         * the frames are named under the epoch they were walked in */
        int asking = prof_unload_enter(epoch);
        sampler_record(n, prof_unix_now(), t0 - last, cpu_suspend, wall_due, use_cache);
        if (asking)
            prof_unload_leave();
        sampler_drained(unload_wanted);
        if (wall_due)
            last = t0;
    }
    sampler_flush_quiet();
    prof_unload_consumer(PROF_UNLOAD_SAMPLER, 0);
    return NULL;
}

/* CLRSCOPE_CPU_SAMPLER and CLRSCOPE_WALL_HZ; starts the signal sampler when chosen. */
static void choose_modes(void)
{
    const char *m = getenv("CLRSCOPE_CPU_SAMPLER");
    sampler.cpu_mode = CPU_SIGNAL;
    if (m && !strcmp(m, "suspend"))
        sampler.cpu_mode = CPU_SUSPEND;
    else if (m && *m && strcmp(m, "signal"))
        prof_log(LOG_WARN, "CLRSCOPE_CPU_SAMPLER=\"%.40s\" is neither signal nor suspend; using "
                 "signal", m);
    const char *tm = getenv("CLRSCOPE_CPU_TIMER");
    int timer = PROF_SIG_TIMER_AUTO;
    if (tm && !strcmp(tm, "posix"))
        timer = PROF_SIG_TIMER_POSIX;
    else if (tm && !strcmp(tm, "perf"))
        timer = PROF_SIG_TIMER_PERF;
    else if (tm && *tm && strcmp(tm, "auto"))
        prof_log(LOG_WARN, "CLRSCOPE_CPU_TIMER=\"%.40s\" is not auto, perf or posix; using auto",
                 tm);
    /* perf events' cost is per context switch, whatever the rate: slowing the CPU sampler does
     * not lower it, so under a governor they may take at most half of the overhead budget, and
     * POSIX timers (a coarser clock, the same samples) stand in past it */
    double timer_budget = g_cfg.cpu_timer_budget;
    if (g_cfg.overhead_budget > 0 && g_cfg.overhead_budget / 2 < timer_budget)
        timer_budget = g_cfg.overhead_budget / 2;
    prof_sigsample_set_timer(timer, timer_budget);
    const char *nu = getenv("CLRSCOPE_NATIVE_UNWIND");
    if (nu && *nu && strcmp(nu, "cfi") && strcmp(nu, "fp"))
        prof_log(LOG_WARN, "CLRSCOPE_NATIVE_UNWIND=\"%.40s\" is neither cfi nor fp; using cfi", nu);
    prof_sigsample_set_cfi(!(nu && !strcmp(nu, "fp")));
    const char *ww = getenv("CLRSCOPE_WALL_WALK");
    sampler.wall_signal = !(ww && !strcmp(ww, "suspend"));
    if (ww && *ww && strcmp(ww, "suspend") && strcmp(ww, "signal"))
        prof_log(LOG_WARN, "CLRSCOPE_WALL_WALK=\"%.40s\" is neither signal nor suspend; using "
                 "signal", ww);
    /* The stop-the-world walk costs the same whatever it records: while it runs every tick for
     * CPU, wall samples come free at the full rate; otherwise they are what it costs. */
    long def = sampler.cpu_mode == CPU_SUSPEND ? g_cfg.sampling_hz : 5;
    if (def > g_cfg.sampling_hz)
        def = g_cfg.sampling_hz;
    sampler.wall_hz = (int)prof_env_long("CLRSCOPE_WALL_HZ", def, 1, g_cfg.sampling_hz);
    int64_t period = 1000000000LL / g_cfg.sampling_hz, wall_period = 1000000000LL / sampler.wall_hz;
    sampler.tick_ns = wall_period; /* wall alone */
    if (sampler.cpu_mode != CPU_SIGNAL || !(g_core.profiles & PROFILE_CPU)) {
        if (g_core.profiles & PROFILE_CPU)
            sampler.tick_ns = period;
        return;
    }
    /* signal mode: drain every SIGNAL_DRAIN_NS (or faster for wall samples); a thread burning a
     * core fills tick / period entries in between, 1.5 times that (+1) is room for jitter */
    int64_t tick = SIGNAL_DRAIN_NS;
    if ((g_core.profiles & PROFILE_WALL) && wall_period < tick)
        tick = wall_period;
    if (tick < period)
        tick = period;
    /* (and one more for a wall answer, which CPU samples leave free: prof_sighandler.c) */
    int wall_slot = sampler.wall_signal && (g_core.profiles & PROFILE_WALL);
    int64_t entries = (tick * 3 / 2 + period - 1) / period + 1 + wall_slot;
    if (entries > PROF_SIG_MAX_ENTRIES) {
        entries = PROF_SIG_MAX_ENTRIES;
        tick = (entries - 1 - wall_slot) * period * 2 / 3;
    }
    sampler.tick_ns = tick;
    sampler.ring_entries = (int)entries;
    sampler.tids = malloc((size_t)g_cfg.max_threads * sizeof *sampler.tids);
    sampler.sn.leaf = malloc((size_t)g_cfg.max_frames * sizeof *sampler.sn.leaf);
    sampler.sn.managed = malloc((size_t)g_cfg.max_frames);
    sampler.sn.root = malloc((size_t)(g_cfg.max_frames + 1) * sizeof *sampler.sn.root);
    if (!sampler.tids || !sampler.sn.leaf || !sampler.sn.managed || !sampler.sn.root ||
        prof_codemap_init(g_cfg.max_frames) ||
        prof_sigsample_start(g_cfg.sampling_hz, g_cfg.max_frames, g_cfg.max_threads,
                             sampler.ring_entries)) {
        sampler.cpu_mode = CPU_SUSPEND; /* prof_sigsample_start logged why */
        return;
    }
    if (sampler.wall_signal && (g_core.profiles & PROFILE_WALL))
        prof_sigsample_wall_install();
}

/* Starts keep_maps when the allocation walk wants it and the signal sampler does not run. */
static void choose_maps_keeper(void)
{
    struct prof_walk_stats ws;
    prof_walk_get_stats(&ws);
    if (!(g_core.profiles & (PROFILE_ALLOC | PROFILE_LIVE)) || ws.mode == PROF_WALK_RUNTIME)
        return;
    int signal_runs = sampler.cpu_mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU);
    if (!signal_runs && (prof_codemap_init(g_cfg.max_frames) || prof_maps_start())) {
        prof_log(LOG_WARN, "allocation stacks: no memory map snapshot; they take the runtime's "
                 "walk");
        return;
    }
    sampler.keep_maps = 1;
    if (!(g_core.profiles & (PROFILE_CPU | PROFILE_WALL)))
        sampler.tick_ns = MAPS_KEEPER_NS; /* the thread only keeps the maps */
}

void prof_sampler_thread_started(void)
{
    if (!__atomic_load_n(&sampler.running, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED) != CPU_SIGNAL ||
        !(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU))
        return;
    if (!__atomic_exchange_n(&sampler.threads_started, 1, __ATOMIC_SEQ_CST))
        prof_core_nudge();
}

int prof_sampler_start(void)
{
    int walks = (g_core.profiles & (PROFILE_ALLOC | PROFILE_LIVE)) != 0;
    if (!(g_core.profiles & (PROFILE_CPU | PROFILE_WALL)) && !walks)
        return 0;
    choose_modes();
    choose_maps_keeper();
    /* room for twice the threads sampled at once: dead ones stay until a sweep */
    sampler.nseen = 64;
    while (sampler.nseen < 8192 && sampler.nseen < 2u * (uint32_t)g_cfg.max_threads)
        sampler.nseen *= 2;
    sampler.seen = calloc(sampler.nseen, sizeof *sampler.seen);
    /* (without it every wall tick walks every thread, as the CPU sampler's do) */
    sampler.wall_tids = malloc((size_t)g_cfg.max_threads * sizeof *sampler.wall_tids);
    if (!sampler.seen || sampler_ensure_capacity(64)) {
        prof_log(LOG_ERROR, "cpu/wall sampler: out of memory; cpu and wall profiles are off");
        prof_core_disable(PROFILE_CPU | PROFILE_WALL);
        return -1;
    }
    if (pthread_create(&sampler.thread, NULL, sampler_main, NULL)) {
        prof_log(LOG_ERROR, "cpu/wall sampler: cannot start its thread; cpu and wall are off");
        prof_core_disable(PROFILE_CPU | PROFILE_WALL);
        return -1;
    }
    __atomic_store_n(&sampler.running, 1, __ATOMIC_RELEASE);
    prof_tdump_enable(1);
    return 0;
}

void prof_sampler_stop(void)
{
    if (!sampler.running)
        return;
    __atomic_store_n(&sampler.stop, 1, __ATOMIC_RELEASE);
    pthread_join(sampler.thread, NULL);
    prof_tdump_enable(0);
    if (sampler.cpu_mode == CPU_SIGNAL || sampler.keep_maps)
        prof_sigsample_stop(); /* and the allocation walks stop trusting the last snapshot */
    __atomic_store_n(&sampler.running, 0, __ATOMIC_RELEASE);
}

void prof_sampler_get_stats(struct prof_sampler_stats *out)
{
    pthread_mutex_lock(&sampler.st_lock);
    *out = sampler.st;
    int mode = __atomic_load_n(&sampler.cpu_mode, __ATOMIC_RELAXED);
    out->cpu_sampler = !(g_core.profiles & PROFILE_CPU) ? "off"
                       : mode == CPU_SIGNAL             ? "signal"
                                                        : "suspend";
    out->wall_hz = sampler.wall_hz;
    out->wall_walk = mode == CPU_SIGNAL && (g_core.profiles & PROFILE_CPU) && sampler.wall_signal &&
                             out->sig.wall.signo
                         ? "signal"
                         : "suspend";
    out->wall_slowdown = wall_slowdown();
    out->cpu_slowdown = cpu_slowdown();
    out->tick_ns = !strcmp(out->cpu_sampler, "suspend") ? 1000000000LL / g_cfg.sampling_hz
                                                         : sampler.tick_ns;
    out->ring_entries = sampler.ring_entries;
    pthread_mutex_unlock(&sampler.st_lock);
}

