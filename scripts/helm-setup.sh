#!/usr/bin/env bash
# Helm (v4, the pinned release) built from the Go module proxy into .cache/helm/bin, for the
# chart's tests (`helm lint`, `helm template`) and for rendering feed/deploy from the chart.
# Skips when that version is already built. Prints the path of the helm binary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/go-env.sh"
source "$root/scripts/lib/reports.sh"
version="v4.3.2"
out="$root/.cache/helm/bin"
helm="$out/helm"
die() { echo "helm-setup: $*" >&2; exit 1; }

if [[ -x "$helm" && "$(cat "$out/.version" 2>/dev/null)" == "$version" ]]; then
  echo "$helm"
  exit 0
fi
command -v go >/dev/null || die "'go' not found (Helm is built from the Go module proxy)"
mkdir -p "$out"
echo "helm-setup: building helm $version (a few minutes, once)" >&2
# GOBIN puts the binary straight into the project's cache; nothing lands in the machine's PATH.
GOBIN="$out" go install -trimpath -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" "helm.sh/helm/v4/cmd/helm@$version" >&2 \
  || die "go install helm.sh/helm/v4/cmd/helm@$version failed (see above)"
reports_text "$version" "$helm" version --short || die "built helm does not report $version"
echo "$version" > "$out/.version"
echo "$helm"
