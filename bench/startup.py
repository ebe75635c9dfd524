#!/usr/bin/env python3
"""Startup and exit cost: `TestApp hello` (prints, exits) from spawn to exit, alternating with and
without clrscope (all profiles, the default), RUNS times each (default 10). Prints the medians,
the ratio and the added milliseconds.   bench/startup.py [BUILD_DIR]

With BREAKDOWN=1 it also runs clrscope with parts of it off, in the same alternation, and prints
for each configuration the time until the app's first line and until its exit:
  no profile         CLRSCOPE_PROFILES=none, CLRSCOPE_RUNTIME_COUNTERS=0 (no EventPipe session)
  counters session   CLRSCOPE_PROFILES=none (only the System.Runtime counters session)
  runtime session    CLRSCOPE_PROFILES=lock, CLRSCOPE_RUNTIME_COUNTERS=0 (only the runtime's
                     own provider)
  cpu, wall, exc     CLRSCOPE_PROFILES=cpu,wall,exceptions, CLRSCOPE_RUNTIME_COUNTERS=0 (the
                     profiles that need no session)"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import emit, testapp  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(os.environ.get("RUNS", "10"))
cmd = testapp(build) + ["hello"]
launcher = os.path.join(build, "clrscope")
env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1", CLRSCOPE_PORT="0",
           CLRSCOPE_LOG_LEVEL="warn")
configs = {"none": None, "clrscope": {}}
if os.environ.get("BREAKDOWN") == "1":
    configs.update({
        "no profile": {"CLRSCOPE_PROFILES": "none", "CLRSCOPE_RUNTIME_COUNTERS": "0"},
        "counters session": {"CLRSCOPE_PROFILES": "none"},
        "runtime session": {"CLRSCOPE_PROFILES": "lock", "CLRSCOPE_RUNTIME_COUNTERS": "0"},
        "cpu, wall, exc": {"CLRSCOPE_PROFILES": "cpu,wall,exceptions",
                           "CLRSCOPE_RUNTIME_COUNTERS": "0"},
    })
first = {k: [] for k in configs}
times = {k: [] for k in configs}
for i in range(runs + 1):  # the first round warms the disk cache and is not counted
    order = list(configs) if i % 2 else list(reversed(configs))
    for cfg in order:
        extra = configs[cfg]
        c = cmd if extra is None else [launcher, "run", "--"] + cmd
        t0 = time.monotonic()
        p = subprocess.Popen(c, env=dict(env, **(extra or {})), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdout.readline()
        t1 = time.monotonic()
        p.stdout.read()
        if p.wait(timeout=120) != 0:
            sys.exit(f"{cfg}: exit {p.returncode}")
        t2 = time.monotonic()
        if i:
            first[cfg].append(t1 - t0)
            times[cfg].append(t2 - t0)
a, b = statistics.median(times["none"]), statistics.median(times["clrscope"])
emit("startup", "none", a * 1000, "ms", n=runs)
emit("startup", "added", (b - a) * 1000, "ms", n=runs)
print(f"hello-world start to exit, {runs} runs each, alternating: no profiler {a * 1000:.0f} ms, "
      f"clrscope {b * 1000:.0f} ms (median): ratio {b / a:.3f}, +{(b - a) * 1000:.0f} ms")
if len(configs) > 2:
    print()
    print("| configuration | first line (ms) | added | exit (ms) | added |")
    print("|---|---|---|---|---|")
    f0 = statistics.median(first["none"])
    for k in configs:
        f, t = statistics.median(first[k]), statistics.median(times[k])
        print(f"| {k} | {f * 1000:.1f} | {(f - f0) * 1000:+.1f} | {t * 1000:.1f} | "
              f"{(t - a) * 1000:+.1f} |")
        emit("startup", f"{k}.first_line_added", (f - f0) * 1000, "ms")
