// passthrough_mtls, compiled, in the proxy-wasm test host: what each connection gets (status,
// Envoy filter-state writes in order, wasm properties, counters, log lines) for every row of the
// filter's decision table, odd destinations, bad configurations, refused writes and large tables.
// Run: node --import tsx --test tests/host/passthrough_mtls.test.ts
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Connection, ProxyWasmHost, WasmResult, int64, type ConnectOptions, type HostOptions } from "../../host/index.js";
import {
  CLUSTER,
  ORIGINAL_DST,
  SAN,
  assertClosedByFilter,
  assertConfigRefused,
  assertContinues,
  connectOnce,
  counterAssertion,
  envoyWrites,
  linesOf,
  startFilter,
  wasmProperties,
  withRefusal,
} from "./helpers.js";

// ---------------------------------------------------------------- the mesh under test

const ID = {
  app: "spiffe://cluster.local/ns/default/sa/app",
  httpbin: "spiffe://cluster.local/ns/default/sa/httpbin",
  twin: "spiffe://cluster.local/ns/west/sa/twin",
  istioTwin: "spiffe://cluster.local/ns/west/sa/istio-twin",
  remote: "spiffe://cluster.local/ns/west/sa/remote",
  db0: "spiffe://cluster.local/ns/default/sa/db-0",
  db1: "spiffe://cluster.local/ns/default/sa/db-1",
  cache: "spiffe://cluster.local/ns/default/sa/cache",
  mapped: "spiffe://cluster.local/ns/default/sa/mapped",
} as const;

const DB = "db.default.svc.cluster.local";

/**
 * One pod per decision row. Network "" is the default one; "west" is another network.
 *   app-0        10.0.0.1 + fd00::1  istio     endpoint of app (NOT headless) on 443
 *   legacy-0     10.0.0.2            disabled  (tlsMode absent)
 *   httpbin-0    10.0.0.11           istio     same IP as west/httpbin-twin (istio)
 *   legacy-twin  10.0.0.12           disabled  same IP as west/istio-twin (istio)
 *   remote-0     10.0.0.50 on west   istio     only on another network
 *   db-0         10.0.1.1            istio     headless db: 5432->5432, 80->8080
 *   db-1         10.0.1.2            istio     headless db, endpoint override 80->9090
 *   plaindb-0    10.0.2.1            disabled  headless plaindb 5432->5432
 *   v6-0         fd00::2             istio     headless cache 6379->6379, explicit cluster
 *   mapped-0     ::ffff:10.0.3.1     istio     (an IPv4 pod written IPv4-mapped)
 * db-replica (headless, 15432->5432, endpoint db-0) comes after db: db must win db-0:5432.
 */
const MESH = {
  workloads: [
    { uid: "app-0", addresses: ["10.0.0.1", "fd00::1"], tlsMode: "istio", identity: ID.app },
    { uid: "legacy-0", addresses: ["10.0.0.2"] },
    { uid: "httpbin-0", addresses: ["10.0.0.11"], tlsMode: "istio", identity: ID.httpbin },
    { uid: "west/httpbin-twin", addresses: ["10.0.0.11"], network: "west", tlsMode: "istio", identity: ID.twin },
    { uid: "legacy-twin", addresses: ["10.0.0.12"], tlsMode: "disabled" },
    { uid: "west/istio-twin", addresses: ["10.0.0.12"], network: "west", tlsMode: "istio", identity: ID.istioTwin },
    { uid: "west/remote-0", addresses: ["10.0.0.50"], network: "west", tlsMode: "istio", identity: ID.remote },
    { uid: "db-0", addresses: ["10.0.1.1"], tlsMode: "istio", identity: ID.db0 },
    { uid: "db-1", addresses: ["10.0.1.2"], tlsMode: "istio", identity: ID.db1 },
    { uid: "plaindb-0", addresses: ["10.0.2.1"] },
    { uid: "v6-0", addresses: ["fd00::2"], tlsMode: "istio", identity: ID.cache },
    { uid: "mapped-0", addresses: ["::ffff:10.0.3.1"], tlsMode: "istio", identity: ID.mapped },
  ],
  services: [
    {
      hostname: "app.default.svc.cluster.local",
      vips: [{ address: "10.96.0.1" }],
      ports: { "443": 443 },
      endpoints: [{ workload: "app-0" }],
    },
    {
      hostname: DB,
      headless: true,
      ports: { "5432": 5432, "80": 8080 },
      endpoints: [{ workload: "db-0" }, { workload: "db-1", ports: { "80": 9090 } }],
    },
    { hostname: "db-replica.default.svc.cluster.local", headless: true, ports: { "15432": 5432 }, endpoints: [{ workload: "db-0" }] },
    { hostname: "plaindb.default.svc.cluster.local", headless: true, ports: { "5432": 5432 }, endpoints: [{ workload: "plaindb-0" }] },
    {
      hostname: "cache.default.svc.cluster.local",
      headless: true,
      cluster: "cache_cluster",
      ports: { "6379": 6379 },
      endpoints: [{ workload: "v6-0" }],
    },
  ],
};

const DIRECT = { ...MESH };
const SUBSET = { mode: "subset", ...MESH };

