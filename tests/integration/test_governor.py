"""
The overhead governor pushed: an allocation storm under a 4 % budget. The storm's cost share
depends on the app getting its cores (a starved app's own CPU falls while clrscope's threads'
does not), so this runs alone (weight "alone" in tests/CMakeLists.txt).
"""
import os
import time
import unittest

from harness import CPU_SPLIT_CALLERS, ProfiledApp, cpu_split, tree_totals_by_name

class Governor(unittest.TestCase):
    """The overhead governor pushed: an allocation storm (alloc-mix unthrottled, ~10 GB/s and
    ~100,000 samples a second on one thread, where the allocation events cost the app tens of
    per cent of its CPU) under CLRSCOPE_OVERHEAD_BUDGET=4% with no floor. The governor must turn
    the allocation events down within its first 10 s window, hold the measured cost near the
    budget, switch without a failure, and keep the byte shares by type unbiased (every sample
    weighted by 1/share)."""
    # (4 %, not less: at this storm's several hundred GCs a second what the governor cannot turn
    # down, clrscope's threads, the GC events and their callbacks, the CPU sampler's handler,
    # cost 2.3 % here and up to 3.9 % on CI's machines with the allocation events at their
    # least; at 4 % the governor holds them on about a tenth of each second, a level it sets
    # rather than a floor it hits)
    BUDGET = 0.04
    RUN = 28
    WINDOW = 10

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("alloc-mix", ["--seconds", str(cls.RUN), "--mb-per-s", "100000"],
                          env={"CLRSCOPE_OVERHEAD_BUDGET": f"{cls.BUDGET * 100:g}%",
                               "CLRSCOPE_OVERHEAD_FLOOR": "0"})
        cls.app = app
        app.start()
        try:
            app.wait_ready()
            cls.started = app.json("/api/v1/status")["started"]
            time.sleep(cls.RUN - 6)
            cls.budget = app.json("/api/v1/budget")
            cls.table = app.json(f"/api/v1/allocations?seconds={cls.WINDOW}")
            cls.flame = app.json(f"/api/v1/flamegraph?type=alloc-bytes&seconds={cls.WINDOW}")
            cls.status = app.json("/api/v1/status")
            cls.metrics = app.request("/metrics")[2].decode()
            cls.dump = app.request("/debug/pprof/goroutine?debug=2")[2].decode("utf-8", "replace")
            cls.truth = app.wait_truth(timeout=cls.RUN + 60)
        finally:
            app.stop()

    def test_turns_allocations_down_within_a_window(self):
        b = self.budget
        self.assertTrue(b["enabled"])
        self.assertEqual(b["target"], self.BUDGET)
        self.assertTrue(b["sources"]["alloc"]["switchable"], b)
        down = [p for p in b["history"] if p["alloc_on"] < 1]
        self.assertTrue(down, b["history"])
        self.assertLess(down[0]["t"] - self.started, b["window_s"] + 3, b["history"])
        self.assertLess(b["sources"]["alloc"]["on_fraction"], 0.9, b)
        self.assertGreater(b["sources"]["alloc"]["switches"], 10, b)
        self.assertEqual(b["sources"]["alloc"]["switch_failures"], 0, b)
        # each switch is a few EventPipe calls on clrscope-gov, not a stop of the app
        per = b["sources"]["alloc"]["switch_cpu_s"] / b["sources"]["alloc"]["switches"]
        self.assertLess(per, 0.005, b["sources"]["alloc"])

    def test_switching_thread_stays_clrscope_s(self):
        # a switch runs NativeRuntimeEventSource's managed callback on clrscope-gov, and the
        # runtime makes the thread a managed one: it is still clrscope's, not the app's (no
        # thread dump entry, no CPU or wall samples of the app's)
        self.assertGreater(self.budget["sources"]["alloc"]["switches"], 10, self.budget)
        self.assertIn("threads dump", self.dump)
        self.assertNotIn('"clrscope-', self.dump)

    @unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                     "under AddressSanitizer clrscope's own threads run 2-3 times slower than "
                     "they do (the app's JIT code does not): the cost measured is the "
                     "sanitizer's, and with the allocation events at their floor a slowed "
                     "second of clrscope's threads alone can hold the window over 1.5 x 4 %")
    def test_cost_comes_back_to_the_budget(self):
        hist = self.budget["history"]
        self.assertGreater(max(p["measured"] for p in hist), 1.5 * self.BUDGET,
                           "the storm cost more than the budget before the governor acted")
        last = [p["measured"] for p in hist[-5:]]
        self.assertLess(sum(last) / len(last), 1.5 * self.BUDGET,
                        (hist[-10:], self.budget["by_source"], self.budget["sources"]))
        by = self.budget["by_source"]
        self.assertAlmostEqual(by["threads"] + by["callbacks"] + by["runtime_events"] +
                               by["suspensions"] + by["signal_handler"] + by["perf_events"],
                               self.budget["measured"], delta=1e-9)
        self.assertGreater(by["signal_handler"], 0, by)  # the CPU sampler runs on a busy thread

    def test_shares_stay_unbiased(self):
        truth = self.truth["types"]
        tb = sum(t["bytes"] for t in truth.values())
        est = {r["type"]: r for r in self.table["types"]}
        eb = sum(est[t]["bytes"] for t in truth)
        for name, t in truth.items():
            if t["bytes"] < 0.10 * tb:
                continue
            want, got = t["bytes"] / tb, est[name]["bytes"] / eb
            self.assertLess(abs(got / want - 1), 0.10, f"{name}: {got:.4f} vs {want:.4f}")
            lo, hi = est[name]["bytes_ci95"]
            self.assertLess(lo, est[name]["bytes"])
            self.assertGreater(hi, est[name]["bytes"])
        self.assertLess(self.table["coverage"], 0.9, self.table.get("coverage"))
        self.assertIn("coverage_note", self.table)
        # totals: the weighted estimate stands for the whole time; it reads low by the share of
        # time the events slow the app down while on (docs/overhead-budget.md), not by 1/share
        window = self.table["t_to"] - self.table["t_from"]
        est_rate = self.table["total"]["bytes"] / window
        true_rate = self.truth["total_allocated_bytes_delta"] / self.truth["elapsed_s"]
        self.assertGreater(est_rate / true_rate, 0.6, (est_rate, true_rate))
        self.assertLess(est_rate / true_rate, 1.15, (est_rate, true_rate))
        # the total's interval weighs each sample as the total does (by the share when it came),
        # so the total lies inside it however the share moved within a second
        ci = self.table["total"].get("ci95")
        if self.table["method"] == "AllocationSampled":
            self.assertIsNotNone(ci)
            why = (ci, self.table["total"], self.table.get("dropped"))
            self.assertLess(ci[0], self.table["total"]["bytes"], why)
            self.assertGreater(ci[1], self.table["total"]["bytes"], why)

    def test_flame_graph_says_its_coverage_and_samples(self):
        """The allocation flame graph says how much of its window the events were on, as the
        table does, and on every frame the samples its estimate stands on (its interval)."""
        f = self.flame
        self.assertLess(f["coverage"], 0.9, {k: v for k, v in f.items() if k != "root"})
        self.assertAlmostEqual(f["coverage"], self.table["coverage"], delta=0.1)
        nodes, stack = 0, [f["root"]]
        while stack:
            n = stack.pop()
            nodes += 1
            kids = n["children"]
            self.assertGreater(n["samples"], 0, n["name"])
            self.assertLessEqual(sum(k["samples"] for k in kids), n["samples"], n["name"])
            stack.extend(kids)
        self.assertGreater(nodes, 10)
        # the root's interval (1.96/sqrt(samples)) holds the table's total: the same bytes,
        # estimated from the walked samples the flame graph keeps and from every sample
        root, total = f["root"], self.table["total"]["bytes"]
        rel = 1.96 / root["samples"] ** 0.5
        print(f"flame root {root['value']:.4g} from {root['samples']} samples (±{rel:.1%}), "
              f"table {total:.4g}")
        self.assertLess(abs(root["value"] / total - 1), rel + 0.05, (root["value"], total, rel))

    def test_status_and_metrics_show_the_budget(self):
        b = self.status["budget"]
        for k in ("target", "measured", "allowed", "floor_core", "by_source", "sources", "over",
                  "last_change", "runtime_event_ns"):
            self.assertIn(k, b)
        self.assertEqual(b["floor_core"], 0)
        # the allocation events change first; were they at their least and the cost still over
        # (a slower machine's floor nearer the budget), the wall sampler is spaced out next,
        # which the status says too
        self.assertIn(b["last_change"]["source"], ("alloc", "wall", "cpu"), b)
        if b["last_change"]["source"] == "cpu":  # the last resort, with the wall at its least
            self.assertEqual(b["sources"]["wall"]["slowdown"], 5, b)
        if b["last_change"]["source"] in ("wall", "cpu"):
            self.assertTrue(any(p["alloc_on"] <= 0.0201 for p in self.budget["history"]),
                            self.budget["history"][-10:])
        for m in (f"clrscope_budget_target_ratio {self.BUDGET:g}", "clrscope_budget_measured_ratio",
                  "clrscope_budget_alloc_on_ratio", "clrscope_budget_alloc_switches_total"):
            self.assertIn(m, self.metrics)


