// The mesh feed channel in the real Envoy with four workers: every VM's root context (the main
// thread's and each worker's) long-polls the feed on its own, converges to the same version,
// fails static when the feed is killed (connections keep flowing, one warning per VM, every
// failed attempt counted), resyncs when it returns, and refuses an invalid delta whole. Twice:
// first the channel alone (the feed_probe fixture: the runtime's FeedClient with a test sink,
// opaque records), then the real passthrough_mtls in the shipped sidecar configuration fed real
// v1 binary messages (tests/support/fake_feed.ts wire mode), with real connections through the
// capture to a TLS pod: every worker's VM must decide with the model of the last message.
// Run inside a private network namespace: bash scripts/in-netns.sh node --import tsx --test ...
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { FakeFeed } from "../support/fake_feed.js";
import { feedServerTls } from "../support/feed_tls.js";
import { startBackend, exchange, type Backend } from "../support/tcp.js";
import { ensureBuilt } from "../host/helpers.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { meshFeedCluster, meshFeedSidecarConfig } from "../feed/delta_envoy_config.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import type { WireRecord } from "../support/mesh_wire.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";

const WORKERS = 4;
/** Envoy runs the plugin's root in the main thread's VM too. */
const VMS = WORKERS + 1;
const ADMIN = 15960;
const LISTEN = 15961;
const FEED_PORT = 15962;
const BACKEND_PORT = 15963;

/** The feed_probe lines by Envoy thread id (one VM per thread). */
function linesByThread(log: string, pattern: RegExp): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of log.split("\n")) {
    const m = /^\[[^\]]+\]\[(\d+)\]\[\w+\]\[wasm\].*wasm log [^:]+: (.*)$/.exec(line);
    if (!m || !pattern.test(m[2])) continue;
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1])!.push(m[2]);
  }
  return out;
}

