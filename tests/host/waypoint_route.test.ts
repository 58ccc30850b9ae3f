// waypoint_route, compiled, in the proxy-wasm test host: what each connection gets (status, Envoy
// filter-state writes in order, wasm properties, counters, log lines) for every rule of problem 3
// (docs/problems.md): a waypoint on this network (single HBONE) or on another one (double HBONE
// through that network's east-west gateway), endpoints without a waypoint, pod IPs, every error,
// IPv6, locality ranking, health changes through configuration updates, bad configurations, logs.
// Expected values come from the rules, not from the implementation.
// Run: node --import tsx --test tests/host/waypoint_route.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Connection, ProxyWasmHost, type ConnectOptions, type HostOptions } from "../../host/index.js";
import {
  CLUSTER,
  DISABLE_TUNNELING,
  ORIGINAL_DST,
  SAN,
  allWrites,
  assertClosedByFilter,
  assertConfigRefused,
  assertContinues,
  connectOnce,
  counterAssertion,
  errorLines,
  linesOf,
  startFilter,
  withRefusal,
} from "./helpers.js";

// ---------------------------------------------------------------- mesh building blocks

const id = (sa: string, ns = "default") => `spiffe://cluster.local/ns/${ns}/sa/${sa}`;
const host = (name: string, ns = "default") => `${name}.${ns}.svc.cluster.local`;

type Json = Record<string, unknown>;

/** A sidecar'd pod (tlsMode istio) with identity id(uid) unless `extra` says otherwise. */
function pod(uid: string, addresses: string[], network: string, locality: string, extra: Json = {}): Json {
  return { uid, addresses, network, locality, tlsMode: "istio", identity: id(uid), ...extra };
}

/** A remote "proxy" workload: no address, only its network and its gateway. */
function proxy(uid: string, network: string, locality: string, networkGateway: Json, extra: Json = {}): Json {
  return { uid, addresses: [], network, locality, tlsMode: "istio", identity: id(uid), networkGateway, ...extra };
}

/** The source of every connection: this sidecar's workload on net1, region r1, zone z1, subzone s1. */
const SOURCE_IP = "10.1.0.100";
const SOURCE = pod("sleep", [SOURCE_IP], "net1", "r1/z1/s1");

/** A configuration: the source workload first, then `workloads`, plus own fields. */
function config(workloads: Json[], services: Json[], own: Json = {}): Json {
  return { localWorkload: SOURCE_IP, workloads: [SOURCE, ...workloads], services, ...own };
}

/** Copies `config` with the named workloads' health set to `healthy`. */
function withHealth(base: Json, healthy: Record<string, boolean>): Json {
  const workloads = (base.workloads as Json[]).map((w) => (String(w.uid) in healthy ? { ...w, healthy: healthy[String(w.uid)] } : w));
  return { ...base, workloads };
}

// The main world. net1 is the source's network; net2 and net3 are remote.
//   wp-local  10.1.0.41 net1 r1/z2      instance of the waypoint service (worse locality than wp-net2)
//   wp-net3   (proxy)   net3 r2/z1      gateway by ADDRESS 172.16.3.1, hboneMtlsPort 15009
//   wp-net2   (proxy)   net2 r1/z1/s1   gateway by HOSTNAME eastwest-net2 (HBONE 15008 -> 15443)
//   ew2       172.16.2.1 net2           instance of service eastwest-net2 (SANs set)
//   ew3       172.16.3.1 net3           a gateway workload (its own identity)
//   backend   10.1.1.1  net1 r1/z1      the only endpoint of reviews (healthy: never used instead of the waypoint)
// Service reviews (VIP 10.2.0.10 on net1, port 9080 -> target 8080) has waypoint {hostname: waypoint}.
// The waypoint service lists its instances wp-net3, wp-net2, wp-local: configuration order is
// the WORST order, so every choice below is made by a rule, not by position.
const WP = host("waypoint");
const REVIEWS = host("reviews");
const EW2 = host("eastwest-net2", "istio-system");
const WP_SANS = [id("waypoint"), id("waypoint-canary")];
const EW2_SANS = [id("eastwest-net2", "istio-system")];
const EW3_ID = id("ew3", "istio-system");
// What a hop may present, as ztunnel's workload_and_services_san: the service's SANs or the chosen
// instance's own identity (the waypoint hop, a gateway service instance, a local endpoint).
const LOCAL_WP_SANS = [...WP_SANS, id("wp-local")];
const EW2_OUTER = [...EW2_SANS, id("ew2", "istio-system")];

const GW2 = { hostname: EW2, hboneMtlsPort: 15008 };
const GW3 = { address: "172.16.3.1", hboneMtlsPort: 15009 };

const WORLD = config(
  [
    pod("wp-local", ["10.1.0.41"], "net1", "r1/z2"),
    proxy("wp-net3", "net3", "r2/z1", GW3),
    proxy("wp-net2", "net2", "r1/z1/s1", GW2),
    pod("ew2", ["172.16.2.1"], "net2", "r1/z1", { identity: id("ew2", "istio-system") }),
    pod("ew3", ["172.16.3.1"], "net3", "r2/z1", { identity: EW3_ID }),
    pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
  ],
  [
    {
      hostname: REVIEWS,
      vips: [{ network: "net1", address: "10.2.0.10" }],
      ports: { "9080": 8080 },
      waypoint: { hostname: WP },
      endpoints: [{ workload: "backend" }],
    },
    {
      hostname: WP,
      ports: { "15008": 15008 },
      subjectAltNames: WP_SANS,
      endpoints: [{ workload: "wp-net3" }, { workload: "wp-net2" }, { workload: "wp-local" }],
    },
    { hostname: EW2, ports: { "15008": 15443 }, subjectAltNames: EW2_SANS, endpoints: [{ workload: "ew2" }] },
  ],
);

// ---------------------------------------------------------------- what a connection sees

const HBONE = "waypoint_route_hbone";
const DOUBLE = "waypoint_route_double_hbone";

const OUTCOMES = [
  "hbone_waypoint",
  "double_hbone_waypoint",
  "hbone_endpoint",
  "double_hbone_endpoint",
  "hbone_pod",
  "unknown",
  "plaintext_pod",
  "error_unknown_waypoint",
  "error_no_valid_destination",
  "error_unknown_gateway",
  "error_no_endpoint",
  "plaintext_endpoint",
  "hbone_pod_waypoint",
  "error_unlisted_port",
  "error_unknown_pod_waypoint",
  "error_unknown_gateway_port",
  "error_unknown_waypoint_port",
  "error_no_local_workload",
] as const;
const COUNTERS = [...OUTCOMES, "unknown_refused", "rejected"] as const;
type OutcomeName = (typeof OUTCOMES)[number];

const start = (configuration: unknown, options: HostOptions = {}): Promise<ProxyWasmHost> =>
  startFilter("waypoint_route", configuration, options);

/** Every counter of the filter; the ones not named in `expected` must be 0. */
const assertCounters = counterAssertion("waypoint_route", COUNTERS);

interface Single {
  sans: string[];
  nextHop: string;
  authority: string;
  cluster?: string;
}

/**
 * Single HBONE: the peer's SANs, the next hop and the cluster through Envoy filter state, the
 * CONNECT authority as a property, the cluster last (tcp_proxy reads it once everything is set).
 */
function assertSingle(h: ProxyWasmHost, conn: Connection, want: Single): void {
  assertContinues(h, conn);
  assert.deepEqual(allWrites(conn), [
    ["set_envoy_filter_state", SAN, want.sans.join(",")],
    ["set_envoy_filter_state", ORIGINAL_DST, want.nextHop],
    ["set_property", "wasm.authority", want.authority],
    ["set_envoy_filter_state", CLUSTER, want.cluster ?? HBONE],
  ]);
}

interface Double {
  authority: string;
  inner: string[];
  outer: string[];
  nextHop: string;
  cluster?: string;
}

/**
 * Double HBONE (filters/waypoint_route/README.md "What the filter writes"): this listener's
 * tcp_proxy opens the INNER CONNECT, so the inner identities go to
 * envoy.network.upstream_subject_alt_names and its :authority to property `authority`; the outer
 * CONNECT's values (`outer_authority` = the same <hostname>:P, `outer_address` = gateway
 * IP:HBONE port, `outer_sans` = gateway identities) are properties the shipped config relays to
 * the outer internal listener; the double-HBONE cluster comes last.
 */
function assertDouble(h: ProxyWasmHost, conn: Connection, want: Double): void {
  assertContinues(h, conn);
  assert.deepEqual(allWrites(conn), [
    ["set_envoy_filter_state", SAN, want.inner.join(",")],
    ["set_property", "wasm.authority", want.authority],
    ["set_property", "wasm.outer_authority", want.authority],
    ["set_property", "wasm.outer_address", want.nextHop],
    ["set_property", "wasm.outer_sans", want.outer.join(",")],
    ["set_envoy_filter_state", CLUSTER, want.cluster ?? DOUBLE],
  ]);
}

/** The first hop of a double-HBONE connection (the gateway's IP:HBONE port). */
const OUTER_ADDRESS = "wasm.outer_address";

/** Plain TCP as dialled: tunnelling off, nothing else. */
function assertPlain(h: ProxyWasmHost, conn: Connection): void {
  assertContinues(h, conn);
  assert.deepEqual(allWrites(conn), [["set_envoy_filter_state", DISABLE_TUNNELING, "true"]]);
}

/**
 * Rule 7, plain TCP to a local endpoint without HBONE: the endpoint's podIP:T as the
 * ORIGINAL_DST host, tunnelling off, and the plain cluster (never the catch-all's own cluster).
 */
