#!/usr/bin/env bash
# bench/first_paint.sh [BUILD_DIR] - dashboard first paint (bench/first_paint.mjs) against a real
# profiled app (TestApp demo, all profiles) that has run for 8 s. RUNS (default 5) cold loads.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -d tests/browser/node_modules/playwright-core ] || (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
err=$(mktemp)
CLRSCOPE_PORT=0 "$build/clrscope" run -- dotnet "$build/apps/net10/TestApp.dll" demo --seconds 600 \
  >/dev/null 2>"$err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$err"' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$err" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "no dashboard URL from the app" >&2; exit 1; }
sleep 8
node bench/first_paint.mjs "$url" "${RUNS:-5}"
