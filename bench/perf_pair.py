"""The analysis half of bench/perf_pair.sh (read that file): argv[1] = its scratch directory with
{with,without}.script (perf script -F comm,period,ip,sym,dso), {with,without}.stats (the
WebApp's /stats before and after the recording) and fde.txt (libcoreclr's function ranges)."""
import bisect
import collections
import json
import os
import re
import sys

D = sys.argv[1]
FRAME = re.compile(r"\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")


def load_ranges():
    rs = []
    with open(os.path.join(D, "fde.txt")) as f:
        for line in f:
            a, b = line.split()
            rs.append((int(a, 16), int(b, 16)))
    rs.sort()
    return rs, [a for a, _ in rs]


RANGES, STARTS = load_ranges()


def frame_name(addr, sym, dso):
    """A stable name for one frame: the symbol, or libcoreclr's function start (C0x...)."""
    base = os.path.basename(dso)
    if sym == "[unknown]" and base == "libcoreclr.so":
        a = int(addr, 16)
        i = bisect.bisect_right(STARTS, a) - 1
        if i >= 0 and a < RANGES[i][1]:
            return f"libcoreclr:{RANGES[i][0]:#x}"
        return "libcoreclr:?"
    if sym == "[unknown]":
        return f"[{base}]"
    return re.sub(r"\+0x[0-9a-f]+$", "", sym)


def read_samples(path):
    """Yields (comm, period_ns, [(name, dso), ...] leaf first) per sample."""
    comm, period, frames = None, 0, []
    with open(path, errors="replace") as f:
        for line in f:
            if line[:1] not in ("\t", " "):
                if comm is not None and frames:
                    yield comm, period, frames
                parts = line.split()
                comm, frames = None, []
                if len(parts) >= 2 and parts[-1].isdigit():
                    comm, period = " ".join(parts[:-1]), int(parts[-1])
                continue
            m = FRAME.match(line)
            if m:
                addr, sym, dso = m.groups()
                frames.append((frame_name(addr, sym, dso), os.path.basename(dso)))
    if comm is not None and frames:
        yield comm, period, frames


def stats(side):
    with open(os.path.join(D, f"{side}.stats")) as f:
        return [json.loads(line) for line in f if line.strip()][:2]


def requests(side):
    first, last = stats(side)
    return last["served"] - first["served"], last["cpu_s"] - first["cpu_s"]


def gc_line(side, n):
    """Collections per 1000 requests and the runtime's own pause time per collection."""
    first, last = stats(side)
    gcs = last["gen0"] - first["gen0"]
    if gcs <= 0 or "gc_pause_ms" not in last:
        return ""
    pause = (last["gc_pause_ms"] - first["gc_pause_ms"]) / gcs
    return f"; {gcs / n * 1000:.1f} GCs per 1000 requests, {pause * 1000:.0f} us pause per GC"


def profile(side):
    by_dso, incl, self_ = collections.Counter(), collections.Counter(), collections.Counter()
    by_comm = collections.Counter()
    for comm, period, frames in read_samples(os.path.join(D, f"{side}.script")):
        by_dso[frames[0][1]] += period
        by_comm[comm] += period
        self_[frames[0][0]] += period
        for name in {n for n, _ in frames}:
            incl[name] += period
    return by_dso, incl, self_, by_comm


def main():
    nreq = {}
    prof = {}
    for side in ("with", "without"):
        n, cpu = requests(side)
        if n <= 0:
            raise SystemExit(f"perf_pair: the {side} server served no requests")
        nreq[side] = n
        prof[side] = profile(side)
        print(f"{side:8s} clrscope: {n} requests, {cpu / n * 1e6:.1f} us CPU per request "
              f"(the app's own clock), perf saw "
              f"{sum(prof[side][0].values()) / 1e3 / n:.1f} us per request" + gc_line(side, n))

    def us(side, table, key):
        return prof[side][table][key] / 1e3 / nreq[side]

    def show(title, table, keys, limit, width=48):
        print(f"\n{title} (us of CPU per request: with, without, difference)")
        rows = sorted(keys, key=lambda k: -(us("with", table, k) - us("without", table, k)))
        for k in rows[:limit]:
            a, b = us("with", table, k), us("without", table, k)
            print(f"  {k[:width]:{width}s} {a:8.3f} {b:8.3f} {a - b:+8.3f}")

    show("by shared object (self)", 0, set(prof["with"][0]) | set(prof["without"][0]), 10)
    show("by thread name", 3, set(prof["with"][3]) | set(prof["without"][3]), 8)
    show("functions, inclusive, largest differences", 1,
         set(prof["with"][1]) | set(prof["without"][1]), 25)
    ours = [k for k in prof["with"][1] if k.startswith(("prof_", "cb_", "agg_", "sampler_",
                                                         "drain", "chain", "hidden_after",
                                                         "take_sample", "slot_for", "lookup"))]
    show("clrscope's functions, inclusive", 1, ours, 25)
    by_cause(prof["without"][1], nreq["with"], sum(prof["with"][0].values()))


def by_cause(incl_without, n, total):
    """Each sample of the profiled server charged to one cause, first match wins: what the two
    servers' totals cannot resolve (identical servers differ by several percent here), counted
    on the profiled one alone. A lower bound of clrscope's cost: its effects on the app's own
    code (caches, longer GC pauses, the allocation slow path taken more often) are not in it."""
    causes = collections.Counter()
    entries = collections.Counter()  # the runtime's code only with clrscope, by where it starts
    for comm, period, frames in read_samples(os.path.join(D, "with.script")):
        dsos = {d for _, d in frames}
        only = [i for i, (f, _) in enumerate(frames)
                if f.startswith("libcoreclr:") and not incl_without[f]]
        if comm.startswith("clrscope"):
            cause = "clrscope's threads"
        elif "libclrscope.so" in dsos:
            cause = "clrscope's callbacks (on the app's threads)"
        elif "libm.so.6" in dsos:
            cause = "libm (the runtime's allocation sampling draws)"
        elif only:
            cause = "runtime code that ran only with clrscope (events)"
            top = max(only)  # the outermost such function, and the one that called it
            caller = frames[top + 1][0] if top + 1 < len(frames) else "-"
            entries[f"{frames[top][0]} called by {caller}"] += period
        else:
            cause = "the rest"
        causes[cause] += period
    print("\nby cause, the profiled server alone (us of CPU per request, share of its CPU)")
    for cause, v in causes.most_common():
        print(f"  {cause:48s} {v / 1e3 / n:8.3f} {v / total * 100:6.2f} %")
    ours = total - causes["the rest"]
    print(f"  {'clrscope, all causes above the rest':48s} {ours / 1e3 / n:8.3f} "
          f"{ours / total * 100:6.2f} %")
    # Where the runtime's extra code starts: with the allocation profiles, two functions that the
    # allocation helper calls only when it takes a sample (docs/profiles/allocations.md, "What it
    # costs") lead
    print("\nthe runtime's code that ran only with clrscope, by its outermost function (us per request)")
    for entry, v in entries.most_common(6):
        print(f"  {entry[:64]:64s} {v / 1e3 / n:8.3f} {v / total * 100:6.2f} %")


if __name__ == "__main__":
    main()
