/*
 * test_budget - the overhead governor's decision (prof_budget_next_share, prof_budget_allowed):
 * allocations keep the share the budget leaves after the other sources, go down at once and up
 * at most twofold a second, never below the least share, and stay fully on when they cost too
 * little to matter; the floor of one core holds for an app that uses little CPU. And the
 * weights of a governed second's allocation samples, read once it has ended: planned share /
 * the share the events really flowed (a switch held up makes them flow longer than planned),
 * in the store's totals of allocations and nowhere else.
 */
#include <math.h>
#include <stdio.h>

#include "prof_alloc.h"
#include "prof_budget.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_store.h"
#include "unit_check.h"

/* A 10 s window of an app using one core, where clrscope's threads and other callbacks cost
 * `fixed` seconds and the allocation events `alloc` seconds while on for `on` of the time. */
static struct prof_budget_window win(double fixed, double alloc, double on)
{
    return (struct prof_budget_window){.proc_s = 10, .threads_s = fixed / 2,
                                       .cb_other_s = fixed / 2, .cb_alloc_s = alloc / 3,
                                       .runtime_s = alloc * 2 / 3, .on_share = on,
                                       .seconds = 10};
}

static void test_share_follows_the_budget(void)
{
    /* 1 % of 10 s = 0.1 s allowed; fixed 0.04; allocations 0.3 s fully on -> 0.2 */
    struct prof_budget_window w = win(0.04, 0.3, 1);
    double s = prof_budget_next_share(1, 0.01, 0, &w);
    CHECK(fabs(s - 0.2) < 1e-9, "share %g, want 0.2", s);
    /* the same cost seen at a share of 0.2 (0.06 s) is the same full cost: the share holds */
    w = win(0.04, 0.06, 0.2);
    s = prof_budget_next_share(0.2, 0.01, 0, &w);
    CHECK(fabs(s - 0.2) < 1e-9, "share %g, want 0.2 again", s);
    /* the budget halves: down at once */
    s = prof_budget_next_share(0.2, 0.005, 0, &w);
    CHECK(fabs(s - (0.05 - 0.04) / 0.3) < 1e-9, "share %g", s);
}

static void test_up_step_by_step_and_bounds(void)
{
    /* allocations got cheap: at most twice the share a second */
    struct prof_budget_window w = win(0.01, 0.002, 0.1); /* 0.02 s fully on, allowed 0.1 */
    double s = prof_budget_next_share(0.1, 0.01, 0, &w);
    CHECK(fabs(s - 0.2) < 1e-9, "share %g, want 0.2 (twice 0.1)", s);
    /* the other sources alone are over the budget: the least share, not zero */
    w = win(0.2, 0.3, 1);
    s = prof_budget_next_share(1, 0.01, 0, &w);
    CHECK(s == PROF_BUDGET_MIN_SHARE, "share %g, want the least", s);
    /* near the whole: the whole (no switching for 5 %) */
    w = win(0.04, 0.0625, 1); /* want 0.96 */
    s = prof_budget_next_share(1, 0.01, 0, &w);
    CHECK(s == 1, "share %g, want 1", s);
}

static void test_not_worth_turning_down(void)
{
    /* allocations under a tenth of what is allowed: on, whatever the rest costs */
    struct prof_budget_window w = win(0.5, 0.009, 1);
    double s = prof_budget_next_share(0.5, 0.01, 0, &w);
    CHECK(s == 1, "share %g, want 1 (allocations cost 0.009 of 0.1 allowed)", s);
    /* an app that uses little CPU: under 0.05 % of a core is not worth it either */
    w = win(0.001, 0.004, 1);
    w.proc_s = 0.05;
    s = prof_budget_next_share(1, 0.01, 0, &w);
    CHECK(s == 1, "share %g, want 1 (0.004 s in 10 s)", s);
    /* no budget, or no CPU seen: on */
    CHECK(prof_budget_next_share(0.3, 0, 0, &w) == 1, "budget 0");
    w.proc_s = 0;
    CHECK(prof_budget_next_share(0.3, 0.01, 0, &w) == 1, "no CPU");
}

static void test_floor_of_one_core(void)
{
    /* the app uses 5 % of a core: 1 % of it is 5 ms in 10 s; a floor of 1 % of a core is 0.1 s */
    struct prof_budget_window w = win(0.03, 0.05, 1);
    w.proc_s = 0.5;
    CHECK(fabs(prof_budget_allowed(0.01, 0.01, &w) - 0.1) < 1e-12, "floor");
    CHECK(fabs(prof_budget_allowed(0.01, 0, &w) - 0.005) < 1e-12, "no floor");
    double s = prof_budget_next_share(1, 0.01, 0.01, &w);
    CHECK(s == 1, "share %g: 0.03 + 0.05 is under the floor's 0.1", s);
    s = prof_budget_next_share(1, 0.01, 0, &w);
    CHECK(s == PROF_BUDGET_MIN_SHARE, "share %g without the floor", s);
}

