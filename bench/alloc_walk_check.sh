#!/usr/bin/env bash
# bench/alloc_walk_check.sh [BUILD_DIR] - how often the frame-pointer allocation walk gives the same
# stack as the runtime's DoStackSnapshot on a real server: the WebApp under wrk (a /json /alloc
# /cpu mix, DURATION s, default 40) with CLRSCOPE_ALLOC_WALK=check, which walks every allocation
# sample both ways. Prints /api/v1/allocations' stack_walk after WARM s (default 15) and at the
# end, and the agreement in between (steady state, after calibration and tier-up).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dur=${DURATION:-40}
warm=${WARM:-15}
command -v wrk >/dev/null || { echo "alloc_walk_check: wrk not installed (tools/deps.sh test)" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
err=$(mktemp)
lua=bench/webapp_mix.lua
CLRSCOPE_PORT=0 CLRSCOPE_ALLOC_WALK=check "$build/clrscope" run -- \
  dotnet "$build/apps/webapp/WebApp.dll" --urls "http://127.0.0.1:$port" >/dev/null 2>"$err" &
app=$!
trap 'kill $app 2>/dev/null; wait $app 2>/dev/null; rm -f "$err"' EXIT
dash=""
for _ in $(seq 100); do
  dash=$(grep -o 'http://127.0.0.1:[0-9]*/' "$err" | head -1 || true)
  [ -n "$dash" ] && curl -s -o /dev/null "http://127.0.0.1:$port/json" && break
  sleep 0.2
done
[ -n "$dash" ] || { echo "alloc_walk_check: no dashboard URL from the server" >&2; exit 1; }
wrk -t1 -c16 -d"${dur}s" -s "$lua" "http://127.0.0.1:$port/" >/dev/null &
load=$!
sleep "$warm"
a=$(curl -s "${dash}api/v1/allocations?seconds=60")
wait $load
b=$(curl -s "${dash}api/v1/allocations?seconds=60")
python3 - "$a" "$b" "$warm" <<'PY'
import json, sys
a = json.loads(sys.argv[1])["stack_walk"]
b = json.loads(sys.argv[2])["stack_walk"]
print(f"after {sys.argv[3]} s: {a}")
print(f"at the end: {b}")
s = b["check"]["same"] - a["check"]["same"]
d = b["check"]["different"] - a["check"]["different"]
sys.path.insert(0, "bench")
from benchlib import emit
emit("alloc_walk_check", "compared", s + d, "stacks")
if s + d:
    print(f"in between: {s} stacks the same, {d} different: {100 * s / (s + d):.2f} % agree")
    emit("alloc_walk_check", "agreement", 100 * s / (s + d), "%", same=s, different=d)
PY
