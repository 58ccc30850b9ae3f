// The topologies the instruction-count benchmark (callgrind.ts) measures, built from the A/B
// benchmark's own configs and upstreams (passthrough_mtls.ts, tunnel_port.ts, waypoint_route.ts,
// passthrough_configs.ts, profile_fixtures.ts): which sidecars run under callgrind, which paths
// each serves, how a batch proves it took its route, and which ratios are reported.
import { join } from "node:path";
import { wasmNetworkFilter } from "../../tests/support/envoy_config.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { BenchEnvoys } from "./bench_envoys.js";
import { MTLS_POD, nativeMtls, PLAIN_POD, shipped, withWasmFilter } from "./passthrough_configs.js";
import { NOOP_FILTER, POD_ENVOY_ADMIN, SIDECARS } from "./passthrough_mtls.js";
import { buildFixtures, type Fixture, type JobFixture } from "./profile_fixtures.js";
import * as tunnel from "./tunnel_port.js";
import { startUpstream } from "./upstream.js";
import * as waypoint from "./waypoint_route.js";

export type Delta = (name: string) => number;

/** One path a sidecar serves: what the client dials and how a batch proves it took the route. */
export interface PathSpec {
  filter: string;
  variant: "without" | "with" | "native";
  control?: boolean;
  path: string;
  host: string;
  port: number;
  verify(delta: Delta, connections: number): string | undefined;
}

export interface SidecarSpec {
  name: string;
  config: () => object;
  admin: number;
  outbound: number;
  paths: PathSpec[];
}

/** A ratio to report: `arm` ÷ `baseline`, both identified by filter/variant/path (control flag). */
export interface RatioSpec {
  arm: Key;
  baseline: Key;
  /** Upper bound of the target, when the issue sets one. */
  target?: number;
  why: string;
}

export interface Key {
  filter: string;
  variant: string;
  path: string;
  control?: boolean;
}

export interface Topology {
  name: string;
  /** Starts the natively running Envoys (and iperf3 servers) past the sidecar; returns a stop. */
  start(): Promise<() => Promise<void>>;
  sidecars: SidecarSpec[];
  ratios: RatioSpec[];
}

function exactly(delta: Delta, name: string, connections: number): string | undefined {
  const seen = delta(name);
  return seen === connections ? undefined : `${name} grew by ${seen}, expected ${connections}`;
}

const PT = "passthrough_mtls";
const plainTarget = { host: PLAIN_POD.host, port: PLAIN_POD.httpPort };
const mtlsTarget = { host: MTLS_POD.host, port: MTLS_POD.httpPort };
const passthroughCluster = (d: Delta, n: number) => exactly(d, "cluster.PassthroughCluster.upstream_cx_total", n);

/**
 * Envoy's own floor for a wasm filter on the plain path, from the hand-written modules of
 * profile_fixtures.ts (no AssemblyScript): "bare" exports no callback (Envoy still builds a wasm
 * Context per connection), "newconn" only an empty proxy_on_new_connection (the one VM entry a
 * filter needs to act), "newconn_min" that entry reading destination.address and bumping one
 * counter: the least any filter that looks at the destination can do.
 */
const FLOOR_FIXTURES = ["bare", "newconn", "newconn_min", "newconn_fs", "newconn_prop"] as const satisfies readonly Fixture[];
const FLOOR_WHY: Record<(typeof FLOOR_FIXTURES)[number], string> = {
  bare: "a wasm filter Envoy never enters (no callback exported) vs no filter: Envoy's per-connection wasm Context alone",
  newconn: "one empty VM entry per connection (only proxy_on_new_connection exported) vs no filter",
  newconn_min: "one VM entry reading destination.address and bumping one counter vs no filter: the floor of a filter that decides on the destination",
  newconn_fs: "newconn_min + one set_envoy_filter_state (envoy.tcp_proxy.cluster) vs no filter: what one Envoy filter-state object adds",
  newconn_prop: "newconn_min + one set_property (a wasm.* property) vs no filter: what one property adds",
};

/**
 * The floor of an HBONE job: the hand-written module that reads the destination, bumps one
 * counter and writes exactly the values that job needs (profile_fixtures.ts JOB_WRITES), in
 * place of the filter in the shipped config's catch-all chain (every other part of the config,
 * the set_filter_state relay included, as shipped).
 */
