#!/usr/bin/env bash
# Runs the conformance suite through `ursula gateway` in front of a
# three-voter cluster on loopback; see scripts/conformance-cluster.sh.
#
#   scripts/conformance-gateway.sh BIN [--mode ndjson|array]
set -euo pipefail
FRONT=gateway exec "$(dirname "$0")/conformance-cluster.sh" "$@"
