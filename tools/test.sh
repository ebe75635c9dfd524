#!/usr/bin/env bash
# tools/test.sh - builds clrscope and runs the whole test suite: C unit tests, integration tests
# that run real .NET apps under the profiler, and the headless-browser dashboard test.
# Installs what a fresh Debian machine lacks (tools/deps.sh). Options: CLRSCOPE_BUILD_DIR (build),
# CTEST_ARGS (extra ctest arguments, e.g. "-L unit").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CLRSCOPE_BUILD_DIR:-build}

tools/deps.sh test
cmake -S . -B "$build" -DCLRSCOPE_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
tests/apps/build.sh "$build/apps"
if [ -f tests/browser/package-lock.json ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
fi
ctest --test-dir "$build" --output-on-failure ${CTEST_ARGS:-}