// ---------------------------------------------------------------- what a connection sees

const LB_ADDRESS = "wasm.lb_address";
const UPSTREAM_SANS = "wasm.upstream_sans";
const MTLS_CLUSTER = "outbound_mtls_passthrough";
const SUBSET_CLUSTER = "passthrough_mtls_subset";

const COUNTERS = ["mtls", "headless", "passthrough", "no_destination", "rejected", "local_network_wins", "plaintext_pod"] as const;

const start = (config: unknown, options: HostOptions = {}): Promise<ProxyWasmHost> => startFilter("passthrough_mtls", config, options);

/** Every counter of the filter; the ones not named in `expected` must be 0. */
const assertCounters = counterAssertion("passthrough_mtls", COUNTERS);

/** The three pins of the direct mTLS (and headless) route, in the order tcp_proxy needs them. */
function pinned(identity: string, address: string, cluster: string): [string, string][] {
  return [
    [SAN, identity],
    [ORIGINAL_DST, address],
    [CLUSTER, cluster],
  ];
}

/** One connection on a fresh host. */
const one = (config: unknown, destination: string, options: HostOptions = {}) =>
  connectOnce("passthrough_mtls", config, { source: "10.0.9.9:40000", destination }, options);

// ---------------------------------------------------------------- direct mode

