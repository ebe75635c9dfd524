#!/usr/bin/env bash
# gcdump_bench.sh - what a heap snapshot costs: wall time, the dump GC's pause, the analysis
# steps, the .gcdump size, and the peak extra resident memory of the profiled process, for heaps
# of 100k, 1M and 5M objects (TestApp mode heap-bench). Compares with `dotnet-gcdump collect`
# on the same heap when that tool can be had: $CLRSCOPE_GCDUMP_TOOL, on PATH, in BUILD_DIR/tools,
# or installed there from NuGet (`dotnet tool install`; not in a SMOKE=1 run). The tool runs once
# before and once after clrscope's snapshot (the first GC of a heap can be the slower one); for
# each run: wall time from start to exit (its own start-up included, as a user sees it), the
# tool process's peak RSS, and the app's peak extra RSS while the tool collected.
#
# Usage: bench/gcdump_bench.sh [BUILD_DIR] [OBJECTS...]
#   BUILD_DIR defaults to $CLRSCOPE_BUILD or build/ (needs libclrscope.so, clrscope and
#   apps/net10/TestApp.dll from tests/apps/build.sh BUILD_DIR/apps).
#
# Peak extra memory: the kernel's peak-RSS counter of the app (VmHWM) is reset just before the
# request (`echo 5 > /proc/PID/clear_refs`) and read when the snapshot is done; extra = peak -
# resident before. It includes the runtime's own work during the induced GC. Timings are wall
# clock on whatever else the machine is doing: run it on an idle machine and repeat.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-${CLRSCOPE_BUILD:-$root/build}}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000 5000000)
app="$build/apps/net10/TestApp.dll"
for f in "$build/clrscope" "$build/libclrscope.so" "$app"; do
    [ -e "$f" ] || { echo "gcdump_bench: missing $f (build first; tests/apps/build.sh $build/apps)" >&2; exit 1; }
done
tool=${CLRSCOPE_GCDUMP_TOOL:-$(command -v dotnet-gcdump || true)}
if [ -z "$tool" ] && [ ! -x "$build/tools/dotnet-gcdump" ] && [ "${SMOKE:-0}" != 1 ]; then
    timeout 180 dotnet tool install dotnet-gcdump --tool-path "$build/tools" >/dev/null 2>&1 || true
fi
if [ -z "$tool" ] && [ -x "$build/tools/dotnet-gcdump" ]; then
    tool="$build/tools/dotnet-gcdump"
fi
work=$(mktemp -d /tmp/clrscope-gcbench.XXXXXX)
trap 'kill "$launcher" 2>/dev/null || true; rm -rf "$work"' EXIT
launcher=

kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# tool_run PID N WHEN: one `dotnet-gcdump collect` of the app; prints its line of the table
tool_run() {
    local pid=$1 n=$2 when=$3 before peak rc wall rss
    before=$(kb "$pid" VmRSS)
    echo 5 > "/proc/$pid/clear_refs" 2>/dev/null || true
    python3 - "$tool" "$pid" "$work/tool-$n-$when.gcdump" "$work/tool-$n-$when.log" <<'EOF'
import resource, subprocess, sys, time
tool, pid, out, log = sys.argv[1:5]
t0 = time.monotonic()
with open(log, "w") as f:
    rc = subprocess.run([tool, "collect", "-p", pid, "-o", out], stdout=f, stderr=f).returncode
wall = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
open(log + ".result", "w").write(f"{rc} {wall:.2f} {rss:.1f}\n")
EOF
    peak=$(kb "$pid" VmHWM)
    read -r rc wall rss < "$work/tool-$n-$when.log.result"
    if [ "$rc" = 0 ] && [ -s "$work/tool-$n-$when.gcdump" ]; then
        python3 -c 'import sys; w, f, r, b, p = sys.argv[1:6]
print(f"          dotnet-gcdump collect ({sys.argv[6]}): {w} s, file {int(f)/2**20:.1f} MB, "
      f"tool peak RSS {r} MB, app extra {max(int(p) - int(b), 0)/1024:.1f} MB")
sys.path.insert(0, sys.argv[8]); from benchlib import emit
n, when = sys.argv[7], sys.argv[6]
emit("gcdump_bench", f"{n}.tool_{when}", float(w), "s")
emit("gcdump_bench", f"{n}.tool_{when}_rss", float(r), "MB")
emit("gcdump_bench", f"{n}.tool_{when}_app_extra", max(int(p) - int(b), 0) / 1024, "MB")' \
            "$wall" "$(stat -c %s "$work/tool-$n-$when.gcdump")" "$rss" "$before" "$peak" "$when" \
            "$n" "$here"
    else
        echo "          dotnet-gcdump collect ($when) failed: $(tail -1 "$work/tool-$n-$when.log")"
    fi
}

