// Never decide from nothing: a mesh filter configured for the feed, whose snapshot is empty,
// holds new connections until its first model (bounded by meshFeed.startupWaitMs and
// maxWaitingConnections), then decides them with the model, or by meshFeed.noModelPolicy (close
// by default) when none came; a model that lacks this proxy's network gets the same policy. Each
// is counted (waited_for_model, no_model, no_network); the VM's model age is a gauge. The feed
// here is a manual cluster: the test answers each poll itself with real binary messages
// (tests/support/mesh_wire.ts), so it decides when the model arrives.
// Run: node --import tsx --test tests/host/no_model.test.ts
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import type { Connection, ProxyWasmHost } from "../../host/index.js";
import { httpResponse } from "../../host/http_call.js";
import { encodeMessage, KIND, type WireRecord } from "../support/mesh_wire.js";
import { CLUSTER, DISABLE_TUNNELING, envoyWrites, SAN, startFilter } from "./helpers.js";

const sa = (name: string) => `spiffe://cluster.local/ns/default/sa/${name}`;
const pod = (id: number, address: string, identity: string, network?: string): WireRecord => ({
  workload: { id, istio: true, identity: sa(identity), addresses: [address], ...(network === undefined ? {} : { network }) },
});

let host: ProxyWasmHost | undefined;
let skippedMs = 0n;
const clock = () => (BigInt(Date.now()) + skippedMs) * 1_000_000n;
/** Moves the clock and fires one tick, as Envoy's timer would. */
const tickAfter = (ms: number) => {
  skippedMs += BigInt(ms);
  host!.tick();
};

afterEach(() => {
  host?.dispose();
  host = undefined;
});

async function start(filter: string, own: Record<string, unknown>, meshFeed: Record<string, unknown> = {}, snapshot: Record<string, unknown> = {}): Promise<ProxyWasmHost> {
  host = await startFilter(filter, { ...own, ...snapshot, meshFeed: { cluster: "mesh_feed", target: "node-a", waitSeconds: 20, ...meshFeed } }, { clock, clusters: { mesh_feed: {} } });
  host.tick(); // the first poll goes out on the first tick
  return host;
}

const count = (name: string) => host!.metrics().get(name) ?? 0;

/** Answers the poll in flight with a full model of `records` (epoch 1000, version 1). */
function sendModel(records: WireRecord[]): void {
  const call = host!.pendingHttpCalls.at(-1);
  assert.ok(call, "a poll is in flight");
  const body = encodeMessage({ kind: KIND.full, epoch: 1000n, version: 1n, workloadIdLimit: 64, serviceIdLimit: 64, records });
  assert.ok(host!.respondHttpCall(call.token, httpResponse(200, { "content-type": "application/x-mesh-delta" }, body)));
}

/** The feed is down: the poll in flight gets Envoy's local 503. */
function feedDown(): void {
  const call = host!.pendingHttpCalls.at(-1);
  assert.ok(call);
  assert.ok(host!.refuseHttpCall(call.token));
}

const connect = (destination: string): Connection => host!.connect({ source: "10.0.9.9:40000", destination });

/** A held connection: StopIteration, nothing written, its bytes not read (tcp_proxy has not run). */
function assertHeld(conn: Connection): void {
  assert.equal(conn.status, "StopIteration");
  assert.equal(conn.closed, false);
  assert.deepEqual(envoyWrites(conn), []);
  assert.equal(conn.downstreamData("hello").status, "ReadDisabled");
}

/** Resumed: the bytes read while it waited reached the upstream. */
function assertResumed(conn: Connection): void {
  assert.equal(conn.closed, false);
  assert.equal(Buffer.from(conn.upstreamBytes).toString(), "hello");
}

