#!/bin/sh
# The voter container's entrypoint: starts `ursula` as node N+1 of pod
# ursula-N, with the config every voter shares.
#
# After a preStop drain (prestop.sh) the node's drain mark is kept in its WAL,
# so the restarted node would never lead again, and after a rolling restart of
# every pod no voter would campaign. So when the preStop hook left its marker
# on the data volume, a helper waits in the background until this node is a
# voter of every group and caught up (`ursulactl wait`), lifts the mark
# (`ursulactl undrain`) and removes the marker. A drain mark that an operator
# set is lifted the same way after a pod restart; set URSULA_AUTO_UNDRAIN=false
# to keep every mark until `ursulactl undrain`.
set -eu
# shellcheck source=SCRIPTDIR/common.sh
. "${0%/*}/common.sh"

ursula_node_id

undrain_when_caught_up() {
  while [ -f "$URSULA_DRAIN_MARKER" ]; do
    if ursulactl --config "$URSULA_MANIFEST" wait --node "$NODE_ID" \
      && ursulactl --config "$URSULA_MANIFEST" undrain --node "$NODE_ID"; then
      rm -f "$URSULA_DRAIN_MARKER"
      log "node $NODE_ID caught up and undrained after its preStop drain"
      return 0
    fi
    log "node $NODE_ID not undrained yet; trying again in 10 s"
    sleep 10
  done
}

if [ -f "$URSULA_DRAIN_MARKER" ]; then
  if [ "${URSULA_AUTO_UNDRAIN:-true}" = true ]; then
    # Detached (its parent exits at once), so it outlives the exec below.
    (undrain_when_caught_up &)
  else
    log "node $NODE_ID stays drained (URSULA_AUTO_UNDRAIN=${URSULA_AUTO_UNDRAIN}): run ursulactl undrain --node $NODE_ID"
  fi
fi

log "starting node $NODE_ID with $URSULA_CONFIG"
# exec: ursula is the container's main process and gets the SIGTERM itself.
exec ursula --config "$URSULA_CONFIG" --node-id "$NODE_ID"
