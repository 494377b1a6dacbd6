#!/usr/bin/env bash
# Runs the tests of the examples: each starts its own ursula processes
# (a development node, a gateway) from $URSULA_BIN on ephemeral ports, and
# the browser tests drive the system's Chromium with playwright-core.
#
#   URSULA_BIN=target/release/ursula examples/run-tests.sh [test files...]
#
# Needs Node.js >= 20 and Chromium at /usr/bin/chromium (or $CHROMIUM_PATH):
#   apt-get install -y chromium
# Screenshots land in examples/browser-test/artifacts/.
set -euo pipefail

die() {
  echo "run-tests.sh: $*" >&2
  exit 1
}

[ -n "${URSULA_BIN:-}" ] || die "set URSULA_BIN to the ursula binary, e.g. URSULA_BIN=target/release/ursula $0"
[ -f "$URSULA_BIN" ] && [ -x "$URSULA_BIN" ] || die "URSULA_BIN=$URSULA_BIN is not an executable file"
URSULA_BIN="$(cd "$(dirname "$URSULA_BIN")" && pwd)/$(basename "$URSULA_BIN")"
export URSULA_BIN

cd "$(dirname "${BASH_SOURCE[0]}")"

command -v node >/dev/null || die "node is missing: install Node.js 20 or later"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "Node.js $(node --version) is too old: 20 or later is needed"

CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
[ -x "$CHROMIUM_PATH" ] || die "Chromium is missing at $CHROMIUM_PATH: install it with 'apt-get install -y chromium' (or set CHROMIUM_PATH)"
export CHROMIUM_PATH

echo "ursula: $("$URSULA_BIN" --version 2>/dev/null | head -n1) ($URSULA_BIN)"
echo "node: $(node --version); chromium: $("$CHROMIUM_PATH" --version 2>/dev/null | head -n1)"

# playwright-core only (no browser download), exactly as package-lock.json says.
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error

if [ "$#" -gt 0 ]; then
  tests=("$@")
else
  tests=(
    resumable-ai-stream/test.mjs
    chat-room/test.mjs
    browser-telemetry/test.mjs
    browser-test/gateway-access.test.mjs
  )
fi

rm -rf browser-test/artifacts
mkdir -p browser-test/artifacts
status=0
# One file at a time: each starts its own processes and a browser.
node --test --test-concurrency=1 --test-timeout=180000 --test-force-exit --test-reporter=spec "${tests[@]}" || status=$?

shots=(browser-test/artifacts/*.png)
if [ -e "${shots[0]}" ]; then
  echo "screenshots:"
  for shot in "${shots[@]}"; do echo "  $(pwd)/$shot"; done
fi
exit "$status"
