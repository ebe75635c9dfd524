#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] - builds everything, runs every benchmark and writes bench/results.md.
# Each script prints its own table (kept below the first screen of results.md) and emits its
# figures as JSON lines into $BENCH_FIGURES (benchlib.emit); bench/render.py turns them into the
# first screen: what clrscope costs and how far the figures can be trusted, one row per figure,
# each beside its A/A pair or peer, with the target and whether it is met. A full run also keeps
# the figures in bench/figures.jsonl. Ratios are measured in one run by alternation or side by
# side, medians and spread over rounds. SMOKE=1 runs each once with tiny sizes into a scratch
# file (what CI can afford; no figure from a smoke run means anything) and fails when a script
# breaks, emits nothing, or the renderer cannot read what they emitted.
# Benchmarks: aspnet_overhead.sh (a Kestrel server under wrk, each profile alone and all together,
# dotnet-trace beside them; then all profiles in steady state beside an A/A pair), api_latency.py
# (dashboard endpoints under that load), history_bench.py (the history on disk: bytes per minute
# on that server, a day of segments opened), switch_cost.c (what a CPU-sampling clock adds to a
# context switch), threads_bench.py (10/100/500 threads), startup.py,
# first_paint.sh (dashboard in Chromium), rss_growth.py (RSS over RSS_SECONDS, default 600),
# cpu_overhead.sh (CPU/wall samplers), gc_overhead.sh (GC monitoring), live_overhead.sh (live
# objects), exceptions_overhead.sh (exception storm), alloc_walk_check.sh (frame-pointer vs runtime
# allocation stacks on the server), gcdump_bench.sh (heap snapshot time and memory for 100k/1M/5M
# objects). What was tried and learned is kept by hand in bench/findings.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ "${SKIP_BUILD:-0}" != 1 ]; then  # SKIP_BUILD=1: BUILD_DIR is built already (CTest)
  tools/deps.sh test
  cmake -S . -B "$build" >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
  tests/apps/build.sh "$build/apps" >/dev/null
fi
out=bench/results.md
figures=$(mktemp)
details=$(mktemp)
trap 'rm -f "$figures" "$details"' EXIT
export BENCH_FIGURES="$figures"
if [ "${SMOKE:-0}" = 1 ]; then
  export ROUNDS=1 RUNS=1 BENCH_SECONDS=2 STORM=5000 DURATION=2 WARMUP=1 CONFIGS=none,all \
    N=2 WARMUP_S=2 THREAD_COUNTS=10 SECONDS_PER_RUN=2 DUMPS=1 INTERVAL=2 WARM=1
  rss_s=6
  objects="100000"
else
  objects="100000 1000000 5000000"
  rss_s=${RSS_SECONDS:-600}
fi
# ONLY="aspnet_overhead startup ..." runs just those sections.
ran=()
want() {
  if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; then
    ran+=("$1")
    echo "bench: $1 starts at ${SECONDS} s" >&2  # (where a run's time goes)
    return 0
  fi
  return 1
}
# the run's description: the first line of the figures
machine="$(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), \
$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
python3 - "$figures" "$(date -u +%Y-%m-%dT%H:%MZ)" "$machine" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(dotnet --list-runtimes | grep NETCore.App | tail -1 | cut -d' ' -f1-2)" \
  "$(git rev-parse --short HEAD 2>/dev/null || true)" \
  "bench/run.sh${ONLY:+ (ONLY=$ONLY)}${SMOKE:+ (SMOKE=$SMOKE)}" <<'PY'
