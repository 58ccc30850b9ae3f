// tunnel_port, compiled, in the proxy-wasm test host: what each connection gets (status, Envoy
// filter-state writes in order, wasm properties, counters, log lines) on the client sidecar's
// outbound (endpoint and ITS target port, service port carried through the tunnel) and behind the
// server sidecar's CONNECT termination (ports and peer checked against what this workload serves),
// plus bad configurations, refused writes and 10,000 connections.
// Run: node --import tsx --test tests/host/tunnel_port.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Connection, ProxyWasmHost, type ConnectOptions, type HostOptions } from "../../host/index.js";
import {
  CLUSTER,
  DISABLE_TUNNELING,
  ORIGINAL_DST,
  SAN,
  assertClosedByFilter,
  assertConfigRefused,
  assertContinues,
  counterAssertion,
  linesOf,
  startFilter,
  withRefusal,
  writes,
} from "./helpers.js";

// ---------------------------------------------------------------- the mesh under test

const sa = (name: string, ns = "default") => `spiffe://cluster.local/ns/${ns}/sa/${name}`;

const ID = {
  web0: sa("web-0"),
  web1: sa("web-1"),
  solo: sa("solo"),
  idle: sa("idle"),
  apiA: sa("api-a"),
  apiB: sa("api-b"),
  apiC: sa("api-c"),
  sick0: sa("sick-0"),
  sick1: sa("sick-1"),
  v6: sa("v6"),
  west: sa("west-0", "west"),
  westTwin: sa("west-twin", "west"),
} as const;

/**
 * Network "" is the default (local) one; "west" is another network.
 *   web-0     10.1.0.1           istio     web 80->8080, 443->8443; web-alt 70->8080
 *   web-1     10.1.0.2           istio     web with override 80->9090 (443->8443); admin 9000->8443
 *   legacy-0  10.1.0.3           disabled  legacy 80->80
 *   solo-0    10.1.0.4           istio     mixed 80->80 (the only candidate of mixed)
 *   idle-0    10.1.0.9           istio     endpoint of no service
 *   api-a/b/c 10.1.1.1-3         istio     api 8080->8080; api-b unhealthy
 *   sick-0/1  10.1.2.1-2         istio     sick 80->8080, sick-1 override 80->8081; both unhealthy
 *   v6-0      fd00:1::1          istio     v6 80->8080 (VIPs 10.96.0.60 and fd00:96::60)
 *   gw-proxy  (no address)       istio     local network, networkGateway only: proxied 80->80
 *   west-0    10.2.0.1 on west   istio     remote 80->80
 *   west-twin 10.1.0.1 on west   istio     same IP as web-0, other network: web-west 80->8080
 */
const WORKLOADS = [
  { uid: "web-0", addresses: ["10.1.0.1"], tlsMode: "istio", identity: ID.web0 },
  { uid: "web-1", addresses: ["10.1.0.2"], tlsMode: "istio", identity: ID.web1 },
  { uid: "legacy-0", addresses: ["10.1.0.3"] },
  { uid: "solo-0", addresses: ["10.1.0.4"], tlsMode: "istio", identity: ID.solo },
  { uid: "idle-0", addresses: ["10.1.0.9"], tlsMode: "istio", identity: ID.idle },
  { uid: "api-a", addresses: ["10.1.1.1"], tlsMode: "istio", identity: ID.apiA },
  { uid: "api-b", addresses: ["10.1.1.2"], tlsMode: "istio", identity: ID.apiB, healthy: false },
  { uid: "api-c", addresses: ["10.1.1.3"], tlsMode: "istio", identity: ID.apiC },
  { uid: "sick-0", addresses: ["10.1.2.1"], tlsMode: "istio", identity: ID.sick0, healthy: false },
  { uid: "sick-1", addresses: ["10.1.2.2"], tlsMode: "istio", identity: ID.sick1, healthy: false },
  { uid: "v6-0", addresses: ["fd00:1::1"], tlsMode: "istio", identity: ID.v6 },
  { uid: "gw-proxy", addresses: [], tlsMode: "istio", identity: ID.west, networkGateway: { address: "10.2.255.1" } },
  { uid: "west-0", addresses: ["10.2.0.1"], network: "west", tlsMode: "istio", identity: ID.west },
  { uid: "west-twin", addresses: ["10.1.0.1"], network: "west", tlsMode: "istio", identity: ID.westTwin },
];

const svc = (name: string) => `${name}.default.svc.cluster.local`;

const SERVICES = [
  {
    hostname: svc("web"),
    vips: [{ address: "10.96.0.10" }, { network: "west", address: "10.96.1.10" }],
    ports: { "80": 8080, "443": 8443 },
    endpoints: [{ workload: "web-0" }, { workload: "web-1", ports: { "80": 9090 } }],
  },
  // After web, with a LOWER service port mapping web-0 to the same target 8080: web must win.
  { hostname: svc("web-alt"), vips: [{ address: "10.96.0.11" }], ports: { "70": 8080 }, endpoints: [{ workload: "web-0" }] },
  { hostname: svc("admin"), vips: [{ address: "10.96.0.12" }], ports: { "9000": 8443 }, endpoints: [{ workload: "web-1" }] },
  {
    hostname: svc("api"),
    vips: [{ address: "10.96.0.20" }],
    ports: { "8080": 8080 },
    endpoints: [{ workload: "api-a" }, { workload: "api-b" }, { workload: "api-c" }],
  },
  {
    hostname: svc("sick"),
    vips: [{ address: "10.96.0.30" }],
    ports: { "80": 8080 },
    endpoints: [{ workload: "sick-0" }, { workload: "sick-1", ports: { "80": 8081 } }],
  },
  { hostname: svc("legacy"), vips: [{ address: "10.96.0.40" }], ports: { "80": 80 }, endpoints: [{ workload: "legacy-0" }] },
  {
    hostname: svc("remote"),
    vips: [{ address: "10.96.0.41" }, { network: "west", address: "10.96.1.41" }],
    ports: { "80": 80 },
    endpoints: [{ workload: "west-0" }],
  },
  { hostname: svc("empty"), vips: [{ address: "10.96.0.42" }], ports: { "80": 80 }, endpoints: [] },
  { hostname: svc("proxied"), vips: [{ address: "10.96.0.43" }], ports: { "80": 80 }, endpoints: [{ workload: "gw-proxy" }] },
  {
    // Healthy non-candidates (tlsMode disabled, another network, no address) around one candidate.
    hostname: svc("mixed"),
    vips: [{ address: "10.96.0.50" }],
    ports: { "80": 80 },
    endpoints: [{ workload: "legacy-0" }, { workload: "west-0" }, { workload: "gw-proxy" }, { workload: "solo-0" }],
  },
  {
    // A healthy non-candidate and an unhealthy candidate: still panic routing to the candidate.
    hostname: svc("notpanic"),
    vips: [{ address: "10.96.0.51" }],
    ports: { "80": 8080 },
    endpoints: [{ workload: "legacy-0" }, { workload: "sick-0" }],
  },
  {
    hostname: svc("v6"),
    vips: [{ address: "10.96.0.60" }, { address: "fd00:96::60" }],
    ports: { "80": 8080 },
    endpoints: [{ workload: "v6-0" }],
  },
  {
    hostname: svc("web-west"),
    vips: [{ network: "west", address: "10.96.1.20" }],
    ports: { "80": 8080 },
    endpoints: [{ workload: "west-twin" }],
  },
];

const MESH = { workloads: WORKLOADS, services: SERVICES };
const CLIENT = { role: "client", ...MESH };
const SERVER = { role: "server", localWorkload: "10.1.0.2", ...MESH }; // web-1

