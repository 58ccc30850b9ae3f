// The mesh feed client (assembly/runtime/feed_client.ts) in the host, against a feed the test
// runs on loopback (tests/support/fake_feed.ts: the real long-poll protocol and message header,
// opaque records for the feed_probe fixture's test sink): full load, deltas, no-change, fail
// static with one log line per transition and capped backoff, resync, refused messages, and
// the meshFeed configuration errors.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ProxyWasmHost } from "../../host/index.js";
import { FakeFeed } from "../support/fake_feed.js";
import { FeedProbeRig } from "./feed_probe_rig.js";
import { ensureBuilt, until } from "./helpers.js";

const feedConfig = (fields: Record<string, unknown> = {}) =>
  JSON.stringify({ meshFeed: { cluster: "mesh_feed", target: "node-a", waitSeconds: 1, ...fields } });

describe("feed client: long poll from the root context", () => {
  // Backoffs are skipped ahead on the rig's clock, not waited out (feed_probe_rig.ts).
  const rig = new FeedProbeRig().hooks();
  const feed = rig.feed;
  let host: ProxyWasmHost;
  const metric = (name: string) => rig.metric(name);
  const sinkLines = () => host.logLines().filter((l) => l.startsWith("sink applied"));
  const calls = () => rig.calls();
  const tickAfter = (ms: number) => rig.tickAfter(ms);

  const start = async (configuration = feedConfig()) => {
    host = await rig.start(configuration);
  };

  it("loads the full model on the first tick, then applies deltas and no-change answers", async () => {
    feed.publish("a");
    await start();
    assert.equal(host.tickPeriodMs, 20, "the first poll waits for the first tick (not configure: the canary runs that too)");
    assert.equal(calls(), 0);
    host.tick();
    assert.equal(host.tickPeriodMs, 1000);
    const first = host.httpCalls[0];
    assert.deepEqual([first.cluster, first.method, first.path, first.authority, first.timeoutMs], ["mesh_feed", "GET", "/delta/node-a?epoch=0&version=0&wait=1&format=3", "mesh_feed", 6000]);
    await until("the full model", () => sinkLines().length === 1);
    assert.equal(sinkLines()[0], "sink applied kind=1 epoch=1000 version=1 model=a");
    assert.ok(host.logLines("info").includes("mesh feed node-a: full model applied at epoch 1000 version 1"));
    assert.equal(metric("applied_full"), 1);
    assert.equal(metric("version"), 1);
    // The next poll went out at once, with the version: the feed holds it.
    await until("the held poll", () => feed.requests.length === 2);
    assert.deepEqual([feed.requests[1].epoch, feed.requests[1].version], [1000n, 1n]);
    feed.publish("b");
    await until("the delta", () => sinkLines().length === 2);
    assert.equal(sinkLines()[1], "sink applied kind=2 epoch=1000 version=2 model=a+b");
    assert.equal(metric("applied_delta"), 1);
    assert.equal(metric("version"), 2);
    // Nothing changes for `wait` (1 s): no-change, same version, poll again.
    await until("a no-change answer", () => metric("no_change") === 1, 3000);
    await until("the poll after it", () => feed.requests.length === 4);
    assert.equal(feed.requests[3].version, 2n);
    assert.deepEqual(host.logLines("warn"), []);
    // A feed that answers "no change" at once (not holding the request) gets no busy loop: the
    // next poll waits for the tick a second later, and nothing counts as a failure.
    feed.inject.push("no-change-now");
    feed.publish("c"); // answers the held poll; the next one gets the immediate no-change
    await until("the immediate no-change", () => metric("no_change") === 2);
    await sleep(50);
    assert.equal(feed.requests.length, 5, "no poll right after an immediate no-change");
    tickAfter(500);
    assert.equal(feed.requests.length, 5);
    tickAfter(500);
    await until("the poll on the tick", () => feed.requests.length === 6);
    assert.equal(metric("unavailable") + metric("refused"), 0);
  });

  it("fails static when the feed dies: connections flow, one warning, capped backoff, resync when it returns", async () => {
    await start();
    host.tick();
    await until("the full model", () => metric("applied_full") === 1);
    await until("the held poll", () => feed.heldCount === 1);
    const modelLines = sinkLines().length;
    await feed.kill();
    await until("the poll to fail", () => metric("unavailable") === 1);
    assert.equal(host.httpCallsInFlight, 0);
    // Connections never wait for the feed.
    for (let i = 0; i < 3; i++) assert.equal(host.connect({ destination: "10.0.0.1:80" }).status, "Continue");
    assert.equal(host.metrics().get("feed_probe.connections"), 3);
    // Unavailable (feed_retry.ts): backoff 500 ms doubling to the 5 s cap, full jitter: the
    // retry comes within the backoff (tests/host/feed_retry.test.ts checks the spread).
    const expected = [500, 1000, 2000, 4000, 5000, 5000];
    for (const backoff of expected) {
      const before = calls();
      tickAfter(backoff + 50);
      assert.equal(calls(), before + 1, `a retry by ${backoff} ms`);
      const unavailable = metric("unavailable");
      await until("the retry to fail", () => metric("unavailable") === unavailable + 1);
    }
    assert.equal(metric("unavailable"), 1 + expected.length, "every failed attempt counts");
    const warnings = host.logLines("warn");
    assert.equal(warnings.length, 1, `one line for the transition, none per retry: ${warnings}`);
    assert.match(warnings[0], /^mesh feed node-a unavailable: HTTP 503 \(upstream connect error or disconnect\/reset before headers\. reset reason: .*\); keeping the model in force \(epoch 1000 version \d+\), retrying with backoff up to 5 s$/);
    assert.equal(sinkLines().length, modelLines, "the model in force is untouched");
    // The feed comes back after a restart: a new epoch, so a full resync.
    feed.restartEpoch();
    feed.publish("c");
    await feed.start();
    tickAfter(5050);
    await until("the resync", () => metric("applied_full") === 2);
    assert.match(sinkLines().at(-1)!, /^sink applied kind=1 epoch=1001 version=\d+ model=.*c$/);
    assert.ok(host.logLines("info").some((l) => l.startsWith(`mesh feed node-a answered again after ${1 + expected.length} failed attempts: at epoch 1001 version`)));
    // Healthy again: the backoff starts over at 500 ms.
    await until("the held poll", () => feed.heldCount === 1);
    feed.inject.push("500");
    feed.publish("d"); // answers the held poll; the next one gets the injected 500
    await until("the 500", () => metric("unavailable") === 2 + expected.length);
    const before = calls();
    tickAfter(550);
    assert.equal(calls(), before + 1, "backoff reset to 500 ms (a retry within [0, 500 ms]) after the recovery");
    assert.equal(host.logLines("warn").length, 2, "a new transition, a new line");
  });

  it("refuses a bad message whole and resyncs with a full model", async () => {
    await start();
    host.tick();
    await until("the full model", () => metric("applied_full") === 1);
    await until("the held poll", () => feed.heldCount === 1);
    // The held poll gets the good delta "e"; the three polls after it get bad answers.
    feed.inject.push("bad-delta", "html", "bad-header");
    feed.publish("e");
    await until("the refusal", () => metric("refused") === 1);
    const applied = sinkLines();
    assert.match(applied.at(-1)!, /^sink applied kind=2 .*model=.*\+e$/, "the refused delta left the model as it was");
    assert.equal(applied.filter((l) => l.includes("BAD")).length, 0);
    const warnings = host.logLines("warn");
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /^mesh feed node-a refused a message: record 0 \(test\): the test sink refuses "BAD record"; keeping the model in force/);
    // The next request asks for a full model: epoch 0, version 0.
    tickAfter(1000);
    await until("the html answer", () => metric("refused") === 2);
    assert.equal(feed.requests.at(-1)!.version, 0n);
    assert.equal(feed.requests.at(-1)!.epoch, 0n);
    tickAfter(2000);
    await until("the bad header", () => metric("refused") === 3);
    assert.equal(host.logLines("warn").length, 1, "the same condition: no new line");
    tickAfter(4000);
    await until("the full resync", () => metric("applied_full") === 2);
    assert.match(sinkLines().at(-1)!, /kind=1 .*model=.*e$/);
    assert.ok(host.logLines("info").some((l) => /answered again after 3 failed attempts/.test(l)));
  });

  it("a reset or a refused call counts as unavailable; a deleted root's poll is cancelled", async () => {
    await start(feedConfig({ cluster: "no_such_cluster" }));
    host.tick();
    assert.equal(metric("unavailable"), 1, "proxy_http_call refused (unknown cluster) counts at once");
    assert.match(host.logLines("warn")[0], /Envoy refused the call to cluster no_such_cluster: status 2 \(no such cluster in Envoy\?\)/);
    host.dispose();
    await start();
    host.tick();
    await until("the full model", () => metric("applied_full") >= 1);
    await until("the held poll", () => feed.heldCount === 1);
    feed.inject.push("reset");
    feed.publish("f");
    await until("the reset", () => host.logLines("warn").length === 1);
    assert.match(host.logLines("warn")[0], /unavailable: the request was reset \(reset\)/);
    // A configuration update: the new root starts over, the old root's call is cancelled.
    tickAfter(1000);
    await until("a held poll", () => feed.heldCount === 1);
    assert.ok(host.reconfigure(feedConfig({ authority: "feed.mesh:8080" })));
    assert.equal(host.httpCallsInFlight, 0, "Envoy cancels a deleted root's calls");
    host.tick();
    assert.equal(host.httpCalls.at(-1)!.authority, "feed.mesh:8080");
    assert.match(host.httpCalls.at(-1)!.path, /epoch=0&version=0/, "a new root has no model from the feed yet");
  });

  it("refuses a bad meshFeed with one line naming the field", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ cluster: undefined }, "meshFeed.cluster: missing required field"],
      [{ waitSeconds: 0 }, "meshFeed.waitSeconds: expected an integer in [1, 300]"],
      [{ target: "a/b" }, "meshFeed.target: expected 1-253 of A-Z a-z 0-9 - . _ ~ (one URL path segment)"],
      [{ path: "/delta/x?y=1" }, "meshFeed.path: expected an absolute path without query or fragment (the client adds ?epoch=&version=&wait=)"],
      [{ authority: "a b" }, "meshFeed.authority: expected a host[:port] (1-253 visible ASCII characters)"],
      [{ extra: 1 }, "meshFeed.extra: unknown field (known: cluster, authority, target, path, waitSeconds, startupWaitMs, maxWaitingConnections, noModelPolicy)"],
      [{ startupWaitMs: 60001 }, "meshFeed.startupWaitMs: expected an integer in [0, 60000]"],
      [{ maxWaitingConnections: -1 }, "meshFeed.maxWaitingConnections: expected an integer in [0, 65536]"],
      [{ noModelPolicy: "allow" }, "meshFeed.noModelPolicy: expected one of: close, passthrough"],
    ];
    for (const [fields, message] of cases) {
      host = rig.host = await ProxyWasmHost.fromFile(ensureBuilt("feed_probe"), { rootId: "feed_probe", pluginConfiguration: feedConfig(fields), canary: false });
      assert.equal(host.start(), false, JSON.stringify(fields));
      assert.deepEqual(host.logLines("error"), [`invalid plugin configuration: ${message}`]);
    }
  });
});

