"""
Comparing two windows: the differential flame graph (/api/v1/flamegraph/diff), marks
(/api/v1/marks) and pprof downloads of a past window by its ends (`from`, `to`), which
`go tool pprof -diff_base` compares. The app (TestApp `phases`) changes its hot path from
PhaseOne to PhaseTwo at a moment it prints; Steady keeps a quarter of its calls throughout, and the
thread's CPU clock around each call is the truth.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import histdec
from harness import LAUNCHER, ProfiledApp, go_pprof
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
        # each window's time in the three methods is what the thread's own clock measured
        # around their calls ending in its seconds (a second s is in a window when
        # from <= s < to), and the window's total holds it
        by_second = self.truth["cpu_ms_by_second"]
        fns = [self.fn(d, self.frames[k]) or {"self": 0, "base_self": 0}
               for k in ("steady", "one", "two")]
        for w, key in (("a", "base_self"), ("b", "self")):
            want = sum(ms for s, ms in by_second.items()
                       if d[w]["from"] <= int(s) < d[w]["to"]) * 1e6
            got = sum(f[key] for f in fns)
            self.assertGreater(want, 0, by_second)
            print(f"\nwindow {w}: {got / 1e6:.0f} ms sampled in the methods, {want / 1e6:.0f} ms "
                  f"by the thread's clock, {d[w]['total'] / 1e6:.0f} ms in all", end="")
            self.assertLess(abs(got - want), 0.1 * want, (d[w], got, want))
            self.assertGreaterEqual(d[w]["total"], got, d[w])
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


class History(unittest.TestCase):
    """The history on disk (CLRSCOPE_HISTORY_DIR): with 10 s kept in memory and a segment every
    2 s, a window of phase one read back after the memory let it go is the same profile it was
    while in memory; the diff against the present uses it; a torn segment is skipped and said;
    a process killed with SIGKILL leaves segments another reader (histdec, not clrscope's code)
    reads up to its last seconds; and the byte cap holds on a second app beside it."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="clrscope-history-")
        cls.capdir = tempfile.mkdtemp(prefix="clrscope-history-cap-")
        env = {"CLRSCOPE_PROFILES": "cpu,gc", "CLRSCOPE_SAMPLING_HZ": "200",
               "CLRSCOPE_HISTORY_S": "10", "CLRSCOPE_HISTORY_SEGMENT_S": "2"}
        app = ProfiledApp("phases", ["--seconds", "60", "--switch-s", "5"],
                          env=dict(env, CLRSCOPE_HISTORY_DIR=cls.dir))
        # a light app beside it: waiting threads' wall samples fill a segment a second
        capped = ProfiledApp("wait", ["--seconds", "60"],
                             env=dict(env, CLRSCOPE_PROFILES="wall", CLRSCOPE_HISTORY_DIR=cls.capdir,
                                      CLRSCOPE_HISTORY_SEGMENT_S="1",
                                      CLRSCOPE_HISTORY_MAX_MB="0.004"))
        cls.app, cls.capped = app, capped
        app.start()
        capped.start()
        try:
            app.wait_ready()
            capped.wait_ready()
            deadline = time.monotonic() + 30
            # the runtime counters' latest values as they come, to find again on disk later
            cls.counters_seen = {}
            while not any(l.startswith("switched at") for l in app.stdout_lines):
                if time.monotonic() > deadline:
                    raise AssertionError("the app never switched")
                for c in app.json("/api/v1/counters")["counters"]:
                    cls.counters_seen[(c["name"], round(c["t"], 3))] = c
                time.sleep(0.2)
            line = next(l for l in app.stdout_lines if l.startswith("switched at"))
            t = int(float(line.split()[-1]))
            # four seconds of phase one on segment boundaries (even seconds), before the switch
            cls.a0 = (t - 4) // 2 * 2
            q = f"/api/v1/flamegraph?type=cpu&from={cls.a0}&to={cls.a0 + 4}"
            time.sleep(max(0.0, cls.a0 + 4 + 1 - time.time()))
            cls.in_memory = app.json(q)
            # until the memory (10 s) no longer holds any of it
            time.sleep(max(0.0, cls.a0 + 4 + 10 + 1 - time.time()))
            cls.on_disk = app.json(q)
            cls.by_seconds = app.json("/api/v1/flamegraph?type=cpu&seconds=30")
            cls.gc_memory = app.json("/api/v1/gc?seconds=10")
            cls.gc_30 = app.json("/api/v1/gc?seconds=30")
            cls.counters_asked = time.time()
            cls.counters_30 = app.json("/api/v1/counters?seconds=30&points=10000")
            cls.counters_bad = {q: app.request("/api/v1/counters?" + q)
                                for q in ("points=1", "seconds=abc", "points=x", "seconds=0")}
            cls.diff = app.json(f"/api/v1/flamegraph/diff?type=cpu&a={cls.a0},{cls.a0 + 4}"
                                f"&b=-4,now&limit=10")
            cls.pa = app.pprof(f"/debug/pprof/profile?from={cls.a0}&to={cls.a0 + 4}",
                               out_path=app.tmp + "/a.pb.gz")
            cls.status = app.json("/api/v1/status")["history"]
            pdir = os.path.join(cls.dir, cls.status["process_dir"])
            # a segment torn as a crash mid-write would leave it (written without fsync and
            # rename, which clrscope does not do; a disk or a person can)
            torn = os.path.join(pdir, f"{cls.a0}-{cls.a0 + 2}.clrh")
            with open(torn, "rb") as f:
                data = f.read()
            with open(torn, "wb") as f:
                f.write(data[:len(data) // 2])
            cls.with_torn = app.json(q)
            cls.status_torn = app.json("/api/v1/status")["history"]
            cls.cap_status = capped.json("/api/v1/status")["history"]
            cls.killed_at = time.time()
            app.proc.kill()
            app.proc.wait()
            capped.stop()
            time.sleep(0.3)
            cls.segments, cls.refused = {}, {}
            for name in sorted(os.listdir(pdir)):
                if name.endswith(".clrh"):
                    with open(os.path.join(pdir, name), "rb") as f:
                        try:
                            cls.segments[name] = histdec.read_segment(f.read())
                        except ValueError as e:
                            cls.refused[name] = str(e)
            with open(os.path.join(pdir, "process.json")) as f:
                cls.process = json.load(f)
            # the post-mortem server over what the killed process left (the torn segment too)
            srv = ProfiledApp(pdir, command=[LAUNCHER, "serve"], profile=False)
            cls.srv = srv
            srv.start()
            try:
                srv.wait_url(30)
                cls.pm_status = srv.json("/api/v1/status")
                cls.pm_last = srv.json("/api/v1/flamegraph?type=cpu&seconds=60")
                cls.pm_a = srv.json(f"/api/v1/flamegraph?type=cpu&from={cls.a0}&to={cls.a0 + 4}")
                cls.pm_diff = srv.json(f"/api/v1/flamegraph/diff?type=cpu&a={cls.a0},"
                                       f"{cls.a0 + 4}&b=-6,now&limit=10")
                cls.pm_gc = srv.json("/api/v1/gc?seconds=900")
                cls.pm_counters = srv.json("/api/v1/counters?seconds=900&points=10000")
                cls.pm_pprof = srv.pprof("/debug/pprof/profile?seconds=6",
                                         out_path=app.tmp + "/pm.pb.gz")
                cls.pm_refused = {p: srv.request(p)[0] for p in
                                  ("/api/v1/threads", "/api/v1/live", "/metrics",
                                   "/debug/pprof/heap", "/api/v1/gcdump")}
                cls.pm_refused["POST /api/v1/marks"] = srv.request(
                    "/api/v1/marks", method="POST", data=b'{"label": "x"}',
                    headers={"Content-Type": "application/json"})[0]
            finally:
                cls.pm_exit = srv.stop()
            cls.ls_all = subprocess.run([LAUNCHER, "ls", "--all"], capture_output=True, text=True,
                                        env=dict(os.environ, CLRSCOPE_HISTORY_DIR=cls.dir),
                                        timeout=30).stdout
            cpdir = os.path.join(cls.capdir, cls.cap_status["process_dir"])
            cls.cap_bytes = sum(os.path.getsize(os.path.join(cpdir, n))
                                for n in os.listdir(cpdir) if n.endswith(".clrh"))
        finally:
            app.stop()
            capped.stop()
            shutil.rmtree(cls.dir, ignore_errors=True)
            shutil.rmtree(cls.capdir, ignore_errors=True)

    def self_of(self, reply, name):
        return sum(n["self"] for n in walk(reply["root"]) if n["name"] == name)

    def test_a_window_past_the_memory_is_read_from_disk(self):
        mem, disk = self.in_memory, self.on_disk
        self.assertEqual(mem["from_disk"], 0, {k: v for k, v in mem.items() if k != "root"})
        self.assertEqual(disk["from_disk"], 2, {k: v for k, v in disk.items() if k != "root"})
        self.assertEqual((disk["t_from"], disk["t_to"]), (self.a0, self.a0 + 4))
        # one thread busy in phase one: a window with at least a quarter of a core's samples in
        # it (a loaded machine gives the app less than its whole core)
        self.assertGreater(mem["total"], 0.25e9 * 4)
        self.assertEqual(disk["total"], mem["total"])
        one = "TestApp.Phases.PhasesMode.PhaseOne"
        self.assertEqual(self.self_of(disk, one), self.self_of(mem, one))
        self.assertGreater(self.self_of(disk, one), 0.5 * disk["total"])

    def test_a_window_longer_than_the_memory(self):
        d = self.by_seconds
        # the app has run ~16 s: its first seconds are on disk only
        self.assertGreaterEqual(d["from_disk"], 2, {k: v for k, v in d.items() if k != "root"})
        self.assertEqual(d["seconds"], 30)
        self.assertGreater(d["t_to"] - d["t_from"], 12)
        names = {n["name"] for n in walk(d["root"])}
        self.assertIn("TestApp.Phases.PhasesMode.PhaseOne", names)
        self.assertIn("TestApp.Phases.PhasesMode.PhaseTwo", names)

    def test_the_gc_series_reaches_back_to_disk(self):
        mem, far = self.gc_memory["series"], self.gc_30["series"]
        self.assertLessEqual(len(mem), 11, len(mem))
        # the app has run ~16 s: its first seconds' GC records come from the segments
        self.assertGreater(len(far), len(mem) + 3, (len(far), len(mem)))
        ts = [s["t"] for s in far]
        self.assertEqual(ts, sorted(ts))
        self.assertEqual(len(set(ts)), len(ts), "a second read twice")
        for a, b in zip(ts, ts[1:]):
            self.assertLess(b - a, 2.5, "a second missing between disk and memory")
        busy = [s["process_cpu_s"] for s in far[2:]]
        self.assertGreater(sum(busy) / len(busy), 0.3, busy)  # one busy thread

    def test_the_counters_series_reaches_back_to_disk(self):
        """Each runtime counter's value seen live (the latest, polled) in the app's first seconds
        is in the series read back from disk once the memory let it go: same time, same value (a
        rate per second)."""
        series = {s["name"]: s for s in self.counters_30["series"]}
        self.assertIn("cpu-usage", series, list(series))
        memory_from = self.counters_asked - 10 - 2  # the memory's seconds, and a segment's
        matched = 0
        for (name, t), c in self.counters_seen.items():
            if t >= memory_from:
                continue
            near = [p for p in series[name]["points"] if abs(p[0] - c["t"]) < 0.0015]
            self.assertEqual(len(near), 1, (name, c["t"], series[name]["points"][:5]))
            want = c["value"] / c["interval_s"] if c["kind"] == "rate" else c["value"]
            self.assertAlmostEqual(near[0][1], want, delta=2e-3 * abs(want) + 1e-9, msg=(name, t))
            matched += 1
        self.assertGreater(matched, 20, "values from the disk's seconds compared")
        for s in series.values():
            ts = [p[0] for p in s["points"]]
            self.assertEqual(ts, sorted(ts), s["name"])
            self.assertEqual(len(set(ts)), len(ts), f"{s['name']}: a point read twice")
        # cpu-usage over the window: one busy thread of the machine's cores, by the runtime
        cpu = [p[1] for p in series["cpu-usage"]["points"][2:]]
        self.assertGreater(sum(cpu) / len(cpu), 100 / os.cpu_count() * 0.3, cpu)
        for q, (st, _, body) in self.counters_bad.items():
            self.assertEqual(st, 400, q)
            self.assertIn("error", json.loads(body), q)

    def test_the_diff_reaches_back_to_disk(self):
        fns = self.diff["functions"]
        top2 = {fns[0]["name"], fns[1]["name"]}
        self.assertEqual(top2, {"TestApp.Phases.PhasesMode.PhaseOne",
                                "TestApp.Phases.PhasesMode.PhaseTwo"}, fns[:4])
        self.assertEqual(self.diff["a"]["total"], self.on_disk["total"])

    def test_pprof_of_a_window_on_disk(self):
        p = read_pprof(self.pa)
        i = [n for n, _ in p.sample_types].index("cpu")
        self.assertEqual(sum(v[i] for _, v, _ in p.samples), self.on_disk["total"])

    def test_a_torn_segment_is_skipped_and_said(self):
        st = self.status_torn
        self.assertEqual(self.with_torn["from_disk"], 1)
        self.assertLess(self.with_torn["total"], self.on_disk["total"])
        self.assertGreater(self.with_torn["total"], 0)
        self.assertGreaterEqual(st["skipped"], 1, st)
        self.assertIn(f"{self.a0}-{self.a0 + 2}.clrh: torn", st["last_error"])
        said = [l for l in self.app.stderr_lines if "history: a segment was refused" in l]
        self.assertEqual(len(said), 1, self.app.stderr_lines[-10:])

    def test_status(self):
        st = self.status
        self.assertTrue(st["enabled"], st)
        self.assertEqual(st["segment_s"], 2)
        self.assertGreaterEqual(st["written"], 5, st)  # ~15 s at 2 s each
        self.assertIn(st["disk_segments"], (st["written"], st["written"] - 1), st)  # tidy after
        self.assertEqual(st["write_failures"], 0, st)
        self.assertEqual(st["off_reason"], "")
        self.assertEqual(st["dir"], self.dir)

    def test_a_killed_process_leaves_its_history(self):
        self.assertEqual(list(self.refused), [f"{self.a0}-{self.a0 + 2}.clrh"], self.refused)
        self.assertEqual(self.process["pid"], self.app.pid)
        spans = sorted((s["t_from"], s["t_to"]) for s in self.segments.values())
        for (f0, t0), (f1, t1) in zip(spans, spans[1:]):
            self.assertLessEqual(t0, f1, spans)  # no two segments hold the same second
        # written 2 s after each segment ends: the last one ends at most 2 + 2 + 1 s before
        self.assertGreaterEqual(spans[-1][1], self.killed_at - 5, (spans[-1], self.killed_at))
        last = self.segments[max(self.segments, key=lambda n: self.segments[n]["t_to"])]
        rows = last["kinds"]["cpu"]
        two = sum(v[1] for path, _, _, v in rows if path and path[-1].endswith("PhaseTwo"))
        total = sum(v[1] for _, _, _, v in rows)
        self.assertGreater(two, 0.4 * total, rows[:5])
        self.assertGreater(total, 0.2e9 * (last["t_to"] - last["t_from"]))  # one busy thread
        # the runtime counters of its seconds (once a second each)
        names = {c["name"] for c in last["counters"]}
        self.assertIn("cpu-usage", names)
        for c in last["counters"]:
            self.assertTrue(last["t_from"] <= c["t"] < last["t_to"], (c, last["t_from"]))

    def test_the_byte_cap_holds(self):
        st = self.cap_status
        self.assertGreater(st["deleted"], 0, st)
        self.assertLessEqual(st["disk_bytes"], 0.004 * 1048576, st)
        # at exit it writes one more: at most one segment above the cap
        self.assertLessEqual(self.cap_bytes, 0.004 * 1048576 + 2048, self.cap_bytes)

    def test_serve_opens_the_history_of_the_killed_process(self):
        st = self.pm_status
        self.assertEqual(st["mode"], "post-mortem", st)
        self.assertEqual(st["served_pid"], self.app.pid)
        self.assertEqual(st["process"]["name"], "TestApp")
        last = max(s["t_to"] for s in self.segments.values())
        # its clock stands in the last second of the history: "the last minute" is the last one
        self.assertEqual(int(self.pm_last["t_to"]), last - 1, self.pm_last["t_to"])
        two = self.self_of(self.pm_last, "TestApp.Phases.PhasesMode.PhaseTwo")
        self.assertGreater(two, 0.4 * self.pm_last["total"])
        # the window of phase one: the torn segment refused, the other read
        self.assertEqual(st["history"]["skipped"], 1, st["history"])
        self.assertEqual(self.pm_a["total"], self.with_torn["total"])
        fns = self.pm_diff["functions"]
        self.assertEqual({fns[0]["name"], fns[1]["name"]},
                         {"TestApp.Phases.PhasesMode.PhaseOne", "TestApp.Phases.PhasesMode.PhaseTwo"},
                         fns[:4])
        p = read_pprof(self.pm_pprof)
        i = [n for n, _ in p.sample_types].index("cpu")
        self.assertGreater(sum(v[i] for _, v, _ in p.samples), 0)
        self.assertEqual(self.pm_exit, 0, self.srv.stderr_lines[-5:])

    def test_serve_shows_the_gc_series(self):
        series = self.pm_gc["series"]
        last = max(s["t_to"] for s in self.segments.values())
        self.assertGreater(len(series), 8, len(series))
        self.assertLessEqual(series[-1]["t"], last + 0.01)
        self.assertGreater(series[-1]["t"], last - 6, (series[-1]["t"], last))

    def test_serve_shows_the_counters(self):
        """A post-mortem server's counters are the last values the process recorded (read by
        histdec from the segments, the torn one aside), and their series."""
        last = {}
        for seg in self.segments.values():
            for c in seg["counters"]:
                if c["name"] not in last or c["t"] > last[c["name"]]["t"]:
                    last[c["name"]] = c
        got = {c["name"]: c for c in self.pm_counters["counters"]}
        self.assertIn("cpu-usage", got, list(got))
        self.assertEqual(set(got), set(last))
        for name, c in last.items():
            self.assertAlmostEqual(got[name]["t"], c["t"], delta=0.0015, msg=name)
            # (cJSON writes 15 significant digits where they read back within its epsilon)
            self.assertAlmostEqual(got[name]["value"], c["value"], delta=1e-12 * abs(c["value"]),
                                   msg=name)
        self.assertFalse(self.pm_counters["enabled"])
        series = {s["name"]: s["points"] for s in self.pm_counters["series"]}
        on_disk = sorted(c["t"] for seg in self.segments.values() for c in seg["counters"]
                         if c["name"] == "cpu-usage")
        self.assertGreater(len(on_disk), 4)
        self.assertEqual(len(series["cpu-usage"]), len(on_disk))
        for (t, _), want in zip(series["cpu-usage"], on_disk):
            self.assertAlmostEqual(t, want, delta=0.0015)

    def test_serve_refuses_what_needs_the_running_process(self):
        for path, status in self.pm_refused.items():
            self.assertEqual(status, 404, path)

    def test_ls_all_lists_the_history(self):
        line = next((l for l in self.ls_all.splitlines() if l.startswith(f"{self.app.pid} ")), None)
        self.assertIsNotNone(line, self.ls_all)
        self.assertIn("exited", line)
        self.assertIn(self.status["process_dir"], line)
        self.assertIn(f"{len(self.segments) + len(self.refused)} segments", line)


class HistoryDirectory(unittest.TestCase):
    """The default history directory ($XDG_RUNTIME_DIR/clrscope/history) must be a real directory
    of this user's, as the heap snapshots' must: a link or another user's directory at that name
    turns history off with the reason (nothing written through the link), one of ours that is
    open to others is closed to 0700. Three apps side by side, one per case."""

    @classmethod
    def setUpClass(cls):
        cls.cases, apps = {}, {}
        names = ["link", "ours, open to all"] + (["theirs"] if os.geteuid() == 0 else [])
        cls.public = tempfile.mkdtemp(prefix="clrscope-public-")
        os.chmod(cls.public, 0o777)
        try:
            for what in names:
                rt = tempfile.mkdtemp(prefix="clrscope-xdg-")
                os.mkdir(os.path.join(rt, "clrscope"), 0o700)
                hdir = os.path.join(rt, "clrscope", "history")
                if what == "link":
                    os.symlink(cls.public, hdir)
                else:
                    os.mkdir(hdir)
                    os.chmod(hdir, 0o777)
                    if what == "theirs":
                        os.chown(hdir, 65534, 65534)
                apps[what] = (rt, hdir, ProfiledApp("wait", ["--seconds", "30"], env={
                    "XDG_RUNTIME_DIR": rt, "CLRSCOPE_PROFILES": "wall",
                    "CLRSCOPE_HISTORY_S": "10", "CLRSCOPE_HISTORY_SEGMENT_S": "1"}))
                apps[what][2].start()
            for what, (rt, hdir, app) in apps.items():
                app.wait_ready()
            time.sleep(3)  # a segment a second: a few written where history is on
            for what, (rt, hdir, app) in apps.items():
                if what == "ours, open to all":  # (a loaded machine: its first may take longer)
                    app.wait_json("/api/v1/status", lambda j: j["history"]["written"] > 0, 30)
                st = app.json("/api/v1/status")["history"]
                files = []
                if os.path.isdir(hdir) and not os.path.islink(hdir):
                    for d in os.listdir(hdir):
                        files += [f for f in os.listdir(os.path.join(hdir, d)) if f.endswith(".clrh")]
                mode = os.lstat(hdir).st_mode & 0o777
                cls.cases[what] = (st, files, mode, list(os.listdir(cls.public)))
        finally:
            for rt, hdir, app in apps.values():
                app.stop()
                shutil.rmtree(rt, ignore_errors=True)
            shutil.rmtree(cls.public, ignore_errors=True)

    def test_a_link_is_refused(self):
        st, files, _, public = self.cases["link"]
        self.assertFalse(st["enabled"], st)
        self.assertIn("history", st["off_reason"])
        self.assertEqual(public, [], "nothing written through the link")

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give a directory to another user")
    def test_another_users_directory_is_refused(self):
        st, files, _, _ = self.cases["theirs"]
        self.assertFalse(st["enabled"], st)
        self.assertIn("belongs to another user", st["off_reason"])
        self.assertEqual(files, [])

    def test_ours_open_to_all_is_closed(self):
        st, files, mode, _ = self.cases["ours, open to all"]
        self.assertTrue(st["enabled"], st)
        self.assertEqual(mode, 0o700)
        self.assertTrue(files, st)


@unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                 "the file system's answer, not clrscope's memory: the plain stage's")
class HistoryDiskFull(unittest.TestCase):
    """A full disk turns the history off with the reason and nothing else: the history directory
    on a small tmpfs (mounted by the test, as root), filled up by the test once the app has
    written a segment. The next write meets ENOSPC: history is off, said once on stderr and in
    the status, no temporary file is left behind, and the profiles go on in memory."""

    @classmethod
    def setUpClass(cls):
        cls.mnt = tempfile.mkdtemp(prefix="clrscope-full-")
        if os.geteuid() != 0 or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=512k", "none", cls.mnt],
                capture_output=True).returncode != 0:
            os.rmdir(cls.mnt)
            raise unittest.SkipTest("mounting a tmpfs needs root")
        try:
            hdir = os.path.join(cls.mnt, "history")
            os.mkdir(hdir, 0o700)
            app = ProfiledApp("wait", ["--seconds", "16"], env={
                "CLRSCOPE_PROFILES": "wall", "CLRSCOPE_HISTORY_DIR": hdir,
                "CLRSCOPE_HISTORY_S": "10", "CLRSCOPE_HISTORY_SEGMENT_S": "1"})
            cls.app = app
            app.start()
            try:
                app.wait_ready()
                deadline = time.monotonic() + 20
                while app.json("/api/v1/status")["history"]["written"] < 1:
                    if time.monotonic() > deadline:
                        raise AssertionError("no segment written")
                    time.sleep(0.2)
                cls.before = app.json("/api/v1/status")["history"]
                # the disk fills up: every byte the tmpfs has left
                fd = os.open(os.path.join(cls.mnt, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
                try:
                    while os.write(fd, b"\0" * 4096) > 0:
                        pass
                except OSError:
                    pass
                finally:
                    os.close(fd)
                deadline = time.monotonic() + 15
                while app.json("/api/v1/status")["history"]["enabled"]:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                cls.after = app.json("/api/v1/status")["history"]
                cls.wall1 = app.json("/api/v1/flamegraph?type=wall&seconds=2")
                time.sleep(2.5)
                cls.wall2 = app.json("/api/v1/flamegraph?type=wall&seconds=2")
                cls.later = app.json("/api/v1/status")["history"]
                pdir = os.path.join(hdir, cls.before["process_dir"])
                cls.files = sorted(os.listdir(pdir))
                cls.truth = app.wait_truth(timeout=40)
            finally:
                cls.exit = app.stop()
        finally:
            subprocess.run(["umount", cls.mnt], capture_output=True)
            shutil.rmtree(cls.mnt, ignore_errors=True)

    def test_history_turns_off_with_the_reason(self):
        st = self.after
        self.assertFalse(st["enabled"], st)
        self.assertIn("the disk is full", st["off_reason"])
        self.assertIn("No space left", st["off_reason"])
        self.assertGreaterEqual(st["write_failures"], 1, st)
        self.assertIn("No space left", st["last_error"])
        said = [l for l in self.app.stderr_lines if "history: the disk is full" in l]
        self.assertEqual(len(said), 1, self.app.stderr_lines[-10:])

    def test_nothing_half_written_is_left(self):
        self.assertFalse([f for f in self.files if f.endswith(".tmp")], self.files)
        self.assertTrue(all(f.endswith(".clrh") or f == "process.json" for f in self.files),
                        self.files)

    def test_the_profiles_go_on_in_memory(self):
        self.assertGreater(self.wall1["total"], 0, self.wall1)
        self.assertGreater(self.wall2["total"], 0, self.wall2)
        self.assertGreater(self.wall2["t_to"], self.wall1["t_to"] + 2)
        # nothing more is tried once off
        self.assertEqual(self.later["write_failures"], self.after["write_failures"], self.later)
        self.assertEqual(self.later["written"], self.after["written"], self.later)
        self.assertTrue(self.truth, self.truth)


if __name__ == "__main__":
    unittest.main()
