#!/usr/bin/env python3
"""Dashboard API latency while the app is under load: the WebApp (Kestrel) with clrscope (all
profiles) is driven by wrk (1 thread, 16 connections, /json /alloc /cpu) while every endpoint of
the dashboard is requested N times in turn (default 40, after WARMUP_S of history). Prints
p50/p99/max per endpoint.   bench/api_latency.py BUILD_DIR WEBAPP_DLL"""
import os
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import App, emit, get  # noqa: E402

build, webapp = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "40"))
WARMUP = int(os.environ.get("WARMUP_S", "15"))
ENDPOINTS = ["api/v1/status", "api/v1/flamegraph?type=cpu&seconds=60",
             "api/v1/flamegraph?type=alloc-bytes&seconds=60", "api/v1/top?type=cpu&seconds=60",
             "api/v1/gc?seconds=60", "api/v1/allocations?seconds=60", "api/v1/live",
             "api/v1/exceptions?seconds=60", "api/v1/locks?seconds=60", "api/v1/counters",
             "metrics", "debug/pprof/profile?seconds=10&wait=0", "debug/pprof/allocs?seconds=60",
             "debug/pprof/heap", "", "app.js"]

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
base = f"http://127.0.0.1:{port}"
app = App(build, ["dotnet", webapp, "--urls", base])
mix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webapp_mix.lua")
try:
    deadline = time.time() + 60
    while True:
        try:
            if get(base + "/health", 1) == b"ok":
                break
        except OSError:
            time.sleep(0.1)
        if time.time() > deadline:
            raise SystemExit("the WebApp did not start")
    dash = app.dashboard()
    load = subprocess.Popen(["wrk", "-t1", "-c16", f"-d{WARMUP + N * len(ENDPOINTS) // 5 + 60}s",
                             "-s", mix, base], stdout=subprocess.DEVNULL)
    time.sleep(WARMUP)
    lat = {e: [] for e in ENDPOINTS}
    for i in range(N):
        for e in ENDPOINTS:
            t0 = time.perf_counter()
            with urllib.request.urlopen(dash + e, timeout=30) as r:
                r.read()
            lat[e].append((time.perf_counter() - t0) * 1000)
    load.terminate()
    load.wait()
    print(f"dashboard endpoints while wrk drives the WebApp (all profiles on, {N} requests each, "
          f"sequential, after {WARMUP} s of history; ms)")
    print()
    print("| endpoint | p50 | p99 | max |")
    print("|---|---|---|---|")
    worst = (None, -1.0)
    for e, xs in lat.items():
        xs.sort()
        p99 = xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]
        print(f"| `/{e}` | {xs[len(xs) // 2]:.1f} | {p99:.1f} | {xs[-1]:.1f} |")
        emit("api_latency", f"p99 /{e}", p99, "ms", p50=xs[len(xs) // 2], n=len(xs))
        if p99 > worst[1]:
            worst = ("/" + e, p99)
    emit("api_latency", "p99_max", worst[1], "ms", endpoint=worst[0], n=N)
finally:
    app.stop()