function withJobFixture(config: any, fixture: JobFixture): any {
  const outbound = config.static_resources.listeners.find((l: any) => l.name === "virtualOutbound");
  const chain = outbound.filter_chains.find((c: any) => c.name === "virtualOutbound-catchall-tcp");
  const at = chain.filters.findIndex((f: any) => f.name === "envoy.filters.network.wasm" || f.name === "waypoint_route");
  if (at < 0) throw new Error(`no wasm filter in the catch-all chain to replace with ${fixture}`);
  chain.filters[at] = wasmNetworkFilter({ name: `profile_${fixture}`, wasm: fixturePath(fixture), configuration: "" });
  return config;
}
let fixtures: Record<Fixture, string> | undefined;
/** BENCH_FIXTURE_DIR: another directory, for a run beside a full `npm run bench` (which writes build/profile). */
const fixturePath = (fixture: Fixture): string => (fixtures ??= buildFixtures(process.env.BENCH_FIXTURE_DIR ?? join(REPO_ROOT, "build/profile")))[fixture];

function passthroughTopology(): Topology {
  const sidecar = (name: string, ports: { admin: number; outbound: number }, config: () => object, paths: PathSpec[]): SidecarSpec => ({ name, config, admin: ports.admin, outbound: ports.outbound, paths });
  return {
    name: PT,
    start: async () => {
      const upstream = await startUpstream(POD_ENVOY_ADMIN, PLAIN_POD, MTLS_POD);
      return () => upstream.stop();
    },
    sidecars: [
      sidecar("pt-without", SIDECARS.without, () => withWasmFilter(SIDECARS.without.admin, SIDECARS.without.outbound, null), [
        { filter: PT, variant: "without", path: "plain", ...plainTarget, verify: passthroughCluster },
      ]),
      sidecar("pt-control", SIDECARS.control, () => withWasmFilter(SIDECARS.control.admin, SIDECARS.control.outbound, null), [
        { filter: "control", control: true, variant: "without", path: "plain", ...plainTarget, verify: passthroughCluster },
      ]),
      sidecar("pt-with", SIDECARS.with, () => shipped(SIDECARS.with.admin, SIDECARS.with.outbound), [
        { filter: PT, variant: "with", path: "plain", ...plainTarget, verify: (d, n) => exactly(d, `wasmcustom.${PT}.plaintext_pod`, n) ?? passthroughCluster(d, n) },
        { filter: PT, variant: "with", path: "mtls", ...mtlsTarget, verify: (d, n) => exactly(d, `wasmcustom.${PT}.mtls`, n) ?? exactly(d, "cluster.outbound_mtls_passthrough.upstream_cx_total", n) },
      ]),
      sidecar("pt-native", SIDECARS.native, () => nativeMtls(SIDECARS.native.admin, SIDECARS.native.outbound), [
        {
          filter: PT, variant: "native", path: "mtls", ...mtlsTarget,
          verify: (d, n) => exactly(d, "tcp.pod_chain.downstream_cx_total", n) ?? exactly(d, `cluster.outbound_pod|${MTLS_POD.host}.upstream_cx_total`, n),
        },
      ]),
      sidecar("pt-noop", SIDECARS.noop, () => withWasmFilter(SIDECARS.noop.admin, SIDECARS.noop.outbound, NOOP_FILTER), [
        { filter: "noop", variant: "with", path: "plain", ...plainTarget, verify: passthroughCluster },
      ]),
      // The floor: hand-written modules (profile_fixtures.ts) where passthrough_mtls sits.
      ...FLOOR_FIXTURES.map((fixture, index) =>
        sidecar(`pt-${fixture}`, { admin: 15120 + 2 * index, outbound: 15121 + 2 * index }, () => withWasmFilter(15120 + 2 * index, 15121 + 2 * index, wasmNetworkFilter({ name: `profile_${fixture}`, wasm: fixturePath(fixture), configuration: "" })), [
          { filter: `fixture_${fixture}`, variant: "with", path: "plain", ...plainTarget, verify: passthroughCluster },
        ]),
      ),
    ],
    ratios: [
      { arm: { filter: PT, variant: "with", path: "plain" }, baseline: { filter: PT, variant: "without", path: "plain" }, target: 1.05, why: "the filter's decision on the plain path vs no filter" },
      { arm: { filter: PT, variant: "with", path: "mtls" }, baseline: { filter: PT, variant: "native", path: "mtls" }, target: 1.1, why: "the filter's mTLS job vs Envoy's native per-pod config" },
      { arm: { filter: "noop", variant: "with", path: "plain" }, baseline: { filter: PT, variant: "without", path: "plain" }, why: "the empty AssemblyScript filter (the runtime with all 7 per-connection callbacks) vs no filter" },
      ...FLOOR_FIXTURES.map((fixture) => ({ arm: { filter: `fixture_${fixture}`, variant: "with", path: "plain" }, baseline: { filter: PT, variant: "without", path: "plain" }, why: FLOOR_WHY[fixture] })),
      { arm: { filter: "control", variant: "without", path: "plain", control: true }, baseline: { filter: PT, variant: "without", path: "plain" }, why: "A/A control: the same config in a second process" },
    ],
  };
}

