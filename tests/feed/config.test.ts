// The feed's configuration file and the meshNetworks file: every problem is one line naming
// the field; defaults as documented in feed/README.md.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_CHANNEL_LIMITS, DEFAULT_DEBOUNCE, DEFAULT_OPERATOR_LIMITS, parseFeedConfig } from "../../feed/src/config.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { mayRead } from "../../feed/src/readers.js";

const base = { clusters: [{ id: "c1", kubeconfig: "in-cluster" }], targets: [{ name: "t", filter: "passthrough_mtls" }] };
const parse = (o: object) => parseFeedConfig(JSON.stringify(o), "/etc/feed/feed.yaml");

describe("feed: configuration", () => {
  it("defaults: trust domain and suffix cluster.local, istio-system, debounce 100/1000 ms, build/ next to the file", () => {
    const c = parse(base);
    assert.equal(c.trustDomain, "cluster.local");
    assert.equal(c.domainSuffix, "cluster.local");
    assert.equal(c.systemNamespace, "istio-system");
    assert.deepEqual(c.debounce, DEFAULT_DEBOUNCE);
    assert.deepEqual(DEFAULT_DEBOUNCE, { quietMs: 100, maxMs: 1000 });
    assert.equal(c.wasmDir, "/etc/feed/build");
    assert.equal(c.clusters[0].kubeconfig, "in-cluster");
    assert.equal(c.targets[0].network, "");
    assert.deepEqual(c.caps, { maxPortsPerService: 1024, maxMembershipsPerWorkload: 1024, maxTextBytes: 1024 });
    assert.deepEqual(parse({ ...base, caps: { maxMembershipsPerWorkload: 3 } }).caps, { maxPortsPerService: 1024, maxMembershipsPerWorkload: 3, maxTextBytes: 1024 });
  });

  it("a cluster read from files: the path is relative to the configuration file, no kubeconfig", () => {
    const c = parse({ ...base, clusters: [{ id: "c1", files: "mesh/" }, { id: "c2", kubeconfig: "in-cluster" }] });
    assert.deepEqual(c.clusters, [{ id: "c1", files: "/etc/feed/mesh" }, { id: "c2", kubeconfig: "in-cluster" }]);
  });

  it("the channel: its own mutual TLS, address 0.0.0.0, port 9443, files relative to the configuration file, checked every second; the operator port on 127.0.0.1; no readers = nobody", () => {
    const c = parse({ ...base, operator: {}, channel: { certFile: "tls/cert.pem", keyFile: "/k.pem", caFile: "ca.pem" } });
    assert.deepEqual(c.channel, { identityFrom: "tls", sidecarAddresses: [], address: "0.0.0.0", port: 9443, certFile: "/etc/feed/tls/cert.pem", keyFile: "/k.pem", caFile: "/etc/feed/ca.pem", reloadMs: 1000, limits: DEFAULT_CHANNEL_LIMITS });
    assert.deepEqual(c.operator, { address: "127.0.0.1", port: 9090, limits: DEFAULT_OPERATOR_LIMITS });
    assert.deepEqual(c.targets[0].readers, []);
    assert.equal(parse(base).channel, undefined);
  });

  it("limits: each field overrides its default, the others stay; health on 127.0.0.1:9091, stale after 30 s", () => {
    const c = parse({ ...base, operator: { limits: { maxConnections: 8 } }, health: {}, channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { maxConnectionsPerCaller: 50, writeTimeoutMs: 2000 } } });
    assert.deepEqual(c.channel?.limits, { ...DEFAULT_CHANNEL_LIMITS, maxConnectionsPerCaller: 50, writeTimeoutMs: 2000 });
    assert.deepEqual(c.operator?.limits, { ...DEFAULT_OPERATOR_LIMITS, maxConnections: 8 });
    assert.equal(c.operator?.limits.maxConnectionsPerCaller, 0);
    assert.deepEqual(c.health, { address: "127.0.0.1", port: 9091, staleAfterMs: 30_000 });
  });

  it("readers as Istio principals: exact, prefix*, *suffix, * alone; nothing else, and only spiffe:// callers", () => {
    const sleep = "spiffe://cluster.local/ns/default/sa/sleep";
    assert.ok(mayRead(["cluster.local/ns/default/sa/sleep"], sleep));
    assert.ok(mayRead(["cluster.local/ns/default/*"], sleep));
    assert.ok(mayRead(["*/sa/sleep"], sleep));
    assert.ok(mayRead(["*"], sleep));
    assert.ok(!mayRead([], sleep), "no readers: nobody");
    assert.ok(!mayRead(["cluster.local/ns/default/sa/slee"], sleep), "exact means exact");
    assert.ok(!mayRead(["cluster.local/ns/other/*"], sleep));
    assert.ok(!mayRead(["other.domain/ns/default/sa/sleep"], sleep), "the trust domain is part of the principal");
    assert.ok(!mayRead(["*"], "cluster.local/ns/default/sa/sleep"), "not a SPIFFE id");
  });

  for (const [what, edit, message] of [
    ["the old plain `http` server", { http: { port: 9090 } }, /^\/etc\/feed\/feed\.yaml: http: replaced: `operator`/],
    ["a channel without its key", { channel: { certFile: "c", caFile: "a" } }, /channel\.keyFile: missing required field/],
    ["a channel with an empty CA path", { channel: { certFile: "c", keyFile: "k", caFile: "" } }, /channel\.caFile: expected a path to a PEM file/],
    ["the channel on the operator's port", { operator: { port: 9443 }, channel: { address: "127.0.0.1", certFile: "c", keyFile: "k", caFile: "a" } }, /channel\.port: is the operator port's/],
    ["a channel idle timeout a long poll outlives", { channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { idleTimeoutMs: 60_000 } } }, /channel\.limits\.idleTimeoutMs: must be above delta\.maxWaitSeconds \(60 s\)/],
    ["a per-caller cap above the total", { channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { maxConnections: 10, maxConnectionsPerCaller: 11 } } }, /channel\.limits\.maxConnectionsPerCaller: must be at most maxConnections/],
    ["a per-caller cap on the operator port (no identities there)", { operator: { limits: { maxConnectionsPerCaller: 5 } } }, /operator\.limits\.maxConnectionsPerCaller: unknown field/],
    ["no connection at all allowed", { operator: { limits: { maxConnections: 0 } } }, /operator\.limits\.maxConnections: expected an integer in \[1, 1000000\]/],
    ["a write timeout given as text", { operator: { limits: { writeTimeoutMs: "15s" } } }, /operator\.limits\.writeTimeoutMs: expected an integer/],
    ["health on the operator port", { operator: { port: 9090 }, health: { port: 9090 } }, /health\.port: is the operator port's/],
    ["a health staleness below a second", { health: { staleAfterMs: 10 } }, /health\.staleAfterMs: expected an integer in \[1000, 3600000\]/],
    ["a reader written with spiffe://", { targets: [{ name: "t", filter: "passthrough_mtls", readers: ["spiffe://cluster.local/ns/a/sa/b"] }] }, /targets\[0\]\.readers\[0\]: write the principal without spiffe:\/\//],
    ["a reader with a * inside", { targets: [{ name: "t", filter: "passthrough_mtls", readers: ["cluster.local/ns/*/sa/b"] }] }, /targets\[0\]\.readers\[0\]: a \* may only stand first or last/],
    ["readers that are not a list", { targets: [{ name: "t", filter: "passthrough_mtls", readers: "cluster.local/ns/a/sa/b" }] }, /targets\[0\]\.readers: expected a list of principals/],

    ["an unknown field", { extra: 1 }, /^\/etc\/feed\/feed\.yaml: extra: unknown field/],
    ["a bad trust domain", { trustDomain: "Cluster.Local" }, /trustDomain: not a SPIFFE trust domain/],
    ["no clusters", { clusters: [] }, /clusters: expected a non-empty list/],
    ["a duplicate cluster", { clusters: [{ id: "a", kubeconfig: "x" }, { id: "a", kubeconfig: "y" }] }, /clusters\[1\]\.id: duplicate cluster id "a"/],
    ["an unknown filter", { targets: [{ name: "t", filter: "probe" }] }, /targets\[0\]\.filter: expected one of: passthrough_mtls, tunnel_port, waypoint_route/],
    ["workloads in a target's own fields", { targets: [{ name: "t", filter: "tunnel_port", config: { workloads: [] } }] }, /targets\[0\]\.config\.workloads: is the feed's to write/],
    ["a WasmPlugin on an unknown cluster", { targets: [{ name: "t", filter: "tunnel_port", wasmPlugin: { cluster: "zz", namespace: "n", name: "w" } }] }, /targets\[0\]\.wasmPlugin\.cluster: unknown cluster "zz"/],
    ["maxMs below quietMs", { debounce: { quietMs: 500, maxMs: 100 } }, /debounce\.maxMs: must be at least quietMs/],
    ["a cluster with both kubeconfig and files", { clusters: [{ id: "a", kubeconfig: "k", files: "mesh/" }] }, /clusters\[0\]\.files: give either kubeconfig \(an API server\) or files, not both/],
    ["a cluster with neither kubeconfig nor files", { clusters: [{ id: "a" }] }, /clusters\[0\]\.kubeconfig: missing: give kubeconfig \(an API server\) or files/],
    ["files that are not a path", { clusters: [{ id: "a", files: 3 }] }, /clusters\[0\]\.files: expected a string/],
    ["a ports cap past the wire's 16-bit count", { caps: { maxPortsPerService: 70_000 } }, /caps\.maxPortsPerService: expected an integer in \[1, 65535\]/],
    ["a text cap past what the filters take", { caps: { maxTextBytes: 4096 } }, /caps\.maxTextBytes: expected an integer in \[256, 2048\]/],
    ["an unknown cap", { caps: { maxEndpoints: 5 } }, /caps\.maxEndpoints: unknown field/],
    ["a WasmPlugin on a cluster read from files", { clusters: [{ id: "a", files: "mesh" }], targets: [{ name: "t", filter: "tunnel_port", wasmPlugin: { cluster: "a", namespace: "n", name: "w" } }] }, /targets\[0\]\.wasmPlugin\.cluster: cluster "a" reads files: no API server to apply a WasmPlugin to/],
  ] as const) {
    it(`refuses ${what} with one line naming the field`, () => {
      assert.throws(() => parse({ ...base, ...edit }), (e: unknown) => message.test((e as Error).message) && !(e as Error).message.includes("\n"));
    });
  }
});

describe("feed: meshNetworks", () => {
  it("reads Istio's format: fromRegistry per cluster, fromCidr per IP (least specific first), gateways counted", () => {
    const r = NetworkResolver.parse(`
networks:
  wide: { endpoints: [{ fromCidr: 10.0.0.0/8 }] }
  narrow: { endpoints: [{ fromCidr: 10.1.0.0/16 }, { fromRegistry: c2 }], gateways: [{ address: 1.2.3.4, port: 15443 }] }
  v6: { endpoints: [{ fromCidr: "fd00::/8" }] }
`);
    assert.equal(r.registryNetwork("c2"), "narrow");
    assert.equal(r.registryNetwork("c1"), "");
    assert.equal(r.cidrNetwork("10.1.2.3"), "wide");
    assert.equal(r.cidrNetwork("fd00::5"), "v6");
    assert.equal(r.cidrNetwork("192.168.0.1"), "");
    assert.equal(r.gatewaysIgnored, 1);
  });

  it("refuses a bad CIDR naming the network", () => {
    assert.throws(() => NetworkResolver.parse("networks: { n1: { endpoints: [{ fromCidr: 10.0.0.0/40 }] } }"), /meshNetworks\.networks\.n1\.endpoints: fromCidr is not a CIDR: "10\.0\.0\.0\/40"/);
  });
});
