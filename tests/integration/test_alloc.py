"""
Allocations: the `alloc-mix` app allocates a fixed mix of five types, each from its own
method, at a throttled ~100 MB/s, and measures every type's exact bytes and counts itself (one of
them a 52,584-byte array, of which one sample stands for ~2.49 on .NET 10). The
profiler's upscaled table must reproduce the byte and count shares of every type above 10 % of
the bytes within 10 % (relative), its total allocation rate must be within 10 % of the app's, and
the allocation flame graph filtered on System.Byte[] must go through AllocMix.AllocBytes.

On .NET 10 the method is AllocationSampled (~1 sample per 100 KiB: ~15,000 samples in the 20 s
window); on .NET 8/9 it is GCAllocationTick. Pick the runtime with CLRSCOPE_TEST_RUNTIME.
"""
import json
import math
import os
import shutil
import tempfile
import time
import unittest
import urllib.parse

from harness import BUILD, ProfiledApp, find_paths, go_pprof
from pprofdec import read_pprof

WINDOW = 20    # seconds of allocations the assertions look at
RUN = WINDOW + 8
BYTES_FRAME = "TestApp.Alloc.AllocMix.AllocBytes"
STRING_FRAME = "TestApp.Alloc.AllocMix.AllocStrings"


class AllocMix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # without the overhead budget: on a loaded machine the governor would run the
        # allocation events for a share of each second, and the total then reads low by what the
        # events slow the app down while on (docs/overhead-budget.md); this test is about the
        # estimator, the governed figures are test_governor's
        cls.app = ProfiledApp("alloc-mix", ["--seconds", str(RUN), "--large-every", "3"],
                              env={"CLRSCOPE_OVERHEAD_BUDGET": "0"})
        app = cls.app
        app.start()
        try:
            app.wait_ready()
            time.sleep(WINDOW + 2)  # the window must lie inside the worker's steady run
            cls.status = app.json("/api/v1/status")
            cls.table = app.json(f"/api/v1/allocations?seconds={WINDOW}")
            cls.counters = app.json("/api/v1/counters")
            q = urllib.parse.quote("System.Byte[]")
            # the filtered graph and the whole graph over the same seconds (asked again when a
            # second boundary fell between the two requests)
            for _ in range(5):
                cls.bytes_flame = app.json(
                    f"/api/v1/flamegraph?type=alloc-bytes&seconds={WINDOW}&filter={q}")
                cls.all_bytes_flame = app.json(
                    f"/api/v1/flamegraph?type=alloc-bytes&seconds={WINDOW}")
                if int(cls.bytes_flame["t_from"]) == int(cls.all_bytes_flame["t_from"]):
                    break
            cls.count_flame = app.json(f"/api/v1/flamegraph?type=alloc-count&seconds={WINDOW}")
            cls.pprof = app.pprof(f"/debug/pprof/allocs?seconds={WINDOW}",
                                  os.path.join(app.tmp, "allocs.pb.gz"))
            cls.bad = [app.request("/api/v1/allocations?" + b)[0]
                       for b in ("seconds=abc", "seconds=-1", "limit=0", "seconds=0x10",
                                 "seconds=%2010")]
            cls.truth = app.wait_truth(timeout=RUN + 60)
        finally:
            app.stop()

    def truth_types(self):
        return self.truth["types"]

    def test_method_matches_runtime(self):
        major = self.status["runtime"]["major"]
        want = "AllocationSampled" if major >= 10 else "AllocationTick"
        self.assertEqual(self.table["method"], want)
        self.assertTrue(self.table["bias_note"])
        self.assertEqual(self.table["dropped"], 0, "no samples lost at 100 MB/s")

    def test_types_sorted_and_named(self):
        rows = self.table["types"]
        self.assertEqual([r["bytes"] for r in rows], sorted((r["bytes"] for r in rows),
                                                            reverse=True))
        names = {r["type"] for r in rows}
        for t in self.truth_types():
            self.assertIn(t, names, f"{t} missing from {sorted(names)}")
        for r in rows:
            for k in ("type", "count", "bytes", "samples"):
                self.assertIn(k, r)

    def test_byte_and_count_shares_match_truth(self):
        truth = self.truth_types()
        tb = sum(t["bytes"] for t in truth.values())
        tc = sum(t["count"] for t in truth.values())
        est = {r["type"]: r for r in self.table["types"]}
        eb = sum(est[t]["bytes"] for t in truth)
        ec = sum(est[t]["count"] for t in truth)
        for name, t in truth.items():
            if t["bytes"] < 0.10 * tb:
                continue
            want_b, got_b = t["bytes"] / tb, est[name]["bytes"] / eb
            want_c, got_c = t["count"] / tc, est[name]["count"] / ec
            self.assertLess(abs(got_b / want_b - 1), 0.10,
                            f"{name}: byte share {got_b:.4f}, truth {want_b:.4f}")
            self.assertLess(abs(got_c / want_c - 1), 0.10,
                            f"{name}: count share {got_c:.4f}, truth {want_c:.4f}")
        # The truth's ranking by bytes holds for every two types whose bytes differ by more than
        # the 10 % the shares are held to (each share's sampling error is 1-2 %: two types 3 %
        # apart swap places in about one run of ten). With --large-every 3 that is every pair:
        # Int64[] 17.5 KB > String 12.8 > Byte[] 10.2 > BigWidget 7.2 > SmallWidget 6.4 a round.
        names = list(truth)
        pairs = 0
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                hi, lo = (a, b) if truth[a]["bytes"] > truth[b]["bytes"] else (b, a)
                if truth[hi]["bytes"] < 1.10 * truth[lo]["bytes"]:
                    continue
                pairs += 1
                self.assertGreater(est[hi]["bytes"], est[lo]["bytes"],
                                   f"{hi} above {lo} by bytes: truth {truth[hi]['bytes']} > "
                                   f"{truth[lo]['bytes']}, estimate {est[hi]['bytes']} vs "
                                   f"{est[lo]['bytes']}")
        self.assertEqual(pairs, len(names) * (len(names) - 1) // 2, "every pair is apart")

    def test_total_matches_allocation_rate(self):
        # The window is [t_from, t_to] of wall time inside the throttled run, so the estimated
        # rate must match the rate the app measured for its whole run (GetTotalAllocatedBytes).
        window = self.table["t_to"] - self.table["t_from"]
        self.assertGreater(window, WINDOW - 1.5)
        est_rate = self.table["total"]["bytes"] / window
        t = self.truth
        true_rate = t["total_allocated_bytes_delta"] / t["elapsed_s"]
        self.assertLess(abs(est_rate / true_rate - 1), 0.10,
                        f"estimated {est_rate / 1e6:.1f} MB/s, app {true_rate / 1e6:.1f} MB/s")
        ci = self.table["total"].get("ci95")
        if self.table["method"] == "AllocationSampled":
            self.assertIsNotNone(ci)
            self.assertLess(ci[0], self.table["total"]["bytes"])
            self.assertGreater(ci[1], self.table["total"]["bytes"])
            self.assertLessEqual(ci[0], true_rate * window * 1.05)
            self.assertGreaterEqual(ci[1], true_rate * window * 0.95)

    def test_self_check_against_runtime_exact_total(self):
        # exact_bytes is the runtime's GC.GetTotalAllocatedBytes over the whole seconds its
        # counter covers inside the window; the estimate over the same seconds must be within
        # 10 % of it (the bar), and the exact rate must be the app's own rate.
        sc = self.table.get("self_check")
        self.assertIsNotNone(sc, self.table.get("exact_note"))
        self.assertEqual(self.table["exact_bytes"], sc["exact_bytes"])
        span = sc["t_to"] - sc["t_from"]
        self.assertGreaterEqual(sc["t_from"], self.table["t_from"])
        self.assertLessEqual(sc["t_to"], self.table["t_to"] + 1)
        self.assertGreaterEqual(span, WINDOW - 3, "the counter covers most of the window")
        self.assertLess(abs(sc["estimated_bytes"] / sc["exact_bytes"] - 1), 0.10,
                        f"estimate {sc['estimated_bytes']}, exact {sc['exact_bytes']}")
        self.assertAlmostEqual(sc["ratio"], sc["estimated_bytes"] / sc["exact_bytes"], places=6)
        t = self.truth
        true_rate = t["total_allocated_bytes_delta"] / t["elapsed_s"]
        exact_rate = sc["exact_bytes"] / span
        self.assertLess(abs(exact_rate / true_rate - 1), 0.05,
                        f"runtime counter {exact_rate / 1e6:.1f} MB/s, app {true_rate / 1e6:.1f}")

    def test_profiler_memory_is_accounted(self):
        # clrscope's own memory, by module: non-zero where this run has data, summed, and a
        # small part of the process's RSS
        me = self.status["self"]
        mem = me["mem"]
        self.assertEqual(me["mem_bytes"], sum(mem.values()))
        for part in ("store", "event_ring", "live_objects", "code_map"):
            self.assertGreater(mem[part], 0, part)
        self.assertLess(me["mem_bytes"], me["rss_bytes"] / 2, me)

    def test_runtime_counters_endpoint(self):
        c = self.counters
        self.assertTrue(c["enabled"])
        self.assertEqual(c["malformed"], 0)
        by = {x["name"]: x for x in c["counters"]}
        for name in ("alloc-rate", "gen-0-gc-count", "working-set", "cpu-usage"):
            self.assertIn(name, by)
        self.assertNotIn("note", c)  # 22 s after start, counters flowing: nothing to explain
        a = by["alloc-rate"]
        self.assertEqual((a["kind"], a["units"]), ("rate", "B"))
        self.assertLess(a["age_s"], 3)
        t = self.truth
        true_rate = t["total_allocated_bytes_delta"] / t["elapsed_s"]
        per_s = a["value"] / a["interval_s"]
        self.assertLess(abs(per_s / true_rate - 1), 0.25,
                        f"alloc-rate {per_s / 1e6:.1f} MB/s, app {true_rate / 1e6:.1f} MB/s")
        self.assertEqual(by["working-set"]["kind"], "gauge")

    def test_byte_array_stacks_go_through_alloc_bytes(self):
        fg = self.bytes_flame
        self.assertEqual(fg["filter"], "System.Byte[]")
        self.assertGreater(fg["total"], 0)
        self.assertGreater(fg["t_to"] - fg["t_from"], WINDOW - 1.5)
        under = sum(v for p, v in find_paths(fg["root"], BYTES_FRAME))
        self.assertGreater(under / fg["total"], 0.95,
                           f"{under} of {fg['total']} Byte[] bytes under {BYTES_FRAME}")
        # The filter keeps every Byte[] stack and nothing else: AllocBytes allocates only
        # Byte[], so its subtree in the unfiltered graph over the same seconds is the same sum
        # (up to the samples added to the current second between the two requests).
        whole = self.all_bytes_flame
        self.assertEqual(int(fg["t_from"]), int(whole["t_from"]), "no two requests in one second")
        whole_under = sum(v for p, v in find_paths(whole["root"], BYTES_FRAME))
        self.assertLess(abs(under / whole_under - 1), 0.02,
                        f"filtered {under}, unfiltered {whole_under} under {BYTES_FRAME}")
        # The stacks hold the walked samples upscaled by the stack budget (Horvitz-Thompson),
        # the table every sample: the filtered total estimates the type's row. With a fraction
        # p of the samples walked, its relative standard error is about sqrt((1-p)/(p*n)) for
        # the row's n samples; allow five of them (plus 2 % for the windows' edges).
        row = next(r for r in self.table["types"] if r["type"] == "System.Byte[]")
        sb = self.table["stack_budget"]
        p = sb["walked"] / max(1, sb["walked"] + sb["thinned"])
        tol = 0.02 + 5 * math.sqrt((1 - p) / (p * row["samples"]))
        self.assertLess(abs(fg["total"] / row["bytes"] - 1), tol,
                        f"filtered total {fg['total']}, row {row['bytes']}, walked share {p:.3f}")

    def test_count_flame_graph_has_every_method(self):
        names = set()
        stack = [self.count_flame["root"]]
        while stack:
            n = stack.pop()
            names.add(n["name"])
            stack.extend(n["children"])
        for t in self.truth_types().values():
            self.assertIn(t["method"], names)
        strings = sum(v for p, v in find_paths(self.count_flame["root"], STRING_FRAME))
        self.assertGreater(strings, 0)

    def test_pprof_allocs(self):
        p = read_pprof(self.pprof)
        self.assertEqual([t for t, _ in p.sample_types], ["alloc-samples", "alloc-size"])
        classes = {lab.get("allocation class") for _, _, lab in p.stacks()}
        self.assertIn("System.Byte[]", classes)
        if shutil.which("go"):
            top = go_pprof(["-top", "-sample_index=alloc-size", "-nodecount=20"], self.pprof)
            self.assertIn(BYTES_FRAME, top)

    def test_bad_input_is_400(self):
        self.assertEqual(self.bad, [400] * 5)

    def test_stacks_walked_by_frame_pointers(self):
        """By default allocation stacks come from the frame-pointer walk; the runtime's own
        walker only runs while a stub's layout is being learned (and on the first samples)."""
        sw = self.table["stack_walk"]
        self.assertEqual(sw["method"], "fp")
        self.assertGreater(sw["places_learned"], 0, sw)
        self.assertGreater(sw["frame_pointer"], 5 * sw["runtime"], sw)


@unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                 "a note and a log line: nothing for the sanitizers to find that the other "
                 "modules' runs do not show, for 20 s of the CI's budget")
