#!/usr/bin/env python3
"""Development mock of clrscope's HTTP API, for working on the dashboard without a .NET process.

Serves the files of static/ (with the same security headers as the real server) and canned,
slowly changing JSON for every endpoint the dashboard reads. The CPU flame graph is a synthetic
tree of about --nodes frames (100k by default) so the renderer's speed can be checked.

    python3 tests/browser/mock_server.py [--port 0] [--pid N] [--nodes 100000]
                                         [--missing /api/v1/locks,/debug/pprof] [--token T]
                                         [--gcdump-fail]

It prints one line, `mock: http://127.0.0.1:PORT/ (pid PID)`, once it listens. stdlib only.
This is a tool for development and the browser test; it is not part of the product.
"""

import argparse
import gzip
import itertools
import json
import math
import os
import random
import sys
import threading
import zlib
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
STATIC = os.path.normpath(os.path.join(HERE, "..", "..", "static"))
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
MIME = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
        ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
START = time.time()

NAMESPACES = [
    "TestApp.Orders", "TestApp.Cpu", "TestApp.Inventory", "TestApp.Pricing", "TestApp.Storage",
    "System.Collections.Generic", "System.Linq", "System.Text.Json", "System.Threading",
    "System.Threading.Tasks", "System.Runtime.CompilerServices", "System.IO", "System.Text",
    "Microsoft.AspNetCore.Server.Kestrel.Core.Internal", "Microsoft.Extensions.DependencyInjection",
    "System.Net.Http", "System.Security.Cryptography",
]
TYPES = ["Worker", "OrderService", "Repository", "Parser", "Serializer", "Cache", "Dispatcher",
         "Pipeline", "Handler", "Builder", "Reader", "Writer", "Dictionary<System.String,System.Int32>",
         "List<TestApp.Orders.Order>", "Enumerable", "AsyncTaskMethodBuilder", "Monitor", "Utf8JsonWriter"]
METHODS = ["Run", "Process", "Execute", "MoveNext", "Invoke", "Handle", "Parse", "Serialize", "Write",
           "Read", "FindValue", "TryInsert", "Resize", "Compute", "Hash", "Sort", "Enter", "Wait",
           "ComputeHash", "ReadAsync", "WriteAsync", "ToArray", "Select", "Where", "Aggregate"]
ALLOC_TYPES = ["System.Byte[]", "System.String", "System.Char[]", "TestApp.Orders.Order",
               "TestApp.Orders.OrderLine", "System.Collections.Generic.List<TestApp.Orders.Order>",
               "System.Int32[]", "System.Object[]", "TestApp.Inventory.Item", "System.Text.StringBuilder",
               "System.Collections.Generic.Dictionary<System.String,System.Int32>+Entry[]",
               "System.Threading.Tasks.Task<System.Int32>", "TestApp.Storage.Page", "System.Action",
               "System.Func<System.Int32,System.Boolean>", "System.Double[]", "TestApp.Pricing.Quote",
               "System.Runtime.CompilerServices.AsyncTaskMethodBuilder<System.Int32>+AsyncStateMachineBox",
               "System.IO.MemoryStream", "System.Guid[]", "TestApp.Cpu.Matrix", "System.Decimal[]"]


def fname(rng):
    return "%s.%s.%s" % (rng.choice(NAMESPACES), rng.choice(TYPES), rng.choice(METHODS))


