#!/usr/bin/env python3
"""Do the allocation profile's 95 % intervals hold the truth 95 % of the time? TestApp `alloc-mix`
(a known mix of four types on one thread, throttled to a steady --mb-per-s, default 100) under
the profiler, every profile on, at each of BUDGETS (default `0.5%,0`: the governor turning the
allocation events on for a share of each second, and all on); RUNS apps each (default 3). In each
app, after WARM seconds (default 15: the governor's first windows), the allocation table of the
last WINDOW seconds (default 10) is read every WINDOW seconds, NWIN times (default 6), so the
windows do not overlap. The app's truth lines (every second, each type's bytes so far, with the
wall clock) give each type's bytes over the table's own [t_from, t_to), interpolated between the
two lines around each edge (the app allocates at a steady rate, in 10 ms steps).

Prints, per budget: how many (window, type) intervals `types[].bytes_ci95` held the truth, the
same for the total's `total.ci95`, the median relative error and interval half-width, and the
allocation events' coverage; then every miss. A 95 % interval should hold it about 95 % of the
time (the issue's bar: 90 %).
   bench/interval_coverage.py [build]      (RUNS, BUDGETS, WARM, WINDOW, NWIN, MB_PER_S)"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
if len(sys.argv) > 1:
    os.environ["CLRSCOPE_BUILD"] = os.path.abspath(sys.argv[1])
from harness import ProfiledApp  # noqa: E402

RUNS = int(os.environ.get("RUNS", "3"))
BUDGETS = os.environ.get("BUDGETS", "0.5%,0").split(",")
WARM = float(os.environ.get("WARM", "15"))
WINDOW = int(os.environ.get("WINDOW", "10"))
NWIN = int(os.environ.get("NWIN", "6"))
MB_PER_S = os.environ.get("MB_PER_S", "100")


def at(lines, t, name):
    """A type's bytes so far at wall time t (None for "total"'s sum of the types), interpolated
    between the truth lines around it; None when t is outside them."""
    def val(line):
        ty = line["types"]
        return sum(x["bytes"] for x in ty.values()) if name is None else ty[name]["bytes"]
    for a, b in zip(lines, lines[1:]):
        if a["unix_s"] <= t <= b["unix_s"]:
            f = (t - a["unix_s"]) / (b["unix_s"] - a["unix_s"]) if b["unix_s"] > a["unix_s"] else 0
            return val(a) + f * (val(b) - val(a))
    return None


def run_one(budget):
    env = {"CLRSCOPE_OVERHEAD_BUDGET": budget, "CLRSCOPE_OVERHEAD_FLOOR": "0"}
    seconds = int(WARM + WINDOW * NWIN + 5)
    tables = []
    with ProfiledApp("alloc-mix", ["--seconds", str(seconds), "--mb-per-s", MB_PER_S,
                                   "--truth-every-second"], env=env) as app:
        app.wait_ready()
        time.sleep(WARM)
        for _ in range(NWIN):
            time.sleep(WINDOW)
            tables.append(app.json(f"/api/v1/allocations?seconds={WINDOW}"))
        time.sleep(1.5)  # the truth line after the last window's end
        lines = [x for x in app.truth_lines() if "unix_s" in x and "types" in x]
    checks = []
    for tb in tables:
        t0, t1 = tb["t_from"], tb["t_to"]
        rows = {r["type"]: r for r in tb["types"]}
        names = list(lines[-1]["types"]) if lines else []
        for name in names + [None]:
            a, b = at(lines, t0, name), at(lines, t1, name)
            if a is None or b is None:
                continue
            truth = b - a
            if name is None:
                est, ci = tb["total"]["bytes"], tb["total"].get("ci95")
            else:
                r = rows.get(name)
                est, ci = (r["bytes"], r.get("bytes_ci95")) if r else (0, None)
            if not ci or truth <= 0:
                continue
            checks.append({"type": name or "(total)", "truth": truth, "est": est,
                           "lo": ci[0], "hi": ci[1], "held": ci[0] <= truth <= ci[1],
                           "coverage": tb.get("coverage", 1), "t_from": t0})
    return checks


def main():
    for budget in BUDGETS:
        checks = []
        for _ in range(RUNS):
            checks += run_one(budget)
        types = [c for c in checks if c["type"] != "(total)"]
        totals = [c for c in checks if c["type"] == "(total)"]
        print(f"budget {budget}: {RUNS} runs, {len(totals)} windows of {WINDOW} s")
        for label, cs in (("types", types), ("total", totals)):
            if not cs:
                print(f"  {label}: no interval to check")
                continue
            held = sum(c["held"] for c in cs)
            err = statistics.median(abs(c["est"] / c["truth"] - 1) for c in cs)
            half = statistics.median((c["hi"] - c["lo"]) / 2 / c["truth"] for c in cs)
            print(f"  {label}: {held} of {len(cs)} intervals held the truth "
                  f"({held / len(cs) * 100:.1f} %); median error {err * 100:.1f} %, "
                  f"median half-width {half * 100:.1f} %")
        cov = [c["coverage"] for c in totals]
        if cov:
            print(f"  allocation events on: {min(cov):.3f}..{max(cov):.3f} of each window")
        for c in checks:
            if not c["held"]:
                print(f"  missed: {c['type']} truth {c['truth']:.0f} estimate {c['est']:.0f} "
                      f"[{c['lo']:.0f}, {c['hi']:.0f}] coverage {c['coverage']:.3f}")


if __name__ == "__main__":
    main()
