// The controller's delta side without an API server (objects fed directly): 503 before the
// first version; a target consumed by deltas renders no JSON until /snapshot asks; a delta
// larger than the full message is answered with the full one; held polls are answered when
// the feed stops (a VM is never left hanging on a feed that is going away).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { parseFeedConfig } from "../../feed/src/config.js";
import { FeedController } from "../../feed/src/controller.js";
import { startPlainChannel, type PlainChannel } from "./plain_channel.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { REPO_ROOT } from "../support/paths.js";
import { decodeMessage } from "./delta_wire_decode.js";
import { pod, service, slice } from "./fixtures.js";

describe("feed deltas: controller and HTTP (no API server)", () => {
  let controller: FeedController;
  let http: PlainChannel;
  let base: string;
  let c1: ClusterObjects;

  before(async () => {
    const config = parseFeedConfig(
      JSON.stringify({
        wasmDir: join(REPO_ROOT, "build"),
        debounce: { quietMs: 20, maxMs: 200 },
        delta: { quietMs: 1, maxMs: 10, maxWaitSeconds: 5 },
        clusters: [{ id: "c1", kubeconfig: "/nonexistent" }],
        targets: [{ name: "mesh", filter: "passthrough_mtls" }],
      }),
      join(REPO_ROOT, "feed.json"),
    );
    c1 = new ClusterObjects("c1");
    c1.upsert("services", service("default", "app", [{ port: 80, targetPort: 8080 }], { clusterIP: "10.96.0.5" }));
    controller = new FeedController(config, { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() }, [c1], undefined, () => undefined);
    http = await startPlainChannel(controller, config.delta.maxWaitSeconds);
    base = `http://127.0.0.1:${http.port}`;
  });

  after(async () => {
    controller?.stop();
    await http?.close();
  });

  const get = async (epoch: number, version: number, wait = 0) => {
    const r = await fetch(`${base}/delta/mesh?epoch=${epoch}&version=${version}&wait=${wait}`);
    return { status: r.status, kind: r.headers.get("x-feed-kind"), body: Buffer.from(await r.arrayBuffer()) };
  };

  it("answers 503 before the first version", async () => {
    const r = await get(0, 0);
    assert.equal(r.status, 503);
    assert.match(r.body.toString(), /nothing published yet/);
  });

  it("a target with no file or WasmPlugin delivery renders its JSON only when /snapshot asks", async () => {
    controller.markSynced("c1");
    await controller.flush();
    assert.equal((await get(0, 0)).status, 200);
    const metrics = () => fetch(`${base}/metrics`).then((r) => r.text());
    assert.doesNotMatch(await metrics(), /feed_check_seconds_count\{path="snapshot"\}/);
    assert.doesNotMatch(await metrics(), /feed_snapshot_version\{target="mesh"\}/);
    const snap = await fetch(`${base}/snapshot/mesh`);
    assert.equal(snap.status, 200);
    assert.match(await snap.text(), /"hostname":"app\.default\.svc\.cluster\.local"/);
    assert.match(await metrics(), /feed_check_seconds_count\{path="snapshot"\} 1$/m);
  });

  it("sends the full message when a delta would be larger", async () => {
    for (let i = 0; i < 200; i++) c1.upsert("pods", pod("default", `p-${i}`, { ip: `10.0.${i >> 8}.${i & 255}`, sa: "app" }));
    c1.upsert("endpointSlices", slice("default", "app", "app-1", [{ port: 8080 }], [...c1.pods.values()].map((p) => ({ ip: p.status!.podIP!, pod: p.metadata!.name! }))));
    controller.changed("c1");
    await controller.flush();
    const full = decodeMessage((await get(0, 0)).body);
    assert.equal(full.records.length, 201);
    // Every pod goes: a delta from `full.version` is 200 removals, more bytes than the full message (one service).
    for (let i = 0; i < 200; i++) c1.remove("pods", pod("default", `p-${i}`));
    controller.changed("c1");
    await controller.flush();
    const r = await get(full.epoch, full.version);
    assert.equal(r.kind, "full");
    assert.equal(decodeMessage(r.body).records.length, 1);
    assert.match(await (await fetch(`${base}/metrics`)).text(), /feed_delta_full_total\{reason="smaller",target="mesh"\} 1/);
  });

  it("held polls are answered when the feed stops", async () => {
    const now = decodeMessage((await get(0, 0)).body);
    const held = get(now.epoch, now.version, 5);
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    controller.stop();
    const r = await held;
    assert.equal(r.status, 200);
    assert.equal(r.kind, "no-change");
    assert.ok(Date.now() - started < 2000);
  });
});
