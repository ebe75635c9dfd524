#!/usr/bin/env bash
# tools/packaging/pack.sh PKG VERSION - packs the NuGet packages of tools/packaging/dotnet into
# PKG/nupkg from the native files in PKG/linux-x64 (tools/packaging/CMakeLists.txt runs it).
# Intermediate files go to PKG/dotnet, none into the source tree. No compiler or MSBuild server
# is left running.
set -euo pipefail
pkg=$(cd "${1:?usage: pack.sh PKG VERSION}" && pwd)
version=${2:?usage: pack.sh PKG VERSION}
here=$(cd "$(dirname "$0")" && pwd)
rm -f "$pkg"/nupkg/*.nupkg
for proj in Clrscope.Tool Clrscope.Native; do
  log="$pkg/dotnet/$proj.log"
  mkdir -p "$pkg/dotnet"
  if ! dotnet pack "$here/dotnet/$proj/$proj.csproj" --disable-build-servers -nologo -v quiet \
      -c Release -o "$pkg/nupkg" --artifacts-path "$pkg/dotnet/$proj" \
      "-p:Version=$version" "-p:ClrscopeNativeDir=$pkg/linux-x64" >"$log" 2>&1; then
    cat "$log" >&2
    echo "pack.sh: dotnet pack $proj failed (log above)" >&2
    exit 1
  fi
done
ls "$pkg/nupkg"
