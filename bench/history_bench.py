#!/usr/bin/env python3
"""The history on disk (docs/history.md): what it writes and what reading it back takes.

1. Bytes per minute and the writer's CPU: the WebApp (Kestrel) with every profile on, driven by
   wrk (1 thread, 16 connections, bench/webapp_mix.lua) for BENCH_SECONDS (default 120) with a
   segment every SEGMENT_S (default 20): the segments' bytes per minute of run, and the CPU time
   of the clrscope-hist thread against the process's (status history.cpu_s).
2. A day opened: HOURS (default 24) of one-minute segments, each a copy of the largest segment of
   part 1 re-stamped (so each holds a real server minute), are placed in a fresh app's own history
   directory; then /api/v1/flamegraph over the whole span is timed (REPEAT times, default 3), cold
   and warm page cache alike, with the segments read and the tree's nodes.

   bench/history_bench.py BUILD_DIR WEBAPP_DLL"""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import App, cpu_seconds, emit, get_json, testapp  # noqa: E402

build, webapp = sys.argv[1], sys.argv[2]
SECONDS = float(os.environ.get("BENCH_SECONDS", "120"))
SEGMENT_S = int(os.environ.get("SEGMENT_S", "20"))
HOURS = float(os.environ.get("HOURS", "24"))
REPEAT = int(os.environ.get("REPEAT", "3"))
here = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uv(x):
    out = b""
    while True:
        b = x & 0x7F
        x >>= 7
        out += bytes([b | (0x80 if x else 0)])
        if not x:
            return out


def read_uv(p, i):
    x, shift = 0, 0
    while True:
        c = p[i]
        i += 1
        x |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return x, i


def restamp(seg, t_from, t_to):
    """The segment with its span replaced (docs/history.md: the payload's first two numbers)."""
    p = zlib.decompress(seg[24:])
    _, i = read_uv(p, 0)
    _, i = read_uv(p, i)
    p = uv(t_from) + uv(t_to) + p[i:]
    z = zlib.compress(p, 6)
    return seg[:12] + struct.pack("<III", len(p), len(z), zlib.crc32(z)) + z


# ---- 1. bytes per minute on the server ----
hdir = tempfile.mkdtemp(prefix="clrscope-history-bench-")
port = free_port()
base = f"http://127.0.0.1:{port}"
app = App(build, ["dotnet", webapp, "--urls", base],
          env={"CLRSCOPE_HISTORY_DIR": hdir, "CLRSCOPE_HISTORY_SEGMENT_S": str(SEGMENT_S)})
try:
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/json", timeout=2).read()
            break
        except OSError:
            time.sleep(0.2)
    t0 = time.time()
    wrk = subprocess.run(["wrk", "-t1", "-c16", f"-d{int(SECONDS)}s", "-s",
                          os.path.join(here, "webapp_mix.lua"), base],
                         capture_output=True, text=True)
    time.sleep(SEGMENT_S + 3)  # the last whole segment written
    st = app.status()
    hist = st["history"]
    proc_cpu = cpu_seconds(app.proc.pid)
    elapsed = time.time() - t0
finally:
    app.stop()
pdir = os.path.join(hdir, hist["process_dir"])
segs = sorted(n for n in os.listdir(pdir) if n.endswith(".clrh"))
sizes = {n: os.path.getsize(os.path.join(pdir, n)) for n in segs}
span = sum(int(n.split("-")[1].split(".")[0]) - int(n.split("-")[0]) for n in segs)
per_min = sum(sizes.values()) / span * 60 if span else 0
largest = max(segs, key=lambda n: sizes[n] / max(1, int(n.split("-")[1].split(".")[0]) - int(n.split("-")[0])))
with open(os.path.join(pdir, largest), "rb") as f:
    sample = f.read()
print(f"server under wrk, every profile on, {len(segs)} segments of {SEGMENT_S} s over {span} s:")
print(f"  {per_min / 1024:.1f} KiB per minute on disk (largest segment {sizes[largest]} bytes "
      f"for {SEGMENT_S} s), {hist['written']} written, {hist['write_failures']} failed")
print(f"  clrscope-hist CPU {hist['cpu_s'] * 1000:.1f} ms in {elapsed:.0f} s = "
      f"{hist['cpu_s'] / proc_cpu * 100:.3f} % of the process's CPU ({proc_cpu:.1f} s)")
emit("history", "bytes_per_minute", round(per_min), "bytes")
emit("history", "writer_cpu_share", round(hist["cpu_s"] / proc_cpu * 100, 4), "%")
shutil.rmtree(hdir, ignore_errors=True)

# ---- 2. a day of segments opened ----
hdir = tempfile.mkdtemp(prefix="clrscope-history-bench-")
app = App(build, testapp(build) + ["wait", "--seconds", "600"],
          env={"CLRSCOPE_HISTORY_DIR": hdir, "CLRSCOPE_HISTORY_MAX_MB": "100000",
               "CLRSCOPE_HISTORY_MAX_AGE": "48h"})
try:
    url = app.dashboard()
    st = get_json(url + "api/v1/status")["history"]
    pdir = os.path.join(hdir, st["process_dir"])
    now = int(time.time())
    end = now - 1200 - now % 60  # past the memory's 15 minutes
    n = int(HOURS * 60)
    written = 0
    for k in range(n):
        t = end - (n - k) * 60
        data = restamp(sample, t, t + 60)
        with open(os.path.join(pdir, f"{t}-{t + 60}.clrh"), "wb") as f:
            f.write(data)
        written += len(data)
    q = f"api/v1/flamegraph?type=cpu&from={end - n * 60}&to={end}"
    times = []
    for _ in range(REPEAT):
        t0 = time.monotonic()
        r = get_json(url + q, timeout=120)
        times.append(time.monotonic() - t0)
    hist = get_json(url + "api/v1/status")["history"]
finally:
    app.stop()
    shutil.rmtree(hdir, ignore_errors=True)
print(f"{HOURS:g} h of one-minute segments ({n} files, {written / 1048576:.1f} MiB) opened as a "
      f"cpu flame graph: {', '.join(f'{t:.2f}' for t in times)} s; from_disk {r['from_disk']}, "
      f"{r['nodes']} nodes, skipped {hist['skipped']}")
emit("history", "day_open_s", round(min(times), 3), "s", hi=round(max(times), 3), n=REPEAT)