class GovernorCpu(unittest.TestCase):
    """The governor's last resort: with the CPU profile alone (no allocation events or wall
    sampler to turn down) and a budget the CPU sampler alone exceeds, each thread's samples go
    twice, then four times as far apart, a step a 10 s window; each sample weighs the CPU time
    between two, so cpu-split's two callers keep their CPU totals and their split, measured
    against the app's own thread clocks, across the changes."""
    RUN = 34

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("cpu-split", ["--seconds", str(cls.RUN)],
                          env={"CLRSCOPE_PROFILES": "cpu", "CLRSCOPE_OVERHEAD_BUDGET": "0.01%",
                               "CLRSCOPE_OVERHEAD_FLOOR": "0"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(cls.RUN - 4)
            cls.budget = app.json("/api/v1/budget")
            cls.status = app.json("/api/v1/status")
            cls.metrics = app.request("/metrics")[2].decode()
            # the samples of the app's last seconds, then the whole run
            time.sleep(3)
            cls.cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=60")
            cls.truth = app.wait_truth(timeout=60)
        finally:
            app.stop()

    def test_cpu_sampler_slowed_step_by_step(self):
        b = self.budget
        cpu = b["sources"]["cpu"]
        self.assertEqual(cpu["slowdown"], 4, b)
        self.assertEqual(cpu["hz"], 25, b)
        self.assertEqual(b["last_change"]["source"], "cpu", b)
        self.assertEqual(b["last_change"]["to"], 4, b)
        self.assertIn("clrscope_budget_cpu_slowdown 4", self.metrics)
        # over all the same: nothing else is left to turn down
        self.assertIn("at their least", b["over"] or "", b)

    def test_perf_events_held_to_half_the_budget(self):
        # their cost is per context switch, not per sample: the CPU sampler's steps cannot
        # lower it, so they may take half of the budget at most (CLRSCOPE_CPU_TIMER_BUDGET 0.5 %)
        sig = self.status["self"]["signal_sampler"]
        if "perf_cost" not in sig:
            self.skipTest(f"no perf events here: {sig.get('timer_note')}")
        self.assertAlmostEqual(sig["perf_cost"]["budget"], 0.0001 / 2, delta=1e-9, msg=sig)

    def test_totals_and_split_hold(self):
        measured, truth = cpu_split(self.cpu, self.truth)
        self.assertAlmostEqual(measured, truth, delta=0.05,
                               msg=f"heavy share {measured:.3f}, truth {truth:.3f}")
        totals = tree_totals_by_name(self.cpu["root"])
        got = sum(totals.get(c, 0) for c in CPU_SPLIT_CALLERS) / 1e6
        want = self.truth["heavy_cpu_ms"] + self.truth["light_cpu_ms"]
        # samples at 100, 50 and 25 Hz each weigh their own interval: the callers' CPU is the
        # app's own (its last second may be lost at its exit)
        self.assertGreater(got, 0.85 * want, (got, want))
        self.assertLess(got, 1.10 * want, (got, want))


if __name__ == "__main__":
    unittest.main()
