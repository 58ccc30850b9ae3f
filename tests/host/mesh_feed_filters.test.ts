// Each filter with `meshFeed`, compiled, in the proxy-wasm host, fed real v1 binary messages
// (tests/support/mesh_wire.ts records) over the host's http_call emulation by a feed on loopback
// (tests/support/fake_feed.ts, wire mode): a full model then deltas change the decisions
// connection by connection; an invalid delta is refused whole and the previous model keeps
// deciding; with the feed down the last good model decides (fail static), then a resync.
// Run: node --import tsx --test tests/host/mesh_feed_filters.test.ts
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import type { ProxyWasmHost } from "../../host/index.js";
import { FakeFeed } from "../support/fake_feed.js";
import type { WireRecord, WireService, WireWorkload } from "../support/mesh_wire.js";
import { CLUSTER, DISABLE_TUNNELING, ORIGINAL_DST, SAN, envoyWrites, startFilter, wasmProperties, until } from "./helpers.js";

const sa = (name: string) => `spiffe://cluster.local/ns/default/sa/${name}`;
const pod = (id: number, address: string, identity: string, more: Partial<WireWorkload> = {}): WireRecord => ({
  workload: { id, istio: true, identity: sa(identity), addresses: [address], ...more },
});
const service = (s: WireService): WireRecord => ({ service: s });

