// The mesh feed channel in the real Envoy with four workers: every VM's root context (the main
// thread's and each worker's) long-polls the feed on its own, converges to the same version,
// fails static when the feed is killed (connections keep flowing, one warning per VM, every
// failed attempt counted), resyncs when it returns, and refuses an invalid delta whole. The feed is a small stand-in on
// loopback (tests/support/fake_feed.ts: the real protocol and message header, opaque records),
// the filter the feed_probe fixture (the runtime's FeedClient with a test sink). When the mesh
// model's delta apply lands, the same scenario runs with the real filters and the real feed.
// Run inside a private network namespace: bash scripts/in-netns.sh node --import tsx --test ...
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { FakeFeed } from "../support/fake_feed.js";
import { startBackend, exchange, type Backend } from "../support/tcp.js";
import { ensureBuilt } from "../host/helpers.js";

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
    feed = new FakeFeed(FEED_PORT);
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
        clusters: [staticCluster("mesh_feed", "127.0.0.1", FEED_PORT), staticCluster("backend", "127.0.0.1", BACKEND_PORT)],
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
    // Retries with backoff (1 s, then 2 s): more attempts counted, no more lines.
    const counted = await unavailable();
    await until("the retries", async () => (await unavailable()) >= counted + VMS, 10_000);
    const warnings = linesByThread(envoy.log(), /unavailable:/);
    assert.equal(warnings.size, VMS);
    for (const [thread, lines] of warnings) {
      assert.equal(lines.length, 1, `thread ${thread}: one line per transition, none per retry`);
      assert.match(lines[0], /^mesh feed sidecar-a unavailable: .*; keeping the model in force \(epoch 1000 version 4\), retrying with backoff up to 30 s$/);
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
