// One format, two forms, one answer: the feed's binary messages (feed/src/delta/wire.ts), taken
// by the compiled passthrough_mtls over its real meshFeed long poll to the feed's real HTTP
// server (the project host's http_call does real HTTP/1.1 on loopback), must make the filter
// decide every connection exactly as the same filter configured with the JSON snapshot the feed
// renders for the same mesh at the same moment — at start, and after each change (a pod
// created, deleted, its IP reused by another service account, a pod leaving the mesh).
// Also: the feed's shadow of the compiled filter (delta/filter_shadow.ts) refuses what the
// filter refuses, names the field, and recovers without a full load when the VM kept its
// version, else from the published full message.
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, it } from "node:test";
import { readFileSync } from "node:fs";
import { ProxyWasmHost } from "../../host/index.js";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { parseFeedConfig } from "../../feed/src/config.js";
import { FeedController } from "../../feed/src/controller.js";
import { FilterShadow } from "../../feed/src/delta/filter_shadow.js";
import { startPlainChannel, type PlainChannel } from "./plain_channel.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { REPO_ROOT } from "../support/paths.js";
import { encodeMessage, KIND } from "../support/mesh_wire.js";
import { ensureBuilt } from "../host/helpers.js";
import { pod, service, slice } from "./fixtures.js";

const FILTER = "passthrough_mtls";
const COUNTERS = ["mtls", "headless", "passthrough", "no_destination", "rejected", "local_network_wins", "plaintext_pod"];

