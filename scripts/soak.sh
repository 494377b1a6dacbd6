#!/usr/bin/env bash
# A soak (issue 25; a script, not CI): three voters (fsync = "never", the
# cold tier on an S3-compatible server), a gateway in front, and
# `ursula-loadtest soak` writing through it (16 producers of mixed-size
# records, catch-up reads) for DURATION seconds, while faults come on a
# schedule: kill -9 of a voter and its restart, a voter frozen (SIGSTOP,
# cut off from everyone) and thawed, the S3 server stalled, and voter 3's
# WAL filesystem (a tmpfs, when this host lets the script mount one) filled
# past raft.wal.min_available_size and freed. Then every stream is read
# back: acknowledged, lost, duplicated, out of order. Exit 0 when held.
#
#   scripts/soak.sh [DURATION_SECS] [OUT]      (default 1800, target/soak)
# Needs: cargo build --release -p ursula -p ursula-loadtest; node (cluster-up.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
duration="${1:-1800}"
out="${2:-$root/target/soak}"
bin="${URSULA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/ursula}"
lt="${LOADTEST_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/ursula-loadtest}"
[ -x "$bin" ] && [ -x "$lt" ] || { echo "build first: cargo build --release -p ursula -p ursula-loadtest" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out/s3/soak" "$out/cluster"
faults="$out/faults.log"; : >"$faults"
pids=(); mounted=""
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  [ -f "$out/cluster/pids" ] && while read -r p; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done <"$out/cluster/pids"
  sleep 1
  [ -z "$mounted" ] || umount "$mounted" 2>/dev/null || true
}
trap cleanup EXIT
log() { echo "$(date +%T) $*" | tee -a "$faults"; }
wait_url() {
  for _ in $(seq 100); do
    if url=$(grep -oE "$2 http://[0-9.:]+" "$1" | awk '{print $NF}') && [ -n "$url" ]; then echo "$url"; return 0; fi
    sleep 0.1
  done
  echo "no URL in $1" >&2; return 1
}

"$lt" s3-server --dir "$out/s3" --access-key soak --secret-key soak-secret >"$out/s3.log" 2>&1 &
s3_pid=$!; pids+=("$s3_pid")
s3_url=$(wait_url "$out/s3.log" "s3 listening on")

# Voter 3's WAL on a 2 GiB tmpfs that the disk fault fills, where the host allows.
mkdir -p "$out/cluster/n3"
if mount -t tmpfs -o size=2g ursula-soak "$out/cluster/n3" 2>/dev/null; then
  mounted="$out/cluster/n3"
else
  log "no tmpfs mount here: the disk-filling fault is skipped"
fi

cold='fsync = "never"\n[storage.cold]\nbackend = "s3"\nroot = "soak"\nflush_interval = "1s"\n'
cold+="[storage.cold.s3]\nbucket = \"soak\"\nregion = \"us-east-1\"\nendpoint = \"$s3_url\"\n"
cold+='access_key_id = "soak"\nsecret_access_key = "soak-secret"\nserver_side_encryption = "none"\ntimeout = "5s"\n'
"$root/scripts/cluster-up.sh" "$bin" "$out/cluster" "$cold"
mapfile -t urls <"$out/cluster/urls"
mapfile -t vpids <"$out/cluster/pids"
upstreams=(); for u in "${urls[@]}"; do upstreams+=(--upstream "$u"); done
"$bin" gateway --listen 127.0.0.1:0 "${upstreams[@]}" >"$out/gateway.log" 2>&1 &
pids+=("$!")
gw=$(wait_url "$out/gateway.log" "ursula gateway listening on")
log "voters ${urls[*]}; gateway $gw; S3 $s3_url; soak for $duration s"

"$lt" soak --url "$gw" --streams 16 --duration "$duration" --json "$out/verdict.json" >"$out/soak.out" 2>"$out/soak.err" &
soak=$!

restart() { # restart I: voter I (1-based) again from its config
  "$bin" server --config "$out/cluster/n$1.toml" >>"$out/cluster/n$1.log" 2>&1 &
  vpids[$(($1 - 1))]=$!
  printf '%s\n' "${vpids[@]}" >"$out/cluster/pids"
}
kills=0 freezes=0 stalls=0 fills=0 dead=0
# A voter that exited on its own is a finding: logged, counted, started again.
check_alive() {
  local i
  for i in 1 2 3; do
    if ! kill -0 "${vpids[$((i - 1))]}" 2>/dev/null; then
      log "voter $i is not running (it exited on its own; see $out/cluster/n$i.log): starting it again"
      dead=$((dead + 1)); restart "$i"
    fi
  done
}
end=$(($(date +%s) + duration - 30))
sleep 30
round=0
while kill -0 "$soak" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
  check_alive
  i=$((round % 3 + 1))
  case $((round % 4)) in
    0) log "kill -9 voter $i"; kill -9 "${vpids[$((i - 1))]}" || true; sleep 10; restart "$i"; log "voter $i restarted"; kills=$((kills + 1)) ;;
    1) log "freeze voter $i (SIGSTOP) for 15 s"; kill -STOP "${vpids[$((i - 1))]}"; sleep 15; kill -CONT "${vpids[$((i - 1))]}"; log "voter $i thawed"; freezes=$((freezes + 1)) ;;
    2) log "stall S3 (SIGSTOP) for 20 s"; kill -STOP "$s3_pid"; sleep 20; kill -CONT "$s3_pid"; log "S3 back"; stalls=$((stalls + 1)) ;;
    3) if [ -n "$mounted" ]; then
         # Fill all but 256 MiB (below raft.wal.min_available_size), whatever the WAL holds now.
         free=$(df -B1M --output=avail "$mounted" | tail -n 1 | tr -d ' ')
         if [ "$free" -gt 256 ] && fallocate -l "$((free - 256))M" "$mounted/filler"; then
           log "filled voter 3's WAL filesystem to 256 MiB free"; fills=$((fills + 1))
         else
           log "voter 3's WAL filesystem already has ${free} MiB free or less: nothing to fill"
         fi
         sleep 20; rm -f "$mounted/filler"; log "freed"
       fi ;;
  esac
  round=$((round + 1))
  sleep 20
done
rc=0; wait "$soak" || rc=$?
cat "$out/soak.out"
log "faults: $kills kill -9, $freezes freezes, $stalls S3 stalls, $fills disk fills; voters found exited: $dead; soak exit $rc"
[ "$dead" -eq 0 ] || rc=1
exit "$rc"
