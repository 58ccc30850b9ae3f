// A loss the nothing-lost tests found in Envoy 1.39.3, still present in the pinned 1.40.0, that the
// filters cannot fix.
//
// Where: every HBONE path, in the Envoy that terminates the CONNECT with its HTTP connection
// manager (the tunnel_port server sidecar, the waypoints, the east-west gateway).
// When: the application behind it half-closes (FIN) while the client is still uploading.
// What: the terminating Envoy treats the upstream's end of stream as the end of the whole CONNECT
// stream (HTTP request/response semantics), so the rest of the upload never arrives.
// Measured on 1.39.3: the application saw EOF after the first HTTP/2 DATA frame or two (16 KiB /
// 128 KiB) or at once, and the client saw no error; ~0.3-1% of connections when the download is
// tiny and the upload up to 1 MiB (5.7% over double HBONE); 2 in 100,000 in the soak.
// Re-measured on 1.40.0 (2026-12-01, tunnel_port client -> server sidecar, 20 at a time, downloads
// of at most 64 bytes): uploads up to 1 MiB: 6 of 3,000 connections truncated (0.2%), nothing
// else wrong (1.40's larger default HTTP/2 windows let most 1 MiB uploads land before the FIN);
// uploads up to 40 MiB: of 120 connections 16 truncated and 94 more ended by the client sidecar
// while the client was still writing (EPIPE on the client, download complete). The double-HBONE
// path had 0 of 300 truncated in the nothing-lost test on 1.40 (5.7% on 1.39.3). Plain TCP and TLS
// routes (passthrough_mtls) never lose a byte under the same load.
// Not a fix: envoy.reloadable_features.allow_multiplexed_upstream_half_close=true on the
// terminating Envoy keeps the stream open, but then (1.39.3) ~5% of connections failed and some
// uploads were delivered into ANOTHER connection's application socket: far worse, so the shipped
// configs keep the default. With the guard AND max_requests_per_connection: 1 on the
// internal-listener cluster (so a half-closed upstream is never reused) nothing was misdelivered,
// but uploads were still truncated (2 of 600 app-first connections, the same rate as without).
// Upstream: envoyproxy/envoy#34461 added that guard; #47378 (open, not in 1.40) explains that the
// same guard also forces a reset in the TCP upstream, cancelling the half-close.
//
// So the nothing-lost tests are strict for the request/response order (the application's FIN
// after the client's; both directions stream at once) and, where the application half-closes
// first, strict on everything except this one signature: a clean prefix of the upload arrived,
// no wrong byte, no reset, the download complete. Anything else still fails them.
import assert from "node:assert/strict";
import { describeFailures, type LoadResult } from "./checksum_load.js";

/** Asserts that every failure in `result` is the known truncation, and returns their number. */
export function assertOnlyKnownHboneLoss(result: LoadResult): number {
  const other = result.failures.filter((failure) => !failure.uploadTruncatedOnly);
  assert.equal(other.length, 0, describeFailures({ ...result, failures: other }));
  return result.failures.length;
}
