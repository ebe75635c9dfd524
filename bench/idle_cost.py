#!/usr/bin/env python3
"""What an idle process pays: TestApp `threads --threads 50` (50 threads blocked in waits and
sleeps) under the profiler, and each thread's CPU (/proc/PID/task/*/schedstat) and voluntary
context switches (its naps ended) over MEASURE seconds (default 30) after WARM seconds (default
40: the runtime's counters poller's code is compiled again at tier 1 in the first ~35 s). Prints
the total as a share of one core and the threads by CPU. KEY=VALUE arguments go to the app's
environment (CLRSCOPE_PROFILES=cpu,wall, CLRSCOPE_RUNTIME_COUNTERS=0, ...); PROFILE=0 runs the
app without the profiler.
   bench/idle_cost.py [KEY=VALUE ...]        (CLRSCOPE_BUILD: the build directory)"""
import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from harness import ProfiledApp  # noqa: E402


def threads(pid):
    out = {}
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(t + "/comm") as f:
                comm = f.read().strip()
            with open(t + "/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(t + "/status") as f:
                cs = next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt"))
            out[t.rsplit("/", 1)[1]] = (comm, ns, cs)
        except (OSError, StopIteration):
            pass
    return out


env = dict(kv.split("=", 1) for kv in sys.argv[1:])
prof = env.pop("PROFILE", "1") == "1"
warm = float(os.environ.get("WARM", "40"))
measure = float(os.environ.get("MEASURE", "30"))
with ProfiledApp("threads", ["--threads", "50", "--seconds", "0"], env=env, profile=prof) as app:
    app.wait_ready(need_url=prof)
    time.sleep(warm)
    a, t0 = threads(app.pid), time.monotonic()
    time.sleep(measure)
    b, dt = threads(app.pid), time.monotonic() - t0
cpu, wakes = {}, {}
for tid, (comm, ns, cs) in b.items():
    _, ns0, cs0 = a.get(tid, (comm, 0, 0))
    cpu[comm] = cpu.get(comm, 0) + ns - ns0
    wakes[comm] = wakes.get(comm, 0) + cs - cs0
total = sum(cpu.values())
print(f"total {total / 1e9:.3f} s CPU in {dt:.0f} s = {total / 1e9 / dt * 100:.2f}% of a core")
for comm, ns in sorted(cpu.items(), key=lambda x: -x[1])[:12]:
    if ns:
        print(f"  {comm:18s} {ns / 1e6:6.0f} ms  {wakes[comm] / dt:5.1f} wake-ups/s")
