"""
The environments real services run in, and what real apps do to a profiler in their process,
each on a real app (TestApp `hostile`, which burns CPU on a thread throughout): a CPU quota below
one core (a cgroup), perf_event_open refused (a seccomp filter, as a container runtime's default
profile does), the app taking clrscope's signal, the app starting child processes, an unhandled
exception with the runtime's crash dump on. Each: the app's output and exit status as without
clrscope, the affected feature off with a status field and one log line, the rest working.
The cgroup needs root and a writable cgroup `cpu` controller; without it that test is skipped,
saying why.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BUILD, ProfiledApp

BURN = "TestApp.Hostile.Work.Burn"


def cpu_under(flame, name):
    """CPU (ns) of a flame graph's samples whose stack holds `name`."""
    total, stack = 0, [(flame["root"], False)]
    while stack:
        node, inside = stack.pop()
        inside = inside or node.get("name") == name
        kids = node.get("children", [])
        if inside and not kids:
            total += node["value"]
        elif inside:
            total += node["value"] - sum(k["value"] for k in kids)
        stack.extend((k, inside) for k in kids)
    return total


def cpu_cgroup(quota_us, period_us=100000):
    """A new cgroup of the cpu controller limited to quota/period of one core: (path, why not)."""
    for root in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"):
        if os.path.isfile(os.path.join(root, "cpu.cfs_quota_us")):
            path = os.path.join(root, f"clrscope-test-{os.getpid()}")
            try:
                os.makedirs(path, exist_ok=True)
                with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
                    f.write(str(period_us))
                with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
                    f.write(str(quota_us))
                return path, None
            except OSError as e:
                return None, f"cannot make a cgroup under {root}: {e}"
    if os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
        path = f"/sys/fs/cgroup/clrscope-test-{os.getpid()}"
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cpu.max"), "w") as f:
                f.write(f"{quota_us} {period_us}")
            return path, None
        except OSError as e:
            return None, f"cannot make a cgroup v2 with cpu.max: {e}"
    return None, "no cgroup cpu controller mounted"


class CpuQuota(unittest.TestCase):
    """Half a core (cfs quota 50 ms per 100 ms): the app gets its half, clrscope its share of it,
    and the CPU profile still sums to the burner's own CPU clock."""

    def test_half_a_core(self):
        path, why = cpu_cgroup(50000)
        if not path:
            self.skipTest(why)
        try:
            enter = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', path]
            app = ProfiledApp("hostile", ["--seconds", "12"], wrap=enter,
                              env={"CLRSCOPE_PROFILES": "cpu,wall,alloc,exceptions,lock"})
            with app:
                app.wait_ready(timeout=120)
                time.sleep(9)
                cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=6")
                status = app.json("/api/v1/status")
                truth = app.wait_truth(timeout=60)
                code = app.wait_exit()
        finally:
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    time.sleep(0.1)
        self.assertEqual(code, 0, app.stderr_lines[-10:])
        # the burner got about half a core (12 s of run, some of it the start)
        self.assertLess(truth["burn_cpu_ms"] / 1000, 0.6 * truth["elapsed_s"], truth)
        self.assertGreater(truth["burn_cpu_ms"] / 1000, 0.25 * truth["elapsed_s"], truth)
        # 6 s of samples under the burner: its share of the quota, ~3 s
        burn_s = cpu_under(cpu, BURN) / 1e9
        self.assertGreater(burn_s, 0.3 * 6, (burn_s, status["self"]["cpu_sampler"]))
        self.assertLess(burn_s, 0.6 * 6, burn_s)
        self.assertEqual(status["self"]["cpu_sampler"], "signal", status["self"])


class PerfRefused(unittest.TestCase):
    """perf_event_open refused by a seccomp filter: the CPU sampler takes POSIX timers, says why in
    the status and one log line, and the profile is there."""

    def test_posix_timers_instead(self):
        deny = os.path.join(BUILD, "deny_perf")
        if not os.path.exists(deny):
            self.skipTest(f"{deny} not built")
        app = ProfiledApp("hostile", ["--seconds", "8"], wrap=[deny],
                          env={"CLRSCOPE_PROFILES": "cpu", "CLRSCOPE_CPU_TIMER": "perf"})
        with app:
            app.wait_ready(timeout=120)
            time.sleep(5)
            sig = app.json("/api/v1/status")["self"]["signal_sampler"]
            cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=4")
            truth = app.wait_truth(timeout=60)
            code = app.wait_exit()
        self.assertEqual(code, 0, app.stderr_lines[-10:])
        self.assertEqual(sig["timer"], "posix", sig)
        self.assertIn("perf", sig.get("timer_note", ""), sig)
        self.assertEqual(sig["perf_threads"], 0, sig)
        lines = [l for l in app.stderr_lines if "perf" in l and l.startswith("clrscope")]
        self.assertEqual(len(lines), 1, app.stderr_lines)
        self.assertGreater(cpu_under(cpu, BURN) / 1e9, 0.5 * 4, truth)


