/* prof_budget.c - see prof_budget.h.
 *
 * The runtime's work per allocation event happens before clrscope's callback runs, on the app's
 * thread, with no clock clrscope can read around it. It is an estimate, RUNTIME_NS_PER_ALLOC_EVENT:
 * what perf charged per AllocationSampled event to the type name, the event's building and the
 * sampling draws on the bench's ASP.NET Core server (bench/findings.md). Calibrating it from the
 * process's CPU rate with the events on and off was tried and read a third of that: a CPU-bound
 * app's CPU rate does not change with the events, its throughput does.
 *
 * The cycle: the governor wakes at each whole second of the wall clock, notes how long the
 * allocation events were on in the second that ended (prof_alloc_note_coverage), reads the
 * costs, picks this second's share, sets the samples' weight to 1 / share, and turns the events
 * on at a random point of the second for `share` of it (a random phase, so that a periodic load
 * is not seen always at the same point of its period). A full share keeps them on: no switch.
 * The on-time noted is the events' own (from the allocation session's start to its stop); where
 * it differs from the plan (a switch held up by a GC or a loaded machine), the second's samples
 * are weighed by what it was when read (prof_alloc_second_factor).
 */
#include "prof_budget.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "prof_agg.h"
#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_esamp.h"
#include "prof_events.h"
#include "prof_log.h"
#include "prof_sampler.h"
#include "prof_sighandler.h"

#define RUNTIME_NS_PER_ALLOC_EVENT 3000.0
/* Allocations are not worth turning down when they would cost under a tenth of what the budget
 * allows, or under 0.05 % of one core (what an idle app may cost). */
#define NOT_WORTH 0.1
#define NOT_WORTH_CORE 0.0005

/* One second's costs (CPU seconds) as the window's ring keeps them. */
struct second {
    double proc_s, threads_s, cb_alloc_s, cb_other_s, runtime_s, susp_s, handler_s, perf_s;
    double on_share, seconds;
};

/* The governor's state: written by clrscope-gov under `lock` (the parts prof_budget_read
 * copies) or by it alone (the rest); `thread`/`running` by Initialize and Shutdown. */
static struct budget_state {
    pthread_t thread;
    int running;
    pthread_mutex_t lock;
    struct prof_budget_view view;     /* under lock */
    struct second ring[PROF_BUDGET_WINDOW_S];
    int nring, ring_at;
    /* the counters read at the start of the last second */
    int64_t last_proc_ns;
    uint64_t last_suspended_ns;
    /* the signal handler's time: its cycle counter, and that counter's rate (measured against
     * CLOCK_MONOTONIC from the governor's start) */
    uint64_t last_handler_cycles, cycles0;
    int64_t cycles0_ns;
    double last_threads_s;
    struct prof_events_cost last_cost;
    double share;                     /* this second's */
    int wall_slowdown;                /* the wall sampler's divisor (prof_sampler) */
    int cpu_slowdown;                 /* the CPU sampler's divisor (prof_sampler) */
    double wall_changed;              /* when either last changed (unix s) */
    int64_t on_since_ns;              /* when the events were last turned on (0: off) */
    int64_t on_ns;                    /* how long they were on in this second so far */
    int64_t switch_cpu_ns, switch_wall_ns, switch_wall_max_ns;
    uint64_t rng;
} gov = {.lock = PTHREAD_MUTEX_INITIALIZER, .share = 1, .wall_slowdown = 1, .cpu_slowdown = 1};

double prof_budget_allowed(double budget, double floor_core, const struct prof_budget_window *w)
{
    double of_process = budget * w->proc_s, of_core = floor_core * w->seconds;
    return of_process > of_core ? of_process : of_core;
}

