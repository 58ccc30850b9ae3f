// The feed's configuration file and the meshNetworks file: every problem is one line naming
// the field; defaults as documented in feed/README.md.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_CHANNEL_LIMITS, DEFAULT_DEBOUNCE, DEFAULT_OPERATOR_LIMITS, parseFeedConfig } from "../../feed/src/config.js";
import { DEFAULT_PUSH } from "../../feed/src/config_ha.js";
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

  it("clusters at run time: no remote secrets unless asked for (then the first API-server cluster holds them), a 30 s sync timeout, the file re-read every 2 s", () => {
    const c = parse(base);
    assert.equal(c.remoteSecrets, undefined);
    assert.equal(c.clusterSyncTimeoutSeconds, 30);
    assert.equal(c.configReloadMs, 2000);
    const r = parse({ ...base, clusters: [{ id: "f", files: "mesh" }, { id: "k", kubeconfig: "in-cluster" }], remoteSecrets: { namespace: "mesh-feed" }, clusterSyncTimeoutSeconds: 0, configReloadMs: 0 });
    assert.deepEqual(r.remoteSecrets, { cluster: "k", namespace: "mesh-feed" });
    assert.equal(r.clusterSyncTimeoutSeconds, 0);
    assert.equal(r.configReloadMs, 0);
  });

  it("several replicas: no Lease unless configured (this process writes); istiod's timings; the identity from POD_NAME; the push backoff", () => {
    const c = parse(base);
    assert.equal(c.leaderElection, undefined);
    assert.deepEqual(c.push, { retryInitialMs: 1000, retryMaxMs: 30_000, unreadyAfterMs: 60_000, timeoutMs: 30_000 });
    assert.deepEqual(c.push, DEFAULT_PUSH);
    const saved = process.env.POD_NAME;
    process.env.POD_NAME = "mesh-feed-5d9c-abcde";
    try {
      const le = parse({ ...base, clusters: [{ id: "files", files: "mesh/" }, ...base.clusters], leaderElection: { namespace: "mesh-feed" } }).leaderElection;
      assert.deepEqual(le, { cluster: "c1", namespace: "mesh-feed", name: "mesh-feed", identity: "mesh-feed-5d9c-abcde", leaseDurationMs: 30_000, renewDeadlineMs: 15_000, retryPeriodMs: 7_500 });
    } finally {
      if (saved === undefined) delete process.env.POD_NAME;
      else process.env.POD_NAME = saved;
    }
    assert.equal(parse({ ...base, leaderElection: { namespace: "n", identity: "me" } }).leaderElection?.identity, "me");
    assert.deepEqual(parse({ ...base, push: { retryInitialMs: 200 } }).push, { ...DEFAULT_PUSH, retryInitialMs: 200 });
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
    assert.equal(c.operator?.limits.maxConnectionsPerPeer, 0);
    // A caller's cap below the default per peer lowers the peer's (a peer is one of the caller's).
    const small = parse({ ...base, channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { maxConnectionsPerCaller: 8, stallTimeoutMs: 1000 } } });
    assert.deepEqual(small.channel?.limits, { ...DEFAULT_CHANNEL_LIMITS, maxConnectionsPerCaller: 8, maxConnectionsPerPeer: 8, stallTimeoutMs: 1000 });
    assert.equal(parse({ ...base, delta: { minFullIntervalMs: 0 } }).delta.minFullIntervalMs, 0);
    assert.equal(parse({ ...base, delta: { fullBuildBurst: 1 } }).delta.fullBuildBurst, 1);
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
    ["a per-peer cap above the per-caller cap", { channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { maxConnectionsPerCaller: 8, maxConnectionsPerPeer: 9 } } }, /channel\.limits\.maxConnectionsPerPeer: must be at most maxConnectionsPerCaller/],
    ["a per-peer cap on the operator port (no identities there)", { operator: { limits: { maxConnectionsPerPeer: 5 } } }, /operator\.limits\.maxConnectionsPerPeer: unknown field/],
    ["maxUnsentBytes on the channel (it answers one request at a time)", { channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { maxUnsentBytes: 0 } } }, /channel\.limits\.maxUnsentBytes: not a channel limit: the channel answers a connection's requests one at a time/],
    ["a stall timeout below 100 ms", { channel: { certFile: "c", keyFile: "k", caFile: "a", limits: { stallTimeoutMs: 50 } } }, /channel\.limits\.stallTimeoutMs: expected an integer in \[100, 3600000\]/],
    ["an empty full-build bucket", { delta: { fullBuildBurst: 0 } }, /delta\.fullBuildBurst: expected an integer in \[1, 1000\]/],
    ["a full-build interval given as text", { delta: { minFullIntervalMs: "1s" } }, /delta\.minFullIntervalMs: expected an integer in \[0, 600000\]/],
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
    ["remote secrets read from a files cluster", { clusters: [{ id: "a", files: "mesh" }], remoteSecrets: { namespace: "mesh-feed" } }, /remoteSecrets\.cluster: expected the id of a cluster read from an API server \(kubeconfig\), not ""/],
    ["remote secrets of an unknown cluster", { remoteSecrets: { cluster: "zz", namespace: "mesh-feed" } }, /remoteSecrets\.cluster: expected the id of a cluster read from an API server \(kubeconfig\), not "zz"/],
    ["remote secrets without a namespace", { remoteSecrets: {} }, /remoteSecrets\.namespace: missing required field/],
    ["remote secrets in a namespace that cannot exist", { remoteSecrets: { namespace: "Mesh_Feed" } }, /remoteSecrets\.namespace: not a namespace name/],
    ["a negative sync timeout", { clusterSyncTimeoutSeconds: -1 }, /clusterSyncTimeoutSeconds: expected an integer in \[0, 86400\]/],
    ["a reload period given as text", { configReloadMs: "2s" }, /configReloadMs: expected an integer/],
    ["a Lease without its namespace", { leaderElection: {} }, /leaderElection\.namespace: missing required field/],
    ["a Lease on an unknown cluster", { leaderElection: { namespace: "n", cluster: "zz" } }, /leaderElection\.cluster: unknown cluster "zz"/],
    ["a Lease on a cluster read from files", { clusters: [{ id: "a", files: "mesh" }, { id: "b", kubeconfig: "k" }], leaderElection: { namespace: "n", cluster: "a" } }, /leaderElection\.cluster: cluster "a" reads files: no API server to hold the Lease/],
    ["a renew deadline not below the lease", { leaderElection: { namespace: "n", leaseDurationMs: 10_000, renewDeadlineMs: 10_000 } }, /leaderElection\.renewDeadlineMs: must be below leaseDurationMs/],
    ["a retry period too close to the renew deadline", { leaderElection: { namespace: "n", renewDeadlineMs: 1000, retryPeriodMs: 900 } }, /leaderElection\.retryPeriodMs: must be below renewDeadlineMs \/ 1\.2/],
    ["a lease in fractions of a second", { leaderElection: { namespace: "n", leaseDurationMs: 2500, renewDeadlineMs: 1000, retryPeriodMs: 100 } }, /leaderElection\.leaseDurationMs: must be whole seconds/],
    ["an unknown Lease field", { leaderElection: { namespace: "n", ttl: 30 } }, /leaderElection\.ttl: unknown field/],
    ["a backoff cap below its start", { push: { retryInitialMs: 5000, retryMaxMs: 1000 } }, /push\.retryMaxMs: must be at least retryInitialMs/],
    ["a push timeout given as text", { push: { timeoutMs: "30s" } }, /push\.timeoutMs: expected an integer/],
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
