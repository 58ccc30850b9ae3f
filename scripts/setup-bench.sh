#!/usr/bin/env bash
# Installs the load generators the real-Envoy benchmark drives (bench/envoy/): wrk (new
# connections per second and time to first byte), h2load (from nghttp2-client) and iperf3 (bulk
# throughput), and valgrind (callgrind: the instruction-count A/B, bench/envoy/callgrind.ts).
# Idempotent: does nothing when all of them are on PATH. Installs only with apt-get as
# root; otherwise it fails loudly, naming what is missing, instead of letting the bench skip.
set -euo pipefail

# command on PATH -> Debian package that provides it
declare -A PACKAGE_OF=([wrk]=wrk [h2load]=nghttp2-client [iperf3]=iperf3 [valgrind]=valgrind [callgrind_control]=valgrind)

missing=()
for tool in wrk h2load iperf3 valgrind callgrind_control; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${PACKAGE_OF[$tool]}")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-bench: missing ${missing[*]}; install them with apt-get as root (this script does that when run as root on Debian/Ubuntu)" >&2
  exit 1
fi

echo "setup-bench: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# iperf3's package asks whether to start a system daemon: answer no, the bench starts its own.
echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  apt-get update >&2
  apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

for tool in wrk h2load iperf3 valgrind callgrind_control; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup-bench: $tool still missing after install" >&2; exit 1; }
done
