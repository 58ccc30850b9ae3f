#!/usr/bin/env bash
# A private Docker engine for the compose test (and for trying docker-compose.yml on a machine
# without Docker): Debian bookworm's docker.io (dockerd 20.10, containerd, runc, tini), fetched
# with `apt-get download` and unpacked with `dpkg -x` into .cache/docker/engine; no package is
# installed and no service is registered. dockerd runs with its own data root, socket,
# exec-root, pidfile and config, and only inside a private network+mount namespace
# (scripts/docker-netns.sh), so its bridge, iptables chains and mounts never reach the machine.
#
#   scripts/docker-engine.sh install   fetch + unpack the pinned packages (once)
#   scripts/docker-engine.sh start     start dockerd (inside scripts/docker-netns.sh only)
#   scripts/docker-engine.sh stop      stop it and every container process it left
#   scripts/docker-engine.sh env       print the DOCKER_HOST/DOCKER_CONFIG exports for a shell
#                                      (and PATH with the package's docker CLI if the machine has none)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/docker"
engine="$cache/engine"
# Pinned: Debian bookworm (with its security/updates suites), as the machine's apt sources have it.
packages=(
  "docker.io=20.10.24+dfsg1-1+deb12u1+b6"
  "containerd=1.6.20~ds1-1+deb12u3"
  "runc=1.1.5+ds1-1+deb12u1"
  "tini=0.19.0-1+b3"
)
# Short, per-checkout runtime paths (unix socket paths are limited to 108 bytes).
run="/tmp/mdf-docker-$(printf %s "$root" | sha256sum | cut -c1-8)"
data="$cache/data"
machine_path="$PATH"
export PATH="$engine/usr/bin:$engine/usr/sbin:$PATH"

die() { echo "docker-engine: $*" >&2; exit 1; }

install() {
  local stamp="$engine/.packages" want
  want="$(printf '%s\n' "${packages[@]}")"
  if [[ -x "$engine/usr/sbin/dockerd" && "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then return; fi
  command -v apt-get >/dev/null || die "'apt-get' not found (the engine comes from Debian's docker.io package)"
  mkdir -p "$cache/debs"
  # A machine whose package lists are missing or stale gets one `apt-get update`, then a retry.
  (cd "$cache/debs" && { apt-get download -q "${packages[@]}" || { apt-get update -qq && apt-get download -q "${packages[@]}"; }; } \
    >"$cache/debs/download.log" 2>&1) || {
    cat "$cache/debs/download.log" >&2
    die "apt-get download ${packages[*]} failed (is the pinned version still on the mirror?)"
  }
  rm -rf "$engine.tmp" && mkdir -p "$engine.tmp"
  for spec in "${packages[@]}"; do
    local name="${spec%%=*}" version="${spec#*=}"
    dpkg -x "$cache/debs/${name}_${version//:/%3a}_"*.deb "$engine.tmp"
  done
  rm -rf "$engine" && mv "$engine.tmp" "$engine"
  echo "$want" > "$stamp"
}

alive() { [[ -f "$run/dockerd.pid" ]] && kill -0 "$(cat "$run/dockerd.pid")" 2>/dev/null; }

# The machine's docker CLI if it has one, else the one in the docker.io package.
cli() { PATH="$machine_path" command -v docker || echo "$engine/usr/bin/docker"; }

client() { DOCKER_HOST="unix://$run/docker.sock" "$(cli)" "$@"; }

print_env() {
  local path=""
  [[ "$(cli)" == "$engine/"* ]] && path=" PATH=$engine/usr/bin:$machine_path"
  echo "export DOCKER_HOST=unix://$run/docker.sock DOCKER_CONFIG=$cache/cli DOCKER_BUILDKIT=0$path"
}

start() {
  [[ "${MDF_DOCKER_NETNS:-}" == "1" ]] ||
    die "refusing to start dockerd in the machine's own namespaces; run it through scripts/docker-netns.sh"
  install
  alive && die "an engine is already running (pid $(cat "$run/dockerd.pid")); scripts/docker-engine.sh stop"
  mkdir -p "$run" "$data" "$cache/cli/cli-plugins"
  [[ -x "$cache/bin/docker-compose" ]] && ln -sfn "$cache/bin/docker-compose" "$cache/cli/cli-plugins/docker-compose"
  # Its own config file, so /etc/docker/daemon.json (if the machine has one) is never read.
  echo '{}' > "$run/daemon.json"
  # docker-init (tini) for `init: true` services; no userland proxy (nothing is published).
  setsid dockerd --data-root "$data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
    -H "unix://$run/docker.sock" --config-file "$run/daemon.json" \
    --init-path "$engine/usr/bin/tini-static" --userland-proxy=false --storage-driver overlay2 \
    >"$run/dockerd.log" 2>&1 < /dev/null &
  local pid=$!
  for _ in $(seq 1 120); do
    if client version >/dev/null 2>&1; then return; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  tail -20 "$run/dockerd.log" >&2
  die "dockerd did not answer on $run/docker.sock (log above: $run/dockerd.log)"
}

stop() {
  if alive; then
    local pid; pid="$(cat "$run/dockerd.pid")"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  # Container shims outlive a dockerd that died: end those of this engine (its exec-root is in
  # their command line), by pid.
  local shims; shims="$(ps -eo pid=,args= | awk -v dir="$run/exec/" 'index($0, dir) && /containerd/ { print $1 }')"
  [[ -n "$shims" ]] && kill -KILL $shims 2>/dev/null || true
  rm -f "$run/docker.sock" "$run/dockerd.pid"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  *) die "usage: scripts/docker-engine.sh install|start|stop|env" ;;
esac
