// A loss the nothing-lost tests found in Envoy 1.39.3 that the filters cannot fix.
//
// Where: every HBONE path, in the Envoy that terminates the CONNECT with its HTTP connection
// manager (the tunnel_port server sidecar, the waypoints, the east-west gateway).
// When: the application behind it half-closes (FIN) while the client is still uploading.
// What: the rest of the upload never arrives; the application sees EOF after the first HTTP/2
// DATA frame or two (16 KiB / 128 KiB) or at once, and the client sees no error. Without the
// runtime guard below, the terminating Envoy treats the upstream's end of stream as the end of
// the whole CONNECT stream (HTTP request/response semantics). ~0.3-1% of connections when the
// download is tiny and the upload up to 1 MiB; 2 in 100,000 in the soak. Plain TCP and TLS routes
// (passthrough_mtls) never lose a byte under the same load.
// Not a fix: envoy.reloadable_features.allow_multiplexed_upstream_half_close=true on the
// terminating Envoy keeps the stream open, but then ~5% of connections failed and some uploads
// were delivered into ANOTHER connection's application socket: far worse, so the shipped configs
// keep the default. With the guard AND max_requests_per_connection: 1 on the internal-listener
// cluster (so a half-closed upstream is never reused) nothing was misdelivered, but uploads were
// still truncated (2 of 600 app-first connections, the same rate as without the guard).
// Upstream: envoyproxy/envoy#34461 added that guard; #47378 (open) explains that the same guard
// also forces a reset in the TCP upstream, cancelling the half-close.
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
