"""
test_arm64.py - the linux-arm64 library on a linux-arm64 app, under qemu-user: TestApp published
self-contained for linux-arm64 (tests/apps/build.sh, CLRSCOPE_APP_ARM64=1) runs under
`qemu-aarch64-static` with the cross build's libclrscope.so (`cmake --preset linux-arm64`) as its
profiler. A small, representative set against the app's own truth: cpu-split's 3:1 CPU split
between two callers within 5 points and its stacks whole, a runtime helper's managed caller
found from the link register, the allocations by type of alloc-mix,
a heap snapshot of `heap` with the exact counts the app made, the dashboard answering, and the
arm64 launcher's refusal of an app that asks for .NET 7.

Emulation is slow and has no perf events and no process_vm_readv: clrscope falls back to CPU
timers and says so; the runs are shorter than the x86-64 tests' and the bounds say what they
allow for. Where the cross build, the arm64 app or qemu is missing, every test skips with what
is missing, or fails when CLRSCOPE_TEST_ARM64=1 says they should be there (tools/test.sh builds
and installs all three, and sets it).

Environment: CLRSCOPE_ARM64_BUILD (the cross build's directory, default build-arm64 beside
CLRSCOPE_BUILD), CLRSCOPE_QEMU (default qemu-aarch64-static on PATH).
"""
import json
import os
import shutil
import time
import unittest

from harness import (BUILD, CLSID, ProfiledApp, cpu_split, find_paths, run_launcher_on,
                     runtimeconfig, tree_totals_by_name, wait_split_samples)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ARM64_BUILD = os.environ.get("CLRSCOPE_ARM64_BUILD") or os.path.join(ROOT, "build-arm64")
LIB = os.path.join(ARM64_BUILD, "libclrscope.so")
APP = os.path.join(BUILD, "apps", "net10-arm64", "TestApp")
HEAVY, LIGHT = "TestApp.CpuWork.HeavyCaller", "TestApp.CpuWork.LightCaller"
LEAF, WORK = "TestApp.CpuWork.SpinLeaf", "TestApp.CpuSplitMode.Work"
QEMU = os.environ.get("CLRSCOPE_QEMU") or shutil.which("qemu-aarch64-static") or \
    shutil.which("qemu-aarch64")


def missing():
    if not os.path.exists(LIB):
        return f"no arm64 library at {LIB} (cmake --preset linux-arm64 && cmake --build " \
               f"--preset linux-arm64; tools/deps.sh arm64 installs the cross compiler)"
    if not os.path.exists(APP):
        return f"no linux-arm64 TestApp at {APP} (CLRSCOPE_APP_ARM64=1 tests/apps/build.sh)"
    if not QEMU:
        return "no qemu-aarch64-static (tools/deps.sh arm64 installs qemu-user-static)"
    return None


def require(case):
    """Skips the class, or fails it where tools/test.sh promised the arm64 parts."""
    if os.environ.get("CLRSCOPE_TEST_ARM64") == "0":
        raise unittest.SkipTest("CLRSCOPE_TEST_ARM64=0: linux-arm64 left out")
    why = missing()
    if why and os.environ.get("CLRSCOPE_TEST_ARM64") == "1":
        raise AssertionError(why)
    if why:
        raise unittest.SkipTest(why)


def arm64_app(mode, args, env=None):
    """TestApp for linux-arm64 under qemu-user, profiled by the arm64 library."""
    e = {"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID,
         "CORECLR_PROFILER_PATH": LIB, "LD_PRELOAD": ""}
    e.update(env or {})  # (LD_PRELOAD emptied: a sanitizer preload would be x86-64's)
    return ProfiledApp(mode, args, env=e, profile=False, command=[QEMU, APP])


