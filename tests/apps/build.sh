#!/usr/bin/env bash
# Builds tests/apps/TestApp, the .NET workloads of the integration tests, for each runtime we test:
#
#   OUT/net10/TestApp   framework-dependent (runs on the installed .NET 10 runtime)
#   OUT/net9/TestApp    self-contained .NET 9 (its runtime pack restored from NuGet)
#   OUT/net8/TestApp    self-contained .NET 8
#   OUT/net10-single/TestApp  self-contained single-file .NET 10 (the runtime linked into the
#                       app's executable, the assemblies in a bundle), when net10 is built
#   OUT/net10-arm64/TestApp   self-contained .NET 10 for linux-arm64 (run under qemu-user by
#                       test_arm64), with CLRSCOPE_APP_ARM64=1
#
# and writes OUT/versions.txt, one "netN RUNTIME_VERSION" line per version built.
#
# Usage: tests/apps/build.sh [OUT]        OUT defaults to build/apps under the repository root.
# Environment: CLRSCOPE_APP_VERSIONS      versions to build, default "10 9 8".
#              CLRSCOPE_APP_SINGLE_FILE   0 skips the single-file build (default 1).
#              CLRSCOPE_APP_ARM64         1 adds the linux-arm64 build (default 0).
#
# net10 must build (exit 1 otherwise). net9/net8 are skipped, with a message and exit status 0,
# when their targeting or runtime packs cannot be restored. A version whose sources, SDK and
# script are unchanged since its last build is not rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
proj="$here/TestApp/TestApp.csproj"
out=${1:-$root/build/apps}
versions=${CLRSCOPE_APP_VERSIONS:-10 9 8}

export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE=1 DOTNET_GENERATE_ASPNET_CERTIFICATE=false

if ! command -v dotnet >/dev/null 2>&1; then
    echo "build.sh: dotnet not found on PATH; install the .NET 10 SDK" >&2
    exit 1
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
work="$out/.work"
mkdir -p "$work"

sdk=$(dotnet --version)
stamp=$( {
    echo "sdk $sdk"
    find "$here/TestApp" -path '*/bin' -prune -o -path '*/obj' -prune -o \
        -type f \( -name '*.cs' -o -name '*.csproj' \) -print | LC_ALL=C sort | xargs cat
    cat "$here/Directory.Build.props" "$here/build.sh"
} | sha256sum | cut -d' ' -f1)

# No compiler/MSBuild servers: nothing lingers after the script, which CI steps rely on.
quiet=(--disable-build-servers -nologo -v quiet)

built=()
skipped=()
for v in $versions; do
    tfm="net$v.0"
    dest="$out/net$v"
    log="$work/net$v.log"
    # Only this version's framework is restored, so a missing net8 pack cannot break net10.
    props=(-p:Configuration=Release "-p:TargetFrameworks=$tfm" --artifacts-path "$work/net$v")
    if [ "$v" = 10 ]; then
        verb=build
        rid=()
        restore_rid=()
    else
        verb=publish
        rid=(-r linux-x64 --self-contained)
        restore_rid=(-p:RuntimeIdentifier=linux-x64 -p:SelfContained=true)
    fi

    if [ -x "$dest/TestApp" ] && [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "net$v: up to date"
    else
        rm -rf "$dest"
        echo "net$v: restoring"
        if ! dotnet restore "$proj" "${quiet[@]}" "${props[@]}" "${restore_rid[@]}" >"$log" 2>&1; then
            if [ "$v" = 10 ]; then
                cat "$log" >&2
                echo "build.sh: net10 restore failed (log above)" >&2
                exit 1
            fi
            echo "net$v: SKIPPED: the .NET $v packs (Microsoft.NETCore.App.Ref and" \
                 "Microsoft.NETCore.App.Runtime.linux-x64 $v.0.x) could not be restored; see $log"
            grep -Eo 'error NU[0-9]+: [^[]*' "$log" | sort -u | head -n 5 | sed 's/^/    /' || true
            skipped+=("net$v")
            continue
        fi
        echo "net$v: ${verb}ing"
        if ! dotnet "$verb" "$proj" "${quiet[@]}" "${props[@]}" -f "$tfm" "${rid[@]}" --no-restore \
                -o "$dest" >>"$log" 2>&1; then
            cat "$log" >&2
            echo "build.sh: net$v $verb failed (log above)" >&2
            exit 1
        fi
        echo "$stamp" >"$dest/.stamp"
    fi
    if [ "$v" = 10 ]; then
        rt=$(dotnet "$dest/TestApp.dll" version)   # works wherever `dotnet` is, unlike the apphost
    else
        rt=$("$dest/TestApp" version)
    fi
    built+=("net$v $rt")
done

# A self-contained net10 publish beside the versions (not in versions.txt): NAME, then dotnet
# publish's own options. Skipped, with the reason, when it fails.
extra_publish() {
    local name=$1 dest="$out/$1" log="$work/$1.log"
    shift
    if [ -x "$dest/TestApp" ] && [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "$name: up to date"
        return
    fi
    rm -rf "$dest"
    echo "$name: publishing"
    if dotnet publish "$proj" "${quiet[@]}" -p:Configuration=Release -p:TargetFrameworks=net10.0 \
            --artifacts-path "$work/$name" -f net10.0 --self-contained "$@" -o "$dest" \
            >"$log" 2>&1; then
        echo "$stamp" >"$dest/.stamp"
    else
        rm -rf "$dest"
        echo "$name: SKIPPED: the publish ($*) failed; see $log"
        skipped+=("$name")
    fi
}

# The single-file app (the same runtime as net10). Its `unload` mode cannot work (a bundled
# assembly has no path to load again), hence IL3000 stays a warning.
if [[ " $versions " == *" 10 "* ]] && [ "${CLRSCOPE_APP_SINGLE_FILE:-1}" != 0 ]; then
    extra_publish net10-single -r linux-x64 -p:PublishSingleFile=true -p:WarningsNotAsErrors=IL3000
fi
# The linux-arm64 app, for the tests under qemu-user.
if [ "${CLRSCOPE_APP_ARM64:-0}" = 1 ]; then
    extra_publish net10-arm64 -r linux-arm64
fi

printf '%s\n' "${built[@]}" >"$out/versions.txt"
echo "built into $out:"
printf '  %s\n' "${built[@]}"
[ ${#skipped[@]} -eq 0 ] || echo "skipped: ${skipped[*]}"
