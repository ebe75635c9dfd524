"""
Load: wrk with 64 connections over every dashboard and API endpoint (GET) while a real app runs.
Every reply is a success or a deliberate 429 (too many waiting pprof requests) / 503; there are no
socket errors; the app keeps doing its own work every second and exits as it should; the
process's memory stays bounded.

CLRSCOPE_LOAD_SECONDS sets the load duration (default 15 in CI; bench/hardening.md gives the
figures of a 60 s run). The app's work rate with and without the load is printed (a ratio for
bench/, never a pass/fail threshold).
"""
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from harness import ProfiledApp

LOAD_S = float(os.environ.get("CLRSCOPE_LOAD_SECONDS", "15"))

PATHS = ["/", "/app.js", "/flame.js", "/charts.js", "/style.css",
         "/api/v1/status", "/api/v1/flamegraph?type=cpu&seconds=30",
         "/api/v1/flamegraph?type=wall&seconds=60&max_nodes=500",
         "/api/v1/flamegraph?type=alloc-bytes&seconds=60",
         "/api/v1/flamegraph?type=live-bytes", "/api/v1/flamegraph?type=exceptions",
         "/api/v1/flamegraph?type=lock-time", "/api/v1/top?type=cpu&limit=20",
         "/api/v1/top?type=alloc-count", "/api/v1/gc?seconds=60", "/api/v1/allocations?seconds=60",
         "/api/v1/live", "/api/v1/exceptions?seconds=60", "/api/v1/locks?seconds=60",
         "/api/v1/counters", "/api/v1/gcdump", "/debug/pprof/",
         "/debug/pprof/profile?seconds=5&wait=0", "/debug/pprof/wall?seconds=5&wait=0",
         "/debug/pprof/allocs?seconds=10", "/debug/pprof/heap",
         "/debug/pprof/exceptions?seconds=10", "/debug/pprof/lock?seconds=10", "/metrics",
         "/api/v1/threads", "/debug/pprof/threads?debug=1"]

LUA = r"""
local paths = {%s}
local threads = {}
local n = 0
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  codes = {}
  n = id
end
function request()
  n = n + 1
  return wrk.format("GET", paths[(n %% #paths) + 1])
end
function response(status, headers, body)
  codes[status] = (codes[status] or 0) + 1
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("codes")) do
      io.write(string.format("status %%d %%d\n", k, v))
    end
  end
  local e = summary.errors
  io.write(string.format("errors connect=%%d read=%%d write=%%d timeout=%%d\n",
                         e.connect, e.read, e.write, e.timeout))
  io.write(string.format("requests %%d\n", summary.requests))
end
"""


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rate(lines, a, b, key="rounds"):
    """Work per second between the truth lines numbered a and b."""
    if b <= a or b >= len(lines):
        return None
    return (lines[b][key] - lines[a][key]) / (b - a)


@unittest.skipUnless(shutil.which("wrk"), "wrk not installed (tools/deps.sh test)")
class Load(unittest.TestCase):
    def test_wrk_every_endpoint(self):
        quiet = 4
        app = ProfiledApp("alloc-mix", ["--seconds", "0", "--truth-every-second", "--mb-per-s", "20"],
                          env={"CLRSCOPE_HISTORY_S": "120"})
        with app:
            app.wait_ready(timeout=120)
            time.sleep(quiet)  # the app's own pace without load
            t_load = len(app.truth_lines())
            script = os.path.join(app.tmp, "paths.lua")
            with open(script, "w") as f:
                f.write(LUA % ", ".join('"%s"' % p for p in PATHS))
            rss, stop = [], threading.Event()

            def sample():
                while not stop.wait(1):
                    rss.append(rss_kb(app.pid))

            threading.Thread(target=sample, daemon=True).start()
            r = subprocess.run(["wrk", "-t", "2", "-c", "64", "-d", "%ds" % LOAD_S,
                                "--timeout", "30s", "-s", script, app.url + "/"],
                               capture_output=True, text=True, timeout=LOAD_S + 120)
            stop.set()
            t_end = len(app.truth_lines())
            time.sleep(quiet)
            lines = app.truth_lines()
            self.assertIsNone(app.proc.poll(), "the app died under load")
            status = app.json("/api/v1/status")
            code = app.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        codes = {}
        for m in re.finditer(r"^status (\d+) (\d+)$", r.stdout, re.M):  # one line per thread
            codes[int(m.group(1))] = codes.get(int(m.group(1)), 0) + int(m.group(2))
        errors = dict(re.findall(r"(\w+)=(\d+)", re.search(r"^errors .*$", r.stdout, re.M).group(0)))
        total = int(re.search(r"^requests (\d+)$", r.stdout, re.M).group(1))
        print(f"\nwrk {LOAD_S:.0f} s, 64 connections, {len(PATHS)} endpoints: {total} requests "
              f"({total / LOAD_S:.0f}/s), statuses {codes}, socket errors {errors}")
        bad = {c: n for c, n in codes.items() if not (200 <= c < 400 or c in (429, 503))}
        self.assertEqual(bad, {}, f"unexpected statuses: {r.stdout}")
        self.assertEqual({k: int(v) for k, v in errors.items() if int(v)}, {}, r.stdout)
        self.assertGreater(codes.get(200, 0), 0)
        self.assertEqual(sum(codes.values()), total, "every request got a status")
        # the app kept working through the load, second by second, and ended as it should
        self.assertEqual(code, 0, app.stderr_lines[-20:])
        under = [lines[i]["rounds"] for i in range(t_load, min(t_end, len(lines)))]
        self.assertTrue(len(under) >= 2 and all(b > a for a, b in zip(under, under[1:])),
                        f"the app stalled under load: rounds per second {under}")
        before, during = rate(lines, 1, t_load - 1), rate(lines, t_load, t_end - 1)
        if before and during:
            print(f"app work (alloc-mix rounds/s): {before:.1f} before, {during:.1f} under load "
                  f"(ratio {during / before:.2f})")
        # memory stays bounded: the last third of the load adds little to the first third
        third = max(1, len(rss) // 3)
        first, last = max(rss[:third]), max(rss[-third:])
        print(f"RSS: {rss[0] // 1024} MB at start of load, max {first // 1024} MB in the first "
              f"third, {last // 1024} MB in the last; profiler self {status['self']}")
        self.assertLess(last, first * 1.25 + 64 * 1024, f"RSS kept growing under load: {rss}")


if __name__ == "__main__":
    unittest.main()