async function until(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** What the filter did with one connection to `destination`: its Envoy writes and counter moves. */
function decide(host: ProxyWasmHost, destination: string): string {
  const before = COUNTERS.map((c) => host.metrics().get(`${FILTER}.${c}`) ?? 0);
  const conn = host.connect({ source: "10.9.9.9:40000", destination });
  const writes = conn.filterStateWrites.map((w) => `${w.source} ${w.key}=${w.value}`).sort();
  const moved = COUNTERS.filter((c, i) => (host.metrics().get(`${FILTER}.${c}`) ?? 0) !== before[i]);
  conn.close();
  return `${destination}: [${moved.join(",")}] ${writes.join(" | ")}`;
}

describe("feed deltas through the compiled filter = the JSON snapshot through the same filter", () => {
  let controller: FeedController;
  let http: PlainChannel;
  let port: number;
  let c1: ClusterObjects;
  let live: ProxyWasmHost;
  const wasm = ensureBuilt(FILTER);

  before(async () => {
    const config = parseFeedConfig(
      JSON.stringify({
        wasmDir: join(REPO_ROOT, "build"),
        debounce: { quietMs: 20, maxMs: 200 },
        delta: { quietMs: 1, maxMs: 10, maxWaitSeconds: 5 },
        clusters: [{ id: "c1", kubeconfig: "/nonexistent" }],
        targets: [{ name: "mesh", filter: FILTER }],
      }),
      join(REPO_ROOT, "feed.json"),
    );
    c1 = new ClusterObjects("c1");
    c1.upsert("services", service("default", "app", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.5" }));
    c1.upsert("services", service("default", "db", [{ port: 5432 }], { clusterIP: "None" }));
    c1.upsert("pods", pod("default", "app-0", { ip: "10.0.0.1", sa: "app" }));
    c1.upsert("pods", pod("default", "app-1", { ip: ["10.0.0.2", "fd00::2"], sa: "app" }));
    c1.upsert("pods", pod("default", "db-0", { ip: "10.0.1.1", sa: "db" }));
    c1.upsert("pods", pod("default", "legacy-0", { ip: "10.0.2.1", labels: {} }));
    c1.upsert("endpointSlices", slice("default", "app", "app-1", [{ port: 8080 }], [{ ip: "10.0.0.1", pod: "app-0" }, { ip: "10.0.0.2", pod: "app-1" }]));
    c1.upsert("endpointSlices", slice("default", "db", "db-1", [{ port: 5432 }], [{ ip: "10.0.1.1", pod: "db-0" }]));
    controller = new FeedController(config, { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() }, [c1], undefined, () => undefined);
    http = await startPlainChannel(controller, config.delta.maxWaitSeconds);
    port = http.port;
    controller.markSynced("c1");
    await controller.flush();
    live = await ProxyWasmHost.fromFile(wasm, {
      rootId: FILTER,
      pluginConfiguration: JSON.stringify({ meshFeed: { cluster: "mesh_feed", target: "mesh", waitSeconds: 5 } }),
      clusters: { mesh_feed: { address: `127.0.0.1:${port}` } },
    });
    assert.ok(live.start(), live.startFailure);
    live.tick();
    await until("the full model", () => (live.metrics().get(`${FILTER}.feed.applied_full`) ?? 0) === 1);
  });

  after(async () => {
    live?.dispose();
    controller?.stop();
    await http?.close();
  });

  const DESTINATIONS = ["10.0.0.1:8080", "10.0.0.2:8080", "[fd00::2]:8080", "10.0.1.1:5432", "10.0.2.1:80", "10.0.3.1:80", "10.96.0.5:80", "10.0.0.9:8080"];

  /** Both forms at the feed's current state decide every destination alike. */
  async function assertSameDecisions(): Promise<string[]> {
    const snapshot = await (await fetch(`http://127.0.0.1:${port}/snapshot/mesh`)).text();
    const json = await ProxyWasmHost.fromFile(wasm, { rootId: FILTER, pluginConfiguration: snapshot });
    try {
      assert.ok(json.start(), json.startFailure);
      const fromJson = DESTINATIONS.map((d) => decide(json, d));
      const fromDeltas = DESTINATIONS.map((d) => decide(live, d));
      assert.deepEqual(fromDeltas, fromJson);
      return fromDeltas;
    } finally {
      json.dispose();
    }
  }

  const applied = () => (live.metrics().get(`${FILTER}.feed.applied_full`) ?? 0) + (live.metrics().get(`${FILTER}.feed.applied_delta`) ?? 0);

  async function change(edit: () => void): Promise<void> {
    const before = applied();
    edit();
    controller.changed("c1");
    await controller.flush();
    await until("the delta in the filter", () => applied() > before);
  }

  it("at start: the full message", async () => {
    const d = await assertSameDecisions();
    // The decisions are about something: the istio pod goes out over mTLS with its identity.
    assert.match(d[0], /^10\.0\.0\.1:8080: \[mtls\] .*spiffe:\/\/cluster\.local\/ns\/default\/sa\/app/);
    assert.match(d[4], /^10\.0\.2\.1:80: \[passthrough,plaintext_pod\] $/, "a pod out of the mesh: in clear, nothing written");
  });

  it("after a pod is created, deleted, and its IP reused by another service account", async () => {
    await change(() => c1.upsert("pods", pod("default", "new-0", { ip: "10.0.3.1", sa: "new" })));
    assert.match((await assertSameDecisions())[5], /\[mtls\] .*sa\/new/);
    await change(() => c1.remove("pods", pod("default", "new-0")));
    assert.doesNotMatch((await assertSameDecisions())[5], /\[mtls\]/);
    await change(() => c1.upsert("pods", pod("default", "other-0", { ip: "10.0.3.1", sa: "other" })));
    assert.match((await assertSameDecisions())[5], /\[mtls\] .*sa\/other/);
    assert.ok((live.metrics().get(`${FILTER}.feed.applied_delta`) ?? 0) >= 3, "these came as deltas");
  });

  it("after a pod leaves the mesh and an endpoint goes", async () => {
    await change(() => c1.upsert("pods", pod("default", "app-1", { ip: ["10.0.0.2", "fd00::2"], sa: "app", labels: {} })));
    await change(() => c1.upsert("endpointSlices", slice("default", "app", "app-1", [{ port: 8080 }], [{ ip: "10.0.0.1", pod: "app-0" }])));
    const d = await assertSameDecisions();
    assert.doesNotMatch(d[1], /\[mtls\]/);
    assert.equal((live.metrics().get(`${FILTER}.feed.refused`) ?? 0), 0);
  });
});

describe("the feed's shadow of the compiled filter", () => {
  const bytes = new Uint8Array(readFileSync(ensureBuilt(FILTER)));
  const target = { name: "mesh", filter: FILTER as const, network: "", config: {} };
  const epoch = 1000;
  const svc = { id: 0, hostname: "app.default.svc.cluster.local", ports: [[80, 8080]] as Array<[number, number]>, vips: [{ address: "10.96.0.5" }] };
  const first = Buffer.from(encodeMessage({ kind: KIND.delta, epoch, baseVersion: 0, version: 1, workloadIdLimit: 4, serviceIdLimit: 1, records: [{ service: svc }, { workload: { id: 0, istio: true, identity: "spiffe://cluster.local/ns/default/sa/app", addresses: ["10.0.0.1"], memberships: [{ service: 0 }] } }] }));
  const full1 = Buffer.from(encodeMessage({ kind: KIND.full, epoch, version: 1, workloadIdLimit: 4, serviceIdLimit: 1, records: [{ service: svc }, { workload: { id: 0, istio: true, identity: "spiffe://cluster.local/ns/default/sa/app", addresses: ["10.0.0.1"], memberships: [{ service: 0 }] } }] }));
  const noChange1 = () => Buffer.from(encodeMessage({ kind: KIND.noChange, epoch, version: 1, workloadIdLimit: 4, serviceIdLimit: 1, records: [] }));
  const empty = { version: 0, full: () => Buffer.alloc(0), noChange: () => Buffer.alloc(0) };
  const delta = (records: Parameters<typeof encodeMessage>[0]["records"]) => Buffer.from(encodeMessage({ kind: KIND.delta, epoch, baseVersion: 1, version: 2, workloadIdLimit: 4, serviceIdLimit: 1, records }));

  it("takes the first version (a delta from the empty model) and good deltas", () => {
    const shadow = new FilterShadow(target, () => bytes);
    assert.equal(shadow.check(first, empty), "");
    assert.equal(shadow.check(delta([{ workload: { id: 1, addresses: ["10.0.0.2"] } }]), { version: 1, full: () => full1, noChange: noChange1 }), "");
    shadow.reset();
  });

  it("refuses what the filter refuses, in the filter's words, then takes the next version without a full load", () => {
    const shadow = new FilterShadow(target, () => bytes);
    assert.equal(shadow.check(first, empty), "");
    const bad = delta([{ workload: { id: 1, addresses: ["10.0.0.1"] } }]);
    assert.match(shadow.check(bad, { version: 1, full: () => full1, noChange: noChange1 }), /^passthrough_mtls refuses it: record 0 \(workload upsert id 1\)\.addresses\[0\]: address 10\.0\.0\.1 on network "" is already used by workload 0$/);
    // A second refusal in a row is reported in the filter's words too (its warning is logged once per condition).
    assert.match(shadow.check(bad, { version: 1, full: () => full1, noChange: noChange1 }), /^passthrough_mtls refuses it: record 0 \(workload upsert id 1\)\.addresses\[0\]: address 10\.0\.0\.1/);
    let fullAsked = 0;
    let noChangeAsked = 0;
    const at1 = { version: 1, full: () => (fullAsked++, full1), noChange: () => (noChangeAsked++, noChange1()) };
    assert.equal(shadow.check(delta([{ removeWorkload: 0 }]), at1), "");
    assert.deepEqual([shadow.recoveries, shadow.resyncs, shadow.rebuilds, noChangeAsked, fullAsked], [2, 0, 1, 1, 0], "the same VM, back at version 1 by a no-change: no full load");
    shadow.reset();
  });

  it("resyncs from the published full message when the VM is not at the channel's version", () => {
    const shadow = new FilterShadow(target, () => bytes);
    assert.equal(shadow.check(first, empty), "");
    assert.match(shadow.check(delta([{ workload: { id: 1, addresses: ["10.0.0.1"] } }]), { version: 1, full: () => full1, noChange: noChange1 }), /refuses it: record 0/);
    // The channel says version 2 (as if a version were published behind the shadow's back): the
    // VM's no-change answer does not match, so the shadow loads the published full message.
    const full2 = Buffer.from(encodeMessage({ kind: KIND.full, epoch, version: 2, workloadIdLimit: 4, serviceIdLimit: 1, records: [] }));
    // (Another content digest than the VM's model: a no-change naming the VM's own digest would be
    // taken from any version, format 3.)
    const noChange2 = () => {
      const m = Buffer.from(encodeMessage({ kind: KIND.noChange, epoch, version: 2, workloadIdLimit: 4, serviceIdLimit: 1, records: [] }));
      m.writeBigUInt64LE(0x5eedn, 48);
      return m;
    };
    const from2 = Buffer.from(encodeMessage({ kind: KIND.delta, epoch, baseVersion: 2, version: 3, workloadIdLimit: 4, serviceIdLimit: 1, records: [{ workload: { id: 1, addresses: ["10.0.0.3"] } }] }));
    assert.equal(shadow.check(from2, { version: 2, full: () => full2, noChange: noChange2 }), "");
    assert.deepEqual([shadow.recoveries, shadow.resyncs, shadow.rebuilds], [0, 1, 1]);
    shadow.reset();
  });
});