// ---------------------------------------------------------------- what a connection sees

const SERVICE_PORT = "wasm.service_port";
const TARGET_PORT = "wasm.target_port";
const HBONE = "tunnel_port_hbone";
const INBOUND = "tunnel_port_inbound";
const SERVICE_PORT_STATE = "io.tunnel_port.service_port";
const PEER_STATE = "io.tunnel_port.peer_principal";
const AUTHORITY_STATE = "io.tunnel_port.authority";

const COUNTERS = [
  "client.tunneled",
  "client.panic_routing",
  "client.unknown_passthrough",
  "client.unknown_refused",
  "client.no_endpoint",
  "server.accepted",
  "server.refused_no_peer",
  "server.refused_missing_port",
  "server.refused_malformed_port",
  "server.refused_malformed_authority",
  "server.refused_foreign_authority",
  "server.refused_unserved_port",
  "server.refused_port_mismatch",
  "rejected",
] as const;
type CounterName = (typeof COUNTERS)[number];

const start = (config: unknown, options: HostOptions = {}): Promise<ProxyWasmHost> => startFilter("tunnel_port", config, options);

/** Every counter of the filter; the ones not named in `expected` must be 0. */
const assertCounters = counterAssertion("tunnel_port", COUNTERS);

/**
 * The four client writes of a tunnel, in the order the filter makes them. `authority`
 * (podIP:targetPort) is both the CONNECT's :authority (the shipped configs format it from
 * original_dst_address) and the tunnel's address (the HBONE cluster overrides its port).
 */
function tunnel(identity: string, authority: string, servicePort: number, cluster = HBONE): [string, string][] {
  return [
    [SAN, identity],
    [ORIGINAL_DST, authority],
    [SERVICE_PORT, String(servicePort)],
    [CLUSTER, cluster],
  ];
}

/** The three server writes of an accepted tunnel. */
function accepted(servicePort: number, targetPort: number, cluster = INBOUND): [string, string][] {
  return [
    [SERVICE_PORT, String(servicePort)],
    [TARGET_PORT, String(targetPort)],
    [CLUSTER, cluster],
  ];
}

const PASSTHROUGH: [string, string][] = [[DISABLE_TUNNELING, "true"]];

/** Closed by the filter with StopIteration, nothing written, one warn line, nothing reaches upstream. */
function assertClosed(host: ProxyWasmHost, conn: Connection, mentions: string[] = []): void {
  assertClosedByFilter(host, conn);
  assert.deepEqual(writes(conn), []);
  const warns = linesOf(host, conn, "warn");
  assert.equal(warns.length, 1, JSON.stringify(warns));
  for (const text of mentions) assert.ok(warns[0]!.includes(text), `${JSON.stringify(warns[0])} should mention ${text}`);
  assert.deepEqual(linesOf(host, conn, "error"), []);
  const sent = conn.downstreamData("secret");
  assert.equal(sent.status, "Closed");
  assert.equal(conn.upstreamBytes.length, 0);
}

/** google.protobuf.StringValue {1: value}, the serialized form of a filter-state string. */
function stringValue(value: string): Uint8Array {
  const bytes = new TextEncoder().encode(value);
  const length: number[] = [];
  let n = bytes.length;
  while (n >= 0x80) {
    length.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  length.push(n);
  return Uint8Array.from([0x0a, ...length, ...bytes]);
}

/**
 * A tunnel arriving at the server: CONNECT authority restored as the destination + shared state.
 * The termination also shares the authority's text; by default it is the destination as given
 * (`null`: not shared).
 */
function arriving(
  destination: string | undefined,
  servicePort?: string | Uint8Array,
  peer?: string | Uint8Array,
  authority: string | Uint8Array | null = destination ?? null,
): ConnectOptions {
  const filterState: Record<string, string | Uint8Array> = {};
  if (servicePort !== undefined) filterState[SERVICE_PORT_STATE] = servicePort;
  if (peer !== undefined) filterState[PEER_STATE] = peer;
  if (authority !== null) filterState[AUTHORITY_STATE] = authority;
  return { source: "127.0.0.6:40000", ...(destination !== undefined && { destination }), filterState };
}

/** The server-side identity of web-0 calling web-1. */
const PEER = ID.web0;

// ---------------------------------------------------------------- client: service VIPs

describe("tunnel_port client: a service VIP", () => {
  it("tunnels to podIP:targetPort (the :authority; the cluster dials the tunnel port), carrying the service port", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ source: "10.1.9.9:40000", destination: "10.96.0.10:80" });
    assertContinues(host, conn);
    // The cursor starts at the first endpoint: web-0, which uses the service default 8080.
    assert.deepEqual(writes(conn), tunnel(ID.web0, "10.1.0.1:8080", 80));
    assert.deepEqual(
      conn.filterStateWrites.map((w) => w.source),
      ["set_envoy_filter_state", "set_envoy_filter_state", "set_property", "set_envoy_filter_state"],
    );
    assertCounters(host, { "client.tunneled": 1 });
    assert.deepEqual(host.logLines("warn"), []);
    assert.deepEqual(host.logLines("error"), []);
  });

  it("alternates between two endpoints, each carrying its own target port (per-endpoint override)", async () => {
    const host = await start(CLIENT);
    const seen = [1, 2, 3, 4].map(() => writes(host.connect({ destination: "10.96.0.10:80" })));
    const web0 = tunnel(ID.web0, "10.1.0.1:8080", 80);
    const web1 = tunnel(ID.web1, "10.1.0.2:9090", 80); // web-1 overrides 80 -> 9090
    assert.deepEqual(seen, [web0, web1, web0, web1]);
    assertCounters(host, { "client.tunneled": 4 });
  });

  it("uses the service default target for a port the endpoint does not override", async () => {
    const host = await start(CLIENT);
    const first = host.connect({ destination: "10.96.0.10:443" });
    const second = host.connect({ destination: "10.96.0.10:443" });
    assert.deepEqual(writes(first), tunnel(ID.web0, "10.1.0.1:8443", 443));
    assert.deepEqual(writes(second), tunnel(ID.web1, "10.1.0.2:8443", 443));
  });

  it("advances the round-robin cursor once per connection of the service, whatever its port", async () => {
    const host = await start(CLIENT);
    const a = host.connect({ destination: "10.96.0.10:80" });
    const b = host.connect({ destination: "10.96.0.10:443" });
    const c = host.connect({ destination: "10.96.0.10:80" });
    assert.deepEqual(writes(a), tunnel(ID.web0, "10.1.0.1:8080", 80));
    assert.deepEqual(writes(b), tunnel(ID.web1, "10.1.0.2:8443", 443));
    assert.deepEqual(writes(c), tunnel(ID.web0, "10.1.0.1:8080", 80));
  });

  it("keeps one cursor per service: other services' and pod-IP connections do not move it", async () => {
    const host = await start(CLIENT);
    const first = host.connect({ destination: "10.96.0.10:80" });
    host.connect({ destination: "10.96.0.30:80" }); // sick
    host.connect({ destination: "10.96.0.20:8080" }); // api
    host.connect({ destination: "10.1.0.1:8080" }); // web-0 directly
    host.connect({ destination: "10.9.9.9:80" }); // unknown
    const second = host.connect({ destination: "10.96.0.10:80" });
    assert.deepEqual(writes(first), tunnel(ID.web0, "10.1.0.1:8080", 80));
    assert.deepEqual(writes(second), tunnel(ID.web1, "10.1.0.2:9090", 80));
  });

  it("uses the configured tunnelCluster", async () => {
    const host = await start({ ...CLIENT, tunnelCluster: "my_hbone" });
    const conn = host.connect({ destination: "10.96.0.10:80" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), tunnel(ID.web0, "10.1.0.1:8080", 80, "my_hbone"));
  });


  it("does not wait for the client's first bytes (server-first protocols)", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.96.0.10:80" });
    assertContinues(host, conn);
    assert.equal(conn.readDisabled, false);
    const greeting = conn.upstreamData("220 ready\r\n");
    assert.equal(greeting.status, "Continue");
    assert.equal(Buffer.from(conn.downstreamBytes).toString(), "220 ready\r\n");
    const reply = conn.downstreamData("EHLO x\r\n");
    assert.equal(reply.status, "Continue");
    assert.equal(Buffer.from(conn.upstreamBytes).toString(), "EHLO x\r\n");
    conn.end();
    assert.equal(host.failed, false);
  });
});

