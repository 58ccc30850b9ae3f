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
# Inside the namespace only: a wider ephemeral port range and TIME_WAIT reuse, so a soak of
# 100,000 connections from one client address does not run out of source ports (a closed
# connection holds its port for 60 s) and crawl. The range starts above every fixed port the
# tests and benchmarks listen on (Envoy admin and listeners are 15xxx): with 1024-65535 a
# client socket left over from one topology's load took an admin port the next Envoy needed
# ("cannot bind 127.0.0.1:15010: Address already in use").
exec unshare --net -- sh -c 'ip link set lo up &&
  echo "32768 65535" > /proc/sys/net/ipv4/ip_local_port_range &&
  echo 1 > /proc/sys/net/ipv4/tcp_tw_reuse &&
  exec "$@"' in-netns "$@"
