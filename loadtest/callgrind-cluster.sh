#!/usr/bin/env bash
# callgrind-cluster.sh OUT BIN: the instructions each of three voters spends
# per replicated 256-byte append at 32 writers, counted by valgrind's
# callgrind (user space, every voter under callgrind), as callgrind.sh
# counts them for one server (BENCHMARKS.md, issue 20).
#
# scripts/cluster-up.sh writes the voters' configs (the leadership balancer
# off); the voters then start under callgrind with instrumentation off, a
# heartbeat of 1 s and election timeouts of 30-60 s (a voter runs some 50
# times slower under valgrind, and must not campaign because of that).
# LEADERS=one hands every group to node 1 first (loadtest/leaders.py), so
# node 1's count is a leader's and the others' a follower's; by default each
# voter leads the groups the cluster's bootstrap gave it. 3,000 appends warm
# the voters, then instrumentation is on for exactly APPENDS appends
# (default 20,000) straight to node 1 (redirects followed) and each voter's
# counts are dumped to OUT/cg{1,2,3}.out.*.
#
#   LEADERS=one loadtest/callgrind-cluster.sh /tmp/cgc target/release/ursula
set -euo pipefail
[ "$#" -eq 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
out="$1" bin="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
lt="${LOADTEST_BIN:-$root/target/release/ursula-loadtest}"
appends="${APPENDS:-20000}"
rm -rf "$out"; mkdir -p "$out"
"$root/scripts/cluster-up.sh" "$bin" "$out/cl" '[governance.leadership_balance]\nenabled = false\n' >/dev/null
# shellcheck disable=SC2046
kill -9 $(cat "$out/cl/pids") 2>/dev/null || true
sleep 2
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for i in 1 2 3; do
  rm -rf "$out/cl/n$i"
  sed -i 's/^init_membership_per_group = true$/&\nheartbeat_interval = "1s"\nelection_timeout_min = "30s"\nelection_timeout_max = "60s"/' "$out/cl/n$i.toml"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg$i.out" \
    "$bin" server --config "$out/cl/n$i.toml" >"$out/n$i.log" 2>&1 &
  pids+=($!)
done
ready() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$1/__ursula/ready"; }
while read -r url; do
  for _ in $(seq 1 600); do ready "$url" && break; sleep 1; done
  ready "$url" || { echo "$url never became ready" >&2; exit 1; }
done <"$out/cl/urls"
[ "${LEADERS:-}" != one ] || python3 "$root/loadtest/leaders.py" to-node1 "$out/cl"
sleep 5
python3 "$root/loadtest/leaders.py" count "$out/cl"
url=$(head -n 1 "$out/cl/urls")
load() {
  "$lt" append --url "$url" --path-template '/bench/{name}' --streams 32 --writers 32 \
    --bytes 256 --duration 600 --warmup 0 --max-requests "$1"
}
load 3000 >"$out/warm.log" 2>&1
for p in "${pids[@]}"; do callgrind_control -i on "$p" >/dev/null 2>&1; done
load "$appends" >"$out/load.log" 2>&1
for p in "${pids[@]}"; do callgrind_control -i off "$p" >/dev/null 2>&1; done
for p in "${pids[@]}"; do callgrind_control -d "$p" >/dev/null 2>&1; done
sleep 2
grep -E "appends measured|errors" "$out/load.log"
all=0
for i in 1 2 3; do
  n=$(callgrind_annotate "$out"/cg$i.out.* 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
  all=$((all + n))
  echo "node $i: $n instructions, $((n / appends)) per append"
done
echo "three voters: $((all / appends)) per append"
