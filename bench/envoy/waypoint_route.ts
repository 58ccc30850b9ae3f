// waypoint_route, real Envoy, A/B on the client sidecar. The application dials my-svc's VIP
// 127.10.1.1:80, whose waypoint has an instance on this network (127.0.0.41) and one on net2
// (127.0.0.61) behind net2's east-west gateway (127.0.0.51); each waypoint forwards to its
// backend (a fast app Envoy, upstream.ts). Waypoints and gateway run the shipped configs. Paths:
// - "hbone": the local waypoint is healthy → single HBONE to 127.0.0.41:15008, :authority VIP:80;
// - "double_hbone": the local one is marked unhealthy → outer CONNECT to the gateway, inner
//   CONNECT (mTLS end to end) to the remote waypoint, both with :authority <hostname>:80.
// Arms per path:
// - with:   the shipped waypoint_route_client.yaml, plugin by ECDS from a private copy of
//           envoy-configs/waypoint_route_plugin (the double_hbone copy marks waypoint-0 unhealthy);
// - native: the same routing written as static Envoy config for this one service and this one
//           health state (a per-VIP chain, a STATIC HBONE cluster with the waypoint's SAN, and
//           for double HBONE Istio's shape: an internal listener originating the outer CONNECT),
//           i.e. what a control plane would have to generate and re-push on every health change.
// There is no "without" arm: without the filter (or such config) nothing reaches a waypoint.
import type { ChildProcess } from "node:child_process";
import { BenchEnvoys } from "./bench_envoys.js";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { socketAddress } from "../../tests/support/envoy_config.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { atLeast, emitRatios, runAb, type AbTimings, type Arm } from "./ab.js";
import { appEnvoyConfig, startIperfServer } from "./upstream.js";

const FILTER = "waypoint_route";
export const VIP = "127.10.1.1";
const HOSTNAME_AUTHORITY = "my-svc.default.svc.cluster.local:80";
const WAYPOINT_IDENTITY = "spiffe://cluster.local/ns/default/sa/waypoint";
const GATEWAY_IDENTITY = "spiffe://cluster.local/ns/istio-system/sa/eastwest";
const LOCAL_WAYPOINT = "127.0.0.41";
const GATEWAY = "127.0.0.51";
const PLUGIN_DIR = "envoy-configs/waypoint_route_plugin";
const PLUGIN_FILE = "waypoint_route.yaml";
export const CLIENTS = {
  withHbone: { admin: 15080, outbound: 15081 },
  withDouble: { admin: 15082, outbound: 15083 },
  nativeHbone: { admin: 15090, outbound: 15091 },
  nativeDouble: { admin: 15092, outbound: 15093 },
} as const;
const BACKENDS = [
  { admin: 15071, host: "127.0.0.42", iperf: 5204 },
  { admin: 15072, host: "127.0.0.62", iperf: 5205 },
];

/** A private copy of the ECDS plugin file, optionally with the local waypoint marked unhealthy. */
export function pluginCopy(localWaypointHealthy: boolean): string {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "bench-waypoint-plugin-"));
  const text = readFileSync(join(REPO_ROOT, PLUGIN_DIR, PLUGIN_FILE), "utf8");
  const marker = "value: |";
  const head = text.slice(0, text.indexOf(marker) + marker.length);
  const mesh = JSON.parse(text.slice(text.indexOf(marker) + marker.length));
  for (const workload of mesh.workloads) if (workload.uid === "default/waypoint-0") workload.healthy = localWaypointHealthy;
  const body = JSON.stringify(mesh, null, 2).split("\n").map((line) => `            ${line}`).join("\n");
  writeFileSync(join(dir, PLUGIN_FILE), `${head}\n${body}\n`);
  return dir;
}

export function withClient(ports: { admin: number; outbound: number }, pluginDir: string): any {
  const config = parse(shippedConfig("waypoint_route_client.yaml").replaceAll(PLUGIN_DIR, pluginDir));
  config.admin.address.socket_address.port_value = ports.admin;
  config.static_resources.listeners.find((l: any) => l.name === "virtualOutbound").address.socket_address.port_value = ports.outbound;
  return config;
}