describe("passthrough_mtls direct mode: mesh pods", () => {
  it("upgrades a tlsMode istio pod to mTLS to exactly that IP:port, verifying its own identity", async () => {
    // app-0 is also an endpoint of the non-headless service app on 443: that changes nothing.
    const { host, conn } = await one(DIRECT, "10.0.0.1:443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { mtls: 1 });
  });

  it("routes mTLS through a configured mtlsCluster", async () => {
    const { host, conn } = await one({ ...DIRECT, mtlsCluster: "my_mtls" }, "10.0.0.1:8443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:8443", "my_mtls"));
    assertCounters(host, { mtls: 1 });
  });

  it("lets the data flow once the pod is pinned", async () => {
    const { host, conn } = await one(DIRECT, "10.0.0.1:443");
    const sent = conn.downstreamData("GET / HTTP/1.1\r\n\r\n");
    assert.equal(sent.status, "Continue");
    assert.equal(Buffer.from(sent.forwarded).toString(), "GET / HTTP/1.1\r\n\r\n");
    conn.end();
    assert.equal(conn.closeReason, "end");
    assert.equal(host.failed, false);
  });

  it("passes a tlsMode disabled pod through in clear with only its endpoint-selection value", async () => {
    const { host, conn } = await one(DIRECT, "10.0.0.2:8080");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), []);
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { passthrough: 1, plaintext_pod: 1 });
  });

  it("passes an IP that is no workload through untouched", async () => {
    const { host, conn } = await one(DIRECT, "10.9.9.9:443");
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("does not take a service VIP for a pod", async () => {
    const { host, conn } = await one(DIRECT, "10.96.0.1:443");
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("passes a pod that exists only on another network through untouched", async () => {
    const { host, conn } = await one(DIRECT, "10.0.0.50:443");
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("passes everything through when the mesh is empty", async () => {
    const { host, conn } = await one({}, "10.0.0.1:443");
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });
});

describe("passthrough_mtls direct mode: the same IP on two networks", () => {
  it("lets the local network's pod win over another network's pod with the same IP", async () => {
    const { host, conn } = await one(DIRECT, "10.0.0.11:443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.httpbin, "10.0.0.11:443", MTLS_CLUSTER));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { mtls: 1, local_network_wins: 1 });
  });

  it("keeps a local tlsMode disabled pod in clear even when another network's pod with its IP is istio", async () => {
    const { host, conn } = await one(DIRECT, "10.0.0.12:80");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), []);
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { passthrough: 1, plaintext_pod: 1, local_network_wins: 1 });
  });

  it("decides on the configured localNetwork's pods only", async () => {
    const host = await start({ localNetwork: "west", ...MESH });
    const twin = host.connect({ destination: "10.0.0.11:443" });
    assert.deepEqual(envoyWrites(twin), pinned(ID.twin, "10.0.0.11:443", MTLS_CLUSTER));
    const istioTwin = host.connect({ destination: "10.0.0.12:80" });
    assert.deepEqual(envoyWrites(istioTwin), pinned(ID.istioTwin, "10.0.0.12:80", MTLS_CLUSTER));
    const remote = host.connect({ destination: "10.0.0.50:443" });
    assert.deepEqual(envoyWrites(remote), pinned(ID.remote, "10.0.0.50:443", MTLS_CLUSTER));
    // app-0 lives on the default network, which is not local now.
    const app = host.connect({ destination: "10.0.0.1:443" });
    assert.deepEqual(app.filterStateWrites, []);
    // 10.0.0.11 and 10.0.0.12 also exist on the default network; 10.0.0.50 does not.
    assertCounters(host, { mtls: 3, local_network_wins: 2, passthrough: 1 });
  });

  it("warns at configure time when localNetwork has no workloads, then passes everything through", async () => {
    const host = await start({ localNetwork: "east", ...MESH });
    const warnings = host.logLines("warn");
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /localNetwork "east" has no workloads/);
    const conn = host.connect({ destination: "10.0.0.1:443" });
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("warns at configure time when the default localNetwork has no workloads", async () => {
    const host = await start({ workloads: [{ uid: "w", addresses: ["10.0.0.1"], network: "west" }] });
    assert.equal(host.logLines("warn").length, 1);
  });
});

describe("passthrough_mtls direct mode: headless services", () => {
  it("sends a headless member on a port its service serves to that service's cluster", async () => {
    // db and db-replica both reach db-0:5432; db comes first in the configuration and wins.
    const { host, conn } = await one(DIRECT, "10.0.1.1:5432");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.db0, "10.0.1.1:5432", `outbound|5432||${DB}`));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { headless: 1 });
  });

  it("matches the dialled target port and names the service port in the cluster", async () => {
    // db maps service port 80 to target port 8080.
    const { host, conn } = await one(DIRECT, "10.0.1.1:8080");
    assert.deepEqual(envoyWrites(conn), pinned(ID.db0, "10.0.1.1:8080", `outbound|80||${DB}`));
    assertCounters(host, { headless: 1 });
  });

  it("sends a headless member on a port its service does not serve through the plain mTLS route", async () => {
    const host = await start(DIRECT);
    const other = host.connect({ destination: "10.0.1.1:9999" });
    assert.deepEqual(envoyWrites(other), pinned(ID.db0, "10.0.1.1:9999", MTLS_CLUSTER));
    // 80 is a SERVICE port of db; the pod serves it on 8080, so 80 on the pod is not served.
    const servicePort = host.connect({ destination: "10.0.1.1:80" });
    assert.deepEqual(envoyWrites(servicePort), pinned(ID.db0, "10.0.1.1:80", MTLS_CLUSTER));
    assertCounters(host, { mtls: 2 });
  });

  it("follows an endpoint's own target port over the service default", async () => {
    const host = await start(DIRECT);
    // db-1 serves db's port 80 on 9090 (override) instead of 8080.
    const overridden = host.connect({ destination: "10.0.1.2:9090" });
    assert.deepEqual(envoyWrites(overridden), pinned(ID.db1, "10.0.1.2:9090", `outbound|80||${DB}`));
    const defaultTarget = host.connect({ destination: "10.0.1.2:8080" });
    assert.deepEqual(envoyWrites(defaultTarget), pinned(ID.db1, "10.0.1.2:8080", MTLS_CLUSTER));
    // Port 5432 has no override on db-1: the service default applies.
    const notOverridden = host.connect({ destination: "10.0.1.2:5432" });
    assert.deepEqual(envoyWrites(notOverridden), pinned(ID.db1, "10.0.1.2:5432", `outbound|5432||${DB}`));
    // The override is db-1's only: db-0 does not serve 9090.
    const otherPod = host.connect({ destination: "10.0.1.1:9090" });
    assert.deepEqual(envoyWrites(otherPod), pinned(ID.db0, "10.0.1.1:9090", MTLS_CLUSTER));
    assertCounters(host, { headless: 2, mtls: 2 });
  });

  it("uses a headless service's explicit cluster name, over IPv6", async () => {
    const { host, conn } = await one(DIRECT, "[fd00::2]:6379");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.cache, "[fd00::2]:6379", "cache_cluster"));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { headless: 1 });
  });

  it("keeps a tlsMode disabled member of a headless service in clear", async () => {
    const { host, conn } = await one(DIRECT, "10.0.2.1:5432");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), []);
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { passthrough: 1, plaintext_pod: 1 });
  });

  it("keeps the service's cluster when mtlsCluster is configured", async () => {
    const { conn } = await one({ ...DIRECT, mtlsCluster: "my_mtls" }, "10.0.1.1:5432");
    assert.deepEqual(envoyWrites(conn), pinned(ID.db0, "10.0.1.1:5432", `outbound|5432||${DB}`));
  });
});

