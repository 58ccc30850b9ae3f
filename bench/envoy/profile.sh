#!/usr/bin/env bash
# Profiles the sidecar Envoy's CPU per connection with and without a wasm network filter (see
# bench/envoy/profile.ts for the arms) and splits the difference by where it is spent.
# Root only (iptables capture inside a private network namespace); not part of npm test.
#
#   bash bench/envoy/profile.sh cpu  [--rounds 5] [--seconds 4] [--arms without,noop,...]
#       CPU µs per connection per arm (/proc utime+stime ÷ connections), ABBA rounds, JSON lines.
#   bash bench/envoy/profile.sh perf [--seconds 6] [--arms ...] [--callgraph fp|dwarf|none] [--period-us 1000] [--out build/profile]
#       perf record (cpu-clock, fixed period) of each arm's sidecar over one wrk run, then
#       bench/envoy/profile_report.ts: µs per connection by DSO, by V8 / Envoy / kernel region
#       and by function (names recovered from vtables+RTTI of the stripped binary where possible).
#
# Output: build/profile/ (perf.data per arm, <arm>.json with the connection count, report.txt).
# Several perf runs combine into medians with spreads:
#   for i in 1 2 3; do bash bench/envoy/profile.sh perf --out build/profile/run$i; done
#   npx tsx bench/envoy/profile_report.ts build/profile/run1 build/profile/run2 build/profile/run3
# Host calls and guest entries per connection of each arm (TypeScript host, no Envoy):
#   npx tsx bench/envoy/profile_calls.ts
# Measured numbers and what they mean: docs/envoy-cpu-profile.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v perf >/dev/null || { echo "profile.sh: perf not found (linux-perf)" >&2; exit 1; }
bash scripts/setup-bench.sh
[ -f build/noop.wasm ] && [ -f build/passthrough_mtls.wasm ] || npm run build
mode="${1:-cpu}"
out=build/profile
args=("$@")
for i in "${!args[@]}"; do [ "${args[$i]}" = --out ] && out="${args[$((i + 1))]}"; done
bash scripts/in-netns.sh npx tsx bench/envoy/profile.ts "$@"
if [ "$mode" = perf ]; then
  npx tsx bench/envoy/profile_report.ts "$out" | tee "$out/report.txt"
fi