function tunnelPortTopology(): Topology {
  const target = { host: tunnel.VIP, port: 80 };
  const c = tunnel.CLIENTS;
  return {
    name: "tunnel_port",
    start: async () => {
      const envoys = new BenchEnvoys();
      const iperf = await tunnel.startTunnelPortServerSide(envoys);
      return async () => {
        await envoys.stopAll();
        if (iperf.exitCode === null) iperf.kill("SIGTERM");
      };
    },
    sidecars: [
      {
        name: "tp-with", admin: c.with.admin, outbound: c.with.outbound, config: () => tunnel.shippedClient(c.with.admin, c.with.outbound),
        paths: [{ filter: "tunnel_port", variant: "with", path: "hbone", ...target, verify: (d, n) => exactly(d, "wasmcustom.tunnel_port.client.tunneled", n) ?? exactly(d, "cluster.tunnel_port_hbone.upstream_rq_total", n) }],
      },
      {
        name: "tp-native", admin: c.native.admin, outbound: c.native.outbound, config: () => tunnel.nativeClient(c.native.admin, c.native.outbound),
        paths: [{ filter: "tunnel_port", variant: "native", path: "hbone", ...target, verify: (d, n) => exactly(d, `cluster.${tunnel.NATIVE_CLUSTER}.upstream_rq_total`, n) }],
      },
      {
        name: "tp-job", admin: 15054, outbound: 15055, config: () => withJobFixture(tunnel.shippedClient(15054, 15055), "job_tunnel_port"),
        paths: [{ filter: "fixture_job_tunnel_port", variant: "with", path: "hbone", ...target, verify: (d, n) => exactly(d, "cluster.tunnel_port_hbone.upstream_rq_total", n) }],
      },
    ],
    ratios: [
      { arm: { filter: "tunnel_port", variant: "with", path: "hbone" }, baseline: { filter: "tunnel_port", variant: "native", path: "hbone" }, target: 1.1, why: "HBONE with the carried ports vs a per-service native chain" },
      { arm: { filter: "fixture_job_tunnel_port", variant: "with", path: "hbone" }, baseline: { filter: "tunnel_port", variant: "native", path: "hbone" }, why: "the floor of this job: a hand-written module writing only the 4 values it needs (profile_fixtures.ts) vs native" },
      { arm: { filter: "tunnel_port", variant: "with", path: "hbone" }, baseline: { filter: "fixture_job_tunnel_port", variant: "with", path: "hbone" }, why: "the filter over that floor: what our code adds" },
    ],
  };
}

const JOB_PORTS = { hbone: { admin: 15084, outbound: 15085 }, double: { admin: 15086, outbound: 15087 } } as const;

