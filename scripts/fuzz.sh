#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded number of executions
# (issue 25): each starts from a copy of its committed corpus
# (fuzz/corpus/<target>, which a run never grows) plus its crash regressions
# (fuzz/regressions/<target>, run first), and the script fails if any
# target crashes. Prints per target the executions it reached.
#
#   scripts/fuzz.sh [RUNS]          RUNS executions per target (default 100000)
#
# Environment:
#   FUZZ_MAX_TIME   seconds per target at most (default 30), whichever comes first
#   FUZZ_TARGETS    space-separated targets to run (default: all)
#   FUZZ_SANITIZER  address (default) or none
#   CARGO_TARGET_DIR  respected when set; else cargo's default, fuzz/target
#
# The toolchain is stable: cargo-fuzz needs nightly flags (-Zsanitizer,
# sanitizer coverage), so RUSTC_BOOTSTRAP=1 lets stable rustc take them.
# A crash leaves its input in fuzz/artifacts/<target>/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-100000}"
max_time="${FUZZ_MAX_TIME:-30}"
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

cd fuzz
targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"
started=$(date +%s)
cargo fuzz build --sanitizer "$sanitizer"
echo "fuzz build: $(($(date +%s) - started)) s"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
summary=()
for target in $targets; do
  corpus="$work/corpus/$target"
  mkdir -p "$corpus"
  if [ -d "corpus/$target" ]; then
    cp -r "corpus/$target/." "$corpus/"
  fi
  dirs=("$corpus")
  if [ -d "regressions/$target" ]; then
    dirs+=("regressions/$target")
  fi
  log="$work/$target.log"
  echo "==== fuzz $target: $runs runs, at most $max_time s"
  rc=0
  cargo fuzz run --sanitizer "$sanitizer" "$target" "${dirs[@]}" -- \
    -runs="$runs" -max_total_time="$max_time" -timeout=20 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  done_line="$(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1 || true)"
  execs="$(grep -E '^stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}' || true)"
  if [ "$rc" -ne 0 ]; then
    failed+=("$target")
    # The panic (or sanitizer report) and where libFuzzer left the input.
    grep -E -A8 'panicked at|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log" | head -n 40 || true
    grep -E 'Test unit written to|^Base64:|^stat::' "$log" || true
    mkdir -p "artifacts/$target"
    cp "$log" "artifacts/$target/fuzz.log"
    echo "whole log: fuzz/artifacts/$target/fuzz.log"
    summary+=("$(printf '%-16s CRASHED (exit %s) after %s executions' "$target" "$rc" "${execs:-?}")")
  else
    summary+=("$(printf '%-16s %s executions (%s)' "$target" "${execs:-?}" "${done_line:-no Done line}")")
  fi
  echo "${summary[-1]}"
done

echo
echo "==== fuzz summary"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "crashed: ${failed[*]} (inputs in fuzz/artifacts/<target>/)" >&2
  exit 1
fi