describe("passthrough_mtls with meshFeed and an empty snapshot", () => {
  it("holds new connections until the first model, then decides each with it", async () => {
    await start("passthrough_mtls", {});
    const toPod = connect("10.0.0.1:443");
    const toOther = connect("10.0.0.7:80");
    assertHeld(toPod);
    assertHeld(toOther);
    assert.equal(count("passthrough_mtls.waited_for_model"), 2);
    assert.equal(count("passthrough_mtls.passthrough") + count("passthrough_mtls.mtls") + count("passthrough_mtls.no_model"), 0, "nothing decided yet");
    sendModel([pod(0, "10.0.0.1", "app")]);
    assertResumed(toPod);
    assert.deepEqual(envoyWrites(toPod).slice(0, 1), [[SAN, sa("app")]], "mTLS verifying the pod's identity, decided after the wait");
    assert.deepEqual(envoyWrites(toPod).at(-1), [CLUSTER, "outbound_mtls_passthrough"]);
    assertResumed(toOther);
    assert.deepEqual(envoyWrites(toOther), [], "not a mesh pod: plain");
    assert.equal(count("passthrough_mtls.mtls"), 1);
    assert.equal(count("passthrough_mtls.passthrough"), 1);
    assert.equal(count("passthrough_mtls.no_model"), 0);
    // Open now: the next connection is decided at once.
    assert.equal(connect("10.0.0.1:443").status, "Continue");
    assert.equal(count("passthrough_mtls.waited_for_model"), 2);
    assert.ok(host!.logLines("info").some((l) => l.startsWith("no mesh model yet: new connections wait up to 5000 ms")));
  });

  it("closes what waited and what comes after once startupWaitMs passes without a model (noModelPolicy close, the default)", async () => {
    await start("passthrough_mtls", {}, { startupWaitMs: 2000 });
    feedDown();
    const held = connect("10.0.0.1:443");
    assertHeld(held);
    tickAfter(1000);
    assert.equal(held.closed, false, "still within the wait");
    tickAfter(1100);
    assert.equal(held.closed, true, "closed at the end of the wait");
    assert.equal(held.closeReason, "filter");
    const late = connect("10.0.0.1:443");
    assert.equal(late.status, "StopIteration");
    assert.equal(late.closed, true, "after the wait: closed at once");
    assert.equal(count("passthrough_mtls.no_model"), 2);
    assert.equal(count("passthrough_mtls.passthrough"), 0, "never counted as an ordinary passthrough");
    assert.ok(host!.logLines("warn").some((l) => /^no mesh model 2000 ms after configuration: 1 waiting and all new connections are closed \(noModelPolicy close\)/.test(l)));
    // The feed comes back: the model decides from then on.
    tickAfter(1000);
    sendModel([pod(0, "10.0.0.1", "app")]);
    const after = connect("10.0.0.1:443");
    assert.equal(after.status, "Continue");
    assert.deepEqual(envoyWrites(after)[0], [SAN, sa("app")]);
  });

  it("ticks every 100 ms while connections wait, also when one waits before the feed's first tick, then every second", async () => {
    host = await startFilter("passthrough_mtls", { meshFeed: { cluster: "mesh_feed", target: "node-a", waitSeconds: 20, startupWaitMs: 1000 } }, { clock, clusters: { mesh_feed: {} } });
    const held = connect("10.0.0.1:443"); // before the first tick
    assertHeld(held);
    assert.equal(host.tickPeriodMs, 100);
    host.tick(); // the feed's first tick (its first poll) sets its own 1 s period
    assert.equal(host.tickPeriodMs, 100, "the wait keeps its 100 ms tick");
    tickAfter(600);
    assert.equal(held.closed, false);
    tickAfter(500);
    assert.equal(held.closed, true, "closed within a tick of the wait's end");
    assert.equal(host.tickPeriodMs, 1000);
  });

  it("passes through plain under noModelPolicy passthrough, counted as no_model", async () => {
    await start("passthrough_mtls", {}, { startupWaitMs: 500, noModelPolicy: "passthrough" });
    const held = connect("10.0.0.1:443");
    assertHeld(held);
    tickAfter(600);
    assertResumed(held);
    assert.deepEqual(envoyWrites(held), []);
    assert.equal(count("passthrough_mtls.no_model"), 1);
    assert.equal(count("passthrough_mtls.passthrough"), 0);
  });

  it("holds at most maxWaitingConnections; the next ones follow the policy at once", async () => {
    await start("passthrough_mtls", {}, { maxWaitingConnections: 2 });
    const a = connect("10.0.0.1:443");
    const b = connect("10.0.0.1:443");
    const c = connect("10.0.0.1:443");
    assertHeld(a);
    assertHeld(b);
    assert.equal(c.closed, true);
    assert.equal(count("passthrough_mtls.waited_for_model"), 2);
    assert.equal(count("passthrough_mtls.no_model"), 1);
    // A waiting client that gives up frees its place.
    a.close();
    const d = connect("10.0.0.1:443");
    assertHeld(d);
    sendModel([pod(0, "10.0.0.1", "app")]);
    assertResumed(b);
    assertResumed(d);
    assert.equal(count("passthrough_mtls.mtls"), 2);
  });

  it("waits for nothing with startupWaitMs 0", async () => {
    await start("passthrough_mtls", {}, { startupWaitMs: 0 });
    const conn = connect("10.0.0.1:443");
    assert.equal(conn.closed, true);
    assert.equal(count("passthrough_mtls.no_model"), 1);
    assert.equal(count("passthrough_mtls.waited_for_model"), 0);
  });

  it("takes a non-empty snapshot as the model: no wait", async () => {
    const snapshot = { workloads: [{ uid: "app-0", addresses: ["10.0.0.1"], tlsMode: "istio", identity: sa("app") }] };
    await start("passthrough_mtls", {}, {}, snapshot);
    const conn = connect("10.0.0.1:443");
    assert.equal(conn.status, "Continue");
    assert.deepEqual(envoyWrites(conn)[0], [SAN, sa("app")]);
    assert.equal(count("passthrough_mtls.waited_for_model"), 0);
  });

  it("follows the policy, not passthrough, for a model that lacks this proxy's network, and for an empty model", async () => {
    await start("passthrough_mtls", { localNetwork: "east" });
    const held = connect("10.0.0.1:443");
    assertHeld(held);
    sendModel([pod(0, "10.0.0.1", "app", "west")]);
    assert.equal(held.closed, true, "the model has no network east: closed");
    assert.equal(connect("10.0.0.1:443").closed, true);
    assert.equal(count("passthrough_mtls.no_network"), 2);
    assert.equal(count("passthrough_mtls.passthrough"), 0);
    assert.ok(host!.logLines("warn").some((l) => l.startsWith('the mesh model in force has no network "east" (this proxy\'s): connections are closed')));
    // A full model with no records at all (the 64-byte attack): the same.
    host!.dispose();
    await start("passthrough_mtls", {});
    sendModel([]);
    assert.equal(connect("10.0.0.1:443").closed, true);
    assert.equal(count("passthrough_mtls.no_network"), 1);
  });

  it("exposes the model's age in seconds: since configuration, then since the feed last changed or confirmed it", async () => {
    await start("passthrough_mtls", {}, { startupWaitMs: 0 });
    tickAfter(3000);
    assert.equal(count("passthrough_mtls.feed.model_age_seconds"), 3);
    sendModel([pod(0, "10.0.0.1", "app")]);
    assert.equal(count("passthrough_mtls.feed.model_age_seconds"), 0);
    tickAfter(1000);
    feedDown();
    tickAfter(4000);
    assert.equal(count("passthrough_mtls.feed.model_age_seconds"), 5, "the feed is down: the model ages");
  });
});

