"""
Wall time of an idle process: 50 threads blocked in Thread.Sleep, each with the whole window of
wall time, from their kept stacks (no suspension), and under an overhead budget that spaces the
wall ticks. Idle apps: they run beside other tests.
"""
import time
import unittest

from harness import ProfiledApp, tree_totals_by_name

class IdleWall(unittest.TestCase):
    """50 threads blocked in waits and sleeps (`threads --threads 50`): a wall tick reads their CPU
    clocks and records each one's kept stack without suspending the runtime when none of them has
    run since it was walked; the runtime's own threads (the counters' poller runs every second)
    still make some ticks walk, those alone. The wall profile is what walks would give: every
    blocked thread, in its wait, for the whole window."""

    def test_idle_threads_are_not_walked_and_keep_their_wall_time(self):
        app = ProfiledApp("threads", ["--threads", "50", "--seconds", "0"],
                          env={"CLRSCOPE_PROFILES": "cpu,wall"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(3)
            before = app.json("/api/v1/status")["self"]
            time.sleep(8)
            after = app.json("/api/v1/status")["self"]
            wall = app.json("/api/v1/flamegraph?type=wall&seconds=6")
        finally:
            app.stop()
        ticks = after["sampler_ticks"] - before["sampler_ticks"]
        cached = after["wall_cached_ticks"] - before["wall_cached_ticks"]
        suspended = after["suspended_s"] - before["suspended_s"]
        self.assertGreater(ticks, 30, (before, after))  # 5 a second
        self.assertGreaterEqual(cached, ticks // 2, (ticks, cached))
        self.assertLess(suspended, 0.05 * (ticks - cached) + 0.02, (ticks, cached, suspended))
        totals = tree_totals_by_name(wall["root"])
        span = wall["t_to"] - wall["t_from"]
        for leaf in ("TestApp.Threads.Blocker.WaitOnEvent", "TestApp.Threads.Blocker.SleepLoop"):
            seconds = totals.get(leaf, 0) / 1e9
            # 25 threads each, every one for the whole window
            self.assertAlmostEqual(seconds / (25 * span), 1.0, delta=0.15, msg=(leaf, seconds,
                                                                              span))


class WallUnderBudget(unittest.TestCase):
    """The overhead governor's second lever: with a budget an idle app cannot meet
    (CLRSCOPE_OVERHEAD_BUDGET=0.1 %, no floor) and no allocation events to turn down, it spaces
    the wall sampler's ticks a step every 10 s window (2x, then 4x). Each wall sample weighs the
    time since the previous one, so the wall profile still gives every blocked thread the whole
    window."""

    def test_wall_ticks_spaced_and_totals_kept(self):
        app = ProfiledApp("threads", ["--threads", "50", "--seconds", "0"],
                          env={"CLRSCOPE_PROFILES": "cpu,wall", "CLRSCOPE_OVERHEAD_BUDGET": "0.1%",
                               "CLRSCOPE_OVERHEAD_FLOOR": "0"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(14)
            budget = app.json("/api/v1/budget")
            metrics = app.request("/metrics")[2].decode()
            wall = app.json("/api/v1/flamegraph?type=wall&seconds=10")
        finally:
            app.stop()
        self.assertGreaterEqual(budget["sources"]["wall"]["slowdown"], 2, budget)
        self.assertLess(budget["sources"]["wall"]["hz"], 5, budget)
        self.assertEqual(budget["last_change"]["source"], "wall", budget)
        self.assertIn("clrscope_budget_wall_slowdown", metrics)
        totals = tree_totals_by_name(wall["root"])
        span = wall["t_to"] - wall["t_from"]
        for leaf in ("TestApp.Threads.Blocker.WaitOnEvent", "TestApp.Threads.Blocker.SleepLoop"):
            seconds = totals.get(leaf, 0) / 1e9
            # 25 threads each for the whole window; a tick up to 0.8 s apart at either edge
            self.assertAlmostEqual(seconds / (25 * span), 1.0, delta=0.2, msg=(leaf, seconds,
                                                                             span))


if __name__ == "__main__":
    unittest.main()
