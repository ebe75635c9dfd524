#!/usr/bin/env python3
"""ASP.NET Core under wrk, with and without clrscope, in one run (see aspnet_overhead.sh).

Each round starts the WebApp (Kestrel, tests/apps/WebApp) once per configuration, in a rotated
order, warms it up, then drives it with wrk (1 thread, CONNS connections) for DURATION seconds
over a mix of /json, /alloc and /cpu. Per run: requests/s and p99 latency (wrk), and the server's
CPU seconds per 1000 requests (its own /stats). Each figure of a configuration is divided by the
same round's no-profiler run; the table gives the median and the interquartile range of those
ratios over the rounds, plus the CPU share of clrscope's own threads (/api/v1/status; the
signal handler's time is spent on the app's threads and shows in the CPU-per-request ratio) and
the server's extra resident memory against the same round's run without the profiler.
"""
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
WEBAPP = sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "apps", "webapp", "WebApp.dll")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = int(os.environ.get("DURATION", "6"))
WARMUP = int(os.environ.get("WARMUP", "2"))
CONNS = int(os.environ.get("CONNS", "16"))
CONFIGS = os.environ.get("CONFIGS",
                         "none,cpu,wall,alloc,live,gc,exceptions,lock,all,dotnet-trace").split(",")
LAUNCHER = os.path.join(BUILD, "clrscope")
# dotnet-trace (installed by aspnet_overhead.sh when NuGet has it): the same server traced with its
# default-equivalent profiles (EventPipe SampleProfiler thread-time sampling + common runtime events)
DOTNET_TRACE = os.environ.get("DOTNET_TRACE", "")
if not (DOTNET_TRACE and os.access(DOTNET_TRACE, os.X_OK)):
    CONFIGS = [c for c in CONFIGS if c != "dotnet-trace"]

WRK_SCRIPT = """
local paths = {"/json", "/alloc", "/cpu"}
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wrk(base, seconds, script):
    out = subprocess.run(["wrk", "-t1", f"-c{CONNS}", f"-d{seconds}s", "--latency", "-s", script,
                          base], capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p99, int(errors.group(1)) if errors else 0


def one_run(cfg, script):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1")
    cmd = ["dotnet", WEBAPP, "--urls", base]
    tracer = None
    if cfg not in ("none", "dotnet-trace"):
        env.update(CLRSCOPE_PORT="0", CLRSCOPE_LOG_LEVEL="warn")
        if cfg != "all":
            env["CLRSCOPE_PROFILES"] = cfg
        cmd = [LAUNCHER, "run", "--"] + cmd
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 60
        while True:
            try:
                if get(base + "/health", 1) == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                err.seek(0)
                raise RuntimeError(f"{cfg}: server did not start: {err.read().decode()[-2000:]}")
            time.sleep(0.1)
        if cfg == "dotnet-trace":
            trace_out = tempfile.mkdtemp(prefix="clrscope-bench-trace-")
            tracer = subprocess.Popen([DOTNET_TRACE, "collect", "-p", str(proc.pid), "--profile",
                                       "dotnet-sampled-thread-time,dotnet-common", "-o",
                                       os.path.join(trace_out, "trace.nettrace")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      stdin=subprocess.DEVNULL)
            time.sleep(2)
        wrk(base, WARMUP, script)
        dash = None
        if cfg not in ("none", "dotnet-trace"):
            err.seek(0)
            m = re.search(rb"dashboard (http://[\d.:]+/)", err.read())
            dash = m.group(1).decode() if m else None
        self0 = json.loads(get(dash + "api/v1/status"))["self"]["cpu_s"] if dash else None
        s0 = json.loads(get(base + "/stats"))
        rps, p99, errors = wrk(base, DURATION, script)
        s1 = json.loads(get(base + "/stats"))
        res = {"rps": rps, "p99_ms": p99, "errors": errors,
               "cpu_per_1k": (s1["cpu_s"] - s0["cpu_s"]) / max(1, s1["served"] - s0["served"]) * 1000,
               "rss": rss_bytes(proc.pid)}
        if dash:
            self1 = json.loads(get(dash + "api/v1/status"))["self"]["cpu_s"]
            res["self_cpu_share"] = (self1 - self0) / max(1e-9, s1["cpu_s"] - s0["cpu_s"])
        return res
    finally:
        if tracer:
            tracer.send_signal(signal.SIGINT)
            try:
                tracer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                tracer.kill()
                tracer.wait()
            subprocess.run(["rm", "-rf", trace_out])
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def quart(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[1], q[0], q[2]


def main():
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(WRK_SCRIPT)
    script.close()
    runs = {c: [] for c in CONFIGS}
    for r in range(ROUNDS):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for cfg in order:
            runs[cfg].append(one_run(cfg, script.name))
        print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr, flush=True)
    os.unlink(script.name)
    base = runs["none"]
    print(f"ASP.NET Core (Kestrel, tests/apps/WebApp) under wrk -t1 -c{CONNS}, mix of /json /alloc "
          f"/cpu; {ROUNDS} rounds x {DURATION} s per configuration (after {WARMUP} s warm-up), "
          f"alternating; ratio = configuration / no profiler in the same round; median (IQR).")
    print(f"no profiler: {statistics.median(x['rps'] for x in base):.0f} req/s, p99 "
          f"{statistics.median(x['p99_ms'] for x in base):.2f} ms, "
          f"{statistics.median(x['cpu_per_1k'] for x in base) * 1000:.1f} ms CPU per 1000 requests, "
          f"RSS {statistics.median(x['rss'] for x in base) / 2**20:.0f} MiB")
    print()
    print("| profiles | throughput | p99 latency | server CPU per request | clrscope threads' CPU "
          "share | RSS delta |")
    print("|---|---|---|---|---|---|")
    for cfg in CONFIGS:
        if cfg == "none":
            continue
        cells = []
        for key in ("rps", "p99_ms", "cpu_per_1k"):
            m, lo, hi = quart([a[key] / b[key] for a, b in zip(runs[cfg], base)])
            cells.append(f"{m:.3f} ({lo:.3f}..{hi:.3f})")
        share = [x.get("self_cpu_share") for x in runs[cfg] if x.get("self_cpu_share") is not None]
        drss = [a["rss"] - b["rss"] for a, b in zip(runs[cfg], base)]
        cells.append(f"{statistics.median(share) * 100:.2f} %" if share else "–")
        cells.append(f"{statistics.median(drss) / 2**20:+.1f} MiB")
        name = {"all": "all (default)",
                "dotnet-trace": "dotnet-trace (sampled-thread-time + common)"}.get(cfg, cfg)
        print(f"| {name} | " + " | ".join(cells) + " |")
    errs = sum(x["errors"] for rs in runs.values() for x in rs)
    print()
    if not (DOTNET_TRACE and os.access(DOTNET_TRACE, os.X_OK)):
        print("dotnet-trace: not installed (NuGet had no dotnet-trace), no comparison row.")
    print("Datadog's native profiler (Datadog.Trace.Bundle) and dotnet-gcdump are not on this "
          "machine's NuGet mirror: no comparison with them.")
    print(f"non-2xx responses in all runs: {errs}; load average at end: "
          f"{open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    main()