describe("tunnel_port client: endpoint health and candidates", () => {
  it("never picks an unhealthy endpoint while a healthy one exists", async () => {
    const host = await start(CLIENT);
    const picked = new Set<string>();
    for (let i = 0; i < 12; i++) picked.add(writes(host.connect({ destination: "10.96.0.20:8080" }))[0]![1]);
    assert.deepEqual([...picked].sort(), [ID.apiA, ID.apiC]);
    assertCounters(host, { "client.tunneled": 12 });
  });

  it("spreads connections evenly over the healthy endpoints (round robin)", async () => {
    // api: [api-a healthy, api-b unhealthy, api-c healthy]. Round robin over the healthy
    // candidates gives each of api-a and api-c half of the connections.
    const host = await start(CLIENT);
    const counts = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const identity = writes(host.connect({ destination: "10.96.0.20:8080" }))[0]![1];
      counts.set(identity, (counts.get(identity) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(counts), { [ID.apiA]: 150, [ID.apiC]: 150 });
  });

  it("routes to unhealthy endpoints in the same round-robin order when none is healthy (panic routing)", async () => {
    const host = await start(CLIENT);
    const seen = [1, 2, 3].map(() => host.connect({ destination: "10.96.0.30:80" }));
    for (const conn of seen) assertContinues(host, conn);
    const sick0 = tunnel(ID.sick0, "10.1.2.1:8080", 80);
    const sick1 = tunnel(ID.sick1, "10.1.2.2:8081", 80); // override 80 -> 8081
    assert.deepEqual(seen.map(writes), [sick0, sick1, sick0]);
    assertCounters(host, { "client.tunneled": 3, "client.panic_routing": 3 });
  });

  it("counts panic routing when only non-candidates are healthy", async () => {
    // notpanic: legacy-0 (healthy, tlsMode disabled) and sick-0 (unhealthy candidate).
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.96.0.51:80" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), tunnel(ID.sick0, "10.1.2.1:8080", 80));
    assertCounters(host, { "client.tunneled": 1, "client.panic_routing": 1 });
  });

  it("skips endpoints that are tlsMode disabled, on another network or without an address", async () => {
    // mixed: legacy-0 (disabled), west-0 (west), gw-proxy (no address), solo-0: always solo-0.
    const host = await start(CLIENT);
    for (let i = 0; i < 8; i++) {
      const conn = host.connect({ destination: "10.96.0.50:80" });
      assert.deepEqual(writes(conn), tunnel(ID.solo, "10.1.0.4:80", 80), `connection ${i}`);
    }
    assertCounters(host, { "client.tunneled": 8 });
  });

  const NO_ENDPOINT: [string, string][] = [
    ["only a tlsMode disabled endpoint", "10.96.0.40:80"],
    ["only an endpoint on another network", "10.96.0.41:80"],
    ["no endpoints at all", "10.96.0.42:80"],
    ["only an endpoint without an address (a remote proxy workload)", "10.96.0.43:80"],
  ];
  for (const [what, destination] of NO_ENDPOINT) {
    it(`closes a service with ${what}: no_endpoint, one warn line`, async () => {
      const host = await start(CLIENT);
      const conn = host.connect({ destination });
      assertClosed(host, conn, [destination]);
      assertCounters(host, { "client.no_endpoint": 1 });
    });
  }

  it("closes a service without a tunnelable endpoint even under unknownDestination passthrough or refuse", async () => {
    for (const unknownDestination of ["passthrough", "refuse"]) {
      const host = await start({ ...CLIENT, unknownDestination });
      assertClosed(host, host.connect({ destination: "10.96.0.40:80" }));
      assertCounters(host, { "client.no_endpoint": 1 });
    }
  });
});

// ---------------------------------------------------------------- client: pod IPs

describe("tunnel_port client: a pod IP", () => {
  it("tunnels to the pod with the dialled port as target and the mapping service port", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.1.0.1:8443" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), tunnel(ID.web0, "10.1.0.1:8443", 443));
    assertCounters(host, { "client.tunneled": 1 });
  });

  it("takes the first service in configuration order that maps to the dialled target", async () => {
    // web (80 -> 8080) comes before web-alt (70 -> 8080): 80, neither the lower port nor the last.
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.1.0.1:8080" });
    assert.deepEqual(writes(conn), tunnel(ID.web0, "10.1.0.1:8080", 80));
  });

  it("takes the config-order service over a later one for the same target on another pod", async () => {
    // web-1:8443 is web's 443 (service index 0) and admin's 9000 (index 2): web wins.
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.1.0.2:8443" });
    assert.deepEqual(writes(conn), tunnel(ID.web1, "10.1.0.2:8443", 443));
  });

  it("takes the HTTP route's service port only in canonical form (09000 is not 9000)", async () => {
    // web-1:8443 is web's 443 and admin's 9000; the route's cluster metadata may name either.
    const host = await start(CLIENT);
    const viaRoute = (servicePort: string) =>
      host.connect({ destination: "10.1.0.2:8443", properties: { metadata: { filter_metadata: { tunnel_port: { service_port: new TextEncoder().encode(servicePort) } } } } });
    assert.deepEqual(writes(viaRoute("9000")), tunnel(ID.web1, "10.1.0.2:8443", 9000));
    for (const spelling of ["09000", "+9000", " 9000", "9000 ", "9000,443", "0x2328"]) {
      assert.deepEqual(writes(viaRoute(spelling)), tunnel(ID.web1, "10.1.0.2:8443", 443), `route service port ${JSON.stringify(spelling)}`);
    }
    assertCounters(host, { "client.tunneled": 7 });
  });

  it("applies the pod's override: its overridden target maps back, the service default does not", async () => {
    const host = await start(CLIENT);
    const overridden = host.connect({ destination: "10.1.0.2:9090" });
    assert.deepEqual(writes(overridden), tunnel(ID.web1, "10.1.0.2:9090", 80));
    const serviceDefault = host.connect({ destination: "10.1.0.2:8080" });
    assertContinues(host, serviceDefault);
    assert.deepEqual(writes(serviceDefault), PASSTHROUGH);
    // ... and the override is web-1's only: web-0 does not serve 9090.
    const otherPod = host.connect({ destination: "10.1.0.1:9090" });
    assert.deepEqual(writes(otherPod), PASSTHROUGH);
    assertCounters(host, { "client.tunneled": 1, "client.unknown_passthrough": 2 });
  });

  it("does not take a service port dialled on a pod for a target port", async () => {
    // 80 is web's service port; web-0 serves it on 8080, so 10.1.0.1:80 is nothing known.
    const host = await start(CLIENT);
    assert.deepEqual(writes(host.connect({ destination: "10.1.0.1:80" })), PASSTHROUGH);
    assertCounters(host, { "client.unknown_passthrough": 1 });
  });

  it("closes a tlsMode disabled pod that a service maps: no_endpoint", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.1.0.3:80" });
    assertClosed(host, conn, ["10.1.0.3:80"]);
    assertCounters(host, { "client.no_endpoint": 1 });
  });

  it("tunnels to an unhealthy pod dialled directly (no choice to make), without panic", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.1.2.2:8081" });
    assert.deepEqual(writes(conn), tunnel(ID.sick1, "10.1.2.2:8081", 80));
    assertCounters(host, { "client.tunneled": 1 });
  });

  it("treats a pod that no service maps on that port as unknown", async () => {
    const host = await start(CLIENT);
    assert.deepEqual(writes(host.connect({ destination: "10.1.0.9:8080" })), PASSTHROUGH); // idle-0
    assert.deepEqual(writes(host.connect({ destination: "10.1.0.1:1234" })), PASSTHROUGH);
    assertCounters(host, { "client.unknown_passthrough": 2 });
  });

  it("finds a pod through an IPv4-mapped destination and writes its IPv4 address", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "[::ffff:10.1.0.2]:9090" });
    assert.deepEqual(writes(conn), tunnel(ID.web1, "10.1.0.2:9090", 80));
  });
});

