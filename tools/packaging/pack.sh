#!/usr/bin/env bash
# tools/packaging/pack.sh PKG VERSION [ARM64] - packs the NuGet packages of
# tools/packaging/dotnet into PKG/nupkg from the native files in PKG/linux-x64, and those of
# linux-arm64 in ARM64 when it holds them (tools/packaging/CMakeLists.txt runs it).
# Intermediate files go to PKG/dotnet, none into the source tree. No compiler or MSBuild server
# is left running.
set -euo pipefail
pkg=$(cd "${1:?usage: pack.sh PKG VERSION}" && pwd)
version=${2:?usage: pack.sh PKG VERSION}
arm64=()
if [ -n "${3:-}" ] && [ -f "$3/libclrscope.so" ] && [ -f "$3/clrscope" ]; then
  arm64=("-p:ClrscopeNativeArm64Dir=$(cd "$3" && pwd)")
fi
here=$(cd "$(dirname "$0")" && pwd)
rm -f "$pkg"/nupkg/*.nupkg
for proj in Clrscope.Tool Clrscope.Native; do
  log="$pkg/dotnet/$proj.log"
  mkdir -p "$pkg/dotnet"
  if ! dotnet pack "$here/dotnet/$proj/$proj.csproj" --disable-build-servers -nologo -v quiet \
      -c Release -o "$pkg/nupkg" --artifacts-path "$pkg/dotnet/$proj" \
      "-p:Version=$version" "-p:ClrscopeNativeDir=$pkg/linux-x64" "${arm64[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "pack.sh: dotnet pack $proj failed (log above)" >&2
    exit 1
  fi
done
ls "$pkg/nupkg"
