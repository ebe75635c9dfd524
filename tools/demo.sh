#!/usr/bin/env bash
# tools/demo.sh - builds clrscope and the demo .NET app, then runs the app under the profiler and
# prints the dashboard URL. Ctrl-C stops it. Installs what a fresh Debian machine lacks.
#   CLRSCOPE_PORT (default 6060) picks the port; extra arguments go to the app.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CLRSCOPE_BUILD_DIR:-build}

tools/deps.sh build
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
CLRSCOPE_APP_VERSIONS="10" CLRSCOPE_APP_SINGLE_FILE=0 tests/apps/build.sh "$build/apps" >/dev/null
echo "demo: starting the demo app under clrscope (Ctrl-C to stop)"
echo "demo: open the dashboard URL printed below in a browser"
exec "$build/clrscope" run -- dotnet "$build/apps/net10/TestApp.dll" demo --seconds 0 \
  --mb-per-s 20 "$@"