// ---------------------------------------------------------------- client: IPv6

describe("tunnel_port client: IPv6", () => {
  it("brackets an IPv6 pod in the tunnel address and the authority (IPv6 VIP)", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "[fd00:96::60]:80" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), tunnel(ID.v6, "[fd00:1::1]:8080", 80));
  });

  it("reaches an IPv6 pod through the service's IPv4 VIP", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.96.0.60:80" });
    assert.deepEqual(writes(conn), tunnel(ID.v6, "[fd00:1::1]:8080", 80));
  });

  it("tunnels to an IPv6 pod dialled directly, in canonical spelling", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "[FD00:1:0:0:0:0:0:1]:8080" });
    assert.deepEqual(writes(conn), tunnel(ID.v6, "[fd00:1::1]:8080", 80));
    assertCounters(host, { "client.tunneled": 1 });
  });

  it("passes an unknown IPv6 address through", async () => {
    const host = await start(CLIENT);
    assert.deepEqual(writes(host.connect({ destination: "[fd00:1::99]:8080" })), PASSTHROUGH);
    assertCounters(host, { "client.unknown_passthrough": 1 });
  });
});

// ---------------------------------------------------------------- client: networks

describe("tunnel_port client: the local network", () => {
  it("does not see another network's VIP or pods from the default network", async () => {
    const host = await start(CLIENT);
    assert.deepEqual(writes(host.connect({ destination: "10.96.1.10:80" })), PASSTHROUGH); // web's west VIP
    assert.deepEqual(writes(host.connect({ destination: "10.2.0.1:80" })), PASSTHROUGH); // west-0
    assertCounters(host, { "client.unknown_passthrough": 2 });
  });

  it("takes the local network's pod when the same IP exists on two networks", async () => {
    // 10.1.0.1 is web-0 here and west-twin on west (which web-west maps 80 -> 8080).
    const local = await start(CLIENT);
    assert.deepEqual(writes(local.connect({ destination: "10.1.0.1:8080" })), tunnel(ID.web0, "10.1.0.1:8080", 80));
    const west = await start({ ...CLIENT, localNetwork: "west" });
    assert.deepEqual(
      writes(west.connect({ destination: "10.1.0.1:8080" })),
      tunnel(ID.westTwin, "10.1.0.1:8080", 80),
    );
  });

  it("decides on the configured localNetwork's VIPs and endpoints only", async () => {
    const host = await start({ ...CLIENT, localNetwork: "west" });
    // remote's west VIP: west-0 is local now.
    const remote = host.connect({ destination: "10.96.1.41:80" });
    assert.deepEqual(writes(remote), tunnel(ID.west, "10.2.0.1:80", 80));
    // web's west VIP: web-0 and web-1 live on the default network, which is remote now.
    assertClosed(host, host.connect({ destination: "10.96.1.10:80" }));
    // The default network's VIP is unknown from west.
    assert.deepEqual(writes(host.connect({ destination: "10.96.0.10:80" })), PASSTHROUGH);
    assertCounters(host, { "client.tunneled": 1, "client.no_endpoint": 1, "client.unknown_passthrough": 1 });
  });
});

// ---------------------------------------------------------------- client: unknown destinations

const UNKNOWN: [string, ConnectOptions][] = [
  ["an IP that is neither VIP nor pod", { destination: "10.9.9.9:80" }],
  ["a VIP on a port the service does not expose", { destination: "10.96.0.10:81" }],
  ["a pod on a port no service maps", { destination: "10.1.0.1:1234" }],
  ["a pod on another network", { destination: "10.2.0.1:80" }],
  ["a connection without destination", {}],
  ["an unparsable destination", { destination: "not-an-ip" }],
  ["a destination without port", { destination: "10.96.0.10" }],
  ["a VIP dialled on port 0, a port no service lists", { destination: "10.96.0.10:0" }],
];

describe("tunnel_port client: unknown destinations", () => {
  for (const [what, options] of UNKNOWN) {
    it(`passes ${what} through untunneled by default`, async () => {
      const host = await start(CLIENT);
      const conn = host.connect(options);
      assertContinues(host, conn);
      assert.deepEqual(writes(conn), PASSTHROUGH);
      assertCounters(host, { "client.unknown_passthrough": 1 });
      assert.deepEqual(host.logLines("warn"), []);
    });

    it(`refuses ${what} under unknownDestination refuse`, async () => {
      const host = await start({ ...CLIENT, unknownDestination: "refuse" });
      const conn = host.connect(options);
      assertClosed(host, conn);
      assertCounters(host, { "client.unknown_refused": 1 });
    });
  }

  it("passes through with unknownDestination passthrough written explicitly", async () => {
    const host = await start({ ...CLIENT, unknownDestination: "passthrough" });
    const conn = host.connect({ destination: "10.9.9.9:80" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), PASSTHROUGH);
    assertCounters(host, { "client.unknown_passthrough": 1 });
  });

  it("lets data flow both ways on a passed-through connection", async () => {
    const host = await start(CLIENT);
    const conn = host.connect({ destination: "10.9.9.9:80" });
    assert.equal(conn.upstreamData("banner").status, "Continue");
    assert.equal(conn.downstreamData("hello").status, "Continue");
    assert.equal(Buffer.from(conn.downstreamBytes).toString(), "banner");
    assert.equal(Buffer.from(conn.upstreamBytes).toString(), "hello");
  });

  it("still tunnels known destinations under unknownDestination refuse", async () => {
    const host = await start({ ...CLIENT, unknownDestination: "refuse" });
    assert.deepEqual(writes(host.connect({ destination: "10.96.0.10:80" })), tunnel(ID.web0, "10.1.0.1:8080", 80));
    assertCounters(host, { "client.tunneled": 1 });
  });

  it("passes everything through when the mesh is empty", async () => {
    const host = await start({ role: "client" });
    const conn = host.connect({ destination: "10.96.0.10:80" });
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), PASSTHROUGH);
    assertCounters(host, { "client.unknown_passthrough": 1 });
  });
});

// ---------------------------------------------------------------- server