describe("passthrough_mtls: IPv6 and IPv4-mapped destinations", () => {
  it("pins an IPv6 pod with its bracketed IP:port", async () => {
    const { host, conn } = await one(DIRECT, "[fd00::1]:443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "[fd00::1]:443", MTLS_CLUSTER));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { mtls: 1 });
  });

  it("writes the canonical (RFC 5952) spelling of an IPv6 destination", async () => {
    const { conn } = await one(DIRECT, "[FD00:0:0:0:0:0:0:1]:443");
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "[fd00::1]:443", MTLS_CLUSTER));
  });

  it("passes an unknown IPv6 address through untouched", async () => {
    const { host, conn } = await one(DIRECT, "[fd00::99]:443");
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("finds an IPv4 pod through an IPv4-mapped destination and pins its IPv4 address", async () => {
    // A dual-stack socket reports ::ffff:a.b.c.d; the mesh keys it as the IPv4 address.
    const { host, conn } = await one(DIRECT, "[::ffff:10.0.0.1]:443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
    assert.deepEqual(wasmProperties(conn), {}); // direct mode writes no lb_address unless lbAddress: true
    assertCounters(host, { mtls: 1 });
  });

  it("finds a pod configured IPv4-mapped through its plain IPv4 destination", async () => {
    const { conn } = await one(DIRECT, "10.0.3.1:443");
    assert.deepEqual(envoyWrites(conn), pinned(ID.mapped, "10.0.3.1:443", MTLS_CLUSTER));
  });

  it("sends an IPv4-mapped headless member to its service", async () => {
    const { host, conn } = await one(DIRECT, "[::ffff:10.0.1.1]:5432");
    assert.deepEqual(envoyWrites(conn), pinned(ID.db0, "10.0.1.1:5432", `outbound|5432||${DB}`));
    assertCounters(host, { headless: 1 });
  });
});

// ---------------------------------------------------------------- lb_address (envoy.lb.address)

describe("passthrough_mtls: lb_address only where the configuration uses it", () => {
  const ASKED = { ...DIRECT, lbAddress: true };
  it("direct mode with lbAddress: true writes IP:PORT for every mesh pod, whatever the route", async () => {
    for (const [destination, expected] of [
      ["10.0.0.1:443", "10.0.0.1:443"], // tlsMode istio: mTLS
      ["10.0.0.2:8080", "10.0.0.2:8080"], // tlsMode disabled: plain
      ["10.0.1.1:5432", "10.0.1.1:5432"], // headless member
      ["[FD00:0:0:0:0:0:0:1]:443", "[fd00::1]:443"], // IPv6, canonical spelling
      ["[::ffff:10.0.0.1]:443", "10.0.0.1:443"], // IPv4-mapped: the mesh's IPv4 address
    ]) {
      const { host, conn } = await one(ASKED, destination!);
      assertContinues(host, conn);
      assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: expected }, destination);
    }
    // The routes themselves do not change with it.
    assert.deepEqual(envoyWrites((await one(ASKED, "10.0.0.1:443")).conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
  });

  it("writes none for a destination that is not a mesh pod", async () => {
    const { conn } = await one(ASKED, "10.9.9.9:443");
    assert.deepEqual(wasmProperties(conn), {});
    assert.deepEqual(conn.filterStateWrites, []);
  });

  it("direct mode by default makes no set_property at all: a host refusing lb_address changes nothing", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ property: "lb_address" }, () => host.connect({ destination: "10.0.0.1:443" }));
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites.map((w) => w.source), ["set_envoy_filter_state", "set_envoy_filter_state", "set_envoy_filter_state"]);
    assertCounters(host, { mtls: 1 });
  });

  it("subset mode writes it without being asked (its bridge reads it)", async () => {
    for (const config of [SUBSET, { ...SUBSET, lbAddress: true }]) {
      const { conn } = await one(config, "10.0.0.1:443");
      assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "10.0.0.1:443", [UPSTREAM_SANS]: ID.app });
    }
  });
});

// ---------------------------------------------------------------- subset mode

describe("passthrough_mtls subset mode", () => {
  it("sends an istio pod to the subset cluster with its identity, and relays the identity, without pinning the address", async () => {
    const { host, conn } = await one(SUBSET, "10.0.0.1:443");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), [
      [SAN, ID.app],
      [CLUSTER, SUBSET_CLUSTER],
    ]);
    assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "10.0.0.1:443", [UPSTREAM_SANS]: ID.app });
    assertCounters(host, { mtls: 1 });
  });

  it("uses a configured subsetCluster, and never the mtlsCluster", async () => {
    const { conn } = await one({ ...SUBSET, subsetCluster: "my_subset", mtlsCluster: "my_mtls" }, "10.0.0.1:443");
    assert.deepEqual(envoyWrites(conn), [
      [SAN, ID.app],
      [CLUSTER, "my_subset"],
    ]);
  });

  it("sends a tlsMode disabled pod to the subset cluster with its endpoint-selection value only", async () => {
    const { host, conn } = await one(SUBSET, "10.0.0.2:8080");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), [[CLUSTER, SUBSET_CLUSTER]]);
    assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "10.0.0.2:8080" });
    assertCounters(host, { passthrough: 1, plaintext_pod: 1 });
  });

  it("sends a headless member to its service's cluster, pinned as in direct mode, and still relays its identity", async () => {
    // The subset config's set_filter_state relay runs for every connection of the chain: without
    // wasm.upstream_sans it would overwrite the identity with an empty value (README, index.ts).
    const { host, conn } = await one(SUBSET, "10.0.1.1:5432");
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.db0, "10.0.1.1:5432", `outbound|5432||${DB}`));
    assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "10.0.1.1:5432", [UPSTREAM_SANS]: ID.db0 });
    assertCounters(host, { headless: 1 });
  });

  it("sends a headless member on an unserved port to the subset cluster", async () => {
    const { host, conn } = await one(SUBSET, "10.0.1.1:9999");
    assert.deepEqual(envoyWrites(conn), [
      [SAN, ID.db0],
      [CLUSTER, SUBSET_CLUSTER],
    ]);
    assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "10.0.1.1:9999", [UPSTREAM_SANS]: ID.db0 });
    assertCounters(host, { mtls: 1 });
  });

  it("passes a non-pod through untouched", async () => {
    const { host, conn } = await one(SUBSET, "10.9.9.9:443");
    assertContinues(host, conn);
    assert.deepEqual(conn.filterStateWrites, []);
    assertCounters(host, { passthrough: 1 });
  });

  it("gives an IPv6 pod its bracketed endpoint-selection value", async () => {
    const { conn } = await one(SUBSET, "[fd00::1]:443");
    assert.deepEqual(wasmProperties(conn), { [LB_ADDRESS]: "[fd00::1]:443", [UPSTREAM_SANS]: ID.app });
  });

  it("lets the local pod win in subset mode too", async () => {
    const { host, conn } = await one(SUBSET, "10.0.0.11:443");
    assert.deepEqual(envoyWrites(conn), [
      [SAN, ID.httpbin],
      [CLUSTER, SUBSET_CLUSTER],
    ]);
    assertCounters(host, { mtls: 1, local_network_wins: 1 });
  });
});

