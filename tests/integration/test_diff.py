"""
Comparing two windows: the differential flame graph (/api/v1/flamegraph/diff), marks
(/api/v1/marks) and pprof downloads of a past window by its ends (`from`, `to`), which
`go tool pprof -diff_base` compares. The app (TestApp `phases`) changes its hot path from
PhaseOne to PhaseTwo at a moment it prints; Steady keeps a quarter of its calls throughout, and the
thread's CPU clock around each call is the truth.
"""
import json
import shutil
import time
import unittest

from harness import ProfiledApp, go_pprof
from pprofdec import read_pprof

SWITCH_S = 6


def walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.get("children", []))


class Diff(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("phases", ["--seconds", "30", "--switch-s", str(SWITCH_S)],
                          env={"CLRSCOPE_PROFILES": "cpu", "CLRSCOPE_SAMPLING_HZ": "200"})
        cls.app = app
        app.start()
        try:
            app.wait_ready()
            deadline = time.monotonic() + 30
            while not any(l.startswith("switched at") for l in app.stdout_lines):
                if time.monotonic() > deadline:
                    raise AssertionError("the app never switched")
                time.sleep(0.2)
            line = next(l for l in app.stdout_lines if l.startswith("switched at"))
            cls.switched = float(line.split()[-1])
            st, _, body = app.request("/api/v1/marks", method="POST",
                                      data=json.dumps({"label": "phase two", "t": cls.switched})
                                      .encode(), headers={"Content-Type": "application/json"})
            cls.mark_status, cls.mark = st, json.loads(body)
            time.sleep(SWITCH_S + 0.5)  # window b: SWITCH_S seconds of phase two, settled
            t = cls.switched
            # whole seconds clear of the switch's own second, so each window holds one phase
            cls.a = (int(t) - SWITCH_S + 1, int(t))
            cls.b = (int(t) + 1, int(t) + SWITCH_S)
            q = f"a={cls.a[0]},{cls.a[1]}&b={cls.b[0]},{cls.b[1]}"
            cls.diff = app.json(f"/api/v1/flamegraph/diff?type=cpu&{q}&limit=50")
            cls.same = app.json(f"/api/v1/flamegraph/diff?type=cpu&a={cls.a[0]},{cls.a[1]}"
                                f"&b={cls.a[0]},{cls.a[1]}&limit=50")
            cls.marks = app.json("/api/v1/marks")
            cls.pa = app.pprof(f"/debug/pprof/profile?from={cls.a[0]}&to={cls.a[1]}",
                               out_path=app.tmp + "/a.pb.gz")
            cls.pb = app.pprof(f"/debug/pprof/profile?from={cls.b[0]}&to={cls.b[1]}",
                               out_path=app.tmp + "/b.pb.gz")
            cls.errors = {}
            for name, path in {
                "live": "/api/v1/flamegraph/diff?type=live-bytes",
                "garbled": "/api/v1/flamegraph/diff?a=5",
                "small_number": "/api/v1/flamegraph/diff?a=1,2",
                "backwards": "/api/v1/flamegraph/diff?a=-10,-20",
                "too_long": "/api/v1/flamegraph/diff?b=-100000,now",
                "a_ends_now": "/api/v1/flamegraph/diff?a=-60,now",
                "pprof_backwards": "/debug/pprof/profile?from=-5&to=-10",
                "mark_not_json": ("/api/v1/marks", b"deploy"),
                "mark_bad_label": ("/api/v1/marks", b'{"label": 5}'),
                "mark_future": ("/api/v1/marks", b'{"t": 99999999999}'),
                "mark_too_big": ("/api/v1/marks", b'{"label": "' + b"x" * 5000 + b'"}'),
            }.items():
                if isinstance(path, tuple):
                    cls.errors[name] = app.request(path[0], method="POST", data=path[1])
                else:
                    cls.errors[name] = app.request(path)
            cls.alive = app.json("/api/v1/status")
            app.stop()
            cls.truth = app.wait_truth(timeout=60)
        finally:
            app.stop()
        cls.frames = cls.truth["frames"]

    def fn(self, reply, name):
        return next((f for f in reply["functions"] if f["name"] == name), None)

    def test_the_change_is_the_top_gain_and_loss(self):
        fns = self.diff["functions"]
        self.assertEqual(fns[0]["name"] in (self.frames["one"], self.frames["two"]), True, fns[:3])
        top2 = {fns[0]["name"], fns[1]["name"]}
        self.assertEqual(top2, {self.frames["one"], self.frames["two"]}, fns[:4])
        one, two = self.fn(self.diff, self.frames["one"]), self.fn(self.diff, self.frames["two"])
        self.assertLess(one["delta_share"], -0.5, one)
        self.assertGreater(two["delta_share"], 0.5, two)
        self.assertEqual(one["self"], 0, "phase one is over in window b")
        self.assertEqual(two["base_self"], 0, "phase two has not begun in window a")

    def test_shares_match_the_apps_clock(self):
        """Each window's split between the phase's hot method and Steady is the app's (the
        thread's CPU clock around each call), within 0.06."""
        tr = self.truth
        steady = self.fn(self.diff, self.frames["steady"])
        one, two = self.fn(self.diff, self.frames["one"]), self.fn(self.diff, self.frames["two"])
        got_a = steady["base_self"] / (steady["base_self"] + one["base_self"])
        got_b = steady["self"] / (steady["self"] + two["self"])
        want_a = tr["phase1_steady_cpu_ms"] / (tr["phase1_steady_cpu_ms"] + tr["phase1_hot_cpu_ms"])
        want_b = tr["phase2_steady_cpu_ms"] / (tr["phase2_steady_cpu_ms"] + tr["phase2_hot_cpu_ms"])
        self.assertLess(abs(got_a - want_a), 0.06, (got_a, want_a))
        self.assertLess(abs(got_b - want_b), 0.06, (got_b, want_b))
        # Steady's share hardly changes: it is not among the two big changes
        self.assertLess(abs(steady["delta_share"]), 0.1, steady)

    def test_tree_holds_both_windows(self):
        d = self.diff
        self.assertEqual((d["a"]["from"], d["a"]["to"]), self.a)
        self.assertEqual((d["b"]["from"], d["b"]["to"]), self.b)
        root = d["root"]
        self.assertEqual(root["value"], d["b"]["total"])
        self.assertEqual(root["base"], d["a"]["total"])
        # a window of one core's CPU: each total is the thread's ~1 core over its seconds
        for w in ("a", "b"):
            secs = d[w]["to"] - d[w]["from"]
            self.assertGreater(d[w]["total"], 0.7e9 * secs, d[w])
            self.assertLess(d[w]["total"], 1.3e9 * secs, d[w])
        nodes = list(walk(root))
        one = [n for n in nodes if n["name"] == self.frames["one"]]
        two = [n for n in nodes if n["name"] == self.frames["two"]]
        self.assertTrue(one and two)
        self.assertGreater(sum(n["base"] for n in one), 0.5 * d["a"]["total"])
        self.assertEqual(sum(n["value"] for n in one), 0)
        self.assertGreater(sum(n["value"] for n in two), 0.5 * d["b"]["total"])
        for n in nodes:  # inclusive values hold their children's, in both windows
            kids = n.get("children", [])
            self.assertGreaterEqual(n["value"], sum(k["value"] for k in kids), n["name"])
            self.assertGreaterEqual(n["base"], sum(k["base"] for k in kids), n["name"])

    def test_a_window_against_itself_is_empty(self):
        s = self.same
        self.assertEqual(s["a"]["total"], s["b"]["total"])
        self.assertGreater(s["a"]["total"], 0)
        for n in walk(s["root"]):
            self.assertEqual(n["value"], n["base"], n["name"])
            self.assertEqual(n["self"], n["base_self"], n["name"])
        for f in s["functions"]:
            self.assertEqual(f["delta_share"], 0, f)

    def test_marks(self):
        self.assertEqual(self.mark_status, 201, self.mark)
        self.assertEqual(self.mark["label"], "phase two")
        self.assertAlmostEqual(self.mark["t"], self.switched, places=3)
        self.assertEqual([m["label"] for m in self.marks["marks"]], ["phase two"])
        self.assertEqual(self.marks["dropped"], 0)

    def test_pprof_of_a_past_window(self):
        a, b = read_pprof(self.pa), read_pprof(self.pb)
        self.assertEqual(a.duration_nanos, (self.a[1] - self.a[0]) * 1_000_000_000)
        self.assertEqual(a.time_nanos, self.a[0] * 1_000_000_000)
        self.assertEqual(b.time_nanos, self.b[0] * 1_000_000_000)

        def cpu_of(p, name):
            i = [n for n, _ in p.sample_types].index("cpu")
            return sum(v[i] for fr, v, _ in p.samples if fr and fr[0] == name)
        self.assertGreater(cpu_of(a, self.frames["one"]), 0)
        self.assertEqual(cpu_of(a, self.frames["two"]), 0)
        self.assertGreater(cpu_of(b, self.frames["two"]), 0)
        self.assertEqual(cpu_of(b, self.frames["one"]), 0)

    @unittest.skipUnless(shutil.which("go"), "go tool pprof not installed")
    def test_go_tool_pprof_diff_base(self):
        out = go_pprof(["-top", "-nodecount=5", "-diff_base", self.pa], self.pb)
        lines = [l for l in out.splitlines() if "TestApp." in l]
        self.assertTrue(lines, out)
        # the largest change by flat value comes first: phase two up, phase one down
        names = [l.split()[-1] for l in lines[:2]]
        self.assertEqual(set(names), {self.frames["one"], self.frames["two"]}, out)

    def test_bad_input_is_a_400_and_harms_nothing(self):
        for name, (st, _, body) in self.errors.items():
            want = 413 if name == "mark_too_big" else 400
            self.assertEqual(st, want, (name, body))
            self.assertIn("error", json.loads(body), name)
        self.assertIn("cpu", self.alive["profiles"])


if __name__ == "__main__":
    unittest.main()