describe("the other mesh filters under noModelPolicy", () => {
  for (const [filter, own, passed] of [
    ["tunnel_port", { role: "client" }, [[DISABLE_TUNNELING, "true"]]],
    ["tunnel_port", { role: "server", localWorkload: "10.0.0.5" }, []],
    ["waypoint_route", { localWorkload: "10.0.0.5" }, [[DISABLE_TUNNELING, "true"]]],
  ] as const) {
    it(`${filter} ${JSON.stringify(own)}: holds, then closes by default; passthrough goes on plain`, async () => {
      await start(filter, own, { startupWaitMs: 300 });
      const held = connect("10.0.0.1:80");
      assertHeld(held);
      tickAfter(400);
      assert.equal(held.closed, true);
      assert.equal(count(`${filter}.no_model`), 1);
      host!.dispose();
      await start(filter, own, { startupWaitMs: 300, noModelPolicy: "passthrough" });
      const conn = connect("10.0.0.1:80");
      assertHeld(conn);
      tickAfter(400);
      assertResumed(conn);
      assert.deepEqual(envoyWrites(conn), passed);
      assert.equal(count(`${filter}.no_model`), 1);
    });

    it(`${filter} ${JSON.stringify(own)}: a connection that waited is decided by the model that came`, async () => {
      await start(filter, own);
      const held = connect("10.0.0.1:80");
      assertHeld(held);
      sendModel([pod(0, "10.0.0.5", "me"), pod(1, "10.0.0.1", "app")]);
      assert.equal(count(`${filter}.waited_for_model`), 1);
      assert.equal(count(`${filter}.no_model`), 0);
      // Decided by the model's rules (a pod dialled on a port no service maps), not by the gate.
      const decided = [...host!.metrics().entries()].filter(([name, value]) => name.startsWith(`${filter}.`) && !name.includes(".feed.") && !name.endsWith("waited_for_model") && value > 0);
      assert.equal(decided.length, 1, `one outcome counted: ${JSON.stringify(decided)}`);
    });
  }
});