class Arm64CpuSplit(unittest.TestCase):
    """cpu-split: the heavy caller's share of the two callers' CPU within 5 points of the
    app's own thread clocks, from the arm64 library's sampler (CPU timers under qemu), its
    stacks whole, and the dashboard's pages and status answering."""

    @classmethod
    def setUpClass(cls):
        require(cls)
        cls.app = arm64_app("cpu-split", ["--seconds", "40"])
        cls.app.start()
        try:
            cls.app.wait_ready(timeout=120)
            # enough samples of the two callers to judge a 5-point split (>= 400)
            cls.cpu = wait_split_samples(cls.app, 5e9, 30)
            cls.status = cls.app.json("/api/v1/status")
            cls.page = cls.app.request("/")
            cls.metrics = cls.app.request("/metrics")
            cls.pprof = cls.app.request("/debug/pprof/profile?seconds=2&wait=0")
            with open(f"/proc/{cls.app.proc.pid}/maps") as f:
                cls.maps = f.read()
        finally:
            cls.app.stop()
        with open(cls.app.truth_path) as f:
            cls.truth = json.load(f)

    def test_runs_on_arm64(self):
        # both ELF files are AArch64 (e_machine 183), and qemu mapped the arm64 library
        for path in (APP, LIB):
            with open(path, "rb") as f:
                head = f.read(20)
            self.assertEqual(int.from_bytes(head[18:20], "little"), 183, path)
        self.assertIn(LIB, self.maps)

    def test_split_within_five_points(self):
        measured, truth = cpu_split(self.cpu, self.truth)
        t = tree_totals_by_name(self.cpu["root"])
        samples = (t.get(HEAVY, 0) + t.get(LIGHT, 0)) / 1e9 * self.status["sampling_hz"]
        self.assertGreater(samples, 400, "too few samples of the callers to judge the split")
        self.assertAlmostEqual(measured, truth, delta=0.05,
                               msg=f"heavy share {measured:.3f}, truth {truth:.3f}")

    def test_stacks_are_whole(self):
        # arm64's frame records walked from the signal: the leaf under one of its two callers,
        # and those under the thread's loop, in (nearly) every sample from the threads' start.
        # Under qemu the JIT maps its code in small pieces and the guest's stack lies below
        # them: walks through code mapped since the maps snapshot go on (they stopped there,
        # 2-6 % of SpinLeaf's samples in the first seconds), and a new thread's stack is in
        # the snapshot before its first sample
        paths = find_paths(self.cpu["root"], LEAF)
        total = sum(v for p, v in paths)
        self.assertGreater(total, 0)
        whole = sum(v for p, v in paths if WORK in p and (HEAVY in p or LIGHT in p))
        self.assertGreater(whole / total, 0.95,
                           f"{whole}/{total}: {[p for p, v in paths if WORK not in p][:3]}")

    def test_dashboard_answers(self):
        self.assertEqual(self.page[0], 200)
        self.assertIn(b"clrscope", self.page[2])
        self.assertEqual(self.metrics[0], 200)
        self.assertIn(b"clrscope_", self.metrics[2])
        self.assertEqual(self.pprof[0], 200)
        self.assertEqual(self.status["runtime"]["major"], 10)

    def test_fallbacks_said(self):
        # qemu-user implements neither perf events nor process_vm_readv: the CPU timers stand in,
        # and the status says which sampler runs
        self.assertEqual(self.status["self"]["cpu_sampler"], "signal")
        said = "\n".join(self.app.stderr_lines)
        self.assertIn("perf_event_open refused", said)


class Arm64Allocations(unittest.TestCase):
    """alloc-mix: every type the app allocates in the allocation table, the large ones' byte
    shares within 15 % of the app's own count (a short run under emulation: a few hundred
    samples), the runtime's allocation event the one of .NET 10, and the allocation stacks
    reaching the app's loop."""

    @classmethod
    def setUpClass(cls):
        require(cls)
        cls.app = arm64_app("alloc-mix", ["--seconds", "16", "--large-every", "3"],
                            env={"CLRSCOPE_OVERHEAD_BUDGET": "0"})
        cls.app.start()
        try:
            cls.app.wait_ready(timeout=120)
            time.sleep(9)
            cls.table = cls.app.json("/api/v1/allocations?seconds=8")
            cls.flame = cls.app.json("/api/v1/flamegraph?type=alloc-bytes&seconds=8")
            cls.truth = cls.app.wait_truth(timeout=120)
        finally:
            cls.app.stop()

    def test_stacks_reach_the_app(self):
        # the allocation callback's own walk (through the runtime's arm64 helpers) reaches the
        # app's loop for (nearly) every sampled byte
        t = tree_totals_by_name(self.flame["root"])
        self.assertGreater(self.flame["total"], 0)
        self.assertGreater(t.get("TestApp.Alloc.AllocMixMode.Work", 0) / self.flame["total"],
                           0.95, sorted(t.items(), key=lambda kv: -kv[1])[:8])

    def test_types_and_shares(self):
        self.assertEqual(self.table["method"], "AllocationSampled")
        truth = self.truth["types"]
        est = {r["type"]: r for r in self.table["types"]}
        for t in truth:
            self.assertIn(t, est, f"{t} missing from {sorted(est)}")
        tb = sum(t["bytes"] for t in truth.values())
        eb = sum(est[t]["bytes"] for t in truth)
        samples = sum(est[t]["samples"] for t in truth)
        self.assertGreater(samples, 200, "too few allocation samples to judge the shares")
        for name, t in truth.items():
            if t["bytes"] < 0.15 * tb:
                continue
            want, got = t["bytes"] / tb, est[name]["bytes"] / eb
            self.assertLess(abs(got / want - 1), 0.15,
                            f"{name}: byte share {got:.4f}, truth {want:.4f} ({samples} samples)")


