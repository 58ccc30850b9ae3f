#!/usr/bin/env bash
# promtool, for checking and unit-testing the shipped Prometheus alert rules (monitoring/): taken
# from Debian bookworm's pinned `prometheus` package with `apt-get download` and `dpkg-deb -x`
# into .cache/prometheus (nothing is installed, no service is registered). Skips when the pinned
# version is already there.
#   scripts/promtool-setup.sh        prints the path of promtool
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/reports.sh"
version="2.42.0+ds-5+deb12u1"
cache="$root/.cache/prometheus"
promtool="$cache/usr/bin/promtool"
die() { echo "promtool-setup: $*" >&2; exit 1; }

if [[ -x "$promtool" && "$(cat "$cache/.version" 2>/dev/null)" == "$version" ]]; then
  echo "$promtool"
  exit 0
fi
command -v apt-get >/dev/null || die "'apt-get' not found (promtool comes from Debian's prometheus package)"
rm -rf "$cache" && mkdir -p "$cache/debs"
# A machine whose package lists are missing or stale gets one `apt-get update`, then a retry.
(cd "$cache/debs" && { apt-get download -q "prometheus=$version" || { apt-get update -qq && apt-get download -q "prometheus=$version"; }; }) >&2 \
  || die "apt-get download prometheus=$version failed (is the pinned version still on the mirror?)"
dpkg-deb -x "$cache/debs/prometheus_${version//:/%3a}_"*.deb "$cache"
rm -rf "$cache/debs"
reports_text "promtool, version ${version%%+*}" "$promtool" --version || die "unpacked promtool is not version ${version%%+*}"
echo "$version" > "$cache/.version"
echo "$promtool"
