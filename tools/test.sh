#!/usr/bin/env bash
# tools/test.sh [--quick] - builds clrscope and runs the whole test suite: C unit tests,
# integration tests that run real .NET apps under the profiler, the headless-browser dashboard
# test, and what ships (the self-contained library and the NuGet packages of tools/packaging,
# built in the same build directory: CLRSCOPE_PACKAGE=ON; test_packaging). Installs what a fresh
# Debian machine lacks (tools/deps.sh). Then, in their own build directories, the suite again
# under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan) and a short run of every
# libFuzzer target (build-fuzz, tools/fuzz.sh). The linux-arm64 cross build (build-arm64) and
# its test under qemu-user (integration.test_arm64) are in the first stage; CLRSCOPE_TEST_ARM64=0
# leaves them out. This (no argument) is what CI runs. Options: CLRSCOPE_BUILD_DIR (build), CTEST_ARGS (extra ctest arguments, e.g.
# "-L unit"), CLRSCOPE_TEST_ASAN=0 / CLRSCOPE_TEST_FUZZ=0 (skip those stages),
# CLRSCOPE_FUZZ_SECONDS (10 per target), CLRSCOPE_TEST_JOBS (3: tests run side by side as their
# weight in tests/CMakeLists.txt allows; 1 runs them one by one).
#
# --quick: the tier to run before each commit, in under 3 minutes on 2 cores: the build (with
# -Werror), the C unit tests (label unit, the API's handlers included: label api) and every
# fuzz target for CLRSCOPE_FUZZ_SECONDS (3) seconds, in the same build directories. No .NET app
# runs: integration, hardening, browser and sanitizer runs are the full suite's.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CLRSCOPE_BUILD_DIR:-build}

if [ "${1:-}" = --quick ]; then
  tools/deps.sh quick
  cmake -S . -B "$build" -DCLRSCOPE_WERROR=ON >/dev/null
  cmake --build "$build" -j"$(nproc)"
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L unit
  tools/fuzz.sh "${CLRSCOPE_FUZZ_SECONDS:-3}"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: tools/test.sh [--quick]" >&2
  exit 2
fi

tools/deps.sh test
# linux-arm64 (CLRSCOPE_TEST_ARM64=0 leaves it out): the cross build (build-arm64) and the test
# app for linux-arm64, which integration.test_arm64 runs under qemu-user
arm64=${CLRSCOPE_TEST_ARM64:-1}
if [ "$arm64" = 1 ] && ! tools/deps.sh arm64; then
  # (a machine whose package mirror has no arm64 packages: the rest of the suite goes on)
  echo "tests: the linux-arm64 cross compiler and qemu-user could not be installed (above):" \
       "integration.test_arm64 skips" >&2
  # (an architecture whose packages the mirror lacks would fail the next apt-get update)
  dpkg --remove-architecture arm64 2>/dev/null || true
  arm64=0
fi
export CLRSCOPE_TEST_ARM64=$arm64
# the arm64 build first: its shipped files (build-arm64/package/linux-arm64) go into the packages
# the x86-64 build packs; both take civetweb's and cJSON's Debian sources from one place
sources="$(mkdir -p "$build" && cd "$build" && pwd)/debian-src"
arm64_pkg=""
if [ "$arm64" = 1 ]; then
  cmake --preset linux-arm64 -DCLRSCOPE_PACKAGE=ON -DCLRSCOPE_DEBIAN_SOURCES="$sources" >/dev/null
  cmake --build build-arm64 -j"$(nproc)" --target clrscope clrscope_launcher clrscope_package_files
  arm64_pkg="$(pwd)/build-arm64/package/linux-arm64"
fi
cmake -S . -B "$build" -DCLRSCOPE_WERROR=ON -DCLRSCOPE_PACKAGE=ON \
  -DCLRSCOPE_DEBIAN_SOURCES="$sources" -DCLRSCOPE_ARM64_PACKAGE="$arm64_pkg" >/dev/null
