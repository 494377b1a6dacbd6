#!/usr/bin/env bash
# Runs the Durable Streams conformance suite (0.3.6) against a server.
#
#   conformance/run.sh BASE_URL [--mode array|ndjson] [--no-rewrite] [-- VITEST_ARGS...]
#   conformance/run.sh --reference [--mode ...] [-- VITEST_ARGS...]
#
#   BASE_URL      e.g. http://127.0.0.1:4437 (no trailing path)
#   --reference   start the reference server (reference-server.mjs, in-memory,
#                 any free port) instead of BASE_URL; implies --no-rewrite
#   --mode        array  (default): run every non-fork test
#                 ndjson: also skip, by exact name, the tests listed in
#                         exclusions-ndjson.txt (they expect JSON reads as an
#                         application/json array; ursula returns
#                         application/x-ndjson, spec/41 §7.1, spec/42 §9.4)
#   --forks       also run the "Fork - ..." groups (82 tests), skipped otherwise
#   --no-rewrite  keep the suite's own /v1/stream/NAME paths (for the reference
#                 server). Default: rewrite them to /conformance/NAME, i.e. all
#                 streams in one bucket named "conformance".
#                 PREFIX=/other-bucket/ overrides the rewritten prefix.
#   after --       extra arguments for vitest (e.g. -- -t 'Stream Closure')
#                 (exclusion names are still checked against all collected tests)
#
# Every describe group named "Fork - ..." is skipped unless --forks.
# Prints passed/failed/skipped and ran counts; exits non-zero on any failure.
# Not safe to run twice concurrently with different prefixes (it rewrites
# files under node_modules).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

base_url=""
mode="array"
rewrite=1
reference=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) [ $# -ge 2 ] || usage; mode="$2"; shift 2 ;;
    --mode=*) mode="${1#--mode=}"; shift ;;
    --no-rewrite) rewrite=0; shift ;;
    --forks) export CONFORMANCE_FORKS=1; shift ;;
    --reference) reference=1; rewrite=0; shift ;;
    -h|--help) usage ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "unknown option: $1" >&2; usage ;;
    *) [ -z "$base_url" ] || usage; base_url="$1"; shift ;;
  esac
done
if [ "$reference" = 1 ]; then [ -z "$base_url" ] || usage; else [ -n "$base_url" ] || usage; fi
case "$mode" in array|ndjson) ;; *) echo "--mode must be array or ndjson" >&2; exit 2 ;; esac
base_url="${base_url%/}"

if [ ! -d node_modules ]; then
  echo "node_modules missing: npm ci"
  npm ci --no-audit --no-fund
fi

if [ "$reference" = 1 ]; then
  ref_log="$(mktemp)"
  node reference-server.mjs 0 >"$ref_log" 2>&1 &
  ref_pid=$!
  trap 'kill "$ref_pid" 2>/dev/null || true; rm -f "$ref_log"' EXIT
  for _ in $(seq 1 100); do
    base_url="$(sed -n 's/^listening //p' "$ref_log")"
    [ -n "$base_url" ] && break
    kill -0 "$ref_pid" 2>/dev/null || { cat "$ref_log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$base_url" ] || { echo "reference server did not start" >&2; exit 1; }
  echo "reference server (pid $ref_pid) at $base_url"
fi

if [ "$rewrite" = 1 ]; then
  prefix="${PREFIX:-/conformance/}"
else
  prefix="/v1/stream/"
fi
node rewrite.mjs "$prefix"

# Fail early (and clearly) if nothing is listening.
node -e '
  fetch(process.argv[1]).then(
    () => {},
    (e) => { console.error(`server not reachable at ${process.argv[1]}: ${e.cause?.code ?? e.message}`); process.exit(1) })
' "$base_url"

if [ "$rewrite" = 1 ]; then
  # Buckets are implicit in ursula (spec/42 §1.2); PUT /{bucket} only
  # validates the ID. Informational, never fatal.
  bucket_path="${prefix%/}"
  node -e '
    fetch(process.argv[1], { method: "PUT" }).then(
      (r) => console.log(`PUT ${new URL(process.argv[1]).pathname} -> ${r.status}`),
      () => {})
  ' "$base_url$bucket_path"
fi

mkdir -p .results
report=".results/report-$mode.json"
rm -f "$report"

echo "running conformance suite: base=$base_url mode=$mode prefix=$prefix"
set +e
CONFORMANCE_BASE_URL="$base_url" CONFORMANCE_MODE="$mode" \
  ./node_modules/.bin/vitest run --config vitest.config.mjs \
    --reporter=default --reporter=json --outputFile.json="$report" \
    "${extra[@]}"
vitest_rc=$?
set -e

summary_rc=0
node summarize.mjs "$report" "$mode" || summary_rc=$?

if [ "$vitest_rc" != 0 ] || [ "$summary_rc" != 0 ]; then
  echo "conformance: FAILED (vitest exit $vitest_rc)"
  exit 1
fi
echo "conformance: OK"
