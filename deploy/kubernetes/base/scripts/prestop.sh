#!/bin/sh
# The voter container's preStop hook: drain this node (move every leadership
# it holds to a caught-up peer) before the kubelet sends SIGTERM. It always
# exits 0: when the drain is refused or runs out of time, the voter's own
# SIGTERM shutdown still hands its leaderships off (within 5 s of its 20 s).
#
# Budget (terminationGracePeriodSeconds 60): this hook at most
# URSULA_PRESTOP_DEADLINE_SECS (30), then the voter's shutdown at most 20 s.
# shellcheck source=SCRIPTDIR/common.sh
. "${0%/*}/common.sh"

# The hook's output is not logged by the kubelet: send it to the container's.
if [ -w /proc/1/fd/2 ]; then
  exec >> /proc/1/fd/2 2>&1
fi

ursula_node_id || exit 0
drain_timeout="${URSULA_PRESTOP_DRAIN_TIMEOUT_SECS:-25}"
deadline="${URSULA_PRESTOP_DEADLINE_SECS:-30}"

# Before the drain sets the mark: the next start of this pod lifts it.
: > "$URSULA_DRAIN_MARKER" || log "cannot write $URSULA_DRAIN_MARKER; undrain node $NODE_ID by hand after its restart"

log "preStop: draining node $NODE_ID (at most ${drain_timeout} s)"
if bounded "$deadline" ursulactl drain --config "$URSULA_MANIFEST" --node "$NODE_ID" \
  --timeout-secs "$drain_timeout" --http-timeout-secs 5; then
  log "preStop: node $NODE_ID drained"
else
  log "preStop: drain of node $NODE_ID refused or unfinished (exit $?); its SIGTERM shutdown hands off what is left"
fi
exit 0