import json, sys
keys = ("date", "machine", "load", "runtime", "commit", "command")
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"run": dict(zip(keys, sys.argv[2:]))}) + "\n")
PY
{
  if want aspnet_overhead; then
    echo "## aspnet_overhead"
    echo
    BENCH_SECTION=aspnet_overhead bash bench/aspnet_overhead.sh "$build" 2>/dev/null ||
      echo "(aspnet_overhead failed: exit $?)"
    echo
  fi
  # The same server in steady state: every configuration above starts its pair of servers fresh
  # and measures after a few seconds, inside the runtime's start-up phase (tiered compilation of
  # the app and of the runtime counters' managed code, ~50 s). Here each pair warms up
  # STEADY_WARMUP s (default 60) first and is measured for STEADY_DURATION s (60), STEADY_ROUNDS
  # rounds (6: a single round of an A/A pair can be off by 4-7 %, see bench/findings.md), and a
  # second server without profiler paired the same way ("unprofiled", an A/A comparison) shows
  # the noise floor of the pairing itself.
  if want aspnet_steady; then
    echo "## aspnet_steady"
    echo
    if [ "${SMOKE:-0}" = 1 ]; then
      BENCH_SECTION=aspnet_steady CONFIGS=unprofiled,all bash bench/aspnet_overhead.sh "$build" \
        2>/dev/null || echo "(aspnet_steady failed: exit $?)"
    else
      BENCH_SECTION=aspnet_steady CONFIGS=unprofiled,all WARMUP=${STEADY_WARMUP:-60} \
        DURATION=${STEADY_DURATION:-60} ROUNDS=${STEADY_ROUNDS:-6} \
        bash bench/aspnet_overhead.sh "$build" 2>/dev/null || echo "(aspnet_steady failed: exit $?)"
    fi
    echo
  fi
  # What each CPU-sampling clock adds to a context switch (bench/switch_cost.c): the figure
  # CLRSCOPE_CPU_TIMER=auto weighs against the app's switch rate (docs/internals/sampler.md).
  if want switch_cost; then
    echo "## switch_cost"
    echo
    if cc -O2 -pthread -o "$build/switch_cost" bench/switch_cost.c; then
      if [ "${SMOKE:-0}" = 1 ]; then
        "$build/switch_cost" 2000 1 || echo "(switch_cost failed: exit $?)"
      else
        "$build/switch_cost" 100000 7 || echo "(switch_cost failed: exit $?)"
      fi
    else
      echo "(switch_cost did not compile)"
    fi
    echo
  fi
  if want api_latency; then
    echo "## api_latency"
    echo
    python3 bench/api_latency.py "$build" "$build/apps/webapp/WebApp.dll" 2>&1 ||
      echo "(api_latency failed: exit $?)"
    echo
  fi
  if want history; then
    echo "## history"
    echo
    if [ "${SMOKE:-0}" = 1 ]; then
      SEGMENT_S=1 HOURS=0.5 REPEAT=1 python3 bench/history_bench.py "$build" \
        "$build/apps/webapp/WebApp.dll" 2>&1 || echo "(history failed: exit $?)"
    else
      python3 bench/history_bench.py "$build" "$build/apps/webapp/WebApp.dll" 2>&1 ||
        echo "(history failed: exit $?)"
    fi
    echo
  fi
  if want threads_bench; then
    echo "## threads_bench"
    echo
    python3 bench/threads_bench.py "$build" 2>&1 || echo "(threads_bench failed: exit $?)"
    echo
  fi
  if want startup; then
    echo "## startup"
    echo
    BREAKDOWN=1 python3 bench/startup.py "$build" 2>&1 || echo "(startup failed: exit $?)"
    echo
  fi
  if want first_paint; then
    echo "## first_paint"
    echo
    bash bench/first_paint.sh "$build" 2>&1 || echo "(first_paint failed: exit $?)"
    echo
  fi
  if want rss_growth; then
    echo "## rss_growth"
    echo
    DURATION=$rss_s python3 bench/rss_growth.py "$build" 2>&1 || echo "(rss_growth failed: exit $?)"
    echo
  fi
  for b in cpu_overhead gc_overhead live_overhead exceptions_overhead alloc_walk_check; do
    want "$b" || continue
    echo "## $b"
    echo
    echo '```'
    bash "bench/$b.sh" "$build" 2>&1 || echo "($b failed: exit $?)"
    echo '```'
    echo
  done
  if want gcdump_bench; then
    echo "## gcdump_bench"
    echo
    echo '```'
    # shellcheck disable=SC2086
    bash bench/gcdump_bench.sh "$build" $objects 2>&1 || echo "(gcdump_bench failed: exit $?)"
    echo '```'
  fi
} > "$details"
sections=$(IFS=,; echo "${ran[*]}")
if [ "${SMOKE:-0}" = 1 ]; then  # a smoke run only proves every script still runs end to end
  out=$(mktemp)
  python3 bench/render.py --figures "$figures" --details "$details" --out "$out" \
    --check "$sections" || { cat "$details"; echo "bench: the figures did not render" >&2; exit 1; }
  echo "bench: wrote $out"
  cat "$out"
  if grep -q "failed: exit" "$details"; then
    echo "bench: a benchmark script failed (above)" >&2
    exit 1
  fi
else
  python3 bench/render.py --figures "$figures" --details "$details" --out "$out"
  cp "$figures" bench/figures.jsonl
  echo "bench: wrote $out and bench/figures.jsonl"
fi