function assertPlainEndpoint(h: ProxyWasmHost, conn: Connection, nextHop: string, cluster = "waypoint_route_plain"): void {
  assertContinues(h, conn);
  assert.deepEqual(allWrites(conn), [
    ["set_envoy_filter_state", ORIGINAL_DST, nextHop],
    ["set_envoy_filter_state", DISABLE_TUNNELING, "true"],
    ["set_envoy_filter_state", CLUSTER, cluster],
  ]);
}

/** An error: closed by the filter before anything is written, one warn line naming the rule. */
function assertError(h: ProxyWasmHost, conn: Connection, rule: OutcomeName, destination: string): void {
  assertClosedByFilter(h, conn);
  assert.deepEqual(conn.filterStateWrites, []);
  const warnings = linesOf(h, conn, "warn");
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.ok(warnings[0]!.includes(rule), warnings[0]!);
  assert.ok(warnings[0]!.includes(destination), warnings[0]!);
  // Nothing reaches any upstream.
  const sent = conn.downstreamData("GET / HTTP/1.1\r\n\r\n");
  assert.equal(sent.forwarded.length, 0);
  assert.equal(conn.upstreamBytes.length, 0);
}

/** One connection from the source workload on a fresh host. */
const one = (configuration: unknown, destination: string, options: HostOptions = {}) =>
  connectOnce("waypoint_route", configuration, { source: `${SOURCE_IP}:40000`, destination }, options);

// ---------------------------------------------------------------- rule 1: service with a waypoint

