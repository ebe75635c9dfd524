#!/usr/bin/env python3
"""clrscope's CPU and wall profiles against dotnet-trace's sampler, on a program nobody here
wrote: the SDK's C# compiler (bench/compiler_frames.py's run) compiled once under clrscope
(every profile on, default settings) and once under `dotnet-trace collect` (its default
profiles: the runtime's sample profiler, which suspends the runtime every millisecond and records
every managed thread where it stopped), each run's profile read by managed method.

Prints, by method (names without module, parameters and generic arguments):
  - inclusive top 20: clrscope's CPU against dotnet-trace's samples of threads running managed
    code (its CPU_TIME), and clrscope's wall against every dotnet-trace sample (thread time):
    how many of the 20 both have, and the rank correlation of those;
  - self top 20 (clrscope's native frames folded into their managed caller, as dotnet-trace has
    no native frames): the same, and each side's top five with their shares.

dotnet-trace comes from DOTNET_TRACE, else BUILD/tools/dotnet-trace, installed there from NuGet
when missing (`dotnet tool install dotnet-trace`).

Usage: python3 bench/dotnet_trace_compare.py BUILD [FILES]   (FILES generated sources, default 20)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import emit  # noqa: E402
from compiler_frames import csc_command, profile_run  # noqa: E402

TOP = 20


def norm(name):
    """A method's name as both tools can be made to agree on: no module, no parameters, no
    generic arguments or arity, nested types joined by a dot, and the compiler's generated
    names folded as clrscope shows them (a lambda `Method.{lambda}`, a local function
    `Method.Local`, a state machine's MoveNext the method it implements, no display classes)."""
    if "!" in name:
        name = name.split("!", 1)[1]
    i = name.find("(")
    if i > 0:
        name = name[:i]
    name = re.sub(r"`\d+", "", name)
    name = re.sub(r"\+<([^<>+.]+)>d__\d+\.MoveNext$", r".\1", name)
    name = re.sub(r"\+<>c(__DisplayClass[\d_]+)?(?=\.)", "", name)
    name = re.sub(r"<([^<>]+)>g__([^|.]+)\|[\d_]+", r"\1.\2", name)
    name = re.sub(r"<([^<>]+)>b__[\w]+", r"\1.{lambda}", name)
    name = name.replace("+", ".")
    for pat in (r"\[[^\[\]]*\]", r"<[^<>]*>"):
        prev = None
        while prev != name:
            prev, name = name, re.sub(pat, "", name)
    return name.strip()


def managed(frame):
    return not frame.startswith("[") and frame != "Garbage Collector"


def clrscope_tables(samples):
    """({method: inclusive ns}, {method: self ns with native frames folded}, total ns)."""
    inc, own, total = {}, {}, 0
    for frames, vals, _ in samples:
        v = vals[-1]
        total += v
        names = [norm(f) for f in frames if managed(f)]
        for n in set(names):
            inc[n] = inc.get(n, 0) + v
        if names:
            own[names[0]] = own.get(names[0], 0) + v
    return inc, own, total


def speedscope_tables(path):
    """From dotnet-trace's speedscope file: (inclusive, self, total) over every sample (thread
    time) and over the samples of threads running managed code (a CPU_TIME leaf), in ms."""
    with open(path) as f:
        d = json.load(f)
    names = [fr["name"] for fr in d["shared"]["frames"]]
    kind = ["cpu" if n == "CPU_TIME" else "native" if n == "UNMANAGED_CODE_TIME" else
            "method" if "!" in n else "other" for n in names]
    normed = [norm(n) if k == "method" else None for n, k in zip(names, kind)]
    out = {"thread": ({}, {}, [0.0]), "cpu": ({}, {}, [0.0])}

    def book(stack, dt):
        if dt <= 0 or not stack:
            return
        methods = [normed[i] for i in stack if normed[i]]
        views = ["thread"] + (["cpu"] if kind[stack[-1]] == "cpu" else [])
        for view in views:
            inc, own, total = out[view]
            total[0] += dt
            for m in set(methods):
                inc[m] = inc.get(m, 0.0) + dt
            if methods:
                own[methods[-1]] = own.get(methods[-1], 0.0) + dt

    for prof in d["profiles"]:
        stack, at = [], None
        for ev in prof.get("events", ()):
            if at is not None:
                book(stack, ev["at"] - at)
            at = ev["at"]
            if ev["type"] == "O":
                stack.append(ev["frame"])
            elif stack:
                stack.pop()
    return {k: (inc, own, total[0]) for k, (inc, own, total) in out.items()}


def top(table, n=TOP):
    return [k for k, _ in sorted(table.items(), key=lambda kv: -kv[1])[:n]]


def spearman(a, b):
    """Rank correlation of the methods both top lists have (by their ranks in each)."""
    shared = [m for m in a if m in b]
    if len(shared) < 2:
        return float("nan")
    ra = {m: i for i, m in enumerate(sorted(shared, key=a.index))}
    rb = {m: i for i, m in enumerate(sorted(shared, key=b.index))}
    n = len(shared)
    d2 = sum((ra[m] - rb[m]) ** 2 for m in shared)
    return 1 - 6 * d2 / (n * (n * n - 1))


def compare(title, ours, theirs, show=0):
    (oi, oo, ot), (ti, to, tt) = ours, theirs
    for what, o, t in (("inclusive", oi, ti), ("self", oo, to)):
        a, b = top(o), top(t)
        shared = len(set(a) & set(b))
        rho = spearman(a, b)
        print(f"{title}, {what} top {TOP}: {shared} shared, rank correlation {rho:.2f}")
        emit("against dotnet-trace", f"{title} {what} top {TOP} shared", shared, "methods")
        if show and what == "self":
            for side, tab, tot in (("clrscope", o, ot), ("dotnet-trace", t, tt)):
                print(f"    {side}: " + "; ".join(f"{m} {tab[m] / tot * 100:.1f} %"
                                                 for m in top(tab, show)))
            print("    dotnet-trace's top 3 in clrscope: " + "; ".join(
                f"{m} {o.get(m, 0) / ot * 100:.2f} %" for m in top(t, 3)))


def dotnet_trace(build):
    tool = os.environ.get("DOTNET_TRACE") or os.path.join(build, "tools", "dotnet-trace")
    if not os.path.exists(tool):
        subprocess.run(["dotnet", "tool", "install", "dotnet-trace", "--tool-path",
                        os.path.dirname(tool)], check=True, stdout=subprocess.DEVNULL,
                       timeout=300)
    return tool


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    tool = dotnet_trace(build)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = csc_command(tmp, files)
        app, got, status, out = profile_run(build, cmd, kinds=("profile", "wall"))
        if app.proc.returncode:
            sys.exit(f"csc under clrscope exited with {app.proc.returncode}: " + "".join(out[:5]))
        trace = os.path.join(tmp, "csc.nettrace")
        r = subprocess.run([tool, "collect", "--format", "Speedscope", "-o", trace, "--"] + cmd,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=900)
        speed = os.path.join(tmp, "csc.speedscope.json")
        if r.returncode or not os.path.exists(speed):
            sys.exit(f"dotnet-trace failed ({r.returncode}): {r.stdout[-500:]}")
        theirs = speedscope_tables(speed)
    cpu, wall = clrscope_tables(got["profile"]), clrscope_tables(got["wall"])
    print(f"csc on {files} files: clrscope {cpu[2] / 1e9:.1f} s of CPU, {wall[2] / 1e9:.1f} s "
          f"of wall sampled (runtime suspended {status['self']['suspended_s'] if status else '?'}"
          f" s); dotnet-trace {theirs['thread'][2] / 1e3:.1f} s of thread time, "
          f"{theirs['cpu'][2] / 1e3:.1f} s of it running managed code")
    if status:
        asks = (status["self"].get("signal_sampler") or {}).get("wall_asks") or {}
        print("wall asks: " + ", ".join(f"{k} {v}" for k, v in asks.items() if v))
    compare("CPU vs managed running", cpu, theirs["cpu"], show=5)
    compare("wall vs thread time", wall, theirs["thread"], show=5)


if __name__ == "__main__":
    main()
