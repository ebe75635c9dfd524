#!/usr/bin/env bash
# bench/perf_pair.sh [BUILD_DIR] - where clrscope's cost per request goes, found with perf: the
# WebApp twice side by side on core 1 (one with clrscope, CLRSCOPE_* settings from the environment
# apply to it; one without), each under its own wrk (core 0, the /json /alloc /cpu mix), and
# `perf record -e cpu-clock -g` on both for MEASURE s (default 20) after WARM s (default 20). Prints
# CPU microseconds per request of each server by shared object, then the functions whose
# inclusive time differs most (libcoreclr, which ships without symbols, is grouped by the function
# ranges of its .eh_frame), then clrscope's own functions, then the profiled server's CPU by cause
# (clrscope's threads, its callbacks, the runtime's code that never ran without it: a lower bound
# of the cost that the two servers' noise does not blur) and where that runtime code starts.
# Needs perf (VMs: software clock only) and wrk; JIT-compiled code is named through
# DOTNET_PerfMapEnabled=1. KEEP=DIR keeps the data.
#   CLRSCOPE_PROFILES=alloc bench/perf_pair.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
warm=${WARM:-20}
secs=${MEASURE:-20}
for t in perf wrk readelf; do
  command -v "$t" >/dev/null || { echo "perf_pair: $t not installed" >&2; exit 1; }
done
app="$build/apps/webapp/WebApp.dll"
[ -f "$app" ] || { echo "perf_pair: no $app (run bench/aspnet_overhead.sh once to build it)" >&2; exit 1; }
coreclr=$(dotnet --list-runtimes | awk '/^Microsoft.NETCore.App 10\./ {gsub(/[][]/, "", $3); p = $3 "/" $2} END {print p "/libcoreclr.so"}')
[ -f "$coreclr" ] || { echo "perf_pair: libcoreclr.so of .NET 10 not found" >&2; exit 1; }
tmp=$(mktemp -d)
a= b=
trap 'kill ${a:-} ${b:-} 2>/dev/null || true; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
p1=$(port); p2=$(port)
env DOTNET_PerfMapEnabled=1 CORECLR_ENABLE_PROFILING=1 \
  CORECLR_PROFILER='{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}' CORECLR_PROFILER_PATH="$PWD/$build/libclrscope.so" \
  CLRSCOPE_PORT="${CLRSCOPE_PORT:-0}" CLRSCOPE_LOG_LEVEL="${CLRSCOPE_LOG_LEVEL:-warn}" \
  taskset -c 1 dotnet "$app" --urls "http://127.0.0.1:$p1" >"$tmp/with.log" 2>&1 &
a=$!
env DOTNET_PerfMapEnabled=1 taskset -c 1 dotnet "$app" --urls "http://127.0.0.1:$p2" >"$tmp/without.log" 2>&1 &
b=$!
for _ in $(seq 100); do
  curl -sf -o /dev/null "http://127.0.0.1:$p1/health" && curl -sf -o /dev/null "http://127.0.0.1:$p2/health" && break
  sleep 0.2
done
total=$((warm + secs + 5))
taskset -c 0 wrk -t1 -c16 -d"${total}s" -s bench/webapp_mix.lua "http://127.0.0.1:$p1/" >/dev/null &
taskset -c 0 wrk -t1 -c16 -d"${total}s" -s bench/webapp_mix.lua "http://127.0.0.1:$p2/" >/dev/null &
sleep "$warm"
curl -s "http://127.0.0.1:$p1/stats" >"$tmp/with.stats"; echo >>"$tmp/with.stats"
curl -s "http://127.0.0.1:$p2/stats" >"$tmp/without.stats"; echo >>"$tmp/without.stats"
perf record -q -e cpu-clock -g -p "$a" -o "$tmp/with.data" -- sleep "$secs" 2>/dev/null &
perf record -q -e cpu-clock -g -p "$b" -o "$tmp/without.data" -- sleep "$secs" 2>/dev/null
wait %5 2>/dev/null || true
curl -s "http://127.0.0.1:$p1/stats" >>"$tmp/with.stats"
curl -s "http://127.0.0.1:$p2/stats" >>"$tmp/without.stats"
wait %3 %4 2>/dev/null || true
kill $a $b 2>/dev/null || true
wait $a $b 2>/dev/null || true
readelf --debug-dump=frames "$coreclr" 2>/dev/null | sed -nE 's/.*FDE .*pc=([0-9a-f]+)\.\.([0-9a-f]+).*/\1 \2/p' >"$tmp/fde.txt"
for side in with without; do
  perf script -i "$tmp/$side.data" -F comm,period,ip,sym,dso 2>/dev/null >"$tmp/$side.script"
done
python3 bench/perf_pair.py "$tmp"
if [ -n "${KEEP:-}" ]; then  # KEEP=DIR keeps the recordings, scripts and stats for a closer look
  mkdir -p "$KEEP" && cp "$tmp"/* "$KEEP"/ && echo "perf_pair: recordings kept in $KEEP"
fi
