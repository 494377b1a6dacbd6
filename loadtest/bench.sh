#!/usr/bin/env bash
# Runs the issue-4 targets: `compare` of the reference server (first, so ratios
# read "ours / reference") against ursula's in-memory development node, each
# target on a freshly started pair of servers. Writes one JSON report per
# target and the readable tables to OUT (default target/bench).
#
# Needs: cargo build --release -p ursula-loadtest -p ursula
#        (cd conformance && npm ci)
# Usage: loadtest/bench.sh [OUT] [TARGET...]
#   TARGET: append32 append8 fanout catchup idle (issue 4), raft8 raft32 (issue 5),
#           cluster8 cluster32 (issue 6), gateway8 gwcatchup gwchunks (issue 8),
#           coldcatchup coldappend (issue 7), gwauth8 gwauth32 (issue 18),
#           coldcached coldahead gwbody1m gwbody8m gwbody1mcold gwbody8mcold hotmem
#           gwcatchup256 elections gwnode32 relaycatchup relay32 (issue 24),
#           peer32 peer8 peercatchup peeridle (issue 24; needs PEER_BIN,
#           `durable-streams-server` from `cargo install durable-streams --version 0.1.5`),
#           gwquota8 gwquota32 (issue 19), voters8 voters32 (issue 20),
#           otel8 otel32 offcost8 offcost32 (issue 23), coldab (cold catch-up,
#           build against build; offcost* and coldab need URSULA_BASE_BIN, a
#           build of an earlier commit to compare with)
# LEADERS=one gives every group of voters8/voters32's cluster to node 1 (its
# balancer off) instead of spreading the leaderships.
# URSULA_BIN and LOADTEST_BIN override the binaries (e.g. copies of a build
# that later builds must not replace mid-run). URSULA_GROUPS sets
# raft.group_count on every Raft node a target starts (default: the spec's
# core_count x 16).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/bench}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(append32 append8 fanout catchup idle raft8 raft32 cluster8 cluster32 gateway8 gwcatchup gwchunks coldcatchup coldappend)
mkdir -p "$out"
lt="${LOADTEST_BIN:-$root/target/release/ursula-loadtest}"
ursula="${URSULA_BIN:-$root/target/release/ursula}"
[ -x "$lt" ] && [ -x "$ursula" ] || { echo "build first: cargo build --release -p ursula-loadtest -p ursula" >&2; exit 1; }
[ -d "$root/conformance/node_modules/@durable-streams/server" ] || { echo "run (cd conformance && npm ci) first" >&2; exit 1; }

