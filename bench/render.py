#!/usr/bin/env python3
"""bench/render.py - writes results.md from a benchmark run's figures.

    python3 bench/render.py --figures FIGURES.jsonl [--details DETAILS.md] [--out results.md]
                            [--check SECTION,SECTION…]

FIGURES is one JSON object per line: a figure {"section", "name", "value", "unit", …} as the
bench scripts emit them (benchlib.emit, and the same form from first_paint.mjs and
switch_cost.c), or the run's description {"run": {"date", "machine", "load", "runtime",
"commit", "command", "notes": […]}} that bench/run.sh writes first. DETAILS is the scripts' own
tables, appended below the first screen.

The first screen answers "what does clrscope cost, and how accurate is it" in two tables, one
row per figure: what was measured, its value (with its interquartile range when the script had
rounds), what it was paired with (the A/A pair: a second process without profiler paired the
same way, or the peer beside it), the target, and whether it is met. A row whose figure the run
did not produce says so.

--check makes it fail (exit 1) when a listed section emitted no figure or a line is not a figure:
bench/run.sh's smoke mode uses it, so that a script that stops emitting breaks bench.smoke.
Python 3 standard library only.
"""
import argparse
import json
import sys


def at_most(limit):
    return lambda v, pair: v <= limit


def at_least(limit):
    return lambda v, pair: v >= limit


def faster_than_pair(v, pair):
    return pair is not None and v < pair


# (label, figure id "section/name", pair: (figure id, how the pair is named) or None,
#  target as text, a check (value, pair value) -> met, or None when there is no target)
COST = [
    ("ASP.NET Core server, every profile, steady state: CPU per request",
     "aspnet_steady/all.cpu_per_request", ("aspnet_steady/unprofiled.cpu_per_request", "A/A pair"),
     "≤ 1.01", at_most(1.01)),
    ("… throughput", "aspnet_steady/all.throughput",
     ("aspnet_steady/unprofiled.throughput", "A/A pair"), "≥ 0.99", at_least(0.99)),
    ("… p99 latency (saturated)", "aspnet_steady/all.p99",
     ("aspnet_steady/unprofiled.p99", "A/A pair"), "≤ 1.02", at_most(1.02)),
    ("… GC pause per collection", "aspnet_steady/all.gc_pause",
     ("aspnet_steady/unprofiled.gc_pause", "A/A pair"), "–", None),
    ("… clrscope's own threads, share of the server's CPU", "aspnet_steady/all.self_cpu_share",
     None, "–", None),
    ("ASP.NET Core server right after start, every profile: CPU per request",
     "aspnet_overhead/all.cpu_per_request",
     ("aspnet_overhead/dotnet-trace.cpu_per_request", "dotnet-trace"), "–", None),
    ("Extra resident memory, the demo app over the run, largest", "rss_growth/extra_max",
     ("rss_growth/extra_end", "at the end"), "≤ 30 MiB", at_most(30)),
    ("… growth once started", "rss_growth/growth",
     ("rss_growth/accounted_growth", "clrscope's accounted memory"),
     "flat once the history (900 s) is full", None),
    ("Dashboard API p99 under load, slowest endpoint", "api_latency/p99_max", None, "≤ 10 ms",
     at_most(10)),
    ("History on disk, the server with every profile: bytes per minute", "history/bytes_per_minute",
     None, "–", None),
    ("… a day of it (1,440 segments) opened as a flame graph", "history/day_open_s", None, "≤ 2 s",
     at_most(2)),
    ("Dashboard first paint, new tab, cold cache", "first_paint/cold",
     ("first_paint/floor", "a one-line page"), "≤ 300 ms", at_most(300)),
    ("Heap snapshot of 1 M objects", "gcdump_bench/1000000.total",
     ("gcdump_bench/1000000.tool_before", "dotnet-gcdump collect"), "faster than the peer",
     faster_than_pair),
    ("Heap snapshot of 5 M objects", "gcdump_bench/5000000.total",
     ("gcdump_bench/5000000.tool_before", "dotnet-gcdump collect"), "faster than the peer",
     faster_than_pair),
    ("Hello-world start-up, added", "startup/added", ("startup/none", "no profiler"), "–", None),
    ("Thread dump of 500 threads: the app stands still", "threads_bench/500.dump_pause", None,
     "–", None),
    ("Sampling 500 blocked threads: added CPU", "threads_bench/500.added_cores", None, "–", None),
    ("CPU-bound app, signal sampler: throughput", "cpu_overhead/signal.throughput",
     ("cpu_overhead/suspend.throughput", "suspend sampler"), "–", None),
    ("GC-bound app, every profile: CPU per unit of work (workstation GC)",
     "gc_overhead/workstation.all", ("gc_overhead/workstation.gc", "gc profile alone"), "–",
     None),
    ("… (server GC)", "gc_overhead/server.all", ("gc_overhead/server.gc", "gc profile alone"),
     "–", None),
    ("Exception storm, every profile: CPU per throw",
     "exceptions_overhead/everything (default).ratio",
     ("exceptions_overhead/events: everything.ratio", "from the runtime's events"), "–", None),
    ("Allocation-bound app: live objects on top of allocations",
     "live_overhead/alloc-mix.live_over_alloc", None, "–", None),
    ("A context switch with a perf sampling clock on the thread: extra",
     "switch_cost/perf_sampling.extra_per_switch",
     ("switch_cost/posix.extra_per_switch", "a POSIX CPU timer"), "–", None),
]