describe("tunnel_port server: accepting a tunnel", () => {
  it("accepts a served (service port, target port) pair from an mTLS peer and exposes both ports", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:9090", "80", PEER));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 9090));
    assert.deepEqual(
      conn.filterStateWrites.filter((w) => w.source !== "existing").map((w) => w.source),
      ["set_property", "set_property", "set_envoy_filter_state"],
    );
    assertCounters(host, { "server.accepted": 1 });
    assert.deepEqual(host.logLines("warn"), []);
  });

  const FORMS: [string, string | Uint8Array, string | Uint8Array][] = [
    ["raw bytes", "80", PEER],
    ["protobuf StringValues", stringValue("80"), stringValue(PEER)],
    ["a raw port and a StringValue peer", "80", stringValue(PEER)],
    ["a StringValue port and a raw peer", stringValue("80"), PEER],
  ];
  for (const [what, port, peer] of FORMS) {
    it(`reads the carried values as ${what}`, async () => {
      const host = await start(SERVER);
      const conn = host.connect(arriving("10.1.0.2:9090", port, peer));
      assertContinues(host, conn);
      assert.deepEqual(writes(conn), accepted(80, 9090));
      assertCounters(host, { "server.accepted": 1 });
    });
  }

  // SPIFFE IDs are not limited to 127 bytes (a 63-character namespace and a long service account).
  const LONG_PEER = sa("s".repeat(100), "n".repeat(40));

  it("accepts a long peer identity (over 127 bytes) as raw bytes", async () => {
    assert.ok(LONG_PEER.length > 127);
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:9090", "80", LONG_PEER));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 9090));
  });

  it("accepts a long peer identity (over 127 bytes) as a StringValue (two-byte length varint)", async () => {
    const peer = stringValue(LONG_PEER);
    assert.deepEqual([...peer.subarray(0, 3)], [0x0a, 0x80 | (LONG_PEER.length & 0x7f), LONG_PEER.length >> 7]);
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:9090", "80", peer));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 9090));
    assertCounters(host, { "server.accepted": 1 });
  });

  it("accepts every pair the workload serves, over every service listing it, overrides applied", async () => {
    // web-1: web 80 -> 9090 (override), web 443 -> 8443, admin 9000 -> 8443.
    const host = await start(SERVER);
    for (const [servicePort, target] of [
      [80, 9090],
      [443, 8443],
      [9000, 8443],
    ] as const) {
      const conn = host.connect(arriving(`10.1.0.2:${target}`, String(servicePort), PEER));
      assertContinues(host, conn);
      assert.deepEqual(writes(conn), accepted(servicePort, target));
    }
    assertCounters(host, { "server.accepted": 3 });
  });

  it("routes to the configured appCluster", async () => {
    const host = await start({ ...SERVER, appCluster: "inbound|9090||" });
    assert.deepEqual(writes(host.connect(arriving("10.1.0.2:9090", "80", PEER))), accepted(80, 9090, "inbound|9090||"));
  });

  it("accepts an IPv6 workload's authority", async () => {
    const host = await start({ ...SERVER, localWorkload: "fd00:1::1" });
    const conn = host.connect(arriving("[fd00:1::1]:8080", "80", PEER));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 8080));
  });

  it("refuses an IPv4-mapped authority of the workload: one address, one spelling", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("[::ffff:10.1.0.2]:9090", "80", PEER));
    assertClosed(host, conn);
    assertCounters(host, { "server.refused_malformed_authority": 1 });
  });

  it("refuses an IPv6 authority not in RFC 5952 form (the parsed address is the workload's)", async () => {
    const host = await start({ ...SERVER, localWorkload: "fd00:1::1" });
    for (const spelling of ["[fd00:1:0::1]:8080", "[FD00:1::1]:8080", "[fd00:0001::1]:8080", "[fd00:1:0:0:0:0:0:1]:8080"]) {
      assertClosed(host, host.connect(arriving("[fd00:1::1]:8080", "80", PEER, spelling)));
    }
    assertCounters(host, { "server.refused_malformed_authority": 4 });
  });

  it("accepts the authority text as a StringValue", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:9090", "80", PEER, stringValue("10.1.0.2:9090")));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 9090));
  });

  it("serves on a localNetwork other than the default one", async () => {
    const host = await start({ ...SERVER, localNetwork: "west", localWorkload: "10.1.0.1" }); // west-twin
    assert.deepEqual(writes(host.connect(arriving("10.1.0.1:8080", "80", PEER))), accepted(80, 8080));
  });

  it("does not wait for the client's first bytes (server-first protocols)", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:9090", "80", PEER));
    assert.equal(conn.readDisabled, false);
    assert.equal(conn.upstreamData("* OK IMAP ready\r\n").status, "Continue");
    assert.equal(Buffer.from(conn.downstreamBytes).toString(), "* OK IMAP ready\r\n");
  });
});

