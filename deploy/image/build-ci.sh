#!/usr/bin/env bash
# Builds and checks a runtime image the way CI can here. No image registry
# is reachable from these machines, so deploy/Dockerfile's bases
# (rust, debian) cannot be pulled; this builds the same runtime layout
# `FROM scratch`: the binaries built by cargo, the shared libraries `ldd`
# names for them, /etc/passwd with the non-root user 10001, the
# /var/lib/ursula volume, ports 4437 and 4439. Then it checks that the image
# holds both binaries and runs them (`--version`, `ursula config check`,
# `ursula gateway --check`) from the image's own filesystem, with the
# image's own dynamic loader and libraries. Containers cannot be started in
# this sandbox (crun cannot set rlimits), so nothing runs in a container.
#
# Usage: deploy/image/build-ci.sh BIN_DIR   (the directory with ursula and ursulactl)
set -euo pipefail
cd "$(dirname "$0")/../.."

bin_dir="${1:?usage: build-ci.sh BIN_DIR}"
tag="localhost/ursula:ci"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/context/root"
mkdir -p "$root/usr/local/bin" "$root/var/lib/ursula" "$root/etc/ursula" "$root/tmp"
cp "$bin_dir/ursula" "$bin_dir/ursulactl" "$root/usr/local/bin/"
# The default configuration (spec/03's `docker run`), and a /tmp the
# non-root user may write its temporary WAL into.
cp deploy/configs/container.toml "$root/etc/ursula/ursula.toml"
chmod 1777 "$root/tmp"

# Every library either binary needs, at the path the loader looks for it.
for bin in ursula ursulactl; do
  ldd "$bin_dir/$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }'
done | sort -u | while read -r lib; do
  cp --parents -L "$lib" "$root/"
done
echo 'root:x:0:0:root:/root:/usr/sbin/nologin' > "$root/etc/passwd"
echo 'ursula:x:10001:10001:ursula:/var/lib/ursula:/usr/sbin/nologin' >> "$root/etc/passwd"
printf 'root:x:0:\nursula:x:10001:\n' > "$root/etc/group"
cp /etc/ssl/certs/ca-certificates.crt "$root/tmp/" 2>/dev/null && {
  mkdir -p "$root/etc/ssl/certs"
  mv "$root/tmp/ca-certificates.crt" "$root/etc/ssl/certs/"
}

cat > "$work/context/Containerfile" <<'EOF'
FROM scratch
COPY root/ /
USER 10001:10001
WORKDIR /var/lib/ursula
VOLUME ["/var/lib/ursula"]
EXPOSE 4437 4439
ENTRYPOINT ["/usr/local/bin/ursula"]
CMD ["--config", "/etc/ursula/ursula.toml"]
EOF

podman build --quiet -t "$tag" -f "$work/context/Containerfile" "$work/context" >/dev/null
echo "image built: $tag"

# The image as it was built: its config, then its layers unpacked in order.
podman save --format oci-dir -o "$work/oci" "$tag" >/dev/null
mkdir -p "$work/fs"
python3 - "$work/oci" "$work/fs" <<'EOF'
import json, os, sys, tarfile
oci, out = sys.argv[1], sys.argv[2]
blob = lambda digest: os.path.join(oci, "blobs", *digest.split(":", 1))
index = json.load(open(os.path.join(oci, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))["config"]
assert config.get("User") == "10001:10001", config.get("User")
assert set(config.get("ExposedPorts", {})) == {"4437/tcp", "4439/tcp"}, config.get("ExposedPorts")
assert "/var/lib/ursula" in config.get("Volumes", {}), config.get("Volumes")
assert config.get("Entrypoint") == ["/usr/local/bin/ursula"], config.get("Entrypoint")
assert config.get("Cmd") == ["--config", "/etc/ursula/ursula.toml"], config.get("Cmd")
tmp_modes = []
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        tmp_modes += [m.mode for m in t.getmembers() if m.name.strip("./") == "tmp"]
        t.extractall(out, filter="tar")
# The default config's temporary WAL goes under /tmp, as user 10001.
assert tmp_modes and tmp_modes[-1] & 0o1777 == 0o1777, [oct(m) for m in tmp_modes]
print("image config: user 10001, ports 4437 and 4439, volume /var/lib/ursula, entrypoint ursula, /tmp 1777")
EOF

fs="$work/fs"
for bin in ursula ursulactl; do
  [ -x "$fs/usr/local/bin/$bin" ] || { echo "the image lacks /usr/local/bin/$bin" >&2; exit 1; }
done
loader="$(find "$fs" -name 'ld-linux*.so*' | head -n1)"
[ -n "$loader" ] || { echo "the image holds no dynamic loader" >&2; exit 1; }
lib_path="$(find "$fs" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)"
# Runs a binary of the image with the image's loader and libraries only.
in_image() { "$loader" --library-path "$lib_path" "$fs/usr/local/bin/$1" "${@:2}"; }

in_image ursula --version
in_image ursulactl --version
conf="$work/voter.toml"
sed 's#/var/lib/ursula#'"$work"'/wal#' deploy/configs/voter.toml > "$conf"
in_image ursula config check --node-id 1 "$conf" >/dev/null
echo "ursula config check (from the image) accepts deploy/configs/voter.toml"
in_image ursula gateway --check --upstream http://10.0.0.1:4437 >/dev/null
echo "ursula gateway --check (from the image) runs"
# With nothing mounted the image runs its own /etc/ursula/ursula.toml: a
# single Raft node on every interface, its WAL in a temporary directory.
default="$(in_image ursula config check "$fs/etc/ursula/ursula.toml")"
for want in 'listen: 0.0.0.0:4437' 'engine: Raft(' 'peers: []' 'path: None'; do
  grep -qF "$want" <<<"$default" || { echo "the image's default config lacks: $want" >&2; echo "$default" >&2; exit 1; }
done
echo "the image's default config (no mount) is a single Raft node on 0.0.0.0:4437 with a temporary WAL"
echo "image check passed"
