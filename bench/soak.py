#!/usr/bin/env python3
"""A long run of a busy ASP.NET Core server under clrscope, every profile on, exporting to a fake
Datadog agent, with what its users do meanwhile: the dashboard's answers every 10 s, a CPU pprof
every minute, a heap snapshot every 10 minutes. What weeks in production would show, compressed:
at the end it says whether anything was lost, failed or kept growing.

  - the server answered throughout (wrk's errors and non-2xx replies);
  - every export upload arrived (the fake agent's count against the period), none failed;
  - every heap snapshot completed;
  - the status counters of data given up (every field named dropped*, lost*, overflow*,
    *_full, failures) over the second half, when every buffer has long reached its size;
  - RSS at the start of the second half and at the end (growth per hour), clrscope's own CPU.

Usage: bench/soak.py BUILD [MINUTES]   (default 120; the server is paced below saturation: wrk,
16 connections, WRK_PACE_MS=20 between a reply and the next request). Prints one summary; exits 1
when something was lost or failed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from benchlib import App, emit, get, get_json, rss_bytes  # noqa: E402
from fake_agent import FakeAgent  # noqa: E402

GIVEN_UP = re.compile(r"(^|\.)(dropped\w*|lost\w*|overflow\w*|\w*_full|failures)$")


def numbers(obj, prefix=""):
    """Every number in a JSON object, by its dotted path."""
    out = {}
    stack = [(prefix, obj)]
    while stack:
        p, o = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                stack.append((p + "." + k if p else k, v))
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            out[p] = o
    return out


def post(url):
    req = urllib.request.Request(url, method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 120
    webapp = os.path.join(build, "apps", "webapp", "WebApp.dll")
    agent = FakeAgent("ok").start()
    period = 10
    port = 18000 + os.getpid() % 1000
    base = f"http://127.0.0.1:{port}"
    app = App(build, ["dotnet", webapp, "--urls", base],
              env={"DD_PROFILING_ENABLED": "true", "DD_PROFILING_UPLOAD_PERIOD": str(period),
                   "DD_TRACE_AGENT_URL": agent.url, "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0",
                   "CLRSCOPE_LOG_LEVEL": "info"})
    url = app.dashboard()
    if not url:
        sys.exit("no dashboard")
    for _ in range(300):
        try:
            get(base + "/health", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    t0 = time.monotonic()
    end = t0 + minutes * 60
    half = t0 + minutes * 30
    lua = os.path.join(HERE, "webapp_mix.lua")
    wrk = subprocess.Popen(["wrk", "-t1", "-c16", f"-d{int(minutes * 60)}s", "-s", lua, base],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, WRK_PACE_MS=os.environ.get("WRK_PACE_MS", "20")))
    answers = ["api/v1/status", "api/v1/flamegraph?type=cpu", "api/v1/top?type=alloc-bytes",
               "api/v1/live", "api/v1/exceptions", "api/v1/locks", "api/v1/gc",
               "api/v1/threads", "metrics"]
    failed_answers, snapshots, snapshot_errors, pprofs = [], 0, [], 0
    mid = None
    next_pprof = t0 + 60
    next_snap = t0 + 300
    while time.monotonic() < end and app.proc.poll() is None:
        for a in answers:
            try:
                get(url + a, timeout=30)
            except OSError as e:
                failed_answers.append(f"{a}: {e}")
        now = time.monotonic()
        if now >= next_pprof:
            next_pprof += 60
            try:
                get(url + "debug/pprof/profile?seconds=60&wait=0", timeout=60)
                pprofs += 1
            except OSError as e:
                failed_answers.append(f"pprof: {e}")
        if now >= next_snap:
            next_snap += 600
            code, body = post(url + "api/v1/gcdump")
            if code != 202:
                snapshot_errors.append(f"start: HTTP {code}")
            else:
                for _ in range(600):
                    s = get_json(url + f"api/v1/gcdump/{body['id']}")
                    if s.get("status") != "running":
                        break
                    time.sleep(1)
                if s.get("status") == "done":
                    snapshots += 1
                    urllib.request.urlopen(urllib.request.Request(
                        url + f"api/v1/gcdump/{body['id']}", method="DELETE"), timeout=30)
                else:
                    snapshot_errors.append(f"{body['id']}: {s.get('status')} {s.get('error', '')}")
        if mid is None and now >= half:
            mid = (now, rss_bytes(app.proc.pid), get_json(url + "api/v1/status"))
        time.sleep(10)
    alive = app.proc.poll() is None
    last = (time.monotonic(), rss_bytes(app.proc.pid) if alive else 0,
            get_json(url + "api/v1/status") if alive else {})
    wrk.terminate()
    wrk_out = wrk.communicate(timeout=60)[0]
    app.stop()
    uploads = len(agent.requests)
    agent.stop()
    hours = (last[0] - t0) / 3600
    errors = re.findall(r"(Socket errors: .*|Non-2xx or 3xx responses: \d+)", wrk_out)
    reqs = re.search(r"(\d+) requests in", wrk_out)
    given_up = {}
    if mid and last[2]:
        a, b = numbers(mid[2]), numbers(last[2])
        given_up = {k: b[k] - a.get(k, 0) for k in b if GIVEN_UP.search(k) and b[k] != a.get(k, 0)}
    exp = last[2].get("export", {}) if last[2] else {}
    expected_uploads = int((last[0] - t0) / period) - 2
    problems = []
    if not alive:
        problems.append("the app exited")
    if errors:
        problems.append("wrk: " + "; ".join(errors))
    if uploads < expected_uploads or exp.get("failures"):
        problems.append(f"export: {uploads} uploads arrived, {expected_uploads} expected, "
                        f"{exp.get('failures')} failures")
    if snapshot_errors:
        problems.append("heap snapshots: " + "; ".join(snapshot_errors))
    if failed_answers:
        problems.append(f"{len(failed_answers)} answers failed: " + "; ".join(failed_answers[:3]))
    if given_up:
        problems.append("given up in the second half: " + json.dumps(given_up))
    growth = (last[1] - mid[1]) / 2**20 / ((last[0] - mid[0]) / 3600) if mid and last[1] else None
    print(f"soak: {minutes:g} min, {reqs.group(1) if reqs else '?'} requests, {uploads} uploads, "
          f"{snapshots} heap snapshots, {pprofs} pprof downloads")
    if mid and last[1]:
        print(f"  RSS {mid[1] / 2**20:.0f} MB at half time, {last[1] / 2**20:.0f} MB at the end "
              f"({growth:+.1f} MB/hour); clrscope's CPU {last[2]['self']['cpu_s']:.1f} s "
              f"in {hours:.2f} h")
    emit("soak", "RSS growth in the second half", round(growth, 1) if growth is not None else None,
         "MB/hour")
    for p in problems:
        print("  PROBLEM: " + p)
    print("  nothing lost" if not problems else "")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