// ---------------------------------------------------------------- no usable destination

describe("passthrough_mtls: no usable destination", () => {
  const BAD: [string, ConnectOptions][] = [
    ["no destination property at all", {}],
    ["destination.port without destination.address", { properties: { destination: { port: 443 } } }],
    ["an empty address", { destination: "" }],
    ["not-an-ip", { destination: "not-an-ip" }],
    ["an IPv4 address without port", { destination: "10.0.0.1" }],
    ["an IPv4 address with an empty port", { destination: "10.0.0.1:" }],
    ["an unclosed IPv6 bracket", { destination: "[fd00::1" }],
    ["an unclosed IPv6 bracket with port", { destination: "[fd00::1:443" }],
    ["a bracketed IPv6 address without port", { destination: "[fd00::1]" }],
    ["an unbracketed IPv6 address", { destination: "fd00::1:443" }],
    ["an IPv6 address with a zone", { destination: "[fe80::1%eth0]:443" }],
    ["a port above 65535", { destination: "10.0.0.1:65536" }],
    ["a huge port", { destination: "10.0.0.1:99999999999" }],
    ["a negative port", { destination: "10.0.0.1:-1" }],
    ["an octet above 255", { destination: "10.0.0.256:443" }],
    ["leading whitespace", { destination: " 10.0.0.1:443" }],
    ["trailing whitespace", { destination: "10.0.0.1:443 " }],
    ["a trailing NUL", { properties: { destination: { address: "10.0.0.1:443\0" } } }],
    ["a 100 KB address", { properties: { destination: { address: "1".repeat(100_000) } } }],
    ["bytes that are not UTF-8", { properties: { destination: { address: new Uint8Array([0xff, 0xfe, 0x3a, 0x80, 0x00]) } } }],
    ["an int64 instead of text", { properties: { destination: { address: int64(0x0a000001) } } }],
    ["a map instead of a value", { properties: { destination: { address: { ip: "10.0.0.1", port: 443 } } } }],
  ];

  for (const [what, options] of BAD) {
    it(`counts ${what} as no destination and continues without writing anything`, async () => {
      const host = await start(DIRECT);
      const conn = host.connect(options);
      assertContinues(host, conn);
      assert.deepEqual(conn.filterStateWrites, []);
      assertCounters(host, { no_destination: 1 });
    });
  }

  it("keeps deciding correctly after every kind of bad destination on one VM", async () => {
    const host = await start(DIRECT);
    for (const [, options] of BAD) assertContinues(host, host.connect(options));
    const conn = host.connect({ destination: "10.0.0.1:443" });
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
    assertCounters(host, { no_destination: BAD.length, mtls: 1 });
  });
});

// ---------------------------------------------------------------- Envoy refusing a write

function assertRejected(host: ProxyWasmHost, conn: Connection, destination: string): void {
  assertClosedByFilter(host, conn);
  assertCounters(host, { rejected: 1 });
  // tcp_proxy must not get a cluster to route to after a refusal.
  assert.equal(conn.filterState.get(CLUSTER), undefined);
  const errors = host.logLines("error");
  assert.equal(errors.length, 1);
  // One error line naming the destination and the refusal.
  assert.ok(errors[0]!.includes(destination), errors[0]!);
  assert.match(errors[0]!, /refused/);
  // Nothing reaches the pod.
  const sent = conn.downstreamData("secret");
  assert.equal(sent.status, "Closed");
  assert.equal(conn.upstreamBytes.length, 0);
}

