#!/usr/bin/env bash
# bench/aspnet_overhead.sh [BUILD_DIR] - what each profile costs a real ASP.NET Core server
# (Kestrel, tests/apps/WebApp: JSON, allocation-heavy and CPU endpoints) under wrk load:
# throughput, p99 latency and server CPU per request, as ratios against a server without profiler
# running side by side on the same core at the same time (aspnet_overhead.py says why), median
# and IQR over ROUNDS.
#
#   bench/aspnet_overhead.sh build                 (default: ROUNDS=4 DURATION=8 WARMUP=4 CONNS=16)
#   ROUNDS=3 CONFIGS=cpu,all bench/aspnet_overhead.sh build
#   CONFIGS="heap,cpu;CLRSCOPE_SAMPLING_HZ=1000,cpu+wall" ...   (profiles, then settings)
#   WRK_PACE_MS=6 CONFIGS=all ...   (each connection pauses 6 ms between requests: p99 below
#                                    saturation instead of a saturated server's queue)
# Needs wrk (tools/deps.sh installs it) and BUILD_DIR/clrscope; builds the WebApp into
# BUILD_DIR/apps/webapp when missing or older than its sources.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/clrscope" ] || { echo "no $build/clrscope: build clrscope first" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk not found: tools/deps.sh test" >&2; exit 1; }
out="$build/apps/webapp"
src=tests/apps/WebApp
if [ ! -f "$out/WebApp.dll" ] || [ -n "$(find "$src" -newer "$out/WebApp.dll" -type f 2>/dev/null)" ]; then
  DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 dotnet build "$src/WebApp.csproj" \
    --disable-build-servers -nologo -v quiet -c Release --artifacts-path "$build/apps/.work/webapp" \
    -o "$out" >/dev/null
fi
# dotnet-trace, for the side-by-side row (skipped when NuGet does not have it)
tools="$build/tools"
if [ ! -x "$tools/dotnet-trace" ]; then
  timeout 180 dotnet tool install dotnet-trace --tool-path "$tools" >/dev/null 2>&1 || true
fi
[ -x "$tools/dotnet-trace" ] && export DOTNET_TRACE="$tools/dotnet-trace"
exec python3 bench/aspnet_overhead.py "$build" "$out/WebApp.dll"