function waypointTopology(): Topology {
  const target = { host: waypoint.VIP, port: 80 };
  const c = waypoint.CLIENTS;
  const W = "waypoint_route";
  const side = (name: string, ports: { admin: number; outbound: number }, config: () => object, path: PathSpec): SidecarSpec => ({ name, admin: ports.admin, outbound: ports.outbound, config, paths: [path] });
  return {
    name: W,
    start: async () => {
      const envoys = new BenchEnvoys();
      const iperfs = await waypoint.startWaypointSide(envoys);
      return async () => {
        await envoys.stopAll();
        for (const iperf of iperfs) if (iperf.exitCode === null) iperf.kill("SIGTERM");
      };
    },
    sidecars: [
      side("wp-with-hbone", c.withHbone, () => waypoint.withClient(c.withHbone, waypoint.pluginCopy(true)), {
        filter: W, variant: "with", path: "hbone", ...target, verify: (d, n) => exactly(d, `wasmcustom.${W}.hbone_waypoint`, n) ?? exactly(d, "cluster.waypoint_route_hbone.upstream_rq_total", n),
      }),
      side("wp-native-hbone", c.nativeHbone, () => waypoint.nativeClient(c.nativeHbone, false), {
        filter: W, variant: "native", path: "hbone", ...target, verify: (d, n) => exactly(d, "cluster.waypoint|my-svc.upstream_rq_total", n),
      }),
      side("wp-with-double", c.withDouble, () => waypoint.withClient(c.withDouble, waypoint.pluginCopy(false)), {
        filter: W, variant: "with", path: "double_hbone", ...target, verify: (d, n) => exactly(d, `wasmcustom.${W}.double_hbone_waypoint`, n) ?? exactly(d, "cluster.waypoint_route_double_hbone.upstream_rq_total", n),
      }),
      side("wp-native-double", c.nativeDouble, () => waypoint.nativeClient(c.nativeDouble, true), {
        filter: W, variant: "native", path: "double_hbone", ...target, verify: (d, n) => exactly(d, "cluster.inner|my-svc.upstream_rq_total", n),
      }),
      side("wp-job-hbone", JOB_PORTS.hbone, () => withJobFixture(waypoint.withClient(JOB_PORTS.hbone, waypoint.pluginCopy(true)), "job_waypoint_hbone"), {
        filter: "fixture_job_waypoint_hbone", variant: "with", path: "hbone", ...target, verify: (d, n) => exactly(d, "cluster.waypoint_route_hbone.upstream_rq_total", n),
      }),
      side("wp-job-double", JOB_PORTS.double, () => withJobFixture(waypoint.withClient(JOB_PORTS.double, waypoint.pluginCopy(false)), "job_waypoint_double"), {
        filter: "fixture_job_waypoint_double", variant: "with", path: "double_hbone", ...target, verify: (d, n) => exactly(d, "cluster.waypoint_route_double_hbone.upstream_rq_total", n),
      }),
    ],
    ratios: [
      { arm: { filter: W, variant: "with", path: "hbone" }, baseline: { filter: W, variant: "native", path: "hbone" }, target: 1.1, why: "HBONE to the local waypoint vs a static per-service chain" },
      { arm: { filter: W, variant: "with", path: "double_hbone" }, baseline: { filter: W, variant: "native", path: "double_hbone" }, target: 1.1, why: "double HBONE through the gateway vs Istio's internal-listener shape" },
      { arm: { filter: "fixture_job_waypoint_hbone", variant: "with", path: "hbone" }, baseline: { filter: W, variant: "native", path: "hbone" }, why: "the floor of this job: a hand-written module writing only the 4 values it needs vs native" },
      { arm: { filter: W, variant: "with", path: "hbone" }, baseline: { filter: "fixture_job_waypoint_hbone", variant: "with", path: "hbone" }, why: "the filter over that floor: what our code adds" },
      { arm: { filter: "fixture_job_waypoint_double", variant: "with", path: "double_hbone" }, baseline: { filter: W, variant: "native", path: "double_hbone" }, why: "the floor of this job: a hand-written module writing only the 6 values it needs vs native" },
      { arm: { filter: W, variant: "with", path: "double_hbone" }, baseline: { filter: "fixture_job_waypoint_double", variant: "with", path: "double_hbone" }, why: "the filter over that floor: what our code adds" },
    ],
  };
}

export const TOPOLOGIES = { passthrough_mtls: passthroughTopology, tunnel_port: tunnelPortTopology, waypoint_route: waypointTopology } as const;