describe("passthrough_mtls: Envoy refusing a write closes the connection", () => {
  it("closes an mTLS connection whose identity pin is refused, writing nothing after it", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: SAN, status: WasmResult.BadArgument }, () =>
      host.connect({ destination: "10.0.0.1:443" }),
    );
    assertRejected(host, conn, "10.0.0.1:443");
    assert.deepEqual(envoyWrites(conn), []);
  });

  it("closes an mTLS connection whose address pin is refused", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: ORIGINAL_DST }, () => host.connect({ destination: "10.0.0.1:443" }));
    assertRejected(host, conn, "10.0.0.1:443");
    assert.deepEqual(envoyWrites(conn), [[SAN, ID.app]]);
  });

  it("closes an mTLS connection whose cluster choice is refused", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: CLUSTER }, () => host.connect({ destination: "[fd00::1]:443" }));
    assertRejected(host, conn, "[fd00::1]:443");
  });

  it("closes a headless member's connection whose address pin is refused", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: ORIGINAL_DST }, () => host.connect({ destination: "10.0.1.1:5432" }));
    assertRejected(host, conn, "10.0.1.1:5432");
  });

  it("closes a headless member's connection whose cluster choice is refused", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: CLUSTER }, () => host.connect({ destination: "10.0.1.1:5432" }));
    assertRejected(host, conn, "10.0.1.1:5432");
  });

  it("closes a connection whose endpoint-selection value is refused (when the configuration asks for it)", async () => {
    const host = await start({ ...DIRECT, lbAddress: true });
    const conn = withRefusal({ property: "lb_address" }, () => host.connect({ destination: "10.0.0.1:443" }));
    assertRejected(host, conn, "10.0.0.1:443");
  });

  it("closes a subset-mode connection whose identity relay is refused", async () => {
    const host = await start(SUBSET);
    const conn = withRefusal({ property: "upstream_sans" }, () => host.connect({ destination: "10.0.0.1:443" }));
    assertRejected(host, conn, "10.0.0.1:443");
  });

  it("closes a subset-mode headless member's connection whose identity relay is refused", async () => {
    const host = await start(SUBSET);
    const conn = withRefusal({ property: "upstream_sans" }, () => host.connect({ destination: "10.0.1.1:5432" }));
    assertRejected(host, conn, "10.0.1.1:5432");
  });

  it("closes a subset-mode tlsMode disabled pod's connection whose cluster choice is refused", async () => {
    const host = await start(SUBSET);
    const conn = withRefusal({ filterStateKey: CLUSTER }, () => host.connect({ destination: "10.0.0.2:8080" }));
    assertRejected(host, conn, "10.0.0.2:8080");
  });

  it("decides the next connection normally once Envoy accepts writes again", async () => {
    const host = await start(DIRECT);
    withRefusal({ filterStateKey: SAN }, () => host.connect({ destination: "10.0.0.1:443" }));
    const conn = host.connect({ destination: "10.0.0.1:443" });
    assertContinues(host, conn);
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
    assertCounters(host, { rejected: 1, mtls: 1 });
  });

  it("does not close a non-pod connection, which writes nothing that could be refused", async () => {
    const host = await start(DIRECT);
    const conn = withRefusal({ filterStateKey: CLUSTER }, () => host.connect({ destination: "10.9.9.9:443" }));
    assertContinues(host, conn);
    assertCounters(host, { passthrough: 1 });
  });
});

// ---------------------------------------------------------------- bad configuration

describe("passthrough_mtls: invalid configuration", () => {
  const KNOWN = "localNetwork, mode, mtlsCluster, subsetCluster, lbAddress, meshFeed, workloads, services";
  const BAD: [string, string, string][] = [
    ["an lbAddress that is not a boolean", JSON.stringify({ lbAddress: "true" }), "lbAddress: expected a boolean"],
    ["lbAddress false in subset mode", JSON.stringify({ mode: "subset", lbAddress: false }), "lbAddress: subset mode needs it (its bridge balances on wasm.lb_address)"],
    ["an unknown top-level field", JSON.stringify({ ...MESH, mtls_cluster: "x" }), `mtls_cluster: unknown field (known: ${KNOWN})`],
    ["a bad mode value", JSON.stringify({ mode: "passthrough" }), "mode: expected one of: direct, subset"],
    ["a mode that is not a string", JSON.stringify({ mode: true }), "mode: expected one of: direct, subset"],
    ["an empty mtlsCluster", JSON.stringify({ mtlsCluster: "" }), "mtlsCluster: must not be empty"],
    ["an empty subsetCluster", JSON.stringify({ mode: "subset", subsetCluster: "" }), "subsetCluster: must not be empty"],
    ["a localNetwork that is not a string", JSON.stringify({ localNetwork: 1 }), "localNetwork: expected a string"],
    [
      "a workload with a bad address",
      JSON.stringify({ workloads: [{ uid: "a", addresses: ["10.0.0.1"] }, { uid: "b", addresses: ["10.0.0.2", "10.0.0.300"] }] }),
      'workloads[1].addresses[1]: not an IP address: "10.0.0.300"',
    ],
    [
      "a duplicate uid",
      JSON.stringify({ workloads: [{ uid: "a", addresses: ["10.0.0.1"] }, { uid: "a", addresses: ["10.0.0.2"] }] }),
      'workloads[1].uid: duplicate uid "a" (first at workloads[0])',
    ],
    [
      "tlsMode istio without identity",
      JSON.stringify({ workloads: [{ uid: "a", addresses: ["10.0.0.1"], tlsMode: "istio" }] }),
      'workloads[0].identity: required when tlsMode is "istio"',
    ],
    ["an array root", "[]", "(root): expected an object"],
    ["a string root", '"passthrough"', "(root): expected an object"],
    ["a null root", "null", "(root): expected an object"],
    ["invalid JSON", '{"mode": "direct"', "byte 17: unexpected end of input"],
    ["an empty configuration", "", "byte 0: unexpected end of input"],
  ];

  for (const [what, configuration, message] of BAD) {
    it(`refuses ${what} with one error line naming it, without trapping`, async () => {
      await assertConfigRefused("passthrough_mtls", configuration, message);
    });
  }

  it("keeps serving the previous configuration when a reconfiguration is refused", async () => {
    const host = await start(DIRECT);
    assert.equal(host.reconfigure(JSON.stringify({ ...MESH, mode: "bogus" })), false);
    assert.equal(host.failed, false);
    const conn = host.connect({ destination: "10.0.0.1:443" });
    assert.deepEqual(envoyWrites(conn), pinned(ID.app, "10.0.0.1:443", MTLS_CLUSTER));
  });

  it("decides with the new tables after an accepted reconfiguration", async () => {
    const host = await start(DIRECT);
    // Without app-0 (the first workload) and the service that names it (the first service).
    const next = { ...SUBSET, workloads: MESH.workloads.slice(1), services: MESH.services.slice(1) };
    assert.ok(host.reconfigure(JSON.stringify(next)), host.startFailure ?? "");
    // app-0 is gone: its IP is no pod now.
    assert.deepEqual(host.connect({ destination: "10.0.0.1:443" }).filterStateWrites, []);
    // Subset mode is on.
    assert.deepEqual(envoyWrites(host.connect({ destination: "10.0.0.11:443" })), [
      [SAN, ID.httpbin],
      [CLUSTER, SUBSET_CLUSTER],
    ]);
  });
});

