#!/usr/bin/env python3
"""A long run of a busy ASP.NET Core server under clrscope, every profile on, exporting to a fake
Datadog agent that misbehaves in turns, with what its users do meanwhile. What weeks in
production would show, compressed: at the end it says whether anything was lost, failed or kept
growing.

Meanwhile:
  - wrk drives the server below saturation (16 connections, WRK_PACE_MS=20 between a reply and
    the next request);
  - the dashboard is open in headless Chromium (bench/soak_browser.mjs: polling, a tab a minute,
    a reload every 10 minutes), when node, Chromium and playwright-core are there;
  - the dashboard's JSON answers every 10 s (thread dumps among them);
  - every minute: `go tool pprof` pulls a profile (cpu, heap, allocs, wall in turn) and a
    goroutine?debug=2 thread dump is read;
  - every SOAK_SNAPSHOT_MIN minutes (5): a heap snapshot, its file downloaded, then deleted;
  - the agent changes every SOAK_AGENT_MIN minutes (5): ok, 500, ok, slow (answers after 5 s),
    ok, hang (never answers), ok, down, and again; it is ok for the last two periods.

Beside it, the same server without clrscope under the same load (its own wrk), for the RSS the
app grows by itself (SOAK_BASELINE=0 leaves it out).

Every minute one row: RSS, clrscope's memory by module, open descriptors, threads, the server's
requests per second, clrscope's CPU, the export's counters, the agent's mode, and the baseline
server's RSS and requests per second (SOAK_ROWS names the JSON-lines file; by default one in the
temp directory). At the end:
  - the server answered throughout (wrk's errors and non-2xx replies);
  - the export reconciled, two periods after the load stops with the agent ok: profiles built =
    uploaded + dropped + queued (+1 in flight); uploads = the agent's 2xx answers (but for the
    one sent as the app stops); unanswered drops = the requests the agent left hanging; failed
    attempts >= the agent's 500s; none rejected;
  - every heap snapshot completed and was listed until deleted; every pprof pull and answer
    succeeded; the browser saw no failed request, 5xx or page error;
  - the status counters of data given up (fields named dropped*, lost*, overflow*, *_full,
    failures; the export's apart, reconciled above) did not move in the second half;
  - where the RSS of each server grew in the second half: its mappings by kind (glibc's main
    heap, anonymous: glibc's other arenas and the runtime's heaps, files, stacks) at half time and
    at the end, and the mappings that grew most (from /proc/PID/smaps);
  - RSS, clrscope's memory, descriptors and threads are flat after the first 15 minutes: their
    least-squares slope is within two standard errors of zero, or below 1 MB (1 descriptor, 1
    thread) per hour; or, for RSS, no steeper than the baseline server's by more than that (the
    difference of the two slopes is what clrscope adds).

Usage: bench/soak.py BUILD [MINUTES]   (default 120). Prints the per-10-minute table and one
summary; exits 1 when something was lost, failed or grew.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from benchlib import App, emit, get, get_json, rss_bytes, status_field, wait_http  # noqa: E402
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


def count_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def count_threads(pid):
    return status_field(pid, "Threads")


def smaps(pid):
    """{start address: (size kB, perms, path, Rss kB)} of /proc/PID/smaps ({} when gone)."""
    maps, cur = {}, None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split()
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    lo, hi = head[0].split("-")
                    cur = int(lo, 16)
                    path = head[5] if len(head) > 5 else ""
                    maps[cur] = [(int(hi, 16) - cur) // 1024, head[1], path, 0]
                elif head[0] == "Rss:" and cur is not None:
                    maps[cur][3] = int(head[1])
    except OSError:
        return {}
    return maps


def rss_by_kind(maps):
    """Rss in MB by kind of mapping: glibc's main heap, anonymous, files, stacks."""
    out = {"heap": 0, "anon": 0, "file": 0, "stack": 0}
    for size, perms, path, rss in maps.values():
        kind = ("heap" if path == "[heap]" else "stack" if path.startswith("[stack") else
                "anon" if not path or path.startswith("[anon") else
                "file" if path.startswith("/") else "anon")
        out[kind] += rss / 1024
    return {k: round(v, 1) for k, v in out.items()}