describe("tunnel_port server: refusing spoofed or missing values", () => {
  const REFUSALS: [string, ConnectOptions, CounterName][] = [
    // peer
    ["no peer principal", arriving("10.1.0.2:9090", "80"), "server.refused_no_peer"],
    ['the peer "-" (no client certificate)', arriving("10.1.0.2:9090", "80", "-"), "server.refused_no_peer"],
    ['the peer "-" as a StringValue', arriving("10.1.0.2:9090", "80", stringValue("-")), "server.refused_no_peer"],
    ["an empty peer", arriving("10.1.0.2:9090", "80", ""), "server.refused_no_peer"],
    ["an empty StringValue peer", arriving("10.1.0.2:9090", "80", stringValue("")), "server.refused_no_peer"],
    ["a peer that is not a SPIFFE URI", arriving("10.1.0.2:9090", "80", "https://evil.example/ns/default/sa/web"), "server.refused_no_peer"],
    ['a peer "spiffe:/" with one slash', arriving("10.1.0.2:9090", "80", "spiffe:/evil.example/ns/default/sa/web"), "server.refused_no_peer"],
    ["an upper-case SPIFFE scheme", arriving("10.1.0.2:9090", "80", "SPIFFE://cluster.local/ns/default/sa/web"), "server.refused_no_peer"],
    ["no peer and no service port (peer checked first)", arriving("10.1.0.2:9090"), "server.refused_no_peer"],
    ["no peer and a foreign authority", arriving("10.1.0.1:8080", "80"), "server.refused_no_peer"],
    // service port / destination
    ["no service port", arriving("10.1.0.2:9090", undefined, PEER), "server.refused_missing_port"],
    ["an empty service port", arriving("10.1.0.2:9090", "", PEER), "server.refused_missing_port"],
    ["an empty StringValue service port", arriving("10.1.0.2:9090", stringValue(""), PEER), "server.refused_missing_port"],
    // service port present but not one canonical port (ASCII decimal 1-65535, nothing else)
    ["a service port that is not decimal", arriving("10.1.0.2:9090", "http", PEER), "server.refused_malformed_port"],
    ["a service port 0", arriving("10.1.0.2:9090", "0", PEER), "server.refused_malformed_port"],
    ["a service port above 65535", arriving("10.1.0.2:9090", "65616", PEER), "server.refused_malformed_port"],
    ["a service port 65536", arriving("10.1.0.2:9090", "65536", PEER), "server.refused_malformed_port"],
    ["a service port with a leading zero (081 is not 81 to RBAC)", arriving("10.1.0.2:9090", "081", PEER), "server.refused_malformed_port"],
    ["a service port 080", arriving("10.1.0.2:9090", "080", PEER), "server.refused_malformed_port"],
    ["a service port 00080", arriving("10.1.0.2:9090", "00080", PEER), "server.refused_malformed_port"],
    ["a signed service port", arriving("10.1.0.2:9090", "+80", PEER), "server.refused_malformed_port"],
    ["a service port with a trailing space", arriving("10.1.0.2:9090", "80 ", PEER), "server.refused_malformed_port"],
    ["a service port with a leading space", arriving("10.1.0.2:9090", " 80", PEER), "server.refused_malformed_port"],
    ["a hex service port", arriving("10.1.0.2:9090", "0x50", PEER), "server.refused_malformed_port"],
    ["a service port with a trailing letter", arriving("10.1.0.2:9090", "80a", PEER), "server.refused_malformed_port"],
    ["a very long service port", arriving("10.1.0.2:9090", "8".repeat(10_000), PEER), "server.refused_malformed_port"],
    ["a repeated header as the termination shares it (81,80)", arriving("10.1.0.2:9090", "81,80", PEER), "server.refused_malformed_port"],
    ["a repeated header in the other order (80,81)", arriving("10.1.0.2:9090", "80,81", PEER), "server.refused_malformed_port"],
    ["the same value twice (80,80)", arriving("10.1.0.2:9090", "80,80", PEER), "server.refused_malformed_port"],
    ["a repeated header as a StringValue", arriving("10.1.0.2:9090", stringValue("80,443"), PEER), "server.refused_malformed_port"],
    ["a service port as an int64", arriving("10.1.0.2:9090", Uint8Array.from([80, 0, 0, 0, 0, 0, 0, 0]), PEER), "server.refused_malformed_port"],
    ["a StringValue service port that is not decimal", arriving("10.1.0.2:9090", stringValue("8o"), PEER), "server.refused_malformed_port"],
    ["a StringValue service port with a leading zero", arriving("10.1.0.2:9090", stringValue("081"), PEER), "server.refused_malformed_port"],
    ["a malformed service port and a foreign authority (port checked first)", arriving("10.1.0.1:8080", "081", PEER), "server.refused_malformed_port"],
    // the authority's text, against the destination Envoy parsed from it
    ["no authority text", arriving("10.1.0.2:9090", "80", PEER, null), "server.refused_missing_port"],
    ["an empty authority text", arriving("10.1.0.2:9090", "80", PEER, ""), "server.refused_missing_port"],
    ["a target port with a leading zero (original_dst reads 09090 as 9090)", arriving("10.1.0.2:9090", "80", PEER, "10.1.0.2:09090"), "server.refused_malformed_authority"],
    ["a signed target port", arriving("10.1.0.2:9090", "80", PEER, "10.1.0.2:+9090"), "server.refused_malformed_authority"],
    ["an authority naming another port than the destination", arriving("10.1.0.2:9090", "80", PEER, "10.1.0.2:8443"), "server.refused_malformed_authority"],
    ["an authority naming another address than the destination", arriving("10.1.0.2:9090", "80", PEER, "10.1.0.1:9090"), "server.refused_malformed_authority"],
    ["a repeated authority", arriving("10.1.0.2:9090", "80", PEER, "10.1.0.2:9090,10.1.0.2:9090"), "server.refused_malformed_authority"],
    ["a malformed authority and a malformed service port (port checked first)", arriving("10.1.0.2:9090", "081", PEER, "10.1.0.2:09090"), "server.refused_malformed_port"],
    ["no destination", arriving(undefined, "80", PEER), "server.refused_missing_port"],
    ["an unparsable destination", arriving("10.1.0.2", "80", PEER), "server.refused_missing_port"],
    ["no service port and a foreign authority (port checked first)", arriving("10.1.0.1:8080", undefined, PEER), "server.refused_missing_port"],
    // authority
    ["another workload's IP in the authority", arriving("10.1.0.1:8080", "80", PEER), "server.refused_foreign_authority"],
    ["an IP that is no workload", arriving("10.9.9.9:9090", "80", PEER), "server.refused_foreign_authority"],
    ["a service VIP as authority", arriving("10.96.0.10:80", "80", PEER), "server.refused_foreign_authority"],
    ["another network's pod IP", arriving("10.2.0.1:80", "80", PEER), "server.refused_foreign_authority"],
    ["a foreign authority with an unserved port (authority checked first)", arriving("10.1.0.1:1", "80", PEER), "server.refused_foreign_authority"],
    // target port
    ["a forged authority naming an unserved port", arriving("10.1.0.2:22", "80", PEER), "server.refused_unserved_port"],
    ["the service default target this pod overrides", arriving("10.1.0.2:8080", "80", PEER), "server.refused_unserved_port"],
    ["the tunnel port itself", arriving("10.1.0.2:15008", "80", PEER), "server.refused_unserved_port"],
    ["the service port as target", arriving("10.1.0.2:80", "80", PEER), "server.refused_unserved_port"],
    // pair
    ["a service port that maps to another target", arriving("10.1.0.2:9090", "443", PEER), "server.refused_port_mismatch"],
    ["a service port this workload does not serve", arriving("10.1.0.2:9090", "8080", PEER), "server.refused_port_mismatch"],
    ["a pair from another service's mapping", arriving("10.1.0.2:9090", "9000", PEER), "server.refused_port_mismatch"],
    ["web's port 80 on admin's target", arriving("10.1.0.2:8443", "80", PEER), "server.refused_port_mismatch"],
  ];

  for (const [what, options, counter] of REFUSALS) {
    it(`refuses ${what}: ${counter.slice("server.".length)}`, async () => {
      const host = await start(SERVER);
      const conn = host.connect(options);
      assertClosed(host, conn);
      assertCounters(host, { [counter]: 1 });
    });
  }

  it("names the destination in the refusal line", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.1.0.2:22", "80", PEER));
    assertClosed(host, conn, ["10.1.0.2:22"]);
  });

  it("says the rule in the refusal line: the carried service port for a mismatch, the spelling rule for a malformed port", async () => {
    const host = await start(SERVER);
    assertClosed(host, host.connect(arriving("10.1.0.2:9090", "443", PEER)), ["refused tunnel to 10.1.0.2:9090: service port 443 does not map to that target port here"]);
    assertClosed(host, host.connect(arriving("10.1.0.2:9090", "081", PEER)), ["refused tunnel to 10.1.0.2:9090: the service port is not exactly one canonical decimal 1-65535"]);
  });

  it("with warn lines off, still refuses and counts every rule, and logs nothing", async () => {
    const host = await start(SERVER, { logLevel: "error" });
    for (const options of [arriving("10.1.0.2:9090", "80"), arriving("10.1.0.2:9090", "081", PEER), arriving("10.1.0.2:9090", "443", PEER), arriving("10.1.0.1:8080", "80", PEER)]) {
      assert.equal(host.connect(options).closed, true);
    }
    assertCounters(host, { "server.refused_no_peer": 1, "server.refused_malformed_port": 1, "server.refused_port_mismatch": 1, "server.refused_foreign_authority": 1 });
    assert.deepEqual(host.logLines("warn"), []);
  });

  it("keeps accepting valid tunnels after every kind of refusal on one VM", async () => {
    const host = await start(SERVER);
    for (const [, options] of REFUSALS) host.connect(options).end();
    assert.equal(host.failed, false, host.trapMessage ?? "");
    const conn = host.connect(arriving("10.1.0.2:9090", "80", PEER));
    assertContinues(host, conn);
    assert.deepEqual(writes(conn), accepted(80, 9090));
  });

  it("never acts as a client: a server connection to a VIP with valid values is still checked as a server", async () => {
    const host = await start(SERVER);
    const conn = host.connect(arriving("10.96.0.10:80", "80", PEER));
    assertClosed(host, conn);
    assertCounters(host, { "server.refused_foreign_authority": 1 });
  });
});