class NoEventSources(unittest.TestCase):
    """An app built with EventSourceSupport=false (trimmed apps often are) has no managed
    EventSources, so the runtime sends no System.Runtime counters. Here the same switch is set in
    a copy of the test app's runtimeconfig.json. Allocations (the runtime's native events) are
    profiled as ever; the counters say why they are empty, once, instead of "not yet" forever.
    Without the overhead budget, as AllocMix: the shares are held to 15 %, which the full stream
    of samples meets; a governed stream on a busy machine can be a few hundred samples in the
    window, whose shares are test_governor's to check against their intervals."""

    def test_counters_explain_their_silence(self):
        base = os.path.join(BUILD, "apps", "net10")
        with open(os.path.join(base, "TestApp.runtimeconfig.json")) as f:
            rc = json.load(f)
        rc["runtimeOptions"].setdefault("configProperties", {})[
            "System.Diagnostics.Tracing.EventSource.IsSupported"] = False
        tmp = tempfile.mkdtemp(prefix="clrscope-noes-")
        path = os.path.join(tmp, "noes.runtimeconfig.json")
        with open(path, "w") as f:
            json.dump(rc, f)
        app = ProfiledApp("alloc-mix", ["--seconds", "19"],
                          env={"CLRSCOPE_OVERHEAD_BUDGET": "0"}, command=[
            "dotnet", "exec", "--runtimeconfig", path, os.path.join(base, "TestApp.dll")])
        app.start()
        try:
            app.wait_ready()
            early = app.json("/api/v1/counters")
            time.sleep(12.5)
            counters = app.json("/api/v1/counters")
            status = app.json("/api/v1/status")
            table = app.json("/api/v1/allocations?seconds=10")
            truth = app.wait_truth(timeout=60)
        finally:
            app.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertNotIn("note", early)  # too early to tell
        self.assertEqual((counters["events"], counters["counters"]), (0, []))
        self.assertIn("EventSourceSupport=false", counters["note"])
        self.assertEqual(status["runtime_counters"]["note"], counters["note"])
        self.assertEqual(table["exact_note"], counters["note"])
        said = [l for l in app.stderr_lines if "runtime counters: none in the" in l]
        self.assertEqual(len(said), 1, app.stderr_lines)
        # the allocation profile itself does not need them: the app's own byte shares
        rows = {r["type"]: r for r in table["types"]}
        bytes_true = sum(t["bytes"] for t in truth["types"].values())
        for name, t in truth["types"].items():
            if t["bytes"] / bytes_true > 0.1:
                self.assertIn(name, rows, sorted(rows))
                share = rows[name]["bytes"] / sum(r["bytes"] for r in table["types"])
                self.assertLess(abs(share / (t["bytes"] / bytes_true) - 1), 0.15, (name, share))