describe("feed client in the mesh filters: a message the model cannot decode is refused, the snapshot keeps deciding", () => {
  const MESH = {
    workloads: [{ uid: "app-0", addresses: ["10.0.0.1"], tlsMode: "istio", identity: "spiffe://cluster.local/ns/default/sa/app" }],
  };
  let feed: FakeFeed;
  before(async () => {
    feed = new FakeFeed();
    await feed.start();
    feed.publish("records");
  });
  after(() => feed.kill());

  for (const [filter, own] of [
    ["passthrough_mtls", {}],
    ["tunnel_port", { role: "client" }],
    ["waypoint_route", { localWorkload: "10.0.0.1" }],
  ] as const) {
    // The fake feed's opaque body ("records": 7 bytes, 0 records in the header) is no full
    // message's tables: the model's decoder refuses the message whole. Real messages: mesh_feed_filters.test.ts.
    it(`${filter}: polls the feed from its root, fails static on what it cannot apply, decides with its snapshot`, async () => {
      const host = await ProxyWasmHost.fromFile(ensureBuilt(filter), {
        rootId: filter,
        pluginConfiguration: JSON.stringify({ ...own, ...MESH, meshFeed: { cluster: "mesh_feed", target: filter.replace("_", "-"), waitSeconds: 1 } }),
        clusters: { mesh_feed: { address: `127.0.0.1:${feed.boundPort}` } },
      });
      try {
        assert.ok(host.start(), host.startFailure);
        const before = feed.requests.length;
        host.tick();
        await until("the feed's answer", () => (host.metrics().get(`${filter}.feed.refused`) ?? 0) === 1);
        assert.equal(feed.requests.length, before + 1);
        assert.equal(feed.requests.at(-1)!.target, filter.replace("_", "-"));
        const warnings = host.logLines("warn");
        assert.equal(warnings.length, 1);
        assert.match(warnings[0], new RegExp(`^mesh feed ${filter.replace("_", "-")} refused a message: tables\\.textCount: \\d+ texts exceed the limit of 1048576; keeping the model in force \\(the configuration's snapshot\\)`));
        assert.equal(host.metrics().get(`${filter}.feed.applied_full`) ?? 0, 0);
        // Connections are decided as before, with the snapshot.
        const conn = host.connect({ destination: "10.0.0.1:8080" });
        assert.equal(host.failed, false);
        assert.ok(conn.status === "Continue" || conn.status === "StopIteration");
      } finally {
        host.dispose();
      }
    });
  }
});