class Arm64HeapSnapshot(unittest.TestCase):
    """heap: a snapshot taken from the dashboard's API holds exactly the app's 100,000 tree
    nodes and 12,345 leaves."""

    @classmethod
    def setUpClass(cls):
        require(cls)

    def test_exact_counts(self):
        with arm64_app("heap", ["--seconds", "120"],
                       env={"CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}) as app:
            app.wait_ready(timeout=120)
            st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
            self.assertEqual(st, 202, body)
            sid = json.loads(body)["id"]
            deadline = time.time() + 240
            while True:
                d = app.json(f"/api/v1/gcdump/{sid}?limit=100000")
                if d["status"] != "running" or time.time() > deadline:
                    break
                time.sleep(0.5)
            self.assertEqual(d["status"], "done", d.get("error"))
            types = {t["type"]: t for t in d["types"]}
            self.assertEqual(types["TestApp.Heap.TreeNode"]["count"], 100000)
            self.assertEqual(types["TestApp.Heap.Leaf"]["count"], 12345)


class Arm64NativeLeaf(unittest.TestCase):
    """wall-mix's spinner calls `Thread.SpinWait`, whose loop is a leaf function of the runtime
    that makes no frame record: its managed caller is found from the link register, in (nearly)
    every CPU sample of that thread."""

    @classmethod
    def setUpClass(cls):
        require(cls)
        with arm64_app("wall-mix", ["--seconds", "20"]) as app:
            app.wait_ready(timeout=120)
            time.sleep(6)
            cls.cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=4")
            cls.walks = app.json("/api/v1/status")["self"]["signal_sampler"]["walks"]

    def test_spinner_keeps_its_method(self):
        t = tree_totals_by_name(self.cpu["root"])
        thread = t.get("TestApp.WallMix.WallMixMode.Spinner", 0)
        self.assertGreater(thread, 0.5e9, "the spinner thread's CPU is missing")
        self.assertGreater(t.get("TestApp.WallMix.WallMixMode.SpinnerSpin", 0) / thread, 0.95)
        self.assertGreater(self.walks["link_register"], 0, self.walks)


class Arm64Refusal(unittest.TestCase):
    """The arm64 launcher (`clrscope run`, under qemu-user) refuses in one line an app whose
    runtimeconfig.json asks for .NET 7, and runs it without the profiler's variables; it gives
    them to one that asks for .NET 8. (No .NET 6 or 7 runtime for linux-arm64 is on the package
    feed here: the library's own refusal of such a runtime is x86-64's test.) The "app" is
    `env` under an apphost's name, so its variables can be read."""

    @classmethod
    def setUpClass(cls):
        require(cls)
        cls.launcher = os.path.join(ARM64_BUILD, "clrscope")

    def run_as_app(self, version):
        return run_launcher_on(self, [QEMU, self.launcher], runtimeconfig(version), timeout=60)

    def test_net7_refused_in_one_line(self):
        out, err = self.run_as_app("7.0.20")
        self.assertNotIn("CORECLR_PROFILER", out)
        self.assertRegex(err, r"clrscope: \S+app\.runtimeconfig\.json asks for \.NET 7; "
                         r"clrscope needs \.NET 8 or newer, so the app runs unprofiled")
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_net8_profiled(self):
        out, err = self.run_as_app("8.0.0")
        self.assertIn(f"CORECLR_PROFILER={CLSID}", out, err)


if __name__ == "__main__":
    unittest.main()
