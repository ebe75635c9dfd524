#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS] - builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan +
# coverage) and runs each for SECONDS (default 15), two at a time, as the fuzz.* CTest tests.
# Inputs that found new coverage are kept in BUILD/tests/fuzz/corpus/<target> and reused by the
# next run; a crash leaves BUILD/tests/fuzz/crash-<target>-<hash> (replay: BUILD/tests/fuzz/<target>
# FILE). Options: CLRSCOPE_FUZZ_BUILD_DIR (build-fuzz), CLRSCOPE_FUZZ_JOBS (2), CTEST_ARGS (e.g.
# "-R heapdump"). Needs clang and libclang-rt-14-dev (tools/deps.sh test installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
build=${CLRSCOPE_FUZZ_BUILD_DIR:-build-fuzz}
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
  echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCLRSCOPE_FUZZ=ON \
  -DCLRSCOPE_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -L fuzz -j"${CLRSCOPE_FUZZ_JOBS:-2}" --output-on-failure ${CTEST_ARGS:-}
