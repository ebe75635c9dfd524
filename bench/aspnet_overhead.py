#!/usr/bin/env python3
"""ASP.NET Core under wrk, with and without clrscope, in one run (see aspnet_overhead.sh).

Paired design: this machine's speed drifts by up to 2x from one minute to the next (a shared
VM), so runs one after another cannot show a 1 % cost. Each round starts, per configuration, the
WebApp (Kestrel, tests/apps/WebApp) twice, once with the configuration and once without any
profiler, pinned to the same core (PIN=1, the default on 2+ cores; wrk runs on another core),
and drives both at the same time, each with its own wrk (1 thread, CONNS connections), over a mix
of /json, /alloc and /cpu: warm-up WARMUP seconds, then DURATION seconds measured. Both servers
are saturated and share the core, so what the profiler costs shows up as throughput lost to the
paired server. Per server: requests/s and p99 latency (wrk), and CPU seconds per 1000 requests
(its own /stats). WRK_PACE_MS=N (passed to bench/webapp_mix.lua) makes each connection wait N ms
between a response and its next request instead: both servers then run below saturation, and
p99 is the requests' own latency rather than the length of a queue (which, saturated, follows
throughput). Each figure is divided by the paired server's; the table gives the median and
the interquartile range of those ratios over the rounds, plus the CPU share of clrscope's own
threads (/api/v1/status; the signal handler's time is spent on the app's threads and shows in the
CPU-per-request ratio) and the extra resident memory against the paired server; the unprofiled
servers' context switches per request (each one dearer with a perf event per thread:
bench/switch_cost.c), and the CPU clock clrscope's sampler used at the end (auto:
docs/internals/sampler.md).

The configuration "unprofiled" is a second server without any profiler, paired like the others:
its row is the noise floor of the pairing itself (an A/A comparison), the size of difference this
machine cannot tell from nothing.
"""
import glob
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import emit  # noqa: E402

# the section of results.md these figures go to (bench/run.sh runs this script twice)
SECTION = os.environ.get("BENCH_SECTION", "aspnet_overhead")
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
WEBAPP = sys.argv[2] if len(sys.argv) > 2 else os.path.join(BUILD, "apps", "webapp", "WebApp.dll")
ROUNDS = int(os.environ.get("ROUNDS", "4"))
DURATION = int(os.environ.get("DURATION", "8"))
WARMUP = int(os.environ.get("WARMUP", "4"))
CONNS = int(os.environ.get("CONNS", "16"))
# PIN=1 (the default on 2+ cores): the server (and clrscope inside it) on one core, wrk on another,
# so the two do not steal each other's time slices; throughput then tracks the server's CPU cost.
PIN = os.environ.get("PIN", "1" if (os.cpu_count() or 1) >= 2 else "0") == "1"
SERVER_CPU = ["taskset", "-c", "1"] if PIN else []
WRK_CPU = ["taskset", "-c", "0"] if PIN else []
# a configuration: none, unprofiled (A/A), all, dotnet-trace, or a CLRSCOPE_PROFILES value,
# optionally followed by ";VAR=value" settings for that configuration ("cpu;CLRSCOPE_CPU_HZ=50");
# separated by commas (so a profile list inside one configuration is written with "+": "cpu+wall")
CONFIGS = [c.replace("+", ",") for c in os.environ.get(
    "CONFIGS", "none,cpu,wall,alloc,live,gc,exceptions,lock,all,dotnet-trace").split(",")]
LAUNCHER = os.path.join(BUILD, "clrscope")
# configurations whose server runs without clrscope (no launcher, no dashboard to ask)
WITHOUT_CLRSCOPE = ("none", "unprofiled", "dotnet-trace")
# dotnet-trace (installed by aspnet_overhead.sh when NuGet has it): the same server traced with its
# default-equivalent profiles (EventPipe SampleProfiler thread-time sampling + common runtime events)
DOTNET_TRACE = os.environ.get("DOTNET_TRACE", "")
if not (DOTNET_TRACE and os.access(DOTNET_TRACE, os.X_OK)):
    CONFIGS = [c for c in CONFIGS if c != "dotnet-trace"]

WRK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webapp_mix.lua")


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


def context_switches(pid):
    """The process's context switches so far (its live threads', voluntary and not): what a
    perf event per thread makes dearer (bench/switch_cost.c)."""
    n = 0
    for st in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(st) as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        n += int(line.split()[1])
        except OSError:
            pass  # a thread that ended meanwhile
    return n