/** The model each VM holds now: its last "sink applied" line. */
function modelsByThread(log: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [thread, lines] of linesByThread(log, /^sink applied /)) out.set(thread, lines.at(-1)!.replace(/^sink applied kind=\d /, ""));
  return out;
}

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe(`mesh feed: ${VMS} VMs of one Envoy (--concurrency ${WORKERS}) poll, converge, fail static, resync, refuse bad deltas`, () => {
  let feed: FakeFeed;
  let envoy: EnvoyProcess;
  let backend: Backend;

  const allAt = (model: string) => async () => {
    const models = modelsByThread(envoy.log());
    return models.size === VMS && [...models.values()].every((m) => m === model);
  };
  const connectionFlows = async (payload: string) => {
    const reply = await exchange("127.0.0.1", LISTEN, payload, 5000);
    return reply.received.toString() === `backend\n${payload}`;
  };

  before(async () => {
    ensureBuilt("feed_probe");
    await writeDemoCerts();
    feed = new FakeFeed(FEED_PORT, feedServerTls());
    await feed.start();
    feed.publish("a");
    backend = await startBackend("backend", "127.0.0.1", BACKEND_PORT);
    const configuration = JSON.stringify({ meshFeed: { cluster: "mesh_feed", target: "sidecar-a", waitSeconds: 2 } });
    envoy = await EnvoyProcess.start({
      name: "feed-live",
      adminPort: ADMIN,
      concurrency: WORKERS,
      config: bootstrap({
        adminPort: ADMIN,
        listeners: [listener({ name: "app", address: "127.0.0.1", port: LISTEN, filters: [
          wasmNetworkFilter({ name: "feed_probe", wasm: "build/fixtures/feed_probe.wasm", configuration }),
          tcpProxy("app", "backend"),
        ] })],
        clusters: [meshFeedCluster(FEED_PORT), staticCluster("backend", "127.0.0.1", BACKEND_PORT)],
      }),
    });
  });

  after(async () => {
    await envoy?.stop();
    await feed?.kill();
    await backend?.close();
  });

  it("every VM loads the full model, then each change, and all converge to the same version", async (t) => {
    await until(`${VMS} VMs at version 1`, allAt("epoch=1000 version=1 model=a"));
    const pollers = new Set(feed.requests.map((r) => r.remotePort));
    assert.ok(pollers.size >= VMS, `each VM polls on its own connection (${pollers.size} seen)`);
    assert.ok(feed.requests.every((r) => r.target === "sidecar-a" && r.authority === "mesh_feed" && r.wait === 2));
    for (const text of ["b", "c", "d"]) {
      const published = Date.now();
      const version = feed.publish(text);
      await until(`${VMS} VMs at version ${version}`, allAt(`epoch=1000 version=${version} model=${feed.texts.join("+")}`));
      // Not a target (benchmarks hold those): the log is polled every 50 ms, so this is an upper bound.
      t.diagnostic(`version ${version} in all ${VMS} VMs within ${Date.now() - published} ms of the publish`);
    }
    const stats = await envoy.stats();
    const stat = (name: string) => [...stats].find(([k]) => k.endsWith(`feed_probe.feed.${name}`))?.[1] ?? 0;
    assert.equal(stat("applied_full"), VMS, "one full load per VM");
    assert.equal(stat("applied_delta"), VMS * 3, "each change once per VM (each published after all VMs had the previous one)");
    assert.equal(stat("version"), 4, "the version gauge (one stat for all VMs: each wrote 4)");
    assert.equal(stat("refused"), 0);
    assert.equal(stat("unavailable"), 0);
    assert.ok(await connectionFlows("through the filter"));
  });

  it("keeps every VM's model and every connection when the feed is killed: one warning per VM, every attempt counted", async () => {
    const unavailable = async () => (await envoy.stat("feed_probe.feed.unavailable")) ?? 0;
    await feed.kill();
    await until("every VM to notice", async () => (await unavailable()) >= VMS);
    await until("one warning per VM", () => linesByThread(envoy.log(), /unavailable:/).size === VMS);
    // Connections do not wait for the feed: they flow, decided by the last good model.
    for (let i = 0; i < 5; i++) assert.ok(await connectionFlows(`feed down ${i}`), "a connection while the feed is down");
    // Retries with backoff (500 ms doubling to 5 s, feed_retry.ts): more attempts counted, no more lines.
    const counted = await unavailable();
    await until("the retries", async () => (await unavailable()) >= counted + VMS, 10_000);
    const warnings = linesByThread(envoy.log(), /unavailable:/);
    assert.equal(warnings.size, VMS);
    for (const [thread, lines] of warnings) {
      assert.equal(lines.length, 1, `thread ${thread}: one line per transition, none per retry`);
      assert.match(lines[0], /^mesh feed sidecar-a unavailable: .*; keeping the model in force \(epoch 1000 version 4\), retrying with backoff up to 5 s$/);
    }
    assert.ok(await allAt("epoch=1000 version=4 model=a+b+c+d")(), "no VM lost its model");
  });

  it("resyncs every VM with a full model when the feed comes back with a new epoch", async () => {
    feed.restartEpoch();
    feed.publish("e");
    await feed.start();
    await until(`${VMS} VMs resynced`, allAt("epoch=1001 version=5 model=a+b+c+d+e"), 40_000);
    const recovered = linesByThread(envoy.log(), /answered again after \d+ failed attempts: at epoch 1001 version 5$/);
    assert.equal(recovered.size, VMS, "one recovery line per VM");
    const stats = await envoy.stats();
    const stat = (name: string) => [...stats].find(([k]) => k.endsWith(`feed_probe.feed.${name}`))?.[1] ?? 0;
    assert.equal(stat("applied_full"), VMS * 2, "the resync is a full load in every VM");
    assert.ok(await connectionFlows("after the resync"));
    // And live again: one more change reaches every VM.
    feed.publish("f");
    await until(`${VMS} VMs at version 6`, allAt("epoch=1001 version=6 model=a+b+c+d+e+f"));
  });

  it("refuses an invalid delta whole in every VM, keeps the model, and resyncs with a full one", async () => {
    await until("every VM holding a poll", () => feed.heldCount === VMS);
    // Each VM's held poll gets the good delta "g"; each VM's next poll a delta the sink refuses.
    for (let i = 0; i < VMS; i++) feed.inject.push("bad-delta");
    feed.publish("g");
    await until("every VM to refuse it", async () => ((await envoy.stat("feed_probe.feed.refused")) ?? 0) >= VMS);
    // The counter can be read before the log line is flushed: wait for the lines.
    await until("one refusal line per VM", () => linesByThread(envoy.log(), /refused a message:/).size >= VMS);
    const refusals = linesByThread(envoy.log(), /refused a message:/);
    assert.equal(refusals.size, VMS, "one warning per VM");
    for (const [thread, lines] of refusals) {
      assert.equal(lines.length, 1, `thread ${thread}`);
      assert.match(lines[0], /^mesh feed sidecar-a refused a message: record 0 \(test\): the test sink refuses "BAD record"; keeping the model in force \(epoch 1001 version 7\)/);
    }
    assert.equal(linesByThread(envoy.log(), /model=.*BAD/).size, 0, "nothing of the refused delta was applied");
    // After the backoff each VM asks for a full model (epoch=0&version=0) and gets version 7.
    await until(`${VMS} VMs resynced after the refusal`, async () => {
      const full = linesByThread(envoy.log(), /^sink applied kind=1 epoch=1001 version=7 /);
      return full.size === VMS && (await allAt("epoch=1001 version=7 model=a+b+c+d+e+f+g")());
    });
    assert.ok(feed.requests.filter((r) => r.epoch === 0n && r.version === 0n).length >= VMS * 2, "the initial loads and the resyncs asked for a full model");
    assert.ok(await connectionFlows("after the refused delta"));
  });
});

