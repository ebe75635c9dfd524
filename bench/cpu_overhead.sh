#!/usr/bin/env bash
# Throughput cost of the CPU/wall samplers on a CPU-bound app (TestApp cpu-only), measured by
# alternation: every round runs the app without the profiler and under each sampler mode, in a
# rotating order, and compares each mode with the baseline of the same round. The machine may be
# shared and noisy, so it reports medians over rounds and their spread, never a single run.
#
# Usage: bench/cpu_overhead.sh [BUILD]        BUILD defaults to build/ (libclrscope.so, apps/)
# Environment (defaults in brackets):
#   ROUNDS [9]  BENCH_SECONDS [8]  THREADS [number of cores]  RUNTIME [net10]
#   HZ [100]                      CLRSCOPE_SAMPLING_HZ
#   PROFILES [cpu,wall]           CLRSCOPE_PROFILES ("cpu" isolates the CPU sampler)
#   MODES ["suspend signal"]      CLRSCOPE_CPU_SAMPLER values to compare
#   WALL_HZ [unset]               CLRSCOPE_WALL_HZ (unset = the sampler's default)
#
# Two figures per mode, both as mode / baseline of the same round, then the median over rounds:
#   throughput  iterations per wall second (the headline; 0.95 = 5 % slower). Sensitive to
#               other tenants of the machine: read it together with its spread.
#   CPU/work    process CPU seconds per iteration, counted from `ready` to the end (1.05 = 5 %
#               more CPU for the same work): includes the profiler's own threads and is mostly
#               insensitive to how much CPU other tenants left us. It does not see stalls (a
#               thread waiting for a suspension burns no CPU), which only throughput shows.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
runtime=${RUNTIME:-net10}
lib="$build/libclrscope.so"

if [ "$runtime" != net10 ] && [ -x "$build/apps/$runtime/TestApp" ]; then
    app=("$build/apps/$runtime/TestApp")
elif [ -f "$build/apps/$runtime/TestApp.dll" ]; then
    app=(dotnet "$build/apps/$runtime/TestApp.dll")
else
    echo "cpu_overhead.sh: no test app in $build/apps/$runtime (run tests/apps/build.sh $build/apps)" >&2
    exit 1
fi
[ -f "$lib" ] || { echo "cpu_overhead.sh: $lib not found" >&2; exit 1; }

export BENCH_LIB="$lib" BENCH_ROUNDS="${ROUNDS:-9}" BENCH_SECS="${BENCH_SECONDS:-8}"
export BENCH_THREADS="${THREADS:-$(nproc)}" BENCH_HZ="${HZ:-100}"
export BENCH_PROFILES="${PROFILES:-cpu,wall}" BENCH_MODES="${MODES:-suspend signal}"
exec python3 "$here/cpu_overhead.py" "${app[@]}"