def build_tree(target_nodes, seed, unit_scale, leaf=None):
    """A trie of synthetic stacks, grown until it has about target_nodes frames."""
    rng = random.Random(seed)
    names = [fname(rng) for _ in range(max(50, target_nodes // 8))]
    roots = ["System.Threading.ThreadPoolWorkQueue.Dispatch", "TestApp.Program.Main",
             "System.Threading.Thread.StartCallback", "[native] libcoreclr.so!GCHeap::GarbageCollect"]
    root = {"name": "all", "value": 0, "self": 0, "children": {}}
    count = 1
    while count < target_nodes:
        node = root
        chain = [rng.choice(roots)]
        depth = int(rng.triangular(3, 48, 14))
        h = zlib.crc32(chain[0].encode()) & 0xFFFF
        for d in range(depth):
            # each parent has a few likely children, so the tree has realistic shared prefixes
            k = (h * 31 + d * 7 + rng.randrange(1 + d % 5 if d > 4 else 3)) % len(names)
            chain.append(names[k])
            h = (h * 131 + k) & 0xFFFFF
        if leaf:
            chain.append(leaf)
        w = rng.choice([1, 1, 1, 2, 3, 5, 8, 20]) * unit_scale
        for n in chain:
            node["value"] += w
            ch = node["children"].get(n)
            if ch is None:
                ch = {"name": n, "value": 0, "self": 0, "children": {}}
                node["children"][n] = ch
                count += 1
            node = ch
        node["value"] += w
        node["self"] += w
    root["value"] = sum(c["value"] for c in root["children"].values())

    def freeze(n):  # dict children -> list, iteratively (deep trees)
        stack = [n]
        while stack:
            x = stack.pop()
            kids = list(x["children"].values())
            x["children"] = kids
            stack.extend(kids)
        return n
    return freeze(root), count


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.trees = {}
        self.snapshots = []  # dicts: id, started, status, error
        self.next_id = 1

    def tree(self, ftype, flt):
        bucket = int(time.time() // 15)  # a new tree every 15 s so live refresh shows change
        big = ftype == "cpu" and not flt
        key = (ftype, flt, 0 if big else bucket)
        with self.lock:
            hit = self.trees.get(key)
        if hit:
            return hit
        unit = {"cpu": 10_000_000, "wall": 10_000_000, "lock-time": 250_000,
                "alloc-bytes": 102_400, "live-bytes": 4096}.get(ftype, 1)
        nodes = self.args.nodes if big else (1500 if flt else 6000)
        seed = "%s/%s/%d" % (ftype, flt, key[2])
        root, n = build_tree(nodes, seed, unit, leaf=flt or None)
        units = {"cpu": "nanoseconds", "wall": "nanoseconds", "lock-time": "nanoseconds",
                 "alloc-bytes": "bytes", "live-bytes": "bytes"}
        reply = {"type": ftype, "unit": units.get(ftype, "count"), "total": root["value"],
                 "seconds": 60, "nodes": n, "root": root}
        if ftype.startswith("alloc-"):
            # an estimate: the samples behind each node, and the governor's coverage (as
            # clrscope gives them with CLRSCOPE_OVERHEAD_BUDGET turning allocations down)
            stack = [root]
            while stack:
                node = stack.pop()
                node["samples"] = max(1, node["value"] // unit)
                stack.extend(node.get("children", []))
            reply["coverage"] = ALLOC_COVERAGE
        body = json.dumps(reply, separators=(",", ":")).encode()
        with self.lock:
            if len(self.trees) > 40:
                self.trees.clear()
            self.trees[key] = (root, body)
        return root, body


def top_functions(root, limit):
    selfs, totals = {}, {}
    on = {}
    stack = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        name = node["name"]
        if node is root:
            if not leaving:
                stack.extend((c, False) for c in node["children"])
            continue
        if leaving:
            on[name] -= 1
            continue
        selfs[name] = selfs.get(name, 0) + node["self"]
        if not on.get(name):
            totals[name] = totals.get(name, 0) + node["value"]
        on[name] = on.get(name, 0) + 1
        stack.append((node, True))
        stack.extend((c, False) for c in node["children"])
    fs = [{"name": k, "self": selfs[k], "total": totals.get(k, 0)} for k in selfs]
    fs.sort(key=lambda f: -f["self"])
    return fs[:limit]


def wave(t, period, lo, hi, phase=0.0):
    return lo + (hi - lo) * (0.5 + 0.5 * math.sin(2 * math.pi * t / period + phase))


def gc_reply(seconds):
    now = time.time()
    step = 1 if seconds <= 300 else 3
    series, cols = [], []
    number = 1000 + int((now - START) / 2.5)
    t0 = math.floor(now) - seconds
    rng = random.Random(int(t0))
    gen2 = 40e6
    for i in range(0, seconds, step):
        t = t0 + i + step
        share = max(0.0, wave(t, 47, 0.02, 0.42) + rng.uniform(-0.03, 0.03))
        gen2 = 40e6 + 12e6 * math.sin(t / 90)
        series.append({"t": t, "gc_cpu_share": round(share, 4), "process_cpu_s": 0.9 * step,
                       "gc_cpu_s": round(0.9 * step * share, 4), "pause_ms": round(share * 20, 2),
                       "heap": {"gen0": int(wave(t, 7, 2e6, 24e6)), "gen1": int(wave(t, 23, 1e6, 6e6)),
                                "gen2": int(gen2), "loh": int(wave(t, 120, 8e6, 16e6)), "poh": 262144}})
    t = t0
    while t < now:
        t += 2.5
        if t > now:
            break
        n = number - int((now - t) / 2.5)
        gen = 2 if n % 11 == 0 else (1 if n % 4 == 0 else 0)
        pause = round([0.6, 2.4, 14.0][gen] * (0.6 + (n % 7) / 7), 2)
        before = int(60e6 + (n % 13) * 1.5e6)
        cols.append({"number": n, "generation": gen, "reason": ["AllocSmall", "AllocSmall", "AllocLarge",
                     "Induced"][n % 4], "type": "BackgroundGC" if gen == 2 and n % 2 else "NonConcurrentGC",
                     "t": round(t, 3), "pause_ms": pause, "heap_before": before,
                     "heap_after": int(before * (0.55 if gen else 0.8)), "promoted": int(before * 0.05)})
    share = sum(s["gc_cpu_s"] for s in series) / max(1e-9, sum(s["process_cpu_s"] for s in series))
    return {"gc_cpu_share": round(share, 4), "pause_share": round(share / 6, 4), "warn_threshold": 0.3,
            "mode": "workstation", "concurrent": True, "series": series, "collections": cols}


# the share of the window the mock's allocation events were on (the overhead governor)
ALLOC_COVERAGE = 0.34


def alloc_reply(seconds):
    rng = random.Random(int(time.time() // 5))
    types = []
    for i, t in enumerate(ALLOC_TYPES):
        size = [8200, 48, 120, 96, 56, 32, 4000, 64][i % 8]
        count = int(900000 / (i + 1) ** 1.3 * seconds / 60 * rng.uniform(0.8, 1.2))
        samples = max(1, count * size // 102400)
        rel = 1.96 / samples ** 0.5
        types.append({"type": t, "count": count, "bytes": count * size, "samples": samples,
                      "bytes_ci95": [round(count * size * max(0, 1 - rel)),
                                     round(count * size * (1 + rel))]})
    types.sort(key=lambda x: -x["bytes"])
    tot = {k: sum(x[k] for x in types) for k in ("count", "bytes", "samples")}
    now = time.time()
    exact = int(tot["bytes"] * rng.uniform(0.97, 1.03))
    return {"method": "AllocationSampled", "bias_note": "Counts and bytes are upscaled from the runtime's "
            "AllocationSampled events (one sample per ~100 KiB on average); small totals are imprecise.",
            "seconds": seconds, "t_from": now - seconds, "t_to": now,
            "coverage": ALLOC_COVERAGE,
            "coverage_note": "the overhead governor (CLRSCOPE_OVERHEAD_BUDGET) had allocation events on "
                             "for this share of the window (mock)",
            "types": types, "total": tot, "exact_bytes": exact,
            "estimate_ratio": tot["bytes"] / exact,
            "self_check": {"t_from": int(now - seconds + 2), "t_to": int(now), "estimated_bytes": tot["bytes"],
                           "exact_bytes": exact, "ratio": tot["bytes"] / exact,
                           "source": "GC.GetTotalAllocatedBytes, per second, from the runtime's System.Runtime "
                                     "alloc-rate counter (mock)"}}


def live_reply():
    now = time.time()
    types = []
    for i, t in enumerate(ALLOC_TYPES[:14]):
        grows = i in (3, 9)
        base = 5000 / (i + 1)
        hist = [{"t": round(now - 300 + k * 5, 1),
                 "count": int(base * (1 + (k / 20 if grows else 0.15 * math.sin(k / 6 + i))))}
                for k in range(61)]
        c = hist[-1]["count"]
        types.append({"type": t, "count": c, "bytes": c * [96, 48, 8200, 64][i % 4], "tracked": max(1, c // 40),
                      "age_s": {"p50": round(3 + i * 1.7 + (40 if grows else 0), 1),
                                "p90": round(9 + i * 4.1 + (200 if grows else 0), 1),
                                "max": round(30 + i * 9 + (now - START if grows else 0), 1)},
                      "gcs_survived": {"p50": 1 + (i % 3), "max": 4 + i}, "leak_suspect": grows,
                      "history": hist})
    types.sort(key=lambda x: -x["bytes"])
    return {"tracked": 3960, "cap": 4096, "capped": True, "types": types}


def exceptions_reply(seconds):
    k = seconds / 60
    rows = [("System.InvalidOperationException", "Sequence contains no elements", 1200),
            ("System.Collections.Generic.KeyNotFoundException",
             "The given key 'sku-1042' was not present in the dictionary.", 640),
            ("System.FormatException", "Input string was not in a correct format.", 210),
            ("System.OperationCanceledException", "The operation was canceled.", 55),
            ("System.IO.IOException", "Broken pipe", 3)]
    types = [{"type": t, "message": m, "count": int(c * k), "samples": max(1, int(c * k / 10))} for t, m, c in rows]
    return {"total": sum(x["count"] for x in types), "types": types}


def counters_reply(seconds=None, points=600):
    """The runtime's System.Runtime counters, as /api/v1/counters relays them; with `seconds`
    their series, a point a second drifting around the latest value."""
    now = time.time()
    rows = [("alloc-rate", "rate", 39408648, "B"), ("cpu-usage", "gauge", 52.6, "%"),
            ("gc-heap-size", "gauge", 7.61, "MB"), ("gen-0-gc-count", "rate", 2, ""),
            ("working-set", "gauge", 67.2, "MB"), ("threadpool-thread-count", "gauge", 4, ""),
            ("exception-count", "rate", 194, ""), ("monitor-lock-contention-count", "rate", 190, "")]
    reply = {"enabled": True, "provider": "System.Runtime", "series_dropped": 0,
             "counters": [{"name": n, "kind": k, "value": v, "units": u, "interval_s": 1.0,
                           "t": now, "age_s": 0.04} for n, k, v, u in rows]}
    if seconds:
        n_pts = max(2, min(points, seconds))
        step = seconds / n_pts
        reply["seconds"] = seconds
        reply["series"] = [{"name": n, "kind": k, "units": u, "interval_s": 1.0,
                            "points": [[now - seconds + (i + 1) * step,
                                        v * (1 + 0.1 * math.sin(i / 5.0))] for i in range(n_pts)]}
                           for n, k, v, u in rows]
    return reply


DUMP_SEQ = itertools.count(1)  # each dump its own number, as the server's


def threads_reply():
    """A thread dump: workers in the pool, two waiting for a lock, and one deadlocked pair."""
    pool = ["System.Threading.Monitor.Wait", "System.Threading.Tasks.Task.SpinThenBlockingWait",
            "MyApp.Reports.Export.Run", "System.Threading.ThreadPoolWorkQueue.Dispatch",
            "System.Threading.PortableThreadPool.WorkerThread.WorkerThreadStart",
            "System.Threading.Thread.StartCallback", "[native libcoreclr.so]"]
    waiters = ["System.Threading.Monitor.Enter_Slowpath", "System.Threading.Monitor.Enter",
               "MyApp.Orders.Cache.Get", "MyApp.Orders.Controller.Index",
               "System.Threading.ThreadPoolWorkQueue.Dispatch",
               "System.Threading.PortableThreadPool.WorkerThread.WorkerThreadStart",
               "System.Threading.Thread.StartCallback", "[native libcoreclr.so]"]
    held = {"lock": "0x7f00c0de0010", "owner_tid": 200, "owner_name": "orders-refresh", "for_s": 2.5}
    dl = [{"tid": 301, "name": "sync-a", "waits_for_lock": "0x7f00c0de0020", "held_by": 302},
          {"tid": 302, "name": "sync-b", "waits_for_lock": "0x7f00c0de0030", "held_by": 301}]
    return {"t": time.time(), "age_s": 0.01, "seq": next(DUMP_SEQ), "suspend_ms": 0.31,
            "threads_total": 8, "omitted": 0, "states": {"running": 1, "sleeping": 7},
            "thread_pool": {"workers": 5, "idle": 0, "busy": 5, "blocked": 5, "queue_length": 140,
                            "starvation_likely": True,
                            "blocked_at": [{"frame": "MyApp.Reports.Export.Run", "count": 3},
                                           {"frame": "MyApp.Orders.Cache.Get", "count": 2}]},
            "deadlocks": [{"threads": dl}],
            "groups": [
                {"count": 3, "truncated": False, "frames": pool,
                 "threads": [{"tid": 100 + i, "name": ".NET TP Worker", "state": "sleeping",
                              "cpu_s": 0.5} for i in range(3)]},
                {"count": 2, "truncated": False, "frames": waiters,
                 "threads": [{"tid": 110 + i, "name": ".NET TP Worker", "state": "sleeping",
                              "cpu_s": 0.1, "waiting_for": held} for i in range(2)]},
                {"count": 2, "truncated": False,
                 "frames": ["System.Threading.Monitor.Enter_Slowpath", "MyApp.Sync.Run",
                            "System.Threading.Thread.StartCallback"],
                 "threads": [{"tid": t["tid"], "name": t["name"], "state": "sleeping", "cpu_s": 0.0,
                              "deadlock": 1,
                              "waiting_for": {"lock": t["waits_for_lock"], "owner_tid": t["held_by"],
                                              "owner_name": "", "for_s": 60.0}} for t in dl]},
                {"count": 1, "truncated": False,
                 "frames": ["MyApp.Orders.Refresher.Rebuild", "MyApp.Orders.Refresher.Loop",
                            "System.Threading.Thread.StartCallback"],
                 "threads": [{"tid": 200, "name": "orders-refresh", "state": "running", "cpu_s": 12.5}]},
            ]}


def locks_reply(seconds):
    k = seconds / 60
    hist = [{"le_ms": le, "count": int(c * k)} for le, c in
            [(0.1, 420), (1, 910), (10, 380), (100, 64), (1000, 7), (10000, 1)]]
    # as the real API names them: the lock's id, the method that waited, who held it
    locks = [{"name": "lock 0x7fa1480017f8", "site": "TestApp.Inventory.Cache.Get", "wait_ns": int(3.1e9 * k),
              "count": int(1200 * k), "samples": int(600 * k),
              "owners": [{"thread": "inventory-refresh", "tid": 7265, "wait_ns": int(2.5e9 * k), "count": int(900 * k)},
                         {"thread": ".NET TP Worker", "tid": 7270, "wait_ns": int(6e8 * k), "count": int(300 * k)}]},
             {"name": "lock 0x7fa148001a40", "site": "TestApp.Orders.Repository.Save", "wait_ns": int(8e8 * k),
              "count": int(500 * k), "samples": int(250 * k),
              "owners": [{"thread": ".NET TP Worker", "tid": 7271, "wait_ns": int(8e8 * k), "count": int(500 * k)}]}]
    return {"total_wait_ns": sum(x["wait_ns"] for x in locks), "count": sum(x["count"] for x in hist),
            "histogram": hist, "locks": locks}


def snapshot_view(s, full):
    elapsed = time.time() - s["started"]
    if s["status"] == "running" and elapsed > 3.0:
        s["status"] = "failed" if s["fail"] else "done"
        if s["fail"]:
            s["error"] = "the runtime refused the heap walk: a GC is already in progress (mock)"
    out = {"id": s["id"], "status": s["status"], "t": s["started"],
           "progress": 1.0 if s["status"] != "running" else round(min(0.99, elapsed / 3.0), 2),
           "error": s.get("error")}
    done = s["status"] == "done"
    rng = random.Random(s["id"])
    types = []
    if done:
        for i, t in enumerate(ALLOC_TYPES + ["System.RuntimeType", "System.Reflection.RuntimeMethodInfo"]):
            c = int(80000 / (i + 1) * rng.uniform(0.7, 1.3))
            b = c * [96, 48, 8200, 64, 24][i % 5]
            types.append({"type": t, "count": c, "bytes": b, "retained": int(b * rng.uniform(1, 4))})
        types.sort(key=lambda x: -x["retained"])
    out["objects"] = sum(x["count"] for x in types) if done else None
    out["bytes"] = sum(x["bytes"] for x in types) if done else None
    if full:
        out["types"] = types
    return out


class Handler(BaseHTTPRequestHandler):
    server_version = "clrscope-mock"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        if os.environ.get("MOCK_VERBOSE"):
            sys.stderr.write("mock: " + fmt % a + "\n")

    def send(self, status, body, ctype="application/json", extra=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the page moved on and aborted the request

    def err(self, status, msg):
        self.send(status, {"error": msg})

    def authorized(self, q):
        """As the real server: the token in the Authorization header or the query, never in a
        cookie."""
        token = self.server.st.args.token
        if not token:
            return True
        if self.headers.get("Authorization", "") == "Bearer " + token:
            return True
        return q.get("token", [""])[0] == token

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, method):
        u = urlparse(self.path)
        q = parse_qs(u.query)
        path = u.path.rstrip("/") or "/"
        st = self.server.st
        is_api = path.startswith(("/api/", "/debug/pprof", "/metrics"))
        # the dashboard's own files load without the token, as from the real server
        if is_api and not self.authorized(q):
            return self.err(401, "missing or wrong token: open the dashboard with ?token=<token>")
        for m in st.args.missing:
            if m and path.startswith(m):
                return self.err(404, "not implemented yet: %s" % path)
        seconds = int(q.get("seconds", ["60"])[0] or 60)
        if method == "POST" and path == "/api/v1/marks":
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}") if n else {}
            t = float(body.get("t", 0) or 0)
            t = t if t > 0 else time.time() + t
            with st.lock:
                marks = st.__dict__.setdefault("marks", [])
                m = {"id": len(marks) + 1, "t": t,
                     "label": (body.get("label") or q.get("label", [""])[0])[:127]}
                marks.append(m)
            return self.send(201, m)
        if path == "/api/v1/budget":
            return self.send(200, {
                "target": 0.01, "floor_core": 0.01, "measured": 0.006, "allowed": 0.01, "window_s": 10,
                "process_cpu_s": 8.2, "by_source": {"threads": 0.004, "callbacks": 0.001,
                                                    "callbacks_alloc": 0.0008, "runtime_events": 0.0008,
                                                    "suspensions": 0.0001, "signal_handler": 0.0001,
                                                    "perf_events": 0},
                "runtime_event_ns": 3000,
                "sources": {"alloc": {"switchable": True, "on_fraction": 1, "on_fraction_window": 1,
                                      "events": 1200, "switches": 0, "switch_failures": 0,
                                      "switch_cpu_s": 0, "switch_wall_s": 0, "switch_wall_max_s": 0},
                            "wall": {"slowdown": 1, "hz": 5}},
                "over": None, "last_change": None,
                "history": [{"t": time.time() - k, "measured": 0.006, "alloc_on": 1} for k in range(60, 0, -1)]})
        if path == "/api/v1/marks":
            return self.send(200, {"marks": list(st.__dict__.get("marks", [])), "max": 256,
                                   "dropped": 0})
        if path == "/api/v1/flamegraph/diff":
            # the same canned tree as both windows, the base scaled: every frame changed alike
            ftype = q.get("type", ["cpu"])[0]
            root, body = st.tree(ftype, "")
            body = json.loads(body)

            def both(n, k):
                out = {"name": n["name"], "value": n["value"], "self": n.get("self", 0),
                       "base": int(n["value"] * k), "base_self": int(n.get("self", 0) * k),
                       "children": []}
                return out

            top = both(root, 0.8)
            stack = [(root, top, 0)]
            while stack:
                src, dst, d = stack.pop()
                for i, c in enumerate(src.get("children", [])):
                    k = 0.5 if (d + i) % 3 == 0 else 1.0
                    kid = both(c, k)
                    dst["children"].append(kid)
                    stack.append((c, kid, d + 1))
            now = int(time.time())
            win = lambda a, b, t: {"from": a, "to": b, "t_from": a, "t_to": b, "total": t}
            fns = [{"name": f["name"], "self": f["self"], "total": f["total"],
                    "base_self": f["self"] // 2, "base_total": f["total"] // 2,
                    "delta_share": 0.01} for f in top_functions(root, 10)]
            return self.send(200, {"type": ftype, "unit": body.get("unit", "count"),
                                   "a": win(now - 600, now - 300, top["base"]),
                                   "b": win(now - 300, now, top["value"]), "nodes": body.get("nodes", 0),
                                   "trimmed": 0, "functions": fns, "root": top})
        if method == "POST":
            if path != "/api/v1/gcdump":
                return self.err(405, "method not allowed")
            with st.lock:
                for s in st.snapshots:
                    snapshot_view(s, False)
                if any(s["status"] == "running" for s in st.snapshots):
                    return self.err(409, "a heap snapshot is already running")
                s = {"id": str(st.next_id), "started": time.time(), "status": "running",
                     "fail": st.args.gcdump_fail}
                st.next_id += 1
                st.snapshots.append(s)
            return self.send(202, {"id": s["id"], "status": "running"})
        if path == "/api/v1/status":
            return self.send(200, {
                "pid": st.args.pid, "process": {"name": "TestApp", "cmdline": "dotnet TestApp.dll --all"},
                "runtime": {"version": "10.0.1", "major": 10}, "uptime_s": round(time.time() - START, 1),
                "profiles": ["cpu", "wall", "alloc", "live", "gc", "exceptions", "lock", "heap"],
                "sampling_hz": 100, "clrscope_version": "0.1.0-mock",
                "self": {"cpu_s": round((time.time() - START) * 0.008, 2), "cpu_share": 0.008,
                         "rss_bytes": 23 * 1024 * 1024},
                "export": {"enabled": True, "last_upload": time.time() - 42, "last_status": 202,
                           "failures": 1, "bytes_sent": 3_400_000, "dropped": 0},
                "dropped": {"events": 12, "stack_nodes": 0, "entries": 0, "names": 3,
                            "skipped_ticks": 0, "truncated_stacks": 5}})
        if path == "/api/v1/flamegraph":
            ftype = q.get("type", ["cpu"])[0]
            if ftype not in ("cpu", "wall", "alloc-bytes", "alloc-count", "live-bytes", "live-count",
                             "exceptions", "lock-time"):
                return self.err(400, "unknown flame graph type '%s'" % ftype)
            _, body = st.tree(ftype, q.get("filter", [""])[0])
            return self.send(200, body)
        if path == "/api/v1/top":
            ftype = q.get("type", ["cpu"])[0]
            root, _ = st.tree(ftype, "")
            units = {"cpu": "nanoseconds", "wall": "nanoseconds"}
            return self.send(200, {"type": ftype, "unit": units.get(ftype, "count"), "total": root["value"],
                                   "functions": top_functions(root, int(q.get("limit", ["50"])[0]))})
        if path == "/api/v1/gc":
            return self.send(200, gc_reply(seconds))
        if path == "/api/v1/allocations":
            return self.send(200, alloc_reply(seconds))
        if path == "/api/v1/live":
            return self.send(200, live_reply())
        if path == "/api/v1/exceptions":
            return self.send(200, exceptions_reply(seconds))
        if path == "/api/v1/locks":
            return self.send(200, locks_reply(seconds))
        if path == "/api/v1/counters":
            return self.send(200, counters_reply("seconds" in q and seconds,
                                                 int(q.get("points", ["600"])[0] or 600)))
        if path == "/api/v1/threads":
            return self.send(200, threads_reply())
        if path == "/api/v1/gcdump":
            with st.lock:
                # newest first, as the real API (api_gcdump.c)
                return self.send(200, {"snapshots": [snapshot_view(s, False)
                                                     for s in reversed(st.snapshots)]})
        if path == "/api/v1/gcdump/diff":
            a, b = q.get("a", [""])[0], q.get("b", [""])[0]
            with st.lock:
                sa = next((s for s in st.snapshots if s["id"] == a), None)
                sb = next((s for s in st.snapshots if s["id"] == b), None)
                if not sa or not sb:
                    return self.err(404, "no such snapshot")
                va, vb = snapshot_view(sa, True), snapshot_view(sb, True)
            ma = {t["type"]: t for t in va["types"]}
            rows = []
            for t in vb["types"]:
                o = ma.get(t["type"], {"count": 0, "bytes": 0})
                rows.append({"type": t["type"], "count_delta": t["count"] - o["count"],
                             "bytes_delta": t["bytes"] - o["bytes"]})
            rows.sort(key=lambda r: -abs(r["bytes_delta"]))
            return self.send(200, {"a": a, "b": b, "types": rows})
        if path.startswith("/api/v1/gcdump/"):
            parts = path.split("/")[4:]
            with st.lock:
                s = next((s for s in st.snapshots if s["id"] == parts[0]), None)
                if not s:
                    return self.err(404, "no such snapshot: %s" % parts[0])
                v = snapshot_view(s, True)
            if len(parts) == 1:
                return self.send(200, v)
            if parts[1] == "file":
                if v["status"] != "done":
                    return self.err(409, "snapshot %s is %s" % (s["id"], v["status"]))
                return self.send(200, b"!FastSerialization.1 mock gcdump", "application/octet-stream",
                                 {"Content-Disposition": 'attachment; filename="clrscope-%s.gcdump"' % s["id"]})
            if parts[1] == "paths":
                t = q.get("type", [""])[0]
                return self.send(200, {"type": t, "paths": [
                    ["[static] TestApp.Inventory.Cache.s_items", "System.Collections.Generic.Dictionary<System.String,System.Object>",
                     "System.Collections.Generic.Dictionary<System.String,System.Object>+Entry[]", t],
                    ["[handle] strong", "TestApp.Orders.OrderService", "System.Collections.Generic.List<System.Object>",
                     "System.Object[]", t],
                    ["[thread] 0x1a2b stack", t]]})
            return self.err(404, "no such page")
        if path.startswith("/debug/pprof"):
            name = path.rsplit("/", 1)[-1] or "index"
            return self.send(200, gzip.compress(b"mock pprof " + name.encode()), "application/octet-stream",
                             {"Content-Disposition": 'attachment; filename="%s.pb.gz"' % name})
        if path.startswith("/api/"):
            return self.err(404, "no such endpoint: %s" % path)
        rel = "index.html" if path == "/" else path.lstrip("/")
        full = os.path.normpath(os.path.join(STATIC, rel))
        if not full.startswith(STATIC + os.sep) or not os.path.isfile(full):
            return self.err(404, "no such page: %s" % path)
        with open(full, "rb") as f:
            data = f.read()
        return self.send(200, data, MIME.get(os.path.splitext(full)[1], "application/octet-stream"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--pid", type=int, default=os.getpid())
    ap.add_argument("--nodes", type=int, default=100000, help="frames in the CPU flame graph")
    ap.add_argument("--missing", default="", help="comma-separated path prefixes that answer 404")
    ap.add_argument("--token", default="")
    ap.add_argument("--gcdump-fail", action="store_true", help="heap snapshots end in 'failed'")
    args = ap.parse_args()
    args.missing = [m.strip() for m in args.missing.split(",") if m.strip()]
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.st = State(args)
    print("mock: http://127.0.0.1:%d/ (pid %d)" % (srv.server_address[1], args.pid), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
