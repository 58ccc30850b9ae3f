// A replica's channel as the serving gate drives it (feed/src/serving_gate.ts), in process, with
// a stand-in for the Lease loop's contact with the API server: in touch, it serves; past
// renewDeadline without an answer, a held poll is released with a 503 and every new poll gets
// one (counted, /readyz fails with the reason); back in touch, it still answers 503 until its
// watches are established again, have settled and their changes are published; then it serves
// the content it resynced. The real partition (a relay cut in front of the real kube-apiserver,
// the real Envoy) is tests/feed/replicas.test.ts and replicas3_envoy.test.ts.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ClusterObjects } from "../../feed/src/cluster_objects.js";
import { parseFeedConfig } from "../../feed/src/config.js";
import { FeedController } from "../../feed/src/controller.js";
import { NetworkResolver } from "../../feed/src/mesh_networks.js";
import { SETTLE_MS } from "../../feed/src/serving_gate.js";
import { REPO_ROOT } from "../support/paths.js";
import { decodeMessage } from "./delta_wire_decode.js";
import { pod } from "./fixtures.js";
import { eventually, sleep } from "./harness.js";
import { startPlainChannel, type PlainChannel } from "./plain_channel.js";

const RENEW_DEADLINE_MS = 400;

describe("serving gate: a replica out of touch with its API server answers 503 and resyncs before it serves", () => {
  let controller: FeedController;
  let http: PlainChannel;
  let base: string;
  let c1: ClusterObjects;
  /** The Lease loop's last answer from the API server (the test moves it). */
  let contactAt = Date.now();

  before(async () => {
    const config = parseFeedConfig(
      JSON.stringify({
        wasmDir: join(REPO_ROOT, "build"),
        debounce: { quietMs: 20, maxMs: 200 },
        delta: { quietMs: 1, maxMs: 10, maxWaitSeconds: 30 },
        clusters: [{ id: "c1", kubeconfig: "/nonexistent" }],
        targets: [{ name: "mesh", filter: "passthrough_mtls" }],
      }),
      join(REPO_ROOT, "feed.json"),
    );
    c1 = new ClusterObjects("c1");
    c1.upsert("pods", pod("default", "a", { ip: "10.0.0.1", sa: "a" }));
    controller = new FeedController(config, { trustDomain: "cluster.local", domainSuffix: "cluster.local", systemNamespace: "istio-system", networks: new NetworkResolver() }, [c1], undefined, () => undefined);
    controller.useLease({ leading: () => false, holder: () => "another", contactAgeMs: () => Date.now() - contactAt }, "c1", RENEW_DEADLINE_MS);
    http = await startPlainChannel(controller, config.delta.maxWaitSeconds);
    base = `http://127.0.0.1:${http.port}`;
    controller.markSynced("c1");
    await controller.flush();
  });

  after(async () => {
    controller?.stop();
    await http?.close();
  });

  const get = async (query: string) => {
    const r = await fetch(`${base}/delta/mesh?${query}`);
    return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
  };
  const metric = async (line: RegExp) => line.exec(await (await fetch(`${base}/metrics`)).text())?.[1];
  /** Keeps the stand-in Lease loop answering (every 100 ms) until stopped. */
  const inTouch = () => {
    const timer = setInterval(() => (contactAt = Date.now()), 100);
    contactAt = Date.now();
    return () => clearInterval(timer);
  };

  it("cut off: a held poll is released with a 503 within renewDeadline of the last answer; new polls get 503; unready; counted", async () => {
    const stop = inTouch();
    const full = await get("epoch=0&version=0&format=3");
    assert.equal(full.status, 200);
    const m = decodeMessage(full.body);
    const held = get(`epoch=${m.epoch}&version=${m.version}&wait=20&format=3`).then((a) => ({ ...a, at: Date.now() }));
    await sleep(300);
    assert.equal(controller.ready().ready, true, controller.ready().reason);
    stop();
    const lastAnswer = contactAt;
    const answer = await held;
    assert.equal(answer.status, 503);
    assert.match(answer.body.toString(), /^not serving: the API server holding the writers' Lease has not answered for \d+ s/);
    const after = answer.at - lastAnswer;
    // The gate looks every 100 ms; a loaded machine may be later still.
    assert.ok(after >= RENEW_DEADLINE_MS && after < RENEW_DEADLINE_MS + 1000, `released ${after} ms after the last answer`);
    assert.equal((await get("epoch=0&version=0&format=3")).status, 503);
    assert.equal((await get(`epoch=${m.epoch}&version=${m.version}&wait=20&format=3`)).status, 503, "a current client is not held");
    const ready = controller.ready();
    assert.equal(ready.ready, false);
    assert.match(ready.reason, /^not serving the channel: the API server holding the writers' Lease has not answered/);
    assert.equal(await metric(/^feed_channel_unavailable_total\{reason="cut_off"\} (\d+)$/m), "3");
    assert.equal(await metric(/^feed_channel_serving (\d+)$/m), "0");
  });

  it("back in touch: 503 (resyncing) while a watch is not established again and for SETTLE_MS after; then it serves what it resynced", async () => {
    controller.watchFailed("c1", "pods");
    const stop = inTouch();
    try {
      await sleep(300);
      const resyncing = await get("epoch=0&version=0&format=3");
      assert.equal(resyncing.status, 503);
      assert.match(resyncing.body.toString(), /^not serving: resyncing after the API server was out of reach \(1 watches not established again\)/);
      assert.equal(controller.ready().ready, false);
      // The watch is back with what changed meanwhile (a relist's difference).
      c1.upsert("pods", pod("default", "b", { ip: "10.0.0.2", sa: "b" }));
      controller.changed("c1");
      controller.watchRecovered("c1", "pods");
      const recoveredAt = Date.now();
      assert.equal((await get("epoch=0&version=0&format=3")).status, 503, "settling");
      const { value: served } = await eventually("the replica serves again", SETTLE_MS + 2000, async () => {
        const a = await get("epoch=0&version=0&format=3");
        return a.status === 200 ? a : undefined;
      });
      assert.ok(Date.now() - recoveredAt >= SETTLE_MS, "not before the watches settled");
      assert.equal(decodeMessage(served.body).records.length, 2, "the first answer carries the change made while cut off");
      assert.equal(controller.ready().ready, true, controller.ready().reason);
      assert.equal(await metric(/^feed_channel_serving (\d+)$/m), "1");
      assert.ok(Number(await metric(/^feed_channel_unavailable_total\{reason="resyncing"\} (\d+)$/m)) >= 2);
    } finally {
      stop();
    }
  });
});
