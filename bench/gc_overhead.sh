#!/usr/bin/env bash
# gc_overhead.sh - what GC monitoring costs a GC-bound app.
#
# Runs TestApp gc-heavy (tests/apps) for BENCH_SECONDS each, alternating three configurations so
# drift hits them alike, RUNS times, in workstation and in server GC mode:
#   none  no profiler
#   gc    clrscope with only the gc profile (CLRSCOPE_PROFILES=gc): GC events, callbacks and the
#         1 Hz GC-thread scan, no stack sampling
#   all   clrscope with every profile (default configuration)
# and prints, per mode, the median CPU time per million loop iterations of the app (process CPU
# over work done, both from the app's own truth line), the median throughput (iterations per
# second), the runtime's own GC pause share (GC.GetTotalPauseDuration / elapsed), and the cost
# ratios gc/none and all/none of CPU per iteration (1.00 = free, 1.10 = 10 % more CPU for the same
# work). CPU per unit of work is the primary figure: unlike throughput it does not move when
# other processes take CPUs away from the app, which on a shared 2-CPU machine they do.
#
# Usage: bench/gc_overhead.sh [BUILD]        BUILD defaults to <repo>/build
#        (needs BUILD/libclrscope.so, BUILD/clrscope and BUILD/apps/net10: tests/apps/build.sh)
# Environment: BENCH_SECONDS (10), RUNS (3), MODES ("workstation server")
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
secs=${BENCH_SECONDS:-10} # not $SECONDS: bash's own clock
runs=${RUNS:-3}
modes=${MODES:-workstation server}
app=("dotnet" "$build/apps/net10/TestApp.dll")
launcher="$build/clrscope"

for f in "$launcher" "$build/libclrscope.so" "$build/apps/net10/TestApp.dll"; do
    if [ ! -e "$f" ]; then
        echo "gc_overhead.sh: $f missing (build clrscope, then tests/apps/build.sh $build/apps)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run CONFIG GCMODE INDEX: one gc-heavy run, its final truth line saved to $tmp
run() {
    local config=$1 gcmode=$2 i=$3 out="$tmp/$2.$1.$3.json"
    local -a env=(DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 CLRSCOPE_PORT=0
                  CLRSCOPE_LOG_LEVEL=warn)
    if [ "$gcmode" = server ]; then
        env+=(DOTNET_gcServer=1 DOTNET_GCHeapCount=2 DOTNET_GCDynamicAdaptationMode=0)
    else
        env+=(DOTNET_gcServer=0)
    fi
    local -a cmd=("${app[@]}" gc-heavy --seconds "$secs")
    case $config in
    none) ;;
    gc) env+=(CLRSCOPE_PROFILES=gc); cmd=("$launcher" run -- "${cmd[@]}") ;;
    all) cmd=("$launcher" run -- "${cmd[@]}") ;;
    esac
    env "${env[@]}" "${cmd[@]}" 2>"$tmp/stderr" | sed -n 's/^truth: //p' | tail -n 1 >"$out"
    if [ ! -s "$out" ]; then
        echo "gc_overhead.sh: run $config/$gcmode produced no truth line:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
}

echo "gc-heavy, ${secs} s per run, ${runs} runs per configuration, $(nproc) CPUs"
for gcmode in $modes; do
    for i in $(seq 1 "$runs"); do
        for config in none gc all; do
            run "$config" "$gcmode" "$i"
        done
    done
done

python3 - "$tmp" "$modes" "$here" <<'EOF'
import glob, json, statistics, sys
tmp, modes = sys.argv[1], sys.argv[2].split()
sys.path.insert(0, sys.argv[3])
from benchlib import emit
print(f"{'gc mode':<12} {'config':<6} {'cpu s/M iter':>13} {'iter/s':>10} {'pause share':>12} "
      f"{'cost ratio':>10}")
for mode in modes:
    cost = {}
    for config in ("none", "gc", "all"):
        runs = [json.load(open(p)) for p in sorted(glob.glob(f"{tmp}/{mode}.{config}.*.json"))]
        cost[config] = statistics.median(r["process_cpu_s"] / r["iterations"] * 1e6 for r in runs)
        rate = statistics.median(r["iterations"] / r["elapsed_s"] for r in runs)
        pause = statistics.median(r["gc_pause_ms"] / 1000 / r["elapsed_s"] for r in runs)
        print(f"{mode:<12} {config:<6} {cost[config]:>13.3f} {rate:>10.0f} {pause:>12.3f} "
              f"{cost[config] / cost['none']:>10.3f}")
    print(f"{mode}: ratio with/without profiler (CPU per unit of work): GC monitoring only "
          f"{cost['gc'] / cost['none']:.3f}, every profile {cost['all'] / cost['none']:.3f}")
    emit("gc_overhead", f"{mode}.gc", cost["gc"] / cost["none"], "ratio")
    emit("gc_overhead", f"{mode}.all", cost["all"] / cost["none"], "ratio")
EOF
