#!/usr/bin/env python3
"""Startup and exit cost: `TestApp hello` (prints, exits) from spawn to exit, alternating with and
without clrscope (all profiles, the default), RUNS times each (default 10). Prints the medians,
the ratio and the added milliseconds.   bench/startup.py [BUILD_DIR]"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import testapp  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(os.environ.get("RUNS", "10"))
cmd = testapp(build) + ["hello"]
launcher = os.path.join(build, "clrscope")
env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1", CLRSCOPE_PORT="0",
           CLRSCOPE_LOG_LEVEL="warn")
times = {"none": [], "clrscope": []}
for i in range(runs + 1):  # the first pair warms the disk cache and is not counted
    for cfg in (("none", "clrscope") if i % 2 else ("clrscope", "none")):
        c = cmd if cfg == "none" else [launcher, "run", "--"] + cmd
        t0 = time.monotonic()
        subprocess.run(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, timeout=120)
        if i:
            times[cfg].append(time.monotonic() - t0)
a, b = statistics.median(times["none"]), statistics.median(times["clrscope"])
print(f"hello-world start to exit, {runs} runs each, alternating: no profiler {a * 1000:.0f} ms, "
      f"clrscope {b * 1000:.0f} ms (median): ratio {b / a:.3f}, +{(b - a) * 1000:.0f} ms")
