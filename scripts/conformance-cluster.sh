#!/usr/bin/env bash
# Runs the conformance suite against a three-voter cluster on loopback,
# through node 1's client plane (scripts/cluster-up.sh). Writes to groups
# another node leads are redirected; conformance/redirect-proxy.mjs sits in
# front of node 1 and follows the 307s (Node's fetch cannot resend a body).
#
# With FRONT=gateway, `ursula gateway` stands in front of all three voters
# instead (scripts/conformance-gateway.sh).
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
# Made here, not by the front's redirection: the loop below may read it
# before the background process has opened it.
: >"$dir/front.log"
if [ "${FRONT:-proxy}" = gateway ]; then
  # `ursula gateway` follows the leader hints itself: no client sees a 307.
  upstreams=()
  while read -r url; do upstreams+=(--upstream "$url"); done <"$dir/cluster/urls"
  mode=ndjson
  [ "${1:-}" = --mode ] && mode="${2:-ndjson}"
  "$bin" gateway --listen 127.0.0.1:0 --json-reads "$mode" --cors-allowed-origin "*" "${upstreams[@]}" \
    >"$dir/front.log" 2>&1 &
  ready="ursula gateway listening on"
else
  node conformance/redirect-proxy.mjs "$(head -n 1 "$dir/cluster/urls")" 0 >"$dir/front.log" 2>&1 &
  ready="redirect proxy listening on"
fi
pids+=($!)
front=""
for _ in $(seq 1 150); do
  front="$(sed -n "s/^$ready //p" "$dir/front.log")"
  [ -n "$front" ] && break
  sleep 0.1
done
[ -n "$front" ] || { echo "the front ($ready) did not start" >&2; cat "$dir/front.log" >&2; exit 1; }
if [ "${FRONT:-proxy}" = gateway ]; then
  # A gateway serves at once and answers 503 NO_UPSTREAM until it found the cluster.
  up() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$1/__ursula/ready"; }
  for _ in $(seq 1 150); do up "$front" && break; sleep 0.2; done
  up "$front" || { echo "the gateway never became ready" >&2; cat "$dir/front.log" >&2; exit 1; }
fi

# Each write is a Raft commit across three debug-build voters (about 23 ms
# on the CI machine against 4.5 ms on one durable node): the property-based
# tests, hundreds of writes each, get 20 s instead of the suite's 5 s.
CONFORMANCE_TEST_TIMEOUT_MS="${CONFORMANCE_TEST_TIMEOUT_MS:-20000}" conformance/run.sh "$front" "$@"
