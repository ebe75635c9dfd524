#!/usr/bin/env bash
# bench/live_overhead.sh - what live-object tracking (weak handles on sampled allocations, checked
# after every GC) costs on top of allocation sampling, at the default cap (CLRSCOPE_LIVE_MAX=4096).
#
# Two allocation-bound workloads of TestApp, each run RUNS times per configuration:
#   alloc-mix --mb-per-s 0   one thread allocating as fast as it can (throughput: rounds/s)
#   gc-heavy                 two threads, ~50 GCs a second (throughput: iterations/s)
# Configurations: no profiler; allocations only (CLRSCOPE_PROFILES=alloc); allocations + live
# objects (CLRSCOPE_PROFILES=alloc,live). Prints, per configuration, the median process CPU time
# per million units of work (the app's own rounds/iterations; profiler threads included), which
# is steadier than throughput on a shared machine, and the ratios live/alloc (1.00 = free) and
# live/none.
#
#   bench/live_overhead.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/apps, see
#                                              tests/apps/build.sh)
#   SECONDS_PER_RUN=10 RUNS=5 RUNTIME=net10 bench/live_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
secs=${SECONDS_PER_RUN:-10}
runs=${RUNS:-5}
runtime=${RUNTIME:-net10}

if [ "$runtime" = net10 ]; then
  app=(dotnet "$build/apps/net10/TestApp.dll")
else
  app=("$build/apps/$runtime/TestApp")
fi
[ -x "$build/clrscope" ] || { echo "no $build/clrscope: build clrscope first" >&2; exit 1; }
[ -e "${app[-1]}" ] || { echo "no test app: tests/apps/build.sh $build/apps" >&2; exit 1; }

# one run: prints the process CPU seconds per million units of work (from the app's own truth)
one() { # cfg mode args...
  local cfg=$1 mode=$2 out field
  shift 2
  if [ "$mode" = alloc-mix ]; then field=rounds; else field=iterations; fi
  if [ "$cfg" = none ]; then
    out=$("${app[@]}" "$mode" --seconds "$secs" "$@" | grep '^truth: ' | tail -1)
  else
    out=$(env CLRSCOPE_PORT=0 CLRSCOPE_PROFILES="$cfg" "$build/clrscope" run -- "${app[@]}" \
          "$mode" --seconds "$secs" "$@" 2>/dev/null | grep '^truth: ' | tail -1)
  fi
  python3 -c 'import json,sys; t=json.loads(sys.argv[1][7:]);
print(t["process_cpu_s"] / t[sys.argv[2]] * 1e6)' "$out" "$field"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "live-object tracking overhead on $runtime, ${secs}s runs, median of $runs ($(nproc) cpus)"
echo "process CPU seconds per million rounds (alloc-mix) or iterations (gc-heavy)"
printf '%-22s %14s %14s %14s %10s %10s\n' workload none alloc alloc+live live/alloc live/none
for w in "alloc-mix --mb-per-s 0" "gc-heavy"; do
  read -r -a wargs <<< "$w"
  declare -A med=()
  for cfg in none alloc alloc,live; do
    vals=()
    for _ in $(seq "$runs"); do vals+=("$(one "$cfg" "${wargs[@]}")"); done
    med[$cfg]=$(printf '%s\n' "${vals[@]}" | median)
  done
  python3 -c 'import sys; n,a,l=map(float,sys.argv[2:5]);
print("%-22s %14.2f %14.2f %14.2f %10.3f %10.3f" % (sys.argv[1], n, a, l, l/a, l/n))
sys.path.insert(0, "bench"); from benchlib import emit
emit("live_overhead", sys.argv[1] + ".live_over_alloc", l / a, "ratio", n=int(sys.argv[5]))
emit("live_overhead", sys.argv[1] + ".live_over_none", l / n, "ratio", n=int(sys.argv[5]))' \
    "${wargs[0]}" "${med[none]}" "${med[alloc]}" "${med[alloc,live]}" "$runs"
  unset med
done
