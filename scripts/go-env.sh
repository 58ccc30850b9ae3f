#!/usr/bin/env bash
# Sourced by every script that builds Go code (istiod's generation, istioctl, kube-apiserver,
# etcd, the compose plugin): one project-local, git-ignored module and build cache under
# .cache/go, so a warm `npm test` reuses every download and compiled package, and two Go builds
# (even from different modules) share what they have in common. Nothing is installed globally.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The cache's real path: a git worktree whose .cache is a link to the main checkout's then keys
# compiled packages by the same module paths as the main checkout, and reuses them.
mkdir -p "$root/.cache"
cache="$(cd "$root/.cache" && pwd -P)"
export GOPATH="$cache/go/path"
export GOMODCACHE="$cache/go/mod"
export GOCACHE="$cache/go/build"
# The machine's own Go: never download a different toolchain behind the build's back.
export GOTOOLCHAIN=local
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED="${CGO_ENABLED:-0}"
mkdir -p "$GOPATH" "$GOMODCACHE" "$GOCACHE"
