"""The driver of bench/cpu_overhead.sh (read that file for usage); argv = the app command line."""
import json
import os
import shutil
import statistics as st
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import emit  # noqa: E402

CLSID = "{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}"
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def run(app, mode, tmp, cfg):
    """One app run: (iterations per wall second, iterations per process CPU second after ready)."""
    truth = os.path.join(tmp, "truth.json")
    env = dict(os.environ, CLRSCOPE_TRUTH=truth, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1")
    if mode != "none":
        env.update(CORECLR_ENABLE_PROFILING="1", CORECLR_PROFILER=CLSID,
                   CORECLR_PROFILER_PATH=cfg["lib"], CLRSCOPE_PORT="0",
                   CLRSCOPE_PROFILES=cfg["profiles"], CLRSCOPE_SAMPLING_HZ=cfg["hz"],
                   CLRSCOPE_CPU_SAMPLER=mode, CLRSCOPE_LOG_LEVEL="warn")
        if os.environ.get("WALL_HZ"):
            env["CLRSCOPE_WALL_HZ"] = os.environ["WALL_HZ"]
    p = subprocess.Popen(app + ["cpu-only", "--seconds", cfg["secs"], "--threads", cfg["threads"]],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    cpu_at_ready = None
    for line in p.stdout:
        if line.startswith("ready") and cpu_at_ready is None:
            cpu_at_ready = proc_cpu_s(p.pid)
    if p.wait() != 0:
        raise SystemExit(f"cpu_overhead: the app failed under mode {mode} (exit {p.returncode})")
    with open(truth) as f:
        t = json.load(f)
    cpu = t["process_cpu_s"] - (cpu_at_ready or 0)
    return t["iterations"] / t["elapsed_s"], t["iterations"] / max(cpu, 1e-9)


def shown(arg):
    """A path of the app's command line as the results show it: relative to the working
    directory when it lies below it (results.md names no machine's own paths)."""
    rel = os.path.relpath(arg) if os.path.isabs(arg) else arg
    return rel if not rel.startswith("..") else arg


def q(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    f = int(k)
    return xs[f] + (xs[min(f + 1, len(xs) - 1)] - xs[f]) * (k - f)


def main():
    app = sys.argv[1:]
    cfg = {"lib": os.environ["BENCH_LIB"], "secs": os.environ["BENCH_SECS"],
           "threads": os.environ["BENCH_THREADS"], "hz": os.environ["BENCH_HZ"],
           "profiles": os.environ["BENCH_PROFILES"]}
    rounds = int(os.environ["BENCH_ROUNDS"])
    modes = os.environ["BENCH_MODES"].split()
    every = ["none"] + modes
    print(f"cpu_overhead: {rounds} rounds x {len(every)} runs of {cfg['secs']} s; cpu-only "
          f"--threads {cfg['threads']}; {cfg['hz']} Hz; CLRSCOPE_PROFILES={cfg['profiles']}"
          f"{'; CLRSCOPE_WALL_HZ=' + os.environ['WALL_HZ'] if os.environ.get('WALL_HZ') else ''}"
          f"; app: {' '.join(shown(a) for a in app)}", flush=True)
    tmp = tempfile.mkdtemp(prefix="clrscope-bench.")
    res = {}
    try:
        for r in range(rounds):
            for i in range(len(every)):
                m = every[(i + r) % len(every)]  # rotate: no mode always runs first or last
                res[(m, r)] = run(app, m, tmp, cfg)
                print(".", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{'mode':<9} {'throughput':>10} {'IQR':>14} {'min..max':>14}   {'CPU/work':>8} "
          f"{'IQR':>14}")
    for m in modes:
        thr = [res[(m, r)][0] / res[("none", r)][0] for r in range(rounds)]
        cost = [res[("none", r)][1] / res[(m, r)][1] for r in range(rounds)]
        print(f"{m:<9} {st.median(thr):>10.3f} {q(thr, .25):>7.3f}..{q(thr, .75):<5.3f}"
              f" {min(thr):>7.3f}..{max(thr):<5.3f}   {st.median(cost):>8.3f}"
              f" {q(cost, .25):>7.3f}..{q(cost, .75):<5.3f}")
        emit("cpu_overhead", f"{m}.throughput", st.median(thr), "ratio", lo=q(thr, .25),
             hi=q(thr, .75), n=rounds, threads=int(cfg["threads"]), profiles=cfg["profiles"])
        emit("cpu_overhead", f"{m}.cpu_per_work", st.median(cost), "ratio", lo=q(cost, .25),
             hi=q(cost, .75), n=rounds, threads=int(cfg["threads"]), profiles=cfg["profiles"])
    base = [res[("none", r)][0] for r in range(rounds)]
    print(f"baseline: median {st.median(base) / 1e6:.0f} M iterations/s "
          f"(min..max {min(base) / 1e6:.0f}..{max(base) / 1e6:.0f})")


if __name__ == "__main__":
    main()
