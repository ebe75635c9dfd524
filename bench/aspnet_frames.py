#!/usr/bin/env python3
"""Where the ASP.NET Core server's samples land, for the two cases a flame graph most often gets
wrong on real apps (tests/apps/WebApp under wrk, 4 connections, every profile on, no budget):

  /prices          a LINQ lambda parses prices with decimal.Parse, half of them bad (a
                   FormatException caught per bad price): the share of the CPU samples inside
                   the runtime's exception dispatch that reach the app's method (Prices.OnSale),
                   and the share of all samples whose walk stopped in native code without a
                   managed frame (status `walks.unrooted_native`);
  /parallel-lock   16 Parallel.For iterations that each take one lock in the app's lambda
                   (Inventory.Reserve.{lambda}): the share of the lock wait under that lambda
                   (the JIT may inline it into the framework's loop, which then holds the wait)
                   and the share of the wait whose owner thread is known.

Usage: bench/aspnet_frames.py BUILD [SECONDS]   (default 8 s of profile per endpoint; the app is
built by bench/aspnet_overhead.sh or by hand: dotnet build tests/apps/WebApp -o BUILD/apps/webapp).
"""
import gzip
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from benchlib import App, emit, get, get_json, wait_http  # noqa: E402
from pprofdec import Profile  # noqa: E402


def leaves(node, path, out):
    """(path, self value) of every node of a flame graph tree, without recursion."""
    stack = [(node, path)]
    while stack:
        n, p = stack.pop()
        kids = n.get("children", [])
        p = p + [n.get("name", "")]
        own = n.get("value", 0) - sum(k.get("value", 0) for k in kids)
        if own > 0:
            out.append((p, own))
        stack.extend((k, p) for k in kids)
    return out


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    port = 19000 + os.getpid() % 900
    base = f"http://127.0.0.1:{port}"
    app = App(build, ["dotnet", os.path.join(build, "apps", "webapp", "WebApp.dll"),
                      "--urls", base],
              env={"CLRSCOPE_OVERHEAD_BUDGET": "0", "CLRSCOPE_SAMPLING_HZ": "200"})
    url = app.dashboard()
    if not url:
        sys.exit("no dashboard")
    wait_http(base + "/health")
    try:
        # /prices: CPU through exception dispatch
        before = get_json(url + "api/v1/status")["self"]["signal_sampler"]["walks"]
        wrk = subprocess.Popen(["wrk", "-t1", "-c4", f"-d{seconds + 5}s", base + "/prices"],
                               stdout=subprocess.DEVNULL)
        time.sleep(3)
        prof = Profile(gzip.decompress(get(url + f"debug/pprof/profile?seconds={seconds}",
                                           timeout=seconds + 30)))
        wrk.wait()
        after = get_json(url + "api/v1/status")["self"]["signal_sampler"]["walks"]
        total = exc = exc_app = app_all = 0
        for frames, vals, _ in prof.samples:
            total += vals[0]
            in_app = any("Prices.OnSale" in f for f in frames)
            app_all += vals[0] if in_app else 0
            if any("System.Runtime.EH." in f or "Exception" in f for f in frames):
                exc += vals[0]
                exc_app += vals[0] if in_app else 0
        walked = after["samples"] - before["samples"]
        unrooted = after["unrooted_native"] - before["unrooted_native"]
        print(f"/prices: {100 * app_all / max(total, 1):.1f} % of CPU samples under Prices.OnSale; "
              f"of those in exception dispatch ({100 * exc / max(total, 1):.1f} % of all) "
              f"{100 * exc_app / max(exc, 1):.1f} % reach it; walks ending in native code "
              f"without a managed frame {100 * unrooted / max(walked, 1):.2f} % of {walked}")
        emit("frames", "exception dispatch samples reaching the app (ASP.NET)",
             round(100 * exc_app / max(exc, 1), 1), "%")
        emit("frames", "walks unrooted in native code (ASP.NET /prices)",
             round(100 * unrooted / max(walked, 1), 2), "%")

        # /parallel-lock: lock waits under an inlined lambda
        wrk = subprocess.Popen(["wrk", "-t1", "-c4", f"-d{seconds + 3}s",
                                base + "/parallel-lock"], stdout=subprocess.DEVNULL)
        time.sleep(seconds + 1)
        fg = get_json(url + f"api/v1/flamegraph?type=lock-time&seconds={seconds}")
        locks = get_json(url + f"api/v1/locks?seconds={seconds}")
        wrk.wait()
        out = leaves(fg.get("root", fg), [], [])
        wait = sum(v for _, v in out)
        lam = sum(v for p, v in out if any("Inventory.Reserve.{lambda}" in x for x in p))
        known = unknown = 0
        for lk in locks.get("locks", []):
            for o in lk.get("owners", []):
                if o.get("tid"):
                    known += o.get("wait_ns", 0)
                else:
                    unknown += o.get("wait_ns", 0)
        print(f"/parallel-lock: {100 * lam / max(wait, 1):.1f} % of the lock wait under "
              f"Inventory.Reserve.{{lambda}}; owner known for {100 * known / max(known + unknown, 1):.1f} "
              f"% of the wait")
        inl = get_json(url + "api/v1/status")["self"]["signal_sampler"].get("inlining", {})
        print(f"  inlining: {inl}")
        top = sorted(out, key=lambda x: -x[1])[:2]
        for p, v in top:
            print(f"  {100 * v / max(wait, 1):.1f} %  ... > " + " > ".join(p[-4:]))
        emit("frames", "lock wait under the app's lambda (Parallel.For)",
             round(100 * lam / max(wait, 1), 1), "%")
    finally:
        app.stop()


if __name__ == "__main__":
    main()