ACCURACY = [
    ("A/A pair (two identical servers without profiler): CPU per request",
     "aspnet_steady/unprofiled.cpu_per_request", None, "1.000", None),
    ("A/A pair: throughput", "aspnet_steady/unprofiled.throughput", None, "1.000", None),
    ("A/A pair: p99 latency", "aspnet_steady/unprofiled.p99", None, "1.000", None),
    ("Allocation stacks: the frame-pointer walk gives the runtime's stack, ASP.NET Core server",
     "alloc_walk_check/agreement", None, "> 97 %", lambda v, pair: v > 97),
]


def fmt(fig):
    """A figure as text: its value in its unit, and its IQR when it has one."""
    v, unit = fig["value"], fig.get("unit", "")
    if unit == "ratio":
        text = f"{v:.3f}"
        if "lo" in fig and "hi" in fig and fig.get("n", 2) > 1:
            text += f" ({fig['lo']:.3f}..{fig['hi']:.3f})"
        return text
    if unit in ("ms", "us", "s"):
        digits = 0 if abs(v) >= 10 else 2 if unit in ("us", "s") else 1
        text = f"{v:.{digits}f} {'µs' if unit == 'us' else unit}"
        if "hi" in fig:
            text += f" (max {fig['hi']:.{digits}f})"
        return text
    if unit in ("MiB", "MB"):
        signed = any(k in fig.get("name", "") for k in ("extra", "delta"))
        return f"{v:+.1f} {unit}" if signed else f"{v:.1f} {unit}"
    if unit == "MiB/min":
        since = f" (from {fig['since_s']:.0f} s on)" if "since_s" in fig else ""
        return f"{v:+.2f} {unit}{since}"
    if unit == "%":
        return f"{v:.2f} %"
    if unit == "cores":
        return f"{v:+.4f} cores"
    return f"{v:g} {unit}".strip()


def load(path):
    run, figures, bad = {}, {}, []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                bad.append(f"line {number}: not JSON: {line[:80]}")
                continue
            if "run" in rec:
                run = rec["run"]
            elif {"section", "name", "value"} <= rec.keys() and \
                    isinstance(rec["value"], (int, float)):
                figures[f"{rec['section']}/{rec['name']}"] = rec
            else:
                bad.append(f"line {number}: not a figure: {line[:80]}")
    return run, figures, bad


def table(rows, figures):
    out = ["| figure | measured | beside it | target | met |", "|---|---|---|---|---|"]
    for label, fid, pair, target, check in rows:
        fig = figures.get(fid)
        pfig = figures.get(pair[0]) if pair else None
        if not fig:
            out.append(f"| {label} | not run | – | {target} | – |")
            continue
        beside = f"{fmt(pfig)} ({pair[1]})" if pfig else "–"
        met = "–"
        if check:
            met = "yes" if check(fig["value"], pfig["value"] if pfig else None) else "**no**"
        out.append(f"| {label} | {fmt(fig)} | {beside} | {target} | {met} |")
    return out


def render(run, figures, details):
    out = ["# clrscope benchmark results", ""]
    out.append("Generated by `bench/run.sh` (`bench/render.py` from the run's figures, kept in "
               "`bench/figures.jsonl`).")
    out.append("")
    for key, label in (("date", "date"), ("machine", "machine"),
                       ("load", "load average at start"), ("runtime", "runtime"),
                       ("commit", "commit"), ("command", "command")):
        if run.get(key):
            out.append(f"- {label}: {run[key]}")
    for note in run.get("notes", []):
        out.append(f"- {note}")
    out += ["", "Every ratio is the profiled process over an unprofiled one running at the same "
            "time, the median over rounds (interquartile range in brackets). On this 2-core "
            "VM identical runs drift by 10–15 % from one another, which is why each figure is "
            "paired, and why the A/A pair below says how small a difference a run can resolve.",
            "", "## What clrscope costs", ""]
    out += table(COST, figures)
    out += ["", "## How far the figures can be trusted", ""]
    out += table(ACCURACY, figures)
    out += ["", "How accurate each profile is against the ground truth a real app measures "
            "itself is checked by the tests, and stated on each profile's page "
            "(`docs/profiles/`). What was tried and learned on the way: "
            "[findings.md](findings.md).", ""]
    if details.strip():
        out += ["# Details: each script's own tables", "", details.rstrip(), ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", required=True)
    ap.add_argument("--details")
    ap.add_argument("--out")
    ap.add_argument("--check", default="", help="sections that must have emitted a figure")
    args = ap.parse_args()
    run, figures, bad = load(args.figures)
    details = ""
    if args.details:
        with open(args.details, encoding="utf-8") as f:
            details = f.read()
    text = render(run, figures, details)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.check:
        seen = {fid.split("/", 1)[0] for fid in figures}
        missing = [s for s in args.check.split(",") if s and s not in seen]
        for problem in bad + [f"section {s} emitted no figure" for s in missing]:
            print(f"render: {problem}", file=sys.stderr)
        if bad or missing:
            sys.exit(1)


if __name__ == "__main__":
    main()
