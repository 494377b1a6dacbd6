#!/usr/bin/env bash
# Starts a cluster of VOTERS voters (3 unless set; the spec's 1, 3 or 5)
# on loopback and waits until every node is ready. Writes DIR/n{1..}.toml,
# the nodes' logs, DIR/urls (the client planes, one per line, node 1 first)
# and DIR/pids. Stop it with `kill $(cat DIR/pids)`.
#
#   [VOTERS=5] [URSULA_GROUPS=N] scripts/cluster-up.sh BIN DIR [EXTRA_TOML]   EXTRA_TOML goes into [raft.wal]
set -euo pipefail
bin="$1"; dir="$2"; extra="${3:-}"
mkdir -p "$dir"

n="${VOTERS:-3}"
# Free loopback ports: n client planes, then n cluster planes, then n admin planes.
read -r -a ports <<<"$(node -e '
const net = require("node:net")
const servers = Array.from({ length: 3 * Number(process.argv[1]) }, () => net.createServer())
Promise.all(servers.map((s) => new Promise((ok) => s.listen(0, "127.0.0.1", () => ok(s.address().port)))))
  .then((ports) => { console.log(ports.join(" ")); servers.forEach((s) => s.close()) })' "$n")"
ready() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$1/__ursula/ready"; }

: >"$dir/pids"
: >"$dir/urls"
for i in $(seq 1 "$n"); do
  client=${ports[$((i - 1))]}; raft=${ports[$((i + n - 1))]}; admin=${ports[$((i + 2 * n - 1))]}
  {
    printf '[server]\nlisten = "127.0.0.1:%s"\ncluster_listen = "127.0.0.1:%s"\nadmin_listen = "127.0.0.1:%s"\ncluster_id = "loopback"\n' \
      "$client" "$raft" "$admin"
    printf '[raft]\nnode_id = %s\ninit_membership_per_group = true\n' "$i"
    [ -z "${URSULA_GROUPS:-}" ] || printf 'group_count = %s\n' "$URSULA_GROUPS"
    printf '[raft.wal]\npath = "%s/n%s"\n%b' "$dir" "$i" "$extra"
    for j in $(seq 1 "$n"); do
      printf '[[raft.peers]]\nnode_id = %s\nurl = "http://127.0.0.1:%s"\nclient_url = "http://127.0.0.1:%s"\n' \
        "$j" "${ports[$((j + n - 1))]}" "${ports[$((j - 1))]}"
    done
  } >"$dir/n$i.toml"
  "$bin" server --config "$dir/n$i.toml" >"$dir/n$i.log" 2>&1 &
  echo $! >>"$dir/pids"
  echo "http://127.0.0.1:$client" >>"$dir/urls"
done

while read -r url; do
  for _ in $(seq 1 150); do
    ready "$url" && break
    sleep 0.2
  done
  ready "$url" || { echo "$url never became ready" >&2; cat "$dir"/n*.log >&2; exit 1; }
done <"$dir/urls"