double prof_budget_next_share(double share, double budget, double floor_core,
                              const struct prof_budget_window *w)
{
    if (!(w->proc_s > 0) || !(budget > 0) || !(w->seconds > 0))
        return 1;
    double seen = w->on_share > PROF_BUDGET_MIN_SHARE ? w->on_share : PROF_BUDGET_MIN_SHARE;
    double alloc_full = (w->cb_alloc_s + w->runtime_s) / seen; /* were they on all the time */
    double allowed = prof_budget_allowed(budget, floor_core, w);
    if (alloc_full <= NOT_WORTH * allowed || alloc_full <= NOT_WORTH_CORE * w->seconds)
        return 1;
    double want = (allowed - w->threads_s - w->cb_other_s - w->susp_s - w->handler_s - w->perf_s) /
                  alloc_full;
    if (want >= 0.95)
        want = 1;
    if (want < PROF_BUDGET_MIN_SHARE)
        want = PROF_BUDGET_MIN_SHARE;
    if (want > 2 * share) /* down at once, up step by step */
        want = 2 * share;
    return want > 1 ? 1 : want;
}

int prof_budget_next_wall(int slowdown, double cost, double allowed, int alloc_spent)
{
    if (cost > allowed && alloc_spent)
        return slowdown >= 4 ? PROF_SAMPLER_MAX_WALL_SLOWDOWN : slowdown * 2;
    if (cost < 0.7 * allowed && slowdown > 1)
        return slowdown == PROF_SAMPLER_MAX_WALL_SLOWDOWN ? 4 : slowdown / 2;
    return slowdown;
}

