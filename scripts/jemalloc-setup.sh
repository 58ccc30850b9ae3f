#!/usr/bin/env bash
# The feed image's allocator for the tests and benches that run the feed as its image does
# (tests/support/feed_runtime.ts): Debian bookworm's libjemalloc2 at the version
# feed/image/Dockerfile pins, from its .deb (`apt-get download` into .cache/docker/debs, on the
# machine's network) unpacked with `dpkg -x` into .cache/jemalloc/<version>/. Not the machine's
# installed copy, whatever its version: image, tests and benches run one. Idempotent, and offline
# once unpacked, so run it before scripts/in-netns.sh (whose namespace has only loopback).
# Prints the path of libjemalloc.so.2.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/debs.sh"
die() { echo "jemalloc-setup: $*" >&2; exit 1; }

package="$(jemalloc_package)" || die "the pin could not be read"
out="$root/.cache/jemalloc/${package#*=}"
unpacked() { local libs=("$out"/usr/lib/*/libjemalloc.so.2); [[ -f "${libs[0]}" ]] && echo "${libs[0]}"; }

if ! unpacked >/dev/null; then
  fetch_debs "$package" || die "apt-get download $package failed: Debian's mirror unreachable or the version gone (log: $debs_dir/download.log)"
  tmp="$out.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  dpkg -x "$(deb_path "$package")" "$tmp"
  # Another run may have unpacked it meanwhile: keep theirs.
  mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
fi
unpacked || die "$out has no usr/lib/*/libjemalloc.so.2 after unpacking $package"
