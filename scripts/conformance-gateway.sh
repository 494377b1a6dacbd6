#!/usr/bin/env bash
# Runs the conformance suite through `ursula gateway` in front of a
# three-voter cluster on loopback (scripts/cluster-up.sh). The gateway
# speaks the voters' private StreamService and follows their leader hints
# itself, so the suite talks to it directly: no client ever sees a 307.
#
#   scripts/conformance-gateway.sh BIN [--mode ndjson|array]
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
upstreams=()
while read -r url; do upstreams+=(--upstream "$url"); done <"$dir/cluster/urls"
mode=ndjson
[ "${1:-}" = --mode ] && mode="${2:-ndjson}"
"$bin" gateway --listen 127.0.0.1:0 --json-reads "$mode" --cors-allowed-origin "*" "${upstreams[@]}" >"$dir/gateway.log" 2>&1 &
pids+=($!)
gateway=""
for _ in $(seq 1 150); do
  gateway="$(sed -n 's/^ursula gateway listening on //p' "$dir/gateway.log")"
  [ -n "$gateway" ] && break
  sleep 0.1
done
[ -n "$gateway" ] || { echo "the gateway did not start" >&2; cat "$dir/gateway.log" >&2; exit 1; }

conformance/run.sh "$gateway" "$@"
