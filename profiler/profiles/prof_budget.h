/*
 * prof_budget - the overhead governor: holds what clrscope costs the app under
 * CLRSCOPE_OVERHEAD_BUDGET (a share of the process's CPU, 1 % by default; 0 = no governor), and
 * never under CLRSCOPE_OVERHEAD_FLOOR of one core (1 %).
 *
 * Once a second, on its own thread clrscope-gov, it adds up over the last 10 s what clrscope
 * cost: its threads' CPU clocks (prof_agg), the time its callbacks took on the app's threads
 * (prof_events), and the runtime's own work for the allocation events clrscope asked for (an
 * estimate per event, see prof_budget.c). When that is over the budget
 * it turns the allocation events down at their source, the dearest source and the one whose
 * loss costs least information: on for a share of each second at a random phase, off for the
 * rest (prof_events_alloc_switch, .NET 10), every sample weighted by 1 / that share so that
 * counts and bytes stay unbiased (prof_alloc_set_scale). When allocations cost too little to
 * matter, they stay on. When they have given what they can and the cost is still over, the wall
 * sampler's ticks go further apart (prof_sampler_set_wall_slowdown, a step a window, up to 5x;
 * each wall sample weighs the time since the last, so totals stay exact); the time the runtime
 * stays suspended for them, times the cores the app keeps busy, counts as their cost. Last,
 * with the wall sampler at its least, the CPU sampler's rate (prof_sampler_set_cpu_slowdown, a
 * step a window, 2x then 4x; each sample weighs the CPU time between two); coming back, the CPU
 * sampler first. Exceptions, locks and live checks are measured but not turned down.
 *
 * ctx: prof_budget_start/stop from Initialize/Shutdown (after prof_events_start); the thread
 * is the only caller of prof_events_alloc_switch; prof_budget_read any thread (a lock held for
 * a copy); prof_budget_next_share is pure (tests).
 */
#ifndef PROF_BUDGET_H
#define PROF_BUDGET_H

#include <stdint.h>

#define PROF_BUDGET_WINDOW_S 10
#define PROF_BUDGET_HISTORY 120
#define PROF_BUDGET_MIN_SHARE 0.02

/* What the last window cost, in CPU seconds. */
struct prof_budget_window {
    double proc_s;      /* the whole process (the app and clrscope) */
    double threads_s;   /* clrscope's threads */
    double cb_alloc_s;  /* clrscope's callbacks for allocation events */
    double cb_other_s;  /* its callbacks for every other event */
    double runtime_s;   /* the runtime's work for the allocation events (estimated) */
    double susp_s;      /* the app's running threads held by the wall sampler's suspensions */
    double handler_s;   /* the CPU sampler's signal handler on the app's threads */
    double perf_s;      /* what perf events add to the app's context switches (when measured) */
    double on_share;    /* the share of the window the allocation events were on */
    double seconds;     /* the window's length */
};

struct prof_budget_point {
    double t_unix, measured, alloc_on;
};

struct prof_budget_view {
    int enabled;            /* a budget is set and the governor runs */
    int alloc_switchable;   /* this runtime lets it turn the allocation events down */
    double target;          /* the budget, a share of the process's CPU */
    double measured;        /* what clrscope cost over the last window, the same way */
    double allowed_s;       /* what the budget allowed over it (prof_budget_allowed) */
    struct prof_budget_window window;
    double runtime_ns_per_event; /* the estimate of the runtime's work per allocation event */
    uint64_t alloc_events;  /* allocation events delivered since start */
    double alloc_share;     /* the share of this second the allocation events are planned on */
    uint64_t switches, switch_failures;
    double switch_cpu_s;    /* CPU clrscope-gov spent in the switch's runtime calls */
    double switch_wall_s, switch_wall_max_s; /* the time they took, in all and at most */
    const char *over;       /* why measured stays over target (NULL when under) */
    double changed_unix;    /* when a source was last turned, which, from what to what */
    const char *changed_source; /* "alloc" (a share), "wall" or "cpu" (a divisor of the rate) */
    double changed_from, changed_to;
    int wall_slowdown;      /* the wall sampler's rate divided by (1: as configured) */
    int cpu_slowdown;       /* the CPU sampler's rate divided by (1: as configured) */
    struct prof_budget_point history[PROF_BUDGET_HISTORY]; /* oldest first */
    int nhistory;
};

/* The share of each second the allocation events get next, from the share they had and the
 * last window's costs: as much as the budget leaves after the other sources, never below
 * PROF_BUDGET_MIN_SHARE, rising at most twofold a second; 1 when allocations cost under a tenth
 * of the budget anyway. */
double prof_budget_next_share(double share, double budget, double floor_core,
                              const struct prof_budget_window *w);
/* What the budget allows over the window (CPU seconds): `budget` of the process's CPU, but never
 * less than `floor_core` of one core (CLRSCOPE_OVERHEAD_FLOOR): a share of an app that uses
 * little CPU would leave nothing to profile with. */
double prof_budget_allowed(double budget, double floor_core, const struct prof_budget_window *w);

/* The wall sampler's next divisor (1, 2, 4, 5): up a step when the cost is over what is allowed
 * and the allocation events have given what they can (`alloc_spent`), down a step under 70 %. */
int prof_budget_next_wall(int slowdown, double cost, double allowed, int alloc_spent);
/* The CPU sampler's next divisor (1, 2, 4): up a step when the cost is over what is allowed and
 * the wall sampler is at its least (`wall_spent`), down a step under 70 %. The wall sampler comes
 * back only once this is 1 (prof_budget.c). */
int prof_budget_next_cpu(int slowdown, double cost, double allowed, int wall_spent);

int prof_budget_start(void);
void prof_budget_stop(void);
void prof_budget_read(struct prof_budget_view *out);

#endif
