// The passthrough_mtls sidecars the benchmark (passthrough_mtls.ts) and the CPU profile
// (profile.ts) compare, all built from the shipped envoy-configs/passthrough_mtls.yaml so the
// "with" arm is exactly what operators get, and the pods of that config.
import { parse } from "yaml";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import type { PodAddress, TlsPodAddress } from "./upstream.js";

/** Pods of the shipped config: 127.0.0.12 is tlsMode disabled, 127.0.0.11 tlsMode istio (httpbin). */
export const PLAIN_POD: PodAddress = { host: "127.0.0.12", httpPort: 8080, bulkPort: 5201 };
export const MTLS_POD: TlsPodAddress = { host: "127.0.0.11", httpPort: 8443, bulkPort: 5201, certName: "pod-a" };
export const MTLS_POD_IDENTITY = "spiffe://cluster.local/ns/default/sa/httpbin";
/** The native arm's per-pod cluster. */
export const NATIVE_POD_CLUSTER = `outbound_pod|${MTLS_POD.host}`;

/** The shipped config with its own admin and outbound ports. */
export function shipped(admin: number, outbound: number): any {
  const config = parse(shippedConfig("passthrough_mtls.yaml"));
  config.admin.address.socket_address.port_value = admin;
  config.static_resources.listeners[0].address.socket_address.port_value = outbound;
  return config;
}

/** The shipped config with its wasm filter replaced by `filter` (null: no wasm filter at all). */
export function withWasmFilter(admin: number, outbound: number, filter: object | null): any {
  const config = shipped(admin, outbound);
  const chain = config.static_resources.listeners[0].filter_chains[0];
  chain.filters = chain.filters.filter((f: any) => f.name !== "envoy.filters.network.wasm");
  if (filter) chain.filters.unshift(filter);
  return config;
}

/** Envoy-native mTLS to one pod by IP: per-pod filter chain → per-pod ORIGINAL_DST mTLS cluster. */
export function nativeMtls(admin: number, outbound: number): any {
  const config = withWasmFilter(admin, outbound, null);
  const listener = config.static_resources.listeners[0];
  const catchAll = listener.filter_chains[0];
  const podChain = {
    name: `pod-${MTLS_POD.host}`,
    filter_chain_match: { prefix_ranges: [{ address_prefix: MTLS_POD.host, prefix_len: 32 }] },
    filters: [{ ...catchAll.filters[0], typed_config: { ...catchAll.filters[0].typed_config, stat_prefix: "pod_chain", cluster: NATIVE_POD_CLUSTER } }],
  };
  listener.filter_chains = [podChain, catchAll];
  const mtls = config.static_resources.clusters.find((cluster: any) => cluster.name === "outbound_mtls_passthrough");
  const tls = structuredClone(mtls.transport_socket);
  tls.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names = [{ san_type: "URI", matcher: { exact: MTLS_POD_IDENTITY } }];
  // Circuit breakers raised: an earlier run saw upstream_cx_overflow on this per-pod cluster
  // (16 concurrent wrk connections, all to one host, on a saturated machine), which dropped
  // connections only in this arm; the comparison is about per-connection work, not limits.
  const unlimited = { max_connections: 1_000_000, max_pending_requests: 1_000_000, max_requests: 1_000_000, max_retries: 1_000_000 };
  config.static_resources.clusters.push({ ...structuredClone(mtls), name: NATIVE_POD_CLUSTER, transport_socket: tls, circuit_breakers: { thresholds: [unlimited] } });
  return config;
}