def grown(before, after, top=12):
    """The mappings whose Rss grew most between two smaps() readings, as text lines."""
    rows = []
    for start, (size, perms, path, rss) in after.items():
        old = before.get(start)
        d = rss - (old[3] if old else 0)
        if d > 0:
            rows.append((d, start, size, perms, path, old is None))
    rows.sort(reverse=True)
    return [f"    +{d / 1024:7.1f} MB  {start:012x} {size / 1024:8.1f} MB {perms} "
            f"{path or '(anonymous)'}{' (new)' if new else ''}" for d, start, size, perms, path, new
            in rows[:top]]


def slope(points):
    """Least-squares slope of (x, y) points and its standard error; (None, None) with < 3."""
    n = len(points)
    if n < 3:
        return None, None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None, None
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    resid = sum((y - a - b * x) ** 2 for x, y in points)
    return b, math.sqrt(resid / (n - 2) / sxx)


AGENT_CYCLE = ("ok", "500", "ok", "slow", "ok", "hang", "ok", "down")
PULLS = ("profile", "heap", "allocs", "wall")


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 120
    snap_every = float(os.environ.get("SOAK_SNAPSHOT_MIN", "5")) * 60
    agent_every = float(os.environ.get("SOAK_AGENT_MIN", "5")) * 60
    rows_path = os.environ.get("SOAK_ROWS") or os.path.join(
        tempfile.gettempdir(), f"clrscope-soak-{os.getpid()}.jsonl")
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
    wait_http(base + "/health")
    baseline = bport = None
    if os.environ.get("SOAK_BASELINE", "1") != "0":
        bport = port + 1000
        baseline = App(build, ["dotnet", webapp, "--urls", f"http://127.0.0.1:{bport}"],
                       profile=False)
        wait_http(f"http://127.0.0.1:{bport}/health")
    bserved_prev = None
    t0 = time.monotonic()
    end = t0 + minutes * 60
    half = t0 + minutes * 30
    agent_end = end - 2 * period - 15  # the agent is ok from here on, so the queue can drain
    lua = os.path.join(HERE, "webapp_mix.lua")
    wrk = subprocess.Popen(["wrk", "-t1", "-c16", f"-d{int(minutes * 60)}s", "-s", lua, base],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, WRK_PACE_MS=os.environ.get("WRK_PACE_MS", "20")))
    bwrk = None
    if baseline:
        bwrk = subprocess.Popen(["wrk", "-t1", "-c16", f"-d{int(minutes * 60)}s", "-s", lua,
                                 f"http://127.0.0.1:{bport}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ,
                                         WRK_PACE_MS=os.environ.get("WRK_PACE_MS", "20")))
    browser = None
    node_modules = os.path.join(HERE, "..", "tests", "browser", "node_modules", "playwright-core")
    if shutil.which("node") and os.path.exists(os.environ.get("CHROMIUM", "/usr/bin/chromium")) \
            and os.path.isdir(node_modules):
        browser = subprocess.Popen(["node", os.path.join(HERE, "soak_browser.mjs"), url,
                                    str(int(minutes * 60 - 30))],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    go = shutil.which("go")
    answers = ["api/v1/status", "api/v1/flamegraph?type=cpu", "api/v1/top?type=alloc-bytes",
               "api/v1/live", "api/v1/exceptions", "api/v1/locks", "api/v1/gc",
               "api/v1/threads", "metrics"]
    failed_answers, snapshot_errors = [], []
    snapshots = pulls = dumps = 0
    mid, maps_mid = None, ({}, {})
    next_minute = t0 + 60
    next_snap = t0 + snap_every
    next_mode = t0 + agent_every
    cycle = 0
    rows = []
    served_prev = None
    rows_file = open(rows_path, "w")
    while time.monotonic() < end and app.proc.poll() is None:
        for a in answers:
            try:
                get(url + a, timeout=30)
            except OSError as e:
                failed_answers.append(f"{a}: {e}")
        now = time.monotonic()
        if now >= agent_end and agent.mode != "ok":
            agent.set_mode("ok")
        elif now >= next_mode and now < agent_end:
            next_mode += agent_every
            cycle += 1
            agent.set_mode(AGENT_CYCLE[cycle % len(AGENT_CYCLE)])
        if now >= next_minute:
            minute = round((next_minute - t0) / 60)
            next_minute += 60
            kind = PULLS[minute % len(PULLS)]
            q = "?seconds=10" if kind in ("profile", "wall") else ""
            try:
                if go:
                    r = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=3",
                                        url + "debug/pprof/" + kind + q],
                                       capture_output=True, text=True, timeout=90,
                                       env=dict(os.environ, PPROF_TMPDIR=tempfile.gettempdir()))
                    if r.returncode != 0:
                        raise OSError(f"go tool pprof exited {r.returncode}: {r.stderr[-200:]}")
                else:
                    get(url + "debug/pprof/" + kind + q, timeout=60)
                pulls += 1
            except (OSError, subprocess.TimeoutExpired) as e:
                failed_answers.append(f"pprof {kind}: {e}")
            try:
                get(url + "debug/pprof/goroutine?debug=2", timeout=30)
                dumps += 1
            except OSError as e:
                failed_answers.append(f"thread dump: {e}")
            try:
                st = get_json(url + "api/v1/status")
                stats = get_json(base + "/stats", timeout=5)
            except OSError as e:
                failed_answers.append(f"row: {e}")
                st, stats = None, None
            if st:
                t = time.monotonic()
                served = stats.get("served", 0)
                rps = (served - served_prev[1]) / (t - served_prev[0]) if served_prev else None
                served_prev = (t, served)
                exp = st.get("export", {})
                row = {"min": minute, "rss_mb": rss_bytes(app.proc.pid) / 2**20,
                       "clrscope_mb": st["self"].get("mem_bytes", 0) / 2**20,
                       "mem": {k: round(v / 2**20, 2) for k, v in st["self"].get("mem", {}).items()},
                       "fds": count_fds(app.proc.pid), "threads": count_threads(app.proc.pid),
                       "rss_kinds": rss_by_kind(smaps(app.proc.pid)),
                       "rps": round(rps, 1) if rps is not None else None,
                       "clrscope_cpu_s": st["self"].get("cpu_s"), "agent": agent.mode,
                       "export": {k: exp.get(k) for k in ("profiles", "uploads", "failures",
                                                          "dropped", "queue")}}
                if baseline and baseline.proc.poll() is None:
                    try:
                        bserved = get_json(f"http://127.0.0.1:{bport}/stats", timeout=5)
                        bserved = bserved.get("served", 0)
                        row["rss_base_mb"] = rss_bytes(baseline.proc.pid) / 2**20
                        row["rss_base_kinds"] = rss_by_kind(smaps(baseline.proc.pid))
                        row["rps_base"] = (round((bserved - bserved_prev[1]) /
                                                 (t - bserved_prev[0]), 1)
                                           if bserved_prev else None)
                        bserved_prev = (t, bserved)
                    except OSError as e:
                        failed_answers.append(f"baseline row: {e}")
                rows.append(row)
                rows_file.write(json.dumps(row) + "\n")
                rows_file.flush()
        if now >= next_snap:
            next_snap += snap_every
            code, body = post(url + "api/v1/gcdump")
            if code != 202:
                snapshot_errors.append(f"start: HTTP {code}")
            else:
                sid = body["id"]
                s = {}
                for _ in range(600):
                    s = get_json(url + f"api/v1/gcdump/{sid}")
                    if s.get("status") != "running":
                        break
                    time.sleep(1)
                listed = [x.get("id") for x in get_json(url + "api/v1/gcdump").get("snapshots", [])]
                if s.get("status") != "done":
                    snapshot_errors.append(f"{sid}: {s.get('status')} {s.get('error', '')}")
                elif sid not in listed:
                    snapshot_errors.append(f"{sid}: done but not listed")
                else:
                    try:
                        if not get(url + f"api/v1/gcdump/{sid}/file", timeout=120):
                            raise OSError("empty file")
                        snapshots += 1
                    except OSError as e:
                        snapshot_errors.append(f"{sid} file: {e}")
                    urllib.request.urlopen(urllib.request.Request(
                        url + f"api/v1/gcdump/{sid}", method="DELETE"), timeout=30)
        if mid is None and now >= half:
            mid = (now, rss_bytes(app.proc.pid), get_json(url + "api/v1/status"))
            maps_mid = (smaps(app.proc.pid), smaps(baseline.proc.pid) if baseline else {})
        time.sleep(max(0.0, min(10.0, end - time.monotonic())))
    rows_file.close()
    # wrk ends on its own at the same moment (its summary is wanted); the export gets two more
    # periods with the agent ok, so that every profile is uploaded, dropped or queued when the
    # counts are compared
    try:
        wrk_out = wrk.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        wrk.terminate()
        wrk_out = wrk.communicate(timeout=60)[0]
    if bwrk:
        try:
            bwrk.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            bwrk.terminate()
    agent.set_mode("ok")
    time.sleep(2 * period + 5)
    alive = app.proc.poll() is None
    last = (time.monotonic(), rss_bytes(app.proc.pid) if alive else 0,
            get_json(url + "api/v1/status") if alive else {})
    maps_end = (smaps(app.proc.pid), smaps(baseline.proc.pid) if baseline else {})
    browser_out = None
    if browser:
        try:
            text = browser.communicate(timeout=120)[0]
            lines = [x for x in text.splitlines() if x.startswith("{")]
            browser_out = json.loads(lines[-1]) if lines else {"error": text[-300:]}
        except subprocess.TimeoutExpired:
            browser.kill()
            browser_out = {"error": "the browser did not finish"}
    app.stop()
    if baseline:
        baseline.stop()
    agent.stop()
    by_mode = {}
    for r in agent.requests:
        by_mode[r.mode] = by_mode.get(r.mode, 0) + 1
    hours = (last[0] - t0) / 3600
    errors = re.findall(r"(Socket errors: .*|Non-2xx or 3xx responses: \d+)", wrk_out)
    reqs = re.search(r"(\d+) requests in", wrk_out)
    given_up = {}
    if mid and last[2]:
        a, b = numbers(mid[2]), numbers(last[2])
        given_up = {k: b[k] - a.get(k, 0) for k in b
                    if GIVEN_UP.search(k) and not k.startswith("export.") and b[k] != a.get(k, 0)}
    exp = last[2].get("export", {}) if last[2] else {}
    drops = exp.get("drops", {})
    problems = []
    if not alive:
        problems.append("the app exited")
    if errors:
        problems.append("wrk: " + "; ".join(errors))
    if exp:
        accounted = exp.get("uploads", 0) + exp.get("dropped", 0) + exp.get("queue", 0)
        if not 0 <= exp.get("profiles", 0) - accounted <= 1:
            problems.append(f"export: {exp.get('profiles')} profiles built, {accounted} uploaded, "
                            "dropped or queued")
        answered = by_mode.get("ok", 0) + by_mode.get("slow", 0)
        if not 0 <= answered - exp.get("uploads", 0) <= 1:  # +1: the one sent as the app stops
            problems.append(f"export: {exp.get('uploads')} uploads counted, the agent answered "
                            f"{answered} with 200")
        if drops.get("unanswered", 0) != by_mode.get("hang", 0):
            problems.append(f"export: {drops.get('unanswered')} unanswered drops, the agent left "
                            f"{by_mode.get('hang', 0)} hanging")
        if exp.get("failures", 0) < by_mode.get("500", 0):
            problems.append(f"export: {exp.get('failures')} failed attempts, the agent answered "
                            f"{by_mode.get('500', 0)} with 500")
        if drops.get("rejected"):
            problems.append(f"export: {drops['rejected']} profiles rejected")
    else:
        problems.append("no export status at the end")
    if snapshot_errors:
        problems.append("heap snapshots: " + "; ".join(snapshot_errors))
    if failed_answers:
        problems.append(f"{len(failed_answers)} answers failed: " + "; ".join(failed_answers[:3]))
    if given_up:
        problems.append("given up in the second half: " + json.dumps(given_up))
    if browser_out is not None and (browser_out.get("error") or browser_out.get("failed") or
                                    browser_out.get("server_errors") or
                                    browser_out.get("page_errors")):
        problems.append("browser: " + json.dumps(browser_out))
    settled = [r for r in rows if r["min"] >= 15]
    trends = {}
    for key, unit, floor in (("rss_base_mb", "MB", 1.0), ("rss_mb", "MB", 1.0),
                             ("clrscope_mb", "MB", 1.0), ("fds", "descriptors", 1.0),
                             ("threads", "threads", 1.0)):
        pts = [(r["min"] / 60, r[key]) for r in settled if r.get(key) is not None]
        b, se = slope(pts)
        if b is None:
            continue
        flat = abs(b) <= floor or abs(b) <= 2 * se
        if key == "rss_mb" and not flat and "rss_base_mb" in trends:
            bb, bse = trends["rss_base_mb"][:2]  # what the app grows by itself
            flat = b - bb <= floor or b - bb <= 2 * math.hypot(se, bse)
        trends[key] = (b, se, flat, unit)
        if not flat and key != "rss_base_mb":
            problems.append(f"{key} grows {b:+.2f} {unit}/hour (± {se:.2f}) after minute 15")
    print(f"soak: {minutes:g} min, {reqs.group(1) if reqs else '?'} requests, "
          f"{exp.get('uploads')} uploads, {snapshots} heap snapshots, {pulls} pprof pulls, "
          f"{dumps} thread dumps; agent requests by mode {json.dumps(by_mode)}; export "
          f"profiles {exp.get('profiles')}, failures {exp.get('failures')}, dropped "
          f"{exp.get('dropped')} {json.dumps(drops)}; rows in {rows_path}")
    if browser_out is not None:
        print(f"  browser: {json.dumps(browser_out)}")
    print("  | minute | agent | RSS MB | clrscope MB | fds | threads | req/s | clrscope CPU s "
          "| baseline RSS MB | baseline req/s |")
    print("  |---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["min"] % 10 == 0 or r is rows[-1]:
            base_rss = f"{r['rss_base_mb']:.1f}" if r.get("rss_base_mb") is not None else "-"
            print(f"  | {r['min']} | {r['agent']} | {r['rss_mb']:.1f} | {r['clrscope_mb']:.1f} | "
                  f"{r['fds']} | {r['threads']} | {r['rps']} | {r['clrscope_cpu_s']:.1f} | "
                  f"{base_rss} | {r.get('rps_base', '-')} |")
    for key, (b, se, flat, unit) in trends.items():
        print(f"  {key}: {b:+.2f} ± {se:.2f} {unit}/hour after minute 15 "
              f"({'flat' if flat else 'GROWS'})")
    if mid and last[1]:
        growth = (last[1] - mid[1]) / 2**20 / ((last[0] - mid[0]) / 3600)
        print(f"  RSS {mid[1] / 2**20:.0f} MB at half time, {last[1] / 2**20:.0f} MB at the end "
              f"({growth:+.1f} MB/hour); clrscope's CPU {last[2]['self']['cpu_s']:.1f} s "
              f"in {hours:.2f} h")
    if "rss_mb" in trends:
        emit("soak", "RSS slope after minute 15", round(trends["rss_mb"][0], 2), "MB/hour")
    if "rss_base_mb" in trends:
        emit("soak", "baseline RSS slope after minute 15 (no clrscope)",
             round(trends["rss_base_mb"][0], 2), "MB/hour")
    if mid is not None:
        # where the RSS grew in the second half: the mappings, for the profiled server and the
        # baseline (glibc's arenas and the runtime's heaps are anonymous; [heap] is glibc's main one)
        for who, i in (("profiled", 0), ("baseline", 1)):
            if maps_mid[i] and maps_end[i]:
                a, b = rss_by_kind(maps_mid[i]), rss_by_kind(maps_end[i])
                print(f"  {who} RSS by kind, half time -> end (MB): " +
                      ", ".join(f"{k} {a[k]} -> {b[k]}" for k in a))
                print("\n".join(grown(maps_mid[i], maps_end[i])))
    for p in problems:
        print("  PROBLEM: " + p)
    print("  nothing lost" if not problems else "")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
