#!/usr/bin/env bash
# Builds and runs istiod's own configuration generation for every supported Istio era
# (tests/istio/v1_30, tests/istio/v1_31: one Go module each, sharing tests/istio/common/), and
# builds istioctl from the newest era's module graph. Writes build/istio/<era>/... (read by
# tests/istio/*.test.ts) and .cache/istio/bin/{gen-<era>.test,istioctl-<era>}.
#
# Once per `npm test`: a binary is rebuilt only when its module or the shared sources are newer.
# Go's module and build caches are project-local (.cache/go, scripts/go-env.sh), so a warm run
# downloads and compiles nothing. Fails (never skips) without Go or the module proxy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if ! command -v go >/dev/null; then
  echo "istio-gen: no 'go' on PATH; istiod's generation (tests/istio) needs Go >= 1.25" >&2
  exit 1
fi
# shellcheck source=go-env.sh
source scripts/go-env.sh
# The newest pseudo-versions' modules are not all in the checksum database yet (sum.golang.org
# answers 404 for them); go.sum in each module pins every hash, and Go checks downloads against it.
export GOSUMDB=off
# ISTIO_BIN_DIR: where the binaries go (default .cache/istio/bin); a second checkout sharing .cache
# (a git worktree) sets its own so two checkouts with different sources never overwrite each other.
bin="${ISTIO_BIN_DIR:-$root/.cache/istio/bin}"
mkdir -p "$bin" build/istio
# pilot-agent's conversion needs the modules (localModules in generate_test.go).
if [ ! -f build/passthrough_mtls.wasm ]; then
  echo "istio-gen: build/*.wasm missing: run npm run build first" >&2
  exit 1
fi

stale() { # stale <target> <module dir>: target missing or older than any source of the module
  [ ! -e "$1" ] && return 0
  [ -n "$(find "$2" tests/istio/common -newer "$1" \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print -quit)" ]
}

timed() { # timed <label> <command...>
  local start=$SECONDS
  "${@:2}"
  echo "istio-gen: $1 took $((SECONDS - start)) s" >&2
}

for era in 1.30 1.31; do
  mod="tests/istio/v${era/./_}"
  test_bin="$bin/gen-$era.test"
  if stale "$test_bin" "$mod"; then
    timed "go test -c ($era)" bash -c "cd '$mod' && nice -n 10 go test -c -vet=off -o '$test_bin' ."
  fi
  out="$root/build/istio/$era"
  rm -rf "$out"
  mkdir -p "$out"
  # Two runs: a sidecar-only istiod, then the same with ambient enabled (istiod reads its feature
  # flags at start-up).
  (cd "$mod" && ISTIO_ERA=$era ISTIO_OUT="$out" REPO_ROOT="$root" \
    "$test_bin" -test.run '^TestGenerate$' -test.count=1 >"$out/generate.log" 2>&1) ||
    { tail -50 "$out/generate.log" >&2; echo "istio-gen: istiod $era generation failed ($out/generate.log)" >&2; exit 1; }
  (cd "$mod" && PILOT_ENABLE_AMBIENT=true ISTIO_ERA=$era ISTIO_OUT="$out" REPO_ROOT="$root" \
    "$test_bin" -test.run '^TestGenerateAmbient$' -test.count=1 >"$out/generate-ambient.log" 2>&1) ||
    { tail -50 "$out/generate-ambient.log" >&2; echo "istio-gen: istiod $era ambient generation failed" >&2; exit 1; }
  echo "istio-gen: istiod $era generation written to build/istio/$era" >&2
done

# istioctl of the newest era, from the same module graph as its generation test (shared packages).
istioctl="$bin/istioctl-1.31"
if stale "$istioctl" tests/istio/v1_31; then
  timed "go build istioctl (1.31)" bash -c "cd tests/istio/v1_31 && nice -n 10 go build -o '$istioctl' istio.io/istio/istioctl/cmd/istioctl"
fi
"$istioctl" version --remote=false >/dev/null