pids=()
issuer_pid=""
cleanup() { for p in "${pids[@]}" $issuer_pid; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_url LOG PATTERN: prints the URL a server announced in LOG.
wait_url() {
  for _ in $(seq 100); do
    if url=$(grep -oE "$2 http://[0-9.:]+" "$1" | awk '{print $NF}') && [ -n "$url" ]; then
      echo "$url"; return 0
    fi
    sleep 0.1
  done
  echo "no URL in $1" >&2; return 1
}

# compare NAME ARG...: `ursula-loadtest compare ARG...` with its JSON
# report in OUT/NAME.json, and the command and its tables in OUT/NAME.txt.
compare() {
  local name="$1"; shift
  local cmd=("$lt" compare --json "$out/$name.json" "$@")
  echo "== $name: ${cmd[*]}" | tee "$out/$name.txt"
  "${cmd[@]}" 2>&1 | tee -a "$out/$name.txt"
}

start_servers() {
  "$ursula" server --listen 127.0.0.1:0 >"$out/ours.log" 2>&1 &
  ours_pid=$!
  node "$root/conformance/reference-server.mjs" 0 >"$out/reference.log" 2>&1 &
  ref_pid=$!
  pids=("$ours_pid" "$ref_pid")
  ours_url=$(wait_url "$out/ours.log" "ursula listening on")
  ref_url=$(wait_url "$out/reference.log" "listening")
  sleep 1
}

stop_servers() {
  kill "$ours_pid" "$ref_pid" 2>/dev/null || true
  wait "$ours_pid" "$ref_pid" 2>/dev/null || true
  pids=()
}

run() {
  local name="$1"; shift
  start_servers
  compare "$name" \
    --url "$ref_url" --path-template '/v1/stream/{name}' --label reference --server-pid "$ref_pid" \
    --url "$ours_url" --path-template '/bench/{name}' --label ours --server-pid "$ours_pid" \
    "$@"
  stop_servers
}

# start_ours LABEL [ARGS...]: one more ursula node; sets last_url, last_pid.
start_ours() {
  local label="$1"; shift
  "$ursula" server --listen 127.0.0.1:0 "$@" >"$out/$label.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
  last_url=$(wait_url "$out/$label.log" "ursula listening on")
}

# raft_config NAME FSYNC: a config file of a Raft node with its WAL under OUT
# (URSULA_GROUPS sets its raft.group_count, as scripts/cluster-up.sh does
# for a cluster's voters).
raft_config() {
  rm -rf "$out/wal-$1"
  {
    [ -z "${URSULA_GROUPS:-}" ] || printf '[raft]\ngroup_count = %s\n' "$URSULA_GROUPS"
    printf '[raft.wal]\npath = "%s"\nfsync = "%s"\n' "$out/wal-$1" "$2"
  } >"$out/$1.toml"
  echo "$out/$1.toml"
}

# run_engines NAME LABEL_A ARGS_A LABEL_B ARGS_B SCENARIO...: compare two
# ursula nodes (ratios read "B / A").
run_engines() {
  local name="$1" la="$2" aa="$3" lb="$4" ab="$5"; shift 5
  # `first_bin`, when set, runs A (e.g. an earlier build).
  # shellcheck disable=SC2086
  ursula="${first_bin:-$ursula}" start_ours "$la" $aa; local ua="$last_url" pa="$last_pid"
  # shellcheck disable=SC2086
  start_ours "$lb" $ab; local ub="$last_url" pb="$last_pid"
  sleep 1
  compare "$name" \
    --url "$ua" --path-template '/bench/{name}' --label "$la" --server-pid "$pa" \
    --url "$ub" --path-template '/bench/{name}' --label "$lb" --server-pid "$pb" \
    "$@"
  cold_state "$name" "$la" "$ua" "$lb" "$ub"
  kill "$pa" "$pb" 2>/dev/null || true
  wait "$pa" "$pb" 2>/dev/null || true
  pids=()
}

# cold_state NAME LABEL URL...: what each node with a cold tier flushed and
# fetched, and the hot bytes it still holds, into NAME's table. A node whose
# flush had not finished when the reads began was read partly hot (fewer
# bytes fetched than read): such a figure is not a cold one.
cold_state() {
  local name="$1" label url metrics; shift
  while [ $# -ge 2 ]; do
    label="$1" url="$2"; shift 2
    metrics=$(node -e 'fetch(process.argv[1]).then((r) => r.json()).then((m) => {
      if (!("cold_bytes_flushed" in m)) return
      console.log(["cold_bytes_flushed", "cold_bytes_fetched", "hot_bytes"].map((k) => `${k}=${m[k]}`).join(" "))
    }, () => {})' "$url/__ursula/metrics")
    [ -z "$metrics" ] || echo "cold state of $label: $metrics" | tee -a "$out/$name.txt"
  done
}

# run_cluster NAME SCENARIO...: a single durable node against a three-voter
# cluster reached at node 1, both fsync=never. Each stream's create follows
# node 1's redirect to its group's leader, and its writers append there, so
# the writes reach the leaders' client planes (node 1 initializes, and so
# first leads, every group of a fresh cluster; the redirects matter after
# a leader change).
run_cluster() {
  local name="$1"; shift
  start_ours single --config "$(raft_config "$name" never)"; local us="$last_url" ps="$last_pid"
  rm -rf "$out/cluster-$name"
  "$root/scripts/cluster-up.sh" "$ursula" "$out/cluster-$name"
  local uc pc
  uc="$(head -n 1 "$out/cluster-$name/urls")"; pc="$(head -n 1 "$out/cluster-$name/pids")"
  sleep 1
  compare "$name" \
    --url "$us" --path-template '/bench/{name}' --label single --server-pid "$ps" \
    --url "$uc" --path-template '/bench/{name}' --label cluster --server-pid "$pc" \
    "$@"
  # shellcheck disable=SC2046
  kill "$ps" $(cat "$out/cluster-$name/pids") 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
}

# run_voters NAME SCENARIO...: one durable node against three voters (both
# fsync=never, loopback, the load on the same cores), each reached through
# a gateway as clients reach them and directly, in one run: single-gw
# first, so ratios read "X / single node through a gateway".
run_voters() {
  local name="$1"; shift
  start_ours single --config "$(raft_config "$name" never)"; local us="$last_url" ps="$last_pid"
  rm -rf "$out/cluster-$name"
  if [ "${LEADERS:-}" = one ]; then
    "$root/scripts/cluster-up.sh" "$ursula" "$out/cluster-$name" '[governance.leadership_balance]\nenabled = false\n'
    lead_from_node1 "$out/cluster-$name"
  else
    "$root/scripts/cluster-up.sh" "$ursula" "$out/cluster-$name"
  fi
  local uc pc
  uc="$(head -n 1 "$out/cluster-$name/urls")"; pc="$(head -n 1 "$out/cluster-$name/pids")"
  launch_gateway "$name-gw-single" --upstream "$us"; local ugs="$last_url"
  start_gateway "$name-gw-cluster" "$out/cluster-$name"; local ugc="$last_url" pgc="$last_pid"
  # The balancer spreads the fresh cluster's leaderships; the gateways find their upstreams.
  sleep 3
  compare "$name" \
    --url "$ugs" --path-template '/bench/{name}' --label single-gw --server-pid "$ps" \
    --url "$ugc" --path-template '/bench/{name}' --label voters-gw --server-pid "$pc" \
    --url "$us" --path-template '/bench/{name}' --label single --server-pid "$ps" \
    --url "$uc" --path-template '/bench/{name}' --label voters --server-pid "$pc" \
    "$@"
  leaders_of "$out/cluster-$name" | tee -a "$out/$name.txt"
  stop_all "$name"
}

# lead_from_node1 CLUSTER_DIR: every group's leadership handed to node 1
# through the other voters' admin planes (LEADERS=one: issue 20 asks how
# leaderships spread over three processes on two cores move the figures).
lead_from_node1() { python3 "$root/loadtest/leaders.py" to-node1 "$1"; }

# leaders_of CLUSTER_DIR: how many groups each voter leads, as node 1 sees
# them (printed after a run: the leaderships the figures were measured with).
leaders_of() { python3 "$root/loadtest/leaders.py" count "$1"; }

# run_gwnode NAME SCENARIO...: one durable node (fsync=never) reached
# directly and through a gateway in front of it, nothing else running
# (issue 24 #1; `voters32` measures the same pair beside an idle
# three-voter cluster, whose ticks and heartbeats take a share of the cores).
# With RELAY=1 also through `ursula-loadtest relay` (a process that only
# moves each connection's bytes to the node and back), between the two:
# what one more process in the path costs on this host, with none of a
# gateway's work (issue 24 #1 and #2).
run_gwnode() {
  local name="$1"; shift
  start_ours direct --config "$(raft_config "$name" never)"; local ud="$last_url" pd="$last_pid"
  local relay=()
  if [ -n "${RELAY:-}" ]; then
    "$lt" relay --upstream "${ud#http://}" >"$out/$name-relay.log" 2>&1 &
    local pr=$!; pids+=("$pr")
    relay=(--url "$(wait_url "$out/$name-relay.log" "relay listening on")" --path-template '/bench/{name}' --label relay --server-pid "$pr")
  fi
  launch_gateway "$name-gw" --upstream "$ud"; local ug="$last_url" pg="$last_pid"
  sleep 1
  compare "$name" \
    --url "$ud" --path-template '/bench/{name}' --label direct --server-pid "$pd" \
    "${relay[@]}" \
    --url "$ug" --path-template '/bench/{name}' --label gateway --server-pid "$pg" \
    "$@"
  stop_all "$name"
}

# run_otel NAME SCENARIO...: three durable nodes (fsync=never) in one run,
# telemetry export off, on with every new trace kept (sampler 1.0) and on
# with one in a hundred (0.01), exporting to one `ursula-loadtest
# otlp-sink` on loopback (metrics every 10 s). Ratios read "X / off".
run_otel() {
  local name="$1"; shift
  "$lt" otlp-sink >"$out/$name-sink.log" 2>&1 &
  pids+=("$!")
  local sink; sink=$(wait_url "$out/$name-sink.log" "otlp listening on")
  start_ours "$name-off" --config "$(raft_config "$name-off" never)"; local u0="$last_url" p0="$last_pid"
  OTEL_EXPORTER_OTLP_ENDPOINT="$sink" OTEL_TRACES_SAMPLER_ARG=1.0 OTEL_METRIC_EXPORT_INTERVAL=10000 \
    start_ours "$name-on1" --config "$(raft_config "$name-on1" never)"; local u1="$last_url" p1="$last_pid"
  OTEL_EXPORTER_OTLP_ENDPOINT="$sink" OTEL_TRACES_SAMPLER_ARG=0.01 OTEL_METRIC_EXPORT_INTERVAL=10000 \
    start_ours "$name-on001" --config "$(raft_config "$name-on001" never)"; local u2="$last_url" p2="$last_pid"
  sleep 1
  compare "$name" \
    --url "$u0" --path-template '/bench/{name}' --label off --server-pid "$p0" \
    --url "$u1" --path-template '/bench/{name}' --label on-1.0 --server-pid "$p1" \
    --url "$u2" --path-template '/bench/{name}' --label on-0.01 --server-pid "$p2" \
    "$@"
  sleep 6
  tail -n 1 "$out/$name-sink.log" | tee -a "$out/$name.txt"
  stop_all "$name"
}

# run_offcost NAME SCENARIO...: what telemetry costs when off: a durable
# node (fsync=never) of URSULA_BASE_BIN (an earlier build) against one of
# this build, neither exporting. Ratios read "this / base".
run_offcost() {
  local name="$1"; shift
  local base="${URSULA_BASE_BIN:?offcost needs URSULA_BASE_BIN, an earlier build of ursula}"
  first_bin="$base" run_engines "$name" base "--config $(raft_config "$name-base" never)" \
    this "--config $(raft_config "$name-this" never)" "$@"
}

# stop_all NAME: stops every server started for target NAME, its cluster
# too, and deletes the cluster's directory (its WALs: gigabytes after the
# large-body targets) unless BENCH_KEEP_CLUSTERS is set.
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # shellcheck disable=SC2046
  kill $(cat "$out/cluster-$1/pids" 2>/dev/null) 2>/dev/null || true
  # Only these: a target's S3 server, also this shell's child, stops later.
  [ "${#pids[@]}" -eq 0 ] || wait "${pids[@]}" 2>/dev/null || true
  # The voters are not this shell's children (`wait` skips them): a voter
  # still writing a snapshot would refill the directory being deleted.
  local p i
  for p in $(cat "$out/cluster-$1/pids" 2>/dev/null); do
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  pids=()
  [ -n "${BENCH_KEEP_CLUSTERS:-}" ] || rm -rf "$out/cluster-$1"
}