// ---------------------------------------------------------------- the real filter, real messages

const SHIPPED_ADMIN = 15000; // envoy-configs/passthrough_mtls.yaml
const CAPTURE_PORT = 15001;
const WIRE_FEED_PORT = 15964;
const POD_IP = "127.0.0.11";
const POD_PORT = 8443;
const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;
/** Connections per round: enough that every worker takes some (checked with its own stats). */
const ROUND = 48;

describe(`passthrough_mtls with the mesh feed: every worker VM (--concurrency ${WORKERS}) decides with the last message`, () => {
  let feed: FakeFeed;
  let envoy: EnvoyProcess;
  let pod: TlsPod;
  const httpbin = (id: number): WireRecord => ({ workload: { id, istio: true, identity: DEMO_IDENTITIES["pod-a"], addresses: [POD_IP] } });
  const other = (id: number, ip: string): WireRecord => ({ workload: { id, istio: true, identity: "spiffe://cluster.local/ns/default/sa/other", addresses: [ip] } });

  /** Every VM holds a poll at this position: each applied the message that brought it there. */
  const allHeldAt = (epoch: bigint, version: bigint) => () => {
    const held = feed.heldPositions();
    return held.length === VMS && held.every(([e, v]) => e === epoch && v === version);
  };
  const workerConnections = async () => {
    const stats = await envoy.stats();
    return Array.from({ length: WORKERS }, (_, i) => stats.get(`listener.127.0.0.1_${CAPTURE_PORT}.worker_${i}.downstream_cx_total`) ?? 0);
  };
  /**
   * ROUND real connections through the capture to the TLS pod: how many were upgraded to mTLS
   * with the pod's identity pinned (the pod answers "httpbin-0 peer=<sidecar>") and how many
   * went in clear (the TLS pod sees no handshake, nothing comes back). Each worker must take some.
   */
  const round = async (tag: string) => {
    const before = await workerConnections();
    let mtls = 0;
    let plain = 0;
    for (let i = 0; i < ROUND; i++) {
      const payload = `${tag} ${i}`;
      const reply = (await exchange(POD_IP, POD_PORT, payload, 10_000, CLIENT_ADDRESS)).received.toString();
      if (reply === `httpbin-0 peer=${SIDECAR}\n${payload}`) mtls++;
      else if (!reply.includes("peer=")) plain++;
    }
    const after = await workerConnections();
    const perWorker = after.map((n, i) => n - before[i]!);
    assert.ok(perWorker.every((n) => n > 0), `every worker took connections of this round: ${perWorker.join(", ")}`);
    return { mtls, plain };
  };

  before(async () => {
    await writeDemoCerts();
    pod = await startTlsPod("httpbin-0", POD_IP, POD_PORT, CERT_DIR, "pod-a");
    feed = new FakeFeed(WIRE_FEED_PORT, feedServerTls());
    await feed.start();
    feed.publishRecords([other(0, "127.0.0.12")]);
    envoy = await EnvoyProcess.start({ name: "feed-live-passthrough", adminPort: SHIPPED_ADMIN, concurrency: WORKERS, config: meshFeedSidecarConfig(WIRE_FEED_PORT, "sidecar-b", 2) });
    captureOutbound(CAPTURE_PORT);
  });

  after(async () => {
    releaseCapture();
    await envoy?.stop();
    await feed?.kill();
    await pod?.close();
  });

  it("plain while the pod is unknown, mTLS with its identity in every worker once a delta adds it", async () => {
    await until(`${VMS} VMs at version 1`, allHeldAt(feed.epoch, 1n));
    assert.deepEqual(await round("unknown"), { mtls: 0, plain: ROUND }, "no VM knows the pod: in clear");
    const version = feed.publishRecords([httpbin(1)]);
    await until(`${VMS} VMs at version ${version}`, allHeldAt(feed.epoch, version));
    assert.deepEqual(await round("known"), { mtls: ROUND, plain: 0 }, "every worker upgrades it, pinned to its identity");
    assert.equal(await envoy.stat("passthrough_mtls.feed.applied_delta"), VMS);
  });

  it("refuses an invalid delta whole in every VM: the pod stays pinned everywhere", async () => {
    // A valid removal of the pod, then a record that breaks a rule (istio without identity):
    // half-applied, the removal would send the pod's connections in clear.
    feed.invalidDelta = [{ removeWorkload: 1 }, { workload: { id: 9, istio: true, identity: "", addresses: ["127.0.0.19"] } }];
    for (let i = 0; i < VMS; i++) feed.inject.push("bad-wire-delta:identity");
    const version = feed.publishRecords([other(2, "127.0.0.14")]); // answers the held polls; the next ones get the bad delta
    await until("every VM to refuse it", async () => ((await envoy.stat("passthrough_mtls.feed.refused")) ?? 0) >= VMS);
    // The counter can be read before the log line is flushed: wait for the lines.
    await until("one refusal line per VM", () => linesByThread(envoy.log(), /refused a message:/).size >= VMS);
    const refusals = linesByThread(envoy.log(), /refused a message:/);
    assert.equal(refusals.size, VMS, `one refusal line per VM: ${JSON.stringify([...refusals.values()])}`);
    for (const [thread, lines] of refusals) assert.match(lines[0]!, /refused a message: record 1 \(workload upsert id 9\)\.identity/, `thread ${thread}`);
    assert.deepEqual(await round("after the refusal"), { mtls: ROUND, plain: 0 }, "nothing of it applied in any VM");
    // After the backoff every VM resyncs with a full model and holds its poll again.
    await until(`${VMS} VMs resynced at version ${version}`, allHeldAt(feed.epoch, version), 20_000);
  });

  it("keeps deciding while the feed is killed, then resyncs every VM with the restarted feed's model", async () => {
    await feed.kill();
    await until("every VM to notice", async () => ((await envoy.stat("passthrough_mtls.feed.unavailable")) ?? 0) >= VMS);
    assert.deepEqual(await round("feed down"), { mtls: ROUND, plain: 0 }, "fail static: the last good model decides, connections flow");
    // The feed comes back with a new epoch, and the pod is gone: the resync must carry that.
    feed.restartEpoch();
    const version = feed.publishRecords([{ removeWorkload: 1 }]);
    await feed.start();
    await until(`${VMS} VMs resynced at epoch ${feed.epoch}`, allHeldAt(feed.epoch, version), 40_000);
    assert.deepEqual(await round("after the resync"), { mtls: 0, plain: ROUND }, "every worker decides with the resynced model");
  });
});