int prof_budget_next_cpu(int slowdown, double cost, double allowed, int wall_spent)
{
    if (cost > allowed && wall_spent)
        return slowdown >= PROF_SAMPLER_MAX_CPU_SLOWDOWN / 2 ? PROF_SAMPLER_MAX_CPU_SLOWDOWN
                                                            : slowdown * 2;
    if (cost < 0.7 * allowed && slowdown > 1)
        return slowdown / 2;
    return slowdown;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Switches the allocation events and keeps their on-time: from the return of the allocation
 * session's start to the call of its stop, where they flow (prof_events_switch_times; the
 * parking session's stop and start around them are not on-time). */
static void set_alloc(int on)
{
    int64_t c0 = thread_cpu_ns(), w0 = prof_now_ns();
    int rc = prof_events_alloc_switch(on);
    gov.switch_cpu_ns += thread_cpu_ns() - c0;
    int64_t now = prof_now_ns(), wall = now - w0;
    if (wall > gov.switch_wall_max_ns)
        gov.switch_wall_max_ns = wall;
    gov.switch_wall_ns += wall;
    if (rc)
        return; /* refused or not now: the state stays, and coverage says what it is */
    struct prof_events_switch_times t;
    prof_events_switch_times(&t);
    int switched = t.call_ns >= w0 && t.flip_ns >= t.call_ns && t.flip_ns <= now;
    if (on && !gov.on_since_ns) {
        gov.on_since_ns = switched ? t.flip_ns : now;
    } else if (!on && gov.on_since_ns) {
        int64_t off = switched ? t.call_ns : now;
        gov.on_ns += off > gov.on_since_ns ? off - gov.on_since_ns : 0;
        gov.on_since_ns = 0;
    }
}

/* Sleeps until unix second `sec` + `frac` (a monotonic deadline computed from the wall clock
 * now). 1 when stopping. */
static int nap_until_unix(double unix_t)
{
    double now = prof_unix_now();
    int64_t d = unix_t > now ? (int64_t)((unix_t - now) * 1e9) : 0;
    if (d > 2000000000LL) /* the wall clock stepped back: do not sleep through it */
        d = 1000000000LL;
    return prof_core_nap_until(prof_now_ns() + d);
}

static void add_history(double t, double measured, double share)
{
    struct prof_budget_view *v = &gov.view;
    if (v->nhistory == PROF_BUDGET_HISTORY) {
        memmove(v->history, v->history + 1, sizeof v->history[0] * (PROF_BUDGET_HISTORY - 1));
        v->nhistory--;
    }
    v->history[v->nhistory++] = (struct prof_budget_point){t, measured, share};
}

/* At a second's start: what the second that ended cost, into the window's ring. */
static void account(int64_t ended_sec, double ended_len_s)
{
    int64_t proc_ns = prof_process_cpu_ns();
    struct prof_self_stats self;
    prof_agg_self_stats(&self);
    struct prof_events_cost cost;
    prof_events_read_cost(&cost);
    struct prof_sampler_stats ss;
    prof_sampler_get_stats(&ss);
    double on = gov.on_ns / 1e9 + (gov.on_since_ns ? (prof_now_ns() - gov.on_since_ns) / 1e9 : 0);
    double on_share = ended_len_s > 0 ? on / ended_len_s : 1;
    if (on_share > 1)
        on_share = 1;
    if (prof_events_alloc_switchable())
        prof_alloc_note_coverage(ended_sec, on_share, gov.share);
    struct second s = {
        .proc_s = (double)(proc_ns - gov.last_proc_ns) / 1e9,
        .threads_s = self.cpu_s - gov.last_threads_s,
        .cb_alloc_s = (double)(cost.alloc_ns - gov.last_cost.alloc_ns) / 1e9,
        .cb_other_s = (double)(cost.other_ns - gov.last_cost.other_ns) / 1e9,
        .runtime_s = (double)(cost.alloc_events - gov.last_cost.alloc_events) *
                     RUNTIME_NS_PER_ALLOC_EVENT / 1e9,
        .seconds = ended_len_s,
        .on_share = on_share,
    };
    if (s.threads_s < 0)
        s.threads_s = 0;
    /* while the runtime is suspended for a wall tick, the app's running threads stand still:
     * the time, times the cores the app kept busy that second */
    double busy = ended_len_s > 0 ? s.proc_s / ended_len_s : 0;
    s.susp_s = (double)(ss.suspended_ns - gov.last_suspended_ns) / 1e9 * busy;
    gov.last_suspended_ns = ss.suspended_ns;
    /* the CPU sampler's signal handler on the app's threads, and what perf events add to the
     * app's context switches (measured by the sampler while it reviews its clock) */
    int64_t ns = prof_now_ns() - gov.cycles0_ns;
    uint64_t cycles = prof_sig_cycles() - gov.cycles0;
    if (ns > 500000000LL && cycles > 0 && ss.sig.handler_cycles >= gov.last_handler_cycles)
        s.handler_s = (double)(ss.sig.handler_cycles - gov.last_handler_cycles) *
                      ((double)ns / (double)cycles) / 1e9;
    gov.last_handler_cycles = ss.sig.handler_cycles;
    if (ss.sig.reviewing && ss.sig.switch_cost_ns >= 0 && ss.sig.timer &&
        !strcmp(ss.sig.timer, "perf") && ss.sig.perf_cost > 0)
        s.perf_s = ss.sig.perf_cost * s.proc_s;
    gov.last_proc_ns = proc_ns;
    gov.last_threads_s = self.cpu_s;
    gov.last_cost = cost;
    gov.on_ns = 0;
    if (gov.on_since_ns)
        gov.on_since_ns = prof_now_ns();
    gov.ring[gov.ring_at] = s;
    gov.ring_at = (gov.ring_at + 1) % PROF_BUDGET_WINDOW_S;
    if (gov.nring < PROF_BUDGET_WINDOW_S)
        gov.nring++;
}

static void window(struct prof_budget_window *w)
{
    memset(w, 0, sizeof *w);
    double on = 0;
    for (int i = 0; i < gov.nring; i++) {
        const struct second *s = &gov.ring[i];
        w->proc_s += s->proc_s;
        w->threads_s += s->threads_s;
        w->cb_alloc_s += s->cb_alloc_s;
        w->cb_other_s += s->cb_other_s;
        w->runtime_s += s->runtime_s;
        w->susp_s += s->susp_s;
        w->handler_s += s->handler_s;
        w->perf_s += s->perf_s;
        w->seconds += s->seconds;
        on += s->on_share;
    }
    w->on_share = gov.nring ? on / gov.nring : 1;
}

static void *gov_main(void *arg)
{
    (void)arg;
    prof_name_thread("gov");
    gov.last_proc_ns = prof_process_cpu_ns();
    struct prof_self_stats self;
    prof_agg_self_stats(&self);
    gov.last_threads_s = self.cpu_s;
    prof_events_read_cost(&gov.last_cost);
    gov.rng = (uint64_t)prof_now_ns() ^ 0x9E3779B97F4A7C15ull;
    gov.cycles0 = prof_sig_cycles();
    gov.cycles0_ns = prof_now_ns();
    {
        struct prof_sampler_stats ss0;
        prof_sampler_get_stats(&ss0);
        gov.last_handler_cycles = ss0.sig.handler_cycles;
        gov.last_suspended_ns = ss0.suspended_ns;
    }
    int switchable = prof_events_alloc_switchable();
    gov.on_since_ns = prof_events_alloc_on() ? prof_now_ns() : 0;
    double sec = floor(prof_unix_now()) + 1, started = prof_unix_now();
    while (!nap_until_unix(sec)) {
        account((int64_t)sec - 1, sec - started);
        started = sec;
        struct prof_budget_window w;
        window(&w);
        double before = gov.share;
        double share = prof_budget_next_share(gov.share, g_cfg.overhead_budget,
                                              g_cfg.overhead_floor, &w);
        double allowed = prof_budget_allowed(g_cfg.overhead_budget, g_cfg.overhead_floor, &w);
        if (!switchable)
            share = 1;
        gov.share = share;
        double cost = w.threads_s + w.cb_alloc_s + w.cb_other_s + w.runtime_s + w.susp_s +
                      w.handler_s + w.perf_s;
        double measured = w.proc_s > 0 ? cost / w.proc_s : 0;
        /* the wall sampler next, once allocations have given what they can; a step a window,
         * so that each is seen in the costs before the next, and the first on a whole window:
         * one second of start-up (symbols read, the runtime's threads walked once) is not what
         * the wall sampler costs */
        int alloc_spent = !switchable || share <= PROF_BUDGET_MIN_SHARE || share >= 1;
        int wall_before = gov.wall_slowdown, cpu_before = gov.cpu_slowdown;
        if (gov.nring >= PROF_BUDGET_WINDOW_S && sec - gov.wall_changed >= PROF_BUDGET_WINDOW_S &&
            w.proc_s > 0) {
            /* down: allocations, then the wall sampler, then the CPU sampler; back up in the
             * reverse order, one step of one of them a window */
            int has_wall = (g_core.profiles & PROFILE_WALL) != 0;
            int has_cpu = (g_core.profiles & PROFILE_CPU) && prof_sampler_cpu_by_signal();
            int wall_spent = !has_wall || gov.wall_slowdown >= PROF_SAMPLER_MAX_WALL_SLOWDOWN;
            int cpu_next = has_cpu ? prof_budget_next_cpu(gov.cpu_slowdown, cost, allowed,
                                                          alloc_spent && wall_spent)
                                   : 1;
            int wall_next = has_wall ? prof_budget_next_wall(gov.wall_slowdown, cost, allowed,
                                                             alloc_spent)
                                     : 1;
            if (cpu_next != gov.cpu_slowdown) {
                gov.cpu_slowdown = cpu_next;
                gov.wall_changed = sec;
                prof_sampler_set_cpu_slowdown(cpu_next);
            } else if (wall_next != gov.wall_slowdown &&
                       (wall_next > gov.wall_slowdown || gov.cpu_slowdown == 1)) {
                gov.wall_slowdown = wall_next;
                gov.wall_changed = sec;
                prof_sampler_set_wall_slowdown(wall_next);
            }
        }
        struct prof_events_cost ec;
        prof_events_read_cost(&ec);
        pthread_mutex_lock(&gov.lock);
        struct prof_budget_view *v = &gov.view;
        v->measured = measured;
        v->window = w;
        v->alloc_events = ec.alloc_events;
        v->alloc_share = share;
        v->switches = ec.switches;
        v->switch_failures = ec.switch_failures;
        v->switch_cpu_s = gov.switch_cpu_ns / 1e9;
        v->switch_wall_s = gov.switch_wall_ns / 1e9;
        v->switch_wall_max_s = gov.switch_wall_max_ns / 1e9;
        v->over = NULL;
        v->allowed_s = allowed;
        if (cost > allowed && w.proc_s > 0) {
            int wall_left = (g_core.profiles & PROFILE_WALL) &&
                            gov.wall_slowdown < PROF_SAMPLER_MAX_WALL_SLOWDOWN;
            int cpu_left = (g_core.profiles & PROFILE_CPU) && prof_sampler_cpu_by_signal() &&
                           gov.cpu_slowdown < PROF_SAMPLER_MAX_CPU_SLOWDOWN;
            if (!switchable && (w.cb_alloc_s + w.runtime_s) > 0.1 * cost)
                v->over = "allocation events cannot be switched on this runtime";
            else if (!alloc_spent)
                v->over = "turning the allocation events down";
            else if (wall_left)
                v->over = "allocations at their least or not worth turning down; slowing the "
                          "wall sampler";
            else if (cpu_left)
                v->over = "allocations and wall samples at their least; slowing the CPU sampler";
            else
                v->over = "allocations, wall and CPU samples at their least; the other sources "
                          "are not governed";
        }
        if (fabs(share - before) > 0.005) {
            v->changed_unix = sec;
            v->changed_source = "alloc";
            v->changed_from = before;
            v->changed_to = share;
        }
        v->wall_slowdown = gov.wall_slowdown;
        v->cpu_slowdown = gov.cpu_slowdown;
        if (gov.wall_slowdown != wall_before) {
            v->changed_unix = sec;
            v->changed_source = "wall";
            v->changed_from = wall_before;
            v->changed_to = gov.wall_slowdown;
        }
        if (gov.cpu_slowdown != cpu_before) {
            v->changed_unix = sec;
            v->changed_source = "cpu";
            v->changed_from = cpu_before;
            v->changed_to = gov.cpu_slowdown;
        }
        add_history(sec, measured, share);
        pthread_mutex_unlock(&gov.lock);
        if (before < 1 && share >= 1)
            prof_log(LOG_INFO, "overhead budget: allocation events back on all the time");
        else if (before >= 1 && share < 1)
            prof_log(LOG_INFO, "overhead budget: clrscope cost %.2f%% of the process's CPU over "
                     "%d s (budget %.2f%%, at least %.2f%% of a core); allocation events on "
                     "%.0f%% of each second", measured * 100, PROF_BUDGET_WINDOW_S,
                     g_cfg.overhead_budget * 100, g_cfg.overhead_floor * 100,
                     share * 100);
        if (!switchable)
            goto next;
        prof_alloc_set_scale(1 / share);
        if (share >= 1) {
            set_alloc(1);
            goto next;
        }
        set_alloc(0);
        double r = (double)(esamp_mix(++gov.rng) >> 11) * 0x1.0p-53;
        double on_at = sec + r * (1 - share);
        if (nap_until_unix(on_at))
            break;
        set_alloc(1);
        /* the share counts from when the allocation session's start returned (the events
         * flow from then: measured to within 0.1 ms on a quiet machine), not from the end of
         * the whole switch, which stops the parking session too and can take tens of
         * milliseconds on a loaded or instrumented process */
        double left = share;
        if (gov.on_since_ns)
            left -= (double)(prof_now_ns() - gov.on_since_ns) / 1e9;
        if (nap_until_unix(prof_unix_now() + left))
            break;
        set_alloc(0);
    next:
        sec += 1;
        double now = prof_unix_now();
        if (now > sec + 1 || now < sec - 2) /* the wall clock jumped, or we were held up */
            sec = floor(now) + 1;
    }
    return NULL;
}

int prof_budget_start(void)
{
    if (!(g_cfg.overhead_budget > 0))
        return 0;
    gov.view.enabled = 1;
    gov.view.target = g_cfg.overhead_budget;
    gov.view.alloc_switchable = prof_events_alloc_switchable();
    gov.view.runtime_ns_per_event = RUNTIME_NS_PER_ALLOC_EVENT;
    gov.view.alloc_share = 1;
    gov.view.wall_slowdown = 1;
    gov.view.cpu_slowdown = 1;
    if (pthread_create(&gov.thread, NULL, gov_main, NULL)) {
        gov.view.enabled = 0;
        prof_log(LOG_WARN, "cannot start the overhead governor's thread; clrscope runs without "
                 "a budget");
        return -1;
    }
    gov.running = 1;
    return 0;
}

void prof_budget_stop(void)
{
    if (!gov.running)
        return;
    pthread_join(gov.thread, NULL); /* its naps end when Shutdown begins */
    gov.running = 0;
}

void prof_budget_read(struct prof_budget_view *out)
{
    pthread_mutex_lock(&gov.lock);
    *out = gov.view;
    pthread_mutex_unlock(&gov.lock);
    if (!out->enabled)
        out->target = g_cfg.overhead_budget;
}
