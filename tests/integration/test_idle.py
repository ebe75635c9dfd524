"""
clrscope in an idle process: its threads nap through their ticks while nothing comes (the
sampler wakes for its wall ticks, the aggregator 4 times a second), and the work that comes
wakes them in time (a thread waking from sleep to burn CPU loses no sample).
"""
import os
import math
import time
import unittest

from pprofdec import read_pprof
from harness import ProfiledApp, tree_totals_by_name


def voluntary_switches(pid):
    """Voluntary context switches (naps ended) of each thread of the process, by thread name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                n = next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            continue
        out[name] = out.get(name, 0) + n
    return out


class Idle(unittest.TestCase):
    def test_clrscope_naps_while_nothing_comes(self):
        """In an idle process clrscope's threads nap through their ticks: the sampler wakes for
        its 5 wall ticks a second, the aggregator for its one-second tick (4 times a second for
        10 s after the dashboard took a connection: here the last was wait_ready's), not 20
        times each. (The runtime's counters are off here: their poller's code is compiled again
        at tier 1 in the first ~35 s, CPU the sampler must stay awake for.)"""
        with ProfiledApp("threads", ["--threads", "50", "--seconds", "0"],
                         env={"CLRSCOPE_PROFILES": "cpu,wall", "CLRSCOPE_RUNTIME_COUNTERS": "0"}
                         ) as app:
            app.wait_ready()
            time.sleep(11)  # the app's first seconds (its threads' start), the last connection
            switches0, t0 = voluntary_switches(app.pid), time.monotonic()
            time.sleep(5)
            switches1, t1 = voluntary_switches(app.pid), time.monotonic()
            status = app.json("/api/v1/status")
            # 6 whole seconds past every thread's last store, the threads quiet since before
            t = math.floor(time.time()) - 2
            wall = read_pprof(app.pprof(f"/debug/pprof/wall?from={t - 6}&to={t}"))
        wakes = {name: (switches1[name] - switches0.get(name, 0)) / (t1 - t0)
                 for name in ("clrscope-sample", "clrscope-agg") if name in switches1}
        self.assertEqual(len(wakes), 2, switches1)
        for name, rate in wakes.items():
            self.assertLess(rate, 10, wakes)
        self.assertLess(wakes["clrscope-agg"], 2.5, wakes)
        # threads blocked for 5 s have their clocks read one tick in 5 and their kept stacks
        # stored as often, with the ticks in between: every thread's wall time is all there
        self.assertGreater(status["self"]["wall_quiet_skipped"], 25 * 5 * 4 // 2, status["self"])
        by_thread = {}
        for frames, vals, labels in wall.samples:
            name = str(labels.get("thread name", ""))
            if name.startswith("blocker-"):
                by_thread[name] = by_thread.get(name, 0) + vals[-1] / 1e9
        self.assertEqual(len(by_thread), 50, sorted(by_thread))
        # (the edges of a 6 s window move up to 4 ticks of each thread's in or out: a few per cent
        # of the sum, where a tick lost or stored twice would be a fifth or more)
        self.assertLess(abs(sum(by_thread.values()) / 300 - 1), 0.1, by_thread)
        # the even ones wait on one event for good: quiet, a store a second, each at its own
        # tick of the five: a window's edge cuts up to 4 ticks of one thread's, and wall ticks
        # come 0.1-0.3 s apart (a random phase), so up to 1.2 s
        for i in range(0, 50, 2):
            self.assertLess(abs(by_thread[f"blocker-{i}"] - 6), 1.5, by_thread)

    def test_work_after_idle_loses_no_sample(self):
        """A thread that sleeps 1.5 s and then burns 300 ms of CPU, again and again: the sampler,
        napping through idle ticks, is woken by the samples themselves before a thread's ring
        (a tick's worth) fills, so none is lost and the CPU profile is the thread's own clock."""
        with ProfiledApp("cpu-only", ["--seconds", "11", "--pause-ms", "1500", "--burst-ms", "300"],
                         env={"CLRSCOPE_PROFILES": "cpu,wall"}) as app:
            app.wait_ready()
            time.sleep(10.5)
            cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=30")
            sig = app.json("/api/v1/status")["self"]["signal_sampler"]
            app.stop()
            truth = app.wait_truth(timeout=60)
        self.assertEqual(sig["ring_full"], 0, sig)
        got = tree_totals_by_name(cpu["root"]).get("TestApp.CpuOnlyMode.Bursts", 0) / 1e6
        want = truth["worker_cpu_ms"]
        self.assertGreater(want, 1000, truth)
        self.assertLess(abs(got / want - 1), 0.12, (got, want))


if __name__ == "__main__":
    unittest.main()