/** An HBONE cluster: HTTP/2 over Istio-style mTLS verifying `identity`, to `endpoint`. */
function hboneCluster(shipped: any, name: string, endpoint: object, identity: string, internal: boolean): object {
  const template = shipped.static_resources.clusters.find((c: any) => c.name === "waypoint_route_hbone");
  const tls = structuredClone(template.transport_socket);
  tls.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names = [{ san_type: "URI", matcher: { exact: identity } }];
  const transport = internal
    ? {
        name: "envoy.transport_sockets.internal_upstream",
        typed_config: { "@type": "type.googleapis.com/envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport", transport_socket: tls },
      }
    : tls;
  return {
    name,
    type: "STATIC",
    connect_timeout: "2s",
    typed_extension_protocol_options: template.typed_extension_protocol_options,
    transport_socket: transport,
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: endpoint } }] }] },
  };
}

/** The shipped client's tcp_proxy (same access log), sent to `cluster` with a literal authority. */
function tunnelProxy(shipped: any, statPrefix: string, cluster: string, authority: string): object {
  const outbound = shipped.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  const proxy = structuredClone(outbound.filter_chains[0].filters.find((f: any) => f.name === "envoy.filters.network.tcp_proxy"));
  proxy.typed_config.stat_prefix = statPrefix;
  proxy.typed_config.cluster = cluster;
  proxy.typed_config.tunneling_config = { hostname: authority };
  return proxy;
}