# start_gateway LABEL CLUSTER_DIR [ARGS...]: `ursula gateway` in front of the
# cluster's voters; sets last_url, last_pid.
start_gateway() {
  local label="$1" dir="$2"; shift 2
  local ups=()
  while read -r u; do ups+=(--upstream "$u"); done <"$dir/urls"
  launch_gateway "$label" "${ups[@]}" "$@"
}

# launch_gateway LABEL ARG...: `ursula gateway` with ARGs (its upstreams
# among them); sets last_url and last_pid.
launch_gateway() {
  local label="$1"; shift
  "$ursula" gateway --listen 127.0.0.1:0 "$@" >"$out/$label.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
  last_url=$(wait_url "$out/$label.log" "ursula gateway listening on")
}

# run_hotmem NAME: three voters (fsync=never, no cold tier, one Raft group so
# one node leads and two follow) take 1 GiB of 1 MiB appends over 16 streams
# (16 in flight, curl following the 307s); then each voter's VmRSS against
# the bytes the streams hold.
run_hotmem() {
  local name="$1" dir="$out/cluster-$1"
  rm -rf "$dir"
  URSULA_GROUPS=1 "$root/scripts/cluster-up.sh" "$ursula" "$dir" 'fsync = "never"\n'
  local url; url="$(head -n 1 "$dir/urls")"
  head -c 1048576 /dev/urandom >"$out/$name-body"
  local s i
  for s in $(seq 16); do curl -sfL -o /dev/null -X PUT -H 'content-type: application/octet-stream' "$url/bench/m$s"; done
  for i in $(seq 64); do
    for s in $(seq 16); do
      curl -sL -o /dev/null -w '%{http_code}\n' -X POST -H 'content-type: application/octet-stream' \
        --data-binary "@$out/$name-body" "$url/bench/m$s" &
    done
    wait
  done | sort | uniq -c | sed 's/^/  answers: /' | tee "$out/$name.txt"
  sleep 5
  local held=0 tail
  for s in $(seq 16); do
    # Retried: a leadership may move under the load (a `503` meanwhile).
    tail=$(curl -sfIL --retry 5 --retry-all-errors "$url/bench/m$s" | tr -d '\r' | awk -F': ' 'tolower($1) == "stream-next-offset" {print $2}' | tail -n 1)
    held=$((held + 10#$tail))
  done
  local n=0 pid rss role
  while read -r pid; do
    n=$((n + 1))
    rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$pid/status")
    role=follower
    curl -sf "$(sed -n "${n}p" "$dir/urls")/__ursula/metrics" | grep -q '"raft_leaderships":1' && role=leader
    awk -v n="$n" -v r="$role" -v rss="$rss" -v held="$held" \
      'BEGIN { printf "node %d (%s): resident %.0f MiB for %.0f MiB held, %.3fx\n", n, r, rss / 1048576, held / 1048576, rss / held }' \
      | tee -a "$out/$name.txt"
  done <"$dir/pids"
  stop_all "$name"
}

# run_elections NAME: four writers of 1 MiB appends straight to node 1 of a
# fresh three-voter cluster (fsync=never, two rounds of 4 s); the groups'
# term changes summed over the voters (each voter's view of every group),
# read from /__ursula/metrics before and after. A stable cluster changes no
# term under load; each change cost the writers `503`s.
run_elections() {
  local name="$1" dir="$out/cluster-$1"
  rm -rf "$dir"
  "$root/scripts/cluster-up.sh" "$ursula" "$dir" 'fsync = "never"\n'
  sleep 3
  terms() {
    local sum=0 u t
    while read -r u; do
      t=$(curl -sf "$u/__ursula/metrics" | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () =>
          console.log(JSON.parse(s).raft_groups.reduce((n, g) => n + g.current_term, 0)))')
      sum=$((sum + t))
    done <"$dir/urls"
    echo "$sum"
  }
  local before after
  before=$(terms)
  "$lt" append --url "$(head -n 1 "$dir/urls")" --path-template '/bench/{name}' \
    --streams 4 --writers 4 --bytes 1048576 --duration 4 --rounds 2 2>&1 | tee "$out/$name.txt"
  after=$(terms)
  echo "term changes under load: $((after - before)) (terms summed over the voters: $before before, $after after)" \
    | tee -a "$out/$name.txt"
  stop_all "$name"
}

# run_gateway NAME LABEL_A GW_ARGS_A LABEL_B GW_ARGS_B SCENARIO...: two
# servers in front of one three-voter cluster, compared in one run. A
# label "direct" is node 1's client plane (every group's first leader);
# any other label is a gateway started with its GW_ARGS.
run_gateway() {
  local name="$1"; shift
  rm -rf "$out/cluster-$name"
  # CLUSTER_EXTRA: TOML for each voter, after its [raft.wal] keys.
  "$root/scripts/cluster-up.sh" "$ursula" "$out/cluster-$name" "${CLUSTER_EXTRA:-}"
  local urls=() labels=() args=() i
  for i in 1 2; do
    local label="$1" gw="$2"; shift 2
    if [ "$label" = direct ]; then
      urls+=("$(head -n 1 "$out/cluster-$name/urls")")
      args+=(--server-pid "$(head -n 1 "$out/cluster-$name/pids")")
    else
      # shellcheck disable=SC2086
      start_gateway "$name-$label" "$out/cluster-$name" $gw
      urls+=("$last_url"); args+=(--server-pid "$last_pid")
    fi
    labels+=("$label")
  done
  sleep 1
  compare "$name" \
    --url "${urls[0]}" --path-template '/bench/{name}' --label "${labels[0]}" "${args[0]}" "${args[1]}" \
    --url "${urls[1]}" --path-template '/bench/{name}' --label "${labels[1]}" "${args[2]}" "${args[3]}" \
    "$@"
  stop_all "$name"
}

# run_peer NAME SCENARIO...: the Rust server of the Durable Streams project
# (PEER_BIN, `cargo install durable-streams --version 0.1.5`, in memory with
# its data under /dev/shm) against our in-memory development node.
run_peer() {
  local name="$1"; shift
  [ -x "${PEER_BIN:-}" ] || { echo "$name needs PEER_BIN (durable-streams-server)" >&2; return 1; }
  local dir port
  dir=$(mktemp -d /dev/shm/ursula-bench-peer.XXXXXX)
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$PEER_BIN" --port "$port" --durability memory --data-dir "$dir" >"$out/$name-peer.log" 2>&1 &
  local peer_pid=$!
  pids+=("$peer_pid")
  start_ours "$name-ours"; local ours_url="$last_url" ours_pid="$last_pid"
  sleep 1
  compare "$name" \
    --url "http://127.0.0.1:$port" --path-template '/{name}' --label peer --server-pid "$peer_pid" \
    --url "$ours_url" --path-template '/bench/{name}' --label ours --server-pid "$ours_pid" \
    "$@"
  kill "$peer_pid" "$ours_pid" 2>/dev/null || true
  wait "$peer_pid" "$ours_pid" 2>/dev/null || true
  rm -rf "$dir"
  pids=()
}

# s3_up: `ursula-loadtest s3-server` (s3s-fs) over a fresh directory under
# OUT, with the bucket `bench`; sets s3_url, s3_pid. S3_SERVER_ARGS adds
# flags (`--stock-gets`: s3s-fs's own 4 KiB reads for a GET).
s3_up() {
  rm -rf "$out/s3"; mkdir -p "$out/s3/bench"
  # shellcheck disable=SC2086
  "$lt" s3-server --dir "$out/s3" ${S3_SERVER_ARGS:-} >"$out/s3.log" 2>&1 &
  s3_pid=$!
  s3_url=$(wait_url "$out/s3.log" "s3 listening on")
}

# issuer_up: `ursula-loadtest issuer` writing its token and policy under
# OUT/issuer; sets issuer_url, issuer_pid.
issuer_up() {
  rm -rf "$out/issuer"
  "$lt" issuer --dir "$out/issuer" >"$out/issuer.log" 2>&1 &
  issuer_pid=$!
  # Not a job `run_gateway`'s bare `wait` would wait for.
  disown "$issuer_pid"
  issuer_url="$(wait_url "$out/issuer.log" "issuer listening on")/bench"
}

issuer_down() { kill "$issuer_pid" 2>/dev/null || true; issuer_pid=""; }

# s3_down: stops the S3 server, first saying how much CPU it used (its own
# cost, apart from the node's).
s3_down() {
  awk -v hz="$(getconf CLK_TCK)" '{ printf "s3 server CPU: %.2f s\n", ($14 + $15) / hz }' "/proc/$s3_pid/stat" \
    | tee -a "$out/s3-cpu.txt" || true
  kill "$s3_pid" 2>/dev/null || true; wait "$s3_pid" 2>/dev/null || true
}

# cold_config NAME KEYS: a config of the development node with the S3 cold
# tier on s3_url; KEYS are more [storage.cold] lines (printf %b escapes).
cold_config() {
  cold_toml "$1" "$2" >"$out/$1.toml"
  echo "$out/$1.toml"
}

# cold_toml ROOT EXTRA: the [storage.cold] tables of cold_config.
cold_toml() {
  printf '[storage.cold]\nbackend = "s3"\nroot = "%s"\n%b[storage.cold.s3]\nbucket = "bench"\nregion = "us-east-1"\nendpoint = "%s"\naccess_key_id = "bench"\nsecret_access_key = "bench-secret"\nserver_side_encryption = "none"\n' \
    "$1" "$2" "$s3_url"
}

for t in "${targets[@]}"; do
  case "$t" in
    append32) run append32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    append8) run append8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    fanout) run fanout sse-fanout --readers 1000 --rate 50 --duration 10 --rounds 2 ;;
    catchup) run catchup catchup --mib 256 --passes 4 --rounds 5 ;;
    idle) run idle many-streams --streams 100000 --bytes 16 --concurrency 16 ;;
    # Issue 5: the Raft engine on disk against the in-memory engine, and
    # fsync=always against fsync=never.
    raft8) run_engines raft8 memory "" raft-never "--config $(raft_config raft8 never)" \
      append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    raft32) run_engines raft32 raft-never "--config $(raft_config raft32n never)" \
      raft-always "--config $(raft_config raft32a always)" \
      append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    # Issue 6: three voters on loopback against a single durable node.
    cluster8) run_cluster cluster8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    cluster32) run_cluster cluster32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    # Issue 20: three voters on openraft 0.10 against one durable node, through gateways and direct.
    voters8) run_voters voters8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    gwnode32) run_gwnode gwnode32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    # Issue 24 #1 and #2: the same node straight, through a bare relay and through a gateway.
    relaycatchup) RELAY=1 run_gwnode relaycatchup catchup --mib 256 --passes 4 --rounds 3 ;;
    relay32) RELAY=1 run_gwnode relay32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    voters32) run_voters voters32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    otel8) run_otel otel8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    otel32) run_otel otel32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    offcost8) run_offcost offcost8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 5 ;;
    offcost32) run_offcost offcost32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 5 ;;
    # Issue 8: through a gateway against straight to the leaders, and the
    # gateway's immutable-read cache against the same gateway without it.
    gateway8) run_gateway gateway8 direct "" gateway "" \
      append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    gwcatchup) run_gateway gwcatchup direct "" gateway "" catchup --mib 64 --passes 4 --rounds 3 ;;
    gwchunks) run_gateway gwchunks uncached "--immutable-cache-bytes 0" cached "" \
      catchup --chunks --mib 64.5 --readers 4 --passes 4 --rounds 3 ;;
    # Issue 7: catch-up reads of a stream held in memory against the same
    # stream flushed to S3 (s3s-fs on loopback, no cold read cache), and
    # appends while the cold tier flushes against a node without one.
    coldcatchup) s3_up
      run_engines coldcatchup hot "" cold "--preset default --config $(cold_config coldcatchup \
        'flush_interval = "200ms"\nflush_size = "4MiB"\nflush_max_hot_age = "1s"\ncache_size = "0"\nmax_hot_size_per_group = "0"\n')" \
        catchup --mib 64 --passes 4 --rounds 3 --settle-secs 5
      s3_down ;;
    # A/B: cold catch-up as `coldcatchup`, a node of URSULA_BASE_BIN (an
    # earlier build, started first) against one of URSULA_BIN.
    coldab) s3_up
      keys='flush_interval = "200ms"\nflush_size = "4MiB"\nflush_max_hot_age = "1s"\ncache_size = "0"\nmax_hot_size_per_group = "0"\n'
      first_bin="${URSULA_BASE_BIN:?coldab needs URSULA_BASE_BIN, an earlier build of ursula}" run_engines coldab \
        base "--preset default --config $(cold_config coldab-base "$keys")" \
        new "--preset default --config $(cold_config coldab-new "$keys")" \
        catchup --mib 64 --passes 4 --rounds 5 --settle-secs 5
      s3_down ;;
    # Issue 24: cold catch-up with the default cold cache (read-ahead).
    coldcached) s3_up
      run_engines coldcached hot "" cold "--preset default --config $(cold_config coldcached \
        'flush_interval = "200ms"\nflush_size = "4MiB"\nflush_max_hot_age = "1s"\nmax_hot_size_per_group = "0"\n')" \
        catchup --mib 64 --passes 4 --rounds 3 --settle-secs 5
      s3_down ;;
    # Issue 24: resident memory per hot byte on a leader and its followers.
    hotmem) run_hotmem hotmem ;;
    # Issue 24: cold catch-up of a stream four times the cold cache: every
    # pass is cold, read-ahead included.
    coldahead) s3_up
      run_engines coldahead hot "" cold "--preset default --config $(cold_config coldahead \
        'flush_interval = "200ms"\nflush_size = "4MiB"\nflush_max_hot_age = "1s"\ncache_size = "16MiB"\nmax_hot_size_per_group = "0"\n')" \
        catchup --mib 64 --passes 4 --rounds 3 --settle-secs 5
      s3_down ;;
    # Issue 24: catch-up of 256 MiB straight from a voter and through a gateway.
    gwcatchup256) run_gateway gwcatchup256 direct "" gateway "" catchup --mib 256 --passes 4 --rounds 3 ;;
    # Issue 24: the single node against the Durable Streams project's Rust server.
    peer32) run_peer peer32 append --streams 32 --writers 32 --bytes 256 --duration 5 --rounds 3 ;;
    peer8) run_peer peer8 append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3 ;;
    peercatchup) run_peer peercatchup catchup --mib 256 --passes 4 --rounds 3 ;;
    peeridle) run_peer peeridle many-streams --streams 100000 --bytes 16 --concurrency 16 ;;
    # Issue 24: large bodies straight to the leaders and through a gateway.
    gwbody1m) run_gateway gwbody1m direct "" gateway "" \
      append --streams 4 --writers 4 --bytes 1048576 --duration 2 --warmup 0.5 --rounds 3 ;;
    gwbody8m) run_gateway gwbody8m direct "" gateway "" \
      append --streams 2 --writers 2 --bytes 8388608 --duration 2 --warmup 0.5 --rounds 3 ;;
    # Issue 24: the same with a cold tier (s3s-fs on loopback), as a cluster
    # runs in production: snapshots hold the hot window, not every byte, so
    # later rounds measure the data path rather than snapshot pressure.
    gwbody1mcold | gwbody8mcold) s3_up
      if [ "$t" = gwbody1mcold ]; then body=(--streams 4 --writers 4 --bytes 1048576); else body=(--streams 2 --writers 2 --bytes 8388608); fi
      # (the substitution drops the last newline; cluster-up prints the TOML with %b)
      CLUSTER_EXTRA="$(cold_toml "$t" 'flush_interval = "200ms"\nflush_size = "8MiB"\n')\n" \
        run_gateway "$t" direct "" gateway "" append "${body[@]}" --duration 2 --warmup 0.5 --rounds 3
      s3_down ;;
    # Issue 20/24: elections under 1 MiB appends (a snapshot build stalled every group of a node).
    elections) run_elections elections ;;
    coldappend) s3_up
      run_engines coldappend hot "" flushing "--preset default --config $(cold_config coldappend \
        'flush_interval = "200ms"\nflush_size = "1MiB"\nmax_hot_size_per_group = "0"\n')" \
        append --streams 8 --writers 8 --bytes 256 --duration 5 --rounds 3
      s3_down ;;
    # Issue 18: a gateway with access control (a token validated, the
    # policy consulted per request) against the same gateway without it;
    # both get the same bearer header.
    gwauth8 | gwauth32)
      writers=8; [ "$t" = gwauth32 ] && writers=32
      issuer_up
      run_gateway "$t" auth-off "" auth-on \
        "--auth-issuer $issuer_url --auth-audience bench --auth-policy $out/issuer/policy.toml" \
        append --streams "$writers" --writers "$writers" --bytes 256 --duration 5 --rounds 5 \
        --header "authorization: Bearer $(cat "$out/issuer/token")"
      issuer_down ;;
    # Issue 19: a gateway with a quota policy (limits high enough that
    # nothing is refused: the cost of checking them) and a usage log,
    # against the same gateway without either.
    gwquota8 | gwquota32)
      writers=8; [ "$t" = gwquota32 ] && writers=32
      printf '[default]\nrequests_per_second = 1000000\nmax_live_reads = 100000\nmax_request_body_bytes = 33554432\nmax_concurrent_uploads = 1000\nmax_upload_bytes = 1073741824\n' >"$out/quotas.toml"
      rm -f "$out/usage.jsonl"
      run_gateway "$t" edge-off "" edge-on \
        "--quota-policy $out/quotas.toml --usage-log $out/usage.jsonl --usage-flush-secs 5 --usage-chunk-bytes 10240" \
        append --streams "$writers" --writers "$writers" --bytes 256 --duration 5 --rounds 5 ;;
    *) echo "unknown target $t" >&2; exit 1 ;;
  esac
done
