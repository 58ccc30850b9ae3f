// A crafted full message through a filter's own feed client (compiled passthrough_mtls in the
// proxy-wasm host, the feed on loopback: tests/support/fake_feed.ts): a membership of a
// service the message does not define is refused whole on the ordinary refusal path: one
// warning naming the record and field, the `feed.refused` counter, and the model in force
// (here the configuration's snapshot) keeps deciding. The decoder's side of the same input,
// and the delta that once completed such a membership: tests/host/mesh_crafted.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { FakeFeed } from "../support/fake_feed.js";
import { danglingFull } from "../support/mesh_crafted.js";
import { CLUSTER, ORIGINAL_DST, SAN, envoyWrites, startFilter, until } from "./helpers.js";

describe("mesh feed: a crafted full message through the filter's feed client", () => {
  let feed: FakeFeed;
  before(async () => {
    feed = new FakeFeed();
    await feed.start();
  });
  after(() => feed.kill());

  it("passthrough_mtls: a dangling membership is refused whole, named, counted; the snapshot keeps deciding", async () => {
    // Wire mode with a prebuilt full body: every full answer is the crafted message.
    feed.publishRecords([]);
    feed.fullBody = (epoch, version) => Buffer.from(danglingFull(version, 3, epoch));
    const identity = "spiffe://cluster.local/ns/default/sa/app";
    const host = await startFilter(
      "passthrough_mtls",
      {
        workloads: [{ uid: "app-0", addresses: ["10.0.0.1"], tlsMode: "istio", identity }],
        services: [],
        meshFeed: { cluster: "mesh_feed", target: "node-a", waitSeconds: 1 },
      },
      { clusters: { mesh_feed: { address: `127.0.0.1:${feed.boundPort}` } } },
    );
    try {
      host.tick();
      const refused = () => host.metrics().get("passthrough_mtls.feed.refused") ?? 0;
      await until("the refusal", () => refused() === 1);
      const warnings = host.logLines("warn").filter((line) => line.includes("refused a message"));
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /^mesh feed node-a refused a message: record 1 \(workload upsert id 0\)\.memberships\[1\]\.service: service 3 is not in this full message; keeping the model in force/);
      assert.equal(host.metrics().get("passthrough_mtls.feed.applied_full") ?? 0, 0);
      // The crafted model has 10.7.0.1 as a plain pod; the snapshot in force has 10.0.0.1 as mTLS.
      assert.deepEqual(envoyWrites(host.connect({ source: "10.0.9.9:40000", destination: "10.0.0.1:443" })), [
        [SAN, identity],
        [ORIGINAL_DST, "10.0.0.1:443"],
        [CLUSTER, "outbound_mtls_passthrough"],
      ]);
      assert.equal(host.failed, false);
    } finally {
      host.dispose();
    }
  });
});