static void test_wall_steps(void)
{
    /* over, allocations spent: 1 -> 2 -> 4 -> 5, and no further */
    int f = 1;
    int want_up[] = {2, 4, 5, 5};
    for (int i = 0; i < 4; i++) {
        f = prof_budget_next_wall(f, 0.2, 0.1, 1);
        CHECK(f == want_up[i], "step %d up: %d, want %d", i, f, want_up[i]);
    }
    /* over, but allocations can still give: the wall sampler waits */
    CHECK(prof_budget_next_wall(2, 0.2, 0.1, 0) == 2, "allocations first");
    /* between 70 % and 100 %: holds; under 70 %: back a step at a time */
    CHECK(prof_budget_next_wall(5, 0.08, 0.1, 1) == 5, "holds at 80 percent");
    int want_down[] = {4, 2, 1, 1};
    for (int i = 0; i < 4; i++) {
        f = prof_budget_next_wall(f, 0.05, 0.1, 1);
        CHECK(f == want_down[i], "step %d down: %d, want %d", i, f, want_down[i]);
    }
}

static void test_cpu_steps(void)
{
    /* the last resort: 1 -> 2 -> 4, only with the wall sampler at its least */
    int f = 1;
    int want_up[] = {2, 4, 4};
    for (int i = 0; i < 3; i++) {
        f = prof_budget_next_cpu(f, 0.2, 0.1, 1);
        CHECK(f == want_up[i], "cpu step %d up: %d, want %d", i, f, want_up[i]);
    }
    CHECK(prof_budget_next_cpu(1, 0.2, 0.1, 0) == 1, "the wall sampler first");
    CHECK(prof_budget_next_cpu(4, 0.08, 0.1, 1) == 4, "holds at 80 percent");
    int want_down[] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        f = prof_budget_next_cpu(f, 0.05, 0.1, 1);
        CHECK(f == want_down[i], "cpu step %d down: %d, want %d", i, f, want_down[i]);
    }
}

static void test_second_factor(void)
{
    g_core.runtime_major = 10; /* AllocationSampled: the per-second notes exist */
    g_cfg.history_s = 60;
    UINT64 kw = 0;
    UINT32 level = 0;
    prof_alloc_session_needs(&kw, &level);
    CHECK(!prof_store_init(60, 1000, 1u << 20), "store");
    int64_t sec = (int64_t)prof_unix_now() - 3;
    CHECK(prof_alloc_second_factor(sec) == 1, "a second not noted: 1");
    prof_alloc_note_coverage(sec, 0.04, 0.02); /* planned 2 %, flowed 4 % */
    CHECK(fabs(prof_alloc_second_factor(sec) - 0.5) < 1e-6, "planned / on: %g",
          prof_alloc_second_factor(sec));
    prof_alloc_note_coverage(sec - 1, 0.7, 1); /* fully on, switched on mid-second */
    CHECK(prof_alloc_second_factor(sec - 1) == 1, "not governed: 1");
    prof_alloc_note_coverage(sec - 2, 0, 0.02); /* nothing flowed: no sample to weigh */
    CHECK(prof_alloc_second_factor(sec - 2) == 1, "nothing on: 1");
    const char *frames[1] = {"Site"};
    int64_t v[PROF_NVALUES] = {5000, 800000, 10}; /* weighed 1/0.02 when they came */
    prof_store_add(PK_ALLOC, (double)sec + 0.5, frames, 1, 1, "T", v);
    prof_store_add(PK_ALLOC_TYPE, (double)sec + 0.5, NULL, 0, 0, "T", v);
    prof_store_add(PK_CPU, (double)sec + 0.5, frames, 1, 1, NULL, v);
    int64_t t[PROF_NVALUES];
    prof_store_totals(PK_ALLOC, 10, t);
    CHECK(t[0] == 2500 && t[1] == 400000 && t[2] == 10, "allocations at 1/0.04: %lld %lld %lld",
          (long long)t[0], (long long)t[1], (long long)t[2]);
    prof_store_totals(PK_ALLOC_TYPE, 10, t);
    CHECK(t[1] == 400000, "the table by type too: %lld", (long long)t[1]);
    prof_store_totals(PK_CPU, 10, t);
    CHECK(t[1] == 800000, "other kinds as added: %lld", (long long)t[1]);
    prof_store_free();
}

int main(void)
{
    test_wall_steps();
    test_cpu_steps();
    test_second_factor();
    test_share_follows_the_budget();
    test_up_step_by_step_and_bounds();
    test_not_worth_turning_down();
    test_floor_of_one_core();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