class StackWalkCheck(unittest.TestCase):
    """CLRSCOPE_ALLOC_WALK=check walks every sampled allocation both ways, by frame pointers and
    with the runtime's DoStackSnapshot, and counts how often the two stacks are the same frame
    for frame. Once the first third of the run has passed the frame-pointer walk must agree on
    nearly all of them, and on nine in ten over the whole run (what differs is the first samples
    of a stub whose hidden frame record is not yet learned, and OSR transitions: under ASan beside
    two busy cores, 133 of the first 794 and none of the 2,424 after them).
    Every sample is walked (no stack budget), as the bar counts those first samples against
    all the others, and no overhead budget turns the events down: walking each sample twice is a
    diagnostic that costs what it costs (under ASan the governor held the events to a share that
    left 267 walks in the last 8 s)."""
    SECONDS = 12
    RUNTIME = None  # the default test app

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("alloc-mix", ["--seconds", str(cls.SECONDS + 6)], runtime=cls.RUNTIME,
                          env={"CLRSCOPE_ALLOC_WALK": "check",
                               "CLRSCOPE_ALLOC_STACKS_PER_S": "1000000",
                               "CLRSCOPE_OVERHEAD_BUDGET": "0"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(cls.SECONDS / 3)
            cls.warm = app.json(f"/api/v1/allocations?seconds={cls.SECONDS}")["stack_walk"]
            time.sleep(cls.SECONDS * 2 / 3)
            cls.table = app.json(f"/api/v1/allocations?seconds={cls.SECONDS}")
            cls.bytes_flame = app.json("/api/v1/flamegraph?type=alloc-bytes&seconds="
                                       f"{cls.SECONDS}&filter=System.Byte%5B%5D")
        finally:
            app.stop()

    def test_both_walks_agree(self):
        sw = self.table["stack_walk"]
        self.assertEqual(sw["method"], "check")
        c, w = sw["check"], self.warm["check"]
        n = c["same"] + c["different"]
        self.assertGreater(n, 1000, sw)
        # once the places are learned (after the first third: on a busy machine the first
        # samples of each stub outnumber them for longer), the two walks agree on nearly all
        same, diff = c["same"] - w["same"], c["different"] - w["different"]
        self.assertGreater(same + diff, 500, (sw, self.warm))
        self.assertGreater(same / (same + diff), 0.97, (sw, self.warm))
        self.assertGreater(c["same"] / n, 0.9, sw)
        self.assertGreater(sw["places_learned"], 0, sw)
        # and the stacks name the method that allocated
        fg = self.bytes_flame
        under = sum(v for p, v in find_paths(fg["root"], BYTES_FRAME))
        self.assertGreater(under / max(1, fg["total"]), 0.95, (under, fg["total"]))


@unittest.skipUnless(os.path.exists(os.path.join(BUILD, "apps", "net10-single", "TestApp")),
                     "the single-file test app was not built (tests/apps/build.sh)")
class SingleFileStackWalkCheck(StackWalkCheck):
    """The same on a self-contained single-file app: the runtime is linked into the app's
    executable, whose other executable mappings are the bundle's ReadyToRun assemblies. Looked
    for by the name libcoreclr.so, the runtime would not be found, its own frames would lead
    every allocation stack and the walks would never agree (0 of 2,344)."""
    RUNTIME = "net10-single"


class StackBudget(unittest.TestCase):
    """The allocation stack-walk budget: with CLRSCOPE_ALLOC_STACKS_PER_S far below the sample
    rate, most samples are not walked, and the walked ones, upscaled by 1/p, still give the true
    byte shares and total in the stacks (flame graph per type; the same 10 % bars, fewer samples
    behind them), while the table by type counts every sample."""
    # ~12,000 walked samples in the window, a fifth of the ~4,000 samples a second at 400 MB/s:
    # the smallest type (17 %) has ~2,000, so its share's standard error is ~2 % (10 % = 5 of them)
    BUDGET = 800
    SECONDS = 15

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("alloc-mix", ["--seconds", str(cls.SECONDS + 6), "--mb-per-s", "400"],
                          env={"CLRSCOPE_ALLOC_STACKS_PER_S": str(cls.BUDGET),
                               "CLRSCOPE_PROFILES": "alloc,gc",
                               # every allocation event, for the walk budget's arithmetic (the
                               # overhead governor, which may turn them down, has its own test)
                               "CLRSCOPE_OVERHEAD_BUDGET": "0"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(cls.SECONDS + 2)
            cls.table = app.json(f"/api/v1/allocations?seconds={cls.SECONDS}")
            # the stacks' view of each type: the flame graph filtered on it (walked samples only)
            cls.flames = {}
            for row in cls.table["types"]:
                q = urllib.parse.quote(row["type"])
                cls.flames[row["type"]] = app.json(
                    f"/api/v1/flamegraph?type=alloc-bytes&seconds={cls.SECONDS}&filter={q}")
            cls.flame = app.json(f"/api/v1/flamegraph?type=alloc-bytes&seconds={cls.SECONDS}")
            status = app.json("/api/v1/status")
            cls.uptime = status["uptime_s"]
            cls.self_status = status["self"]
            cls.truth = app.wait_truth(timeout=cls.SECONDS + 60)
        finally:
            app.stop()

    def test_budget_thins_walks(self):
        b = self.table["stack_budget"]
        self.assertEqual(b["per_s"], self.BUDGET)
        self.assertGreater(b["thinned"], b["walked"], "most samples are left out")
        # a surge may walk budget * (1 + ln(surge / budget)) in its first second; after that
        # about the budget per second
        self.assertLess(b["walked"], self.BUDGET * (self.uptime + 8), b)
        self.assertEqual(b["walked"] + b["thinned"], self.table["samples_since_start"])

    def test_stacks_stay_unbiased(self):
        truth = self.truth["types"]
        tb = sum(t["bytes"] for t in truth.values())
        walked = {name: f["total"] for name, f in self.flames.items()}
        eb = sum(walked[t] for t in truth)
        for name, t in truth.items():
            want, got = t["bytes"] / tb, walked[name] / eb
            self.assertLess(abs(got / want - 1), 0.10, f"{name}: {got:.4f} vs {want:.4f}")
        # the upscaled stacks add up to the table's total, which counts every sample
        total = self.table["total"]["bytes"]
        self.assertLess(abs(self.flame["total"] / total - 1), 0.10,
                        f"stacks {self.flame['total']}, table {total}")

    def test_table_counts_every_sample(self):
        truth = self.truth["types"]
        tb = sum(t["bytes"] for t in truth.values())
        est = {r["type"]: r for r in self.table["types"]}
        eb = sum(est[t]["bytes"] for t in truth)
        for name, t in truth.items():
            want, got = t["bytes"] / tb, est[name]["bytes"] / eb
            self.assertLess(abs(got / want - 1), 0.10, f"{name}: {got:.4f} vs {want:.4f}")
        sc = self.table.get("self_check")
        self.assertIsNotNone(sc, self.table.get("exact_note"))
        self.assertLess(abs(sc["ratio"] - 1), 0.10, sc)
        # every sample of the window is in the table, walked or not: far more than the budget
        samples = self.table["total"]["samples"]
        self.assertGreater(samples, 2 * self.BUDGET * self.SECONDS, self.table["total"])

    def test_frame_pointer_walk_without_cpu_profile(self):
        """The cpu profile is off here, so no signal sampler keeps the memory-map snapshot the
        frame-pointer walk needs: the sampler thread keeps it for the allocation walks alone
        (they took the runtime's walk, twice the callback's cost, before)."""
        sw = self.table["stack_walk"]
        self.assertEqual(sw["method"], "fp")
        self.assertGreater(sw["frame_pointer"], 5 * sw["runtime"], sw)
        self.assertEqual(self.self_status.get("cpu_sampler"), "off")


if __name__ == "__main__":
    unittest.main()


