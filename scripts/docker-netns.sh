#!/usr/bin/env bash
# Runs a command in a private network + mount namespace with only loopback up: the home of the
# compose test's Docker engine (scripts/docker-engine.sh). Everything dockerd changes there (its
# docker0 bridge, veths, iptables NAT/filter chains, overlay and netns mounts) vanishes with the
# namespace, and services on `network_mode: host` bind the namespace's loopback, not the
# machine's. Fails loudly (never skips) when unshare or ip is missing.
set -euo pipefail
for tool in unshare ip; do
  command -v "$tool" >/dev/null || { echo "docker-netns: '$tool' not found" >&2; exit 1; }
done
# scripts/docker-engine.sh refuses to start dockerd unless this marks the private namespace.
export MDF_DOCKER_NETNS=1
exec unshare --net --mount --propagation private -- sh -c 'ip link set lo up && exec "$@"' docker-netns "$@"