// ---------------------------------------------------------------- logs

describe("passthrough_mtls: logs", () => {
  const RULES: [string, unknown, string, RegExp][] = [
    ["mTLS", DIRECT, "10.0.0.1:443", /^10\.0\.0\.1:443 -> mtls\b.*spiffe:\/\/cluster\.local\/ns\/default\/sa\/app$/],
    ["mTLS via subset", SUBSET, "10.0.0.1:443", /^10\.0\.0\.1:443 -> mtls via subset\b.*sa\/app$/],
    ["headless", DIRECT, "10.0.1.1:5432", /^10\.0\.1\.1:5432 -> headless service db\.default\.svc\.cluster\.local\b.*sa\/db-0$/],
    ["plaintext pod", DIRECT, "10.0.0.2:8080", /^10\.0\.0\.2:8080 -> plaintext\b.*tlsMode disabled/],
    ["not a pod", DIRECT, "10.9.9.9:443", /^10\.9\.9\.9:443 -> passthrough\b.*not a mesh pod/],
    ["local network wins", DIRECT, "10.0.0.11:443", /^10\.0\.0\.11:443 -> mtls\b.*local network wins.*sa\/httpbin$/],
    ["IPv6 mTLS", DIRECT, "[fd00::1]:443", /^\[fd00::1\]:443 -> mtls\b.*sa\/app$/],
  ];

  for (const [rule, config, destination, line] of RULES) {
    it(`logs one debug line naming the ${rule} rule for its decision`, async () => {
      const { host, conn } = await one(config, destination, { logLevel: "debug" });
      const lines = linesOf(host, conn, "debug");
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.match(lines[0]!, line);
    });
  }

  it("logs one debug line for a connection without a usable destination", async () => {
    const { host, conn } = await one(DIRECT, "not-an-ip", { logLevel: "debug" });
    assert.equal(linesOf(host, conn, "debug").length, 1);
  });

  it("does not even send the debug line to the host at info level (one host call fewer than at debug)", async () => {
    // Envoy drops a line below its level, but building and sending it costs on every connection;
    // the only difference between the two levels must be the one proxy_log call.
    for (const [, config, destination] of RULES) {
      const atDebug = (await one(config, destination, { logLevel: "debug" })).conn.hostCalls;
      const atInfo = (await one(config, destination, { logLevel: "info" })).conn.hostCalls;
      assert.equal(atInfo, atDebug - 1, destination);
    }
  });

  it("logs no per-connection line at info level", async () => {
    const host = await start(DIRECT, { logLevel: "info" });
    const before = host.logs().length;
    const conns = [
      "10.0.0.1:443",
      "10.0.1.1:5432",
      "10.0.0.2:8080",
      "10.9.9.9:443",
      "10.0.0.11:443",
      "[fd00::1]:443",
      "not-an-ip",
    ].map((destination) => host.connect({ destination }));
    for (const conn of conns) conn.end();
    assert.equal(host.failed, false);
    assert.deepEqual(host.logs().slice(before), []);
    const ids = new Set(conns.map((c) => c.id));
    assert.deepEqual(
      host.logs().filter((e) => ids.has(e.contextId)),
      [],
    );
  });
});

// ---------------------------------------------------------------- scale

