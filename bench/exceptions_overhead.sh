#!/usr/bin/env bash
# bench/exceptions_overhead.sh - what the exceptions profile costs during an exception storm.
#
# Runs TestApp's `exception-storm` mode (throw + catch as fast as possible) RUNS times in each
# configuration and prints the median CPU time of the storm thread (steadier than wall time on a
# busy machine), the median wall time, and their ratio to the run without the profiler.
#
#   bench/exceptions_overhead.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/apps, see
#                                                  tests/apps/build.sh)
#   STORM=200000 RUNS=5 RUNTIME=net10 DEEP=40 bench/exceptions_overhead.sh
#
# Configurations: no profiler; the profiler with every profile but exceptions; exceptions only
# at 1 sample/s (the cost of counting alone); exceptions at the default 100 samples/s;
# exceptions with cpu and wall; everything on (the default). Exceptions come from the profiling
# API's ExceptionThrown callback unless CLRSCOPE_EXCEPTION_SOURCE=events, which has two rows of
# its own: exceptions alone (a session at level Error: the runtime builds its ExceptionThrown
# events) and everything (another session at Informational: the runtime then also builds its
# exception-handler events, catch/finally/filter with method names, for every handler passed).
# A second table throws STORM/5 exceptions through DEEP frames (default 40; 0 = no such table),
# each with a finally block, with no profiler, everything on, and everything from events: the
# callback's per-frame notifications against the events' per-handler ones.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
storm=${STORM:-200000}
runs=${RUNS:-5}
runtime=${RUNTIME:-net10}
deep=${DEEP:-40}

if [ "$runtime" = net10 ]; then
  app=(dotnet "$build/apps/net10/TestApp.dll")
else
  app=("$build/apps/$runtime/TestApp")
fi
[ -x "$build/clrscope" ] || { echo "no $build/clrscope: build clrscope first" >&2; exit 1; }
[ -e "${app[-1]}" ] || { echo "no test app: tests/apps/build.sh $build/apps" >&2; exit 1; }

# one run: prints "cpu_s wall_s thrown"; $2 = throws, $3 = depth
one() {
  local out
  if [ "$1" = none ]; then
    out=$("${app[@]}" exception-storm --storm "$2" --depth "$3" --seconds 600 | grep '^truth: ' | tail -1)
  else
    out=$(env CLRSCOPE_PORT=0 $1 "$build/clrscope" run -- "${app[@]}" exception-storm \
          --storm "$2" --depth "$3" --seconds 600 2>/dev/null | grep '^truth: ' | tail -1)
  fi
  python3 -c 'import json,sys; t=json.loads(sys.argv[1][7:]);
print(t["storm_cpu_s"], t["storm_seconds"], t["storm_thrown"])' "$out"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A label=(
  [none]="no profiler"
  ["CLRSCOPE_PROFILES=cpu,wall,alloc,live,gc,lock"]="profiler, exceptions off"
  ["CLRSCOPE_PROFILES=exceptions CLRSCOPE_EXCEPTION_SAMPLES_PER_S=1"]="exceptions only, 1 sample/s"
  ["CLRSCOPE_PROFILES=exceptions"]="exceptions only, 100 samples/s"
  ["CLRSCOPE_PROFILES=cpu,wall,exceptions"]="cpu, wall and exceptions"
  ["CLRSCOPE_PROFILES=all"]="everything (default)"
  ["CLRSCOPE_PROFILES=exceptions CLRSCOPE_EXCEPTION_SOURCE=events"]="events: exceptions only"
  ["CLRSCOPE_PROFILES=all CLRSCOPE_EXCEPTION_SOURCE=events"]="events: everything"
)
order=(none "CLRSCOPE_PROFILES=cpu,wall,alloc,live,gc,lock"
       "CLRSCOPE_PROFILES=exceptions CLRSCOPE_EXCEPTION_SAMPLES_PER_S=1"
       "CLRSCOPE_PROFILES=exceptions" "CLRSCOPE_PROFILES=cpu,wall,exceptions"
       "CLRSCOPE_PROFILES=all"
       "CLRSCOPE_PROFILES=exceptions CLRSCOPE_EXCEPTION_SOURCE=events"
       "CLRSCOPE_PROFILES=all CLRSCOPE_EXCEPTION_SOURCE=events")

# table PREFIX N DEPTH CONFIG... : one row per configuration, N throws through DEPTH frames;
# each row's ratio and time per throw also go to $BENCH_FIGURES as "PREFIXlabel.*"
table() {
  local prefix=$1 n=$2 depth=$3 base_cpu= base_wall=
  shift 3
  printf '%-34s %10s %10s %10s %10s %12s\n' configuration cpu_s ratio wall_s ratio us/throw
  for cfg in "$@"; do
    cpus=() walls=()
    for _ in $(seq "$runs"); do
      read -r c w got < <(one "$cfg" "$n" "$depth")
      if [ "$got" != "$n" ]; then echo "run threw $got of $n" >&2; exit 1; fi
      cpus+=("$c") walls+=("$w")
    done
    cpu=$(printf '%s\n' "${cpus[@]}" | median)
    wall=$(printf '%s\n' "${walls[@]}" | median)
    base_cpu=${base_cpu:-$cpu}
    base_wall=${base_wall:-$wall}
    awk -v l="${label[$cfg]}" -v c="$cpu" -v w="$wall" -v bc="$base_cpu" -v bw="$base_wall" \
        -v n="$n" 'BEGIN { printf "%-34s %10.3f %10.2f %10.3f %10.2f %12.2f\n",
                               l, c, c / bc, w, w / bw, c * 1e6 / n }'
    python3 -c 'import sys; sys.path.insert(0, "bench"); from benchlib import emit
name, c, bc = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
n, runs = int(sys.argv[4]), int(sys.argv[5])
emit("exceptions_overhead", name + ".ratio", c / bc, "ratio", n=runs)
emit("exceptions_overhead", name + ".per_throw", c * 1e6 / n, "us", n=runs)' \
      "$prefix${label[$cfg]}" "$cpu" "$base_cpu" "$n" "$runs"
  done
}

echo "exception storm: $storm throws on $runtime, median of $runs runs ($(nproc) cpus)"
table "" "$storm" 0 "${order[@]}"
if [ "$deep" -gt 0 ]; then
  echo
  echo "the same through $deep frames with a finally block each: $((storm / 5)) throws"
  table "deep: " "$((storm / 5))" "$deep" none "CLRSCOPE_PROFILES=all" \
        "CLRSCOPE_PROFILES=all CLRSCOPE_EXCEPTION_SOURCE=events"
fi
