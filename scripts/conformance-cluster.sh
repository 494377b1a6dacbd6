#!/usr/bin/env bash
# Runs the conformance suite against a three-voter cluster on loopback,
# through node 1's client plane: most groups are led by another node, so
# most writes are redirected. conformance/redirect-proxy.mjs sits in front
# of node 1 and follows the 307s (Node's fetch cannot resend a body).
#
#   scripts/conformance-cluster.sh BIN [--mode ndjson|array]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$1"; shift

dir="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

# Six free loopback ports (three client planes, three cluster planes).
read -r -a ports <<<"$(node -e '
const net = require("node:net")
const servers = Array.from({ length: 6 }, () => net.createServer())
Promise.all(servers.map((s) => new Promise((ok) => s.listen(0, "127.0.0.1", () => ok(s.address().port)))))
  .then((ports) => { console.log(ports.join(" ")); servers.forEach((s) => s.close()) })')"
ready() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$1/__ursula/ready"; }

for i in 1 2 3; do
  client=${ports[$((i - 1))]}; raft=${ports[$((i + 2))]}
  {
    printf '[server]\nlisten = "127.0.0.1:%s"\ncluster_listen = "127.0.0.1:%s"\ncluster_id = "conformance"\n' "$client" "$raft"
    printf '[raft]\nnode_id = %s\ninit_membership_per_group = true\n[raft.wal]\npath = "%s/n%s"\n' "$i" "$dir" "$i"
    for j in 1 2 3; do
      printf '[[raft.peers]]\nnode_id = %s\nurl = "http://127.0.0.1:%s"\nclient_url = "http://127.0.0.1:%s"\n' \
        "$j" "${ports[$((j + 2))]}" "${ports[$((j - 1))]}"
    done
  } >"$dir/n$i.toml"
  "$bin" server --config "$dir/n$i.toml" >"$dir/n$i.log" 2>&1 &
  pids+=($!)
done

for i in 1 2 3; do
  url="http://127.0.0.1:${ports[$((i - 1))]}"
  for _ in $(seq 1 150); do
    ready "$url" && break
    sleep 0.2
  done
  ready "$url" || { echo "node $i never became ready" >&2; cat "$dir/n$i.log" >&2; exit 1; }
done

node conformance/redirect-proxy.mjs "http://127.0.0.1:${ports[0]}" 0 >"$dir/proxy.log" 2>&1 &
pids+=($!)
proxy=""
for _ in $(seq 1 100); do
  proxy="$(sed -n 's/^redirect proxy listening on //p' "$dir/proxy.log")"
  [ -n "$proxy" ] && break
  sleep 0.1
done
[ -n "$proxy" ] || { echo "the redirect proxy did not start" >&2; cat "$dir/proxy.log" >&2; exit 1; }

conformance/run.sh "$proxy" "$@"
