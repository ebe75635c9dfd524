#!/usr/bin/env python3
"""What the answers made for a moment leave in the process: TestApp `many-stacks` (~1,000 distinct
stacks a second at CLRSCOPE_SAMPLING_HZ=1000) under clrscope for WARM seconds (default 20), then N
(default 40) GETs of one answer back to back; prints VmRSS after the first and after the last, and
where it grew (/proc/PID/smaps: the C library's per-thread arenas are the 64 MiB-aligned anonymous
mappings, the main arena is [heap]). `export` instead waits for N uploads to a fake agent (every
3 s); `control` asks /api/v1/status every 2.6 s, the app's own growth over as long. APP="MODE
ARGS" runs another TestApp workload (e.g. APP="threads --threads 200" for thread dumps).
   bench/answers_rss.py BUILD_DIR ANSWER [N]
ANSWER: top, flame, cpu, allocs, threads, threads-text, threads-pprof, export, control."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

ANSWERS = {
    "top": "/api/v1/top?type=cpu&limit=10000",
    "flame": "/api/v1/flamegraph?type=cpu&max_nodes=200000",
    "cpu": "/debug/pprof/profile?seconds=60&wait=0",
    "allocs": "/debug/pprof/allocs",
    "threads": "/api/v1/threads",
    "threads-text": "/debug/pprof/goroutine?debug=2",
    "threads-pprof": "/debug/pprof/threads",
    "control": "/api/v1/status",
}


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def smaps_rss(pid):
    out, key = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            p = line.split()
            if p and "-" in p[0] and not p[0].endswith(":"):
                key = (p[0], p[5] if len(p) > 5 else "[anon]")
            elif p and p[0] == "Rss:":
                out[key] = int(p[1])
    return out


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in list(ANSWERS) + ["export"]:
        sys.exit(__doc__)
    os.environ["CLRSCOPE_BUILD"] = os.path.abspath(sys.argv[1])
    from harness import ProfiledApp  # after CLRSCOPE_BUILD is set
    what, n = sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 40
    env = {"CLRSCOPE_SAMPLING_HZ": "1000", "CLRSCOPE_OVERHEAD_BUDGET": "0"}
    agent = None
    if what == "export":
        from fake_agent import FakeAgent
        agent = FakeAgent().start()
        env.update({"DD_PROFILING_ENABLED": "true", "DD_PROFILING_UPLOAD_PERIOD": "3",
                    "DD_TRACE_AGENT_URL": agent.url})
    rss, size = [], 0
    mode, *args = os.environ.get("APP", "many-stacks").split()
    with ProfiledApp(mode, args + ["--seconds", "0"], env=env) as app:
        app.wait_ready(timeout=120)
        time.sleep(float(os.environ.get("WARM", "20")))
        t0 = time.time()
        for i in range(n):
            if agent:
                agent.wait_requests(i + 1, timeout=30)
            else:
                st, _, body = app.request(ANSWERS[what], timeout=120)
                assert st == 200, (st, body[:200])
                size = max(size, len(body))
                if what == "control":
                    time.sleep(2.6)
            rss.append(rss_kb(app.pid))
            if i == 0:
                first = smaps_rss(app.pid)
        last = smaps_rss(app.pid)
        took = time.time() - t0
        app.stop()
    if agent:
        agent.stop()
    grew = sorted(((last.get(k, 0) - first.get(k, 0), k) for k in set(first) | set(last)),
                  reverse=True)[:4]
    print(f"{what}: {n} in {took:.1f} s" + (f", body up to {size >> 10} KB" if size else "")
          + f"; RSS after the first {rss[0] >> 10} MB, after the last {rss[-1] >> 10} MB "
          f"({(rss[-1] - rss[0]) / 1024:+.1f} MB)")
    print("  grew most:", ", ".join(f"{k[1]} {k[0].split('-')[0]} {d:+d} kB" for d, k in grew if d))


if __name__ == "__main__":
    main()
