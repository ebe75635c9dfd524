#!/usr/bin/env python3
"""Sampling cost against thread count: `TestApp threads --threads N` (N blocked threads: half wait
on an event, half sleep until the stop) for N in THREAD_COUNTS (default 10 100 500), with and without
clrscope (all profiles), alternating, ROUNDS times. Over SECONDS after `ready`, the process's CPU
time with the profiler minus without is what sampling that many threads costs; the wall sampler's
stop-the-world time comes from /api/v1/status. Then, in each profiled run, DUMPS thread dumps
(GET /api/v1/threads, 1.5 s apart so none is a reused one): how long the runtime stayed suspended
for each (`suspend_ms` in the answer) and how long the request took. Prints a table per N.
   bench/threads_bench.py [BUILD_DIR]"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import App, cpu_seconds, emit, get_json, testapp  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
counts = [int(x) for x in os.environ.get("THREAD_COUNTS", "10 100 500").split()]
rounds = int(os.environ.get("ROUNDS", "2"))
secs = float(os.environ.get("SECONDS_PER_RUN", "8"))
dumps = int(os.environ.get("DUMPS", "3"))


def run(n, profile):
    app = App(build, testapp(build) + ["threads", "--threads", str(n), "--seconds", str(secs + 30)],
              profile=profile)
    try:
        app.wait_line("ready")
        time.sleep(1)
        c0 = cpu_seconds(app.proc.pid)
        s0 = app.status() if profile else None
        time.sleep(secs)
        c1 = cpu_seconds(app.proc.pid)
        s1 = app.status() if profile else None
        res = {"cpu": (c1 - c0) / secs}
        if profile:
            res["suspended"] = (s1["self"]["suspended_s"] - s0["self"]["suspended_s"]) / secs
            res["threads"] = s1.get("managed_threads")
            res["dump_pause"], res["dump_request"] = [], []
            for _ in range(dumps):
                time.sleep(1.5)
                t0 = time.monotonic()
                d = get_json(app.dashboard() + "api/v1/threads", timeout=60)
                res["dump_request"].append((time.monotonic() - t0) * 1000)
                res["dump_pause"].append(d["suspend_ms"])
                res["dumped"] = d["threads_total"]
        return res
    finally:
        app.stop()


rows = []
for n in counts:
    on, off = [], []
    for r in range(rounds):
        for profile in ((True, False) if r % 2 == 0 else (False, True)):
            (on if profile else off).append(run(n, profile))
    extra = statistics.median(a["cpu"] - b["cpu"] for a, b in zip(on, off))
    pauses = [p for x in on for p in x["dump_pause"]]
    requests = [q for x in on for q in x["dump_request"]]
    rows.append((n, statistics.median(x["cpu"] for x in off), statistics.median(x["cpu"] for x in on),
                 extra, statistics.median(x["suspended"] for x in on), on[-1].get("threads"),
                 pauses, requests, on[-1].get("dumped")))
print(f"threads: N blocked managed threads; CPU cores used over {secs:g} s after ready, median of "
      f"{rounds} alternating runs; all profiles (CPU 100 Hz, wall {os.environ.get('CLRSCOPE_WALL_HZ', '5')} Hz)")
print()
print("| threads | managed threads seen | no profiler (cores) | clrscope (cores) | added (cores) | "
      "added per 100 threads | runtime suspended | thread dump: threads in it | "
      "app paused (ms, median / max) | request (ms, median / max) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for n, off, on, extra, susp, seen, pauses, requests, dumped in rows:
    emit("threads_bench", f"{n}.added_cores", extra, "cores", n=rounds)
    emit("threads_bench", f"{n}.suspended", susp * 100, "%")
    emit("threads_bench", f"{n}.dump_pause", statistics.median(pauses), "ms", hi=max(pauses),
         threads=dumped)
    emit("threads_bench", f"{n}.dump_request", statistics.median(requests), "ms",
         hi=max(requests))
    print(f"| {n} | {seen} | {off:.4f} | {on:.4f} | {extra:+.4f} | {extra / n * 100:+.4f} | "
          f"{susp * 100:.2f} % | {dumped} | {statistics.median(pauses):.1f} / {max(pauses):.1f} | "
          f"{statistics.median(requests):.1f} / {max(requests):.1f} |")
