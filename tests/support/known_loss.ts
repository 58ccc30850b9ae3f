// A loss the nothing-lost tests found in Envoy 1.39.3 and that the filters cannot fix, kept
// visible rather than hidden: the tests that hit it run in full and print their failures, marked
// TODO so `npm test` stays green until Envoy (or the configs) change. Remove the marker to make
// them strict again.
//
// Where: every HBONE path; most likely the Envoy that terminates the CONNECT with its HTTP connection
// manager (the tunnel_port server sidecar, the waypoints, the east-west gateway): the runtime flag
// below, set on that Envoy alone, changes the outcome.
// When: the application behind it half-closes (FIN) while the client is still sending.
// What: the rest of the client's upload never arrives; the application sees EOF after the first
// HTTP/2 DATA frame or two (16 KiB / 128 KiB), and the client sees no error at all.
// Rate: ~0.3% of connections when the download is tiny and the upload up to 1 MiB
// (the reproducer tests), rarer with independent sizes. Plain TCP and TLS routes
// (passthrough_mtls) never lose a byte under the same load.
// Not a fix: envoy.reloadable_features.allow_multiplexed_upstream_half_close=true on the
// terminating Envoy keeps the stream open, but then ~5% of connections fail and some uploads are
// delivered into ANOTHER connection's application socket (a pooled upstream reused after the
// application half-closed): far worse, so the shipped configs keep the default.
export const KNOWN_HBONE_HALF_CLOSE_LOSS = {
  todo: "Envoy 1.39.3 drops the rest of an upload through a terminated HBONE CONNECT once the application half-closes first (tests/support/known_loss.ts)",
};
