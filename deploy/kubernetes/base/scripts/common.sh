# shellcheck shell=sh disable=SC2034
# (NODE_ID is for the scripts that source this file.)
# Sourced by entrypoint.sh and prestop.sh of a voter pod (POSIX sh: the image
# needs /bin/sh; deploy/Dockerfile's Debian base has it and the sleep, rm and
# timeout they call).

URSULA_CONFIG="${URSULA_CONFIG:-/etc/ursula/ursula.toml}"
URSULA_MANIFEST="${URSULA_MANIFEST:-/etc/ursula/cluster-manifest.json}"
# Written on the data volume by the preStop hook before it drains the node,
# removed once the restarted node is caught up and undrained (entrypoint.sh).
URSULA_DRAIN_MARKER="${URSULA_DRAIN_MARKER:-/var/lib/ursula/.k8s-prestop-drain}"

log() {
  echo "ursula-pod: $*" >&2
}

# NODE_ID from the pod name: StatefulSet pod ursula-N is node N+1.
ursula_node_id() {
  # The container runtime sets HOSTNAME (the pod name); else the kernel's.
  # shellcheck disable=SC3028
  pod="${HOSTNAME:-}"
  if [ -z "$pod" ] && [ -r /proc/sys/kernel/hostname ]; then
    read -r pod < /proc/sys/kernel/hostname
  fi
  ordinal="${pod##*-}"
  case "$ordinal" in
    '' | *[!0-9]*)
      log "cannot take a StatefulSet ordinal from the host name ${pod:-<empty>} (expected ursula-N)"
      return 1
      ;;
  esac
  NODE_ID=$((ordinal + 1))
}

# Runs "$@" for at most $1 seconds when `timeout` is there, else unbounded.
bounded() {
  secs="$1"
  shift
  if command -v timeout > /dev/null 2>&1; then
    timeout "$secs" "$@"
  else
    "$@"
  fi
}
