#!/usr/bin/env bash
# Checks deploy/ without a cluster: renders the kustomize targets, validates
# every rendered object against the Kubernetes schemas (kubernetes-validate,
# strict), and runs deploy/check_manifests.py (ports, probes, Services, PDBs,
# preStop, the ursulactl manifest, gateway flags, the production overlay,
# deploy/configs against spec/06, the systemd units). Also: `sh -n` on the
# pod scripts (and shellcheck where installed) and, where systemd-analyze
# exists, `systemd-analyze verify` of the units.
#
# With URSULA_BIN set (a built `ursula`), every config the targets carry and
# deploy/configs' are also checked by the binary itself:
#   voter configs:   $URSULA_BIN config check FILE --node-id N   (each peer's N)
#   gateway configs: $URSULA_BIN gateway --check FLAGS           (the file as flags)
#
# Usage, from the repository root:  deploy/check.sh
# Environment:
#   URSULA_DEPLOY_VENV   the Python venv with kubernetes-validate
#                        (default /var/tmp/ursula-deploy-venv; created if missing)
#   URSULA_K8S_VERSIONS  Kubernetes schema versions, comma-separated (default 1.30.0,1.37.0)
#   URSULA_BIN           a built ursula binary (optional)
#   URSULA_SPEC_DIR      the spec pages (default ../shared/spec beside the repository)
set -euo pipefail

KUBERNETES_VALIDATE_VERSION=1.37.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="${URSULA_DEPLOY_VENV:-/var/tmp/ursula-deploy-venv}"
versions="${URSULA_K8S_VERSIONS:-1.30.0,1.37.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL  $*" >&2
  exit 1
}

command -v kubectl > /dev/null || fail "kubectl is needed to render the kustomize targets (kubectl kustomize)"

# The venv: pip runs only when kubernetes-validate is missing or another version.
if ! "$venv/bin/python" - "$KUBERNETES_VALIDATE_VERSION" > /dev/null 2>&1 <<'EOF'; then
import sys
from importlib.metadata import version
assert version("kubernetes-validate") == sys.argv[1]
import kubernetes_validate, yaml
try:
    import tomllib
except ModuleNotFoundError:
    import tomli
EOF
  echo "..    installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  if ! "$venv/bin/python" -c 'import tomllib' 2> /dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check "tomli==2.0.1"
  fi
fi
echo "ok    kubernetes-validate $("$venv/bin/python" -c 'from importlib.metadata import version; print(version("kubernetes-validate"))') in $venv"

# Render every target.
rendered=()
for target in base overlays/dev overlays/production; do
  name="${target##*/}"
  out="$work/$name.yaml"
  kubectl kustomize "deploy/kubernetes/$target" > "$out" || fail "kubectl kustomize deploy/kubernetes/$target"
  echo "ok    $name: kubectl kustomize deploy/kubernetes/$target renders ($(grep -c '^kind:' "$out") objects)"
  rendered+=(--rendered "$name=$out")
done

# The pod scripts are POSIX sh.
for script in deploy/kubernetes/base/scripts/*.sh; do
  sh -n "$script" || fail "sh -n $script"
  echo "ok    $script: POSIX sh syntax"
done
if command -v shellcheck > /dev/null; then
  shellcheck -x -s sh deploy/kubernetes/base/scripts/*.sh || fail "shellcheck deploy/kubernetes/base/scripts"
  echo "ok    deploy/kubernetes/base/scripts: shellcheck"
else
  echo "skip  deploy/kubernetes/base/scripts: shellcheck not installed"
fi

# The systemd units (the binary path swapped for one that exists here).
if command -v systemd-analyze > /dev/null; then
  mkdir -p "$work/units"
  for unit in deploy/systemd/*.service; do
    sed -e "s#/usr/local/bin/ursula#${URSULA_BIN:-/bin/true}#" -e 's#^EnvironmentFile=/#EnvironmentFile=-/#' \
      "$unit" > "$work/units/${unit##*/}"
  done
  if ! verify="$(systemd-analyze verify "$work"/units/*.service 2>&1)" || [ -n "$verify" ]; then
    fail "systemd-analyze verify deploy/systemd: $verify"
  fi
  echo "ok    deploy/systemd: systemd-analyze verify"
  for unit in "$work"/units/*.service; do
    exposure="$(systemd-analyze security --offline=yes "$unit" 2>&1 | tail -n 1 || true)"
    echo "ok    deploy/systemd/${unit##*/}: ${exposure#→ }"
  done
else
  echo "skip  deploy/systemd: systemd-analyze not installed"
fi

extract=()
if [ -n "${URSULA_BIN:-}" ]; then
  extract=(--extract-configs "$work/configs")
fi
"$venv/bin/python" deploy/check_manifests.py "${rendered[@]}" --k8s-versions "$versions" "${extract[@]}" \
  || fail "deploy/check_manifests.py found mismatches (FAIL lines above)"

if [ -n "${URSULA_BIN:-}" ]; then
  [ -x "$URSULA_BIN" ] || fail "URSULA_BIN=$URSULA_BIN is not an executable"
  while IFS=$'\t' read -r kind file node; do
    label="${file#"$work"/configs/}"
    if [ "$kind" = voter ]; then
      out="$("$URSULA_BIN" config check "$file" --node-id "$node" 2>&1)" \
        || fail "$URSULA_BIN config check $label --node-id $node: $out"
      echo "ok    ursula config check $label --node-id $node"
    else
      mapfile -t flags < "$file.flags"
      out="$("$URSULA_BIN" gateway --check "${flags[@]}" 2>&1)" \
        || fail "$URSULA_BIN gateway --check ${flags[*]}: $out"
      echo "ok    ursula gateway --check (the flags of $label)"
    fi
  done < "$work/configs/index.tsv"
else
  echo "skip  ursula config check: URSULA_BIN not set"
fi

echo "deploy/check.sh: all checks passed"
