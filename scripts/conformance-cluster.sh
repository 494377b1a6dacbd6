#!/usr/bin/env bash
# Runs the conformance suite against a three-voter cluster on loopback,
# through node 1's client plane (scripts/cluster-up.sh). Writes to groups
# another node leads are redirected; conformance/redirect-proxy.mjs sits in
# front of node 1 and follows the 307s (Node's fetch cannot resend a body).
#
#   scripts/conformance-cluster.sh BIN [--mode ndjson|array]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$1"; shift

dir="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$dir/cluster/pids" ] && kill $(cat "$dir/cluster/pids") 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

scripts/cluster-up.sh "$bin" "$dir/cluster"
node1="$(head -n 1 "$dir/cluster/urls")"
node conformance/redirect-proxy.mjs "$node1" 0 >"$dir/proxy.log" 2>&1 &
pids+=($!)
proxy=""
for _ in $(seq 1 100); do
  proxy="$(sed -n 's/^redirect proxy listening on //p' "$dir/proxy.log")"
  [ -n "$proxy" ] && break
  sleep 0.1
done
[ -n "$proxy" ] || { echo "the redirect proxy did not start" >&2; cat "$dir/proxy.log" >&2; exit 1; }

conformance/run.sh "$proxy" "$@"