// ---------------------------------------------------------------- Envoy refusing a write

function assertRejected(host: ProxyWasmHost, conn: Connection): void {
  assertClosedByFilter(host, conn);
  assertCounters(host, { rejected: 1 });
  assert.equal(conn.filterState.get(CLUSTER), undefined);
  assert.equal(host.logLines("error").length, 1);
  assert.equal(conn.downstreamData("secret").status, "Closed");
  assert.equal(conn.upstreamBytes.length, 0);
}

describe("tunnel_port: Envoy refusing a write closes the connection", () => {
  it("client: identity pin refused, nothing written after it", async () => {
    const host = await start(CLIENT);
    const conn = withRefusal({ filterStateKey: SAN }, () => host.connect({ destination: "10.96.0.10:80" }));
    assertRejected(host, conn);
    assert.deepEqual(writes(conn), []);
  });

  it("client: service_port property refused", async () => {
    const host = await start(CLIENT);
    const conn = withRefusal({ property: "service_port" }, () => host.connect({ destination: "10.96.0.10:80" }));
    assertRejected(host, conn);
    assert.deepEqual(writes(conn), [
      [SAN, ID.web0],
      [ORIGINAL_DST, "10.1.0.1:8080"],
    ]);
  });

  it("client: cluster refused", async () => {
    const host = await start(CLIENT);
    assertRejected(host, withRefusal({ filterStateKey: CLUSTER }, () => host.connect({ destination: "10.96.0.10:80" })));
  });

  it("client: disable_tunneling refused for an unknown destination", async () => {
    const host = await start(CLIENT);
    assertRejected(host, withRefusal({ filterStateKey: DISABLE_TUNNELING }, () => host.connect({ destination: "10.9.9.9:80" })));
  });

  it("server: target_port property refused", async () => {
    const host = await start(SERVER);
    assertRejected(host, withRefusal({ property: "target_port" }, () => host.connect(arriving("10.1.0.2:9090", "80", PEER))));
  });
});

// ---------------------------------------------------------------- bad configuration

describe("tunnel_port: invalid configuration", () => {
  const CLIENT_KNOWN = "role, localNetwork, meshFeed, tunnelCluster, unknownDestination, workloads, services";
  const SERVER_KNOWN = "role, localNetwork, meshFeed, localWorkload, appCluster, workloads, services";
  // A field neither role knows is refused while the configuration streams, before the role is read.
  const ANY_KNOWN = "role, localNetwork, meshFeed, tunnelCluster, unknownDestination, localWorkload, appCluster, workloads, services";
  const BAD: [string, unknown, string][] = [
    ["a missing role", {}, "role: missing required field"],
    ["a null role", { role: null }, "role: missing required field"],
    ["a bad role", { role: "both" }, "role: expected one of: client, server"],
    ["a role in the wrong case", { role: "Client" }, "role: expected one of: client, server"],
    ["a role that is not a string", { role: 1 }, "role: expected one of: client, server"],
    ["tunnelPort (now the HBONE cluster's upstream_port_override)", { ...CLIENT, tunnelPort: 15008 }, `tunnelPort: unknown field (known: ${ANY_KNOWN})`],
    ["an unknown top-level field", { ...CLIENT, tunnel_port: 15008 }, `tunnel_port: unknown field (known: ${ANY_KNOWN})`],
    ["a server field on a client", { ...CLIENT, localWorkload: "10.1.0.2" }, `localWorkload: unknown field (known: ${CLIENT_KNOWN})`],
    ["appCluster on a client", { role: "client", appCluster: "x" }, `appCluster: unknown field (known: ${CLIENT_KNOWN})`],
    ["a client field on a server", { ...SERVER, tunnelCluster: "tunnel_port_hbone" }, `tunnelCluster: unknown field (known: ${SERVER_KNOWN})`],
    ["tunnelCluster on a server", { ...SERVER, tunnelCluster: "x" }, `tunnelCluster: unknown field (known: ${SERVER_KNOWN})`],
    ["unknownDestination on a server", { ...SERVER, unknownDestination: "refuse" }, `unknownDestination: unknown field (known: ${SERVER_KNOWN})`],
    ["a localNetwork that is not a string", { role: "client", localNetwork: 1 }, "localNetwork: expected a string"],
    ["an empty tunnelCluster", { role: "client", tunnelCluster: "" }, "tunnelCluster: must not be empty"],
    ["a tunnelCluster that is not a string", { role: "client", tunnelCluster: 7 }, "tunnelCluster: expected a string"],
    ["a bad unknownDestination", { role: "client", unknownDestination: "drop" }, "unknownDestination: expected one of: passthrough, refuse"],
    ["an unknownDestination that is not a string", { role: "client", unknownDestination: true }, "unknownDestination: expected one of: passthrough, refuse"],
    ["a server without localWorkload", { role: "server", ...MESH }, "localWorkload: missing required field"],
    ["a localWorkload that is not a string", { ...SERVER, localWorkload: 10 }, "localWorkload: expected a string"],
    ["a localWorkload that is a uid", { ...SERVER, localWorkload: "web-1" }, 'localWorkload: not an IP address: "web-1"'],
    ["a localWorkload with a port", { ...SERVER, localWorkload: "10.1.0.2:80" }, 'localWorkload: not an IP address: "10.1.0.2:80"'],
    ["a localWorkload no workload has", { ...SERVER, localWorkload: "10.9.9.9" }, "localWorkload: no workload has address 10.9.9.9 on this network"],
    ["a localWorkload that is a VIP", { ...SERVER, localWorkload: "10.96.0.10" }, "localWorkload: no workload has address 10.96.0.10 on this network"],
    ["a localWorkload on another network", { ...SERVER, localWorkload: "10.2.0.1" }, "localWorkload: no workload has address 10.2.0.1 on this network"],
    [
      "a localWorkload on a localNetwork nobody uses",
      { ...SERVER, localNetwork: "east" },
      "localWorkload: no workload has address 10.1.0.2 on this network",
    ],
    [
      "a localWorkload that is an endpoint of no service",
      { ...SERVER, localWorkload: "10.1.0.9" },
      "localWorkload: workload 10.1.0.9 is an endpoint of no service: it serves no port",
    ],
    ["an empty appCluster", { ...SERVER, appCluster: "" }, "appCluster: must not be empty"],
    ["an appCluster that is not a string", { ...SERVER, appCluster: false }, "appCluster: expected a string"],
    [
      "a mesh error",
      { role: "client", workloads: [{ uid: "a", addresses: ["10.0.0.1"], tlsMode: "istio" }] },
      'workloads[0].identity: required when tlsMode is "istio"',
    ],
    ["an array root", [], "(root): expected an object"],
    ["a null root", null, "(root): expected an object"],
    ["invalid JSON", '{"role": "client"', "byte 17: unexpected end of input"],
    ["an empty configuration", "", "byte 0: unexpected end of input"],
  ];

  for (const [what, config, message] of BAD) {
    it(`refuses ${what} with one error line naming it, without trapping`, async () => {
      await assertConfigRefused("tunnel_port", config, message);
    });
  }

  it("accepts a minimal client and a minimal server", async () => {
    await start({ role: "client" });
    await start({
      role: "server",
      localWorkload: "10.0.0.1",
      workloads: [{ uid: "w", addresses: ["10.0.0.1"] }],
      services: [{ hostname: "s", ports: { "80": 8080 }, endpoints: [{ workload: "w" }] }],
    });
  });

  it("keeps serving the previous configuration when a reconfiguration is refused", async () => {
    const host = await start(CLIENT);
    assert.equal(host.reconfigure(JSON.stringify({ ...CLIENT, tunnelCluster: "" })), false);
    assert.equal(host.failed, false);
    assert.deepEqual(writes(host.connect({ destination: "10.96.0.10:80" })), tunnel(ID.web0, "10.1.0.1:8080", 80));
  });
});