describe("waypoint_route rule 1: a waypoint on this network (single HBONE)", () => {
  it("tunnels to the local waypoint instance on 15008 with :authority = the dialled VIP:P and the waypoint service's SANs", async () => {
    // Port 9080 maps to target 8080: the authority keeps the service port the client dialled.
    const { host: h, conn } = await one(WORLD, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("prefers a healthy local waypoint in another region over remote ones with the source's exact locality listed before it", async () => {
    // wp-net2 shares region, zone and subzone with the source and comes before wp-local; wp-local
    // is moved to another region: the network wins anyway.
    const workloads = (WORLD.workloads as Json[]).map((w) => (w.uid === "wp-local" ? { ...w, locality: "r9/z9" } : w));
    const { host: h, conn } = await one({ ...WORLD, workloads }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("verifies the instance's own identity when the waypoint service has no subjectAltNames", async () => {
    const services = (WORLD.services as Json[]).map((s) => (s.hostname === WP ? { ...s, subjectAltNames: [] } : s));
    const { host: h, conn } = await one({ ...WORLD, services }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: [id("wp-local")], nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" });
  });

  it("uses the configured hboneCluster", async () => {
    const { host: h, conn } = await one({ ...WORLD, hboneCluster: "my_hbone", doubleHboneCluster: "my_double" }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080", cluster: "my_hbone" });
  });

  it("lets the data flow once the waypoint is chosen", async () => {
    const { host: h, conn } = await one(WORLD, "10.2.0.10:9080");
    const sent = conn.downstreamData("GET / HTTP/1.1\r\n\r\n");
    assert.equal(sent.status, "Continue");
    assert.equal(Buffer.from(sent.forwarded).toString(), "GET / HTTP/1.1\r\n\r\n");
    conn.end();
    assert.equal(conn.closeReason, "end");
    assert.equal(h.failed, false);
  });
});

describe("waypoint_route rule 1: a waypoint given by address (a workload) or by hostname (a service)", () => {
  // wp-solo is a waypoint workload referenced by its address; details uses it with the default
  // port, ratings with port 15088. wp-vip is a waypoint SERVICE referenced by its VIP.
  const WORLD_REFS = config(
    [
      pod("wp-solo", ["10.1.0.42"], "net1", "r1/z1"),
      pod("wp-svc-0", ["10.1.0.43"], "net1", "r1/z1"),
      pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
    ],
    [
      {
        hostname: host("details"),
        vips: [{ network: "net1", address: "10.2.0.40" }],
        ports: { "9080": 9080 },
        waypoint: { address: "10.1.0.42" },
        endpoints: [{ workload: "backend" }],
      },
      {
        hostname: host("ratings"),
        vips: [{ network: "net1", address: "10.2.0.41" }],
        ports: { "9080": 9080 },
        waypoint: { address: "10.1.0.42", port: 15088 },
        endpoints: [{ workload: "backend" }],
      },
      {
        hostname: host("stars"),
        vips: [{ network: "net1", address: "10.2.0.42" }],
        ports: { "80": 8080 },
        waypoint: { address: "10.2.0.50" },
        endpoints: [{ workload: "backend" }],
      },
      {
        hostname: host("wp-vip"),
        vips: [{ network: "net1", address: "10.2.0.50" }],
        ports: { "15008": 15008 },
        subjectAltNames: [id("wp-vip")],
        endpoints: [{ workload: "wp-svc-0" }],
      },
    ],
  );

  it("tunnels to a waypoint workload given by address, verifying that workload's identity, on 15008 by default", async () => {
    const { host: h, conn } = await one(WORLD_REFS, "10.2.0.40:9080");
    assertSingle(h, conn, { sans: [id("wp-solo")], nextHop: "10.1.0.42:15008", authority: "10.2.0.40:9080" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("tunnels to the waypoint reference's own port when it sets one", async () => {
    const { host: h, conn } = await one(WORLD_REFS, "10.2.0.41:9080");
    assertSingle(h, conn, { sans: [id("wp-solo")], nextHop: "10.1.0.42:15088", authority: "10.2.0.41:9080" });
  });

  it("treats a waypoint address that is a service VIP as that waypoint service (its instances, its SANs)", async () => {
    const { host: h, conn } = await one(WORLD_REFS, "10.2.0.42:80");
    assertSingle(h, conn, { sans: [id("wp-vip"), id("wp-svc-0")], nextHop: "10.1.0.43:15008", authority: "10.2.0.42:80" });
  });

  it("refuses (unknown waypoint) when the waypoint workload given by address is unhealthy, even with a healthy endpoint", async () => {
    const { host: h, conn } = await one(withHealth(WORLD_REFS, { "wp-solo": false }), "10.2.0.40:9080");
    assertError(h, conn, "error_unknown_waypoint", "10.2.0.40:9080");
    assertCounters(h, { error_unknown_waypoint: 1 });
  });
});

describe("waypoint_route rule 1: a waypoint only on another network (double HBONE)", () => {
  const LOCAL_DOWN = withHealth(WORLD, { "wp-local": false });

  it("goes through the remote network's gateway SERVICE, its HBONE port translated (15008 -> 15443), with :authority <hostname>:P", async () => {
    // wp-net2 (same region/zone/subzone as the source) beats wp-net3 (other region) though listed after it.
    const { host: h, conn } = await one(LOCAL_DOWN, "10.2.0.10:9080");
    assertDouble(h, conn, { authority: `${REVIEWS}:9080`, inner: WP_SANS, outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
    assertCounters(h, { double_hbone_waypoint: 1 });
  });

  it("goes through a gateway WORKLOAD given by address, on the reference's hboneMtlsPort, verifying its identity", async () => {
    const { host: h, conn } = await one(withHealth(WORLD, { "wp-local": false, "wp-net2": false }), "10.2.0.10:9080");
    assertDouble(h, conn, { authority: `${REVIEWS}:9080`, inner: WP_SANS, outer: [EW3_ID], nextHop: "172.16.3.1:15009" });
    assertCounters(h, { double_hbone_waypoint: 1 });
  });

  it("uses the configured doubleHboneCluster", async () => {
    const { host: h, conn } = await one({ ...LOCAL_DOWN, hboneCluster: "my_hbone", doubleHboneCluster: "my_double" }, "10.2.0.10:9080");
    assertDouble(h, conn, {
      authority: `${REVIEWS}:9080`,
      inner: WP_SANS,
      outer: EW2_OUTER,
      nextHop: "172.16.2.1:15443",
      cluster: "my_double",
    });
  });

  it("verifies the remote instance's own identity inside when the waypoint service has no subjectAltNames", async () => {
    const services = (LOCAL_DOWN.services as Json[]).map((s) => (s.hostname === WP ? { ...s, subjectAltNames: [] } : s));
    const { host: h, conn } = await one({ ...LOCAL_DOWN, services }, "10.2.0.10:9080");
    assertDouble(h, conn, { authority: `${REVIEWS}:9080`, inner: [id("wp-net2")], outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
  });

  it("verifies the chosen gateway instance's identity when the gateway service has no subjectAltNames", async () => {
    const services = (LOCAL_DOWN.services as Json[]).map((s) => (s.hostname === EW2 ? { ...s, subjectAltNames: [] } : s));
    const { host: h, conn } = await one({ ...LOCAL_DOWN, services }, "10.2.0.10:9080");
    assertDouble(h, conn, {
      authority: `${REVIEWS}:9080`,
      inner: WP_SANS,
      outer: [id("ew2", "istio-system")],
      nextHop: "172.16.2.1:15443",
    });
  });

  it("refuses (unknown waypoint) when no waypoint instance is healthy, never falling back to the service's healthy endpoint", async () => {
    const { host: h, conn } = await one(withHealth(WORLD, { "wp-local": false, "wp-net2": false, "wp-net3": false }), "10.2.0.10:9080");
    assertError(h, conn, "error_unknown_waypoint", "10.2.0.10:9080");
    assertCounters(h, { error_unknown_waypoint: 1 });
  });
});

// ---------------------------------------------------------------- gateways

/**
 * A service (VIP 10.2.0.60:80 -> 8080) whose waypoint's only instance is the proxy workload
 * wp-far on net2 with gateway `gateway`, plus `extra` workloads and services.
 */
function farWaypoint(gateway: Json | undefined, extra: Json[] = [], extraServices: Json[] = [], addresses: string[] = []): Json {
  const far: Json = { uid: "wp-far", addresses, network: "net2", locality: "r1/z1", tlsMode: "istio", identity: id("wp-far") };
  if (gateway !== undefined) far.networkGateway = gateway;
  return config(
    [far, pod("backend", ["10.1.1.1"], "net1", "r1/z1"), ...extra],
    [
      {
        hostname: host("far"),
        vips: [{ network: "net1", address: "10.2.0.60" }],
        ports: { "80": 8080 },
        waypoint: { hostname: host("far-waypoint") },
        endpoints: [{ workload: "backend" }],
      },
      { hostname: host("far-waypoint"), ports: { "15008": 15008 }, endpoints: [{ workload: "wp-far" }] },
      ...extraServices,
    ],
  );
}

const GW_SVC = host("gw", "istio-system");
const gwPod = (uid: string, address: string, network = "net2", extra: Json = {}) =>
  pod(uid, [address], network, "r1/z1", { identity: id(uid, "istio-system"), ...extra });

describe("waypoint_route rule 3: the remote network's gateway", () => {
  it("picks the first healthy instance of a gateway service, in configuration order", async () => {
    const configuration = farWaypoint(
      { hostname: GW_SVC },
      [gwPod("gw-a", "172.16.2.11", "net2", { healthy: false }), gwPod("gw-b", "172.16.2.12"), gwPod("gw-c", "172.16.2.13")],
      [{ hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-a" }, { workload: "gw-b" }, { workload: "gw-c" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.60:80");
    assertDouble(h, conn, {
      authority: `${host("far")}:80`,
      inner: [id("wp-far")],
      outer: [id("gw-b", "istio-system")],
      nextHop: "172.16.2.12:15008",
    });
  });

  it("only uses a gateway service's instance on the waypoint's network", async () => {
    // gw-net3 is first but serves net3; gw-net2 serves the waypoint's network net2.
    const configuration = farWaypoint(
      { hostname: GW_SVC },
      [gwPod("gw-net3", "172.16.3.11", "net3"), gwPod("gw-net2", "172.16.2.11")],
      [{ hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-net3" }, { workload: "gw-net2" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.60:80");
    assertDouble(h, conn, {
      authority: `${host("far")}:80`,
      inner: [id("wp-far")],
      outer: [id("gw-net2", "istio-system")],
      nextHop: "172.16.2.11:15008",
    });
  });

  it("translates the HBONE port through the gateway endpoint's own port override", async () => {
    const configuration = farWaypoint(
      { hostname: GW_SVC, hboneMtlsPort: 15008 },
      [gwPod("gw-a", "172.16.2.11")],
      [{ hostname: GW_SVC, ports: { "15008": 15443 }, endpoints: [{ workload: "gw-a", ports: { "15008": 15444 } }] }],
    );
    const { conn } = await one(configuration, "10.2.0.60:80");
    assert.equal(conn.filterState.get(OUTER_ADDRESS), "172.16.2.11:15444");
  });

  it("accepts a gateway workload that carries an identity but is not sidecar'd (tlsMode disabled), by address and by service alike", async () => {
    // A gateway is not a sidecar: the rule only asks that it be healthy, addressed on that network
    // and authenticatable. Both reference forms must agree on the same workload.
    const gw = { uid: "gw-plain", addresses: ["172.16.2.21"], network: "net2", identity: id("gw-plain", "istio-system") };
    const svc = { hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-plain" }] };
    const byAddress = await one(farWaypoint({ address: "172.16.2.21" }, [gw], [svc]), "10.2.0.60:80");
    const byHostname = await one(farWaypoint({ hostname: GW_SVC }, [gw], [svc]), "10.2.0.60:80");
    const want = { authority: `${host("far")}:80`, inner: [id("wp-far")], outer: [id("gw-plain", "istio-system")], nextHop: "172.16.2.21:15008" };
    assertDouble(byAddress.host, byAddress.conn, want);
    assertDouble(byHostname.host, byHostname.conn, want);
  });

  const UNKNOWN_GATEWAY: [string, Json][] = [
    ["a gateway hostname that names no service", farWaypoint({ hostname: host("nope", "istio-system") })],
    ["a gateway address that is nothing in the mesh", farWaypoint({ address: "172.16.9.9" })],
    [
      "a gateway service without a healthy instance",
      farWaypoint(
        { hostname: GW_SVC },
        [gwPod("gw-a", "172.16.2.11", "net2", { healthy: false })],
        [{ hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-a" }] }],
      ),
    ],
    [
      "a gateway service without instances",
      farWaypoint({ hostname: GW_SVC }, [], [{ hostname: GW_SVC, ports: { "15008": 15008 } }]),
    ],
    [
      "a gateway service whose only instance is on another network than the waypoint",
      farWaypoint(
        { hostname: GW_SVC },
        [gwPod("gw-net3", "172.16.3.11", "net3")],
        [{ hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-net3" }] }],
      ),
    ],
    [
      "a gateway service whose only instance has no address",
      farWaypoint(
        { hostname: GW_SVC },
        [proxy("gw-proxy", "net2", "r1/z1", { address: "172.16.9.9" })],
        [{ hostname: GW_SVC, ports: { "15008": 15008 }, endpoints: [{ workload: "gw-proxy" }] }],
      ),
    ],
    ["a gateway workload without identity", farWaypoint({ address: "172.16.2.31" }, [{ uid: "gw-anon", addresses: ["172.16.2.31"], network: "net2" }])],
    [
      "an unhealthy gateway workload given by address",
      farWaypoint({ address: "172.16.2.11" }, [gwPod("gw-a", "172.16.2.11", "net2", { healthy: false })]),
    ],
    [
      "a gateway address that is only a workload of another network than the waypoint's",
      // 10.1.0.77 is a pod of net1 (the source's network): not net2's east-west gateway.
      farWaypoint({ address: "10.1.0.77" }, [pod("not-a-gateway", ["10.1.0.77"], "net1", "r1/z1")]),
    ],
  ];

  for (const [what, configuration] of UNKNOWN_GATEWAY) {
    it(`refuses (unknown gateway) ${what}`, async () => {
      const { host: h, conn } = await one(configuration, "10.2.0.60:80");
      assertError(h, conn, "error_unknown_gateway", "10.2.0.60:80");
      assertCounters(h, { error_unknown_gateway: 1 });
    });
  }

  it("refuses (no valid destination) a remote waypoint service instance without a network gateway, sending nothing", async () => {
    // (A remote proxy workload without address must have a gateway; a remote pod need not.)
    const { host: h, conn } = await one(farWaypoint(undefined, [], [], ["10.3.0.41"]), "10.2.0.60:80");
    assertError(h, conn, "error_no_valid_destination", "10.2.0.60:80");
    assertCounters(h, { error_no_valid_destination: 1 });
  });

  it("refuses (no valid destination) a remote waypoint workload given by address without a gateway", async () => {
    const configuration = config(
      [pod("wp-far", ["10.3.0.41"], "net2", "r1/z1"), pod("backend", ["10.1.1.1"], "net1", "r1/z1")],
      [
        {
          hostname: host("far"),
          vips: [{ network: "net1", address: "10.2.0.60" }],
          ports: { "80": 8080 },
          waypoint: { address: "10.3.0.41" },
          endpoints: [{ workload: "backend" }],
        },
      ],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.60:80");
    assertError(h, conn, "error_no_valid_destination", "10.2.0.60:80");
  });
});

describe("waypoint_route rule 1: unusable waypoints", () => {
  const BASE = config(
    [pod("backend", ["10.1.1.1"], "net1", "r1/z1")],
    [
      {
        hostname: host("lonely"),
        vips: [{ network: "net1", address: "10.2.0.70" }],
        ports: { "80": 8080 },
        waypoint: { hostname: host("missing-waypoint") },
        endpoints: [{ workload: "backend" }],
      },
      {
        hostname: host("lonely-by-address"),
        vips: [{ network: "net1", address: "10.2.0.71" }],
        ports: { "80": 8080 },
        waypoint: { address: "10.1.9.9" },
        endpoints: [{ workload: "backend" }],
      },
      {
        hostname: host("empty-waypoint-user"),
        vips: [{ network: "net1", address: "10.2.0.72" }],
        ports: { "80": 8080 },
        waypoint: { hostname: host("empty-waypoint") },
        endpoints: [{ workload: "backend" }],
      },
      { hostname: host("empty-waypoint"), ports: { "15008": 15008 } },
    ],
  );

  const CASES: [string, string][] = [
    ["a waypoint hostname that names no service", "10.2.0.70:80"],
    ["a waypoint address that is nothing in the mesh", "10.2.0.71:80"],
    ["a waypoint service without instances", "10.2.0.72:80"],
  ];
  for (const [what, destination] of CASES) {
    it(`refuses (unknown waypoint) ${what}, never using the service's healthy endpoint`, async () => {
      const { host: h, conn } = await one(BASE, destination);
      assertError(h, conn, "error_unknown_waypoint", destination);
      assertCounters(h, { error_unknown_waypoint: 1 });
    });
  }
});

// ---------------------------------------------------------------- rule 2: no waypoint

describe("waypoint_route rule 2: endpoints without a waypoint", () => {
  // productpage: 80 -> 8080; its endpoints in the WORST order: a remote proxy with the source's
  // exact locality, a local pod in another region, a local pod in the source's region (whose
  // own target port for 80 is 9090).
  const PRODUCT = host("productpage");
  const PRODUCT_SANS = [id("productpage")];
  const WORLD_EP = config(
    [
      proxy("pp-net2", "net2", "r1/z1/s1", GW2),
      pod("pp-r2", ["10.1.2.1"], "net1", "r2/z1"),
      pod("pp-r1", ["10.1.2.2"], "net1", "r1/z7"),
      pod("ew2", ["172.16.2.1"], "net2", "r1/z1", { identity: id("ew2", "istio-system") }),
    ],
    [
      {
        hostname: PRODUCT,
        vips: [{ network: "net1", address: "10.2.0.20" }],
        ports: { "80": 8080 },
        subjectAltNames: PRODUCT_SANS,
        endpoints: [{ workload: "pp-net2" }, { workload: "pp-r2" }, { workload: "pp-r1", ports: { "80": 9090 } }],
      },
      { hostname: EW2, ports: { "15008": 15443 }, subjectAltNames: EW2_SANS, endpoints: [{ workload: "ew2" }] },
    ],
  );

  it("tunnels to a local endpoint's pod on 15008 with :authority podIP:targetPort, verifying the service's SANs or the pod's own identity", async () => {
    // The local network beats the remote proxy; the source's region beats another region.
    const { host: h, conn } = await one(WORLD_EP, "10.2.0.20:80");
    assertSingle(h, conn, { sans: [...PRODUCT_SANS, id("pp-r1")], nextHop: "10.1.2.2:15008", authority: "10.1.2.2:9090" });
    assertCounters(h, { hbone_endpoint: 1 });
  });

  it("uses the service's default target port for an endpoint without override", async () => {
    const { host: h, conn } = await one(withHealth(WORLD_EP, { "pp-r1": false }), "10.2.0.20:80");
    assertSingle(h, conn, { sans: [...PRODUCT_SANS, id("pp-r2")], nextHop: "10.1.2.1:15008", authority: "10.1.2.1:8080" });
    assertCounters(h, { hbone_endpoint: 1 });
  });

  it("goes double HBONE to a remote endpoint when no local one is healthy, with the target service's SANs inside", async () => {
    const { host: h, conn } = await one(withHealth(WORLD_EP, { "pp-r1": false, "pp-r2": false }), "10.2.0.20:80");
    assertDouble(h, conn, { authority: `${PRODUCT}:80`, inner: PRODUCT_SANS, outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
    assertCounters(h, { double_hbone_endpoint: 1 });
  });

  it("verifies the remote endpoint's own identity inside when the service has no subjectAltNames", async () => {
    const base = withHealth(WORLD_EP, { "pp-r1": false, "pp-r2": false });
    const services = (base.services as Json[]).map((s) => (s.hostname === PRODUCT ? { ...s, subjectAltNames: [] } : s));
    const { host: h, conn } = await one({ ...base, services }, "10.2.0.20:80");
    assertDouble(h, conn, { authority: `${PRODUCT}:80`, inner: [id("pp-net2")], outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
  });

  it("refuses (no endpoint) when no endpoint is healthy", async () => {
    const { host: h, conn } = await one(withHealth(WORLD_EP, { "pp-r1": false, "pp-r2": false, "pp-net2": false }), "10.2.0.20:80");
    assertError(h, conn, "error_no_endpoint", "10.2.0.20:80");
    assertCounters(h, { error_no_endpoint: 1 });
  });

  it("refuses (no endpoint) a service without endpoints", async () => {
    const configuration = config([], [{ hostname: host("void"), vips: [{ network: "net1", address: "10.2.0.21" }], ports: { "80": 8080 } }]);
    const { host: h, conn } = await one(configuration, "10.2.0.21:80");
    assertError(h, conn, "error_no_endpoint", "10.2.0.21:80");
    assertCounters(h, { error_no_endpoint: 1 });
  });

  it("refuses (no valid destination) a remote endpoint without a network gateway", async () => {
    const configuration = config(
      [pod("far-pod", ["10.3.0.5"], "net2", "r1/z1")],
      [{ hostname: host("far"), vips: [{ network: "net1", address: "10.2.0.22" }], ports: { "80": 8080 }, endpoints: [{ workload: "far-pod" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.22:80");
    assertError(h, conn, "error_no_valid_destination", "10.2.0.22:80");
    assertCounters(h, { error_no_valid_destination: 1 });
  });

  it("refuses (unknown gateway) a remote endpoint whose gateway does not resolve", async () => {
    const configuration = config(
      [proxy("far-proxy", "net2", "r1/z1", { hostname: host("nope", "istio-system") })],
      [{ hostname: host("far"), vips: [{ network: "net1", address: "10.2.0.23" }], ports: { "80": 8080 }, endpoints: [{ workload: "far-proxy" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.23:80");
    assertError(h, conn, "error_unknown_gateway", "10.2.0.23:80");
    assertCounters(h, { error_unknown_gateway: 1 });
  });
});

// ---------------------------------------------------------------- locality

describe("waypoint_route: locality ranking (same network first, then the service's routingPreference)", () => {
  /** A service at 10.2.0.80:80 -> 8080 whose local endpoints a, b (in that order) have the given localities. */
  function ranked(a: string, b: string, loadBalancing?: Json, first: Json[] = []): Json {
    const svc: Json = {
      hostname: host("ranked"),
      vips: [{ network: "net1", address: "10.2.0.80" }],
      ports: { "80": 8080 },
      endpoints: [...first.map((w) => ({ workload: w.uid })), { workload: "a" }, { workload: "b" }],
    };
    if (loadBalancing) svc.loadBalancing = loadBalancing;
    return config([...first, pod("a", ["10.1.4.1"], "net1", a), pod("b", ["10.1.4.2"], "net1", b), pod("ew2", ["172.16.2.1"], "net2", "r1/z1")], [
      svc,
      { hostname: EW2, ports: { "15008": 15443 }, endpoints: [{ workload: "ew2" }] },
    ]);
  }

  /** The identity the connection was pinned to: which endpoint won. */
  async function winner(configuration: Json): Promise<string> {
    const { host: h, conn } = await one(configuration, "10.2.0.80:80");
    assertContinues(h, conn);
    return conn.filterState.get(SAN) ?? "<none>";
  }

  const CASES: [string, Json, string][] = [
    ["the source's region beats another region", ranked("r2/z1", "r1/z9"), "b"],
    ["the source's zone beats its region alone", ranked("r1/z2", "r1/z1"), "b"],
    ["the source's subzone beats its zone alone", ranked("r1/z1/s2", "r1/z1/s1"), "b"],
    ["equal rank goes to configuration order", ranked("r1/z1", "r1/z1"), "a"],
    ["equal (mismatching) rank goes to configuration order", ranked("r3/z1", "r2/z1"), "a"],
    ["routingPreference [region] ignores the zone", ranked("r1/z2", "r1/z1", { routingPreference: ["region"] }), "a"],
    ["routingPreference [network, region] ignores the zone", ranked("r1/z2", "r1/z1", { routingPreference: ["network", "region"] }), "a"],
    ["routingPreference [] ignores locality", ranked("r2/z1", "r1/z1/s1", { routingPreference: [] }), "a"],
    ["routingPreference [region, zone] still prefers the zone", ranked("r1/z2", "r1/z1", { routingPreference: ["region", "zone"] }), "b"],
    // Only LEADING matching scopes count: with [zone, region], a's shared region counts for
    // nothing once its zone differs, so a and b tie and b (first) wins.
    ["only leading scopes of routingPreference count", ranked("r2/z9", "r1/z2", { routingPreference: ["zone", "region"] }), "a"],
    [
      "the network comes first even when routingPreference leaves it out",
      ranked("r9/z9", "r8/z8", { routingPreference: ["region", "zone", "subzone"] }, [proxy("remote-exact", "net2", "r1/z1/s1", GW2)]),
      "a",
    ],
    [
      "the network comes first with routingPreference []",
      ranked("r9/z9", "r8/z8", { routingPreference: [] }, [proxy("remote-exact", "net2", "r1/z1/s1", GW2)]),
      "a",
    ],
  ];
  for (const [what, configuration, want] of CASES) {
    it(what, async () => {
      assert.equal(await winner(configuration), id(want));
    });
  }

  it("ranks remote waypoint instances by locality too: same region and zone beats another region", async () => {
    // In WORLD with wp-local down: wp-net3 (r2, listed first) loses to wp-net2 (r1/z1/s1).
    const { conn } = await one(withHealth(WORLD, { "wp-local": false }), "10.2.0.10:9080");
    assert.equal(conn.filterState.get(OUTER_ADDRESS), "172.16.2.1:15443");
  });

  it("takes the first remote instance in configuration order when localities tie", async () => {
    const workloads = (WORLD.workloads as Json[]).map((w) => (w.uid === "wp-net2" ? { ...w, locality: "r2/z1" } : w));
    const { conn } = await one(withHealth({ ...WORLD, workloads }, { "wp-local": false }), "10.2.0.10:9080");
    // wp-net3 and wp-net2 are both r2/z1 now: wp-net3 comes first.
    assert.equal(conn.filterState.get(OUTER_ADDRESS), "172.16.3.1:15009");
  });
});

// ---------------------------------------------------------------- rule 4: pod IPs

describe("waypoint_route rule 4: pod IPs and unknown destinations", () => {
  const WORLD_PODS = config(
    [
      pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
      { uid: "legacy", addresses: ["10.1.3.1"], network: "net1" },
      pod("far-only", ["10.3.0.5"], "net2", "r1/z1"),
      { uid: "twin-local", addresses: ["10.1.5.5"], network: "net1" },
      pod("twin-remote", ["10.1.5.5"], "net2", "r1/z1"),
      pod("dual-local", ["10.1.5.6"], "net1", "r1/z1"),
      pod("dual-remote", ["10.1.5.6"], "net2", "r1/z1"),
    ],
    [
      { hostname: host("remote-only"), vips: [{ network: "net2", address: "10.2.0.90" }], ports: { "80": 8080 }, endpoints: [{ workload: "far-only" }] },
      { hostname: host("default-net"), vips: [{ address: "10.2.0.91" }], ports: { "80": 8080 }, endpoints: [{ workload: "backend" }] },
    ],
  );

  it("tunnels to a mesh pod on this network dialled by IP: podIP:15008, :authority podIP:port, its identity", async () => {
    const { host: h, conn } = await one(WORLD_PODS, "10.1.1.1:8080");
    assertSingle(h, conn, { sans: [id("backend")], nextHop: "10.1.1.1:15008", authority: "10.1.1.1:8080" });
    assertCounters(h, { hbone_pod: 1 });
  });

  it("sends a pod without a sidecar (tlsMode disabled) as plain TCP", async () => {
    const { host: h, conn } = await one(WORLD_PODS, "10.1.3.1:8080");
    assertPlain(h, conn);
    assertCounters(h, { plaintext_pod: 1 });
  });

  it("never crosses networks for a pod IP: a pod only on another network is unknown", async () => {
    const { host: h, conn } = await one(WORLD_PODS, "10.3.0.5:8080");
    assertPlain(h, conn);
    assertCounters(h, { unknown: 1 });
  });

  it("lets this network's pod win an IP another network also has (plain pod here, sidecar'd there)", async () => {
    const { host: h, conn } = await one(WORLD_PODS, "10.1.5.5:8080");
    assertPlain(h, conn);
    assertCounters(h, { plaintext_pod: 1 });
  });

  it("verifies this network's pod's identity for an IP two networks share", async () => {
    const { host: h, conn } = await one(WORLD_PODS, "10.1.5.6:8080");
    assertSingle(h, conn, { sans: [id("dual-local")], nextHop: "10.1.5.6:15008", authority: "10.1.5.6:8080" });
  });

  const UNKNOWN: [string, ConnectOptions][] = [
    ["an address that is nothing in the mesh", { destination: "10.9.9.9:443" }],
    ["a VIP of another network only", { destination: "10.2.0.90:80" }],
    ["a VIP of the default network when this sidecar is on net1", { destination: "10.2.0.91:80" }],
    ["a connection without a destination", {}],
  ];
  for (const [what, options] of UNKNOWN) {
    it(`passes ${what} through as plain TCP (unknown)`, async () => {
      const h = await start(WORLD_PODS);
      const conn = h.connect({ source: `${SOURCE_IP}:40000`, ...options });
      assertPlain(h, conn);
      assertCounters(h, { unknown: 1 });
    });

    it(`closes ${what} with unknownDestination refuse`, async () => {
      const h = await start({ ...WORLD_PODS, unknownDestination: "refuse" });
      const conn = h.connect({ source: `${SOURCE_IP}:40000`, ...options });
      assert.equal(conn.status, "StopIteration");
      assert.equal(conn.closed, true);
      assert.equal(conn.closeReason, "filter");
      assert.deepEqual(conn.filterStateWrites, []);
      assertCounters(h, { unknown: 1, unknown_refused: 1 });
      assert.equal(h.logLines("warn").length, 1);
    });
  }

  it("keeps sending a pod without a sidecar as plain TCP with unknownDestination refuse", async () => {
    const { host: h, conn } = await one({ ...WORLD_PODS, unknownDestination: "refuse" }, "10.1.3.1:8080");
    assertPlain(h, conn);
    assertCounters(h, { plaintext_pod: 1 });
  });

  it("still routes mesh destinations normally with unknownDestination refuse", async () => {
    const { host: h, conn } = await one({ ...WORLD, unknownDestination: "refuse" }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" });
    assertCounters(h, { hbone_waypoint: 1 });
  });
});

// ---------------------------------------------------------------- IPv6

describe("waypoint_route: IPv6", () => {
  const V6 = host("v6");
  const WP6 = host("waypoint6");
  const EW6 = host("eastwest6", "istio-system");
  const SOURCE6 = pod("sleep6", ["fd00:1::100"], "net1", "r1/z1");
  const WORLD6 = {
    localWorkload: "fd00:1::100",
    workloads: [
      SOURCE6,
      pod("wp6-local", ["fd00:1::41"], "net1", "r1/z1"),
      proxy("wp6-net2", "net2", "r1/z1", { address: "fd00:3::1" }),
      proxy("wp6-net3", "net3", "r1/z1", { hostname: EW6, hboneMtlsPort: 15008 }),
      pod("ew6-net2", ["fd00:3::1"], "net2", "r1/z1", { identity: id("ew6-net2", "istio-system") }),
      pod("ew6-net3", ["fd00:4::1"], "net3", "r1/z1", { identity: id("ew6-net3", "istio-system") }),
      pod("backend6", ["fd00:1::5"], "net1", "r1/z1"),
      pod("ep6", ["fd00:1::7"], "net1", "r1/z1"),
    ],
    services: [
      {
        hostname: V6,
        vips: [{ network: "net1", address: "fd00:2::10" }],
        ports: { "80": 8080 },
        waypoint: { hostname: WP6 },
        endpoints: [{ workload: "backend6" }],
      },
      { hostname: WP6, ports: { "15008": 15008 }, endpoints: [{ workload: "wp6-net2" }, { workload: "wp6-net3" }, { workload: "wp6-local" }] },
      { hostname: EW6, ports: { "15008": 15443 }, endpoints: [{ workload: "ew6-net3" }] },
      { hostname: host("ep6svc"), vips: [{ network: "net1", address: "fd00:2::11" }], ports: { "80": 8080 }, endpoints: [{ workload: "ep6" }] },
    ],
  };

  it("tunnels to a local IPv6 waypoint with bracketed next hop and authority", async () => {
    const { host: h, conn } = await one(WORLD6, "[fd00:2::10]:80");
    assertSingle(h, conn, { sans: [id("wp6-local")], nextHop: "[fd00:1::41]:15008", authority: "[fd00:2::10]:80" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("accepts the same destination in another IPv6 spelling", async () => {
    const { host: h, conn } = await one(WORLD6, "[FD00:2:0:0:0:0:0:10]:80");
    assertSingle(h, conn, { sans: [id("wp6-local")], nextHop: "[fd00:1::41]:15008", authority: "[fd00:2::10]:80" });
  });

  it("goes double HBONE through an IPv6 gateway workload given by address", async () => {
    const { host: h, conn } = await one(withHealth(WORLD6, { "wp6-local": false }), "[fd00:2::10]:80");
    assertDouble(h, conn, { authority: `${V6}:80`, inner: [id("wp6-net2")], outer: [id("ew6-net2", "istio-system")], nextHop: "[fd00:3::1]:15008" });
    assertCounters(h, { double_hbone_waypoint: 1 });
  });

  it("goes double HBONE through an IPv6 gateway service instance on its translated port", async () => {
    const { host: h, conn } = await one(withHealth(WORLD6, { "wp6-local": false, "wp6-net2": false }), "[fd00:2::10]:80");
    assertDouble(h, conn, { authority: `${V6}:80`, inner: [id("wp6-net3")], outer: [id("ew6-net3", "istio-system")], nextHop: "[fd00:4::1]:15443" });
  });

  it("tunnels to an IPv6 endpoint with :authority [podIP]:targetPort", async () => {
    const { host: h, conn } = await one(WORLD6, "[fd00:2::11]:80");
    assertSingle(h, conn, { sans: [id("ep6")], nextHop: "[fd00:1::7]:15008", authority: "[fd00:1::7]:8080" });
    assertCounters(h, { hbone_endpoint: 1 });
  });

  it("tunnels to an IPv6 pod dialled by IP", async () => {
    const { host: h, conn } = await one(WORLD6, "[fd00:1::5]:8080");
    assertSingle(h, conn, { sans: [id("backend6")], nextHop: "[fd00:1::5]:15008", authority: "[fd00:1::5]:8080" });
    assertCounters(h, { hbone_pod: 1 });
  });

  it("treats an IPv6 pod of another network as unknown", async () => {
    const { host: h, conn } = await one(WORLD6, "[fd00:3::1]:8080");
    assertPlain(h, conn);
    assertCounters(h, { unknown: 1 });
  });
});

// ---------------------------------------------------------------- health changes (configuration updates)

describe("waypoint_route: health changes arrive as configuration updates", () => {
  // One local and one remote instance of the waypoint, as in the operators' example.
  const UPDATES = config(
    [
      pod("wp-local", ["10.1.0.41"], "net1", "r1/z1"),
      proxy("wp-net2", "net2", "r2/z1", GW2),
      pod("ew2", ["172.16.2.1"], "net2", "r2/z1", { identity: id("ew2", "istio-system") }),
      pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
    ],
    [
      {
        hostname: REVIEWS,
        vips: [{ network: "net1", address: "10.2.0.10" }],
        ports: { "9080": 8080 },
        waypoint: { hostname: WP },
        endpoints: [{ workload: "backend" }],
      },
      { hostname: WP, ports: { "15008": 15008 }, subjectAltNames: WP_SANS, endpoints: [{ workload: "wp-local" }, { workload: "wp-net2" }] },
      { hostname: EW2, ports: { "15008": 15443 }, subjectAltNames: EW2_SANS, endpoints: [{ workload: "ew2" }] },
    ],
  );
  const LOCAL_UP = { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" };
  const REMOTE = { authority: `${REVIEWS}:9080`, inner: WP_SANS, outer: EW2_OUTER, nextHop: "172.16.2.1:15443" };
  const connect = (h: ProxyWasmHost) => h.connect({ source: `${SOURCE_IP}:40000`, destination: "10.2.0.10:9080" });

  it("follows local healthy -> local unhealthy -> both unhealthy -> local healthy again, one root per configuration", async () => {
    const h = await start(UPDATES);
    const firstRoot = h.rootContextId;
    const a = connect(h);
    assertSingle(h, a, LOCAL_UP);

    assert.ok(h.reconfigure(JSON.stringify(withHealth(UPDATES, { "wp-local": false }))), h.startFailure ?? "");
    assert.notEqual(h.rootContextId, firstRoot);
    const b = connect(h);
    assertDouble(h, b, REMOTE);

    assert.ok(h.reconfigure(JSON.stringify(withHealth(UPDATES, { "wp-local": false, "wp-net2": false }))), h.startFailure ?? "");
    const c = connect(h);
    assertError(h, c, "error_unknown_waypoint", "10.2.0.10:9080");

    assert.ok(h.reconfigure(JSON.stringify(UPDATES)), h.startFailure ?? "");
    const d = connect(h);
    assertSingle(h, d, LOCAL_UP);

    // Stats are per name: every root counts into the same counters.
    assertCounters(h, { hbone_waypoint: 2, double_hbone_waypoint: 1, error_unknown_waypoint: 1 });
  });

  it("keeps connections opened under the old configuration as they were, and retires the old root when they end", async () => {
    const h = await start(UPDATES);
    const old = connect(h);
    assertSingle(h, old, LOCAL_UP);
    const before = h.liveContexts; // root + old
    assert.equal(before, 2);

    assert.ok(h.reconfigure(JSON.stringify(withHealth(UPDATES, { "wp-local": false }))), h.startFailure ?? "");
    // The old root stays while its connection lives: old root + new root + old connection.
    assert.equal(h.liveContexts, 3);
    const fresh = connect(h);
    assertDouble(h, fresh, REMOTE);

    // The in-flight connection is not re-decided: same writes, still open, data still flows.
    assertSingle(h, old, LOCAL_UP);
    const oldWrites = allWrites(old);
    const sent = old.downstreamData("ping");
    assert.equal(sent.status, "Continue");
    assert.equal(Buffer.from(sent.forwarded).toString(), "ping");

    old.end();
    fresh.end();
    assert.equal(h.failed, false, h.trapMessage ?? "");
    // Only the new root remains.
    assert.equal(h.liveContexts, 1);
    assert.deepEqual(allWrites(old), oldWrites);
    assert.equal(old.closeReason, "end");
    assertDouble(h, connect(h), REMOTE);
  });

  it("keeps the previous configuration in service when an update is refused", async () => {
    const h = await start(withHealth(UPDATES, { "wp-local": false }));
    const rootBefore = h.rootContextId;
    assert.equal(h.reconfigure(JSON.stringify({ ...UPDATES, localWorkload: "10.9.9.9" })), false);
    assert.equal(h.failed, false);
    assert.equal(h.rootContextId, rootBefore);
    assert.match(h.startFailure ?? "", /proxy_on_configure returned false/);
    // The refusal is one error line (from the configuration check), nothing in the serving VM.
    assert.deepEqual(errorLines(h), ["invalid plugin configuration: localWorkload: no workload has address 10.9.9.9"]);
    assertDouble(h, connect(h), REMOTE);
    assertCounters(h, { double_hbone_waypoint: 1 });
  });

  it("can move this sidecar to another network through an update (the source workload decides what is local)", async () => {
    // A mesh seen from a sidecar on net2: the net2 waypoint pod is local, the net1 one is remote.
    const fromNet2 = config(
      [
        pod("sleep-net2", ["10.3.0.100"], "net2", "r2/z1"),
        pod("wp-net2-pod", ["10.3.0.41"], "net2", "r2/z1"),
        proxy("wp-net1", "net1", "r1/z1", { address: "172.16.1.1" }),
        pod("ew1", ["172.16.1.1"], "net1", "r1/z1", { identity: id("ew1", "istio-system") }),
        pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
      ],
      [
        {
          hostname: REVIEWS,
          vips: [
            { network: "net1", address: "10.2.0.10" },
            { network: "net2", address: "10.4.0.10" },
          ],
          ports: { "9080": 8080 },
          waypoint: { hostname: WP },
          endpoints: [{ workload: "backend" }],
        },
        { hostname: WP, ports: { "15008": 15008 }, subjectAltNames: WP_SANS, endpoints: [{ workload: "wp-net1" }, { workload: "wp-net2-pod" }] },
      ],
      { localWorkload: "10.3.0.100" },
    );
    const h = await start(UPDATES);
    assert.ok(h.reconfigure(JSON.stringify(fromNet2)), h.startFailure ?? "");
    // net1's VIP is not this network's any more.
    assertPlain(h, h.connect({ destination: "10.2.0.10:9080" }));
    const conn = h.connect({ destination: "10.4.0.10:9080" });
    assertSingle(h, conn, { sans: [...WP_SANS, id("wp-net2-pod")], nextHop: "10.3.0.41:15008", authority: "10.4.0.10:9080" });
    assertCounters(h, { unknown: 1, hbone_waypoint: 1 });
  });
});

// ---------------------------------------------------------------- bad configuration

describe("waypoint_route: invalid configuration", () => {
  const KNOWN = "localWorkload, hboneCluster, doubleHboneCluster, plainCluster, unknownDestination, localNetwork, meshFeed, workloads, services";
  const MESH_ONLY = { workloads: WORLD.workloads, services: WORLD.services };
  const BAD: [string, string, string][] = [
    ["a missing localWorkload", JSON.stringify(MESH_ONLY), "localWorkload: missing required field"],
    ["a localWorkload no workload has", JSON.stringify({ ...WORLD, localWorkload: "10.9.9.9" }), "localWorkload: no workload has address 10.9.9.9"],
    [
      "a localWorkload that is a service VIP, not a workload",
      JSON.stringify({ ...WORLD, localWorkload: "10.2.0.10" }),
      "localWorkload: no workload has address 10.2.0.10",
    ],
    ["a localWorkload that is not an IP", JSON.stringify({ ...WORLD, localWorkload: "sleep" }), 'localWorkload: not an IP address: "sleep"'],
    ["a localWorkload that is not a string", JSON.stringify({ ...WORLD, localWorkload: 10 }), "localWorkload: expected a string"],
    ["an unknown top-level field", JSON.stringify({ ...WORLD, hbone_cluster: "x" }), `hbone_cluster: unknown field (known: ${KNOWN})`],
    ["an empty hboneCluster", JSON.stringify({ ...WORLD, hboneCluster: "" }), "hboneCluster: must not be empty"],
    ["an empty doubleHboneCluster", JSON.stringify({ ...WORLD, doubleHboneCluster: "" }), "doubleHboneCluster: must not be empty"],
    ["a bad unknownDestination", JSON.stringify({ ...WORLD, unknownDestination: "drop" }), "unknownDestination: expected one of: passthrough, refuse"],
    [
      "a mesh error",
      JSON.stringify(config([{ uid: "x", addresses: ["10.0.0.300"] }], [])),
      'workloads[1].addresses[0]: not an IP address: "10.0.0.300"',
    ],
    [
      // Envoy splits envoy.network.upstream_subject_alt_names on ",": one such entry would make
      // the waypoint hop accept "nobody" as well as the waypoint's identity.
      "a subjectAltNames entry with a comma",
      JSON.stringify({
        ...WORLD,
        services: (WORLD.services as Json[]).map((s) => (s.hostname === WP ? { ...s, subjectAltNames: [id("waypoint"), `${id("nobody")},${id("waypoint")}`] } : s)),
      }),
      "services[1].subjectAltNames[1]: must not contain ',' (Envoy splits envoy.network.upstream_subject_alt_names on commas, so one entry would accept two identities)",
    ],
    ["an array root", "[]", "(root): expected an object"],
    ["invalid JSON", '{"localWorkload": "10.1.0.100"', "byte 30: unexpected end of input"],
    ["an empty configuration", "", "byte 0: unexpected end of input"],
  ];

  for (const [what, configuration, message] of BAD) {
    it(`refuses ${what} with one exact error line, without trapping`, async () => {
      await assertConfigRefused("waypoint_route", configuration, message);
    });
  }

  it("accepts a localWorkload written IPv4-mapped and finds the IPv4 workload", async () => {
    const { host: h, conn } = await one({ ...WORLD, localWorkload: "::ffff:10.1.0.100" }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:9080" });
  });
});

// ---------------------------------------------------------------- logs

// ---------------------------------------------------------------- rules 5-9: ztunnel's build_request

describe("waypoint_route rule 5: a pod IP whose workload has its own waypoint", () => {
  // app (10.1.6.1) names the waypoint service; app-plain (10.1.6.3, no sidecar) too; app-far's
  // waypoint has its only instance on net2. The waypoint service's only local instance: wp-local.
  const WP_ONLY_LOCAL = { hostname: WP, ports: { "15008": 15008 }, subjectAltNames: WP_SANS, endpoints: [{ workload: "wp-local" }] };
  const PODS_WP = (localWorkload = SOURCE_IP): Json =>
    config(
      [
        pod("wp-local", ["10.1.0.41"], "net1", "r1/z1"),
        pod("app", ["10.1.6.1"], "net1", "r1/z1", { waypoint: { hostname: WP } }),
        { uid: "app-plain", addresses: ["10.1.6.3"], network: "net1", waypoint: { hostname: WP } },
        pod("app-far", ["10.1.6.5"], "net1", "r1/z1", { waypoint: { hostname: host("far-waypoint") } }),
        proxy("wp-far", "net2", "r1/z1", GW2),
        pod("ew2", ["172.16.2.1"], "net2", "r1/z1", { identity: id("ew2", "istio-system") }),
      ],
      [
        WP_ONLY_LOCAL,
        { hostname: host("far-waypoint"), ports: { "15008": 15008 }, endpoints: [{ workload: "wp-far" }] },
        { hostname: EW2, ports: { "15008": 15443 }, subjectAltNames: EW2_SANS, endpoints: [{ workload: "ew2" }] },
      ],
      { localWorkload },
    );

  it("tunnels to the pod's waypoint with :authority podIP:port, verifying the waypoint's SANs or instance identity", async () => {
    const { host: h, conn } = await one(PODS_WP(), "10.1.6.1:8080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.1.6.1:8080" });
    assertCounters(h, { hbone_pod_waypoint: 1 });
  });

  it("sends a pod without a sidecar through its waypoint too", async () => {
    const { host: h, conn } = await one(PODS_WP(), "10.1.6.3:5432");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.1.6.3:5432" });
    assertCounters(h, { hbone_pod_waypoint: 1 });
  });

  it("goes straight to the pod when this sidecar is that waypoint (no second traversal)", async () => {
    const h = await start(PODS_WP("10.1.0.41"));
    assertSingle(h, h.connect({ source: "10.1.0.41:40000", destination: "10.1.6.1:8080" }), {
      sans: [id("app")],
      nextHop: "10.1.6.1:15008",
      authority: "10.1.6.1:8080",
    });
    assertPlain(h, h.connect({ source: "10.1.0.41:40001", destination: "10.1.6.3:5432" }));
    assertCounters(h, { hbone_pod: 1, plaintext_pod: 1 });
  });

  it("refuses (unknown pod waypoint) when the pod's waypoint has no healthy instance", async () => {
    const { host: h, conn } = await one(withHealth(PODS_WP(), { "wp-local": false }), "10.1.6.1:8080");
    assertError(h, conn, "error_unknown_pod_waypoint", "10.1.6.1:8080");
    assert.match(linesOf(h, conn, "warn")[0]!, /rule 5/);
    assertCounters(h, { error_unknown_pod_waypoint: 1 });
  });

  it("refuses (unknown pod waypoint, rule 4) a pod whose waypoint is only on another network: no double HBONE for a pod IP", async () => {
    const { host: h, conn } = await one(PODS_WP(), "10.1.6.5:8080");
    assertError(h, conn, "error_unknown_pod_waypoint", "10.1.6.5:8080");
    assert.match(linesOf(h, conn, "warn")[0]!, /rule 4/);
    assertCounters(h, { error_unknown_pod_waypoint: 1 });
  });
});

describe("waypoint_route rule 6: a service VIP dialled on a port the service does not list", () => {
  it("goes through the service's waypoint with :authority VIP:port as dialled", async () => {
    const { host: h, conn } = await one(WORLD, "10.2.0.10:7777");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:7777" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("goes double HBONE to a remote waypoint with the dialled port in both authorities", async () => {
    const { host: h, conn } = await one(withHealth(WORLD, { "wp-local": false }), "10.2.0.10:7777");
    assertDouble(h, conn, { authority: `${REVIEWS}:7777`, inner: WP_SANS, outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
    assertCounters(h, { double_hbone_waypoint: 1 });
  });

  it("refuses (unlisted port) a service without a waypoint, as ztunnel does, instead of passing it through", async () => {
    const configuration = config(
      [pod("backend", ["10.1.1.1"], "net1", "r1/z1")],
      [{ hostname: host("pp"), vips: [{ network: "net1", address: "10.2.0.20" }], ports: { "80": 8080 }, endpoints: [{ workload: "backend" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.20:81");
    assertError(h, conn, "error_unlisted_port", "10.2.0.20:81");
    assert.ok(linesOf(h, conn, "warn")[0]!.includes(host("pp")));
    assertCounters(h, { error_unlisted_port: 1 });
  });

  // Port 0 is a port like any other: a VIP dialled on it is an unlisted port, never "no destination".
  it("sends a VIP dialled on port 0 to the service's waypoint (an unlisted port), not plain", async () => {
    const { host: h, conn } = await one(WORLD, "10.2.0.10:0");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15008", authority: "10.2.0.10:0" });
    assertCounters(h, { hbone_waypoint: 1 });
  });

  it("refuses (unlisted port) a VIP dialled on port 0 of a service without a waypoint", async () => {
    const configuration = config(
      [pod("backend", ["10.1.1.1"], "net1", "r1/z1")],
      [{ hostname: host("pp"), vips: [{ network: "net1", address: "10.2.0.20" }], ports: { "80": 8080 }, endpoints: [{ workload: "backend" }] }],
    );
    const { host: h, conn } = await one(configuration, "10.2.0.20:0");
    assertError(h, conn, "error_unlisted_port", "10.2.0.20:0");
    assertCounters(h, { error_unlisted_port: 1 });
  });
});

describe("waypoint_route rule 7: endpoints without HBONE", () => {
  const LEGACY = host("legacy");
  const WORLD_PLAIN = config(
    [
      { uid: "legacy", addresses: ["10.1.3.1"], network: "net1", locality: "r1/z1" },
      { uid: "legacy-remote", addresses: ["10.3.3.1"], network: "net2", locality: "r1/z1", networkGateway: GW2 },
      pod("ew2", ["172.16.2.1"], "net2", "r1/z1", { identity: id("ew2", "istio-system") }),
    ],
    [
      { hostname: LEGACY, vips: [{ network: "net1", address: "10.2.2.1" }], ports: { "80": 8080 }, endpoints: [{ workload: "legacy", ports: { "80": 8081 } }] },
      {
        hostname: host("legacy-remote"),
        vips: [{ network: "net1", address: "10.2.2.2" }],
        ports: { "80": 8080 },
        subjectAltNames: [id("legacy")],
        endpoints: [{ workload: "legacy-remote" }],
      },
      { hostname: EW2, ports: { "15008": 15443 }, subjectAltNames: EW2_SANS, endpoints: [{ workload: "ew2" }] },
    ],
  );

  it("sends a local endpoint without a sidecar plain TCP to podIP:T over the plain cluster (it used to be unreachable)", async () => {
    const { host: h, conn } = await one(WORLD_PLAIN, "10.2.2.1:80");
    assertPlainEndpoint(h, conn, "10.1.3.1:8081");
    assertCounters(h, { plaintext_endpoint: 1 });
    const data = conn.downstreamData("hello");
    assert.equal(data.status, "Continue");
  });

  it("uses the configured plainCluster", async () => {
    const { host: h, conn } = await one({ ...WORLD_PLAIN, plainCluster: "my_plain" }, "10.2.2.1:80");
    assertPlainEndpoint(h, conn, "10.1.3.1:8081", "my_plain");
  });

  it("reaches a remote endpoint without a sidecar by double HBONE through its gateway", async () => {
    const { host: h, conn } = await one(WORLD_PLAIN, "10.2.2.2:80");
    assertDouble(h, conn, { authority: `${host("legacy-remote")}:80`, inner: [id("legacy")], outer: EW2_OUTER, nextHop: "172.16.2.1:15443" });
    assertCounters(h, { double_hbone_endpoint: 1 });
  });

  it("closes the connection (rejected) when Envoy refuses the plain endpoint's next hop", async () => {
    const h = await start(WORLD_PLAIN);
    const conn = withRefusal({ filterStateKey: ORIGINAL_DST }, () => h.connect({ destination: "10.2.2.1:80" }));
    assert.equal(conn.closed, true);
    assert.equal(conn.filterState.get(CLUSTER), undefined);
    assertCounters(h, { plaintext_endpoint: 1, rejected: 1 });
  });
});

describe("waypoint_route rule 8: HBONE port maps of gateway and waypoint services", () => {
  it("refuses (unknown gateway) a gateway service that does not expose the gateway's HBONE port", async () => {
    const services = (WORLD.services as Json[]).map((s) => (s.hostname === EW2 ? { ...s, ports: { "15443": 15443 } } : s));
    const { host: h, conn } = await one(withHealth({ ...WORLD, services }, { "wp-local": false, "wp-net3": false }), "10.2.0.10:9080");
    assertError(h, conn, "error_unknown_gateway_port", "10.2.0.10:9080");
    assert.match(linesOf(h, conn, "warn")[0]!, /rule 8: unknown gateway/);
    assertCounters(h, { error_unknown_gateway_port: 1 });
  });

  it("translates the waypoint's HBONE port by the waypoint service's port map", async () => {
    const services = (WORLD.services as Json[]).map((s) => (s.hostname === WP ? { ...s, ports: { "15008": 15088 } } : s));
    const { host: h, conn } = await one({ ...WORLD, services }, "10.2.0.10:9080");
    assertSingle(h, conn, { sans: LOCAL_WP_SANS, nextHop: "10.1.0.41:15088", authority: "10.2.0.10:9080" });
  });

  it("refuses (unknown waypoint) a waypoint service that does not list the waypoint's HBONE port", async () => {
    const services = (WORLD.services as Json[]).map((s) => (s.hostname === WP ? { ...s, ports: { "15021": 15021 } } : s));
    const { host: h, conn } = await one({ ...WORLD, services }, "10.2.0.10:9080");
    assertError(h, conn, "error_unknown_waypoint_port", "10.2.0.10:9080");
    assert.match(linesOf(h, conn, "warn")[0]!, /rule 8: unknown waypoint/);
    assertCounters(h, { error_unknown_waypoint_port: 1 });
  });
});

describe("waypoint_route rule 9: an IPv6 destination of a dual-stack service keeps IPv6", () => {
  const DUAL = config(
    [
      pod("pod", ["10.1.7.1", "fd00:1::7"], "net1", "r1/z1"),
      pod("wp", ["10.1.7.3", "fd00:1::9"], "net1", "r1/z1"),
      { uid: "plain", addresses: ["10.1.7.2", "fd00:1::8"], network: "net1", locality: "r1/z1" },
    ],
    [
      { hostname: host("ds"), vips: [{ network: "net1", address: "10.2.4.1" }, { network: "net1", address: "fd00:2::41" }], ports: { "80": 8080 }, endpoints: [{ workload: "pod" }] },
      { hostname: host("dsplain"), vips: [{ network: "net1", address: "fd00:2::42" }], ports: { "80": 8080 }, endpoints: [{ workload: "plain" }] },
      { hostname: host("dswp"), vips: [{ network: "net1", address: "fd00:2::43" }], ports: { "80": 8080 }, waypoint: { hostname: host("w") } },
      { hostname: host("w"), ports: { "15008": 15008 }, endpoints: [{ workload: "wp" }] },
    ],
  );

  it("tunnels to the endpoint's IPv6 address when the IPv6 VIP was dialled, and its IPv4 one for the IPv4 VIP", async () => {
    const six = await one(DUAL, "[fd00:2::41]:80");
    assertSingle(six.host, six.conn, { sans: [id("pod")], nextHop: "[fd00:1::7]:15008", authority: "[fd00:1::7]:8080" });
    const four = await one(DUAL, "10.2.4.1:80");
    assertSingle(four.host, four.conn, { sans: [id("pod")], nextHop: "10.1.7.1:15008", authority: "10.1.7.1:8080" });
  });

  it("keeps IPv6 for a plain endpoint and for a waypoint named by hostname", async () => {
    const plain = await one(DUAL, "[fd00:2::42]:80");
    assertPlainEndpoint(plain.host, plain.conn, "[fd00:1::8]:8080");
    const wp = await one(DUAL, "[fd00:2::43]:80");
    assertSingle(wp.host, wp.conn, { sans: [id("wp")], nextHop: "[fd00:1::9]:15008", authority: "[fd00:2::43]:80" });
  });
});

describe("waypoint_route: logs", () => {
  const LOCAL_DOWN = withHealth(WORLD, { "wp-local": false });
  const PODS = config(
    [
      pod("backend", ["10.1.1.1"], "net1", "r1/z1"),
      { uid: "legacy", addresses: ["10.1.3.1"], network: "net1" },
      pod("wp-local", ["10.1.0.41"], "net1", "r1/z1"),
      pod("app", ["10.1.1.2"], "net1", "r1/z1", { waypoint: { address: "10.1.0.41" } }),
    ],
    [
      { hostname: host("pp"), vips: [{ network: "net1", address: "10.2.0.20" }], ports: { "80": 8080 }, endpoints: [{ workload: "backend" }] },
      { hostname: host("legacy"), vips: [{ network: "net1", address: "10.2.0.30" }], ports: { "80": 8080 }, endpoints: [{ workload: "legacy" }] },
    ],
  );

  // [decision, configuration, destination, substrings the one debug line must contain]
  const DECISIONS: [string, Json, string, string[]][] = [
    ["hbone_waypoint", WORLD, "10.2.0.10:9080", ["10.2.0.10:9080", "hbone", "10.1.0.41:15008", WP_SANS.join(",")]],
    [
      "double_hbone_waypoint",
      LOCAL_DOWN,
      "10.2.0.10:9080",
      ["10.2.0.10:9080", "double_hbone", "172.16.2.1:15443", `${REVIEWS}:9080`, EW2_OUTER.join(","), WP_SANS.join(",")],
    ],
    ["hbone_endpoint", PODS, "10.2.0.20:80", ["10.2.0.20:80", "hbone", "10.1.1.1:15008", "10.1.1.1:8080", id("backend")]],
    ["hbone_pod", PODS, "10.1.1.1:8080", ["hbone", "10.1.1.1:15008", "10.1.1.1:8080", id("backend")]],
    ["plaintext_pod", PODS, "10.1.3.1:8080", ["10.1.3.1:8080", "plain"]],
    ["unknown", PODS, "10.9.9.9:443", ["10.9.9.9:443", "plain"]],
    ["plaintext_endpoint", PODS, "10.2.0.30:80", ["10.2.0.30:80", "rule 7", "plain next hop 10.1.3.1:8080"]],
    ["hbone_pod_waypoint", PODS, "10.1.1.2:8080", ["rule 5", "hbone next hop 10.1.0.41:15008", ":authority 10.1.1.2:8080", id("wp-local")]],
  ];

  for (const [decision, configuration, destination, parts] of DECISIONS) {
    it(`traces the ${decision} decision in one debug line naming protocol, next hop, authority and identities`, async () => {
      const { host: h, conn } = await one(configuration, destination, { logLevel: "debug" });
      assertContinues(h, conn);
      const lines = linesOf(h, conn, "debug");
      assert.equal(lines.length, 1, JSON.stringify(lines));
      for (const part of parts) assert.ok(lines[0]!.includes(part), `${JSON.stringify(part)} missing from: ${lines[0]}`);
      assert.ok(lines[0]!.includes(decision), lines[0]!);
    });
  }

  it("does not even send the debug line to the host at info level (one host call fewer than at debug)", async () => {
    for (const [, configuration, destination] of DECISIONS) {
      const atDebug = (await one(configuration, destination, { logLevel: "debug" })).conn.hostCalls;
      const atInfo = (await one(configuration, destination, { logLevel: "info" })).conn.hostCalls;
      assert.equal(atInfo, atDebug - 1, destination);
    }
  });

  it("logs nothing per decided connection at info level", async () => {
    const h = await start(WORLD, { logLevel: "info" });
    const before = h.logs().length;
    for (const destination of ["10.2.0.10:9080", "10.1.1.1:8080", "10.9.9.9:443"]) h.connect({ destination }).end();
    assert.equal(h.failed, false);
    assert.deepEqual(h.logs().slice(before), []);
  });

  it("names the rule, the destination and the service in the error's warn line", async () => {
    const { host: h, conn } = await one(withHealth(WORLD, { "wp-local": false, "wp-net2": false, "wp-net3": false }), "10.2.0.10:9080", {
      logLevel: "info",
    });
    const warnings = linesOf(h, conn, "warn");
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /10\.2\.0\.10:9080/);
    assert.match(warnings[0]!, /error_unknown_waypoint/);
    assert.ok(warnings[0]!.includes(REVIEWS), warnings[0]!);
    assert.deepEqual(linesOf(h, conn, "info"), []);
  });
});

// ---------------------------------------------------------------- Envoy refusing a write

describe("waypoint_route: Envoy refusing a write closes the connection without a cluster", () => {
  const CASES: [string, Json, { filterStateKey?: string; property?: string }, OutcomeName][] = [
    ["a single-HBONE next hop", WORLD, { filterStateKey: ORIGINAL_DST }, "hbone_waypoint"],
    ["a double-HBONE next hop", withHealth(WORLD, { "wp-local": false }), { property: "outer_address" }, "double_hbone_waypoint"],
  ];
  for (const [what, configuration, refusal, outcome] of CASES) {
    it(`closes the connection when ${what} is refused`, async () => {
      const h = await start(configuration);
      const conn = withRefusal(refusal, () => h.connect({ destination: "10.2.0.10:9080" }));
      assert.equal(conn.status, "StopIteration");
      assert.equal(conn.closed, true);
      assert.equal(conn.filterState.get(CLUSTER), undefined);
      assert.equal(h.logLines("error").length, 1);
      assertCounters(h, { [outcome]: 1, rejected: 1 });
    });
  }
});

// ---------------------------------------------------------------- many connections

describe("waypoint_route: many connections on one VM", () => {
  it("decides the same way after 5,000 connections of every kind", { timeout: 300_000 }, async () => {
    const h = await start(WORLD);
    const kinds = ["10.2.0.10:9080", "10.1.1.1:8080", "10.9.9.9:443", "10.1.0.41:15008"];
    const snapshot = (conn: Connection) => ({ status: conn.status, writes: allWrites(conn), hostCalls: conn.hostCalls });
    const firsts = kinds.map((destination) => {
      const conn = h.connect({ destination });
      const seen = snapshot(conn);
      conn.end();
      return seen;
    });
    for (let round = 0; round < 1250; round++) for (const destination of kinds) h.connect({ destination }).end();
    assert.equal(h.failed, false, h.trapMessage ?? "");
    assert.deepEqual(
      kinds.map((destination) => snapshot(h.connect({ destination }))),
      firsts,
    );
    // 10.2.0.10:9080 -> waypoint, 10.1.1.1 and 10.1.0.41 -> pods, 10.9.9.9 -> unknown.
    assertCounters(h, { hbone_waypoint: 1252, hbone_pod: 2 * 1252, unknown: 1252 });
  });
});
