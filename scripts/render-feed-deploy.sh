#!/usr/bin/env bash
# Renders feed/deploy/ from the chart (charts/mesh-feed) with charts/mesh-feed/values-plain-manifests.yaml:
# one file per chart template (helm template's `# Source:` comments say which), each a template
# in the sense of `npm run package` (marked on its first line where it names a plugin image).
# feed/deploy/ is never edited by hand; tests/feed/chart.test.ts fails when it differs from this
# script's output.
#   scripts/render-feed-deploy.sh [out-dir]     (default feed/deploy)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/feed/deploy}"
helm="$(bash "$root/scripts/helm-setup.sh")"
rendered="$("$helm" template mesh-feed "$root/charts/mesh-feed" --namespace mesh-feed \
  --values "$root/charts/mesh-feed/values-plain-manifests.yaml")"
mkdir -p "$out"
rm -f "$out"/*.yaml
node --import tsx "$root/scripts/render-feed-deploy.ts" "$out" <<<"$rendered"