cmake --build "$build" -j"$(nproc)"
CLRSCOPE_APP_ARM64=$arm64 tests/apps/build.sh "$build/apps"
if [ -f tests/browser/package-lock.json ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
fi
# dotnet-gcdump (a .NET tool on NuGet): Microsoft's own reader of .gcdump files, which
# test_gcdump runs on clrscope's snapshot (`dotnet-gcdump report`). Where the feed lacks it the
# test reads the file with its own reader only, and says so.
tooldir="$build/tools"
if [ ! -x "$tooldir/dotnet-gcdump" ] && [ -z "${CLRSCOPE_GCDUMP_TOOL:-}" ]; then
  timeout 300 dotnet tool install dotnet-gcdump --tool-path "$tooldir" >/dev/null 2>&1 ||
    echo "tests: dotnet-gcdump could not be installed from NuGet (test_gcdump skips its report check)" >&2
fi
if [ -z "${CLRSCOPE_GCDUMP_TOOL:-}" ] && [ -x "$tooldir/dotnet-gcdump" ]; then
  CLRSCOPE_GCDUMP_TOOL="$(cd "$tooldir" && pwd)/dotnet-gcdump"
  export CLRSCOPE_GCDUMP_TOOL
fi
jobs=${CLRSCOPE_TEST_JOBS:-3}
ctest --test-dir "$build" --output-on-failure -j"$jobs" ${CTEST_ARGS:-}

# The same suite (but the browser test and the bench smoke run, whose apps get no sanitizer
# preload, test_arm64, whose library is the cross build's, and test_cpu, test_gc and
# test_governor, whose checks are statistical or timed on a quiet machine and whose code paths
# every other test runs: every profile and the 1 % budget are on by default) with ASan + UBSan. libclrscope.so is loaded into the
# uninstrumented dotnet: the app gets libasan.so preloaded and options that leave CoreCLR its
# signals (it turns SIGSEGV into NullReferenceException) and skip the leak check (the runtime's own
# allocations at exit are not ours) and the new[]/delete pairing (the .NET 9 runtime frees with
# delete what it took with new[] when a collectible context unloads, with or without clrscope;
# clrscope's code is C). Unit tests and the launcher run with the leak check. Reports
# go to files: any file there fails the run. UBSan's reports too, but GCC's UBSan runtime beside
# ASan's does not honour log_path (it prints to stderr), so every UBSan report stops the process
# that made it (halt_on_error; CLRSCOPE_UBSAN_HALT=0 to collect them all), and the test harness
# copies the ones it sees on an app's stderr into the same directory (CLRSCOPE_SANITIZER_LOGS).
if [ "${CLRSCOPE_TEST_ASAN:-1}" = 1 ]; then
  asan=${CLRSCOPE_ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$asan" -DCLRSCOPE_WERROR=ON -DCLRSCOPE_SANITIZER=address,undefined >/dev/null
  cmake --build "$asan" -j"$(nproc)"
  [ -L "$asan/apps" ] || rm -rf "$asan/apps"
  ln -sfn "$(cd "$build" && pwd)/apps" "$asan/apps"
  logs="$(cd "$asan" && pwd)/sanitizer-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  CLRSCOPE_TEST_APP_PRELOAD="$(gcc -print-file-name=libasan.so)" \
  CLRSCOPE_TEST_APP_ASAN_OPTIONS="handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:allow_user_segv_handler=1:use_sigaltstack=0:detect_leaks=0:alloc_dealloc_mismatch=0:quarantine_size_mb=64:log_path=$logs/asan" \
  ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=${CLRSCOPE_UBSAN_HALT:-1}:log_path=$logs/ubsan" \
  CLRSCOPE_SANITIZER_LOGS="$logs" \
    ctest --test-dir "$asan" --output-on-failure -j"$jobs" \
      -E '^(integration\.test_(browser|cpu|gc|governor|arm64)|bench\.smoke)$' \
      ${CTEST_ARGS:-}
  if [ -n "$(ls -A "$logs")" ]; then
    cat "$logs"/*
    echo "sanitizer reports above (in $logs)" >&2
    exit 1
  fi
fi

# libFuzzer targets, CLRSCOPE_FUZZ_SECONDS each (they need clang; tools/deps.sh installs it).
if [ "${CLRSCOPE_TEST_FUZZ:-1}" = 1 ]; then
  tools/fuzz.sh "${CLRSCOPE_FUZZ_SECONDS:-10}"
fi