/** Pod i of the large mesh: a unique IPv4 address in 10.128.0.0/9 (never .0 of the range). */
function bigPodIp(i: number): string {
  const n = 0x0a800000 + i + 1;
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

function bigPodIdentity(i: number): string {
  return `spiffe://cluster.local/ns/ns-${i % 50}/sa/sa-${i % 500}`;
}

/** Every 10th pod (i % 10 == 7) is tlsMode disabled; the rest are istio. */
const bigPodIstio = (i: number) => i % 10 !== 7;

describe("passthrough_mtls: large tables", () => {
  it("loads 100,000 workloads and decides correctly for the first, middle and last pod", { timeout: 300_000 }, async () => {
    const N = 100_000;
    const FIRST = 0;
    const MIDDLE = 50_000;
    const LAST = N - 1;
    const PLAIN = 77_777; // i % 10 == 7: tlsMode disabled
    const workloads = [];
    for (let i = 0; i < N; i++) {
      workloads.push(
        bigPodIstio(i)
          ? { uid: `pod-${i}`, addresses: [bigPodIp(i)], tlsMode: "istio", identity: bigPodIdentity(i) }
          : { uid: `pod-${i}`, addresses: [bigPodIp(i)] },
      );
    }
    // The last pod also has an IPv6 address; the middle one is a headless member.
    workloads[LAST] = { ...workloads[LAST]!, addresses: [bigPodIp(LAST), "fd00:128::1"] };
    const services = [
      { hostname: "big.default.svc.cluster.local", headless: true, ports: { "5432": 5432 }, endpoints: [{ workload: `pod-${MIDDLE}` }] },
    ];
    const host = await start({ workloads, services });

    const first = host.connect({ destination: `${bigPodIp(FIRST)}:443` });
    assert.deepEqual(envoyWrites(first), pinned(bigPodIdentity(FIRST), `${bigPodIp(FIRST)}:443`, MTLS_CLUSTER));
    const middle = host.connect({ destination: `${bigPodIp(MIDDLE)}:443` });
    assert.deepEqual(envoyWrites(middle), pinned(bigPodIdentity(MIDDLE), `${bigPodIp(MIDDLE)}:443`, MTLS_CLUSTER));
    const middleHeadless = host.connect({ destination: `${bigPodIp(MIDDLE)}:5432` });
    assert.deepEqual(
      envoyWrites(middleHeadless),
      pinned(bigPodIdentity(MIDDLE), `${bigPodIp(MIDDLE)}:5432`, "outbound|5432||big.default.svc.cluster.local"),
    );
    const last = host.connect({ destination: `${bigPodIp(LAST)}:443` });
    assert.deepEqual(envoyWrites(last), pinned(bigPodIdentity(LAST), `${bigPodIp(LAST)}:443`, MTLS_CLUSTER));
    const lastV6 = host.connect({ destination: "[fd00:128::1]:443" });
    assert.deepEqual(envoyWrites(lastV6), pinned(bigPodIdentity(LAST), "[fd00:128::1]:443", MTLS_CLUSTER));
    const plain = host.connect({ destination: `${bigPodIp(PLAIN)}:80` });
    assert.deepEqual(envoyWrites(plain), []);
    assert.deepEqual(wasmProperties(plain), {}); // direct mode writes no lb_address unless lbAddress: true
    // Just past the last pod, and just before the first: not pods.
    const after = host.connect({ destination: `${bigPodIp(N)}:443` });
    assert.deepEqual(after.filterStateWrites, []);
    const before = host.connect({ destination: "10.128.0.0:443" });
    assert.deepEqual(before.filterStateWrites, []);
    assert.equal(host.failed, false, host.trapMessage ?? "");
    assertCounters(host, { mtls: 4, headless: 1, passthrough: 3, plaintext_pod: 1 });
  });

  it("decides the same way after 10,000 connections", { timeout: 300_000 }, async () => {
    const host = await start(DIRECT);
    const kinds: ConnectOptions[] = [
      { destination: "10.0.0.1:443" }, // mtls
      { destination: "10.0.1.1:5432" }, // headless
      { destination: "10.0.0.2:8080" }, // plaintext pod
      { destination: "10.9.9.9:443" }, // not a pod
      { destination: "10.0.0.11:443" }, // mtls, local network wins
      { destination: "[fd00::1]:443" }, // mtls over IPv6
      { destination: "10.0.0.1" }, // no destination
    ];
    const snapshot = (conn: Connection) => ({
      status: conn.status,
      closed: conn.closed,
      writes: conn.filterStateWrites.map((w) => [w.source, w.key, w.value]),
      hostCalls: conn.hostCalls,
    });
    const firsts = kinds.map((options) => {
      const conn = host.connect(options);
      const seen = snapshot(conn);
      conn.end();
      return seen;
    });
    const ROUNDS = 1_430; // 7 kinds x 1,430 = 10,010 connections
    for (let round = 0; round < ROUNDS; round++) {
      for (const options of kinds) {
        const conn = host.connect(options);
        assert.equal(conn.status, "Continue");
        conn.end();
      }
    }
    assert.equal(host.failed, false, host.trapMessage ?? "");
    const lasts = kinds.map((options) => snapshot(host.connect(options)));
    assert.deepEqual(lasts, firsts);
    const perKind = ROUNDS + 2; // the first and the last of each kind
    assertCounters(host, {
      mtls: 3 * perKind,
      headless: perKind,
      passthrough: 2 * perKind,
      plaintext_pod: perKind,
      local_network_wins: perKind,
      no_destination: perKind,
    });
    assert.equal(host.liveContexts, 1 + kinds.length); // the root + the last connections, still open
  });
});
