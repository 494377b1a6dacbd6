#!/usr/bin/env bash
# Runs every test of the project, as .ci/run does: formatting, lints, the
# unit, property and integration tests of the workspace (the seeded Raft
# simulation among them), a bounded run of each fuzz target (the node's
# integration suite three times: on the in-memory engine, on the Raft engine
# over a disk WAL, and through a gateway in front of three voters), then the official Durable Streams conformance suite
# against the real server, once per JSON read mode on the in-memory engine
# (array: every non-fork test; ndjson: the spec's form, with the array-only
# tests excluded by name in conformance/exclusions-ndjson.txt), once on the
# Raft engine with its WAL on disk, and once through one node of a
# three-voter cluster (scripts/conformance-cluster.sh); then deploy/ (the
# kustomize checks and the image build) and examples/ (the apps of
# spec/09-11 and the browser test in Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==== %s ====\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "gateway-only build: the gateway links none of the voter's code"
voter_code='^(ursula-core|ursula-wal|openraft|aws-sdk-s3) '
# The pattern must find the voter's code where it is, or the checks below prove nothing.
cargo tree -p ursula -e normal --prefix none --locked | grep -qE "$voter_code"
for tree in "-p ursula-gateway" "-p ursula --no-default-features"; do
  # shellcheck disable=SC2086
  found="$(cargo tree $tree -e normal --prefix none --locked | grep -E "$voter_code" | sort -u || true)"
  [ -z "$found" ] || { echo "cargo tree $tree names voter code:" >&2; echo "$found" >&2; exit 1; }
done
# Built first: the full build of the tests below replaces this binary.
cargo build -p ursula --no-default-features --locked
gw_bin="${CARGO_TARGET_DIR:-target}/debug/ursula"
"$gw_bin" gateway --help >/dev/null
rc=0
timeout 20 "$gw_bin" server --listen 127.0.0.1:0 >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "a gateway-only build's 'ursula server' exited $rc, not 2" >&2; exit 1; }

step "cargo test"
# The process tests run `ursulactl` from the same target directory (`cargo
# test` builds another package's binary only for its own integration tests).
cargo build -p ursula-ctl --bin ursulactl --locked
cargo test --workspace --locked

step "node integration tests on the Raft engine (disk WAL)"
# (cluster_leadership:: and ctl:: start their own voters whatever the engine: they ran above.)
URSULA_TEST_ENGINE=raft cargo test -p ursula --test it --locked -- --skip gateway_auth:: --skip gateway_quotas:: \
  --skip gateway_usage:: --skip cluster_leadership:: --skip ctl:: --skip telemetry:: --skip backpressure:: --skip netns:: \
  --skip cluster_recovery:: --skip recovery_plan::

step "fuzz targets, a bounded run each (fuzz/, cargo-fuzz)"
# Its own target directory: the fuzz build's sanitizer flags differ.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/fuzz" scripts/fuzz.sh

step "a follower cut off during 200 MiB of 1 MiB appends catches up (heavy: alone)"
cargo test -p ursula --test it --locked -- --ignored --exact cluster_faults::a_follower_cut_off_during_large_appends_catches_up

step "node integration tests through ursula gateway in front of three voters"
# Each test's node is a gateway with three voters of its own; the modules
# that start their own clusters or restart nodes already ran above.
URSULA_TEST_ENGINE=gateway cargo test -p ursula --test it --locked -- \
  --skip durability:: --skip cluster:: --skip cluster_faults:: --skip cluster_leadership:: --skip ctl:: --skip gateway \
  --skip stream_plane:: --skip cold:: --skip telemetry:: --skip backpressure:: --skip netns:: \
  --skip cluster_recovery:: --skip recovery_plan::

step "conformance suite"
cargo build --bin ursula --locked
bin="${CARGO_TARGET_DIR:-target}/debug/ursula"
wal_dir="$(mktemp -d)"
trap 'rm -rf "$wal_dir"' EXIT
printf '[raft.wal]\npath = "%s/wal"\n' "$wal_dir" >"$wal_dir/ursula.toml"
for run in array:memory ndjson:memory ndjson:raft; do
  mode="${run%%:*}"
  engine=()
  [ "${run#*:}" = raft ] && engine=(--config "$wal_dir/ursula.toml")
  echo "-- conformance: json reads $mode, ${run#*:} engine"
  log="$(mktemp)"
  "$bin" server --listen 127.0.0.1:0 --json-reads "$mode" "${engine[@]}" >"$log" 2>&1 &
  pid=$!
  url=""
  for _ in $(seq 1 100); do
    url="$(sed -n 's/^ursula listening on //p' "$log")"
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "ursula did not start" >&2; cat "$log" >&2; exit 1; }
  rc=0
  # With the fork groups (docs/forks.md), as every run below.
  conformance/run.sh "$url" --mode "$mode" --forks || rc=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$log"
  [ "$rc" = 0 ] || { echo "conformance ($run) failed" >&2; exit "$rc"; }
done

step "conformance suite through a three-voter cluster"
scripts/conformance-cluster.sh "$bin" --mode ndjson --forks
step "conformance suite through ursula gateway in front of three voters"
scripts/conformance-gateway.sh "$bin" --mode ndjson --forks
step "conformance suite through ursula gateway in front of three voters, JSON reads as arrays (all 82 fork tests)"
scripts/conformance-gateway.sh "$bin" --mode array --forks
step "conformance suite through ursula gateway in front of five voters"
# Eight groups, not the default 32: five idle debug voters of 32 groups each
# keep the two cores busy with heartbeats alone (about a third of a core
# each), and the suite's property tests then run into their timeout.
VOTERS=5 URSULA_GROUPS=8 scripts/conformance-gateway.sh "$bin" --mode ndjson --forks

step "deploy: kustomize renders and validates; the image builds and its binaries run"
URSULA_BIN="$bin" deploy/check.sh
deploy/image/build-ci.sh "${CARGO_TARGET_DIR:-target}/debug"

step "examples: the apps of spec/09-11 and the browser test in Chromium (CORS, tokens, credential-expired)"
URSULA_BIN="$bin" examples/run-tests.sh

step "all tests passed"
