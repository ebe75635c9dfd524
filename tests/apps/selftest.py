#!/usr/bin/env python3
"""selftest.py - runs every TestApp mode briefly, without the profiler, and checks its ground truth.

The integration tests trust TestApp's truth; this checks that trust is earned: the measured
figures are self-consistent and match what each mode promises (exact counts, exact object sizes
on x64, the 3:1 CPU split, graceful SIGTERM and stdin handling).

usage: tests/apps/selftest.py [APPS_DIR] [--runtimes net10,net9,net8]
APPS_DIR defaults to build/apps (the output of tests/apps/build.sh); runtimes default to the
ones listed in APPS_DIR/versions.txt. Exit status 0 when every check passes.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def command(apps, runtime):
    # net10 is framework-dependent: its apphost finds the installed runtime like `dotnet` does.
    return [os.path.join(apps, runtime, "TestApp")]


def run(cmd, mode, *args, timeout=60, stdin=subprocess.DEVNULL):
    """Runs one mode to completion; returns (exit code, stdout lines, truth from the file)."""
    with tempfile.TemporaryDirectory() as tmp:
        truth_path = os.path.join(tmp, "truth.json")
        env = dict(os.environ, CLRSCOPE_TRUTH=truth_path)
        r = subprocess.run(cmd + [mode] + list(args), env=env, stdin=stdin, capture_output=True,
                           text=True, timeout=timeout)
        check(r.stderr == "", f"{mode}: unexpected stderr: {r.stderr[:500]}")
        truth = None
        if os.path.exists(truth_path):
            with open(truth_path) as f:
                truth = json.load(f)
        return r.returncode, r.stdout.splitlines(), truth


def truth_lines(lines):
    return [json.loads(l[len("truth: "):]) for l in lines if l.startswith("truth: ")]


def common(mode, lines, truth, seconds):
    check(any(l.startswith("ready pid=") for l in lines), f"{mode}: no ready line")
    pid = int([l for l in lines if l.startswith("ready pid=")][0].split("=")[1])
    finals = truth_lines(lines)
    check(finals and finals[-1] == truth, f"{mode}: last truth line differs from the truth file")
    check(truth["mode"] == mode and truth["pid"] == pid and truth["final"], f"{mode}: header fields")
    check(truth["stopped_by"] == "duration", f"{mode}: stopped_by {truth['stopped_by']}")
    check(abs(truth["elapsed_s"] - seconds) < 1.0, f"{mode}: elapsed_s {truth['elapsed_s']}")
    for k in ("process_cpu_s", "gen0_collections", "gen1_collections", "gen2_collections",
              "gc_pause_ms", "total_allocated_bytes", "server_gc", "runtime_version"):
        check(k in truth, f"{mode}: missing {k}")


def t_hello(cmd):
    code, lines, truth = run(cmd, "hello", "--exit", "7")
    check(code == 7, f"hello: exit {code}")
    check(lines == ["hello from TestApp"], f"hello: stdout {lines}")
    check(truth and truth["mode"] == "hello" and truth["exit_code"] == 7, "hello: truth file")


def t_cpu_split(cmd):
    code, lines, t = run(cmd, "cpu-split", "--seconds", "3", "--exit", "3")
    check(code == 3, f"cpu-split: exit {code}")
    common("cpu-split", lines, t, 3)
    ratio = t["heavy_ms"] / t["light_ms"]
    check(2.8 < ratio < 3.2, f"cpu-split: heavy/light wall {ratio:.2f}")
    check(t["heavy_cpu_ms"] > 2 * t["light_cpu_ms"] > 0, "cpu-split: cpu split")
    check(t["sleeper_sleeps"] >= 15, f"cpu-split: sleeper_sleeps {t['sleeper_sleeps']}")
    check(t["process_cpu_s"] * 1000 >= t["worker_cpu_ms"] * 0.99, "cpu-split: process cpu < worker cpu")


def t_cpu_generic(cmd):
    code, lines, t = run(cmd, "cpu-generic", "--seconds", "3")
    check(code == 0, f"cpu-generic: exit {code}")
    common("cpu-generic", lines, t, 3)
    ratio = t["int_cpu_ms"] / max(t["string_cpu_ms"], 1e-9)
    check(2.8 < ratio < 3.2, f"cpu-generic: int/string cpu {ratio:.2f}")
    check(t["int_calls"] > 0 and t["string_calls"] > 0, "cpu-generic: both called")


def t_gc_heavy(cmd):
    code, lines, t = run(cmd, "gc-heavy", "--seconds", "3", "--truth-every-second")
    common("gc-heavy", lines, t, 3)
    periodic = [x for x in truth_lines(lines) if not x["final"]]
    check(len(periodic) >= 2, f"gc-heavy: {len(periodic)} periodic truth lines")
    check(all(a["gen0_collections"] <= b["gen0_collections"] for a, b in zip(periodic, periodic[1:])),
          "gc-heavy: periodic counts decrease")
    check(t["gen0_collections"] > t["gen1_collections"] > 0, "gc-heavy: gen0/gen1 counts")
    check(t["gen2_collections"] > 0, "gc-heavy: no gen2 collection")
    check(t["gc_pause_ms"] > 0 and t["total_allocated_bytes"] > 100e6, "gc-heavy: pause/alloc")


def t_cpu_only(cmd):
    code, lines, t = run(cmd, "cpu-only", "--seconds", "2")
    common("cpu-only", lines, t, 2)
    check(t["gen0_collections"] == 0, f"cpu-only: {t['gen0_collections']} GCs")
    check(t["total_allocated_bytes"] < 1e6, f"cpu-only: allocated {t['total_allocated_bytes']}")
    # A busy CI machine may give the worker well under a full core, but never more than one.
    cpu_ms = t["worker_cpu_ms"]
    check(300 < cpu_ms <= 1000 * t["elapsed_s"] * 1.02 and cpu_ms <= 1000 * t["process_cpu_s"],
          f"cpu-only: worker cpu {cpu_ms} ms in {t['elapsed_s']:.1f} s")


def t_alloc_mix(cmd):
    code, lines, t = run(cmd, "alloc-mix", "--seconds", "2")
    common("alloc-mix", lines, t, 2)
    sizes = {"System.Byte[]": 1024, "TestApp.Alloc.SmallWidget": 32,
             "TestApp.Alloc.BigWidget": 144, "System.String": 128}  # x64
    total = 0
    for name, size in sizes.items():
        ty = t["types"][name]
        check(ty["count"] > 0 and ty["bytes"] == ty["count"] * size,
              f"alloc-mix: {name} {ty['count']} objects, {ty['bytes']} bytes (expected {size} each)")
        check(ty["count"] == t["rounds"] * ty["per_round"], f"alloc-mix: {name} count vs rounds")
        total += ty["bytes"]
    check(total == t["thread_allocated_bytes"], f"alloc-mix: types {total} != thread {t['thread_allocated_bytes']}")
    check(t["total_allocated_bytes_delta"] >= total, "alloc-mix: process delta below thread bytes")
    mbps = total / 1e6 / t["elapsed_s"]
    check(60 < mbps < 130, f"alloc-mix: {mbps:.0f} MB/s, target 100")


def t_leak(cmd):
    code, lines, t = run(cmd, "leak", "--seconds", "3")
    common("leak", lines, t, 3)
    leaky = t["alive"]["TestApp.Live.LeakyItem"]
    # four every ~10 ms (about 380/s; fewer when the scheduler is late)
    check(600 < leaky <= 1300, f"leak: {leaky} LeakyItems in 3 s")
    check(t["alive"]["TestApp.Live.CachedItem"] == 500 and t["cache_rebuilds"] == 2, "leak: cache")
    check(t["sizes"]["TestApp.Live.LeakyItem"] == 200 and t["leaky_bytes"] == 200 * leaky, "leak: sizes")
    check(t["allocated"]["TestApp.Live.TempItem"] > 100000, "leak: garbage")


def t_exceptions(cmd):
    code, lines, t = run(cmd, "exceptions", "--seconds", "3")
    common("exceptions", lines, t, 3)
    check(any(l.startswith("thrown ") for l in lines), "exceptions: no thrown line")
    want = {"System.InvalidOperationException": 20000, "System.ArgumentException": 2000,
            "TestApp.Errors.RareException": 3, "TestApp.Errors.UnnamedException": 40}
    for name, n in want.items():
        e = t["exceptions"][name]
        check(e["count"] == n and e["caught"] == n and e["rethrown"] == 0, f"exceptions: {name} {e}")
    # 50 thrown, each rethrown twice (throw; and an await) before one catch: 150 reported throws
    r = t["exceptions"]["TestApp.Errors.RethrownException"]
    check(r["count"] == 150 and r["rethrown"] == 100 and r["caught"] == 50, f"exceptions: rethrown {r}")
    want["TestApp.Errors.RethrownException"] = 150
    check(t["total"] == sum(want.values()) and t["all_thrown"], f"exceptions: total {t['total']}")
    check(t["exceptions"]["TestApp.Errors.UnnamedException"]["message"]
          == "Exception of type 'TestApp.Errors.UnnamedException' was thrown.", "exceptions: unnamed")
    check(t["first_chance"] == want, f"exceptions: first-chance {t['first_chance']}")


def t_contention(cmd):
    code, lines, t = run(cmd, "contention", "--seconds", "2")
    common("contention", lines, t, 2)
    check(t["threads"] == 4 and t["contended_acquisitions"] > 0.8 * t["acquisitions"] > 0,
          f"contention: {t['contended_acquisitions']}/{t['acquisitions']}")
    # 4 threads, lock busy nearly all the time: about 3 threads waiting at any moment.
    wait_s = t["lock_wait_ms"] / 1000
    check(1.5 * t["elapsed_s"] < wait_s < 4 * t["elapsed_s"], f"contention: waited {wait_s:.1f} s")


def t_heap(cmd):
    code, lines, t = run(cmd, "heap", "--seconds", "3", "--free-after", "1")
    common("heap", lines, t, 3)
    check("built tree_nodes=100000 leaves=12345" in lines, "heap: built line")
    check("freed leaves=6172" in lines, "heap: freed line")
    check(t["freed"] and t["leaves"] == 6172 and t["tree_nodes"] == 100000, "heap: counts")
    check((t["tree_node_size"], t["leaf_size"], t["leaf_payload_size"]) == (40, 32, 128), "heap: sizes")
    check(t["types"]["TestApp.Heap.TreeNode"]["bytes"] == 4000000, "heap: tree bytes")


def t_threads(cmd):
    code, lines, t = run(cmd, "threads", "--seconds", "2", "--threads", "200")
    common("threads", lines, t, 2)
    check("started threads=200" in lines, "threads: started line")
    check(t["threads_started"] == 200 and t["os_threads_at_ready"] >= 200, "threads: counts")


def t_wait(cmd):
    code, lines, t = run(cmd, "wait", "--seconds", "2")
    common("wait", lines, t, 2)
    check(not t["stdin_watched"] and t["ticks"] > 50, "wait: ticks / stdin with /dev/null")
    # stdin closing stops it
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        p = subprocess.Popen(cmd + ["wait", "--seconds", "0"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, CLRSCOPE_TRUTH=path))
        check(p.stdout.readline().startswith("ready pid="), "wait: ready")
        time.sleep(0.5)
        p.stdin.close()
        p.wait(timeout=10)
        with open(path) as f:
            t = json.load(f)
        check(t["stopped_by"] == "stdin" and t["stdin_watched"], f"wait: stopped_by {t['stopped_by']}")
    # SIGTERM stops it gracefully with the --exit status
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        p = subprocess.Popen(cmd + ["gc-heavy", "--seconds", "60", "--exit", "4"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, CLRSCOPE_TRUTH=path))
        check(p.stdout.readline().startswith("ready pid="), "sigterm: ready")
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        code = p.wait(timeout=10)
        rest = p.stdout.read()
        with open(path) as f:
            t = json.load(f)
        check(code == 4 and t["stopped_by"] == "SIGTERM" and "truth: " in rest, f"sigterm: exit {code}, {t['stopped_by']}")


TESTS = [t_hello, t_cpu_split, t_cpu_generic, t_gc_heavy, t_cpu_only, t_alloc_mix, t_leak, t_exceptions,
         t_contention, t_heap, t_threads, t_wait]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("apps", nargs="?", default=os.path.join(REPO, "build", "apps"))
    ap.add_argument("--runtimes", help="comma-separated, e.g. net10,net8")
    a = ap.parse_args()
    if a.runtimes:
        runtimes = a.runtimes.split(",")
    else:
        with open(os.path.join(a.apps, "versions.txt")) as f:
            runtimes = [l.split()[0] for l in f if l.strip()]
    failed = 0
    for rt in runtimes:
        cmd = command(a.apps, rt)
        version = subprocess.run(cmd + ["version"], capture_output=True, text=True).stdout.strip()
        for test in TESTS:
            t0 = time.time()
            try:
                test(cmd)
                print(f"ok   {rt} ({version}) {test.__name__[2:]} ({time.time() - t0:.1f}s)", flush=True)
            except (Failure, subprocess.TimeoutExpired, KeyError, OSError, ValueError) as e:
                failed += 1
                print(f"FAIL {rt} ({version}) {test.__name__[2:]}: {e!r}", flush=True)
    print(f"{failed} failed" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