def wrk(base, seconds, script):
    out = subprocess.run(WRK_CPU + ["wrk", "-t1", f"-c{CONNS}", f"-d{seconds}s", "--latency", "-s", script,
                          base], capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p99, int(errors.group(1)) if errors else 0


class Server:
    """One WebApp process, pinned to SERVER_CPU, with clrscope (cfg = a profile list or "all"),
    without it ("none"), or traced by dotnet-trace (pinned to the same core: its cost counts)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.tracer = None
        self.trace_out = None
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1")
        cmd = ["dotnet", WEBAPP, "--urls", self.base]
        if cfg not in WITHOUT_CLRSCOPE:
            # "cpu;CLRSCOPE_CPU_HZ=50": a profile list, then variables for that configuration
            profiles, *extra = cfg.split(";")
            env.update(CLRSCOPE_PORT="0", CLRSCOPE_LOG_LEVEL="warn")
            if profiles != "all":
                env["CLRSCOPE_PROFILES"] = profiles
            env.update(kv.split("=", 1) for kv in extra if "=" in kv)
            cmd = [LAUNCHER, "run", "--"] + cmd
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(SERVER_CPU + cmd, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        deadline = time.time() + 60
        while True:
            try:
                if get(self.base + "/health", 1) == b"ok":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.err.seek(0)
                raise RuntimeError(f"{cfg}: server did not start: "
                                   f"{self.err.read().decode()[-2000:]}")
            time.sleep(0.1)
        self.dash = None
        if cfg not in WITHOUT_CLRSCOPE:
            self.err.seek(0)
            m = re.search(rb"dashboard (http://[\d.:]+/)", self.err.read())
            self.dash = m.group(1).decode() if m else None
        if cfg == "dotnet-trace":
            self.trace_out = tempfile.mkdtemp(prefix="clrscope-bench-trace-")
            self.tracer = subprocess.Popen(
                SERVER_CPU + [DOTNET_TRACE, "collect", "-p", str(self.proc.pid), "--profile",
                              "dotnet-sampled-thread-time,dotnet-common", "-o",
                              os.path.join(self.trace_out, "trace.nettrace")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            time.sleep(2)

    def snapshot(self):
        st = json.loads(get(self.base + "/stats"))
        st["switches"] = context_switches(self.proc.pid)
        if self.dash:
            status = json.loads(get(self.dash + "api/v1/status"))
            me = status["self"]
            st["self_cpu_s"] = me["cpu_s"]
            st["timer"] = me.get("signal_sampler", {}).get("timer", "-")
            st["budget"] = status.get("budget")
        return st

    def stop(self):
        if self.tracer:
            self.tracer.send_signal(signal.SIGINT)
            try:
                self.tracer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.tracer.kill()
                self.tracer.wait()
            subprocess.run(["rm", "-rf", self.trace_out])
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load_all(servers, seconds, script):
    """wrk against every server at once (one wrk each); returns their results in order."""
    out = [None] * len(servers)

    def one(i):
        out[i] = wrk(servers[i].base, seconds, script)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(servers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def paired_run(cfg, script, flip):
    """The configuration and a server without profiler side by side on the same core, under the
    same load at the same time: the machine's moment-to-moment speed affects both alike."""
    servers = []
    try:
        for c in (["none", cfg] if not flip else [cfg, "none"]):
            servers.append(Server(c))
        load_all(servers, WARMUP, script)
        s0 = [s.snapshot() for s in servers]
        loads = load_all(servers, DURATION, script)
        s1 = [s.snapshot() for s in servers]
        res = {}
        for srv, a, b, (rps, p99, errors) in zip(servers, s0, s1, loads):
            r = {"rps": rps, "p99_ms": p99, "errors": errors,
                 "cpu_per_1k": (b["cpu_s"] - a["cpu_s"]) / max(1, b["served"] - a["served"]) * 1000,
                 "rss": rss_bytes(srv.proc.pid)}
            if "gc_pause_ms" in a and b["gen0"] > a["gen0"]:
                r["pause_per_gc_ms"] = (b["gc_pause_ms"] - a["gc_pause_ms"]) / (b["gen0"] - a["gen0"])
            r["switches_per_req"] = (b["switches"] - a["switches"]) / max(1, b["served"] - a["served"])
            if b.get("timer"):
                r["timer"] = b["timer"]
            if (b.get("budget") or {}).get("enabled"):
                r["budget"] = b["budget"]  # the governor's view of the measurement's last 10 s
            if "self_cpu_s" in a and "self_cpu_s" in b:
                r["self_cpu_share"] = ((b["self_cpu_s"] - a["self_cpu_s"])
                                       / max(1e-9, b["cpu_s"] - a["cpu_s"]))
            res[srv.cfg] = r
        return res["none"], res[cfg]
    finally:
        for s in servers:
            s.stop()


def quart(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[1], q[0], q[2]


BUDGET_SOURCES = ("threads", "callbacks", "runtime_events", "suspensions", "signal_handler",
                  "perf_events")


def budget_table(cfgs, runs, base_of):
    """What the overhead governor counted, by source, in the last 10 s of each measurement
    (/api/v1/status budget; medians over rounds), beside the paired CPU per request: the
    governor's sum is a lower bound (docs/overhead-budget.md, "What is counted")."""
    rows = [c for c in cfgs if any(x.get("budget") for x in runs[c])]
    if not rows:
        return
    print()
    print("What the governor counted in the last 10 s of each measurement, as shares of the "
          "server's CPU (medians over rounds), beside the paired ratio of CPU per request:")
    print()
    print("| configuration | budget | counted | " + " | ".join(BUDGET_SOURCES) +
          " | allocation events on | wall slowdown | cpu slowdown | server CPU per request |")
    print("|---|---|---|" + "---|" * len(BUDGET_SOURCES) + "---|---|---|---|")
    for cfg in rows:
        bs = [x["budget"] for x in runs[cfg] if x.get("budget")]

        def med(f):
            return statistics.median(f(b) for b in bs)
        cells = [f"{med(lambda b: b['target']) * 100:g} %",
                 f"{med(lambda b: b['measured']) * 100:.2f} %"]
        for src in BUDGET_SOURCES:
            cells.append(f"{med(lambda b: b['by_source'].get(src, 0)) * 100:.2f} %")
            emit(SECTION, f"{cfg}.budget.{src}", med(lambda b: b["by_source"].get(src, 0)) * 100,
                 "%")
        emit(SECTION, f"{cfg}.budget.measured", med(lambda b: b["measured"]) * 100, "%")
        cells.append(f"{med(lambda b: b['sources']['alloc'].get('on_fraction_window', 1)):.2f}")
        cells.append(f"{med(lambda b: b['sources']['wall'].get('slowdown', 1)):g}")
        cells.append(f"{med(lambda b: b['sources'].get('cpu', {}).get('slowdown', 1)):g}")
        m, lo, hi = quart([a["cpu_per_1k"] / b["cpu_per_1k"]
                           for a, b in zip(runs[cfg], base_of[cfg])])
        cells.append(f"{m:.3f} ({lo:.3f}..{hi:.3f})")
        print(f"| {cfg} | " + " | ".join(cells) + " |")


def main():
    cfgs = [c for c in CONFIGS if c != "none"]
    runs = {c: [] for c in cfgs}
    base_of = {c: [] for c in cfgs}
    for r in range(ROUNDS):
        order = cfgs[r % len(cfgs):] + cfgs[:r % len(cfgs)]
        for cfg in order:
            b, x = paired_run(cfg, WRK_SCRIPT, flip=bool(r % 2))
            base_of[cfg].append(b)
            runs[cfg].append(x)
        print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr, flush=True)
    if os.environ.get("RAW"):
        with open(os.environ["RAW"], "w") as f:
            json.dump({"runs": runs, "baselines": base_of}, f, indent=1)
    base = [x for c in cfgs for x in base_of[c]]
    print(f"ASP.NET Core (Kestrel, tests/apps/WebApp), mix of /json /alloc /cpu; each configuration "
          f"runs side by side with a server without profiler, both " +
          ("pinned to core 1 (wrk on core 0)" if PIN else "on all cores") +
          f", each under its own wrk -t1 -c{CONNS} at the same time" +
          (f" (each connection pausing {os.environ['WRK_PACE_MS']} ms between requests: below "
           f"saturation)" if os.environ.get("WRK_PACE_MS") else "") +
          f", {DURATION} s after a "
          f"{WARMUP} s warm-up; {ROUNDS} rounds; ratio = configuration / its paired server "
          f"without profiler; median (IQR).")
    emit(SECTION, "none.rps", statistics.median(x["rps"] for x in base), "req/s")
    emit(SECTION, "none.p99", statistics.median(x["p99_ms"] for x in base), "ms")
    emit(SECTION, "none.cpu_per_1k", statistics.median(x["cpu_per_1k"] for x in base) * 1000,
         "ms")
    emit(SECTION, "none.switches_per_request",
         statistics.median(x["switches_per_req"] for x in base), "")
    print(f"no profiler: {statistics.median(x['rps'] for x in base):.0f} req/s, p99 "
          f"{statistics.median(x['p99_ms'] for x in base):.2f} ms, "
          f"{statistics.median(x['cpu_per_1k'] for x in base) * 1000:.1f} ms CPU per 1000 requests, "
          f"RSS {statistics.median(x['rss'] for x in base) / 2**20:.0f} MiB, "
          f"{statistics.median(x['switches_per_req'] for x in base):.2f} context switches per "
          f"request")
    print()
    pauses = [x["pause_per_gc_ms"] for x in base if "pause_per_gc_ms" in x]
    if pauses:
        print(f"GC pause without profiler: {statistics.median(pauses) * 1000:.0f} us per collection")
        emit(SECTION, "none.gc_pause", statistics.median(pauses) * 1000, "us")
    print()
    print("| profiles | throughput | p99 latency | server CPU per request | GC pause per collection "
          "| clrscope threads' CPU share | RSS delta | CPU clock at the end |")
    print("|---|---|---|---|---|---|---|---|")
    for cfg in cfgs:
        cells = []
        n = len(runs[cfg])
        for key, figure in (("rps", "throughput"), ("p99_ms", "p99"),
                            ("cpu_per_1k", "cpu_per_request")):
            m, lo, hi = quart([a[key] / b[key] for a, b in zip(runs[cfg], base_of[cfg])])
            cells.append(f"{m:.3f} ({lo:.3f}..{hi:.3f})")
            emit(SECTION, f"{cfg}.{figure}", m, "ratio", lo=lo, hi=hi, n=n)
        pr = [a["pause_per_gc_ms"] / b["pause_per_gc_ms"] for a, b in zip(runs[cfg], base_of[cfg])
              if a.get("pause_per_gc_ms") and b.get("pause_per_gc_ms")]
        if pr:
            m, lo, hi = quart(pr)
            cells.append(f"{m:.3f} ({lo:.3f}..{hi:.3f})")
            emit(SECTION, f"{cfg}.gc_pause", m, "ratio", lo=lo, hi=hi, n=len(pr))
        else:
            cells.append("–")
        share = [x.get("self_cpu_share") for x in runs[cfg] if x.get("self_cpu_share") is not None]
        drss = [a["rss"] - b["rss"] for a, b in zip(runs[cfg], base_of[cfg])]
        cells.append(f"{statistics.median(share) * 100:.2f} %" if share else "–")
        cells.append(f"{statistics.median(drss) / 2**20:+.1f} MiB")
        if share:
            emit(SECTION, f"{cfg}.self_cpu_share", statistics.median(share) * 100, "%")
        emit(SECTION, f"{cfg}.rss_delta", statistics.median(drss) / 2**20, "MiB")
        timers = [x["timer"] for x in runs[cfg] if x.get("timer")]
        cells.append(", ".join(f"{t} ×{timers.count(t)}" for t in sorted(set(timers))) or "–")
        name = {"all": "all (default)",
                "unprofiled": "unprofiled (A/A: a second server without profiler)",
                "dotnet-trace": "dotnet-trace (sampled-thread-time + common)"}.get(cfg, cfg)
        print(f"| {name} | " + " | ".join(cells) + " |")
    budget_table(cfgs, runs, base_of)
    errs = sum(x["errors"] for rs in runs.values() for x in rs)
    print()
    if not (DOTNET_TRACE and os.access(DOTNET_TRACE, os.X_OK)):
        print("dotnet-trace: not installed (NuGet had no dotnet-trace), no comparison row.")
    print("Datadog's native profiler (Datadog.Trace.Bundle) is not on this machine's NuGet "
          "mirror: no comparison with it (dotnet-gcdump is compared in gcdump_bench when it can "
          "be had).")
    print(f"non-2xx responses in all runs: {errs}; load average at end: "
          f"{open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    main()