printf '%-9s %9s %9s %8s %8s %7s %7s %7s %7s %9s %9s %7s\n' objects heap_MB file_MB total_s gc_ms \
    index dom paths write rss_MB extra_MB B/obj
for n in "${sizes[@]}"; do
    log="$work/app-$n.err"
    CLRSCOPE_BENCH_OBJECTS=$n CLRSCOPE_PORT=0 CLRSCOPE_DUMP_DIR="$work/dumps" \
        CLRSCOPE_DUMP_MAX_HEAP_MB=65536 \
        "$build/clrscope" run -- dotnet "$app" heap-bench --seconds 600 >"$work/app-$n.out" 2>"$log" &
    launcher=$!
    for _ in $(seq 1 600); do
        grep -q '^ready' "$work/app-$n.out" 2>/dev/null && grep -q 'dashboard http' "$log" && break
        sleep 0.2
    done
    url=$(grep -o 'http://[^ ]*/' "$log" | head -1)
    pid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$log" | head -1)
    [ -n "$url" ] && [ -n "$pid" ] || { echo "app did not start: $(tail -3 "$log")" >&2; exit 1; }
    sleep 1
    [ -z "$tool" ] || tool_run "$pid" "$n" before
    before=$(kb "$pid" VmRSS)
    echo 5 > "/proc/$pid/clear_refs" 2>/dev/null || true
    id=$(curl -sf -X POST "${url}api/v1/gcdump?force=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    while :; do
        st=$(curl -sf "${url}api/v1/gcdump/$id?limit=0")
        echo "$st" | grep -q '"status":"running"' || break
        sleep 0.2
    done
    peak=$(kb "$pid" VmHWM)
    echo "$st" > "$work/snap-$n.json"
    python3 - "$work/snap-$n.json" "$before" "$peak" "$n" "$here" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
before, peak, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, sys.argv[5])
from benchlib import emit
if s["status"] != "done":
    print(f"{n:<9} failed: {s['error']}")
    sys.exit(0)
t = s["timings_ms"]
extra = max(peak - before, 0) * 1024
print(f"{s['objects']:<9} {s['bytes']/2**20:9.1f} {s['file_bytes']/2**20:9.1f} {s['duration_s']:8.2f} "
      f"{t['gc']:8.0f} {t['index']:7.0f} {t['dominators']:7.0f} {t['paths']:7.0f} {t['write']:7.0f} "
      f"{before/1024:9.1f} {extra/2**20:9.1f} {extra/max(s['objects'],1):7.1f}")
emit("gcdump_bench", f"{n}.total", s["duration_s"], "s", objects=s["objects"])
emit("gcdump_bench", f"{n}.gc_pause", t["gc"], "ms")
emit("gcdump_bench", f"{n}.app_extra", extra / 2**20, "MB")
EOF
    [ -z "$tool" ] || tool_run "$pid" "$n" after
    kill "$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
    launcher=
done
[ -n "$tool" ] || echo "(dotnet-gcdump not installed, nor on this machine's NuGet feed: no comparison; set CLRSCOPE_GCDUMP_TOOL)"
