#!/usr/bin/env bash
# Runs the seeded simulation of the Raft engine (core/src/raft/sim.rs) over
# many seeds and prints the failing ones. `cargo test` runs 200 of them.
#   scripts/sim.sh [SEEDS] [FIRST]     (default 10000 seeds from 0)
# A seed reproduces its run; repeat one:
#   URSULA_SIM_FIRST=<seed> URSULA_SIM_SEEDS=1 cargo test -p ursula-core --lib raft::sim::seeded_runs -- --nocapture
set -uo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-10000}"
first="${2:-0}"
chunk=250
cargo test -p ursula-core --lib --locked --no-run -q || exit 2
failing=()
start=$(date +%s)
for ((s = first; s < first + seeds; s += chunk)); do
  n=$((first + seeds - s < chunk ? first + seeds - s : chunk))
  out="$(URSULA_SIM_FIRST=$s URSULA_SIM_SEEDS=$n cargo test -p ursula-core --lib --locked -q raft::sim::seeded_runs -- --nocapture 2>&1)"
  line="$(grep -E '^simulation: ' <<<"$out" | tail -n 1)"
  [ -n "$line" ] || { echo "the run from seed $s printed no verdict:"; tail -n 30 <<<"$out"; exit 2; }
  echo "$line"
  # What each failing seed violated (its panic message).
  grep -E '^seed [0-9]+: ' <<<"$out" || true
  bad="$(sed -nE 's/.*failing seeds: \[([0-9, ]*)\].*/\1/p' <<<"$line" | tr -d ' ')"
  [ -z "$bad" ] || IFS=, read -r -a more <<<"$bad"
  [ -z "$bad" ] || failing+=("${more[@]}")
done
echo "simulation: $seeds seeds from $first in $(($(date +%s) - start)) s; failing seeds: ${failing[*]:-none}"
[ ${#failing[@]} -eq 0 ]
