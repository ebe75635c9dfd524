#!/usr/bin/env bash
# gcdump_bench.sh - what a heap snapshot costs: wall time, the dump GC's pause, the analysis
# steps, the .gcdump size, and the peak extra resident memory of the profiled process, for heaps
# of 100k, 1M and 5M objects (TestApp mode heap-bench). Compares with `dotnet-gcdump collect`
# when that tool is installed ($CLRSCOPE_GCDUMP_TOOL or on PATH).
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
work=$(mktemp -d /tmp/clrscope-gcbench.XXXXXX)
trap 'kill "$launcher" 2>/dev/null || true; rm -rf "$work"' EXIT
launcher=

kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

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
    python3 - "$work/snap-$n.json" "$before" "$peak" "$n" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
before, peak, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if s["status"] != "done":
    print(f"{n:<9} failed: {s['error']}")
    sys.exit(0)
t = s["timings_ms"]
extra = max(peak - before, 0) * 1024
print(f"{s['objects']:<9} {s['bytes']/2**20:9.1f} {s['file_bytes']/2**20:9.1f} {s['duration_s']:8.2f} "
      f"{t['gc']:8.0f} {t['index']:7.0f} {t['dominators']:7.0f} {t['paths']:7.0f} {t['write']:7.0f} "
      f"{before/1024:9.1f} {extra/2**20:9.1f} {extra/max(s['objects'],1):7.1f}")
EOF
    if [ -n "$tool" ]; then
        start=$(date +%s.%N)
        if "$tool" collect -p "$pid" -o "$work/tool-$n.gcdump" >"$work/tool-$n.log" 2>&1; then
            end=$(date +%s.%N)
            echo "          dotnet-gcdump collect: $(echo "$end - $start" | bc) s, $(stat -c %s "$work/tool-$n.gcdump") bytes"
        else
            echo "          dotnet-gcdump collect failed: $(tail -1 "$work/tool-$n.log")"
        fi
    fi
    kill "$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
    launcher=
done
[ -n "$tool" ] || echo "(dotnet-gcdump not installed: no comparison; set CLRSCOPE_GCDUMP_TOOL)"