describe("mesh feed: each filter decides with the feed's binary models", () => {
  let feed: FakeFeed;
  let host: ProxyWasmHost;
  let prefix = "";
  // Wall time plus what the test skips ahead, so backoffs need no real waiting.
  let skippedMs = 0n;
  const clock = () => (BigInt(Date.now()) + skippedMs) * 1_000_000n;
  const metric = (name: string) => host.metrics().get(`${prefix}.feed.${name}`) ?? 0;
  const counter = (name: string) => host.metrics().get(`${prefix}.${name}`) ?? 0;
  const atVersion = (v: bigint) => until(`version ${v}`, () => metric("version") === Number(v));
  const meshFeed = { cluster: "mesh_feed", target: "node-a", waitSeconds: 1 };

  before(async () => {
    feed = new FakeFeed();
    await feed.start();
  });
  after(() => feed.kill());
  afterEach(async () => {
    host?.dispose();
    await feed.kill();
    // A fresh feed for the next filter: new epoch, no history.
    feed.records.length = 0;
    feed.texts.length = 0;
    feed.inject.length = 0;
    feed.restartEpoch();
    await feed.start();
  });

  const start = async (name: string, configuration: Record<string, unknown>) => {
    prefix = name;
    host = await startFilter(name, { ...configuration, meshFeed }, { clock, clusters: { mesh_feed: { address: `127.0.0.1:${feed.boundPort}` } } });
    host.tick(); // the first poll goes out on the first tick
  };

  describe("passthrough_mtls", () => {
    const connect = (destination: string) => host.connect({ source: "10.0.9.9:40000", destination });
    const mtls = (identity: string, address: string) => [
      [SAN, identity],
      [ORIGINAL_DST, address],
      [CLUSTER, "outbound_mtls_passthrough"],
    ];

    it("a pod added gets mTLS with its identity, removed goes plain, its IP reused by another SA gets the new identity", async () => {
      feed.publishRecords([pod(0, "10.0.0.1", "app")]);
      await start("passthrough_mtls", { workloads: [], services: [] });
      await atVersion(1n);
      assert.deepEqual(envoyWrites(connect("10.0.0.2:8080")), [], "10.0.0.2 is not in the model yet: plain");
      assert.deepEqual(envoyWrites(connect("10.0.0.1:443")), mtls(sa("app"), "10.0.0.1:443"));

      await atVersion(feed.publishRecords([pod(1, "10.0.0.2", "db")]));
      assert.deepEqual(envoyWrites(connect("10.0.0.2:8080")), mtls(sa("db"), "10.0.0.2:8080"), "added by a delta: mTLS with its identity");

      await atVersion(feed.publishRecords([{ removeWorkload: 1 }]));
      assert.deepEqual(envoyWrites(connect("10.0.0.2:8080")), [], "removed: plain again");

      // The IP goes to a pod of another service account, under another id.
      await atVersion(feed.publishRecords([pod(7, "10.0.0.2", "cache")]));
      assert.deepEqual(envoyWrites(connect("10.0.0.2:8080")), mtls(sa("cache"), "10.0.0.2:8080"), "the new owner's identity, never the old one");
      assert.equal(metric("applied_full"), 1);
      assert.equal(metric("applied_delta"), 3);
    });

    it("refuses an invalid delta whole: the model keeps deciding as before, then resyncs", async () => {
      feed.publishRecords([pod(0, "10.0.0.1", "app")]);
      await start("passthrough_mtls", { workloads: [], services: [] });
      await atVersion(1n);
      // Valid records first (a new pod, the old one removed), then one that breaks a rule:
      // none of them may be applied.
      feed.invalidDelta = [pod(3, "10.0.0.3", "new"), { removeWorkload: 0 }, { workload: { id: 4, istio: true, identity: "", addresses: ["10.0.0.4"] } }];
      await until("the held poll", () => feed.heldCount === 1);
      feed.inject.push("bad-wire-delta:identity");
      feed.publishRecords([pod(5, "10.0.0.5", "five")]); // answers the held poll; the next poll gets the bad delta
      await until("the refusal", () => metric("refused") === 1);
      const refusal = host.logLines("warn").find((l) => l.includes("refused a message"));
      assert.match(refusal ?? "", /record 2 \(workload upsert id 4\)\.identity/, refusal);
      assert.deepEqual(envoyWrites(connect("10.0.0.1:443")), mtls(sa("app"), "10.0.0.1:443"), "the removal in the refused delta was not applied");
      assert.deepEqual(envoyWrites(connect("10.0.0.3:443")), [], "nor the upsert before the bad record");
      assert.deepEqual(envoyWrites(connect("10.0.0.5:443")), mtls(sa("five"), "10.0.0.5:443"), "the good delta before it was");
      // After the backoff the client asks for a full model and is current again.
      skippedMs += 1500n;
      host.tick();
      await until("the resync", () => metric("applied_full") === 2);
      assert.equal(metric("version"), 2);
    });

    it("fails static while the feed is down (the last model decides), then resyncs with the new epoch", async () => {
      feed.publishRecords([pod(0, "10.0.0.1", "app")]);
      await start("passthrough_mtls", { workloads: [], services: [] });
      await atVersion(1n);
      await feed.kill();
      await until("the feed to be unavailable", () => metric("unavailable") >= 1);
      assert.deepEqual(envoyWrites(connect("10.0.0.1:443")), mtls(sa("app"), "10.0.0.1:443"), "decided by the last good model");
      assert.equal(host.failed, false);
      feed.restartEpoch();
      feed.publishRecords([pod(2, "10.0.0.9", "after")]);
      await feed.start();
      skippedMs += 1500n;
      host.tick();
      await until("the resync", () => metric("applied_full") === 2);
      assert.deepEqual(envoyWrites(connect("10.0.0.9:443")), mtls(sa("after"), "10.0.0.9:443"));
      assert.deepEqual(envoyWrites(connect("10.0.0.1:443")), mtls(sa("app"), "10.0.0.1:443"), "the new epoch's full model still has it (records of both versions)");
    });
  });

  describe("tunnel_port", () => {
    const web = (ports: Array<[number, number]>): WireRecord => service({ id: 0, hostname: "web.default.svc.cluster.local", ports, vips: [{ address: "10.96.0.10" }] });
    const webPod = pod(0, "10.1.0.1", "web", { healthy: true, memberships: [{ service: 0 }] });

    it("client: a target port change is carried to the next connection, for the VIP and for the pod IP", async () => {
      feed.publishRecords([web([[80, 8080]]), webPod]);
      await start("tunnel_port", { role: "client", workloads: [], services: [] });
      await atVersion(1n);
      let conn = host.connect({ source: "10.0.9.9:40000", destination: "10.96.0.10:80" });
      assert.deepEqual(envoyWrites(conn).find(([k]) => k === ORIGINAL_DST), [ORIGINAL_DST, "10.1.0.1:8080"]);
      await atVersion(feed.publishRecords([web([[80, 9090]])]));
      conn = host.connect({ source: "10.0.9.9:40000", destination: "10.96.0.10:80" });
      assert.deepEqual(envoyWrites(conn).find(([k]) => k === ORIGINAL_DST), [ORIGINAL_DST, "10.1.0.1:9090"], "the new target port");
      // The pod dialled directly on the new target port stands for service port 80 (the model's memberships).
      conn = host.connect({ source: "10.0.9.9:40000", destination: "10.1.0.1:9090" });
      assert.equal(wasmProperties(conn)["wasm.service_port"], "80");
      conn = host.connect({ source: "10.0.9.9:40000", destination: "10.1.0.1:8080" });
      assert.deepEqual(envoyWrites(conn), [[DISABLE_TUNNELING, "true"]], "the old target port is no longer a service port: unknown, passed through");
    });

    it("server: a model without its own workload is taken; tunnels are refused and counted until it is back", async () => {
      feed.publishRecords([web([[80, 8080]]), webPod]);
      await start("tunnel_port", {
        role: "server",
        localWorkload: "10.1.0.1",
        workloads: [{ uid: "w", addresses: ["10.1.0.1"], tlsMode: "istio", identity: sa("web") }],
        services: [{ hostname: "web.default.svc.cluster.local", ports: { "80": 8080 }, endpoints: [{ workload: "w" }] }],
      });
      await atVersion(1n);
      const tunnelIn = () =>
        host.connect({
          source: "127.0.0.6:40000",
          destination: "10.1.0.1:8080",
          filterState: { "io.tunnel_port.service_port": "80", "io.tunnel_port.peer_principal": sa("client"), "io.tunnel_port.authority": "10.1.0.1:8080" },
        });
      await atVersion(feed.publishRecords([{ removeWorkload: 0 }]));
      assert.equal(metric("refused"), 0, "the model is taken, not refused (the delta is applied in place already)");
      const refused = tunnelIn();
      assert.equal(refused.closed, true);
      assert.equal(counter("server.refused_no_local_workload"), 1);
      await atVersion(feed.publishRecords([pod(3, "10.1.0.1", "web", { memberships: [{ service: 0, overrides: [[80, 8080]] }] })]));
      const back = tunnelIn();
      assert.equal(back.closed, false, "its workload is back (under another id): accepted");
      assert.equal(counter("server.accepted"), 1);
    });
  });

  describe("waypoint_route", () => {
    const SOURCE = "10.1.0.5";
    const source = pod(0, SOURCE, "client");
    const reviews = (more: Partial<WireService> = {}): WireRecord =>
      service({ id: 0, hostname: "reviews.default.svc.cluster.local", ports: [[9080, 9080]], vips: [{ address: "10.96.0.20" }], ...more });
    const reviewsPod = pod(1, "10.1.0.20", "reviews", { memberships: [{ service: 0 }] });
    const settings = {
      localWorkload: SOURCE,
      workloads: [{ uid: "src", addresses: [SOURCE], tlsMode: "istio", identity: sa("client") }],
      services: [],
    };
    const dial = () => host.connect({ source: `${SOURCE}:40000`, destination: "10.96.0.20:9080" });

    it("a waypoint added by a delta: the next connection is routed through it, with its SANs", async () => {
      feed.publishRecords([source, reviews(), reviewsPod]);
      await start("waypoint_route", settings);
      await atVersion(1n);
      assert.deepEqual(envoyWrites(dial()).slice(0, 2), [[SAN, sa("reviews")], [ORIGINAL_DST, "10.1.0.20:15008"]], "no waypoint: HBONE to the endpoint");
      const version = feed.publishRecords([
        service({ id: 1, hostname: "waypoint.default.svc.cluster.local", ports: [[15008, 15008]], vips: [{ address: "10.96.0.30" }], sans: [sa("waypoint-svc")] }),
        pod(2, "10.1.0.30", "waypoint", { memberships: [{ service: 1 }] }),
        reviews({ waypoint: { hostname: "waypoint.default.svc.cluster.local", port: 15008 } }),
      ]);
      await atVersion(version);
      const conn = dial();
      // The waypoint service's SANs (a text built for a service id the delta added), then the instance's own.
      assert.deepEqual(envoyWrites(conn).slice(0, 2), [[SAN, `${sa("waypoint-svc")},${sa("waypoint")}`], [ORIGINAL_DST, "10.1.0.30:15008"]]);
      assert.equal(wasmProperties(conn)["wasm.authority"], "10.96.0.20:9080");
      assert.equal(counter("hbone_waypoint"), 1);
      // An existing service's texts change in place: reviews loses its waypoint and gains SANs.
      await atVersion(feed.publishRecords([reviews({ sans: [sa("reviews-svc")] })]));
      assert.deepEqual(envoyWrites(dial()).slice(0, 2), [[SAN, `${sa("reviews-svc")},${sa("reviews")}`], [ORIGINAL_DST, "10.1.0.20:15008"]]);
    });

    it("a model without its own workload is taken: connections are closed and counted until it is back", async () => {
      feed.publishRecords([source, reviews(), reviewsPod]);
      await start("waypoint_route", settings);
      await atVersion(1n);
      await atVersion(feed.publishRecords([{ removeWorkload: 0 }]));
      assert.equal(metric("refused"), 0);
      assert.equal(dial().closed, true);
      assert.equal(counter("error_no_local_workload"), 1);
      await atVersion(feed.publishRecords([pod(5, SOURCE, "client")]));
      assert.equal(dial().closed, false, "back under another id: decided again");
      assert.equal(counter("hbone_endpoint"), 1);
    });
  });
});