class SignalTaken(unittest.TestCase):
    """The app sets SIGPROF (clrscope's signal) to ignored 2 s after it starts, as a native library
    might: clrscope sees its handler gone, says so once, and samples CPU by suspending the runtime
    instead; the app runs on unchanged."""

    def test_falls_back_to_the_suspending_sampler(self):
        app = ProfiledApp("hostile", ["--seconds", "10", "--take-signal", str(int(signal.SIGPROF))],
                          env={"CLRSCOPE_PROFILES": "cpu"})
        with app:
            app.wait_ready(timeout=120)
            before = app.json("/api/v1/status")["self"]
            app.wait_stdout("took signal", timeout=30)
            time.sleep(4)
            after = app.json("/api/v1/status")["self"]
            cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=3")
            truth = app.wait_truth(timeout=60)
            code = app.wait_exit()
        self.assertEqual(before["cpu_sampler"], "signal", before)
        self.assertEqual(before["signal_sampler"]["signal"], int(signal.SIGPROF), before)
        self.assertEqual(code, 0, app.stderr_lines[-10:])
        self.assertTrue(truth["signal_taken"], truth)
        self.assertEqual(after["cpu_sampler"], "suspend", after)
        lines = [l for l in app.stderr_lines if "replaced clrscope's signal handler" in l]
        self.assertEqual(len(lines), 1, app.stderr_lines)
        # the last 3 s were sampled by the suspending sampler: the burner's CPU is there
        self.assertGreater(cpu_under(cpu, BURN) / 1e9, 0.5 * 3, after)


class ChildProcesses(unittest.TestCase):
    """200 child processes started while the CPU sampler runs at 1000 Hz (fork and exec under
    timer signals): every child's output and exit status are right, and no child inherits a
    descriptor of clrscope's (perf events, the dashboard's socket, its files)."""

    def test_children_unharmed_and_inherit_nothing(self):
        app = ProfiledApp("hostile", ["--seconds", "60", "--spawn", "200"],
                          env={"CLRSCOPE_PROFILES": "cpu,wall,alloc,exceptions",
                               "CLRSCOPE_SAMPLING_HZ": "1000", "CLRSCOPE_CPU_TIMER": "perf"})
        with app:
            app.wait_ready(timeout=120)
            app.wait_stdout("spawned", timeout=120)
            status = app.json("/api/v1/status")["self"]
            app.stop()
            truth = app.wait_truth(timeout=60)
        self.assertEqual(truth["spawned"], 200, truth)
        self.assertEqual(truth["spawn_failures"], 0, truth)
        self.assertEqual(truth["child_fds_max"], 0, truth)
        self.assertEqual(status["cpu_sampler"], "signal", status)


class Crash(unittest.TestCase):
    """An unhandled exception with the runtime's crash dump on (DOTNET_DbgEnableMiniDump): the same
    exit status and message as without clrscope, and the dump is written."""

    def run_crash(self, profile, dump_dir):
        env = {"DOTNET_DbgEnableMiniDump": "1", "DOTNET_DbgMiniDumpType": "1",
               "DOTNET_DbgMiniDumpName": os.path.join(dump_dir, "crash.%p"),
               "CLRSCOPE_PROFILES": "cpu,wall,alloc,exceptions"}
        app = ProfiledApp("hostile", ["--seconds", "30", "--crash-after-ms", "2000"],
                          env=env, profile=profile)
        with app:
            app.wait_ready(timeout=120, need_url=profile)
            code = app.wait_exit(timeout=120)
        dumps = [os.path.join(dump_dir, f) for f in os.listdir(dump_dir)]
        return code, app.stderr_lines, dumps

    def test_crash_and_dump_as_without_clrscope(self):
        with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as dir_:
            plain_code, plain_err, plain_dumps = self.run_crash(False, plain_dir)
            code, err, dumps = self.run_crash(True, dir_)
            self.assertNotEqual(plain_code, 0, plain_err[-10:])
            self.assertEqual(code, plain_code, err[-15:])
            msg = "System.InvalidOperationException: clrscope hostile crash"
            self.assertTrue(any(msg in l for l in plain_err), plain_err[-10:])
            self.assertTrue(any(msg in l for l in err), err[-15:])
            if not plain_dumps:
                self.skipTest("the runtime wrote no crash dump here even without clrscope: "
                              + " | ".join(plain_err[-5:]))
            self.assertEqual(len(dumps), 1, err[-15:])
            self.assertGreater(os.path.getsize(dumps[0]), 1 << 20, dumps)


if __name__ == "__main__":
    unittest.main()