// ---------------------------------------------------------------- logs

describe("tunnel_port: logs", () => {
  const DECISIONS: [string, unknown, ConnectOptions, RegExp][] = [
    [
      "tunnel",
      CLIENT,
      { destination: "10.96.0.10:80" },
      /^10\.96\.0\.10:80 -> tunnel to 10\.1\.0\.1:8080 .*service port 80\b.*sa\/web-0/,
    ],
    ["panic tunnel", CLIENT, { destination: "10.96.0.30:80" }, /^10\.96\.0\.30:80 -> .*sa\/sick-0.*panic/],
    ["IPv6 tunnel", CLIENT, { destination: "[fd00:96::60]:80" }, /tunnel to \[fd00:1::1\]:8080 /],
    ["unknown passthrough", CLIENT, { destination: "10.9.9.9:80" }, /^10\.9\.9\.9:80 -> .*unknown/],
    ["no destination passthrough", CLIENT, {}, /unknown/],
    ["server accept", SERVER, arriving("10.1.0.2:9090", "80", PEER), /10\.1\.0\.2:9090.*service port 80.*target port 9090/],
  ];

  for (const [what, config, options, line] of DECISIONS) {
    it(`logs one debug line for the ${what} decision at debug level`, async () => {
      const host = await start(config, { logLevel: "debug" });
      const conn = host.connect(options);
      assert.equal(host.failed, false);
      const lines = linesOf(host, conn);
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.deepEqual(linesOf(host, conn, "debug"), lines);
      assert.match(lines[0]!, line);
    });

    it(`logs nothing for the ${what} decision at info level, and does not even send the debug line`, async () => {
      const host = await start(config, { logLevel: "info" });
      const before = host.logs().length;
      const conn = host.connect(options);
      const atInfo = conn.hostCalls;
      conn.end();
      assert.deepEqual(host.logs().slice(before), []);
      const atDebug = (await start(config, { logLevel: "debug" })).connect(options).hostCalls;
      assert.equal(atInfo, atDebug - 1);
    });
  }

  const REFUSED: [string, unknown, ConnectOptions, RegExp][] = [
    ["no endpoint", CLIENT, { destination: "10.96.0.40:80" }, /10\.96\.0\.40:80/],
    ["unknown refused", { ...CLIENT, unknownDestination: "refuse" }, { destination: "10.9.9.9:80" }, /10\.9\.9\.9:80.*unknown/],
    ["server no peer", SERVER, arriving("10.1.0.2:9090", "80", "-"), /peer/],
    ["server missing port", SERVER, arriving("10.1.0.2:9090", "x", PEER), /port/],
    ["server foreign authority", SERVER, arriving("10.1.0.1:8080", "80", PEER), /10\.1\.0\.1:8080/],
    ["server unserved port", SERVER, arriving("10.1.0.2:22", "80", PEER), /10\.1\.0\.2:22/],
    ["server port mismatch", SERVER, arriving("10.1.0.2:9090", "443", PEER), /443/],
  ];
  for (const [what, config, options, line] of REFUSED) {
    it(`logs exactly one warn line for the ${what} decision, at info and at debug level`, async () => {
      for (const logLevel of ["info", "debug"] as const) {
        const host = await start(config, { logLevel });
        const conn = host.connect(options);
        const lines = linesOf(host, conn);
        assert.equal(lines.length, 1, `${logLevel}: ${JSON.stringify(lines)}`);
        assert.deepEqual(linesOf(host, conn, "warn"), lines);
        assert.match(lines[0]!, line);
      }
    });
  }
});

// ---------------------------------------------------------------- scale

describe("tunnel_port: 10,000 connections", () => {
  const snapshot = (conn: Connection) => ({
    status: conn.status,
    closed: conn.closed,
    writes: conn.filterStateWrites.filter((w) => w.source !== "existing").map((w) => [w.source, w.key, w.value]),
    hostCalls: conn.hostCalls,
  });

  it("client: decides the same way after 10,000 connections, round robin still alternating", { timeout: 300_000 }, async () => {
    const host = await start(CLIENT);
    // A round: two web connections (web-0 then web-1), two sick (sick-0 then sick-1, panic), and
    // one of each other kind. Each round leaves every cursor where it started.
    const kinds: ConnectOptions[] = [
      { destination: "10.96.0.10:80" },
      { destination: "10.96.0.10:80" },
      { destination: "10.96.0.30:80" },
      { destination: "10.96.0.30:80" },
      { destination: "10.1.0.2:9090" },
      { destination: "[fd00:96::60]:80" },
      { destination: "10.9.9.9:80" },
      { destination: "10.96.0.40:80" },
      {},
    ];
    const round = () =>
      kinds.map((options) => {
        const conn = host.connect(options);
        const seen = snapshot(conn);
        conn.end();
        return seen;
      });
    const first = round();
    assert.deepEqual(first[0]!.writes.map((w) => w[2]), tunnel(ID.web0, "10.1.0.1:8080", 80).map((w) => w[1]));
    assert.deepEqual(first[1]!.writes.map((w) => w[2]), tunnel(ID.web1, "10.1.0.2:9090", 80).map((w) => w[1]));
    const ROUNDS = 1_112; // 9 kinds x 1,112 = 10,008 connections
    for (let r = 0; r < ROUNDS; r++) {
      for (const options of kinds) host.connect(options).end();
    }
    assert.equal(host.failed, false, host.trapMessage ?? "");
    assert.deepEqual(round(), first);
    const perKind = ROUNDS + 2;
    assertCounters(host, {
      "client.tunneled": 6 * perKind,
      "client.panic_routing": 2 * perKind,
      "client.unknown_passthrough": 2 * perKind,
      "client.no_endpoint": perKind,
    });
    assert.equal(host.liveContexts, 1);
  });

  it("server: decides the same way after 10,000 connections", { timeout: 300_000 }, async () => {
    const host = await start(SERVER);
    const kinds: ConnectOptions[] = [
      arriving("10.1.0.2:9090", "80", PEER),
      arriving("10.1.0.2:8443", stringValue("9000"), stringValue(PEER)),
      arriving("10.1.0.2:9090", "80", "-"),
      arriving("10.1.0.2:9090", undefined, PEER),
      arriving("10.1.0.2:9090", "081", PEER),
      arriving("10.1.0.1:8080", "80", PEER),
      arriving("10.1.0.2:22", "80", PEER),
      arriving("10.1.0.2:9090", "443", PEER),
    ];
    const round = () =>
      kinds.map((options) => {
        const conn = host.connect(options);
        const seen = snapshot(conn);
        conn.end();
        return seen;
      });
    const first = round();
    const ROUNDS = 1_250; // 8 x 1,250 = 10,000
    for (let r = 0; r < ROUNDS; r++) {
      for (const options of kinds) host.connect(options).end();
    }
    assert.equal(host.failed, false, host.trapMessage ?? "");
    assert.deepEqual(round(), first);
    const perKind = ROUNDS + 2;
    assertCounters(host, {
      "server.accepted": 2 * perKind,
      "server.refused_no_peer": perKind,
      "server.refused_missing_port": perKind,
      "server.refused_malformed_port": perKind,
      "server.refused_foreign_authority": perKind,
      "server.refused_unserved_port": perKind,
      "server.refused_port_mismatch": perKind,
    });
  });
});
