#!/usr/bin/env bash
# tools/deps.sh [build|quick|test|arm64] - installs what clrscope needs and this machine lacks
# (Debian).
#   build: compiler, CMake, civetweb, cJSON, zlib, libcurl headers
#   quick: the above + clang and its fuzzer runtime (tools/test.sh --quick)
#   test:  the above + Go (go tool pprof), Chromium, Node/npm, curl, python3, wrk, clang and
#          its runtime libraries (libFuzzer targets, tools/fuzz.sh), dpkg-dev (dpkg-source, for
#          the packages' civetweb and cJSON sources: tools/packaging/debian-sources.sh)
#   arm64: the above for build + the cross build for linux-arm64 (CMakePresets.json): the
#          cross compiler, and arm64 civetweb, cJSON, zlib and libcurl headers from Debian's
#          multiarch (which this adds the arm64 architecture to); and what runs a linux-arm64
#          app here (test_arm64): qemu-user-static and the arm64 C++ runtime
# Says what it installs. The .NET SDK is not a Debian package: it must already be on PATH.
set -euo pipefail
what=${1:-test}

need_pkgs=()
have_header() { [ -f "/usr/include/$1" ]; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }

have_cmd gcc || need_pkgs+=(gcc)
have_cmd cmake || need_pkgs+=(cmake)
have_cmd make || need_pkgs+=(make)
have_header civetweb.h || need_pkgs+=(libcivetweb-dev)
have_header cjson/cJSON.h || need_pkgs+=(libcjson-dev)
have_header zlib.h || need_pkgs+=(zlib1g-dev)
have_header x86_64-linux-gnu/curl/curl.h || have_header curl/curl.h || need_pkgs+=(libcurl4-openssl-dev)
have_cmd python3 || need_pkgs+=(python3)
if [ "$what" = quick ] || [ "$what" = test ]; then
  have_cmd clang || need_pkgs+=(clang)
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    need_pkgs+=(libclang-rt-14-dev)
fi
if [ "$what" = test ]; then
  have_cmd go || need_pkgs+=(golang-go)
  have_cmd chromium || need_pkgs+=(chromium)
  have_cmd node || need_pkgs+=(nodejs)
  have_cmd npm || need_pkgs+=(npm)
  have_cmd curl || need_pkgs+=(curl)
  have_cmd wrk || need_pkgs+=(wrk)
  have_cmd dpkg-source || need_pkgs+=(dpkg-dev)
  have_cmd unshare || need_pkgs+=(util-linux)
  have_cmd musl-gcc || need_pkgs+=(musl-tools)
fi

if [ "$what" = arm64 ]; then
  have_cmd aarch64-linux-gnu-gcc || need_pkgs+=(gcc-aarch64-linux-gnu)
  have_cmd qemu-aarch64-static || need_pkgs+=(qemu-user-static)
  for p in libcivetweb-dev libcjson-dev zlib1g-dev libcurl4-openssl-dev libstdc++6; do
    dpkg-query -W "$p:arm64" >/dev/null 2>&1 || need_pkgs+=("$p:arm64")
  done
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "deps: adding the arm64 architecture to dpkg (multiarch)"
    [ "$(id -u)" -eq 0 ] && dpkg --add-architecture arm64 || sudo dpkg --add-architecture arm64
  fi
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "deps: installing missing Debian packages: ${need_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  echo "deps: installed ${need_pkgs[*]}"
fi

if ! command -v dotnet >/dev/null 2>&1; then
  echo "deps: the .NET SDK (dotnet) is not on PATH; install .NET 8 or newer first" >&2
  exit 1
fi
