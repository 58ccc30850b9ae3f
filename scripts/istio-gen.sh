#!/usr/bin/env bash
# Builds and runs istiod's own configuration generation for every supported Istio era
# (tests/istio/v1_30, tests/istio/v1_31: one Go module each, sharing tests/istio/common/), and
# builds istioctl from the newest era's module graph. Writes build/istio/<era>/... (read by
# tests/istio/*.test.ts) and .cache/istio/bin/{gen-<era>-<sources digest>.test,istioctl-<era>}.
#
# Once per `npm test`: a test binary is rebuilt only when its sources changed (named after their digest).
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

# The upgrade scenarios' manifests and modules (TestGenerateUpgrades reads them).
node --import tsx tests/istio/upgrade_inputs.ts

stale() { # stale <target> <module dir>: target missing or older than any source of the module
  [ ! -e "$1" ] && return 0
  [ -n "$(find "$2" tests/istio/common -newer "$1" \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print -quit)" ]
}

timed() { # timed <label> <command...>
  local start=$SECONDS
  "${@:2}"
  echo "istio-gen: $1 took $((SECONDS - start)) s" >&2
}

sources_hash() { # sources_hash <module dir>: digest of the Go sources a test binary is built from
  find "$1" tests/istio/common \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12
}

# The feed's chart with istio.enabled, rendered by the real Helm: its PeerAuthentication and
# AuthorizationPolicy go through istiod's generation with the feed's sidecar (scenario mesh_feed),
# its one target read by the default namespace's workloads (tests/istio/envoy_feed_channel.test.ts
# relies on data/postgres being denied by the AuthorizationPolicy).
feed_chart="$root/build/istio/feed-chart-istio.yaml"
"$(bash scripts/helm-setup.sh)" template mesh-feed charts/mesh-feed --namespace mesh-feed --set istio.enabled=true \
  --set-json 'config.targets=[{"name":"passthrough-mtls","filter":"passthrough_mtls","network":"","readers":["cluster.local/ns/default/*"]}]' >"$feed_chart"

for era in 1.30 1.31; do
  mod="tests/istio/v${era/./_}"
  # Named after its sources' digest: .cache is shared by every checkout of the repository, and
  # a binary built from other sources (another branch) must never pass for this one's.
  test_bin="$bin/gen-$era-$(sources_hash "$mod").test"
  if [ ! -e "$test_bin" ]; then
    timed "go test -c ($era)" bash -c "cd '$mod' && nice -n 10 go test -c -vet=off -o '$test_bin.tmp.$$' . && mv '$test_bin.tmp.$$' '$test_bin'"
    # Keep the three newest binaries of the era (about 200 MB each).
    ls -t "$bin"/gen-"$era"-*.test 2>/dev/null | tail -n +4 | xargs -r rm -f
  fi
  out="$root/build/istio/$era"
  rm -rf "$out"
  mkdir -p "$out"
  # Two runs: a sidecar-only istiod, then the same with ambient enabled (istiod reads its feature
  # flags at start-up).
  (cd "$mod" && ISTIO_ERA=$era ISTIO_OUT="$out" REPO_ROOT="$root" ISTIO_FEED_CHART="$feed_chart" \
    "$test_bin" -test.run '^(TestGenerate|TestGenerateUpgrades)$' -test.count=1 >"$out/generate.log" 2>&1) ||
    { tail -50 "$out/generate.log" >&2; echo "istio-gen: istiod $era generation failed ($out/generate.log)" >&2; exit 1; }
  (cd "$mod" && PILOT_ENABLE_AMBIENT=true ISTIO_ERA=$era ISTIO_OUT="$out" REPO_ROOT="$root" ISTIO_FEED_CHART="$feed_chart" \
    "$test_bin" -test.run '^TestGenerateAmbient$' -test.count=1 >"$out/generate-ambient.log" 2>&1) ||
    { tail -50 "$out/generate-ambient.log" >&2; echo "istio-gen: istiod $era ambient generation failed" >&2; exit 1; }
  # istiod's workload and service view of tests/istiodview/mesh.yaml (ambient index and sidecar
  # registry), compared with the feed's model by tests/istio/feed_vs_istiod.test.ts.
  (cd "$mod" && PILOT_ENABLE_AMBIENT=true ISTIO_ERA=$era ISTIO_OUT="$out" REPO_ROOT="$root" ISTIO_FEED_CHART="$feed_chart" \
    "$test_bin" -test.run '^TestIstiodView$' -test.count=1 >"$out/view.log" 2>&1) ||
    { tail -50 "$out/view.log" >&2; echo "istio-gen: istiod $era workload/service view failed ($out/view.log)" >&2; exit 1; }
  echo "istio-gen: istiod $era generation written to build/istio/$era" >&2
done

# istioctl of the newest era, from the same module graph as its generation test (shared packages).
istioctl="$bin/istioctl-1.31"
if stale "$istioctl" tests/istio/v1_31; then
  timed "go build istioctl (1.31)" bash -c "cd tests/istio/v1_31 && nice -n 10 go build -o '$istioctl' istio.io/istio/istioctl/cmd/istioctl"
fi
"$istioctl" version --remote=false >/dev/null
