#!/usr/bin/env bash
# Builds (once) the Go tools of the plugin images (images/README.md) into the project-local,
# git-ignored .cache/images/bin:
#   tools:   crane (go-containerregistry's registry client and test registry) and wasm-image (packs a
#            module into an OCI layout), from the images/ module; what `npm run package` needs.
#   fetcher: tests/wasmfetch, istio-agent's own module fetcher (istio.io/istio pkg/wasm) for the
#            tests; it shares tests/istio/v1_31's module graph, so it reuses istio-gen's compiled
#            packages in .cache/go/build.
# Usage: bash scripts/images-setup.sh tools|fetcher|all
# Each binary is named after the digest of what it is built from: .cache is shared by every checkout
# of the repository, and a binary built from other sources must never pass for this one's. This
# checkout's build/tools/ links to the ones its sources name. A second run finds the binaries and
# returns. Fails (never skips) without Go or the module proxy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
what="${1:-all}"
log() { echo "images-setup: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
case "$what" in tools|fetcher|all) ;; *) die "usage: images-setup.sh tools|fetcher|all" ;; esac
command -v go >/dev/null || die "no 'go' on PATH (the image tools are built from the Go module proxy; Go >= 1.25)"
# shellcheck source=go-env.sh
source scripts/go-env.sh
bin="$root/.cache/images/bin"
mkdir -p "$bin"

sources_hash() { # sources_hash <file or dir>...: digest of the Go sources among them
  find "$@" \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12
}

prune() { # prune <name>: keep the three newest builds of a tool (other checkouts may use theirs)
  ls -t "$bin/$1"-* 2>/dev/null | tail -n +4 | xargs -r rm -f
}

timed() { # timed <label> <command...>
  local start=$SECONDS
  "${@:2}"
  log "$1 took $((SECONDS - start)) s"
}

# build <module dir> <output> <package>: one `go build` into a temporary name, then renamed, so an
# interrupted build never leaves a binary that looks complete.
build() {
  local tmp="$2.tmp.$$"
  (cd "$1" && nice -n 10 go build -o "$tmp" "$3") || { rm -f "$tmp"; die "go build of $3 in $1 failed (see above)"; }
  mv "$tmp" "$2"
}

# build/tools/<name>: this checkout's link to the binary its sources name (scripts and tests use it).
mkdir -p build/tools
link() { ln -sfn "$1" "build/tools/$2"; }

if [[ "$what" != fetcher ]]; then
  # crane depends on the pinned module versions only; wasm-image on its own source too.
  crane="$bin/crane-$(sources_hash images/go.mod images/go.sum)"
  if [[ ! -x "$crane" ]]; then
    timed "go build crane" build images "$crane" github.com/google/go-containerregistry/cmd/crane
    prune crane
  fi
  link "$crane" crane
  wasm_image="$bin/wasm-image-$(sources_hash images)"
  if [[ ! -x "$wasm_image" ]]; then
    timed "go build wasm-image" build images "$wasm_image" ./wasm-image
    prune wasm-image
  fi
  link "$wasm_image" wasm-image
fi

if [[ "$what" != tools ]]; then
  # The newest istio.io/istio pseudo-versions are not all in the checksum database (as istio-gen):
  # go.sum pins every hash, and Go checks downloads against it.
  export GOSUMDB=off
  target="$bin/wasm-fetch-$(sources_hash tests/wasmfetch)"
  if [[ ! -x "$target" ]]; then
    timed "go build wasm-fetch (istio.io/istio pkg/wasm)" build tests/wasmfetch "$target" .
    prune wasm-fetch
  fi
  link "$target" wasm-fetch
fi
