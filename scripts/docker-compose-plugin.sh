#!/usr/bin/env bash
# Builds the pinned docker compose v2 CLI plugin from the Go module proxy into
# .cache/docker/bin/docker-compose (once; later runs reuse it). Images and the engine come from
# scripts/docker-engine.sh and scripts/docker-images.sh; this is only the `docker compose` verb.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="v2.40.3"
out="$root/.cache/docker/bin/docker-compose"
stamp="$out.version"
if [[ -x "$out" && "$(cat "$stamp" 2>/dev/null)" == "$version" ]]; then exit 0; fi
command -v go >/dev/null || { echo "docker-compose-plugin: 'go' not found (the compose plugin is built from source)" >&2; exit 1; }
# shellcheck source=go-env.sh
source "$root/scripts/go-env.sh"
src="$(go mod download -json "github.com/docker/compose/v2@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[[ -d "$src" ]] || { echo "docker-compose-plugin: could not download github.com/docker/compose/v2@$version" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
echo "docker-compose-plugin: building compose $version (a few minutes, once)" >&2
# The module cache is read-only: build from there without touching its go.mod/go.sum.
(cd "$src" && GOFLAGS="-mod=readonly -buildvcs=false" nice -n 10 go build -trimpath \
  -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" -o "$out.tmp" ./cmd)
mv "$out.tmp" "$out"
echo "$version" > "$stamp"
