#!/usr/bin/env bash
# Runs a command inside a fresh, private network namespace with only loopback up, so tests can
# install iptables REDIRECT rules (the way a mesh captures outbound traffic) without touching the
# machine's own network. Needs root (or CAP_SYS_ADMIN), `unshare` and `iptables`; fails loudly
# rather than skipping when they are missing.
set -euo pipefail
for tool in unshare ip iptables; do
  command -v "$tool" >/dev/null || { echo "in-netns: '$tool' not found (npm run setup installs iptables)" >&2; exit 1; }
done
# tests/support/capture.ts refuses to touch iptables unless this marks the private namespace.
export MESH_TEST_NETNS=1
exec unshare --net -- sh -c 'ip link set lo up && exec "$@"' in-netns "$@"