export function nativeClient(ports: { admin: number; outbound: number }, double: boolean): any {
  const shipped = withClient(ports, PLUGIN_DIR);
  const outbound = shipped.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  const passthrough = shipped.static_resources.clusters.find((c: any) => c.name === "PassthroughCluster");
  const catchAll = { name: "virtualOutbound-catchall-tcp", filters: [{ ...tunnelProxy(shipped, "virtualOutbound", "PassthroughCluster", "-"), typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", stat_prefix: "virtualOutbound", cluster: "PassthroughCluster" } }] };
  const match = { prefix_ranges: [{ address_prefix: VIP, prefix_len: 32 }], destination_port: 80 };
  if (!double) {
    outbound.filter_chains = [{ name: "my-svc_80", filter_chain_match: match, filters: [tunnelProxy(shipped, "my_svc", "waypoint|my-svc", `${VIP}:80`)] }, catchAll];
    shipped.static_resources.listeners = [outbound];
    shipped.static_resources.clusters = [passthrough, hboneCluster(shipped, "waypoint|my-svc", socketAddress(LOCAL_WAYPOINT, 15008), WAYPOINT_IDENTITY, false)];
    delete shipped.bootstrap_extensions;
    return shipped;
  }
  // Istio's double HBONE: the inner CONNECT (mTLS to the remote waypoint) is written into an
  // internal listener that originates the outer CONNECT (mTLS to the gateway).
  outbound.filter_chains = [{ name: "my-svc_80", filter_chain_match: match, filters: [tunnelProxy(shipped, "my_svc_inner", "inner|my-svc", HOSTNAME_AUTHORITY)] }, catchAll];
  const outer = {
    name: "outer_originate",
    internal_listener: {},
    filter_chains: [{ filters: [tunnelProxy(shipped, "my_svc_outer", "outer|eastwest", HOSTNAME_AUTHORITY)] }],
  };
  shipped.static_resources.listeners = [outbound, outer];
  shipped.static_resources.clusters = [
    passthrough,
    hboneCluster(shipped, "inner|my-svc", { envoy_internal_address: { server_listener_name: "outer_originate" } }, WAYPOINT_IDENTITY, true),
    hboneCluster(shipped, "outer|eastwest", socketAddress(GATEWAY, 15008), GATEWAY_IDENTITY, false),
  ];
  return shipped;
}

/**
 * Everything past the client sidecar, from the shipped configs: both waypoints (local, and the
 * remote one on net2), net2's east-west gateway and each waypoint's backend app. Returns the
 * backends' iperf3 servers.
 */
export async function startWaypointSide(envoys: BenchEnvoys): Promise<ChildProcess[]> {
  const iperfs = BACKENDS.map((b) => startIperfServer("127.0.0.1", b.iperf));
  try {
    for (const [index, b] of BACKENDS.entries()) await envoys.start(`wp-app${index}`, appEnvoyConfig(b.admin, b.host, 9080, { host: "127.0.0.1", port: b.iperf }), b.admin);
    await envoys.start("wp-local", shippedConfig("waypoint_route_waypoint.yaml"), 15000, LOCAL_WAYPOINT);
    const remote = shippedConfig("waypoint_route_waypoint.yaml").replaceAll("address: 127.0.0.41,", "address: 127.0.0.61,").replaceAll("address: 127.0.0.42,", "address: 127.0.0.62,");
    await envoys.start("wp-remote", remote, 15000, "127.0.0.61");
    await envoys.start("wp-gateway", shippedConfig("waypoint_route_eastwest.yaml"), 15000, GATEWAY);
  } catch (error) {
    await envoys.stopAll();
    for (const iperf of iperfs) if (iperf.exitCode === null) iperf.kill("SIGTERM");
    throw error;
  }
  return iperfs;
}

export async function waypointRouteAb(timings: AbTimings, log: (message: string) => void): Promise<void> {
  const envoys = new BenchEnvoys();
  const iperfs = await startWaypointSide(envoys);
  try {
    const withHbone = await envoys.start("wp-with-hbone", withClient(CLIENTS.withHbone, pluginCopy(true)), CLIENTS.withHbone.admin);
    const withDouble = await envoys.start("wp-with-double", withClient(CLIENTS.withDouble, pluginCopy(false)), CLIENTS.withDouble.admin);
    const nativeHbone = await envoys.start("wp-native-hbone", nativeClient(CLIENTS.nativeHbone, false), CLIENTS.nativeHbone.admin);
    const nativeDouble = await envoys.start("wp-native-double", nativeClient(CLIENTS.nativeDouble, true), CLIENTS.nativeDouble.admin);

    const url = `http://${VIP}:80/`;
    const bulk = { host: VIP, port: 80 };
    const arm = (variant: "with" | "native", path: string, sidecar: EnvoyProcess, capturePort: number, verify: Arm["verify"]): Arm => ({ variant, path, sidecar, capturePort, url, bulk, verify });
    const arms: Arm[] = [
      arm("with", "hbone", withHbone, CLIENTS.withHbone.outbound, (d, n) => atLeast(d, `wasmcustom.${FILTER}.hbone_waypoint`, n) ?? atLeast(d, "cluster.waypoint_route_hbone.upstream_rq_total", n)),
      arm("native", "hbone", nativeHbone, CLIENTS.nativeHbone.outbound, (d, n) => atLeast(d, "cluster.waypoint|my-svc.upstream_rq_total", n)),
      arm("with", "double_hbone", withDouble, CLIENTS.withDouble.outbound, (d, n) => atLeast(d, `wasmcustom.${FILTER}.double_hbone_waypoint`, n) ?? atLeast(d, "cluster.waypoint_route_double_hbone.upstream_rq_total", n)),
      arm("native", "double_hbone", nativeDouble, CLIENTS.nativeDouble.outbound, (d, n) => atLeast(d, "cluster.inner|my-svc.upstream_rq_total", n)),
    ];
    // (The native double arm's only way to the backend is through the gateway: the inner cluster's
    // one endpoint is the internal listener that originates the outer CONNECT. Its outer streams
    // are not counted per connection: one per pooled inner HTTP/2 connection.)
    const result = await runAb(FILTER, arms, timings, log);
    emitRatios(FILTER, arms, result, 0, 1);
    emitRatios(FILTER, arms, result, 2, 3);
  } finally {
    await envoys.stopAll();
    for (const iperf of iperfs) if (iperf.exitCode === null) iperf.kill("SIGTERM");
  }
}
