#!/usr/bin/env bash
# callgrind.sh OUT PORT PATH_TEMPLATE SERVER_CMD...: the instructions a
# server spends per 256-byte append at 32 writers, counted by valgrind's
# callgrind (user space, the server process only). Counts repeat to within
# a few tenths of a per cent for the same binary whatever else the machine
# runs, so they show what a change to the request path saves where
# timings are too noisy (BENCHMARKS.md, issue 24 #4).
#
# The server starts under callgrind with instrumentation off; 3,000 appends
# warm it (connections, streams, buffers), then instrumentation is on for
# exactly APPENDS appends (default 20,000) and the counts are dumped to
# OUT/callgrind.out.*. The server must listen on 127.0.0.1:PORT.
#
#   loadtest/callgrind.sh /tmp/cg 45601 '/bench/{name}' \
#       target/release/ursula server --listen 127.0.0.1:45601
#   loadtest/callgrind.sh /tmp/cg-peer 45602 '/{name}' \
#       durable-streams-server --port 45602 --durability memory --data-dir /dev/shm/cg
set -euo pipefail
[ "$#" -ge 4 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
out="$1" port="$2" template="$3"; shift 3
root="$(cd "$(dirname "$0")/.." && pwd)"
lt="${LOADTEST_BIN:-$root/target/release/ursula-loadtest}"
appends="${APPENDS:-20000}"
mkdir -p "$out"
rm -f "$out"/callgrind.out*
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/callgrind.out" "$@" >"$out/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.5
done
load() {
  "$lt" append --url "http://127.0.0.1:$port" --path-template "$template" --streams 32 --writers 32 \
    --bytes 256 --duration 120 --warmup 0 --max-requests "$1"
}
load 3000 >"$out/warm.log" 2>&1
callgrind_control -i on "$server" >/dev/null 2>&1
load "$appends" >"$out/load.log" 2>&1
callgrind_control -i off "$server" >/dev/null 2>&1
callgrind_control -d "$server" >/dev/null 2>&1
sleep 1
total=$(callgrind_annotate "$out"/callgrind.out.* 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
grep -E "appends measured|errors" "$out/load.log"
echo "instructions: $total in all, $((total / appends)) per append"
