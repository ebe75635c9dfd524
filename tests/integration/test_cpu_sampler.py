"""
The signal CPU sampler (CLRSCOPE_CPU_SAMPLER=signal, the default) under load: 200 CPU-bound
threads on a small machine must neither crash nor starve the profile, and every sample must stand
for CPU its thread really burned. test_cpu.py covers the stack shapes on the split workload.
"""
import os
import re
import shutil
import time
import unittest

from harness import ProfiledApp, go_pprof, tree_totals_by_name

LEAF = "TestApp.CpuWork.SpinLeaf"
LOOP = "TestApp.CpuOnlyMode.Spin"
THREADS = 200


def process_cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


class ManyBusyThreads(unittest.TestCase):
    """cpu-only --threads 200: every worker is CPU-bound, far more threads than cores."""

    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("cpu-only", ["--seconds", "14", "--threads", str(THREADS)])
        cls.app.start()
        cls.app.wait_ready()
        time.sleep(8)
        cls.cpu = cls.app.json("/api/v1/flamegraph?type=cpu&seconds=60")
        cls.proc_cpu_ms = process_cpu_ms(cls.app.pid)
        cls.status = cls.app.json("/api/v1/status")
        # a worker the runtime has just reported is armed by clrscope's sampler thread, which
        # 200 spinning threads on two cores may keep waiting a moment: give it up to 3 s
        for _ in range(6):
            st = cls.status
            if st["self"]["signal_sampler"]["threads"] >= st["managed_threads"] - 3:
                break
            time.sleep(0.5)
            cls.status = cls.app.json("/api/v1/status")
        cls.pprof = cls.app.pprof("/debug/pprof/profile?seconds=3",
                                  os.path.join(cls.app.tmp, "cpu.pb.gz"))
        cls.truth = cls.app.wait_truth(timeout=120)

    def test_app_finished_normally(self):
        self.assertEqual(self.app.proc.returncode, 0, "\n".join(self.app.stderr_lines[-20:]))
        self.assertEqual(self.truth["stopped_by"], "duration")
        self.assertEqual(self.truth["worker_threads"], THREADS)

    def test_every_thread_is_armed(self):
        # the app starts its workers after `ready`, slowly when they already burn every core:
        # compare with the managed threads the runtime had reported at the same moment
        self.assertEqual(self.status["self"]["cpu_sampler"], "signal")
        sig = self.status["self"]["signal_sampler"]
        self.assertGreater(self.status["managed_threads"], 20)
        self.assertGreaterEqual(sig["threads"], self.status["managed_threads"] - 3)
        self.assertEqual(sig["timer_failures"], 0)
        self.assertGreater(sig["samples"], 0)

    def test_samples_are_the_workers_loop(self):
        totals = tree_totals_by_name(self.cpu["root"])
        self.assertGreater(totals.get(LOOP, 0), 0.8 * self.cpu["total"],
                           f"{LOOP} missing: {sorted(totals, key=totals.get)[-10:]}")
        self.assertGreater(totals.get(LEAF, 0), 0.5 * self.cpu["total"])

    def test_cpu_total_tracks_process_cpu(self):
        # every sample stands for the CPU time its thread's timer measured: the profile cannot
        # exceed the process's CPU, and misses at most one timer interval (10 ms) per thread
        total_ms = self.cpu["total"] / 1e6
        self.assertLessEqual(total_ms, self.proc_cpu_ms * 1.05 + 100)
        self.assertGreaterEqual(total_ms, self.proc_cpu_ms * 0.5 - THREADS * 10)

    @unittest.skipUnless(shutil.which("go"), "go tool pprof not installed")
    def test_samples_come_from_many_threads(self):
        tags = go_pprof(["-tags"], self.pprof)
        m = re.search(r"thread id: Total \S+\n((?:\s+.*\n?)*)", tags)
        self.assertIsNotNone(m, tags[:500])
        ids = [l for l in m.group(1).splitlines() if re.search(r"\(\s*[\d.]+%\)", l)]
        armed = self.status["self"]["signal_sampler"]["threads"]
        self.assertGreater(len(ids), armed // 2, tags[:800])


class SuspendStillWorks(unittest.TestCase):
    def test_suspend_mode_with_many_threads(self):
        with ProfiledApp("cpu-only", ["--seconds", "6", "--threads", "50"],
                         env={"CLRSCOPE_CPU_SAMPLER": "suspend"}) as app:
            app.wait_ready()
            time.sleep(3)
            status = app.json("/api/v1/status")
            cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=60")
            truth = app.wait_truth()
        self.assertEqual(status["self"]["cpu_sampler"], "suspend")
        self.assertNotIn("signal_sampler", status["self"])
        self.assertEqual(truth["stopped_by"], "duration")
        self.assertGreater(tree_totals_by_name(cpu["root"]).get(LOOP, 0), 0.5 * cpu["total"])


class ClockReview(unittest.TestCase):
    """CLRSCOPE_CPU_TIMER=auto re-arms every thread with POSIX CPU timers once perf events would
    cost the app more than CLRSCOPE_CPU_TIMER_BUDGET (the cost of a context switch it measures,
    times the sampled threads' switches per CPU-second, over two 5 s windows in a row). A budget
    of 1e-6 % makes `bursts` (threads passing tokens: hundreds of switches per CPU-second) cross
    it at the first two reviews (~10 s); the samples after the change must still stand for the
    CPU the threads burned."""

    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("bursts", ["--seconds", "17"],
                              env={"CLRSCOPE_PROFILES": "cpu",
                                   "CLRSCOPE_CPU_TIMER_BUDGET": "0.000001"})
        cls.app.start()
        cls.app.wait_ready()
        cls.first = cls.app.json("/api/v1/status")["self"]["signal_sampler"]
        cls.changed = None
        deadline = time.time() + 14
        while time.time() < deadline:
            sig = cls.app.json("/api/v1/status")["self"]["signal_sampler"]
            if sig.get("perf_cost", {}).get("clock_changes"):
                cls.changed = sig
                break
            time.sleep(0.2)
        time.sleep(2.5)
        cls.status = cls.app.json("/api/v1/status")
        cls.cpu = cls.app.json("/api/v1/flamegraph?type=cpu&seconds=60")
        cls.proc_cpu_ms = process_cpu_ms(cls.app.pid)
        cls.truth = cls.app.wait_truth(timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    def setUp(self):
        if not self.first["timer"].startswith("perf"):
            self.skipTest(f"no perf events here: {self.first.get('timer_note')}")

    def test_posix_timers_replace_perf_events(self):
        sig = self.status["self"]["signal_sampler"]
        if sig["perf_cost"]["switch_ns"] == 0:
            self.skipTest("perf events add nothing measurable to a context switch here")
        self.assertIsNotNone(self.changed, "no clock change within 14 s of a 1e-6 % budget")
        self.assertEqual(sig["timer"], "posix", sig)
        self.assertTrue(sig["timer_note"].startswith("auto:"), sig)
        self.assertEqual(sig["perf_threads"], 0, sig)
        self.assertEqual(sig["timer_failures"], 0, sig)
        self.assertGreaterEqual(sig["threads"], self.status["managed_threads"] - 3, sig)
        cost = sig["perf_cost"]
        self.assertEqual(cost["clock_changes"], 1, cost)  # held, not flapping
        self.assertIsNotNone(cost["switch_ns"], cost)
        self.assertGreater(cost["switches_per_cpu_s"], 0, cost)
        self.assertGreater(cost["share"], cost["budget"], cost)
        self.assertAlmostEqual(cost["budget"], 1e-8)
        self.assertTrue(any("POSIX CPU timers instead of perf events" in l
                            for l in self.app.stderr_lines),
                        self.app.stderr_lines[-10:])

    def test_samples_go_on_and_stand_for_cpu(self):
        self.assertIsNotNone(self.changed, "no clock change")
        self.assertGreater(self.status["self"]["signal_sampler"]["samples"],
                           self.changed["samples"] + 50)
        total_ms = self.cpu["total"] / 1e6
        self.assertLessEqual(total_ms, self.proc_cpu_ms * 1.05 + 100)
        self.assertGreaterEqual(total_ms, self.proc_cpu_ms * 0.6)
        self.assertEqual(self.truth["stopped_by"], "duration")


class Config(unittest.TestCase):
    def test_bad_sampler_name_falls_back_to_signal_with_a_warning(self):
        with ProfiledApp("cpu-only", ["--seconds", "3"],
                         env={"CLRSCOPE_CPU_SAMPLER": "bogus", "CLRSCOPE_WALL_HZ": "5"}) as app:
            app.wait_ready()
            status = app.json("/api/v1/status")
            app.wait_truth()
        self.assertEqual(status["self"]["cpu_sampler"], "signal")
        self.assertEqual(status["self"]["wall_hz"], 5)
        self.assertTrue(any("CLRSCOPE_CPU_SAMPLER" in l for l in app.stderr_lines),
                        app.stderr_lines)


if __name__ == "__main__":
    unittest.main()
