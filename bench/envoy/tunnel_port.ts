// tunnel_port, real Envoy, A/B on the client side of an HBONE hop. The application dials the
// admin service's VIP 127.10.0.2:80 (one endpoint, pod p1, target port 9376); both arms tunnel it
// as HTTP/2 CONNECT over mTLS to p1's sidecar (the shipped tunnel_port_server.yaml, its filter
// checking the carried ports), which connects to the app on 127.0.0.21:9376:
// - with:   the shipped tunnel_port_client.yaml (the filter picks the endpoint and its target
//           port, and carries the service port in the tunnel);
// - native: what Envoy can do without wasm for one known endpoint: a filter chain matching the
//           VIP:port → tcp_proxy to a STATIC HBONE cluster (p1:15008, the pod's SAN verified)
//           with the authority and service-port header written literally in the config, i.e.
//           the per-service config a control plane would have to generate.
// There is no "without" arm: without the filter (or a per-service config) nothing tunnels.
// The app is a fast Envoy (upstream.ts appEnvoyConfig): HTTP answered directly, iperf3 relayed.
import type { ChildProcess } from "node:child_process";
import { BenchEnvoys } from "./bench_envoys.js";
import { parse } from "yaml";
import { socketAddress, tcpProxy } from "../../tests/support/envoy_config.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { atLeast, emitRatios, runAb, type AbTimings, type Arm } from "./ab.js";
import { appEnvoyConfig, startIperfServer } from "./upstream.js";

const FILTER = "tunnel_port";
export const VIP = "127.10.0.2";
const POD = "127.0.0.21";
const TARGET_PORT = 9376;
const POD_IDENTITY = "spiffe://cluster.local/ns/default/sa/my-service";
const APP_ADMIN = 15070;
const IPERF_BACKEND = { host: "127.0.0.1", port: 5203 };
export const CLIENTS = { with: { admin: 15050, outbound: 15051 }, native: { admin: 15060, outbound: 15061 } } as const;
export const NATIVE_CLUSTER = "outbound|80||admin.default.svc.cluster.local";

export function shippedClient(admin: number, outbound: number): any {
  const config = parse(shippedConfig("tunnel_port_client.yaml"));
  config.admin.address.socket_address.port_value = admin;
  const outboundListener = config.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  outboundListener.address.socket_address.port_value = outbound;
  return config;
}

/** Envoy-native HBONE to the one endpoint: per-VIP chain, static cluster, literal authority and header. */
export function nativeClient(admin: number, outbound: number): any {
  const config = shippedClient(admin, outbound);
  const listener = config.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  const catchAll = { name: "virtualOutbound-catchall-tcp", filters: [tcpProxy("virtualOutbound", "PassthroughCluster")] };
  const serviceChain = {
    name: `${VIP}_80`,
    filter_chain_match: { prefix_ranges: [{ address_prefix: VIP, prefix_len: 32 }], destination_port: 80 },
    filters: [
      {
        name: "envoy.filters.network.tcp_proxy",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
          stat_prefix: "admin_80",
          cluster: NATIVE_CLUSTER,
          tunneling_config: { hostname: `${POD}:${TARGET_PORT}`, headers_to_add: [{ header: { key: "x-tunnel-service-port", value: "80" } }] },
        },
      },
    ],
  };
  listener.filter_chains = [serviceChain, catchAll];
  const hbone = config.static_resources.clusters.find((c: any) => c.name === "tunnel_port_hbone");
  const tls = structuredClone(hbone.transport_socket);
  tls.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names = [{ san_type: "URI", matcher: { exact: POD_IDENTITY } }];
  const cluster = {
    name: NATIVE_CLUSTER,
    type: "STATIC",
    connect_timeout: "2s",
    typed_extension_protocol_options: hbone.typed_extension_protocol_options,
    transport_socket: tls,
    load_assignment: { cluster_name: NATIVE_CLUSTER, endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(POD, 15008) } }] }] },
  };
  // Only what the native chains use: no wasm anywhere in this sidecar.
  config.static_resources.listeners = [listener];
  config.static_resources.clusters = [config.static_resources.clusters.find((c: any) => c.name === "PassthroughCluster"), cluster];
  delete config.bootstrap_extensions;
  return config;
}

/**
 * The server side both arms tunnel to: the app (HTTP answered, iperf3 relayed to its own server)
 * and p1's sidecar running the shipped tunnel_port_server.yaml. Returns the iperf3 server.
 */
export async function startTunnelPortServerSide(envoys: BenchEnvoys): Promise<ChildProcess> {
  const iperf = startIperfServer(IPERF_BACKEND.host, IPERF_BACKEND.port);
  try {
    await envoys.start("tp-app", appEnvoyConfig(APP_ADMIN, POD, TARGET_PORT, IPERF_BACKEND), APP_ADMIN);
    await envoys.start("tp-server", shippedConfig("tunnel_port_server.yaml"), 15000, POD);
  } catch (error) {
    await envoys.stopAll();
    if (iperf.exitCode === null) iperf.kill("SIGTERM");
    throw error;
  }
  return iperf;
}

export async function tunnelPortAb(timings: AbTimings, log: (message: string) => void): Promise<void> {
  const envoys = new BenchEnvoys();
  const iperf = await startTunnelPortServerSide(envoys);
  try {
    const withFilter = await envoys.start("tp-with", shippedClient(CLIENTS.with.admin, CLIENTS.with.outbound), CLIENTS.with.admin);
    const native = await envoys.start("tp-native", nativeClient(CLIENTS.native.admin, CLIENTS.native.outbound), CLIENTS.native.admin);
    const url = `http://${VIP}:80/`;
    const bulk = { host: VIP, port: 80 };
    const arms: Arm[] = [
      {
        variant: "with", path: "hbone", sidecar: withFilter, capturePort: CLIENTS.with.outbound, url, bulk,
        verify: (delta, n) => atLeast(delta, `wasmcustom.${FILTER}.client.tunneled`, n) ?? atLeast(delta, "cluster.tunnel_port_hbone.upstream_rq_total", n),
      },
      {
        variant: "native", path: "hbone", sidecar: native, capturePort: CLIENTS.native.outbound, url, bulk,
        verify: (delta, n) => atLeast(delta, `cluster.${NATIVE_CLUSTER}.upstream_rq_total`, n),
      },
    ];
    const result = await runAb(FILTER, arms, timings, log);
    emitRatios(FILTER, arms, result, 0, 1);
  } finally {
    await envoys.stopAll();
    if (iperf.exitCode === null) iperf.kill("SIGTERM");
  }
}
