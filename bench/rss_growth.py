#!/usr/bin/env python3
"""The profiler's memory over a long run: TestApp `demo` (every workload: CPU split, allocations,
a slow leak, exceptions, contention) with and without clrscope side by side for DURATION seconds
(default 600), sampling both processes' RSS every INTERVAL seconds (default 30) and, with the
profiler, the memory it accounts for itself (/api/v1/status self.mem_bytes when reported).
Prints the extra RSS over time and its growth per minute after the first two minutes.
   bench/rss_growth.py [BUILD_DIR]"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import App, emit, rss_bytes, testapp  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else "build"
duration = float(os.environ.get("DURATION", "600"))
interval = float(os.environ.get("INTERVAL", "30"))
args = ["demo", "--seconds", str(duration + 60), "--mb-per-s", "50"]
on = App(build, testapp(build) + args, profile=True)
off = App(build, testapp(build) + args, profile=False)
rows = []
try:
    on.wait_line("ready")
    off.wait_line("ready")
    t0 = time.monotonic()
    while True:
        t = time.monotonic() - t0
        st = on.status()
        rows.append((t, rss_bytes(on.proc.pid), rss_bytes(off.proc.pid),
                     st["self"].get("mem_bytes"), st["self"].get("cpu_s")))
        if t >= duration:
            break
        time.sleep(min(interval, max(0.1, duration - t)))
finally:
    on.stop()
    off.stop()

MiB = 2 ** 20
print(f"TestApp demo (all workloads, 50 MB/s allocations, a slow leak) for {duration:g} s, with and "
      f"without clrscope side by side (all profiles); RSS sampled every {interval:g} s")
print()
print("| t (s) | RSS with (MiB) | RSS without (MiB) | extra (MiB) | clrscope accounted (MiB) | "
      "clrscope threads CPU (s) |")
print("|---|---|---|---|---|---|")
for t, a, b, mem, cpu in rows:
    acc = f"{mem / MiB:.1f}" if mem is not None else "–"
    print(f"| {t:.0f} | {a / MiB:.1f} | {b / MiB:.1f} | {(a - b) / MiB:+.1f} | {acc} | "
          f"{cpu if cpu is not None else 0:.2f} |")
emit("rss_growth", "extra_end", (rows[-1][1] - rows[-1][2]) / MiB, "MiB", seconds=duration)
emit("rss_growth", "extra_max", max(a - b for _, a, b, _, _ in rows) / MiB, "MiB",
     seconds=duration)
if rows[-1][3] is not None:
    emit("rss_growth", "accounted_end", rows[-1][3] / MiB, "MiB")
late = [r for r in rows if r[0] >= min(120, duration / 2)]
if len(late) >= 2:
    (t1, a1, b1, m1, _), (t2, a2, b2, m2, _) = late[0], late[-1]
    minutes = (t2 - t1) / 60
    print()
    print(f"growth from t={t1:.0f} s to t={t2:.0f} s: extra RSS {((a2 - b2) - (a1 - b1)) / MiB / minutes:+.2f} "
          f"MiB/min" + (f", accounted {(m2 - m1) / MiB / minutes:+.2f} MiB/min" if m1 is not None
                        and m2 is not None else ""))
    emit("rss_growth", "growth", ((a2 - b2) - (a1 - b1)) / MiB / minutes, "MiB/min",
         since_s=t1)
    if m1 is not None and m2 is not None:
        emit("rss_growth", "accounted_growth", (m2 - m1) / MiB / minutes, "MiB/min", since_s=t1)
